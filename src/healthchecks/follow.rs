//! A pause, a resume, the kill switch and its release, followed on the remote checks: whoever
//! pauses (the command line or the dashboard), the check of a paused automation is paused too,
//! so Healthchecks does not call it down. Only when `healthchecks.toml` exists and the API key can
//! be read; the local pause is what the runner obeys, so nothing here ever fails the pause.

use super::api::Remote;
use super::{HcSettings, sync};
use crate::names::Name;
use crate::settings::Settings;
use crate::state::State;

/// Pauses (`pause`) or resumes the remote check of `only`, or of every automation of the
/// namespace; one line for people per check (or why none was), each starting `healthchecks:`.
/// Nothing when there is no `healthchecks.toml`.
pub fn follow(settings: &Settings, only: Option<&Name>, pause: bool) -> Vec<String> {
    let Ok(Some(cfg)) = super::settings::load(&settings.data_root) else {
        return Vec::new();
    };
    let verb = if pause { "paused" } else { "resumed" };
    let (api, remote) = match super::remote_checks(settings, &cfg) {
        Ok(r) => r,
        Err(e) => {
            return vec![format!(
                "healthchecks: the remote check(s) were not {verb}: {e}"
            )];
        }
    };
    let targets = targets(settings, &cfg, &remote, only, pause);
    if targets.is_empty() {
        return vec![format!("healthchecks: no remote check to be {verb}")];
    }
    targets
        .into_iter()
        .filter_map(|(who, r)| {
            let id = r.uuid.as_ref()?;
            let done = if pause { api.pause(id) } else { api.resume(id) };
            Some(match done {
                Ok(()) => format!("healthchecks: {who}: remote check {verb}"),
                Err(e) => format!("healthchecks: {who}: remote check not {verb}: {e}"),
            })
        })
        .collect()
}

/// The checks to pause or resume, with whose they are. `resume-all` leaves the checks of
/// automations paused one by one paused.
fn targets<'r>(
    settings: &Settings,
    cfg: &HcSettings,
    remote: &'r [Remote],
    only: Option<&Name>,
    pause: bool,
) -> Vec<(String, &'r Remote)> {
    let ours = |n: &Name| {
        sync::find(
            remote,
            &settings.namespace,
            n,
            &super::watch(cfg, &settings.namespace, n),
        )
        .ours()
    };
    match only {
        Some(n) => ours(n).map(|r| (n.to_string(), r)).into_iter().collect(),
        None => {
            let paused: Vec<&Remote> = if pause {
                Vec::new()
            } else {
                State::new(&settings.data_root)
                    .paused_names()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(ours)
                    .collect()
            };
            remote
                .iter()
                .filter(|r| r.has_tag(&super::tag(&settings.namespace)))
                .filter(|r| !paused.iter().any(|p| std::ptr::eq(*p, *r)))
                .map(|r| (r.slug.clone(), r))
                .collect()
        }
    }
}
