//! What you installed is what runs: an install approves one version of a definition —
//! its sha256 — and, when its `argv[0]` names a file inside the repository (`scripts/backup.sh`),
//! that file's sha256 too. The install record keeps both in the private data root, where an edit
//! to the repository (or a `git pull`) cannot reach them. A scheduled firing compares the files as
//! they are now with those pins before anything that could run code, and is skipped when they
//! differ; a manual run goes ahead (a person is there) and says so.
//!
//! A firing never runs the repository's file itself: it runs a private copy whose bytes are the
//! ones it hashed ([`copy_approved`]), so a script swapped after it was checked (during a jitter
//! wait, a retry's wait, or the instant after the check) never runs unapproved.
//!
//! This module only hashes, copies and compares; the runner records the skip, health and `check`
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
    let sha256 = copy_hashing(file, &mut std::io::sink())?;
    Ok(Some(ScriptPin {
        path: relative(&path, root),
        sha256,
    }))
}

/// A script as a firing runs it: a private copy (its owner's permissions only, in the run's scratch folder) whose bytes
/// are the ones hashed into its pin, so what was compared with the approval is what runs, whatever
/// happens to the repository's file after it was read.
#[derive(Debug)]
pub struct ApprovedCopy {
    /// The copy's pin: the repository path it was copied from, and the sha256 of the copy.
    pub pin: ScriptPin,
    /// The copy, to execute in place of the repository's file.
    pub path: PathBuf,
}

/// Copies the script `def`'s `argv[0]` names into the folder `into` (private, and only the
/// firing's while it holds its lock), hashing the bytes as they are copied: `None` when `argv[0]`
/// names no file of the repository or that file is not there. The copy keeps the file's name, so
/// `basename "$0"` still says it.
pub fn copy_approved(
    def: &Definition,
    root: &Path,
    into: &Path,
) -> std::io::Result<Option<ApprovedCopy>> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(path) = script_path(def, root) else {
        return Ok(None);
    };
    let from = match crate::fsutil::open_following(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // The file's own permissions for its owner, and none for anyone else: a script that is not
    // executable still fails to start, as it would in place.
    let mode = std::os::unix::fs::PermissionsExt::mode(&from.metadata()?.permissions()) & 0o700;
    let dest = into.join(path.file_name().unwrap_or(std::ffi::OsStr::new("script")));
    let _ = std::fs::remove_file(&dest);
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode | 0o200)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&dest)?;
    let sha256 = copy_hashing(from, &mut to)?;
    // Closed before anything is spawned: a file open for writing cannot be executed (ETXTBSY).
    drop(to);
    Ok(Some(ApprovedCopy {
        pin: ScriptPin {
            path: relative(&path, root),
            sha256,
        },
        path: dest,
    }))
}

/// Copies `from` into `to` and returns the sha256 (hex) of what was copied.
fn copy_hashing(mut from: std::fs::File, to: &mut impl std::io::Write) -> std::io::Result<String> {
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
