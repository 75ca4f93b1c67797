use chrono::{TimeZone, Utc};

use super::rules::age_of;
use super::*;
use crate::clock::Clock;
use crate::history::{RunView, Status};
use crate::runlog::Trigger;

fn clock(boot: &str, awake_ms: u64) -> Clock {
    Clock {
        boot: boot.into(),
        awake_ms,
        total_ms: awake_ms,
    }
}

/// An ok run `id` with both events on `boot` at `awake_ms`.
fn ok_run(id: &str, boot: &str, awake_ms: u64) -> RunView {
    let started = serde_json::json!({
        "run": id, "trigger": "schedule", "pid": 1, "definition": null,
        "clock": clock(boot, awake_ms),
    });
    let finished = serde_json::json!({
        "run": id, "outcome": "ok", "exit_code": 0, "signal": null, "duration_ms": 1,
        "error": null, "stdout_tail": "", "stderr_tail": "",
        "dropped": {"stdout": 0, "stderr": 0}, "facts": {}, "headline": null, "http": null,
        "leftover_processes": 0, "clock": clock(boot, awake_ms),
    });
    RunView {
        run: Some(id.into()),
        name: "job".into(),
        trigger: Trigger::Schedule,
        at: "2026-11-30T10:00:00.000Z".into(),
        status: Status::Ok,
        reason: None,
        after: None,
        held_by: None,
        started: Some(serde_json::from_value(started).unwrap()),
        finished: Some(serde_json::from_value(finished).unwrap()),
    }
}

/// Regression: across boots the age summed the awake time of every boot the loaded runs showed,
/// those before the success too, so a job that had just succeeded after two reboots read stale.
#[test]
fn an_age_across_boots_counts_only_the_boots_since_the_success() {
    // Newest first: the success on boot B (at 5 s), then older runs on boot A (up to 10 h).
    let runs = vec![
        ok_run("r3", "B", 5_000),
        ok_run("r2", "A", 36_000_000),
        ok_run("r1", "A", 1_000),
    ];
    let now = Now {
        wall: Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap(),
        clock: clock("C", 60_000),
    };
    // B's rest as far as seen (0) plus C so far (60 s): A's 10 hours are no part of it.
    assert_eq!(
        age_of(&runs[0], &runs, &now),
        (60_000, AgeClock::AwakeAtLeast)
    );
    // A later run on B moves what B is known to have lasted.
    let mut with_later = vec![ok_run("r4", "B", 65_000)];
    with_later.extend(runs.iter().cloned());
    assert_eq!(
        age_of(&with_later[1], &with_later, &now),
        (120_000, AgeClock::AwakeAtLeast)
    );
}

fn with_status(mut r: RunView, status: Status) -> RunView {
    r.status = status;
    if let Some(f) = r.finished.as_mut() {
        f.outcome = match status {
            Status::Failed => crate::runlog::Outcome::Failed,
            Status::Stopped => crate::runlog::Outcome::Stopped,
            _ => crate::runlog::Outcome::Ok,
        };
    }
    r
}

/// Regression: a run someone stopped (stop-all) counted as a failure towards auto-pause, named
/// "command failed". It is neither a failure nor a success: the streak goes past it.
#[test]
fn a_stopped_run_neither_counts_nor_ends_a_failing_streak() {
    let runs = vec![
        with_status(ok_run("r4", "B", 4), Status::Failed),
        with_status(ok_run("r3", "B", 3), Status::Stopped),
        with_status(ok_run("r2", "B", 2), Status::Failed),
        with_status(ok_run("r1", "B", 1), Status::Ok),
    ];
    assert_eq!(failing_streak(&runs, None), (2, vec!["command failed"]));
}

/// A run the kernel killed for memory is named so in the streak (and so in health and in
/// notifications), not as a plain "command failed".
#[test]
fn a_run_killed_for_memory_is_named_out_of_memory() {
    let mut oom = with_status(ok_run("r2", "B", 2), Status::Failed);
    if let Some(f) = oom.finished.as_mut() {
        f.error = Some(crate::runlog::ErrorInfo {
            class: "out_of_memory".into(),
            detail: "killed by the kernel: its tree reached memory_max (64M)".into(),
        });
    }
    let runs = vec![oom, with_status(ok_run("r1", "B", 1), Status::Failed)];
    let (streak, kinds) = failing_streak(&runs, None);
    assert_eq!(streak, 2);
    assert!(kinds.contains(&"out of memory (memory_max)"), "{kinds:?}");
    assert!(kinds.contains(&"command failed"), "{kinds:?}");
}
