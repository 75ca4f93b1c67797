//! The runner: what every firing executes, `automations run NAME` (docs/running.md).
//!
//! [`run`] is the whole sequence of one firing, in order: definition, kill switch and pause, the
//! `daily_at` slot guard, the lock, `started`, the key gate, the command (see [`supervise`]),
//! result facts, `finished`, then the after-run checks. Each step that decides not to run records
//! why in the log, so every firing leaves a trace. This module must never print a secret and never
//! leave a `started` without trying to write its `finished`.

pub mod after;
pub mod approval;
pub mod catch_up;
pub mod cause;
mod chain;
pub mod env;
pub mod execute;
mod fire;
pub mod keeper;
pub mod limits;
pub mod overlap;
mod report;
pub mod result;
pub mod scratch;
pub mod supervise;
pub mod survivors;
pub mod tail;
pub mod tree;
pub mod unit;

use std::ops::ControlFlow;

use chrono::Utc;

use crate::clock;
use crate::definition::{self, Checks, Definition, LoadError};
use crate::fsutil;
use crate::locks;
use crate::names::Name;
use crate::runlog::{Event, RunLog, SkipReason, Skipped, Started, Trigger};
use crate::settings::Settings;
use crate::state::State;

use approval::{Prepared, Script};
pub use cause::Cause;
use execute::failed_before_start;
use supervise::Signals;

use fire::fire;
use keeper::Keeper;
pub use report::{Report, RunError};

/// The environment entry every process of a run inherits; how its tree is recognised wherever it
/// went (see tree.rs).
pub fn run_marker(run_id: &str) -> String {
    format!("AUTOMATION_RUN_ID={run_id}")
}

/// A new run id: UTC time to the millisecond and 24 random bits; sorts by start.
pub fn new_run_id(now: chrono::DateTime<Utc>) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!(
        "{}-{:06x}",
        now.format("%Y%m%dT%H%M%S%.3fZ"),
        h.finish() & 0xff_ffff
    )
}

/// A switch for tests only: `fail` makes the keeper's sync of `started` fail with EIO (a disk
/// error no test can cause for real), `slow` makes it take [`STARTED_SYNC_SLOW`] longer.
pub const ENV_STARTED_SYNC: &str = "AUTOMATIONS_TEST_STARTED_SYNC";
/// How much longer `slow` makes the keeper's sync.
pub const STARTED_SYNC_SLOW: std::time::Duration = std::time::Duration::from_millis(500);

/// The log of this process's firing, until its end is made durable ([`conclude`]).
static FIRING: std::sync::Mutex<Option<RunLog>> = std::sync::Mutex::new(None);

/// Runs one firing of `name`: the steps of docs/running.md, in order. `slot`: the slot it stands
/// for when the command line names one (a missed slot's catch-up, a backfill); else a scheduled
/// firing stands for its schedule's latest.
pub fn run(
    settings: &Settings,
    name: &Name,
    trigger: Trigger,
    slot: Option<chrono::DateTime<Utc>>,
) -> Result<Report, RunError> {
    let report = run_or_skip(settings, name, trigger, slot);
    // A path-started firing that could not even be recorded (a data root it may not use) holds
    // its unit as a skip does: else the manager starts it again at once while the path stays
    // changed, and its trigger limit stops the watch for good.
    if report.is_err() && cause::by_path_unit() {
        cool_down();
    }
    let report = report?;
    // A skip is news too, at once, as a run's is after the run: when it changes the verdict
    // (a script changed since its install, say), the notification look and the metrics
    // textfile hear of it now, not at the next look.
    if let Report::Skipped { .. } = report {
        after::after_skip(settings, name);
    }
    Ok(report)
}

