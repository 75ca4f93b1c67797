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
