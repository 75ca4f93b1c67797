//! The Linux keychain: the freedesktop Secret Service over D-Bus (gnome-keyring, KeePassXC, …).
//!
//! Items carry the attribute `service = <label>` (so `secret-tool lookup service <label>` finds
//! them) in the default collection. A locked item or collection is reported as locked — the runner
//! never asks to unlock, since no one may be there to answer a prompt.

use std::collections::HashMap;

use secret_service::EncryptionType;
use secret_service::blocking::SecretService;

use super::{DEADLINE, KeyError, KeyStore, Secret, with_deadline};
use crate::names::Label;

/// The attribute items are looked up by.
pub const ATTRIBUTE: &str = "service";

/// The Secret Service of the session bus (`DBUS_SESSION_BUS_ADDRESS`).
#[derive(Default)]
pub struct SecretServiceStore;

impl SecretServiceStore {
    pub fn new() -> Self {
        Self
    }
}

fn map(e: secret_service::Error) -> KeyError {
    match e {
        secret_service::Error::Locked => KeyError::Locked,
        secret_service::Error::Unavailable => {
            KeyError::Unavailable("no Secret Service on the session bus".into())
        }
        secret_service::Error::Prompt | secret_service::Error::PromptDisconnected => {
            KeyError::Locked
        }
        secret_service::Error::Zbus(e) => KeyError::Unavailable(e.to_string()),
        other => KeyError::Failed(other.to_string()),
    }
}

fn connect() -> Result<SecretService<'static>, KeyError> {
    SecretService::connect(EncryptionType::Dh).map_err(map)
}

/// The items of `label`: the unlocked ones, or `Locked` when any is locked.
fn items<'a>(
    ss: &'a SecretService<'a>,
    label: &str,
) -> Result<Vec<secret_service::blocking::Item<'a>>, KeyError> {
    let found = ss
        .search_items(HashMap::from([(ATTRIBUTE, label)]))
        .map_err(map)?;
    if found.locked.is_empty() {
        Ok(found.unlocked)
    } else {
        Err(KeyError::Locked)
    }
}

impl KeyStore for SecretServiceStore {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        let label = label.to_string();
        with_deadline(DEADLINE, move || {
            let ss = connect()?;
            let Some(item) = items(&ss, &label)?.into_iter().next() else {
                return Ok(None);
            };
            let bytes = item.get_secret().map_err(map)?;
            let text = String::from_utf8(bytes)
                .map_err(|_| KeyError::Invalid("the stored key is not text".into()))?;
            Secret::new(text).map(Some)
        })
    }

    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError> {
        let label = label.to_string();
        let secret = secret.clone();
        with_deadline(DEADLINE, move || {
            let ss = connect()?;
            let collection = ss.get_default_collection().map_err(map)?;
            if collection.is_locked().map_err(map)? {
                return Err(KeyError::Locked);
            }
            collection
                .create_item(
                    &format!("automations key for {label}"),
                    HashMap::from([(ATTRIBUTE, label.as_str())]),
                    secret.expose().as_bytes(),
                    true,
                    "text/plain",
                )
                .map_err(map)?;
            Ok(())
        })
    }

    fn delete(&self, label: &Label) -> Result<bool, KeyError> {
        let label = label.to_string();
        with_deadline(DEADLINE, move || {
            let ss = connect()?;
            let found = items(&ss, &label)?;
            for item in &found {
                item.delete().map_err(map)?;
            }
            Ok(!found.is_empty())
        })
    }
}
