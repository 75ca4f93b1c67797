//! `import systemd` (docs/moving-in.md): a user `.timer` with its `.service`, or a `.path` with
//! its service, read into the definition that fires the same: `OnCalendar=` in systemd's calendar
//! syntax becomes `[schedule] cron` (or `daily_at`), `OnBootSec=`/`OnStartupSec=` a run at login,
//! `OnUnitActiveSec=` `every_minutes`, `RandomizedDelaySec=` the jitter; `ExecStart=` the argv,
//! `Environment=`/`EnvironmentFile=` private env-file values; `MemoryMax=`, `CPUQuota=`, `Nice=`,
//! `IOSchedulingClass=` the limits; `PathChanged=`, `PathModified=`, `DirectoryNotEmpty=` the
//! trigger; `OnSuccess=`/`OnFailure=` a chain. A key it cannot say is refused by name, never
//! dropped in silence.

use std::path::{Path, PathBuf};

use super::retire::Original;
use super::when::{CronFields, schedule_keys};
use super::{Context, Draft, Given, Row, Status, home_as_tilde, place_for, quote, quote_all};
use crate::definition::{self, PLACEHOLDER_ROOT};
use crate::names::EnvName;
use crate::schedule::ZoneName;

/// The largest unit file (or env file) read.
const MAX_UNIT_BYTES: u64 = 256 * 1024;

/// A unit file and its drop-ins, as `(section, key, value)` in the order systemd reads them.
#[derive(Debug, Default)]
pub struct Unit {
    pub entries: Vec<(String, String, String)>,
}

impl Unit {
    /// Reads `path` and its drop-ins (`<path>.d/*.conf`, by name).
    pub fn read(path: &Path) -> Result<Self, String> {
        let mut unit = Unit::default();
        unit.add(path)?;
        let mut dropins = PathBuf::from(path);
        dropins.as_mut_os_string().push(".d");
        if let Ok(list) = crate::fsutil::list_named(&dropins, "", &[".conf"]) {
            for (_, p) in list {
                unit.add(&p)?;
            }
        }
        Ok(unit)
    }

    fn add(&mut self, path: &Path) -> Result<(), String> {
        let bytes = crate::fsutil::read_following(path, MAX_UNIT_BYTES + 1)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.len() as u64 > MAX_UNIT_BYTES {
            return Err(format!(
                "{}: larger than 256 KiB; no unit file",
                path.display()
            ));
        }
        let text =
            String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
        self.parse(&text)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// systemd's unit syntax: `[Section]`, `Key=Value`, `#`/`;` comments, a trailing `\` joins
    /// the next line.
    pub fn parse(&mut self, text: &str) -> Result<(), String> {
        let mut section = String::new();
        let mut pending = String::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if pending.is_empty() && (line.starts_with('#') || line.starts_with(';')) {
                continue;
            }
            if let Some(joined) = line.strip_suffix('\\') {
                pending.push_str(joined);
                pending.push(' ');
                continue;
            }
            let line = if pending.is_empty() {
                line.to_owned()
            } else {
                std::mem::take(&mut pending) + line
            };
            if line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_owned();
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: no Key=Value", i + 1))?;
            if section.is_empty() {
                return Err(format!("line {}: a key before any [Section]", i + 1));
            }
            self.entries.push((
                section.clone(),
                key.trim().to_owned(),
                value.trim().to_owned(),
            ));
        }
        Ok(())
    }

    /// Every value of `section`'s `key`, an empty one resetting the list, as systemd does.
    pub fn all(&self, section: &str, key: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (s, k, v) in &self.entries {
            if s == section && k == key {
                if v.is_empty() {
                    out.clear();
                } else {
                    out.push(v.as_str());
                }
            }
        }
        out
    }

    /// The last value of `section`'s `key`.
    pub fn last(&self, section: &str, key: &str) -> Option<&str> {
        self.all(section, key).last().copied()
    }
}

