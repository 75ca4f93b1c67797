//! Policies for a shared machine (docs/policies.md): what a firing does when it meets a running
//! one (`overlap`), a lock shared by several automations (`lock`), the resources its whole tree may
//! take (`[limits]`) and a sandbox (`[sandbox]`, with `writes`).
//!
//! [`check_*`](check_overlap) read one file's keys; [`relations`] checks what needs the machine
//! (that every `writes` entry exists).

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Value;

use super::{Loaded, PLACEHOLDER_ROOT, Problem, Report, check_int, problem, strings};
use crate::names::{Name, truncate};

/// What a firing does when its automation (or its lock group) is already running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It does not run: a `skipped` `already_running`.
    #[default]
    Skip,
    /// It waits for the running one (at most one waits; bounded by its timeout).
    Queue,
    /// It stops the running one (recorded `stopped`, class `replaced`), then runs.
    Replace,
}

impl Overlap {
    const ALL: [Overlap; 3] = [Overlap::Skip, Overlap::Queue, Overlap::Replace];

    /// The word a definition uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Replace => "replace",
        }
    }
}

/// `io` of `[limits]`: the I/O scheduling class of the whole tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoClass {
    /// Only when no one else uses the disk (Linux `idle`; macOS low-priority I/O).
    Idle,
    /// Best effort, lowest priority (Linux best-effort 7; macOS low-priority I/O).
    Low,
    /// Best effort, normal priority (Linux best-effort 4).
    Normal,
}

impl IoClass {
    const ALL: [IoClass; 3] = [IoClass::Idle, IoClass::Low, IoClass::Normal];

    /// The word a definition uses.
    pub fn as_str(self) -> &'static str {
        match self {
            IoClass::Idle => "idle",
            IoClass::Low => "low",
            IoClass::Normal => "normal",
        }
    }
}

/// The smallest `memory_max`: the runner itself lives inside the same limit.
pub const MIN_MEMORY_BYTES: u64 = 32 << 20;
/// The smallest `tasks_max`: the runner, its keeper and the command.
pub const MIN_TASKS: u32 = 8;

/// `[limits]`: what the whole tree of a firing may take. Every key is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Bytes of memory (systemd `MemoryMax=`), as written (`"512M"`) and in bytes.
    pub memory_max: Option<Memory>,
    /// Percent of one CPU (systemd `CPUQuota=`); 200 = two CPUs.
    pub cpu_quota: Option<u32>,
    /// 0..=19 (a user's unit cannot raise its priority).
    pub nice: Option<u8>,
    /// The I/O class.
    pub io: Option<IoClass>,
    /// The most processes and threads at once (systemd `TasksMax=`).
    pub tasks_max: Option<u32>,
}

/// A memory size: the definition's words and the bytes they mean (K, M, G, T are powers of 1024,
/// as systemd reads them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub written: String,
    pub bytes: u64,
}

/// What a definition says about sharing the machine. The default is today's behaviour: skip a
/// firing that meets a running one, no shared lock, no limits, no sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub overlap: Overlap,
    /// The lock group shared with every automation naming the same one.
    pub lock: Option<Name>,
    /// With the sandbox: the only places outside the data root it may write, as written.
    pub writes: Vec<String>,
    pub limits: Limits,
    /// `[sandbox] level = "strict"`.
    pub sandbox: bool,
}

/// How long a replacing firing waits for the one it stopped to end (its runner's grace and kill
/// wait, and room to record the stop); a unit's stop timeout leaves room for it.
pub const REPLACE_WAIT_SECONDS: u32 = 30;

/// The most `writes` entries.
const MAX_WRITES: usize = 16;

/// `overlap`.
pub(super) fn check_overlap(r: &mut Report, value: &Value) -> Overlap {
    match value {
        Value::String(s) => match Overlap::ALL.iter().find(|o| o.as_str() == s) {
            Some(o) => *o,
            None => {
                r.add(
                    "overlap",
                    format!(
                        "{:?} is not a policy; use \"skip\", \"queue\" or \"replace\"",
                        truncate(s, 40)
                    ),
                );
                Overlap::Skip
            }
        },
        v => {
            r.wrong_type("overlap", "a string", v);
            Overlap::Skip
        }
    }
}

