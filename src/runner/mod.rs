//! The runner: what every firing executes, `automations run NAME` (docs/running.md).
//!
//! [`run`] is the whole sequence of one firing, in order: definition, kill switch and pause, the
//! `daily_at` slot guard, the lock, `started`, the key gate, the command (see [`supervise`]),
//! result facts, `finished`, then the after-run checks. Each step that decides not to run records
//! why in the log, so every firing leaves a trace. This module must never print a secret and never
//! leave a `started` without trying to write its `finished`.

pub mod after;
pub mod approval;
pub mod env;
pub mod execute;
pub mod keeper;
pub mod result;
pub mod scratch;
pub mod supervise;
pub mod survivors;
pub mod tail;
pub mod tree;

use std::ffi::OsString;
use std::ops::ControlFlow;

use chrono::Utc;

use crate::anytype::gate;
use crate::clock;
use crate::definition::{self, Checks, Definition, LoadError};
use crate::fsutil;
use crate::keys;
use crate::locks::{self, Acquired};
use crate::names::Name;
use crate::runlog::{Event, Finished, Outcome, RunLog, SkipReason, Skipped, Started, Trigger};
use crate::settings::Settings;
use crate::state::State;

use crate::redact::Redactor;
use approval::{Prepared, Script};
use execute::{execute, failed_before_start};
use keeper::Keeper;
use supervise::Signals;

/// What one firing came to.
#[derive(Debug)]
pub enum Report {
    /// It did not run, and why.
    Skipped { reason: SkipReason, detail: String },
    /// It ran (or failed before its command started) and was recorded.
    Finished {
        run: String,
        finished: Box<Finished>,
        /// The reason, when this run paused its automation automatically.
        auto_paused: Option<String>,
    },
}

impl Report {
    /// Exit status of `run`: 0 ok or skipped, 1 anything else.
    pub fn is_fine(&self) -> bool {
        match self {
            Report::Skipped { .. } => true,
            Report::Finished { finished, .. } => finished.outcome == Outcome::Ok,
        }
    }

    /// A skip someone must hear of even from a scheduled firing (the journal or launchd's log keeps
    /// stderr): what runs unattended is not what was approved.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Report::Skipped {
                reason: SkipReason::DefinitionChanged
                    | SkipReason::ScriptChanged
                    | SkipReason::NotInstalled,
                ..
            }
        )
    }

    /// The one-line summary: `heartbeat: ok in 0.42 s · beats=1`.
    pub fn summary(&self, name: &Name) -> String {
        match self {
            Report::Skipped { reason, detail } => {
                format!("{name}: skipped ({}{detail})", reason.as_str())
            }
            Report::Finished {
                run,
                finished: f,
                auto_paused,
            } => {
                let mut line = format!(
                    "{name}: {} in {:.2} s",
                    f.outcome.as_str(),
                    f.duration_ms as f64 / 1000.0
                );
                if let Some(h) = &f.headline
                    && let Some(v) = f.facts.get(h)
                {
                    line.push_str(&format!(" · {h}={v}"));
                }
                if let Some(e) = &f.error {
                    line.push_str(&format!(" · {}: {}", e.class, e.detail));
                }
                if f.leftover_processes > 0 {
                    line.push_str(&format!(
                        " · {} leftover process(es) killed",
                        f.leftover_processes
                    ));
                }
                if f.outcome != Outcome::Ok {
                    line.push_str(&format!(" (automations show {run})"));
                }
                if let Some(reason) = auto_paused {
                    line.push_str(&format!("; {reason}"));
                }
                line
            }
        }
    }
}

/// Why a firing could not even be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A manual run of a missing or invalid definition: bad input, nothing recorded.
    #[error(transparent)]
    Definition(LoadError),
    /// The data root or the log cannot be used.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
    /// The command ran, but `finished` could not be written. Said on stderr, which the journal or
    /// launchd's log keeps, since the run log cannot.
    #[error(
        "the command ran (outcome {}, exit {}) but its result could not be recorded",
        outcome.as_str(),
        exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string())
    )]
    Unrecorded {
        outcome: Outcome,
        exit_code: Option<i32>,
        #[source]
        source: crate::runlog::LogError,
    },
}

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

