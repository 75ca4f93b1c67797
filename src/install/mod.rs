//! Install, uninstall and the machine half of `check` (docs/units.md), sharing one [`Plan`].
//!
//! A plan compares what a label should be on this machine (rendered files, loaded, recorded) with
//! what it is. `install --dry-run` prints it, `install` applies it, `check` reports any plan that
//! is not empty as drift. Applying writes unit files atomically, loads them only when their bytes
//! changed (or they are not loaded), records the install in `state/installed/<name>.json`, and on
//! any failure puts the previous files and record back. It touches only files of its own label.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;

mod binary;
mod exposure;
mod left;

pub use binary::{BinaryCopy, BinaryError};
pub use exposure::sandbox_exposure;
pub use left::left_behind;

use crate::definition::{Definition, hex_sha256};
use crate::fsutil;
use crate::names::{Label, Name};
use crate::service::ServiceManager;
use crate::settings::{Manager, Settings};
use crate::state::{Installed, Record, ScriptPin, State};
use crate::units::{self, MachinePaths, UnitFile, portable::unified_diff};

/// Why an install or uninstall could not be planned or applied.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file or folder: what could not be done with it, named.
    #[error("{what}")]
    File {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Refused, in words: a path units cannot name, a definition this manager cannot fire, a file
    /// that changed while it was read.
    #[error("{0}")]
    Refused(String),
    /// An install record.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The service manager.
    #[error(transparent)]
    Manager(#[from] crate::service::ExecError),
    /// This machine cannot install or uninstall now.
    #[error(transparent)]
    Preflight(#[from] crate::service::PreflightError),
    /// What went wrong, and what was done about it (a rollback).
    #[error("{what}")]
    Then {
        what: String,
        #[source]
        source: Box<InstallError>,
    },
}

impl InstallError {
    /// `source` with what happened after it (a rollback) said first.
    fn then(self, what: impl Into<String>) -> Self {
        Self::Then {
            what: what.into(),
            source: Box::new(self),
        }
    }
}

impl crate::exit::Exits for InstallError {
    /// A file of the data root that is no regular file, or a record that is none, is the
    /// environment's (3); the rest fail (1).
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::File { source, .. } => source.exit(),
            Self::State(e) => e.exit(),
            Self::Then { source, .. } => source.exit(),
            Self::Refused(_) | Self::Manager(_) | Self::Preflight(_) => crate::exit::Exit::Failure,
        }
    }
}

/// `what` could not be done with a file or folder.
fn file(what: String) -> impl FnOnce(std::io::Error) -> InstallError {
    move |source| InstallError::File { what, source }
}

/// The unit files of our namespace in the agents folder, by name: file name -> bytes.
pub fn present_units(
    settings: &Settings,
) -> Result<BTreeMap<Name, BTreeMap<String, Vec<u8>>>, InstallError> {
    let prefix = Label::prefix(&settings.namespace);
    let mut out: BTreeMap<Name, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let exts = units::Target::of(settings.manager).extensions();
    let found = fsutil::list_named(&settings.agents_dir, &prefix, exts).map_err(file(format!(
        "cannot read the agents folder {}",
        settings.agents_dir.display()
    )))?;
    for (stem, path) in found {
        let Ok(name) = Name::new(&stem) else { continue };
        // A FIFO or device with our prefix must never hang `check`.
        let bytes = fsutil::read_following(&path, fsutil::SMALL_FILE)
            .map_err(file(format!("cannot read {}", path.display())))?;
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        out.entry(name)
            .or_default()
            .insert(file.into_owned(), bytes);
    }
    Ok(out)
}

/// What is installed of each automation that has an install record, from the records and the unit
/// files (no service manager is asked: `check` does that). A record that cannot be read is left
/// out (`check` and `health` name it).
pub fn installed(
    settings: &Settings,
    defs: &[Definition],
) -> Result<BTreeMap<Name, Installed>, InstallError> {
    let records = State::new(&settings.data_root).install_records_each()?;
    if records.is_empty() {
        return Ok(BTreeMap::new());
    }
    let present = present_units(settings)?;
    let mut out = BTreeMap::new();
    for (name, record) in records {
        let Ok(record) = record else { continue };
        let def = defs.iter().find(|d| d.name == name);
        let none = BTreeMap::new();
        let files = present.get(&name).unwrap_or(&none);
        // Changed by what `check` finds (whether the manager has it loaded aside: that takes
        // asking the manager, which `check` does and `list` does not).
        let changed = record_finding(settings, &name, &record, files, def, true).is_some();
        // The definition, the pinned script, or a record without pins: scheduled firings skip it.
        let def_changed =
            def.is_none_or(|d| crate::pins::check(Some(&record), d, &settings.root).is_some());
        let (schedule, from_record) = match (&record.schedule, def) {
            (Some(sch), _) => (Some(sch.clone()), true),
            (None, Some(d)) if !def_changed => (d.schedule.clone(), false),
            _ => (None, false),
        };
        out.insert(
            name,
            Installed {
                changed,
                schedule,
                from_record,
            },
        );
    }
    Ok(out)
}

