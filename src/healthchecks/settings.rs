//! `<data root>/healthchecks.toml`, parsed strictly. Private (0600), like every settings file.
//!
//! ```toml
//! ping_url = "https://hc-ping.com"        # optional: the ping base (a self-hosted one: https://hc.example.org/ping)
//! api_url = "https://healthchecks.io"     # optional: the Management API base
//! tz = "Europe/Berlin"                    # optional: the zone calendar checks use (default: this machine's)
//! grace_seconds = 900                     # optional: every check's grace (default: the firing's longest + 5 min)
//! body_limit = 10000                      # optional: the most of a ping's body sent, in bytes
//! [checks]                                # optional: per automation
//! backup = "5f2c6ac4-…"                   # ping this check's UUID instead of <namespace>-backup by slug
//! scratch = false                         # no check and no pings for this one
//! ```
//!
//! A check UUID is a secret (whoever has it can ping the check): it is kept here, in a private
//! file, and never printed, logged or put in an error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use toml::Value;

use crate::layout::SettingsFile;
use crate::names::Name;
use crate::settings::file::{self, Refused};

/// The file in the data root.
pub const FILE: SettingsFile = SettingsFile::Healthchecks;
/// The hosted service's ping base and API base.
pub const PING_URL: &str = "https://hc-ping.com";
pub const API_URL: &str = "https://healthchecks.io";
/// What a self-hosted Healthchecks keeps of a ping's body by default (`PING_BODY_LIMIT`).
pub const BODY_LIMIT: usize = 10_000;
/// Healthchecks' bounds on a check's timeout and grace, in seconds.
pub const SECONDS_MIN: u32 = 60;
pub const SECONDS_MAX: u32 = 31_536_000;

/// A check's UUID: a secret, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckId(String);

impl CheckId {
    /// A UUID in its canonical form (8-4-4-4-12 hex digits), lowercased.
    pub fn parse(s: &str) -> Option<Self> {
        let groups: Vec<&str> = s.split('-').collect();
        let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12];
        (shape
            && groups
                .iter()
                .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit())))
        .then(|| Self(s.to_ascii_lowercase()))
    }

    /// The UUID; for URLs only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CheckId([redacted])")
    }
}

/// What `[checks]` says of one automation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Ping this check by its UUID.
    Uuid(CheckId),
    /// No check for it.
    Off,
}

/// What `healthchecks.toml` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HcSettings {
    pub ping_url: String,
    pub api_url: String,
    pub tz: Option<String>,
    pub grace_seconds: Option<u32>,
    pub body_limit: usize,
    pub checks: BTreeMap<Name, Choice>,
}

impl Default for HcSettings {
    fn default() -> Self {
        Self {
            ping_url: PING_URL.into(),
            api_url: API_URL.into(),
            tz: None,
            grace_seconds: None,
            body_limit: BODY_LIMIT,
            checks: BTreeMap::new(),
        }
    }
}

/// Reads `<data root>/healthchecks.toml`; `None` when there is none (nothing is watched).
pub fn load(data_root: &Path) -> Result<Option<HcSettings>, Refused> {
    file::load(data_root, FILE, parse_table)
}

/// Parses the text of `healthchecks.toml`.
pub fn parse(text: &str) -> Result<HcSettings, Vec<String>> {
    parse_table(&file::table(text)?)
}

fn http_url(v: &Value) -> Option<String> {
    let s = v.as_str()?;
    let u = reqwest::Url::parse(s).ok()?;
    (matches!(u.scheme(), "http" | "https")
        && u.host_str().is_some()
        && u.query().is_none()
        && u.username().is_empty()
        && u.password().is_none())
    .then(|| s.trim_end_matches('/').to_owned())
}

fn seconds(key: &str, v: &Value, p: &mut Vec<String>) -> Option<u32> {
    match v.as_integer() {
        Some(n) if (SECONDS_MIN as i64..=SECONDS_MAX as i64).contains(&n) => Some(n as u32),
        _ => {
            p.push(format!(
                "{key}: expected whole seconds from {SECONDS_MIN} to {SECONDS_MAX} (Healthchecks' bounds)"
            ));
            None
        }
    }
}