/// Keys read (or knowingly passed over, with a note) per section; any other key is refused by
/// name.
const KNOWN: &[(&str, &[&str])] = &[
    (
        "Unit",
        &[
            "Description",
            "Documentation",
            "After",
            "Before",
            "Wants",
            "Requires",
            "OnSuccess",
            "OnFailure",
        ],
    ),
    (
        "Timer",
        &[
            "OnCalendar",
            "OnBootSec",
            "OnStartupSec",
            "OnUnitActiveSec",
            "Persistent",
            "RandomizedDelaySec",
            "AccuracySec",
            "Unit",
        ],
    ),
    (
        "Path",
        &[
            "PathChanged",
            "PathModified",
            "DirectoryNotEmpty",
            "Unit",
            "MakeDirectory",
        ],
    ),
    (
        "Service",
        &[
            "Type",
            "ExecStart",
            "Environment",
            "EnvironmentFile",
            "WorkingDirectory",
            "MemoryMax",
            "CPUQuota",
            "Nice",
            "IOSchedulingClass",
            "TimeoutStartSec",
            "StandardOutput",
            "StandardError",
            "SyslogIdentifier",
        ],
    ),
    ("Install", &["WantedBy", "Also"]),
];

/// What a unit pair becomes, before its chains are known.
struct Read {
    name: String,
    description: Option<String>,
    command: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Option<u32>,
    schedule: Vec<(String, String)>,
    trigger: Vec<(String, String)>,
    limits: Vec<(String, String)>,
    /// The services it starts: (after_success or after_failure, unit name).
    starts: Vec<(&'static str, String)>,
    service_name: String,
    files: Vec<PathBuf>,
}

/// Reads each arm (`.timer` or `.path`) named into one row; chains between them are joined at
/// the end (`OnSuccess=` names a service imported with it).
pub fn plan(arms: &[PathBuf], cx: &Context<'_>) -> Vec<Row> {
    let mut given = Given::default();
    let mut read: Vec<(Row, Option<Read>)> = Vec::new();
    for arm in arms {
        let shown = arm.display().to_string();
        let file = arm
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut row = Row::new(None, Some(home_as_tilde(&shown, cx.home)), file.clone());
        let result = read_pair(arm, cx, &mut given, &mut row);
        match result {
            Ok(r) => read.push((row, Some(r))),
            Err(why) => {
                row.reason = Some(why);
                read.push((row, None));
            }
        }
    }
    join_chains(&mut read);
    read.into_iter()
        .map(|(mut row, r)| {
            if let Some(r) = r
                && row.reason.is_none()
            {
                finish(&mut row, r, cx);
            }
            row
        })
        .collect()
}

/// The arm and its service.
fn read_pair(
    arm: &Path,
    cx: &Context<'_>,
    given: &mut Given,
    row: &mut Row,
) -> Result<Read, String> {
    let file = arm.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    let (stem, kind) = match file.rsplit_once('.') {
        Some((stem, k @ ("timer" | "path"))) => (stem, k),
        Some((_, "service")) => {
            return Err("a service alone is started by nothing: import its .timer or .path".into());
        }
        _ => return Err("not a .timer or .path unit".into()),
    };
    if stem.contains('@') {
        return Err("a template unit (name@.timer): import an instance's units by hand".into());
    }
    let arm_unit = Unit::read(arm)?;
    let section = if kind == "timer" { "Timer" } else { "Path" };
    let service_name = arm_unit
        .last(section, "Unit")
        .map_or_else(|| format!("{stem}.service"), str::to_owned);
    let service_path = arm.with_file_name(&service_name);
    let service = Unit::read(&service_path)?;
    refuse_unknown(&arm_unit, &service)?;
    let name = given.names.give(stem);
    row.name = Some(name.clone());
    let mut r = Read {
        name,
        description: None,
        command: Vec::new(),
        env: Vec::new(),
        timeout: None,
        schedule: Vec::new(),
        trigger: Vec::new(),
        limits: Vec::new(),
        starts: Vec::new(),
        service_name: service_name.clone(),
        files: vec![arm.to_path_buf(), service_path.clone()],
    };
    for p in [arm, service_path.as_path()] {
        let mut dir = PathBuf::from(p);
        dir.as_mut_os_string().push(".d");
        if dir.is_dir() {
            r.files.push(dir);
        }
    }
    if let Some(desc) = service
        .last("Unit", "Description")
        .or(arm_unit.last("Unit", "Description"))
    {
        match super::safe_description(desc) {
            Ok(d) => r.description = Some(d),
            Err(why) => row
                .notes
                .push(format!("its Description= is not carried over: {why}")),
        }
    }
    if kind == "timer" {
        timer(&arm_unit, &mut r, row)?;
    } else {
        path_trigger(&arm_unit, &mut r, cx)?;
    }
    service_keys(&service, &mut r, cx, given, row)?;
    for (key, word) in [
        ("OnSuccess", "after_success"),
        ("OnFailure", "after_failure"),
    ] {
        for v in service.all("Unit", key) {
            for unit in v.split_whitespace() {
                r.starts.push((word, unit.to_owned()));
            }
        }
    }
    row.original = Some(Original::SystemdUnit {
        unit: file.to_owned(),
        files: r.files.clone(),
    });
    Ok(r)
}

/// Refuses a key neither read nor knowingly passed over, naming it.
fn refuse_unknown(arm: &Unit, service: &Unit) -> Result<(), String> {
    for (s, k, _) in arm.entries.iter().chain(&service.entries) {
        let known = KNOWN
            .iter()
            .find(|(section, _)| section == s)
            .is_some_and(|(_, keys)| keys.contains(&k.as_str()));
        if !known {
            return Err(format!(
                "[{s}] {k}= has no equivalent here; remove it from the unit, or move this job by hand"
            ));
        }
    }
    Ok(())
}

/// `[Timer]`: the schedule.
fn timer(unit: &Unit, r: &mut Read, row: &mut Row) -> Result<(), String> {
    let calendars = unit.all("Timer", "OnCalendar");
    let at_login =
        !unit.all("Timer", "OnBootSec").is_empty() || !unit.all("Timer", "OnStartupSec").is_empty();
    let every = unit.last("Timer", "OnUnitActiveSec");
    match (calendars.as_slice(), every) {
        ([], None) if at_login => r.schedule.push(("at_login".into(), "true".into())),
        ([], None) => {
            return Err(
                "its timer has no OnCalendar=, OnBootSec=, OnStartupSec= or OnUnitActiveSec="
                    .into(),
            );
        }
        ([], Some(span)) => {
            let secs = time_span(span)?;
            if secs % 60 != 0 || !(60..=86_400).contains(&secs) {
                return Err(format!(
                    "OnUnitActiveSec={span} is not a whole number of minutes from 1 to 1440"
                ));
            }
            let minutes = secs / 60;
            r.schedule
                .push(("every_minutes".into(), minutes.to_string()));
            if crate::schedule::is_grid(minutes as u32) {
                row.notes.push(format!(
                    "OnUnitActiveSec={span}: every {minutes} minutes on the wall clock (from the hour), not counted from the last start"
                ));
            }
            if at_login {
                r.schedule.push(("at_login".into(), "true".into()));
            }
        }
        (list, None) => {
            let keys = calendar_keys(list)?;
            let is_cron = keys.iter().any(|(k, _)| k == "cron");
            if at_login && is_cron {
                return Err("OnBootSec=/OnStartupSec= beside an OnCalendar= that is no daily time: a cron schedule has no run at login here; move it by hand".into());
            }
            if let Some((_, zone)) = keys.iter().find(|(k, _)| k == "time_zone") {
                row.notes.push(format!(
                    "its OnCalendar= names the zone {zone}: kept as time_zone, which systemd keeps and launchd and Task Scheduler cannot (they refuse it by name)"
                ));
            }
            r.schedule.extend(keys);
            if at_login {
                r.schedule.push(("at_login".into(), "true".into()));
            }
        }
        (_, Some(_)) => {
            return Err(
                "OnCalendar= beside OnUnitActiveSec=: one schedule here; move it by hand".into(),
            );
        }
    }
    if !unit.all("Timer", "OnBootSec").is_empty() || !unit.all("Timer", "OnStartupSec").is_empty() {
        row.notes.push("OnBootSec=/OnStartupSec=: runs once when the user's manager starts (at_login), without the delay".into());
    }
    if unit.last("Timer", "Persistent") != Some("true")
        && !r.schedule.iter().any(|(k, _)| k == "every_minutes")
    {
        row.notes.push("a slot missed while the machine slept or was off runs once on wake here (systemd did that only with Persistent=true)".into());
    }
    if let Some(span) = unit.last("Timer", "RandomizedDelaySec") {
        let secs = time_span(span)?;
        if secs > 0 {
            r.schedule.push(("jitter_seconds".into(), secs.to_string()));
        }
    }
    if unit.last("Timer", "AccuracySec").is_some() {
        row.notes
            .push("AccuracySec= is passed over: units here fire within a second".into());
    }
    Ok(())
}

/// `[Path]`: the watched paths.
fn path_trigger(unit: &Unit, r: &mut Read, cx: &Context<'_>) -> Result<(), String> {
    let mut on: Option<&str> = None;
    let mut paths: Vec<String> = Vec::new();
    for (key, word) in [
        ("PathChanged", "changed"),
        ("PathModified", "modified"),
        ("DirectoryNotEmpty", "not_empty"),
    ] {
        let values = unit.all("Path", key);
        if values.is_empty() {
            continue;
        }
        if on.is_some_and(|o| o != word) {
            return Err("it watches paths in more than one way (PathChanged=, PathModified=, DirectoryNotEmpty=): one way per automation here".into());
        }
        on = Some(word);
        for v in values {
            let v = v.strip_prefix("%h").map_or_else(
                || v.to_owned(),
                |rest| format!("{}{rest}", cx.home.display()),
            );
            let p = Path::new(&v);
            let rest = p.strip_prefix(cx.home).map_err(|_| {
                format!("{key}={v} lies outside the home folder; watched paths are under home or the repository")
            })?;
            paths.push(format!("~/{}", rest.display()));
        }
    }
    let Some(on) = on else {
        return Err(
            "its path unit watches nothing (no PathChanged=, PathModified= or DirectoryNotEmpty=)"
                .into(),
        );
    };
    r.trigger.push(("paths".into(), quote_all(&paths)));
    r.trigger.push(("on".into(), quote(on)));
    Ok(())
}

/// `[Service]`: the command, its environment, limits and timeout.
fn service_keys(
    unit: &Unit,
    r: &mut Read,
    cx: &Context<'_>,
    given: &mut Given,
    row: &mut Row,
) -> Result<(), String> {
    if let Some(t) = unit.last("Service", "Type")
        && !matches!(t, "oneshot" | "simple" | "exec")
    {
        return Err(format!(
            "Type={t}: a job here is a command that runs and ends (oneshot)"
        ));
    }
    let exec = unit.all("Service", "ExecStart");
    let line =
        match exec.as_slice() {
            [one] => *one,
            [] => return Err("its service has no ExecStart=".into()),
            _ => return Err(
                "several ExecStart= lines: put them in one script and import a unit that runs it"
                    .into(),
            ),
        };
    if line.starts_with(['@', '-', ':', '+', '!']) {
        return Err(format!(
            "ExecStart={line}: its prefix ({}) has no equivalent here",
            &line[..1]
        ));
    }
    let argv = exec_words(line, cx.home)?;
    r.command = command(argv, cx, given, row)?;
    match unit.last("Service", "WorkingDirectory") {
        Some(dir) => {
            let home = cx.home.display().to_string();
            let dir = match dir.strip_prefix('-').unwrap_or(dir) {
                "~" | "%h" => home,
                d => d.replace("%h", &home),
            };
            if !Path::new(&dir).is_absolute() {
                return Err(format!("WorkingDirectory={dir} is no absolute path"));
            }
            let (rel, bytes) =
                super::starts_in("systemd", &r.name, &dir, cx.home, cx.root, &r.command)?;
            row.notes.push(format!(
                "runs as {rel}, written for it (pinned), which starts it in {} as systemd did",
                home_as_tilde(&dir, cx.home)
            ));
            r.command = vec![format!("{PLACEHOLDER_ROOT}/{rel}")];
            row.files.scripts.push((rel, bytes));
        }
        None => row.notes.push(
            "systemd ran it from the home folder; here it runs from the repository root".into(),
        ),
    }
    environment(unit, r, cx)?;
    limits(unit, r)?;
    if let Some(t) = unit.last("Service", "TimeoutStartSec") {
        let secs = time_span(t)?;
        if (1..=u64::from(definition::MAX_TIMEOUT_SECONDS)).contains(&secs) {
            r.timeout = Some(secs as u32);
        }
    }
    for key in ["StandardOutput", "StandardError", "SyslogIdentifier"] {
        if unit.last("Service", key).is_some() {
            row.notes.push(format!(
                "{key}= is dropped: output reaches the run log (`automations show NAME`)"
            ));
        }
    }
    Ok(())
}

/// `Environment=` and `EnvironmentFile=` as env-file values.
fn environment(unit: &Unit, r: &mut Read, cx: &Context<'_>) -> Result<(), String> {
    for v in unit.all("Service", "Environment") {
        for pair in exec_words(v, cx.home)? {
            let (k, val) = pair
                .split_once('=')
                .ok_or_else(|| format!("Environment={v}: {pair} is no NAME=value"))?;
            env_value(&mut r.env, k, val)?;
        }
    }
    for v in unit.all("Service", "EnvironmentFile") {
        let (optional, file) = v.strip_prefix('-').map_or((false, v), |f| (true, f));
        let file = file.replace("%h", &cx.home.display().to_string());
        match crate::fsutil::read_following(Path::new(&file), MAX_UNIT_BYTES) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                for l in text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with(['#', ';']))
                {
                    let (k, val) = l.split_once('=').ok_or_else(|| {
                        format!("EnvironmentFile={file}: a line is no NAME=value")
                    })?;
                    let val = val.trim().trim_matches(['"', '\'']);
                    env_value(&mut r.env, k.trim(), val)?;
                }
            }
            Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("EnvironmentFile={file}: {e}")),
        }
    }
    Ok(())
}

