//! Table tests, one row per rule of docs/definitions.md, and a bounded mutation fuzz test.

use super::*;

fn checks() -> Checks {
    Checks {
        home: PathBuf::from("/home/alice"),
        data_root: PathBuf::from("/srv/data/automations"),
        units_dir: "/nonexistent-units".into(),
    }
}

const BASE: &str = "name = \"x\"\ncommand = [\"scripts/x.sh\"]\n";

fn parse_x(extra: &str) -> Result<Definition, Vec<Problem>> {
    parse("x.toml", format!("{BASE}{extra}").as_bytes(), &checks())
}

fn parse_raw(text: &str) -> Result<Definition, Vec<Problem>> {
    parse("x.toml", text.as_bytes(), &checks())
}

/// Asserts exactly one located problem for `key` whose message contains `needle`.
fn refused(res: Result<Definition, Vec<Problem>>, key: &str, needle: &str) {
    let problems = res.expect_err("expected a refusal");
    assert!(
        problems
            .iter()
            .any(|p| p.file == "automations/x.toml" && p.key == key && p.message.contains(needle)),
        "no problem with key {key:?} containing {needle:?} in {problems:#?}"
    );
    for p in &problems {
        assert!(
            p.to_string()
                .starts_with(&format!("automations/x.toml: {}: ", p.key))
        );
    }
}

#[test]
fn minimal_definition_takes_defaults() {
    let d = parse_x("").unwrap();
    assert_eq!(d.name.as_str(), "x");
    assert_eq!(d.command, ["scripts/x.sh"]);
    assert_eq!(d.timeout_seconds, 300);
    assert!(!d.outbound);
    assert!(d.schedule.is_none() && d.anytype.is_none() && d.env.is_empty());
    assert_eq!(d.sha256, hex_sha256(BASE.as_bytes()));
}

#[test]
fn full_definition_is_modelled() {
    let d = parse_x(
        r#"description = "what it does"
kind = "command"
timeout_seconds = 3600
outbound = true
headline = "beats"
env = ["GITHUB_TOKEN", "_X"]
[anytype]
permission = "read"
spaces = ["agent", "work"]
[schedule]
daily_at = "08:30"
weekdays = ["mon", "tue", "wed", "thu", "fri"]
"#,
    )
    .unwrap();
    assert_eq!(d.description.as_deref(), Some("what it does"));
    assert_eq!(d.timeout_seconds, 3600);
    assert!(d.outbound);
    assert_eq!(d.headline.unwrap().as_str(), "beats");
    assert_eq!(d.env.len(), 2);
    assert_eq!(d.anytype.unwrap().spaces, ["agent", "work"]);
    assert_eq!(d.schedule.unwrap().words(), "daily at 08:30 on weekdays");
}

