//! The run log: `<data root>/runs.jsonl`, an append-only, hash-chained JSONL file (docs/running.md).
//!
//! # Format (version 1)
//!
//! One JSON object per line. Every line has `v` (1), `event`, `name`, `at` (RFC 3339 UTC with
//! milliseconds) and `prev`: the lowercase hex sha256 of the previous line's bytes (without its
//! newline), or `"genesis"` on the very first line. Events and their extra fields:
//!
//! | event | extra fields |
//! |---|---|
//! | `started` | `run`, `trigger`, `pid`, `definition` (sha256 of the file, `null` when missing), `clock`; `jitter_ms` when it waited; `attempt` (and from the second, `first_run`) when its firing retries; `ended` (`{run, processes}`) when it first ended what a killed firing left running |
//! | `finished` | `run`, `outcome` (`ok`/`failed`/`timeout`/`stopped`), `exit_code`, `signal`, `duration_ms`, `error` (`null` or `{class, detail}`), `stdout_tail`, `stderr_tail`, `dropped` (`{stdout, stderr}` bytes), `facts`, `headline`, `http`, `leftover_processes`, `clock` |
//! | `skipped` | `trigger`, `reason` (`paused`/`stopped`/`already_running`/`slot_done`) |
//! | `paused` / `resumed` | `by` (`hand`/`auto`), `reason` (pause only) |
//! | `stop_all` / `resume_all` | `reason` and `stopped` (running runs sent SIGTERM) for `stop_all`; `name` is `""` |
//! | `rotated` | `previous` (the previous segment's file name), `tail` (sha256 of its last line) |
//!
//! `clock` is `{boot, awake_ms, total_ms}` (see [`crate::clock`]).
//!
//! # Writing
//!
//! An append takes an exclusive lock on `runs.lock` (a separate, never-unlinked file, so rotation
//! can rename the log under the lock), reads the last line to chain `prev`, writes the whole line
//! with one `write`, and fsyncs. A short or failed write is truncated away before the lock is
//! released, so no half line is left behind. A torn final line (a crash mid-write) is sealed by
//! the next append with a newline and chained like any other line; readers count it as unreadable.
//! Past 64 MiB the log is renamed `runs-<UTC stamp>.jsonl` and the new file starts with `rotated`,
//! whose `prev` is the old segment's tail hash, so the chain runs across segments; past
//! [`KEEP_SEGMENTS`] rotated segments the oldest are deleted, and `verify` accepts the chain
//! starting at the seam of a deleted one. After every append the head of the chain (line count,
//! size, last hash of the live segment) is recorded in `state/head` ([`head`]), so a cut or
//! emptied log is noticed. An append that finds the disk full frees the reserve kept in
//! `state/reserve` ([`reserve`]) and tries once more.
//!
//! # Reading
//!
//! Readers go backwards from the end, block by block, so they cost what they report, not the size
//! of the log; torn or invalid lines are counted, never fatal. This module must never rewrite or
//! reorder existing lines.

mod event;
mod parse;
mod read;
mod verify;
mod write;

pub mod head;
pub mod index;
pub mod reserve;
pub mod scan;

use crate::platform::FileExt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil;

pub use event::*;
pub use read::{Backwards, LINE_MAX, RevLine, RevLines};
pub use verify::{Verification, verify};
use write::Pending;

/// The schema version written in every line.
pub const VERSION: u32 = 1;
/// The live segment.
pub const LOG_FILE: &str = crate::layout::LOG_FILE;
/// The size past which the live segment is rotated.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// `prev` of the first line ever written.
pub const GENESIS: &str = "genesis";
/// Rotated segments kept; older ones are deleted.
pub const KEEP_SEGMENTS: usize = 8;

