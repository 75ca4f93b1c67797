//! `automations healthchecks sync|status|key`, and what pause, resume, stop-all, resume-all,
//! check, install and uninstall say of the remote checks.

use crate::exit::Exits as _;
use anyhow::anyhow;

use super::data_root;
use super::fail::{CmdResult, Fail};
use crate::cli::HealthchecksCommand;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::healthchecks::api::Api;
use crate::healthchecks::installed::{installed, wanted};
use crate::healthchecks::sync::{self, Step};
use crate::healthchecks::{self as hc, HcSettings, KeyKind, Watch};
use crate::keys::{self, Secret};
use crate::names::Name;
use crate::settings::Settings;

/// `healthchecks.toml`, which these commands need.
fn settings_needed(settings: &Settings) -> Result<HcSettings, Fail> {
    match hc::settings::load(&settings.data_root) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(Fail::new(
            Exit::BadInput,
            anyhow!(
                "no {} in {}: create it (an empty file uses hc-ping.com and healthchecks.io; see docs/healthchecks.md)",
                hc::settings::FILE,
                settings.data_root.display()
            ),
        )),
        Err(e) => Err(Fail::from(e)),
    }
}

use hc::{client as api, remote_checks};

/// `healthchecks …`: the subcommand `c`.
pub fn healthchecks_cmd(settings: &Settings, c: HealthchecksCommand) -> CmdResult {
    match c {
        HealthchecksCommand::Sync {
            name,
            dry_run,
            prune,
        } => sync(settings, name.as_ref(), dry_run, prune),
        HealthchecksCommand::Status { json } => status(settings, json),
        HealthchecksCommand::Key(_) => {
            unreachable!("the spelling secret replaced: commands::secrets")
        }
    }
}

pub fn sync(settings: &Settings, only: Option<&Name>, dry_run: bool, prune: bool) -> CmdResult {
    if prune && only.is_some() {
        return Err(Fail::new(
            Exit::BadInput,
            anyhow!("--prune looks at every check of the namespace: leave out the name"),
        ));
    }
    data_root(settings, Use::Read)?;
    let cfg = settings_needed(settings)?;
    let inst = installed(settings, &cfg, only).map_err(|e| Fail::new(e.exit(), e))?;
    if prune && !inst.invalid.is_empty() {
        // Which checks are orphans depends on what those definitions say: never guessed.
        return Err(Fail::new(
            Exit::BadInput,
            anyhow!(
                "--prune refused, nothing changed: {} invalid (automations validate says why); fix it and sync again",
                inst.invalid.join(", ")
            ),
        ));
    }
    let api = api(settings, &cfg).map_err(|e| Fail::new(Exit::Failure, anyhow!(e)))?;
    let wanted = wanted(settings, &cfg, &inst.defs);
    let plan = sync::plan(
        &api,
        &settings.namespace,
        &wanted,
        &inst.unreadable,
        only.is_none(),
    )
    .map_err(|e| Fail::new(Exit::Failure, anyhow!("cannot read the checks: {e}")))?;
    outln!("healthchecks sync ({}):", cfg.api_url);
    for line in &plan {
        outln!("  {}", line.words());
    }
    for name in &inst.event_only {
        outln!(
            "  {name}: no check: it is started only by its [trigger] (paths, chains), so there is no schedule to expect pings on"
        );
    }
    if plan.is_empty() && inst.event_only.is_empty() {
        outln!("  no scheduled automation is installed here");
    }
    if dry_run {
        outln!("dry run: nothing changed");
        return Ok(Exit::Success);
    }
    let mut failed = false;
    for line in plan.iter().filter(|l| l.is_drift()) {
        match sync::apply(&api, line, prune) {
            Ok(done) => {
                outln!("{}: {done}", line.who);
                if matches!(line.step, Step::Create(_) | Step::Update(..)) {
                    reset_streak(settings, &line.who);
                }
            }
            Err(e) => {
                failed = true;
                outln!("{}: not done: {e}", line.who);
            }
        }
    }
    // The checks that are there as they should be: their failed pings are history.
    for line in plan.iter().filter(|l| matches!(l.step, Step::InStep)) {
        reset_streak(settings, &line.who);
    }
    // A check that cannot be (at login only) is said, and is no failure; a configured UUID the
    // server does not know is.
    let unable = plan.iter().any(|l| matches!(l.step, Step::Missing));
    Ok(if failed || unable {
        Exit::Failure
    } else {
        Exit::Success
    })
}

/// One automation's line in `status`.
#[derive(serde::Serialize)]
struct StatusLine {
    name: String,
    /// The remote check's status (`new`, `up`, `grace`, `down`, `paused`), or `missing` / `off`, or
    /// `none` for one that runs only at login (sync makes no check for it).
    remote: String,
    last_ping: Option<String>,
    /// The local verdict (`health`).
    verdict: String,
    /// What came of this machine's last ping.
    last_sent: Option<String>,
    failures_in_row: u32,
}

