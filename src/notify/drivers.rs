//! The notification drivers behind one trait: Pushover, ntfy and a webhook, over reqwest + rustls
//! with a 10 s deadline, no redirect followed and at most 4 KiB of an answer read; and email, over
//! SMTP with TLS (docs/health.md). Credentials come from the environment (a manual override), else the
//! keychain — a scheduled run's environment is PATH only, so the keychain is what makes it able to
//! notify at all. A credential never appears in an error, a log or an argument.

use std::time::Duration;

use super::channel::{MESSAGE_MAX, Notifier, TITLE_MAX, cut};
use super::{Message, NotifySettings};
use crate::keys::{KeyError, KeyStore, Secret};
use crate::names::{Driver, Label, Namespace};

/// The deadline of every delivery of one look together (and of a test message).
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The most of a service's answer that is read.
pub const ANSWER_MAX: u64 = 4 * 1024;
/// Pushover's API (`AUTOMATIONS_PUSHOVER_URL` points elsewhere: a test server, a proxy).
pub const PUSHOVER_API: &str = "https://api.pushover.net";
pub const ENV_PUSHOVER_API: &str = "AUTOMATIONS_PUSHOVER_URL";
pub const ENV_PUSHOVER_USER: &str = "PUSHOVER_USER_KEY";
pub const ENV_PUSHOVER_TOKEN: &str = "PUSHOVER_API_TOKEN";
pub const ENV_NTFY_TOKEN: &str = "NTFY_TOKEN";
/// The webhook's signing key, when not from the keychain.
pub const ENV_WEBHOOK_SECRET: &str = "AUTOMATIONS_WEBHOOK_SECRET";
/// The SMTP password, when not from the keychain.
pub const ENV_SMTP_PASSWORD: &str = "AUTOMATIONS_SMTP_PASSWORD";
/// The header that carries a webhook body's signature: `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "X-Automations-Signature";

/// What a driver may need to be made: the environment (a manual override), the keychain, the
/// namespace its items are named in, and `notify.toml`.
pub struct Setup<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub keys: &'a dyn KeyStore,
    pub namespace: &'a Namespace,
    pub settings: &'a NotifySettings,
}

impl Setup<'_> {
    /// A driver's one-key credential: `var` from the environment (a manual override), else the
    /// keychain's `local.<namespace>.notify.<driver>`; `None` when neither holds one. `what` names
    /// it in errors, which never hold its value.
    fn credential(&self, var: &str, driver: Driver, what: &str) -> Result<Option<Secret>, String> {
        match (self.env)(var) {
            Some(v) => Secret::new(v).map(Some).map_err(|e| format!("{var}: {e}")),
            None => self
                .keys
                .get(&Label::notify(self.namespace, driver))
                .map_err(|e| format!("{what}: the keychain: {e}")),
        }
    }
}

/// A kind of driver `notify.toml` can name: a new driver is one more [`Notifier`] and one more
/// entry in [`KINDS`].
pub struct Kind {
    /// Which driver.
    pub name: Driver,
    /// Whether `notify.toml` asks for it.
    pub configured: fn(&NotifySettings) -> bool,
    /// The driver with its credentials, or why it cannot be had now.
    pub make: fn(&Setup) -> Result<Box<dyn Notifier>, String>,
}

/// Every driver.
pub const KINDS: &[Kind] = &[
    Kind {
        name: Driver::Pushover,
        configured: |c| c.pushover,
        make: make_pushover,
    },
    Kind {
        name: Driver::Ntfy,
        configured: |c| c.ntfy.is_some(),
        make: make_ntfy,
    },
    Kind {
        name: Driver::Webhook,
        configured: |c| c.webhook.is_some(),
        make: make_webhook,
    },
    Kind {
        name: Driver::Email,
        configured: |c| c.email.is_some(),
        make: make_email,
    },
];

/// Email, with the password when the server wants a login: one that wants it but has none
/// cannot be had (the server would refuse every message).
fn make_email(s: &Setup) -> Result<Box<dyn Notifier>, String> {
    let settings = s
        .settings
        .email
        .clone()
        .ok_or("no [email] in notify.toml")?;
    let password = match &settings.user {
        None => None,
        Some(_) => Some(s.credential(ENV_SMTP_PASSWORD, Driver::Email, "the SMTP password").and_then(
            |p| p.ok_or_else(|| "the SMTP server wants a login (user) but no password is stored (automations secret store notify.email, or AUTOMATIONS_SMTP_PASSWORD)".to_owned()),
        )?),
    };
    Ok(Box::new(super::email::Email::new(
        settings,
        password,
        super::host(),
        s.namespace.to_string(),
    )?))
}

