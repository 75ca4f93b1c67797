//! What fires when (docs/dashboard.md): each automation's firings in the hours ahead, from the
//! schedule its unit was installed with, each at the minute it starts (its slot, later by that
//! slot's jitter delay), and the minutes where they pile up. `automations timeline` prints it; the
//! dashboard draws it beside the last 24 hours of the run log.
//!
//! Pure: the caller reads the definitions, the install records and the pauses; nothing here
//! reads a file or the clock.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde::Serialize;

use crate::schedule::{self, Next, Schedule};

/// The most hours `timeline --hours` looks ahead: a week.
pub const MAX_HOURS: u32 = 168;

/// Firings closer together than this (on average over the window) are drawn as one band: one
/// mark per 15 minutes is as fine as a day-wide picture can show.
const DENSE_PER_HOUR: usize = 4;

/// One firing ahead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Firing {
    /// When it starts: its slot, later by the slot's jitter delay.
    pub at: DateTime<Utc>,
    /// The slot it stands for.
    pub slot: DateTime<Utc>,
}

/// What an automation does in the window ahead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Ahead {
    /// Its installed schedule fires at these times (oldest first; empty when none falls in the
    /// window). `jitter_seconds`: each waits up to that long after its slot.
    Scheduled {
        firings: Vec<Firing>,
        jitter_seconds: u32,
    },
    /// An interval of awake time: sleep moves it, so only the next one is known (when it ran).
    Awake {
        every_minutes: u32,
        next: Option<DateTime<Utc>>,
    },
    /// Only at login.
    AtLogin,
    /// Paused: nothing fires until it is resumed.
    Paused,
    /// It has a schedule, but no unit of it is installed here.
    NotInstalled,
    /// Started by hand, by a watched path or by another automation: no schedule.
    Unscheduled,
}

impl Ahead {
    /// Its firings in the window (none unless scheduled).
    pub fn firings(&self) -> &[Firing] {
        match self {
            Ahead::Scheduled { firings, .. } => firings,
            _ => &[],
        }
    }

    /// Whether its firings are too many to draw one by one over `hours` (more than one per 15
    /// minutes on average).
    pub fn dense(&self, hours: u32) -> bool {
        self.firings().len() > DENSE_PER_HOUR * hours as usize
    }

    /// In words, for a row that shows no marks of its own or too many to list: "paused", "not
    /// installed", "at login only", "every 5 minutes of awake time", "by hand or on events",
    /// "288 firings", "nothing in these hours".
    pub fn words(&self) -> String {
        match self {
            Ahead::Scheduled { firings, .. } if firings.is_empty() => {
                "nothing in these hours".into()
            }
            Ahead::Scheduled { firings, .. } => format!("{} firing(s)", firings.len()),
            Ahead::Awake { every_minutes, .. } => {
                format!("every {every_minutes} minutes of awake time (sleep moves it)")
            }
            Ahead::AtLogin => "at login only".into(),
            Ahead::Paused => "paused".into(),
            Ahead::NotInstalled => "not installed".into(),
            Ahead::Unscheduled => "by hand or on events".into(),
        }
    }
}

/// What [`ahead`] needs of one automation.
pub struct Subject<'a> {
    pub name: &'a str,
    /// The schedule its installed unit fires on; `None` when not installed.
    pub installed: Option<&'a Schedule>,
    /// Its definition has a schedule (installed or not).
    pub scheduled: bool,
    pub jitter_seconds: u32,
    pub paused: bool,
    /// When it last started (an interval of awake time counts from there).
    pub last_start: Option<DateTime<Utc>>,
}

impl<'a> Subject<'a> {
    /// `def`'s, with what is installed of it (if anything), whether it is paused and when it last
    /// started.
    pub fn of(
        def: &'a crate::definition::Definition,
        installed: Option<&'a crate::state::Installed>,
        paused: bool,
        last_start: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            name: def.name.as_str(),
            installed: installed.and_then(|i| i.schedule.as_ref()),
            scheduled: def.schedule.is_some(),
            jitter_seconds: def.jitter_seconds,
            paused,
            last_start,
        }
    }
}

