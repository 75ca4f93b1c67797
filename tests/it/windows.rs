//! Windows Task Scheduler tasks (docs/windows.md), as `render --target windows` writes them:
//! every kind of definition validates against the task schema assembled from Microsoft's schema
//! pages (tests/fixtures/task-scheduler/, with xmllint), and the calendar triggers fire — by the
//! schema's documented meaning, evaluated here from the XML alone — at the program's slots, which
//! are the systemd timers' (tests/it/calendar.rs, cron.rs), over 2026, and at systemd's own
//! elapses by `systemd-analyze calendar`.

use std::collections::BTreeSet;
use std::process::Command;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use quick_xml::events::Event;

use crate::calendar::{rendered, systemd_elapses};
use crate::harness::*;
use crate::units::which;

/// The kinds a definition's schedule takes, each as `[schedule]` lines.
const CASES: &[(&str, &str)] = &[
    ("twice", "daily_at = [\"08:15\", \"18:00\"]"),
    (
        "weekdays",
        "daily_at = \"07:30\"\nweekdays = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]",
    ),
    (
        "monthly",
        "daily_at = [\"03:00\", \"23:45\"]\ndays_of_month = [1, 15, 31]",
    ),
    ("grid", "every_minutes = 15\noffset_minutes = 5"),
    ("hours", "every_minutes = 120\noffset_minutes = 90"),
    ("minute", "every_minutes = 1"),
    ("daily", "every_minutes = 1440\noffset_minutes = 600"),
    ("steps", "cron = \"*/10 9-17 * * 1-5\""),
    ("either", "cron = \"30 2 1,15 * sun\""),
    ("months", "cron = \"0 6 * 1,4,7,10 mon\""),
    ("quarterly", "cron = \"0 0 1 */3 *\""),
    ("odd", "cron = \"5,17,40 8 * * *\""),
    ("pairs", "cron = \"5,40 */2 * * *\""),
    ("yearly", "cron = \"@yearly\""),
    ("login", "every_minutes = 60\nat_login = true"),
];

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for (name, schedule) in CASES {
        sb.definition(
            name,
            &format!(
                "name = \"{name}\"\ndescription = \"<{name}> & 'more'\"\ncommand = [\"true\"]\n[schedule]\n{schedule}\n"
            ),
        );
    }
    // Awake time, and the overlap policies.
    sb.definition(
        "awake",
        "name = \"awake\"\ncommand = [\"true\"]\noverlap = \"queue\"\n[schedule]\nevery_minutes = 7\n",
    );
    sb.definition(
        "replace",
        "name = \"replace\"\ncommand = [\"true\"]\noverlap = \"replace\"\n[schedule]\ndaily_at = \"04:00\"\n",
    );
    sb
}

fn schema() -> std::path::PathBuf {
    repo_root().join("tests/fixtures/task-scheduler/task.xsd")
}

/// xmllint's verdict on `file` against the task schema.
fn validates(file: &std::path::Path) -> (bool, String) {
    let o = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(file)
        .output()
        .unwrap();
    (o.status.success(), stderr(&o))
}

#[test]
#[ignore = "a real component: xmllint (libxml2-utils)"]
fn every_rendered_task_validates_against_the_task_schema() {
    if which("xmllint").is_none() {
        return skip(
            "every_rendered_task_validates_against_the_task_schema",
            "xmllint is not installed (apt-get install libxml2-utils)",
        );
    }
    // The schema refuses what it should: the fixture's broken task fails, its sample passes.
    let fixtures = repo_root().join("tests/fixtures/task-scheduler");
    assert!(validates(&fixtures.join("sample.xml")).0);
    let (ok, why) = validates(&fixtures.join("broken.xml"));
    assert!(!ok && why.contains("MultipleInstancesPolicy"), "{why}");

    let sb = sandbox();
    let names = CASES.iter().map(|(n, _)| *n).chain(["awake", "replace"]);
    for name in names {
        let xml = rendered(&sb, name, "windows", ".xml");
        let file = sb.path(&format!("{name}.xml"));
        std::fs::write(&file, &xml).unwrap();
        let (ok, why) = validates(&file);
        assert!(ok, "{name}: {why}\n{xml}");
        // What the task says of itself.
        assert!(
            xml.contains(&format!("<URI>\\local\\automations\\{name}</URI>")),
            "{xml}"
        );
        assert!(xml.contains("<DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>"));
        assert!(xml.contains("<StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>"));
        assert!(xml.contains("<StartWhenAvailable>true</StartWhenAvailable>"));
        assert!(xml.contains("<LogonType>InteractiveToken</LogonType>"));
        assert!(
            xml.contains(&format!("<Arguments>run {name} --trigger schedule --root ")),
            "{xml}"
        );
    }
    let policy = |name: &str| {
        let xml = rendered(&sb, name, "windows", ".xml");
        let at = xml.find("<MultipleInstancesPolicy>").unwrap();
        xml[at..].split(['<', '>']).nth(2).unwrap().to_owned()
    };
    assert_eq!(policy("twice"), "IgnoreNew");
    assert_eq!(policy("awake"), "Queue");
    assert_eq!(policy("replace"), "StopExisting");
    assert!(rendered(&sb, "login", "windows", ".xml").contains("<LogonTrigger>"));
    assert!(rendered(&sb, "awake", "windows", ".xml").contains("<TimeTrigger>"));
}