/// Why the log could not be written or read; names the file.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot open the run log {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot append to the run log {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the run log {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot rotate the run log {path}")]
    Rotate {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl LogError {
    /// Whether the log cannot be opened at all: the data root's problem, exit 3.
    pub fn unusable(&self) -> bool {
        matches!(self, Self::Open { .. })
    }
}

impl crate::exit::Exits for LogError {
    /// A log that cannot be opened at all, or a FIFO, link or folder where one of its files
    /// belongs, is the data root's problem (3); the rest fail (1).
    fn exit(&self) -> crate::exit::Exit {
        let (Self::Open { source, .. }
        | Self::Write { source, .. }
        | Self::Read { source, .. }
        | Self::Rotate { source, .. }) = self;
        crate::exit::Exit::environment_if(
            self.unusable() || crate::fsutil::FileError::of(source).is_some(),
        )
    }
}

/// The run log of one data root.
#[derive(Clone, Debug)]
pub struct RunLog {
    dir: PathBuf,
    layout: crate::layout::Layout,
    rotate_bytes: u64,
    keep: usize,
    /// Where the log stood after this handle's last append (inode, lines, size, last hash): when
    /// it still ends there, the next append chains to it without reading anything back.
    known: std::cell::RefCell<Option<head::Head>>,
    /// What an append left to make durable (see [`RunLog::append_unsynced`]).
    pending: std::cell::RefCell<Option<Pending>>,
    /// Whether each appended event is also written to stdout (in a pod: docs/kubernetes.md).
    mirror: bool,
}

impl RunLog {
    /// The log in `data_root` (nothing is touched until the first append or read).
    pub fn new(data_root: &Path) -> Self {
        Self {
            dir: data_root.to_path_buf(),
            layout: crate::layout::Layout::new(data_root),
            rotate_bytes: ROTATE_BYTES,
            keep: KEEP_SEGMENTS,
            known: std::cell::RefCell::new(None),
            pending: std::cell::RefCell::new(None),
            mirror: false,
        }
    }

    /// The same log also writing each appended event to stdout as one JSON line, after it is in
    /// the log (in a pod, whose data root may go with it, the cluster's log collection keeps
    /// them). A stdout that cannot be written loses nothing: the log is the record.
    pub fn with_stdout_mirror(mut self, on: bool) -> Self {
        self.mirror = on;
        self
    }

    /// The same log rotating at `bytes` instead of 64 MiB (tests of rotation).
    pub fn with_rotation(mut self, bytes: u64) -> Self {
        self.rotate_bytes = bytes;
        self
    }

    /// The same log rotating at `bytes` when given (a test's setting), else as it was.
    pub fn with_test_rotation(self, bytes: Option<u64>) -> Self {
        match bytes {
            Some(b) => self.with_rotation(b),
            None => self,
        }
    }

    /// The same log keeping `n` rotated segments (tests of retention).
    pub fn with_retention(mut self, n: usize) -> Self {
        self.keep = n;
        self
    }

    /// The live segment's path.
    pub fn path(&self) -> PathBuf {
        self.layout.log()
    }

    /// Every segment, newest first: the live one, then the rotated ones in the order their
    /// `rotated` seams give (each segment's first line names the one before it), then any the
    /// seams do not reach, by name. Names sort in time order, but the chain is the authority: a
    /// log rotated by an older version may hold names that do not.
    pub fn segments(&self) -> Vec<PathBuf> {
        let mut rotated = self.rotated_by_name();
        let mut all = vec![self.path()];
        while !rotated.is_empty() {
            let Some(previous) = seam_previous(all.last().expect("never empty")) else {
                break;
            };
            let Some(i) = rotated
                .iter()
                .position(|p| p.file_name().is_some_and(|n| *n == *previous))
            else {
                break;
            };
            all.push(rotated.remove(i));
        }
        all.extend(rotated);
        all
    }

    /// The rotated segments, newest name first.
    fn rotated_by_name(&self) -> Vec<PathBuf> {
        let mut rotated: Vec<PathBuf> = fsutil::list_named(&self.dir, "runs-", &[".jsonl"])
            .unwrap_or_default()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        rotated.reverse();
        rotated
    }

    /// Reads records backwards, newest first, across segments.
    pub fn backwards(&self) -> Backwards {
        // Open the live segment before listing the rotated ones: if it is rotated in between, the
        // open handle is the renamed file, which the listing then names too — skipped by inode.
        let live = open_segment(&self.path()).and_then(|f| {
            let (meta, (_, ino)) = crate::platform::file_meta_id(&f)?;
            Ok((RevLines::new(f, meta.len())?, ino))
        });
        let mut segments = self.segments();
        segments.remove(0);
        let mut error = None;
        let (current, live_ino) = match live {
            Ok((lines, ino)) => (Some((self.path(), lines)), Some(ino)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (None, None),
            Err(source) => {
                // A FIFO, link or directory where the log belongs: say so, never read past it.
                error = Some(LogError::Read {
                    path: self.path(),
                    source,
                });
                segments.clear();
                (None, None)
            }
        };
        segments.retain(|p| {
            live_ino.is_none() || crate::platform::path_id(p).map(|(_, ino)| ino).ok() != live_ino
        });
        Backwards {
            segments,
            current,
            unreadable: 0,
            error,
        }
    }
}

/// The segment a segment's first line says it was rotated from, if that line is a seam.
pub(super) fn seam_previous(path: &Path) -> Option<std::ffi::OsString> {
    seam_of(&open_segment(path).ok()?).map(|r| r.previous.into())
}

/// The `rotated` seam a segment starts with, if it does.
pub(super) fn seam_of(file: &File) -> Option<Rotated> {
    // A seam is a short line (with the names retention deleted); read no more than could hold one.
    let mut buf = vec![0u8; 4096];
    let n = file.read_at(&mut buf, 0).ok()?;
    let line = buf[..n].split(|&b| b == b'\n').next()?;
    match serde_json::from_slice::<Record>(line).ok()?.event {
        Event::Rotated(r) => Some(r),
        _ => None,
    }
}

/// Opens a segment for reading under the same rules.
pub(super) fn open_segment(path: &Path) -> io::Result<File> {
    fsutil::open_in_data_root(path, OpenOptions::new().read(true))
}

pub(crate) fn hex(hash: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in hash {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests;
