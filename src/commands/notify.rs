//! `automations notify test|look`, and the notification credentials of `automations secret`.

use anyhow::anyhow;

use super::data_root;
use super::fail::{CmdResult, Fail};
use super::keys::read_hidden;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::keys::{self, Secret};
use crate::names::{Driver, Label, Name};
use crate::notify::{self, drivers};
use crate::settings::Settings;

pub fn test(settings: &Settings) -> CmdResult {
    data_root(settings, Use::Read)?;
    let answers = notify::test(settings)?;
    if answers.is_empty() {
        return Err(Fail::new(
            Exit::Failure,
            anyhow!("notify.toml names no channel ([pushover], [ntfy], [webhook] or [email])"),
        ));
    }
    let mut failed = false;
    let cfg = notify::settings::load(&settings.data_root)?;
    for (driver, answer) in &answers {
        // A webhook's URL is often its secret: only its origin is ever said.
        let whom = match (driver, cfg.as_ref()) {
            (Driver::Webhook, Some(c)) => c.webhook.as_ref().map_or_else(
                || driver.to_string(),
                |w| format!("{driver} ({})", notify::settings::origin(&w.url)),
            ),
            (Driver::Email, Some(c)) => c.email.as_ref().map_or_else(
                || driver.to_string(),
                |e| format!("{driver} ({})", notify::email::Email::server(e)),
            ),
            _ => driver.to_string(),
        };
        let driver = &whom;
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
        crate::metrics::textfile::rewrite(settings);
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
    if report.snoozed > 0 {
        outln!(
            "{} snoozed automation(s) passed over: their news waits for the snooze's end",
            report.snoozed
        );
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

fn label(settings: &Settings, driver: Driver) -> Label {
    Label::notify(&settings.namespace, driver)
}

fn terminal() -> Result<(), Fail> {
    super::keys::require_terminal("secret store", "the credentials are")
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

/// A credential that is one key (ntfy's token, the webhook's signing key, the SMTP password), not
/// Pushover's pair:
/// the words `store` and `check` say of it.
struct SingleKey {
    prompt: &'static str,
    what: &'static str,
    without: &'static str,
}

fn single_key(driver: Driver) -> Option<SingleKey> {
    match driver {
        Driver::Ntfy => Some(SingleKey {
            prompt: "ntfy access token (input hidden): ",
            what: "an ntfy token",
            without: "; topics without one need none",
        }),
        Driver::Webhook => Some(SingleKey {
            prompt: "the webhook's signing key (input hidden): ",
            what: "a webhook signing key",
            without: "; a webhook with sign = true cannot be sent without one",
        }),
        Driver::Email => Some(SingleKey {
            prompt: "the SMTP password (input hidden): ",
            what: "an SMTP password",
            without: "; a server that wants a login ([email] user) gets no mail without one",
        }),
        Driver::Pushover => None,
    }
}

pub fn key_store(settings: &Settings, driver: Driver) -> CmdResult {
    terminal()?;
    let store = keys::for_settings(settings);
    let label = label(settings, driver);
    if let Some(SingleKey { prompt, what, .. }) = single_key(driver) {
        let key = secret(prompt)?;
        store
            .set(&label, &key)
            .map_err(|e| Fail::new(Exit::Failure, e))?;
        outln!("stored {what} as {label}");
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

pub fn key_check(settings: &Settings, driver: Driver) -> CmdResult {
    let store = keys::for_settings(settings);
    let label = label(settings, driver);
    if let Some(SingleKey { what, without, .. }) = single_key(driver) {
        return match store.get(&label) {
            Ok(Some(_)) => {
                outln!("{what} is stored as {label}");
                Ok(Exit::Success)
            }
            Ok(None) => {
                outln!("no such key is stored ({label}){without}");
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
            outln!(
                "no Pushover pair is stored; store one with `automations secret store notify.pushover`"
            );
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

pub fn key_delete(settings: &Settings, driver: Driver) -> CmdResult {
    super::keys::delete_item(settings, &label(settings, driver))
}
