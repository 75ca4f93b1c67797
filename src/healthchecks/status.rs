//! `healthchecks status`: each scheduled automation installed here, its remote check's status and
//! last ping beside its local verdict and what came of this machine's last ping.

use super::{HcSettings, Watch, remote_checks, sync};
use crate::settings::Settings;

/// Why the status could not be told.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Installed(#[from] super::installed::InstalledError),
    #[error("cannot read the checks: {0}")]
    Remote(String),
    #[error(transparent)]
    Health(#[from] crate::health::load::LoadError),
}

impl crate::exit::Exits for StatusError {
    /// Each cause's own; a server that does not answer, 1.
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::Installed(e) => e.exit(),
            Self::Remote(_) => crate::exit::Exit::Failure,
            Self::Health(e) => e.exit(),
        }
    }
}

/// One automation's line in `status`.
#[derive(serde::Serialize)]
pub struct StatusLine {
    pub name: String,
    /// The remote check's status (`new`, `up`, `grace`, `down`, `paused`), or `missing` / `off`, or
    /// `none` for one that runs only at login (sync makes no check for it).
    pub remote: String,
    pub last_ping: Option<String>,
    /// The local verdict (`health`).
    pub verdict: String,
    /// What came of this machine's last ping.
    pub last_sent: Option<String>,
    pub failures_in_row: u32,
}

/// The status of every scheduled automation installed here.
pub fn lines(settings: &Settings, cfg: &HcSettings) -> Result<Vec<StatusLine>, StatusError> {
    let defs = super::installed::installed(settings, cfg, None)?.defs;
    let (_, remote) = remote_checks(settings, cfg).map_err(StatusError::Remote)?;
    let src = crate::health::load::Sources::read(settings, None)?;
    let verdicts = crate::health::load::verdicts(settings, &src, None)?;
    let mut lines = Vec::new();
    for d in &defs {
        let watch = super::watch(cfg, &settings.namespace, &d.name);
        let found = sync::find(&remote, &settings.namespace, &d.name, &watch).ours();
        let pings = crate::state::read_pings(&settings.data_root, &d.name)
            .ok()
            .flatten();
        lines.push(StatusLine {
            name: d.name.to_string(),
            remote: match (&watch, found) {
                (Watch::Off, _) => "off".into(),
                // As sync says: no check by design, not a missing one.
                (Watch::Slug(_), None)
                    if matches!(d.schedule, Some(crate::schedule::Schedule::AtLogin)) =>
                {
                    "none".into()
                }
                (_, Some(r)) => r.status.clone(),
                (_, None) => "missing".into(),
            },
            last_ping: found.and_then(|r| r.last_ping.clone()),
            verdict: verdicts.iter().find(|v| v.name == d.name.as_str()).map_or(
                "unknown".into(),
                |v| {
                    serde_json::to_value(v.verdict)
                        .ok()
                        .and_then(|j| j.as_str().map(str::to_owned))
                        .unwrap_or_default()
                },
            ),
            last_sent: pings
                .as_ref()
                .map(|p| format!("{} {}: {}", p.at, p.ping, p.answer)),
            failures_in_row: pings.map_or(0, |p| p.failures_in_row),
        });
    }
    Ok(lines)
}