/// One firing, steps 1–12 (docs/running.md): run, or skipped, and recorded either way.
fn run_or_skip(
    settings: &Settings,
    name: &Name,
    trigger: Trigger,
    slot: Option<chrono::DateTime<Utc>>,
) -> Result<Report, RunError> {
    fsutil::check_data_root(&settings.data_root, fsutil::Use::Write)?;
    let log = RunLog::new(&settings.data_root)
        .with_stdout_mirror(settings.events_stdout)
        .with_test_rotation(settings.test_rotate_bytes);
    // 1. The definition.
    let def = match definition_or_record(settings, &log, name, trigger, slot)? {
        ControlFlow::Continue(def) => def,
        ControlFlow::Break(report) => return Ok(report),
    };
    // What started it, when a unit did (a watched path, a chain, its timer).
    let cause = cause::of(settings, &def, trigger, slot);
    let cause = &cause;
    let state = State::new(&settings.data_root);
    // 2–3 before the lock, then the jitter or settle wait. A firing for a slot the command line
    // names is itself a catch-up: it looks for no missed slots.
    let catch_up = slot.is_none();
    let (mut signals, jitter) =
        match before_the_lock(settings, &log, &state, &def, cause, catch_up)? {
            ControlFlow::Continue(ready) => ready,
            ControlFlow::Break(report) => return Ok(report),
        };
    // 4. The lock, and its group's, by the definition's overlap policy (docs/policies.md).
    let held = overlap::acquire(settings, &def, &mut signals)?;
    let overlap::Held {
        lock,
        group,
        run_id,
    } = match held {
        Ok(held) => held,
        Err(busy) => return Ok(told(settings, &def, skip_held(&log, name, cause, busy)?)),
    };
    let UnderTheLock {
        prepared,
        ended,
        installed,
    } = match under_the_lock(settings, &log, &state, &def, cause, &lock)? {
        ControlFlow::Continue(ready) => ready,
        ControlFlow::Break(report) => return Ok(told(settings, &def, report)),
    };
    // 5–11, then the lock goes before anything slow: a firing never waits on this one's pings,
    // look or messages.
    let run_id = run_id.unwrap_or_else(|| new_run_id(Utc::now()));
    // The run whose tree is alive under this lock, until it is gone (see `locks`).
    let _ = lock.mark(&run_id);
    let pings = crate::healthchecks::ping::Pings::prepare(settings, &def, installed, &run_id);
    let firing = Firing {
        settings,
        lock: &lock,
        def: &def,
        run_id: &run_id,
        cause,
        jitter,
        attempt: 1,
        first_run: &run_id,
        pings: pings.as_ref(),
        ended: ended.as_ref(),
    };
    let finished = fire(&firing, &log, prepared, signals);
    // Whatever became of it, its tree is gone now; it is recorded (durable by `conclude`, or by
    // the next append).
    let _ = lock.clear();
    drop(group);
    drop(lock);
    let finished = finished?;
    // The end ping to Healthchecks (bounded; never changes the outcome).
    if let Some(p) = pings {
        p.end(&finished);
    }
    // The automations that follow this one, once its end is on disk (docs/triggers.md).
    chain::start_followers(settings, &log, &def, &finished);
    // 12. After the run: auto-pause and notifications (docs/health.md); their failures print to
    //     stderr and never change the outcome recorded above.
    let after = after::after_run(settings, &def, &finished);
    keep_until_concluded(log);
    Ok(Report::Finished {
        run: finished.run.clone(),
        finished: Box::new(finished),
        auto_paused: after.auto_paused,
        of_this_run: after.of_this_run,
    })
}

/// Steps 2–3 before the lock: kill switch, pause, pins, login run and slot (a paused automation
/// never contends for the lock, nor waits its jitter; all are checked again under it). Then the
/// signal handlers, from which a stop request is recorded instead of killing the runner, and a
/// scheduled firing's jitter wait (a person's run never waits). What the firing goes on with: its
/// signals and the wait it waited; or the recorded skip.
fn before_the_lock(
    settings: &Settings,
    log: &RunLog,
    state: &State,
    def: &Definition,
    cause: &Cause,
    catch_up: bool,
) -> Result<ControlFlow<Report, (Signals, Option<std::time::Duration>)>, RunError> {
    let name = &def.name;
    let trigger = cause.trigger;
    // A scheduled firing runs only what was installed; a person's run goes ahead and is told.
    let early = approval::approved(settings, state, def, trigger, Script::OnDisk, true)?;
    if let Some((reason, detail)) = approval::why_not(log, state, def, cause, &early)? {
        let report = told(settings, def, skip(log, name, cause, reason, detail)?);
        return Ok(ControlFlow::Break(report));
    }
    // The slots missed before this one, by the schedule's `catch_up` (before this firing's own
    // signal handlers: each missed slot runs as a firing of its own).
    if catch_up
        && let ControlFlow::Break(report) =
            catch_up::before(settings, log, def, cause, early.installed_at)?
    {
        return Ok(ControlFlow::Break(told(settings, def, report)));
    }
    let mut signals = Signals::install().map_err(RunError::Signals)?;
    if trigger == Trigger::Path {
        return Ok(match settle(settings, log, def, cause, signals)? {
            ControlFlow::Continue(signals) => ControlFlow::Continue((signals, None)),
            ControlFlow::Break(report) => ControlFlow::Break(report),
        });
    }
    if trigger != Trigger::Schedule || def.jitter_seconds == 0 {
        return Ok(ControlFlow::Continue((signals, None)));
    }
    let wait = approval::jitter_wait(def, cause.slot);
    if !wait.is_zero() {
        // Said, so a `systemctl --user start` that seems to hang is explained (the journal keeps it).
        errln!(
            "automations: {name}: waiting {:.1} s (its jitter_seconds) before it runs",
            wait.as_secs_f64()
        );
    }
    if signals.wait_for_stop(wait) {
        let sig = signals
            .stop_requested()
            .map_or("a signal".into(), |signal| signal.to_string());
        let detail = format!(": stopped by {sig} during its jitter wait, before it ran");
        let report = skip(log, name, cause, SkipReason::Stopped, detail)?;
        return Ok(ControlFlow::Break(report));
    }
    Ok(ControlFlow::Continue((signals, Some(wait))))
}

