//! The slots a schedule missed while the machine slept or was off (`catch_up` of `[schedule]`,
//! docs/units.md "Catching up"). launchd and systemd (`Persistent=true`) fire once on wake for
//! however many slots passed; that firing stands for the latest one. Before it runs, this looks
//! at the slots before it that no firing stood for: `all` runs each once, oldest first, each as a
//! firing of its own (a child runner with `--slot`, under the lock like any firing); `none`
//! records each as skipped (`missed_slot`), and the late firing itself too.
//!
//! How far back: since the newest firing before this one (run or skipped), the install, or
//! [`CATCH_UP_DAYS`], whichever is latest; at most the newest [`CATCH_UP_SLOTS`] of them. The
//! look reads the log back to that newest firing only, as the slot guard does. Not in a pod: a
//! CronJob catches up by its own rules.

use std::ops::ControlFlow;

use chrono::{DateTime, Duration, Utc};

use super::{Cause, Report, RunError, skip};
use crate::definition::Definition;
use crate::history;
use crate::runlog::{Event, RunLog, SkipReason, Skipped, Trigger};
use crate::schedule::zone::{CATCH_UP_DAYS, CATCH_UP_SLOTS, ON_TIME_SECONDS};
use crate::schedule::{self, CatchUp};
use crate::settings::Settings;

