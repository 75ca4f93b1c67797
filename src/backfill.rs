//! `automations backfill` (docs/units.md, "Backfill"): the past slots of an installed schedule in
//! a range, each run once, oldest first, as a firing of its own (`run NAME --trigger backfill
//! --slot SLOT`: its lock, its log lines, `AUTOMATION_SLOT`). A slot with a successful run is
//! passed over, which is also what makes a second call resume an interrupted one.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};

use crate::definition::Definition;
use crate::runlog::{RunLog, Trigger};
use crate::schedule::{self, ClockZone, Schedule};
use crate::settings::Settings;

/// Beyond this many slots a call needs `--max`.
pub const MAX_SLOTS_UNASKED: usize = 1000;

/// What one slot of the range is to this call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// It runs.
    Run,
    /// It already has a successful run (`--again` runs it anyway).
    Succeeded,
}

/// The slots of `schedule` from `from` to `to` (both included, none after `now`), oldest first,
/// each with what this call does with it; `succeeded` are the slots that have a successful run.
pub fn plan(
    schedule: &Schedule,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    succeeded: &BTreeSet<DateTime<Utc>>,
    again: bool,
) -> Vec<(DateTime<Utc>, Action)> {
    let to = to.min(now);
    schedule::slots_between(
        schedule,
        &chrono::Local,
        from - Duration::milliseconds(1),
        to,
    )
    .into_iter()
    .map(|slot| {
        let action = if !again && succeeded.contains(&slot) {
            Action::Succeeded
        } else {
            Action::Run
        };
        (slot, action)
    })
    .collect()
}

/// The slots of `name` from `from` on that have a successful run, from the log.
pub fn succeeded(log: &RunLog, name: &str, from: DateTime<Utc>) -> BTreeSet<DateTime<Utc>> {
    crate::history::slots_succeeded(log, name, from)
}

/// A `--from`/`--to` WHEN: RFC 3339; or a date (`2026-12-01`) or date and time (`2026-12-01
/// 09:00`, `2026-12-01T09:00`) on the clock of `zone` (the schedule's: its `time_zone`, else the
/// machine's `machine`). A date alone is the start of that day, or with `end_of_day` its end.
pub fn parse_when<M: TimeZone>(
    text: &str,
    zone: Option<schedule::ZoneName>,
    machine: &M,
    end_of_day: bool,
) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(t) {
        return Ok(at.with_timezone(&Utc));
    }
    let clock = ClockZone::of(zone, machine);
    // A time in a DST gap (midnight, in some zones) is the first minute after it, as a slot is.
    let on_clock = |naive: NaiveDateTime| {
        schedule::resolve_naive(&clock, naive)
            .ok_or_else(|| format!("{t:?} does not exist on that clock"))
    };
    if let Ok(day) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return if end_of_day {
            let next = day.succ_opt().ok_or("a date too far ahead")?;
            on_clock(next.and_hms_opt(0, 0, 0).expect("midnight"))
                .map(|t| t - Duration::milliseconds(1))
        } else {
            on_clock(day.and_hms_opt(0, 0, 0).expect("midnight"))
        };
    }
    for shape in [
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(t, shape) {
            return on_clock(naive);
        }
    }
    Err(format!(
        "{t:?} is not a time: write 2026-12-01, \"2026-12-01 09:00\" or RFC 3339 (2026-12-01T09:00:00-05:00)"
    ))
}

/// Set by Ctrl-C (SIGINT) or SIGTERM while a backfill runs: it stops after the slot under way.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn note_interrupt(_: nix::libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// From now on, Ctrl-C and SIGTERM stop the backfill after the slot under way instead of ending
/// this process at once (the slot's own firing hears them too, and records its run as stopped).
/// Handlers are reset in a child at exec, so each firing has its own.
#[cfg(windows)]
pub fn stop_on_interrupt() {
    unsafe extern "system" fn note(_event: u32) -> windows_sys::core::BOOL {
        INTERRUPTED.store(true, Ordering::SeqCst);
        1
    }
    // SAFETY: registers a handler that only stores to an atomic.
    unsafe { windows_sys::Win32::System::Console::SetConsoleCtrlHandler(Some(note), 1) };
}

