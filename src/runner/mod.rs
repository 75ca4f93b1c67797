//! The runner: what every firing executes, `automations run NAME` (SPEC §5).
//!
//! [`run`] is the whole sequence of one firing, in order: definition, kill switch and pause, the
//! `daily_at` slot guard, the lock, `started`, the key gate, the command (see [`supervise`]),
//! result facts, `finished`, then the after-run checks. Each step that decides not to run records
//! why in the log, so every firing leaves a trace. This module must never print a secret and never
//! leave a `started` without trying to write its `finished`.

pub mod after;
pub mod env;
pub mod keeper;

pub mod result;
pub mod supervise;
pub mod tail;
pub mod tree;

use std::ffi::OsString;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chrono::Utc;

use crate::anytype::gate;
use crate::clock;
use crate::definition::{self, Checks, Definition, LoadError, PLACEHOLDER_ROOT, PLACEHOLDER_SELF};
use crate::fsutil;
use crate::history;
use crate::keys;
use crate::locks::{self, Acquired};
use crate::names::Name;
use crate::runlog::{
    Dropped, ErrorInfo, Event, Finished, Outcome, RunLog, SkipReason, Skipped, Started, Trigger,
};
use crate::schedule::{self, Schedule};
use crate::settings::Settings;
use crate::state::State;

use crate::redact::Redactor;
use keeper::Keeper;
use supervise::{Ending, Interrupt, Signals, Supervised};

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
    //      contends for it) and again once it is held, so a `stop-all` or a second firing that
    //      lands in between is not missed. A scheduled firing runs only what was installed; a
    //      person's run goes ahead and is told.
    let state = State::new(&s.data_root);
    let installed = approved(s, &state, &def, name, trigger)?;
    if let Some((reason, detail)) = why_not(&log, &state, &def, name, trigger, &installed)? {
        return Ok(told(s, name, skip(&log, name, trigger, reason, detail)?));
    }
    // The jitter: a scheduled firing waits its slot's delay before it contends for the lock (a
    // person's run never waits). A pause or a stop-all set meanwhile is seen under the lock.
    let jitter = (trigger == Trigger::Schedule && def.jitter_seconds > 0).then(|| {
        let wait = jitter_wait(&def, name, Utc::now());
        std::thread::sleep(wait);
        wait
    });
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
    if let Some((reason, detail)) = why_not(&log, &state, &def, name, trigger, &installed)? {
        return Ok(told(s, name, skip(&log, name, trigger, reason, detail)?));
    }
    let run_id = new_run_id(Utc::now());
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
    };
    let finished = fire(&firing, &log)?;
    // The run is over and recorded (durable by `conclude`, or by the next append): the lock goes
    // before anything slow, so a firing never waits on this one's pings, look or messages.
    drop(lock);
    // The end ping to Healthchecks (bounded; never changes the outcome).
    if let Some(p) = pings {
        p.end(&finished);
    }

    // 12. After the run: auto-pause (SPEC §10) and notifications (SPEC §12); their failures print
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

/// A skipped firing, told to Healthchecks when its check wants to hear of it (see
/// `healthchecks::ping::skipped`).
fn told(s: &Settings, name: &Name, report: Report) -> Report {
    if let Report::Skipped { reason, detail } = &report {
        crate::healthchecks::ping::skipped(s, name, *reason, detail);
    }
    report
}

