//! The Linux keychain: the freedesktop Secret Service over D-Bus (gnome-keyring, KeePassXC, …).
//!
//! Items carry the attribute `service = <label>` (so `secret-tool lookup service <label>` finds
//! them) in the default collection. A locked item or collection is reported as locked — the runner
//! never asks to unlock, since no one may be there to answer a prompt.

use std::collections::HashMap;

use dbus_secret_service::{EncryptionType, Error, Item, SecretService};

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

fn map(e: Error) -> KeyError {
    match e {
        Error::Locked | Error::Prompt => KeyError::Locked,
        Error::Unavailable => KeyError::Unavailable("no Secret Service on the session bus".into()),
        // No session bus, or nothing owning org.freedesktop.secrets on it.
        Error::Dbus(e) => KeyError::Unavailable(
            e.message()
                .or(e.name())
                .unwrap_or("the session bus did not answer")
                .to_owned(),
        ),
        other => KeyError::Failed(other.to_string()),
    }
}

/// A session encrypted with Diffie-Hellman key exchange (the secret never crosses the bus in
/// clear); a prompt (a locked item) is dismissed at once, since no one may be there to answer it.
fn connect() -> Result<SecretService, KeyError> {
    SecretService::connect_with_max_prompt_timeout(EncryptionType::Dh, 0).map_err(map)
}

/// The items of `label`: the unlocked ones, or `Locked` when any is locked.
fn items<'a>(ss: &'a SecretService, label: &str) -> Result<Vec<Item<'a>>, KeyError> {
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
