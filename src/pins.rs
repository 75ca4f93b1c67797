//! What you installed is what runs: an install approves one version of a definition —
//! its sha256 — and, when its `argv[0]` names a file inside the repository (`scripts/backup.sh`),
//! that file's sha256 too. The install record keeps both in the private data root, where an edit
//! to the repository (or a `git pull`) cannot reach them. A scheduled firing compares the files as
//! they are now with those pins before anything that could run code, and is skipped when they
//! differ; a manual run goes ahead (a person is there) and says so.
//!
//! A firing runs the script where it is, so `$0`, `__file__`, its siblings and relative imports
//! work as in a terminal. What makes that safe is [`HashedScript`]: under the firing's lock, right
//! before it starts, the script is hashed through one open descriptor, and what the file system
//! says of that file (device, inode, size, times, and the folders above it up to the repository)
//! is kept; the path must still name that very file when the command starts, and still name it,
//! untouched, when it ends. A swap before the start is refused; one during the run (which an
//! interpreter reading the path might have followed) makes the run `failed`, class
//! `script_changed`. The limits are in docs/units.md.
//!
//! This module only hashes, looks and compares; the runner records the skip, health and `check`
//! say it.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::definition::{Definition, PLACEHOLDER_ROOT};
use crate::state::{Record, ScriptPin};

/// Why the files as they are now are not what was installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// No install record, or one from before pins were kept for an automation that runs a script
    /// of the repository: nothing to check against.
    NotInstalled,
    /// The definition's bytes differ from the ones installed.
    DefinitionChanged,
    /// The script `argv[0]` names (repository-relative path) differs, appeared or is gone.
    ScriptChanged(String),
    /// The script cannot be read as a file (a FIFO, a folder, a link to one, no permission): not
    /// the approved one as far as anyone can tell. Its path, and what was found.
    ScriptUnreadable { path: String, why: String },
}

impl Mismatch {
    /// The skip reason's words in the log.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mismatch::NotInstalled => "not_installed",
            Mismatch::DefinitionChanged => "definition_changed",
            Mismatch::ScriptChanged(_) | Mismatch::ScriptUnreadable { .. } => "script_changed",
        }
    }

    /// What changed, for people: "automations/x.toml changed since it was installed".
    pub fn words(&self, name: &str) -> String {
        match self {
            Mismatch::NotInstalled => format!(
                "{name} has no install record with pins here (never installed, or installed before pins were kept)"
            ),
            Mismatch::DefinitionChanged => {
                format!("automations/{name}.toml changed since it was installed")
            }
            Mismatch::ScriptChanged(path) => format!("{path} changed since it was installed"),
            Mismatch::ScriptUnreadable { path, why } => format!("{path} cannot be read: {why}"),
        }
    }
}

/// The file `def`'s `argv[0]` names inside `root`, if it names one: `{root}/…`, a relative path
/// with a `/` (the command runs in the root), or an absolute path under the root. A bare program
/// name is looked up on PATH and is not the repository's to pin.
pub fn script_path(def: &Definition, root: &Path) -> Option<PathBuf> {
    let first = def.command.first()?;
    let path = if let Some(rest) = first.strip_prefix(&format!("{PLACEHOLDER_ROOT}/")) {
        root.join(rest)
    } else if Path::new(first).is_absolute() {
        PathBuf::from(first)
    } else if first.contains('/') {
        root.join(first)
    } else {
        return None;
    };
    let climbs = path
        .components()
        .any(|c| c == std::path::Component::ParentDir);
    (path.starts_with(root) && !climbs).then_some(path)
}

/// The pin of `def`'s script as it is now: `None` when its `argv[0]` names no file of the
/// repository (or that file is not there). Opened without blocking: a FIFO (or a link to one)
/// there is refused, naming what it is, never waited on.
pub fn script_pin(def: &Definition, root: &Path) -> std::io::Result<Option<ScriptPin>> {
    let Some(path) = script_path(def, root) else {
        return Ok(None);
    };
    let file = match crate::fsutil::open_following(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    check_size(file.metadata()?.len())?;
    let sha256 = copy_hashing(&file, &mut std::io::sink())?;
    Ok(Some(ScriptPin {
        path: relative(&path, root),
        sha256,
    }))
}

/// The most bytes a pinned script may have: every firing hashes it (a 64 MiB file takes a tenth
/// of a second or so); a larger program belongs outside the repository or on PATH.
pub const MAX_SCRIPT_BYTES: u64 = 64 << 20;

/// A script as a firing checked it, in place: its pin (the sha256 of the bytes read through one
/// descriptor) and what the file system said of that file and of the folders above it, so a later
/// look tells whether the path still names those very bytes.
#[derive(Debug)]
pub struct HashedScript {
    /// The pin: the repository path, and the sha256 of the bytes read.
    pub pin: ScriptPin,
    /// The script, where it is.
    pub path: PathBuf,
    identity: Identity,
}

/// What changes when a file is written, replaced or renamed, and when a folder or link on its way
/// is replaced or re-pointed: the file's device, inode, size, modification and change times; each
/// folder's device and inode, and each link's own, from the script up to the repository root.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    file: ((u64, u64), [i64; 5]),
    folders: Vec<(u64, u64)>,
}

