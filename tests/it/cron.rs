//! The `cron` schedule checked against references, not against itself: cronsim (PyPI, which reads
//! expressions as Debian's cron does; `make test` installs it beside kubernetes-validate) through
//! scripts/cron_oracle.py, `systemd-analyze calendar` on the timer's own `OnCalendar=` lines, and
//! the plist's `StartCalendarInterval` entries evaluated minute by minute as launchd documents them
//! (an entry matches when every key it has does, except that Day and Weekday together match on
//! either). 45 expressions, seven zones (DST in both hemispheres, 30- and 45-minute offsets, a
//! 30-minute DST shift), every DST change of 2026 in them.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::calendar::{launchd_fires, rendered, systemd_elapses};
use crate::harness::*;
use crate::units::which;

/// Expressions people write: the three of a typical crontab, every syntax, both day rules.
const EXPRESSIONS: &[&str] = &[
    "*/10 * * * *",
    "30 2 * * 1-5",
    "0 9 1,15 * *",
    "* * * * *",
    "0 * * * *",
    "15 * * * *",
    "5-55/10 * * * *",
    "0,30 * * * *",
    "0 */2 * * *",
    "30 1-23/3 * * *",
    "0 9-17 * * mon-fri",
    "*/15 9-17 * * 1-5",
    "0 0 * * *",
    "30 2 * * *",
    "0 3 * * 0",
    "0 3 * * 7",
    "0 3 * * sun",
    "45 23 * * 5-7",
    "0 12 1 * *",
    "0 12 31 * *",
    "0 6 1 jan,jul *",
    "0 6 * JAN-MAR MON",
    "0 0 1,15 * fri",
    "30 4 13 * 5",
    "0 8 */2 * *",
    "0 8 * * */2",
    "0 2,14 * * *",
    "10 2 * * 6,0",
    "0 22 * * 1-5",
    "59 23 28-31 * *",
    "0 0 29 2 *",
    "0 1 * * *",
    "30 1 * * *",
    "*/5 2 * * *",
    "20-40 2 * * *",
    "0-10/5 1,2,3 * * *",
    "0 0-6/2 * * sat",
    "17 */4 1-7 * *",
    "*/20 * * 3,10 *",
    "@hourly",
    "@daily",
    "@midnight",
    "@weekly",
    "@monthly",
    "@yearly",
];

const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Adelaide",
    "Australia/Lord_Howe",
    "UTC",
];

/// Every change of offset in 2026 among the zones (UTC), with the zone that changes — but Lord
/// Howe's: its clock moves by 30 minutes, and cronsim steps an hour field by 3,600 real seconds,
/// which lands on 01:30 and then 02:30 and so never sees the 02:00 that happens once that night
/// (`0 */2 * * *`), where cron, which looks at every local minute, runs. The program runs it.
/// The zone's ordinary days are compared all year, and in June with systemd.
const CHANGES: &[(&str, &str)] = &[
    ("America/New_York", "2026-03-08T07:00:00Z"),
    ("Europe/Berlin", "2026-03-29T01:00:00Z"),
    ("Australia/Adelaide", "2026-04-04T16:30:00Z"),
    ("Australia/Adelaide", "2026-10-03T16:30:00Z"),
    ("Europe/Berlin", "2026-10-25T01:00:00Z"),
    ("America/New_York", "2026-11-01T06:00:00Z"),
];

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A name per expression: `c0` … `c44`.
fn name(i: usize) -> String {
    format!("c{i}")
}

