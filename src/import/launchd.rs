//! `import launchd` (docs/moving-in.md): a LaunchAgent's plist read into the definition that
//! fires the same. `Program`/`ProgramArguments` become the argv; `StartCalendarInterval` (a dict
//! or an array) `daily_at` or one `cron` expression with launchd's own reading of each entry;
//! `StartInterval` `every_minutes`; `RunAtLoad` a run at login; `WatchPaths` and
//! `QueueDirectories` the trigger; `EnvironmentVariables` private env-file values; `Nice` and
//! `LowPriorityIO` the limits. `StandardOutPath`/`StandardErrorPath` are dropped with a note (the
//! output goes to the run log); `KeepAlive` and any key it cannot say are refused by name.

use std::path::{Path, PathBuf};

use plist::{Dictionary, Value};

use super::retire::Original;
use super::when::{CronFields, schedule_keys};
use super::{Context, Draft, Given, Row, Status, home_as_tilde, place_for, quote, quote_all};
use crate::definition::PLACEHOLDER_ROOT;
use crate::names::EnvName;

/// The largest plist read.
const MAX_PLIST_BYTES: u64 = 1024 * 1024;

/// Keys read, or knowingly passed over with a note; any other is refused by name.
const KNOWN: [&str; 16] = [
    "Label",
    "Program",
    "ProgramArguments",
    "StartCalendarInterval",
    "StartInterval",
    "RunAtLoad",
    "WatchPaths",
    "QueueDirectories",
    "EnvironmentVariables",
    "WorkingDirectory",
    "Nice",
    "LowPriorityIO",
    "ExitTimeOut",
    "StandardOutPath",
    "StandardErrorPath",
    "ProcessType",
];

/// One row per plist.
pub fn plan(plists: &[PathBuf], cx: &Context<'_>) -> Vec<Row> {
    let mut given = Given::default();
    plists
        .iter()
        .map(|p| {
            let shown = home_as_tilde(&p.display().to_string(), cx.home);
            let mut row = Row::new(None, Some(shown), String::new());
            if let Err(why) = one(p, cx, &mut given, &mut row) {
                row.reason = Some(why);
            }
            row
        })
        .collect()
}

/// Reads one plist into `row`.
fn one(path: &Path, cx: &Context<'_>, given: &mut Given, row: &mut Row) -> Result<(), String> {
    let bytes =
        crate::fsutil::read_following(path, MAX_PLIST_BYTES + 1).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_PLIST_BYTES {
        return Err("larger than 1 MiB; no LaunchAgent".into());
    }
    let value: Value =
        plist::from_bytes(&bytes).map_err(|e| format!("not a property list: {e}"))?;
    let d = value.as_dictionary().ok_or("its top is no dictionary")?;
    let label = d
        .get("Label")
        .and_then(Value::as_string)
        .ok_or("it has no Label")?;
    row.text = label.to_owned();
    if label.starts_with(cx.own_prefix) {
        return Err(
            "it is one of this tool's own agents: it is installed from its definition".into(),
        );
    }
    for key in d.keys() {
        if key == "KeepAlive" {
            return Err("KeepAlive: it keeps a program running, and a job here is a command that runs and ends".into());
        }
        if key == "Disabled" && d.get(key).and_then(Value::as_boolean) == Some(true) {
            return Err("Disabled: it does not run; there is nothing to move".into());
        }
        if !KNOWN.contains(&key.as_str()) && key != "Disabled" {
            return Err(format!(
                "{key} has no equivalent here; remove it from the plist, or move this job by hand"
            ));
        }
    }
    let stem = label.rsplit('.').next().unwrap_or(label);
    let name = given.names.give(stem);
    row.name = Some(name.clone());
    let mut command = program(d, cx, given, row)?;
    match d
        .get("WorkingDirectory")
        .map(|v| v.as_string().ok_or("WorkingDirectory is no string"))
    {
        Some(dir) => {
            let dir = dir?;
            if !Path::new(dir).is_absolute() {
                return Err(format!("WorkingDirectory {dir} is no absolute path"));
            }
            let (rel, bytes) = super::starts_in("launchd", &name, dir, cx.home, cx.root, &command)?;
            row.notes.push(format!(
                "runs as {rel}, written for it (pinned), which starts it in {} as launchd did",
                home_as_tilde(dir, cx.home)
            ));
            command = vec![format!("{PLACEHOLDER_ROOT}/{rel}")];
            row.files.scripts.push((rel, bytes));
        }
        None => row
            .notes
            .push("launchd ran it from /; here it runs from the repository root".into()),
    }
    let schedule = schedule(d, row)?;
    let trigger = watched(d, cx)?;
    if schedule.is_empty() && trigger.is_empty() {
        return Err("it starts on nothing this tool can say (no StartCalendarInterval, StartInterval, RunAtLoad, WatchPaths or QueueDirectories)".into());
    }
    let env = environment(d, row)?;
    let limits = limits(d)?;
    passed_over(d, row, &name);
    if cx.existing.contains(&name) {
        return Err(format!(
            "automations/{name}.toml exists already; rename or remove it, or import this agent by hand"
        ));
    }
    let written = Written {
        name: &name,
        label,
        command: &command,
        env,
        schedule,
        trigger,
        limits,
    };
    written.into_row(row, path, cx)
}