/// What `s` does in `(now, now + hours]`, its wall clock in `tz`.
pub fn ahead<Tz: TimeZone>(s: &Subject<'_>, tz: &Tz, now: DateTime<Utc>, hours: u32) -> Ahead {
    let Some(sch) = s.installed else {
        return if s.scheduled {
            Ahead::NotInstalled
        } else {
            Ahead::Unscheduled
        };
    };
    if s.paused {
        return Ahead::Paused;
    }
    match sch {
        Schedule::AtLogin => return Ahead::AtLogin,
        Schedule::EveryMinutes { every_minutes, .. } if !schedule::is_grid(*every_minutes) => {
            let next = schedule::next_run(sch, s.name, 0, &now.with_timezone(tz), s.last_start)
                .and_then(|(next, _)| match next {
                    Next::Awake { .. } => next.instant(),
                    Next::At(t) => Some(t),
                });
            return Ahead::Awake {
                every_minutes: *every_minutes,
                next,
            };
        }
        _ => {}
    }
    let to = now + Duration::hours(i64::from(hours));
    // A slot just past may still start ahead (its jitter), one near the end after it: the window
    // holds what starts in it.
    let jitter = Duration::seconds(i64::from(s.jitter_seconds));
    let firings = schedule::slots_between(sch, tz, now - jitter, to)
        .into_iter()
        .map(|slot| Firing {
            at: slot + schedule::jitter_delay(s.name, Some(slot), s.jitter_seconds),
            slot,
        })
        .filter(|f| f.at > now && f.at <= to)
        .collect();
    Ahead::Scheduled {
        firings,
        jitter_seconds: s.jitter_seconds,
    }
}

/// A minute and how many firings start in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Busy {
    pub minute: DateTime<Utc>,
    pub firings: usize,
}

/// The `top` minutes where the most firings start (at least two), busiest first, then earliest.
pub fn busiest<'a>(all: impl IntoIterator<Item = &'a Ahead>, top: usize) -> Vec<Busy> {
    let mut per_minute: BTreeMap<i64, usize> = BTreeMap::new();
    for a in all {
        for f in a.firings() {
            *per_minute
                .entry(f.at.timestamp().div_euclid(60))
                .or_default() += 1;
        }
    }
    let mut busy: Vec<(i64, usize)> = per_minute.into_iter().filter(|(_, n)| *n >= 2).collect();
    busy.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    busy.truncate(top);
    busy.into_iter()
        .filter_map(|(m, n)| {
            Some(Busy {
                minute: DateTime::from_timestamp(m * 60, 0)?,
                firings: n,
            })
        })
        .collect()
}

/// How many firings start in each of `buckets` equal parts of `(from, from + hours]`, each part
/// from its start (a firing at 03:00 is in the part that starts then).
pub fn histogram<'a>(
    all: impl IntoIterator<Item = &'a Ahead>,
    from: DateTime<Utc>,
    hours: u32,
    buckets: usize,
) -> Vec<usize> {
    let mut counts = vec![0; buckets];
    let span = i64::from(hours) * 3600;
    for a in all {
        for f in a.firings() {
            let secs = (f.at - from).num_seconds();
            if (0..=span).contains(&secs) && buckets > 0 {
                // Each part from its start: a firing at its very end is the last part's.
                let i = (secs as usize * buckets) / span as usize;
                counts[i.min(buckets - 1)] += 1;
            }
        }
    }
    counts
}

/// One row of [`table`]: an automation, what it does ahead, and its schedule in words.
pub struct Row {
    pub name: String,
    pub ahead: Ahead,
    pub schedule_words: String,
}

/// Columns of the terminal's picture of the window.
const COLUMNS: usize = 48;

