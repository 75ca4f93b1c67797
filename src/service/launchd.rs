//! launchd through `/bin/launchctl`, always in the `gui/<uid>` domain (docs/units.md).
//!
//! Whether a job is loaded comes from `launchctl print gui/<uid>/<label>` (exit 113: not loaded),
//! never from the legacy `list`, which answers for the caller's own domain and is wrong over SSH.
//! Before anything is written: refuse root (sudo would load the job into root's domain) and check
//! the GUI domain exists (exit 125 means nobody is logged in at the screen).
//!
//! Loading is: enable the label (it may have been disabled), boot out any loaded copy (3 or 113:
//! it was not loaded; 36: it is still stopping), wait until launchd has let go — at least the
//! plist's `ExitTimeOut` plus 5 s, since a running job gets that long to stop —, bootstrap the
//! plist, retrying 5 (I/O error) and 37 (operation already in progress) with backoff for up to
//! 15 s, and verify the job is loaded.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::exec::{ExecError, Program};
use super::{PreflightError, ServiceManager};
use crate::names::Label;
use crate::settings::Manager;

/// launchctl, by absolute path: a LaunchAgent's PATH or a user's shell must not pick another one.
pub const LAUNCHCTL: &str = "/bin/launchctl";
/// Exit codes that mean the job is not loaded (`bootout`, `print`).
pub const NOT_LOADED: [i32; 2] = [3, 113];
/// `bootout`: the job is still stopping.
pub const STILL_STOPPING: i32 = 36;
/// `bootstrap` exit codes worth retrying.
pub const RETRYABLE: [i32; 2] = [5, 37];
/// `print gui/<uid>`: there is no GUI session for this user.
pub const NO_GUI_SESSION: i32 = 125;
/// How long `bootstrap` is retried.
pub const RETRY_FOR: Duration = Duration::from_secs(15);

/// `launchctl` for one user's GUI domain.
pub struct Launchd {
    program: Program,
    uid: u32,
    /// The first pause between retries and polls; retries back off from it (shortened by tests).
    pub pause: Duration,
    /// How long bootstrap is retried (shortened by tests).
    pub retry_for: Duration,
}

impl Launchd {
    /// A backend calling `launchctl` (a path) for `uid`.
    pub fn new(launchctl: &str, uid: u32) -> Self {
        Self {
            program: Program::new(launchctl),
            uid,
            pause: Duration::from_millis(250),
            retry_for: RETRY_FOR,
        }
    }

    fn domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    fn service(&self, label: &Label) -> String {
        format!("gui/{}/{label}", self.uid)
    }

    /// `print gui/<uid>/<label>`: 0 is loaded, 113 (or 3) is not; anything else is an error.
    fn is_loaded(&self, label: &Label) -> Result<bool, ExecError> {
        match self.program.run(&["print", &self.service(label)]) {
            Ok(_) => Ok(true),
            Err(e) if e.code.is_some_and(|c| NOT_LOADED.contains(&c)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn bootout(&self, label: &Label, stop_wait: Duration) -> Result<(), ExecError> {
        match self.program.run(&["bootout", &self.service(label)]) {
            Ok(_) => {}
            Err(e) if e.code.is_some_and(|c| NOT_LOADED.contains(&c)) => return Ok(()),
            // Still stopping: launchd is waiting for the job to exit; poll below until it has.
            Err(e) if e.code == Some(STILL_STOPPING) => {}
            Err(e) => return Err(e),
        }
        let until = Instant::now() + stop_wait;
        while self.is_loaded(label)? {
            if Instant::now() >= until {
                return Err(ExecError {
                    command: format!("launchctl bootout {}", self.service(label)),
                    what: format!(
                        "returned but the job is still loaded after {} s",
                        stop_wait.as_secs()
                    ),
                    code: None,
                    stderr: String::new(),
                });
            }
            std::thread::sleep(self.pause);
        }
        Ok(())
    }

    /// Bootstraps `plist`, retrying the codes launchd gives while a job is still going away, with
    /// backoff, for as long as the pauses add up to `retry_for`: a count of waits, not of the
    /// clock, so how long each `launchctl` takes never changes how often it is tried.
    fn bootstrap(&self, plist: &str) -> Result<(), ExecError> {
        let mut waited = Duration::ZERO;
        let mut pause = self.pause;
        loop {
            match self.program.run(&["bootstrap", &self.domain(), plist]) {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.code.is_some_and(|c| RETRYABLE.contains(&c))
                        && waited + pause <= self.retry_for =>
                {
                    std::thread::sleep(pause);
                    waited += pause;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl ServiceManager for Launchd {
    fn manager(&self) -> Manager {
        Manager::Launchd
    }

    fn preflight(&self) -> Result<(), PreflightError> {
        if self.uid == 0 {
            return Err(PreflightError::Root);
        }
        match self.program.run(&["print", &self.domain()]) {
            Ok(_) => Ok(()),
            Err(e) if e.code == Some(NO_GUI_SESSION) => {
                Err(PreflightError::NoGuiSession { uid: self.uid })
            }
            Err(e) => Err(PreflightError::Unreachable(e)),
        }
    }

    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError> {
        let mut loaded = BTreeSet::new();
        for label in labels {
            if self.is_loaded(label)? {
                loaded.insert(label.clone());
            }
        }
        Ok(loaded)
    }

    fn load(
        &self,
        label: &Label,
        agents_dir: &Path,
        changed: bool,
        stop_wait: Duration,
    ) -> Result<(), ExecError> {
        if !changed && self.is_loaded(label)? {
            return Ok(());
        }
        self.program.run(&["enable", &self.service(label)])?;
        self.bootout(label, stop_wait)?;
        let plist = agents_dir.join(format!("{label}.plist"));
        let plist = plist.to_string_lossy();
        self.bootstrap(&plist)?;
        if self.is_loaded(label)? {
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

    fn unload(
        &self,
        label: &Label,
        _agents_dir: &Path,
        stop_wait: Duration,
    ) -> Result<(), ExecError> {
        self.bootout(label, stop_wait)
    }

    fn stopped_watches(&self, _labels: &[Label]) -> Result<Vec<(Label, String)>, ExecError> {
        Ok(Vec::new())
    }

    fn start(&self, label: &Label) -> Result<(), ExecError> {
        self.program
            .run(&["kickstart", &self.service(label)])
            .map(|_| ())
    }

    fn files_changed(&self) -> Result<(), ExecError> {
        Ok(())
    }

    fn reachable(&self) -> Result<(), ExecError> {
        self.program.run(&["print", &self.domain()]).map(|_| ())
    }
}