/// See the Windows one above.
#[cfg(unix)]
pub fn stop_on_interrupt() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(note_interrupt),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { sigaction(sig, &action) };
    }
}

/// Whether Ctrl-C or SIGTERM came since [`stop_on_interrupt`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// How one slot's firing went: its exit status, and its summary line (what `run` prints).
pub struct Ran {
    pub exit: Option<i32>,
    pub summary: String,
}

/// Runs `def`'s firing for `slot` (this binary's `run NAME --trigger backfill --slot SLOT`) and
/// waits for it. Its stderr is the caller's; its summary line is returned.
pub fn run_slot(
    settings: &Settings,
    def: &Definition,
    slot: DateTime<Utc>,
) -> std::io::Result<Ran> {
    let zone = def.schedule.as_ref().and_then(Schedule::zone);
    let stamp = schedule::slot_stamp(slot, zone, &chrono::Local);
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(crate::runner::catch_up::slot_firing_args(
            settings,
            def,
            Trigger::Backfill,
            &stamp,
        ))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    Ok(Ran {
        exit: out.status.code(),
        summary: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Europe::Berlin;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn when_is_read_on_the_schedules_clock() {
        let ny = schedule::ZoneName::parse("America/New_York").ok();
        assert_eq!(
            parse_when("2026-12-01", ny, &Berlin, false).unwrap(),
            utc("2026-12-01T05:00:00Z")
        );
        assert_eq!(
            parse_when("2026-12-01", None, &Berlin, true).unwrap(),
            utc("2026-12-01T22:59:59.999Z")
        );
        assert_eq!(
            parse_when("2026-12-01 09:30", None, &Berlin, false).unwrap(),
            utc("2026-12-01T08:30:00Z")
        );
        assert_eq!(
            parse_when("2026-12-01T09:00:00-05:00", None, &Berlin, false).unwrap(),
            utc("2026-12-01T14:00:00Z")
        );
        assert!(parse_when("last tuesday", None, &Berlin, false).is_err());
    }

    #[test]
    fn a_week_of_a_daily_schedule_is_seven_slots_and_successes_are_passed_over() {
        let daily: Schedule = toml_schedule("daily_at = \"09:00\"\ntime_zone = \"UTC\"");
        let (from, to) = (utc("2026-11-30T00:00:00Z"), utc("2026-12-06T23:59:59Z"));
        let now = utc("2026-12-07T12:00:00Z");
        let all = plan(&daily, (from, to), now, &BTreeSet::new(), false);
        assert_eq!(all.len(), 7);
        assert_eq!(all[0].0, utc("2026-11-30T09:00:00Z"));
        let done: BTreeSet<_> = all.iter().take(3).map(|(s, _)| *s).collect();
        let second = plan(&daily, (from, to), now, &done, false);
        assert_eq!(second.iter().filter(|(_, a)| *a == Action::Run).count(), 4);
        let again = plan(&daily, (from, to), now, &done, true);
        assert!(again.iter().all(|(_, a)| *a == Action::Run));
        // Nothing after now.
        let early = plan(
            &daily,
            (from, to),
            utc("2026-12-02T10:00:00Z"),
            &done,
            false,
        );
        assert_eq!(early.len(), 3);
    }

    fn toml_schedule(body: &str) -> Schedule {
        let text = format!("name = \"x\"\ncommand = [\"scripts/x.sh\"]\n[schedule]\n{body}\n");
        let checks = crate::definition::Checks {
            home: "/home/alice".into(),
            data_root: "/srv/data/automations".into(),
            units_dir: "/nonexistent-units".into(),
        };
        crate::definition::parse("x.toml", text.as_bytes(), &checks)
            .expect("valid")
            .schedule
            .expect("a schedule")
    }
}