/// `MemoryMax=`, `CPUQuota=`, `Nice=` and `IOSchedulingClass=` as `[limits]` keys.
fn limits(unit: &Unit, r: &mut Read) -> Result<(), String> {
    if let Some(m) = unit.last("Service", "MemoryMax") {
        r.limits.push(("memory_max".into(), quote(m)));
    }
    if let Some(c) = unit.last("Service", "CPUQuota") {
        r.limits.push(("cpu_quota".into(), quote(c)));
    }
    if let Some(n) = unit.last("Service", "Nice") {
        let n: i32 = n.parse().map_err(|_| format!("Nice={n} is no number"))?;
        if !(0..=19).contains(&n) {
            return Err(format!(
                "Nice={n}: only 0 to 19 here (a user cannot raise priority)"
            ));
        }
        r.limits.push(("nice".into(), n.to_string()));
    }
    if let Some(c) = unit.last("Service", "IOSchedulingClass") {
        let io = match c {
            "idle" | "3" => "idle",
            "best-effort" | "2" => "normal",
            other => {
                return Err(format!(
                    "IOSchedulingClass={other} has no equivalent here (idle, best-effort)"
                ));
            }
        };
        r.limits.push(("io".into(), quote(io)));
    }
    Ok(())
}

/// `NAME=value` into the env file's values; a name a definition may not list is refused.
fn env_value(env: &mut Vec<(String, String)>, k: &str, v: &str) -> Result<(), String> {
    EnvName::new(k).map_err(|e| format!("Environment {k}: {e}"))?;
    env.retain(|(n, _)| n != k);
    env.push((k.to_owned(), v.to_owned()));
    Ok(())
}

