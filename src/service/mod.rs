//! Service managers: what loads, unloads and lists units on this machine (docs/units.md).
//!
//! One trait, three backends: systemd (`systemctl --user`), launchd (`launchctl`, domain
//! `gui/<uid>`) and Task Scheduler (`schtasks`). Every call goes through [`exec::Program`], so a failure is a typed error with the
//! command and its stderr. Backends only ever name labels they are given: they never list, load or
//! unload anything outside our namespace.

pub mod exec;
pub mod launchd;
pub mod systemd;
pub mod task_scheduler;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

pub use exec::ExecError;

use crate::names::Label;
use crate::settings::Manager;

/// Why this machine cannot install or uninstall units right now; checked before anything is
/// written.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// launchd as root: the job would land in root's domain, not the user's.
    #[error(
        "refusing to run as root: with sudo, launchd would load the job into root's domain instead of yours; run it as yourself, without sudo"
    )]
    Root,
    /// launchd without a GUI session (exit 125).
    #[error(
        "there is no GUI session for uid {uid} (`launchctl print gui/{uid}` exited 125), which LaunchAgents need: log in at the Mac's screen (a login over SSH alone is not enough), then try again; nothing was changed"
    )]
    NoGuiSession { uid: u32 },
    /// The manager does not answer.
    #[error("the service manager does not answer; nothing was changed")]
    Unreachable(#[source] ExecError),
}

/// A service manager backend.
pub trait ServiceManager {
    /// Which manager it is.
    fn manager(&self) -> Manager;

    /// Whether units can be installed or uninstalled here at all (right user, a session the
    /// manager serves). Called before any file is written.
    fn preflight(&self) -> Result<(), PreflightError>;

    /// The labels among `labels` that are loaded and scheduled (systemd: timer enabled and
    /// active; launchd: job loaded). One query for all of them.
    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError>;

    /// Makes the unit files of `label` in `agents_dir` take effect. `changed` says whether the files
    /// were just written; unchanged and loaded units are not reloaded. `stop_wait` bounds the wait
    /// for a running copy to stop (at least the unit's own stop timeout plus 5 s).
    fn load(
        &self,
        label: &Label,
        agents_dir: &Path,
        changed: bool,
        stop_wait: Duration,
    ) -> Result<(), ExecError>;

    /// Unloads `label`, waiting up to `stop_wait` for a running copy to stop; an error means it
    /// may still be loaded, so its files must stay.
    fn unload(
        &self,
        label: &Label,
        agents_dir: &Path,
        stop_wait: Duration,
    ) -> Result<(), ExecError>;

    /// Starts `label`'s firing now, without waiting for it (systemd: `start --no-block` of its
    /// service; launchd: `kickstart`): how a chain starts the automation that follows.
    fn start(&self, label: &Label) -> Result<(), ExecError>;

    /// Starts `label`'s firing now for a person who waits for it (`run --unit`): systemd waits
    /// (at most `wait`) until its oneshot service has ended, and fails when the unit itself
    /// failed; launchd cannot wait (`kickstart`), and the caller reads the run log instead.
    fn start_and_wait(&self, label: &Label, wait: Duration) -> Result<(), ExecError> {
        let _ = wait;
        self.start(label)
    }

    /// Among `labels`, the watches (systemd path units) the manager stopped for good, each with
    /// why (`trigger-limit-hit`). One query for all; launchd has no such state.
    fn stopped_watches(&self, labels: &[Label]) -> Result<Vec<(Label, String)>, ExecError>;

    /// Tells the manager unit files were removed or restored (systemd: daemon-reload).
    fn files_changed(&self) -> Result<(), ExecError>;

    /// Whether the manager fires a calendar schedule in `zone` (a `time_zone`), or why not:
    /// systemd reads a zone on an `OnCalendar=` line from 235 on, from the system's zone
    /// database. launchd never does, and a zoned definition is refused before it gets here
    /// (`units::refusal`).
    fn keeps_zones(&self, zone: &str) -> Result<(), String> {
        let _ = zone;
        Ok(())
    }

    /// Whether the manager answers at all, for `doctor`.
    fn reachable(&self) -> Result<(), ExecError>;
}

/// The backend for `manager`, using the programs on PATH.
pub fn for_manager(manager: Manager) -> Box<dyn ServiceManager> {
    match manager {
        Manager::Systemd => Box::new(systemd::Systemd::new("systemctl")),
        Manager::Launchd => Box::new(launchd::Launchd::new(
            launchd::LAUNCHCTL,
            crate::platform::uid(),
        )),
        Manager::TaskScheduler => {
            Box::new(task_scheduler::TaskScheduler::new(task_scheduler::SCHTASKS))
        }
    }
}