#[test]
fn every_rule_valid_and_invalid() {
    // (extra toml, key, expected message fragment) — each must be refused with its own message.
    let refusals: &[(&str, &str, &str)] = &[
        ("description = \"a\\nb\"", "description", "one line"),
        (
            &format!("description = \"{}\"", "d".repeat(201)),
            "description",
            "at most 200",
        ),
        ("description = 3", "description", "expected a string"),
        ("kind = \"shell\"", "kind", "only kind"),
        (
            "timeout_seconds = 0",
            "timeout_seconds",
            "out of range 1..=86400",
        ),
        (
            "timeout_seconds = 86401",
            "timeout_seconds",
            "out of range 1..=86400",
        ),
        ("timeout_seconds = -5", "timeout_seconds", "out of range"),
        (
            "timeout_seconds = \"10\"",
            "timeout_seconds",
            "expected an integer",
        ),
        (
            "timeout_seconds = 1.5",
            "timeout_seconds",
            "expected an integer",
        ),
        ("outbound = \"yes\"", "outbound", "expected a boolean"),
        ("example = \"yes\"", "example", "expected a boolean"),
        ("headline = \"Beats\"", "headline", "not a valid fact name"),
        ("env = [\"AUTOMATION_X\"]", "env", "reserved"),
        ("env = [\"AUTOMATIONS_ROOT\"]", "env", "reserved"),
        ("env = [\"ANYTYPE_KEY\"]", "env", "ANYTYPE_"),
        ("env = [\"PATH\"]", "env", "set by the runner"),
        ("env = [\"A\", \"A\"]", "env", "listed twice"),
        (
            "env = [\"1A\"]",
            "env",
            "not a valid environment variable name",
        ),
        ("env = \"A\"", "env", "expected an array of strings"),
        ("env = [1]", "env", "not a string"),
        ("surprise = 1", "surprise", "unknown key"),
        (
            "[anytype]\npermission = \"read\"\nspaces = []",
            "anytype.spaces",
            "at least one",
        ),
        (
            "[anytype]\npermission = \"read\"\nspaces = [\"a\", \"a\"]",
            "anytype.spaces",
            "listed twice",
        ),
        (
            "[anytype]\nspaces = [\"a\"]",
            "anytype.permission",
            "missing",
        ),
        (
            "[anytype]\npermission = \"read\"",
            "anytype.spaces",
            "missing",
        ),
        (
            "[anytype]\npermission = \"Read!\"\nspaces = [\"a\"]",
            "anytype.permission",
            "not a permission word",
        ),
        (
            "[anytype]\npermission = \"read\"\nspaces = [\"a\"]\nkind = \"command\"",
            "anytype.kind",
            "unknown key",
        ),
        ("anytype = 1", "anytype", "expected a table"),
        (
            "[schedule]\nevery_minutes = 0",
            "schedule.every_minutes",
            "out of range 1..=1440",
        ),
        (
            "[schedule]\nevery_minutes = 1441",
            "schedule.every_minutes",
            "out of range 1..=1440",
        ),
        (
            "[schedule]\ndaily_at = \"24:00\"",
            "schedule.daily_at",
            "not a time",
        ),
        (
            "[schedule]\ndaily_at = \"7:5\"",
            "schedule.daily_at",
            "not a time",
        ),
        (
            "[schedule]\ndaily_at = \"08:60\"",
            "schedule.daily_at",
            "not a time",
        ),
        (
            "[schedule]\ndaily_at = 8",
            "schedule.daily_at",
            "expected a string \"HH:MM\" or a list of them",
        ),
        (
            "[schedule]\ndaily_at = []",
            "schedule.daily_at",
            "lists 0 times; list 1 to 24",
        ),
        (
            "[schedule]\ndaily_at = [\"08:00\", \"18:00\", \"08:00\"]",
            "schedule.daily_at",
            "08:00 is listed twice",
        ),
        (
            "[schedule]\ndaily_at = [\"08:00\", 9]",
            "schedule.daily_at",
            "expected a string \"HH:MM\"",
        ),
        (
            &format!(
                "[schedule]\ndaily_at = [{}]",
                (0..25)
                    .map(|h| format!("\"{:02}:{:02}\"", h % 24, h / 24))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "schedule.daily_at",
            "lists 25 times",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [0]",
            "schedule.days_of_month",
            "0 is not a day of the month; use 1..=31",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [32]",
            "schedule.days_of_month",
            "32 is not a day of the month",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [1, 1]",
            "schedule.days_of_month",
            "1 is listed twice",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = []",
            "schedule.days_of_month",
            "must not be empty",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = 1",
            "schedule.days_of_month",
            "expected an array of days 1..=31",
        ),
        (
            "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [1]\nweekdays = [\"mon\"]",
            "schedule",
            "has both weekdays and days_of_month; choose one",
        ),
        (
            "[schedule]\nevery_minutes = 5\ndays_of_month = [1]",
            "schedule.days_of_month",
            "only allowed with daily_at",
        ),
        (
            "[schedule]\nevery_minutes = 15\noffset_minutes = 15",
            "schedule.offset_minutes",
            "15 is not less than every_minutes (15); use 0..=14",
        ),
        (
            "[schedule]\nevery_minutes = 7\noffset_minutes = 2",
            "schedule.offset_minutes",
            "every 7 minutes counts awake time",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\noffset_minutes = 5",
            "schedule.offset_minutes",
            "only allowed with every_minutes",
        ),
        (
            "[schedule]\nat_login = true\noffset_minutes = 5",
            "schedule.offset_minutes",
            "only allowed with every_minutes",
        ),
        (
            "[schedule]\nat_login = true\nweekdays = [\"mon\"]",
            "schedule.weekdays",
            "only allowed with daily_at",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretries = 6",
            "schedule.retries",
            "out of range 0..=5",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretry_delay_seconds = 10",
            "schedule.retry_delay_seconds",
            "only means something with retries = 1..5",
        ),
        (
            "[schedule]\nevery_minutes = 5\ncron = \"* * * * *\"",
            "schedule",
            "has both every_minutes and cron; choose one",
        ),
        (
            "[schedule]\ncron = \"61 * * * *\"",
            "schedule.cron",
            "\"61 * * * *\": minute field \"61\": 61 is out of range; a minute is 0-59",
        ),
        (
            "[schedule]\ncron = \"0 0 * * * 2027\"",
            "schedule.cron",
            "has 6 fields; cron has five",
        ),
        (
            "[schedule]\ncron = 5",
            "schedule.cron",
            "a string of five fields",
        ),
        (
            "[schedule]\ncron = \"0 9 * * *\"\nweekdays = [\"mon\"]",
            "schedule.weekdays",
            "with cron, write the days in its day fields",
        ),
        (
            "[schedule]\ncron = \"0 9 * * *\"\noffset_minutes = 5",
            "schedule.offset_minutes",
            "only allowed with every_minutes",
        ),
        (
            "[schedule]\ncron = \"*/10 * * * *\"\njitter_seconds = 600",
            "schedule.jitter_seconds",
            "600 is not less than the shortest time between two firings (600 s)",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretries = 1\nretry_delay_seconds = 0",
            "schedule.retry_delay_seconds",
            "out of range 1..=3600",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretries = 1\nretry_on = [\"gate\"]",
            "schedule.retry_on",
            "\"gate\" is not a failure class; use exit_status, timeout, outbound",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretries = 1\nretry_on = []",
            "schedule.retry_on",
            "must not be empty",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretries = 1\nretry_on = [\"timeout\", \"timeout\"]",
            "schedule.retry_on",
            "timeout is listed twice",
        ),
        (
            "[schedule]\nevery_minutes = 5\nretry_on = [\"timeout\"]",
            "schedule.retry_on",
            "only means something with retries",
        ),
        (
            "[schedule]\nat_login = false",
            "schedule",
            "needs every_minutes, daily_at, cron or at_login = true",
        ),
        (
            "[schedule]\nat_login = \"yes\"",
            "schedule.at_login",
            "expected a boolean",
        ),
        (
            "[schedule]\nevery_minutes = 15\noffset_minutes = -1",
            "schedule.offset_minutes",
            "out of range",
        ),
        (
            "[schedule]\nevery_minutes = 5\njitter_seconds = 300",
            "schedule.jitter_seconds",
            "300 is not less than the shortest time between two firings (300 s)",
        ),
        (
            "[schedule]\ndaily_at = [\"08:00\", \"08:10\"]\njitter_seconds = 600",
            "schedule.jitter_seconds",
            "(600 s)",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\njitter_seconds = 3601",
            "schedule.jitter_seconds",
            "out of range 0..=3600",
        ),
        (
            "[schedule]\nevery_minutes = 5\ndaily_at = \"08:00\"",
            "schedule",
            "both",
        ),
        (
            "[schedule]\n",
            "schedule",
            "needs every_minutes, daily_at, cron or at_login = true",
        ),
        (
            "[schedule]\nevery_minutes = 5\nweekdays = [\"mon\"]",
            "schedule.weekdays",
            "only allowed with daily_at",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\nweekdays = [\"monday\"]",
            "schedule.weekdays",
            "not a day",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\nweekdays = [\"mon\", \"mon\"]",
            "schedule.weekdays",
            "listed twice",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\nweekdays = []",
            "schedule.weekdays",
            "must not be empty",
        ),
        (
            "[schedule]\ndaily_at = \"08:00\"\nat = 1",
            "schedule.at",
            "unknown key",
        ),
        ("schedule = \"daily\"", "schedule", "expected a table"),
    ];
    for (extra, key, needle) in refusals {
        refused(parse_x(extra), key, needle);
    }
    let accepted = [
        "description = \"\"",
        &format!("description = \"{}\"", "d".repeat(200)),
        "kind = \"command\"",
        "timeout_seconds = 1",
        "timeout_seconds = 3600",
        "timeout_seconds = 86400",
        "outbound = false",
        "headline = \"a_1\"",
        "env = []",
        "env = [\"GITHUB_TOKEN\", \"LC_ALL\"]",
        "[schedule]\nevery_minutes = 1",
        "[schedule]\nevery_minutes = 1440",
        "[schedule]\ndaily_at = \"00:00\"",
        "[schedule]\ndaily_at = \"23:59\"\nweekdays = [\"sun\", \"sat\"]",
        "[schedule]\ndaily_at = [\"18:00\", \"08:00\"]",
        "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [31, 1, 15]",
        "[schedule]\nevery_minutes = 15\noffset_minutes = 14",
        "[schedule]\nevery_minutes = 120\noffset_minutes = 90",
        "[schedule]\nevery_minutes = 5\njitter_seconds = 299",
        "[schedule]\ndaily_at = \"08:00\"\njitter_seconds = 3600",
        "[schedule]\nat_login = true",
        "[schedule]\nevery_minutes = 60\nat_login = true",
        "[schedule]\ncron = \"30 2 * * 1-5\"",
        "[schedule]\ncron = \"@daily\"\nat_login = true\nretries = 2",
        "[schedule]\ncron = \"@reboot\"",
        "[schedule]\ncron = \"*/10 * * * *\"\njitter_seconds = 599",
        "[schedule]\nevery_minutes = 5\nretries = 5\nretry_delay_seconds = 3600\nretry_on = [\"outbound\", \"timeout\"]",
        "[schedule]\ndaily_at = \"08:00\"\nat_login = true\njitter_seconds = 60",
        "[anytype]\npermission = \"readwrite\"\nspaces = [\"bafyreia.2hx\"]",
    ];
    for extra in accepted {
        assert!(parse_x(extra).is_ok(), "{extra}: {:?}", parse_x(extra));
    }
}

#[test]
fn name_rules() {
    refused(
        parse_raw("name = \"y\"\ncommand = [\"a\"]"),
        "name",
        "does not match the file name",
    );
    refused(
        parse_raw("name = \"X\"\ncommand = [\"a\"]"),
        "name",
        "not a valid name",
    );
    refused(parse_raw("command = [\"a\"]"), "name", "missing");
    refused(
        parse_raw("name = 1\ncommand = [\"a\"]"),
        "name",
        "expected a string",
    );
    let long = "a".repeat(49);
    let res = parse(
        &format!("{long}.toml"),
        format!("name = \"{long}\"\ncommand=[\"a\"]").as_bytes(),
        &checks(),
    );
    assert!(res.unwrap_err()[0].message.contains("not a valid name"));
}

#[test]
fn command_rules() {
    refused(parse_raw("name = \"x\""), "command", "missing");
    refused(
        parse_raw("name = \"x\"\ncommand = []"),
        "command",
        "must not be empty",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = \"ls\""),
        "command",
        "expected an array",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"~/bin/x\"]"),
        "command",
        "starts with ~",
    );
    // A shell expands ~ at the start of any word, not only of the whole argument.
    for script in [
        "exec ~/bin/sync.sh",
        "cd /tmp && ~/x",
        "PATH=$PATH:~/bin x",
        "a=~/b x",
    ] {
        refused(
            parse_raw(&format!(
                "name = \"x\"\ncommand = [\"sh\", \"-c\", {script:?}]"
            )),
            "command",
            "a word that starts with ~",
        );
    }
    refused(
        parse_raw("name = \"x\"\ncommand = [\"bash\", \"-ec\", \"echo hi >~/log\"]"),
        "command",
        "a word that starts with ~",
    );
    // Not home: inside a word, bash's =~ operator, or an argument no shell reads.
    for command in [
        r#"["sh", "-c", "echo a~b; ls /x~"]"#,
        r#"["bash", "-c", "[[ $x =~ ^a ]] && echo y"]"#,
        r#"["rsync", "--exclude=~*", "a", "b"]"#,
    ] {
        let home_free = parse_raw(&format!("name = \"x\"\ncommand = {command}"));
        assert!(home_free.is_ok(), "{command}: {home_free:?}");
    }
    refused(
        parse_raw("name = \"x\"\ncommand = [\"sh\", \"$HOME/x\"]"),
        "command",
        "$HOME",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"sh\", \"${HOME}/x\"]"),
        "command",
        "$HOME",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"cat\", \"--file=/home/alice/notes\"]"),
        "command",
        "element 2 contains the home directory path",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"/home/alice\"]"),
        "command",
        "home directory",
    );
    // Each says what to do instead .
    refused(
        parse_raw("name = \"x\"\ncommand = [\"cat\", \"~/notes\"]"),
        "command",
        "instead, run a script in the repository",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"cat\", \"/srv/data/automations/runs.jsonl\"]"),
        "command",
        "data root",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"{python}\", \"x.py\"]"),
        "command",
        "unknown placeholder {python}",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"\"]"),
        "command",
        "program) is empty",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"../escape.sh\"]"),
        "command",
        "leaves the repository root",
    );
    // A neighbour of home is not home; placeholders and absolute paths outside home are fine.
    for ok in [
        "[\"/home/alicea/x\"]",
        "[\"{root}/scripts/x.sh\", \"{self}\"]",
        "[\"/usr/bin/env\", \"{\\\"json\\\": 1}\"]",
        "[\"sh\", \"-c\", \"echo hi\"]",
    ] {
        assert!(
            parse_raw(&format!("name = \"x\"\ncommand = {ok}")).is_ok(),
            "{ok}"
        );
    }
}

