//! every calendar kind fires where an oracle written from the definition says, in
//! several zones (one 45 minutes off the hour, one 30): systemd by `systemd-analyze calendar` on
//! the timer's own `OnCalendar=` lines, launchd by evaluating the plist's `StartCalendarInterval`
//! entries minute by minute, and the program's own slots (`schedule::slots_between`, which the
//! slot guard, `list`'s NEXT, health and the dashboard use).
//!
//! The oracle knows nothing of the renderer or the schedule module: it walks the minutes and asks
//! the rule a person reads in the definition ("08:15 and 18:00 on Mondays and Tuesdays").

use std::process::Command;

use chrono::{DateTime, Datelike, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use crate::harness::*;
use crate::units::which;

/// What a definition says, read by a person.
enum Rule {
    /// Every `every` minutes of the day from minute `offset`.
    Grid { every: u32, offset: u32 },
    /// At these (hour, minute), on these weekdays (Mon = 0) or days of the month (empty: all).
    Times {
        at: &'static [(u32, u32)],
        weekdays: &'static [u32],
        days: &'static [u32],
    },
}

impl Rule {
    fn matches(&self, t: NaiveDateTime) -> bool {
        let minute = t.hour() * 60 + t.minute();
        match self {
            Rule::Grid { every, offset } => {
                minute >= *offset && (minute - offset).is_multiple_of(*every)
            }
            Rule::Times { at, weekdays, days } => {
                at.contains(&(t.hour(), t.minute()))
                    && (weekdays.is_empty()
                        || weekdays.contains(&t.weekday().num_days_from_monday()))
                    && (days.is_empty() || days.contains(&t.day()))
            }
        }
    }
}

const CASES: &[(&str, &str, Rule)] = &[
    (
        "twice",
        "daily_at = [\"18:00\", \"08:15\"]\nweekdays = [\"tue\", \"mon\"]",
        Rule::Times {
            at: &[(8, 15), (18, 0)],
            weekdays: &[0, 1],
            days: &[],
        },
    ),
    (
        "monthly",
        "daily_at = [\"03:00\", \"23:45\"]\ndays_of_month = [15, 1]",
        Rule::Times {
            at: &[(3, 0), (23, 45)],
            weekdays: &[],
            days: &[1, 15],
        },
    ),
    (
        "late",
        "daily_at = \"06:30\"\ndays_of_month = [31]",
        Rule::Times {
            at: &[(6, 30)],
            weekdays: &[],
            days: &[31],
        },
    ),
    (
        "night",
        "daily_at = [\"02:30\", \"01:30\"]",
        Rule::Times {
            at: &[(1, 30), (2, 30)],
            weekdays: &[],
            days: &[],
        },
    ),
    (
        "daily",
        "daily_at = \"08:30\"",
        Rule::Times {
            at: &[(8, 30)],
            weekdays: &[],
            days: &[],
        },
    ),
    (
        "offset",
        "every_minutes = 15\noffset_minutes = 5",
        Rule::Grid {
            every: 15,
            offset: 5,
        },
    ),
    (
        "hourly",
        "every_minutes = 60\noffset_minutes = 59",
        Rule::Grid {
            every: 60,
            offset: 59,
        },
    ),
    (
        "hours",
        "every_minutes = 120\noffset_minutes = 90",
        Rule::Grid {
            every: 120,
            offset: 90,
        },
    ),
    (
        "grid",
        "every_minutes = 5",
        Rule::Grid {
            every: 5,
            offset: 0,
        },
    ),
];

const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Adelaide",
];

/// How many firings each comparison with systemd covers (June: no zone changes its offset).
const FIRINGS: usize = 10;

/// The firings of `rule` after `from` in `zone`, minute by minute, until `enough` says so. Each
/// local wall-clock minute fires once, the first time it happens (a DST fold repeats an hour); a
/// time of day that does not happen (a DST gap) fires at the first minute after the gap, while a
/// grid point in the gap does not fire (the definitions docs say both).
fn oracle(
    rule: &Rule,
    zone: Tz,
    from: DateTime<Utc>,
    enough: impl Fn(&[DateTime<Utc>], DateTime<Utc>) -> bool,
) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut seen = from.with_timezone(&zone).naive_local();
    let mut t = from + chrono::Duration::minutes(1);
    while !enough(&out, t) {
        let local = t.with_timezone(&zone).naive_local();
        if local > seen {
            let mut skipped = seen + chrono::Duration::minutes(1);
            let mut due = rule.matches(local);
            while skipped < local {
                due |= matches!(rule, Rule::Times { .. }) && rule.matches(skipped);
                skipped += chrono::Duration::minutes(1);
            }
            if due {
                out.push(t);
            }
            seen = local;
        }
        t += chrono::Duration::minutes(1);
    }
    out
}

