//! The settings files of the data root (`health.toml`, `notify.toml`, and any later one): private,
//! strict TOML, read one way. Each file's own module says what its keys mean and walks them; this
//! one reads the file under the data root's rules (a regular file, not a link, 0600, at most
//! 64 KiB), parses it as TOML, and turns every problem into one error naming the file.
//!
//! A file that cannot be used as a file (a FIFO, a link, readable by others) is an environment
//! problem (exit 3); one whose contents are wrong is bad input (exit 2). This module never writes.

use std::path::Path;

use crate::fsutil;

/// The largest settings file read.
pub const MAX_BYTES: u64 = 64 * 1024;

/// Whether a refused file could not be read as a file, or said something wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Not a private regular file, or unreadable: the environment is unusable (exit 3).
    Unusable,
    /// Read, but not valid: bad input (exit 2).
    Invalid,
}

/// Why a settings file was refused: every problem, each naming its key.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {}", problems.join("; "))]
pub struct Refused {
    pub path: String,
    pub kind: Problem,
    pub problems: Vec<String>,
}

impl crate::exit::Exits for Refused {
    /// A settings file that is no private regular file is the environment's (3); one whose
    /// contents are wrong, bad input (2).
    fn exit(&self) -> crate::exit::Exit {
        match self.kind {
            Problem::Unusable => crate::exit::Exit::Environment,
            Problem::Invalid => crate::exit::Exit::BadInput,
        }
    }
}

/// Reads `<data_root>/<file>` and hands its table to `parse`, which returns every problem it finds
/// (each as `key: what is wrong`). `None` when there is no such file.
pub fn load<T>(
    data_root: &Path,
    file: crate::layout::SettingsFile,
    parse: impl FnOnce(&toml::Table) -> Result<T, Vec<String>>,
) -> Result<Option<T>, Refused> {
    let path = crate::layout::Layout::new(data_root).settings_file(file);
    let refused = |kind, problems| Refused {
        path: path.display().to_string(),
        kind,
        problems,
    };
    let bytes = match fsutil::read_private(&path, MAX_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(refused(Problem::Unusable, vec![e.to_string()])),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| refused(Problem::Invalid, vec!["not UTF-8 text".into()]))?;
    table(&text)
        .and_then(|t| parse(&t))
        .map(Some)
        .map_err(|p| refused(Problem::Invalid, p))
}

/// The text of a settings file as a TOML table, or the one problem that it is not one.
pub fn table(text: &str) -> Result<toml::Table, Vec<String>> {
    text.parse()
        .map_err(|e: toml::de::Error| vec![format!("not valid TOML: {}", e.message())])
}