#[test]
fn size_syntax_and_encoding() {
    let big = format!("{BASE}# {}\n", "x".repeat(65 * 1024));
    refused(parse_raw(&big), "file", "larger than 64 KiB");
    refused(
        parse_raw("name = \"x\"\nname = \"x\"\ncommand = [\"a\"]"),
        "toml",
        "line 2",
    );
    refused(
        parse("x.toml", b"name = \"\xff\"", &checks()),
        "file",
        "UTF-8",
    );
    refused(
        parse_raw("name = \"x\"\ncommand = [\"a\"]\n[schedule\n"),
        "toml",
        "line 3",
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let problems =
        parse_raw("name = \"y\"\ncommand = []\ntimeout_seconds = 0\nextra = 1\n[schedule]\n")
            .unwrap_err();
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    for key in ["name", "command", "timeout_seconds", "extra", "schedule"] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
}

#[test]
fn schedules_in_words() {
    let words = |m| Schedule::every(m).words();
    assert_eq!(words(1), "every minute");
    assert_eq!(words(5), "every 5 minutes");
    assert_eq!(words(60), "every hour");
    assert_eq!(words(120), "every 2 hours");
    assert_eq!(
        words(90),
        "every 90 minutes (counts awake time; does not fire on wake)"
    );
    assert_eq!(words(360), "every 6 hours");
    let daily = |days: &[Weekday]| {
        Schedule::DailyAt {
            daily_at: vec![TimeOfDay { hour: 8, minute: 5 }],
            weekdays: days.to_vec(),
            days_of_month: vec![],
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
        .words()
    };
    use Weekday::*;
    assert_eq!(daily(&[]), "daily at 08:05");
    assert_eq!(
        daily(&[Fri, Mon, Tue, Wed, Thu]),
        "daily at 08:05 on weekdays"
    );
    assert_eq!(daily(&[Sun, Sat]), "daily at 08:05 on weekends");
    assert_eq!(daily(&[Wed, Mon]), "daily at 08:05 on mon, wed");
    assert_eq!(daily(&Weekday::ALL), "daily at 08:05");
    let offset = |every_minutes, offset_minutes| {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
        .words()
    };
    assert_eq!(offset(15, 5), "every 15 minutes from :05");
    assert_eq!(offset(60, 5), "every hour at :05");
    assert_eq!(offset(120, 90), "every 2 hours from 01:30");
    assert_eq!(Schedule::AtLogin.words(), "at login");
    let with_login = parse_x("[schedule]\nevery_minutes = 60\nat_login = true").unwrap();
    assert_eq!(
        with_login.schedule.unwrap().words(),
        "every hour, and at login"
    );
    let times = |t: &[&str], dom: &[u8]| {
        Schedule::DailyAt {
            daily_at: t.iter().map(|t| TimeOfDay::parse(t).unwrap()).collect(),
            weekdays: vec![],
            days_of_month: dom.to_vec(),
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
        .words()
    };
    assert_eq!(times(&["08:00", "18:00"], &[]), "daily at 08:00 and 18:00");
    assert_eq!(
        times(&["06:00", "12:00", "18:00"], &[]),
        "daily at 06:00, 12:00 and 18:00"
    );
    assert_eq!(times(&["03:00"], &[1]), "on the 1st at 03:00");
    assert_eq!(
        times(&["03:00"], &[1, 2, 3, 11, 12, 13, 21, 22, 23, 31]),
        "on the 1st, 2nd, 3rd, 11th, 12th, 13th, 21st, 22nd, 23rd and 31st at 03:00"
    );
}

#[test]
fn lists_and_days_are_kept_sorted_and_late_days_warn() {
    let d = parse_x("[schedule]\ndaily_at = [\"18:00\", \"08:00\"]\ndays_of_month = [31, 1]\njitter_seconds = 60")
        .unwrap();
    assert_eq!(
        d.schedule,
        Some(Schedule::DailyAt {
            daily_at: vec![
                TimeOfDay { hour: 8, minute: 0 },
                TimeOfDay {
                    hour: 18,
                    minute: 0
                }
            ],
            weekdays: vec![],
            days_of_month: vec![1, 31],
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        })
    );
    assert_eq!(d.jitter_seconds, 60);
    let w = schedule_warnings(&d);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].key, "schedule.days_of_month");
    assert!(
        w[0].message.contains("31 is not in every month")
            && w[0]
                .message
                .contains("February, April, June, September and November"),
        "{}",
        w[0].message
    );
    let d = parse_x("[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [1, 28]").unwrap();
    assert!(schedule_warnings(&d).is_empty());
    // A timeout longer than the time to the next firing is said, not refused: that firing skips.
    let long = "timeout_seconds = 7200\n[schedule]\ncron = \"0 * * * *\"";
    let w = schedule_warnings(&parse_x(long).unwrap());
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].key, "timeout_seconds");
    assert!(
        w[0].message
            .contains("7200 s is longer than the shortest time between two firings (3600 s)"),
        "{}",
        w[0].message
    );
    let fits = "timeout_seconds = 3600\n[schedule]\ncron = \"0 * * * *\"";
    assert!(schedule_warnings(&parse_x(fits).unwrap()).is_empty());
    // Retries: defaults, and waits that double up to an hour.
    assert_eq!(d.retry, Retry::default());
    let r = parse_x("[schedule]\nevery_minutes = 5\nretries = 5\nretry_delay_seconds = 1000")
        .unwrap()
        .retry;
    assert_eq!(
        r.on,
        [RetryOn::ExitStatus, RetryOn::Timeout, RetryOn::Outbound]
    );
    let secs: Vec<u64> = (1..=5).map(|a| r.delay(a).as_secs()).collect();
    assert_eq!(secs, [1000, 2000, 3600, 3600, 3600]);
    assert_eq!(r.total_delay().as_secs(), 13_800);
}