/// Under the lock, before `started`: what a killed firing before this one left running is ended
/// (or this one does not start); the scratch is cleared and the script copied into it while it is
/// hashed; and every check of step 2 is made again, against that copy. What the firing runs in,
/// and what it ended; or the recorded skip.
fn under_the_lock(
    settings: &Settings,
    log: &RunLog,
    state: &State,
    def: &Definition,
    cause: &Cause,
    lock: &locks::RunLock,
) -> Result<ControlFlow<Report, UnderTheLock>, RunError> {
    let trigger = cause.trigger;
    let ended = match lock.interrupted() {
        Some(prev) => match end_survivors(log, &def.name, cause, prev)? {
            ControlFlow::Continue(ended) => ended,
            ControlFlow::Break(report) => return Ok(ControlFlow::Break(report)),
        },
        None => None,
    };
    let prepared = Prepared::new(settings, def);
    let script = Script::Hashed(&prepared.script);
    let installed = approval::approved(settings, state, def, trigger, script, false)?;
    if let Some((reason, detail)) = approval::why_not(log, state, def, cause, &installed)? {
        let report = skip(log, &def.name, cause, reason, detail)?;
        return Ok(ControlFlow::Break(report));
    }
    if let Some(detail) = past_the_cap(settings, def, cause) {
        let report = skip(log, &def.name, cause, SkipReason::RateLimited, detail)?;
        return Ok(ControlFlow::Break(report));
    }
    Ok(ControlFlow::Continue(UnderTheLock {
        prepared,
        ended,
        installed: installed.installed_at.is_some(),
    }))
}

/// What a firing goes on with once it holds its lock: where it runs, what a killed firing before
/// it left running and this one ended, and whether it has an install record (read for the pins).
struct UnderTheLock {
    prepared: Prepared,
    ended: Option<crate::runlog::EndedRun>,
    installed: bool,
}

/// Step 1: the definition of `name`. On schedule a broken one is still a recorded (failed) run,
/// and that run's report is the `Break`.
fn definition_or_record(
    settings: &Settings,
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
    slot: Option<chrono::DateTime<Utc>>,
) -> Result<ControlFlow<Report, Definition>, RunError> {
    let e = match definition::load_one(&settings.definitions_dir(), name, &Checks::of(settings)) {
        Ok(def) => return Ok(ControlFlow::Continue(def)),
        Err(e) if trigger.unattended() => e,
        Err(e) => return Err(RunError::Definition(e)),
    };
    let class = match e {
        LoadError::Missing(_) => "definition_missing",
        LoadError::Invalid(_) => "definition_invalid",
    };
    // A firing for a given slot (a catch-up's) says it stood for that slot, not for the latest.
    let slot = slot.map(|s| crate::schedule::slot_stamp(s, None, &chrono::Local));
    let report = record_unstartable(log, name, trigger, slot, class, &e.to_string())?;
    if let Report::Finished { finished, .. } = &report {
        crate::healthchecks::ping::unstarted(settings, name, finished);
    }
    if cause::by_path_unit() {
        cool_down();
    }
    Ok(ControlFlow::Break(report))
}

/// Keeps the firing's log until [`conclude`] makes its end durable.
fn keep_until_concluded(log: RunLog) {
    if let Ok(mut f) = FIRING.lock() {
        *f = Some(log);
    }
}

