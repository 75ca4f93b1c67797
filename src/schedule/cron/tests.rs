use chrono::NaiveDate;

use super::*;

fn cron(s: &str) -> Cron {
    Cron::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn err(s: &str) -> String {
    match Cron::parse(s) {
        Ok(c) => panic!("{s:?} parsed as {c:?}"),
        Err(e) => e,
    }
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

#[test]
fn fields_names_ranges_steps_and_sunday_twice() {
    let c = cron("5-55/10 9-17 * jan,JUL mon-fri");
    let times: Vec<(u32, u32)> = c.times().collect();
    assert_eq!(times.len(), 6 * 9);
    assert_eq!(times[0], (9, 5));
    assert_eq!(times[5], (9, 55));
    // 2027-01-04 is a Monday, 2027-01-03 a Sunday, 2027-02-01 a Monday in February.
    assert!(c.matches_day(day(2027, 1, 4)));
    assert!(!c.matches_day(day(2027, 1, 3)));
    assert!(!c.matches_day(day(2027, 2, 1)));
    // 0 and 7 are both Sunday; 5-7 is Friday to Sunday.
    for s in ["0 0 * * 0", "0 0 * * 7", "0 0 * * sun"] {
        let c = cron(s);
        assert!(c.matches_day(day(2027, 1, 3)), "{s}");
        assert!(!c.matches_day(day(2027, 1, 4)), "{s}");
    }
    let weekend = cron("0 0 * * 5-7");
    assert!((1..=7).all(|d| weekend.matches_day(day(2027, 1, d)) == matches!(d, 1..=3)));
}

#[test]
fn a_day_matches_either_day_field_when_both_are_restricted() {
    // The 1st and 15th, or any Friday: cron's "or".
    let c = cron("0 9 1,15 * fri");
    assert!(c.matches_day(day(2027, 1, 1))); // a Friday and the 1st
    assert!(c.matches_day(day(2027, 1, 8))); // a Friday
    assert!(c.matches_day(day(2027, 1, 15)));
    assert!(!c.matches_day(day(2027, 1, 14)));
    assert_eq!(
        c.on_calendar(),
        ["*-*-01,15 09:00:00", "Fri *-*-* 09:00:00"]
    );
    // Either day field allowing every day makes every day, on every target.
    let c = cron("0 9 1 * 0-7");
    assert!((1..=31).all(|d| c.matches_day(day(2027, 1, d))));
    assert_eq!(c.on_calendar(), ["*-*-* 09:00:00"]);
    assert_eq!(c.launchd_entries().len(), 1);
    assert_eq!(c.numeric(), "0 9 * * *");
    // A field that starts with `*` makes it "and".
    let c = cron("0 9 */2 * *");
    assert!(c.matches_day(day(2027, 1, 3)));
    assert!(!c.matches_day(day(2027, 1, 4)));
    let c = cron("0 9 * * fri");
    assert!(c.matches_day(day(2027, 1, 15)));
    assert!(!c.matches_day(day(2027, 1, 16)));
    assert_eq!(c.on_calendar(), ["Fri *-*-* 09:00:00"]);
}

#[test]
fn shortcuts_are_their_five_fields_and_reboot_is_at_login() {
    assert_eq!(cron("@daily").numeric(), "0 0 * * *");
    assert_eq!(cron("@midnight").numeric(), "0 0 * * *");
    assert_eq!(cron("@hourly").numeric(), "0 * * * *");
    assert_eq!(cron("@weekly").numeric(), "0 0 * * 0");
    assert_eq!(cron("@monthly").numeric(), "0 0 1 * *");
    assert_eq!(cron("@YEARLY").numeric(), "0 0 1 1 *");
    assert_eq!(cron("@annually").text(), "@annually");
    assert!(err("@reboot").contains("at_login"));
    assert!(err("@every 5m").contains("not a shortcut"));
}

#[test]
fn the_numeric_form_has_no_names_no_seven_and_keeps_a_leading_star() {
    assert_eq!(cron("*/10 * * * *").numeric(), "*/10 * * * *");
    assert_eq!(cron("30 2 * * mon-fri").numeric(), "30 2 * * 1-5");
    assert_eq!(cron("0 0 * jan,jul 5-7").numeric(), "0 0 * 1,7 0,5,6");
    assert_eq!(
        cron("0 12 1-31/2 * *").numeric(),
        "0 12 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 * *"
    );
}

#[test]
fn each_problem_is_named_with_what_to_write_instead() {
    let cases = [
        ("61 * * * *", "61 is out of range; a minute is 0-59"),
        ("0 24 * * *", "24 is out of range; a hour is 0-23"),
        ("0 0 0 * *", "0 is out of range; a day-of-month is 1-31"),
        ("0 0 * 13 *", "13 is out of range"),
        ("0 0 * * 8", "8 is out of range"),
        ("0 0 * * 5-1", "5-1 runs backwards"),
        ("0 0 1,,2 * *", "empty item"),
        ("0 0 * * * *", "has 6 fields; cron has five"),
        ("0 0 * *", "has 4 fields"),
        ("0 0 L * *", "`L` and `W`"),
        ("0 0 15W * *", "`L` and `W`"),
        ("0 0 * * 5L", "`L` and `W`"),
        ("0 0 * * mon#2", "`#`"),
        ("0 0 ? * mon", "`?`"),
        ("5/10 * * * *", "write 5-59/10"),
        ("*/0 * * * *", "a step of 0"),
        ("*/x * * * *", "step \"x\" is not a number"),
        ("0 0 * foo *", "not a number or a name"),
        ("0 0 * * mon-", "a value on both sides"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6 *", "never fires"),
        ("0 0 */2 * mon", "both restricted"),
        ("", "is empty"),
    ];
    for (expr, want) in cases {
        let e = err(expr);
        assert!(e.contains(want), "{expr:?}: {e}");
    }
    // The field is named, and the part of it that is wrong.
    assert_eq!(
        err("0 9-17 * * 1,8"),
        "day-of-week field \"1,8\": 8 is out of range; a day-of-week is 0-7"
    );
    // Names are not numbers of another field.
    assert!(err("0 0 * mon *").contains("month field"));
    // The 29th of February fires in leap years.
    assert!(cron("0 0 29 2 *").search_days() > 365 * 8);
}

#[test]
fn launchd_entries_leave_out_what_is_every_value_and_keep_the_day_fields_apart() {
    let c = cron("*/15 * * * *");
    let entries = c.launchd_entries();
    assert_eq!(entries.len(), 4);
    assert!(entries.iter().all(|e| e.hour.is_none() && e.day.is_none()));
    let c = cron("0 9 1,15 * fri");
    let e = c.launchd_entries();
    assert_eq!(e.len(), 3);
    assert!(e.iter().all(|e| e.day.is_none() || e.weekday.is_none()));
    assert_eq!(cron("* * * * *").launchd_entries().len(), 1);
    for expr in [
        "*/15 9-17 * * 1-5",
        "0 9 1,15 jan,jul fri",
        "5,35 * * * *",
        "0 0 * * *",
    ] {
        let c = cron(expr);
        assert_eq!(c.launchd_count(), c.launchd_entries().len(), "{expr}");
    }
    // 59 minutes × 23 hours would be 1,357 entries: refused, naming a field to simplify.
    let e = err("0-58 0-22 * * *");
    assert!(e.contains("makes 1357 launchd calendar entries"), "{e}");
    assert!(e.contains("simplify the"), "{e}");
    // Leaving a field to * is fine however fine-grained the rest.
    assert!(Cron::parse("* 0-23 * * *").is_ok());
}

#[test]
fn words_for_people() {
    let cases = [
        ("*/10 * * * *", "every 10 minutes"),
        ("5-59/15 * * * *", "every 15 minutes from :05"),
        ("* * * * *", "every minute"),
        ("0 * * * *", "every hour"),
        ("30 * * * *", "every hour at :30"),
        ("30 2 * * 1-5", "at 02:30 on weekdays"),
        ("0 9 1,15 * *", "at 09:00 on the 1st and 15th"),
        ("0 8,18 * * sat,sun", "at 08:00 and 18:00 on weekends"),
        ("0 */6 * * *", "at 00:00, 06:00, 12:00 and 18:00"),
        ("0 */3 * * *", "every 3 hours"),
        ("15 1-23/2 * * *", "every 2 hours from 01:15"),
        ("0 0 1 1 *", "at 00:00 on the 1st in jan"),
        ("0 9 1 * fri", "at 09:00 on the 1st or on fri"),
        ("*/5 9-17 * * 1-5", "at minute */5 of hour 9-17 on weekdays"),
    ];
    for (expr, want) in cases {
        let got = cron(expr).words();
        if want.contains("*/5") {
            assert!(got.starts_with("at minute 0,5,10"), "{expr}: {got}");
            assert!(got.ends_with("of hour 9-17 on weekdays"), "{expr}: {got}");
        } else {
            assert_eq!(got, want, "{expr}");
        }
    }
}

#[test]
fn the_shortest_gap_crosses_midnight_between_matching_days() {
    assert_eq!(cron("*/10 * * * *").shortest_gap_seconds(), 600);
    assert_eq!(cron("30 2 * * *").shortest_gap_seconds(), 86_400);
    // 23:00 Monday to 00:00 Tuesday.
    assert_eq!(cron("0 0,23 * * 1-5").shortest_gap_seconds(), 3600);
    // Mondays only: a week apart is more than two days; the bound is two days.
    assert!(cron("0 12 * * mon").shortest_gap_seconds() >= 86_400 * 2);
    assert_eq!(cron("0 12 * * mon").search_days(), 15);
    assert_eq!(cron("30 2 * * 1-5").search_days(), 8);
    assert_eq!(cron("0 0 1 1 *").search_days(), 733);
}
