//! Secrets as private files of the data root, for a machine without a usable keychain (a server
//! nobody logs in to at a desktop): `<data root>/secrets/<label>`, 0600 in a 0700 folder, chosen
//! by `store = "files"` in `<data root>/secrets.toml` (docs/keys.md says what it costs: the
//! secrets lie unencrypted on the disk, readable by every process of the user and by root, and
//! go wherever a backup of the data root goes).
//!
//! Read under the data root's rules (a regular private file, not a link, at most 64 KiB); written
//! whole and durably by a rename, so a reader sees the old secret or the new one. Errors name the
//! file, never its contents.

use std::path::{Path, PathBuf};

use super::{KeyError, KeyStore, Secret};
use crate::layout::{Layout, SettingsFile};
use crate::names::Label;

/// The largest secret file read.
const MAX_BYTES: u64 = 64 * 1024;

/// Where secrets are kept, as `secrets.toml` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The OS keychain (the default, and what no `secrets.toml` means).
    Keychain,
    /// Files of the data root.
    Files,
}

/// The choice `<data root>/secrets.toml` makes (`Keychain` without one), or why it cannot be read.
pub fn choice(data_root: &Path) -> Result<Choice, crate::settings::file::Refused> {
    let parsed = crate::settings::file::load(data_root, SettingsFile::Secrets, |t| {
        let mut problems = Vec::new();
        let mut choice = Choice::Keychain;
        for (k, v) in t {
            match (k.as_str(), v.as_str()) {
                ("store", Some("keychain")) => choice = Choice::Keychain,
                ("store", Some("files")) => choice = Choice::Files,
                ("store", _) => {
                    problems.push("store: expected \"keychain\" or \"files\"".to_owned())
                }
                (k, _) => problems.push(format!("{k}: unknown key (known: store)")),
            }
        }
        if problems.is_empty() {
            Ok(choice)
        } else {
            Err(problems)
        }
    })?;
    Ok(parsed.unwrap_or(Choice::Keychain))
}

/// Secrets in `<data root>/secrets/`.
pub struct DataRootStore {
    dir: PathBuf,
}

impl DataRootStore {
    pub fn new(data_root: &Path) -> Self {
        Self {
            dir: Layout::new(data_root).secrets_dir(),
        }
    }

    fn path(&self, label: &Label) -> PathBuf {
        self.dir.join(label.as_str())
    }
}

fn failed(path: &Path, e: &std::io::Error) -> KeyError {
    KeyError::Failed(format!("{}: {e}", path.display()))
}

impl KeyStore for DataRootStore {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        let path = self.path(label);
        let Some(bytes) =
            crate::fsutil::read_private(&path, MAX_BYTES).map_err(|e| failed(&path, &e))?
        else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| KeyError::Invalid(format!("{}: not text", path.display())))?;
        Secret::new(text)
            .map(Some)
            .map_err(|e| KeyError::Invalid(format!("{}: {e}", path.display())))
    }

    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError> {
        let path = self.path(label);
        crate::fsutil::write_private(&path, secret.expose().as_bytes())
            .map_err(|e| failed(&path, &e))
    }

    fn delete(&self, label: &Label) -> Result<bool, KeyError> {
        let path = self.path(label);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(failed(&path, &e)),
        }
    }
}

/// Every call fails with the reason `secrets.toml` could not be read: a store that cannot say
/// where secrets are kept keeps none and reads none.
pub struct Refusing(pub String);

impl KeyStore for Refusing {
    fn get(&self, _: &Label) -> Result<Option<Secret>, KeyError> {
        Err(KeyError::Unavailable(self.0.clone()))
    }
    fn set(&self, _: &Label, _: &Secret) -> Result<(), KeyError> {
        Err(KeyError::Unavailable(self.0.clone()))
    }
    fn delete(&self, _: &Label) -> Result<bool, KeyError> {
        Err(KeyError::Unavailable(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label() -> Label {
        Label::new(
            &crate::names::Namespace::new("automations").unwrap(),
            &crate::names::Name::new("digest").unwrap(),
        )
    }

    #[test]
    fn a_store_is_proved_by_a_probe_it_does_not_keep() {
        let d = tempfile::tempdir().unwrap();
        let ns = crate::names::Namespace::new("automations").unwrap();
        assert_eq!(
            crate::keys::prove(&DataRootStore::new(d.path()), &ns),
            Ok(())
        );
        let left: Vec<_> = std::fs::read_dir(d.path().join("secrets"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "the probe stayed: {left:?}");
        let refused = crate::keys::prove(&Refusing("secrets.toml: bad".into()), &ns);
        assert!(
            refused.as_ref().is_err_and(|e| e.starts_with("storing a probe") && e.contains("secrets.toml: bad")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_secret_is_stored_read_replaced_and_deleted_privately() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let store = DataRootStore::new(d.path());
        assert_eq!(store.get(&label()).unwrap(), None);
        store
            .set(&label(), &Secret::new("first-1".into()).unwrap())
            .unwrap();
        store
            .set(&label(), &Secret::new("second-2".into()).unwrap())
            .unwrap();
        assert_eq!(store.get(&label()).unwrap().unwrap().expose(), "second-2");
        let path = d.path().join("secrets").join(label().as_str());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // One others can read is refused, naming the file and not its contents.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = store.get(&label()).unwrap_err().to_string();
        assert!(
            e.contains(path.to_str().unwrap()) && !e.contains("second-2"),
            "{e}"
        );
        assert!(store.delete(&label()).unwrap());
        assert!(!store.delete(&label()).unwrap());
    }

    #[test]
    fn the_choice_is_read_strictly() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        assert_eq!(choice(d.path()).unwrap(), Choice::Keychain);
        let file = d.path().join("secrets.toml");
        for (text, want) in [
            ("store = \"files\"\n", Some(Choice::Files)),
            ("store = \"keychain\"\n", Some(Choice::Keychain)),
            ("store = \"disk\"\n", None),
            ("stor = \"files\"\n", None),
        ] {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(choice(d.path()).ok(), want, "{text}");
        }
    }
}