/// Steps 5–11 under the lock: `started`, the keeper, the gate, the command, and its `finished`
/// written (not yet synced: see [`conclude`]).
fn fire(firing: &Firing, log: &RunLog) -> Result<Finished, RunError> {
    use anyhow::Context as _;
    let Firing { s, def, run_id, .. } = *firing;
    let name = &def.name;
    // Room to record the run even if the command fills the disk; none at all: do not start.
    crate::runlog::reserve::ensure(&s.data_root).map_err(anyhow::Error::from)?;
    // From here a stop request (SIGTERM, Ctrl-C) ends the run as `stopped` instead of killing the
    // runner between `started` and `finished`.
    let mut signals = Signals::install().context("cannot install signal handlers")?;
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
    // With the lock held, nothing of an earlier run of this name is alive: whatever is left in its
    // scratch belongs to runs that were interrupted, and is cleared now.
    let scratch = Scratch::prepare(&s.data_root, name);

    // Retries (a scheduled firing's): each attempt its own run under this one lock and keeper,
    // after a wait that doubles; a stop request ends them.
    let (mut number, mut next_id, mut scratch) = (1, None::<String>, scratch);
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
        let finished = attempt(&this, log, scratch, &mut signals, begun)?;
        if !retrying
            || number > retry.retries
            || !tried_again(retry, &finished)
            || signals.wait_for_stop(retry.delay(number))
        {
            return Ok(finished);
        }
        number += 1;
        next_id = Some(new_run_id(Utc::now()));
        scratch = Scratch::prepare(&s.data_root, name);
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
    })
}

