//! The key gate: before every run of an automation that declares `[anytype]` (docs/keys.md).
//!
//! Fetch the automation's key from the keychain; check the declaration against the agent policy in
//! the private `spaces.json`; ask AnyType what the key really grants; pass only on an exact match.
//! Anything that cannot be read or reached is a refusal. On a pass the command gets the key only as
//! `ANYTYPE_OPENAPI_MCP_HEADERS`, and both go to the redactor.
//!
//! # `<data root>/spaces.json` (0600)
//!
//! ```json
//! {
//!   "api_url": "http://127.0.0.1:31009",
//!   "spaces": {
//!     "agent": {"anytype_id": "bafy…", "agent_read": true, "agent_write": "full"},
//!     "work":  {"anytype_id": "bafy…", "agent_read": true, "agent_write": "ask"}
//!   }
//! }
//! ```
//!
//! A definition's `spaces` name keys of `spaces`. `read` is allowed on spaces marked
//! `agent_read`; any other permission word counts as a write and needs every declared space to be
//! `agent_write: "full"`. `api_url` is optional; `ANYTYPE_API_URL` overrides it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{self as anytype, Declared};
use crate::definition::AnyTypeAccess;
use crate::fsutil;
use crate::keys::{KeyStore, Secret};
use crate::layout::SettingsFile;
use crate::names::Label;

/// The environment variable the command gets the key in.
pub const HEADERS_ENV: &str = "ANYTYPE_OPENAPI_MCP_HEADERS";
/// The policy file in the data root.
pub const SPACES_FILE: SettingsFile = SettingsFile::Spaces;

/// `spaces.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spaces {
    #[serde(default)]
    pub api_url: Option<String>,
    pub spaces: BTreeMap<String, SpacePolicy>,
}

/// What agents may do in one space.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpacePolicy {
    pub anytype_id: String,
    #[serde(default)]
    pub agent_read: bool,
    #[serde(default)]
    pub agent_write: Option<String>,
}

/// A refusal: every difference found, one line each, never the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub Vec<String>);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// A passed gate: the key and the header value the command gets (which contains the key).
pub struct Pass {
    pub key: Secret,
    pub headers: String,
}

impl Pass {
    /// The environment variable for the command.
    pub fn env(&self) -> (String, OsString) {
        (HEADERS_ENV.to_owned(), self.headers.clone().into())
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        // SAFETY: zero bytes are valid UTF-8.
        unsafe { self.headers.as_bytes_mut() }.fill(0);
    }
}