/// The webhook, with its signing key when its bodies are signed; one to be signed without a key
/// cannot be had (an unsigned body would be refused by a receiver that checks, or worse, taken
/// by one that does not).
fn make_webhook(s: &Setup) -> Result<Box<dyn Notifier>, String> {
    let w = s
        .settings
        .webhook
        .clone()
        .ok_or("no [webhook] in notify.toml")?;
    let key = if w.sign {
        Some(s.credential(ENV_WEBHOOK_SECRET, Driver::Webhook, "the webhook's signing key").and_then(
            |k| k.ok_or_else(|| "the webhook is to be signed but has no key (automations secret store notify.webhook, or AUTOMATIONS_WEBHOOK_SECRET)".to_owned()),
        )?)
    } else {
        None
    };
    Ok(Box::new(Webhook {
        url: w.url,
        format: w.format,
        key,
        namespace: s.namespace.to_string(),
    }))
}

fn make_pushover(s: &Setup) -> Result<Box<dyn Notifier>, String> {
    match PushoverPair::find(s.env, s.keys, s.namespace) {
        Ok(Some(pair)) => Ok(Box::new(Pushover {
            api: pushover_api(s.env),
            pair,
        })),
        Ok(None) => Err(
            "Pushover is configured but has no credentials (automations secret store notify.pushover)".into(),
        ),
        Err(e) => Err(format!("Pushover credentials: {e}")),
    }
}

/// ntfy: a token is optional, so a keychain that cannot be read is said and the message goes
/// without one (a topic that needs it answers 401, and the message waits for the next look).
fn make_ntfy(s: &Setup) -> Result<Box<dyn Notifier>, String> {
    let url = s.settings.ntfy.clone().unwrap_or_default();
    let token = match (s.env)(ENV_NTFY_TOKEN) {
        Some(t) => Secret::new(t).ok(),
        None => Ntfy::token(s.keys, s.namespace).unwrap_or_else(|e| {
            errln!("automations: the ntfy token: {e}");
            None
        }),
    };
    Ok(Box::new(Ntfy { url, token }))
}

fn client(time: Duration) -> Result<reqwest::blocking::Client, String> {
    reqwest::blocking::Client::builder()
        .timeout(time)
        .connect_timeout(time)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
}

/// Why a call got no answer, without the URL (it may hold a topic name that is a secret).
fn no_answer(e: &reqwest::Error) -> String {
    let class = crate::http::classify(e);
    format!("no answer ({})", class.as_str())
}

/// The Pushover user key and application token.
pub struct PushoverPair {
    pub user: Secret,
    pub token: Secret,
}

impl PushoverPair {
    /// The pair as one keychain item: `user:token`.
    pub fn to_secret(&self) -> Result<Secret, KeyError> {
        Secret::new(format!("{}:{}", self.user.expose(), self.token.expose()))
    }

    fn from_secret(s: &Secret) -> Option<Self> {
        let (u, t) = s.expose().split_once(':')?;
        Some(Self {
            user: Secret::new(u.to_owned()).ok()?,
            token: Secret::new(t.to_owned()).ok()?,
        })
    }

    /// From `PUSHOVER_USER_KEY` and `PUSHOVER_API_TOKEN`, else the keychain.
    pub fn find(
        env: &dyn Fn(&str) -> Option<String>,
        keys: &dyn KeyStore,
        namespace: &Namespace,
    ) -> Result<Option<Self>, String> {
        if let (Some(u), Some(t)) = (env(ENV_PUSHOVER_USER), env(ENV_PUSHOVER_TOKEN)) {
            return Ok(Some(Self {
                user: Secret::new(u).map_err(|_| format!("{ENV_PUSHOVER_USER} is not a key"))?,
                token: Secret::new(t).map_err(|_| format!("{ENV_PUSHOVER_TOKEN} is not a key"))?,
            }));
        }
        match keys.get(&Label::notify(namespace, Driver::Pushover)) {
            Ok(Some(s)) => Self::from_secret(&s)
                .map(Some)
                .ok_or_else(|| "the stored Pushover pair is not user:token; store it again".into()),
            Ok(None) => Ok(None),
            Err(e) => Err(format!("the keychain: {e}")),
        }
    }
}

/// The Pushover API base.
pub fn pushover_api(env: &dyn Fn(&str) -> Option<String>) -> String {
    env(ENV_PUSHOVER_API).unwrap_or_else(|| PUSHOVER_API.into())
}

/// Pushover.
pub struct Pushover {
    pub api: String,
    pub pair: PushoverPair,
}

impl Notifier for Pushover {
    fn name(&self) -> Driver {
        Driver::Pushover
    }

    fn send(&self, m: &Message, time: Duration) -> Result<String, String> {
        let url = format!("{}/1/messages.json", self.api.trim_end_matches('/'));
        let response = client(time)?
            .post(url)
            .form(&[
                ("token", self.pair.token.expose()),
                ("user", self.pair.user.expose()),
                ("title", cut(&m.title, TITLE_MAX).as_str()),
                ("message", cut(&m.body, MESSAGE_MAX).as_str()),
            ])
            .send()
            .map_err(|e| no_answer(&e))?;
        answered(response)
    }
}

