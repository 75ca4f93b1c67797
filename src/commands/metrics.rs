//! `automations metrics [--openmetrics]`: the samples Prometheus scrapes, printed (docs/metrics.md).

use std::io::Write;

use super::data_root;
use super::fail::CmdResult;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::metrics::{self, Format};
use crate::settings::Settings;

pub fn metrics(settings: &Settings, openmetrics: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let src = crate::health::load::Sources::read(settings, None)?;
    let format = if openmetrics {
        Format::OpenMetrics
    } else {
        Format::Text
    };
    let text = metrics::document(settings, &src, format)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    // A command that ends next: what was read is left to the exit.
    std::mem::forget(src);
    Ok(Exit::Success)
}
