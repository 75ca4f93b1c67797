//! The head of the chain, kept in `<data root>/state/head` (docs/running.md), so `log verify` notices a log
//! whose tail was cut or that was emptied — which a hash chain alone cannot show, since what is
//! left of it still chains.
//!
//! One fixed-width JSON line, rewritten in place under the log's lock after every append: the live
//! segment's line count and size, and the hash of its last line. It is written after the line is
//! fsync'd and without an fsync of its own, so after a crash it can only lag behind the log, never
//! run ahead of it; `verify` accepts a head that lags (an append was interrupted) and reports one
//! the log does not reach. Writing it is best-effort: an append never fails because of the head.

use crate::platform::FileExt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;

/// Width of the record (padded with spaces), so rewriting it never leaves old bytes behind.
const WIDTH: usize = 192;

/// What the head records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub v: u32,
    /// Lines in the live segment.
    pub lines: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// The sha256 of its last line.
    pub hash: String,
    /// The live segment's inode when the head was written (0 in heads written before it was
    /// recorded): only a shortcut for the appending process, which trusts a head of the very file
    /// it is about to append to without reading its last line. Never how a segment is known: a
    /// copied, restored or moved data root has other inodes and is the same log.
    #[serde(default)]
    pub ino: u64,
}

/// The head file of the log in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    crate::layout::Layout::new(dir).head()
}

/// The head, if one was recorded and can be read.
pub fn read(dir: &Path) -> Option<Head> {
    let bytes = fsutil::read_in_data_root(&path(dir), WIDTH as u64).ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// The head, if one was recorded; why not, when something is there that cannot be read as one (a
/// FIFO, a folder, a link, garbage, an empty file).
pub fn read_checked(dir: &Path) -> Result<Option<Head>, String> {
    let bytes = match fsutil::read_in_data_root(&path(dir), WIDTH as u64) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_slice(bytes.trim_ascii_end())
        .map(Some)
        .map_err(|_| "it is not a head record".to_owned())
}

/// The head file, open for reading and rewriting in place, if there is one (it is made by
/// [`record`] with its first record in it: an empty head file reads as a broken one).
pub fn open(dir: &Path) -> io::Result<std::fs::File> {
    fsutil::open_in_data_root(
        &path(dir),
        std::fs::OpenOptions::new().read(true).write(true),
    )
}

/// The head recorded in an open head file, if it can be read.
pub fn read_from(file: &std::fs::File) -> Option<Head> {
    let mut buf = [0u8; WIDTH];
    let n = file.read_at(&mut buf, 0).ok()?;
    serde_json::from_slice(buf[..n].trim_ascii_end()).ok()
}

/// The record as written: one line, padded to the fixed width.
fn line(head: &Head) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(head).map_err(io::Error::other)?;
    if line.len() >= WIDTH {
        return Err(io::Error::other("chain head record too long"));
    }
    line.resize(WIDTH - 1, b' ');
    line.push(b'\n');
    Ok(line)
}

/// Records `head` in the log in `dir`: rewritten in place in `file` (the head file, opened with
/// [`open`]), or, when nothing is there yet, a new head file put there whole, so a full disk
/// leaves either no head or a readable one (and something else there is left for `verify`).
pub fn record(dir: &Path, file: Option<&std::fs::File>, head: &Head) -> io::Result<()> {
    let line = line(head)?;
    match file {
        Some(f) => f.write_all_at(&line, 0),
        None => {
            let path = path(dir);
            fsutil::private_dir(path.parent().unwrap_or(dir))?;
            fsutil::create_durably(&path, &line)
        }
    }
}

/// Records `head`, in place when there is a head file.
pub fn write(dir: &Path, head: &Head) -> io::Result<()> {
    record(dir, open(dir).ok().as_ref(), head)
}
