//! launchd through `launchctl`, in the `gui/<uid>` domain.
//!
//! Loading is: enable the label (it may have been disabled), boot out any loaded copy (exit 3 or 113
//! mean "not loaded", which is fine), wait until launchd has really let go, bootstrap the plist —
//! retried on 5 (I/O error) and 37 (operation already in progress), which launchd answers while it
//! is still tearing the old job down — and verify the job is loaded.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::ServiceManager;
use super::exec::{ExecError, Program};
use crate::names::Label;
use crate::settings::Target;

/// Exit codes of `bootout` that mean the job was not loaded.
pub const NOT_LOADED: [i32; 2] = [3, 113];
/// Exit codes of `bootstrap` worth retrying.
pub const RETRYABLE: [i32; 2] = [5, 37];
/// Bootstrap attempts before giving up.
pub const ATTEMPTS: u32 = 5;

/// `launchctl` for one user's GUI domain.
pub struct Launchd {
    program: Program,
    uid: u32,
    /// Pause between retries and polls (shortened by tests).
    pub pause: Duration,
}

impl Launchd {
    /// A backend calling `launchctl` (a name on PATH or a path) for `uid`.
    pub fn new(launchctl: &str, uid: u32) -> Self {
        Self {
            program: Program::new(launchctl),
            uid,
            pause: Duration::from_millis(250),
        }
    }

    fn domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    fn service(&self, label: &Label) -> String {
        format!("gui/{}/{label}", self.uid)
    }

    fn is_loaded(&self, label: &Label) -> bool {
        self.program.run(&["print", &self.service(label)]).is_ok()
    }

    fn bootout(&self, label: &Label) -> Result<(), ExecError> {
        match self.program.run(&["bootout", &self.service(label)]) {
            Ok(_) => {}
            Err(e) if e.code.is_some_and(|c| NOT_LOADED.contains(&c)) => return Ok(()),
            Err(e) => return Err(e),
        }
        let until = Instant::now() + Duration::from_secs(10);
        while self.is_loaded(label) {
            if Instant::now() >= until {
                return Err(ExecError {
                    command: format!("launchctl bootout {}", self.service(label)),
                    what: "returned but the job is still loaded after 10 s".into(),
                    code: None,
                    stderr: String::new(),
                });
            }
            std::thread::sleep(self.pause);
        }
        Ok(())
    }
}

impl ServiceManager for Launchd {
    fn target(&self) -> Target {
        Target::Launchd
    }

    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError> {
        if labels.is_empty() {
            return Ok(BTreeSet::new());
        }
        // `launchctl list`: "PID\tStatus\tLabel" per loaded job of this user.
        let out = self.program.run(&["list"])?.stdout;
        let listed: BTreeSet<&str> = out.lines().filter_map(|l| l.split('\t').nth(2)).collect();
        Ok(labels
            .iter()
            .filter(|l| listed.contains(l.as_str()))
            .cloned()
            .collect())
    }

    fn load(&self, label: &Label, agents_dir: &Path, changed: bool) -> Result<(), ExecError> {
        if !changed && self.is_loaded(label) {
            return Ok(());
        }
        self.program.run(&["enable", &self.service(label)])?;
        self.bootout(label)?;
        let plist = agents_dir.join(format!("{label}.plist"));
        let plist = plist.to_string_lossy();
        let mut attempt = 1;
        loop {
            match self.program.run(&["bootstrap", &self.domain(), &plist]) {
                Ok(_) => break,
                Err(e) if attempt < ATTEMPTS && e.code.is_some_and(|c| RETRYABLE.contains(&c)) => {
                    attempt += 1;
                    std::thread::sleep(self.pause);
                }
                Err(e) => return Err(e),
            }
        }
        if self.is_loaded(label) {
            Ok(())
        } else {
            Err(ExecError {
                command: format!("launchctl bootstrap {} {plist}", self.domain()),
                what: "succeeded but the job is not loaded".into(),
                code: None,
                stderr: String::new(),
            })
        }
    }

    fn unload(&self, label: &Label, _agents_dir: &Path) -> Result<(), ExecError> {
        self.bootout(label)
    }

    fn files_changed(&self) -> Result<(), ExecError> {
        Ok(())
    }

    fn reachable(&self) -> Result<(), ExecError> {
        self.program.run(&["print", &self.domain()]).map(|_| ())
    }
}