/// What an agent becomes, before it is written out and checked.
struct Written<'a> {
    name: &'a str,
    label: &'a str,
    command: &'a [String],
    env: Vec<(String, String)>,
    schedule: Vec<(String, String)>,
    trigger: Vec<(String, String)>,
    limits: Vec<(String, String)>,
}

impl Written<'_> {
    /// The definition text, checked as `validate` checks it, into `row`.
    fn into_row(self, row: &mut Row, path: &Path, cx: &Context<'_>) -> Result<(), String> {
        let (name, label) = (self.name, self.label);
        let description = format!("Imported from the LaunchAgent {label}");
        let checked = Draft {
            name,
            origin: vec![format!(
                "Imported from the LaunchAgent {label} by `automations import launchd`."
            )],
            description: Some(&description),
            command: self.command,
            env: &self.env,
            timeout: 0,
            timeout_why: "",
            keys: Vec::new(),
            schedule: self.schedule,
            trigger: self.trigger,
            limits: self.limits,
        }
        .checked(
            "launchd let a job run until it ended; this is the time to its next firing (at most a day).",
            cx.checks,
        );
        let (text, def) = checked?;
        row.schedule = Some(crate::views::schedule_words(&def));
        row.status = Status::Imported;
        row.files.definition = text.into_bytes();
        row.files.env = self.env;
        row.original = Some(Original::LaunchAgent {
            label: label.to_owned(),
            plist: path.to_path_buf(),
        });
        Ok(())
    }
}

/// Notes for the keys passed over.
fn passed_over(d: &Dictionary, row: &mut Row, name: &str) {
    for key in ["StandardOutPath", "StandardErrorPath"] {
        if d.contains_key(key) {
            row.notes.push(format!(
                "{key} is dropped: output reaches the run log (`automations show {name}`)"
            ));
        }
    }
    if d.contains_key("ExitTimeOut") {
        row.notes.push("ExitTimeOut is passed over: a run here ends at its timeout, with its whole process tree".into());
    }
    if d.contains_key("ProcessType") {
        row.notes.push("ProcessType is passed over".into());
    }
}