/// One attempt (a firing's only one, unless it retries): `started`, the gate, the command and its
/// `finished` written.
fn attempt(
    firing: &Firing,
    log: &RunLog,
    scratch: std::io::Result<Scratch>,
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
        Ok(Ok(passed)) => execute(firing, log, scratch, passed, signals, keeper),
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

/// Step 6, the key gate (SPEC §8): only a declaring automation ever touches the keychain. What
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

/// What a firing knows of the install: when it was installed, and why the files as they are now are
/// not what it approved, if they are not (see `pins`).
struct Approval {
    installed_at: Option<chrono::DateTime<Utc>>,
    mismatch: Option<crate::pins::Mismatch>,
}

/// Reads the install record once and checks the pins: for a scheduled firing always (its skip
/// comes from [`why_not`]); for a person's run only to warn, on stderr, that the unit will
/// not run this version. A record that cannot be read is no approval.
fn approved(
    s: &Settings,
    state: &State,
    def: &Definition,
    name: &Name,
    trigger: Trigger,
) -> Result<Approval, RunError> {
    let scheduled = trigger == Trigger::Schedule;
    let record = match state.install_record(name) {
        Ok(r) => r,
        Err(e) if scheduled => {
            errln!("automations: {name}: {}", crate::chain_text(&e));
            None
        }
        Err(_) => None,
    };
    let mismatch = match (&record, &s.pinned_sha256) {
        (None, _) if !scheduled => None,
        // In a pod the manifest is the install: it names the one definition version it runs (the
        // image, by digest, holds the scripts).
        (None, Some(pinned)) if *pinned == def.sha256 => None,
        (None, Some(_)) => Some(crate::pins::Mismatch::DefinitionChanged),
        (r, _) => crate::pins::check(r.as_ref(), def, &s.root),
    };
    if !scheduled
        && let Some(
            m
            @ (crate::pins::Mismatch::DefinitionChanged | crate::pins::Mismatch::ScriptChanged(_)),
        ) = &mismatch
    {
        errln!(
            "automations: {name}: running the current files, but {}: its installed unit skips scheduled firings until you approve this version (make automations-install NAME={name})",
            m.words(name.as_str())
        );
    }
    Ok(Approval {
        installed_at: record.map(|r| r.installed_at),
        mismatch,
    })
}

/// Steps 2 and 3: the kill switch, the pause, the pins of a scheduled firing, the login run, the
/// daily slot. `Some` is why this firing must not run, with the words that follow the reason.
fn why_not(
    log: &RunLog,
    state: &State,
    def: &Definition,
    name: &Name,
    trigger: Trigger,
    installed: &Approval,
) -> Result<Option<(SkipReason, String)>, RunError> {
    if let Some(stop) = state.stopped().map_err(anyhow::Error::from)? {
        return Ok(Some((SkipReason::Stopped, format!(": {}", stop.reason))));
    }
    if let Some(p) = state.paused(name).map_err(anyhow::Error::from)? {
        return Ok(Some((SkipReason::Paused, format!(": {}", p.reason))));
    }
    if trigger != Trigger::Schedule {
        return Ok(None);
    }

    // What runs unattended is what was installed: nothing of a changed definition or script.
    if let Some(m) = &installed.mismatch {
        let reason = match m {
            crate::pins::Mismatch::NotInstalled => SkipReason::NotInstalled,
            crate::pins::Mismatch::DefinitionChanged => SkipReason::DefinitionChanged,
            crate::pins::Mismatch::ScriptChanged(_) => SkipReason::ScriptChanged,
        };
        let words = m.words(name.as_str());
        let detail = format!(": {words}; approve it with make automations-install NAME={name}");
        return Ok(Some((reason, detail)));
    }

    // 3. At login: the first scheduled firing since the session began (the user's manager
    //    started) runs whatever slot it comes at; one that only runs at login skips the others.
    if let Some(schedule) = &def.schedule
        && schedule.at_login()
    {
        let since = clock::session_start();
        if !history::scheduled_since(log, name.as_str(), since) {
            return Ok(None);
        }
        if matches!(schedule, Schedule::AtLogin) {
            let detail = format!(
                ": it ran at this login already (the session began {})",
                crate::runlog::stamp(since)
            );
            return Ok(Some((SkipReason::SlotDone, detail)));
        }
    }

    // 4. One run per daily slot.
    if let Some(schedule @ Schedule::DailyAt { .. }) = &def.schedule
        && let Some(slot_at) = schedule::latest_slot(schedule, &chrono::Local::now())
        && (schedule::slot_done(slot_at, None, installed.installed_at)
            || history::scheduled_since(log, name.as_str(), slot_at))
    {
        return Ok(Some((SkipReason::SlotDone, String::new())));
    }
    Ok(None)
}

/// This firing's jitter delay: the one of its slot (the latest at `now`; an interval of awake time
/// has none), whole also when the firing comes late (a catch-up on wake waits as long, which is
/// when many automations fire at once).
fn jitter_wait(def: &Definition, name: &Name, now: chrono::DateTime<Utc>) -> std::time::Duration {
    let slot = def
        .schedule
        .as_ref()
        .and_then(|s| schedule::latest_slot(s, &now.with_timezone(&chrono::Local)));
    schedule::jitter_delay(name.as_str(), slot, def.jitter_seconds)
        .to_std()
        .unwrap_or_default()
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

fn failed_before_start(run: &str, class: &str, detail: &str, clock: clock::Clock) -> Finished {
    Finished {
        run: run.to_owned(),
        outcome: Outcome::Failed,
        exit_code: None,
        signal: None,
        duration_ms: 0,
        error: Some(ErrorInfo {
            class: class.to_owned(),
            detail: detail.to_owned(),
        }),
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        dropped: Dropped::default(),
        facts: Default::default(),
        headline: None,
        http: None,
        leftover_processes: 0,
        clock,
        trigger: None,
        started_at: None,
        attempt: None,
        first_run: None,
    }
}

/// The scratch space of one automation's runs, `<data root>/scratch/<name>/`: `tmp/`, the
/// private TMPDIR each run gets in turn (runs of one automation never overlap: its lock), and beside
/// it the run's result file and HTTP log (outside TMPDIR, so a command cleaning its temp folder
/// cannot lose them). A run leaves it empty; what an interrupted run left, the next one clears.
///
/// The folders stay between runs: making and removing a folder per run cost a firing more than
/// one of its two fsyncs (docs/performance.md), and an empty folder is checked with one listing.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Clears what interrupted runs of `name` left behind and returns its scratch. Only called
    /// with `name`'s lock held, when no run of it can be using it. A link where a folder belongs
    /// is refused or removed as a link, never followed: the run's files (and their cleanup) would
    /// go somewhere else.
    fn prepare(data_root: &Path, name: &Name) -> std::io::Result<Self> {
        let parent = data_root.join("scratch");
        folder(&parent, false)?;
        let dir = parent.join(name.as_str());
        // Holding only `tmp/`, a folder has three links (on APFS, where files count too, as well):
        // then only the two files can be left, and they are removed below. Anything else (an
        // older layout, a stray folder) is cleared.
        if folder(&dir, true)?.is_some_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) != 3) {
            clear(&dir);
        }
        let tmp = dir.join("tmp");
        if folder(&tmp, true)?.is_some() {
            clear(&tmp);
        }
        let sc = Self { dir };
        sc.remove_files();
        Ok(sc)
    }

    fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    fn result(&self) -> PathBuf {
        self.dir.join("result.json")
    }

    fn http_log(&self) -> PathBuf {
        self.dir.join("http.jsonl")
    }

    fn remove_files(&self) {
        let _ = std::fs::remove_file(self.result());
        let _ = std::fs::remove_file(self.http_log());
    }
}