/// The argv, a script under home copied into the repository (with --copy-scripts).
fn command(
    argv: Vec<String>,
    cx: &Context<'_>,
    given: &mut Given,
    row: &mut Row,
) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(argv.len());
    for (i, a) in argv.into_iter().enumerate() {
        let p = Path::new(&a);
        if p.starts_with(cx.home) {
            let is_file = std::fs::metadata(p).is_ok_and(|m| m.is_file());
            let shown = home_as_tilde(&a, cx.home);
            if !is_file {
                return Err(format!(
                    "ExecStart= names {shown}, under the home folder, which a definition may not name"
                ));
            }
            if !cx.copy_scripts {
                return Err(format!(
                    "it runs {shown}, under the home folder, which definitions may not name: --copy-scripts copies it into scripts/ (versioned and pinned there)"
                ));
            }
            let rel = place_for(p, cx.root, cx.home, given)?;
            row.notes.push(format!("copies {shown} to {rel}"));
            row.files.copies.push((p.to_path_buf(), rel.clone()));
            out.push(format!("{PLACEHOLDER_ROOT}/{rel}"));
        } else {
            if i == 0 && !p.is_absolute() && a.contains('/') {
                return Err(format!("ExecStart= runs {a}, a relative path"));
            }
            out.push(a);
        }
    }
    Ok(out)
}