/// The slots before `latest` that no firing of `def` stood for, oldest first (at most
/// [`CATCH_UP_SLOTS`], the newest), and how many older ones were left out.
pub fn missed_before(
    log: &RunLog,
    def: &Definition,
    latest: DateTime<Utc>,
    installed_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (Vec<DateTime<Utc>>, usize) {
    let Some(schedule) = &def.schedule else {
        return (Vec::new(), 0);
    };
    let bound = now - Duration::days(CATCH_UP_DAYS);
    let mut from = installed_at.map_or(bound, |t| t.max(bound));
    if let Some(last) = last_fired_before(log, def.name.as_str(), latest, from) {
        from = from.max(last);
    }
    let mut slots = schedule::slots_between(schedule, &chrono::Local, from, latest);
    slots.retain(|s| *s < latest);
    let left_out = slots.len().saturating_sub(CATCH_UP_SLOTS);
    (slots.split_off(left_out), left_out)
}

/// The point the newest firing of `name`'s schedule before `before` stood for (its slot, or when
/// it fired for a record without one), reading the log back no further than `from` and no
/// further than that firing.
fn last_fired_before(
    log: &RunLog,
    name: &str,
    before: DateTime<Utc>,
    from: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    history::last_fired(log, name, from, |f| f.slot.unwrap_or(f.at) < before)
        .map(|f| f.slot.unwrap_or(f.at))
}

/// Before a scheduled firing for slot `latest` runs (it passed the pause, the pins and the slot
/// guard): the missed slots before it, by the schedule's `catch_up`. `Break` when this firing is
/// itself a missed slot that `none` does not run.
pub fn before(
    settings: &Settings,
    log: &RunLog,
    def: &Definition,
    cause: &Cause,
    installed_at: Option<DateTime<Utc>>,
) -> Result<ControlFlow<Report>, RunError> {
    let (Some(schedule), Some(latest)) = (&def.schedule, cause.slot) else {
        return Ok(ControlFlow::Continue(()));
    };
    let policy = schedule.catch_up();
    // In a pod the manifest is the install and the log starts empty: the CronJob's own rules
    // catch up there (a definition with another catch_up is not rendered for a cluster).
    if policy == CatchUp::Latest
        || cause.trigger != Trigger::Schedule
        || settings.pinned_sha256.is_some()
    {
        return Ok(ControlFlow::Continue(()));
    }
    let now = Utc::now();
    let (missed, left_out) = missed_before(log, def, latest, installed_at, now);
    if left_out > 0 {
        errln!(
            "automations: {}: {left_out} older missed slot(s) left out (catch_up looks back at most {CATCH_UP_DAYS} days and {CATCH_UP_SLOTS} slots)",
            def.name
        );
    }
    match policy {
        CatchUp::All => {
            for slot in missed {
                run_missed(settings, def, cause, slot);
            }
            Ok(ControlFlow::Continue(()))
        }
        CatchUp::None => {
            // `missed` are slots no firing stood for: another firing's records are not among
            // them, so a slot is recorded once (two firings at the same millisecond aside).
            for slot in &missed {
                record_missed(log, def, cause, *slot)?;
            }
            // The login run runs whatever slot it comes at (`at_login`): the first scheduled
            // firing since the session began.
            let late = (now - latest).num_seconds() > ON_TIME_SECONDS;
            let login_run = schedule.at_login()
                && !history::scheduled_since(log, def.name.as_str(), crate::clock::session_start());
            if !late || login_run {
                return Ok(ControlFlow::Continue(()));
            }
            let detail = format!(
                ": its slot {} passed while the machine slept or was off, and catch_up = \"none\" waits for the next one",
                cause.slot_stamp().unwrap_or_default()
            );
            // A second late firing for the same slot (a login and a wake) records nothing more.
            let recorded =
                history::last_fired(log, def.name.as_str(), latest, |f| f.slot == Some(latest))
                    .is_some();
            if recorded {
                let reason = SkipReason::MissedSlot;
                return Ok(ControlFlow::Break(Report::Skipped { reason, detail }));
            }
            skip(log, &def.name, cause, SkipReason::MissedSlot, detail).map(ControlFlow::Break)
        }
        CatchUp::Latest => Ok(ControlFlow::Continue(())),
    }
}

/// Records `slot` of `def` as skipped: missed, not run (`catch_up = "none"`).
fn record_missed(
    log: &RunLog,
    def: &Definition,
    cause: &Cause,
    slot: DateTime<Utc>,
) -> Result<(), RunError> {
    let missed = Cause {
        slot: Some(slot),
        ..cause.clone()
    };
    let skipped = Skipped {
        trigger: Trigger::Schedule,
        reason: SkipReason::MissedSlot,
        after: None,
        held_by: None,
        slot: missed.slot_stamp(),
    };
    Ok(log.append(def.name.as_str(), Event::Skipped(skipped), Utc::now())?)
}

/// Runs the firing of missed `slot` as a firing of its own: this binary's `run NAME --trigger
/// schedule --slot SLOT`, with the same repository, data root and namespace, waited for. A child
/// that cannot start is said on stderr; later firings look back only to this one, so that slot is
/// for `automations backfill` then.
fn run_missed(settings: &Settings, def: &Definition, cause: &Cause, slot: DateTime<Utc>) {
    let stamp = Cause {
        slot: Some(slot),
        ..cause.clone()
    }
    .slot_stamp()
    .unwrap_or_default();
    let status = std::env::current_exe().and_then(|bin| {
        std::process::Command::new(bin)
            .args(slot_firing_args(settings, def, Trigger::Schedule, &stamp))
            .status()
    });
    if let Err(e) = status {
        errln!(
            "automations: {}: the firing of missed slot {stamp} could not start: {e}",
            def.name
        );
    }
}

/// The arguments of a firing of one given slot (`--slot`): a missed slot's catch-up, or a
/// backfill's.
pub fn slot_firing_args(
    settings: &Settings,
    def: &Definition,
    trigger: Trigger,
    slot: &str,
) -> Vec<std::ffi::OsString> {
    vec![
        "run".into(),
        def.name.as_str().into(),
        "--trigger".into(),
        trigger.as_str().into(),
        "--slot".into(),
        slot.into(),
        "--root".into(),
        settings.root.clone().into(),
        "--data-root".into(),
        settings.data_root.clone().into(),
        "--namespace".into(),
        settings.namespace.as_str().into(),
    ]
}
