//! Keys as files of a mounted Kubernetes Secret (docs/kubernetes.md): `<dir>/<label>`, read only.
//!
//! The kubelet writes a Secret volume as `<dir>/<key> -> ..data/<key>`, `<dir>/..data ->
//! ..<timestamp>`, and the files inside `<dir>/..<timestamp>/`, swapping `..data` to update them
//! all at once. Exactly those links are followed, and no other: a link anywhere else, one that
//! leaves the folder, a file that is not a regular file, one others may read or its group may
//! change, is refused with a message naming the path (never the key). A plain file in the folder
//! (a Secret mounted by `subPath`) is read as it is. The folder is the kubelet's and read-only to
//! the pod, so nothing in the pod can swap what was checked. Keys here are changed with kubectl,
//! so `set` and `delete` refuse.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{KeyError, KeyStore, Secret};
use crate::names::Label;

/// The largest key file read.
const MAX_BYTES: u64 = 64 * 1024;

/// The folder of a mounted Secret.
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// Keys in `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
}

impl KeyStore for FileStore {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        match read(&self.dir, label.as_str())? {
            None => Ok(None),
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    KeyError::Invalid(format!(
                        "{}: not UTF-8 text",
                        self.dir.join(label.as_str()).display()
                    ))
                })?;
                Secret::new(text).map(Some).map_err(|e| {
                    KeyError::Invalid(format!("{}: {e}", self.dir.join(label.as_str()).display()))
                })
            }
        }
    }

    fn set(&self, _: &Label, _: &Secret) -> Result<(), KeyError> {
        Err(self.read_only())
    }

    fn delete(&self, _: &Label) -> Result<bool, KeyError> {
        Err(self.read_only())
    }
}

impl FileStore {
    fn read_only(&self) -> KeyError {
        KeyError::Failed(format!(
            "keys in {} are files of a Kubernetes Secret: change the Secret with kubectl",
            self.dir.display()
        ))
    }
}

