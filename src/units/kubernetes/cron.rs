//! Schedules as cron lines, for the Kubernetes CronJob controller (docs/kubernetes.md).
//!
//! Only what cron can say exactly is translated: wall-clock grids and calendar times. An interval
//! that counts awake time, and a run at login, have no cron form; they are refused with the reason,
//! never approximated. The line has no `TZ=`/`CRON_TZ=` prefix: the zone is the CronJob's
//! `timeZone`.

use crate::schedule::{self, Schedule, Weekday};

/// A schedule in cron form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    /// The five fields: minute, hour, day of month, month, day of week.
    pub line: String,
    /// The shortest time between two firings, in seconds (what bounds `startingDeadlineSeconds`).
    pub interval_seconds: u32,
}

/// `schedule` as one cron line, or why it has none.
pub fn cron(schedule: &Schedule) -> Result<Cron, String> {
    if schedule.at_login() {
        return Err(
            "it runs at login (at_login), and a cluster has no login: a CronJob cannot say it"
                .into(),
        );
    }
    match schedule {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            ..
        } => grid(*every_minutes, *offset_minutes),
        Schedule::DailyAt {
            daily_at,
            weekdays,
            days_of_month,
            ..
        } => daily(daily_at, weekdays, days_of_month),
        // The expression itself, in numbers (the controller's parser takes no names or shortcuts).
        Schedule::Cron { cron, .. } => Ok(Cron {
            line: cron.numeric(),
            interval_seconds: cron.shortest_gap_seconds(),
        }),
        Schedule::AtLogin => unreachable!("at_login() is true for AtLogin"),
    }
}

fn grid(every: u32, offset: u32) -> Result<Cron, String> {
    if !schedule::is_grid(every) {
        return Err(format!(
            "every {every} minutes {}: a CronJob fires on the clock, so it cannot say it (use a divisor of 60 or of 1440 minutes)",
            schedule::AWAKE_NOTE
        ));
    }
    let points = schedule::grid_points(every, offset);
    let join = |v: Vec<String>| v.join(",");
    let line = if every <= 60 {
        let minutes = if every == 60 {
            offset.to_string()
        } else if offset == 0 {
            format!("*/{every}")
        } else {
            join(points.iter().map(|(_, m)| m.to_string()).collect())
        };
        format!("{minutes} * * * *")
    } else {
        let hours_apart = every / 60;
        let hours = if offset == 0 && hours_apart < 24 {
            format!("*/{hours_apart}")
        } else {
            join(
                points
                    .iter()
                    .map(|(h, _)| h.unwrap_or_default().to_string())
                    .collect(),
            )
        };
        format!("{} {hours} * * *", offset % 60)
    };
    Ok(Cron {
        line,
        interval_seconds: every * 60,
    })
}

fn daily(
    times: &[schedule::TimeOfDay],
    weekdays: &[Weekday],
    days_of_month: &[u8],
) -> Result<Cron, String> {
    let minute = times[0].minute;
    if times.iter().any(|t| t.minute != minute) {
        let all: Vec<String> = times.iter().map(ToString::to_string).collect();
        return Err(format!(
            "its times {} are at different minutes of the hour, and one cron line fires at every hour it lists on each minute it lists: a CronJob cannot say exactly these (use times on the same minute, or one automation per minute)",
            all.join(", ")
        ));
    }
    let hours: Vec<u32> = times.iter().map(|t| u32::from(t.hour)).collect();
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "*".to_owned()
        } else {
            v.join(",")
        }
    };
    let dom = list(days_of_month.iter().map(ToString::to_string).collect());
    let dow = list(
        weekdays
            .iter()
            .map(|d| d.days_from_sunday().to_string())
            .collect(),
    );
    // The shortest gap between two firings on one day, or across midnight to the first.
    let gaps = hours
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(std::iter::once(24 - hours[hours.len() - 1] + hours[0]));
    let interval_hours = gaps.min().unwrap_or(24);
    Ok(Cron {
        line: format!(
            "{minute} {} {dom} * {dow}",
            list(hours.iter().map(ToString::to_string).collect())
        ),
        interval_seconds: interval_hours * 3600,
    })
}

/// The problem with a cron line, as the CronJob controller's parser (five fields, each a list of
/// `*`, `N`, `A-B`, with an optional `/STEP`; no names, no macros, no zone prefix) would see it.
pub fn problem(line: &str) -> Option<String> {
    if line.contains("TZ=") {
        return Some(format!(
            "{line:?} names a zone inside the schedule; the zone is spec.timeZone"
        ));
    }
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() != 5 {
        return Some(format!(
            "{line:?} has {} fields, not 5 (minute hour day-of-month month day-of-week, one space apart)",
            fields.len()
        ));
    }
    const RANGES: [(&str, u32, u32); 5] = [
        ("minute", 0, 59),
        ("hour", 0, 23),
        ("day of month", 1, 31),
        ("month", 1, 12),
        ("day of week", 0, 6),
    ];
    for (field, (what, lo, hi)) in fields.iter().zip(RANGES) {
        for part in field.split(',') {
            if let Err(e) = range(part, lo, hi) {
                return Some(format!("{line:?}: the {what} field {field:?}: {e}"));
            }
        }
    }
    None
}

