//! When a schedule fires (SPEC §7, "Schedules and sleep"), answered once for everyone: which
//! `every_minutes` become a wall-clock grid, what that grid is for launchd and systemd, where a local
//! time lands on a DST day, and the next firing time that `install`, `list` and the dashboard show.
//!
//! Pure functions: the caller passes "now" in the zone it means (`chrono::Local` in the program,
//! a real zone in tests). Nothing here reads a clock, a file or the environment.

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, TimeZone, Timelike, Utc};

use crate::definition::{Schedule, TimeOfDay, Weekday};

/// Whether `every_minutes` is a wall-clock grid: it divides the hour (1, 2, 3, 4, 5, 6, 10, 12, 15,
/// 20, 30, 60) or is a whole number of hours that divides the day. A grid fires at fixed clock
/// times, so slots missed while the machine slept coalesce into one run on wake; any other
/// interval counts awake time and does not fire on wake.
pub fn is_grid(every_minutes: u32) -> bool {
    every_minutes > 0
        && (60 % every_minutes == 0
            || (every_minutes.is_multiple_of(60) && 1440 % every_minutes == 0))
}

/// The words every place uses for an interval that counts awake time.
pub const AWAKE_NOTE: &str = "counts awake time; does not fire on wake";

/// The points of a grid within one day, as (hour, minute); `None` for the hour means every hour.
pub fn grid_points(every_minutes: u32) -> Vec<(Option<u8>, u8)> {
    if every_minutes <= 60 {
        (0..60)
            .step_by(every_minutes as usize)
            .map(|m| (None, m as u8))
            .collect()
    } else {
        (0..24)
            .step_by((every_minutes / 60) as usize)
            .map(|h| (Some(h as u8), 0))
            .collect()
    }
}

/// The systemd `OnCalendar=` expression of a grid.
pub fn grid_calendar(every_minutes: u32) -> String {
    match every_minutes {
        1 => "*-*-* *:*:00".into(),
        m if m < 60 => format!("*-*-* *:00/{m}:00"),
        60 => "*-*-* *:00:00".into(),
        1440 => "*-*-* 00:00:00".into(),
        m => format!("*-*-* 00/{}:00:00", m / 60),
    }
}

/// Where local wall-clock time `at` on `day` falls. In a DST gap (the time does not exist) it moves
/// to the first valid minute after; in a fold (it exists twice) it is the earlier instant.
pub fn resolve_local<Tz: TimeZone>(
    tz: &Tz,
    day: NaiveDate,
    at: TimeOfDay,
) -> Option<DateTime<Utc>> {
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

/// Whether `day` is one of `weekdays` (empty = every day).
pub fn allowed(day: NaiveDate, weekdays: &[Weekday]) -> bool {
    weekdays.is_empty()
        || weekdays.contains(&Weekday::ALL[day.weekday().num_days_from_monday() as usize])
}

/// The next time a schedule fires after `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A wall-clock time (grid or daily).
    At(DateTime<Utc>),
    /// An interval of awake time: `after` the last start when there was one (sleep pushes it out).
    Awake {
        every_minutes: u32,
        after: Option<DateTime<Utc>>,
    },
}

impl Next {
    /// The instant to show, if there is one: the wall-clock time, or last start + interval.
    pub fn instant(&self) -> Option<DateTime<Utc>> {
        match *self {
            Next::At(t) => Some(t),
            Next::Awake {
                every_minutes,
                after,
            } => after.map(|t| t + Duration::minutes(i64::from(every_minutes))),
        }
    }

    /// For people: `2026-11-30 17:05 (in 3 min)` in the zone of `now`, or the awake-time wording.
    pub fn words<Tz: TimeZone>(&self, now: &DateTime<Tz>) -> String
    where
        Tz::Offset: std::fmt::Display,
    {
        let at = |t: DateTime<Utc>| {
            let local = t.with_timezone(&now.timezone());
            let mins = (t - now.with_timezone(&Utc)).num_minutes();
            let when = if mins < 1 {
                "in under a minute".to_owned()
            } else if mins < 120 {
                format!("in {mins} min")
            } else {
                format!("in {} h", mins / 60)
            };
            format!("{} ({when})", local.format("%Y-%m-%d %H:%M"))
        };
        match *self {
            Next::At(t) => at(t),
            Next::Awake {
                every_minutes,
                after: Some(last),
            } => {
                let t = last + Duration::minutes(i64::from(every_minutes));
                if t > now.with_timezone(&Utc) {
                    format!("{}, awake time", at(t))
                } else {
                    format!("due ({every_minutes} min of awake time after the last run)")
                }
            }
            Next::Awake {
                every_minutes,
                after: None,
            } => format!("{every_minutes} min of awake time after loading"),
        }
    }
}