/// The firing's last step, once everything is printed: its keeper ends with `code` (so whoever
/// waits on the firing is done), then the `finished` line is made durable. Does nothing outside a
/// firing.
pub fn conclude(code: u8) {
    keeper::hand_over(code);
    let log = FIRING.lock().ok().and_then(|mut f| f.take());
    if let Some(log) = log
        && let Err(e) = log.sync()
    {
        errln!("automations: the run's end is written but could not be synced to disk: {e}");
    }
}

/// Ends what the killed firing `prev` left running. `Continue` with what was ended (said on
/// stderr, recorded in this firing's `started`); `Break` with the recorded skip when some of it
/// outlived SIGKILL: no second run starts beside it.
fn end_survivors(
    log: &RunLog,
    name: &Name,
    cause: &Cause,
    prev: &str,
) -> Result<ControlFlow<Report, Option<crate::runlog::EndedRun>>, RunError> {
    let marker = run_marker(prev);
    let done = survivors::end(
        tree::system(),
        marker.as_bytes(),
        supervise::GRACE,
        supervise::KILL_WAIT,
    );
    if done.left > 0 {
        let detail = format!(
            ": {} process(es) of the killed run {prev} outlived SIGKILL; it does not start beside them",
            done.left
        );
        return skip(log, name, cause, SkipReason::AlreadyRunning, detail).map(ControlFlow::Break);
    }
    if done.ended == 0 {
        return Ok(ControlFlow::Continue(None));
    }
    errln!(
        "automations: {name}: ended {} process(es) the killed run {prev} left running",
        done.ended
    );
    Ok(ControlFlow::Continue(Some(crate::runlog::EndedRun {
        run: prev.to_owned(),
        processes: done.ended,
    })))
}

/// A skipped firing, told to Healthchecks when its check wants to hear of it (see
/// `healthchecks::ping::skipped`).
fn told(settings: &Settings, def: &Definition, report: Report) -> Report {
    if let Report::Skipped { reason, detail } = &report {
        crate::healthchecks::ping::skipped(settings, def, *reason, detail);
    }
    report
}

fn append(log: &RunLog, name: &Name, event: Event) -> Result<(), RunError> {
    append_at(log, name, event, Utc::now())
}

fn append_at(
    log: &RunLog,
    name: &Name,
    event: Event,
    at: chrono::DateTime<Utc>,
) -> Result<(), RunError> {
    Ok(log.append(name.as_str(), event, at)?)
}

fn skip(
    log: &RunLog,
    name: &Name,
    cause: &Cause,
    reason: SkipReason,
    detail: String,
) -> Result<Report, RunError> {
    let busy = overlap::Busy {
        reason,
        detail,
        held_by: None,
    };
    skip_held(log, name, cause, busy)
}

/// A skip, naming the automation that held the lock group when that was why.
fn skip_held(
    log: &RunLog,
    name: &Name,
    cause: &Cause,
    busy: overlap::Busy,
) -> Result<Report, RunError> {
    let overlap::Busy {
        reason,
        mut detail,
        held_by,
    } = busy;
    if let Some(h) = &held_by {
        detail = format!(
            ": lock group {:?} held by {}{detail}",
            h.lock,
            h.holder_words(name.as_str())
        );
    }
    let skipped = Skipped {
        trigger: cause.trigger,
        reason,
        after: cause.after.clone(),
        held_by,
        slot: cause.slot_stamp(),
    };
    append(log, name, Event::Skipped(skipped))?;
    // The manager starts a path-started firing again at once while a queue folder holds files.
    if cause.trigger == Trigger::Path {
        cool_down();
    }
    Ok(Report::Skipped { reason, detail })
}

/// How long a path-started firing that did not run (a skip, a broken definition) holds its unit
/// before it ends. The manager starts it again at once while a queue folder holds files: without
/// it a paused automation would write skips as fast as it could, and systemd's own trigger limit
/// (200 starts in 2 s) would stop the watch for good (docs/triggers.md).
pub const COOL_DOWN: std::time::Duration =
    std::time::Duration::from_secs(definition::trigger::COOL_DOWN_SECONDS as u64);

/// Waits [`COOL_DOWN`], or until asked to stop.
fn cool_down() {
    match Signals::install() {
        Ok(mut signals) => {
            signals.wait_for_stop(COOL_DOWN);
        }
        Err(_) => std::thread::sleep(COOL_DOWN),
    }
}