fn range(part: &str, lo: u32, hi: u32) -> Result<(), String> {
    let (span, step) = match part.split_once('/') {
        Some((span, step)) => (span, Some(step)),
        None => (part, None),
    };
    let number = |s: &str| -> Result<u32, String> {
        let n: u32 = s
            .parse()
            .map_err(|_| format!("{s:?} is not a number"))
            .and_then(|n: u32| {
                (s.bytes().all(|b| b.is_ascii_digit()))
                    .then_some(n)
                    .ok_or(format!("{s:?} is not a number"))
            })?;
        if n < lo || n > hi {
            return Err(format!("{n} is outside {lo}-{hi}"));
        }
        Ok(n)
    };
    if let Some(step) = step {
        let s: u32 = step
            .parse()
            .map_err(|_| format!("step {step:?} is not a number"))?;
        if s == 0 {
            return Err("a step of 0".into());
        }
    }
    match span {
        "*" => Ok(()),
        span => match span.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("the range {a}-{b} runs backwards"));
                }
                Ok(())
            }
            None => number(span).map(|_| ()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> Schedule {
        let def = crate::definition::parse(
            "x.toml",
            format!("name = \"x\"\ncommand = [\"/bin/true\"]\n[schedule]\n{toml}\n").as_bytes(),
            &crate::definition::Checks {
                home: "/nonexistent-home".into(),
                data_root: "/nonexistent-data".into(),
                units_dir: "/nonexistent-units".into(),
            },
        )
        .unwrap();
        def.schedule.unwrap()
    }

    fn line(toml: &str) -> String {
        cron(&parse(toml)).unwrap().line
    }

    #[test]
    fn grids_are_cron_steps() {
        assert_eq!(line("every_minutes = 5"), "*/5 * * * *");
        assert_eq!(line("every_minutes = 1"), "*/1 * * * *");
        assert_eq!(line("every_minutes = 60"), "0 * * * *");
        assert_eq!(
            line("every_minutes = 15\noffset_minutes = 7"),
            "7,22,37,52 * * * *"
        );
        assert_eq!(
            line("every_minutes = 60\noffset_minutes = 30"),
            "30 * * * *"
        );
        assert_eq!(line("every_minutes = 360"), "0 */6 * * *");
        assert_eq!(
            line("every_minutes = 360\noffset_minutes = 90"),
            "30 1,7,13,19 * * *"
        );
        assert_eq!(line("every_minutes = 1440"), "0 0 * * *");
        assert_eq!(
            line("every_minutes = 1440\noffset_minutes = 125"),
            "5 2 * * *"
        );
        assert_eq!(
            cron(&parse("every_minutes = 5")).unwrap().interval_seconds,
            300
        );
    }

    #[test]
    fn calendar_times_are_cron_lists() {
        assert_eq!(line("daily_at = \"07:30\""), "30 7 * * *");
        assert_eq!(
            line("daily_at = [\"08:15\", \"17:15\"]\nweekdays = [\"mon\", \"fri\", \"sun\"]"),
            "15 8,17 * * 1,5,0"
        );
        assert_eq!(
            line("daily_at = \"09:00\"\ndays_of_month = [1, 15]"),
            "0 9 1,15 * *"
        );
        let c = cron(&parse("daily_at = [\"08:00\", \"10:00\", \"22:00\"]")).unwrap();
        assert_eq!(c.interval_seconds, 2 * 3600);
    }

    #[test]
    fn what_cron_cannot_say_is_refused_with_the_reason() {
        let e = cron(&parse("every_minutes = 7")).unwrap_err();
        assert!(e.contains("every 7 minutes counts awake time"), "{e}");
        let e = cron(&parse("every_minutes = 5\nat_login = true")).unwrap_err();
        assert!(e.contains("at login"), "{e}");
        let e = cron(&parse("at_login = true")).unwrap_err();
        assert!(e.contains("a cluster has no login"), "{e}");
        let e = cron(&parse("daily_at = [\"08:00\", \"17:30\"]")).unwrap_err();
        assert!(e.contains("08:00, 17:30"), "{e}");
    }

    #[test]
    fn every_rendered_line_parses_and_bad_lines_do_not() {
        for s in [
            "every_minutes = 5",
            "every_minutes = 20\noffset_minutes = 3",
            "every_minutes = 120\noffset_minutes = 61",
            "daily_at = [\"00:00\", \"23:00\"]\nweekdays = [\"sat\"]",
        ] {
            assert_eq!(problem(&line(s)), None, "{s}");
        }
        for (bad, why) in [
            ("*/5 * * *", "4 fields"),
            ("60 * * * *", "60 is outside 0-59"),
            ("0 24 * * *", "24 is outside 0-23"),
            ("0 0 0 * *", "0 is outside 1-31"),
            ("0 0 * * 7", "7 is outside 0-6"),
            ("*/0 * * * *", "a step of 0"),
            ("5-1 * * * *", "runs backwards"),
            ("@hourly", "1 fields"),
            ("CRON_TZ=UTC 0 * * * *", "spec.timeZone"),
            ("0 0 * * MON", "not a number"),
            ("0  0 * * *", "6 fields"),
        ] {
            let p = problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(p.contains(why), "{bad}: {p}");
        }
    }
}