fn parse_table(table: &toml::Table) -> Result<HcSettings, Vec<String>> {
    let mut p = Vec::new();
    let mut h = HcSettings::default();
    for (key, v) in table {
        match key.as_str() {
            "ping_url" | "api_url" => match http_url(v) {
                Some(u) if key == "ping_url" => h.ping_url = u,
                Some(u) => h.api_url = u,
                None => p.push(format!(
                    "{key}: expected an http(s) URL without a query or credentials"
                )),
            },
            "tz" => match v.as_str() {
                Some(z) if is_zone_name(z) => h.tz = Some(z.to_owned()),
                _ => p.push("tz: expected an IANA zone name such as \"Europe/Berlin\"".into()),
            },
            "grace_seconds" => h.grace_seconds = seconds(key, v, &mut p),
            "body_limit" => match v.as_integer() {
                Some(n) if (0..=1_000_000).contains(&n) => h.body_limit = n as usize,
                _ => p.push("body_limit: expected bytes from 0 to 1000000".into()),
            },
            "checks" => match v.as_table() {
                Some(t) => checks(t, &mut h.checks, &mut p),
                None => p.push("checks: expected a table of automation = \"<check UUID>\" or false".into()),
            },
            _ => p.push(format!(
                "{key}: unknown key (known: ping_url, api_url, tz, grace_seconds, body_limit, checks)"
            )),
        }
    }
    if p.is_empty() { Ok(h) } else { Err(p) }
}

fn checks(t: &toml::Table, out: &mut BTreeMap<Name, Choice>, p: &mut Vec<String>) {
    for (k, v) in t {
        let Ok(name) = Name::new(k) else {
            p.push(format!("checks.{k}: not an automation name"));
            continue;
        };
        match v {
            Value::Boolean(false) => {
                out.insert(name, Choice::Off);
            }
            // Never the value in the message: it is a secret, even when mistyped.
            Value::String(s) => match CheckId::parse(s) {
                Some(id) => {
                    out.insert(name, Choice::Uuid(id));
                }
                None => p.push(format!(
                    "checks.{k}: not a check UUID (the last part of the check's ping URL)"
                )),
            },
            _ => p.push(format!(
                "checks.{k}: expected the check's UUID as a string, or false for no check"
            )),
        }
    }
}

/// Whether `z` has the shape of an IANA zone name (`Area/Location`, or `UTC`): Healthchecks
/// itself says whether it knows it.
pub fn is_zone_name(z: &str) -> bool {
    !z.is_empty()
        && z.len() <= 64
        && !z.starts_with('/')
        && !z.contains("..")
        && z.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_settings_that_never_echo_a_uuid() {
        let h = parse(
            "ping_url = \"https://hc.example.org/ping/\"\napi_url = \"https://hc.example.org\"\ntz = \"Europe/Berlin\"\ngrace_seconds = 900\nbody_limit = 100\n[checks]\nbackup = \"5F2C6AC4-1111-2222-3333-444455556666\"\nscratch = false\n",
        )
        .unwrap();
        assert_eq!(h.ping_url, "https://hc.example.org/ping");
        assert_eq!(h.tz.as_deref(), Some("Europe/Berlin"));
        assert_eq!((h.grace_seconds, h.body_limit), (Some(900), 100));
        let backup = Name::new("backup").unwrap();
        match &h.checks[&backup] {
            Choice::Uuid(id) => {
                assert_eq!(id.expose(), "5f2c6ac4-1111-2222-3333-444455556666");
                assert_eq!(format!("{id:?}"), "CheckId([redacted])");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(h.checks[&Name::new("scratch").unwrap()], Choice::Off);
        assert_eq!(parse("").unwrap(), HcSettings::default());

        let secret = "5f2c6ac4-1111-2222-3333-44445555666";
        let e = parse(&format!(
            "ping_url = \"ftp://x\"\napi_url = \"https://u:p@x\"\ntz = \"../etc\"\ngrace_seconds = 5\nbody_limit = -1\nloud = 1\n[checks]\nbackup = \"{secret}\"\nBad = false\nx = 3\n"
        ))
        .unwrap_err();
        for want in [
            "ping_url: expected",
            "api_url: expected",
            "tz: expected",
            "grace_seconds: expected",
            "body_limit: expected",
            "loud: unknown key",
            "checks.backup: not a check UUID",
            "checks.Bad: not an automation name",
            "checks.x: expected",
        ] {
            assert!(e.iter().any(|p| p.starts_with(want)), "{want} in {e:?}");
        }
        assert!(!e.join(" ").contains(secret), "{e:?}");
    }
}
