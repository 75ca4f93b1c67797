//! Keys: one secret per automation in the OS keychain, under the automation's label (docs/keys.md).
//!
//! A [`KeyStore`] trait with two real backends: the Linux Secret Service over D-Bus
//! ([`secret_service`]) and the macOS Keychain through Apple's `/usr/bin/security` CLI
//! ([`security`]). Every call has a 20 s deadline; a locked keychain, no keychain at all, or one
//! that waits on a prompt is an error — callers fail closed. A [`Secret`] never prints: its `Debug`
//! is redacted and errors never carry it. This module must never log, print or pass a secret on
//! a command line.

pub mod files;
#[cfg(target_os = "linux")]
pub mod secret_service;
pub mod security;

use std::fmt;
use std::time::Duration;

use crate::names::Label;
use crate::settings::Manager;

/// The deadline of every keychain call.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A secret value. Zeroed when dropped; never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret: one line of printable ASCII, as API keys are.
    pub fn new(s: String) -> Result<Self, KeyError> {
        let t = s.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(KeyError::Invalid(
                "a key is one line of printable ASCII without spaces".into(),
            ));
        }
        let t = t.to_owned();
        drop(Secret(s));
        Ok(Secret(t))
    }

    /// The secret text; handle with care.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // SAFETY: zero bytes are valid UTF-8.
        unsafe { self.0.as_bytes_mut() }.fill(0);
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Why the keychain could not answer. Never carries the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the keychain is locked (a headless session cannot unlock it; unlock it from your desktop session)"
    )]
    Locked,
    #[error("no keychain is reachable: {0}")]
    Unavailable(String),
    #[error("the keychain did not answer within {} s (is it waiting on a prompt?)", DEADLINE.as_secs())]
    Timeout,
    #[error("the keychain refused: authorization failed (a wrong keychain password)")]
    AuthFailed,
    #[error("the keychain prompt was cancelled")]
    Cancelled,
    #[error("{0}")]
    Invalid(String),
    #[error("the keychain refused: {0}")]
    Failed(String),
}

/// A keychain.
pub trait KeyStore {
    /// The secret stored under `label`, if any.
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError>;
    /// Stores `secret` under `label`, replacing an earlier one in place.
    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError>;
    /// Deletes the secret under `label`; returns whether there was one.
    fn delete(&self, label: &Label) -> Result<bool, KeyError>;
}

/// The key store of these settings: the files of a mounted Secret when `AUTOMATIONS_KEY_DIR`
/// names one (in a pod), else this machine's keychain.
pub fn for_settings(settings: &crate::settings::Settings) -> Box<dyn KeyStore> {
    match &settings.key_dir {
        Some(dir) => Box::new(files::FileStore::new(dir.clone())),
        None => for_manager(settings.manager),
    }
}

/// The key store of a machine with `manager`: the Keychain beside launchd, the Secret Service beside
/// systemd.
pub fn for_manager(manager: Manager) -> Box<dyn KeyStore> {
    match manager {
        #[cfg(target_os = "linux")]
        Manager::Systemd => Box::new(secret_service::SecretServiceStore::new()),
        // A macOS build never runs beside systemd; a record naming it (copied from a Linux
        // machine) reaches no keychain.
        #[cfg(not(target_os = "linux"))]
        Manager::Systemd => Box::new(Unreachable),
        Manager::Launchd => Box::new(security::SecurityCli::new(security::SECURITY)),
    }
}

/// The Secret Service, asked for on a machine that has none (a macOS build).
#[cfg(not(target_os = "linux"))]
struct Unreachable;

#[cfg(not(target_os = "linux"))]
impl KeyStore for Unreachable {
    fn get(&self, _: &Label) -> Result<Option<Secret>, KeyError> {
        Err(KeyError::Unavailable(
            "the Secret Service is Linux's".into(),
        ))
    }
    fn set(&self, _: &Label, _: &Secret) -> Result<(), KeyError> {
        Err(KeyError::Unavailable(
            "the Secret Service is Linux's".into(),
        ))
    }
    fn delete(&self, _: &Label) -> Result<bool, KeyError> {
        Err(KeyError::Unavailable(
            "the Secret Service is Linux's".into(),
        ))
    }
}

/// Runs `f` on its own thread and gives up after `deadline` (the thread is left to finish or die
/// with the process: a D-Bus call cannot be cancelled).
pub fn with_deadline<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce() -> Result<T, KeyError> + Send + 'static,
) -> Result<T, KeyError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline).unwrap_or(Err(KeyError::Timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let s = Secret::new(" abc-123 \n".into()).unwrap();
        assert_eq!(s.expose(), "abc-123");
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert!(Secret::new("two words".into()).is_err());
        assert!(Secret::new("".into()).is_err());
    }

    #[test]
    fn deadline_fails_closed() {
        let r: Result<(), KeyError> = with_deadline(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        });
        assert_eq!(r, Err(KeyError::Timeout));
        assert_eq!(with_deadline(Duration::from_secs(5), || Ok(7)), Ok(7));
    }
}
