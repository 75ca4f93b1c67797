//! `<data root>/notify.toml`, parsed strictly (docs/health.md). Private (0600), like every settings file.
//!
//! ```toml
//! recovery = false              # optional: send "recovered", only for a degradation that was notified
//! quiet_hours = "22:00-07:00"   # optional, local time: messages wait, then go once, when they end
//! remind_every_hours = 6        # optional: while still degraded and not acknowledged, a reminder
//! [pushover]                    # present = use Pushover (credentials: env, else the keychain)
//! [ntfy]                        # present = use ntfy
//! url = "https://ntfy.sh/my-private-topic"   # the topic URL; a token, if any, is in the keychain
//! [webhook]                     # present = POST a JSON document (or Slack's shape) to `url`
//! url = "https://hooks.example.org/T0/B0/secret-path"
//! format = "slack"              # optional: "json" (the default) or "slack"
//! sign = true                   # optional: X-Automations-Signature, HMAC-SHA256 of the body
//! only = ["backup", "sync"]     # any channel: only these automations' news (or `except`)
//! [email]                       # present = one plain-text mail per message, over SMTP
//! server = "smtp.example.org"
//! from = "automations <automations@example.org>"
//! to = ["ops@example.org"]
//! user = "automations@example.org"   # optional: log in; the password is in the keychain
//! ```

use std::path::Path;

use toml::Value;

use crate::layout::SettingsFile;
use crate::names::Driver;
use crate::schedule::TimeOfDay;
use crate::settings::file::{self, Refused};

/// The file in the data root.
pub const FILE: SettingsFile = SettingsFile::Notify;

/// What `notify.toml` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifySettings {
    pub recovery: bool,
    /// From, to (local time); the range may cross midnight.
    pub quiet_hours: Option<(TimeOfDay, TimeOfDay)>,
    /// While an automation stays degraded and unacknowledged, one reminder each this many hours.
    pub remind_every_hours: Option<u32>,
    pub pushover: bool,
    /// The ntfy topic URL.
    pub ntfy: Option<String>,
    pub webhook: Option<WebhookSettings>,
    pub email: Option<EmailSettings>,
    /// Each channel's automations, by channel name (a channel without an entry takes all).
    pub routes: std::collections::BTreeMap<Driver, Route>,
}

/// The `[webhook]` channel: where, in which shape, signed or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The receiver's URL; often itself the secret (Slack's, Mattermost's), so it is never
    /// printed beyond its origin.
    pub url: String,
    pub format: WebhookFormat,
    /// Sign each body (`X-Automations-Signature: sha256=…`) with the key from
    /// `AUTOMATIONS_WEBHOOK_SECRET` or the keychain.
    pub sign: bool,
}

/// The body a webhook gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookFormat {
    /// The documented JSON document (docs/health.md).
    Json,
    /// `{"text": "…"}`, what Slack's incoming webhooks (and Mattermost's, and Discord's Slack
    /// endpoint) take.
    Slack,
}

/// The `[email]` channel: which SMTP server, how it is secured, who sends and who receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailSettings {
    /// The server's host name, which its certificate must name.
    pub server: String,
    pub port: u16,
    pub security: MailSecurity,
    /// `Name <address>` or an address; checked when read.
    pub from: String,
    pub to: Vec<String>,
    /// The login, when the server wants one; its password is in the keychain (or
    /// `AUTOMATIONS_SMTP_PASSWORD`).
    pub user: Option<String>,
}

/// How the connection to the SMTP server is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailSecurity {
    /// Plain connection upgraded by STARTTLS, which the server must offer (port 587).
    StartTls,
    /// TLS from the first byte (port 465).
    Implicit,
    /// No TLS: only to a relay on this machine (a local Postfix or OpenSMTPD on port 25).
    None,
}

impl MailSecurity {
    /// Its word in `notify.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StartTls => "starttls",
            Self::Implicit => "implicit",
            Self::None => "none",
        }
    }

    /// The port a server of this kind listens on unless told.
    fn default_port(self) -> u16 {
        match self {
            Self::StartTls => 587,
            Self::Implicit => 465,
            Self::None => 25,
        }
    }
}

