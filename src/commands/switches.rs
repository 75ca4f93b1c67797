//! `pause`, `resume`, `ack`, `snooze`, `unsnooze`, `stop-all` and `resume-all`: the switches, and
//! what follows on the remote Healthchecks checks.

use super::fail::{CmdResult, Fail};
use super::{data_root, healthchecks};
use crate::control;
use crate::exit::Exit;
use crate::exit::Exits as _;
use crate::fsutil::Use;
use crate::names::Name;
use crate::runlog::By;
use crate::settings::Settings;

/// A switch refused, with the exit its error says.
fn control_fail(e: control::ControlError) -> Fail {
    Fail::new(e.exit(), e)
}

pub(super) fn pause(settings: &Settings, name: &Name, reason: &str) -> CmdResult {
    control::require_definition(settings, name).map_err(control_fail)?;
    data_root(settings, Use::Write)?;
    let p = control::pause(settings, name, By::Hand, reason).map_err(control_fail)?;
    outln!("{name}: paused ({})", p.reason);
    healthchecks::follow_pause(settings, Some(name), true);
    Ok(Exit::Success)
}

pub(super) fn resume(settings: &Settings, name: &Name) -> CmdResult {
    control::require_definition(settings, name).map_err(control_fail)?;
    data_root(settings, Use::Write)?;
    if control::resume(settings, name).map_err(control_fail)? {
        outln!("{name}: resumed");
    } else {
        outln!("{name}: was not paused");
    }
    healthchecks::follow_pause(settings, Some(name), false);
    Ok(Exit::Success)
}

pub(super) fn ack(settings: &Settings, name: &Name, reason: Option<&str>) -> CmdResult {
    control::require_definition(settings, name).map_err(control_fail)?;
    data_root(settings, Use::Write)?;
    control::ack(settings, name, reason).map_err(control_fail)?;
    outln!(
        "{name}: acknowledged; health counts its runs from now (a failure next is a new degradation)"
    );
    Ok(Exit::Success)
}

pub(super) fn snooze(
    settings: &Settings,
    name: &Name,
    duration: &str,
    reason: Option<&str>,
) -> CmdResult {
    control::require_definition(settings, name).map_err(control_fail)?;
    let minutes = control::snooze_minutes(duration)
        .map_err(|e| Fail::new(Exit::BadInput, anyhow::anyhow!(e)))?;
    data_root(settings, Use::Write)?;
    let until = chrono::Utc::now() + chrono::Duration::minutes(minutes as i64);
    control::snooze(settings, name, until, reason).map_err(control_fail)?;
    outln!(
        "{name}: snoozed until {}: its notifications are held (its runs go on and are recorded); automations unsnooze {name} ends it sooner",
        until.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M")
    );
    Ok(Exit::Success)
}

pub(super) fn unsnooze(settings: &Settings, name: &Name) -> CmdResult {
    control::require_definition(settings, name).map_err(control_fail)?;
    data_root(settings, Use::Write)?;
    if control::unsnooze(settings, name).map_err(control_fail)? {
        outln!("{name}: no longer snoozed; the next look tells what is news");
    } else {
        outln!("{name}: was not snoozed");
    }
    Ok(Exit::Success)
}

pub(super) fn stop_all(settings: &Settings, reason: &str) -> CmdResult {
    data_root(settings, Use::Write)?;
    let r = control::stop_all(settings, reason).map_err(control_fail)?;
    let mut problems = Vec::new();
    match &r.switch_error {
        None => outln!(
            "kill switch on: every firing is skipped until `automations resume-all`; stopped {} running run(s)",
            r.stopped
        ),
        Some(e) => {
            outln!("stopped {} running run(s)", r.stopped);
            problems.push(format!(
                "the kill switch itself could not be saved ({e}), so new firings will still run: free some space and run stop-all again"
            ));
        }
    }
    if let Some(e) = &r.log_error {
        problems.push(format!(
            "the stop_all event could not be written to the run log ({e})"
        ));
    }
    if !r.still_running.is_empty() {
        problems.push(format!(
            "still running after SIGTERM: {}",
            r.still_running.join(", ")
        ));
    }
    if !r.unreachable.is_empty() {
        problems.push(format!(
            "held by no process its lock names (a firing of an older version?), so nothing was signalled: {}",
            r.unreachable.join(", ")
        ));
    }
    healthchecks::follow_pause(settings, None, true);
    if problems.is_empty() {
        Ok(Exit::Success)
    } else {
        Err(Fail::new(
            Exit::Failure,
            anyhow::anyhow!(problems.join("; ")),
        ))
    }
}

pub(super) fn resume_all(settings: &Settings) -> CmdResult {
    data_root(settings, Use::Write)?;
    if control::resume_all(settings).map_err(control_fail)? {
        outln!("kill switch off");
    } else {
        outln!("kill switch was not on");
    }
    healthchecks::follow_pause(settings, None, false);
    Ok(Exit::Success)
}
