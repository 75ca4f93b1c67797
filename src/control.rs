//! The switches (docs/health.md): pause and resume one automation, the kill switch for all. One function
//! each, used by the command line and the dashboard alike, so both are checked and recorded the
//! same way: one write, the state file that takes effect at once, and one event in the run log,
//! from which the metrics textfile follows for what the switch changed.
//!
//! This module never prints; callers say what happened.

use std::time::{Duration, Instant};

use chrono::Utc;

use crate::fsutil;
use crate::locks;
use crate::names::Name;
use crate::runlog::{self, By, Event, RunLog};
use crate::settings::Settings;
use crate::state::{Pause, State, Stop};

/// Time a run's process tree gets between SIGTERM and SIGKILL when it is stopped or times out
/// (docs/running.md); `stop-all` waits that long, and a little more, for runs to record their end.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why a switch could not be turned.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No definition of that name (a typo is not silently accepted).
    #[error("no automation {name} ({path} does not exist)")]
    NoSuchAutomation { name: Name, path: String },
    /// The reason is empty or more than one line.
    #[error("the reason must be one non-empty line")]
    Reason,
    /// The switch's state file could not be written.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// Its event could not be recorded.
    #[error(transparent)]
    Log(#[from] runlog::LogError),
}

impl crate::exit::Exits for ControlError {
    /// Bad input is 2 (a name without a definition, a reason that is not one line); a data root
    /// whose state file or run log cannot be opened at all is 3; anything else 1.
    fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            Self::NoSuchAutomation { .. } | Self::Reason => Exit::BadInput,
            Self::Log(e) if e.unusable() => Exit::Environment,
            Self::State(e) if e.unusable() => Exit::Environment,
            Self::State(_) | Self::Log(_) => Exit::Failure,
        }
    }
}

/// A reason: one non-empty line, trimmed.
fn reason(r: &str) -> Result<String, ControlError> {
    let r = r.trim();
    if r.is_empty() || r.chars().any(char::is_control) {
        return Err(ControlError::Reason);
    }
    Ok(r.to_owned())
}

/// Refuses a name without a definition.
pub fn require_definition(settings: &Settings, name: &Name) -> Result<(), ControlError> {
    let path = settings.definitions_dir().join(format!("{name}.toml"));
    if path.is_file() {
        Ok(())
    } else {
        Err(ControlError::NoSuchAutomation {
            name: name.clone(),
            path: path.display().to_string(),
        })
    }
}

/// Pauses `name` (by hand, or automatically by the runner); returns the pause. The state file
/// takes effect at once; the `paused` event records it.
pub fn pause(settings: &Settings, name: &Name, by: By, why: &str) -> Result<Pause, ControlError> {
    require_definition(settings, name)?;
    let why = reason(why)?;
    let now = Utc::now();
    let pause = Pause {
        by,
        reason: why.clone(),
        at: runlog::stamp(now),
    };
    State::new(&settings.data_root).pause(name, &pause)?;
    let event = Event::Paused(runlog::Paused { by, reason: why });
    record(settings, Some(name), &event, now)?;
    crate::metrics::textfile::follow(settings, Some(name), &event);
    Ok(pause)
}

/// Resumes `name`; returns whether it was paused.
pub fn resume(settings: &Settings, name: &Name) -> Result<bool, ControlError> {
    require_definition(settings, name)?;
    if !State::new(&settings.data_root).resume(name)? {
        return Ok(false);
    }
    let event = Event::Resumed(runlog::Resumed { by: By::Hand });
    record(settings, Some(name), &event, Utc::now())?;
    crate::metrics::textfile::follow(settings, Some(name), &event);
    Ok(true)
}

/// Records that a person fixed `name` (an `ack` event, with an optional reason): health's window
/// rules (success rate, slow runs, outside calls) and its failing streak count runs from here.
pub fn ack(settings: &Settings, name: &Name, why: Option<&str>) -> Result<(), ControlError> {
    require_definition(settings, name)?;
    let why = why.map(reason).transpose()?;
    let event = Event::Ack(runlog::Ack {
        by: By::Hand,
        reason: why,
    });
    record(settings, Some(name), &event, Utc::now())?;
    // Its failed Healthchecks pings are acknowledged too (the ack itself is recorded already).
    if let Err(e) = crate::state::reset_ping_streak(&settings.data_root, name) {
        errln!(
            "warning: the ack is recorded, but its failed Healthchecks pings are not reset: {e}"
        );
    }
    crate::metrics::textfile::follow(settings, Some(name), &event);
    Ok(())
}

