//! The Healthchecks Management API (v3): list, create (with `unique`), update, pause, resume and
//! delete checks, with a read-write API key in the `X-Api-Key` header. Every call is bounded by
//! [`DEADLINE`]; an error names the call and what the server said, never the key or a check UUID.

use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::settings::CheckId;
use crate::keys::Secret;

/// The deadline of one API call.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The most of an answer read (a project's checks, as JSON).
const ANSWER_MAX: u64 = 8 * 1024 * 1024;

/// A check as the API lists it (the fields this tool reads). Its UUID is a secret.
#[derive(Clone, Debug, Deserialize)]
pub struct Remote {
    #[serde(default, deserialize_with = "server_text")]
    pub name: String,
    #[serde(default, deserialize_with = "server_text")]
    pub slug: String,
    #[serde(default)]
    pub tags: String,
    #[serde(default)]
    pub desc: String,
    #[serde(default)]
    pub grace: u32,
    #[serde(default)]
    pub timeout: Option<u32>,
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub tz: Option<String>,
    #[serde(default, deserialize_with = "server_text")]
    pub status: String,
    #[serde(default, deserialize_with = "server_optional_text")]
    pub last_ping: Option<String>,
    #[serde(default, deserialize_with = "check_id")]
    pub uuid: Option<CheckId>,
}

/// A field people are shown, as [`super::shown`] makes it (a server's escapes never reach a
/// terminal, nor a UUID a screen).
fn server_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map_or_else(String::new, |t| super::shown(&t, &[], 200)))
}

fn server_optional_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|t| super::shown(&t, &[], 200)))
}

fn check_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<CheckId>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.and_then(|s| CheckId::parse(&s)))
}

impl Remote {
    /// Whether it carries `tag` (tags are one space-separated string).
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.split_whitespace().any(|t| t == tag)
    }
}

/// What a check should be: the fields `sync` sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Spec {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    pub tags: String,
    pub desc: String,
    pub grace: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

/// Why a call failed: no answer, or the server's refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("Healthchecks did not answer ({0})")]
    NoAnswer(String),
    #[error(
        "Healthchecks refused the API key ({0}): store a read-write key with `automations secret store healthchecks.api`"
    )]
    KeyRefused(String),
    #[error("Healthchecks refused: {0}")]
    Refused(String),
}

/// A Management API client.
pub struct Api {
    base: String,
    key: Secret,
    client: reqwest::blocking::Client,
}

impl Api {
    pub fn new(base: &str, key: Secret) -> Result<Self, ApiError> {
        let client = reqwest::blocking::Client::builder()
            .timeout(DEADLINE)
            .connect_timeout(DEADLINE)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ApiError::NoAnswer(crate::http::classify(&e).as_str().to_owned()))?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            key,
            client,
        })
    }

    /// One call; the status and the JSON answer (`Null` when it was not JSON).
    fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ApiError> {
        let url = format!("{}/api/v3/{path}", self.base);
        let mut key = reqwest::header::HeaderValue::from_str(self.key.expose())
            .map_err(|_| ApiError::KeyRefused("it is not a header value".into()))?;
        key.set_sensitive(true);
        let mut rb = self.client.request(method, url).header("X-Api-Key", key);
        if let Some(b) = body {
            rb = rb
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        let mut r = rb
            .send()
            .map_err(|e| ApiError::NoAnswer(crate::http::classify(&e).as_str().to_owned()))?;
        let status = r.status().as_u16();
        let (bytes, _) = crate::http::answer_capped(&mut r, ANSWER_MAX)
            .map_err(|e| ApiError::NoAnswer(format!("the answer broke off: {}", e.kind())))?;
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let key = self.key.expose();
        match status {
            200..=299 => Ok((status, json)),
            401 => Err(ApiError::KeyRefused(said(status, &json, &bytes, key))),
            _ => Err(ApiError::Refused(said(status, &json, &bytes, key))),
        }
    }

    /// Every check of the project (the key's project), or those with `tag`.
    pub fn list(&self, tag: Option<&str>) -> Result<Vec<Remote>, ApiError> {
        let path = match tag {
            Some(t) => format!("checks/?tag={t}"),
            None => "checks/".into(),
        };
        let (_, json) = self.call(Method::GET, &path, None)?;
        serde_json::from_value::<Listing>(json)
            .map(|l| l.checks)
            .map_err(|e| ApiError::Refused(format!("an answer that is not a list of checks ({e})")))
    }

    /// The check with `id`; `None` when the server has none.
    pub fn get(&self, id: &CheckId) -> Result<Option<Remote>, ApiError> {
        match self.call(Method::GET, &format!("checks/{}", id.expose()), None) {
            Ok((_, json)) => one(json).map(Some),
            Err(ApiError::Refused(r)) if r.starts_with("404") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the check of `spec`, or updates the one with its slug (`unique: ["slug"]`); a new
    /// check notifies through every integration of the project (`channels: "*"`), as one made
    /// in the web page does.
    pub fn create(&self, spec: &Spec) -> Result<Remote, ApiError> {
        let mut body = serde_json::to_value(spec).expect("a spec is JSON");
        body["channels"] = "*".into();
        if spec.slug.is_some() {
            body["unique"] = serde_json::json!(["slug"]);
        }
        let (_, json) = self.call(Method::POST, "checks/", Some(&body))?;
        one(json)
    }

    /// Sets `spec`'s fields on the check `id` (its integrations are left as they are).
    pub fn update(&self, id: &CheckId, spec: &Spec) -> Result<Remote, ApiError> {
        let body = serde_json::to_value(spec).expect("a spec is JSON");
        let (_, json) = self.call(
            Method::POST,
            &format!("checks/{}", id.expose()),
            Some(&body),
        )?;
        one(json)
    }

    /// Pauses the check `id`.
    pub fn pause(&self, id: &CheckId) -> Result<(), ApiError> {
        self.call(Method::POST, &format!("checks/{}/pause", id.expose()), None)
            .map(drop)
    }

    /// Resumes the check `id`; one that is not paused (409) is fine.
    pub fn resume(&self, id: &CheckId) -> Result<(), ApiError> {
        match self.call(
            Method::POST,
            &format!("checks/{}/resume", id.expose()),
            None,
        ) {
            Ok(_) => Ok(()),
            Err(ApiError::Refused(r)) if r.starts_with("409") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the check `id`.
    pub fn delete(&self, id: &CheckId) -> Result<(), ApiError> {
        self.call(Method::DELETE, &format!("checks/{}", id.expose()), None)
            .map(drop)
    }
}

#[derive(Deserialize)]
struct Listing {
    checks: Vec<Remote>,
}

fn one(json: Value) -> Result<Remote, ApiError> {
    serde_json::from_value(json)
        .map_err(|e| ApiError::Refused(format!("an answer that is not a check ({e})")))
}

/// "400 json validation error: …": the status and the server's `error` (or its first words),
/// as [`super::shown`] lets it be shown: the API key and any UUID blanked, controls escaped.
fn said(status: u16, json: &Value, bytes: &[u8], key: &str) -> String {
    let text = json
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned());
    format!("{status} {}", super::shown(&text, &[key], 120))
        .trim()
        .to_owned()
}