impl HashedScript {
    /// Whether the path still names the file that was hashed, unchanged since: `Err` says what
    /// differs.
    pub fn unchanged(&self, root: &Path) -> Result<(), String> {
        let now = identity_of(&self.path, root).map_err(|e| format!("{e}"))?;
        if now.folders != self.identity.folders {
            return Err("a folder or link on its way was replaced or re-pointed".into());
        }
        if now.file != self.identity.file {
            return Err("it was written, replaced or renamed".into());
        }
        Ok(())
    }
}

/// Hashes the script `def`'s `argv[0]` names where it is (through one descriptor, never past
/// [`MAX_SCRIPT_BYTES`]) and keeps what the file system says of it: `None` when `argv[0]` names
/// no file of the repository or that file is not there. A file written while it was hashed is
/// refused, as is a path that names another file by the end of the hash.
pub fn hash_in_place(def: &Definition, root: &Path) -> std::io::Result<Option<HashedScript>> {
    let Some(path) = script_path(def, root) else {
        return Ok(None);
    };
    let file = match crate::fsutil::open_following(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let (meta, id) = crate::platform::file_meta_id(&file)?;
    check_size(meta.len())?;
    let before = (id, crate::platform::change_stamp(&meta));
    let sha256 = copy_hashing(&file, &mut std::io::sink())?;
    let identity = identity_of(&path, root)?;
    let after = file_identity(&file)?;
    if before != identity.file || after != identity.file {
        return Err(std::io::Error::other(
            "it changed while it was being checked",
        ));
    }
    Ok(Some(HashedScript {
        pin: ScriptPin {
            path: relative(&path, root),
            sha256,
        },
        path,
        identity,
    }))
}

/// Refuses a script larger than [`MAX_SCRIPT_BYTES`], before a byte of it is read.
fn check_size(len: u64) -> std::io::Result<()> {
    if len > MAX_SCRIPT_BYTES {
        return Err(std::io::Error::other(format!(
            "it is {} MiB, over the {} MiB a pinned script may be (it is hashed at every firing): run a larger program from outside the repository or from PATH",
            len >> 20,
            MAX_SCRIPT_BYTES >> 20
        )));
    }
    Ok(())
}

/// An open file's identity and what changes with its contents (one `fstat` on Unix).
fn file_identity(file: &std::fs::File) -> std::io::Result<((u64, u64), [i64; 5])> {
    let (meta, id) = crate::platform::file_meta_id(file)?;
    Ok((id, crate::platform::change_stamp(&meta)))
}

/// What the file system says now of `path` (following links) and of the folders from `root`
/// down to it.
fn identity_of(path: &Path, root: &Path) -> std::io::Result<Identity> {
    use crate::platform::{link_id, path_id};
    let (meta, id) = crate::platform::path_meta_id(path)?;
    let file = (id, crate::platform::change_stamp(&meta));
    let mut folders = Vec::new();
    // A link on the way is known by its own inode as well as by what it points to: one re-pointed
    // (`ln -sfn`) is a new link, even where it leads to the same file.
    folders.extend(link_id(path)?);
    let mut at = path.parent();
    while let Some(dir) = at {
        folders.extend(link_id(dir)?);
        folders.push(path_id(dir)?);
        if dir == root || !dir.starts_with(root) {
            break;
        }
        at = dir.parent();
    }
    Ok(Identity { file, folders })
}

/// Copies `from` into `to` and returns the sha256 (hex) of what was copied.
fn copy_hashing(mut from: &std::fs::File, to: &mut impl std::io::Write) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
    }
    Ok(format!("{:x}", hasher.finalize()))
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Whether `def` (and its script) as it is now is what `record` approved. A script that cannot be
/// read counts as changed: it is not the approved one as far as anyone can tell.
///
/// A record from before pins were kept still pins the definition (its hash was always recorded):
/// it is trusted for an automation whose `argv[0]` is no script of the repository, and is no
/// approval of a script it never hashed.
pub fn check(record: Option<&Record>, def: &Definition, root: &Path) -> Option<Mismatch> {
    check_script(record, def, root, script_pin(def, root))
}