/// `p` as a real folder: its metadata when it was there; `None` when it was missing (and made,
/// 0700, when `make`). A link or anything else where it belongs is refused, never followed.
fn folder(p: &Path, make: bool) -> std::io::Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(Some(m)),
        Ok(_) => Err(not_a_folder(p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if make {
                fsutil::private_dir(p)?;
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Removes every entry of the folder `dir`, if it is one (a link is not followed). Everything goes
/// through open folder handles, never through paths below `dir`: a link put in a folder's place
/// while it is cleared cannot redirect the removal elsewhere. Folders nested deeper than 64 are
/// left (a bound on open handles).
fn clear(dir: &Path) {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if let Ok(mut d) = nix::dir::Dir::open(dir, flags, nix::sys::stat::Mode::empty()) {
        clear_at(&mut d, flags, 0);
    }
}

fn clear_at(d: &mut nix::dir::Dir, flags: nix::fcntl::OFlag, depth: u32) {
    use nix::dir::Type;
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let entries: Vec<(std::ffi::CString, Option<Type>)> = d
        .iter()
        .flatten()
        .filter(|e| ![&b"."[..], b".."].contains(&e.file_name().to_bytes()))
        .map(|e| (e.file_name().to_owned(), e.file_type()))
        .collect();
    for (name, kind) in entries {
        let is_dir = match kind {
            Some(t) => t == Type::Directory,
            None => {
                use nix::sys::stat::SFlag;
                nix::sys::stat::fstatat(
                    &*d,
                    name.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits())
            }
        };
        if is_dir && depth < 64 {
            if let Ok(mut sub) =
                nix::dir::Dir::openat(&*d, name.as_c_str(), flags, nix::sys::stat::Mode::empty())
            {
                clear_at(&mut sub, flags, depth + 1);
            }
            let _ = unlinkat(&*d, name.as_c_str(), UnlinkatFlags::RemoveDir);
        } else {
            let _ = unlinkat(&*d, name.as_c_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

fn not_a_folder(p: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} is not a folder (a link?); remove it",
        p.display()
    ))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove_files();
        // Usually empty: one listing; removals only when the command left files. The command may
        // have put a link where `tmp` was: that is removed as a link, never followed (the next
        // run makes the folder again).
        let tmp = self.tmp();
        match std::fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_dir() => clear(&tmp),
            Ok(_) => {
                let _ = std::fs::remove_file(&tmp);
            }
            Err(_) => {}
        }
    }
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
}

/// Steps 7–11: environment, spawn and supervise, result facts. Never fails: every problem is an
/// outcome in the returned `finished`.
///
/// Long because it is the firing's steps in SPEC order, each a few lines that turn a failure into
/// an outcome; split up, the order would have to be read across functions.
fn execute(
    firing: &Firing,
    log: &RunLog,
    scratch: std::io::Result<Scratch>,
    (mut redactor, extra_env): (Redactor, Vec<(String, OsString)>),
    signals: &mut Signals,
    keeper: &mut Keeper,
) -> Finished {
    let Firing {
        s,
        def,
        run_id,
        trigger,
        ..
    } = *firing;
    let fail =
        |class: &str, detail: String| failed_before_start(run_id, class, &detail, clock::now());
    if let Some(sig) = signals.stop_requested() {
        let mut f = fail(
            "stopped",
            format!("stopped by {sig} before the command started"),
        );
        f.outcome = Outcome::Stopped;
        return f;
    }
    let scratch = match scratch {
        Ok(sc) => sc,
        Err(e) => {
            return fail(
                "scratch",
                format!("cannot create the run's scratch folder: {e}"),
            );
        }
    };
    let bin = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("automations"));
    let env_file = s.data_root.join("env").join(format!("{}.env", def.name));
    // Every attempt of a firing carries the first one's id: the marker the keeper was split with.
    let vars = env::RunVars {
        run_id: firing.first_run,
        trigger: trigger.as_str(),
        result_file: &scratch.result(),
        http_log: &scratch.http_log(),
        tmpdir: &scratch.tmp(),
        bin: &bin,
        home: &s.home,
    };
    let mut command_env = match env::build(def, &vars, &env_file, &|k| std::env::var_os(k)) {
        Ok(e) => e,
        Err(e) => return fail("env_file", e.to_string()),
    };
    command_env.vars.extend(extra_env);
    for secret in &command_env.secrets {
        redactor.add(secret);
    }

    let argv = resolve_argv(&def.command, s, &bin);
    // The command runs in the root. The runner moves there itself instead of asking std to: every
    // path it still uses is absolute, and a Command without a working directory is spawned with
    // posix_spawn (a static glibc cannot look up posix_spawn_file_actions_addchdir_np), which
    // costs a fraction of a full fork of the runner.
    if let Err(e) = std::env::set_current_dir(&s.root) {
        return fail(
            "spawn_failed",
            format!("cannot enter the repository root {}: {e}", s.root.display()),
        );
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(command_env.vars.iter().map(|(k, v)| (k, v)));
    let subreaper = supervise::subreaper_wanted() && keeper::become_subreaper();
    // 5, done: `started` is on disk before the command can start. The keeper has been syncing it
    // since the split, while this process made all of the above.
    if let Err(unsynced) = started_on_disk(keeper, log) {
        return fail("log_sync", unsynced);
    }
    let sup = supervise::supervise(
        &mut cmd,
        Duration::from_secs(u64::from(def.timeout_seconds)),
        &redactor,
        signals,
        supervise::TreeSpec {
            subreaper,
            marker: run_marker(firing.first_run).into_bytes(),
            table: tree::system(),
        },
        &mut |group| {
            keeper.spawned(group);
            if let Some(p) = firing.pings {
                p.start();
            }
        },
    );
    // The whole tree is gone: the keeper has nothing left to guard (until another attempt runs;
    // it is told `done` when the firing's keeper handle is dropped).
    keeper.idle();

    // 11. Facts from the result file, and the HTTP log of the run's outside calls (SPEC §11),
    //     read strictly: a line the command could have forged is counted as invalid.
    let facts = result::read(&scratch.result());
    let mut finished = finish(run_id, def, &argv[0], sup, facts, &redactor);
    finished.http =
        crate::http::log::summarize(&scratch.http_log(), &|b| redactor.contains_secret(b))
            .map(Box::new);
    finished
}

/// Substitutes `{root}` and `{self}`, and anchors a relative program path at the root. A command
/// that is `{self}` itself runs this binary in this installation: the runner's `--root`,
/// `--data-root` and `--namespace` follow its arguments (global flags clap takes anywhere), so
/// `{self} notify look` looks at the same data root a unit's firing uses.
fn resolve_argv(command: &[String], s: &Settings, bin: &Path) -> Vec<OsString> {
    let root = &s.root;
    let root_s = root.to_string_lossy();
    let bin_s = bin.to_string_lossy();
    let mut argv: Vec<OsString> = command
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            let a = arg
                .replace(PLACEHOLDER_ROOT, &root_s)
                .replace(PLACEHOLDER_SELF, &bin_s);
            if i == 0 && a.contains('/') && !a.starts_with('/') {
                root.join(a).into_os_string()
            } else {
                a.into()
            }
        })
        .collect();
    if command.first().is_some_and(|c| c == PLACEHOLDER_SELF) {
        argv.extend(s.global_args());
    }
    argv
}

