//! `automations notify test|look` and `automations notify-key store|check|delete`.

use anyhow::anyhow;

use super::data_root;
use super::fail::{CmdResult, Fail};
use super::keys::read_hidden;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::keys::{self, Secret};
use crate::names::{Label, Name};
use crate::notify::{self, drivers};
use crate::settings::Settings;

pub fn test(settings: &Settings) -> CmdResult {
    data_root(settings, Use::Read)?;
    let answers = notify::test(settings)?;
    if answers.is_empty() {
        return Err(Fail::new(
            Exit::Failure,
            anyhow!("notify.toml names no driver that can be used (see the lines above)"),
        ));
    }
    let mut failed = false;
    for (driver, answer) in &answers {
        match answer {
            Ok(a) => outln!("{driver}: delivered ({a})"),
            Err(e) => {
                failed = true;
                outln!("{driver}: not delivered ({e})");
            }
        }
    }
    Ok(if failed { Exit::Failure } else { Exit::Success })
}

pub fn look(settings: &Settings, name: Option<&Name>) -> CmdResult {
    data_root(settings, Use::Write)?;
    // The hourly health-check's look also keeps the metrics textfile whole (docs/metrics.md).
    if name.is_none() {
        crate::metrics::textfile::refresh(settings, None);
    }
    let report = notify::look(settings, name, notify::LOOK_WAIT)?;
    if report.busy {
        errln!(
            "automations: notify look: another look held state/verdicts/.lock for {} s; this one is left to the next look",
            notify::LOOK_WAIT.as_secs()
        );
        return Ok(Exit::Success);
    }
    for (automation, driver, answer) in &report.deliveries {
        match answer {
            Ok(a) => outln!("{automation}: delivered through {driver} ({a})"),
            Err(e) => outln!(
                "{automation}: not delivered through {driver} ({e}); tried again at the next look"
            ),
        }
    }
    if report.held > 0 {
        outln!(
            "{} message(s) held for the end of the quiet hours",
            report.held
        );
    }
    for problem in &report.unreadable {
        errln!("automations: notify look: {problem}");
    }
    Ok(if report.unreadable.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

fn label(settings: &Settings, ntfy: bool) -> Label {
    Label::notify(&settings.namespace, if ntfy { "ntfy" } else { "pushover" })
}

fn terminal() -> Result<(), Fail> {
    super::keys::require_terminal("notify-key store", "the credentials are")
}

fn secret(prompt: &str) -> Result<Secret, Fail> {
    Secret::new(read_hidden(prompt)?).map_err(|e| Fail::new(Exit::BadInput, e))
}

/// What Pushover's validation answered, for people: its status and the account's devices and
/// licenses (never a credential).
fn validate(pair: &drivers::PushoverPair) -> Result<String, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    drivers::validate_pushover(&drivers::pushover_api(&env), pair)
}

pub fn key_store(settings: &Settings, ntfy: bool) -> CmdResult {
    terminal()?;
    let store = keys::for_settings(settings);
    let label = label(settings, ntfy);
    if ntfy {
        let token = secret("ntfy access token (input hidden): ")?;
        store
            .set(&label, &token)
            .map_err(|e| Fail::new(Exit::Failure, e))?;
        outln!("stored the ntfy token as {label}");
        return Ok(Exit::Success);
    }
    let pair = drivers::PushoverPair {
        user: secret("Pushover user key (input hidden): ")?,
        token: secret("Pushover API token (input hidden): ")?,
    };
    outln!("checking the pair with Pushover (nothing is sent)…");
    match validate(&pair) {
        Ok(answer) => {
            let item = pair.to_secret().map_err(|e| Fail::new(Exit::BadInput, e))?;
            store
                .set(&label, &item)
                .map_err(|e| Fail::new(Exit::Failure, e))?;
            outln!("stored the Pushover pair as {label}; Pushover answered {answer}");
            Ok(Exit::Success)
        }
        Err(e) => {
            outln!("not stored: Pushover did not accept the pair ({e})");
            Ok(Exit::Failure)
        }
    }
}

pub fn key_check(settings: &Settings, ntfy: bool) -> CmdResult {
    let store = keys::for_settings(settings);
    let label = label(settings, ntfy);
    if ntfy {
        return match store.get(&label) {
            Ok(Some(_)) => {
                outln!("an ntfy token is stored as {label}");
                Ok(Exit::Success)
            }
            Ok(None) => {
                outln!("no ntfy token is stored ({label}); topics without one need none");
                Ok(Exit::Failure)
            }
            Err(e) => Err(Fail::new(
                Exit::Failure,
                anyhow!("cannot read {label}: {e}"),
            )),
        };
    }
    let env = |_: &str| None;
    let pair = match drivers::PushoverPair::find(&env, store.as_ref(), &settings.namespace) {
        Ok(Some(p)) => p,
        Ok(None) => {
            outln!("no Pushover pair is stored; store one with `automations notify-key store`");
            return Ok(Exit::Failure);
        }
        Err(e) => return Err(Fail::new(Exit::Failure, anyhow!(e))),
    };
    match validate(&pair) {
        Ok(answer) => {
            outln!("ok: Pushover accepts the stored pair ({answer})");
            Ok(Exit::Success)
        }
        Err(e) => {
            outln!("Pushover does not accept the stored pair ({e}); store a new one");
            Ok(Exit::Failure)
        }
    }
}

pub fn key_delete(settings: &Settings, ntfy: bool) -> CmdResult {
    super::keys::delete_item(settings, &label(settings, ntfy))
}