/// Runs one firing of `name`.
pub fn run(s: &Settings, name: &Name, trigger: Trigger) -> Result<Report, RunError> {
    fsutil::check_data_root(&s.data_root, fsutil::Use::Write).map_err(anyhow::Error::from)?;
    let log = RunLog::new(&s.data_root)
        .with_stdout_mirror(s.events_stdout)
        .with_test_rotation(s.test_rotate_bytes);

    // 1. The definition.
    let def = match definition_or_record(s, &log, name, trigger)? {
        ControlFlow::Continue(def) => def,
        ControlFlow::Break(report) => return Ok(report),
    };

    // 2–4. Kill switch, pause, pins, slot: checked before the lock (a paused automation never
    //      contends for it, nor waits its jitter) and again once it is held, after any wait, so a
    //      `stop-all`, a pause or an edit that lands in between is not missed. A scheduled firing
    //      runs only what was installed; a person's run goes ahead and is told.
    let state = State::new(&s.data_root);
    let early = approval::approved(s, &state, &def, trigger, Script::OnDisk, true)?;
    if let Some((reason, detail)) = approval::why_not(&log, &state, &def, trigger, &early)? {
        return Ok(told(s, name, skip(&log, name, trigger, reason, detail)?));
    }
    // From here a stop request (SIGTERM, Ctrl-C) is recorded instead of killing the runner: as a
    // skip while the firing waits, as a stopped run once it has started.
    let mut signals = Signals::install().map_err(|e| {
        RunError::Io(anyhow::Error::new(e).context("cannot install signal handlers"))
    })?;
    // The jitter: a scheduled firing waits its slot's delay before it contends for the lock (a
    // person's run never waits).
    let mut jitter = None;
    if trigger == Trigger::Schedule && def.jitter_seconds > 0 {
        let wait = approval::jitter_wait(&def, Utc::now());
        if signals.wait_for_stop(wait) {
            let sig = signals
                .stop_requested()
                .map_or("a signal".into(), |s| s.to_string());
            let detail = format!(": stopped by {sig} during its jitter wait, before it ran");
            return skip(&log, name, trigger, SkipReason::Stopped, detail);
        }
        jitter = Some(wait);
    }
    let Some(lock) = take_lock(s, name)? else {
        let busy = skip(
            &log,
            name,
            trigger,
            SkipReason::AlreadyRunning,
            String::new(),
        )?;
        return Ok(told(s, name, busy));
    };
    // A firing before this one killed with its keeper may have left its tree running: it is ended
    // before anything of this one starts (or, when it cannot be, this one does not start).
    let ended = match lock.interrupted() {
        Some(prev) => match end_survivors(&log, name, trigger, prev)? {
            ControlFlow::Continue(ended) => ended,
            ControlFlow::Break(report) => return Ok(told(s, name, report)),
        },
        None => None,
    };
    // Under the lock: the script as it will run, copied and hashed, and every check again.
    let prepared = Prepared::new(s, &def);
    let installed = approval::approved(
        s,
        &state,
        &def,
        trigger,
        Script::Copied(&prepared.copy),
        false,
    )?;
    if let Some((reason, detail)) = approval::why_not(&log, &state, &def, trigger, &installed)? {
        return Ok(told(s, name, skip(&log, name, trigger, reason, detail)?));
    }
    let run_id = new_run_id(Utc::now());
    // The run whose tree is alive under this lock, until it is gone (see `locks`).
    let _ = lock.mark(&run_id);
    let pings = crate::healthchecks::ping::Pings::prepare(s, name, &run_id);
    let firing = Firing {
        s,
        def: &def,
        run_id: &run_id,
        trigger,
        jitter,
        attempt: 1,
        first_run: &run_id,
        pings: pings.as_ref(),
        ended: ended.as_ref(),
    };
    let finished = fire(&firing, &log, prepared, signals);
    // Whatever became of it, its tree is gone now.
    let _ = lock.clear();
    let finished = finished?;
    // The run is over and recorded (durable by `conclude`, or by the next append): the lock goes
    // before anything slow, so a firing never waits on this one's pings, look or messages.
    drop(lock);
    // The end ping to Healthchecks (bounded; never changes the outcome).
    if let Some(p) = pings {
        p.end(&finished);
    }

    // 12. After the run: auto-pause (docs/health.md) and notifications (docs/health.md); their failures print
    //     to stderr and never change the outcome recorded above.
    let after = after::after_run(s, &def, &finished);
    if let Ok(mut f) = FIRING.lock() {
        *f = Some(log);
    }
    Ok(Report::Finished {
        run: finished.run.clone(),
        finished: Box::new(finished),
        auto_paused: after.auto_paused,
    })
}