/// Turns what supervision saw into the `finished` event.
///
/// Long because it is one mapping: each way a run can end (exit, signal, deadline, stop, spawn
/// failure) to its outcome, class and redacted tails, field by field.
fn finish(
    run_id: &str,
    def: &Definition,
    program: &OsString,
    sup: Supervised,
    facts: Result<result::Facts, result::ResultError>,
    redactor: &Redactor,
) -> Finished {
    let (exit_code, signal) = match &sup.ending {
        Ending::Exited(c) => (Some(*c), None),
        Ending::Signaled(s) => (None, Some(*s as i32)),
        Ending::NotStarted(_) => (None, None),
    };
    let timeout = def.timeout_seconds;
    let (mut outcome, mut error) = match (&sup.interrupt, &sup.ending) {
        (_, Ending::NotStarted(e)) => (
            Outcome::Failed,
            Some((
                "spawn_failed",
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )),
        ),
        (Some(Interrupt::Stop(sig)), _) => (
            Outcome::Stopped,
            Some(("stopped", format!("stopped by {sig}"))),
        ),
        (Some(Interrupt::Timeout), _) => (
            Outcome::Timeout,
            Some(("timeout", format!("timed out after {timeout} s"))),
        ),
        (None, Ending::Exited(0)) => (Outcome::Ok, None),
        (None, Ending::Exited(c)) => (
            Outcome::Failed,
            Some(("exit_status", format!("exited with {c}"))),
        ),
        (None, Ending::Signaled(s)) => {
            (Outcome::Failed, Some(("signal", format!("killed by {s}"))))
        }
    };
    if sup.unkillable > 0 && error.is_none() {
        outcome = Outcome::Failed;
        error = Some((
            "unkillable",
            format!("{} process(es) survived SIGKILL", sup.unkillable),
        ));
    }
    let facts = facts.and_then(|f| {
        if f.facts
            .keys()
            .any(|name| redactor.contains_secret(name.as_bytes()))
        {
            Err(result::ResultError("a fact name contains a secret".into()))
        } else {
            Ok(f)
        }
    });
    let (facts, headline) = match facts {
        Ok(f) => {
            let headline = f
                .headline
                .or_else(|| def.headline.as_ref().map(|h| h.to_string()))
                .filter(|h| f.facts.contains_key(h));
            (f.facts, headline)
        }
        Err(e) => {
            if outcome == Outcome::Ok {
                outcome = Outcome::Failed;
                error = Some(("result_invalid", e.0));
            }
            (Default::default(), None)
        }
    };
    Finished {
        run: run_id.to_owned(),
        outcome,
        exit_code,
        signal,
        duration_ms: sup.duration.as_millis() as u64,
        error: error.map(|(class, detail)| ErrorInfo {
            class: class.to_owned(),
            detail: redactor.scrub(&detail),
        }),
        stdout_tail: sup.stdout.0,
        stderr_tail: sup.stderr.0,
        dropped: Dropped {
            stdout: sup.stdout.1,
            stderr: sup.stderr.1,
        },
        facts,
        headline,
        http: None,
        leftover_processes: sup.leftover_processes,
        clock: clock::now(),
        trigger: None,
        started_at: None,
        attempt: None,
        first_run: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an interrupted run left (its result file, its HTTP log, files in TMPDIR, an older
    /// layout's per-run folder) is gone before the next run starts, and a run leaves its scratch
    /// empty.
    #[test]
    fn scratch_is_cleared_before_and_after_each_run() {
        let d = tempfile::tempdir().unwrap();
        let n = Name::new("x").unwrap();
        let a = Scratch::prepare(d.path(), &n).unwrap();
        std::fs::write(a.result(), "{\"stale\": 1}").unwrap();
        std::fs::write(a.http_log(), "x").unwrap();
        std::fs::write(a.tmp().join("f"), "x").unwrap();
        std::fs::create_dir(a.tmp().join("sub")).unwrap();
        std::fs::create_dir(a.dir.join("20261129T204512.123Z-aaaaaa")).unwrap();
        std::mem::forget(a); // interrupted: no cleanup
        let b = Scratch::prepare(d.path(), &n).unwrap();
        let names = |p: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&b.dir), ["tmp"]);
        assert!(names(&b.tmp()).is_empty());
        std::fs::write(b.result(), "{}").unwrap();
        std::fs::write(b.tmp().join("g"), "x").unwrap();
        let dir = b.dir.clone();
        drop(b);
        assert_eq!(names(&dir), ["tmp"]);
        assert!(names(&dir.join("tmp")).is_empty());
        // A link where `tmp` belongs is never followed: removed as a link (or refused), and
        // what it points at is untouched.
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("keep"), "x").unwrap();
        std::fs::remove_dir(dir.join("tmp")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("tmp")).unwrap();
        let c = Scratch::prepare(d.path(), &n).unwrap();
        assert!(std::fs::symlink_metadata(c.tmp()).unwrap().is_dir());
        drop(c);
        assert!(elsewhere.join("keep").exists());
        // A command that put a link where `tmp` was: the run's cleanup removes the link only.
        let e = Scratch::prepare(d.path(), &n).unwrap();
        std::fs::remove_dir(e.tmp()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, e.tmp()).unwrap();
        drop(e);
        assert!(elsewhere.join("keep").exists());
        assert!(std::fs::symlink_metadata(dir.join("tmp")).is_err());
        // Beside another folder (three links), the link is refused.
        std::fs::create_dir(dir.join("tmp")).unwrap();
        std::fs::create_dir(dir.join("other")).unwrap();
        std::fs::remove_dir(dir.join("tmp")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("tmp")).unwrap();
        assert!(Scratch::prepare(d.path(), &n).is_err());
        assert!(elsewhere.join("keep").exists());
        // Regression: `scratch` itself a link (to a folder holding an `x`) was found out only after
        // `x` had been emptied. Now refused before anything in it is touched.
        let root = d.path().join("root2");
        std::fs::create_dir(&root).unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir_all(victim.join("x")).unwrap();
        std::fs::write(victim.join("x/keep"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, root.join("scratch")).unwrap();
        assert!(Scratch::prepare(&root, &n).is_err());
        assert!(victim.join("x/keep").exists());
    }

    /// Nested folders and links inside TMPDIR are cleared through handles; a link's target
    /// survives.
    #[test]
    fn clearing_removes_nested_folders_and_never_follows_links() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let dir = d.path().join("dir");
        std::fs::create_dir_all(dir.join("a/b/c")).unwrap();
        std::fs::write(dir.join("a/b/c/f"), "x").unwrap();
        std::fs::write(dir.join("a/g"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("a/b/link")).unwrap();
        std::os::unix::fs::symlink(&target, dir.join("top-link")).unwrap();
        clear(&dir);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(target.join("keep").exists());
        // A link given as the folder to clear: nothing happens.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        clear(&link);
        assert!(target.join("keep").exists());
    }
}
