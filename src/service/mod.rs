//! Service managers: what loads, unloads and lists units on this machine (SPEC §7).
//!
//! One trait, two backends: systemd (`systemctl --user`) and launchd (`launchctl`, domain
//! `gui/<uid>`). Every call goes through [`exec::Program`], so a failure is a typed error with the
//! command and its stderr. Backends only ever name labels they are given: they never list, load or
//! unload anything outside our namespace.

pub mod exec;
pub mod launchd;
pub mod systemd;

use std::collections::BTreeSet;
use std::path::Path;

pub use exec::ExecError;

use crate::names::Label;
use crate::settings::Target;

/// A service manager backend.
pub trait ServiceManager {
    /// Which target it manages.
    fn target(&self) -> Target;

    /// The labels among `labels` that are loaded and scheduled (systemd: timer enabled and
    /// active; launchd: job loaded). One query for all of them.
    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError>;

    /// Makes the unit files of `label` in `agents_dir` take effect. `changed` says whether the files
    /// were just written; unchanged and loaded units are not reloaded.
    fn load(&self, label: &Label, agents_dir: &Path, changed: bool) -> Result<(), ExecError>;

    /// Unloads `label`; an error means it may still be loaded, so its files must stay.
    fn unload(&self, label: &Label, agents_dir: &Path) -> Result<(), ExecError>;

    /// Tells the manager unit files were removed or restored (systemd: daemon-reload).
    fn files_changed(&self) -> Result<(), ExecError>;

    /// Whether the manager answers at all, for `doctor`.
    fn reachable(&self) -> Result<(), ExecError>;
}

/// The backend for `target`, using the programs on PATH.
pub fn for_target(target: Target) -> Box<dyn ServiceManager> {
    match target {
        Target::Systemd => Box::new(systemd::Systemd::new("systemctl")),
        Target::Launchd => Box::new(launchd::Launchd::new(
            "launchctl",
            nix::unistd::getuid().as_raw(),
        )),
    }
}
