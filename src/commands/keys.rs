//! An automation's AnyType key (`automations secret store|check|delete NAME`): parsing and printing
//! around `keys` and `gate`.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::anyhow;

use super::fail::{CmdResult, Fail};
use super::one_definition;
use crate::anytype::gate;
use crate::definition::AnyTypeAccess;
use crate::exit::Exit;
use crate::keys::{self, Secret};
use crate::names::Name;
use crate::settings::Settings;

fn access(settings: &Settings, name: &Name) -> Result<AnyTypeAccess, Fail> {
    let def = one_definition(settings, name)?;
    def.anytype.ok_or_else(|| {
        Fail::new(
            Exit::BadInput,
            anyhow!("{name} does not declare [anytype], so it needs no key (and never reads one)"),
        )
    })
}

/// Reads one line from the terminal with echo off, restoring the terminal whatever happens.
/// Refuses `command` unless stdin and stdout are a terminal, where `what` ("the key is") is
/// typed hidden.
pub(crate) fn require_terminal(command: &str, what: &str) -> Result<(), Fail> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Fail::new(
            Exit::BadInput,
            anyhow!(
                "{command} needs a terminal: {what} typed or pasted there, hidden, and never passed on a command line"
            ),
        ));
    }
    Ok(())
}

pub(crate) fn read_hidden(prompt: &str) -> Result<String, Fail> {
    let mut line = String::new();
    let read = crate::platform::without_echo(|| {
        out!("{prompt}");
        std::io::stdout().flush()?;
        std::io::stdin().lock().read_line(&mut line)
    })
    .map_err(|e| Fail::new(Exit::Failure, anyhow!("cannot hide the input: {e}")))?;
    outln!();
    read?;
    Ok(line)
}

pub fn store(settings: &Settings, name: &Name) -> CmdResult {
    let access = access(settings, name)?;
    super::data_root(settings, crate::fsutil::Use::Read)?;
    let label = settings.label(name);
    require_terminal("secret store", "the key is")?;
    let key = Secret::new(read_hidden(&format!(
        "AnyType key for {label} (input hidden): "
    ))?)
    .map_err(|e| Fail::new(Exit::BadInput, e))?;
    outln!("checking the key with AnyType…");
    match gate::verify_key(
        &key,
        &access,
        crate::anytype::gate::Policy::of(settings),
        crate::anytype::DEADLINE,
    ) {
        Ok(declared) => {
            keys::for_settings(settings)
                .set(&label, &key)
                .map_err(|e| Fail::new(Exit::Failure, e))?;
            let spaces: Vec<&str> = declared.spaces.iter().map(|(n, _)| n.as_str()).collect();
            outln!(
                "stored the key of {label}: it grants exactly {} on {}",
                declared.permission,
                spaces.join(", ")
            );
            Ok(Exit::Success)
        }
        Err(refusal) => {
            outln!("not stored: the key does not match the declaration of {name}:");
            for d in &refusal.0 {
                outln!("  - {d}");
            }
            Ok(Exit::Failure)
        }
    }
}

pub fn check(settings: &Settings, name: &Name) -> CmdResult {
    let access = access(settings, name)?;
    super::data_root(settings, crate::fsutil::Use::Read)?;
    let label = settings.label(name);
    let key = match keys::for_settings(settings).get(&label) {
        Ok(Some(k)) => k,
        Ok(None) => {
            outln!(
                "no key is stored for {label}; store one with `automations secret store {name}`"
            );
            return Ok(Exit::Failure);
        }
        Err(e) => {
            return Err(Fail::new(
                Exit::Failure,
                anyhow!("cannot read the key of {label}: {e}"),
            ));
        }
    };
    let i = match gate::inspect(
        &key,
        &access,
        crate::anytype::gate::Policy::of(settings),
        crate::anytype::DEADLINE,
    ) {
        Ok(i) => i,
        Err(refusal) => {
            outln!("cannot check the key of {label}:");
            for d in &refusal.0 {
                outln!("  - {d}");
            }
            return Ok(Exit::Failure);
        }
    };
    let k = &i.whoami.key;
    let declared: Vec<String> = i
        .declared
        .spaces
        .iter()
        .map(|(n, id)| format!("{n} ({id})"))
        .collect();
    let reached: Vec<String> = k
        .spaces
        .iter()
        .map(|g| format!("{} ({})", g.id, g.permission))
        .collect();
    outln!(
        "declared  {} on {}",
        i.declared.permission,
        declared.join(", ")
    );
    outln!(
        "key       {} {}{}, {}, expires {}",
        k.kind,
        if k.scoped { "scoped" } else { "unscoped" },
        if k.all_spaces { ", all spaces" } else { "" },
        k.permission,
        k.expires_at
            .map_or_else(|| "never".to_owned(), |t| t.to_rfc3339())
    );
    outln!(
        "reaches   {}",
        if reached.is_empty() {
            "no space".to_owned()
        } else {
            reached.join(", ")
        }
    );
    if i.differences.is_empty() {
        outln!("ok: the stored key grants exactly what {name} declares");
        return Ok(Exit::Success);
    }
    outln!("differences:");
    for d in &i.differences {
        outln!("  - {d}");
    }
    Ok(Exit::Failure)
}

pub fn delete(settings: &Settings, name: &Name) -> CmdResult {
    delete_item(settings, &settings.label(name))
}

/// Deletes the keychain item `label` (an automation's key, a notification credential), saying
/// whether there was one.
pub(super) fn delete_item(settings: &Settings, label: &crate::names::Label) -> CmdResult {
    match keys::for_settings(settings).delete(label) {
        Ok(true) => outln!("deleted the keychain item {label}"),
        Ok(false) => outln!("nothing was stored as {label}"),
        Err(e) => {
            return Err(Fail::new(
                Exit::Failure,
                anyhow!("cannot delete the keychain item {label}: {e}"),
            ));
        }
    }
    Ok(Exit::Success)
}
