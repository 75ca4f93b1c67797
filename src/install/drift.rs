//! The machine half of `check`: every drift between this machine and the definitions, each with
//! the command that fixes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::{InstallError, machine_paths, present_units};
use crate::definition::{Definition, hex_sha256};
use crate::names::{Label, Name};
use crate::service::ServiceManager;
use crate::settings::Settings;
use crate::state::{Record, State};
use crate::units;

/// One drift finding of the machine check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// Installed, but the file differs from what the install would write now.
    Changed { label: String, why: String },
    /// Recorded, but the file is gone or the manager has not loaded it.
    Missing { label: String, why: String },
    /// A unit file of our namespace that was never recorded as installed.
    Extra { file: String, name: String },
    /// Recorded, but its definition is gone or no longer scheduled.
    Orphaned { label: String, why: String },
    /// Who follows whom (`state/chains.json`) is not what the definitions say any more: a chain
    /// edited since the last `install` or `units`, which firings do not see yet.
    Chains { file: String },
}

impl Finding {
    /// One line for people, ending with the command that fixes it.
    pub fn line(&self) -> String {
        match self {
            Finding::Changed { label, why } => {
                format!("{label}: changed ({why}); fix: {}", self.fix())
            }
            Finding::Missing { label, why } => {
                format!("{label}: missing ({why}); fix: {}", self.fix())
            }
            Finding::Extra { file, .. } => format!(
                "{file}: extra (never installed by automations here); fix: {} (or install it)",
                self.fix()
            ),
            Finding::Orphaned { label, why } => {
                format!("{label}: orphaned ({why}); fix: {}", self.fix())
            }
            Finding::Chains { file } => format!(
                "{file}: who follows whom is older than the definitions (a chain was edited), so firings start the old followers; fix: {}",
                self.fix()
            ),
        }
    }

    /// The command that fixes it: reinstall what changed or is missing (showing the diff against
    /// what was approved), uninstall what is orphaned or was never installed here.
    pub fn fix(&self) -> String {
        let short = |label: &'_ str| label.rsplit('.').next().unwrap_or(label).to_owned();
        let (verb, name) = match self {
            Finding::Chains { .. } => return "make automations-units".into(),
            Finding::Changed { label, .. } | Finding::Missing { label, .. } => {
                ("install", short(label))
            }
            Finding::Orphaned { label, .. } => ("uninstall", short(label)),
            Finding::Extra { name, .. } => ("uninstall", name.clone()),
        };
        format!("make automations-{verb} NAME={name}")
    }
}

/// What of the paths an install record names is not so any more: its binary gone, the root or
/// the data root elsewhere.
fn moved_paths(settings: &Settings, record: &Record) -> Option<String> {
    let mut moved = Vec::new();
    if !Path::new(&record.bin).exists() {
        moved.push(format!("the binary {} is gone", record.bin));
    }
    if Some(record.root.as_str()) != settings.root.to_str() {
        moved.push(format!(
            "the repository root is now {}",
            settings.root.display()
        ));
    }
    if Some(record.data_root.as_str()) != settings.data_root.to_str() {
        moved.push(format!(
            "the data root is now {}",
            settings.data_root.display()
        ));
    }
    (!moved.is_empty()).then(|| format!("a path: {}", moved.join("; ")))
}

/// What is wrong with one recorded install, first finding only (the fix is the same for all):
/// its definition gone or unscheduled, a unit file gone or edited, the definition changed, a path
/// moved, or the unit not loaded.
pub(super) fn record_finding(
    settings: &Settings,
    name: &Name,
    record: &Record,
    files: &BTreeMap<String, Vec<u8>>,
    def: Option<&Definition>,
    is_loaded: bool,
) -> Option<Finding> {
    let label = settings.label(name).to_string();
    let def = match def {
        None => {
            return Some(Finding::Orphaned {
                label,
                why: format!("automations/{name}.toml is gone"),
            });
        }
        Some(d) if !d.has_units() => {
            return Some(Finding::Orphaned {
                label,
                why: format!("automations/{name}.toml has no schedule or trigger any more"),
            });
        }
        Some(d) => d,
    };
    if let Some(gone) = record.files.keys().find(|f| !files.contains_key(*f)) {
        return Some(Finding::Missing {
            label,
            why: format!("{gone} is gone"),
        });
    }
    if let Some(edited) = record
        .files
        .iter()
        .find(|(f, h)| files.get(*f).map(|b| hex_sha256(b)).as_ref() != Some(h))
    {
        return Some(Finding::Changed {
            label,
            why: format!("{} was edited by hand", edited.0),
        });
    }
    if let Some(m) = crate::pins::check(Some(record), def, &settings.root) {
        let why = match m {
            crate::pins::Mismatch::NotInstalled => {
                "installed before pins were kept, so scheduled firings skip it".to_owned()
            }
            m => m.words(name.as_str()),
        };
        return Some(Finding::Changed { label, why });
    }
    if let Some(why) = moved_paths(settings, record) {
        return Some(Finding::Changed { label, why });
    }
    // Same definition, same paths, files as installed: only a newer renderer can differ (an
    // upgrade that changed the unit, such as the skip status), and a reinstall takes it.
    if let Ok(paths) = machine_paths(settings, Path::new(&record.bin)) {
        let now: BTreeMap<String, String> = units::render(
            def,
            &settings.namespace,
            &paths,
            units::Target::of(settings.manager),
        )
        .unwrap_or_default()
        .iter()
        .map(|u| (u.name.clone(), hex_sha256(&u.bytes)))
        .collect();
        if now != record.files {
            return Some(Finding::Changed {
                label,
                why: "this version of automations renders its unit differently".into(),
            });
        }
    }
    (!is_loaded).then(|| Finding::Missing {
        label,
        why: "not loaded".into(),
    })
}

/// Every drift between this machine and the definitions. Queries the manager once, and not at all
/// when nothing of ours is installed or present.
pub fn check_machine(
    settings: &Settings,
    defs: &[Definition],
    manager: &dyn ServiceManager,
) -> Result<Vec<Finding>, InstallError> {
    let records = State::new(&settings.data_root).install_records()?;
    let present = present_units(settings)?;
    let mut findings = Vec::new();
    for (name, files) in &present {
        if !records.contains_key(name) {
            for f in files.keys() {
                findings.push(Finding::Extra {
                    file: settings.agents_dir.join(f).display().to_string(),
                    name: name.to_string(),
                });
            }
        }
    }
    let labels: Vec<Label> = records.keys().map(|n| settings.label(n)).collect();
    let loaded: BTreeSet<Label> = if labels.is_empty() {
        BTreeSet::new()
    } else {
        manager.loaded(&labels)?
    };
    let none = BTreeMap::new();
    for (name, record) in &records {
        let files = present.get(name).unwrap_or(&none);
        let def = defs.iter().find(|d| &d.name == name);
        let is_loaded = loaded.contains(&settings.label(name));
        findings.extend(record_finding(
            settings, name, record, files, def, is_loaded,
        ));
    }
    let state = State::new(&settings.data_root);
    if let Ok(Some(index)) = state.chains()
        && index != crate::definition::ChainIndex::of_definitions(defs)
    {
        findings.push(Finding::Chains {
            file: settings.layout().chains_index().display().to_string(),
        });
    }
    Ok(findings)
}