/// `EnvironmentVariables` as env-file values (`PATH` said and left out).
fn environment(d: &Dictionary, row: &mut Row) -> Result<Vec<(String, String)>, String> {
    let mut env = Vec::new();
    let Some(vars) = d.get("EnvironmentVariables") else {
        return Ok(env);
    };
    let vars = vars
        .as_dictionary()
        .ok_or("EnvironmentVariables is no dictionary")?;
    for (k, v) in vars {
        let v = v
            .as_string()
            .ok_or_else(|| format!("EnvironmentVariables {k} is no string"))?;
        if k == "PATH" {
            row.notes.push(
                "EnvironmentVariables PATH is not carried over: commands run with a fixed PATH"
                    .into(),
            );
            continue;
        }
        EnvName::new(k).map_err(|e| format!("EnvironmentVariables {k}: {e}"))?;
        env.push((k.clone(), v.to_owned()));
    }
    Ok(env)
}

/// `Nice` and `LowPriorityIO` as `[limits]` keys.
fn limits(d: &Dictionary) -> Result<Vec<(String, String)>, String> {
    let mut limits = Vec::new();
    if let Some(n) = d.get("Nice") {
        let n = n.as_signed_integer().ok_or("Nice is no integer")?;
        if !(0..=19).contains(&n) {
            return Err(format!("Nice {n}: only 0 to 19 here"));
        }
        limits.push(("nice".to_owned(), n.to_string()));
    }
    if d.get("LowPriorityIO").and_then(Value::as_boolean) == Some(true) {
        limits.push(("io".to_owned(), quote("low")));
    }
    Ok(limits)
}

/// `Program` and `ProgramArguments` as an argv; a script under home copied into the repository.
fn program(
    d: &Dictionary,
    cx: &Context<'_>,
    given: &mut Given,
    row: &mut Row,
) -> Result<Vec<String>, String> {
    let args: Vec<String> = match d.get("ProgramArguments") {
        Some(v) => v
            .as_array()
            .ok_or("ProgramArguments is no array")?
            .iter()
            .map(|a| {
                a.as_string()
                    .map(str::to_owned)
                    .ok_or("ProgramArguments holds a non-string")
            })
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let mut argv = match (d.get("Program").and_then(Value::as_string), args.as_slice()) {
        (Some(p), []) => vec![p.to_owned()],
        (Some(p), [_, rest @ ..]) => std::iter::once(p.to_owned())
            .chain(rest.iter().cloned())
            .collect(),
        (None, [_, ..]) => args,
        (None, []) => return Err("it has no Program or ProgramArguments".into()),
    };
    for a in &mut argv {
        let p = PathBuf::from(a.as_str());
        if !p.starts_with(cx.home) {
            continue;
        }
        let shown = home_as_tilde(a, cx.home);
        if !std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
            return Err(format!(
                "it names {shown}, under the home folder, which a definition may not name"
            ));
        }
        if !cx.copy_scripts {
            return Err(format!(
                "it runs {shown}, under the home folder, which definitions may not name: --copy-scripts copies it into scripts/ (versioned and pinned there)"
            ));
        }
        let rel = place_for(&p, cx.root, cx.home, given)?;
        row.notes.push(format!("copies {shown} to {rel}"));
        row.files.copies.push((p, rel.clone()));
        *a = format!("{PLACEHOLDER_ROOT}/{rel}");
    }
    Ok(argv)
}

