//! AnyType (docs/keys.md): what a key really grants — `GET <base>/v2/auth/whoami` and the comparison with
//! what a definition declares, here — and the key gate built on it ([`gate`]). This module is the
//! one place the response shape lives.
//!
//! # The response we expect (HTTP 200, JSON)
//!
//! ```json
//! {
//!   "key": {
//!     "kind": "restricted",                 // "restricted" | "full" | "legacy"
//!     "scoped": true,                       // limited to the spaces below
//!     "all_spaces": false,                  // true: reaches every space, present and future
//!     "permission": "read",                 // the word for the key as a whole
//!     "expires_at": "2027-01-01T00:00:00Z", // RFC 3339, or null for no expiry
//!     "spaces": [ { "id": "bafy…", "permission": "read" } ]
//!   }
//! }
//! ```
//!
//! Unknown extra fields are ignored; a missing or mistyped field, a non-200 answer, no answer, or
//! an answer slower than the deadline is a refusal — never a pass. A refusal lists every
//! difference it finds and never contains the key.

pub mod gate;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::keys::Secret;

/// The AnyType API when neither `ANYTYPE_API_URL` nor `spaces.json` says otherwise.
pub const DEFAULT_API_URL: &str = "http://127.0.0.1:31009";
/// The environment variable naming the AnyType API.
pub const ENV_API_URL: &str = "ANYTYPE_API_URL";
/// The whole whoami exchange must finish within this.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The API version the MCP server is told to speak.
pub const API_VERSION: &str = "2025-05-20";

/// The most of a whoami answer that is read (a real one is a few hundred bytes per space).
pub const WHOAMI_MAX: u64 = 64 * 1024;

/// The whoami answer.
#[derive(Debug, Clone, Deserialize)]
pub struct WhoAmI {
    pub key: KeyInfo,
}

/// What the key is.
#[derive(Debug, Clone, Deserialize)]
pub struct KeyInfo {
    pub kind: String,
    pub scoped: bool,
    pub all_spaces: bool,
    pub permission: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub spaces: Vec<SpaceGrant>,
}

/// What the key grants in one space.
#[derive(Debug, Clone, Deserialize)]
pub struct SpaceGrant {
    pub id: String,
    pub permission: String,
}

/// Asks AnyType at `base` what `key` grants. Every failure is a one-line reason.
pub fn whoami(base: &str, key: &Secret, deadline: Duration) -> Result<WhoAmI, String> {
    let url = format!("{}/v2/auth/whoami", base.trim_end_matches('/'));
    let client = reqwest::blocking::Client::builder()
        .timeout(deadline)
        .connect_timeout(deadline)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let response = client
        .get(&url)
        .header("Authorization", format!("Bearer {}", key.expose()))
        .header("Anytype-Version", API_VERSION)
        .send()
        .map_err(|e| {
            if e.is_timeout() {
                format!(
                    "AnyType at {base} did not answer within {} s",
                    deadline.as_secs_f64()
                )
            } else {
                format!("no answer from AnyType at {base} (is it running?)")
            }
        })?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(format!("AnyType rejected the key ({})", status.as_u16()));
    }
    if status != reqwest::StatusCode::OK {
        return Err(format!("AnyType answered {} to whoami", status.as_u16()));
    }
    let mut response = response;
    let (body, more) = crate::http::answer_capped(&mut response, WHOAMI_MAX).map_err(|e| {
        let timed_out = e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|i| i.downcast_ref::<reqwest::Error>())
                .is_some_and(reqwest::Error::is_timeout);
        if timed_out {
            format!(
                "AnyType at {base} did not finish answering within {} s",
                deadline.as_secs_f64()
            )
        } else {
            "AnyType's answer broke off".to_owned()
        }
    })?;
    if more {
        return Err(format!(
            "AnyType's whoami answer is larger than {} KiB",
            WHOAMI_MAX / 1024
        ));
    }
    // serde's message can quote the answer's strings; say where, never what.
    serde_json::from_slice(&body).map_err(|e| {
        format!(
            "unreadable whoami answer (line {}, column {})",
            e.line(),
            e.column()
        )
    })
}

