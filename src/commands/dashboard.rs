//! `dashboard`: serves the local page until interrupted.

use super::data_root;
use super::fail::{CmdResult, Fail};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::settings::Settings;

/// `dashboard`: serves until interrupted.
pub(super) fn dashboard(settings: &Settings, port: u16, no_open: bool) -> CmdResult {
    data_root(settings, Use::Write)?;
    crate::dashboard::serve(settings, port, !no_open).map_err(|e| {
        // A port in use or not ours to take is this machine's state, not a failure.
        let taken = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::AddrInUse | std::io::ErrorKind::PermissionDenied
                )
            })
        });
        if taken {
            Fail::new(Exit::Environment, e)
        } else {
            Fail::from(e)
        }
    })?;
    Ok(Exit::Success)
}