/// Which automations' news a channel takes: `only` these (when given), and never `except` these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    pub only: Option<Vec<String>>,
    pub except: Vec<String>,
}

impl Route {
    /// Whether `automation`'s news goes through this channel.
    pub fn takes(&self, automation: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|n| n == automation))
            && !self.except.iter().any(|n| n == automation)
    }
}

/// The origin of a URL (`https://hooks.example.org`): all of it that is ever printed.
pub fn origin(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(
        |_| "(not a URL)".to_owned(),
        |u| u.origin().ascii_serialization(),
    )
}

impl NotifySettings {
    /// Whether `channel` takes `automation`'s news.
    pub fn routes_to(&self, channel: Driver, automation: &str) -> bool {
        self.routes
            .get(&channel)
            .is_none_or(|r| r.takes(automation))
    }

    /// Whether `t` (local time of day) is within the quiet hours.
    pub fn quiet_at(&self, t: TimeOfDay) -> bool {
        match self.quiet_hours {
            None => false,
            Some((from, to)) if from <= to => t >= from && t < to,
            Some((from, to)) => t >= from || t < to,
        }
    }
}

/// Reads `<data root>/notify.toml`; `None` when there is none (nothing is configured).
pub fn load(data_root: &Path) -> Result<Option<NotifySettings>, Refused> {
    file::load(data_root, FILE, parse_table)
}

/// Parses the text of `notify.toml`.
pub fn parse(text: &str) -> Result<NotifySettings, Vec<String>> {
    parse_table(&file::table(text)?)
}

fn parse_table(table: &toml::Table) -> Result<NotifySettings, Vec<String>> {
    let mut p = Vec::new();
    let mut n = NotifySettings::default();
    for (key, v) in table {
        if let Some(driver) = Driver::parse(key) {
            driver_table(driver, v, &mut n, &mut p);
            continue;
        }
        match (key.as_str(), v) {
            ("recovery", Value::Boolean(b)) => n.recovery = *b,
            ("recovery", _) => p.push("recovery: expected true or false".into()),
            ("quiet_hours", Value::String(s)) => match s
                .split_once('-')
                .and_then(|(a, b)| Some((TimeOfDay::parse(a.trim())?, TimeOfDay::parse(b.trim())?)))
            {
                Some((a, b)) if a != b => n.quiet_hours = Some((a, b)),
                _ => p.push(format!(
                    "quiet_hours: {s:?} is not \"HH:MM-HH:MM\" (two different times)"
                )),
            },
            ("quiet_hours", _) => p.push("quiet_hours: expected \"HH:MM-HH:MM\"".into()),
            ("remind_every_hours", Value::Integer(h)) if (1..=720).contains(h) => {
                n.remind_every_hours = Some(*h as u32);
            }
            ("remind_every_hours", _) => {
                p.push("remind_every_hours: expected a whole number of hours, 1 to 720".into());
            }
            _ => p.push(format!(
                "{key}: unknown key (known: recovery, quiet_hours, remind_every_hours, {})",
                Driver::listed()
            )),
        }
    }
    if p.is_empty() { Ok(n) } else { Err(p) }
}

/// A driver's table: its routing and its own keys.
fn driver_table(driver: Driver, v: &Value, n: &mut NotifySettings, p: &mut Vec<String>) {
    let Value::Table(t) = v else {
        p.push(format!("{driver}: expected a table"));
        return;
    };
    match driver {
        Driver::Pushover => {
            n.pushover = true;
            channel(driver, t, &[], n, p);
        }
        Driver::Ntfy => {
            channel(driver, t, &["url"], n, p);
            match t.get("url") {
                Some(Value::String(u)) if http_url(u) => n.ntfy = Some(u.clone()),
                Some(_) => p.push("ntfy.url: expected an http(s) topic URL".into()),
                None => p.push("ntfy.url: missing".into()),
            }
        }
        Driver::Webhook => {
            channel(driver, t, &["url", "format", "sign"], n, p);
            n.webhook = webhook(t, p);
        }
        Driver::Email => {
            channel(driver, t, EMAIL_KEYS, n, p);
            n.email = email(t, p);
        }
    }
}

