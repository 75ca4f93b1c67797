//! Faults and hostile data roots: a SIGKILLed runner, FIFOs and links where files belong, foreign
//! and exposed data roots, full disks. Each test first stages the attack or fault, then checks the
//! fixed behaviour, and that the log still verifies.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::*;

/// Regression: a SIGKILLed runner's direct child died (parent-death signal), but grandchildren
/// survived under init and the next firing ran a second copy beside them.
#[test]
fn a_sigkilled_runner_takes_its_whole_tree_and_no_second_run_starts_beside_it() {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    let p = pids.display();
    sb.definition(
        "t",
        &format!(
            "name = \"t\"\ncommand = [\"sh\", \"-c\", \"sleep 300 & echo $! >> {p}; setsid sleep 300 & echo $! >> {p}; sh -c 'sleep 300 & echo $! >> {p}; wait' & echo $$ >> {p}; wait\"]\n"
        ),
    );
    let mut runner = sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while read_pids(&pids).len() < 4 {
        assert!(
            Instant::now() < until,
            "the command never reported its pids"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let first = read_pids(&pids);
    runner.kill().unwrap();
    runner.wait().unwrap();

    // The next firing checks, as its command, whether anything of the first run is alive (not a
    // zombie: this machine's init may never reap the orphans).
    let check = format!(
        "for p in {}; do s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1); [ -n \"$s\" ] && [ \"$s\" != Z ] && echo ALIVE $p; done; true",
        first
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    sb.definition(
        "t",
        &format!(
            "name = \"t\"\ncommand = [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(&check).unwrap()
        ),
    );
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let o = sb.run(["run", "t"]);
        assert_code(&o, 0);
        if !stdout(&o).contains("skipped (already_running)") {
            break;
        }
        assert!(Instant::now() < until, "the lock was never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = sb.last_finished();
    assert_eq!(second["outcome"], "ok", "{second}");
    assert!(
        !second["stdout_tail"].as_str().unwrap().contains("ALIVE"),
        "a second run started beside the first one's processes: {second}"
    );
    assert_eq!(
        survivors(&first, Duration::from_secs(1)),
        Vec::<i32>::new(),
        "the first run's tree outlived its runner"
    );
    let runs = sb.run(["runs", "t", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    let statuses: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] != "skipped")
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "interrupted"], "{doc}");
    sb.assert_log_verifies();
}

/// Regression: the scratch folders of interrupted runs were never removed.
#[test]
fn the_next_run_clears_the_scratch_an_interrupted_run_left() {
    let sb = Sandbox::new();
    sb.definition(
        "t",
        "name = \"t\"\ncommand = [\"sh\", \"-c\", \"echo x > $TMPDIR/f; sleep 300\"]\n",
    );
    let mut runner = sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap();
    let scratch = sb.data.join("scratch/t");
    let until = Instant::now() + Duration::from_secs(10);
    let left = loop {
        let found = std::fs::read_dir(&scratch)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("f").exists());
        if let Some(p) = found {
            break p;
        }
        assert!(
            Instant::now() < until,
            "the command never wrote its scratch"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    runner.kill().unwrap();
    runner.wait().unwrap();
    assert!(
        left.exists(),
        "an interrupted run leaves its scratch behind"
    );
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    let until = Instant::now() + Duration::from_secs(10);
    while stdout(&sb.run(["run", "t"])).contains("already_running") {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!left.exists(), "the next run cleared {}", left.display());
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}
