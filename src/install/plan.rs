//! What installing or uninstalling one automation would change: its [`Plan`], from what its
//! label is on this machine (unit files, loaded, recorded) and what it should be.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;

use super::{InstallError, file, machine_paths, present_units};
use crate::definition::{Definition, hex_sha256};
use crate::fsutil;
use crate::names::{Label, Name};
use crate::service::ServiceManager;
use crate::settings::Settings;
use crate::state::{Record, ScriptPin, State};
use crate::units::{self, UnitFile, portable::unified_diff};

/// One file of a plan.
#[derive(Clone, Debug)]
pub struct FileChange {
    pub name: String,
    pub path: PathBuf,
    /// What is there now.
    pub old: Option<Vec<u8>>,
    /// What should be there (`None`: remove it).
    pub new: Option<Vec<u8>>,
}

impl FileChange {
    pub(super) fn differs(&self) -> bool {
        self.old != self.new
    }
}

/// What installing (or uninstalling) one automation would change.
#[derive(Debug)]
pub struct Plan {
    pub name: Name,
    pub label: Label,
    pub files: Vec<FileChange>,
    pub loaded: bool,
    pub record: Option<Record>,
    /// The record after applying; `None` for an uninstall.
    pub new_record: Option<Record>,
    /// How long a running copy of the unit may take to stop when it is reloaded or unloaded.
    pub stop_wait: Duration,
}

/// The wait for a unit whose manager lets a run take `stop_timeout` seconds: that plus 5 s.
fn stop_wait(stop_timeout: u64) -> Duration {
    Duration::from_secs(stop_timeout + 5)
}

