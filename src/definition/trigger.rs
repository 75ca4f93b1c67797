//! `[trigger]`: what starts an automation besides its clock (docs/triggers.md) — a watched file or
//! folder, or another automation's firing ending.
//!
//! [`check`] reads the table of one file; [`relations`] checks what only the whole folder can
//! tell (names that exist, no chain that loops, watched folders that are there).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Value;

use super::{Loaded, PLACEHOLDER_ROOT, Problem, Report, check_int, problem, strings};
use crate::names::{Name, truncate};

/// `settle_seconds` when the table does not say.
pub const DEFAULT_SETTLE_SECONDS: u32 = 5;
/// The largest `settle_seconds`.
pub const MAX_SETTLE_SECONDS: u32 = 600;
/// `max_per_hour` when the table does not say.
pub const DEFAULT_MAX_PER_HOUR: u32 = 60;
/// How long a path-started firing that did not run holds its unit before it ends (see
/// `runner::COOL_DOWN`); the unit's stop timeout leaves room for it.
pub const COOL_DOWN_SECONDS: u32 = 60;
/// The largest `max_per_hour`: below systemd's trigger limit for a path unit (200 starts in
/// 2 s), which would otherwise stop the watch for good (docs/triggers.md).
pub const MAX_PER_HOUR: u32 = 150;
/// The most watched paths one automation may have.
const MAX_PATHS: usize = 16;

/// Which change of a watched path starts a firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathEvent {
    /// A file was written and closed, created, deleted or moved (systemd `PathChanged=`).
    Changed,
    /// As `changed`, and also at every write (systemd `PathModified=`).
    Modified,
    /// A queue folder: fires while it holds files (systemd `DirectoryNotEmpty=`, launchd
    /// `QueueDirectories`).
    NotEmpty,
}

impl PathEvent {
    const ALL: [PathEvent; 3] = [PathEvent::Changed, PathEvent::Modified, PathEvent::NotEmpty];

    /// The word a definition uses.
    pub fn as_str(self) -> &'static str {
        match self {
            PathEvent::Changed => "changed",
            PathEvent::Modified => "modified",
            PathEvent::NotEmpty => "not_empty",
        }
    }
}

/// A valid `[trigger]` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Triggers {
    /// Watched files or folders, as written (`{root}/…`, `~/…` or absolute).
    pub paths: Vec<String>,
    /// Which change starts it.
    pub on: PathEvent,
    /// Changes within this many seconds make one firing.
    pub settle_seconds: u32,
    /// Event-started firings (path or chain) an hour beyond which a firing is skipped.
    pub max_per_hour: u32,
    /// Automations whose firing ending ok starts this one.
    pub after_success: Vec<Name>,
    /// Automations whose firing ending failed or timed out starts this one.
    pub after_failure: Vec<Name>,
}

impl Triggers {
    /// Every automation it follows, each once.
    pub fn upstreams(&self) -> impl Iterator<Item = &Name> {
        let mut seen = std::collections::BTreeSet::new();
        self.after_success
            .iter()
            .chain(&self.after_failure)
            .filter(move |n| seen.insert(*n))
    }

    /// Whether a firing of `upstream` that ended `ok` (or not) starts it.
    pub fn follows(&self, upstream: &str, ok: bool) -> bool {
        let list = if ok {
            &self.after_success
        } else {
            &self.after_failure
        };
        list.iter().any(|n| n.as_str() == upstream)
    }

    /// What starts it, in words: "when inbox/ changes", "after backup succeeds".
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if !self.paths.is_empty() {
            let what: Vec<String> = self.paths.iter().map(|p| short_path(p)).collect();
            let verb = match self.on {
                PathEvent::Changed => "changes",
                PathEvent::Modified => "is written to",
                PathEvent::NotEmpty => "holds files",
            };
            parts.push(format!("when {} {verb}", what.join(" or ")));
        }
        let names = |v: &[Name]| v.iter().map(Name::as_str).collect::<Vec<_>>().join(" or ");
        if !self.after_success.is_empty() {
            parts.push(format!("after {} succeeds", names(&self.after_success)));
        }
        if !self.after_failure.is_empty() {
            parts.push(format!("after {} fails", names(&self.after_failure)));
        }
        parts.join(", ")
    }
}