/// `StartCalendarInterval`, `StartInterval` and `RunAtLoad` as `[schedule]` keys.
fn schedule(d: &Dictionary, row: &mut Row) -> Result<Vec<(String, String)>, String> {
    let mut keys = Vec::new();
    let at_load = d.get("RunAtLoad").and_then(Value::as_boolean) == Some(true);
    match (d.get("StartCalendarInterval"), d.get("StartInterval")) {
        (Some(_), Some(_)) => {
            return Err(
                "StartCalendarInterval beside StartInterval: one schedule here; move it by hand"
                    .into(),
            );
        }
        (Some(v), None) => {
            let entries: Vec<CronFields> = match v {
                Value::Dictionary(e) => vec![entry(e)?],
                Value::Array(all) => all
                    .iter()
                    .map(|e| {
                        e.as_dictionary()
                            .ok_or("StartCalendarInterval holds a non-dictionary".to_owned())
                            .and_then(entry)
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err("StartCalendarInterval is no dictionary or array".into()),
            };
            if entries.is_empty() {
                return Err("StartCalendarInterval is empty".into());
            }
            keys = schedule_keys(&entries)
                .ok_or("its StartCalendarInterval entries are no one cron expression nor daily times: move it by hand")?;
            if at_load && keys.iter().any(|(k, _)| k == "cron") {
                return Err("RunAtLoad beside a StartCalendarInterval that is no daily time: a cron schedule has no run at login here; move it by hand".into());
            }
        }
        (None, Some(v)) => {
            let secs = v
                .as_unsigned_integer()
                .ok_or("StartInterval is no integer")?;
            if secs % 60 != 0 || !(60..=86_400).contains(&secs) {
                return Err(format!(
                    "StartInterval {secs}: not a whole number of minutes from 1 to 1440"
                ));
            }
            let minutes = secs / 60;
            keys.push(("every_minutes".into(), minutes.to_string()));
            if crate::schedule::is_grid(minutes as u32) {
                row.notes.push(format!("StartInterval {secs}: every {minutes} minutes on the wall clock (from the hour), not counted from the last start"));
            }
        }
        (None, None) => {}
    }
    if at_load {
        keys.push(("at_login".into(), "true".into()));
    }
    Ok(keys)
}

/// One `StartCalendarInterval` entry: a missing key is a wildcard; Sunday is 0 or 7.
fn entry(e: &Dictionary) -> Result<CronFields, String> {
    let get = |key: &str, lo: u64, hi: u64| -> Result<String, String> {
        match e.get(key) {
            None => Ok("*".into()),
            Some(v) => {
                let n = v
                    .as_unsigned_integer()
                    .ok_or_else(|| format!("StartCalendarInterval {key} is no integer"))?;
                if !(lo..=hi).contains(&n) {
                    return Err(format!(
                        "StartCalendarInterval {key} {n} is out of range {lo}..{hi}"
                    ));
                }
                Ok(n.to_string())
            }
        }
    };
    for key in e.keys() {
        if !["Minute", "Hour", "Day", "Weekday", "Month"].contains(&key.as_str()) {
            return Err(format!("StartCalendarInterval {key} is no calendar key"));
        }
    }
    Ok(CronFields {
        minute: get("Minute", 0, 59)?,
        hour: get("Hour", 0, 23)?,
        day: get("Day", 1, 31)?,
        month: get("Month", 1, 12)?,
        weekday: get("Weekday", 0, 7)?,
    })
}

/// `WatchPaths` (changed) or `QueueDirectories` (not empty) as `[trigger]` keys.
fn watched(d: &Dictionary, cx: &Context<'_>) -> Result<Vec<(String, String)>, String> {
    let (key, on) = match (d.get("WatchPaths"), d.get("QueueDirectories")) {
        (Some(_), Some(_)) => {
            return Err(
                "WatchPaths beside QueueDirectories: one way of watching per automation here"
                    .into(),
            );
        }
        (Some(_), None) => ("WatchPaths", "changed"),
        (None, Some(_)) => ("QueueDirectories", "not_empty"),
        (None, None) => return Ok(Vec::new()),
    };
    let list = d[key]
        .as_array()
        .ok_or_else(|| format!("{key} is no array"))?;
    let mut paths = Vec::new();
    for v in list {
        let p = v
            .as_string()
            .ok_or_else(|| format!("{key} holds a non-string"))?;
        let rest = Path::new(p).strip_prefix(cx.home).map_err(|_| {
            format!("{key} {p} lies outside the home folder; watched paths are under home or the repository")
        })?;
        paths.push(format!("~/{}", rest.display()));
    }
    Ok(vec![
        ("paths".into(), quote_all(&paths)),
        ("on".into(), quote(on)),
    ])
}

#[cfg(test)]
mod tests;