/// What Task Scheduler cannot keep is refused by name, never rendered wrong.
#[test]
fn what_a_task_cannot_say_is_refused_by_name() {
    let sb = Sandbox::new();
    for (name, schedule, why) in [
        (
            "zoned",
            "[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\n",
            "time_zone",
        ),
        (
            "watch",
            "[schedule]\ndaily_at = \"09:00\"\n[trigger]\npaths = [\"{root}/inbox\"]\n",
            "[trigger]",
        ),
        (
            "both",
            "overlap = \"replace\"\n[schedule]\ncron = \"0 2 1 * sun\"\n",
            "overlap = \"replace\"",
        ),
        (
            "busy",
            "[schedule]\ncron = \"3,11,29,47,52,55,58 1,2,4,7,11,16,20,22 * * *\"\n",
            "minute or hour field",
        ),
    ] {
        sb.definition(
            name,
            &format!("name = \"{name}\"\ncommand = [\"true\"]\n{schedule}"),
        );
        let o = sb.run(["render", name, "--target", "windows"]);
        assert_code(&o, 2);
        assert!(stderr(&o).contains(why), "{name}: {}", stderr(&o));
    }
}

/// A small tree of the task's elements, enough to read its triggers.
#[derive(Debug, Default)]
struct El {
    name: String,
    text: String,
    children: Vec<El>,
}

impl El {
    fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
    fn all(&self, name: &str) -> impl Iterator<Item = &El> {
        self.children.iter().filter(move |c| c.name == name)
    }
}

fn parse(xml: &str) -> El {
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut stack = vec![El::default()];
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) => stack.push(El {
                name: e.local_name().as_ref().to_owned(),
                ..El::default()
            }),
            Event::Empty(e) => {
                let el = El {
                    name: e.local_name().as_ref().to_owned(),
                    ..El::default()
                };
                stack.last_mut().unwrap().children.push(el);
            }
            Event::Text(t) => stack.last_mut().unwrap().text = t.into_inner().into_owned(),
            Event::End(_) => {
                let el = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(el);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    stack.pop().unwrap().children.pop().unwrap()
}