/// The machine paths units of this checkout point to.
pub fn machine_paths(settings: &Settings, bin: &Path) -> Result<MachinePaths, InstallError> {
    let utf8 = |what: &str, p: &Path| {
        p.to_str().map(str::to_owned).ok_or_else(|| {
            InstallError::Refused(format!(
                "the {what} path {} is not UTF-8; units cannot name it",
                p.display()
            ))
        })
    };
    let paths = MachinePaths {
        bin: utf8("binary", bin)?,
        root: utf8("repository root", &settings.root)?,
        data_root: utf8("data root", &settings.data_root)?,
        home: utf8("home", &settings.home)?,
    };
    paths.check().map_err(InstallError::Refused)?;
    Ok(paths)
}

/// The profiles' folders of a cargo build: cargo's own, and this project's (Cargo.toml).
const PROFILE_DIRS: [&str; 4] = ["debug", "release", "test-build", "dist"];

/// True when `bin` lives in a cargo build folder (`…/target/<profile>/…` or
/// `…/target/<target triple>/<profile>/…`), which `cargo clean` or the next build can remove or
/// replace under a running schedule.
pub fn in_build_folder(bin: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = bin.iter().collect();
    let profile = |p: &std::ffi::OsStr| PROFILE_DIRS.iter().any(|d| p == *d);
    parts.windows(2).any(|w| w[0] == "target" && profile(w[1]))
        || parts.windows(3).any(|w| w[0] == "target" && profile(w[2]))
}

#[cfg(test)]
mod build_folder_tests {
    use std::path::Path;

    #[test]
    fn every_profile_folder_is_a_build_folder_and_a_copy_beside_them_is_not() {
        for bin in [
            "/x/target/release/automations",
            "/x/target/test-build/automations",
            "/x/target/x86_64-unknown-linux-musl/dist/automations",
            "/x/target/debug/deps/automations-1234",
        ] {
            assert!(super::in_build_folder(Path::new(bin)), "{bin}");
        }
        for bin in [
            "/home/u/.local/bin/automations",
            "/x/target/tmp/automations-it-1/bin/automations",
        ] {
            assert!(!super::in_build_folder(Path::new(bin)), "{bin}");
        }
    }
}

/// The folder macOS privacy protection (TCC) guards that `path` lies in, if any: `~/Documents`,
/// `~/Desktop`, `~/Downloads` and iCloud Drive (`~/Library/Mobile Documents`). A LaunchAgent gets
/// EPERM there without a prompt.
pub fn privacy_folder(home: &Path, path: &Path) -> Option<&'static str> {
    [
        ("Documents", "~/Documents"),
        ("Desktop", "~/Desktop"),
        ("Downloads", "~/Downloads"),
        (
            "Library/Mobile Documents",
            "iCloud Drive (~/Library/Mobile Documents)",
        ),
    ]
    .into_iter()
    .find(|(dir, _)| path.starts_with(home.join(dir)))
    .map(|(_, name)| name)
}