/// Deterministic xorshift so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const CORPUS: &[&str] = &[
    "name = \"x\"\ncommand = [\"scripts/x.sh\", \"{root}\"]\ntimeout_seconds = 30\n[schedule]\nevery_minutes = 5\n",
    "name = \"x\"\ndescription = \"d\"\ncommand = [\"a\"]\nenv = [\"A\"]\n[anytype]\npermission = \"read\"\nspaces = [\"s\"]\n[schedule]\ndaily_at = \"08:00\"\nweekdays = [\"mon\"]\n",
];

const SPLICES: &[&str] = &[
    "=",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "\n",
    "[[x]]",
    "a.b.c = 1",
    "99999999999999999999",
    "-9223372036854775808",
    "1e400",
    "nan",
    "inf",
    "\u{1F600}",
    "\u{0}",
    "ñ",
    "[schedule]",
    "[anytype]",
    "name = \"x\"",
    "x = [[[[[[[[[[1]]]]]]]]]]",
    "t = {a = {b = {c = {d = 1}}}}",
    "1979-05-27T07:32:00Z",
    "true",
    "\"\"\"",
    "'''",
    "\\u0000",
    "weekdays = [\"mon\",\"mon\"]",
];

fn check_outcome(input: &[u8]) {
    match parse("x.toml", input, &checks()) {
        Ok(d) => assert_eq!(d.name.as_str(), "x"),
        Err(problems) => {
            assert!(
                !problems.is_empty(),
                "refusal without a problem for {input:?}"
            );
            for p in problems {
                assert_eq!(p.file, "automations/x.toml");
                assert_eq!(p.name.as_ref().map(Name::as_str), Some("x"));
                assert!(!p.key.is_empty() && !p.message.is_empty());
            }
        }
    }
}

