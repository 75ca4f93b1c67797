//! `automations run` with real processes in temporary data roots: tree kill, locks, the log,
//! environment, output, results, pause and the kill switch, exit codes.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::*;
use crate::schema::list_doc;

/// A definition running `sh -c <script>` with `timeout` seconds.
fn sh_def(sb: &Sandbox, name: &str, timeout: u32, script: &str) {
    // A JSON string is a valid TOML basic string.
    let script = serde_json::to_string(script).unwrap();
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"sh\", \"-c\", {script}]\ntimeout_seconds = {timeout}\n"
        ),
    );
}

const GRACE: u64 = 5;

/// Runs a timeout case: the command writes its pids to `pids`, the run must end as `timeout`
/// within timeout + grace by the runner's own clock (a tree that outlived the grace would keep it
/// going; the test's clock would also count the binary's start on a loaded machine), and no
/// process of the tree may be alive afterwards.
fn assert_tree_dies(script_with_pids: &str) {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    let script = script_with_pids.replace("PIDS", pids.to_str().unwrap());
    sh_def(&sb, "t", 2, &script);
    let o = run_within(sb.cmd(["run", "t"]), 60, "a run past its deadline");
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "timeout", "{f}");
    assert_eq!(f["error"]["class"], "timeout");
    let ms = f["duration_ms"].as_u64().unwrap();
    assert!(ms < (2 + GRACE) * 1000 + 1500, "the run took {ms} ms");
    let pids = read_pids(&pids);
    assert!(
        pids.len() >= 2,
        "the command did not report its pids: {pids:?}"
    );
    assert_eq!(
        survivors(&pids, Duration::from_millis(500)),
        Vec::<i32>::new(),
        "alive after the run"
    );
    sb.assert_log_verifies();
}

#[test]
fn timeout_kills_background_children() {
    assert_tree_dies("sleep 300 & echo $! >> PIDS; echo $$ >> PIDS; sleep 300");
}

#[test]
fn timeout_kills_setsid_escapees() {
    assert_tree_dies("setsid sleep 300 & echo $! >> PIDS; echo $$ >> PIDS; sleep 300");
}

#[test]
#[ignore = "a real component: python3"]
fn timeout_kills_a_double_forking_daemon() {
    // Fork, setsid, fork again, first child exits: the daemon is re-parented to the runner.
    assert_tree_dies(
        "python3 -c 'import os,time\nif os.fork()==0:\n    os.setsid()\n    if os.fork()==0:\n        open(\"PIDS\",\"a\").write(str(os.getpid())+\"\\n\"); time.sleep(300)\n    os._exit(0)\ntime.sleep(300)' & echo $! >> PIDS; echo $$ >> PIDS; wait",
    );
}

#[test]
fn timeout_kills_a_child_that_ignores_term() {
    assert_tree_dies("trap '' TERM; sleep 300 & echo $! >> PIDS; echo $$ >> PIDS; wait");
}

#[test]
fn timeout_is_not_held_by_an_escapee_keeping_stdout_open() {
    assert_tree_dies(
        "setsid sh -c 'echo $$ >> PIDS; exec sleep 300' & echo $$ >> PIDS; echo still-writing; sleep 300",
    );
}

#[test]
fn term_trapping_command_that_exits_zero_after_the_deadline_is_still_a_timeout() {
    let sb = Sandbox::new();
    sh_def(&sb, "t", 1, "trap 'exit 0' TERM; sleep 300 & wait");
    let o = sb.run(["run", "t"]);
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "timeout");
    assert_eq!(f["exit_code"], 0);
    // It died on TERM, so the run did not wait out the 5 s grace.
    assert!(
        f["duration_ms"].as_u64().unwrap() < 1000 + GRACE * 1000,
        "{f}"
    );
}

#[test]
fn leftovers_after_a_normal_exit_are_killed_and_counted() {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    sh_def(
        &sb,
        "t",
        60,
        &format!(
            "sleep 30 >/dev/null 2>&1 & echo $! > {}; exit 0",
            pids.display()
        ),
    );
    let o = sb.run(["run", "t"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("t: ok in") && stdout(&o).contains("1 leftover"),
        "{}",
        stdout(&o)
    );
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "ok");
    assert_eq!(f["leftover_processes"], 1);
    assert!(f["duration_ms"].as_u64().unwrap() < 5000, "{f}");
    assert_eq!(
        survivors(&read_pids(&pids), Duration::from_millis(500)),
        Vec::<i32>::new()
    );
}

#[test]
fn killed_runner_takes_its_command_along_and_the_run_reads_interrupted() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"sleep\", \"300\"]\n");
    let mut child = sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap();
    // Wait until the command runs: `started` is in the log and the runner has a child.
    let runner = runner_of(&child);
    let until = Instant::now() + Duration::from_secs(30);
    let sleeper = loop {
        let kids = std::fs::read_to_string(format!("/proc/{runner}/task/{runner}/children"))
            .unwrap_or_default();
        if let Some(pid) = kids.split_whitespace().next() {
            break pid.parse::<i32>().unwrap();
        }
        assert!(Instant::now() < until, "the command never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(list_doc(&sb).automations[0].running);
    // The runner is SIGKILLed; its keeper (the process started) ends only when the tree is gone.
    kill_runner(&mut child);
    assert_eq!(
        survivors(&[sleeper], Duration::from_secs(2)),
        Vec::<i32>::new(),
        "the command outlived the runner"
    );
    let o = sb.run(["list", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["automations"][0]["running"], false);
    assert_eq!(
        doc["automations"][0]["last_run"]["status"], "interrupted",
        "{doc}"
    );
    sb.assert_log_verifies();
    // The next run is not blocked by the dead one.
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    assert_code(&sb.run(["run", "t"]), 0);
}

#[test]
fn fifty_concurrent_runs_start_exactly_once() {
    let sb = Sandbox::new();
    let gate = sb.path("gate");
    sb.shell_definition(
        "t",
        &format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display()),
        "",
    );
    let children: Vec<_> = (0..50)
        .map(|_| sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap())
        .collect();
    // The run that got the lock holds it until every other firing has met it, however slowly 50
    // binaries start here (a fixed `sleep 2` could end before the last one tried the lock).
    wait_for("49 skipped firings", || sb.events("skipped").len() >= 49);
    std::fs::write(&gate, "").unwrap();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let lines = sb.log_lines();
    assert_eq!(lines.len(), 51, "1 started + 49 skipped + 1 finished");
    assert_eq!(sb.events("started").len(), 1);
    assert_eq!(sb.events("finished").len(), 1);
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 49);
    assert!(skipped.iter().all(|s| s["reason"] == "already_running"));
    sb.assert_log_verifies();
}