/// A watched path's last component, with a `/` when it was written as a folder or is one by
/// name: `{root}/inbox` → `inbox/`.
fn short_path(p: &str) -> String {
    let last = p.trim_end_matches('/').rsplit('/').next().unwrap_or(p);
    if last.contains('.') {
        last.to_owned()
    } else {
        format!("{last}/")
    }
}

/// A watched path as the machine sees it: `{root}` and `~` replaced.
pub fn resolve(path: &str, root: &Path, home: &Path) -> PathBuf {
    if let Some(rest) = path.strip_prefix(PLACEHOLDER_ROOT) {
        root.join(rest.trim_start_matches('/'))
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(path)
    }
}

/// `[trigger]`: each key checked; `None` when any is wrong.
pub(super) fn check(r: &mut Report, value: &Value, checks: &super::Checks) -> Option<Triggers> {
    let Value::Table(t) = value else {
        r.wrong_type("trigger", "a table", value);
        return None;
    };
    let before = r.problems.len();
    let mut tr = Triggers {
        paths: Vec::new(),
        on: PathEvent::Changed,
        settle_seconds: DEFAULT_SETTLE_SECONDS,
        max_per_hour: DEFAULT_MAX_PER_HOUR,
        after_success: Vec::new(),
        after_failure: Vec::new(),
    };
    for (key, v) in t {
        let k = format!("trigger.{key}");
        match key.as_str() {
            "paths" => tr.paths = check_paths(r, &k, v, checks),
            "on" => match v {
                Value::String(s) => match PathEvent::ALL.into_iter().find(|e| e.as_str() == s) {
                    Some(e) => tr.on = e,
                    None => r.add(
                        &k,
                        format!(
                            "{:?} is not a change; write \"changed\", \"modified\" or \"not_empty\"",
                            truncate(s, 40)
                        ),
                    ),
                },
                v => r.wrong_type(&k, "a string", v),
            },
            "settle_seconds" => {
                if let Some(s) = check_int(r, &k, v, 0, i64::from(MAX_SETTLE_SECONDS)) {
                    tr.settle_seconds = s;
                }
            }
            "max_per_hour" => {
                if let Some(m) = check_int(r, &k, v, 1, i64::from(MAX_PER_HOUR)) {
                    tr.max_per_hour = m;
                }
            }
            "after_success" => tr.after_success = check_names(r, &k, v),
            "after_failure" => tr.after_failure = check_names(r, &k, v),
            _ => r.add(&k, "unknown key"),
        }
    }
    let watches = !tr.paths.is_empty();
    if !watches && tr.after_success.is_empty() && tr.after_failure.is_empty() {
        r.add(
            "trigger",
            "starts nothing; give it paths = [\"{root}/inbox\"], after_success = [\"name\"] or after_failure = [\"name\"]",
        );
    }
    for key in ["on", "settle_seconds"] {
        if !watches && t.contains_key(key) {
            r.add(
                &format!("trigger.{key}"),
                "is about watched paths, and there are none; add paths = [...] or remove it",
            );
        }
    }
    (r.problems.len() == before).then_some(tr)
}

fn check_names(r: &mut Report, key: &str, v: &Value) -> Vec<Name> {
    let Some(items) = strings(r, key, v) else {
        return Vec::new();
    };
    let mut out: Vec<Name> = Vec::new();
    for s in items {
        match Name::new(s) {
            Ok(n) if out.contains(&n) => r.add(key, format!("{s:?} is listed twice")),
            Ok(n) => out.push(n),
            Err(e) => r.add(key, format!("{:?}: {e}", truncate(s, 40))),
        }
    }
    out
}