/// The terminal's view of `rows` over `(from, from + hours]`, times in `tz` (named `zone`): a
/// line per automation with a column per 1/48 of the window (`·` none, a digit the firings that
/// start in it, `#` ten or more), its firings' times (or its schedule in words when there are
/// more than four), then the busiest minutes.
pub fn table<Tz: TimeZone>(
    rows: &[Row],
    (tz, zone): (&Tz, &str),
    from: DateTime<Utc>,
    hours: u32,
) -> String
where
    Tz::Offset: std::fmt::Display,
{
    use std::fmt::Write as _;
    let minutes_per_column = f64::from(hours) * 60.0 / COLUMNS as f64;
    let local = |t: DateTime<Utc>| t.with_timezone(tz);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "next {hours} h from {} ({zone}); one column is {} min",
        local(from).format("%Y-%m-%d %H:%M"),
        minutes_per_column
    );
    let nw = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    // The axis: a time at every quarter of the window.
    let mut axis = vec![' '; COLUMNS + 6];
    for q in 0..4 {
        let col = q * COLUMNS / 4;
        let at = from + Duration::minutes((col as f64 * minutes_per_column) as i64);
        for (i, c) in local(at).format("%H:%M").to_string().chars().enumerate() {
            axis[col + i] = c;
        }
    }
    let _ = writeln!(
        out,
        "{:nw$}  {:>7}  {}",
        "NAME",
        "FIRINGS",
        axis.iter().collect::<String>().trim_end()
    );
    for r in rows {
        let firings = r.ahead.firings();
        let cells: String = match &r.ahead {
            Ahead::Scheduled { .. } => histogram([&r.ahead], from, hours, COLUMNS)
                .into_iter()
                .map(|n| match n {
                    0 => '·',
                    1..=9 => char::from_digit(n as u32, 10).unwrap_or('#'),
                    _ => '#',
                })
                .collect(),
            _ => " ".repeat(COLUMNS),
        };
        let said = row_words(r, tz);
        let count = match &r.ahead {
            Ahead::Scheduled { .. } => firings.len().to_string(),
            _ => "-".into(),
        };
        let _ = writeln!(out, "{:nw$}  {count:>7}  {cells}  {said}", r.name);
    }
    let busy = busiest(rows.iter().map(|r| &r.ahead), 5);
    if busy.is_empty() {
        out.push_str("busiest minutes: none (no two firings start in the same minute)\n");
    } else {
        let words: Vec<String> = busy
            .iter()
            .map(|b| {
                format!(
                    "{} ({} firings)",
                    local(b.minute).format("%H:%M"),
                    b.firings
                )
            })
            .collect();
        let _ = writeln!(out, "busiest minutes: {}", words.join(", "));
    }
    out
}

