//! What runs unattended is what was approved: a scheduled firing hashes its script where it is,
//! under its lock, after its jitter wait and before every attempt, and checks the pins, the pause
//! and the kill switch there; a script swapped between that look and its start does not run, and
//! one swapped while it runs makes the run `script_changed`. Scripts run where they are: their
//! siblings, `$0` and relative imports work as in a terminal.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use crate::harness::*;

/// The script as installed: it leaves `approved` and its run id in the marker and ends with
/// `exit`.
fn approved_script(marker: &Path, exit: u32) -> String {
    format!(
        "#!/bin/sh\necho approved $AUTOMATION_RUN_ID >> '{}'\nexit {exit}\n",
        marker.display()
    )
}

/// What an attacker puts in its place.
fn unapproved_script(marker: &Path) -> String {
    format!(
        "#!/bin/sh\necho UNAPPROVED $AUTOMATION_RUN_ID >> '{}'\nexit 0\n",
        marker.display()
    )
}

/// Swaps the script for `body` the way an editor or an attacker would: a new file renamed over it.
fn swap(path: &Path, body: &str) {
    let tmp = path.with_extension("swap");
    write_executable(&tmp, body);
    std::fs::rename(&tmp, path).unwrap();
}

/// True while `pid` sleeps in a timed wait (a jitter or retry wait: `nanosleep`, or `poll` on the
/// runner's signal pipe) rather than doing anything else.
fn in_timed_wait(pid: i32) -> bool {
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    wchan.contains("nanosleep") || wchan.contains("poll_schedule_timeout")
}

/// A daily definition `name` at a quiet time of day (its slot hours ago, not yet done) running
/// `scripts/job.sh`, with `more` lines in its `[schedule]`.
fn daily(sb: &Sandbox, name: &str, more: &str) {
    let at = (chrono::Local::now() - chrono::Duration::hours(3)).format("%H:%M");
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\ndaily_at = \"{at}\"\n{more}"
        ),
    );
}

/// A name whose jitter delay for the current slot of `daily(…, "jitter_seconds = 9")` is between
/// 4 and 9 s: a wait long enough to act in (the delay is a hash of the name and the slot).
fn name_with_a_long_jitter(sb: &Sandbox) -> String {
    use automations::schedule::{jitter_delay, latest_slot};
    let checks = automations::definition::Checks {
        home: "/nonexistent".into(),
        data_root: "/nonexistent".into(),
        units_dir: "/nonexistent-units".into(),
    };
    (0..200)
        .map(|i| format!("j{i}"))
        .find(|name| {
            daily(sb, name, "jitter_seconds = 9\n");
            let text = std::fs::read(sb.root.join(format!("automations/{name}.toml"))).unwrap();
            let def =
                automations::definition::parse(&format!("{name}.toml"), &text, &checks).unwrap();
            let slot = latest_slot(def.schedule.as_ref().unwrap(), &chrono::Local::now());
            let ms = jitter_delay(name, slot, 9).num_milliseconds();
            let keep = (4000..=9000).contains(&ms);
            if !keep {
                std::fs::remove_file(sb.root.join(format!("automations/{name}.toml"))).unwrap();
            }
            keep
        })
        .expect("one of 200 names has a delay in 4–9 s")
}