fn first(n: usize) -> impl Fn(&[DateTime<Utc>], DateTime<Utc>) -> bool {
    move |out, _| out.len() >= n
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for (name, schedule, _) in CASES {
        sb.definition(
            name,
            &format!("name = \"{name}\"\ncommand = [\"true\"]\n[schedule]\n{schedule}\n"),
        );
    }
    sb
}

/// The content of the one file `render NAME --target T --json` names with `suffix`.
pub fn rendered(sb: &Sandbox, name: &str, target: &str, suffix: &str) -> String {
    let o = sb.run(["render", name, "--target", target, "--json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
        .map(|f| f["content"].as_str().unwrap().to_owned())
        .unwrap()
}

/// The next `n` elapses of all the timer's `OnCalendar=` lines together after `base`, as
/// `systemd-analyze calendar` computes them in `zone`.
pub fn systemd_elapses(
    timer: &str,
    zone: &str,
    base: DateTime<Utc>,
    n: usize,
) -> Vec<DateTime<Utc>> {
    let exprs: Vec<&str> = timer
        .lines()
        .filter_map(|l| l.strip_prefix("OnCalendar="))
        .collect();
    assert!(!exprs.is_empty(), "{timer}");
    let o = Command::new("systemd-analyze")
        .arg("calendar")
        .arg(format!("--iterations={n}"))
        .arg(format!(
            "--base-time={}",
            base.format("%Y-%m-%d %H:%M:%S UTC")
        ))
        .args(&exprs)
        .env("TZ", zone)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut all: Vec<DateTime<Utc>> = stdout(&o)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(in UTC): "))
        .map(|s| {
            // "Sun 2026-06-14 21:15:00 UTC"
            let s = s.split_once(' ').unwrap().1.trim_end_matches(" UTC");
            Utc.from_utc_datetime(&NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap())
        })
        .collect();
    all.sort();
    all.dedup();
    all.truncate(n);
    all
}

/// systemd fires every calendar kind where the oracle says, in five zones.
#[test]
#[ignore = "a real component: systemd-analyze"]
fn systemd_timers_fire_where_the_oracle_says() {
    if which("systemd-analyze").is_none() {
        return skip(
            "systemd_timers_fire_where_the_oracle_says",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    let sb = sandbox();
    let base = Utc.with_ymd_and_hms(2026, 6, 10, 0, 0, 0).unwrap();
    for (name, _, rule) in CASES {
        let timer = rendered(&sb, name, "systemd", ".timer");
        for zone in ZONES {
            let tz: Tz = zone.parse().unwrap();
            assert_eq!(
                systemd_elapses(&timer, zone, base, FIRINGS),
                oracle(rule, tz, base, first(FIRINGS)),
                "{name} in {zone}:\n{timer}"
            );
        }
    }
}

/// The program's own slots (what the guard, NEXT, health and the dashboard use) are the
/// oracle's, in five zones, from September to November: Adelaide's spring gap, Berlin's and New
/// York's autumn folds.
#[test]
fn the_programs_slots_are_the_oracles_across_dst() {
    let sb = sandbox();
    let from = Utc.with_ymd_and_hms(2026, 9, 20, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2026, 11, 5, 0, 0, 0).unwrap();
    for (name, _, rule) in CASES {
        let def = sb.parsed(name);
        let schedule = def.schedule.unwrap();
        for zone in ZONES {
            let tz: Tz = zone.parse().unwrap();
            let want = oracle(rule, tz, from, |_, t| t > to);
            assert!(!want.is_empty(), "{name} in {zone}");
            let got = automations::schedule::slots_between(&schedule, &tz, from, to);
            assert_eq!(got, want, "{name} in {zone}");
        }
    }
}

/// A schedule with `time_zone` is read in that zone on any machine: every calendar kind's slots
/// are the oracle's in the zone, over 2026, in seven zones (DST in both hemispheres, a 30-minute
/// change, offsets 30 and 45 minutes off the hour), on machines in three other zones.
#[test]
fn a_zoned_schedule_is_the_oracles_in_its_zone_on_any_machine() {
    let from = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
    let zones = ZONES.iter().copied().chain(["Australia/Lord_Howe", "UTC"]);
    let checks = automations::definition::Checks {
        home: "/nonexistent".into(),
        data_root: "/nonexistent".into(),
        units_dir: "/nonexistent-units".into(),
    };
    let mut compared = 0;
    for zone in zones {
        let tz: Tz = zone.parse().unwrap();
        for (name, schedule, rule) in CASES {
            let text = format!(
                "name = \"{name}\"\ncommand = [\"true\"]\n[schedule]\n{schedule}\ntime_zone = \"{zone}\"\n"
            );
            let schedule =
                automations::definition::parse(&format!("{name}.toml"), text.as_bytes(), &checks)
                    .unwrap()
                    .schedule
                    .unwrap();
            let want = oracle(rule, tz, from, |_, t| t > to);
            for machine in ["America/Los_Angeles", "Asia/Tokyo", "Pacific/Chatham"] {
                let m: Tz = machine.parse().unwrap();
                let got = automations::schedule::slots_between(&schedule, &m, from, to);
                assert_eq!(got, want, "{name} in {zone} on a machine in {machine}");
                compared += got.len();
            }
        }
    }
    assert!(compared > 100_000, "only {compared} slots compared");
}

/// Whether launchd fires at local minute `t` for a plist's `StartCalendarInterval`, as its manual
/// says: an entry matches when every key it has does (Weekday with Sunday 0 or 7), except that an
/// entry with both Day and Weekday matches on either; a key left out matches every value.
pub fn launchd_fires(plist: &plist::Dictionary) -> impl Fn(NaiveDateTime) -> bool + '_ {
    let entries: Vec<&plist::Dictionary> = match plist.get("StartCalendarInterval").unwrap() {
        plist::Value::Array(a) => a.iter().map(|e| e.as_dictionary().unwrap()).collect(),
        plist::Value::Dictionary(d) => vec![d],
        other => panic!("StartCalendarInterval is {other:?}"),
    };
    let key =
        |e: &plist::Dictionary, k: &str| e.get(k).map(|v| v.as_unsigned_integer().unwrap() as u32);
    move |t: NaiveDateTime| {
        entries.iter().any(|e| {
            let day = key(e, "Day").map(|d| d == t.day());
            let weekday = key(e, "Weekday").map(|w| w % 7 == t.weekday().num_days_from_sunday());
            let days = match (day, weekday) {
                (Some(a), Some(b)) => a || b,
                (a, b) => a.unwrap_or(true) && b.unwrap_or(true),
            };
            key(e, "Minute").is_none_or(|m| m == t.minute())
                && key(e, "Hour").is_none_or(|h| h == t.hour())
                && key(e, "Month").is_none_or(|m| m == t.month())
                && days
        })
    }
}

/// launchd fires on the minutes the oracle says: each `StartCalendarInterval` entry matches a
/// local minute when every key it has (Minute, Hour, Weekday with Sunday 0 or 7, Day) does.
#[test]
fn launchd_plists_fire_on_the_oracles_minutes() {
    let sb = sandbox();
    // Local wall-clock minutes of two months: launchd reads its calendar in local time.
    let start = chrono::NaiveDate::from_ymd_opt(2027, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    for (name, _, rule) in CASES {
        let plist: plist::Value =
            plist::from_bytes(rendered(&sb, name, "launchd", ".plist").as_bytes()).unwrap();
        let fires = launchd_fires(plist.as_dictionary().unwrap());
        let mut t = start;
        let mut fired = 0;
        while t < start + chrono::Duration::days(62) {
            assert_eq!(fires(t), rule.matches(t), "{name} at {t}");
            fired += usize::from(fires(t));
            t += chrono::Duration::minutes(1);
        }
        assert!(fired > 0, "{name} never fires");
    }
}