/// What a row of [`table`] says after its columns: its firings' times when there are at most
/// four, else its schedule in words, or why nothing fires.
fn row_words<Tz: TimeZone>(r: &Row, tz: &Tz) -> String
where
    Tz::Offset: std::fmt::Display,
{
    match &r.ahead {
        Ahead::Scheduled {
            firings,
            jitter_seconds,
        } if !firings.is_empty() && firings.len() <= 4 => {
            let times: Vec<String> = firings
                .iter()
                .map(|f| f.at.with_timezone(tz).format("%H:%M").to_string())
                .collect();
            let jitter = if *jitter_seconds > 0 {
                format!(" (each up to {jitter_seconds} s after its slot)")
            } else {
                String::new()
            };
            times.join(", ") + &jitter
        }
        Ahead::Scheduled { firings, .. } if !firings.is_empty() => r.schedule_words.clone(),
        other => other.words(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(text: &str) -> crate::definition::Definition {
        let checks = crate::definition::Checks {
            home: "/home/u".into(),
            data_root: "/home/u/.local/state/automations".into(),
            units_dir: "/nonexistent".into(),
        };
        crate::definition::parse(
            "job.toml",
            format!("name = \"job\"\ncommand = [\"true\"]\n{text}").as_bytes(),
            &checks,
        )
        .unwrap()
    }

    fn subject<'a>(name: &'a str, sch: &'a Schedule, jitter: u32) -> Subject<'a> {
        Subject {
            name,
            installed: Some(sch),
            scheduled: true,
            jitter_seconds: jitter,
            paused: false,
            last_start: None,
        }
    }

    fn utc(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 6, h, m, 0).unwrap()
    }

    #[test]
    fn the_hours_ahead_are_the_installed_slots_each_later_by_its_jitter() {
        let d = def("[schedule]\ndaily_at = [\"03:00\", \"15:00\"]\njitter_seconds = 300\n");
        let sch = d.schedule.clone().unwrap();
        let a = ahead(&subject("job", &sch, 300), &Utc, utc(13, 20), 24);
        let Ahead::Scheduled {
            firings,
            jitter_seconds,
        } = &a
        else {
            panic!("{a:?}")
        };
        assert_eq!(*jitter_seconds, 300);
        let slots: Vec<_> = firings.iter().map(|f| f.slot).collect();
        assert_eq!(
            slots,
            [
                utc(15, 0),
                Utc.with_ymd_and_hms(2026, 12, 7, 3, 0, 0).unwrap()
            ]
        );
        for f in firings {
            let wait = f.at - f.slot;
            assert!(wait >= Duration::zero() && wait <= Duration::seconds(300));
            assert_eq!(
                wait,
                schedule::jitter_delay("job", Some(f.slot), 300),
                "the same delay the runner waits"
            );
        }
        assert!(!a.dense(24));
        // Twelve hours: the one at 15:00 only.
        assert_eq!(
            ahead(&subject("job", &sch, 300), &Utc, utc(13, 20), 12)
                .firings()
                .len(),
            1
        );
    }

    #[test]
    fn the_zone_decides_the_wall_clock() {
        let d = def("[schedule]\ndaily_at = \"09:00\"\n");
        let sch = d.schedule.clone().unwrap();
        let ny = chrono::FixedOffset::west_opt(5 * 3600).unwrap();
        let a = ahead(&subject("job", &sch, 0), &ny, utc(0, 0), 24);
        assert_eq!(a.firings()[0].at, utc(14, 0));
    }

    #[test]
    fn what_does_not_fire_on_the_clock_says_why() {
        let grid = def("[schedule]\nevery_minutes = 5\n").schedule.unwrap();
        let mut s = subject("job", &grid, 0);
        let a = ahead(&s, &Utc, utc(0, 0), 24);
        assert_eq!(a.firings().len(), 288);
        assert!(a.dense(24));
        s.paused = true;
        assert_eq!(ahead(&s, &Utc, utc(0, 0), 24), Ahead::Paused);
        s.installed = None;
        assert_eq!(ahead(&s, &Utc, utc(0, 0), 24), Ahead::NotInstalled);
        s.scheduled = false;
        assert_eq!(ahead(&s, &Utc, utc(0, 0), 24), Ahead::Unscheduled);
        let login = Schedule::AtLogin;
        assert_eq!(
            ahead(&subject("job", &login, 0), &Utc, utc(0, 0), 24),
            Ahead::AtLogin
        );
        let awake = def("[schedule]\nevery_minutes = 7\n").schedule.unwrap();
        let mut s = subject("job", &awake, 0);
        s.last_start = Some(utc(10, 0));
        assert_eq!(
            ahead(&s, &Utc, utc(10, 3), 24),
            Ahead::Awake {
                every_minutes: 7,
                next: Some(utc(10, 7))
            }
        );
    }

    #[test]
    fn the_busiest_minutes_are_where_firings_pile_up() {
        let at3 = def("[schedule]\ndaily_at = \"03:00\"\n").schedule.unwrap();
        let at4 = def("[schedule]\ndaily_at = \"04:00\"\n").schedule.unwrap();
        let hourly = def("[schedule]\nevery_minutes = 60\n").schedule.unwrap();
        let mut all = Vec::new();
        for i in 0..5 {
            let name = format!("night-{i}");
            all.push(ahead(&subject(&name, &at3, 0), &Utc, utc(0, 0), 24));
        }
        all.push(ahead(&subject("early", &at4, 0), &Utc, utc(0, 0), 24));
        all.push(ahead(&subject("hourly", &hourly, 0), &Utc, utc(0, 0), 24));
        let busy = busiest(&all, 3);
        assert_eq!(
            busy,
            [
                Busy {
                    minute: utc(3, 0),
                    firings: 6
                },
                Busy {
                    minute: utc(4, 0),
                    firings: 2
                }
            ]
        );
        let rows: Vec<Row> = all
            .iter()
            .enumerate()
            .map(|(i, a)| Row {
                name: format!("job-{i}"),
                ahead: a.clone(),
                schedule_words: "every hour".into(),
            })
            .collect();
        let text = table(&rows, (&Utc, "UTC"), utc(0, 0), 24);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "next 24 h from 2026-12-06 00:00 (UTC); one column is 30 min"
        );
        assert_eq!(
            lines[1],
            "NAME   FIRINGS  00:00       06:00       12:00       18:00"
        );
        // 03:00 is the seventh column (of 30 minutes each).
        assert_eq!(
            lines[2],
            format!(
                "job-0        1  {}1{}  03:00",
                "·".repeat(6),
                "·".repeat(41)
            )
        );
        assert_eq!(
            lines[8],
            format!("job-6       24  ··{}11  every hour", "1·".repeat(22))
        );
        assert_eq!(
            *lines.last().unwrap(),
            "busiest minutes: 03:00 (6 firings), 04:00 (2 firings)"
        );
        let h = histogram(&all, utc(0, 0), 24, 24);
        // (0, 24h]: hourly at 01:00..=24:00, the one at the very end in the last part.
        assert_eq!(h.iter().sum::<usize>(), 5 + 1 + 24);
        assert_eq!(h[3], 6);
    }
}