/// `paths`: each one `{root}/…`, `~/…` or absolute; plain (no `.`/`..` steps, no control
/// characters, no glob); inside the home folder or the repository and not either of them whole;
/// never in the data root, which changes at every firing.
fn check_paths(r: &mut Report, key: &str, v: &Value, checks: &super::Checks) -> Vec<String> {
    let Some(items) = strings(r, key, v) else {
        return Vec::new();
    };
    if items.is_empty() {
        r.add(
            key,
            "is empty; name the files or folders to watch, or remove it",
        );
    }
    if items.len() > MAX_PATHS {
        r.add(key, format!("{} paths; at most {MAX_PATHS}", items.len()));
    }
    let mut out: Vec<String> = Vec::new();
    for p in items {
        match check_path(p, checks) {
            Ok(()) if out.iter().any(|o| o == p) => r.add(key, format!("{p:?} is listed twice")),
            Ok(()) => out.push(p.to_owned()),
            Err(why) => r.add(key, format!("{:?}: {why}", truncate(p, 80))),
        }
    }
    out
}

/// A path written from the repository (`{root}/…`) or the home folder (`~/…`): what follows the
/// anchor; `None` for any other path; `~user` refused.
pub(super) fn anchored(p: &str) -> Option<Result<&str, String>> {
    if let Some(rest) = p.strip_prefix(PLACEHOLDER_ROOT) {
        return Some(Ok(rest));
    }
    let rest = p.strip_prefix('~')?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return Some(Err(
            "`~user` is not read; write \"~/…\" for your home folder".into(),
        ));
    }
    Some(Ok(rest))
}

/// Refuses `.` and `..` steps.
pub(super) fn plain_steps(rest: &str) -> Result<(), String> {
    if Path::new(rest)
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err("has a `.` or `..` step; write the plain path".into());
    }
    Ok(())
}

fn check_path(p: &str, checks: &super::Checks) -> Result<(), String> {
    if p.chars().any(char::is_control) || p.trim() != p {
        return Err("holds a control character or starts or ends with white space".into());
    }
    if p.contains(['*', '?', '[', '%', '$']) {
        return Err("globs, `%` and `$` are not read; name the file or folder itself".into());
    }
    let rest = if let Some(rest) = anchored(p) {
        rest?
    } else if p.starts_with('/') {
        let inside_home = Path::new(p).starts_with(&checks.home);
        if !inside_home {
            return Err(format!(
                "outside the home folder; watch a path under it, written \"~/…\", or under the repository, written \"{PLACEHOLDER_ROOT}/…\""
            ));
        }
        p.strip_prefix(checks.home.to_str().unwrap_or_default())
            .unwrap_or(p)
    } else {
        return Err(format!(
            "relative; write \"{PLACEHOLDER_ROOT}/…\" for the repository or \"~/…\" for the home folder"
        ));
    };
    if !rest.starts_with('/') || rest.trim_matches('/').is_empty() {
        return Err(
            "names the whole repository or home folder; watch one folder or file inside it".into(),
        );
    }
    plain_steps(rest)?;
    let resolved = resolve(p, Path::new("/nonexistent-root"), &checks.home);
    if resolved.starts_with(&checks.data_root) {
        return Err(format!(
            "inside the data root ({}), which changes at every firing; watch a folder of your own",
            checks.data_root.display()
        ));
    }
    Ok(())
}

/// What only the whole folder can tell, for every definition of `loaded` with a `[trigger]`:
/// each automation it follows exists and is not itself, no chain loops, and each watched path's
/// folder exists and the path is not a FIFO, socket or device. A definition with such a problem
/// moves from `definitions` to `problems`. `root` is the repository (the definitions folder's
/// parent).
pub fn relations(loaded: &mut Loaded, root: &Path, home: &Path) {
    let names: BTreeMap<&Name, &super::Definition> =
        loaded.definitions.iter().map(|d| (&d.name, d)).collect();
    let mut bad: BTreeMap<Name, Vec<Problem>> = BTreeMap::new();
    for def in &loaded.definitions {
        let Some(tr) = &def.trigger else { continue };
        let file = format!("{}.toml", def.name);
        let mut add = |key: &str, message: String| {
            bad.entry(def.name.clone())
                .or_default()
                .push(problem(&file, key, message));
        };
        for (key, list) in [
            ("trigger.after_success", &tr.after_success),
            ("trigger.after_failure", &tr.after_failure),
        ] {
            for up in list {
                if *up == def.name {
                    add(
                        key,
                        format!("\"{up}\" is this automation; a chain cannot start itself"),
                    );
                } else if !names.contains_key(up) {
                    add(
                        key,
                        format!(
                            "\"{up}\" is not an automation here (no valid automations/{up}.toml)"
                        ),
                    );
                }
            }
        }
        for p in &tr.paths {
            let at = resolve(p, root, home);
            if let Err(why) = watchable(&at) {
                add("trigger.paths", format!("{p:?}: {why}"));
            }
        }
        if let Some(cycle) = cycle_from(&def.name, &names) {
            add(
                "trigger",
                format!(
                    "its chain loops: {}; remove one of these after_* entries",
                    cycle.join(" → ")
                ),
            );
        }
    }
    if bad.is_empty() {
        return;
    }
    loaded.definitions.retain(|d| !bad.contains_key(&d.name));
    for (_, mut problems) in bad {
        loaded.problems.append(&mut problems);
    }
}