/// `lock`: a group name, spelled like an automation's.
pub(super) fn check_lock(r: &mut Report, value: &Value) -> Option<Name> {
    let Value::String(s) = value else {
        r.wrong_type("lock", "a string", value);
        return None;
    };
    match Name::new(s) {
        Ok(n) => Some(n),
        Err(e) => {
            r.add(
                "lock",
                format!("a lock group is named like an automation: {e}"),
            );
            None
        }
    }
}

/// `writes`: places the sandboxed firing may write, each `{root}/…`, `~/…` or absolute.
pub(super) fn check_writes(r: &mut Report, value: &Value, checks: &super::Checks) -> Vec<String> {
    let Some(items) = strings(r, "writes", value) else {
        return Vec::new();
    };
    if items.is_empty() {
        r.add(
            "writes",
            "is empty; name the folders it writes, or remove it",
        );
    }
    if items.len() > MAX_WRITES {
        r.add(
            "writes",
            format!("{} paths; at most {MAX_WRITES}", items.len()),
        );
    }
    let mut out: Vec<String> = Vec::new();
    for p in items {
        match check_write_path(p, checks) {
            Ok(()) if out.iter().any(|o| o == p) => {
                r.add("writes", format!("{p:?} is listed twice"));
            }
            Ok(()) => out.push(p.to_owned()),
            Err(why) => r.add("writes", format!("{:?}: {why}", truncate(p, 80))),
        }
    }
    out
}

fn check_write_path(p: &str, checks: &super::Checks) -> Result<(), String> {
    if p.chars().any(char::is_control) || p.trim() != p {
        return Err("holds a control character or starts or ends with white space".into());
    }
    if p.contains(['*', '?', '[', '%', '$', '"', '\\']) || p.contains(char::is_whitespace) {
        return Err(
            "globs, quotes, white space, `%` and `$` are not read; name the folder itself".into(),
        );
    }
    let rest = if let Some(rest) = super::trigger::anchored(p) {
        rest?
    } else if p.starts_with('/') {
        if Path::new(p) == checks.home { "" } else { p }
    } else {
        return Err(format!(
            "relative; write \"{PLACEHOLDER_ROOT}/…\" for the repository, \"~/…\" for the home folder, or an absolute path"
        ));
    };
    if !rest.starts_with('/') || rest.trim_matches('/').is_empty() {
        return Err(
            "names the whole repository, home folder or file system; name the one folder it writes"
                .into(),
        );
    }
    super::trigger::plain_steps(rest)?;
    let resolved = super::trigger::resolve(p, Path::new("/nonexistent-root"), &checks.home);
    if resolved.starts_with(&checks.data_root) {
        return Err(format!(
            "inside the data root ({}), which a sandboxed firing may write anyway",
            checks.data_root.display()
        ));
    }
    Ok(())
}

/// `[limits]`: each key checked.
pub(super) fn check_limits(r: &mut Report, value: &Value) -> Limits {
    let Value::Table(t) = value else {
        r.wrong_type("limits", "a table", value);
        return Limits::default();
    };
    let mut l = Limits::default();
    for (key, v) in t {
        let dotted = format!("limits.{key}");
        match key.as_str() {
            "memory_max" => l.memory_max = check_memory(r, &dotted, v),
            "cpu_quota" => l.cpu_quota = check_percent(r, &dotted, v),
            "nice" => l.nice = check_int(r, &dotted, v, 0, 19).map(|n| n as u8),
            "io" => match v {
                Value::String(s) => match IoClass::ALL.iter().find(|c| c.as_str() == s) {
                    Some(c) => l.io = Some(*c),
                    None => r.add(
                        &dotted,
                        format!(
                            "{:?} is not an I/O class; use \"idle\", \"low\" or \"normal\"",
                            truncate(s, 40)
                        ),
                    ),
                },
                v => r.wrong_type(&dotted, "a string", v),
            },
            "tasks_max" => {
                l.tasks_max = check_int(r, &dotted, v, i64::from(MIN_TASKS), 1_000_000);
            }
            other => r.add(
                &format!("limits.{other}"),
                "unknown key; [limits] takes memory_max, cpu_quota, nice, io and tasks_max",
            ),
        }
    }
    if t.is_empty() {
        r.add("limits", "sets nothing; add a limit or remove the table");
    }
    l
}