#[test]
fn torn_final_line_is_tolerated_and_sealed() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    assert_code(&sb.run(["run", "t"]), 0);
    let log = sb.data.join("runs.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(b"{\"v\":1,\"event\":\"fini");
    std::fs::write(&log, bytes).unwrap();
    let o = sb.run(["log", "verify"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("the last line is torn"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["run", "t"]), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(serde_json::from_str::<serde_json::Value>(lines[2]).is_err());
    for l in [lines[3], lines[4]] {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    let o = sb.run(["runs"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("1 unreadable line"), "{}", stdout(&o));
    let o = sb.run(["runs", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["unreadable_lines"], 1);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2);
    sb.assert_log_verifies();
}

#[test]
fn environment_is_exactly_the_allowed_set() {
    let mut sb = Sandbox::new();
    sb.definition(
        "e",
        "name = \"e\"\ncommand = [\"env\"]\nenv = [\"GIVEN\", \"FROM_FILE\", \"ABSENT\"]\n",
    );
    sb.env("GIVEN", "from-runner")
        .env("NOT_NAMED", "leak")
        .env("TZ", "UTC")
        // What only a `{self}` command gets (the keychain's bus, notification settings).
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nowhere")
        .env("PUSHOVER_API_TOKEN", "leaked-token-value");
    std::fs::create_dir_all(sb.data.join("env")).unwrap();
    let env_file = sb.data.join("env/e.env");
    std::fs::write(&env_file, "FROM_FILE=from-file-value\nGIVEN=file-loses\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    sb.install_record("e", chrono::Utc::now());
    assert_code(&sb.run(["run", "e", "--trigger", "schedule"]), 0);
    let f = sb.last_finished();
    let tail = f["stdout_tail"].as_str().unwrap();
    let mut names: Vec<&str> = tail
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "AUTOMATION_BIN",
            "AUTOMATION_HTTP_LOG",
            "AUTOMATION_NAME",
            "AUTOMATION_RESULT",
            "AUTOMATION_RUN_ID",
            "AUTOMATION_TRIGGER",
            "FROM_FILE",
            "GIVEN",
            "HOME",
            "LANG",
            "LOGNAME",
            "PATH",
            "TMPDIR",
            "TZ",
            "USER",
        ]
    );
    // Values a definition asks for are treated as credentials: the command saw them, the stored
    // tail does not.
    assert!(tail.contains("GIVEN=[redacted]\n"), "{tail}");
    assert!(!tail.contains("from-runner"));
    assert!(tail.contains("AUTOMATION_TRIGGER=schedule\n"));
    assert!(tail.contains("LANG=C.UTF-8\n"));
    assert!(!tail.contains("leak"));
    // The env file's value is private: the command saw it, the stored tail does not.
    assert!(tail.contains("FROM_FILE=[redacted]\n"), "{tail}");
    let tmpdir = tail
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap();
    // TMPDIR is private to the automation's runs (they never overlap) and left empty.
    assert!(tmpdir.starts_with(sb.data.to_str().unwrap()), "{tmpdir}");
    assert_eq!(
        std::fs::read_dir(tmpdir).unwrap().count(),
        0,
        "the run's TMPDIR was not emptied"
    );

    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = sb.run(["run", "e"]);
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "env_file");
    let detail = f["error"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(env_file.to_str().unwrap()) && detail.contains("644"),
        "{detail}"
    );
}

#[test]
#[ignore = "a real component: GNU time (peak memory)"]
fn twenty_megabytes_of_output_keep_the_last_8_kib_and_flat_memory() {
    let sb = Sandbox::new();
    sh_def(
        &sb,
        "big",
        60,
        "head -c 20000000 /dev/zero | tr '\\0' a; printf END",
    );
    sb.definition("noop", "name = \"noop\"\ncommand = [\"true\"]\n");
    let o = sb.run(["run", "big"]);
    assert_code(&o, 0);
    let f = sb.last_finished();
    let tail = f["stdout_tail"].as_str().unwrap();
    assert_eq!(tail.len(), 8192);
    assert!(tail.ends_with("aaaEND"));
    assert_eq!(f["dropped"]["stdout"], 20_000_003 - 8192);
    match (
        peak_rss(sb.cmd(["run", "noop"])),
        peak_rss(sb.cmd(["run", "big"])),
    ) {
        (Some((_, quiet)), Some((_, loud))) => {
            eprintln!("peak RSS: noop {quiet} KiB, 20 MB of output {loud} KiB");
            assert!(
                loud <= quiet + 1024,
                "RSS grew with output: {quiet} KiB -> {loud} KiB"
            );
        }
        _ => skip(
            "rss part of twenty_megabytes_of_output",
            "/usr/bin/time (GNU time) is missing",
        ),
    }
}

#[test]
fn binary_output_survives_as_replacement_characters() {
    let sb = Sandbox::new();
    sh_def(
        &sb,
        "bin",
        10,
        "printf 'before\\377\\376after\\n'; printf 'err\\200\\n' >&2",
    );
    assert_code(&sb.run(["run", "bin"]), 0);
    let f = sb.last_finished();
    assert_eq!(f["stdout_tail"], "before\u{fffd}\u{fffd}after\n");
    assert_eq!(f["stderr_tail"], "err\u{fffd}\n");
}

#[test]
fn result_facts_are_recorded_and_invalid_ones_refused() {
    let sb = Sandbox::new();
    sh_def(
        &sb,
        "good",
        10,
        "\"$AUTOMATION_BIN\" result beats=3 other=0 --headline beats",
    );
    let o = sb.run(["run", "good"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("· beats=3"), "{}", stdout(&o));
    let f = sb.last_finished();
    assert_eq!(f["facts"], serde_json::json!({"beats": 3, "other": 0}));
    assert_eq!(f["headline"], "beats");

    sh_def(
        &sb,
        "bad",
        10,
        "echo '{\"facts\": {\"x\": -1}}' > \"$AUTOMATION_RESULT\"",
    );
    assert_code(&sb.run(["run", "bad"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "failed");
    assert_eq!(f["error"]["class"], "result_invalid");
    assert!(f["error"]["detail"].as_str().unwrap().contains("0..=2^53"));

    sh_def(&sb, "badarg", 10, "\"$AUTOMATION_BIN\" result Bad=1");
    assert_code(&sb.run(["run", "badarg"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "exit_status");
    assert!(
        f["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("not a valid fact name"),
        "{f}"
    );

    // Outside a run there is no result file to write.
    assert_code(&sb.run(["result", "a=1"]), 2);
}

#[test]
fn pause_resume_and_the_kill_switch() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    assert_code(&sb.run(["pause", "t", "--reason", "maintenance"]), 0);
    let o = sb.run(["run", "t"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("t: skipped (paused: maintenance)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(sb.events("skipped").last().unwrap()["reason"], "paused");
    let doc: serde_json::Value =
        serde_json::from_slice(&sb.run(["list", "--json"]).stdout).unwrap();
    assert_eq!(doc["automations"][0]["paused"]["reason"], "maintenance");
    assert_code(&sb.run(["resume", "t"]), 0);
    assert_code(&sb.run(["run", "t"]), 0);
    assert_eq!(sb.last_finished()["outcome"], "ok");
    let last = list_doc(&sb).automations.remove(0).last_run.unwrap();
    assert_eq!(
        (last.status.as_str(), last.trigger.as_str()),
        ("ok", "manual")
    );
    assert!(
        last.duration_ms.is_some()
            && last.headline.is_none()
            && !last.run.is_empty()
            && !last.at.is_empty()
    );
    assert_eq!(sb.events("paused").len(), 1);
    assert_eq!(sb.events("resumed").len(), 1);
    assert_code(&sb.run(["pause", "nope", "--reason", "x"]), 2);

    // stop-all stops a running run and skips new ones.
    sb.definition("long", "name = \"long\"\ncommand = [\"sleep\", \"300\"]\n");
    let mut runner = sb
        .cmd(["run", "long"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("long to start", || {
        sb.events("started").iter().any(|s| s["name"] == "long")
    });
    let o = sb.run(["stop-all", "--reason", "incident"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("stopped 1 running run"),
        "{}",
        stdout(&o)
    );
    assert_eq!(runner.wait().unwrap().code(), Some(1));
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "stopped");
    assert_eq!(f["error"]["detail"], "stopped by SIGTERM");
    assert_eq!(list_doc(&sb).stopped.unwrap().reason, "incident");
    let o = sb.run(["run", "t"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("skipped (stopped: incident)"));
    assert_code(&sb.run(["resume-all"]), 0);
    assert_code(&sb.run(["run", "t"]), 0);
    assert_eq!(sb.last_finished()["outcome"], "ok");
    sb.assert_log_verifies();
}

#[test]
fn sigint_to_the_runner_stops_the_tree() {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    sh_def(
        &sb,
        "t",
        60,
        &format!(
            "sleep 300 & echo $! >> {0}; echo $$ >> {0}; wait",
            pids.display()
        ),
    );
    let runner = sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap();
    wait_for("the command to start", || read_pids(&pids).len() >= 2);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(runner.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = runner.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(sb.last_finished()["outcome"], "stopped");
    assert_eq!(
        survivors(&read_pids(&pids), Duration::from_millis(500)),
        Vec::<i32>::new()
    );
}

#[test]
fn exit_codes() {
    let sb = Sandbox::new();
    sb.definition("ok", "name = \"ok\"\ncommand = [\"true\"]\n");
    sb.definition(
        "fail",
        "name = \"fail\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n",
    );
    sb.definition(
        "nostart",
        "name = \"nostart\"\ncommand = [\"scripts/missing.sh\"]\n",
    );
    sb.definition("broken", "name = \"broken\"\n");
    assert_code(&sb.run(["run", "ok"]), 0);
    let o = sb.run(["run", "fail"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("exit_status: exited with 3"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["run", "nostart"]), 1);
    assert_eq!(sb.last_finished()["error"]["class"], "spawn_failed");
    // Invalid invocations: a bad name, an unknown trigger, a manual run of a broken definition.
    assert_code(&sb.run(["run", "Bad_Name"]), 2);
    assert_code(&sb.run(["run", "ok", "--trigger", "cron"]), 2);
    let before = sb.log_lines().len();
    let o = sb.run(["run", "broken"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("automations/broken.toml: command: missing"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        sb.log_lines().len(),
        before,
        "a manual run of a broken definition records nothing"
    );
    // On schedule, a missing or broken definition is a recorded failure, so a stale unit shows.
    for (name, class) in [
        ("gone", "definition_missing"),
        ("broken", "definition_invalid"),
    ] {
        let o = sb.run(["run", name, "--trigger", "schedule"]);
        assert_code(&o, 1);
        assert!(stdout(&o).is_empty());
        assert!(stderr(&o).contains(class), "{}", stderr(&o));
        let f = sb.last_finished();
        assert_eq!(f["error"]["class"], class);
        assert_eq!(sb.events("started").last().unwrap()["name"], name);
    }
    // A scheduled ok run (of an installed automation) prints nothing.
    sb.install_record("ok", chrono::Utc::now());
    let o = sb.run(["run", "ok", "--trigger", "schedule"]);
    assert_code(&o, 0);
    assert!(stdout(&o).is_empty() && stderr(&o).is_empty());
}

#[test]
fn runs_and_show() {
    let sb = Sandbox::new();
    sh_def(
        &sb,
        "t",
        10,
        "echo visible-output; \"$AUTOMATION_BIN\" result n=7 --headline n",
    );
    for _ in 0..3 {
        assert_code(&sb.run(["run", "t"]), 0);
    }
    let o = sb.run(["runs", "-n", "2"]);
    assert_code(&o, 0);
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        !text.contains("visible-output"),
        "runs must never print output"
    );
    assert!(text.contains("n=7"));
    let doc: serde_json::Value =
        serde_json::from_slice(&sb.run(["runs", "t", "--json"]).stdout).unwrap();
    assert_eq!(doc["version"], 1);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0]["status"], "ok");
    assert_eq!(runs[0]["headline"]["value"], 7);
    let id = runs[0]["run"].as_str().unwrap();
    let o = sb.run(["show", &id[..20]]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("visible-output") && stdout(&o).contains("facts     n=7"),
        "{}",
        stdout(&o)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&sb.run(["show", id, "--json"]).stdout).unwrap();
    assert_eq!(doc["finished"]["stdout_tail"], "visible-output\n");
    assert_code(&sb.run(["show", "nope"]), 2);
}

#[test]
fn the_shipped_heartbeat_runs() {
    let sb = Sandbox::new();
    copy_dir(
        &repo_root().join("automations"),
        &sb.root.join("automations"),
    );
    copy_dir(&repo_root().join("scripts"), &sb.root.join("scripts"));
    let o = sb.run(["run", "heartbeat"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).starts_with("heartbeat: ok in ") && stdout(&o).contains("· beats=1"),
        "{}",
        stdout(&o)
    );
}

/// A local `HH:MM` at least two minutes away from now, so no slot boundary falls inside a test.
/// The schedule of the definition `name` whose text is `text`.
fn schedule_of(name: &str, text: &str) -> automations::schedule::Schedule {
    let checks = automations::definition::Checks {
        home: "/nonexistent".into(),
        data_root: "/nonexistent".into(),
        units_dir: "/nonexistent-units".into(),
    };
    automations::definition::parse(&format!("{name}.toml"), text.as_bytes(), &checks)
        .unwrap()
        .schedule
        .unwrap()
}

fn quiet_time_of_day() -> String {
    let t = chrono::Local::now() - chrono::Duration::hours(3);
    t.format("%H:%M").to_string()
}

#[test]
fn daily_slot_runs_once_on_schedule_but_manual_runs_always_run() {
    let sb = Sandbox::new();
    sb.definition(
        "daily",
        &format!(
            "name = \"daily\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"{}\"\n",
            quiet_time_of_day()
        ),
    );
    sb.install_record("daily", chrono::Utc::now() - chrono::Duration::days(1));
    assert_code(&sb.run(["run", "daily", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("started").len(), 1);
    // A second firing for the same slot (RunAtLoad, Persistent= catch-up, a DST fold) is skipped.
    assert_code(&sb.run(["run", "daily", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped").last().unwrap()["reason"], "slot_done");
    assert_eq!(sb.events("started").len(), 1);
    // A person can always run it.
    assert_code(&sb.run(["run", "daily"]), 0);
    assert_eq!(sb.events("started").len(), 2);
}

/// A cron schedule has the same slot guard: its latest slot runs once, whatever fires for it.
#[test]
fn a_cron_slot_runs_once_on_schedule() {
    let sb = Sandbox::new();
    let at = chrono::Local::now() - chrono::Duration::hours(3);
    sb.definition(
        "nightly",
        &format!(
            "name = \"nightly\"\ncommand = [\"true\"]\n[schedule]\ncron = \"{} {} * * *\"\n",
            at.format("%M").to_string().trim_start_matches('0').max("0"),
            at.format("%H").to_string().trim_start_matches('0').max("0"),
        ),
    );
    sb.install_record("nightly", chrono::Utc::now() - chrono::Duration::days(1));
    assert_code(&sb.run(["run", "nightly", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("started").len(), 1);
    assert_code(&sb.run(["run", "nightly", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped").last().unwrap()["reason"], "slot_done");
    assert_eq!(sb.events("started").len(), 1);
}

/// a list of times keeps one run per slot, and a person's run never consumes a slot:
/// the firing that follows it still runs (before, a manual run after the slot made the scheduled
/// one skip as slot_done, and the slot never ran on schedule).
#[test]
fn a_list_of_times_runs_each_slot_once_and_a_manual_run_consumes_none() {
    let sb = Sandbox::new();
    let later = (chrono::Local::now() + chrono::Duration::hours(3))
        .format("%H:%M")
        .to_string();
    sb.definition(
        "twice",
        &format!(
            "name = \"twice\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = [\"{later}\", \"{}\"]\n",
            quiet_time_of_day()
        ),
    );
    sb.install_record("twice", chrono::Utc::now() - chrono::Duration::days(1));
    assert_code(&sb.run(["run", "twice"]), 0);
    assert_eq!(sb.events("started").len(), 1);
    assert_code(&sb.run(["run", "twice", "--trigger", "schedule"]), 0);
    assert!(sb.events("skipped").is_empty(), "{:?}", sb.log_lines());
    assert_eq!(sb.events("started").len(), 2);
    assert_eq!(sb.events("started")[1]["trigger"], "schedule");
    assert_code(&sb.run(["run", "twice", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped").last().unwrap()["reason"], "slot_done");
    assert_eq!(sb.events("started").len(), 2);
    sb.assert_log_verifies();
}

/// `jitter_seconds` delays a scheduled firing by its slot's own delay (a hash of the name
/// and the slot, so it can be computed ahead), records it in `started`, and `list` shows the next
/// firing with it; a person's run never waits.
#[test]
fn a_scheduled_firing_waits_its_slots_jitter_and_a_person_never_waits() {
    use automations::schedule::{Next, jitter_delay, latest_slot, next_firing};
    let sb = Sandbox::new();
    let text = format!(
        "name = \"spread\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"{}\"\njitter_seconds = 3\n",
        quiet_time_of_day()
    );
    sb.definition("spread", &text);
    sb.install_record("spread", chrono::Utc::now() - chrono::Duration::days(1));
    let schedule = schedule_of("spread", &text);
    let now = chrono::Local::now();
    let slot = latest_slot(&schedule, &now).unwrap();
    let delay = jitter_delay("spread", Some(slot), 3);

    assert_code(&sb.run(["run", "spread"]), 0);
    assert!(sb.events("started")[0].get("jitter_ms").is_none());
    let t0 = Instant::now();
    assert_code(&sb.run(["run", "spread", "--trigger", "schedule"]), 0);
    let took = t0.elapsed();
    let started = sb.events("started");
    assert_eq!(started[1]["trigger"], "schedule");
    assert_eq!(
        started[1]["jitter_ms"],
        delay.num_milliseconds(),
        "{:?}",
        started[1]
    );
    assert!(
        took >= delay.to_std().unwrap(),
        "waited {took:?}, not {delay}"
    );

    // list: the next firing is the next slot plus that slot's delay.
    let Some(Next::At(next_slot)) = next_firing(&schedule, &now, None) else {
        panic!("a daily schedule has a next slot");
    };
    let next_delay = jitter_delay("spread", Some(next_slot), 3);
    let doc = list_doc(&sb);
    let e = &doc.automations[0];
    assert_eq!(e.jitter_seconds, 3);
    assert_eq!(e.next_jitter_ms, Some(next_delay.num_milliseconds()));
    assert_eq!(
        e.next.as_deref(),
        Some(automations::runlog::stamp(next_slot + next_delay).as_str())
    );
    assert!(
        e.next_words.as_deref().unwrap().contains(", jitter "),
        "{:?}",
        e.next_words
    );
}

/// `at_login` runs once per session of the user's service manager: the first scheduled
/// firing since the manager (`$MANAGERPID`, as systemd sets it) started runs, whatever slot it
/// comes at; an at-login-only automation skips any other firing until the next session.
#[test]
fn at_login_runs_once_per_session_of_the_manager() {
    let mut sb = Sandbox::new();
    sb.definition(
        "hello",
        "name = \"hello\"\ncommand = [\"true\"]\n[schedule]\nat_login = true\n",
    );
    sb.definition(
        "nightly",
        &format!(
            "name = \"nightly\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"{}\"\nat_login = true\n",
            quiet_time_of_day()
        ),
    );
    let day_ago = chrono::Utc::now() - chrono::Duration::days(1);
    sb.install_record("hello", day_ago);
    sb.install_record("nightly", day_ago);
    let fire = |sb: &Sandbox, name: &str| {
        assert_code(&sb.run(["run", name, "--trigger", "schedule"]), 0);
    };
    let reasons = |sb: &Sandbox, name: &str| -> Vec<String> {
        sb.events("skipped")
            .iter()
            .filter(|s| s["name"] == name)
            .map(|s| s["reason"].as_str().unwrap().to_owned())
            .collect()
    };
    let starts = |sb: &Sandbox, name: &str| {
        sb.events("started")
            .iter()
            .filter(|s| s["name"] == name)
            .count()
    };

    // A manager that started now (a process of our own stands in for it).
    let mut manager = Command::new("sleep").arg("300").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    sb.env("MANAGERPID", &manager.id().to_string());
    fire(&sb, "hello");
    fire(&sb, "hello");
    assert_eq!(starts(&sb, "hello"), 1);
    assert_eq!(reasons(&sb, "hello"), ["slot_done"]);
    // The daily job's slot was run before this session: the login firing runs it anyway, once.
    fire(&sb, "nightly");
    fire(&sb, "nightly");
    assert_eq!(starts(&sb, "nightly"), 1);
    assert_eq!(reasons(&sb, "nightly"), ["slot_done"]);
    // A person's run is no login run: the next session's firing still runs.
    assert_code(&sb.run(["run", "hello"]), 0);
    let _ = manager.kill();
    let _ = manager.wait();

    // The next session.
    std::thread::sleep(Duration::from_millis(100));
    let mut manager = Command::new("sleep").arg("300").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    sb.env("MANAGERPID", &manager.id().to_string());
    fire(&sb, "hello");
    fire(&sb, "hello");
    assert_eq!(starts(&sb, "hello"), 3);
    assert_eq!(reasons(&sb, "hello"), ["slot_done", "slot_done"]);
    let _ = manager.kill();
    let _ = manager.wait();
    sb.assert_log_verifies();
}

/// The file whose presence holds a `flaky` job's second attempt, beside its `tries` counter.
fn hold_of(tries: &std::path::Path) -> std::path::PathBuf {
    let mut hold = tries.as_os_str().to_owned();
    hold.push("-hold");
    hold.into()
}

/// A scheduled automation every 5 minutes whose command fails until `succeed_at` attempts have
/// been made (counted in `tries`); retried `retries` times, a second apart.
fn flaky(sb: &Sandbox, name: &str, retries: u32, succeed_at: u32) -> std::path::PathBuf {
    let tries = sb.path(&format!("{name}-tries"));
    // While its hold file exists, the second attempt waits: a test's other firing then meets the
    // lock held however slowly it starts.
    let script = format!(
        "n=$(cat '{t}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{t}'; \
         while [ $n -eq 2 ] && [ -e '{h}' ]; do sleep 0.05; done; \
         echo attempt $n; [ $n -ge {succeed_at} ]",
        t = tries.display(),
        h = hold_of(&tries).display()
    );
    let script = serde_json::to_string(&script).unwrap();
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"sh\", \"-c\", {script}]\noutbound = true\n[schedule]\nevery_minutes = 5\nretries = {retries}\nretry_delay_seconds = 1\n"
        ),
    );
    sb.install_record(name, chrono::Utc::now() - chrono::Duration::days(1));
    tries
}

/// a command failing twice then succeeding, with `retries = 2`, is one ok firing of
/// three attempts, each its own started/finished with `attempt` and the first run's id, all under
/// the one lock (a firing that comes during a wait is skipped as already_running). A person's run
/// is tried once.
#[test]
fn a_failing_command_is_tried_again_under_the_same_lock() {
    let sb = Sandbox::new();
    let tries = flaky(&sb, "flaky", 2, 3);
    let hold = hold_of(&tries);
    std::fs::write(&hold, "").unwrap();
    let firing = sb
        .cmd(["run", "flaky", "--trigger", "schedule"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // While the second attempt runs (held), another firing finds the lock held.
    wait_for("the second attempt", || sb.events("started").len() == 2);
    assert_code(&sb.run(["run", "flaky", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped")[0]["reason"], "already_running");
    std::fs::remove_file(&hold).unwrap();
    let out = firing.wait_with_output().unwrap();
    assert_code(&out, 0);

    let started = sb.events("started");
    let finished = sb.events("finished");
    assert_eq!(started.len(), 3, "{:?}", sb.log_lines());
    let first = started[0]["run"].as_str().unwrap();
    for (i, s) in started.iter().enumerate() {
        assert_eq!(s["attempt"], i as u64 + 1, "{s}");
        assert_eq!(s["trigger"], "schedule");
        if i > 0 {
            assert_eq!(s["first_run"], first, "{s}");
        } else {
            assert!(s.get("first_run").is_none(), "{s}");
        }
    }
    let outcomes: Vec<&str> = finished
        .iter()
        .map(|f| f["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["failed", "failed", "ok"]);
    assert_eq!(finished[2]["stdout_tail"], "attempt 3\n");
    // The waits: 1 s, then 2 s (doubling).
    let at = |e: &serde_json::Value| {
        automations::runlog::parse_stamp(e["at"].as_str().unwrap()).unwrap()
    };
    assert!(at(&started[1]) - at(&finished[0]) >= chrono::Duration::milliseconds(1000));
    assert!(at(&started[2]) - at(&finished[1]) >= chrono::Duration::milliseconds(2000));
    // Health counts the firing once, by its last attempt.
    let o = sb.run(["health", "flaky", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let figures = &doc["automations"][0]["figures"];
    assert_eq!(
        (figures["runs"].as_u64(), figures["ok"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    // A person's run is tried once.
    std::fs::remove_file(sb.path("flaky-tries")).unwrap();
    assert_code(&sb.run(["run", "flaky"]), 1);
    assert_eq!(sb.events("started").len(), 4);
    sb.assert_log_verifies();
}

/// the keeper guards every attempt, not only the first: a runner SIGKILLed during the
/// second attempt takes that attempt's command along, with the subreaper and (as on macOS)
/// without it.
#[test]
fn a_killed_runner_takes_a_later_attempts_command_along() {
    for subreaper in ["on", "off"] {
        let mut sb = Sandbox::new();
        sb.env("AUTOMATIONS_SUBREAPER", subreaper);
        let marker = sb.path("first-done");
        let pid_file = sb.path("pid");
        let script = format!(
            "if [ -e '{m}' ]; then sleep 300 & echo $! > '{p}'; wait; else touch '{m}'; exit 1; fi",
            m = marker.display(),
            p = pid_file.display()
        );
        let script = serde_json::to_string(&script).unwrap();
        sb.definition(
            "again",
            &format!(
                "name = \"again\"\ncommand = [\"sh\", \"-c\", {script}]\n[schedule]\nevery_minutes = 5\nretries = 1\nretry_delay_seconds = 1\n"
            ),
        );
        sb.install_record("again", chrono::Utc::now() - chrono::Duration::days(1));
        let mut firing = sb
            .cmd(["run", "again", "--trigger", "schedule"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        let sleeper = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                break pid;
            }
            assert!(
                Instant::now() < until,
                "no second attempt: {:?}",
                sb.log_lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(sb.events("started").len(), 2);
        kill_runner(&mut firing);
        assert_eq!(
            survivors(&[sleeper], Duration::from_secs(5)),
            Vec::<i32>::new(),
            "subreaper {subreaper}: the second attempt's command outlived the runner"
        );
        sb.assert_log_verifies();
    }
}

/// a firing whose attempts all fail is one failure: an outbound automation is paused
/// after its third failed firing (auto_pause_after = 3), not after three failed attempts, and the
/// one message about it goes out then (a fake ntfy server counts them).
#[test]
fn a_firing_whose_attempts_all_fail_counts_once_towards_auto_pause() {
    use crate::fixtures::{FakeHttp, Reply, write_private};
    let mut sb = Sandbox::new();
    let server = FakeHttp::start(|_| Reply::Status(200, b"{}".to_vec()));
    sb.env("AUTOMATIONS_NOTIFY", "on")
        .env("NTFY_TOKEN", "tk_x_1234");
    std::fs::create_dir_all(&sb.data).unwrap();
    write_private(
        &sb.data.join("notify.toml"),
        &format!("[ntfy]\nurl = \"{}/topic\"\n", server.url),
    );
    flaky(&sb, "down", 1, 1000);
    let paused = sb.data.join("state/paused/down.json");
    let pause_messages = || {
        server
            .seen()
            .iter()
            .filter(|s| {
                s.header("Title")
                    .is_some_and(|t| t.contains("paused automatically"))
            })
            .count()
    };
    for firing in 1..=3 {
        assert_code(&sb.run(["run", "down", "--trigger", "schedule"]), 1);
        assert_eq!(sb.events("started").len(), firing * 2);
        assert_eq!(paused.exists(), firing == 3, "after firing {firing}");
        assert_eq!(
            pause_messages(),
            usize::from(firing == 3),
            "after firing {firing}"
        );
    }
    let o = sb.run(["health", "down", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["automations"][0]["figures"]["streak"], 3, "{doc}");
    sb.assert_log_verifies();
}

#[test]
fn a_unit_installed_after_the_slot_does_not_catch_up_that_slot() {
    let sb = Sandbox::new();
    sb.definition(
        "daily",
        &format!(
            "name = \"daily\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"{}\"\n",
            quiet_time_of_day()
        ),
    );
    sb.install_record("daily", chrono::Utc::now());
    assert_code(&sb.run(["run", "daily", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("skipped").last().unwrap()["reason"], "slot_done");
    assert!(sb.events("started").is_empty());
}

/// Regression: during the grace every sweep re-sent SIGTERM, so a command that handles one TERM
/// (to clean up) got a second one 50 ms later.
#[test]
fn the_grace_sends_sigterm_once() {
    let sb = Sandbox::new();
    let terms = sb.path("terms");
    sh_def(
        &sb,
        "t",
        1,
        &format!(
            "trap 'echo term >> {}' TERM; while :; do sleep 0.1; done",
            terms.display()
        ),
    );
    assert_code(&sb.run(["run", "t"]), 1);
    assert_eq!(sb.last_finished()["outcome"], "timeout");
    let n = std::fs::read_to_string(&terms)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(n, 1, "the command got {n} SIGTERMs");
}

/// Regression: a run stopped at its deadline counted as "left behind" a child still ending from
/// the runner's own SIGTERM when the main process was reaped before it (a cleanup taking a
/// moment): `leftover_processes` is what outlived a main process that ended on its own.
#[test]
fn a_child_still_ending_from_the_deadlines_sigterm_is_not_a_leftover() {
    let sb = Sandbox::new();
    let done = sb.path("cleaned-up");
    // The child's cleanup: half a second that the sweeps' SIGTERM cannot cut short.
    sh_def(
        &sb,
        "t",
        2,
        &format!(
            "sh -c 'trap \"(trap \\\"\\\" TERM; sleep 0.5); touch {}; exit 0\" TERM; while :; do sleep 0.05; done' & wait",
            done.display()
        ),
    );
    assert_code(&sb.run(["run", "t"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "timeout", "{f}");
    assert!(done.exists(), "the child's cleanup never ran: {f}");
    assert_eq!(f["leftover_processes"], 0, "{f}");
}

/// An orphan maker: `orphan.py DIR TAG single|double`. It forks a child that leaves the session
/// (`setsid`), and for `double` forks again and lets the middle process exit, like a daemon. The
/// orphan waits until its first parent is gone, then records "pid parent" in DIR/TAG.
const ORPHAN_PY: &str = r#"#!/usr/bin/env python3
import os, sys, time
d, tag, mode = sys.argv[1:4]
first = os.getpid()
if os.fork() == 0:
    os.setsid()
    if mode == "double":
        first = os.getpid()
        if os.fork() != 0:
            os._exit(0)
    while os.getppid() == first:
        time.sleep(0.01)
    with open(os.path.join(d, tag + ".tmp"), "w") as f:
        f.write("%d %d\n" % (os.getpid(), os.getppid()))
    os.rename(os.path.join(d, tag + ".tmp"), os.path.join(d, tag))
    time.sleep(300)
    os._exit(0)
if mode == "single":
    os._exit(0)
os.wait()
"#;

/// macOS has no subreaper: with it turned off on Linux, orphans go to init and only the walk of the
/// process table (parents, groups, sessions, the run's environment marker) can find them. Each
/// orphan records the parent it ends up with, proving the runner was not it.
fn walk_only_case(exit_normally: bool) {
    let mut sb = Sandbox::new();
    sb.env("AUTOMATIONS_SUBREAPER", "off");
    let dir = sb.path("w");
    std::fs::create_dir_all(&dir).unwrap();
    let py = sb.script("orphan.py", ORPHAN_PY);
    let d = dir.display();
    let script = format!(
        "{py} {d} escapee single; {py} {d} daemon double; \
         while [ ! -e {d}/escapee ] || [ ! -e {d}/daemon ]; do sleep 0.02; done; {}",
        if exit_normally { "exit 0" } else { "sleep 300" },
        py = py.display(),
    );
    // A deadline that python's start-up and the forks fit in on a loaded machine.
    sh_def(&sb, "w", if exit_normally { 60 } else { 8 }, &script);
    let mut child = sb.cmd(["run", "w"]).stdout(Stdio::piped()).spawn().unwrap();
    let keeper = child.id() as i32;
    let status = child.wait().unwrap();
    let f = sb.last_finished();
    let read = |tag: &str| -> (i32, i32) {
        let text = std::fs::read_to_string(dir.join(tag))
            .unwrap_or_else(|e| panic!("{tag} never recorded itself ({e}): {f}"));
        let v: Vec<i32> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        (v[0], v[1])
    };
    let (escapee, escapee_parent) = read("escapee");
    let (daemon, daemon_parent) = read("daemon");
    assert_ne!(escapee_parent, keeper, "the subreaper was on");
    assert_ne!(daemon_parent, keeper, "the subreaper was on");
    if exit_normally {
        assert!(status.success(), "{f}");
        assert_eq!(f["outcome"], "ok", "{f}");
        assert_eq!(f["leftover_processes"], 2, "{f}");
    } else {
        assert_eq!(f["outcome"], "timeout", "{f}");
    }
    assert_eq!(
        survivors(&[escapee, daemon], Duration::from_secs(2)),
        Vec::<i32>::new(),
        "orphans outside the subreaper survived: {f}"
    );
    sb.assert_log_verifies();
}

#[test]
#[ignore = "a real component: python3"]
fn without_a_subreaper_the_walk_kills_orphans_at_the_deadline() {
    walk_only_case(false);
}

#[test]
#[ignore = "a real component: python3"]
fn without_a_subreaper_the_walk_kills_orphans_left_after_a_normal_exit() {
    walk_only_case(true);
}

/// Writes `env/<name>.env` (0600) with `text`.
fn env_file(sb: &Sandbox, name: &str, text: &[u8]) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(sb.data.join("env")).unwrap();
    let p = sb.data.join("env").join(format!("{name}.env"));
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// Regression: an env-file value shorter than 8 bytes was not redacted: `DB_PASSWORD=hunter2`
/// (from an imported crontab) reached the hash-chained log for good through a script's `set -x`.
/// Every value is redacted now; one of one or two characters, which would shred ordinary output,
/// is refused with the reason by the run and by validate.
#[test]
fn every_env_file_value_is_redacted_and_a_too_short_one_refused() {
    let sb = Sandbox::new();
    sb.shell_definition(
        "db",
        "set -x; mysqldump_password=\"$DB_PASSWORD\"; echo \"connecting with $DB_PASSWORD\"",
        "env = [\"DB_PASSWORD\"]\n",
    );
    env_file(&sb, "db", b"DB_PASSWORD=hunter2\n");
    assert_code(&sb.run(["run", "db"]), 0);
    let f = sb.last_finished();
    let tails = format!("{}{}", f["stdout_tail"], f["stderr_tail"]);
    assert!(tails.contains("connecting with [redacted]"), "{tails}");
    assert!(!tails.contains("hunter2"), "{tails}");
    let log = std::fs::read_to_string(sb.data.join("runs.jsonl")).unwrap();
    assert!(!log.contains("hunter2"), "{log}");
    env_file(&sb, "db", b"DB_PASSWORD=ab\n");
    assert_code(&sb.run(["run", "db"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "env_file", "{f:#}");
    assert!(
        f["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("line 1: the value of DB_PASSWORD is 2 character(s), too short to redact"),
        "{f:#}"
    );
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("automations/db.toml: env: env file ")
            && stderr(&o).contains("DB_PASSWORD is 2 character(s)"),
        "{}",
        stderr(&o)
    );
}

/// Regression: a NUL byte in an env-file value failed every run with `spawn_failed: nul byte
/// found in provided data` while validate and install said nothing. Validate and install name the
/// file and line now, and the run fails as `env_file`, never showing the value.
#[test]
fn a_nul_in_an_env_file_is_named_by_validate_install_and_the_run() {
    let sb = Sandbox::new();
    sb.definition(
        "api",
        "name = \"api\"\ncommand = [\"true\"]\nenv = [\"API_TOKEN\"]\n[schedule]\ndaily_at = \"03:00\"\n",
    );
    env_file(&sb, "api", b"API_TOKEN=abc\0secret-rest\n");
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("line 1: the value of API_TOKEN holds a NUL byte"),
        "{}",
        stderr(&o)
    );
    let o = sb.run(["install", "api", "--dry-run"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("holds a NUL byte"), "{}", stderr(&o));
    assert_code(&sb.run(["run", "api"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "env_file", "{f:#}");
    assert!(!f.to_string().contains("secret-rest"));
}

/// Regression: `install lx` succeeded while `validate` rejected a sibling; a chain loop lx ↔ ly
/// installed that way fired 122 times in 2 s before `max_per_hour` held. Install refuses while
/// the folder does not validate, naming the problem.
#[test]
fn install_refuses_while_validate_rejects_a_sibling() {
    let sb = Sandbox::new();
    sb.definition(
        "lx",
        "name = \"lx\"\ncommand = [\"true\"]\n[trigger]\nafter_success = [\"ly\"]\n",
    );
    sb.definition(
        "ly",
        "name = \"ly\"\ncommand = [\"true\"]\n[trigger]\nafter_success = [\"lx\"]\n",
    );
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    let o = sb.run(["install", "lx", "--dry-run"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("invalid definitions (run `automations validate`)"),
        "{}",
        stderr(&o)
    );
}

/// Regression: without /proc (a container, a chroot), `{self}` fell back to the bare name
/// `automations`, which PATH may resolve to another program or to nothing (`spawn_failed`). It is
/// the path the binary was started by now. Needs root (a mount namespace without /proc).
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn self_without_proc_is_the_binary_that_runs() {
    let test = "self_without_proc_is_the_binary_that_runs";
    if !nix::unistd::getuid().is_root() {
        skip(
            test,
            "needs root to unmount /proc in a private mount namespace",
        );
        return;
    }
    let sb = Sandbox::new();
    sb.definition(
        "selfish",
        "name = \"selfish\"\ncommand = [\"{self}\", \"--version\"]\n",
    );
    // The sandbox's environment, for a command that is `unshare` instead of the binary.
    let cmd = sb.cmd(["run", "selfish"]);
    let script = format!("umount -l /proc && exec '{}' run selfish", sb.bin.display());
    let o = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(&sb.root)
        .output()
        .unwrap();
    assert_code(&o, 0);
    let f = sb.last_finished();
    assert!(
        f["stdout_tail"]
            .as_str()
            .unwrap()
            .starts_with("automations "),
        "{f:#}"
    );
}

/// Regression: a program that printed "out of memory" for a reason of its own and exited 1 under
/// `memory_max` was recorded `out_of_memory`. Only what a refused allocation makes a program say
/// counts now.
#[test]
fn a_programs_own_out_of_memory_is_not_the_limits() {
    let sb = Sandbox::new();
    sb.shell_definition(
        "cache",
        "echo 'cache: out of memory for new entries' >&2; exit 1",
        "[limits]\nmemory_max = \"512M\"\n",
    );
    assert_code(&sb.run(["run", "cache"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "exit_status", "{f:#}");
}

/// A firing of a schedule on the clock knows which slot it stands for: `AUTOMATION_SLOT` (RFC 3339
/// with the machine's offset), recorded in its `started` and said by `show`; a person's run, and
/// an interval of awake time, stand for none.
#[test]
fn a_scheduled_firing_gets_its_slot() {
    use automations::schedule::latest_slot;
    let sb = Sandbox::new();
    let text = format!(
        "name = \"daily\"\ncommand = [\"sh\", \"-c\", \"echo slot=${{AUTOMATION_SLOT:-none}}\"]\n[schedule]\ndaily_at = \"{}\"\n",
        quiet_time_of_day()
    );
    sb.definition("daily", &text);
    sb.install_record("daily", chrono::Utc::now() - chrono::Duration::days(1));
    let schedule = schedule_of("daily", &text);
    let slot = latest_slot(&schedule, &chrono::Local::now())
        .unwrap()
        .with_timezone(&chrono::Local)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false);

    assert_code(&sb.run(["run", "daily"]), 0);
    assert_code(&sb.run(["run", "daily", "--trigger", "schedule"]), 0);
    let finished = sb.events("finished");
    assert_eq!(finished[0]["stdout_tail"], "slot=none\n");
    assert_eq!(finished[1]["stdout_tail"], format!("slot={slot}\n"));
    let started = sb.events("started");
    assert!(started[0].get("slot").is_none(), "{}", started[0]);
    assert_eq!(started[1]["slot"], slot.as_str());
    // RFC 3339 with an offset, which reads back as the same instant.
    assert!(
        chrono::DateTime::parse_from_rfc3339(&slot).is_ok(),
        "{slot}"
    );
    let run = started[1]["run"].as_str().unwrap();
    let show = stdout(&sb.run(["show", run]));
    assert!(
        show.contains(&format!(
            "slot      {slot} (the schedule's slot it ran for)"
        )),
        "{show}"
    );

    // An interval of awake time has no slot on the clock.
    sb.definition(
        "awake",
        "name = \"awake\"\ncommand = [\"sh\", \"-c\", \"echo slot=${AUTOMATION_SLOT:-none}\"]\n[schedule]\nevery_minutes = 7\n",
    );
    sb.install_record("awake", chrono::Utc::now() - chrono::Duration::days(1));
    assert_code(&sb.run(["run", "awake", "--trigger", "schedule"]), 0);
    let last = sb.events("finished").pop().unwrap();
    assert_eq!(last["stdout_tail"], "slot=none\n", "{last}");
}
