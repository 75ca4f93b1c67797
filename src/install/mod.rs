//! Install, uninstall and the machine half of `check` (docs/units.md), sharing one [`Plan`].
//!
//! A plan compares what a label should be on this machine (rendered files, loaded, recorded) with
//! what it is. `install --dry-run` prints it, `install` applies it, `check` reports any plan that
//! is not empty as drift. Applying writes unit files atomically, loads them only when their bytes
//! changed (or they are not loaded), records the install in `state/installed/<name>.json`, and on
//! any failure puts the previous files and record back. It touches only files of its own label.
//!
//! One file per job: [`plan`] (what would change), [`apply`] (changing it, and undoing it),
//! [`drift`] (what `check` finds), [`paths`] (where units point, and whether they may), the
//! binary's copy, a sandbox's exposure, and what an uninstall leaves behind.

use std::collections::BTreeMap;

mod apply;
mod binary;
mod drift;
mod exposure;
mod left;
mod paths;
mod plan;

pub use apply::{apply_install, apply_uninstall, uninstall_again};
pub use binary::{BinaryCopy, BinaryError};
pub use drift::{Finding, check_machine};
pub use exposure::sandbox_exposure;
pub use left::left_behind;
pub use paths::{
    binary_refused, in_build_folder, linger_warning, lingering, linked_worktree, machine_paths,
    privacy_warnings, sandbox_refused,
};
pub use plan::{FileChange, Plan, plan_install, plan_uninstall};

use crate::definition::Definition;
use crate::fsutil;
use crate::names::{Label, Name};
use crate::settings::Settings;
use crate::state::{Installed, State};
use crate::units;

/// Why an install or uninstall could not be planned or applied.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file or folder: what could not be done with it, named.
    #[error("{what}")]
    File {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Refused, in words: a path units cannot name, a definition this manager cannot fire, a file
    /// that changed while it was read.
    #[error("{0}")]
    Refused(String),
    /// An install record.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The service manager.
    #[error(transparent)]
    Manager(#[from] crate::service::ExecError),
    /// This machine cannot install or uninstall now.
    #[error(transparent)]
    Preflight(#[from] crate::service::PreflightError),
    /// What went wrong, and what was done about it (a rollback).
    #[error("{what}")]
    Then {
        what: String,
        #[source]
        source: Box<InstallError>,
    },
}

impl InstallError {
    /// `source` with what happened after it (a rollback) said first.
    fn then(self, what: impl Into<String>) -> Self {
        Self::Then {
            what: what.into(),
            source: Box::new(self),
        }
    }
}

impl crate::exit::Exits for InstallError {
    /// A file of the data root that is no regular file, or a record that is none, is the
    /// environment's (3); the rest fail (1).
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::File { source, .. } => source.exit(),
            Self::State(e) => e.exit(),
            Self::Then { source, .. } => source.exit(),
            Self::Refused(_) | Self::Manager(_) | Self::Preflight(_) => crate::exit::Exit::Failure,
        }
    }
}

/// `what` could not be done with a file or folder.
fn file(what: String) -> impl FnOnce(std::io::Error) -> InstallError {
    move |source| InstallError::File { what, source }
}

/// The unit files of our namespace in the agents folder, by name: file name -> bytes.
pub fn present_units(
    settings: &Settings,
) -> Result<BTreeMap<Name, BTreeMap<String, Vec<u8>>>, InstallError> {
    let prefix = Label::prefix(&settings.namespace);
    let mut out: BTreeMap<Name, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let exts = units::Target::of(settings.manager).extensions();
    let found = fsutil::list_named(&settings.agents_dir, &prefix, exts).map_err(file(format!(
        "cannot read the agents folder {}",
        settings.agents_dir.display()
    )))?;
    for (stem, path) in found {
        let Ok(name) = Name::new(&stem) else { continue };
        // A FIFO or device with our prefix must never hang `check`.
        let bytes = fsutil::read_following(&path, fsutil::SMALL_FILE)
            .map_err(file(format!("cannot read {}", path.display())))?;
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        out.entry(name)
            .or_default()
            .insert(file.into_owned(), bytes);
    }
    Ok(out)
}

/// What is installed of each automation that has an install record, from the records and the unit
/// files (no service manager is asked: `check` does that). A record that cannot be read is left
/// out (`check` and `health` name it).
pub fn installed(
    settings: &Settings,
    defs: &[Definition],
) -> Result<BTreeMap<Name, Installed>, InstallError> {
    let records = State::new(&settings.data_root).install_records_each()?;
    if records.is_empty() {
        return Ok(BTreeMap::new());
    }
    let present = present_units(settings)?;
    let mut out = BTreeMap::new();
    for (name, record) in records {
        let Ok(record) = record else { continue };
        let def = defs.iter().find(|d| d.name == name);
        let none = BTreeMap::new();
        let files = present.get(&name).unwrap_or(&none);
        // Changed by what `check` finds (whether the manager has it loaded aside: that takes
        // asking the manager, which `check` does and `list` does not).
        let changed = drift::record_finding(settings, &name, &record, files, def, true).is_some();
        // The definition, the pinned script, or a record without pins: scheduled firings skip it.
        let def_changed =
            def.is_none_or(|d| crate::pins::check(Some(&record), d, &settings.root).is_some());
        let (schedule, from_record) = match (&record.schedule, def) {
            (Some(sch), _) => (Some(sch.clone()), true),
            (None, Some(d)) if !def_changed => (d.schedule.clone(), false),
            _ => (None, false),
        };
        out.insert(
            name,
            Installed {
                changed,
                schedule,
                from_record,
            },
        );
    }
    Ok(out)
}

/// Writes who follows whom (`state/chains.json`) from the definitions as they are now, on a
/// machine whose data root exists (where something was ever installed): what every firing's
/// chain reads instead of every definition. A definition that does not validate is left out, as
/// `check` says; a folder that cannot be read writes nothing.
pub fn record_chains(settings: &Settings) -> Result<(), crate::state::StateError> {
    if !settings.layout().state().is_dir() {
        return Ok(());
    }
    let Ok(loaded) = crate::definition::load_all(
        &settings.definitions_dir(),
        &crate::definition::Checks::of(settings),
    ) else {
        return Ok(());
    };
    let index = crate::definition::ChainIndex::of_definitions(&loaded.definitions);
    State::new(&settings.data_root).write_chains(&index)
}
