//! The Windows Credential Manager: one generic credential per label, in the user's vault
//! (persisted on this machine, never roamed), its blob the key's UTF-8 bytes.

use windows_sys::Win32::Foundation::ERROR_NOT_FOUND;
use windows_sys::Win32::Security::Credentials::{
    CRED_PERSIST_LOCAL_MACHINE, CRED_TYPE_GENERIC, CREDENTIALW, CredDeleteW, CredFree, CredReadW,
    CredWriteW,
};

use super::{KeyError, KeyStore, Secret};
use crate::names::Label;

/// The user's Credential Manager vault.
pub struct CredentialManager;

/// `label` as the NUL-ended UTF-16 the API takes.
fn wide(label: &Label) -> Vec<u16> {
    label.to_string().encode_utf16().chain(Some(0)).collect()
}

/// The last error, as a key store error (none found is the caller's to read first).
fn failed(what: &str) -> KeyError {
    KeyError::Failed(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn not_found() -> bool {
    std::io::Error::last_os_error().raw_os_error() == Some(ERROR_NOT_FOUND as i32)
}

impl KeyStore for CredentialManager {
    fn get(&self, label: &Label) -> Result<Option<Secret>, KeyError> {
        let name = wide(label);
        let mut found: *mut CREDENTIALW = std::ptr::null_mut();
        // SAFETY: a NUL-ended name and an out-pointer the API fills with memory freed below.
        if unsafe { CredReadW(name.as_ptr(), CRED_TYPE_GENERIC, 0, &mut found) } == 0 {
            return if not_found() {
                Ok(None)
            } else {
                Err(failed("reading the credential"))
            };
        }
        // SAFETY: the API returned a credential whose blob is `CredentialBlobSize` bytes.
        let bytes = unsafe {
            let c = &*found;
            let blob = if c.CredentialBlob.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(c.CredentialBlob, c.CredentialBlobSize as usize).to_vec()
            };
            CredFree(found.cast());
            blob
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| KeyError::Invalid("the stored key is not UTF-8 text".into()))?;
        Secret::new(text).map(Some)
    }

    fn set(&self, label: &Label, secret: &Secret) -> Result<(), KeyError> {
        let mut name = wide(label);
        let mut blob = secret.expose().as_bytes().to_vec();
        let credential = CREDENTIALW {
            Type: CRED_TYPE_GENERIC,
            TargetName: name.as_mut_ptr(),
            CredentialBlobSize: blob.len() as u32,
            CredentialBlob: blob.as_mut_ptr(),
            Persist: CRED_PERSIST_LOCAL_MACHINE,
            ..Default::default()
        };
        // SAFETY: the structure points at the name and blob above, alive for the call.
        let written = unsafe { CredWriteW(&credential, 0) };
        blob.fill(0);
        if written == 0 {
            return Err(failed("storing the credential"));
        }
        Ok(())
    }

    fn delete(&self, label: &Label) -> Result<bool, KeyError> {
        let name = wide(label);
        // SAFETY: a NUL-ended name.
        if unsafe { CredDeleteW(name.as_ptr(), CRED_TYPE_GENERIC, 0) } == 0 {
            return if not_found() {
                Ok(false)
            } else {
                Err(failed("deleting the credential"))
            };
        }
        Ok(true)
    }
}