/// An XML duration (`PT15M`, `PT23H45M30S`, `P1D`) in seconds.
fn seconds(d: &str) -> i64 {
    let (mut total, mut n, mut time) = (0, 0, false);
    for c in d.chars() {
        match c {
            'P' => {}
            'T' => time = true,
            '0'..='9' => n = n * 10 + i64::from(c.to_digit(10).unwrap()),
            'D' => (total, n) = (total + n * 86_400, 0),
            'H' if time => (total, n) = (total + n * 3600, 0),
            'M' if time => (total, n) = (total + n * 60, 0),
            'S' if time => (total, n) = (total + n, 0),
            other => panic!("duration {d:?}: {other:?}"),
        }
    }
    total
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
/// Whether a calendar trigger's `ScheduleBy…` element fires on `day`, by the schema's pages:
/// every DaysInterval days from the start; on DaysOfWeek every WeeksInterval weeks; on
/// DaysOfMonth (or the Last) of Months; on DaysOfWeek in Weeks (1 to 4: the n-th such weekday,
/// Last: the last) of Months.
fn fires_on(by: &El, start: NaiveDate, day: NaiveDate) -> bool {
    let weekday_in = |el: &El| {
        el.child("DaysOfWeek").is_some_and(|d| {
            d.children
                .iter()
                .any(|w| w.name == WEEKDAYS[day.weekday().num_days_from_monday() as usize])
        })
    };
    let month_in = |el: &El| {
        el.child("Months").is_none_or(|m| {
            m.children
                .iter()
                .any(|c| c.name == chrono::Month::try_from(day.month() as u8).unwrap().name())
        })
    };
    let last_day = |d: NaiveDate| (d + Duration::days(1)).month() != d.month();
    match by.name.as_str() {
        "ScheduleByDay" => {
            let n: i64 = by.child("DaysInterval").unwrap().text.parse().unwrap();
            day >= start && (day - start).num_days() % n == 0
        }
        "ScheduleByWeek" => {
            let n: i64 = by.child("WeeksInterval").unwrap().text.parse().unwrap();
            let weeks = (day - start).num_days().div_euclid(7);
            day >= start && weeks % n == 0 && weekday_in(by)
        }
        "ScheduleByMonth" => {
            let dom =
                by.child("DaysOfMonth").unwrap().all("Day").any(|d| {
                    d.text == day.day().to_string() || (d.text == "Last" && last_day(day))
                });
            dom && month_in(by)
        }
        "ScheduleByMonthDayOfWeek" => {
            let nth = (day.day() - 1) / 7 + 1;
            let last = (day + Duration::days(7)).month() != day.month();
            let week = by
                .child("Weeks")
                .unwrap()
                .all("Week")
                .any(|w| w.text == nth.to_string() || (w.text == "Last" && last));
            week && weekday_in(by) && month_in(by)
        }
        other => panic!("{other}"),
    }
}

/// The instants the task's calendar triggers fire in `(from, to]`, on a machine in `zone`, each
/// as often as a trigger fires it (two triggers at one instant are two firings). A trigger starts
/// at its start boundary's time of day on the days its `ScheduleBy…` allows; its `Repetition`
/// adds elapsed time (the interval, while the duration lasts), not wall-clock time.
fn task_firings(task: &El, zone: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    for t in task.child("Triggers").unwrap().all("CalendarTrigger") {
        let start = NaiveDateTime::parse_from_str(
            &t.child("StartBoundary").unwrap().text,
            "%Y-%m-%dT%H:%M:%S",
        )
        .unwrap();
        let repeat = t.child("Repetition").map(|r| {
            (
                seconds(&r.child("Interval").unwrap().text),
                seconds(&r.child("Duration").unwrap().text),
            )
        });
        let by = t
            .children
            .iter()
            .find(|c| c.name.starts_with("ScheduleBy"))
            .unwrap();
        let first = from.with_timezone(&zone).date_naive() - Duration::days(1);
        let last = to.with_timezone(&zone).date_naive() + Duration::days(1);
        for day in first.iter_days().take_while(|d| *d <= last) {
            if day < start.date() || !fires_on(by, start.date(), day) {
                continue;
            }
            // A start that does not exist or exists twice (a DST change) is left to the caller,
            // who compares no such day.
            let Some(at) = zone
                .from_local_datetime(&day.and_time(start.time()))
                .single()
            else {
                continue;
            };
            let at = at.with_timezone(&Utc);
            let offsets: Vec<i64> = match repeat {
                Some((every, span)) => (0..).map(|k| k * every).take_while(|o| *o < span).collect(),
                None => vec![0],
            };
            out.extend(
                offsets
                    .into_iter()
                    .map(|o| at + Duration::seconds(o))
                    .filter(|t| *t > from && *t <= to),
            );
        }
    }
    out.sort();
    out
}

/// The local days of 2026 on which `zone` changes its offset.
fn change_days(zone: Tz) -> BTreeSet<NaiveDate> {
    let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    start
        .iter_days()
        .take(365)
        .filter(|d| {
            let noon = |d: NaiveDate| {
                zone.from_local_datetime(&d.and_hms_opt(12, 0, 0).unwrap())
                    .single()
                    .map(|t| t.offset().fix())
            };
            noon(*d) != noon(*d + Duration::days(1)) || noon(*d) != noon(*d - Duration::days(1))
        })
        .collect()
}

/// The calendar triggers fire at the program's slots (the systemd timers', per calendar.rs and
/// cron.rs) over 2026, on machines in UTC, Kolkata (+5:30), Berlin and New York — every day but
/// the four where those two change their offset, whose local times Task Scheduler's pages do not
/// place. Each slot fires once, but on a day matching both of a cron's day rules (the `either`
/// case: two triggers), where it fires twice.
#[test]
fn calendar_triggers_fire_where_the_timers_do() {
    let sb = sandbox();
    // From the 2nd: west of UTC the 1st's first hours are the last day of 2025, before the
    // tasks' start boundary.
    let (from, to) = (
        Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap(),
    );
    let mut compared = 0;
    for (name, _) in CASES {
        let task = parse(&rendered(&sb, name, "windows", ".xml"));
        let schedule = sb.parsed(name).schedule.unwrap();
        for zone in [
            chrono_tz::UTC,
            chrono_tz::Asia::Kolkata,
            chrono_tz::Europe::Berlin,
            chrono_tz::America::New_York,
        ] {
            let changes = change_days(zone);
            let ordinary =
                |t: &DateTime<Utc>| !changes.contains(&t.with_timezone(&zone).date_naive());
            let want: Vec<_> = automations::schedule::slots_between(&schedule, &zone, from, to)
                .into_iter()
                .filter(ordinary)
                .collect();
            let mut got: Vec<_> = task_firings(&task, zone, from, to)
                .into_iter()
                .filter(ordinary)
                .collect();
            let all = got.len();
            got.dedup();
            let twice = all - got.len();
            assert_eq!(got, want, "{name} in {zone}");
            // Twice only where both day rules match: the 1st or 15th that is a Sunday.
            let both = want
                .iter()
                .filter(|t| {
                    let d = t.with_timezone(&zone).date_naive();
                    *name == "either"
                        && [1, 15].contains(&d.day())
                        && d.weekday() == chrono::Weekday::Sun
                })
                .count();
            assert_eq!(
                twice, both,
                "{name} in {zone}: {twice} instants fired twice"
            );
            compared += got.len();
        }
    }
    assert!(compared > 400_000, "only {compared} firings compared");
}

/// The same triggers at `systemd-analyze calendar`'s first 40 elapses of the same definitions'
/// timers, on machines in Berlin and Kathmandu (+5:45), from June to before October's change.
#[test]
#[ignore = "a real component: systemd-analyze"]
fn calendar_triggers_fire_where_systemd_analyze_says() {
    if which("systemd-analyze").is_none() {
        return skip(
            "calendar_triggers_fire_where_systemd_analyze_says",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    let sb = sandbox();
    let base = Utc.with_ymd_and_hms(2026, 6, 10, 0, 0, 0).unwrap();
    let mut elapses = 0;
    for (name, _) in CASES.iter().filter(|(n, _)| *n != "login") {
        let task = parse(&rendered(&sb, name, "windows", ".xml"));
        let timer = rendered(&sb, name, "systemd", ".timer");
        for zone in ["Europe/Berlin", "Asia/Kathmandu"] {
            let tz: Tz = zone.parse().unwrap();
            // Before Berlin's autumn change: what either does in a DST change is its own.
            let autumn = Utc.with_ymd_and_hms(2026, 10, 20, 0, 0, 0).unwrap();
            let want: Vec<_> = systemd_elapses(&timer, zone, base, 40)
                .into_iter()
                .filter(|t| *t < autumn)
                .collect();
            // A yearly one has none before then: the year's comparison above has it.
            let Some(&far) = want.last() else { continue };
            let got = task_firings(&task, tz, base, far);
            assert_eq!(got, want, "{name} in {zone}");
            elapses += got.len();
        }
    }
    assert!(elapses > 400, "only {elapses} elapses compared");
}

/// Sanity of the evaluator itself: a weekly trigger on Monday does not fire on a Tuesday, the
/// Last day of a month is its last.
#[test]
fn the_evaluator_reads_days_as_the_schema_says() {
    let by = parse(
        "<X><ScheduleByWeek><WeeksInterval>1</WeeksInterval><DaysOfWeek><Monday/></DaysOfWeek></ScheduleByWeek></X>",
    );
    let by = by.child("ScheduleByWeek").unwrap();
    let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    assert!(fires_on(
        by,
        start,
        NaiveDate::from_ymd_opt(2026, 6, 1).unwrap()
    ));
    assert!(!fires_on(
        by,
        start,
        NaiveDate::from_ymd_opt(2026, 6, 2).unwrap()
    ));
    let last = parse(
        "<X><ScheduleByMonth><DaysOfMonth><Day>Last</Day></DaysOfMonth></ScheduleByMonth></X>",
    );
    let last = last.child("ScheduleByMonth").unwrap();
    assert!(fires_on(
        last,
        start,
        NaiveDate::from_ymd_opt(2026, 2, 28).unwrap()
    ));
    assert!(!fires_on(
        last,
        start,
        NaiveDate::from_ymd_opt(2026, 2, 27).unwrap()
    ));
    assert_eq!(seconds("PT23H45M30S"), 85_530);
    assert_eq!(seconds("P1D"), 86_400);
}

/// `units/` holds Windows tasks only when the repository asks (`[units] targets`), and then
/// checks them like the others.
#[test]
fn windows_tasks_are_in_units_only_when_asked() {
    let sb = Sandbox::new();
    sb.definition(
        "x",
        "name = \"x\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    assert_code(&sb.run(["units"]), 0);
    assert!(!sb.root.join("units/windows").exists());
    std::fs::write(
        sb.root.join("automations.toml"),
        "[units]\ntargets = [\"systemd\", \"windows\"]\n",
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("units/windows/local.automations.x.xml: missing"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["units"]), 0);
    let task =
        std::fs::read_to_string(sb.root.join("units/windows/local.automations.x.xml")).unwrap();
    assert!(task.contains("<Command>@BIN@</Command>"), "{task}");
    std::fs::write(
        sb.root.join("units/windows/local.automations.x.xml"),
        task.replace("IgnoreNew", "Parallel"),
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("local.automations.x.xml"),
        "{}",
        stdout(&o)
    );
}
