//! Time (docs/units.md, "Time zones", "Catching up", "Backfill"): a schedule in its own zone, what
//! a firing owes the slots missed while the machine slept or was off, and running past slots on
//! purpose. The runner and the commands are the real binary; the missed days are made by an
//! install record dated days back (what a machine that was off since then has).

use chrono::{DateTime, Duration, SecondsFormat, Utc};

use crate::harness::*;

/// A daily job in UTC whose slot is three hours ago (well past: a firing now is a late one),
/// installed `days` days and four hours ago; the command prints its slot.
fn missed_days(sb: &Sandbox, name: &str, catch_up: &str, days: i64) -> DateTime<Utc> {
    let now = Utc::now();
    let at = (now - Duration::hours(3)).format("%H:%M").to_string();
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"sh\", \"-c\", \"echo slot=$AUTOMATION_SLOT\"]\n[schedule]\ndaily_at = \"{at}\"\ntime_zone = \"UTC\"\ncatch_up = \"{catch_up}\"\n"
        ),
    );
    let installed = now - Duration::days(days) - Duration::hours(4);
    sb.install_record(name, installed);
    with_schedule(sb, name);
    // The latest slot: today's at that time, or yesterday's when that is still ahead.
    let today = now
        .date_naive()
        .and_time(chrono::NaiveTime::parse_from_str(&at, "%H:%M").unwrap())
        .and_utc();
    if today <= now {
        today
    } else {
        today - Duration::days(1)
    }
}

/// Puts the definition's schedule into its install record, as `install` does.
fn with_schedule(sb: &Sandbox, name: &str) {
    let path = sb.data.join(format!("state/installed/{name}.json"));
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["schedule"] = serde_json::to_value(sb.parsed(name).schedule).unwrap();
    std::fs::write(&path, record.to_string()).unwrap();
}

/// `backfill NAME --from FROM --to TO`.
fn backfill(sb: &Sandbox, name: &str, from: &str, to: &str) -> std::process::Output {
    sb.run(["backfill", name, "--from", from, "--to", to])
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, false)
}

fn slots_of(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["slot"].as_str().unwrap_or("-").to_owned())
        .collect()
}

