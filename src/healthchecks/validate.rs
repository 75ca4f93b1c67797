//! What Healthchecks says of a key before it is stored (`secret store healthchecks.api|ping`) or
//! when it is checked.

use super::api::Api;
use super::{HcSettings, KeyKind, Watch};
use crate::keys::Secret;
use crate::settings::Settings;

/// What the server says of `key`. An API key lists the project's checks. A ping key has no call
/// of its own: it pings `/log` on a check of this namespace the API lists (a log entry, which
/// changes no status); with no such check, or no API key, only its form can be checked.
pub fn key(
    settings: &Settings,
    cfg: &HcSettings,
    kind: KeyKind,
    key: &Secret,
) -> Result<String, String> {
    match kind {
        KeyKind::Api => {
            let api = Api::new(&cfg.api_url, key.clone()).map_err(|e| e.to_string())?;
            let checks = api
                .list(Some(&super::tag(&settings.namespace)))
                .map_err(|e| e.to_string())?;
            Ok(format!(
                "Healthchecks accepts it ({} check(s) of this namespace)",
                checks.len()
            ))
        }
        KeyKind::Ping => {
            let remote = super::client(settings, cfg).and_then(|a| {
                a.list(Some(&super::tag(&settings.namespace)))
                    .map_err(|e| e.to_string())
            });
            let slug = remote
                .ok()
                .and_then(|r| r.into_iter().map(|c| c.slug).find(|slug| !slug.is_empty()));
            let Some(slug) = slug else {
                return Ok(
                    "its form is right; no check of this namespace to prove it on yet (the first ping does: automations healthchecks status)"
                        .into(),
                );
            };
            let url = super::ping::url(
                cfg,
                &Watch::Slug(slug.clone()),
                Some(key),
                super::ping::Ping::Log,
                None,
            )
            .expect("a slug with a key has a URL");
            let deadline = std::time::Instant::now() + super::ping::BOUND;
            let secrets = [key.expose()];
            let sent = super::ping::send(
                &url,
                b"automations: checking the ping key",
                deadline,
                &secrets,
            );
            match sent {
                Ok(_) => Ok(format!("Healthchecks took a log ping to {slug} with it")),
                Err(e) if e.starts_with("refused: 404") => Err(format!(
                    "Healthchecks does not know {slug} under this ping key (404): is it the ping key of the project the API key belongs to?"
                )),
                Err(e) => Err(e),
            }
        }
    }
}