/// Where the agent policy (`spaces.json`) is read from.
#[derive(Clone, Copy, Debug)]
pub enum Policy<'a> {
    /// The private data root: the file must be ours and 0600.
    DataRoot(&'a Path),
    /// A mounted Secret's folder, beside the key (in a pod: docs/kubernetes.md), read like the key.
    Secret(&'a Path),
}

impl<'a> Policy<'a> {
    /// Where these settings keep it: beside the keys when they are files of a Secret.
    pub fn of(settings: &'a crate::settings::Settings) -> Self {
        match &settings.key_dir {
            Some(dir) => Policy::Secret(dir),
            None => Policy::DataRoot(&settings.data_root),
        }
    }
}

/// Reads `spaces.json`: missing, exposed, or invalid is a refusal naming the file.
pub fn read_spaces(at: Policy) -> Result<Spaces, Refusal> {
    // In the data root, or beside the keys of a mounted Secret: the same name either way.
    let path: PathBuf = match at {
        Policy::DataRoot(root) => crate::layout::Layout::new(root).settings_file(SPACES_FILE),
        Policy::Secret(dir) => dir.join(SPACES_FILE.file_name()),
    };
    let refuse = |why: String| Refusal(vec![format!("{}: {why}", path.display())]);
    let read = match at {
        Policy::DataRoot(_) => {
            fsutil::read_private(&path, fsutil::SMALL_FILE).map_err(|e| refuse(e.to_string()))
        }
        // Its errors name the path already.
        Policy::Secret(dir) => crate::keys::files::read(dir, SPACES_FILE.file_name())
            .map_err(|e| Refusal(vec![e.to_string()])),
    };
    let bytes = read?.ok_or_else(|| {
        refuse("missing; it names the AnyType spaces and the agent policy for each".into())
    })?;
    serde_json::from_slice(&bytes).map_err(|e| refuse(format!("not valid ({e})")))
}

/// The declaration against the agent policy, spaces resolved to AnyType ids.
pub fn check_policy(access: &AnyTypeAccess, spaces: &Spaces) -> Result<Declared, Refusal> {
    let mut problems = Vec::new();
    let mut resolved = Vec::new();
    let read_only = access.permission == "read";
    for name in &access.spaces {
        let Some(p) = spaces.spaces.get(name) else {
            problems.push(format!("space {name} is not in {SPACES_FILE}"));
            continue;
        };
        if read_only && !p.agent_read {
            problems.push(format!(
                "space {name}: policy agent_read is false, so no agent key may read it"
            ));
        }
        if !read_only && p.agent_write.as_deref() != Some("full") {
            problems.push(format!(
                "space {name}: policy agent_write is {}, and a {:?} key writes, which needs \"full\"",
                p.agent_write.as_deref().map_or_else(|| "unset".to_owned(), |w| format!("{w:?}")),
                access.permission
            ));
        }
        resolved.push((name.clone(), p.anytype_id.clone()));
    }
    if problems.is_empty() {
        Ok(Declared {
            permission: access.permission.clone(),
            spaces: resolved,
        })
    } else {
        Err(Refusal(problems))
    }
}

/// The AnyType API: `ANYTYPE_API_URL`, else `spaces.json`, else the default.
pub fn api_url(spaces: &Spaces, env: Option<String>) -> String {
    env.filter(|u| !u.is_empty())
        .or_else(|| spaces.api_url.clone())
        .unwrap_or_else(|| anytype::DEFAULT_API_URL.to_owned())
}

/// What a key grants next to what is declared: the answer, and every difference (empty = match).
pub struct Inspection {
    pub declared: Declared,
    pub whoami: anytype::WhoAmI,
    pub differences: Vec<String>,
}

/// Asks AnyType about `key` and compares (what `secret check NAME` shows). Unreadable policy or answer is
/// a refusal.
pub fn inspect(
    key: &Secret,
    access: &AnyTypeAccess,
    policy: Policy,
    deadline: Duration,
) -> Result<Inspection, Refusal> {
    let spaces = read_spaces(policy)?;
    let declared = check_policy(access, &spaces)?;
    let base = api_url(&spaces, std::env::var(anytype::ENV_API_URL).ok());
    let whoami = anytype::whoami(&base, key, deadline).map_err(|e| Refusal(vec![e]))?;
    let differences = anytype::differences(&whoami, &declared, chrono::Utc::now());
    Ok(Inspection {
        declared,
        whoami,
        differences,
    })
}

/// Checks `key` against the declaration (what the gate and `secret store NAME` run).
pub fn verify_key(
    key: &Secret,
    access: &AnyTypeAccess,
    policy: Policy,
    deadline: Duration,
) -> Result<Declared, Refusal> {
    let i = inspect(key, access, policy, deadline)?;
    if i.differences.is_empty() {
        Ok(i.declared)
    } else {
        Err(Refusal(i.differences))
    }
}

/// The gate of one run.
pub fn gate(
    label: &Label,
    access: &AnyTypeAccess,
    policy: Policy,
    store: &dyn KeyStore,
) -> Result<Pass, Refusal> {
    let key = match store.get(label) {
        Ok(Some(k)) => k,
        Ok(None) => {
            return Err(Refusal(vec![format!(
                "no key is stored for {label}; store one with `automations secret store {}`",
                label.as_str().rsplit('.').next().unwrap_or_default()
            )]));
        }
        Err(e) => {
            return Err(Refusal(vec![format!(
                "cannot read the key of {label}: {e}"
            )]));
        }
    };
    verify_key(&key, access, policy, anytype::DEADLINE).map_err(|r| {
        // Differences quote what the server said; never let that carry the key.
        let mut redactor = crate::redact::Redactor::default();
        redactor.add_key(key.expose().as_bytes());
        Refusal(r.0.iter().map(|line| redactor.scrub(line)).collect())
    })?;
    let headers = serde_json::json!({
        "Authorization": format!("Bearer {}", key.expose()),
        "Anytype-Version": anytype::API_VERSION,
    })
    .to_string();
    Ok(Pass { key, headers })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spaces() -> Spaces {
        serde_json::from_str(
            r#"{"spaces": {"agent": {"anytype_id": "a", "agent_read": true, "agent_write": "full"},
                           "work": {"anytype_id": "w", "agent_read": true, "agent_write": "ask"},
                           "secret": {"anytype_id": "s"}}}"#,
        )
        .unwrap()
    }

    fn access(permission: &str, spaces: &[&str]) -> AnyTypeAccess {
        AnyTypeAccess {
            permission: permission.into(),
            spaces: spaces.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn read_needs_agent_read_and_anything_else_needs_full_write() {
        assert!(check_policy(&access("read", &["agent", "work"]), &spaces()).is_ok());
        let e = check_policy(&access("read", &["secret"]), &spaces()).unwrap_err();
        assert!(
            e.0[0].contains("space secret") && e.0[0].contains("agent_read is false"),
            "{e}"
        );
        assert!(check_policy(&access("readwrite", &["agent"]), &spaces()).is_ok());
        let e = check_policy(&access("readwrite", &["agent", "work"]), &spaces()).unwrap_err();
        assert_eq!(e.0.len(), 1);
        assert!(
            e.0[0].contains("space work") && e.0[0].contains("\"ask\""),
            "{e}"
        );
        // An unknown word is a write.
        let e = check_policy(&access("peek", &["work"]), &spaces()).unwrap_err();
        assert!(e.0[0].contains("needs \"full\""), "{e}");
        let e = check_policy(&access("read", &["nowhere"]), &spaces()).unwrap_err();
        assert!(e.0[0].contains("not in spaces.json"));
    }

    #[test]
    fn api_url_precedence() {
        let mut s = spaces();
        assert_eq!(api_url(&s, None), anytype::DEFAULT_API_URL);
        s.api_url = Some("http://file".into());
        assert_eq!(api_url(&s, None), "http://file");
        assert_eq!(api_url(&s, Some("http://env".into())), "http://env");
    }
}
