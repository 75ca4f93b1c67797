//! launchd LaunchAgents: one property list per automation, built with the `plist` crate.
//!
//! `daily_at` becomes `StartCalendarInterval` (`{Hour, Minute}`, or an array with `Weekday`,
//! Sunday = 0) plus `RunAtLoad`, so a slot missed while the Mac was off runs at the next login; the
//! runner's slot guard makes that exactly one run per slot. An `every_minutes` that is a wall-clock
//! grid (`schedule::is_grid`) becomes an array of `StartCalendarInterval` entries, one per point, so
//! slots missed in sleep coalesce into one run on wake. Any other `every_minutes` becomes
//! `StartInterval`, which counts awake time and does not fire on wake (the header says so).
//! Watched paths become `WatchPaths` or `QueueDirectories` (docs/triggers.md).
//! `ExitTimeOut` is the run's timeout plus the backstop, so launchd never cuts the runner's own
//! tree kill short.

use plist::{Dictionary, Value};

use super::{MachinePaths, UnitFile, header_text, notes, program_arguments, stop_timeout};
use crate::definition::Definition;
use crate::names::{Label, Namespace};
use crate::schedule::{Schedule, Weekday};
use crate::settings::FIXED_PATH_MACOS as FIXED_PATH;

/// The LaunchAgent of `def`: one plist, key by key, each with the reason it is set; the schedule's
/// keys come from [`schedule_keys`].
pub fn plist(
    def: &Definition,
    namespace: &Namespace,
    label: &Label,
    paths: &MachinePaths,
) -> UnitFile {
    let mut d = Dictionary::new();
    d.insert("Label".into(), label.as_str().into());
    d.insert(
        "ProgramArguments".into(),
        Value::Array(
            program_arguments(def, namespace, paths)
                .into_iter()
                .map(Value::from)
                .collect(),
        ),
    );
    d.insert("WorkingDirectory".into(), paths.root.clone().into());
    let mut env = Dictionary::new();
    env.insert("PATH".into(), FIXED_PATH.into());
    d.insert("EnvironmentVariables".into(), Value::Dictionary(env));
    if let Some(schedule) = &def.schedule {
        schedule_keys(schedule, &mut d);
        if schedule.at_login() {
            // launchd runs it when the agent loads: at login, and at install.
            d.insert("RunAtLoad".into(), Value::Boolean(true));
        }
    }
    watch_keys(def, paths, &mut d);
    // The machine's data root, or its placeholder in units/: a path either way.
    let log = crate::layout::Layout::new(&paths.data_root)
        .launchd_log(&def.name)
        .display()
        .to_string();
    d.insert("StandardOutPath".into(), log.clone().into());
    d.insert("StandardErrorPath".into(), log.into());
    d.insert("ProcessType".into(), "Background".into());
    d.insert(
        "ExitTimeOut".into(),
        Value::Integer(u64::from(stop_timeout(def)).into()),
    );
    limit_keys(def, &mut d);

    let mut xml = Vec::new();
    Value::Dictionary(d)
        .to_writer_xml(&mut xml)
        .expect("writing a plist to memory cannot fail");
    xml.push(b'\n');
    UnitFile {
        name: format!("{label}.plist"),
        bytes: with_header(xml, &header_text(def), &launchd_notes(def)),
    }
}

/// `[limits]` where launchd has an equivalent: `Nice`, and low-priority I/O for `io = "idle"` or
/// `"low"` (docs/policies.md says what is approximate).
fn limit_keys(def: &Definition, d: &mut Dictionary) {
    let limits = &def.policy.limits;
    if let Some(n) = limits.nice {
        d.insert("Nice".into(), Value::Integer(i64::from(n).into()));
    }
    match limits.io {
        Some(crate::definition::IoClass::Idle) => {
            d.insert("LowPriorityIO".into(), Value::Boolean(true));
            d.insert("LowPriorityBackgroundIO".into(), Value::Boolean(true));
        }
        Some(crate::definition::IoClass::Low) => {
            d.insert("LowPriorityIO".into(), Value::Boolean(true));
        }
        Some(crate::definition::IoClass::Normal) | None => {}
    }
}

/// The header's notes, and what of the definition's policies launchd does not enforce.
fn launchd_notes(def: &Definition) -> Vec<String> {
    let mut out = notes(def);
    let limits = &def.policy.limits;
    let ignored: Vec<&str> = [
        ("memory_max", limits.memory_max.is_some()),
        ("cpu_quota", limits.cpu_quota.is_some()),
        ("tasks_max", limits.tasks_max.is_some()),
    ]
    .iter()
    .filter(|(_, set)| *set)
    .map(|(k, _)| *k)
    .collect();
    if !ignored.is_empty() {
        out.push(format!(
            "[limits] {}: launchd has no equivalent for a job's whole tree; not enforced on macOS (docs/policies.md).",
            ignored.join(", ")
        ));
    }
    if def.policy.sandbox {
        out.push(
            "[sandbox] strict: launchd has no equivalent; install refuses this automation on macOS (docs/policies.md)."
                .into(),
        );
    }
    out
}