/// A path-started firing waits until its paths have been quiet for `settle_seconds` (at most
/// three times that while they keep changing): one firing for a burst of changes. What it goes on
/// with, or the skip recorded when a stop came during the wait.
fn settle(
    settings: &Settings,
    log: &RunLog,
    def: &Definition,
    cause: &Cause,
    mut signals: Signals,
) -> Result<ControlFlow<Report, Signals>, RunError> {
    let settle_seconds = def.trigger.as_ref().map_or(0, |t| t.settle_seconds);
    let settle = std::time::Duration::from_secs(u64::from(settle_seconds));
    let paths = cause::watched(settings, def);
    let limit = std::time::Instant::now() + settle * 3;
    loop {
        let left = cause::settle_left(&paths, settle, std::time::SystemTime::now());
        let until_limit = limit.saturating_duration_since(std::time::Instant::now());
        let wait = left.min(until_limit);
        if wait.is_zero() {
            return Ok(ControlFlow::Continue(signals));
        }
        if signals.wait_for_stop(wait) {
            let detail = ": stopped during its settle wait, before it ran".to_owned();
            let report = skip(log, &def.name, cause, SkipReason::Stopped, detail)?;
            return Ok(ControlFlow::Break(report));
        }
    }
}

/// Why an event-started firing (a path, a chain) may not run: past its `max_per_hour`. A count
/// that cannot be kept is said on stderr and does not hold the firing back.
fn past_the_cap(settings: &Settings, def: &Definition, cause: &Cause) -> Option<String> {
    let (Some(tr), Trigger::Path | Trigger::After) = (&def.trigger, cause.trigger) else {
        return None;
    };
    let layout = crate::layout::Layout::new(&settings.data_root);
    match cause::count_event_firing(&layout, &def.name, tr.max_per_hour, Utc::now()) {
        Ok(true) => None,
        Ok(false) => Some(format!(
            ": {} event-started firings in the last hour, its max_per_hour",
            tr.max_per_hour
        )),
        Err(e) => {
            errln!(
                "automations: {}: cannot count its event firings: {}",
                def.name,
                crate::exit::chain_text(&e)
            );
            None
        }
    }
}

/// Records a run whose command could not start at all: `started` + `finished` failed.
fn record_unstartable(
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
    slot: Option<String>,
    class: &str,
    detail: &str,
) -> Result<Report, RunError> {
    let started_at = Utc::now();
    let run_id = new_run_id(started_at);
    let clock = clock::now();
    append_at(
        log,
        name,
        Event::Started(Started {
            run: run_id.clone(),
            trigger,
            pid: std::process::id(),
            definition: None,
            clock: clock.clone(),
            jitter_ms: None,
            attempt: None,
            first_run: None,
            ended: None,
            paths: None,
            after: None,
            slot: slot.clone(),
        }),
        started_at,
    )?;
    let mut finished = failed_before_start(&run_id, class, detail, clock);
    finished.trigger = Some(trigger);
    finished.started_at = Some(crate::runlog::stamp(started_at));
    finished.slot = slot;
    append(log, name, Event::Finished(finished.clone()))?;
    Ok(Report::Finished {
        run: run_id,
        finished: Box::new(finished),
        auto_paused: None,
        of_this_run: Vec::new(),
    })
}

/// Step 5's end: the first attempt's `started`, which the keeper has been syncing since the split,
/// is on disk (asked once; later calls, and later attempts, which sync their own, pass at once).
/// A keeper gone without answering leaves the sync to this process. Why not, when it is not.
fn started_on_disk(keeper: &mut Keeper, log: &RunLog) -> Result<(), String> {
    keeper
        .first_answer()
        .unwrap_or_else(|| log.sync_data_only())
        .map_err(|e| {
            format!(
                "the run's start could not be synced to disk ({e}): {}",
                log.path().display()
            )
        })
}

/// What one firing is: where, which definition, which run, started by what.
#[derive(Clone, Copy)]
struct Firing<'a> {
    settings: &'a Settings,
    /// Its automation's lock, which names its keeper and, once split off, its runner.
    lock: &'a locks::RunLock,
    def: &'a Definition,
    run_id: &'a str,
    cause: &'a Cause,
    /// The jitter delay it waited, if it waited.
    jitter: Option<std::time::Duration>,
    /// 1, then 2… when a failed firing is tried again.
    attempt: u32,
    /// The first attempt's run id (its own for the first): every attempt's processes carry its
    /// marker, the one the keeper was split with.
    first_run: &'a str,
    /// Its Healthchecks pings, when its automation has a check: the start ping is sent once the
    /// first command is spawned, so the command never shares the CPU with it before it starts.
    pings: Option<&'a crate::healthchecks::ping::Pings>,
    /// What a killed firing before it left running and this one ended, for its `started`.
    ended: Option<&'a crate::runlog::EndedRun>,
}
