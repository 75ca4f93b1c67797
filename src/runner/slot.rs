//! The `daily_at` catch-up guard (SPEC §5.3): one run per slot, exactly.
//!
//! launchd fires `RunAtLoad` jobs at every load and systemd re-fires `Persistent=` timers after a
//! power-off; both may also fire twice around a DST fold. A scheduled firing of a daily automation
//! runs only if nothing started since the latest slot and the unit was installed before it. The
//! slot arithmetic here is pure: no clock, no files.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};

use crate::definition::{TimeOfDay, Weekday};
use crate::schedule;

/// The most recent slot at or before `now`: `at` local time on an allowed weekday. In a DST gap the
/// slot moves to the first valid minute after it; in a fold it is the earlier instant.
pub fn latest_slot<Tz: TimeZone>(
    now: &DateTime<Tz>,
    at: TimeOfDay,
    weekdays: &[Weekday],
) -> Option<DateTime<Utc>> {
    let tz = now.timezone();
    let today = now.date_naive();
    (0..=8).find_map(|back| {
        let day: NaiveDate = today - Duration::days(back);
        if !schedule::allowed(day, weekdays) {
            return None;
        }
        let slot = schedule::resolve_local(&tz, day, at)?;
        (slot <= now.with_timezone(&Utc)).then_some(slot)
    })
}

/// True when the slot is already done: a run started at or after it, or the unit was installed
/// after it (an install is not a missed slot).
pub fn slot_done(
    slot: DateTime<Utc>,
    last_start: Option<DateTime<Utc>>,
    installed_at: Option<DateTime<Utc>>,
) -> bool {
    last_start.is_some_and(|t| t >= slot) || installed_at.is_some_and(|t| t > slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    fn at(h: u8, m: u8) -> TimeOfDay {
        TimeOfDay { hour: h, minute: m }
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn latest_slot_today_or_yesterday() {
        let tz = FixedOffset::east_opt(3600).unwrap();
        // 2026-11-29 is a Sunday.
        let now = tz.with_ymd_and_hms(2026, 11, 29, 9, 0, 0).unwrap();
        assert_eq!(
            latest_slot(&now, at(8, 30), &[]),
            Some(utc("2026-11-29T07:30:00Z"))
        );
        assert_eq!(
            latest_slot(&now, at(9, 0), &[]),
            Some(utc("2026-11-29T08:00:00Z"))
        );
        assert_eq!(
            latest_slot(&now, at(9, 1), &[]),
            Some(utc("2026-11-28T08:01:00Z"))
        );
        // Weekdays only: the latest is Friday's.
        let weekdays = [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
        ];
        assert_eq!(
            latest_slot(&now, at(8, 30), &weekdays),
            Some(utc("2026-11-27T07:30:00Z"))
        );
    }

    /// Fires at each of `firings` (UTC) in Berlin, running only what the guard lets through, the
    /// way the runner decides (a start at or after the latest slot means done); returns the runs.
    fn simulate(firings: &[&str], earlier_starts: &[&str]) -> Vec<DateTime<Utc>> {
        let mut starts: Vec<DateTime<Utc>> = earlier_starts.iter().map(|s| utc(s)).collect();
        let mut runs = Vec::new();
        for f in firings {
            let now = utc(f).with_timezone(&chrono_tz::Europe::Berlin);
            let Some(slot) = latest_slot(&now, at(2, 30), &[]) else {
                continue;
            };
            let last_start = starts.iter().copied().max();
            if !slot_done(slot, last_start, None) {
                starts.push(utc(f));
                runs.push(utc(f));
            }
        }
        runs
    }

    #[test]
    fn a_0230_job_runs_exactly_once_on_the_spring_forward_day_in_berlin() {
        // 2026-03-29: clocks jump 02:00 CET -> 03:00 CEST; 02:30 does not exist, the slot is 03:00.
        // Firings: just before the jump, at the jump (systemd's Persistent/launchd's wake), again
        // a minute later (RunAtLoad after a login), in the afternoon, and just before midnight.
        let runs = simulate(
            &[
                "2026-03-29T00:59:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:01:00Z",
                "2026-03-29T13:00:00Z",
                "2026-03-29T21:59:00Z",
            ],
            &["2026-03-28T01:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-03-29T01:00:00Z")]);
    }

    #[test]
    fn a_0230_job_runs_exactly_once_on_the_fall_back_day_in_berlin() {
        // 2026-10-25: clocks go back 03:00 CEST -> 02:00 CET; 02:30 happens twice (00:30Z and
        // 01:30Z), and a calendar timer may fire at both.
        let runs = simulate(
            &[
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
                "2026-10-25T05:00:00Z",
                "2026-10-25T22:59:00Z",
            ],
            &["2026-10-24T00:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-10-25T00:30:00Z")]);
        // Asleep across both 02:30s, woken at 09:00 CET: one catch-up run, then nothing.
        let runs = simulate(
            &["2026-10-25T08:00:00Z", "2026-10-25T08:00:01Z"],
            &["2026-10-24T00:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-10-25T08:00:00Z")]);
    }

    #[test]
    fn done_rules() {
        let slot = utc("2026-11-29T07:30:00Z");
        assert!(!slot_done(slot, None, None));
        assert!(!slot_done(slot, Some(utc("2026-11-29T07:29:59Z")), None));
        assert!(slot_done(slot, Some(slot), None));
        assert!(slot_done(slot, None, Some(utc("2026-11-29T08:00:00Z"))));
        assert!(!slot_done(slot, None, Some(utc("2026-11-28T08:00:00Z"))));
    }
}