/// `"512M"`, `"2G"`, `"1.5G"` or a number of bytes.
fn check_memory(r: &mut Report, key: &str, v: &Value) -> Option<Memory> {
    let parsed = match v {
        Value::Integer(i) if *i > 0 && *i <= 1 << 50 => Ok((i.to_string(), *i as u64)),
        Value::String(s) => parse_memory(s).map(|b| (s.clone(), b)),
        Value::Integer(i) => Err(format!("{i} is not a size")),
        v => {
            r.wrong_type(key, "a size such as \"512M\"", v);
            return None;
        }
    };
    match parsed {
        Ok((_, bytes)) if bytes < MIN_MEMORY_BYTES => {
            r.add(
                key,
                format!(
                    "{bytes} bytes is below {} MiB; the runner itself needs a few MiB inside the same limit",
                    MIN_MEMORY_BYTES >> 20
                ),
            );
            None
        }
        Ok((written, bytes)) => Some(Memory { written, bytes }),
        Err(why) => {
            r.add(key, why);
            None
        }
    }
}

fn parse_memory(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{:?} is not a size; write a number with K, M, G or T (powers of 1024), such as \"512M\"",
            truncate(s, 40)
        )
    };
    let (number, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((at, _)) => (&s[..at], &s[at..]),
        None => (s, ""),
    };
    let scale: u64 = match unit {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        _ => return Err(bad()),
    };
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * scale as f64;
    if !(1.0..=(1u64 << 50) as f64).contains(&bytes) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// `"50%"`: percent of one CPU, 1..=10000.
fn check_percent(r: &mut Report, key: &str, v: &Value) -> Option<u32> {
    let Value::String(s) = v else {
        r.wrong_type(key, "a percentage such as \"50%\"", v);
        return None;
    };
    match s.strip_suffix('%').and_then(|n| n.parse::<u32>().ok()) {
        Some(p) if (1..=10_000).contains(&p) => Some(p),
        _ => {
            r.add(
                key,
                format!(
                    "{:?} is not a quota; write a percentage of one CPU, 1% to 10000% (\"200%\" is two CPUs)",
                    truncate(s, 40)
                ),
            );
            None
        }
    }
}

/// `[sandbox]`: `level = "off" | "strict"`; whether it is strict.
pub(super) fn check_sandbox(r: &mut Report, value: &Value) -> bool {
    let Value::Table(t) = value else {
        r.wrong_type("sandbox", "a table", value);
        return false;
    };
    let mut strict = false;
    for (key, v) in t {
        match (key.as_str(), v) {
            ("level", Value::String(s)) if s == "strict" => strict = true,
            ("level", Value::String(s)) if s == "off" => {}
            ("level", Value::String(s)) => r.add(
                "sandbox.level",
                format!("{:?} is not a level; use \"off\" or \"strict\"", truncate(s, 40)),
            ),
            ("level", v) => r.wrong_type("sandbox.level", "a string", v),
            (other, _) => r.add(
                &format!("sandbox.{other}"),
                "unknown key; [sandbox] takes level (the places it writes are the top-level writes)",
            ),
        }
    }
    if !t.contains_key("level") {
        r.add(
            "sandbox.level",
            "missing; write level = \"strict\" (or remove the table)",
        );
    }
    strict
}

/// What the keys say together: `writes` needs the sandbox; a queued firing must not wait past the
/// next one.
pub(super) fn combined(
    r: &mut Report,
    policy: &Policy,
    timeout_seconds: u32,
    schedule: Option<&crate::schedule::Schedule>,
) {
    if !policy.writes.is_empty() && !policy.sandbox {
        r.add(
            "writes",
            "only means something in a sandbox; add [sandbox] level = \"strict\", or remove writes",
        );
    }
    if policy.overlap == Overlap::Queue
        && let Some(s) = schedule.filter(|s| !s.at_login())
    {
        let gap = s.shortest_gap_seconds();
        if timeout_seconds > gap {
            r.add(
                "overlap",
                format!(
                    "\"queue\" with timeout_seconds {timeout_seconds} longer than the shortest time between two firings ({gap} s): queued firings would pile up; lower timeout_seconds or use \"skip\" or \"replace\""
                ),
            );
        }
    }
}

