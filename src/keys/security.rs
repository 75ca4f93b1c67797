//! The macOS keychain through Apple's signed `/usr/bin/security` CLI (docs/keys.md).
//!
//! An item written by a stable, Apple-signed client stays readable without a prompt across rebuilds
//! of our unsigned binary (Keychain ACLs pin the writer's code hash). Storing deletes the old item
//! and adds a new one whose access list names `/usr/bin/security` (`-T`), so the list is always
//! fresh; an update in place (`-U`) would keep whatever list the old item had. The secret goes to
//! `security -i` on stdin, never on a command line, in one line capped at [`MAX_LINE`].
//!
//! Failures are classified from `security`'s exit code (the low byte of the OSStatus: 44 item not
//! found, 36 interaction not allowed — locked, or a prompt nobody can answer —, 51 authorization
//! failed, 128 cancelled), and, for `security -i` (which reports a failed command on stderr), from
//! Apple's exact error sentences with every occurrence of the label taken out first. Never by
//! searching text that holds the label: an automation named `unlocked-sync` must not read as
//! "locked". Items: generic passwords with service and account = the label.

use std::time::Duration;

use super::{DEADLINE, KeyError, KeyStore, Secret};
use crate::names::Label;
use crate::service::exec::{ExecError, Program};

/// Where Apple's `security` lives.
pub const SECURITY: &str = "/usr/bin/security";
/// `errSecItemNotFound`.
pub const NOT_FOUND: i32 = 44;
/// `errSecInteractionNotAllowed`: the keychain is locked or would prompt.
pub const INTERACTION_NOT_ALLOWED: i32 = 36;
/// `errSecAuthFailed`.
pub const AUTH_FAILED: i32 = 51;
/// `errSecUserCanceled`.
pub const CANCELLED: i32 = 128;
/// The longest line sent to `security -i` (it holds the secret).
pub const MAX_LINE: usize = 1024;

/// Apple's messages for the classified statuses, as `security -i` prints them.
const SENTENCES: [(&str, i32); 4] = [
    (
        "The specified item could not be found in the keychain.",
        NOT_FOUND,
    ),
    ("User interaction is not allowed.", INTERACTION_NOT_ALLOWED),
    (
        "The user name or passphrase you entered is not correct.",
        AUTH_FAILED,
    ),
    ("User canceled the operation.", CANCELLED),
];

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

    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, ExecError> {
        self.program
            .run_with(args, input, self.deadline)
            .map(|d| d.stdout)
    }
}

/// What a status means.
fn from_status(code: i32, label: &Label) -> KeyError {
    match code {
        INTERACTION_NOT_ALLOWED => KeyError::Locked,
        AUTH_FAILED => KeyError::AuthFailed,
        CANCELLED => KeyError::Cancelled,
        NOT_FOUND => KeyError::Failed(format!("no keychain item {label}")),
        c => KeyError::Failed(format!("security exited with {c}")),
    }
}

/// A failed call, classified by how it ended and its exit code. Its stderr is kept only with the
/// label taken out (it names nothing secret: the secret is never on the command line).
fn classify(e: ExecError, label: &Label) -> KeyError {
    if e.what.starts_with("timed out") {
        return KeyError::Timeout;
    }
    if e.what.starts_with("could not start") {
        return KeyError::Unavailable(format!("cannot run {SECURITY}: {}", e.what));
    }
    match e.code {
        Some(c @ (INTERACTION_NOT_ALLOWED | AUTH_FAILED | CANCELLED)) => from_status(c, label),
        Some(c) => KeyError::Failed(format!(
            "security exited with {c}: {}",
            e.stderr.replace(label.as_str(), "<label>")
        )),
        None => KeyError::Failed(e.what),
    }
}

/// `security -i` exits 0 after a failed command and says so on stderr: a known sentence (read
/// with the label removed) is that status; anything else is a failure shown as is.
fn classify_interactive(stderr: &str, label: &Label) -> Option<KeyError> {
    let text = stderr.replace(label.as_str(), "<label>");
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(
        SENTENCES
            .iter()
            .find(|(sentence, _)| text.contains(sentence))
            .map_or_else(
                || KeyError::Failed(text.to_owned()),
                |(_, code)| from_status(*code, label),
            ),
    )
}

/// Quotes one word for `security -i`, which splits its input lines like a shell.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl KeyStore for SecurityCli {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        let l = label.as_str();
        match self.run(&["find-generic-password", "-s", l, "-a", l, "-w"], None) {
            Ok(stdout) => Secret::new(stdout).map(Some),
            Err(e) if e.code == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(classify(e, label)),
        }
    }

    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError> {
        let l = quote(label.as_str());
        let line = format!(
            "add-generic-password -s {l} -a {l} -l {l} -T {SECURITY} -w {}\n",
            quote(secret.expose())
        );
        // Checked before anything runs: no key is that long, and the line must not be cut.
        if line.len() > MAX_LINE {
            return Err(KeyError::Invalid(format!(
                "the key is too long for the keychain line (at most {MAX_LINE} bytes with the label); no key is that long"
            )));
        }
        // Delete, then add: the new item's access list is the fresh one naming security.
        self.delete(label)?;
        let done = self
            .program
            .run_with(&["-i"], Some(line.as_bytes()), self.deadline)
            .map_err(|e| classify(e, label))?;
        match classify_interactive(&done.stderr, label) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    fn delete(&self, label: &Label) -> Result<bool, KeyError> {
        let l = label.as_str();
        match self.run(&["delete-generic-password", "-s", l, "-a", l], None) {
            Ok(_) => Ok(true),
            Err(e) if e.code == Some(NOT_FOUND) => Ok(false),
            Err(e) => Err(classify(e, label)),
        }
    }
}