/// `catch_up = "all"`: the firing on wake runs each slot missed since the install, oldest first,
/// each once with its own AUTOMATION_SLOT, then its own; a second firing runs nothing.
#[test]
fn catch_up_all_runs_each_missed_slot_once_with_its_slot() {
    let sb = Sandbox::new();
    let latest = missed_days(&sb, "export", "all", 3);
    let want: Vec<String> = (0..=3)
        .rev()
        .map(|d| stamp(latest - Duration::days(d)))
        .collect();

    assert_code(&sb.run(["run", "export", "--trigger", "schedule"]), 0);
    let started = sb.events("started");
    assert_eq!(slots_of(&started), want);
    assert!(started.iter().all(|s| s["trigger"] == "schedule"));
    let outputs: Vec<String> = sb
        .events("finished")
        .iter()
        .map(|f| f["stdout_tail"].as_str().unwrap().trim().to_owned())
        .collect();
    let expected: Vec<String> = want.iter().map(|s| format!("slot={s}")).collect();
    assert_eq!(outputs, expected);

    // Every slot has had its run: the next firing is the slot guard's.
    assert_code(&sb.run(["run", "export", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("started").len(), 4);
    let skipped = sb.events("skipped");
    assert_eq!(skipped.last().unwrap()["reason"], "slot_done");
    sb.assert_log_verifies();

    // `runs` says which slot each ran for.
    let runs = stdout(&sb.run(["runs", "export"]));
    assert!(runs.contains(&want[0]), "{runs}");
    // Health counts a slot run late as answered, not missed.
    let o = sb.run(["health", "export", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let v = &doc["automations"][0];
    assert_eq!(v["figures"]["missed_days"], 0, "{v:#}");
    assert_eq!(v["verdict"], "healthy", "{v:#}");

    // A slot given on the command line must be one of the schedule's, and have come.
    for (slot, why) in [
        (stamp(latest + Duration::minutes(7)), "not a slot"),
        (stamp(latest + Duration::days(2)), "not come yet"),
    ] {
        let o = sb.run(["run", "export", "--trigger", "schedule", "--slot", &slot]);
        assert_code(&o, 2);
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
    }
    let o = sb.run(["run", "export", "--slot", &want[0]]);
    assert_code(&o, 2);
    assert_eq!(sb.events("started").len(), 4);
}

/// `catch_up = "latest"` (the default) runs the latest slot only, as launchd and systemd do.
#[test]
fn catch_up_latest_runs_the_latest_slot_only() {
    let sb = Sandbox::new();
    let latest = missed_days(&sb, "export", "latest", 3);
    assert_code(&sb.run(["run", "export", "--trigger", "schedule"]), 0);
    assert_eq!(slots_of(&sb.events("started")), [stamp(latest)]);
}

/// `catch_up = "none"`: the late firing runs nothing; every missed slot is recorded as skipped
/// (`missed_slot`), health reports them and does not count them against the job.
#[test]
fn catch_up_none_records_missed_slots_and_health_reports_them() {
    let sb = Sandbox::new();
    let latest = missed_days(&sb, "export", "none", 3);
    let o = sb.run(["run", "export", "--trigger", "schedule"]);
    // A skip outside a unit exits 0 (under systemd 75, which its unit counts as success).
    assert_code(&o, 0);
    assert!(stderr(&o).contains("catch_up = \"none\""), "{}", stderr(&o));
    assert!(sb.events("started").is_empty());
    let skipped = sb.events("skipped");
    assert!(
        skipped.iter().all(|s| s["reason"] == "missed_slot"),
        "{skipped:?}"
    );
    let want: Vec<String> = (0..=3)
        .rev()
        .map(|d| stamp(latest - Duration::days(d)))
        .collect();
    assert_eq!(slots_of(&skipped), want);

    let o = sb.run(["health", "export", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let v = &doc["automations"][0];
    assert_eq!(v["figures"]["missed_slots"], 4, "{v:#}");
    assert!(
        v["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["rule"] != "missed_days"),
        "{v:#}"
    );
    let table = stdout(&sb.run(["health", "export"]));
    assert!(
        table.contains("4 slot(s) passed while asleep or off"),
        "{table}"
    );
    // A second late firing for the same slot records nothing more.
    assert_code(&sb.run(["run", "export", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped").len(), 4);
    sb.assert_log_verifies();
}

/// `backfill` over a week of a daily schedule runs 7 slots with trigger `backfill` and their
/// AUTOMATION_SLOT; a second call runs none; one interrupted by Ctrl-C resumes where it stopped.
#[test]
fn backfill_runs_each_slot_once_and_resumes() {
    let sb = Sandbox::new();
    let hold = sb.path("hold");
    let reached = sb.path("reached");
    // The third slot holds until the test lets it go (or it is stopped).
    let script = format!(
        "#!/bin/sh\necho \"slot=$AUTOMATION_SLOT\"\ncase \"$AUTOMATION_SLOT\" in\n  2026-11-02*) if [ -e {hold} ]; then touch {reached}; while [ -e {hold} ]; do sleep 0.05; done; fi;;\nesac\n",
        hold = hold.display(),
        reached = reached.display()
    );
    sb.script("report.sh", &script);
    sb.definition(
        "report",
        "name = \"report\"\ncommand = [\"scripts/report.sh\"]\n[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\n",
    );
    sb.install_record("report", Utc::now() - Duration::days(60));
    with_schedule(&sb, "report");
    let week = ["--from", "2026-10-31", "--to", "2026-11-06"];

    // A dry run says the seven slots, in New York's offset, and runs nothing.
    let dry = sb.run(["backfill", "report", "--dry-run"].into_iter().chain(week));
    assert_code(&dry, 0);
    let text = stdout(&dry);
    assert!(
        text.contains("2026-10-31T09:00:00-04:00  would run"),
        "{text}"
    );
    // DST ends on 1 November in New York: 09:00 is -05:00 from then on.
    assert!(
        text.contains("2026-11-06T09:00:00-05:00  would run"),
        "{text}"
    );
    assert!(text.contains("7 of 7 slot(s) would run"), "{text}");
    assert!(sb.events("started").is_empty());

    // Interrupted at the third slot: Ctrl-C reaches the whole foreground group.
    std::fs::write(&hold, "").unwrap();
    let mut cmd = sb.cmd(["backfill", "report"].into_iter().chain(week));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the third slot to start", || reached.exists());
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("interrupted: 2 of 7 slot(s) ran"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_file(&hold).unwrap();
    let started = sb.events("started");
    assert_eq!(started.len(), 3);
    assert!(started.iter().all(|s| s["trigger"] == "backfill"));
    let outcomes: Vec<_> = sb
        .events("finished")
        .iter()
        .map(|f| f["outcome"].clone())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "stopped"]);

    // The second call goes on with the five left (the stopped one included), in order.
    let o = sb.run(["backfill", "report"].into_iter().chain(week));
    assert_code(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("2026-10-31T09:00:00-04:00  passed over"),
        "{text}"
    );
    assert!(text.contains("5 slot(s) ran, 0 failed"), "{text}");
    let slots: Vec<String> = slots_of(&sb.events("started"))
        .into_iter()
        .skip(3)
        .collect();
    assert_eq!(
        slots,
        [
            "2026-11-02T09:00:00-05:00",
            "2026-11-03T09:00:00-05:00",
            "2026-11-04T09:00:00-05:00",
            "2026-11-05T09:00:00-05:00",
            "2026-11-06T09:00:00-05:00",
        ]
    );
    let last = sb.last_finished();
    assert_eq!(last["stdout_tail"], "slot=2026-11-06T09:00:00-05:00\n");

    // A third runs none.
    let o = sb.run(["backfill", "report", "--json"].into_iter().chain(week));
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        doc["slots"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["action"] == "passed_over"),
        "{doc:#}"
    );
    assert_eq!(sb.events("started").len(), 8);
    // `--again` runs them anyway; more than 1,000 slots needs --max.
    let o = sb.run([
        "backfill",
        "report",
        "--again",
        "--from",
        "2026-11-06",
        "--to",
        "2026-11-06",
    ]);
    assert_code(&o, 0);
    assert_eq!(sb.events("started").len(), 9);
    sb.definition(
        "often",
        "name = \"often\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.install_record("often", Utc::now() - Duration::days(60));
    with_schedule(&sb, "often");
    let o = backfill(&sb, "often", "2026-11-01", "2026-11-06");
    assert_code(&o, 2);
    assert!(stderr(&o).contains("--max"), "{}", stderr(&o));
    sb.assert_log_verifies();
}

/// A backfill of something not installed, or with no clock, says so and runs nothing.
#[test]
fn backfill_refuses_what_has_no_installed_slots() {
    let sb = Sandbox::new();
    sb.definition(
        "report",
        "name = \"report\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\n",
    );
    let o = backfill(&sb, "report", "2026-11-01", "2026-11-02");
    assert_code(&o, 2);
    assert!(stderr(&o).contains("not installed"), "{}", stderr(&o));
    sb.install_record("report", Utc::now() - Duration::days(60));
    with_schedule(&sb, "report");
    let o = backfill(&sb, "report", "yesterday", "2026-11-02");
    assert_code(&o, 2);
    assert!(stderr(&o).contains("--from"), "{}", stderr(&o));
    assert!(sb.events("started").is_empty());

    // Paused: each slot is skipped, said apart from runs, and the call fails.
    assert_code(&sb.run(["pause", "report", "--reason", "maintenance"]), 0);
    let o = backfill(&sb, "report", "2026-11-01", "2026-11-02");
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("0 slot(s) ran, 0 failed, 2 skipped"),
        "{}",
        stdout(&o)
    );
    assert!(sb.events("started").is_empty());
    assert_eq!(sb.events("skipped").len(), 2);
}

/// A schedule in its own zone: `list` gives its next firing on this machine's clock and on its
/// own; systemd's timer names the zone; launchd, which cannot keep it, is refused by name.
#[test]
fn a_zoned_schedule_is_said_in_both_zones_and_refused_by_launchd() {
    let mut sb = Sandbox::new();
    sb.env("TZ", "Europe/Berlin");
    sb.definition(
        "report",
        "name = \"report\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\n",
    );
    sb.install_record("report", Utc::now() - Duration::days(1));
    with_schedule(&sb, "report");
    let o = sb.run(["list", "--json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let entry = &doc["automations"][0];
    let words = entry["next_words"].as_str().unwrap();
    let next: DateTime<Utc> = entry["next"].as_str().unwrap().parse().unwrap();
    let in_ny = next.with_timezone(&chrono_tz::America::New_York);
    assert_eq!(in_ny.format("%H:%M").to_string(), "09:00");
    let in_berlin = next.with_timezone(&chrono_tz::Europe::Berlin);
    assert!(
        words.starts_with(&in_berlin.format("%Y-%m-%d %H:%M").to_string())
            && words.ends_with("09:00 America/New_York"),
        "{words}"
    );
    assert_eq!(entry["schedule"]["time_zone"], "America/New_York");
    // `show NAME` says it too, after its latest run.
    assert_code(&sb.run(["run", "report"]), 0);
    let show = stdout(&sb.run(["show", "report"]));
    assert!(
        show.lines()
            .any(|l| l.starts_with("next      ") && l.ends_with("09:00 America/New_York")),
        "{show}"
    );

    let o = sb.run(["render", "report", "--target", "systemd"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("OnCalendar=*-*-* 09:00:00 America/New_York\n"),
        "{}",
        stdout(&o)
    );
    let o = sb.run(["render", "report", "--target", "launchd"]);
    assert_code(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("time_zone = \"America/New_York\"") && e.contains("launchd"),
        "{e}"
    );
}

/// A systemd user manager too old to read a zone on `OnCalendar=` (before 235) is asked before
/// anything is written, and a zoned definition is refused by name.
#[test]
fn a_zoned_install_is_refused_by_a_systemd_too_old_for_zones() {
    let mut sb = Sandbox::new();
    sb.use_stable_bin();
    let fake = sb.path("fake");
    crate::systemd::fake_systemctl(&fake);
    // The same fake manager, saying it is systemd 229.
    let old = sb.path("old");
    std::fs::create_dir_all(&old).unwrap();
    write_executable(
        &old.join("systemctl"),
        format!(
            "#!/bin/sh\nif [ \"$2\" = show ] && [ \"$3\" = --property=Version ]; then echo Version=229; exit 0; fi\nexec {} \"$@\"\n",
            fake.join("systemctl").display()
        ),
    );
    sb.env("PATH", &format!("{}:/usr/bin:/bin", old.display()));
    sb.definition(
        "report",
        "name = \"report\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\n",
    );
    let r = run_on_pty(sb.cmd(["install", "report"]), "Type y to confirm", "y");
    assert_ne!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output.contains("version 229") && r.output.contains("time_zone"),
        "{}",
        r.output
    );
    assert!(!sb.data.join("state/installed/report.json").exists());
    // The same definition without its zone installs on that manager.
    sb.definition(
        "report",
        "name = \"report\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\n",
    );
    let r = run_on_pty(sb.cmd(["install", "report"]), "Type y to confirm", "y");
    assert_eq!(r.code, Some(0), "{}", r.output);
}