/// The bytes of `<dir>/<name>` following only a Secret volume's own links; `None` when there is
/// no such file.
pub fn read(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, KeyError> {
    let refuse = |path: &Path, why: &str| KeyError::Invalid(format!("{}: {why}", path.display()));
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(refuse(&dir.join(name), "not a key name"));
    }
    let path = dir.join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refuse(&path, &e.to_string())),
    };
    // The kubelet swaps `..data` to a new version folder and then removes the old one: a read that
    // falls between is tried again from the new link.
    let mut tries = 0;
    let (mut f, file) = loop {
        tries += 1;
        let file = if meta.file_type().is_symlink() {
            version_file(dir, name, &path)?
        } else {
            path.clone()
        };
        // O_NOFOLLOW: the file itself is never a link.
        match crate::platform::no_follow(std::fs::OpenOptions::new().read(true)).open(&file) {
            Ok(f) => break (f, file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => continue,
            Err(e) => {
                return Err(match crate::platform::refused_kind(&e, &file) {
                    Some(crate::platform::Refused::Link) => {
                        refuse(&file, "a link where a file must be")
                    }
                    _ => refuse(&file, &e.to_string()),
                });
            }
        }
    };
    let m = f.metadata().map_err(|e| refuse(&file, &e.to_string()))?;
    if !m.is_file() {
        return Err(refuse(&file, "not a regular file"));
    }
    if let Some(mode) = crate::platform::mode_of(&m).filter(|mode| mode & 0o027 != 0) {
        return Err(refuse(
            &file,
            &format!(
                "mode {:o}: others may use it or its group may change it; give the Secret volume defaultMode 0440 or 0400",
                mode & 0o777
            ),
        ));
    }
    if m.len() > MAX_BYTES {
        return Err(refuse(&file, "larger than a key"));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.read_to_end(&mut bytes)
        .map_err(|e| refuse(&file, &e.to_string()))?;
    Ok(Some(bytes))
}

/// Where the Secret volume's own links lead for `name`: `<dir>/..data` must name a `..<version>`
/// folder inside `dir`, and `<dir>/<name>` must be `..data/<name>`.
fn version_file(dir: &Path, name: &str, path: &Path) -> Result<PathBuf, KeyError> {
    let target = std::fs::read_link(path).map_err(|e| refuse(path, &e.to_string()))?;
    if target != Path::new("..data").join(name) {
        return Err(refuse(
            path,
            "a link that is not the Secret volume's own (..data/<name>)",
        ));
    }
    let data = dir.join("..data");
    let version = std::fs::read_link(&data)
        .map_err(|_| refuse(&data, "not the Secret volume's ..data link"))?;
    let version = version.to_str().unwrap_or_default();
    if !version.starts_with("..") || version == ".." || version.contains('/') {
        return Err(refuse(&data, "a link that leaves the Secret's folder"));
    }
    let version_dir = dir.join(version);
    let m = std::fs::symlink_metadata(&version_dir)
        .map_err(|e| refuse(&version_dir, &e.to_string()))?;
    if !m.is_dir() {
        return Err(refuse(&version_dir, "not a folder"));
    }
    Ok(version_dir.join(name))
}

/// Why `path` is not read: it, and never what it holds.
fn refuse(path: &Path, why: &str) -> KeyError {
    KeyError::Invalid(format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// A folder laid out the way the kubelet writes a Secret volume.
    fn secret_volume(items: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let version = d.path().join("..2026_12_01_20_00_00.123456789");
        std::fs::create_dir(&version).unwrap();
        for (k, v) in items {
            let f = version.join(k);
            std::fs::write(&f, v).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o440)).unwrap();
            symlink(Path::new("..data").join(k), d.path().join(k)).unwrap();
        }
        symlink("..2026_12_01_20_00_00.123456789", d.path().join("..data")).unwrap();
        d
    }

    fn label() -> Label {
        Label::new(&"automations".parse().unwrap(), &"notes".parse().unwrap())
    }

    #[test]
    fn reads_a_secret_volume_through_its_own_links() {
        let d = secret_volume(&[("local.automations.notes", "key-123\n")]);
        let store = FileStore::new(d.path().into());
        assert_eq!(store.get(&label()).unwrap().unwrap().expose(), "key-123");
        let other = Label::new(&"automations".parse().unwrap(), &"other".parse().unwrap());
        assert!(store.get(&other).unwrap().is_none());
        let e = store
            .set(&label(), &Secret::new("x".into()).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("kubectl"), "{e}");
        assert!(store.delete(&label()).is_err());
    }

    #[test]
    fn a_plain_private_file_is_read_too() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("local.automations.notes");
        std::fs::write(&f, "plain-key").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
        let got = FileStore::new(d.path().into()).get(&label()).unwrap();
        assert_eq!(got.unwrap().expose(), "plain-key");
    }

    #[test]
    fn every_other_link_or_file_is_refused_naming_the_path_never_the_key() {
        let outside = tempfile::tempdir().unwrap();
        let secret_file = outside.path().join("k");
        std::fs::write(&secret_file, "outside-key").unwrap();
        std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o400)).unwrap();
        let name = "local.automations.notes";
        let read = |dir: &Path, name: &str| {
            let r = read(dir, name);
            if let Err(e) = &r {
                let text = e.to_string();
                assert!(!text.contains("-key"), "a key in an error: {text}");
            }
            r
        };

        // A link straight out of the folder.
        let d = tempfile::tempdir().unwrap();
        symlink(&secret_file, d.path().join(name)).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(
            e.contains("not the Secret volume's own") && e.contains(name),
            "{e}"
        );

        // The right first link, but ..data leaves the folder.
        let d = tempfile::tempdir().unwrap();
        symlink(Path::new("..data").join(name), d.path().join(name)).unwrap();
        symlink(outside.path(), d.path().join("..data")).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(e.contains("leaves the Secret's folder"), "{e}");

        // ..data names a ..version that is itself a link out.
        let d = tempfile::tempdir().unwrap();
        symlink(Path::new("..data").join(name), d.path().join(name)).unwrap();
        symlink("..v1", d.path().join("..data")).unwrap();
        symlink(outside.path(), d.path().join("..v1")).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(e.contains("not a folder"), "{e}");

        // The file inside the version folder is a link.
        let d = secret_volume(&[]);
        symlink(Path::new("..data").join(name), d.path().join(name)).unwrap();
        symlink(&secret_file, d.path().join("..data").join(name)).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(e.contains("a link where a file must be"), "{e}");

        // Readable by everyone.
        let d = secret_volume(&[(name, "world-key")]);
        let f = d.path().join("..data").join(name);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(e.contains("mode 444") && e.contains("defaultMode"), "{e}");

        // Its group may change it.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o460)).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(
            e.contains("mode 460") && e.contains("group may change"),
            "{e}"
        );

        // A folder where the key should be; a name that climbs.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(name)).unwrap();
        let e = read(d.path(), name).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(read(d.path(), "../etc").is_err());
        assert!(read(d.path(), "..data").is_err());
    }
}