/// The keys that say when launchd fires `schedule`: calendar entries for a wall-clock grid and
/// for daily times (with `RunAtLoad`, so a slot missed while the Mac was off is caught up), an
/// interval of awake time for any other `every_minutes`; at login alone is only `RunAtLoad`.
fn schedule_keys(schedule: &Schedule, d: &mut Dictionary) {
    match schedule {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            ..
        } if crate::schedule::is_grid(*every_minutes) => {
            let points = crate::schedule::grid_points(*every_minutes, *offset_minutes)
                .into_iter()
                .map(|(hour, minute)| calendar_entry(hour, minute, None))
                .collect();
            d.insert("StartCalendarInterval".into(), Value::Array(points));
        }
        Schedule::EveryMinutes { every_minutes, .. } => {
            d.insert(
                "StartInterval".into(),
                Value::Integer((u64::from(*every_minutes) * 60).into()),
            );
        }
        Schedule::AtLogin => {}
        Schedule::Cron { cron, .. } => {
            let int = |n: u32| Value::Integer(u64::from(n).into());
            let entries: Vec<Value> = cron
                .launchd_entries()
                .into_iter()
                .map(|e| {
                    let mut c = Dictionary::new();
                    for (key, v) in [
                        ("Month", e.month),
                        ("Day", e.day),
                        ("Weekday", e.weekday),
                        ("Hour", e.hour),
                        ("Minute", e.minute),
                    ] {
                        if let Some(v) = v {
                            c.insert(key.into(), int(v));
                        }
                    }
                    Value::Dictionary(c)
                })
                .collect();
            d.insert("StartCalendarInterval".into(), one_or_many(entries));
            d.insert("RunAtLoad".into(), Value::Boolean(true));
        }
        Schedule::DailyAt {
            daily_at,
            weekdays,
            days_of_month,
            ..
        } => {
            let mut days: Vec<Day> = weekdays.iter().map(|w| Day::Week(*w)).collect();
            days.sort();
            days.extend(days_of_month.iter().map(|d| Day::Month(*d)));
            let entries: Vec<Value> = daily_at
                .iter()
                .flat_map(|at| {
                    let at = *at;
                    let on: Vec<Option<Day>> = if days.is_empty() {
                        vec![None]
                    } else {
                        days.iter().copied().map(Some).collect()
                    };
                    on.into_iter()
                        .map(move |day| calendar_entry(Some(at.hour), at.minute, day))
                })
                .collect();
            d.insert("StartCalendarInterval".into(), one_or_many(entries));
            d.insert("RunAtLoad".into(), Value::Boolean(true));
        }
    }
}

/// `[trigger]`'s watched paths: `WatchPaths` (any change) or `QueueDirectories` (fires while a
/// folder holds files), as absolute paths: launchd expands neither `~` nor variables. A chain
/// needs no key: the upstream's runner kickstarts the job.
fn watch_keys(def: &Definition, paths: &MachinePaths, d: &mut Dictionary) {
    let Some(tr) = def.trigger.as_ref().filter(|t| !t.paths.is_empty()) else {
        return;
    };
    let watched: Vec<Value> = tr
        .paths
        .iter()
        .map(|p| super::machine_path(p, paths).into())
        .collect();
    let key = match tr.on {
        crate::definition::PathEvent::NotEmpty => "QueueDirectories",
        _ => "WatchPaths",
    };
    d.insert(key.into(), Value::Array(watched));
}

/// Calendar entries as launchd takes them: one entry is a dictionary; several, an array (launchd
/// fires at each).
fn one_or_many(entries: Vec<Value>) -> Value {
    match <[Value; 1]>::try_from(entries) {
        Ok([one]) => one,
        Err(many) => Value::Array(many),
    }
}

/// A day a `StartCalendarInterval` entry is limited to.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Day {
    Week(Weekday),
    Month(u8),
}

/// One `StartCalendarInterval` entry: `Minute`, and `Hour`, `Weekday` (Sunday = 0) or `Day` (of
/// the month) when given.
fn calendar_entry(hour: Option<u8>, minute: u8, day: Option<Day>) -> Value {
    let int = |n: u32| Value::Integer(u64::from(n).into());
    let mut c = Dictionary::new();
    if let Some(h) = hour {
        c.insert("Hour".into(), int(u32::from(h)));
    }
    c.insert("Minute".into(), int(u32::from(minute)));
    match day {
        // launchd counts Sunday as 0.
        Some(Day::Week(w)) => {
            c.insert("Weekday".into(), int((w.index_from_monday() + 1) % 7));
        }
        Some(Day::Month(d)) => {
            c.insert("Day".into(), int(u32::from(d)));
        }
        None => {}
    }
    Value::Dictionary(c)
}

/// Inserts the header (and a note) as XML comments before `<plist`; `--` cannot appear inside a
/// comment.
fn with_header(xml: Vec<u8>, header: &str, notes: &[String]) -> Vec<u8> {
    let mut comment = format!("<!-- {} -->\n", super::comment_safe(header));
    for n in notes {
        comment.push_str(&format!("<!-- {} -->\n", super::comment_safe(n)));
    }
    let at = xml.windows(6).position(|w| w == b"<plist").unwrap_or(0);
    let mut out = Vec::with_capacity(xml.len() + comment.len());
    out.extend_from_slice(&xml[..at]);
    out.extend_from_slice(comment.as_bytes());
    out.extend_from_slice(&xml[at..]);
    out
}