pub fn status(settings: &Settings, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let cfg = settings_needed(settings)?;
    let defs = installed(settings, &cfg, None)
        .map_err(|e| Fail::new(e.exit(), e))?
        .defs;
    let (_, remote) = remote_checks(settings, &cfg)
        .map_err(|e| Fail::new(Exit::Failure, anyhow!("cannot read the checks: {e}")))?;
    let src = crate::health::load::Sources::read(settings, None)?;
    let verdicts = crate::health::load::verdicts(settings, &src, None)?;
    let mut lines = Vec::new();
    for d in &defs {
        let watch = hc::watch(&cfg, &settings.namespace, &d.name);
        let found = sync::find(&remote, &settings.namespace, &d.name, &watch).ours();
        let pings = crate::state::read_pings(&settings.data_root, &d.name)
            .ok()
            .flatten();
        lines.push(StatusLine {
            name: d.name.to_string(),
            remote: match (&watch, found) {
                (Watch::Off, _) => "off".into(),
                // As sync says: no check by design, not a missing one.
                (Watch::Slug(_), None)
                    if matches!(d.schedule, Some(crate::schedule::Schedule::AtLogin)) =>
                {
                    "none".into()
                }
                (_, Some(r)) => r.status.clone(),
                (_, None) => "missing".into(),
            },
            last_ping: found.and_then(|r| r.last_ping.clone()),
            verdict: verdicts.iter().find(|v| v.name == d.name.as_str()).map_or(
                "unknown".into(),
                |v| {
                    serde_json::to_value(v.verdict)
                        .ok()
                        .and_then(|j| j.as_str().map(str::to_owned))
                        .unwrap_or_default()
                },
            ),
            last_sent: pings
                .as_ref()
                .map(|p| format!("{} {}: {}", p.at, p.ping, p.answer)),
            failures_in_row: pings.map_or(0, |p| p.failures_in_row),
        });
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({"version": 1, "automations": lines})
        );
        return Ok(Exit::Success);
    }
    outln!(
        "{:<24} {:<8} {:<9} {:<26} LAST SENT FROM HERE",
        "NAME",
        "REMOTE",
        "LOCAL",
        "LAST PING SEEN"
    );
    for l in &lines {
        outln!(
            "{:<24} {:<8} {:<9} {:<26} {}{}",
            l.name,
            l.remote,
            l.verdict,
            l.last_ping.as_deref().unwrap_or("-"),
            l.last_sent.as_deref().unwrap_or("-"),
            if l.failures_in_row > 0 {
                format!(" ({} failed in a row)", l.failures_in_row)
            } else {
                String::new()
            }
        );
    }
    Ok(Exit::Success)
}

/// Pauses (or resumes) the remote check of `only`, or of every automation of the namespace, when
/// `healthchecks.toml` exists, and says what was done, or why not. Never fails the command: the
/// local pause is what the runner obeys.
pub fn follow_pause(settings: &Settings, only: Option<&Name>, pause: bool) {
    for line in hc::follow::follow(settings, only, pause) {
        outln!("{line}");
    }
}

/// After an install, when `healthchecks.toml` exists: its remote check is made (or brought in
/// step) now, so its first firing pings a check that is there; or why not, and the command that
/// makes it later.
pub fn after_install(settings: &Settings, name: &Name) {
    let Some((_, watch)) = watched(settings, name) else {
        return;
    };
    outln!(
        "healthchecks: its remote check is made now, as `automations healthchecks sync {name}` does:"
    );
    match sync(settings, Some(name), false, false) {
        Ok(Exit::Success) => {}
        Ok(_) => outln!(
            "healthchecks: not all done; see `automations healthchecks status`, then `automations healthchecks sync {name}`"
        ),
        Err(e) => outln!(
            "healthchecks: no check was made or checked ({}); `automations healthchecks sync {name}` does it later{}",
            crate::exit::chain_text(e.error.as_ref()),
            if matches!(watch, Watch::Slug(_)) {
                ", and until then its pings fail"
            } else {
                ""
            }
        ),
    }
}

/// For an automation an install found up to date: how to make or check its remote check (no
/// call is made without a change to install).
pub fn up_to_date_hint(settings: &Settings, name: &Name) {
    if watched(settings, name).is_some() {
        outln!("healthchecks: `automations healthchecks sync {name}` makes or updates its check");
    }
}

/// The Healthchecks settings and how `name` is watched, when `healthchecks.toml` exists and does
/// not switch it off.
fn watched(settings: &Settings, name: &Name) -> Option<(HcSettings, Watch)> {
    let cfg = hc::settings::load(&settings.data_root).ok().flatten()?;
    let watch = hc::watch(&cfg, &settings.namespace, name);
    (watch != Watch::Off).then_some((cfg, watch))
}

/// What uninstall says of the remote check, when `healthchecks.toml` exists.
pub fn uninstall_hint(settings: &Settings, name: &Name) {
    let Some((cfg, watch)) = watched(settings, name) else {
        return;
    };
    match remote_checks(settings, &cfg) {
        Ok((_, remote))
            if sync::find(&remote, &settings.namespace, name, &watch)
                .ours()
                .is_some() =>
        {
            outln!(
                "healthchecks: its remote check is left on the server (and will go down); delete it with `automations healthchecks sync --prune`"
            )
        }
        Ok(_) => outln!("healthchecks: it has no remote check"),
        Err(e) => {
            outln!("healthchecks: a remote check may be left on the server (not looked: {e})")
        }
    }
}