/// The watched paths of `defs` inside a folder macOS privacy protection guards, as (automation,
/// path as written, folder).
pub fn watched_in_privacy_folders<'d>(
    home: &Path,
    root: &Path,
    defs: &'d [Definition],
) -> Vec<(&'d str, &'d str, &'static str)> {
    let mut found = Vec::new();
    for d in defs {
        let Some(tr) = &d.trigger else { continue };
        for p in &tr.paths {
            let at = crate::definition::trigger::resolve(p, root, home);
            if let Some(folder) = privacy_folder(home, &at) {
                found.push((d.name.as_str(), p.as_str(), folder));
            }
        }
    }
    found
}

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
    fn differs(&self) -> bool {
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

/// Applies an install plan; on failure restores the previous files and record.
pub fn apply_install(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    let new_record = plan.new_record.as_ref().expect("an install plan");
    manager.preflight()?;
    let changed = plan.files_change();
    if settings.manager == Manager::Launchd {
        // launchd does not create the folder of StandardOutPath.
        let logs = settings.layout().launchd_logs();
        fsutil::private_dir(&logs).map_err(file(format!("cannot create {}", logs.display())))?;
    }
    std::fs::create_dir_all(&settings.agents_dir).map_err(file(format!(
        "cannot create the agents folder {}",
        settings.agents_dir.display()
    )))?;
    let result = (|| -> Result<(), InstallError> {
        write_files(plan)?;
        // The record (with its install time) goes first: a daily job that launchd starts at
        // load (RunAtLoad) must already see it, or the slot guard would run the missed slot.
        State::new(&settings.data_root).record_install(&plan.name, new_record)?;
        if changed || !plan.loaded {
            manager
                .load(&plan.label, &settings.agents_dir, changed, plan.stop_wait)
                .map_err(|e| InstallError::from(e).then(format!("cannot load {}", plan.label)))?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        let restored = rollback(settings, plan, manager);
        return Err(match restored {
            Ok(()) => {
                e.then("install rolled back: the previous unit files and record are restored")
            }
            Err(r) => e.then(format!(
                "install failed and the rollback failed too: {}",
                crate::exit::chain_text(&r)
            )),
        });
    }
    Ok(())
}

fn write_files(plan: &Plan) -> Result<(), InstallError> {
    for f in plan.files.iter().filter(|f| f.differs()) {
        match &f.new {
            Some(bytes) => fsutil::write_durably(&f.path, bytes, 0o644)
                .map_err(file(format!("cannot write {}", f.path.display())))?,
            None => {
                fsutil::remove_if_exists(&f.path)
                    .map_err(file(format!("cannot remove {}", f.path.display())))?;
            }
        }
    }
    Ok(())
}

/// Puts back the files and record a plan found, and reloads what was loaded before.
fn rollback(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    if !plan.loaded {
        // This install may have loaded a unit that was not loaded before: take it down while its
        // files still exist (an error only means it never got loaded).
        let _ = manager.unload(&plan.label, &settings.agents_dir, plan.stop_wait);
    }
    for f in plan.files.iter().filter(|f| f.differs()) {
        match &f.old {
            Some(bytes) => fsutil::write_durably(&f.path, bytes, 0o644),
            None => fsutil::remove_if_exists(&f.path).map(|_| ()),
        }
        .map_err(file(format!("restoring {} failed", f.path.display())))?;
    }
    let state = State::new(&settings.data_root);
    match &plan.record {
        Some(r) => state.record_install(&plan.name, r),
        None => state.forget_install(&plan.name).map(|_| ()),
    }
    .map_err(|e| InstallError::from(e).then("restoring the install record failed"))?;
    let reload = manager.files_changed().and_then(|()| {
        if plan.loaded {
            manager.load(&plan.label, &settings.agents_dir, true, plan.stop_wait)
        } else {
            Ok(())
        }
    });
    reload.map_err(|e| {
        InstallError::from(e)
            .then("the previous unit files and record are restored but reloading them failed")
    })
}

/// Applies an uninstall plan. A unit that will not unload keeps its files and record.
pub fn apply_uninstall(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    manager.preflight()?;
    if plan.loaded || !plan.files.is_empty() {
        manager
            .unload(&plan.label, &settings.agents_dir, plan.stop_wait)
            .map_err(|e| {
                InstallError::from(e).then(format!(
                    "cannot unload {}; its files are left in place",
                    plan.label
                ))
            })?;
    }
    write_files(plan)?;
    manager.files_changed()?;
    State::new(&settings.data_root).forget_install(&plan.name)?;
    Ok(())
}

/// One drift finding of the machine check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// Installed, but the file differs from what the install would write now.
    Changed { label: String, why: String },
    /// Recorded, but the file is gone or the manager has not loaded it.
    Missing { label: String, why: String },
    /// A unit file of our namespace that was never recorded as installed.
    Extra { file: String, name: String },
    /// Recorded, but its definition is gone or no longer scheduled.
    Orphaned { label: String, why: String },
    /// Who follows whom (`state/chains.json`) is not what the definitions say any more: a chain
    /// edited since the last `install` or `units`, which firings do not see yet.
    Chains { file: String },
}

impl Finding {
    /// One line for people, ending with the command that fixes it.
    pub fn line(&self) -> String {
        match self {
            Finding::Changed { label, why } => {
                format!("{label}: changed ({why}); fix: {}", self.fix())
            }
            Finding::Missing { label, why } => {
                format!("{label}: missing ({why}); fix: {}", self.fix())
            }
            Finding::Extra { file, .. } => format!(
                "{file}: extra (never installed by automations here); fix: {} (or install it)",
                self.fix()
            ),
            Finding::Orphaned { label, why } => {
                format!("{label}: orphaned ({why}); fix: {}", self.fix())
            }
            Finding::Chains { file } => format!(
                "{file}: who follows whom is older than the definitions (a chain was edited), so firings start the old followers; fix: {}",
                self.fix()
            ),
        }
    }

    /// The command that fixes it: reinstall what changed or is missing (showing the diff against
    /// what was approved), uninstall what is orphaned or was never installed here.
    pub fn fix(&self) -> String {
        let short = |label: &'_ str| label.rsplit('.').next().unwrap_or(label).to_owned();
        let (verb, name) = match self {
            Finding::Chains { .. } => return "make automations-units".into(),
            Finding::Changed { label, .. } | Finding::Missing { label, .. } => {
                ("install", short(label))
            }
            Finding::Orphaned { label, .. } => ("uninstall", short(label)),
            Finding::Extra { name, .. } => ("uninstall", name.clone()),
        };
        format!("make automations-{verb} NAME={name}")
    }
}

/// What of the paths an install record names is not so any more: its binary gone, the root or
/// the data root elsewhere.
fn moved_paths(settings: &Settings, record: &Record) -> Option<String> {
    let mut moved = Vec::new();
    if !Path::new(&record.bin).exists() {
        moved.push(format!("the binary {} is gone", record.bin));
    }
    if Some(record.root.as_str()) != settings.root.to_str() {
        moved.push(format!(
            "the repository root is now {}",
            settings.root.display()
        ));
    }
    if Some(record.data_root.as_str()) != settings.data_root.to_str() {
        moved.push(format!(
            "the data root is now {}",
            settings.data_root.display()
        ));
    }
    (!moved.is_empty()).then(|| format!("a path: {}", moved.join("; ")))
}

/// What is wrong with one recorded install, first finding only (the fix is the same for all):
/// its definition gone or unscheduled, a unit file gone or edited, the definition changed, a path
/// moved, or the unit not loaded.
fn record_finding(
    settings: &Settings,
    name: &Name,
    record: &Record,
    files: &BTreeMap<String, Vec<u8>>,
    def: Option<&Definition>,
    is_loaded: bool,
) -> Option<Finding> {
    let label = settings.label(name).to_string();
    let def = match def {
        None => {
            return Some(Finding::Orphaned {
                label,
                why: format!("automations/{name}.toml is gone"),
            });
        }
        Some(d) if !d.has_units() => {
            return Some(Finding::Orphaned {
                label,
                why: format!("automations/{name}.toml has no schedule or trigger any more"),
            });
        }
        Some(d) => d,
    };
    if let Some(gone) = record.files.keys().find(|f| !files.contains_key(*f)) {
        return Some(Finding::Missing {
            label,
            why: format!("{gone} is gone"),
        });
    }
    if let Some(edited) = record
        .files
        .iter()
        .find(|(f, h)| files.get(*f).map(|b| hex_sha256(b)).as_ref() != Some(h))
    {
        return Some(Finding::Changed {
            label,
            why: format!("{} was edited by hand", edited.0),
        });
    }
    if let Some(m) = crate::pins::check(Some(record), def, &settings.root) {
        let why = match m {
            crate::pins::Mismatch::NotInstalled => {
                "installed before pins were kept, so scheduled firings skip it".to_owned()
            }
            m => m.words(name.as_str()),
        };
        return Some(Finding::Changed { label, why });
    }
    if let Some(why) = moved_paths(settings, record) {
        return Some(Finding::Changed { label, why });
    }
    // Same definition, same paths, files as installed: only a newer renderer can differ (an
    // upgrade that changed the unit, such as the skip status), and a reinstall takes it.
    if let Ok(paths) = machine_paths(settings, Path::new(&record.bin)) {
        let now: BTreeMap<String, String> = units::render(
            def,
            &settings.namespace,
            &paths,
            units::Target::of(settings.manager),
        )
        .unwrap_or_default()
        .iter()
        .map(|u| (u.name.clone(), hex_sha256(&u.bytes)))
        .collect();
        if now != record.files {
            return Some(Finding::Changed {
                label,
                why: "this version of automations renders its unit differently".into(),
            });
        }
    }
    (!is_loaded).then(|| Finding::Missing {
        label,
        why: "not loaded".into(),
    })
}

/// Every drift between this machine and the definitions. Queries the manager once, and not at all
/// when nothing of ours is installed or present.
pub fn check_machine(
    settings: &Settings,
    defs: &[Definition],
    manager: &dyn ServiceManager,
) -> Result<Vec<Finding>, InstallError> {
    let records = State::new(&settings.data_root).install_records()?;
    let present = present_units(settings)?;
    let mut findings = Vec::new();
    for (name, files) in &present {
        if !records.contains_key(name) {
            for f in files.keys() {
                findings.push(Finding::Extra {
                    file: settings.agents_dir.join(f).display().to_string(),
                    name: name.to_string(),
                });
            }
        }
    }
    let labels: Vec<Label> = records.keys().map(|n| settings.label(n)).collect();
    let loaded: BTreeSet<Label> = if labels.is_empty() {
        BTreeSet::new()
    } else {
        manager.loaded(&labels)?
    };
    let none = BTreeMap::new();
    for (name, record) in &records {
        let files = present.get(name).unwrap_or(&none);
        let def = defs.iter().find(|d| &d.name == name);
        let is_loaded = loaded.contains(&settings.label(name));
        findings.extend(record_finding(
            settings, name, record, files, def, is_loaded,
        ));
    }
    let state = State::new(&settings.data_root);
    if let Ok(Some(index)) = state.chains()
        && index != crate::definition::ChainIndex::of_definitions(defs)
    {
        findings.push(Finding::Chains {
            file: settings.layout().chains_index().display().to_string(),
        });
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_folders_are_recognised_by_whole_path() {
        let home = Path::new("/Users/al");
        for (p, want) in [
            ("/Users/al/Documents/repo", Some("~/Documents")),
            ("/Users/al/Desktop", Some("~/Desktop")),
            ("/Users/al/Downloads/x/y", Some("~/Downloads")),
            (
                "/Users/al/Library/Mobile Documents/com~apple~CloudDocs/r",
                Some("iCloud Drive (~/Library/Mobile Documents)"),
            ),
            ("/Users/al/DocumentsOld/repo", None),
            ("/Users/al/src/repo", None),
            ("/Users/al/Library/Application Support/automations", None),
            ("/Users/alice/Documents", None),
        ] {
            assert_eq!(privacy_folder(home, Path::new(p)), want, "{p}");
        }
    }

    #[test]
    fn watched_paths_in_privacy_folders_are_named() {
        let checks = crate::definition::Checks {
            home: PathBuf::from("/Users/al"),
            data_root: PathBuf::from("/Users/al/Library/Application Support/automations"),
            units_dir: "/nonexistent-units".into(),
        };
        let def = |name: &str, paths: &str| {
            let text =
                format!("name = \"{name}\"\ncommand = [\"true\"]\n[trigger]\npaths = {paths}\n");
            crate::definition::parse(&format!("{name}.toml"), text.as_bytes(), &checks).unwrap()
        };
        let defs = [
            def("inbox", "[\"~/Documents/Inbox\", \"~/src/queue\"]"),
            def("dl", "[\"/Users/al/Downloads\"]"),
            def("repo", "[\"{root}/inbox\"]"),
        ];
        let found = watched_in_privacy_folders(
            Path::new("/Users/al"),
            Path::new("/Users/al/src/repo"),
            &defs,
        );
        assert_eq!(
            found,
            [
                ("inbox", "~/Documents/Inbox", "~/Documents"),
                ("dl", "/Users/al/Downloads", "~/Downloads"),
            ]
        );
        // A repository inside a guarded folder makes its {root} paths guarded too.
        let found = watched_in_privacy_folders(
            Path::new("/Users/al"),
            Path::new("/Users/al/Desktop/repo"),
            &defs[2..],
        );
        assert_eq!(found, [("repo", "{root}/inbox", "~/Desktop")]);
    }

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