/// Step 1: the definition of `name`. On schedule a broken one is still a recorded (failed) run,
/// and that run's report is the `Break`.
fn definition_or_record(
    s: &Settings,
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
) -> Result<ControlFlow<Report, Definition>, RunError> {
    let e = match definition::load_one(&s.definitions_dir(), name, &Checks::of(s)) {
        Ok(def) => return Ok(ControlFlow::Continue(def)),
        Err(e) if trigger == Trigger::Schedule => e,
        Err(e) => return Err(RunError::Definition(e)),
    };
    let class = match e {
        LoadError::Missing(_) => "definition_missing",
        LoadError::Invalid(_) => "definition_invalid",
    };
    let report = record_unstartable(log, name, trigger, None, class, &e.to_string())?;
    if let Report::Finished { finished, .. } = &report {
        crate::healthchecks::ping::unstarted(s, name, finished);
    }
    Ok(ControlFlow::Break(report))
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

/// Step 4: the automation's lock; `None` when another firing holds it.
fn take_lock(s: &Settings, name: &Name) -> Result<Option<locks::RunLock>, RunError> {
    use anyhow::Context as _;
    let lock_path = locks::path(&s.data_root, name);
    match locks::try_acquire(&s.data_root, name)
        .with_context(|| format!("cannot take the lock {}", lock_path.display()))?
    {
        Acquired::Held(l) => Ok(Some(l)),
        Acquired::Busy => Ok(None),
    }
}

/// Ends what the killed firing `prev` left running. `Continue` with what was ended (said on
/// stderr, recorded in this firing's `started`); `Break` with the recorded skip when some of it
/// outlived SIGKILL: no second run starts beside it.
fn end_survivors(
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
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
        return skip(log, name, trigger, SkipReason::AlreadyRunning, detail)
            .map(ControlFlow::Break);
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
fn told(s: &Settings, name: &Name, report: Report) -> Report {
    if let Report::Skipped { reason, detail } = &report {
        crate::healthchecks::ping::skipped(s, name, *reason, detail);
    }
    report
}

/// Steps 5–11 under the lock: `started`, the keeper, the gate, the command, and its `finished`
/// written (not yet synced: see [`conclude`]); then, for a firing that retries, each later
/// attempt, once the kill switch, the pause and the approval allow it again.
fn fire(
    firing: &Firing,
    log: &RunLog,
    prepared: Prepared,
    mut signals: Signals,
) -> Result<Finished, RunError> {
    let Firing { s, def, run_id, .. } = *firing;
    let name = &def.name;
    // Room to record the run even if the command fills the disk; none at all: do not start.
    crate::runlog::reserve::ensure(&s.data_root).map_err(anyhow::Error::from)?;
    // 5. started, written here and made durable by the keeper while this process goes on (the
    //    first attempt's; see `attempt`).
    let retry = &def.retry;
    let retrying = firing.trigger == Trigger::Schedule && retry.retries > 0;
    let started_at = Utc::now();
    let event = started(firing, std::process::id(), retrying);
    log.append_unsynced(name.as_str(), event, started_at)
        .map_err(|e| RunError::Io(anyhow::Error::from(e)))?;
    // Its bytes go to the disk at once; the journal's commit follows in the keeper's sync.
    log.start_writeback();
    // The firing splits: the parent keeps (kills the command's tree if this runner dies mid-run,
    // and holds the lock until it has; see keeper.rs), this process goes on as the runner. Forked
    // here, while still single-threaded.
    let mut keeper = match split(run_id, log) {
        Ok(k) => k,
        // `started` is written: the run is recorded as one that could not start.
        Err(e) => {
            let detail = format!("cannot start the run's keeper: {e}");
            let unforked = failed_before_start(run_id, "spawn_failed", &detail, clock::now());
            return record(firing, log, started_at, retrying, unforked);
        }
    };

    // Retries (a scheduled firing's): each attempt its own run under this one lock and keeper,
    // after a wait that doubles; a stop request ends them.
    let (mut number, mut next_id, mut prepared) = (1, None::<String>, prepared);
    let mut first_started = Some(started_at);
    loop {
        let id = next_id.take();
        let this = match &id {
            None => *firing,
            Some(id) => Firing {
                run_id: id,
                attempt: number,
                jitter: None,
                ..*firing
            },
        };
        let begun = Begun {
            at: first_started.take(),
            keeper: &mut keeper,
            numbered: retrying,
        };
        let finished = attempt(&this, log, prepared, &mut signals, begun)?;
        if !retrying
            || number > retry.retries
            || !tried_again(retry, &finished)
            || signals.wait_for_stop(retry.delay(number))
        {
            return Ok(finished);
        }
        number += 1;
        // Another attempt runs only what may run now: a pause, a stop-all or a changed script
        // since the last one ends the firing here, recorded.
        prepared = Prepared::new(s, def);
        let state = State::new(&s.data_root);
        let script = Script::Copied(&prepared.copy);
        let installed = approval::approved(s, &state, def, firing.trigger, script, false)?;
        if let Some((reason, _)) = approval::held_back(&state, name, firing.trigger, &installed)? {
            let skipped = Event::Skipped(Skipped {
                trigger: firing.trigger,
                reason,
            });
            append(log, name, skipped)?;
            return Ok(finished);
        }
        next_id = Some(new_run_id(Utc::now()));
    }
}

/// Whether a failed attempt is of a class `retry_on` names: the command's exit status, its
/// timeout, or outside calls answered 5xx / 429 or not at all. A refused key, a stop, a run that
/// could not start are never tried again.
fn tried_again(retry: &crate::definition::Retry, f: &Finished) -> bool {
    use crate::definition::RetryOn;
    let class = f.error.as_ref().map(|e| e.class.as_str());
    retry.on.iter().any(|on| match on {
        RetryOn::ExitStatus => f.outcome == Outcome::Failed && class == Some("exit_status"),
        RetryOn::Timeout => f.outcome == Outcome::Timeout,
        RetryOn::Outbound => {
            f.outcome != Outcome::Ok
                && f.outcome != Outcome::Stopped
                && f.http.as_ref().is_some_and(|h| {
                    use crate::http::log::Class;
                    Class::ALL.into_iter().any(|c| {
                        (c == Class::ServerError || c == Class::RateLimited || c.is_none())
                            && h.count(c) > 0
                    })
                })
        }
    })
}

/// The split of a firing (see keeper.rs) whose keeper's first act is the `fdatasync` of the
/// `started` line just written, or what the test switch [`ENV_STARTED_SYNC`] makes of it.
fn split(run_id: &str, log: &RunLog) -> std::io::Result<Keeper> {
    let fault = std::env::var_os(ENV_STARTED_SYNC);
    Keeper::split(
        run_marker(run_id).as_bytes(),
        supervise::subreaper_wanted(),
        &|| match fault.as_ref().and_then(|f| f.to_str()) {
            Some("fail") => Err(std::io::Error::from_raw_os_error(nix::libc::EIO)),
            Some("slow") => {
                std::thread::sleep(STARTED_SYNC_SLOW);
                log.sync_data_only()
            }
            _ => log.sync_data_only(),
        },
    )
}

/// How an attempt begins: `at`, when its `started` was already written (the first attempt's,
/// before the keeper split off, which syncs it); `numbered`, whether its events carry the
/// attempt's number and the first run's id.
struct Begun<'k> {
    at: Option<chrono::DateTime<Utc>>,
    keeper: &'k mut Keeper,
    numbered: bool,
}

/// The `started` event of `firing`, whose lock and keeper are `pid`'s; `numbered` as in [`Begun`].
fn started(firing: &Firing, pid: u32, numbered: bool) -> Event {
    Event::Started(Started {
        run: firing.run_id.to_owned(),
        trigger: firing.trigger,
        pid,
        definition: Some(firing.def.sha256.clone()),
        clock: clock::now(),
        jitter_ms: firing.jitter.map(|j| j.as_millis() as u64),
        attempt: numbered.then_some(firing.attempt),
        first_run: (firing.attempt > 1).then(|| firing.first_run.to_owned()),
        ended: firing.ended.filter(|_| firing.attempt == 1).cloned(),
    })
}

/// One attempt (a firing's only one, unless it retries): `started`, the gate, the command and its
/// `finished` written.
fn attempt(
    firing: &Firing,
    log: &RunLog,
    prepared: Prepared,
    signals: &mut Signals,
    begun: Begun,
) -> Result<Finished, RunError> {
    let Firing { s, def, run_id, .. } = *firing;
    let Begun {
        at,
        keeper,
        numbered,
    } = begun;
    let name = &def.name;
    // 5. started: durable before anything of the command can run. The first attempt's was
    //    written before the split, and the keeper's sync of it is awaited just before the spawn.
    let started_at = match at {
        Some(at) => at,
        None => {
            let at = Utc::now();
            append_at(log, name, started(firing, keeper.pid(), numbered), at)?;
            at
        }
    };

    // 6–10. The key gate, then the command and its whole process tree. A gate starts programs of
    // its own, so `started` is on disk before it too; without one, the keeper's sync is awaited
    // only just before the spawn, in `execute`.
    let on_disk = match def.anytype {
        Some(_) => started_on_disk(keeper, log),
        None => Ok(()),
    };
    let finished = match on_disk.map(|()| key_gate(s, def)) {
        Err(unsynced) => failed_before_start(run_id, "log_sync", &unsynced, clock::now()),
        Ok(Ok(passed)) => execute(firing, log, prepared, passed, signals, keeper),
        Ok(Err(refusal)) => failed_before_start(run_id, "key_refused", &refusal, clock::now()),
    };
    // An attempt that ended before its spawn has not heard the keeper yet: a sync that failed
    // is said all the same, as the run's failure (what ended it first goes in the detail).
    let finished = match started_on_disk(keeper, log) {
        Ok(()) => finished,
        Err(unsynced) => {
            let before = finished
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.class, e.detail));
            let detail = match before {
                Some(b) => format!("{unsynced}; the run had already ended before its command: {b}"),
                None => unsynced,
            };
            failed_before_start(run_id, "log_sync", &detail, clock::now())
        }
    };
    record(firing, log, started_at, numbered, finished)
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