/// Whether `u` is an http(s) URL with a host.
fn http_url(u: &str) -> bool {
    reqwest::Url::parse(u)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

/// A channel table's routing (`only`, `except`) and its unknown keys (`own` are the channel's).
fn channel(
    name: Driver,
    t: &toml::Table,
    own: &[&str],
    n: &mut NotifySettings,
    p: &mut Vec<String>,
) {
    let mut route = Route::default();
    for (k, v) in t {
        match k.as_str() {
            "only" => route.only = names(name, k, v, p),
            "except" => route.except = names(name, k, v, p).unwrap_or_default(),
            k if own.contains(&k) => {}
            k if name == Driver::Pushover => p.push(format!(
                "pushover.{k}: unknown key (known: only, except; Pushover's credentials are in the environment or the keychain: automations secret store notify.pushover)"
            )),
            k => p.push(format!(
                "{name}.{k}: unknown key (known: {}only, except)",
                own.iter().map(|o| format!("{o}, ")).collect::<String>()
            )),
        }
    }
    if route != Route::default() {
        n.routes.insert(name, route);
    }
}

/// A list of automation names.
fn names(channel: Driver, key: &str, v: &Value, p: &mut Vec<String>) -> Option<Vec<String>> {
    let Value::Array(items) = v else {
        p.push(format!(
            "{channel}.{key}: expected a list of automation names"
        ));
        return None;
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str().map(crate::names::Name::new) {
            Some(Ok(n)) => out.push(n.to_string()),
            _ => p.push(format!("{channel}.{key}: {item} is not an automation name")),
        }
    }
    Some(out)
}

/// The `[webhook]` table's own keys.
fn webhook(t: &toml::Table, p: &mut Vec<String>) -> Option<WebhookSettings> {
    let url = match t.get("url") {
        Some(Value::String(u)) if http_url(u) => u.clone(),
        Some(_) => {
            p.push("webhook.url: expected an http(s) URL".into());
            return None;
        }
        None => {
            p.push("webhook.url: missing".into());
            return None;
        }
    };
    let format = match t.get("format") {
        None => WebhookFormat::Json,
        Some(Value::String(f)) if f == "json" => WebhookFormat::Json,
        Some(Value::String(f)) if f == "slack" => WebhookFormat::Slack,
        Some(_) => {
            p.push("webhook.format: expected \"json\" or \"slack\"".into());
            WebhookFormat::Json
        }
    };
    let sign = match t.get("sign") {
        None => false,
        Some(Value::Boolean(b)) => *b,
        Some(_) => {
            p.push("webhook.sign: expected true or false".into());
            false
        }
    };
    Some(WebhookSettings { url, format, sign })
}

/// The `[email]` table's own keys.
const EMAIL_KEYS: &[&str] = &["server", "port", "tls", "from", "to", "user"];

/// The `[email]` table: its server, security, sender and receivers, each checked here so a typo
/// is said when the file is read, not when the first message fails.
fn email(t: &toml::Table, p: &mut Vec<String>) -> Option<EmailSettings> {
    let before = p.len();
    let server = email_text(t, "server", p).and_then(|s| host(&s, p));
    if !t.contains_key("server") {
        p.push("email.server: missing (the SMTP server's host name)".into());
    }
    let security = match t.get("tls") {
        None => MailSecurity::StartTls,
        Some(Value::String(s)) if s == "starttls" => MailSecurity::StartTls,
        Some(Value::String(s)) if s == "implicit" => MailSecurity::Implicit,
        Some(Value::String(s)) if s == "none" => MailSecurity::None,
        Some(_) => {
            p.push("email.tls: expected \"starttls\", \"implicit\" or \"none\"".into());
            MailSecurity::StartTls
        }
    };
    let port = match t.get("port") {
        None => security.default_port(),
        Some(Value::Integer(n)) if (1..=65535).contains(n) => *n as u16,
        Some(_) => {
            p.push("email.port: expected a port number, 1 to 65535".into());
            0
        }
    };
    if let Some(s) = &server
        && security == MailSecurity::None
        && !loopback(s)
    {
        p.push(format!(
            "email.tls: \"none\" is for a relay on this machine only (localhost, 127.0.0.1 or ::1), not {s}: mail and any login would cross the network in the clear"
        ));
    }
    let from = email_text(t, "from", p);
    match &from {
        Some(f) if !mailbox(f) => p.push(format!("email.from: {f:?} is not an address")),
        None if !t.contains_key("from") => p.push("email.from: missing".into()),
        _ => {}
    }
    let to = receivers(t.get("to"), p);
    let user = email_text(t, "user", p);
    if p.len() > before {
        return None;
    }
    Some(EmailSettings {
        server: server?,
        port,
        security,
        from: from?,
        to,
        user,
    })
}

/// The `[email]` string at `key`, trimmed; a problem when it is there but not a string or empty.
fn email_text(t: &toml::Table, key: &str, p: &mut Vec<String>) -> Option<String> {
    match t.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(Value::String(_)) => {
            p.push(format!("email.{key}: empty"));
            None
        }
        Some(_) => {
            p.push(format!("email.{key}: expected a string"));
            None
        }
        None => None,
    }
}