/// What a definition declares, with its spaces resolved to AnyType ids.
#[derive(Debug, Clone)]
pub struct Declared {
    pub permission: String,
    /// (name in spaces.json, AnyType id)
    pub spaces: Vec<(String, String)>,
}

/// Every way `w` differs from `declared`; empty means the key matches exactly.
pub fn differences(w: &WhoAmI, declared: &Declared, now: DateTime<Utc>) -> Vec<String> {
    let k = &w.key;
    let mut out = Vec::new();
    match k.kind.as_str() {
        "restricted" => {}
        "full" => out.push("the key is a full key; a restricted key is required".into()),
        "legacy" => out.push("the key is a legacy key; a restricted key is required".into()),
        other => out.push(format!(
            "the key is of unknown kind {other:?}; a restricted key is required"
        )),
    }
    if !k.scoped {
        out.push("the key is not scoped to spaces".into());
    }
    if k.all_spaces {
        out.push("the key reaches all spaces".into());
    }
    if let Some(t) = k.expires_at
        && t <= now
    {
        out.push(format!("the key expired at {}", t.to_rfc3339()));
    }
    if k.permission != declared.permission {
        out.push(format!(
            "the key's permission is {:?}, declared {:?}",
            k.permission, declared.permission
        ));
    }
    for (name, id) in &declared.spaces {
        match k.spaces.iter().find(|g| &g.id == id) {
            None => out.push(format!("declared space {name} is not reached by the key")),
            Some(g) if g.permission != declared.permission => out.push(format!(
                "space {name}: permission {:?}, declared {:?}",
                g.permission, declared.permission
            )),
            Some(_) => {}
        }
    }
    for g in &k.spaces {
        if !declared.spaces.iter().any(|(_, id)| id == &g.id) {
            out.push(format!(
                "the key also reaches space {} ({}), which is not declared",
                g.id, g.permission
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(json: &str) -> WhoAmI {
        serde_json::from_str(json).unwrap()
    }

    fn declared() -> Declared {
        Declared {
            permission: "read".into(),
            spaces: vec![("agent".into(), "id-agent".into())],
        }
    }

    const OK: &str = r#"{"key": {"kind": "restricted", "scoped": true, "all_spaces": false, "permission": "read",
        "expires_at": null, "spaces": [{"id": "id-agent", "permission": "read"}], "extra": 1}}"#;

    #[test]
    fn a_matching_key_has_no_differences() {
        assert!(differences(&who(OK), &declared(), Utc::now()).is_empty());
    }

    #[test]
    fn each_mismatch_is_named() {
        let cases = [
            (OK.replace("\"kind\": \"restricted\"", "\"kind\": \"full\""), "a full key"),
            (OK.replace("\"kind\": \"restricted\"", "\"kind\": \"legacy\""), "a legacy key"),
            (OK.replace("\"scoped\": true", "\"scoped\": false"), "not scoped"),
            (OK.replace("\"all_spaces\": false", "\"all_spaces\": true"), "reaches all spaces"),
            (OK.replace("\"expires_at\": null", "\"expires_at\": \"2020-01-01T00:00:00Z\""), "expired"),
            (OK.replace("\"permission\": \"read\",\n", "\"permission\": \"readwrite\",\n"), "the key's permission is \"readwrite\""),
            (OK.replace("{\"id\": \"id-agent\", \"permission\": \"read\"}", "{\"id\": \"id-agent\", \"permission\": \"readwrite\"}"), "space agent: permission \"readwrite\""),
            (OK.replace("{\"id\": \"id-agent\", \"permission\": \"read\"}", "{\"id\": \"id-agent\", \"permission\": \"read\"}, {\"id\": \"id-work\", \"permission\": \"read\"}"), "also reaches space id-work"),
            (OK.replace("{\"id\": \"id-agent\", \"permission\": \"read\"}", ""), "declared space agent is not reached"),
        ];
        for (json, needle) in cases {
            let d = differences(&who(&json), &declared(), Utc::now());
            assert!(d.iter().any(|x| x.contains(needle)), "{needle}: {d:?}");
        }
        let future = OK.replace(
            "\"expires_at\": null",
            "\"expires_at\": \"2999-01-01T00:00:00Z\"",
        );
        assert!(differences(&who(&future), &declared(), Utc::now()).is_empty());
    }
}
