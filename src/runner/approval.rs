//! Whether a firing may run now: the kill switch, the pause, the approval of what it runs (its
//! pins), the login run and the daily slot — and what it runs: its script, hashed in place under
//! its lock (see `pins::HashedScript`), whose bytes are the ones compared with the approval.
//!
//! A firing asks twice: before its jitter wait and its lock (a paused automation never contends
//! for the lock, nor waits), and again under the lock, after any wait, against the copy it is
//! about to run; each later attempt of a retrying firing asks once more. Nothing here runs code
//! of the automation.

use chrono::Utc;

use super::scratch::Scratch;
use crate::clock;
use crate::definition::Definition;
use crate::history;
use crate::names::Name;
use crate::pins::{self, HashedScript, Mismatch};
use crate::runlog::{RunLog, SkipReason, Trigger};
use crate::schedule::{self, Schedule};
use crate::settings::Settings;
use crate::state::State;

use super::RunError;

/// What a firing knows of the install: when it was installed, and why the files as they are now are
/// not what it approved, if they are not (see `pins`).
pub struct Approval {
    pub installed_at: Option<chrono::DateTime<Utc>>,
    pub mismatch: Option<Mismatch>,
}

/// What an attempt runs in: its scratch folder (cleared of what earlier runs left), and its
/// script as it was hashed in place, if its `argv[0]` is a script of the repository. Made under
/// the lock.
pub struct Prepared {
    pub scratch: std::io::Result<Scratch>,
    /// `Ok(None)`: no script to hash. `Err`: why the script could not be read.
    pub script: Result<Option<HashedScript>, String>,
}

impl Prepared {
    /// Clears `name`'s scratch and hashes its script where it is.
    pub fn new(settings: &Settings, def: &Definition) -> Self {
        let scratch = Scratch::prepare(&settings.data_root, &def.name);
        let script = pins::hash_in_place(def, &settings.root).map_err(|e| e.to_string());
        Self { scratch, script }
    }
}

/// Where the pin of the script as it is now comes from.
pub enum Script<'a> {
    /// Read from the repository (before the lock: only to decide early).
    OnDisk,
    /// The script as the firing hashed it, right before it runs it.
    Hashed(&'a Result<Option<HashedScript>, String>),
}

/// Reads the install record and checks the pins, against the script as `script` says: for a
/// scheduled firing always (its skip comes from [`held_back`]); for a person's run only to warn,
/// on stderr when `warn`, that the unit will not run this version. A record that cannot be read
/// is no approval.
pub fn approved(
    settings: &Settings,
    state: &State,
    def: &Definition,
    trigger: Trigger,
    script: Script,
    warn: bool,
) -> Result<Approval, RunError> {
    let name = &def.name;
    let scheduled = trigger.unattended();
    let record = match state.install_record(name) {
        Ok(r) => r,
        Err(e) if scheduled && warn => {
            errln!("automations: {name}: {}", crate::exit::chain_text(&e));
            None
        }
        Err(_) => None,
    };
    let mismatch = match (&record, &settings.pinned_sha256) {
        (None, _) if !scheduled => None,
        // In a pod the manifest is the install: it names the one definition version it runs (the
        // image, by digest, holds the scripts).
        (None, Some(pinned)) if *pinned == def.sha256 => None,
        (None, Some(_)) => Some(Mismatch::DefinitionChanged),
        (r, _) => match script {
            Script::OnDisk => pins::check(r.as_ref(), def, &settings.root),
            Script::Hashed(script) => {
                let now = match script {
                    Ok(c) => Ok(c.as_ref().map(|c| c.pin.clone())),
                    Err(e) => Err(std::io::Error::other(e.clone())),
                };
                pins::check_script(r.as_ref(), def, &settings.root, now)
            }
        },
    };
    if warn
        && !scheduled
        && let Some(
            m @ (Mismatch::DefinitionChanged
            | Mismatch::ScriptChanged(_)
            | Mismatch::ScriptUnreadable { .. }),
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

/// What holds back every attempt of a firing: the kill switch, the pause, and for a scheduled one
/// an approval its files no longer match. `Some` is why, with the words that follow the reason.
pub fn held_back(
    state: &State,
    name: &Name,
    trigger: Trigger,
    installed: &Approval,
) -> Result<Option<(SkipReason, String)>, RunError> {
    if let Some(stop) = state.stopped()? {
        return Ok(Some((SkipReason::Stopped, format!(": {}", stop.reason))));
    }
    if let Some(p) = state.paused(name)? {
        return Ok(Some((SkipReason::Paused, format!(": {}", p.reason))));
    }
    if !trigger.unattended() {
        return Ok(None);
    }
    // What runs unattended is what was installed: nothing of a changed definition or script.
    Ok(installed.mismatch.as_ref().map(|m| {
        let reason = match m {
            Mismatch::NotInstalled => SkipReason::NotInstalled,
            Mismatch::DefinitionChanged => SkipReason::DefinitionChanged,
            Mismatch::ScriptChanged(_) | Mismatch::ScriptUnreadable { .. } => {
                SkipReason::ScriptChanged
            }
        };
        let words = m.words(name.as_str());
        let detail = format!(": {words}; approve it with make automations-install NAME={name}");
        (reason, detail)
    }))
}

/// What holds back a firing (its first attempt): [`held_back`], then for a scheduled firing the
/// login run and the daily slot.
pub fn why_not(
    log: &RunLog,
    state: &State,
    def: &Definition,
    cause: &super::cause::Cause,
    installed: &Approval,
) -> Result<Option<(SkipReason, String)>, RunError> {
    let name = &def.name;
    let trigger = cause.trigger;
    if let Some(why) = held_back(state, name, trigger, installed)? {
        return Ok(Some(why));
    }
    if trigger != Trigger::Schedule {
        return Ok(None);
    }
    // At login: the first scheduled firing since the session began (the user's manager started)
    // runs whatever slot it comes at; one that only runs at login skips the others.
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
    // One run per calendar slot (`daily_at`, `cron`): the slot this firing stands for.
    if let Some(schedule) = &def.schedule
        && schedule.slotted()
        && let Some(slot_at) = cause.slot
        && (schedule::slot_done(slot_at, None, installed.installed_at)
            || history::slot_ran(log, name.as_str(), slot_at))
    {
        return Ok(Some((SkipReason::SlotDone, String::new())));
    }
    Ok(None)
}

/// This firing's jitter delay: the one of its slot (an interval of awake time has none), whole
/// also when the firing comes late (a catch-up on wake waits as long, which is when many
/// automations fire at once).
pub fn jitter_wait(def: &Definition, slot: Option<chrono::DateTime<Utc>>) -> std::time::Duration {
    schedule::jitter_delay(def.name.as_str(), slot, def.jitter_seconds)
        .to_std()
        .unwrap_or_default()
}
