//! Faults and hostile data roots: a SIGKILLed runner, FIFOs and links where files belong, foreign
//! and exposed data roots, full disks. Each test first stages the attack or fault, then checks the
//! fixed behaviour, and that the log still verifies.

use std::path::Path;
use std::process::{Command, Stdio};
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
    let until = Instant::now() + Duration::from_secs(30);
    while read_pids(&pids).len() < 4 {
        assert!(
            Instant::now() < until,
            "the command never reported its pids"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let first = read_pids(&pids);
    kill_runner(&mut runner);

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
    sb.shell_definition("t", &check, "");
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

/// Regression: the scratch folders of interrupted runs were never removed. What an interrupted run
/// left (files in TMPDIR, its result file) is cleared before the next run of the automation.
#[test]
fn the_next_run_clears_the_scratch_an_interrupted_run_left() {
    let sb = Sandbox::new();
    sb.definition(
        "t",
        "name = \"t\"\ncommand = [\"sh\", \"-c\", \"\\\"$AUTOMATION_BIN\\\" result stale=1; echo x > $TMPDIR/f; sleep 300\"]\n",
    );
    let mut runner = sb.cmd(["run", "t"]).stdout(Stdio::null()).spawn().unwrap();
    let scratch = sb.data.join("scratch/t");
    let until = Instant::now() + Duration::from_secs(30);
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
    kill_runner(&mut runner);
    assert!(
        left.exists(),
        "an interrupted run leaves its scratch behind"
    );
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    let until = Instant::now() + Duration::from_secs(30);
    while stdout(&sb.run(["run", "t"])).contains("already_running") {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !left.join("f").exists(),
        "the next run cleared {}",
        left.display()
    );
    // Nor did the interrupted run's result become the next run's facts.
    assert_eq!(sb.last_finished()["facts"], serde_json::json!({}));
    let mut names: Vec<_> = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["tmp"]);
    assert_eq!(std::fs::read_dir(scratch.join("tmp")).unwrap().count(), 0);
}

/// Regression: `validate`, `list`, `units` and `check` blocked forever on a definition that is a
/// FIFO; a directory named like a definition is refused too, each with its path.
#[test]
fn a_fifo_or_directory_definition_is_refused_without_blocking() {
    let sb = Sandbox::new();
    sb.definition("ok", "name = \"ok\"\ncommand = [\"true\"]\n");
    mkfifo(&sb.root.join("automations/f.toml"));
    std::fs::create_dir(sb.root.join("automations/d.toml")).unwrap();
    for (args, code) in [
        (vec!["validate"], 2),
        (vec!["units", "--check"], 2),
        (vec!["check"], 2),
        (vec!["run", "f"], 2),
    ] {
        let o = run_within(sb.cmd(&args), 30, &args.join(" "));
        assert_code(&o, code);
        let err = stderr(&o);
        assert!(
            err.contains("automations/f.toml") && err.contains("FIFO"),
            "{args:?}: {err}"
        );
        if args[0] != "run" {
            assert!(
                err.contains("automations/d.toml") && err.contains("directory"),
                "{args:?}: {err}"
            );
        }
    }
    let o = run_within(sb.cmd(["list"]), 30, "list");
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("2 invalid definition problem(s)"),
        "{}",
        stdout(&o)
    );
    // A scheduled firing of it is recorded as a failed run naming the problem, not a hang.
    let mut sched = sb.cmd(["run", "f", "--trigger", "schedule"]);
    sched.env("AUTOMATIONS_NOTIFY", "off");
    let o = run_within(sched, 30, "run f --trigger schedule");
    assert_code(&o, 1);
    assert_eq!(sb.last_finished()["error"]["class"], "definition_invalid");
    sb.assert_log_verifies();
}

/// Regression: a FIFO env file hung the runner forever, past its timeout and SIGTERM, holding
/// the lock.
#[test]
fn a_fifo_env_file_fails_the_run_at_once_and_frees_the_lock() {
    let sb = Sandbox::new();
    sb.definition(
        "e",
        "name = \"e\"\ncommand = [\"true\"]\nenv = [\"TOKEN\"]\ntimeout_seconds = 2\n",
    );
    std::fs::create_dir_all(sb.data.join("env")).unwrap();
    mkfifo(&sb.data.join("env/e.env"));
    let o = run_within(sb.cmd(["run", "e"]), 30, "run with a FIFO env file");
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "env_file", "{f}");
    let detail = f["error"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("e.env") && detail.contains("FIFO"),
        "{detail}"
    );
    // The lock is free: a second run is not skipped as already running.
    std::fs::remove_file(sb.data.join("env/e.env")).unwrap();
    let o = run_within(sb.cmd(["run", "e"]), 30, "second run");
    assert_code(&o, 0);
    sb.assert_log_verifies();
}

