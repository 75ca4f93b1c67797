//! Keys: one secret per automation in the OS keychain, under the automation's label (docs/keys.md).
//!
//! A [`KeyStore`] trait with two real backends: the Linux Secret Service over D-Bus
//! ([`secret_service`]) and the macOS Keychain through Apple's `/usr/bin/security` CLI
//! ([`security`]). Every call has a 20 s deadline; a locked keychain, no keychain at all, or one
//! that waits on a prompt is an error — callers fail closed. A [`Secret`] never prints: its `Debug`
//! is redacted and errors never carry it. This module must never log, print or pass a secret on
//! a command line.

#[cfg(windows)]
pub mod credentials;
pub mod data_root;
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

/// Where this installation keeps its secrets: what [`for_settings`] opens, kept apart from the
/// settings so another thread can open it.
#[derive(Clone, Debug)]
pub struct Place {
    manager: Manager,
    data_root: std::path::PathBuf,
    key_dir: Option<std::path::PathBuf>,
}

impl Place {
    pub fn of(settings: &crate::settings::Settings) -> Self {
        Self {
            manager: settings.manager,
            data_root: settings.data_root.clone(),
            key_dir: settings.key_dir.clone(),
        }
    }

    /// The files of a mounted Secret when `AUTOMATIONS_KEY_DIR` names one (in a pod); else the
    /// data root's files when `secrets.toml` chooses them; else this machine's keychain. A
    /// `secrets.toml` that cannot be read gives a store that refuses every call, saying why.
    pub fn open(&self) -> Box<dyn KeyStore> {
        if let Some(dir) = &self.key_dir {
            return Box::new(files::FileStore::new(dir.clone()));
        }
        match data_root::choice(&self.data_root) {
            Ok(data_root::Choice::Files) => {
                Box::new(data_root::DataRootStore::new(&self.data_root))
            }
            Ok(data_root::Choice::Keychain) => for_manager(self.manager),
            Err(e) => Box::new(data_root::Refusing(e.to_string())),
        }
    }

    /// What [`Place::open`] opens, as one word for scripts: `keychain`, `files` or `mounted`;
    /// `none` when `secrets.toml` cannot be read.
    pub fn kind(&self) -> &'static str {
        if self.key_dir.is_some() {
            return "mounted";
        }
        match data_root::choice(&self.data_root) {
            Ok(data_root::Choice::Files) => "files",
            Ok(data_root::Choice::Keychain) => "keychain",
            Err(_) => "none",
        }
    }

    /// What [`Place::open`] opens, in words: "the keychain", "files of the data root (…)", "the
    /// mounted Secret (…)", or why it cannot be said.
    pub fn describe(&self) -> String {
        if let Some(dir) = &self.key_dir {
            return format!("the mounted Secret ({})", dir.display());
        }
        match data_root::choice(&self.data_root) {
            Ok(data_root::Choice::Files) => format!(
                "files of the data root ({}), as secrets.toml chooses: unencrypted, weaker than a keychain",
                crate::layout::Layout::new(&self.data_root)
                    .secrets_dir()
                    .display()
            ),
            Ok(data_root::Choice::Keychain) => match self.manager {
                Manager::Launchd => "the macOS Keychain".to_owned(),
                Manager::Systemd => "the Secret Service (the desktop keyring)".to_owned(),
                Manager::TaskScheduler => "the Windows Credential Manager".to_owned(),
            },
            Err(e) => format!("nowhere: {e}"),
        }
    }
}

/// Proves `store` works end to end: a probe stored, read back and deleted
/// (`local.<namespace>.doctor.probe`); what failed, in words.
pub fn prove(store: &dyn KeyStore, namespace: &crate::names::Namespace) -> Result<(), String> {
    let label = crate::names::Label::service(namespace, "doctor", "probe");
    let value = format!(
        "probe-{:016x}",
        std::process::id() as u64 ^ 0x5eed_cafe_f00d_d00d
    );
    let secret = Secret::new(value.clone()).map_err(|e| e.to_string())?;
    store
        .set(&label, &secret)
        .map_err(|e| format!("storing a probe: {e}"))?;
    let read = store.get(&label);
    let _ = store.delete(&label);
    match read {
        Ok(Some(s)) if s.expose() == value => Ok(()),
        Ok(_) => Err("the probe stored was not read back".into()),
        Err(e) => Err(format!("reading the probe back: {e}")),
    }
}

/// The key store of these settings (see [`Place::open`]).
pub fn for_settings(settings: &crate::settings::Settings) -> Box<dyn KeyStore> {
    Place::of(settings).open()
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
        Manager::Systemd => Box::new(Unreachable("the Secret Service is Linux's")),
        Manager::Launchd => Box::new(security::SecurityCli::new(security::SECURITY)),
        #[cfg(windows)]
        Manager::TaskScheduler => Box::new(credentials::CredentialManager),
        #[cfg(not(windows))]
        Manager::TaskScheduler => Box::new(Unreachable("the Credential Manager is Windows'")),
    }
}

/// A key store this build cannot reach (the Secret Service from a macOS or Windows build, the
/// Credential Manager from a Unix one: a record copied from another machine names it), and why.
struct Unreachable(&'static str);

impl KeyStore for Unreachable {
    fn get(&self, _: &Label) -> Result<Option<Secret>, KeyError> {
        Err(KeyError::Unavailable(self.0.into()))
    }
    fn set(&self, _: &Label, _: &Secret) -> Result<(), KeyError> {
        Err(KeyError::Unavailable(self.0.into()))
    }
    fn delete(&self, _: &Label) -> Result<bool, KeyError> {
        Err(KeyError::Unavailable(self.0.into()))
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
