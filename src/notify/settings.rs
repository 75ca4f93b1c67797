//! `<data root>/notify.toml`, parsed strictly (docs/health.md). Private (0600), like every settings file.
//!
//! ```toml
//! recovery = false              # optional: send "recovered", only for a degradation that was notified
//! quiet_hours = "22:00-07:00"   # optional, local time: messages wait, then go once, when they end
//! [pushover]                    # present = use Pushover (credentials: env, else the keychain)
//! [ntfy]                        # present = use ntfy
//! url = "https://ntfy.sh/my-private-topic"   # the topic URL; a token, if any, is in the keychain
//! ```

use std::path::Path;

use toml::Value;

use crate::schedule::TimeOfDay;
use crate::settings::file::{self, Refused};

/// The file in the data root.
pub const FILE: &str = "notify.toml";

/// What `notify.toml` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifySettings {
    pub recovery: bool,
    /// From, to (local time); the range may cross midnight.
    pub quiet_hours: Option<(TimeOfDay, TimeOfDay)>,
    pub pushover: bool,
    /// The ntfy topic URL.
    pub ntfy: Option<String>,
}

impl NotifySettings {
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
            ("pushover", Value::Table(t)) => {
                n.pushover = true;
                for k in t.keys() {
                    p.push(format!(
                        "pushover.{k}: unknown key (Pushover's credentials are in the environment or the keychain: automations notify-key store)"
                    ));
                }
            }
            ("ntfy", Value::Table(t)) => {
                for (k, v) in t {
                    match (k.as_str(), v) {
                        ("url", Value::String(u))
                            if reqwest::Url::parse(u).is_ok_and(|u| {
                                matches!(u.scheme(), "http" | "https") && u.host_str().is_some()
                            }) =>
                        {
                            n.ntfy = Some(u.clone())
                        }
                        ("url", _) => p.push("ntfy.url: expected an http(s) topic URL".into()),
                        _ => p.push(format!("ntfy.{k}: unknown key (known: url)")),
                    }
                }
                if n.ntfy.is_none() && !p.iter().any(|x| x.starts_with("ntfy.url")) {
                    p.push("ntfy.url: missing".into());
                }
            }
            ("pushover" | "ntfy", _) => p.push(format!("{key}: expected a table")),
            _ => p.push(format!(
                "{key}: unknown key (known: recovery, quiet_hours, pushover, ntfy)"
            )),
        }
    }
    if p.is_empty() { Ok(n) } else { Err(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

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
