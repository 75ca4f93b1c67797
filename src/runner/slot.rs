//! The `daily_at` catch-up guard (SPEC §5.3): one run per slot, exactly.
//!
//! launchd fires `RunAtLoad` jobs at every load and systemd re-fires `Persistent=` timers after a
//! power-off; both may also fire twice around a DST fold. A scheduled firing of a daily automation
//! runs only if nothing started since the latest slot and the unit was installed before it. The
//! slot arithmetic here is pure: no clock, no files.

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, TimeZone, Utc};

use crate::definition::{TimeOfDay, Weekday};

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
        let weekday = Weekday::ALL[day.weekday().num_days_from_monday() as usize];
        if !weekdays.is_empty() && !weekdays.contains(&weekday) {
            return None;
        }
        let slot = resolve(&tz, day, at)?;
        (slot <= now.with_timezone(&Utc)).then_some(slot)
    })
}

fn resolve<Tz: TimeZone>(tz: &Tz, day: NaiveDate, at: TimeOfDay) -> Option<DateTime<Utc>> {
    let naive = day.and_hms_opt(u32::from(at.hour), u32::from(at.minute), 0)?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, _) => Some(a.with_timezone(&Utc)),
        LocalResult::None => (1..=180).find_map(|m| {
            tz.from_local_datetime(&(naive + Duration::minutes(m)))
                .earliest()
                .map(|t| t.with_timezone(&Utc))
        }),
    }
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