#[test]
fn fuzz_mutated_definitions_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let started = std::time::Instant::now();
    let mut cases = 0;
    while cases < 20_000 && started.elapsed() < std::time::Duration::from_secs(20) {
        let mut bytes = CORPUS[rng.below(CORPUS.len())].as_bytes().to_vec();
        for _ in 0..1 + rng.below(6) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(6) {
                0 => bytes.truncate(at),
                1 if !bytes.is_empty() => {
                    let i = at.min(bytes.len() - 1);
                    bytes[i] = rng.next() as u8;
                }
                2 => {
                    let s = SPLICES[rng.below(SPLICES.len())].as_bytes();
                    bytes.splice(at..at, s.iter().copied());
                }
                3 if at < bytes.len() => {
                    let end = (at + rng.below(16)).min(bytes.len());
                    bytes.drain(at..end);
                }
                4 => {
                    let line = bytes.clone();
                    bytes.extend_from_slice(&line[..at.min(line.len())]);
                }
                _ => {
                    const BYTES: &[u8] = b"0123456789 ={}[]\",.-_abcxyz";
                    bytes.insert(at, BYTES[rng.below(BYTES.len())]);
                }
            }
        }
        check_outcome(&bytes);
        cases += 1;
    }
    // Deep nesting and huge inputs, beyond what mutations reach.
    check_outcome(format!("{BASE}x = {}{}", "[".repeat(10_000), "]".repeat(10_000)).as_bytes());
    check_outcome(format!("{BASE}x = {}", "{a = ".repeat(5_000)).as_bytes());
    check_outcome(&vec![b'['; 70_000]);
    check_outcome(&[0xff, 0xfe, 0x00]);
    assert!(cases >= 1000, "only {cases} cases ran");
}

#[test]
fn trigger_tables_are_modelled_with_their_defaults() {
    let d = parse_x("[trigger]\npaths = [\"{root}/inbox\", \"~/Documents/Inbox\"]\n").unwrap();
    let t = d.trigger.unwrap();
    assert_eq!(t.paths, ["{root}/inbox", "~/Documents/Inbox"]);
    assert_eq!(t.on, PathEvent::Changed);
    assert_eq!(t.settle_seconds, trigger::DEFAULT_SETTLE_SECONDS);
    assert_eq!(t.max_per_hour, trigger::DEFAULT_MAX_PER_HOUR);
    assert_eq!(t.words(), "when inbox/ or Inbox/ changes");
    let d = parse_x(
        "[schedule]\ndaily_at = \"02:00\"\n[trigger]\npaths = [\"/home/alice/q\"]\non = \"not_empty\"\nsettle_seconds = 0\nmax_per_hour = 10\nafter_success = [\"backup\"]\nafter_failure = [\"backup\", \"sync\"]\n",
    )
    .unwrap();
    assert!(d.schedule.is_some());
    let t = d.trigger.unwrap();
    assert_eq!(
        (t.on, t.settle_seconds, t.max_per_hour),
        (PathEvent::NotEmpty, 0, 10)
    );
    assert_eq!(
        t.words(),
        "when q/ holds files, after backup succeeds, after backup or sync fails"
    );
    assert!(t.follows("backup", true) && t.follows("sync", false) && !t.follows("sync", true));
    assert_eq!(t.upstreams().count(), 2);
}

