//! After `finished` (SPEC §5 step 12): auto-pause (§10) and the notification look (§12).
//!
//! Neither ever changes the run's recorded outcome or its exit status: a failure prints one line
//! on stderr (which the journal or launchd's log keeps) and is otherwise ignored. Both stay off a
//! good run's path: auto-pause reads history only when an outbound run failed, and the look
//! happens only when notifications are configured.

use chrono::Utc;

use crate::definition::Definition;
use crate::health::{self, thresholds};
use crate::names::Name;
use crate::runlog::index::Index;
use crate::runlog::{By, Event, Finished, Outcome, Paused, RunLog};
use crate::settings::Settings;
use crate::state::{Pause, State};

/// What happened after the run, for its summary line.
#[derive(Debug, Default)]
pub struct After {
    /// The automation was paused automatically, with this reason.
    pub auto_paused: Option<String>,
}

/// The checks after a run of `def` that ended in `finished`.
pub fn after_run(s: &Settings, def: &Definition, finished: &Finished) -> After {
    let mut after = After::default();
    if def.outbound && finished.outcome != Outcome::Ok {
        match auto_pause(s, &def.name) {
            Ok(p) => after.auto_paused = p,
            Err(e) => errln!(
                "automations: {}: the auto-pause check failed: {e:#}",
                def.name
            ),
        }
    }
    if crate::notify::enabled(s) {
        match crate::notify::look(s, Some(&def.name)) {
            Ok(report) => {
                for problem in &report.unreadable {
                    errln!("automations: notifications: {problem}");
                }
            }
            Err(e) => errln!("automations: {}: notifications: {e:#}", def.name),
        }
    }
    after
}

/// Pauses `name` when its failures in a row since the last resume reach `auto_pause_after`.
/// Returns the reason when it did.
pub fn auto_pause(s: &Settings, name: &Name) -> anyhow::Result<Option<String>> {
    let state = State::new(&s.data_root);
    if state.paused(name)?.is_some() {
        return Ok(None);
    }
    let set = thresholds::load(&s.data_root)?;
    let th = set.of(name.as_str());
    let log = RunLog::new(&s.data_root);
    let snapshot = Index::new(&log).refresh()?;
    let subject = health::load::subject(s, &snapshot, name, None, th)?;
    let (streak, kinds) = health::failing_streak(&subject.runs, subject.resumed_at);
    if streak < th.auto_pause_after {
        return Ok(None);
    }
    let reason = format!(
        "auto-paused: {streak} failures in a row ({}). Fix the cause, then resume",
        kinds.join(", ")
    );
    let now = Utc::now();
    state.pause(
        name,
        &Pause {
            by: By::Auto,
            reason: reason.clone(),
            at: crate::runlog::stamp(now),
        },
    )?;
    log.append(
        name.as_str(),
        Event::Paused(Paused {
            by: By::Auto,
            reason: reason.clone(),
        }),
        now,
    )?;
    Ok(Some(reason))
}