/// What Pushover says of a pair: `users/validate.json`, which sends nothing.
pub fn validate_pushover(api: &str, pair: &PushoverPair) -> Result<String, String> {
    let url = format!("{}/1/users/validate.json", api.trim_end_matches('/'));
    let response = client(DEADLINE)?
        .post(url)
        .form(&[("token", pair.token.expose()), ("user", pair.user.expose())])
        .send()
        .map_err(|e| no_answer(&e))?;
    answered(response)
}

/// A 2xx is delivered; anything else is refused, with the status and what the service said about
/// it (Pushover names the field that was wrong, never echoes its value; cut short anyway). At most
/// [`ANSWER_MAX`] bytes of what it said are read.
fn answered(mut response: reqwest::blocking::Response) -> Result<String, String> {
    let status = response.status();
    let (body, _) = crate::http::answer_capped(&mut response, ANSWER_MAX).unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    let said = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("errors").cloned())
        .map(|e| cut(&e.to_string(), 200));
    let answer = match said {
        Some(e) => format!("{} {e}", status.as_u16()),
        None => status.as_u16().to_string(),
    };
    if status.is_success() {
        Ok(answer)
    } else {
        Err(format!("refused: {answer}"))
    }
}

/// ntfy: a topic URL, and an access token when the topic needs one.
pub struct Ntfy {
    pub url: String,
    pub token: Option<Secret>,
}

impl Ntfy {
    /// The token from the keychain (`local.<ns>.notify.ntfy`), if one is stored.
    pub fn token(keys: &dyn KeyStore, namespace: &Namespace) -> Result<Option<Secret>, String> {
        keys.get(&Label::notify(namespace, Driver::Ntfy))
            .map_err(|e| format!("the keychain: {e}"))
    }
}

impl Notifier for Ntfy {
    fn name(&self) -> Driver {
        Driver::Ntfy
    }

    fn send(&self, m: &Message, time: Duration) -> Result<String, String> {
        let mut rb = client(time)?
            .post(&self.url)
            .header("Title", cut(&m.title, TITLE_MAX))
            .body(cut(&m.body, MESSAGE_MAX));
        if let Some(t) = &self.token {
            let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", t.expose()))
                .map_err(|_| "the ntfy token is not a header value".to_owned())?;
            v.set_sensitive(true);
            rb = rb.header(reqwest::header::AUTHORIZATION, v);
        }
        answered(rb.send().map_err(|e| no_answer(&e))?)
    }
}

/// A webhook: a POST of the message's JSON document (or Slack's `{"text"}`) to a URL that is
/// never printed beyond its origin, signed when a key is given.
pub struct Webhook {
    pub url: String,
    pub format: super::settings::WebhookFormat,
    pub key: Option<Secret>,
    pub namespace: String,
}

impl Webhook {
    /// The body for `m`, sent at `at`.
    pub fn body(&self, m: &Message, at: chrono::DateTime<chrono::Utc>) -> Vec<u8> {
        let doc = match self.format {
            super::settings::WebhookFormat::Slack => {
                serde_json::json!({"text": format!("*{}*\n{}", m.title, m.body)})
            }
            super::settings::WebhookFormat::Json => {
                let about = m.about.as_ref();
                serde_json::json!({
                    "version": 1,
                    "kind": about.map_or("test", |a| a.kind.as_str()),
                    "title": m.title,
                    "text": m.body,
                    "automation": about.map(|a| &a.automation),
                    "namespace": self.namespace,
                    "verdict": about.map(|a| &a.verdict),
                    "reasons": about.map_or(&[][..], |a| &a.reasons[..]),
                    "host": about.map_or_else(super::host, |a| a.host.clone()),
                    "run": about.and_then(|a| a.run.as_ref()),
                    "next": about.and_then(|a| a.next.as_ref()),
                    "at": crate::runlog::stamp(at),
                })
            }
        };
        serde_json::to_vec(&doc).unwrap_or_default()
    }
}

/// `sha256=<hex>`: the HMAC-SHA256 of `body` under `key`.
pub fn signature(key: &Secret, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(body);
    let digest: [u8; 32] = mac.finalize().into_bytes().into();
    format!("sha256={}", crate::runlog::hex(&digest))
}

impl Notifier for Webhook {
    fn name(&self) -> Driver {
        Driver::Webhook
    }

    fn send(&self, m: &Message, time: Duration) -> Result<String, String> {
        let body = self.body(m, chrono::Utc::now());
        let mut rb = client(time)?
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(k) = &self.key {
            rb = rb.header(SIGNATURE_HEADER, signature(k, &body));
        }
        answered(rb.body(body).send().map_err(|e| no_answer(&e))?)
    }
}