fn spawn_quiet(sb: &Sandbox, args: &[&str]) -> Child {
    sb.cmd(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn marker_text(marker: &Path) -> String {
    std::fs::read_to_string(marker).unwrap_or_default()
}

/// Regression: the pin was checked before the jitter wait (up to an hour), and the command was
/// then run from the repository: a script overwritten during the wait ran unapproved. Now the
/// firing checks again under its lock, against the copy it runs.
#[test]
fn a_script_overwritten_during_the_jitter_wait_never_runs() {
    let sb = Sandbox::new();
    let marker = sb.path("marker");
    let script = sb.script("job.sh", &approved_script(&marker, 0));
    let name = name_with_a_long_jitter(&sb);
    sb.install_record(&name, chrono::Utc::now() - chrono::Duration::days(1));
    let mut firing = spawn_quiet(&sb, &["run", &name, "--trigger", "schedule"]);
    let pid = firing.id() as i32;
    wait_for("the firing's jitter wait", || in_timed_wait(pid));
    assert!(
        sb.log_lines().is_empty(),
        "nothing recorded before the wait"
    );
    swap(&script, &unapproved_script(&marker));
    assert!(firing.wait().unwrap().success());
    assert!(
        !marker_text(&marker).contains("UNAPPROVED"),
        "{}",
        marker_text(&marker)
    );
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 1, "{:?}", sb.log_lines());
    assert_eq!(skipped[0]["reason"], "script_changed");
    assert!(sb.events("started").is_empty());
}

/// A definition `name` that fails and retries `retries` times, a second apart (doubling).
fn retrying(sb: &Sandbox, name: &str, retries: u32) {
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\nevery_minutes = 5\nretries = {retries}\nretry_delay_seconds = 1\n"
        ),
    );
}

/// Waits until the firing has recorded `n` finished attempts and its runner waits for the next.
fn wait_for_retry_wait(sb: &Sandbox, firing: &Child, n: usize) {
    let runner = runner_of(firing);
    wait_for("an attempt's end and the wait after it", || {
        sb.events("finished").len() >= n && in_timed_wait(runner)
    });
}

/// Regression: a script overwritten during the wait between two attempts ran at the next attempt.
/// Now every attempt copies and checks the script again; a changed one ends the firing, recorded.
#[test]
fn a_script_overwritten_during_a_retry_wait_never_runs() {
    let sb = Sandbox::new();
    let marker = sb.path("marker");
    let script = sb.script("job.sh", &approved_script(&marker, 1));
    retrying(&sb, "r", 4);
    sb.install_record("r", chrono::Utc::now() - chrono::Duration::days(1));
    let mut firing = spawn_quiet(&sb, &["run", "r", "--trigger", "schedule"]);
    wait_for_retry_wait(&sb, &firing, 1);
    swap(&script, &unapproved_script(&marker));
    let _ = firing.wait().unwrap();
    assert!(
        !marker_text(&marker).contains("UNAPPROVED"),
        "{}",
        marker_text(&marker)
    );
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 1, "{:?}", sb.log_lines());
    assert_eq!(skipped[0]["reason"], "script_changed");
    assert_eq!(sb.events("finished").len(), 1, "no attempt after the swap");
    sb.assert_log_verifies();
}

/// Regression: `pause NAME` during a retry wait did not stop attempts 2 and 3 (only `stop-all`
/// did). Now the pause ends the firing at its next attempt, recorded.
#[test]
fn a_pause_during_a_retry_wait_ends_the_firing() {
    let sb = Sandbox::new();
    let marker = sb.path("marker");
    sb.script("job.sh", &approved_script(&marker, 1));
    retrying(&sb, "r", 3);
    sb.install_record("r", chrono::Utc::now() - chrono::Duration::days(1));
    let mut firing = spawn_quiet(&sb, &["run", "r", "--trigger", "schedule"]);
    wait_for_retry_wait(&sb, &firing, 1);
    assert_code(&sb.run(["pause", "r", "--reason", "planned work"]), 0);
    let _ = firing.wait().unwrap();
    assert_eq!(marker_text(&marker).lines().count(), 1, "one attempt ran");
    assert_eq!(sb.events("finished").len(), 1);
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 1, "{:?}", sb.log_lines());
    assert_eq!(skipped[0]["reason"], "paused");
}

