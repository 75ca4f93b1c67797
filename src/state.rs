//! What `<data root>/state/` holds about this machine: per-automation pause and the kill switch
//! (docs/health.md), and the install records (docs/units.md: `state/installed/<name>.json`).
//!
//! Each is one small JSON file written atomically, so the runner answers "paused?" or "installed
//! when?" with one small read and never scans the log for it. The log also records `paused` /
//! `resumed` events (written by the callers) for history and auto-pause. This module must never
//! run or signal anything.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::fsutil;
use crate::names::Name;
use crate::runlog::By;
use crate::settings::Manager;

/// Why an automation is paused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// `hand` or `auto`.
    pub by: By,
    /// The reason given.
    pub reason: String,
    /// When (RFC 3339 UTC).
    pub at: String,
}

/// Notifications of an automation held until a time (`automations snooze`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snooze {
    /// Until when (RFC 3339 UTC); past it, the snooze is over by itself.
    pub until: String,
    /// The reason given, if any.
    pub reason: Option<String>,
    /// When it was set (RFC 3339 UTC).
    pub at: String,
}

impl Snooze {
    /// Whether it still holds at `now`.
    pub fn holds(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        crate::runlog::parse_stamp(&self.until).is_some_and(|u| u > now)
    }
}

/// The kill switch, when on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// The reason given to `stop-all`.
    pub reason: String,
    /// When (RFC 3339 UTC).
    pub at: String,
}

/// What `state/installed/<name>.json` records about one install.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub label: String,
    /// The service manager it was installed with (the record's field keeps its first name).
    pub target: Manager,
    /// File name -> sha256 of the bytes installed.
    pub files: BTreeMap<String, String>,
    /// sha256 of the definition file installed from.
    pub definition: String,
    pub bin: String,
    pub root: String,
    pub data_root: String,
    pub installed_at: DateTime<Utc>,
    /// The schedule installed (what the unit fires on, whatever the definition says now); absent
    /// in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::schedule::Schedule>,
    /// The pins a scheduled firing checks (see `pins`): `definition` above and `script` here.
    /// `false` in records written before pins were kept, which a scheduled firing cannot trust.
    #[serde(default)]
    pub pinned: bool,
    /// The script `argv[0]` names inside the repository, and its sha256, as installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptPin>,
    /// The definition's text as approved, so the next install can show what changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_text: Option<String>,
    /// The pinned script's text as approved, when it is text and not large, for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_text: Option<String>,
}

/// A pinned script: its path relative to the repository root, and its sha256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptPin {
    pub path: String,
    pub sha256: String,
}

/// What is installed of one automation, as `list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// What `check` calls changed or missing (a unit file edited or gone, the definition or
    /// script changed, a path moved, a newer renderer); whether the manager has it loaded aside.
    pub changed: bool,
    /// The schedule its unit fires on: the one recorded at install, else (an older record) the
    /// definition's when it is the one installed; `None` when that cannot be known.
    pub schedule: Option<crate::schedule::Schedule>,
    /// Whether the schedule came from the install record or the (unchanged) definition.
    pub from_record: bool,
}

/// Why a state file could not be used; names the file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// It cannot be read or written (or is not a regular file).
    #[error("state file {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// It is not what it should hold.
    #[error("state file {path}: not valid ({problem}); remove it or fix it")]
    Invalid { path: PathBuf, problem: String },
}

impl StateError {
    /// Whether the file is unusable as such (a link, a FIFO, another kind of file where a regular
    /// one belongs): the data root's problem, exit 3, rather than a failure of this call.
    pub fn unusable(&self) -> bool {
        matches!(self, Self::Io { source, .. } if crate::fsutil::FileError::of(source).is_some())
    }
}

impl crate::exit::Exits for StateError {
    /// A state file that is no regular file is the data root's problem (3); the rest fail (1).
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::environment_if(self.unusable())
    }
}

/// The switches of one data root.
#[derive(Clone, Debug)]
pub struct State {
    layout: crate::layout::Layout,
}

impl State {
    /// The state folder of `data_root`.
    pub fn new(data_root: &Path) -> Self {
        Self {
            layout: crate::layout::Layout::new(data_root),
        }
    }

    fn pause_path(&self, name: &Name) -> PathBuf {
        self.layout.paused(name)
    }

    fn stop_path(&self) -> PathBuf {
        self.layout.stop_all()
    }

    /// The pause of `name`, if paused.
    pub fn paused(&self, name: &Name) -> Result<Option<Pause>, StateError> {
        read_json(&self.pause_path(name))
    }

