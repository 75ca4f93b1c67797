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

/// The value of `key` in one unit's block of `systemctl show` (`Key=value` lines); "" when absent.
fn property<'b>(block: &'b str, key: &str) -> &'b str {
    block
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or("")
}

/// Where systemd reads a zone named on an `OnCalendar=` line.
const ZONEINFO: &str = "/usr/share/zoneinfo";

/// Whether systemd `version` (`252.30-1~deb12u2`, `v257`) reads a zone on `OnCalendar=` (235
/// on); `None` when the version cannot be read.
fn zone_support(version: &str) -> Option<bool> {
    let digits: String = version
        .trim_start_matches('v')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<u32>().ok().map(|v| v >= 235)
}

/// The units that start a service: its timer, its path unit.
const ARMS: [&str; 2] = ["timer", "path"];

/// The timer and path units of `label` whose files are in `agents_dir`.
fn arms(label: &Label, agents_dir: &Path) -> Vec<String> {
    ARMS.iter()
        .map(|k| format!("{label}.{k}"))
        .filter(|unit| agents_dir.join(unit).exists())
        .collect()
}

impl ServiceManager for Systemd {
    fn manager(&self) -> Manager {
        Manager::Systemd
    }

    fn preflight(&self) -> Result<(), PreflightError> {
        self.reachable().map_err(PreflightError::Unreachable)
    }

    /// Loaded means: the service is loaded, and each of its timer and path units that exists is
    /// enabled and active (a chain-only automation has neither).
    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError> {
        if labels.is_empty() {
            return Ok(BTreeSet::new());
        }
        let units: Vec<String> = labels
            .iter()
            .flat_map(|l| {
                ARMS.iter()
                    .chain(["service"].iter())
                    .map(move |k| format!("{l}.{k}"))
            })
            .collect();
        let mut args = vec![
            "show",
            "--property=Id,LoadState,UnitFileState,ActiveState",
            "--",
        ];
        args.extend(units.iter().map(String::as_str));
        let out = self.user(&args)?;
        let mut state: std::collections::BTreeMap<String, (bool, bool)> = Default::default();
        for block in out.split("\n\n") {
            let prop = |k: &str| property(block, k);
            let exists = prop("LoadState") == "loaded";
            let armed = prop("UnitFileState") == "enabled" && prop("ActiveState") == "active";
            state.insert(prop("Id").to_owned(), (exists, armed));
        }
        let of = |unit: String| state.get(&unit).copied().unwrap_or((false, false));
        Ok(labels
            .iter()
            .filter(|l| {
                let (service, _) = of(format!("{l}.service"));
                service
                    && ARMS.iter().all(|k| {
                        let (exists, armed) = of(format!("{l}.{k}"));
                        !exists || armed
                    })
            })
            .cloned()
            .collect())
    }

    fn load(
        &self,
        label: &Label,
        agents_dir: &Path,
        changed: bool,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        if changed {
            self.user(&["daemon-reload"])?;
            // A timer or path unit the definition no longer has (its file is gone) stops too.
            for k in ARMS {
                let unit = format!("{label}.{k}");
                if !agents_dir.join(&unit).exists() {
                    let _ = self.user(&["stop", &unit]);
                }
            }
        }
        for arm in arms(label, agents_dir) {
            self.user(&["enable", "--now", &arm])?;
            if changed {
                // A timer that was already running keeps its old schedule until restarted; a path
                // unit its old paths.
                self.user(&["restart", &arm])?;
            }
        }
        if self.loaded(std::slice::from_ref(label))?.contains(label) {
            Ok(())
        } else {
            Err(ExecError {
                command: format!("systemctl --user enable --now {label}.timer/.path"),
                what: "left the unit inactive".into(),
                code: None,
                stderr: String::new(),
            })
        }
    }

    /// `stop` blocks until the service has stopped (systemd itself bounds it).
    fn unload(
        &self,
        label: &Label,
        agents_dir: &Path,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        for arm in arms(label, agents_dir) {
            self.user(&["disable", "--now", &arm])?;
        }
        self.user(&["stop", &format!("{label}.service")])?;
        // A service whose last run failed would stay listed as `not-found failed` once its files
        // are gone; forgetting that is part of the uninstall (an error here changes nothing).
        let _ = self.user(&[
            "reset-failed",
            &format!("{label}.service"),
            &format!("{label}.timer"),
            &format!("{label}.path"),
        ]);
        Ok(())
    }

    /// A path unit that is `failed` stopped watching (systemd keeps it so until it is started
    /// again); its `Result` says why.
    fn stopped_watches(&self, labels: &[Label]) -> Result<Vec<(Label, String)>, ExecError> {
        if labels.is_empty() {
            return Ok(Vec::new());
        }
        let units: Vec<String> = labels.iter().map(|l| format!("{l}.path")).collect();
        let mut args = vec!["show", "--property=Id,ActiveState,Result", "--"];
        args.extend(units.iter().map(String::as_str));
        let out = self.user(&args)?;
        let mut stopped = Vec::new();
        for block in out.split("\n\n") {
            let prop = |k: &str| property(block, k);
            if prop("ActiveState") != "failed" {
                continue;
            }
            if let Some(label) = labels.iter().find(|l| format!("{l}.path") == prop("Id")) {
                stopped.push((label.clone(), prop("Result").to_owned()));
            }
        }
        Ok(stopped)
    }

    fn keeps_zones(&self, zone: &str) -> Result<(), String> {
        // systemd reads the zone from the system's database, not the one built into this
        // program: a machine without it (no tzdata) would never fire the timer.
        let file = std::path::Path::new(ZONEINFO).join(zone);
        if !file.is_file() {
            return Err(format!(
                "this machine's zone database has no {} (systemd reads zones there): install the tzdata package",
                file.display()
            ));
        }
        let out = self
            .user(&["show", "--property=Version"])
            .map_err(|e| e.to_string())?;
        let version = property(&out, "Version");
        match zone_support(version) {
            Some(false) => Err(format!(
                "the user's systemd manager is version {version}, which reads no time zone on an OnCalendar= line (235 and later do); remove time_zone to fire at this machine's wall-clock times"
            )),
            _ => Ok(()),
        }
    }

    fn start(&self, label: &Label) -> Result<(), ExecError> {
        self.user(&["start", "--no-block", &format!("{label}.service")])
            .map(|_| ())
    }

    fn start_and_wait(&self, label: &Label, wait: Duration) -> Result<(), ExecError> {
        let service = format!("{label}.service");
        self.program
            .run_with(&["--user", "start", &service], None, wait)
            .map(|_| ())
    }

    fn files_changed(&self) -> Result<(), ExecError> {
        self.user(&["daemon-reload"]).map(|_| ())
    }

    fn reachable(&self) -> Result<(), ExecError> {
        self.user(&["show-environment"]).map(|_| ())
    }
}

#[cfg(test)]
mod zone_tests {
    #[test]
    fn zones_are_read_from_235_on() {
        assert_eq!(super::zone_support("252.30-1~deb12u2"), Some(true));
        assert_eq!(super::zone_support("235"), Some(true));
        assert_eq!(super::zone_support("234.1"), Some(false));
        assert_eq!(super::zone_support("v229"), Some(false));
        assert_eq!(super::zone_support(""), None);
    }
}