/// `ExecStart=`'s words as systemd splits them: spaces, double and single quotes, backslash
/// escapes; `%h` is the home folder and `%%` a `%`; any other specifier, and `$VAR`, are refused.
pub fn exec_words(line: &str, home: &Path) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    let home = home.display().to_string();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        let quote = matches!(first, '"' | '\'').then(|| {
            chars.next();
            first
        });
        loop {
            let Some(c) = chars.next() else {
                if quote.is_some() {
                    return Err(format!("{line}: a quote is never closed"));
                }
                break;
            };
            match c {
                c if Some(c) == quote => break,
                c if quote.is_none() && c.is_ascii_whitespace() => break,
                '\\' => match chars.next() {
                    Some('n') => word.push('\n'),
                    Some('t') => word.push('\t'),
                    Some(c) => word.push(c),
                    None => {}
                },
                '%' => match chars.next() {
                    Some('%') => word.push('%'),
                    Some('h') => word.push_str(&home),
                    Some(s) => {
                        return Err(format!("{line}: the specifier %{s} has no equivalent here"));
                    }
                    None => return Err(format!("{line}: a lone %")),
                },
                '$' => {
                    return Err(format!(
                        "{line}: it expands variables ($), which a definition's argv does not"
                    ));
                }
                c => word.push(c),
            }
        }
        words.push(word);
    }
    if words.is_empty() {
        return Err(format!("{line}: no command"));
    }
    Ok(words)
}

