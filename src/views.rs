//! The JSON views the command line prints and the dashboard serves under `/api/`: one shape each,
//! so scripts and the page read the same documents (STYLE 22). Each document carries
//! `"version": 1`; tests deserialize them strictly.

use serde::Serialize;

use crate::definition::{Definition, Problem};
use crate::history::{RunView, Status};
use crate::runlog::Trigger;
use crate::schedule;
use crate::schedule::Schedule;
use crate::settings::Settings;
use crate::state::{Installed, Pause, Stop};

/// The `list --json` document.
#[derive(Serialize)]
pub struct ListJson<'a> {
    pub version: u32,
    pub stopped: Option<Stop>,
    pub automations: Vec<ListEntry<'a>>,
    pub invalid: Vec<&'a Problem>,
}

/// One automation in `list --json`.
#[derive(Serialize)]
pub struct ListEntry<'a> {
    pub name: &'a str,
    pub label: String,
    pub schedule: Option<&'a Schedule>,
    pub schedule_words: String,
    pub outbound: bool,
    pub description: Option<&'a str>,
    pub paused: Option<Pause>,
    /// Its snooze, while one holds (`automations snooze`): its notifications are held.
    pub snoozed: Option<crate::state::Snooze>,
    /// ", snoozed until 2026-12-04 14:30" (local time) while snoozed, else "".
    pub snoozed_words: String,
    /// Its pause file cannot be read, and why (naming the file): whether it is paused is unknown.
    pub state_problem: Option<String>,
    pub running: bool,
    pub last_run: Option<LastRun>,
    /// Whether its unit is installed on this machine: `yes`, `no`, or `changed` (the definition or
    /// a unit file differs from what was installed); `null` for a manual-only automation with
    /// nothing installed.
    pub installed: Option<InstallWord>,
    /// The next firing (RFC 3339 UTC), when it is a time on the clock (see `next_words`): of the
    /// schedule installed, since that is what fires; none when paused or not installed.
    pub next: Option<String>,
    /// The next firing in words, in local time: a time, awake time for an interval, or `paused`.
    pub next_words: Option<String>,
    /// Where the next firing was computed from: `installed` (the schedule the install recorded)
    /// or `definition` (an older install record, whose definition is unchanged).
    pub next_from: Option<&'static str>,
    /// The most a scheduled firing waits before it runs (`jitter_seconds`); 0 = none.
    pub jitter_seconds: u32,
    /// The wait included in `next`, in milliseconds (the same for that slot every time).
    pub next_jitter_ms: Option<i64>,
    /// The file of the repository its command runs (`argv[0]`), which an install pins; `null`
    /// for a program found on PATH or outside the repository.
    pub script: Option<String>,
}

/// `list`'s INSTALLED column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InstallWord {
    Yes,
    No,
    Changed,
}

impl InstallWord {
    pub fn as_str(self) -> &'static str {
        match self {
            InstallWord::Yes => "yes",
            InstallWord::No => "no",
            InstallWord::Changed => "changed",
        }
    }
}

/// The last run of an automation, as `list --json` shows it.
#[derive(Serialize)]
pub struct LastRun {
    pub run: String,
    pub at: String,
    pub trigger: Trigger,
    pub status: Status,
    pub duration_ms: Option<u64>,
    pub headline: Option<u64>,
}

/// What an entry shows beside the definition: read by the caller, once, before rendering.
pub struct Live<'r> {
    pub paused: Option<Pause>,
    pub snoozed: Option<crate::state::Snooze>,
    /// The pause file could not be read, and why.
    pub state_problem: Option<String>,
    pub last: Option<&'r RunView>,
    /// What is installed of it, if anything.
    pub installed: Option<&'r Installed>,
}

/// The list entry of `d` as of `now`. Pure: whatever it shows that is not in the definition comes
/// in `live`.
pub fn entry<'a>(
    settings: &Settings,
    d: &'a Definition,
    live: Live,
    now: &chrono::DateTime<chrono::Local>,
) -> ListEntry<'a> {
    let Live {
        paused,
        snoozed,
        state_problem,
        last,
        installed,
    } = live;
    let last_start = last.and_then(|r| crate::runlog::parse_stamp(&r.at));
    let is_paused = paused.is_some();
    let next = next_firing(d, is_paused, installed, now, last_start);
    let jitter = next.as_ref().and_then(|(_, j, _)| *j);
    let installed_word = match installed {
        Some(i) if i.changed => Some(InstallWord::Changed),
        Some(_) => Some(InstallWord::Yes),
        None if d.has_units() => Some(InstallWord::No),
        None => None,
    };
    ListEntry {
        name: d.name.as_str(),
        label: settings.label(&d.name).to_string(),
        schedule: d.schedule.as_ref(),
        schedule_words: schedule_words(d),
        outbound: d.outbound,
        description: d.description.as_deref(),
        paused,
        snoozed_words: snoozed_words(snoozed.as_ref().map(|z| z.until.as_str())),
        snoozed,
        state_problem,
        running: last.is_some_and(|r| r.status == Status::Running),
        last_run: last.map(|r| LastRun {
            run: r.run.clone().unwrap_or_default(),
            at: r.at.clone(),
            trigger: r.trigger,
            status: r.status,
            duration_ms: r.duration_ms(),
            headline: r.headline().map(|(_, v)| v),
        }),
        installed: installed_word,
        next: next
            .as_ref()
            .and_then(|(n, _, _)| n.instant())
            .map(crate::runlog::stamp),
        next_words: next_words(
            d,
            is_paused,
            installed.is_some(),
            next.as_ref(),
            // The zone of the schedule that fires: the installed one.
            installed
                .and_then(|i| i.schedule.as_ref())
                .and_then(Schedule::zone),
            now,
        ),
        next_from: next.map(|(_, _, from)| from),
        jitter_seconds: d.jitter_seconds,
        next_jitter_ms: jitter.map(|j| j.num_milliseconds()),
        script: crate::pins::script_path(d, &settings.root).map(|p| {
            p.strip_prefix(&settings.root)
                .unwrap_or(&p)
                .display()
                .to_string()
        }),
    }
}