/// The longest snooze: longer than that is not a snooze but a pause, or a channel's `except`.
const SNOOZE_MAX_MINUTES: u64 = 30 * 24 * 60;

/// `30m`, `2h`, `1d`, `1h30m`: minutes, 1 to 30 days' worth.
pub fn snooze_minutes(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration like 30m, 2h, 1d or 1h30m (at most {} days)",
            SNOOZE_MAX_MINUTES / 1440
        )
    };
    let mut minutes: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'm' => 1,
            'h' => 60,
            'd' => 1440,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        minutes = minutes.saturating_add(n.saturating_mul(unit));
        number.clear();
    }
    if !number.is_empty() || minutes == 0 || minutes > SNOOZE_MAX_MINUTES {
        return Err(bad());
    }
    Ok(minutes)
}

/// Holds `name`'s notifications until `until` (its runs go on and are recorded): the state file
/// takes effect at once; the `snoozed` event records who, why and until when.
pub fn snooze(
    settings: &Settings,
    name: &Name,
    until: chrono::DateTime<Utc>,
    why: Option<&str>,
) -> Result<crate::state::Snooze, ControlError> {
    require_definition(settings, name)?;
    let why = why.map(reason).transpose()?;
    let now = Utc::now();
    let snooze = crate::state::Snooze {
        until: runlog::stamp(until),
        reason: why.clone(),
        at: runlog::stamp(now),
    };
    State::new(&settings.data_root).snooze(name, &snooze)?;
    let event = Event::Snoozed(runlog::Snoozed {
        by: By::Hand,
        until: snooze.until.clone(),
        reason: why,
    });
    record(settings, Some(name), &event, now)?;
    crate::metrics::textfile::follow(settings, Some(name), &event);
    Ok(snooze)
}

/// Ends `name`'s snooze before its time; returns whether one held.
pub fn unsnooze(settings: &Settings, name: &Name) -> Result<bool, ControlError> {
    require_definition(settings, name)?;
    let now = Utc::now();
    if !State::new(&settings.data_root).unsnooze(name, now)? {
        return Ok(false);
    }
    let event = Event::Unsnoozed(runlog::Unsnoozed { by: By::Hand });
    record(settings, Some(name), &event, now)?;
    crate::metrics::textfile::follow(settings, Some(name), &event);
    Ok(true)
}

/// Appends `event` of `name` (none: the kill switch) to the run log at `at`: a switch's one event,
/// from which what follows is derived by the module that owns it (the metrics textfile's
/// [`follow`](crate::metrics::textfile::follow)).
fn record(
    settings: &Settings,
    name: Option<&Name>,
    event: &Event,
    at: chrono::DateTime<Utc>,
) -> Result<(), runlog::LogError> {
    RunLog::new(&settings.data_root)
        .with_test_rotation(settings.test_rotate_bytes)
        .append(name.map_or("", Name::as_str), event.clone(), at)
}

/// What `stop-all` did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Stopped {
    /// Running runs sent SIGTERM, and how many had recorded their end when it returned.
    pub signalled: usize,
    pub stopped: usize,
    /// Automations still running after the wait.
    pub still_running: Vec<String>,
    /// Automations whose lock is held by no process it names (a firing of an older version, or
    /// one whose keeper and runner are both gone while the lock is let go): nothing was signalled.
    pub unreachable: Vec<String>,
    /// The switch could not be saved (new firings will still run), and why.
    pub switch_error: Option<String>,
    /// The `stop_all` event could not be written, and why.
    pub log_error: Option<String>,
}