pub fn key_store(settings: &Settings, kind: KeyKind) -> CmdResult {
    super::keys::require_terminal("secret store", "the key is")?;
    data_root(settings, Use::Read)?;
    let cfg = settings_needed(settings)?;
    let key = Secret::new(super::keys::read_hidden(&format!(
        "Healthchecks {} key (input hidden): ",
        kind.word()
    ))?)
    .map_err(|e| Fail::new(Exit::BadInput, e))?;
    if !kind.well_formed(&key) {
        outln!(
            "not stored: a Healthchecks {} key is {} letters, digits, '-' or '_' (Project Settings shows it)",
            kind.word(),
            if kind == KeyKind::Ping { 22 } else { 32 }
        );
        return Ok(Exit::Failure);
    }
    outln!("checking the key with Healthchecks…");
    match validate(settings, &cfg, kind, &key) {
        Ok(said) => {
            keys::for_settings(settings)
                .set(&kind.label(&settings.namespace), &key)
                .map_err(|e| Fail::new(Exit::Failure, e))?;
            outln!(
                "stored the {} key as {}; {said}",
                kind.word(),
                kind.label(&settings.namespace)
            );
            Ok(Exit::Success)
        }
        Err(e) => {
            outln!("not stored: {e}");
            Ok(Exit::Failure)
        }
    }
}

/// What the server says of `key`. An API key lists the project's checks. A ping key has no call
/// of its own: it pings `/log` on a check of this namespace the API lists (a log entry, which
/// changes no status); with no such check, or no API key, only its form can be checked.
fn validate(
    settings: &Settings,
    cfg: &HcSettings,
    kind: KeyKind,
    key: &Secret,
) -> Result<String, String> {
    match kind {
        KeyKind::Api => {
            let api = Api::new(&cfg.api_url, key.clone()).map_err(|e| e.to_string())?;
            let checks = api
                .list(Some(&hc::tag(&settings.namespace)))
                .map_err(|e| e.to_string())?;
            Ok(format!(
                "Healthchecks accepts it ({} check(s) of this namespace)",
                checks.len()
            ))
        }
        KeyKind::Ping => {
            let remote = api(settings, cfg).and_then(|a| {
                a.list(Some(&hc::tag(&settings.namespace)))
                    .map_err(|e| e.to_string())
            });
            let slug = remote
                .ok()
                .and_then(|r| r.into_iter().map(|c| c.slug).find(|slug| !slug.is_empty()));
            let Some(slug) = slug else {
                return Ok(
                    "its form is right; no check of this namespace to prove it on yet (the first ping does: automations healthchecks status)"
                        .into(),
                );
            };
            let url = hc::ping::url(
                cfg,
                &Watch::Slug(slug.clone()),
                Some(key),
                hc::ping::Ping::Log,
                None,
            )
            .expect("a slug with a key has a URL");
            let deadline = std::time::Instant::now() + hc::ping::BOUND;
            let secrets = [key.expose()];
            let sent = hc::ping::send(
                &url,
                b"automations: checking the ping key",
                deadline,
                &secrets,
            );
            match sent {
                Ok(_) => Ok(format!("Healthchecks took a log ping to {slug} with it")),
                Err(e) if e.starts_with("refused: 404") => Err(format!(
                    "Healthchecks does not know {slug} under this ping key (404): is it the ping key of the project the API key belongs to?"
                )),
                Err(e) => Err(e),
            }
        }
    }
}

pub fn key_check(settings: &Settings, kind: KeyKind) -> CmdResult {
    data_root(settings, Use::Read)?;
    let cfg = settings_needed(settings)?;
    let key = match keys::for_settings(settings).get(&kind.label(&settings.namespace)) {
        Ok(Some(k)) => k,
        Ok(None) => {
            outln!(
                "no Healthchecks {} key is stored; store one with `automations secret store healthchecks.{}`",
                kind.word(),
                kind.word()
            );
            return Ok(Exit::Failure);
        }
        Err(e) => {
            return Err(Fail::new(
                Exit::Failure,
                anyhow!("cannot read the key: {e}"),
            ));
        }
    };
    match validate(settings, &cfg, kind, &key) {
        Ok(said) => {
            outln!("ok: {said}");
            Ok(Exit::Success)
        }
        Err(e) => {
            outln!("the stored {} key does not work: {e}", kind.word());
            Ok(Exit::Failure)
        }
    }
}

pub fn key_delete(settings: &Settings, kind: KeyKind) -> CmdResult {
    super::keys::delete_item(settings, &kind.label(&settings.namespace))
}

/// Forgets the failed pings of `who` (a line names an automation or a remote check).
fn reset_streak(settings: &Settings, who: &str) {
    if let Ok(name) = crate::names::Name::new(who) {
        let _ = crate::state::reset_ping_streak(&settings.data_root, &name);
    }
}