/// Regression: a watcher renaming a prepared file over the script right after the pin's read won 5
/// of 5 scheduled firings. Here the script is swapped back and forth without pause during 50
/// firings. A script runs where it is, so an interpreter opening the path may meet the swapped
/// file: each firing that ran the unapproved bytes is caught and recorded (`failed`,
/// `script_changed`); none of them reads as a success.
#[test]
fn a_script_swapped_back_and_forth_never_runs_unapproved_unseen() {
    let sb = Sandbox::new();
    let marker = sb.path("marker");
    let script = sb.script("job.sh", &approved_script(&marker, 0));
    sb.definition(
        "t",
        "name = \"t\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.install_record("t", chrono::Utc::now() - chrono::Duration::days(1));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (good, bad) = (approved_script(&marker, 0), unapproved_script(&marker));
        let dir: PathBuf = script.parent().unwrap().to_path_buf();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = if i.is_multiple_of(2) { &bad } else { &good };
                let tmp = dir.join(format!(".swap{i}"));
                std::fs::write(&tmp, body).unwrap();
                std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                    .unwrap();
                std::fs::rename(&tmp, dir.join("job.sh")).unwrap();
                i += 1;
            }
            i
        })
    };
    for _ in 0..50 {
        let o = sb.run(["run", "t", "--trigger", "schedule"]);
        assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 50, "{swaps} swaps");
    let ran = sb.events("started").len();
    let skipped = sb.events("skipped").len();
    assert_eq!(ran + skipped, 50, "every firing ran or skipped");
    let finished = sb.events("finished");
    let text = marker_text(&marker);
    for line in text.lines().filter(|l| l.starts_with("UNAPPROVED")) {
        let run = line.split_whitespace().nth(1).expect("a run id");
        let f = finished
            .iter()
            .find(|f| f["run"] == run)
            .unwrap_or_else(|| panic!("no finished for {run}"));
        assert_eq!(f["outcome"], "failed", "{f}");
        assert_eq!(f["error"]["class"], "script_changed", "{f}");
    }
    for f in &finished {
        // A file being renamed in may be a moment without its execute bit: never a swap's run.
        assert!(
            f["outcome"] == "ok"
                || f["error"]["class"] == "spawn_failed"
                || f["error"]["class"] == "script_changed",
            "{f}"
        );
    }
}

/// Regression: SIGTERM during the jitter wait (a service stop, a shutdown) ended the runner with
/// nothing in the log. Now the firing is recorded as skipped, `stopped`, saying why.
#[test]
fn a_stop_during_the_jitter_wait_is_recorded() {
    let sb = Sandbox::new();
    let marker = sb.path("marker");
    sb.script("job.sh", &approved_script(&marker, 0));
    let name = name_with_a_long_jitter(&sb);
    sb.install_record(&name, chrono::Utc::now() - chrono::Duration::days(1));
    let firing = sb
        .cmd(["run", &name, "--trigger", "schedule"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = firing.id() as i32;
    wait_for("the firing's jitter wait", || in_timed_wait(pid));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let o = firing.wait_with_output().unwrap();
    assert!(marker_text(&marker).is_empty(), "nothing ran");
    let skipped = sb.events("skipped");
    assert_eq!(skipped.len(), 1, "{o:?}");
    assert_eq!(skipped[0]["reason"], "stopped");
    assert!(sb.events("started").is_empty());
}

/// Regression: a FIFO at an installed automation's script path made `list`, `health`, `check`,
/// `install --dry-run` and `run` (manual and scheduled) hang in `open()`, the scheduled firing before
/// its lock with nothing recorded, and the dashboard's answer threads stayed blocked even after
/// the FIFO was removed. Now each answers at once and says what it found; the same for a link
/// to a FIFO.
#[test]
fn a_fifo_at_a_pinned_script_path_blocks_nothing_and_is_named() {
    for linked in [false, true] {
        let mut sb = Sandbox::new();
        sb.use_stable_bin();
        let fake = sb.path("fake");
        crate::systemd::fake_systemctl(&fake);
        sb.env("PATH", &format!("{}:/usr/bin:/bin", fake.display()));
        let marker = sb.path("marker");
        let script = sb.script("job.sh", &approved_script(&marker, 0));
        sb.definition(
            "job",
            "name = \"job\"\ncommand = [\"scripts/job.sh\"]\n[schedule]\nevery_minutes = 5\n",
        );
        let r = run_on_pty(sb.cmd(["install", "job"]), "Type y to confirm", "y");
        assert_eq!(r.code, Some(0), "{}", r.output);
        std::fs::remove_file(&script).unwrap();
        if linked {
            let fifo = sb.path("fifo");
            mkfifo(&fifo);
            std::os::unix::fs::symlink(&fifo, &script).unwrap();
        } else {
            mkfifo(&script);
        }
        let dash = crate::dashboard::Dashboard::start(&sb);
        for (args, says) in [
            (&["list"][..], false),
            (&["health"], true),
            (&["check"], true),
            (&["install", "job", "--dry-run"], true),
            (&["run", "job"], true),
            (&["run", "job", "--trigger", "schedule"], true),
        ] {
            let o = run_within(sb.cmd(args), 20, &format!("{args:?} with a FIFO script"));
            let text = format!("{}{}", stdout(&o), stderr(&o));
            assert!(!says || text.contains("FIFO"), "{args:?}: {text}");
        }
        let (status, body) = crate::dashboard::page_of(&dash, "/api/automations");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("FIFO"), "{body}");
        assert!(marker_text(&marker).is_empty(), "nothing ran");
        let skipped = sb.events("skipped");
        assert_eq!(skipped.last().unwrap()["reason"], "script_changed");
        let f = sb.last_finished();
        assert_eq!(f["error"]["class"], "spawn_failed", "{f}");
    }
}

/// A pinned script `name` that prints `$0` (or `__file__`) after using a sibling, installed and
/// fired as its unit would: it runs, and says it ran where it is.
fn pinned_sibling_user(sb: &Sandbox, name: &str, script: &str) -> serde_json::Value {
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ncommand = [\"scripts/{script}\"]\n[schedule]\nevery_minutes = 5\n"
        ),
    );
    sb.install_record(name, chrono::Utc::now() - chrono::Duration::days(1));
    let o = sb.run(["run", name, "--trigger", "schedule"]);
    assert_code(&o, 0);
    let f = sb.last_finished();
    assert_eq!(f["outcome"], "ok", "{f:#}");
    let out = f["stdout_tail"].as_str().unwrap();
    let path = sb.root.join("scripts").join(script);
    assert!(out.contains(&path.display().to_string()), "{out}");
    f
}

