//! `dashboard`: serves the local page until interrupted.

use super::data_root;
use super::fail::CmdResult;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::settings::Settings;

/// `dashboard`: serves until interrupted.
pub(super) fn dashboard(settings: &Settings, port: u16, no_open: bool) -> CmdResult {
    data_root(settings, Use::Write)?;
    crate::dashboard::serve(settings, port, !no_open)?;
    Ok(Exit::Success)
}