/// cronsim behind scripts/cron_oracle.py, one process for many questions; `None` when the test
/// venv is missing (the caller skips, loudly).
struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    fn start() -> Option<Self> {
        let python = repo_root().join("target/kubernetes-validate/bin/python");
        let ready = python.exists()
            && Command::new(&python)
                .args(["-c", "import cronsim"])
                .output()
                .is_ok_and(|o| o.status.success());
        if !ready {
            return None;
        }
        let mut child = Command::new(python)
            .arg(repo_root().join("scripts/cron_oracle.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Some(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// cronsim's firings of `expr` in `zone` in `(after, until]`, at most `max`.
    fn firings(
        &mut self,
        expr: &str,
        zone: &str,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        max: usize,
    ) -> Vec<DateTime<Utc>> {
        let q = serde_json::json!({
            "expr": expr, "zone": zone, "after": after.timestamp(),
            "until": until.timestamp(), "max": max,
        });
        writeln!(self.stdin, "{q}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let secs: Vec<i64> = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        secs.into_iter()
            .map(|s| Utc.timestamp_opt(s, 0).unwrap())
            .collect()
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn oracle_or_skip(test: &str) -> Option<Oracle> {
    let o = Oracle::start();
    if o.is_none() {
        skip(
            test,
            "cronsim is not in target/kubernetes-validate (make test installs it: scripts/test-prereqs.sh)",
        );
    }
    o
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let n = name(i);
        sb.definition(
            &n,
            &format!("name = \"{n}\"\ncommand = [\"true\"]\n[schedule]\ncron = \"{expr}\"\n"),
        );
    }
    sb
}

fn schedule_of(expr: &str) -> automations::schedule::Schedule {
    schedule_in(expr, "")
}

/// The schedule of `cron = expr`, with `more` lines of `[schedule]` (a `time_zone`).
fn schedule_in(expr: &str, more: &str) -> automations::schedule::Schedule {
    let def = automations::definition::parse(
        "x.toml",
        format!("name = \"x\"\ncommand = [\"true\"]\n[schedule]\ncron = \"{expr}\"\n{more}")
            .as_bytes(),
        &automations::definition::Checks {
            home: "/nonexistent".into(),
            data_root: "/nonexistent".into(),
            units_dir: "/nonexistent-units".into(),
        },
    )
    .unwrap_or_else(|e| panic!("{expr}: {e:?}"));
    def.schedule.unwrap()
}

/// The program's slots (what the slot guard, NEXT, health and the dashboard use) are cronsim's:
/// across every DST change of the year in its zone, and over a whole year in every zone.
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn the_programs_slots_are_the_cron_librarys_across_every_dst_change() {
    let Some(mut oracle) =
        oracle_or_skip("the_programs_slots_are_the_cron_librarys_across_every_dst_change")
    else {
        return;
    };
    let mut windows: Vec<(&str, DateTime<Utc>, DateTime<Utc>, usize)> = CHANGES
        .iter()
        .map(|(zone, at)| {
            let at = utc(at);
            (
                *zone,
                at - chrono::Duration::hours(3),
                at + chrono::Duration::hours(27),
                2000,
            )
        })
        .collect();
    windows.extend(ZONES.iter().map(|z| {
        if *z == "Australia/Lord_Howe" {
            // Between its changes (see CHANGES).
            (
                *z,
                utc("2026-04-06T00:00:00Z"),
                utc("2026-10-02T00:00:00Z"),
                400,
            )
        } else {
            (
                *z,
                utc("2026-01-01T00:00:00Z"),
                utc("2027-01-01T00:00:00Z"),
                400,
            )
        }
    }));
    let mut compared = 0;
    for expr in EXPRESSIONS {
        let schedule = schedule_of(expr);
        for (zone, from, to, max) in &windows {
            let want = oracle.firings(expr, zone, *from, *to, *max);
            let tz: Tz = zone.parse().unwrap();
            // As far as the library was asked to go.
            let until = if want.len() == *max {
                want[max - 1]
            } else {
                *to
            };
            let got = automations::schedule::slots_between(&schedule, &tz, *from, until);
            if got != want {
                let at = got.iter().zip(&want).position(|(g, w)| g != w);
                let at = at.unwrap_or(got.len().min(want.len()));
                panic!(
                    "{expr:?} in {zone} from {from}: firing {at} is {:?} here, {:?} in cronsim ({} and {} firings)",
                    got.get(at),
                    want.get(at),
                    got.len(),
                    want.len()
                );
            }
            compared += got.len();
        }
    }
    assert!(compared > 50_000, "only {compared} firings compared");
}

/// systemd fires where cronsim says: the rendered timer's `OnCalendar=` lines, by
/// `systemd-analyze calendar --iterations`, in June (no zone changes its offset then; what systemd
/// does in a DST change is docs/cron.md's).
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn systemd_timers_fire_where_the_cron_library_says() {
    if which("systemd-analyze").is_none() {
        return skip(
            "systemd_timers_fire_where_the_cron_library_says",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    let Some(mut oracle) = oracle_or_skip("systemd_timers_fire_where_the_cron_library_says") else {
        return;
    };
    let sb = sandbox();
    let base = utc("2026-06-10T00:00:00Z");
    let far = utc("2099-01-01T00:00:00Z");
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let timer = rendered(&sb, &name(i), "systemd", ".timer");
        for zone in [
            "Europe/Berlin",
            "America/New_York",
            "Asia/Kathmandu",
            "Australia/Lord_Howe",
        ] {
            let want = oracle.firings(expr, zone, base, far, 12);
            assert_eq!(
                systemd_elapses(&timer, zone, base, 12),
                want,
                "{expr:?} in {zone}:\n{timer}"
            );
        }
    }
}

/// `list --json`'s next firing is cronsim's next after the moment `list` ran.
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn list_shows_the_cron_librarys_next_firing() {
    let Some(mut oracle) = oracle_or_skip("list_shows_the_cron_librarys_next_firing") else {
        return;
    };
    let sb = sandbox();
    // `list` shows a next firing for what is installed.
    for i in 0..EXPRESSIONS.len() {
        sb.install_record(&name(i), Utc::now() - chrono::Duration::days(1));
    }
    let far = utc("2099-01-01T00:00:00Z");
    for zone in ["Europe/Berlin", "Asia/Kolkata", "Australia/Adelaide"] {
        // Whole seconds: the library counts from the second the time falls in.
        let before = Utc.timestamp_opt(Utc::now().timestamp() - 1, 0).unwrap();
        let o = sb.cmd(["list", "--json"]).env("TZ", zone).output().unwrap();
        let after = Utc::now();
        assert_code(&o, 0);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = doc["automations"].as_array().unwrap();
        assert_eq!(rows.len(), EXPRESSIONS.len());
        for (i, expr) in EXPRESSIONS.iter().enumerate() {
            let row = rows.iter().find(|r| r["name"] == name(i).as_str()).unwrap();
            let next = utc(row["next"].as_str().unwrap_or_else(|| panic!("{row}")));
            // `list` ran between `before` and `after`: its next is the library's next after
            // one of those (they differ only when a slot fell while it ran).
            let early = oracle.firings(expr, zone, before, far, 1);
            let late = oracle.firings(expr, zone, after, far, 1);
            assert!(
                early.first() == Some(&next) || late.first() == Some(&next),
                "{expr:?} in {zone}: list says {next}, the library {early:?} / {late:?}"
            );
        }
    }
}

/// Each plist's entries, evaluated minute by minute over two months of local time as launchd
/// documents them, fire exactly on cronsim's minutes (read in UTC, where no minute repeats).
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn launchd_plists_fire_on_the_cron_librarys_minutes() {
    let Some(mut oracle) = oracle_or_skip("launchd_plists_fire_on_the_cron_librarys_minutes")
    else {
        return;
    };
    let sb = sandbox();
    let start = utc("2027-01-01T00:00:00Z");
    let end = start + chrono::Duration::days(62);
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let plist: plist::Value =
            plist::from_bytes(rendered(&sb, &name(i), "launchd", ".plist").as_bytes()).unwrap();
        let dict = plist.as_dictionary().unwrap();
        assert_eq!(
            dict.get("RunAtLoad").and_then(plist::Value::as_boolean),
            Some(true)
        );
        let fires = launchd_fires(dict);
        let want = oracle.firings(
            expr,
            "UTC",
            start - chrono::Duration::minutes(1),
            end,
            100_000,
        );
        let mut got = Vec::new();
        let mut t = start;
        while t <= end {
            if fires(t.naive_utc()) {
                got.push(t);
            }
            t += chrono::Duration::minutes(1);
        }
        assert_eq!(got, want, "{expr:?}");
    }
}

/// 25 ordinary job lines (HOME is the sandbox's home), with cron's settings and a secret value.
pub(crate) const CRONTAB: &str = r#"# m h  dom mon dow   command
MAILTO=ops@example.com
SHELL=/bin/bash
PATH=/usr/local/bin:/usr/bin:/bin
BACKUP_KEY=hunter2-in-no-definition

# keep the mirror in sync
*/10 * * * * HOME/bin/sync.sh
30 2 * * 1-5 HOME/bin/db-dump.sh --gzip
0 9 1,15 * * HOME/bin/invoice.sh
*/5 * * * * /usr/bin/curl -fsS https://example.com/ping > /dev/null
0 * * * * /usr/bin/find /tmp -maxdepth 1 -name 'sess_*' -mmin +60 -delete
15 3 * * * /usr/sbin/logrotate /etc/logrotate.conf
@daily /usr/bin/updatedb
@hourly /usr/bin/true
@weekly HOME/bin/weekly-report.py
@monthly /usr/bin/du -sh /srv
0 0 1 1 * /usr/bin/true
45 23 * * fri HOME/bin/friday.sh
0 8-18/2 * * mon-fri /usr/bin/uptime
5,35 * * * * /usr/bin/date +\%s
0 12 * jan,jul * /usr/bin/true
0 6 * * 0 cd /srv && /usr/bin/make clean
0 6 * * 7 /usr/bin/sync
20 4 */2 * * /usr/bin/fstrim -a
0 22 * * 1-5 ~/bin/nightly.sh >> /tmp/nightly.log 2>&1
0 0 13 * fri /usr/bin/true
30 1 * * * /usr/bin/rsync -a /srv/ /mnt/backup/
0 */4 * * * /usr/bin/vnstat -u
59 23 28-31 * * /usr/bin/true
@midnight /usr/bin/journalctl --vacuum-time=2weeks
0 0 29 2 * /usr/bin/true
"#;

/// The scripts under home that [`CRONTAB`]'s lines run.
pub(crate) fn home_scripts(home: &std::path::Path) {
    std::fs::create_dir_all(home.join("bin")).unwrap();
    for s in [
        "sync.sh",
        "db-dump.sh",
        "invoice.sh",
        "weekly-report.py",
        "friday.sh",
        "nightly.sh",
    ] {
        write_executable(&home.join("bin").join(s), format!("#!/bin/sh\necho {s}\n"));
    }
}

/// The schedule part of a job line: a shortcut, or the first five fields.
fn schedule_text(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words[0].starts_with('@') {
        words[0].to_owned()
    } else {
        words[..5].join(" ")
    }
}

/// Moving in: 25 real-world lines become 25 definitions that `validate` accepts and that fire
/// where cronsim says those lines fire; all or nothing; secrets only in private env files.
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn a_crontab_of_25_lines_moves_in_with_one_command() {
    let Some(mut oracle) = oracle_or_skip("a_crontab_of_25_lines_moves_in_with_one_command") else {
        return;
    };
    let sb = Sandbox::new();
    home_scripts(&sb.home);
    let text = CRONTAB.replace("HOME/", &format!("{}/", sb.home.display()));
    let file = sb.path("crontab.txt");
    std::fs::write(&file, &text).unwrap();
    let file = file.to_str().unwrap();
    let written = || {
        std::fs::read_dir(sb.root.join("automations"))
            .unwrap()
            .count()
    };

    // Scripts under home need --copy-scripts: those lines need you, and nothing is written.
    let o = sb.run(["import", "crontab", file]);
    assert_code(&o, 1);
    assert_eq!(
        stdout(&o).matches("--copy-scripts copies it").count(),
        6,
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("nothing was written (all or nothing)"));
    assert_eq!(written(), 0);
    // A dry run says what would happen and writes nothing.
    let o = sb.run(["import", "crontab", file, "--copy-scripts", "--dry-run"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("dry run: 25 of 25 job(s) can be imported"),
        "{}",
        stdout(&o)
    );
    assert_eq!(written(), 0);

    let o = sb.run(["import", "crontab", file, "--copy-scripts", "--json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["written"], true);
    let jobs: Vec<&serde_json::Value> = doc["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["name"].is_string())
        .collect();
    assert_eq!(jobs.len(), 25);
    assert!(jobs.iter().all(|j| j["status"] == "imported"), "{doc:#}");
    assert_eq!(written(), 25);
    let o = sb.run(["validate"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("25 definitions valid"),
        "{}",
        stdout(&o)
    );

    // The secret is in private env files only; never in a definition or the report.
    assert!(!String::from_utf8_lossy(&o.stdout).contains("hunter2"));
    for entry in std::fs::read_dir(sb.root.join("automations")).unwrap() {
        let t = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(
            !t.contains("hunter2") && !t.contains(sb.home.to_str().unwrap()),
            "{t}"
        );
    }
    let env = sb.data.join("env/sync.env");
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        "BACKUP_KEY=hunter2-in-no-definition\n"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(sb.root.join("scripts/db-dump.sh").exists());

    // Each definition fires where cronsim says its line does, over a year in Berlin.
    let lines: Vec<&str> = text.lines().collect();
    let (from, to) = (utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"));
    let tz: Tz = "Europe/Berlin".parse().unwrap();
    for job in &jobs {
        let name = job["name"].as_str().unwrap();
        let line = lines[job["line"].as_u64().unwrap() as usize - 1];
        let def = sb.parsed(name);
        let want = oracle.firings(&schedule_text(line), "Europe/Berlin", from, to, 300);
        let until = if want.len() == 300 { want[299] } else { to };
        let got = automations::schedule::slots_between(&def.schedule.unwrap(), &tz, from, until);
        assert_eq!(got, want, "{name}: {line}");
    }

    // The copied script runs, pinned at install like any other.
    let o = sb.run(["run", "sync"]);
    assert_code(&o, 0);
    // Importing again changes nothing: every name exists.
    let o = sb.run(["import", "crontab", file, "--copy-scripts"]);
    assert_code(&o, 1);
    assert!(stdout(&o).contains("automations/sync.toml exists already"));
    assert_eq!(written(), 25);
}

/// `--partial` writes what can be imported; bad input is exit 2 and names what.
#[test]
fn partial_imports_and_unreadable_crontabs() {
    let sb = Sandbox::new();
    let file = sb.path("crontab.txt");
    std::fs::write(
        &file,
        "0 0 L * * /usr/bin/true\n5 4 * * * /usr/bin/uptime\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let o = sb.run(["import", "crontab", file, "--partial"]);
    assert_code(&o, 1);
    assert!(stdout(&o).contains("`L` and `W`"), "{}", stdout(&o));
    assert!(sb.root.join("automations/uptime.toml").exists());
    assert!(!sb.root.join("automations/true.toml").exists());

    std::fs::write(sb.path("bad.txt"), b"0 * * * * /usr/bin/true \xff\n").unwrap();
    let o = sb.run(["import", "crontab", sb.path("bad.txt").to_str().unwrap()]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("not UTF-8"), "{}", stderr(&o));
    let o = sb.run(["import", "crontab", "/nonexistent/crontab"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("/nonexistent/crontab"),
        "{}",
        stderr(&o)
    );
    // Standard input.
    let mut child = sb
        .cmd(["import", "crontab", "-", "--dry-run"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"@hourly /usr/bin/hostname\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 0);
    assert!(stdout(&o).contains("every hour"), "{}", stdout(&o));
}

/// Env files go only into a private data root's own folders: a root others may write, or an
/// `env/` that is a link, is refused as every other command refuses it, and nothing is written.
#[test]
fn env_files_are_written_only_into_a_private_data_root() {
    use std::os::unix::fs::PermissionsExt as _;
    let sb = Sandbox::new();
    let file = sb.path("crontab.txt");
    std::fs::write(&file, "TOKEN=s3cret-value\n0 1 * * * /usr/bin/uptime\n").unwrap();
    let file = file.to_str().unwrap();
    std::fs::create_dir_all(&sb.data).unwrap();
    std::fs::set_permissions(&sb.data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = sb.run(["import", "crontab", file]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("writable by"), "{}", stderr(&o));
    assert!(!sb.root.join("automations/uptime.toml").exists());

    std::fs::set_permissions(&sb.data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let elsewhere = sb.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, sb.data.join("env")).unwrap();
    let o = sb.run(["import", "crontab", file]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("is a symbolic link"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(!sb.root.join("automations/uptime.toml").exists());
}

/// Machines in three zones other than the schedules': the program reads a `time_zone` schedule in
/// its own zone whatever the machine's (one of them 45 minutes off the hour, with DST).
const MACHINES: [&str; 3] = ["America/Los_Angeles", "Asia/Tokyo", "Pacific/Chatham"];

/// A schedule with `time_zone` fires where cronsim says in that zone, over a whole year in each of
/// the seven zones, on a machine in each of three other zones.
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn a_zoned_schedule_fires_in_its_zone_on_any_machine() {
    let Some(mut oracle) = oracle_or_skip("a_zoned_schedule_fires_in_its_zone_on_any_machine")
    else {
        return;
    };
    let mut compared = 0;
    for expr in EXPRESSIONS {
        for zone in ZONES {
            let (from, to) = if *zone == "Australia/Lord_Howe" {
                // Between its changes (see CHANGES).
                (utc("2026-04-06T00:00:00Z"), utc("2026-10-02T00:00:00Z"))
            } else {
                (utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"))
            };
            let want = oracle.firings(expr, zone, from, to, 400);
            let until = if want.len() == 400 { want[399] } else { to };
            let schedule = schedule_in(expr, &format!("time_zone = \"{zone}\"\n"));
            for machine in MACHINES {
                let tz: Tz = machine.parse().unwrap();
                let got = automations::schedule::slots_between(&schedule, &tz, from, until);
                assert_eq!(
                    got,
                    want,
                    "{expr:?} in {zone} on a machine in {machine}: {} and {} firings",
                    got.len(),
                    want.len()
                );
                compared += got.len();
            }
        }
    }
    assert!(compared > 100_000, "only {compared} firings compared");
}

/// The rendered timer of a zoned schedule names its zone on each `OnCalendar=` line, and systemd
/// gives the next 20 firings cronsim gives in that zone, on a machine in another zone.
#[test]
#[ignore = "a real component: the cron library cronsim (and systemd-analyze), in the test venv"]
fn a_zoned_timer_fires_where_the_cron_library_says() {
    if which("systemd-analyze").is_none() {
        return skip(
            "a_zoned_timer_fires_where_the_cron_library_says",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    let Some(mut oracle) = oracle_or_skip("a_zoned_timer_fires_where_the_cron_library_says") else {
        return;
    };
    let sb = Sandbox::new();
    // In June, as the unzoned comparison (what systemd does in a DST gap is docs/cron.md's).
    let base = utc("2026-06-10T00:00:00Z");
    let far = utc("2199-01-01T00:00:00Z");
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let n = name(i);
        sb.definition(
            &n,
            &format!(
                "name = \"{n}\"\ncommand = [\"true\"]\n[schedule]\ncron = \"{expr}\"\ntime_zone = \"America/New_York\"\n"
            ),
        );
        let timer = rendered(&sb, &n, "systemd", ".timer");
        assert!(
            timer
                .lines()
                .filter(|l| l.starts_with("OnCalendar="))
                .all(|l| l.ends_with(" America/New_York")),
            "{timer}"
        );
        let want = oracle.firings(expr, "America/New_York", base, far, 20);
        for machine in ["Asia/Tokyo", "Europe/Berlin"] {
            assert_eq!(
                systemd_elapses(&timer, machine, base, 20),
                want,
                "{expr:?} in New York, machine in {machine}:\n{timer}"
            );
        }
    }
}
