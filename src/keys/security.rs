//! The macOS keychain through Apple's signed `/usr/bin/security` CLI (SPEC §8).
//!
//! An item written by a stable, Apple-signed client stays readable without a prompt across rebuilds
//! of our unsigned binary (Keychain ACLs pin the writer's code hash). The secret goes to
//! `security -i` on stdin, never on a command line; `-U` updates an existing item in place.
//! Items: generic passwords with service and account = the label.

use std::time::Duration;

use super::{DEADLINE, KeyError, KeyStore, Secret};
use crate::names::Label;
use crate::service::exec::{ExecError, Program};

/// `security`'s exit code for "The specified item could not be found in the keychain."
pub const NOT_FOUND: i32 = 44;

/// The `security` CLI.
pub struct SecurityCli {
    program: Program,
    /// The deadline of each call (shortened by tests).
    pub deadline: Duration,
}

impl SecurityCli {
    /// A backend calling `security` at `path`.
    pub fn new(path: &str) -> Self {
        Self {
            program: Program::new(path),
            deadline: DEADLINE,
        }
    }

    fn fail(&self, e: ExecError) -> KeyError {
        let text = e.to_string();
        if e.what.starts_with("timed out") {
            KeyError::Timeout
        } else if text.contains("User interaction is not allowed") || text.contains("locked") {
            KeyError::Locked
        } else if e.what.starts_with("could not start") {
            KeyError::Unavailable(text)
        } else {
            KeyError::Failed(text)
        }
    }
}

/// Quotes one word for `security -i`, which splits its input lines like a shell.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl KeyStore for SecurityCli {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        let l = label.as_str();
        match self.program.run_with(
            &["find-generic-password", "-s", l, "-a", l, "-w"],
            None,
            self.deadline,
        ) {
            Ok(done) => Secret::new(done.stdout).map(Some),
            Err(e) if e.code == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError> {
        let l = quote(label.as_str());
        let line = format!(
            "add-generic-password -U -s {l} -a {l} -l {l} -w {}\n",
            quote(secret.expose())
        );
        let done = self
            .program
            .run_with(&["-i"], Some(line.as_bytes()), self.deadline)
            .map_err(|e| self.fail(e))?;
        // `security -i` exits 0 even when a command inside fails; it says so on stderr.
        if done.stderr.trim().is_empty() {
            Ok(())
        } else {
            Err(KeyError::Failed(done.stderr.trim().to_owned()))
        }
    }

    fn delete(&self, label: &Label) -> Result<bool, KeyError> {
        let l = label.as_str();
        match self.program.run_with(
            &["delete-generic-password", "-s", l, "-a", l],
            None,
            self.deadline,
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.code == Some(NOT_FOUND) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }
}