/// Whether the system can watch `at`: its folder exists, and it is a file or folder if it exists.
fn watchable(at: &Path) -> Result<(), String> {
    let parent = at.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        return Err(format!(
            "its folder {} does not exist; create it first (nothing is created for you)",
            parent.display()
        ));
    }
    match std::fs::symlink_metadata(at) {
        Ok(m) => {
            if !matches!(
                crate::platform::kind_of(&m),
                "directory" | "regular file" | "symbolic link"
            ) {
                Err("is a FIFO, socket or device; watch a file or folder".into())
            } else {
                Ok(())
            }
        }
        Err(_) => Ok(()),
    }
}

/// A chain through `start` back to it, as names from upstream to downstream
/// (`["a", "b", "a"]`), if one exists. Edges go from an automation to those it follows.
fn cycle_from(start: &Name, defs: &BTreeMap<&Name, &super::Definition>) -> Option<Vec<String>> {
    fn visit(
        at: &Name,
        start: &Name,
        defs: &BTreeMap<&Name, &super::Definition>,
        path: &mut Vec<Name>,
    ) -> bool {
        let Some(tr) = defs.get(at).and_then(|d| d.trigger.as_ref()) else {
            return false;
        };
        for up in tr.upstreams() {
            // Following itself is refused on its own.
            if up == at {
                continue;
            }
            if up == start {
                path.push(up.clone());
                return true;
            }
            if path.contains(up) {
                continue;
            }
            path.push(up.clone());
            if visit(up, start, defs, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![start.clone()];
    if !visit(start, start, defs, &mut path) {
        return None;
    }
    // `path` runs downstream → upstream; a chain reads the other way.
    Some(path.iter().rev().map(ToString::to_string).collect())
}

/// Who follows whom: for each automation, the automations its firing starts when it ends ok
/// (`success`) and when it fails (`failure`). Kept in the data root (`state/chains.json`) by
/// `install`, `uninstall` and `units`, so a firing finds its followers with one small read instead
/// of reading every definition beside it; `check` says when it is older than the definitions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainIndex {
    pub v: u32,
    pub followers: BTreeMap<String, Followers>,
}

/// The followers of one automation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Followers {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success: Vec<Name>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure: Vec<Name>,
}

impl ChainIndex {
    /// The index of `defs` (pure).
    pub fn of_definitions(defs: &[super::Definition]) -> Self {
        let mut followers: BTreeMap<String, Followers> = BTreeMap::new();
        for d in defs {
            let Some(t) = &d.trigger else { continue };
            for up in &t.after_success {
                followers
                    .entry(up.to_string())
                    .or_default()
                    .success
                    .push(d.name.clone());
            }
            for up in &t.after_failure {
                followers
                    .entry(up.to_string())
                    .or_default()
                    .failure
                    .push(d.name.clone());
            }
        }
        for f in followers.values_mut() {
            f.success.sort();
            f.failure.sort();
        }
        Self { v: 1, followers }
    }

    /// The automations a firing of `upstream` that ended `ok` (or not) starts.
    pub fn followers(&self, upstream: &str, ok: bool) -> &[Name] {
        self.followers
            .get(upstream)
            .map_or(&[], |f| if ok { &f.success } else { &f.failure })
    }
}
