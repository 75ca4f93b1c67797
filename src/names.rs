//! Validated name newtypes: automation names, namespaces, labels, fact names and env names.
//!
//! Every name that reaches a path, a unit file, a keychain item or a log line is one of these types,
//! built through `new()` (or `Deserialize`, which calls `new()`), so nothing downstream re-checks
//! raw strings. This module must never do I/O.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A notification driver: the one spelling of each, in `notify.toml`'s tables, keychain items,
/// reports and the state of what was delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Pushover,
    Ntfy,
    Webhook,
    Email,
}

impl Driver {
    /// Every driver, in the order reports show them.
    pub const ALL: [Self; 4] = [Self::Pushover, Self::Ntfy, Self::Webhook, Self::Email];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pushover => "pushover",
            Self::Ntfy => "ntfy",
            Self::Webhook => "webhook",
            Self::Email => "email",
        }
    }

    /// The driver named `s`, if one is.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// "pushover, ntfy, webhook, email": for messages that list them.
    pub fn listed() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a name was refused; the message completes "<key>: …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NameError(pub String);

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $ty:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $ty(String);

        impl $ty {
            /// Validates and wraps `s`.
            pub fn new(s: &str) -> Result<Self, NameError> {
                $check(s)?;
                Ok(Self(s.to_owned()))
            }

            /// The validated string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(&s).map_err(serde::de::Error::custom)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::new(s)
            }
        }
    };
}

fn check_name(s: &str) -> Result<(), NameError> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 48
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(NameError(format!(
            "{s:?} is not a valid name (1 to 48 of a-z, 0-9 and '-', starting and ending with a letter or digit)"
        )))
    }
}

fn check_namespace(s: &str) -> Result<(), NameError> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 32
        && is_lower_alnum(b[0])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(NameError(format!(
            "{s:?} is not a valid namespace (1 to 32 of a-z, 0-9 and '-', starting with a letter or digit)"
        )))
    }
}

fn check_fact(s: &str) -> Result<(), NameError> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    if ok {
        Ok(())
    } else {
        Err(NameError(format!(
            "{:?} is not a valid fact name (1 to 40 of a-z, 0-9 and '_', starting with a letter)",
            truncate(s, 60)
        )))
    }
}

/// Variables the runner itself sets for every command; a definition may not ask for them.
pub const RUNNER_BASICS: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR"];

fn check_env(s: &str) -> Result<(), NameError> {
    let b = s.as_bytes();
    let valid = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
    if !valid {
        return Err(NameError(format!(
            "{:?} is not a valid environment variable name",
            truncate(s, 60)
        )));
    }
    for prefix in ["AUTOMATION_", "AUTOMATIONS_", "ANYTYPE_"] {
        if s.starts_with(prefix) {
            return Err(NameError(format!(
                "{s} is reserved: names starting with {prefix} are set by the runner, never passed through"
            )));
        }
    }
    if RUNNER_BASICS.contains(&s) {
        return Err(NameError(format!(
            "{s} is set by the runner for every command; do not list it"
        )));
    }
    Ok(())
}

/// Shortens `s` to at most `max` characters for quoting in a message.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

string_newtype!(
    /// An automation's name: `^[a-z0-9]([a-z0-9-]{0,46}[a-z0-9])?$`, equal to its file stem.
    Name,
    check_name
);
string_newtype!(
    /// The namespace of this checkout's labels: `^[a-z0-9][a-z0-9-]{0,31}$`.
    Namespace,
    check_namespace
);
string_newtype!(
    /// A fact name reported by a command: `^[a-z][a-z0-9_]{0,39}$`.
    FactName,
    check_fact
);
string_newtype!(
    /// An environment variable a definition lets through; never reserved or a runner basic.
    EnvName,
    check_env
);

/// `local.<namespace>.<name>`: the launchd label, systemd unit stem and keychain service name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label(String);

impl Label {
    /// The label of `name` in `namespace`.
    pub fn new(namespace: &Namespace, name: &Name) -> Self {
        Self(format!("local.{namespace}.{name}"))
    }

    /// The label string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The keychain label of a notification driver's credential: `local.<namespace>.notify.<driver>`
    /// (automation names hold no dot, so it never collides with an automation's label).
    pub fn notify(namespace: &Namespace, driver: Driver) -> Self {
        Self::service(namespace, "notify", driver.as_str())
    }

    /// The keychain label of a credential of an outside service: `local.<namespace>.<service>.<item>`
    /// (automation names hold no dot, so it never collides with an automation's label).
    pub fn service(namespace: &Namespace, service: &str, item: &str) -> Self {
        Self(format!("local.{namespace}.{service}.{item}"))
    }

    /// The prefix every label of `namespace` starts with.
    pub fn prefix(namespace: &Namespace) -> String {
        format!("local.{namespace}.")
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_by_table() {
        for ok in [
            "a",
            "0",
            "heartbeat",
            "task-digest",
            "a1-b2",
            &"a".repeat(48),
        ] {
            assert!(Name::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "é",
            "a b",
            &"a".repeat(49),
        ] {
            assert!(Name::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn namespaces_by_table() {
        for ok in ["automations", "a", "a-", "x1", &"n".repeat(32)] {
            assert!(Namespace::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "A", "a.b", &"n".repeat(33)] {
            assert!(Namespace::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn facts_and_env_by_table() {
        assert!(FactName::new("beats").is_ok());
        assert!(FactName::new("a_1").is_ok());
        assert!(FactName::new("1a").is_err());
        assert!(FactName::new(&"a".repeat(41)).is_err());
        assert!(EnvName::new("GITHUB_TOKEN").is_ok());
        assert!(EnvName::new("_X").is_ok());
        for bad in [
            "AUTOMATION_X",
            "AUTOMATIONS_ROOT",
            "ANYTYPE_KEY",
            "PATH",
            "HOME",
            "1X",
            "A-B",
            "",
        ] {
            assert!(EnvName::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn label_joins_namespace_and_name() {
        let l = Label::new(&Namespace::new("ns").unwrap(), &Name::new("x").unwrap());
        assert_eq!(l.as_str(), "local.ns.x");
        assert_eq!(Label::prefix(&Namespace::new("ns").unwrap()), "local.ns.");
    }
}
