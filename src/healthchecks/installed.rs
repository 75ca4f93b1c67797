//! What this machine has for Healthchecks to watch: the scheduled automations installed here (or
//! one), those whose definitions cannot be read now (their checks stay theirs), what each check
//! should be, and `check`'s look at how the server differs.

use std::path::PathBuf;

use super::{HcSettings, sync};
use crate::definition::{self, Checks, Definition};
use crate::exit::Exit;
use crate::names::Name;
use crate::settings::Settings;
use crate::state::{State, StateError};

/// Why what is installed could not be said.
#[derive(Debug, thiserror::Error)]
pub enum InstalledError {
    #[error("cannot read the definitions in {}", .0.display())]
    Definitions(PathBuf, #[source] std::io::Error),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "{0} is not a scheduled automation installed on this machine: install it first (make automations-install NAME={0})"
    )]
    NotInstalled(Name),
}

impl crate::exit::Exits for InstalledError {
    /// A name that is not installed is the person's to change (2); the rest fail (1).
    fn exit(&self) -> Exit {
        match self {
            Self::NotInstalled(_) => Exit::BadInput,
            Self::Definitions(..) | Self::State(_) => Exit::Failure,
        }
    }
}

/// What is installed on this machine (or only `only`, which must be): the scheduled definitions,
/// and the installed automations whose definitions cannot be read now, whose checks stay theirs.
pub struct Installed {
    pub defs: Vec<Definition>,
    /// Installed automations started only by their `[trigger]`: no check is made for them (a
    /// check expects pings on a schedule).
    pub event_only: Vec<Name>,
    pub unreadable: Vec<sync::Unreadable>,
    /// The definitions that exist but are invalid (`--prune` refuses while there are any).
    pub invalid: Vec<String>,
}

pub fn installed(
    settings: &Settings,
    cfg: &HcSettings,
    only: Option<&Name>,
) -> Result<Installed, InstalledError> {
    let loaded = definition::load_all(&settings.definitions_dir(), &Checks::of(settings))
        .map_err(|e| InstalledError::Definitions(settings.definitions_dir(), e))?;
    let records = State::new(&settings.data_root).install_records()?;
    let wanted = |n: &Name| only.is_none_or(|o| o == n);
    let event_only: Vec<Name> = loaded
        .definitions
        .iter()
        .filter(|d| d.schedule.is_none() && d.trigger.is_some())
        .filter(|d| records.contains_key(&d.name) && wanted(&d.name))
        .map(|d| d.name.clone())
        .collect();
    let defs: Vec<Definition> = loaded
        .definitions
        .into_iter()
        .filter(|d| d.schedule.is_some() && records.contains_key(&d.name))
        .filter(|d| wanted(&d.name))
        .collect();
    let mut unreadable = Vec::new();
    let mut invalid = Vec::new();
    for name in records.keys().filter(|n| wanted(n)) {
        if defs.iter().any(|d| &d.name == name) || event_only.contains(name) {
            continue;
        }
        let file = format!("automations/{name}.toml");
        let problems: Vec<String> = loaded
            .problems
            .iter()
            .filter(|p| p.name.as_ref() == Some(name))
            .map(ToString::to_string)
            .collect();
        let why = if !problems.is_empty() {
            invalid.push(file.clone());
            problems.join("; ")
        } else if settings
            .definitions_dir()
            .join(format!("{name}.toml"))
            .exists()
        {
            // Valid, but no longer scheduled: `check` calls it orphaned; its check is not pruned
            // before it is uninstalled.
            format!("{file} has no schedule any more")
        } else {
            format!("{file} is gone")
        };
        unreadable.push(sync::Unreadable {
            name: name.clone(),
            watch: super::watch(cfg, &settings.namespace, name),
            why,
        });
    }
    if let Some(n) = only
        && defs.is_empty()
        && unreadable.is_empty()
        && event_only.is_empty()
    {
        return Err(InstalledError::NotInstalled(n.clone()));
    }
    Ok(Installed {
        defs,
        event_only,
        unreadable,
        invalid,
    })
}

/// What each check should be.
pub fn wanted(settings: &Settings, cfg: &HcSettings, defs: &[Definition]) -> Vec<sync::Wanted> {
    let refs: Vec<&Definition> = defs.iter().collect();
    sync::wanted(
        cfg,
        &settings.namespace,
        &refs,
        super::machine_zone().as_deref(),
        &crate::notify::host(),
    )
}

/// `check`'s look at the remote checks: the drift lines (empty when in step), or why it did not
/// look. `None` when there is no `healthchecks.toml`.
pub fn drift(settings: &Settings) -> Option<Result<Vec<String>, String>> {
    let cfg = match super::settings::load(&settings.data_root) {
        Ok(Some(c)) => c,
        Ok(None) => return None,
        Err(e) => return Some(Err(e.to_string())),
    };
    let look = || -> Result<Vec<String>, String> {
        let inst = installed(settings, &cfg, None).map_err(|e| crate::exit::chain_text(&e))?;
        let api = super::client(settings, &cfg)?;
        let plan = sync::plan(
            &api,
            &settings.namespace,
            &wanted(settings, &cfg, &inst.defs),
            &inst.unreadable,
            true,
        )
        .map_err(|e| e.to_string())?;
        Ok(plan
            .iter()
            .filter(|l| l.is_drift())
            .map(|l| format!("{}; fix: {}", l.words(), l.fix()))
            .collect())
    };
    Some(look())
}

/// The Healthchecks settings and how `name` is watched, when `healthchecks.toml` exists and does
/// not switch it off.
pub fn watched(settings: &Settings, name: &Name) -> Option<(HcSettings, super::Watch)> {
    let cfg = super::settings::load(&settings.data_root).ok().flatten()?;
    let watch = super::watch(&cfg, &settings.namespace, name);
    (watch != super::Watch::Off).then_some((cfg, watch))
}

/// What an uninstall of `name` leaves of its remote check, in words, when `healthchecks.toml`
/// exists and watches it.
pub fn after_uninstall(settings: &Settings, name: &Name) -> Option<String> {
    let (cfg, watch) = watched(settings, name)?;
    Some(match super::remote_checks(settings, &cfg) {
        Ok((_, remote))
            if sync::find(&remote, &settings.namespace, name, &watch)
                .ours()
                .is_some() =>
        {
            "its remote check is left on the server (and will go down); delete it with `automations healthchecks sync --prune`".to_owned()
        }
        Ok(_) => "it has no remote check".to_owned(),
        Err(e) => format!("a remote check may be left on the server (not looked: {e})"),
    })
}