/// A systemd time span (`5min`, `1h 30min`, `90`, `2d`) in seconds.
pub fn time_span(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is no time span");
    let mut total: u64 = 0;
    let compact: String = s.split_whitespace().collect();
    let mut rest = compact.as_str();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match unit {
            "" | "s" | "sec" | "second" | "seconds" => 1,
            "m" | "min" | "minute" | "minutes" => 60,
            "h" | "hr" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 604_800,
            "ms" | "msec" | "us" | "usec" => 0,
            _ => return Err(bad()),
        };
        total = total.saturating_add(n.saturating_mul(factor));
    }
    Ok(total)
}

/// The `[schedule]` keys that fire where `OnCalendar=` lines fire: and their zone, when the
/// lines name one (all the same one), as `time_zone`.
fn calendar_keys(list: &[&str]) -> Result<Vec<(String, String)>, String> {
    let zoned: Vec<(CronFields, Option<ZoneName>)> = list
        .iter()
        .map(|c| calendar_cron(c))
        .collect::<Result<_, _>>()?;
    let zone = zoned.first().and_then(|(_, z)| *z);
    if let Some((_, other)) = zoned.iter().find(|(_, z)| *z != zone) {
        let name =
            |z: &Option<ZoneName>| z.map_or("none (the machine's)".to_owned(), |z| z.to_string());
        return Err(format!(
            "its OnCalendar= lines name different zones ({} and {}); a definition's schedule has one time_zone: move it by hand",
            name(&zone),
            name(other)
        ));
    }
    let crons: Vec<CronFields> = zoned.into_iter().map(|(c, _)| c).collect();
    let mut keys = schedule_keys(&crons).ok_or_else(|| {
        "several OnCalendar= lines that are no one cron expression nor daily times: move it by hand"
            .to_owned()
    })?;
    if let Some(z) = zone {
        keys.push(("time_zone".to_owned(), quote(z.name())));
    }
    Ok(keys)
}

/// One `OnCalendar=` as cron fields, and the zone it names; what cron cannot say (seconds,
/// years, `~`, a day of the month *and* of the week) is refused by name.
fn calendar_cron(spec: &str) -> Result<(CronFields, Option<ZoneName>), String> {
    let refuse = |why: &str| format!("OnCalendar={spec}: {why}");
    let mut tokens: Vec<&str> = spec.split_whitespace().collect();
    // A zone is its last word: `UTC`, or an IANA name.
    let mut zone = None;
    if tokens.len() > 1 {
        let last = *tokens.last().unwrap_or(&"");
        if !last.contains(':') && !last.contains('-')
            || last.contains('/') && last.chars().any(|c| c.is_ascii_alphabetic())
        {
            zone = Some(ZoneName::parse(last).map_err(|e| refuse(&e))?);
            tokens.pop();
        }
    }
    let spec_alone = tokens.join(" ");
    if let Some(fields) = shorthand(&spec_alone) {
        return Ok((fields, zone));
    }
    let weekday = match tokens.first() {
        Some(t) if t.starts_with(|c: char| c.is_ascii_alphabetic()) => {
            let w = weekday_field(t).map_err(|e| refuse(&e))?;
            tokens.remove(0);
            w
        }
        _ => "*".to_owned(),
    };
    let (mut date, mut time) = (None, None);
    for t in tokens {
        if t.contains(':') && time.is_none() {
            time = Some(t);
        } else if t.contains('-') && date.is_none() && time.is_none() {
            date = Some(t);
        } else {
            return Err(refuse(&format!("{t:?} is not read here")));
        }
    }
    let (month, day) = date
        .map_or_else(|| Ok(("*".into(), "*".into())), date_fields)
        .map_err(|e| refuse(&e))?;
    let (hour, minute) = time
        .map_or_else(|| Ok(("0".into(), "0".into())), time_fields)
        .map_err(|e| refuse(&e))?;
    if day != "*" && weekday != "*" {
        return Err(refuse(
            "it restricts both the day of the month and the weekday (both must hold in systemd; cron fires when either does)",
        ));
    }
    Ok((
        CronFields {
            minute,
            hour,
            day,
            month,
            weekday,
        },
        zone,
    ))
}