/// [`check`] with the script's pin as the caller read it (a firing: the pin of the copy it runs).
pub fn check_script(
    record: Option<&Record>,
    def: &Definition,
    root: &Path,
    now: std::io::Result<Option<ScriptPin>>,
) -> Option<Mismatch> {
    let Some(record) = record else {
        return Some(Mismatch::NotInstalled);
    };
    if record.definition != def.sha256 {
        return Some(Mismatch::DefinitionChanged);
    }
    if !record.pinned {
        return script_path(def, root).map(|_| Mismatch::NotInstalled);
    }
    let now = match now {
        Ok(p) => p,
        Err(e) => {
            let path = script_path(def, root).unwrap_or_default();
            return Some(Mismatch::ScriptUnreadable {
                path: relative(&path, root),
                why: e.to_string(),
            });
        }
    };
    if now != record.script {
        let path = now
            .as_ref()
            .or(record.script.as_ref())
            .map_or_else(String::new, |p| p.path.clone());
        return Some(Mismatch::ScriptChanged(path));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(command: &[&str]) -> Definition {
        let toml = format!(
            "name = \"x\"\ncommand = {}\n",
            serde_json::to_string(command).unwrap()
        );
        crate::definition::parse(
            "x.toml",
            toml.as_bytes(),
            &crate::definition::Checks {
                home: "/nonexistent-home".into(),
                data_root: "/nonexistent-data".into(),
                units_dir: "/nonexistent-units".into(),
            },
        )
        .unwrap()
    }

    #[test]
    fn the_script_is_argv0_when_it_names_a_file_of_the_root() {
        let root = Path::new("/repo");
        for (argv0, want) in [
            ("scripts/x.sh", Some("/repo/scripts/x.sh")),
            ("./x.sh", Some("/repo/./x.sh")),
            ("{root}/scripts/x.sh", Some("/repo/scripts/x.sh")),
            ("/repo/bin/tool", Some("/repo/bin/tool")),
            ("/usr/bin/true", None),
            ("sh", None),
        ] {
            let got = script_path(&def(&[argv0]), root);
            assert_eq!(got.as_deref(), want.map(Path::new), "{argv0}");
        }
    }

    fn record(def: &Definition, pinned: bool) -> Record {
        Record {
            label: "local.automations.x".into(),
            target: crate::settings::Manager::Systemd,
            files: Default::default(),
            definition: def.sha256.clone(),
            bin: "/b".into(),
            root: "/r".into(),
            data_root: "/d".into(),
            installed_at: chrono::Utc::now(),
            schedule: None,
            pinned,
            script: None,
            definition_text: None,
            script_text: None,
        }
    }

    /// A link re-pointed after the hash is seen, even where it leads to the same file: what sits
    /// beside the script (which `$0`'s folder and Python's `sys.path[0]` name) may differ.
    #[test]
    fn a_link_re_pointed_after_the_hash_is_a_change() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["scripts", "v1", "v2"] {
            std::fs::create_dir(r.join(d)).unwrap();
        }
        std::fs::write(r.join("real.sh"), "#!/bin/sh\n").unwrap();
        symlink(r.join("real.sh"), r.join("v1/run.sh")).unwrap();
        symlink(r.join("real.sh"), r.join("v2/run.sh")).unwrap();
        symlink(r.join("v1/run.sh"), r.join("scripts/run.sh")).unwrap();
        let hashed = hash_in_place(&def(&["scripts/run.sh"]), r)
            .unwrap()
            .unwrap();
        assert_eq!(hashed.unchanged(r), Ok(()));
        // `ln -sfn`: a new link put in the old one's place, to the same file by another way.
        symlink(r.join("v2/run.sh"), r.join("scripts/new")).unwrap();
        std::fs::rename(r.join("scripts/new"), r.join("scripts/run.sh")).unwrap();
        let why = hashed.unchanged(r).unwrap_err();
        assert!(why.contains("re-pointed"), "{why}");
    }

    #[test]
    fn a_record_from_before_pins_approves_only_what_it_hashed() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("scripts")).unwrap();
        std::fs::write(root.path().join("scripts/x.sh"), "echo 1\n").unwrap();
        let plain = def(&["/bin/true"]);
        let scripted = def(&["scripts/x.sh"]);
        // No record: nothing approved.
        assert_eq!(
            check(None, &plain, root.path()),
            Some(Mismatch::NotInstalled)
        );
        // An old record: its definition hash still counts; a script it never hashed does not.
        assert_eq!(
            check(Some(&record(&plain, false)), &plain, root.path()),
            None
        );
        assert_eq!(
            check(Some(&record(&scripted, false)), &scripted, root.path()),
            Some(Mismatch::NotInstalled)
        );
        let mut other = record(&plain, false);
        other.definition = "0".repeat(64);
        assert_eq!(
            check(Some(&other), &plain, root.path()),
            Some(Mismatch::DefinitionChanged)
        );
        // A pinned record: the script as installed, then edited, then gone.
        let mut pinned = record(&scripted, true);
        pinned.script = script_pin(&scripted, root.path()).unwrap();
        assert_eq!(check(Some(&pinned), &scripted, root.path()), None);
        std::fs::write(root.path().join("scripts/x.sh"), "echo 2\n").unwrap();
        assert_eq!(
            check(Some(&pinned), &scripted, root.path()),
            Some(Mismatch::ScriptChanged("scripts/x.sh".into()))
        );
        std::fs::remove_file(root.path().join("scripts/x.sh")).unwrap();
        assert_eq!(
            check(Some(&pinned), &scripted, root.path()),
            Some(Mismatch::ScriptChanged("scripts/x.sh".into()))
        );
    }
}