#[test]
fn trigger_rules() {
    let cases: &[(&str, &str, &str)] = &[
        ("[trigger]\n", "trigger", "starts nothing"),
        ("trigger = 1\n", "trigger", "expected a table"),
        (
            "[trigger]\npaths = [\"{root}/a\"]\nwhen = 1\n",
            "trigger.when",
            "unknown key",
        ),
        ("[trigger]\npaths = []\n", "trigger.paths", "is empty"),
        (
            "[trigger]\npaths = [\"inbox\"]\n",
            "trigger.paths",
            "relative",
        ),
        (
            "[trigger]\npaths = [\"/etc/x\"]\n",
            "trigger.paths",
            "outside the home folder",
        ),
        (
            "[trigger]\npaths = [\"~\"]\n",
            "trigger.paths",
            "whole repository or home",
        ),
        (
            "[trigger]\npaths = [\"{root}\"]\n",
            "trigger.paths",
            "whole repository or home",
        ),
        (
            "[trigger]\npaths = [\"~bob/x\"]\n",
            "trigger.paths",
            "`~user` is not read",
        ),
        (
            "[trigger]\npaths = [\"~/a/../b\"]\n",
            "trigger.paths",
            "`..`",
        ),
        ("[trigger]\npaths = [\"~/in*\"]\n", "trigger.paths", "globs"),
        (
            "[trigger]\npaths = [\"~/a\\nb\"]\n",
            "trigger.paths",
            "control character",
        ),
        (
            "[trigger]\npaths = [\"~/a\", \"~/a\"]\n",
            "trigger.paths",
            "listed twice",
        ),
        (
            "[trigger]\npaths = [\"/srv/data/automations/state\"]\n",
            "trigger.paths",
            "outside the home folder",
        ),
        (
            "[trigger]\npaths = [\"~/a\"]\non = \"created\"\n",
            "trigger.on",
            "not a change",
        ),
        (
            "[trigger]\npaths = [\"~/a\"]\nsettle_seconds = 601\n",
            "trigger.settle_seconds",
            "out of range",
        ),
        (
            "[trigger]\npaths = [\"~/a\"]\nmax_per_hour = 0\n",
            "trigger.max_per_hour",
            "out of range",
        ),
        (
            "[trigger]\nafter_success = [\"Bad Name\"]\n",
            "trigger.after_success",
            "Bad Name",
        ),
        (
            "[trigger]\nafter_failure = [\"a\", \"a\"]\n",
            "trigger.after_failure",
            "listed twice",
        ),
        (
            "[trigger]\nafter_success = [\"a\"]\non = \"changed\"\n",
            "trigger.on",
            "there are none",
        ),
        (
            "[trigger]\nafter_success = [\"a\"]\nsettle_seconds = 3\n",
            "trigger.settle_seconds",
            "there are none",
        ),
    ];
    for (extra, key, needle) in cases {
        refused(parse_x(extra), key, needle);
    }
    // The data root is refused when it lies inside the home folder.
    let inside = Checks {
        home: PathBuf::from("/home/alice"),
        data_root: PathBuf::from("/home/alice/.local/share/automations"),
        units_dir: "/nonexistent-units".into(),
    };
    let text = format!("{BASE}[trigger]\npaths = [\"~/.local/share/automations/state\"]\n");
    let problems = parse("x.toml", text.as_bytes(), &inside).unwrap_err();
    assert!(
        problems[0].message.contains("inside the data root"),
        "{problems:?}"
    );
}

/// Writes `files` (name, text) into a fresh repository's definitions folder, loads them all, and
/// returns the problems found and the names that stayed valid.
fn load_folder(files: &[(&str, &str)]) -> (Vec<String>, Vec<String>, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("automations");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(d.path().join("inbox")).unwrap();
    for (name, extra) in files {
        let text = format!("name = \"{name}\"\ncommand = [\"true\"]\n{extra}");
        std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    }
    let checks = Checks {
        home: d.path().join("home"),
        data_root: d.path().join("data"),
        units_dir: "/nonexistent-units".into(),
    };
    let loaded = load_all(&dir, &checks).unwrap();
    let problems = loaded.problems.iter().map(ToString::to_string).collect();
    let names = loaded
        .definitions
        .iter()
        .map(|d| d.name.to_string())
        .collect();
    (problems, names, d)
}

#[test]
fn chains_name_real_automations_other_than_themselves_and_never_loop() {
    let (problems, names, _d) = load_folder(&[
        ("backup", ""),
        ("offsite", "[trigger]\nafter_success = [\"backup\"]\n"),
        ("self", "[trigger]\nafter_failure = [\"self\"]\n"),
        ("ghost", "[trigger]\nafter_success = [\"nobody\"]\n"),
        ("a", "[trigger]\nafter_success = [\"b\"]\n"),
        ("b", "[trigger]\nafter_failure = [\"c\"]\n"),
        ("c", "[trigger]\nafter_success = [\"a\"]\n"),
    ]);
    assert_eq!(names, ["backup", "offsite"], "{problems:#?}");
    let all = problems.join("\n");
    assert!(
        all.contains("automations/self.toml: trigger.after_failure: \"self\" is this automation"),
        "{all}"
    );
    assert!(
        all.contains(
            "automations/ghost.toml: trigger.after_success: \"nobody\" is not an automation here"
        ),
        "{all}"
    );
    // The loop is printed from each of its members, upstream first.
    assert!(
        all.contains("automations/a.toml: trigger: its chain loops: a → c → b → a"),
        "{all}"
    );
    assert!(
        all.contains("automations/b.toml: trigger: its chain loops: b → a → c → b"),
        "{all}"
    );
    assert!(
        all.contains("automations/c.toml: trigger: its chain loops"),
        "{all}"
    );
    // A self-chain is said once, not as a loop too.
    assert!(!all.contains("self → self"), "{all}");
}

