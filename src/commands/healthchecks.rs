//! `automations healthchecks sync|status|key`, and what pause, resume, stop-all, resume-all,
//! check, install and uninstall say of the remote checks.

use crate::exit::Exits as _;
use anyhow::anyhow;

use super::data_root;
use super::fail::{CmdResult, Fail};
use crate::cli::HealthchecksCommand;
use crate::exit::Exit;
use crate::fsutil::Use;
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

use hc::client as api;

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
    sync::apply_all(settings, &api, &plan, prune, |line, done| match done {
        Ok(done) => outln!("{}: {done}", line.who),
        Err(e) => {
            failed = true;
            outln!("{}: not done: {e}", line.who);
        }
    });
    // A check that cannot be (at login only) is said, and is no failure; a configured UUID the
    // server does not know is.
    let unable = plan.iter().any(|l| matches!(l.step, Step::Missing));
    Ok(if failed || unable {
        Exit::Failure
    } else {
        Exit::Success
    })
}

pub fn status(settings: &Settings, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let cfg = settings_needed(settings)?;
    let lines = hc::status::lines(settings, &cfg)?;
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
    let Some((_, watch)) = hc::installed::watched(settings, name) else {
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
    if hc::installed::watched(settings, name).is_some() {
        outln!("healthchecks: `automations healthchecks sync {name}` makes or updates its check");
    }
}

/// What uninstall says of the remote check, when `healthchecks.toml` exists.
pub fn uninstall_hint(settings: &Settings, name: &Name) {
    if let Some(line) = hc::installed::after_uninstall(settings, name) {
        outln!("healthchecks: {line}");
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
    match hc::validate::key(settings, &cfg, kind, &key) {
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
    match hc::validate::key(settings, &cfg, kind, &key) {
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