/// The stop wait of what is installed now: its own stop timeout (plist `ExitTimeOut`, systemd
/// `TimeoutStartSec=`), else the longest any definition can have.
fn stop_wait_present(present: &UnitFiles) -> Duration {
    let from_plist = |bytes: &Vec<u8>| {
        plist::from_bytes::<plist::Dictionary>(bytes)
            .ok()?
            .get("ExitTimeOut")?
            .as_unsigned_integer()
    };
    let from_service = |bytes: &Vec<u8>| {
        String::from_utf8_lossy(bytes).lines().find_map(|l| {
            l.strip_prefix("TimeoutStartSec=")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    let longest = u64::from(crate::definition::MAX_TIMEOUT_SECONDS + units::BACKSTOP_SECONDS);
    stop_wait(
        present
            .iter()
            .find_map(|(name, bytes)| {
                if name.ends_with(".plist") {
                    from_plist(bytes)
                } else if name.ends_with(".service") {
                    from_service(bytes)
                } else {
                    None
                }
            })
            .unwrap_or(longest),
    )
}

impl Plan {
    /// Whether any file's bytes change.
    pub fn files_change(&self) -> bool {
        self.files.iter().any(FileChange::differs)
    }

    /// True when applying would change nothing.
    pub fn is_empty(&self) -> bool {
        let record_same = match (&self.record, &self.new_record) {
            (Some(a), Some(b)) => {
                a.files == b.files
                    && a.definition == b.definition
                    && a.pinned == b.pinned
                    && a.script == b.script
                    && a.bin == b.bin
                    && a.root == b.root
                    && a.data_root == b.data_root
            }
            (None, None) => true,
            _ => false,
        };
        let load_same = self.new_record.is_some() == self.loaded;
        !self.files_change() && record_same && load_same
    }

    /// The plan for people: one line per action, then the diffs.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let installing = self.new_record.is_some();
        for f in &self.files {
            let verb = match (&f.old, &f.new) {
                (None, Some(_)) => "create",
                (Some(_), None) => "remove",
                (Some(a), Some(b)) if a != b => "update",
                _ => "keep (unchanged)",
            };
            out.push_str(&format!("  {verb:17} {}\n", f.path.display()));
        }
        let action = match (installing, self.loaded, self.files_change()) {
            (true, false, _) => "load",
            (true, true, true) => "reload",
            (true, true, false) => "keep loaded (no reload: bytes unchanged)",
            (false, true, _) => "unload",
            (false, false, _) => "nothing to unload (not loaded)",
        };
        out.push_str(&format!("  {action:17} {}\n", self.label));
        out.push_str(&format!(
            "  {:17} state/installed/{}.json\n",
            if installing { "record" } else { "forget" },
            self.name
        ));
        if let Some(new) = &self.new_record {
            out.push_str(&self.approval(new));
        }
        for f in self.files.iter().filter(|f| f.differs()) {
            out.push_str(&unified_diff(
                &f.path.display().to_string(),
                f.old.as_deref(),
                f.new.as_deref(),
            ));
        }
        out
    }

    /// What this install approves that the last one did not: the definition (a diff against the
    /// approved text, when the record kept it) and the script's pin.
    fn approval(&self, new: &Record) -> String {
        let mut out = String::new();
        let name = format!("automations/{}.toml", self.name);
        let old = self.record.as_ref();
        if old.is_none_or(|o| o.definition != new.definition || !o.pinned) {
            out.push_str(&format!(
                "  {:17} {name} (sha256 {})\n",
                "approve",
                short(&new.definition)
            ));
        }
        if let (Some(o), Some(text)) = (old, &new.definition_text)
            && o.definition != new.definition
        {
            match &o.definition_text {
                Some(before) => out.push_str(&crate::units::portable::unified_diff_as(
                    &name,
                    ("approved", Some(before.as_bytes())),
                    ("now", Some(text.as_bytes())),
                )),
                None => out.push_str(&format!(
                    "  {name} changed since it was approved (this older record kept no copy to compare)\n"
                )),
            }
        }
        let old_script = old.filter(|o| o.pinned).and_then(|o| o.script.as_ref());
        if new.script.as_ref() != old_script || old.is_none_or(|o| !o.pinned) {
            match (&new.script, old_script) {
                (Some(n), Some(o)) if n.sha256 != o.sha256 => {
                    out.push_str(&format!(
                        "  {:17} {} (sha256 {} -> {})\n",
                        "approve",
                        n.path,
                        short(&o.sha256),
                        short(&n.sha256)
                    ));
                    out.push_str(&script_diff(old, new, n));
                }
                (Some(n), _) => out.push_str(&format!(
                    "  {:17} {} (sha256 {})\n",
                    "approve",
                    n.path,
                    short(&n.sha256)
                )),
                (None, Some(o)) => {
                    out.push_str(&format!("  {:17} {} (no longer run)\n", "unpin", o.path))
                }
                (None, None) => {}
            }
        }
        out
    }
}

/// What changed in a pinned script since it was approved: a diff of the approved text against
/// this one, when both records kept the text; else why there is none.
fn script_diff(old: Option<&Record>, new: &Record, pin: &ScriptPin) -> String {
    let path = pin.path.as_str();
    match (
        old.and_then(|o| o.script_text.as_deref()),
        new.script_text.as_deref(),
    ) {
        (Some(before), Some(now)) => crate::units::portable::unified_diff_as(
            path,
            ("approved", Some(before.as_bytes())),
            ("now", Some(now.as_bytes())),
        ),
        (None, _) => format!(
            "  {path} changed since it was approved (the record of that install kept no copy to compare)\n"
        ),
        (_, None) => format!(
            "  {path} changed since it was approved (it is not text, or larger than {} KiB: no diff)\n",
            SCRIPT_TEXT_MAX / 1024
        ),
    }
}

/// The first 12 hex digits of a sha256, as a person compares them.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn file_changes(
    settings: &Settings,
    desired: &[UnitFile],
    present: &BTreeMap<String, Vec<u8>>,
) -> Vec<FileChange> {
    let mut files: Vec<FileChange> = desired
        .iter()
        .map(|u| FileChange {
            name: u.name.clone(),
            path: settings.agents_dir.join(&u.name),
            old: present.get(&u.name).cloned(),
            new: Some(u.bytes.clone()),
        })
        .collect();
    for (name, bytes) in present {
        if !desired.iter().any(|u| &u.name == name) {
            files.push(FileChange {
                name: name.clone(),
                path: settings.agents_dir.join(name),
                old: Some(bytes.clone()),
                new: None,
            });
        }
    }
    files
}

/// Unit files by file name.
type UnitFiles = BTreeMap<String, Vec<u8>>;

/// The unit files of `name` present, its record, and whether it is loaded (the manager is asked
/// only when something of it is there).
fn what_is_there(
    settings: &Settings,
    name: &Name,
    label: &Label,
    manager: &dyn ServiceManager,
) -> Result<(UnitFiles, Option<Record>, bool), InstallError> {
    let present = present_units(settings)?.remove(name).unwrap_or_default();
    let record = State::new(&settings.data_root).install_record(name)?;
    let loaded = if present.is_empty() && record.is_none() {
        false
    } else {
        manager.loaded(std::slice::from_ref(label))?.contains(label)
    };
    Ok((present, record, loaded))
}

/// The plan to install `def` from `bin` on this machine.
/// What an install approves besides the unit files: the definition's text (read again, and refused
/// if it is no longer the version parsed) and the pin of its script.
fn approved_files(
    settings: &Settings,
    def: &Definition,
) -> Result<(String, Option<ScriptPin>, Option<String>), InstallError> {
    let path = settings
        .definitions_dir()
        .join(format!("{}.toml", def.name));
    let bytes = fsutil::read_following(&path, crate::definition::MAX_FILE_BYTES)
        .map_err(file(format!("cannot read {}", path.display())))?;
    if hex_sha256(&bytes) != def.sha256 {
        return Err(changed_meanwhile(&path));
    }
    let script = crate::pins::script_pin(def, &settings.root)
        .map_err(file(format!("cannot read the script of {}", def.name)))?;
    let script_text = match &script {
        Some(pin) => script_text(settings, pin)?,
        None => None,
    };
    Ok((
        String::from_utf8_lossy(&bytes).into_owned(),
        script,
        script_text,
    ))
}

/// The largest script whose text an install record keeps, to show the next install its diff.
pub const SCRIPT_TEXT_MAX: u64 = 256 * 1024;

/// The text of the pinned script, as the record keeps it: `None` for a script larger than
/// [`SCRIPT_TEXT_MAX`] or not UTF-8 (its pin alone is kept); refused when the file changed after
/// it was hashed.
fn changed_meanwhile(path: &Path) -> InstallError {
    InstallError::Refused(format!(
        "{} changed while it was being installed; run the install again",
        path.display()
    ))
}

fn script_text(settings: &Settings, pin: &ScriptPin) -> Result<Option<String>, InstallError> {
    let path = settings.root.join(&pin.path);
    let Some(bytes) = fsutil::read_following(&path, SCRIPT_TEXT_MAX)
        .ok()
        .filter(|b| (b.len() as u64) < SCRIPT_TEXT_MAX)
    else {
        return Ok(None);
    };
    if hex_sha256(&bytes) != pin.sha256 {
        return Err(changed_meanwhile(&path));
    }
    // Kept only while it stays small in the record too: escaped, control bytes grow sixfold, and
    // the record must stay a small file every firing reads.
    Ok(String::from_utf8(bytes)
        .ok()
        .filter(|t| serde_json::to_string(t).map_or(0, |j| j.len()) as u64 <= SCRIPT_TEXT_MAX))
}

pub fn plan_install(
    settings: &Settings,
    def: &Definition,
    bin: &Path,
    manager: &dyn ServiceManager,
) -> Result<Plan, InstallError> {
    let label = settings.label(&def.name);
    let paths = machine_paths(settings, bin)?;
    let desired = units::render(
        def,
        &settings.namespace,
        &paths,
        units::Target::of(settings.manager),
    )
    .map_err(InstallError::Refused)?;
    if let Some(zone) = def
        .schedule
        .as_ref()
        .and_then(crate::schedule::Schedule::zone)
    {
        manager.keeps_zones(zone.name()).map_err(|why| {
            InstallError::Refused(format!("{}: time_zone = \"{zone}\": {why}", def.name))
        })?;
    }
    let (present, record, loaded) = what_is_there(settings, &def.name, &label, manager)?;
    let (definition_text, script, script_text) = approved_files(settings, def)?;
    let new_record = Record {
        label: label.to_string(),
        target: settings.manager,
        files: desired
            .iter()
            .map(|u| (u.name.clone(), hex_sha256(&u.bytes)))
            .collect(),
        definition: def.sha256.clone(),
        bin: paths.bin,
        root: paths.root,
        data_root: paths.data_root,
        installed_at: Utc::now(),
        schedule: def.schedule.clone(),
        pinned: true,
        script,
        definition_text: Some(definition_text),
        script_text,
    };
    // A reload stops the copy that is running now: give it as long as its own unit allows, or
    // the new one, whichever is longer.
    let wait = stop_wait(u64::from(units::stop_timeout(def))).max(if present.is_empty() {
        Duration::ZERO
    } else {
        stop_wait_present(&present)
    });
    Ok(Plan {
        name: def.name.clone(),
        files: file_changes(settings, &desired, &present),
        label,
        loaded,
        record,
        new_record: Some(new_record),
        stop_wait: wait,
    })
}

/// The plan to uninstall `name` from this machine.
pub fn plan_uninstall(
    settings: &Settings,
    name: &Name,
    manager: &dyn ServiceManager,
) -> Result<Plan, InstallError> {
    let label = settings.label(name);
    let (present, record, loaded) = what_is_there(settings, name, &label, manager)?;
    let wait = stop_wait_present(&present);
    Ok(Plan {
        name: name.clone(),
        files: file_changes(settings, &[], &present),
        label,
        loaded,
        record,
        new_record: None,
        stop_wait: wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_wait_comes_from_the_installed_unit() {
        let mut present = UnitFiles::new();
        assert_eq!(
            stop_wait_present(&present),
            Duration::from_secs(u64::from(crate::definition::MAX_TIMEOUT_SECONDS) + 30 + 5)
        );
        present.insert(
            "l.service".into(),
            b"[Service]\nTimeoutStartSec=90\n".to_vec(),
        );
        assert_eq!(stop_wait_present(&present), Duration::from_secs(95));
        let mut present = UnitFiles::new();
        let mut d = plist::Dictionary::new();
        d.insert("ExitTimeOut".into(), plist::Value::Integer(330.into()));
        let mut xml = Vec::new();
        plist::Value::Dictionary(d).to_writer_xml(&mut xml).unwrap();
        present.insert("l.plist".into(), xml);
        assert_eq!(stop_wait_present(&present), Duration::from_secs(335));
    }
}
