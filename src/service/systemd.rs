//! The systemd user manager through `systemctl --user`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::exec::{ExecError, Program};
use super::{PreflightError, ServiceManager};
use crate::names::Label;
use crate::settings::Manager;

/// `systemctl --user`.
pub struct Systemd {
    program: Program,
}

impl Systemd {
    /// A backend calling `systemctl` (a name on PATH or a path).
    pub fn new(systemctl: &str) -> Self {
        Self {
            program: Program::new(systemctl),
        }
    }

    fn user(&self, args: &[&str]) -> Result<String, ExecError> {
        let mut all = vec!["--user"];
        all.extend_from_slice(args);
        self.program.run(&all).map(|d| d.stdout)
    }
}

impl ServiceManager for Systemd {
    fn manager(&self) -> Manager {
        Manager::Systemd
    }

    fn preflight(&self) -> Result<(), PreflightError> {
        self.reachable().map_err(PreflightError::Unreachable)
    }

    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError> {
        if labels.is_empty() {
            return Ok(BTreeSet::new());
        }
        let timers: Vec<String> = labels.iter().map(|l| format!("{l}.timer")).collect();
        let mut args = vec![
            "show",
            "--property=Id,LoadState,UnitFileState,ActiveState",
            "--",
        ];
        args.extend(timers.iter().map(String::as_str));
        let out = self.user(&args)?;
        let mut loaded = BTreeSet::new();
        for block in out.split("\n\n") {
            let prop = |k: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                    .unwrap_or("")
            };
            let ok = prop("LoadState") == "loaded"
                && prop("UnitFileState") == "enabled"
                && prop("ActiveState") == "active";
            if let Some(label) = labels.iter().find(|l| format!("{l}.timer") == prop("Id"))
                && ok
            {
                loaded.insert(label.clone());
            }
        }
        Ok(loaded)
    }

    fn load(
        &self,
        label: &Label,
        _agents_dir: &Path,
        changed: bool,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        let timer = format!("{label}.timer");
        if changed {
            self.user(&["daemon-reload"])?;
        }
        self.user(&["enable", "--now", &timer])?;
        if changed {
            // A timer that was already running keeps its old schedule until restarted.
            self.user(&["restart", &timer])?;
        }
        if self.loaded(std::slice::from_ref(label))?.contains(label) {
            Ok(())
        } else {
            Err(ExecError {
                command: format!("systemctl --user enable --now {timer}"),
                what: "left the timer inactive".into(),
                code: None,
                stderr: String::new(),
            })
        }
    }

    /// `stop` blocks until the service has stopped (systemd itself bounds it).
    fn unload(
        &self,
        label: &Label,
        _agents_dir: &Path,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        self.user(&["disable", "--now", &format!("{label}.timer")])?;
        self.user(&["stop", &format!("{label}.service")])?;
        // A service whose last run failed would stay listed as `not-found failed` once its files
        // are gone; forgetting that is part of the uninstall (an error here changes nothing).
        let _ = self.user(&[
            "reset-failed",
            &format!("{label}.service"),
            &format!("{label}.timer"),
        ]);
        Ok(())
    }

    fn files_changed(&self) -> Result<(), ExecError> {
        self.user(&["daemon-reload"]).map(|_| ())
    }

    fn reachable(&self) -> Result<(), ExecError> {
        self.user(&["show-environment"]).map(|_| ())
    }
}