    /// The automations with a pause file, from one listing.
    pub fn paused_names(&self) -> Result<std::collections::BTreeSet<Name>, StateError> {
        names_in(&self.layout.paused_dir())
    }

    /// Pauses `name` (replacing an earlier pause).
    pub fn pause(&self, name: &Name, pause: &Pause) -> Result<(), StateError> {
        write_json(&self.pause_path(name), pause)
    }

    /// Resumes `name`; returns whether it was paused.
    pub fn resume(&self, name: &Name) -> Result<bool, StateError> {
        let path = self.pause_path(name);
        fsutil::remove_if_exists(&path).map_err(|e| io_err(&path, e))
    }

    /// The snooze of `name`, if one holds at `now` (an expired one is over by itself).
    pub fn snoozed(
        &self,
        name: &Name,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<Snooze>, StateError> {
        Ok(read_json::<Snooze>(&self.layout.snoozed(name))?.filter(|s| s.holds(now)))
    }

    /// The automations with a snooze file, from one listing.
    pub fn snoozed_names(&self) -> Result<std::collections::BTreeSet<Name>, StateError> {
        names_in(&self.layout.snoozed_dir())
    }

    /// Snoozes `name` (replacing an earlier snooze).
    pub fn snooze(&self, name: &Name, snooze: &Snooze) -> Result<(), StateError> {
        write_json(&self.layout.snoozed(name), snooze)
    }

    /// Ends `name`'s snooze; returns whether one still held at `now`.
    pub fn unsnooze(
        &self,
        name: &Name,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StateError> {
        // A snooze file that cannot be read is removed all the same: that is what was asked.
        let held = self.snoozed(name, now).ok().flatten().is_some();
        let path = self.layout.snoozed(name);
        fsutil::remove_if_exists(&path).map_err(|e| io_err(&path, e))?;
        Ok(held)
    }

    /// The kill switch, if on.
    pub fn stopped(&self) -> Result<Option<Stop>, StateError> {
        read_json(&self.stop_path())
    }

    /// Turns the kill switch on.
    pub fn stop_all(&self, stop: &Stop) -> Result<(), StateError> {
        write_json(&self.stop_path(), stop)
    }

    fn record_path(&self, name: &Name) -> PathBuf {
        self.layout.installed(name)
    }

    /// Who follows whom, as `install`, `uninstall` or `units` last wrote it; `None` when none
    /// did.
    pub fn chains(&self) -> Result<Option<crate::definition::ChainIndex>, StateError> {
        read_json(&self.layout.chains_index())
    }

    /// Writes who follows whom.
    pub fn write_chains(&self, index: &crate::definition::ChainIndex) -> Result<(), StateError> {
        write_json(&self.layout.chains_index(), index)
    }

    /// The install record of `name`, if it is installed on this machine.
    pub fn install_record(&self, name: &Name) -> Result<Option<Record>, StateError> {
        read_json(&self.record_path(name))
    }

    /// Every install record of this data root, by name; the first that cannot be read is the
    /// error.
    pub fn install_records(&self) -> Result<BTreeMap<Name, Record>, StateError> {
        self.install_records_each()?
            .into_iter()
            .map(|(name, r)| r.map(|r| (name, r)))
            .collect()
    }

    /// Every install record of this data root, by name, each read on its own: one that cannot be
    /// read is that name's error (naming the file), not every name's.
    #[allow(clippy::type_complexity)]
    pub fn install_records_each(
        &self,
    ) -> Result<BTreeMap<Name, Result<Record, StateError>>, StateError> {
        let dir = self.layout.installed_dir();
        let mut out = BTreeMap::new();
        for (stem, _) in fsutil::list_named(&dir, "", &[".json"]).map_err(|e| io_err(&dir, e))? {
            let Ok(name) = Name::new(&stem) else { continue };
            if let Some(r) = self.install_record(&name).transpose() {
                out.insert(name, r);
            }
        }
        Ok(out)
    }

    /// Records that `name` was installed (replacing an earlier record).
    pub fn record_install(&self, name: &Name, record: &Record) -> Result<(), StateError> {
        write_json(&self.record_path(name), record)
    }

    /// Forgets the install of `name`; returns whether there was a record.
    pub fn forget_install(&self, name: &Name) -> Result<bool, StateError> {
        let path = self.record_path(name);
        fsutil::remove_if_exists(&path).map_err(|e| io_err(&path, e))
    }

    /// Turns the kill switch off; returns whether it was on.
    pub fn resume_all(&self) -> Result<bool, StateError> {
        let path = self.stop_path();
        fsutil::remove_if_exists(&path).map_err(|e| io_err(&path, e))
    }
}

fn io_err(path: &Path, source: io::Error) -> StateError {
    StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What came of an automation's Healthchecks pings: `state/healthchecks/<name>.json` (written by
/// `healthchecks::ping`, read by health). Never a ping's URL: it holds the key or the UUID.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pings {
    /// When the last ping was sent, which it was (`start`, `exit 0`, `fail`, `log`), and what came
    /// of it: the server's answer, or why there was none.
    pub at: String,
    pub ping: String,
    pub ok: bool,
    pub answer: String,
    /// Pings that failed since the last one that reached the server.
    pub failures_in_row: u32,
    #[serde(default)]
    pub last_ok_at: Option<String>,
}

/// The folder of the ping records.
pub fn pings_dir(data_root: &Path) -> PathBuf {
    crate::layout::Layout::new(data_root).pings_dir()
}

/// The ping record of `name`.
pub fn pings_path(data_root: &Path, name: &Name) -> PathBuf {
    crate::layout::Layout::new(data_root).pings(name)
}

/// The automations with a ping record.
pub fn pinged_names(data_root: &Path) -> Result<std::collections::BTreeSet<Name>, StateError> {
    names_in(&pings_dir(data_root))
}

/// The automations a folder of `<name>.json` files has one for (none when it is missing).
fn names_in(dir: &Path) -> Result<std::collections::BTreeSet<Name>, StateError> {
    let listed = fsutil::list_named(dir, "", &[".json"]).map_err(|e| io_err(dir, e))?;
    Ok(listed
        .into_iter()
        .filter_map(|(stem, _)| Name::new(&stem).ok())
        .collect())
}

/// Reads what came of `name`'s pings; `None` before its first.
pub fn read_pings(data_root: &Path, name: &Name) -> Result<Option<Pings>, StateError> {
    read_json(&pings_path(data_root, name))
}

/// Starts `name`'s count of failed pings again (an ack, a sync that made or found its check):
/// what failed before says nothing of the check as it is now. Nothing when it has no record.
pub fn reset_ping_streak(data_root: &Path, name: &Name) -> Result<(), StateError> {
    match read_pings(data_root, name)? {
        Some(p) if p.failures_in_row > 0 => write_json(
            &pings_path(data_root, name),
            &Pings {
                failures_in_row: 0,
                ..p
            },
        ),
        _ => Ok(()),
    }
}

/// Forgets what came of `name`'s pings (it was uninstalled: it pings no more).
pub fn forget_pings(data_root: &Path, name: &Name) -> Result<(), StateError> {
    let path = pings_path(data_root, name);
    fsutil::remove_if_exists(&path)
        .map(|_| ())
        .map_err(|e| io_err(&path, e))
}

/// Takes a one-time JSON state file (a chain's request, a replace note): renamed away first, so
/// of two takers only one reads it, then read and removed. `None` when there is none (or it does
/// not read as `T`).
pub fn take_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let taken = path.with_extension(format!("taken-{}", std::process::id()));
    std::fs::rename(path, &taken).ok()?;
    let value = read_json(&taken).ok().flatten();
    let _ = std::fs::remove_file(&taken);
    value
}

/// Reads a JSON state file; a missing file is `None`, an unreadable one an error naming it.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StateError> {
    match fsutil::read_in_data_root(path, fsutil::SMALL_FILE).map_err(|e| io_err(path, e))? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StateError::Invalid {
                path: path.to_path_buf(),
                problem: e.to_string(),
            }),
    }
}

/// Writes a JSON state file atomically, 0600.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| io_err(path, e.into()))?;
    bytes.push(b'\n');
    fsutil::write_private(path, &bytes).map_err(|e| io_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_resume_and_kill_switch_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = State::new(d.path());
        let n = Name::new("x").unwrap();
        assert_eq!(s.paused(&n).unwrap(), None);
        let p = Pause {
            by: By::Hand,
            reason: "why".into(),
            at: "t".into(),
        };
        s.pause(&n, &p).unwrap();
        assert_eq!(s.paused(&n).unwrap(), Some(p));
        assert!(s.resume(&n).unwrap());
        assert!(!s.resume(&n).unwrap());
        assert_eq!(s.stopped().unwrap(), None);
        s.stop_all(&Stop {
            reason: "r".into(),
            at: "t".into(),
        })
        .unwrap();
        assert!(s.stopped().unwrap().is_some());
        assert!(s.resume_all().unwrap());
        std::fs::write(d.path().join("state/stop-all.json"), "{").unwrap();
        let e = s.stopped().unwrap_err().to_string();
        assert!(
            e.contains("stop-all.json") && e.contains("not valid"),
            "{e}"
        );
    }
}