/// Regression: a pinned script ran from a copy in the scratch folder, so a shell script's
/// `. "$(dirname "$0")/lib.sh"` found nothing (as did Python's sibling imports, Node's
/// `require('./x')`, Ruby's `require_relative`). Scripts now run where they are, and a scheduled
/// firing still runs only what was installed.
#[test]
fn a_pinned_script_sources_its_siblings_as_in_a_terminal() {
    let sb = Sandbox::new();
    sb.script("lib.sh", "greeting=hello\n");
    sb.script(
        "greet.sh",
        "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib.sh\"\necho \"$greeting from $0\"\n",
    );
    let f = pinned_sibling_user(&sb, "greet", "greet.sh");
    assert!(f["stdout_tail"].as_str().unwrap().starts_with("hello from"));
    // Still pinned: an edited script is refused.
    std::fs::write(sb.root.join("scripts/greet.sh"), "#!/bin/sh\necho edited\n").unwrap();
    let o = sb.run(["run", "greet", "--trigger", "schedule"]);
    assert_code(&o, 0);
    assert_eq!(
        sb.events("skipped").pop().unwrap()["reason"],
        "script_changed"
    );
}

/// The same for Python: `import helpers` beside the script (`sys.path[0]` was the scratch
/// folder, and a module of the same name installed elsewhere was imported instead).
#[test]
#[ignore = "a real component: python3"]
fn a_pinned_python_script_imports_its_siblings_as_in_a_terminal() {
    let sb = Sandbox::new();
    sb.script("helpers.py", "def answer():\n    return 42\n");
    sb.script(
        "report.py",
        "#!/usr/bin/env python3\nimport helpers\nprint('report', helpers.answer(), __file__)\n",
    );
    let f = pinned_sibling_user(&sb, "report", "report.py");
    assert!(f["stdout_tail"].as_str().unwrap().starts_with("report 42 "));
}