/// The next firing of `schedule` strictly after `now`; `last_start` places interval timers.
pub fn next_firing<Tz: TimeZone>(
    schedule: &Schedule,
    now: &DateTime<Tz>,
    last_start: Option<DateTime<Utc>>,
) -> Option<Next> {
    let tz = now.timezone();
    let now_utc = now.with_timezone(&Utc);
    match schedule {
        Schedule::EveryMinutes { every_minutes } if is_grid(*every_minutes) => {
            // A grid point is a local minute of the day divisible by the interval (which divides
            // the day, so points stay aligned across midnight).
            let m = i64::from(*every_minutes);
            let start = now.naive_local();
            let start = start.date().and_hms_opt(start.hour(), start.minute(), 0)?;
            let of_day = i64::from(start.hour() * 60 + start.minute());
            let mut point = start + Duration::minutes(m - of_day % m);
            for _ in 0..(1440 / m + 2) {
                // A point in a DST gap does not exist and is not fired.
                if let Some(t) = tz.from_local_datetime(&point).earliest() {
                    let t = t.with_timezone(&Utc);
                    if t > now_utc {
                        return Some(Next::At(t));
                    }
                }
                point += Duration::minutes(m);
            }
            None
        }
        Schedule::EveryMinutes { every_minutes } => Some(Next::Awake {
            every_minutes: *every_minutes,
            after: last_start,
        }),
        Schedule::DailyAt { daily_at, weekdays } => (0..=8)
            .map(|d| now.date_naive() + Duration::days(d))
            .filter(|day| allowed(*day, weekdays))
            .filter_map(|day| resolve_local(&tz, day, *daily_at))
            .find(|t| *t > now_utc)
            .map(Next::At),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Europe::Berlin;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn which_intervals_are_grids() {
        let grids: Vec<u32> = (1..=1440).filter(|m| is_grid(*m)).collect();
        assert_eq!(
            grids,
            [
                1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440
            ]
        );
        assert_eq!(
            grid_points(15),
            [(None, 0), (None, 15), (None, 30), (None, 45)]
        );
        assert_eq!(grid_points(360).len(), 4);
        assert_eq!(grid_points(1).len(), 60);
        assert_eq!(grid_calendar(5), "*-*-* *:00/5:00");
        assert_eq!(grid_calendar(1), "*-*-* *:*:00");
        assert_eq!(grid_calendar(60), "*-*-* *:00:00");
        assert_eq!(grid_calendar(120), "*-*-* 00/2:00:00");
        assert_eq!(grid_calendar(1440), "*-*-* 00:00:00");
    }

    #[test]
    fn next_firing_of_grids_daily_and_awake_intervals() {
        let now = t("2026-11-30T16:07:30Z").with_timezone(&Berlin); // 17:07:30 CET
        let every = |m| Schedule::EveryMinutes { every_minutes: m };
        assert_eq!(
            next_firing(&every(5), &now, None),
            Some(Next::At(t("2026-11-30T16:10:00Z")))
        );
        assert_eq!(
            next_firing(&every(60), &now, None),
            Some(Next::At(t("2026-11-30T17:00:00Z")))
        );
        assert_eq!(
            next_firing(&every(360), &now, None),
            Some(Next::At(t("2026-11-30T17:00:00Z"))) // 18:00 local
        );
        assert_eq!(
            next_firing(&every(1440), &now, None),
            Some(Next::At(t("2026-11-30T23:00:00Z"))) // midnight local
        );
        let last = t("2026-11-30T16:00:00Z");
        let n = next_firing(&every(7), &now, Some(last)).unwrap();
        assert_eq!(n.instant(), Some(t("2026-11-30T16:07:00Z")));
        assert!(n.words(&now).starts_with("due"), "{}", n.words(&now));
        let daily = Schedule::DailyAt {
            daily_at: TimeOfDay {
                hour: 8,
                minute: 30,
            },
            weekdays: vec![Weekday::Mon],
        };
        // 2026-11-30 is a Monday, past 08:30: next Monday.
        assert_eq!(
            next_firing(&daily, &now, None),
            Some(Next::At(t("2026-12-07T07:30:00Z")))
        );
        assert_eq!(
            Next::At(t("2026-11-30T16:10:00Z")).words(&now),
            "2026-11-30 17:10 (in 2 min)"
        );
    }

    #[test]
    fn next_firing_across_dst_in_a_real_zone() {
        let daily = Schedule::DailyAt {
            daily_at: TimeOfDay {
                hour: 2,
                minute: 30,
            },
            weekdays: vec![],
        };
        // Spring forward, 2026-03-29: 02:30 does not exist; the slot is 03:00 CEST (01:00Z).
        let before = t("2026-03-28T23:00:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&daily, &before, None),
            Some(Next::At(t("2026-03-29T01:00:00Z")))
        );
        // Fall back, 2026-10-25: 02:30 happens twice; the slot is the first (00:30Z).
        let before = t("2026-10-24T22:00:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&daily, &before, None),
            Some(Next::At(t("2026-10-25T00:30:00Z")))
        );
        // An hourly grid across the spring gap: 01:00 CET, then 03:00 CEST (02:00 is skipped).
        let hourly = Schedule::EveryMinutes { every_minutes: 60 };
        let at_0130 = t("2026-03-29T00:30:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&hourly, &at_0130, None),
            Some(Next::At(t("2026-03-29T01:00:00Z")))
        );
    }
}
