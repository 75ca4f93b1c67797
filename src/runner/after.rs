//! After `finished` or `skipped` (docs/running.md): auto-pause (docs/health.md), the notification
//! look (docs/health.md), the metrics textfile (docs/metrics.md), and for a person's run what
//! health says of its time.
//!
//! None ever changes the run's recorded outcome or its exit status: a failure prints one line on
//! stderr (which the journal or launchd's log keeps) and is otherwise ignored. All stay off a good
//! run's path unless asked for: auto-pause reads history only when an outbound run failed, the look
//! happens only when notifications are configured, the textfile only when `metrics.toml` names one.

use crate::control;
use crate::definition::Definition;
use crate::health::load::{Assessment, Sources, assess};
use crate::runlog::{By, Finished, Outcome};
use crate::settings::Settings;
use crate::state::State;

/// What happened after the run, for its summary line.
#[derive(Debug, Default)]
pub struct After {
    /// The automation was paused automatically, with this reason.
    pub auto_paused: Option<String>,
    /// What health's rules about a run's time say of this very run, with their figures ("run too
    /// short: ran 1.0 s, usually 20 s"), for a person's run: its summary line says it too.
    pub of_this_run: Vec<String>,
}

/// The checks after a run of `def` that ended in `finished`. What they read (this one definition,
/// the index, the thresholds) is read once, and only when one of them is due.
pub fn after_run(settings: &Settings, def: &Definition, finished: &Finished) -> After {
    let mut after = After::default();
    let pause_check = def.outbound && finished.outcome != Outcome::Ok;
    let look = crate::notify::enabled(settings);
    // A person waits for the summary line anyway: it carries what health says of the run's time.
    let person = matches!(
        finished.trigger,
        Some(crate::runlog::Trigger::Manual | crate::runlog::Trigger::Dashboard)
    );
    let textfile = match crate::metrics::textfile::Textfile::of(settings) {
        Ok(t) => t,
        Err(e) => {
            errln!("automations: metrics: {e}");
            None
        }
    };
    if !pause_check && !look && textfile.is_none() && !person {
        return after;
    }
    let src = match Sources::of(settings, def.clone()) {
        Ok(src) => src,
        Err(e) => {
            errln!(
                "automations: {}: cannot read its health: {why}",
                def.name,
                why = crate::exit::chain_text(&e)
            );
            return after;
        }
    };
    if pause_check {
        match auto_pause(settings, &src, def) {
            Ok(p) => after.auto_paused = p,
            Err(e) => errln!(
                "automations: {}: the auto-pause check failed: {why}",
                def.name,
                why = crate::exit::chain_text(&e)
            ),
        }
    }
    if person {
        after.of_this_run = of_this_run(settings, &src, def);
    }
    if look {
        look_at(settings, &src, &def.name, "run");
    }
    if let Some(file) = textfile {
        update_textfile(settings, &file, &src, &def.name);
    }
    after
}

/// What the slow and too-short rules say of `def`'s latest run, each with its figures.
fn of_this_run(settings: &Settings, src: &Sources, def: &Definition) -> Vec<String> {
    use crate::health::Rule;
    let Ok(Assessment { verdicts, .. }) = assess(settings, src, Some(&def.name)) else {
        return Vec::new();
    };
    verdicts
        .iter()
        .flat_map(|v| &v.reasons)
        .filter(|r| matches!(r.rule, Rule::TooShort | Rule::Slow))
        .map(|r| format!("{}: {}", r.rule.words(), r.detail))
        .collect()
}

/// The notification look at `name` after its run or skip (`what`); a problem is one line.
fn look_at(settings: &Settings, src: &Sources, name: &crate::names::Name, what: &str) {
    match crate::notify::look_at(settings, src, Some(name), crate::notify::RUNNER_WAIT) {
        Ok(report) if report.busy => errln!(
            "automations: {name}: another notification look is under way; this {what} is left to the next look"
        ),
        Ok(report) => {
            for problem in &report.unreadable {
                errln!("automations: notifications: {problem}");
            }
        }
        Err(e) => errln!(
            "automations: {name}: notifications: {why}",
            why = crate::exit::chain_text(&e)
        ),
    }
}

/// `name`'s samples now into the metrics textfile; a problem is one line.
fn update_textfile(
    settings: &Settings,
    file: &crate::metrics::textfile::Textfile,
    src: &Sources,
    name: &crate::names::Name,
) {
    if let Err(e) = crate::metrics::textfile::update_from(settings, file, src, name) {
        errln!(
            "automations: {name}: metrics: {why}",
            why = crate::exit::chain_text(&e)
        );
    }
}

/// After a skipped firing of `name`: the notification look (when notifications are configured)
/// and the metrics textfile (when `metrics.toml` names one), from one read of its health.
pub fn after_skip(settings: &Settings, name: &crate::names::Name) {
    let look = crate::notify::enabled(settings);
    if !look {
        crate::metrics::textfile::after_skip(settings, name);
        return;
    }
    let src = match Sources::read(settings, Some(name)) {
        Ok(src) => src,
        Err(e) => {
            errln!(
                "automations: {name}: cannot read its health: {why}",
                why = crate::exit::chain_text(&e)
            );
            crate::metrics::textfile::after_skip(settings, name);
            return;
        }
    };
    look_at(settings, &src, name, "skip");
    match crate::metrics::textfile::Textfile::of(settings) {
        Ok(Some(file)) => update_textfile(settings, &file, &src, name),
        Ok(None) => {}
        Err(e) => errln!("automations: metrics: {e}"),
    }
}

/// Why the look after a run could not tell whether to pause, or could not pause.
#[derive(Debug, thiserror::Error)]
enum AutoPauseError {
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(transparent)]
    Load(#[from] crate::health::load::LoadError),
    #[error(transparent)]
    Pause(#[from] control::ControlError),
}

/// Pauses `def`'s automation when its failures in a row since the last resume reach
/// `auto_pause_after`. Returns the reason when it did.
fn auto_pause(
    settings: &Settings,
    src: &Sources,
    def: &Definition,
) -> Result<Option<String>, AutoPauseError> {
    let name = &def.name;
    if State::new(&settings.data_root).paused(name)?.is_some() {
        return Ok(None);
    }
    let Assessment { verdicts, .. } = assess(settings, src, Some(name))?;
    let Some(v) = verdicts.first() else {
        return Ok(None);
    };
    let streak = v.figures.streak;
    if streak < src.thresholds.of(name.as_str()).auto_pause_after {
        return Ok(None);
    }
    let reason = format!(
        "auto-paused: {streak} failures in a row ({}). Fix the cause, then resume",
        v.figures.streak_kinds.join(", ")
    );
    control::pause(settings, name, By::Auto, &reason)?;
    Ok(Some(reason))
}
