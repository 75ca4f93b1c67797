//! Healthchecks (healthchecks.io, or a self-hosted one): a dead man's switch off the machine.
//!
//! Every firing of an automation that has a check pings it ([`ping`]): `/start` when the run
//! starts, its exit status or `/fail` when it ends, `/log` when it was skipped because the last
//! one still runs. `automations healthchecks sync` keeps one remote check per scheduled, installed
//! automation in step with its definition ([`sync`], over the Management API in [`api`]): the same
//! `OnCalendar` expressions its timer fires on, or the interval for awake-time intervals. When the
//! machine is off, asleep or its timers stopped, the pings stop, and Healthchecks tells.
//!
//! Nothing here changes a run's outcome, its exit status or its lock. The ping key, the API key and
//! check UUIDs are secrets: from the environment or the keychain, never in a definition, an
//! argument, the run log, a state file, a message or an error.

pub mod api;
pub mod follow;
pub mod installed;
pub mod ping;
pub mod settings;
pub mod status;
pub mod sync;
pub mod validate;

use crate::definition::Definition;
use crate::keys::{self, KeyStore, Secret};
use crate::names::{Label, Name, Namespace};
use crate::settings::Settings;

pub use settings::{Choice, HcSettings};

/// The variables that hold the keys (a manual override of the keychain).
pub const ENV_PING_KEY: &str = "AUTOMATIONS_HEALTHCHECKS_PING_KEY";
pub const ENV_API_KEY: &str = "AUTOMATIONS_HEALTHCHECKS_API_KEY";

/// Whether `healthchecks.toml` exists: one `stat`, so a firing without it pays nothing more.
pub fn enabled(settings: &Settings) -> bool {
    std::fs::symlink_metadata(settings.layout().settings_file(settings::FILE)).is_ok()
}

/// Which of the two keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// The project's ping key: pings by slug.
    Ping,
    /// A read-write API key: the Management API.
    Api,
}

impl KeyKind {
    pub fn word(self) -> &'static str {
        match self {
            KeyKind::Ping => "ping",
            KeyKind::Api => "api",
        }
    }

    fn env(self) -> &'static str {
        match self {
            KeyKind::Ping => ENV_PING_KEY,
            KeyKind::Api => ENV_API_KEY,
        }
    }

    /// Its keychain label: `local.<namespace>.healthchecks.<ping|api>`.
    pub fn label(self, namespace: &Namespace) -> Label {
        Label::service(namespace, "healthchecks", self.word())
    }

    /// Whether `key` has the form Healthchecks gives this kind of key: a ping key is 22 URL-safe
    /// characters, an API key 32 (the server refuses any other length outright).
    pub fn well_formed(self, key: &Secret) -> bool {
        let k = key.expose();
        let len = match self {
            KeyKind::Ping => 22,
            KeyKind::Api => 32,
        };
        k.len() == len
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }
}

/// The key of `kind`: the environment first, else the keychain. `Ok(None)` when neither has one.
pub fn key(
    kind: KeyKind,
    namespace: &Namespace,
    store: &dyn Fn() -> Box<dyn KeyStore>,
) -> Result<Option<Secret>, String> {
    if let Some(v) = std::env::var(kind.env()).ok().filter(|v| !v.is_empty()) {
        return Secret::new(v)
            .map(Some)
            .map_err(|_| format!("{} is not a key", kind.env()));
    }
    store()
        .get(&kind.label(namespace))
        .map_err(|e| format!("the Healthchecks {} key: {e}", kind.word()))
}

/// [`key`] from this machine's keychain.
pub fn machine_key(settings: &Settings, kind: KeyKind) -> Result<Option<Secret>, String> {
    key(kind, &settings.namespace, &|| keys::for_settings(settings))
}

/// The Management API client, or why there is none (no API key readable).
pub fn client(settings: &Settings, cfg: &HcSettings) -> Result<api::Api, String> {
    match machine_key(settings, KeyKind::Api)? {
        Some(k) => api::Api::new(&cfg.api_url, k).map_err(|e| e.to_string()),
        None => Err(format!(
            "no Healthchecks API key ({ENV_API_KEY} or `automations secret store healthchecks.api`)"
        )),
    }
}

