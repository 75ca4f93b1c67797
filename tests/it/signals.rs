//! Every signal in step: what `show`, `runs`, `metrics`, the dashboard, `list` and `check` say of
//! the same facts agrees (docs/health.md, docs/metrics.md, docs/dashboard.md).

use std::process::Stdio;

use crate::dashboard::{Dashboard, page_of};
use crate::harness::*;

/// A definition in lock group `db` that skips when its group is busy, running `command`.
fn in_group_db(name: &str, command: &str) -> String {
    format!(
        "name = \"{name}\"\ncommand = {command}\noverlap = \"skip\"\nlock = \"db\"\ntimeout_seconds = 120\n"
    )
}

/// Regressions: `show vacuum` after a lock-group skip said "vacuum has no runs yet" while `runs`
/// listed the skip; a second `run db-dump` said its lock group was "held by db-dump", by itself.
#[test]
fn a_skip_is_shown_when_it_is_all_there_is_and_a_group_held_by_itself_says_so() {
    let sb = Sandbox::new();
    let go = sb.root.join("go");
    sb.definition(
        "db-dump",
        &in_group_db(
            "db-dump",
            &format!(
                "[\"sh\", \"-c\", \"while [ ! -e '{}' ]; do sleep 0.05; done\"]",
                go.display()
            ),
        ),
    );
    sb.definition("vacuum", &in_group_db("vacuum", "[\"true\"]"));
    let mut first = sb
        .cmd(["run", "db-dump"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("db-dump's start", || !sb.events("started").is_empty());

    let again = sb.run(["run", "db-dump"]);
    let said = format!("{}{}", stdout(&again), stderr(&again));
    assert!(
        said.contains("held by its own earlier run") && !said.contains("held by db-dump"),
        "{said}"
    );
    let vacuum = sb.run(["run", "vacuum"]);
    let said = format!("{}{}", stdout(&vacuum), stderr(&vacuum));
    assert!(said.contains("lock group \"db\" held by db-dump"), "{said}");

    std::fs::write(&go, "").unwrap();
    assert!(first.wait().unwrap().success());

    // vacuum never ran: its skip is what there is to show.
    let show = sb.run(["show", "vacuum"]);
    assert_code(&show, 0);
    assert!(
        stdout(&show)
            .contains("status    skipped (already_running): its lock group db was held by db-dump"),
        "{}{}",
        stdout(&show),
        stderr(&show)
    );
    let runs = stdout(&sb.run(["runs", "db-dump"]));
    assert!(
        runs.contains("skipped (already_running, db held by its own earlier run)"),
        "{runs}"
    );
    // `show --failed` still means a run that failed.
    assert_code(&sb.run(["show", "vacuum", "--failed"]), 2);
}

/// Regression: a deleted definition stayed "HEALTHY · no definition" on the dashboard and in the
/// metrics, for good.
#[test]
fn a_deleted_definition_leaves_the_board_and_the_metrics_and_keeps_its_history() {
    let sb = Sandbox::new();
    sb.shell_definition("gone", "exit 0", "");
    sb.shell_definition("kept", "exit 0", "");
    for name in ["gone", "kept"] {
        assert_code(&sb.run(["run", name]), 0);
    }
    let metrics = stdout(&sb.run(["metrics"]));
    assert!(metrics.contains("automation=\"gone\""), "{metrics}");
    std::fs::remove_file(sb.root.join("automations/gone.toml")).unwrap();

    let metrics = stdout(&sb.run(["metrics"]));
    assert!(!metrics.contains("automation=\"gone\""), "{metrics}");
    assert!(metrics.contains("automation=\"kept\""), "{metrics}");
    let dash = Dashboard::start(&sb);
    let (code, body) = page_of(&dash, "/api/automations");
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = doc["automations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kept"]);
    let (code, page) = page_of(&dash, "/");
    assert_eq!(code, 200);
    assert!(!page.contains("gone"), "{page}");
    // Its history is still there.
    let runs = stdout(&sb.run(["runs", "gone"]));
    assert!(runs.lines().count() >= 2, "{runs}");
}

/// `automations timeline`: what fires in the hours ahead, from the installed schedules, and
/// where it piles up; a paused or uninstalled automation fires nothing and says so.
#[test]
fn the_timeline_says_what_fires_next_and_where_it_piles_up() {
    let sb = Sandbox::new();
    for name in ["backup", "nightly-db"] {
        sb.shell_definition(name, "exit 0", "[schedule]\ndaily_at = \"03:00\"\n");
        sb.install_record(name, chrono::Utc::now());
    }
    sb.shell_definition("offsite", "exit 0", "[schedule]\nevery_minutes = 60\n");
    sb.install_record("offsite", chrono::Utc::now());
    sb.shell_definition(
        "report",
        "exit 0",
        "[schedule]\ndaily_at = [\"05:00\", \"17:00\"]\njitter_seconds = 1800\n",
    );
    sb.install_record("report", chrono::Utc::now());
    sb.shell_definition("sync", "exit 0", "[schedule]\nevery_minutes = 15\n");
    sb.install_record("sync", chrono::Utc::now());
    assert_code(&sb.run(["pause", "sync", "--reason", "moving the NAS"]), 0);
    sb.shell_definition("fresh", "exit 0", "[schedule]\nevery_minutes = 30\n");

    let o = sb.run(["timeline", "--json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let of = |name: &str| {
        doc["automations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc}"))
            .clone()
    };
    // The next 03:00 of this machine's clock, as a firing of both nightly jobs.
    let now = chrono::Local::now();
    let mut three = now
        .date_naive()
        .and_hms_opt(3, 0, 0)
        .unwrap()
        .and_local_timezone(chrono::Local)
        .earliest()
        .unwrap();
    if three <= now {
        three += chrono::Duration::days(1);
    }
    let three = automations::runlog::stamp(three.with_timezone(&chrono::Utc));
    for name in ["backup", "nightly-db"] {
        let a = of(name);
        assert_eq!(a["state"], "scheduled", "{a}");
        assert_eq!(a["firings"].as_array().unwrap().len(), 1, "{a}");
        assert_eq!(
            automations::runlog::parse_stamp(a["firings"][0]["at"].as_str().unwrap())
                .map(automations::runlog::stamp),
            Some(three.clone()),
            "{a}"
        );
    }
    assert_eq!(of("offsite")["firings"].as_array().unwrap().len(), 24);
    // report waits its jitter after each slot: at most 30 minutes, as the runner computes it.
    for f in of("report")["firings"].as_array().unwrap() {
        let at = automations::runlog::parse_stamp(f["at"].as_str().unwrap()).unwrap();
        let slot = automations::runlog::parse_stamp(f["slot"].as_str().unwrap()).unwrap();
        assert!(
            at >= slot && at - slot <= chrono::Duration::seconds(1800),
            "{f}"
        );
    }
    assert_eq!(of("sync")["state"], "paused");
    assert_eq!(of("fresh")["state"], "not_installed");
    assert_eq!(
        doc["busiest"][0]["minute"],
        three.replace(".000Z", "Z"),
        "{doc}"
    );
    assert_eq!(doc["busiest"][0]["firings"], 3, "{doc}");

    let table = stdout(&sb.run(["timeline"]));
    assert!(
        table.contains("busiest minutes: 03:00 (3 firings)"),
        "{table}"
    );
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in {table}"))
            .to_owned()
    };
    assert!(line("backup").ends_with("  03:00"), "{table}");
    assert!(line("sync").ends_with("  paused"), "{table}");
    assert!(line("fresh").ends_with("  not installed"), "{table}");
    assert!(line("offsite").ends_with("  every hour"), "{table}");
    assert!(
        table.contains("1 scheduled automation(s) not installed here fire nothing"),
        "{table}"
    );
    // Twelve hours: fewer firings of the hourly one; more than a week is refused.
    let twelve: serde_json::Value =
        serde_json::from_slice(&sb.run(["timeline", "--hours", "12", "--json"]).stdout).unwrap();
    assert_eq!(twelve["hours"], 12);
    let hourly = twelve["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "offsite")
        .unwrap()
        .clone();
    assert_eq!(hourly["firings"].as_array().unwrap().len(), 12, "{hourly}");
    assert_code(&sb.run(["timeline", "--hours", "169"]), 2);
}

/// Regression: a too-short run said "ok in 0.00 s" on the terminal, while `health` had its
/// figures.
#[test]
fn a_persons_run_says_what_health_says_of_its_time() {
    let sb = Sandbox::new();
    sb.shell_definition("backup", "exit 0", "expect_min_seconds = 1\n");
    let o = sb.run(["run", "backup"]);
    assert_code(&o, 0);
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        said.contains("backup: ok in ")
            && said.contains(" · run too short: ran ")
            && said.contains(", expected at least 1.0 s (expect_min_seconds)"),
        "{said}"
    );
}