/// Checks what needs the machine: every `writes` entry exists, is a folder or file, and is
/// reached through no link (see [`resolve_write`]). A definition with such a problem moves from
/// `definitions` to `problems`.
pub fn relations(loaded: &mut Loaded, root: &Path, checks: &super::Checks) {
    let mut bad: Vec<(Name, Problem)> = Vec::new();
    for def in &loaded.definitions {
        for p in &def.policy.writes {
            let Err(why) = resolve_write(p, root, checks) else {
                continue;
            };
            let file = format!("{}.toml", def.name);
            bad.push((
                def.name.clone(),
                problem(&file, "writes", format!("{p:?}: {why}")),
            ));
        }
    }
    if bad.is_empty() {
        return;
    }
    loaded
        .definitions
        .retain(|d| !bad.iter().any(|(n, _)| *n == d.name));
    loaded.problems.extend(bad.into_iter().map(|(_, p)| p));
}

/// One `writes` entry where it is on this machine, with no link left in it: a folder or file that
/// exists, reached through no link below the home folder or the repository it is written against,
/// or below `/` for an absolute one (a link could be re-pointed later, by a `git pull`, and move
/// what the sandbox lets it write without anyone approving it), and holding none of the places
/// only the runner and the person write (see [`guarded`]). The home folder or repository itself
/// may be a link (Fedora Silverblue's /home is): it is resolved. Or why not.
pub fn resolve_write(entry: &str, root: &Path, checks: &super::Checks) -> Result<PathBuf, String> {
    let at = super::trigger::resolve(entry, root, &checks.home);
    let base = if entry.starts_with("~/") {
        checks.home.as_path()
    } else if entry.starts_with(PLACEHOLDER_ROOT) {
        root
    } else {
        Path::new("/")
    };
    match crate::fsutil::link_below(base, &at) {
        Ok(None) => {}
        Ok(Some((link, to))) => {
            return Err(format!(
                "{} is a link (to {}); name the place it points to, so that changing the link later cannot move what a strict run may write",
                link.display(),
                to.display()
            ));
        }
        Err(e) => return Err(format!("cannot be read ({}): {e}", at.display())),
    }
    let real = match std::fs::metadata(&at).and_then(|m| Ok((m, std::fs::canonicalize(&at)?))) {
        Ok((m, real)) if m.is_dir() || m.is_file() => real,
        Ok(_) => return Err(format!("{} is not a folder or file", at.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "does not exist ({}); create it first",
                at.display()
            ));
        }
        Err(e) => return Err(format!("cannot be read ({}): {e}", at.display())),
    };
    for (what, place) in guarded(checks) {
        if place.starts_with(&real) {
            return Err(format!(
                "holds {what} ({}), which a strict command may not write; name a folder beside it",
                place.display()
            ));
        }
    }
    Ok(real)
}

/// The places a `writes` entry may not hold, each where it really is: the data root's folder
/// (the run log, state, env files and settings of every namespace: only the runner writes them)
/// and the folder the service manager reads units from (a unit left there would run unconfined).
fn guarded(checks: &super::Checks) -> [(&'static str, PathBuf); 2] {
    [
        (
            "the data root",
            real_place(&hidden_folder(&checks.data_root)),
        ),
        ("the folder of user units", real_place(&checks.units_dir)),
    ]
}

/// The folder a strict command may neither read nor write: the data root, or the `automations`
/// folder that holds it and the data roots of other namespaces beside it.
pub fn hidden_folder(data_root: &Path) -> PathBuf {
    let real = real_place(data_root);
    match real.parent() {
        Some(parent) if parent.file_name().is_some_and(|n| n == "automations") => {
            parent.to_path_buf()
        }
        _ => real,
    }
}

/// Where `p` really is: its nearest existing folder resolved, the rest (not made yet) appended.
fn real_place(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |acc, step| acc.join(step));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(step)) => {
                rest.push(step.to_owned());
                at = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn memory_sizes_are_read_as_systemd_reads_them() {
        assert_eq!(parse_memory("512M"), Ok(512 << 20));
        assert_eq!(parse_memory("1G"), Ok(1 << 30));
        assert_eq!(parse_memory("1.5G"), Ok(3 << 29));
        assert_eq!(parse_memory("4096"), Ok(4096));
        for bad in ["lots", "", "M", "12MB", "-5M", "1e9", "1.2.3G", "0"] {
            assert!(parse_memory(bad).is_err(), "{bad:?} was read");
        }
    }
}