/// Writes the `finished` of `firing`'s attempt that started at `started_at` (not yet synced: see
/// [`conclude`]); `numbered` as in [`Begun`].
fn record(
    firing: &Firing,
    log: &RunLog,
    started_at: chrono::DateTime<Utc>,
    numbered: bool,
    finished: Finished,
) -> Result<Finished, RunError> {
    let finished = Finished {
        trigger: Some(firing.trigger),
        started_at: Some(crate::runlog::stamp(started_at)),
        attempt: numbered.then_some(firing.attempt),
        first_run: (firing.attempt > 1).then(|| firing.first_run.to_owned()),
        ..finished
    };
    let end = Event::Finished(finished.clone());
    if let Err(source) = log.append_unsynced(firing.def.name.as_str(), end, Utc::now()) {
        return Err(RunError::Unrecorded {
            outcome: finished.outcome,
            exit_code: finished.exit_code,
            source,
        });
    }
    Ok(finished)
}

/// Step 6, the key gate (docs/keys.md): only a declaring automation ever touches the keychain. What
/// the redactor must know and the command must see when it passes; the refusal when not.
fn key_gate(s: &Settings, def: &Definition) -> Result<(Redactor, Vec<(String, OsString)>), String> {
    let mut redactor = Redactor::default();
    let Some(access) = &def.anytype else {
        return Ok((redactor, Vec::new()));
    };
    let store = keys::for_settings(s);
    match gate::gate(
        &s.label(&def.name),
        access,
        gate::Policy::of(s),
        store.as_ref(),
    ) {
        Ok(pass) => {
            redactor.add_key(pass.key.expose().as_bytes());
            redactor.add(pass.headers.as_bytes());
            Ok((redactor, vec![pass.env()]))
        }
        Err(refusal) => Err(refusal.to_string()),
    }
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
    log.append(name.as_str(), event, at)
        .map_err(|e| RunError::Io(anyhow::Error::from(e)))
}

fn skip(
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
    reason: SkipReason,
    detail: String,
) -> Result<Report, RunError> {
    append(log, name, Event::Skipped(Skipped { trigger, reason }))?;
    Ok(Report::Skipped { reason, detail })
}

/// Records a run whose command could not start at all: `started` + `finished` failed.
fn record_unstartable(
    log: &RunLog,
    name: &Name,
    trigger: Trigger,
    definition: Option<String>,
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
            definition,
            clock: clock.clone(),
            jitter_ms: None,
            attempt: None,
            first_run: None,
            ended: None,
        }),
        started_at,
    )?;
    let mut finished = failed_before_start(&run_id, class, detail, clock);
    finished.trigger = Some(trigger);
    finished.started_at = Some(crate::runlog::stamp(started_at));
    append(log, name, Event::Finished(finished.clone()))?;
    Ok(Report::Finished {
        run: run_id,
        finished: Box::new(finished),
        auto_paused: None,
    })
}

/// What one firing is: where, which definition, which run, started by what.
#[derive(Clone, Copy)]
struct Firing<'a> {
    s: &'a Settings,
    def: &'a Definition,
    run_id: &'a str,
    trigger: Trigger,
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
