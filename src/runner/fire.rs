//! Steps 5–11 of a firing under its lock: `started`, the keeper split off, the key gate, each
//! attempt of the command (see `execute`) and its `finished`; for a firing that retries, the
//! attempts after the first, each checked again before it runs.

use std::ffi::OsString;

use chrono::Utc;

use super::approval::{self, Prepared, Script};
use super::execute::{execute, failed_before_start};
use super::keeper::Keeper;
use super::supervise::{self, Signals};
use super::{
    ENV_STARTED_SYNC, Firing, RunError, STARTED_SYNC_SLOW, append, append_at, new_run_id,
    run_marker, started_on_disk,
};
use crate::anytype::gate;
use crate::clock;
use crate::definition::Definition;
use crate::keys;
use crate::redact::Redactor;
use crate::runlog::{Event, Finished, Outcome, RunLog, Skipped, Started};
use crate::settings::Settings;
use crate::state::State;

/// Steps 5–11 under the lock: `started`, the keeper, the gate, the command, and its `finished`
/// written (not yet synced: see [`conclude`]); then, for a firing that retries, each later
/// attempt, once the kill switch, the pause and the approval allow it again.
pub(super) fn fire(
    firing: &Firing,
    log: &RunLog,
    prepared: Prepared,
    mut signals: Signals,
) -> Result<Finished, RunError> {
    let Firing {
        settings,
        def,
        run_id,
        ..
    } = *firing;
    let name = &def.name;
    // Room to record the run even if the command fills the disk; none at all: do not start.
    crate::runlog::reserve::ensure(&settings.data_root)?;
    // 5. started, written here and made durable by the keeper while this process goes on (the
    //    first attempt's; see `attempt`).
    let retry = &def.retry;
    let retrying = firing.cause.trigger.unattended() && retry.retries > 0;
    let started_at = Utc::now();
    let event = started(firing, std::process::id(), retrying);
    log.append_unsynced(name.as_str(), event, started_at)?;
    // Its bytes go to the disk at once; the journal's commit follows in the keeper's sync.
    log.start_writeback();
    // The firing splits: the parent keeps (kills the command's tree if this runner dies mid-run,
    // and holds the lock until it has; see keeper.rs), this process goes on as the runner. Forked
    // here, while still single-threaded.
    let mut keeper = match split(run_id, log, firing.lock) {
        Ok(k) => k,
        // `started` is written: the run is recorded as one that could not start.
        Err(e) => {
            let detail = format!("cannot start the run's keeper: {e}");
            let unforked = failed_before_start(run_id, "spawn_failed", &detail, clock::now());
            return record(firing, log, started_at, retrying, unforked);
        }
    };
    // Named in the lock, so a stop reaches this runner too when its keeper is gone.
    let _ = firing.lock.runner();

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
        prepared = match again(firing, log)? {
            Some(p) => p,
            None => return Ok(finished),
        };
        next_id = Some(new_run_id(Utc::now()));
    }
}

/// Before another attempt: it runs only what may run now. A pause, a stop-all or a changed script
/// since the last attempt ends the firing here, recorded as a skip (`None`); else what the
/// attempt runs in.
fn again(firing: &Firing, log: &RunLog) -> Result<Option<Prepared>, RunError> {
    let Firing { settings, def, .. } = *firing;
    let trigger = firing.cause.trigger;
    let prepared = Prepared::new(settings, def);
    let state = State::new(&settings.data_root);
    let script = Script::Hashed(&prepared.script);
    let installed = approval::approved(settings, &state, def, trigger, script, false)?;
    let Some((reason, _)) = approval::held_back(&state, &def.name, trigger, &installed)? else {
        return Ok(Some(prepared));
    };
    let skipped = Event::Skipped(Skipped {
        trigger,
        reason,
        after: firing.cause.after.clone(),
        held_by: None,
        slot: firing.cause.slot_stamp(),
    });
    append(log, &def.name, skipped)?;
    Ok(None)
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

/// The split of a firing (see keeper.rs) whose keeper's first act is to name itself in the lock
/// under its own name, then the `fdatasync` of the `started` line just written, or what the test
/// switch [`ENV_STARTED_SYNC`] makes of it.
fn split(run_id: &str, log: &RunLog, lock: &crate::locks::RunLock) -> std::io::Result<Keeper> {
    let fault = std::env::var_os(ENV_STARTED_SYNC);
    Keeper::split(
        run_marker(run_id).as_bytes(),
        supervise::subreaper_wanted(),
        &|| {
            // Without it a stop reaches the runner instead, which passes it on as well.
            let _ = lock.keeper();
            match fault.as_ref().and_then(|f| f.to_str()) {
                Some("fail") => {
                    // EIO on Linux and macOS (a test switch: no test can make a disk fail).
                    Err(std::io::Error::from_raw_os_error(5))
                }
                Some("slow") => {
                    std::thread::sleep(STARTED_SYNC_SLOW);
                    log.sync_data_only()
                }
                _ => log.sync_data_only(),
            }
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
        trigger: firing.cause.trigger,
        pid,
        definition: Some(firing.def.sha256.clone()),
        clock: clock::now(),
        jitter_ms: firing.jitter.map(|j| j.as_millis() as u64),
        attempt: numbered.then_some(firing.attempt),
        first_run: (firing.attempt > 1).then(|| firing.first_run.to_owned()),
        ended: firing.ended.filter(|_| firing.attempt == 1).cloned(),
        paths: firing.cause.paths.clone(),
        after: firing.cause.after.clone(),
        slot: firing.cause.slot_stamp(),
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
    let Firing {
        settings,
        def,
        run_id,
        ..
    } = *firing;
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
    let finished = match on_disk.map(|()| key_gate(settings, def)) {
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

/// Writes the `finished` of `firing`'s attempt that started at `started_at` (not yet synced: see
/// [`conclude`]); `numbered` as in [`Begun`].
fn record(
    firing: &Firing,
    log: &RunLog,
    started_at: chrono::DateTime<Utc>,
    numbered: bool,
    finished: Finished,
) -> Result<Finished, RunError> {
    let mut finished = finished;
    // Stopped by a firing that took its place (`overlap = "replace"`): said so, and which.
    if finished.outcome == Outcome::Stopped
        && let Some((by, whose)) =
            super::overlap::replaced_by(&firing.settings.layout(), &firing.def.name)
    {
        finished.error = Some(crate::runlog::ErrorInfo {
            class: "replaced".into(),
            detail: format!(
                "stopped to make way for a firing of {whose} (run {by}); overlap = \"replace\""
            ),
        });
        finished.replaced_by = Some(by);
    }
    let finished = Finished {
        trigger: Some(firing.cause.trigger),
        started_at: Some(crate::runlog::stamp(started_at)),
        attempt: numbered.then_some(firing.attempt),
        first_run: (firing.attempt > 1).then(|| firing.first_run.to_owned()),
        slot: firing.cause.slot_stamp(),
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
fn key_gate(
    settings: &Settings,
    def: &Definition,
) -> Result<(Redactor, Vec<(String, OsString)>), String> {
    let mut redactor = Redactor::default();
    let Some(access) = &def.anytype else {
        return Ok((redactor, Vec::new()));
    };
    let store = keys::for_settings(settings);
    match gate::gate(
        &settings.label(&def.name),
        access,
        gate::Policy::of(settings),
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
