//! Chains (docs/triggers.md): once a firing's end is on disk, the automations that follow it
//! (`after_success`, `after_failure`) are started through their own units, so each runs with its
//! own lock, pins, pause, key gate and timeout. One that cannot be started is a recorded skip.

use chrono::Utc;

use crate::definition::{self, ChainIndex, Checks, Definition};
use crate::layout::Layout;
use crate::locks;
use crate::names::{Label, Name};
use crate::runlog::{Event, Finished, Outcome, RunLog, SkipReason, Skipped, Trigger, Upstream};
use crate::settings::Settings;
use crate::state::State;

/// Starts every automation that follows `def`'s firing, which ended in `finished` (a stop
/// starts none). Each failure is said on stderr and, where the follower would have run,
/// recorded as its skip; none changes this firing's outcome.
pub fn start_followers(settings: &Settings, log: &RunLog, def: &Definition, finished: &Finished) {
    let ok = match finished.outcome {
        Outcome::Ok => true,
        Outcome::Failed | Outcome::Timeout => false,
        Outcome::Stopped => return,
    };
    let followers = followers(settings, &def.name, ok);
    if followers.is_empty() {
        return;
    }
    // Whoever follows reads an end that is on disk.
    if let Err(e) = log.sync_data_only() {
        errln!(
            "automations: {}: its end could not be synced before its chain: {e}",
            def.name
        );
    }
    let upstream = Upstream {
        name: def.name.to_string(),
        run: finished.firing().to_owned(),
        outcome: finished.outcome,
    };
    let manager = crate::service::for_manager(settings.manager);
    for name in followers {
        if let Err(why) = start_one(settings, manager.as_ref(), log, &name, &upstream) {
            errln!(
                "automations: {}: {name} follows it but did not start: {why}",
                def.name
            );
        }
    }
}

/// Starts `name`'s unit for `upstream`, or records why it did not.
fn start_one(
    settings: &Settings,
    manager: &dyn crate::service::ServiceManager,
    log: &RunLog,
    name: &Name,
    upstream: &Upstream,
) -> Result<(), String> {
    let skip = |reason: SkipReason| {
        let skipped = Skipped {
            trigger: Trigger::After,
            reason,
            after: Some(upstream.clone()),
            held_by: None,
            slot: None,
        };
        log.append(name.as_str(), Event::Skipped(skipped), Utc::now())
            .map_err(|e| format!("its skip could not be recorded: {e}"))
    };
    let installed = State::new(&settings.data_root)
        .install_record(name)
        .ok()
        .flatten()
        .is_some();
    if !installed {
        skip(SkipReason::NotInstalled)?;
        return Err(format!(
            "it is not installed (make automations-install NAME={name})"
        ));
    }
    // Busy: the manager would fold this start into the running one, and nothing would say so.
    // Looked at without taking its lock, which a firing of its own starting now would meet.
    if locks::holder(&settings.data_root, name).is_some() {
        skip(SkipReason::AlreadyRunning)?;
        return Err("it is still running its previous firing".into());
    }
    let layout = Layout::new(&settings.data_root);
    crate::runner::cause::leave_request(&layout, name, upstream)
        .map_err(|e| format!("cannot leave its request: {}", crate::exit::chain_text(&e)))?;
    let label = Label::new(&settings.namespace, name);
    manager.start(&label).map_err(|e| {
        let _ = crate::fsutil::remove_if_exists(&layout.chain_request(name));
        let _ = skip(SkipReason::NotInstalled);
        crate::exit::chain_text(&e)
    })
}

/// The automations whose `[trigger]` follows `upstream` ending ok (or not), by name: from the index
/// of who follows whom (`state/chains.json`), one small read whatever the number of definitions.
/// A data root without one (installed by an older version) gets it once, from the definitions.
fn followers(settings: &Settings, upstream: &Name, ok: bool) -> Vec<Name> {
    let state = State::new(&settings.data_root);
    if let Ok(Some(index)) = state.chains() {
        return index.followers(upstream.as_str(), ok).to_vec();
    }
    let Ok(loaded) = definition::load_all(&settings.definitions_dir(), &Checks::of(settings))
    else {
        return Vec::new();
    };
    let index = ChainIndex::of_definitions(&loaded.definitions);
    if let Err(e) = state.write_chains(&index) {
        errln!("automations: {}", crate::exit::chain_text(&e));
    }
    index.followers(upstream.as_str(), ok).to_vec()
}