#[test]
fn watched_paths_need_their_folder_and_must_be_files_or_folders() {
    let (problems, names, d) = load_folder(&[
        (
            "ok",
            "[trigger]\npaths = [\"{root}/inbox\", \"{root}/inbox/new.pdf\"]\n",
        ),
        (
            "nofolder",
            "[trigger]\npaths = [\"{root}/missing/inbox\"]\n",
        ),
        ("fifo", "[trigger]\npaths = [\"{root}/inbox/pipe\"]\n"),
    ]);
    // The FIFO is made after the first load, so the first load takes it as a file to come.
    assert_eq!(names, ["fifo", "ok"], "{problems:#?}");
    assert!(
        problems.iter().any(|p| p.starts_with(
            "automations/nofolder.toml: trigger.paths: \"{root}/missing/inbox\": its folder "
        ) && p.contains("does not exist")),
        "{problems:#?}"
    );
    nix::unistd::mkfifo(
        &d.path().join("inbox/pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let checks = Checks {
        home: d.path().join("home"),
        data_root: d.path().join("data"),
        units_dir: "/nonexistent-units".into(),
    };
    let loaded = load_all(&d.path().join("automations"), &checks).unwrap();
    let all: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    assert!(
        all.iter()
            .any(|p| p.contains("fifo.toml: trigger.paths") && p.contains("is a FIFO")),
        "{all:#?}"
    );
}

#[test]
fn policies_are_modelled() {
    let d = parse_x(
        r#"overlap = "queue"
lock = "disk"
writes = ["~/Backups", "{root}/out", "/srv/backups"]
timeout_seconds = 600
[schedule]
every_minutes = 15
[limits]
memory_max = "512M"
cpu_quota = "50%"
nice = 10
io = "idle"
tasks_max = 64
[sandbox]
level = "strict"
"#,
    )
    .unwrap();
    let p = &d.policy;
    assert_eq!(p.overlap, Overlap::Queue);
    assert_eq!(p.lock.as_ref().map(Name::as_str), Some("disk"));
    assert_eq!(p.writes, ["~/Backups", "{root}/out", "/srv/backups"]);
    assert_eq!(
        p.limits.memory_max.as_ref().map(|m| m.bytes),
        Some(512 << 20)
    );
    assert_eq!(p.limits.cpu_quota, Some(50));
    assert_eq!(p.limits.nice, Some(10));
    assert_eq!(p.limits.io, Some(IoClass::Idle));
    assert_eq!(p.limits.tasks_max, Some(64));
    assert!(p.sandbox);
    // None of it: today's behaviour.
    assert_eq!(parse_x("").unwrap().policy, Policy::default());
    let off = parse_x("[sandbox]\nlevel = \"off\"\n").unwrap();
    assert!(!off.policy.sandbox);
    assert_eq!(
        parse_x("overlap = \"replace\"\n").unwrap().policy.overlap,
        Overlap::Replace
    );
}

#[test]
fn policy_mistakes_are_located() {
    refused(
        parse_x("overlap = \"wait\"\n"),
        "overlap",
        "\"skip\", \"queue\" or \"replace\"",
    );
    refused(parse_x("overlap = 1\n"), "overlap", "expected a string");
    refused(
        parse_x("lock = \"Disk Lock\"\n"),
        "lock",
        "named like an automation",
    );
    refused(
        parse_x("[limits]\nmemory_max = \"lots\"\n"),
        "limits.memory_max",
        "is not a size",
    );
    refused(
        parse_x("[limits]\nmemory_max = \"1M\"\n"),
        "limits.memory_max",
        "below 32 MiB",
    );
    refused(
        parse_x("[limits]\nnice = 40\n"),
        "limits.nice",
        "out of range 0..=19",
    );
    refused(
        parse_x("[limits]\nnice = -5\n"),
        "limits.nice",
        "out of range 0..=19",
    );
    refused(
        parse_x("[limits]\ncpu_quota = 50\n"),
        "limits.cpu_quota",
        "a percentage",
    );
    refused(
        parse_x("[limits]\ncpu_quota = \"0%\"\n"),
        "limits.cpu_quota",
        "1% to 10000%",
    );
    refused(
        parse_x("[limits]\nio = \"fast\"\n"),
        "limits.io",
        "\"idle\", \"low\" or \"normal\"",
    );
    refused(
        parse_x("[limits]\ntasks_max = 2\n"),
        "limits.tasks_max",
        "out of range 8..=",
    );
    refused(
        parse_x("[limits]\nswap = 1\n"),
        "limits.swap",
        "unknown key",
    );
    refused(parse_x("[limits]\n"), "limits", "sets nothing");
    refused(
        parse_x("[sandbox]\nlevel = \"paranoid\"\n"),
        "sandbox.level",
        "\"off\" or \"strict\"",
    );
    refused(parse_x("[sandbox]\n"), "sandbox.level", "missing");
    refused(
        parse_x("[sandbox]\nlevel = \"strict\"\nwrites = [\"/x\"]\n"),
        "sandbox.writes",
        "unknown key",
    );
    let strict = "[sandbox]\nlevel = \"strict\"\n";
    let writes = |w: &str| parse_x(&format!("writes = [{w}]\n{strict}"));
    refused(
        writes("\"~\""),
        "writes",
        "names the whole repository, home folder",
    );
    refused(
        writes("\"/home/alice\""),
        "writes",
        "names the whole repository, home folder",
    );
    refused(
        writes("\"/\""),
        "writes",
        "names the whole repository, home folder",
    );
    refused(
        writes("\"{root}\""),
        "writes",
        "names the whole repository, home folder",
    );
    refused(writes("\"Backups\""), "writes", "relative");
    refused(writes("\"~/a/../b\""), "writes", "`..` step");
    refused(writes("\"~/B*\""), "writes", "globs");
    refused(writes("\"~/a\", \"~/a\""), "writes", "listed twice");
    refused(
        writes("\"/srv/data/automations/x\""),
        "writes",
        "inside the data root",
    );
    refused(writes(""), "writes", "is empty");
    refused(
        parse_x("writes = [\"~/Backups\"]\n"),
        "writes",
        "only means something in a sandbox",
    );
    refused(
        parse_x("overlap = \"queue\"\ntimeout_seconds = 1200\n[schedule]\nevery_minutes = 15\n"),
        "overlap",
        "longer than the shortest time between two firings (900 s)",
    );
    // Skip and replace may overrun (validate warns); queue within the interval is fine.
    assert!(
        parse_x("overlap = \"replace\"\ntimeout_seconds = 1200\n[schedule]\nevery_minutes = 15\n")
            .is_ok()
    );
    assert!(
        parse_x("overlap = \"queue\"\ntimeout_seconds = 600\n[schedule]\nevery_minutes = 15\n")
            .is_ok()
    );
}

#[test]
fn a_folder_a_sandboxed_automation_writes_must_exist() {
    let d = tempfile::tempdir().unwrap();
    let defs = d.path().join("automations");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::create_dir_all(d.path().join("home/Backups")).unwrap();
    let def = |name: &str, writes: &str| {
        format!(
            "name = \"{name}\"\ncommand = [\"/bin/true\"]\nwrites = [{writes}]\n[sandbox]\nlevel = \"strict\"\n"
        )
    };
    std::fs::write(defs.join("ok.toml"), def("ok", "\"~/Backups\"")).unwrap();
    std::fs::write(defs.join("gone.toml"), def("gone", "\"~/Missing\"")).unwrap();
    // Regression: `{root}/out` a link to the home folder was accepted, and the strict job wrote
    // into home; re-pointing the link later needed no approval. A link on the way is refused.
    std::fs::create_dir_all(d.path().join("home/real")).unwrap();
    std::os::unix::fs::symlink(d.path().join("home"), d.path().join("out")).unwrap();
    std::os::unix::fs::symlink(d.path().join("home/real"), d.path().join("home/Link")).unwrap();
    std::fs::write(defs.join("linked.toml"), def("linked", "\"{root}/out\"")).unwrap();
    std::fs::write(defs.join("deeper.toml"), def("deeper", "\"~/Link\"")).unwrap();
    let checks = Checks {
        home: d.path().join("home"),
        data_root: d.path().join("data"),
        units_dir: "/nonexistent-units".into(),
    };
    let loaded = load_all(&defs, &checks).unwrap();
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ok"]);
    let mut all: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    all.sort();
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(
        all[0].starts_with("automations/deeper.toml: writes: \"~/Link\": ")
            && all[0].contains("/home/Link is a link (to "),
        "{all:#?}"
    );
    assert!(
        all[1].starts_with("automations/gone.toml: writes: \"~/Missing\": does not exist"),
        "{all:#?}"
    );
    assert!(
        all[2].starts_with("automations/linked.toml: writes: \"{root}/out\": ")
            && all[2].contains("/out is a link (to "),
        "{all:#?}"
    );
}

#[test]
fn expect_min_seconds_must_be_below_the_timeout() {
    assert_eq!(
        parse_x("expect_min_seconds = 1800\ntimeout_seconds = 3600\n")
            .unwrap()
            .expect_min_seconds,
        Some(1800)
    );
    assert_eq!(parse_x("").unwrap().expect_min_seconds, None);
    refused(
        parse_x("expect_min_seconds = 300\n"),
        "expect_min_seconds",
        "is not below timeout_seconds (300)",
    );
    refused(
        parse_x("expect_min_seconds = 0\n"),
        "expect_min_seconds",
        "out of range 1..=86400",
    );
}

#[test]
fn a_problem_names_its_automation_only_when_the_file_name_is_one() {
    let bad = b"name = \"x\"\ncommand = 3\n";
    let named = parse("x.toml", bad, &checks()).unwrap_err();
    assert!(
        named
            .iter()
            .all(|p| p.name.as_ref().map(Name::as_str) == Some("x"))
    );
    let unnamed = parse("Not A Name.toml", bad, &checks()).unwrap_err();
    assert!(!unnamed.is_empty() && unnamed.iter().all(|p| p.name.is_none()));
}

#[test]
fn time_zone_and_catch_up_belong_to_a_clock() {
    let d = parse_x(
        "[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\ncatch_up = \"all\"",
    )
    .unwrap();
    let s = d.schedule.unwrap();
    assert_eq!(s.zone().map(|z| z.name()), Some("America/New_York"));
    assert_eq!(s.catch_up(), CatchUp::All);
    assert_eq!(s.words(), "daily at 09:00 (America/New_York)");
    refused(
        parse_x("[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"New York\""),
        "schedule.time_zone",
        "IANA",
    );
    refused(
        parse_x("[schedule]\ndaily_at = \"09:00\"\ncatch_up = \"some\""),
        "schedule.catch_up",
        "\"latest\", \"all\", \"none\"",
    );
    refused(
        parse_x("[schedule]\nevery_minutes = 7\ntime_zone = \"UTC\""),
        "schedule.time_zone",
        "awake time",
    );
    refused(
        parse_x("[schedule]\nat_login = true\ncatch_up = \"none\""),
        "schedule.catch_up",
        "only allowed with daily_at, cron",
    );
    // A grid is on the clock; cron too.
    assert!(parse_x("[schedule]\nevery_minutes = 60\ntime_zone = \"Asia/Kolkata\"").is_ok());
    assert!(parse_x("[schedule]\ncron = \"0 9 * * 1-5\"\ncatch_up = \"none\"").is_ok());
}