/// systemd's shorthands (`daily`, `weekly`, …) as cron fields.
fn shorthand(spec: &str) -> Option<CronFields> {
    let f = |m: &str, h: &str, d: &str, mo: &str, w: &str| CronFields {
        minute: m.into(),
        hour: h.into(),
        day: d.into(),
        month: mo.into(),
        weekday: w.into(),
    };
    Some(match spec.trim().to_ascii_lowercase().as_str() {
        "minutely" => f("*", "*", "*", "*", "*"),
        "hourly" => f("0", "*", "*", "*", "*"),
        "daily" => f("0", "0", "*", "*", "*"),
        "weekly" => f("0", "0", "*", "*", "1"),
        "monthly" => f("0", "0", "1", "*", "*"),
        "yearly" | "annually" => f("0", "0", "1", "1", "*"),
        "quarterly" => f("0", "0", "1", "1,4,7,10", "*"),
        "semiannually" => f("0", "0", "1", "1,7", "*"),
        _ => return None,
    })
}

/// `[YYYY-]MM-DD` as the month and day fields; a year or a day from the month's end refused.
fn date_fields(date: &str) -> Result<(String, String), String> {
    let parts: Vec<&str> = date.split('-').collect();
    let (y, m, d) = match parts.as_slice() {
        [y, m, d] => (*y, *m, *d),
        [m, d] => ("*", *m, *d),
        _ => return Err("its date is no [YYYY-]MM-DD".into()),
    };
    if y != "*" {
        return Err("it names years, which a schedule here does not".into());
    }
    if d.contains('~') {
        return Err("it counts days from the month's end (~), which cron cannot".into());
    }
    Ok((field(m, 1, 12)?, field(d, 1, 31)?))
}

/// `HH:MM[:SS]` as the hour and minute fields; seconds other than 0 refused.
fn time_fields(time: &str) -> Result<(String, String), String> {
    let parts: Vec<&str> = time.split(':').collect();
    let (h, m, s) = match parts.as_slice() {
        [h, m] => (*h, *m, "00"),
        [h, m, s] => (*h, *m, *s),
        _ => return Err("its time is no HH:MM[:SS]".into()),
    };
    if !matches!(s, "0" | "00") {
        return Err(
            "it fires on seconds, which a schedule here does not (minutes are the finest)".into(),
        );
    }
    Ok((field(h, 0, 23)?, field(m, 0, 59)?))
}

/// One calendar component (`*`, `5`, `1,15`, `8..18`, `0/15`, `8..18/2`) as a cron field.
fn field(v: &str, lo: u32, hi: u32) -> Result<String, String> {
    if v == "*" {
        return Ok("*".into());
    }
    let num = |n: &str| -> Result<u32, String> {
        let n: u32 = n.parse().map_err(|_| format!("{v:?} is not read here"))?;
        if (lo..=hi).contains(&n) {
            Ok(n)
        } else {
            Err(format!("{n} is out of range {lo}..{hi}"))
        }
    };
    let mut out = Vec::new();
    for item in v.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (
                r,
                Some(
                    s.parse::<u32>()
                        .map_err(|_| format!("{v:?}: its step is no number"))?,
                ),
            ),
            None => (item, None),
        };
        let text = match (range.split_once(".."), step) {
            (Some((a, b)), None) => format!("{}-{}", num(a)?, num(b)?),
            (Some((a, b)), Some(s)) => format!("{}-{}/{s}", num(a)?, num(b)?),
            (None, Some(s)) if range == "*" => format!("*/{s}"),
            (None, Some(s)) => format!("{}-{hi}/{s}", num(range)?),
            (None, None) => num(range)?.to_string(),
        };
        out.push(text);
    }
    Ok(out.join(","))
}