/// The kill switch: saved first so new firings skip, then every running run is sent SIGTERM —
/// also when the switch could not be saved (a full disk) — and waited for (bounded).
pub fn stop_all(settings: &Settings, why: &str) -> Result<Stopped, ControlError> {
    let why = reason(why)?;
    let now = Utc::now();
    let mut out = Stopped::default();
    if let Err(e) = State::new(&settings.data_root).stop_all(&Stop {
        reason: why.clone(),
        at: runlog::stamp(now),
    }) {
        out.switch_error = Some(crate::exit::chain_text(&e));
    }
    // Every held run lock names its firing's keeper and runner, which on SIGTERM end the
    // command's tree and record the run as stopped; only those very processes are signalled.
    let mut running: Vec<(Name, u32)> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    if let Ok(locked) = fsutil::list_named(&settings.layout().locks(), "", &[".lock"]) {
        for (stem, _) in locked {
            let Ok(name) = Name::new(&stem) else {
                continue;
            };
            let Some(pid) = locks::holder(&settings.data_root, &name) else {
                continue;
            };
            match locks::ask_to_stop(&settings.data_root, &name) {
                Ok(locks::Asked::Keeper(_) | locks::Asked::Runner(_)) => running.push((name, pid)),
                Ok(locks::Asked::NotRunning) => {}
                Ok(locks::Asked::Unknown) | Err(_) => unknown.push(name.to_string()),
            }
        }
    }
    // Wait (bounded) until they have recorded their runs, so the log is final on return.
    let until = Instant::now() + STOP_GRACE + Duration::from_secs(5);
    let alive = |(n, pid): &(Name, u32)| locks::holder(&settings.data_root, n) == Some(*pid);
    while running.iter().any(alive) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    out.still_running = running
        .iter()
        .filter(|r| alive(r))
        .map(|(n, _)| n.to_string())
        .collect();
    out.unreachable = unknown;
    out.signalled = running.len();
    out.stopped = running.len() - out.still_running.len();
    let event = Event::StopAll(runlog::StopAll {
        reason: why,
        stopped: running.len() as u32,
    });
    if let Err(e) = record(settings, None, &event, now) {
        out.log_error = Some(crate::exit::chain_text(&e));
    }
    crate::metrics::textfile::follow(settings, None, &event);
    Ok(out)
}

/// Turns the kill switch off; returns whether it was on.
pub fn resume_all(settings: &Settings) -> Result<bool, ControlError> {
    if !State::new(&settings.data_root).resume_all()? {
        return Ok(false);
    }
    let event = Event::ResumeAll(runlog::ResumeAll {});
    record(settings, None, &event, Utc::now())?;
    crate::metrics::textfile::follow(settings, None, &event);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::snooze_minutes;
    use crate::exit::Exits as _;

    #[test]
    fn a_refused_switch_says_its_exit() {
        use super::ControlError;
        use crate::exit::Exit;
        let name = crate::names::Name::new("x").unwrap();
        let io = || std::io::Error::from_raw_os_error(nix::libc::EIO);
        let cases = [
            (
                ControlError::NoSuchAutomation {
                    name,
                    path: "automations/x.toml".into(),
                },
                Exit::BadInput,
            ),
            (ControlError::Reason, Exit::BadInput),
            (
                ControlError::Log(crate::runlog::LogError::Open {
                    path: "/d/runs.jsonl".into(),
                    source: io(),
                }),
                Exit::Environment,
            ),
            (
                ControlError::Log(crate::runlog::LogError::Write {
                    path: "/d/runs.jsonl".into(),
                    source: io(),
                }),
                Exit::Failure,
            ),
            (
                ControlError::State(crate::state::StateError::Invalid {
                    path: "/d/state/paused/x.json".into(),
                    problem: "not JSON".into(),
                }),
                Exit::Failure,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.exit(), want, "{e}");
        }
    }

    #[test]
    fn snooze_durations_are_minutes_hours_and_days_within_a_month() {
        assert_eq!(snooze_minutes("30m"), Ok(30));
        assert_eq!(snooze_minutes("2h"), Ok(120));
        assert_eq!(snooze_minutes("1d"), Ok(1440));
        assert_eq!(snooze_minutes("1h30m"), Ok(90));
        assert_eq!(snooze_minutes("30d"), Ok(43_200));
        for bad in [
            "",
            "0m",
            "31d",
            "2",
            "h",
            "2 hours",
            "-1h",
            "1.5h",
            "99999999999999999999d",
        ] {
            let e = snooze_minutes(bad).unwrap_err();
            assert!(
                e.contains("is not a duration like 30m, 2h, 1d or 1h30m (at most 30 days)"),
                "{e}"
            );
        }
    }
}
