//! `automations secret store|check|delete SCOPE` and `secret list`: one family for every secret,
//! each scope handed to the module that knows its checks (keys.rs for an automation's AnyType key,
//! notify.rs for the notification credentials, healthchecks.rs for its keys); and the spellings
//! this family replaced, which say the new command and exit 2.

use serde::Serialize;

use super::fail::CmdResult;
use crate::cli::{
    HealthchecksKey, HealthchecksKeyCommand, KeyCommand, NotifyKeyCommand, Scope, SecretCommand,
};
use crate::exit::Exit;
use crate::healthchecks::KeyKind;
use crate::keys::Place;
use crate::names::Driver;
use crate::settings::Settings;

pub fn secret(settings: &Settings, command: SecretCommand) -> CmdResult {
    match command {
        SecretCommand::Store { scope } => match scope {
            Scope::Automation(name) => super::keys::store(settings, &name),
            Scope::Notify(driver) => super::notify::key_store(settings, driver),
            Scope::Healthchecks(kind) => super::healthchecks::key_store(settings, kind),
        },
        SecretCommand::Check { scope } => match scope {
            Scope::Automation(name) => super::keys::check(settings, &name),
            Scope::Notify(driver) => super::notify::key_check(settings, driver),
            Scope::Healthchecks(kind) => super::healthchecks::key_check(settings, kind),
        },
        SecretCommand::Delete { scope } => match scope {
            Scope::Automation(name) => super::keys::delete(settings, &name),
            Scope::Notify(driver) => super::notify::key_delete(settings, driver),
            Scope::Healthchecks(kind) => super::healthchecks::key_delete(settings, kind),
        },
        SecretCommand::List { json } => list(settings, json),
    }
}

/// A spelling that moved: says the one to use (exit 2, bad input), doing nothing.
pub fn moved(old: &str, new: &str) -> Exit {
    errln!("automations {old} is now: automations {new}");
    Exit::BadInput
}

/// One line of `secret list`.
#[derive(Serialize)]
struct Row {
    scope: String,
    label: String,
    stored: Option<bool>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Listing<'a> {
    version: u32,
    kind: &'a str,
    store: &'a str,
    secrets: &'a [Row],
}

fn list(settings: &Settings, json: bool) -> CmdResult {
    super::data_root(settings, crate::fsutil::Use::Read)?;
    let place = Place::of(settings);
    let store = place.open();
    let mut scopes: Vec<Scope> = super::load_all(settings)?
        .definitions
        .into_iter()
        .filter(|d| d.anytype.is_some())
        .map(|d| Scope::Automation(d.name))
        .collect();
    scopes.extend(Scope::fixed());
    let rows: Vec<Row> = crate::secrets::ask(store.as_ref(), &settings.namespace, scopes)
        .into_iter()
        .map(|(scope, label, answer)| Row {
            scope: scope.to_string(),
            label: label.to_string(),
            stored: answer.as_ref().ok().copied(),
            error: answer.err().map(|e| e.to_string()),
        })
        .collect();
    let kept = place.describe();
    if json {
        let listing = Listing {
            version: 1,
            kind: place.kind(),
            store: &kept,
            secrets: &rows,
        };
        outln!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        outln!("secrets are kept in {kept}");
        let width = rows.iter().map(|r| r.scope.len()).max().unwrap_or(0);
        for r in &rows {
            let state = match (&r.stored, &r.error) {
                (Some(true), _) => "stored".to_owned(),
                (Some(false), _) => "-".to_owned(),
                (None, Some(e)) => format!("cannot tell: {e}"),
                (None, None) => "cannot tell".to_owned(),
            };
            outln!("  {:<width$}  {state}", r.scope);
        }
    }
    Ok(if rows.iter().any(|r| r.error.is_some()) {
        Exit::Failure
    } else {
        Exit::Success
    })
}

/// `key store|check|delete NAME`, the spelling before `secret`.
pub fn old_key(c: &KeyCommand) -> Exit {
    let (verb, name) = match c {
        KeyCommand::Store { name } => ("store", name),
        KeyCommand::Check { name } => ("check", name),
        KeyCommand::Delete { name } => ("delete", name),
    };
    moved(
        &format!("key {verb} {name}"),
        &format!("secret {verb} {name}"),
    )
}

/// `notify-key store|check|delete [--ntfy|--webhook|--email]`, the spelling before `secret`.
pub fn old_notify_key(c: &NotifyKeyCommand) -> Exit {
    let (verb, which) = match c {
        NotifyKeyCommand::Store(w) => ("store", w),
        NotifyKeyCommand::Check(w) => ("check", w),
        NotifyKeyCommand::Delete(w) => ("delete", w),
    };
    let flag = match which.driver() {
        Driver::Pushover => String::new(),
        d => format!(" --{d}"),
    };
    moved(
        &format!("notify-key {verb}{flag}"),
        &format!("secret {verb} notify.{}", which.driver()),
    )
}

/// `healthchecks key store|check|delete ping|api`, the spelling before `secret`.
pub fn old_healthchecks_key(c: &HealthchecksKeyCommand) -> Exit {
    let (verb, which) = match c {
        HealthchecksKeyCommand::Store { which } => ("store", which),
        HealthchecksKeyCommand::Check { which } => ("check", which),
        HealthchecksKeyCommand::Delete { which } => ("delete", which),
    };
    let word = match which {
        HealthchecksKey::Ping => KeyKind::Ping,
        HealthchecksKey::Api => KeyKind::Api,
    }
    .word();
    moved(
        &format!("healthchecks key {verb} {word}"),
        &format!("secret {verb} healthchecks.{word}"),
    )
}