/// `Mon`, `Mon..Fri`, `Sat,Sun` as a cron weekday field (Sunday 0, or 7 at a range's end).
fn weekday_field(t: &str) -> Result<String, String> {
    let day = |s: &str| -> Result<u32, String> {
        let s = s.to_ascii_lowercase();
        const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        DAYS.iter()
            .position(|d| s.starts_with(d))
            .map(|i| i as u32)
            .ok_or_else(|| format!("{s:?} is no weekday"))
    };
    let mut out = Vec::new();
    for item in t.split(',') {
        match item.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (day(a)?, day(b)?);
                let b = if b == 0 { 7 } else { b };
                if a > b {
                    return Err(format!("{item}: a weekday range that wraps"));
                }
                out.push(format!("{a}-{b}"));
            }
            None => out.push(day(item)?.to_string()),
        }
    }
    Ok(out.join(","))
}

/// `OnSuccess=`/`OnFailure=` naming a service imported with it become that definition's chain;
/// naming anything else is refused by name.
fn join_chains(read: &mut [(Row, Option<Read>)]) {
    let services: Vec<(String, String)> = read
        .iter()
        .filter_map(|(_, r)| r.as_ref().map(|r| (r.service_name.clone(), r.name.clone())))
        .collect();
    let mut links: Vec<(String, &'static str, String)> = Vec::new();
    for (row, r) in read.iter_mut() {
        let Some(r) = r else { continue };
        for (word, unit) in &r.starts {
            match services.iter().find(|(s, _)| s == unit) {
                Some((_, target)) => links.push((target.clone(), word, r.name.clone())),
                None => {
                    row.reason = Some(format!(
                        "{}={unit} starts a unit that is not imported with it: import its .timer or .path too, or (for a failure notice) set up notify.toml instead",
                        if *word == "after_success" {
                            "OnSuccess"
                        } else {
                            "OnFailure"
                        }
                    ));
                }
            }
        }
    }
    for (target, word, upstream) in links {
        if let Some((_, Some(r))) = read
            .iter_mut()
            .find(|(_, r)| r.as_ref().is_some_and(|r| r.name == target))
        {
            match r.trigger.iter_mut().find(|(k, _)| k == word) {
                Some((_, v)) => {
                    let mut names: Vec<String> = toml::from_str::<toml::Table>(&format!("x = {v}"))
                        .ok()
                        .and_then(|t| t["x"].as_array().cloned())
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    names.push(upstream);
                    *v = quote_all(&names);
                }
                None => r.trigger.push((word.to_owned(), quote_all(&[upstream]))),
            }
        }
    }
}

/// The definition text of a read pair, checked as `validate` checks it.
fn finish(row: &mut Row, r: Read, cx: &Context<'_>) {
    if cx.existing.contains(&r.name) {
        row.reason = Some(format!(
            "automations/{}.toml exists already; rename or remove it, or import this unit by hand",
            r.name
        ));
        return;
    }
    let checked = Draft {
        name: &r.name,
        origin: vec![format!(
            "Imported from the systemd user unit {} by `automations import systemd`.",
            row.text
        )],
        description: r.description.as_deref(),
        command: &r.command,
        env: &r.env,
        timeout: r.timeout.unwrap_or(0),
        timeout_why: "TimeoutStartSec= of its service.",
        keys: Vec::new(),
        schedule: r.schedule.clone(),
        trigger: r.trigger.clone(),
        limits: r.limits.clone(),
    }
    .checked(
        "systemd let the oneshot run until it ended; this is the time to its next firing (at most a day).",
        cx.checks,
    );
    match checked {
        Ok((text, def)) => {
            row.schedule = Some(crate::views::schedule_words(&def));
            row.status = Status::Imported;
            row.files.definition = text.into_bytes();
            row.files.env = r.env;
        }
        Err(why) => row.reason = Some(why),
    }
}

#[cfg(test)]
mod tests;