/// `email.to`: one address or a list of them.
fn receivers(v: Option<&Value>, p: &mut Vec<String>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .filter_map(|i| match i.as_str() {
                Some(a) if mailbox(a) => Some(a.trim().to_owned()),
                _ => {
                    p.push(format!("email.to: {i} is not an address"));
                    None
                }
            })
            .collect(),
        Some(Value::String(a)) if mailbox(a) => vec![a.trim().to_owned()],
        Some(_) => {
            p.push("email.to: expected an address or a list of addresses".into());
            Vec::new()
        }
        None => {
            p.push("email.to: missing".into());
            Vec::new()
        }
    }
}

/// The server as a host name or an IP address (an IPv6 one without its brackets), or a problem
/// that says what it is not.
fn host(s: &str, p: &mut Vec<String>) -> Option<String> {
    let bare = s.trim_start_matches('[').trim_end_matches(']');
    let name = |n: &str| {
        n.len() <= 253
            && n.split('.').all(|l| {
                (1..=63).contains(&l.len())
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    };
    if bare.parse::<std::net::IpAddr>().is_ok() || name(s) {
        Some(bare.to_owned())
    } else {
        p.push(format!(
            "email.server: {s:?} is not a host name or an IP address (the port goes in `port`, and no scheme is needed)"
        ));
        None
    }
}

/// Whether `s` is an address, or `Name <address>`.
fn mailbox(s: &str) -> bool {
    s.trim().parse::<lettre::message::Mailbox>().is_ok()
}

/// Whether `host` names this machine's loopback.
fn loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_routes_and_reminders_are_read_strictly() {
        let n = parse(
            "remind_every_hours = 6\n[webhook]\nurl = \"https://hooks.example.org/T0/B0/xyz\"\nformat = \"slack\"\nsign = true\nonly = [\"backup\", \"sync\"]\n[pushover]\nexcept = [\"noisy\"]\n",
        )
        .unwrap();
        assert_eq!(n.remind_every_hours, Some(6));
        let w = n.webhook.as_ref().unwrap();
        assert_eq!(w.format, WebhookFormat::Slack);
        assert!(w.sign);
        assert!(n.routes_to(Driver::Webhook, "backup") && !n.routes_to(Driver::Webhook, "noisy"));
        assert!(n.routes_to(Driver::Pushover, "backup") && !n.routes_to(Driver::Pushover, "noisy"));
        assert!(n.routes_to(Driver::Ntfy, "anything"));
        assert_eq!(origin(&w.url), "https://hooks.example.org");
        let e = parse(
            "remind_every_hours = 0\n[webhook]\nurl = \"hooks\"\nformat = \"xml\"\nretries = 3\nonly = [\"Not A Name\"]\n",
        )
        .unwrap_err();
        for want in [
            "remind_every_hours: expected",
            "webhook.url: expected an http(s) URL",
            "webhook.retries: unknown key (known: url, format, sign, only, except)",
            "webhook.only: \"Not A Name\" is not an automation name",
        ] {
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
        assert!(
            parse("[webhook]\nformat = \"json\"\n").unwrap_err()[0]
                .starts_with("webhook.url: missing")
        );
    }

    #[test]
    fn an_email_channel_is_read_strictly_and_goes_in_the_clear_only_on_this_machine() {
        let n = parse(
            "[email]\nserver = \"smtp.example.org\"\nfrom = \"automations <a@example.org>\"\nto = \"ops@example.org\"\nuser = \"a@example.org\"\nexcept = [\"noisy\"]\n",
        )
        .unwrap();
        let e = n.email.as_ref().unwrap();
        assert_eq!((e.port, e.security), (587, MailSecurity::StartTls));
        assert_eq!(e.to, ["ops@example.org"]);
        assert_eq!(e.user.as_deref(), Some("a@example.org"));
        assert!(!n.routes_to(Driver::Email, "noisy") && n.routes_to(Driver::Email, "backup"));
        let implicit = parse(
            "[email]\nserver = \"smtp.example.org\"\ntls = \"implicit\"\nfrom = \"a@example.org\"\nto = [\"b@example.org\", \"c@example.org\"]\n",
        )
        .unwrap()
        .email
        .unwrap();
        assert_eq!((implicit.port, implicit.user), (465, None));
        for (relay, stored) in [
            ("localhost", "localhost"),
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
        ] {
            let local = parse(&format!(
                "[email]\nserver = \"{relay}\"\ntls = \"none\"\nfrom = \"a@example.org\"\nto = \"b@example.org\"\n"
            ))
            .unwrap()
            .email
            .unwrap();
            assert_eq!(
                (local.port, local.security),
                (25, MailSecurity::None),
                "{relay}"
            );
            assert_eq!(local.server, stored);
        }
        let e = parse(
            "[email]\nserver = \"mail.example.org\"\ntls = \"none\"\nport = 0\nfrom = \"not an address\"\nto = [\"b@example.org\", 3]\npassword = \"x\"\n",
        )
        .unwrap_err();
        for want in [
            "email.tls: \"none\" is for a relay on this machine only (localhost, 127.0.0.1 or ::1), not mail.example.org",
            "email.port: expected a port number",
            "email.from: \"not an address\" is not an address",
            "email.to: 3 is not an address",
            "email.password: unknown key (known: server, port, tls, from, to, user, only, except)",
        ] {
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
        for (server, want) in [
            (
                "smtp.example.org:587",
                "email.server: \"smtp.example.org:587\" is not a host name or an IP address (the port goes in `port`",
            ),
            (
                "smtp://smtp.example.org",
                "email.server: \"smtp://smtp.example.org\" is not a host name",
            ),
            ("", "email.server: empty"),
        ] {
            let e = parse(&format!(
                "[email]\nserver = \"{server}\"\nfrom = \"a@example.org\"\nto = \"b@example.org\"\n"
            ))
            .unwrap_err();
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
        let e = parse("[email]\ntls = \"ssl\"\n").unwrap_err();
        for want in [
            "email.server: missing",
            "email.tls: expected",
            "email.from: missing",
            "email.to: missing",
        ] {
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
    }

    #[test]
    fn strict_settings_and_quiet_hours_across_midnight() {
        let n = parse(
            "recovery = true\nquiet_hours = \"22:00-07:00\"\n[pushover]\n[ntfy]\nurl = \"https://ntfy.sh/t\"\n",
        )
        .unwrap();
        assert!(n.recovery && n.pushover);
        assert_eq!(n.ntfy.as_deref(), Some("https://ntfy.sh/t"));
        let t = |h, m| TimeOfDay { hour: h, minute: m };
        assert!(n.quiet_at(t(23, 0)) && n.quiet_at(t(6, 59)) && !n.quiet_at(t(7, 0)));
        assert!(!n.quiet_at(t(21, 59)));
        let e = parse(
            "recovery = 1\nquiet_hours = \"25:00-07:00\"\nloud = true\n[pushover]\ntoken = \"x\"\n[ntfy]\nurl = \"ftp://x\"\n",
        )
        .unwrap_err();
        for want in [
            "recovery:",
            "quiet_hours:",
            "loud: unknown key",
            "pushover.token: unknown key",
            "ntfy.url: expected",
        ] {
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
    }
}