/// A FIFO, a device, a directory or a link where a file of the data root belongs: refused with its
/// path and exit 3, never waited on, never followed.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn special_files_in_the_data_root_are_refused_with_their_path() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, "0123456789 must not change").unwrap();
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make)> = vec![
        ("runs.jsonl", Box::new(|p: &Path| mkfifo(p))),
        (
            "runs.jsonl",
            Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
        ),
        (
            "runs.jsonl",
            Box::new(|p: &Path| {
                let ok = std::process::Command::new("mknod")
                    .arg(p)
                    .args(["c", "1", "3"])
                    .status()
                    .unwrap();
                assert!(ok.success(), "mknod (needs root)");
            }),
        ),
        ("runs.lock", Box::new(|p: &Path| mkfifo(p))),
        ("locks/t.lock", Box::new(|p: &Path| mkfifo(p))),
        ("state/paused/t.json", Box::new(|p: &Path| mkfifo(p))),
        ("state/stop-all.json", Box::new(|p: &Path| mkfifo(p))),
    ];
    for (rel, make) in cases {
        let sb = Sandbox::new();
        sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
        let p = sb.data.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::set_permissions(
            &sb.data,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        make(&p);
        let o = run_within(sb.cmd(["run", "t"]), 30, rel);
        assert_code(&o, 3);
        let err = stderr(&o);
        assert!(
            err.contains(rel.rsplit('/').next().unwrap()),
            "{rel}: {err}"
        );
        assert!(
            ["FIFO", "directory", "device"]
                .iter()
                .any(|k| err.contains(k)),
            "{rel}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "0123456789 must not change"
    );
}

/// Who the tests plant links as: another uid than the one running automations.
fn as_nobody(args: &[&str]) {
    let ok = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .args(args)
        .status()
        .unwrap();
    assert!(ok.success(), "setpriv {args:?}");
}

/// Regression: a 0777 (or foreign) data root was used silently, so another user could plant a
/// `runs.jsonl` link (the runner appended log lines, output tails included, to its target; a
/// dangling one created the target) or a lock-file link (the pid overwrote the target's first
/// bytes). Now the data root is refused until it is private, and links in it are never followed.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn links_planted_by_another_user_are_never_followed() {
    if !nix::unistd::getuid().is_root() {
        return skip(
            "links_planted_by_another_user_are_never_followed",
            "needs root to act as another uid (setpriv)",
        );
    }
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        outside.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let target = outside.path().join("victim");
    std::fs::write(&target, "0123456789 must not change").unwrap();
    std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let dangling = outside.path().join("created-by-a-link");
    let snapshot = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot();

    let sb = Sandbox::new();
    sb.definition(
        "t",
        "name = \"t\"\ncommand = [\"sh\", \"-c\", \"echo secret-output\"]\n",
    );
    std::fs::create_dir_all(sb.data.join("locks")).unwrap();
    for d in [&sb.data, &sb.data.join("locks")] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }
    // Another user plants links while the data root is open to everyone.
    as_nobody(&[
        "ln",
        "-s",
        target.to_str().unwrap(),
        sb.data.join("runs.jsonl").to_str().unwrap(),
    ]);
    as_nobody(&[
        "ln",
        "-s",
        target.to_str().unwrap(),
        sb.data.join("locks/t.lock").to_str().unwrap(),
    ]);
    as_nobody(&[
        "ln",
        "-s",
        dangling.to_str().unwrap(),
        sb.data.join("runs.lock").to_str().unwrap(),
    ]);
    for args in [
        vec!["run", "t"],
        vec!["list"],
        vec!["runs"],
        vec!["pause", "t", "--reason", "x"],
    ] {
        let o = run_within(sb.cmd(&args), 30, &args.join(" "));
        assert_code(&o, 3);
        assert!(
            stderr(&o).contains("writable by group or others") && stderr(&o).contains("chmod 700"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = sb.run(["doctor"]);
    assert!(stdout(&o).contains("fail  data root"), "{}", stdout(&o));
    // The owner makes it private; the planted links stay, and are refused, never followed.
    for d in [&sb.data, &sb.data.join("locks")] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let o = run_within(sb.cmd(["run", "t"]), 30, "run with planted links");
    assert_code(&o, 3);
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    std::fs::remove_file(sb.data.join("runs.lock")).unwrap();
    let o = run_within(sb.cmd(["run", "t"]), 30, "run with planted links");
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains("symbolic link") && (err.contains("t.lock") || err.contains("runs.jsonl")),
        "{err}"
    );
    assert_eq!(
        snapshot(),
        before,
        "something outside the data root changed"
    );
    assert!(!dangling.exists());
    // Removing them, everything works again and the log verifies.
    std::fs::remove_file(sb.data.join("runs.jsonl")).unwrap();
    std::fs::remove_file(sb.data.join("locks/t.lock")).unwrap();
    assert_code(&sb.run(["run", "t"]), 0);
    sb.assert_log_verifies();
    assert_eq!(snapshot(), before);
}

/// Regression: a data root owned by someone else was used, and `doctor` called it private.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn a_foreign_data_root_is_refused_and_doctor_says_why() {
    if !nix::unistd::getuid().is_root() {
        return skip(
            "a_foreign_data_root_is_refused_and_doctor_says_why",
            "needs root to give the data root to another uid",
        );
    }
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    std::fs::create_dir_all(&sb.data).unwrap();
    std::fs::set_permissions(
        &sb.data,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    nix::unistd::chown(&sb.data, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let o = sb.run(["run", "t"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("belongs to uid 65534"),
        "{}",
        stderr(&o)
    );
    let o = sb.run(["doctor"]);
    let report = stdout(&o);
    assert!(
        report.contains("fail  data root") && report.contains("belongs to uid 65534"),
        "{report}"
    );
    assert!(!report.contains("private ("), "{report}");
}

/// Regression: a 100 MB env file took the runner to 589 MB of memory.
#[test]
#[ignore = "a real component: GNU time (peak memory)"]
fn an_oversized_env_file_is_refused_unread() {
    let sb = Sandbox::new();
    sb.definition(
        "e",
        "name = \"e\"\ncommand = [\"true\"]\nenv = [\"TOKEN\"]\n",
    );
    std::fs::create_dir_all(sb.data.join("env")).unwrap();
    std::fs::set_permissions(
        &sb.data,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let p = sb.data.join("env/e.env");
    std::fs::write(&p, "TOKEN=small\n").unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The same run with a one-line file: what this (debug) binary costs anyway.
    let Some((_, baseline)) = peak_rss(sb.cmd(["run", "e"])) else {
        return skip(
            "an_oversized_env_file_is_refused_unread",
            "GNU time is missing",
        );
    };
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(100 * 1024 * 1024).unwrap();
    let (o, rss) = peak_rss(sb.cmd(["run", "e"])).unwrap();
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "env_file");
    assert!(
        f["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("larger than"),
        "{f}"
    );
    assert!(
        rss < baseline + 4 * 1024,
        "peak RSS {rss} KiB, {baseline} KiB with a one-line file"
    );
}

/// Regression: a data root that is a regular file, or read-only, exited 1 instead of 3.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn an_unusable_data_root_exits_3() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    std::fs::write(&sb.data, "a file").unwrap();
    for args in [
        vec!["run", "t"],
        vec!["list"],
        vec!["runs"],
        vec!["stop-all", "--reason", "x"],
    ] {
        let o = sb.run(&args);
        assert_code(&o, 3);
        assert!(
            stderr(&o).contains("not a directory"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    std::fs::remove_file(&sb.data).unwrap();
    let Some(_fs) = Tmpfs::mount_with(&sb.data, "size=1m,mode=0700,ro") else {
        return skip(
            "an_unusable_data_root_exits_3",
            "cannot mount a tmpfs (needs root)",
        );
    };
    for args in [vec!["run", "t"], vec!["pause", "t", "--reason", "x"]] {
        let o = sb.run(&args);
        assert_code(&o, 3);
        assert!(
            stderr(&o).contains("cannot be written"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // Reading a read-only data root is fine.
    assert_code(&sb.run(["list"]), 0);
}

/// Runs `args` with its stdout a pipe nobody reads (closed at once).
fn with_closed_stdout(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    let mut child = sb
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

/// Regression: a closed stdout (`automations runs | head -1`, `automations run x | true`) made
/// printing panic (exit 134).
#[test]
fn a_closed_stdout_neither_panics_nor_changes_the_outcome() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    sb.definition("f", "name = \"f\"\ncommand = [\"false\"]\n");
    for _ in 0..3 {
        assert_code(&sb.run(["run", "t"]), 0);
    }
    for args in [
        &["runs"][..],
        &["list"],
        &["show", "2"],
        &["log", "verify"],
        &["list", "--json"],
        &["runs", "--json"],
        &["health", "--json"],
    ] {
        let o = with_closed_stdout(&sb, args);
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        // Like `| head`: the reader left, which is not an error worth a message.
        assert!(
            !stderr(&o).contains("Broken pipe"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            o.status.code().is_some_and(|c| c < 4),
            "{args:?}: {:?}",
            o.status
        );
    }
    let o = with_closed_stdout(&sb, &["run", "t"]);
    assert_code(&o, 0);
    assert_eq!(sb.last_finished()["outcome"], "ok");
    let o = with_closed_stdout(&sb, &["run", "f"]);
    assert_code(&o, 1);
    assert_eq!(sb.last_finished()["outcome"], "failed");
    sb.assert_log_verifies();
}

/// Regression: `show r3` took the first run whose id started with r3, and `show ''` the newest.
#[test]
fn show_takes_an_exact_id_else_a_unique_prefix_else_lists_candidates() {
    let sb = Sandbox::new();
    sb.definition("t", "name = \"t\"\ncommand = [\"true\"]\n");
    for _ in 0..3 {
        assert_code(&sb.run(["run", "t"]), 0);
    }
    let ids: Vec<String> = sb
        .events("started")
        .iter()
        .map(|e| e["run"].as_str().unwrap().to_owned())
        .collect();
    // Exact.
    let o = sb.run(["show", &ids[1]]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains(&ids[1]));
    // A unique prefix: the whole id minus its last character.
    let o = sb.run(["show", &ids[2][..ids[2].len() - 1]]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains(&ids[2]), "{}", stdout(&o));
    // Shared prefixes (the date, and the empty string) list the candidates, exit 2.
    for prefix in [&ids[0][..8], ""] {
        let o = sb.run(["show", prefix]);
        assert_code(&o, 2);
        let err = stderr(&o);
        assert!(
            err.contains("is the start of 3 run ids") && ids.iter().all(|id| err.contains(id)),
            "{err}"
        );
    }
    let o = sb.run(["show", "nonexistent"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("no run"), "{}", stderr(&o));
}

/// Regression: `show` on a terminal passed a command's ESC/OSC sequences through, so a run's
/// output could retitle the window, hide text or worse.
#[test]
fn show_on_a_terminal_escapes_control_bytes() {
    let sb = Sandbox::new();
    sb.definition(
        "t",
        "name = \"t\"\ncommand = [\"printf\", \"before\\\\033]0;pwned\\\\007\\\\033[2Jafter\\\\n\"]\n",
    );
    assert_code(&sb.run(["run", "t"]), 0);
    let id = sb.last_finished()["run"].as_str().unwrap().to_owned();
    // Through a pipe, the bytes are the bytes.
    let piped = sb.run(["show", &id]);
    assert!(
        stdout(&piped).contains("\u{1b}]0;pwned"),
        "{}",
        stdout(&piped)
    );
    let r = run_on_pty(sb.cmd(["show", &id]), "\u{0}never", "");
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        !r.output.contains('\u{1b}') && !r.output.contains('\u{7}'),
        "{:?}",
        r.output
    );
    assert!(
        r.output
            .contains("before\\u{1b}]0;pwned\\u{7}\\u{1b}[2Jafter"),
        "{}",
        r.output
    );
}

/// Every line of the live log parses and the chain verifies.
fn assert_log_whole(sb: &Sandbox) {
    let text = std::fs::read_to_string(sb.data.join("runs.jsonl")).unwrap_or_default();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a half line was left behind"
    );
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    sb.assert_log_verifies();
}

/// Regression: a command that filled the disk ran, but only `started` was written, with the same
/// message as when nothing ran. Now the reserve records `finished`; with no room left at all, the
/// next firing refuses to start, saying why.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn a_command_that_fills_the_disk_still_gets_its_finished() {
    let sb = Sandbox::new();
    let Some(fs) = Tmpfs::mount(&sb.data, "1m") else {
        return skip(
            "a_command_that_fills_the_disk_still_gets_its_finished",
            "cannot mount a tmpfs (needs root)",
        );
    };
    // The command finds the data root through its scratch folder (TMPDIR lives inside it): a
    // definition may not name it.
    let filler = sb.data.join("filler");
    sb.script(
        "fill.sh",
        "#!/bin/sh\nhead -c 8000 /dev/zero | tr '\\0' x\ncat /dev/zero > \"$TMPDIR/../../../filler\" 2>/dev/null\ntrue\n",
    );
    sb.definition("fill", "name = \"fill\"\ncommand = [\"scripts/fill.sh\"]\n");
    let o = sb.run(["run", "fill"]);
    assert_code(&o, 0);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "ok", "{f}");
    assert_eq!(f["stdout_tail"].as_str().unwrap().len(), 8000);
    assert_log_whole(&sb);
    // Nothing left, not even the reserve: the next firing does not start, and says why.
    let lines = std::fs::read_to_string(sb.data.join("runs.jsonl"))
        .unwrap()
        .lines()
        .count();
    let o = sb.run(["run", "fill"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("is full") && stderr(&o).contains("not starting"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(sb.data.join("runs.jsonl"))
            .unwrap()
            .lines()
            .count(),
        lines
    );
    std::fs::remove_file(&filler).unwrap();
    assert_code(&sb.run(["run", "fill"]), 0);
    // Regression: with the reserve in place but the rest of the disk full, `started` spent the
    // reserve, and the command then took the room `finished` needed. Now the firing does not start.
    std::fs::remove_file(&filler).unwrap();
    sb.definition("small", "name = \"small\"\ncommand = [\"true\"]\n");
    assert_code(&sb.run(["run", "small"]), 0);
    assert!(sb.data.join("state/reserve").exists());
    fs.fill();
    let lines = sb.log_lines().len();
    let o = sb.run(["run", "small"]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("is full"), "{}", stderr(&o));
    assert_eq!(sb.log_lines().len(), lines);
    assert!(
        sb.data.join("state/reserve").exists(),
        "the reserve was spent"
    );
    drop(fs);
}

/// When even the reserve cannot help (here the command fills the disk and deletes the reserve),
/// stderr — which the journal or launchd's log keeps — says the command ran and how it ended.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn a_result_that_cannot_be_recorded_is_said_on_stderr() {
    let sb = Sandbox::new();
    let Some(fs) = Tmpfs::mount(&sb.data, "1m") else {
        return skip(
            "a_result_that_cannot_be_recorded_is_said_on_stderr",
            "cannot mount a tmpfs (needs root)",
        );
    };
    sb.script(
        "greedy.sh",
        "#!/bin/sh\nd=\"$TMPDIR/../../..\"\nrm -f \"$d/state/reserve\"\ncat /dev/zero > \"$d/filler\" 2>/dev/null\nhead -c 8000 /dev/zero | tr '\\0' x\nexit 3\n",
    );
    sb.definition(
        "greedy",
        "name = \"greedy\"\ncommand = [\"scripts/greedy.sh\"]\n",
    );
    let o = sb.run(["run", "greedy"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains(
            "greedy: the command ran (outcome failed, exit 3) but its result could not be recorded"
        ) && err.contains("runs.jsonl")
            && err.contains("No space left"),
        "{err}"
    );
    std::fs::remove_file(sb.data.join("filler")).unwrap();
    assert_eq!(sb.events("started").len(), 1);
    assert!(sb.events("finished").is_empty());
    assert_log_whole(&sb);
    drop(fs);
}

/// Regression: on a full disk `stop-all` failed saving its switch and stopped nothing.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn stop_all_on_a_full_disk_still_stops_every_run() {
    let sb = Sandbox::new();
    let Some(fs) = Tmpfs::mount(&sb.data, "1m") else {
        return skip(
            "stop_all_on_a_full_disk_still_stops_every_run",
            "cannot mount a tmpfs (needs root)",
        );
    };
    let pids = sb.path("pids");
    sb.definition(
        "long",
        &format!(
            "name = \"long\"\ncommand = [\"sh\", \"-c\", \"echo $$ > {}; exec sleep 300\"]\n",
            pids.display()
        ),
    );
    let mut runner = sb
        .cmd(["run", "long"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the command to start", || !read_pids(&pids).is_empty());
    fs.fill();
    let o = run_within(
        sb.cmd(["stop-all", "--reason", "disk full"]),
        20,
        "stop-all",
    );
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("stopped 1 running run(s)"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("the kill switch itself could not be saved")
            && stderr(&o).contains("No space left"),
        "{}",
        stderr(&o)
    );
    assert!(runner.wait().unwrap().code() == Some(1));
    assert_eq!(
        survivors(&read_pids(&pids), Duration::from_secs(2)),
        Vec::<i32>::new()
    );
    // The runner recorded its stopped run with the room kept for it.
    assert_eq!(sb.last_finished()["outcome"], "stopped");
    std::fs::remove_file(sb.data.join("filler")).unwrap();
    assert_log_whole(&sb);
}

/// Regression: `stop-all` and `resume-all` left no trace, and a second `stop-all` overwrote the
/// first one's reason.
#[test]
fn the_kill_switch_leaves_events_in_the_log() {
    let sb = Sandbox::new();
    assert_code(&sb.run(["stop-all", "--reason", "first"]), 0);
    assert_code(&sb.run(["stop-all", "--reason", "second"]), 0);
    assert_code(&sb.run(["resume-all"]), 0);
    let stops = sb.events("stop_all");
    let reasons: Vec<&str> = stops
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["first", "second"]);
    assert_eq!(stops[0]["stopped"], 0);
    assert_eq!(sb.events("resume_all").len(), 1);
    sb.assert_log_verifies();
}

/// The escapes a command can try, each recording its pid in `$1`: a background child, a child in a
/// session of its own, a double-forked orphan, and a daemon that double-forks, calls setsid, runs
/// with its environment cleared (no run marker) and ignores SIGTERM.
const ZOO_PY: &str = r#"#!/usr/bin/env python3
import os, signal, sys, time
out = sys.argv[1]
def note(pid):
    with open(out, "a") as f:
        f.write("%d\n" % pid)
def child(then):
    pid = os.fork()
    if pid == 0:
        then()
        os._exit(0)
    return pid
def sleeper():
    os.execv("/bin/sleep", ["sleep", "300"])
def own_session():
    os.setsid()
    sleeper()
def orphaned(parent):
    # Noted only once the middle process is gone, so none is still alive when the command ends.
    while os.getppid() == parent:
        time.sleep(0.005)
def orphan():
    parent = os.getpid()
    if os.fork() == 0:
        orphaned(parent)
        note(os.getpid())
        sleeper()
    os._exit(0)
def daemon():
    os.setsid()
    parent = os.getpid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        orphaned(parent)
        note(os.getpid())
        os.execve("/bin/sleep", ["sleep", "300"], {})
    os._exit(0)
note(child(sleeper))
note(child(own_session))
child(orphan)
child(daemon)
while len(open(out).read().split()) < 4:
    time.sleep(0.01)
note(os.getpid())
if len(sys.argv) > 2:
    sys.exit(0)
time.sleep(300)
"#;

/// Starts a run of the zoo (timeout `timeout`, the command exiting at once when `exit`), waits
/// until every escape has recorded itself, and returns the firing and the pids.
fn zoo(sb: &Sandbox, timeout: u32, exit: bool) -> (std::process::Child, Vec<i32>) {
    let py = sb.script("zoo.py", ZOO_PY);
    let pids = sb.path("zoo-pids");
    let command = if exit {
        format!("[\"{}\", \"{}\", \"exit\"]", py.display(), pids.display())
    } else {
        format!("[\"{}\", \"{}\"]", py.display(), pids.display())
    };
    sb.definition(
        "z",
        &format!("name = \"z\"\ncommand = {command}\ntimeout_seconds = {timeout}\n"),
    );
    let firing = sb.cmd(["run", "z"]).stdout(Stdio::null()).spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while read_pids(&pids).len() < 5 {
        assert!(Instant::now() < until, "the zoo never reported its pids");
        std::thread::sleep(Duration::from_millis(10));
    }
    (firing, read_pids(&pids))
}

/// a daemon that double-forked, called setsid, cleared its environment and ignored
/// SIGTERM outlived a SIGKILLed runner, and the lock was already free. Now the keeper is the
/// runner's parent and a subreaper: every orphan comes back to it, and it ends only when none is
/// left. No waiting after that: the firing has ended, so the tree is gone.
#[test]
#[ignore = "a real component: python3"]
fn every_escape_dies_with_a_sigkilled_runner_before_its_firing_ends() {
    let sb = Sandbox::new();
    let (mut firing, pids) = zoo(&sb, 300, false);
    kill_runner(&mut firing);
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert_eq!(left, Vec::<i32>::new(), "survivors of the zoo {pids:?}");
    // The lock went with the keeper: the next firing runs.
    sb.definition("z", "name = \"z\"\ncommand = [\"true\"]\n");
    assert!(stdout(&sb.run(["run", "z"])).contains("z: ok"));
    sb.assert_log_verifies();
}

/// What macOS, which has no subreaper, cannot catch — said in docs/macos.md, shown here with the
/// subreaper turned off. When the runner is SIGKILLed, the keeper's walk of the process table finds
/// every escape that is still in the run's group, a session a member led, or carries the run's
/// marker in its environment; a daemon that double-forked, called setsid and cleared its
/// environment is none of these (its parent is init, its session's leader is gone) and survives.
#[test]
#[ignore = "a real component: python3"]
fn without_a_subreaper_only_a_setsid_daemon_with_a_cleared_environment_escapes() {
    let mut sb = Sandbox::new();
    sb.env("AUTOMATIONS_SUBREAPER", "off");
    let (mut firing, pids) = zoo(&sb, 300, false);
    let environ = |p: i32| std::fs::read(format!("/proc/{p}/environ")).ok();
    // The daemon is the escape whose environment is empty once it has exec'd.
    let mut daemon = None;
    wait_for("the daemon to clear its environment", || {
        daemon = pids
            .iter()
            .copied()
            .find(|&p| environ(p).is_some_and(|e| e.is_empty()));
        daemon.is_some()
    });
    let daemon = daemon.unwrap();
    kill_runner(&mut firing);
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(left, vec![daemon], "the zoo {pids:?}");
}

/// The same zoo at the deadline and after a command that exits leaving it behind: the runner's own
/// tree kill finds every one (it is their subreaper), and counts them.
#[test]
#[ignore = "a real component: python3"]
fn every_escape_dies_at_the_deadline_and_after_a_normal_exit() {
    for exit in [false, true] {
        let sb = Sandbox::new();
        // A deadline that python's start-up and the forks fit in on a loaded machine.
        let (mut firing, pids) = zoo(&sb, if exit { 60 } else { 8 }, exit);
        let status = firing.wait().unwrap();
        let f = sb.last_finished();
        if exit {
            assert!(status.success(), "{f}");
            assert_eq!(f["leftover_processes"], 4, "{f}");
        } else {
            assert_eq!(f["outcome"], "timeout", "{f}");
        }
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        assert_eq!(left, Vec::<i32>::new(), "survivors of the zoo: {f}");
    }
}

/// The process a shell or service manager started is the keeper. Killing it (rather than the
/// runner) takes nothing down: the runner goes on and records its run.
#[test]
fn a_killed_keeper_leaves_the_run_to_finish() {
    let sb = Sandbox::new();
    let gate = sb.path("gate");
    let script = format!(
        "while [ ! -e {g} ]; do sleep 0.02; done; echo finished",
        g = gate.display()
    );
    sb.shell_definition("k", &script, "");
    let mut firing = sb.cmd(["run", "k"]).stdout(Stdio::null()).spawn().unwrap();
    let runner = runner_of(&firing);
    firing.kill().unwrap();
    firing.wait().unwrap();
    assert!(alive(runner), "the runner died with its keeper");
    std::fs::write(&gate, "").unwrap();
    wait_for("the run to be recorded", || {
        !sb.events("finished").is_empty()
    });
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "ok", "{f}");
    assert_eq!(f["stdout_tail"], "finished\n");
}

/// 64 random bytes in `state/index/<name>.idx` made `health` say healthy with 0 runs,
/// `runs` "no runs yet" and `list` "never"; an index grown to 2 GB listed an ok run as interrupted.
/// The index is checked against its header, the cursor's count and the lines it points at, and
/// rebuilt from the log when it does not match — said on stderr, never silently trusted.
#[test]
fn a_damaged_index_is_rebuilt_not_believed() {
    for damage in ["garbage", "grown", "flipped"] {
        let sb = Sandbox::new();
        sb.shell_definition("t", "exit 0", "");
        for _ in 0..3 {
            assert_code(&sb.run(["run", "t"]), 0);
        }
        // A reader builds the index.
        assert!(stdout(&sb.run(["runs", "t"])).contains(" ok "));
        let idx = sb.data.join("state/index/t.idx");
        match damage {
            "garbage" => std::fs::write(&idx, [0x5au8; 64]).unwrap(),
            "grown" => std::fs::OpenOptions::new()
                .write(true)
                .open(&idx)
                .unwrap()
                .set_len(2 * 1024 * 1024 * 1024)
                .unwrap(),
            _ => {
                // One entry's line hash changed: it points at a line it did not index.
                let mut b = std::fs::read(&idx).unwrap();
                b[16 + 4] ^= 0xff;
                std::fs::write(&idx, b).unwrap();
            }
        }
        let o = sb.run(["runs", "t", "--json"]);
        assert_code(&o, 0);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let statuses: Vec<&str> = doc["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["status"].as_str().unwrap())
            .collect();
        if damage == "flipped" {
            // The damaged entry is passed over and said; the next reader has the whole index.
            assert!(
                stderr(&o).contains("pointed at lines it did not index"),
                "{damage}: {}",
                stderr(&o)
            );
            let o = sb.run(["runs", "t", "--json"]);
            let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(doc["runs"].as_array().unwrap().len(), 3, "{damage}: {doc}");
        } else {
            assert_eq!(statuses, ["ok", "ok", "ok"], "{damage}: {doc}");
        }
        if damage == "garbage" {
            assert!(
                stderr(&o).contains("does not match the log; rebuilding it"),
                "{damage}: {}",
                stderr(&o)
            );
        }
        if damage == "grown" {
            // What lies past the cursor's count is never read, and the next write cuts it off.
            sb.run(["run", "t"]);
            sb.run(["runs", "t"]);
            assert!(
                std::fs::metadata(&idx).unwrap().len() < 1024,
                "never cut back"
            );
        }
        let runs = if damage == "grown" { 4 } else { 3 };
        let v = sb.run(["health", "t", "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
        let figures = &doc["automations"][0]["figures"];
        assert_eq!(figures["runs"], runs, "{damage}: {doc}");
        assert_eq!(figures["ok"], runs, "{damage}: {doc}");
    }
}

/// with `state/`, `locks/` or `state/index/` replaced by a link to an outside folder,
/// every command exited 0 and wrote there. Now a link to a folder in the data root (or in
/// `state/`) is refused before anything is read or written: exit 3, naming the link.
#[test]
fn a_folder_of_the_data_root_that_is_a_link_is_refused() {
    for folder in ["state", "locks", "state/index", "env", "scratch"] {
        let sb = Sandbox::new();
        sb.shell_definition("t", "exit 0", "");
        assert_code(&sb.run(["run", "t"]), 0);
        assert_code(&sb.run(["list"]), 0);
        let inside = sb.data.join(folder);
        let outside = sb.path("outside");
        std::fs::create_dir_all(&outside).unwrap();
        if inside.exists() {
            std::fs::remove_dir_all(&inside).unwrap();
        }
        std::os::unix::fs::symlink(&outside, &inside).unwrap();
        for args in [
            &["run", "t"][..],
            &["list"],
            &["runs", "t"],
            &["health"],
            &["pause", "t", "--reason", "x"],
        ] {
            let o = sb.run(args);
            assert_code(&o, 3);
            let err = stderr(&o);
            assert!(
                err.contains(&format!(
                    "{} is a symbolic link to a folder",
                    inside.display()
                )),
                "{folder} {args:?}: {err}"
            );
        }
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "{folder}: something was written through the link"
        );
    }
}

/// a relative HOME (without XDG_STATE_HOME) gave a relative data root: `doctor` said ok,
/// then a run could not record its result. Refused up front, exit 3, naming the variable.
#[test]
fn a_relative_home_is_refused_up_front() {
    let sb = Sandbox::new();
    sb.shell_definition("t", "exit 0", "");
    for args in [&["doctor"][..], &["run", "t"], &["list"]] {
        let o = sb
            .cmd(args)
            .env("HOME", "relative/home")
            .env_remove("AUTOMATIONS_DATA_ROOT")
            .output()
            .unwrap();
        assert_code(&o, 3);
        assert!(
            stderr(&o).contains("HOME (relative/home) must be an absolute path"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(sb.log_lines().is_empty());
}

/// a descriptor the runner's starter left open (`exec 7>/tmp/f; automations run x`)
/// reached the command, which could write to it. The command gets exactly stdin, stdout and
/// stderr.
#[test]
fn descriptors_the_runner_inherits_never_reach_the_command() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let sb = Sandbox::new();
    sb.shell_definition(
        "fds",
        "if { echo leaked >&7; } 2>/dev/null; then echo fd7-open; else echo fd7-closed; fi; exec ls /proc/self/fd",
        "",
    );
    let file = std::fs::File::create(sb.path("seven")).unwrap();
    let raw = file.as_raw_fd();
    let mut cmd = sb.cmd(["run", "fds"]);
    // SAFETY: dup2 is async-signal-safe; the new descriptor is not close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if nix::libc::dup2(raw, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert_code(&o, 0);
    let f = sb.last_finished();
    let out = f["stdout_tail"].as_str().unwrap();
    assert!(out.starts_with("fd7-closed"), "{out}");
    // What the command holds: 0, 1, 2 and the one `ls` reads its own fd folder with. Listed by
    // the command itself (the shell `exec`s ls): a shell listing `/proc/$$/fd` into a pipe saw its
    // own pipe ends, 3 and 4, whenever ls read before the shell closed them (981 of 2,000 shells
    // on a busy machine here) — the likely cause of this test's CI failure on 2026-12-01, whose
    // message the report cut.
    let fds: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
    assert_eq!(std::fs::read_to_string(sb.path("seven")).unwrap(), "");
}

/// a forged log line with ESC/OSC bytes in its run id or error class was printed raw by
/// `runs` and `show`, so the terminal obeyed it. Every field from the log is printed escaped, and
/// a newline in one cannot make a line of its own.
#[test]
fn terminal_escapes_in_log_fields_are_shown_not_obeyed() {
    use automations::runlog::{Event, RunLog};
    let sb = Sandbox::new();
    sb.shell_definition("t", "exit 3", "");
    sb.run(["run", "t"]);
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let run = format!("r{evil}\nt  forged line");
    let strip = |mut v: serde_json::Value| {
        for k in ["v", "event", "name", "at", "prev"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v["run"] = serde_json::json!(run);
        v
    };
    let mut finished = strip(sb.last_finished());
    finished["error"]["class"] = serde_json::json!(format!("exit_status{evil}"));
    finished["headline"] = serde_json::json!(format!("n{evil}"));
    finished["facts"] = serde_json::json!({ format!("n{evil}"): 1 });
    let started = strip(sb.events("started").pop().unwrap());
    let log = RunLog::new(&sb.data);
    let now = chrono::Utc::now();
    log.append(
        "t",
        Event::Started(serde_json::from_value(started).unwrap()),
        now,
    )
    .unwrap();
    log.append(
        "t",
        Event::Finished(serde_json::from_value(finished).unwrap()),
        now,
    )
    .unwrap();
    for args in [
        &["runs"][..],
        &["runs", "t"],
        &["show", "r"],
        &["list"],
        &["health"],
    ] {
        let o = sb.run(args);
        let out = stdout(&o);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{args:?}: {out:?}"
        );
        assert!(
            !out.lines().any(|l| l.starts_with("t  forged")),
            "{args:?}: {out}"
        );
    }
    let shown = stdout(&sb.run(["show", "r"]));
    assert!(shown.contains("\\u{1b}]0;pwned\\u{7}"), "{shown}");
    sb.assert_log_verifies();
}

/// a long unterminated line made readers quadratic (a 50 MB one: 22 s for `runs`), and
/// every reader held it whole. A line is read once, at most 1 MiB of it is held, and a longer one
/// is reported as unreadable (still chained), never parsed: `runs`, `runs NAME`, `show`, the run
/// that seals it and `log verify` each keep their memory whatever its length.
#[test]
#[ignore = "a real component: GNU time (peak memory)"]
fn a_huge_unterminated_line_costs_readers_no_memory_and_is_reported() {
    let sb = Sandbox::new();
    sb.shell_definition("t", "exit 0", "");
    assert_code(&sb.run(["run", "t"]), 0);
    let id = sb.last_finished()["run"].as_str().unwrap().to_owned();
    {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(sb.data.join("runs.jsonl"))
            .unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..40 {
            log.write_all(&chunk).unwrap();
        }
    }
    for args in [
        &["runs"][..],
        &["runs", "t"],
        &["show", &id],
        &["run", "t"],
        &["runs"],
    ] {
        let Some((o, kib)) = peak_rss(sb.cmd(args)) else {
            skip(
                "the peak RSS part of a_huge_unterminated_line",
                "GNU time is missing",
            );
            break;
        };
        assert!(o.status.success(), "{args:?}: {:?}", o.status);
        assert!(
            kib < 30 * 1024,
            "{args:?}: peak RSS {kib} KiB with a 40 MiB line"
        );
    }
    // The sealed line is one unreadable line in the chain; both runs are there.
    let runs = stdout(&sb.run(["runs", "t"]));
    assert_eq!(runs.matches(" ok ").count(), 2, "{runs}");
    let o = sb.run(["log", "verify"]);
    assert!(
        stdout(&o).contains("line 3 (longer than 1 MiB)"),
        "{}",
        stdout(&o)
    );
}

/// Regression (the keeper syncs `started` while the runner prepares the command): a start that
/// cannot be made durable never lets its command run; the run is recorded as failed, class
/// `log_sync`, naming the log and the error. (The disk error is a test switch: no test can make a
/// real disk fail an `fdatasync`.)
#[test]
fn a_start_that_cannot_be_synced_never_runs_its_command() {
    let mut sb = Sandbox::new();
    let ran = sb.path("ran");
    sb.shell_definition("t", &format!("touch '{}'", ran.display()), "");
    sb.env("AUTOMATIONS_TEST_STARTED_SYNC", "fail");
    let o = sb.run(["run", "t"]);
    assert_code(&o, 1);
    assert!(
        !ran.exists(),
        "the command ran although its start was not on disk"
    );
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "failed", "{f}");
    assert_eq!(f["error"]["class"], "log_sync", "{f}");
    let detail = f["error"]["detail"].as_str().unwrap();
    assert!(
        // The error by its number: its words are the C library's (glibc "Input/output error",
        // musl "I/O error"), whichever the binary was built with.
        detail.contains("(os error 5)") && detail.contains("runs.jsonl"),
        "{detail}"
    );
    assert!(stdout(&o).contains("log_sync"), "{}", stdout(&o));
    assert_log_whole(&sb);
    // The next firing, whose start reaches the disk, runs.
    let o = sb
        .cmd(["run", "t"])
        .env_remove("AUTOMATIONS_TEST_STARTED_SYNC")
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert!(ran.exists());
}

/// The command starts only once its `started` is on disk: with the keeper's sync made 500 ms
/// slower, the command's first act comes at least that long after `started` was stamped (a lower
/// bound only: a slow machine makes the gap longer, never shorter).
#[test]
fn the_command_starts_only_once_its_start_is_on_disk() {
    let mut sb = Sandbox::new();
    let began = sb.path("began");
    sb.shell_definition("t", &format!("date +%s%N > '{}'", began.display()), "");
    sb.env("AUTOMATIONS_TEST_STARTED_SYNC", "slow");
    assert_code(&sb.run(["run", "t"]), 0);
    let began_ns: i128 = std::fs::read_to_string(&began)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let started = sb.events("started").pop().unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(started["at"].as_str().unwrap()).unwrap();
    let gap_ms = began_ns / 1_000_000 - i128::from(at.timestamp_millis());
    assert!(gap_ms >= 499, "the command began {gap_ms} ms after started");
    assert_eq!(sb.last_finished()["outcome"], "ok");
}

/// Regression: killing a firing's keeper and runner together (`kill -9` of both, as an OOM killer
/// or `killall -9` does) left the whole command tree running, and the next run started beside it.
/// The lock file names the run whose tree is alive under it until that tree is gone; the next
/// firing finds it, ends what is left, says so and records it in its `started`.
#[test]
fn a_firing_whose_keeper_and_runner_were_killed_together_is_ended_by_the_next() {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    let p = pids.display();
    sb.definition(
        "t",
        &format!(
            "name = \"t\"\ncommand = [\"sh\", \"-c\", \"sleep 300 & echo $! >> {p}; setsid sleep 300 & echo $! >> {p}; wait\"]\n"
        ),
    );
    let mut firing = sb
        .cmd(["run", "t"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the command's pids", || read_pids(&pids).len() >= 2);
    let first = read_pids(&pids);
    let runner = runner_of(&firing);
    // The keeper first, so it cannot end the tree when its runner dies.
    for pid in [firing.id() as i32, runner] {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    let _ = firing.wait();
    wait_for("the runner's end", || !alive(runner));
    assert_eq!(
        survivors(&first, Duration::from_millis(300)),
        first,
        "both were killed: nothing ended the tree"
    );
    std::fs::remove_file(&pids).unwrap();
    sb.shell_definition("t", "echo second", "");
    let o = sb.run(["run", "t"]);
    assert_code(&o, 0);
    assert_eq!(survivors(&first, Duration::from_secs(1)), Vec::<i32>::new());
    let started = sb.events("started");
    assert_eq!(started.len(), 2);
    assert_eq!(
        started[1]["ended"]["run"], started[0]["run"],
        "{}",
        started[1]
    );
    // The two sleeps, and their shell when its parent-death signal had not yet ended it.
    let n = started[1]["ended"]["processes"].as_u64().unwrap();
    assert!((2..=3).contains(&n), "{}", started[1]);
    assert!(
        stderr(&o).contains(&format!("ended {n} process(es) the killed run")),
        "{}",
        stderr(&o)
    );
    assert_eq!(sb.last_finished()["outcome"], "ok");
    // A clean end leaves nothing for the next one to end.
    let o = sb.run(["run", "t"]);
    assert!(!stderr(&o).contains("ended"), "{}", stderr(&o));
    assert!(sb.events("started")[2].get("ended").is_none());
    sb.assert_log_verifies();
}

/// A process whose pid is `pid`, made by asking the kernel for that number next (root only:
/// `ns_last_pid`); `None` when it cannot (not root, or another process took the number first).
fn process_with_pid(pid: i32) -> Option<std::process::Child> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
        let child = Command::new("sleep").arg("300").spawn().ok()?;
        if child.id() as i32 == pid {
            return Some(child);
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

/// Regression: `stop-all` and `overlap = "replace"` sent SIGTERM to whatever process had the pid
/// the lock table named: with the firing's keeper SIGKILLed and its pid reused, a bystander got
/// SIGTERM, and `stop-all` said "still running after SIGTERM" of a run it could no longer stop. A
/// stop now reaches only the keeper or runner the lock names, each known by its start time, and
/// a run whose keeper died is stopped through its runner.
#[test]
fn a_stop_reaches_only_its_run_and_a_run_whose_keeper_died() {
    let sb = Sandbox::new();
    sb.definition(
        "long",
        "name = \"long\"\ncommand = [\"sleep\", \"300\"]\ntimeout_seconds = 600\n",
    );
    let mut firing = sb
        .cmd(["run", "long"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let keeper = firing.id() as i32;
    let runner = runner_of(&firing);
    wait_for("the command started", || !sb.events("started").is_empty());
    firing.kill().unwrap();
    firing.wait().unwrap();
    assert!(alive(runner), "the runner goes on without its keeper");
    // Its pid taken by a bystander, where this machine lets a test do that.
    let mut bystander = if nix::unistd::getuid().is_root() {
        process_with_pid(keeper)
    } else {
        None
    };
    let o = sb.run(["stop-all", "--reason", "maintenance"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("stopped 1 running run(s)"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "stopped", "{f:#}");
    if let Some(b) = &mut bystander {
        assert_eq!(b.try_wait().unwrap(), None, "the bystander was signalled");
        let _ = b.kill();
        let _ = b.wait();
    } else {
        eprintln!("(no bystander could take the keeper's pid here: only the stop was checked)");
    }
    assert_code(&sb.run(["resume-all"]), 0);
    // `overlap = "replace"` stops a run whose keeper died the same way, through its runner.
    sb.definition(
        "swap",
        "name = \"swap\"\ncommand = [\"sleep\", \"300\"]\ntimeout_seconds = 600\noverlap = \"replace\"\n",
    );
    let mut first = sb
        .cmd(["run", "swap"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runner = runner_of(&first);
    wait_for("the first run started", || {
        sb.events("started").iter().any(|e| e["name"] == "swap")
    });
    first.kill().unwrap();
    first.wait().unwrap();
    sb.definition(
        "swap",
        "name = \"swap\"\ncommand = [\"true\"]\noverlap = \"replace\"\n",
    );
    let o = sb.run(["run", "swap"]);
    assert_code(&o, 0);
    assert!(survivors(&[runner], Duration::from_secs(10)).is_empty());
    let swaps: Vec<_> = sb
        .events("finished")
        .into_iter()
        .filter(|e| e["name"] == "swap")
        .collect();
    assert_eq!(swaps.len(), 2, "{swaps:?}");
    assert_eq!(swaps[0]["error"]["class"], "replaced", "{:#}", swaps[0]);
    assert_eq!(swaps[1]["outcome"], "ok", "{:#}", swaps[1]);
}

/// Regression: the keeper took its own process name after the lock named it, so the identity the
/// lock held never matched it again and every stop went around it to the runner; and a lock
/// released kept naming the last keeper and runner. While a firing runs, the lock names its live
/// keeper (the process holding the lock) and its runner; once it is over, neither.
#[test]
fn the_lock_names_the_live_keeper_and_runner_and_no_one_after() {
    use automations::process::ProcessId;
    let sb = Sandbox::new();
    let up = sb.path("up");
    // The command runs once its start is on disk, which is after the keeper has named itself.
    sb.shell_definition(
        "long",
        &format!("echo up > '{}'; exec sleep 300", up.display()),
        "timeout_seconds = 600\n",
    );
    let mut firing = sb
        .cmd(["run", "long"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = sb.data.join("locks/long.lock");
    let named = |line: usize| {
        let text = std::fs::read_to_string(&lock).unwrap_or_default();
        text.lines().nth(line).and_then(ProcessId::parse)
    };
    wait_for("the command started", || up.exists());
    let keeper = named(2).expect("the lock names the keeper");
    assert_eq!(keeper.pid, firing.id() as i32);
    assert!(
        keeper.alive(),
        "the keeper's identity does not match it: {keeper:?}"
    );
    let runner = named(3).unwrap();
    assert_eq!(runner.pid, runner_of(&firing));
    assert!(runner.alive(), "{runner:?}");
    assert_code(&sb.run(["stop-all", "--reason", "done"]), 0);
    firing.wait().unwrap();
    assert_eq!(sb.last_finished()["outcome"], "stopped");
    assert_eq!(
        (named(2), named(3)),
        (None, None),
        "a released lock names no one"
    );
    assert_code(&sb.run(["resume-all"]), 0);
}

/// Regression: with keeper and runner SIGKILLed together while the command had a `setsid env -i`
/// child, the next firing ended what carried the run's marker and left that child (its
/// environment cleared, its session its own) running beside the new run. It is found through its
/// parent now, as the runner finds its own tree.
#[test]
fn a_setsid_child_with_a_cleared_environment_is_ended_by_the_next_firing() {
    let sb = Sandbox::new();
    let pids = sb.path("pids");
    let p = pids.display();
    sb.definition(
        "t",
        &format!(
            "name = \"t\"\ncommand = [\"sh\", \"-c\", \"setsid env -i sleep 997 & echo $! >> {p}; sleep 300 & echo $! >> {p}; wait\"]\n"
        ),
    );
    let mut firing = sb
        .cmd(["run", "t"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the command's pids", || read_pids(&pids).len() >= 2);
    let first = read_pids(&pids);
    wait_for("the cleared environment", || {
        std::fs::read(format!("/proc/{}/environ", first[0])).is_ok_and(|e| e.is_empty())
    });
    let runner = runner_of(&firing);
    for pid in [firing.id() as i32, runner] {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    let _ = firing.wait();
    wait_for("the runner's end", || !alive(runner));
    sb.shell_definition("t", "echo second", "");
    let o = sb.run(["run", "t"]);
    assert_code(&o, 0);
    assert_eq!(
        survivors(&first, Duration::from_secs(1)),
        Vec::<i32>::new(),
        "{}",
        stderr(&o)
    );
}

/// Regression: on a nearly full disk a scheduled firing was recorded `skipped (script_changed)`:
/// the copy of its script it used to run could not be written. Scripts run where they are now, so
/// the firing runs while there is room to record it.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn a_full_disk_never_makes_a_script_look_changed() {
    let sb = Sandbox::new();
    let Some(fs) = Tmpfs::mount(&sb.data, "1m") else {
        return skip(
            "a_full_disk_never_makes_a_script_look_changed",
            "cannot mount a tmpfs (needs root)",
        );
    };
    // Larger than the room left below: a copy of it in the data root cannot be made.
    let padding = "# padding\n".repeat(30_000);
    sb.script("job.sh", &format!("#!/bin/sh\necho did the job\n{padding}"));
    sb.definition(
        "q",
        "name = \"q\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.install_record("q", chrono::Utc::now() - chrono::Duration::days(1));
    assert_code(&sb.run(["run", "q", "--trigger", "schedule"]), 0);
    fs.fill();
    // Room for the run's record (more than the 64 KiB a firing wants free), not for the copy.
    let filler = std::fs::OpenOptions::new()
        .write(true)
        .open(sb.data.join("filler"))
        .unwrap();
    let len = filler.metadata().unwrap().len();
    filler.set_len(len - 128 * 1024).unwrap();
    assert_code(&sb.run(["run", "q", "--trigger", "schedule"]), 0);
    assert!(
        sb.events("skipped").is_empty(),
        "{:?}",
        sb.events("skipped")
    );
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "ok", "{f}");
    assert_log_whole(&sb);
}

/// Regression: a 2 GiB sparse file as a pinned script was copied (and hashed) at every firing —
/// refused as "disk full" with 300 MB free; nothing capped what a firing hashed. A pinned script
/// larger than 64 MiB is refused before a byte of it is read, saying its size and the way out.
#[test]
fn a_huge_pinned_script_is_refused_by_its_size_unread() {
    let sb = Sandbox::new();
    let script = sb.script("job.sh", "#!/bin/sh\ntrue\n");
    sb.definition(
        "big",
        "name = \"big\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.install_record("big", chrono::Utc::now() - chrono::Duration::days(1));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&script)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let o = sb.run(["run", "big", "--trigger", "schedule"]);
    assert_code(&o, 0);
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["reason"], "script_changed");
    assert!(
        stderr(&o).contains("it is 2048 MiB, over the 64 MiB a pinned script may be"),
        "{}",
        stderr(&o)
    );
}
