//! What differs between Unix (Linux, macOS) and Windows below the runner, in one place: positional
//! reads and writes, file modes and owners, opening without following a link, a file's identity,
//! what an OS error means, and the user's name. Everything above calls these and stays the same on
//! every system; docs/windows.md says what each means on Windows.
//!
//! On Windows a file has no mode bits: its privacy is its folder's access list, and the data root
//! lives under `%LOCALAPPDATA%`, which only its user (and administrators) may open. So `mode`
//! setters do nothing there and [`mode_of`] answers `None`, which every check reads as "nothing to
//! refuse".

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

/// What kind of file `meta` describes, in the words of an error message.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        special_kind(&t)
    }
}

/// How an open that refuses links and FIFOs was refused, when the error says so.
#[cfg_attr(windows, allow(dead_code))]
pub enum Refused {
    Link,
    Fifo,
    Directory,
}

/// Which file `path` names (following links): see `file_meta_id`.
pub fn path_id(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    path_meta_id(path).map(|(_, id)| id)
}