/// The API client and every check of the key's project.
pub fn remote_checks(
    settings: &Settings,
    cfg: &HcSettings,
) -> Result<(api::Api, Vec<api::Remote>), String> {
    let api = client(settings, cfg)?;
    let remote = api.list(None).map_err(|e| e.to_string())?;
    Ok((api, remote))
}

/// The check slug of `name`: `<namespace>_<name>`. A slug may hold lowercase letters, digits, `-`
/// and `_`; neither a namespace nor a name holds a `_`, so no two (namespace, name) pairs share a
/// slug (`a` + `b-c` and `a-b` + `c` once both became `a-b-c`).
pub fn slug(namespace: &Namespace, name: &Name) -> String {
    format!("{namespace}_{name}")
}

/// The slug checks had before [`slug`] (`<namespace>-<name>`): such a check carrying this
/// namespace's tag is this automation's, and `sync` gives it the new slug.
pub fn legacy_slug(namespace: &Namespace, name: &Name) -> String {
    format!("{namespace}-{name}")
}

/// The namespaces whose tag a check carries (`automations-<namespace>`).
pub fn owners(tags: &str) -> Vec<&str> {
    tags.split_whitespace()
        .filter_map(|t| t.strip_prefix("automations-"))
        .collect()
}

/// Text a Healthchecks server sent (an answer to a ping, an API error, a check's name, slug or
/// status), as it may be kept or shown: each of `secrets` it echoes (a key, a check UUID, the
/// ping URL's path) and every UUID blanked, control characters made visible as text, at most
/// `max` characters.
pub fn shown(text: &str, secrets: &[&str], max: usize) -> String {
    let mut t = text.trim().to_owned();
    // Longest first, so a path is blanked whole before the key inside it.
    let mut secrets: Vec<&str> = secrets.iter().copied().filter(|s| s.len() >= 8).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in secrets {
        t = t.replace(s, "[redacted]");
    }
    let t = crate::text::blank_uuids(&t);
    crate::text::field(&t).chars().take(max).collect()
}

/// The tag every check of `namespace` carries, by which `sync --prune` and `check` find them.
pub fn tag(namespace: &Namespace) -> String {
    format!("automations-{namespace}")
}

/// How `name` is watched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watch {
    /// By its check UUID (from `[checks]`).
    Uuid(settings::CheckId),
    /// By slug, under the project's ping key.
    Slug(String),
    /// Not at all (`name = false`).
    Off,
}

/// How `name` is watched under `cfg`.
pub fn watch(cfg: &HcSettings, namespace: &Namespace, name: &Name) -> Watch {
    match cfg.checks.get(name) {
        Some(Choice::Uuid(id)) => Watch::Uuid(id.clone()),
        Some(Choice::Off) => Watch::Off,
        None => Watch::Slug(slug(namespace, name)),
    }
}

/// Whether `name`, watched as `watch`, has (or is meant to have) a check, and so is pinged: one
/// named by its UUID has one; one found by its slug has one when `sync` makes it, for an
/// automation installed here on a regular schedule (never for one that is manual-only, not
/// installed, or runs at login only). `def` is `None` when its definition cannot be read: an
/// installed automation's check stays its own and hears of the failure. `installed` is whether it
/// has an install record, when the caller has read it already (a firing has); else it is read.
pub fn has_check(
    settings: &Settings,
    name: &Name,
    watch: &Watch,
    def: Option<&Definition>,
    installed: Option<bool>,
) -> bool {
    match watch {
        Watch::Off => false,
        Watch::Uuid(_) => true,
        Watch::Slug(_) => {
            let regular = def.is_none_or(|d| {
                d.schedule
                    .as_ref()
                    .is_some_and(|s| !matches!(s, crate::schedule::Schedule::AtLogin))
            });
            regular
                && installed.unwrap_or_else(|| {
                    crate::state::State::new(&settings.data_root)
                        .install_record(name)
                        .is_ok_and(|r| r.is_some())
                })
        }
    }
}

/// This machine's IANA zone: `TZ` when it names one, else the system's (iana-time-zone: where
/// `/etc/localtime` points on Linux, the system preference on macOS). `None` when none says.
pub fn machine_zone() -> Option<String> {
    std::env::var("TZ")
        .ok()
        .map(|t| t.trim_start_matches(':').to_owned())
        .filter(|t| settings::is_zone_name(t) && (t == "UTC" || t.contains('/')))
        .or_else(|| iana_time_zone::get_timezone().ok())
        .filter(|z| settings::is_zone_name(z))
}