/// ", snoozed until 2026-12-04 14:30" (local time) while a snooze holds, else nothing.
pub fn snoozed_words(until: Option<&str>) -> String {
    until
        .and_then(crate::runlog::parse_stamp)
        .map_or_else(String::new, |t| {
            format!(
                ", snoozed until {}",
                t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M")
            )
        })
}

/// A definition's schedule for people, with what changes when it runs: its jitter and retries
/// ("daily at 02:30, up to 10 min later, 2 retries"), or "manual only".
pub fn schedule_words(d: &Definition) -> String {
    let events = d.trigger.as_ref().map(|t| t.words());
    let Some(schedule) = &d.schedule else {
        return events.unwrap_or_else(|| "manual only".into());
    };
    let mut words = schedule.words();
    if let Some(e) = events {
        words.push_str(&format!(", and {e}"));
    }
    if d.jitter_seconds > 0 {
        let j = d.jitter_seconds;
        let up_to = if j.is_multiple_of(60) {
            format!("{} min", j / 60)
        } else {
            format!("{j} s")
        };
        words.push_str(&format!(", up to {up_to} later"));
    }
    match d.retry.retries {
        0 => {}
        1 => words.push_str(", 1 retry"),
        n => words.push_str(&format!(", {n} retries")),
    }
    words
}

/// A next firing: when, the jitter it adds, and whose schedule it is ("installed" or
/// "definition").
type NextFiring = (schedule::Next, Option<chrono::Duration>, &'static str);

/// When `d` fires next, what adds its jitter, and whose schedule that is ("installed" or
/// "definition"). What fires is what was installed: its schedule, not the definition's (which may
/// be edited). The run starts its jitter after the slot: that is the time to show.
fn next_firing(
    d: &Definition,
    paused: bool,
    installed: Option<&Installed>,
    now: &chrono::DateTime<chrono::Local>,
    last_start: Option<chrono::DateTime<chrono::Utc>>,
) -> Option<NextFiring> {
    let i = installed.filter(|_| !paused)?;
    let (n, jitter) = schedule::next_run(
        i.schedule.as_ref()?,
        d.name.as_str(),
        d.jitter_seconds,
        now,
        last_start,
    )?;
    let from = if i.from_record {
        "installed"
    } else {
        "definition"
    };
    Some((n, jitter, from))
}

/// The list's "next" column: paused, at the next login, or the next firing in words.
fn next_words(
    d: &Definition,
    paused: bool,
    installed: bool,
    next: Option<&NextFiring>,
    zone: Option<schedule::ZoneName>,
    now: &chrono::DateTime<chrono::Local>,
) -> Option<String> {
    if paused && installed {
        Some("paused".to_owned())
    } else if next.is_none() && installed && matches!(d.schedule, Some(Schedule::AtLogin)) {
        Some("at the next login".to_owned())
    } else {
        next.map(|(n, jitter, _)| {
            let jitter = jitter.map_or_else(String::new, schedule::jitter_words);
            format!("{}{jitter}", n.words_in(now, zone))
        })
    }
}

/// One run in `runs --json` (and `show --json`'s `run`).
#[derive(Serialize)]
pub struct RunJson<'a> {
    #[serde(flatten)]
    pub view: &'a RunView,
    pub duration_ms: Option<u64>,
    pub exit_code: Option<i32>,
    pub error_class: Option<&'a str>,
    pub headline: Option<HeadlineJson<'a>>,
}

#[derive(Serialize)]
pub struct HeadlineJson<'a> {
    pub name: &'a str,
    pub value: u64,
}

/// The JSON view of a run.
pub fn run_json(v: &RunView) -> RunJson<'_> {
    let f = v.finished.as_ref();
    RunJson {
        view: v,
        duration_ms: v.duration_ms(),
        exit_code: f.and_then(|f| f.exit_code),
        error_class: f.and_then(|f| f.error.as_ref()).map(|e| e.class.as_str()),
        headline: v
            .headline()
            .map(|(name, value)| HeadlineJson { name, value }),
    }
}

/// The `show --json` document of a run.
pub fn show_json(view: &RunView) -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "run": run_json(view),
        "started": view.started,
        "finished": view.finished,
    })
}

/// `2026-11-29T20:45:12.123Z` → `2026-11-29 20:45:12Z`.
pub fn short_time(at: &str) -> String {
    match at.get(..19) {
        Some(t) => format!("{}Z", t.replace('T', " ")),
        None => at.to_owned(),
    }
}
