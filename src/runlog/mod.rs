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

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::clock::Clock;
use crate::definition::hex_sha256;
use crate::fsutil;

/// The schema version written in every line.
pub const VERSION: u32 = 1;
/// The live segment.
pub const LOG_FILE: &str = "runs.jsonl";
/// The lock every append takes.
pub const LOCK_FILE: &str = "runs.lock";
/// The size past which the live segment is rotated.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// `prev` of the first line ever written.
pub const GENESIS: &str = "genesis";
/// Rotated segments kept; older ones are deleted.
pub const KEEP_SEGMENTS: usize = 8;

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// A person, from the command line.
    Manual,
    /// launchd or systemd.
    Schedule,
    /// The dashboard.
    Dashboard,
}

impl Trigger {
    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Schedule => "schedule",
            Trigger::Dashboard => "dashboard",
        }
    }
}

/// How a run that started ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Timeout,
    Stopped,
}

impl Outcome {
    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
            Outcome::Stopped => "stopped",
        }
    }
}

/// Why a firing did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Paused,
    Stopped,
    AlreadyRunning,
    SlotDone,
    /// A scheduled firing whose definition differs from the one installed (see `pins`).
    DefinitionChanged,
    /// A scheduled firing whose pinned script differs from the one installed.
    ScriptChanged,
    /// A scheduled firing with no install record (with pins) to check against.
    NotInstalled,
}

impl SkipReason {
    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Paused => "paused",
            SkipReason::Stopped => "stopped",
            SkipReason::AlreadyRunning => "already_running",
            SkipReason::SlotDone => "slot_done",
            SkipReason::DefinitionChanged => "definition_changed",
            SkipReason::ScriptChanged => "script_changed",
            SkipReason::NotInstalled => "not_installed",
        }
    }
}

/// Who paused or resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Hand,
    Auto,
}

/// A failure class and its detail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A fixed word: `exit_status`, `timeout`, `definition_invalid`, …
    pub class: String,
    /// One line for people; never holds a secret.
    pub detail: String,
}

/// Bytes of output dropped before the tails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub stdout: u64,
    pub stderr: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub run: String,
    pub trigger: Trigger,
    pub pid: u32,
    pub definition: Option<String>,
    pub clock: Clock,
    /// How long a scheduled firing waited before it ran (its `jitter_seconds` delay for the slot);
    /// absent when it did not wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// Which attempt of a firing that retries this is (1, 2, …); absent when it does not retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The first attempt's run id, on the second attempt and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<String>,
    /// When the firing before it was killed with its keeper (its tree left running): that run,
    /// and how many of its processes this firing ended before it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<EndedRun>,
}

/// Processes of an earlier, killed firing ended by this one before it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedRun {
    pub run: String,
    pub processes: u32,
}

impl Started {
    /// The run id of the firing this run is an attempt of (its own, unless it is a retry).
    pub fn firing(&self) -> &str {
        self.first_run.as_deref().unwrap_or(&self.run)
    }
}

impl Finished {
    /// The run id of the firing this run is an attempt of (its own, unless it is a retry).
    pub fn firing(&self) -> &str {
        self.first_run.as_deref().unwrap_or(&self.run)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub run: String,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub error: Option<ErrorInfo>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub dropped: Dropped,
    pub facts: BTreeMap<String, u64>,
    pub headline: Option<String>,
    /// The run's outside calls (see `http::log`); `null` when it made none.
    pub http: Option<Box<crate::http::log::Summary>>,
    pub leftover_processes: u32,
    pub clock: Clock,
    /// What started the run and when (its `started` line's `trigger` and `at`), so a reader of
    /// the end needs not read the start (absent in lines written before they were recorded).
    #[serde(default)]
    pub trigger: Option<Trigger>,
    #[serde(default)]
    pub started_at: Option<String>,
    /// Which attempt of a firing that retries this is, and the first attempt's run id (from the
    /// second on), as its `started` says: a reader that reads only ends can group attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub trigger: Trigger,
    pub reason: SkipReason,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    pub by: By,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    pub by: By,
}

/// A person said "fixed" (`automations ack`, the dashboard's Acknowledge): health's window rules
/// count runs from here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    pub by: By,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotated {
    pub previous: String,
    pub tail: String,
    /// The rotated segments retention deleted at this rotation (absent in lines written before it
    /// was recorded), so `verify` can tell a seam retention made from history deleted by hand.
    #[serde(default)]
    pub pruned: Option<Vec<String>>,
}

/// Where the live segment stood: its line count, size and last line's hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub lines: u64,
    pub bytes: u64,
    pub hash: String,
}

/// The log did not end where its head (`state/head`) said it did: its tail was cut or rewritten
/// between two appends. Written by the next append, so the cut stays in the chain for good.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Break {
    /// What the head recorded.
    pub expected: Extent,
    /// What the live segment held.
    pub found: Extent,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAll {
    pub reason: String,
    /// Running runs that were sent SIGTERM.
    pub stopped: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeAll {}

/// The event-specific part of a line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Started(Started),
    Finished(Finished),
    Skipped(Skipped),
    Paused(Paused),
    Resumed(Resumed),
    Ack(Ack),
    StopAll(StopAll),
    ResumeAll(ResumeAll),
    Rotated(Rotated),
    Break(Break),
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub v: u32,
    #[serde(flatten)]
    pub event: Event,
    pub name: String,
    pub at: String,
    pub prev: String,
}

impl Record {
    /// Parses one line as readers do. The writer puts `v` and `event` first, so one pass reads
    /// them, then hands the rest of the line to the event's own fields, keeping `name`, `at` and
    /// `prev` as they go by (the derived form, flattened and tagged, buffers every value of the
    /// line first, which made reading a thousand automations' runs several times slower). A line
    /// in another order (edited by hand) is read in two passes instead; a line of an unknown event
    /// by the derived form, which says what is wrong.
    pub fn parse(line: &[u8]) -> Result<Record, serde_json::Error> {
        use serde::Deserializer as _;
        let mut de = serde_json::Deserializer::from_slice(line);
        match de.deserialize_map(fast::RecordVisitor) {
            Ok(r) => de.end().map(|()| r),
            Err(_) => Self::parse_two_passes(line),
        }
    }

    fn parse_two_passes(line: &[u8]) -> Result<Record, serde_json::Error> {
        #[derive(Deserialize)]
        struct Common<'a> {
            v: u32,
            #[serde(borrow)]
            event: std::borrow::Cow<'a, str>,
            name: String,
            at: String,
            prev: String,
        }
        let c: Common = serde_json::from_slice(line)?;
        let mut de = serde_json::Deserializer::from_slice(line);
        let event = match fast::event_of(&c.event, &mut de) {
            Some(e) => e?,
            None => return serde_json::from_slice(line),
        };
        Ok(Record {
            v: c.v,
            event,
            name: c.name,
            at: c.at,
            prev: c.prev,
        })
    }

    /// `at` parsed; `None` when a line carries a malformed time.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        parse_stamp(&self.at)
    }
}

/// RFC 3339 UTC with milliseconds, as every `at` is written.
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time as [`stamp`] writes it (any RFC 3339 time), in UTC; `None` when malformed.
pub fn parse_stamp(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

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

/// The run log of one data root.
#[derive(Clone, Debug)]
pub struct RunLog {
    dir: PathBuf,
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

/// An append not yet on disk: the file it went to, and the head the log will have once synced.
#[derive(Clone, Debug)]
struct Pending {
    file: std::sync::Arc<File>,
    ino: u64,
    head: head::Head,
}

/// Where the live segment ends, as the next line chains to it.
struct End {
    /// Its size.
    len: u64,
    /// The hash of its last line (`genesis` when it is empty).
    prev: String,
    /// Whether it ends with a newline.
    sealed: bool,
    /// Its whole lines, when known (from the head, or counted).
    lines: Option<u64>,
}

/// Whether an append waits until its line is on disk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    /// fsync'd before the append returns (and the head recorded).
    Now,
    /// Written; made durable by [`RunLog::sync`], the next durable append, or the kernel.
    Later,
}

impl RunLog {
    /// The log in `data_root` (nothing is touched until the first append or read).
    pub fn new(data_root: &Path) -> Self {
        Self {
            dir: data_root.to_path_buf(),
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
        self.dir.join(LOG_FILE)
    }

    /// Appends one event for `name` at `at`: locked, chained, one write, fsync'd, and the head of
    /// the chain recorded.
    pub fn append(&self, name: &str, event: Event, at: DateTime<Utc>) -> Result<(), LogError> {
        self.append_with(name, event, at, Durable::Now)
    }

    /// Appends like [`RunLog::append`] but returns once the line is written, before it is on
    /// disk: for a line whose writer has nothing left to do that depends on it (a run's
    /// `finished`). [`RunLog::sync`] makes it durable; so does the next durable append, which
    /// flushes the whole file.
    pub fn append_unsynced(
        &self,
        name: &str,
        event: Event,
        at: DateTime<Utc>,
    ) -> Result<(), LogError> {
        self.append_with(name, event, at, Durable::Later)
    }

    /// Makes what [`RunLog::append_unsynced`] wrote durable, and records the head unless the log
    /// has moved on since (a later append, or a rotation, recorded its own).
    pub fn sync(&self) -> Result<(), LogError> {
        let Some(p) = self.pending.borrow_mut().take() else {
            return Ok(());
        };
        let path = self.path();
        // The very file that was written: after a rotation by another process, it is a rotated
        // segment, and nobody else would sync its tail. Outside the lock: other appends need not
        // wait for this disk; only the head is written under it.
        p.file.sync_data().map_err(|source| LogError::Write {
            path: path.clone(),
            source,
        })?;
        let _lock = self.lock()?;
        if stat_path(&path).is_ok_and(|(len, ino)| ino == p.ino && len == p.head.bytes) {
            let _ = head::write(&self.dir, &p.head);
        }
        Ok(())
    }

    /// Starts writing what [`RunLog::append_unsynced`] wrote to disk, without waiting for it
    /// (Linux: `sync_file_range(SYNC_FILE_RANGE_WRITE)`; elsewhere nothing): the sync that follows
    /// then waits for less. Only a head start: durability, and any error, are the sync's.
    pub fn start_writeback(&self) {
        #[cfg(target_os = "linux")]
        if let Some(p) = &*self.pending.borrow() {
            use std::os::fd::AsRawFd as _;
            // SAFETY: a plain system call on a descriptor this handle keeps open; no memory is
            // passed.
            let _ = unsafe {
                nix::libc::sync_file_range(
                    p.file.as_raw_fd(),
                    0,
                    0,
                    nix::libc::SYNC_FILE_RANGE_WRITE,
                )
            };
        }
    }

    /// Only the `fdatasync` of what [`RunLog::append_unsynced`] wrote, nothing else: no lock, no
    /// head, nothing allocated. Made by another process that shares this handle's memory (the
    /// run's keeper, right after the fork: see `runner::keeper`), so the line is on its way to
    /// disk while this process goes on; the head, which never runs ahead of the disk, is then
    /// recorded by the next [`RunLog::sync`] or durable append.
    pub fn sync_data_only(&self) -> io::Result<()> {
        match &*self.pending.borrow() {
            Some(p) => p.file.sync_data(),
            None => Ok(()),
        }
    }

    /// The append lock (a separate, never-unlinked file, so rotation can rename the log under it).
    fn lock(&self) -> Result<File, LogError> {
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = fsutil::open_private(&lock_path).map_err(|source| LogError::Open {
            path: lock_path.clone(),
            source,
        })?;
        lock.lock().map_err(|source| LogError::Open {
            path: lock_path,
            source,
        })?;
        Ok(lock)
    }

    /// One append under the log's lock: find where the log ends and check it against the head
    /// (writing a `break` when the tail was cut), rotate when due, then the line and the head.
    /// The live segment is checked before it is rotated, where a head that lags is understood the
    /// same whether or not a seam follows.
    fn append_with(
        &self,
        name: &str,
        event: Event,
        at: DateTime<Utc>,
        durable: Durable,
    ) -> Result<(), LogError> {
        let _lock = self.lock()?;
        let path = self.path();
        let mut file = open_log(&path)?;
        let (mut len, mut ino) = stat(&file, &path)?;
        if len == 0
            && let Some(previous) = self.segments().get(1)
        {
            // An empty live segment beside rotated ones: a rotation that was cut off (killed, or a
            // full disk) between the rename and its `rotated` line. Write that line now, so the
            // chain goes on from the last segment instead of starting again.
            self.write_seam(&mut file, &path, previous, at, Vec::new())?;
            (len, ino) = stat(&file, &path)?;
        }
        // Where the log ends, and how many whole lines it has: known when this handle wrote the
        // last line, or from the head when it names this very file at this very size (a last line
        // edited since then breaks the chain, which `verify` sees); else read back and checked.
        let ours = self
            .known
            .borrow()
            .clone()
            .filter(|k| k.ino == ino && k.bytes == len);
        let head_file = match (&ours, durable) {
            (Some(_), Durable::Later) => None,
            _ => head::open(&self.dir).ok(),
        };
        let recorded = match ours {
            Some(k) => Some(k),
            None => head_file.as_ref().and_then(head::read_from),
        };
        let mut end = self.checked_end(&mut file, &path, (len, ino), recorded, at)?;
        if end.len >= self.rotate_bytes {
            // The rotated segment's tail is on disk before a seam names it.
            let _ = file.sync_data();
            (file, ino, end) = self.rotate(&path, at)?;
        }
        self.write_event(
            name,
            event,
            at,
            durable,
            (&mut file, &path, ino),
            end,
            head_file.as_ref(),
        )
    }

    /// Where the live segment (`len` bytes, inode `ino`) ends, checked against the head
    /// `recorded`: when it no longer holds what the head says it held, the cut is written into
    /// the chain (a `break`) and the end is after that line.
    fn checked_end(
        &self,
        file: &mut File,
        path: &Path,
        (len, ino): (u64, u64),
        recorded: Option<head::Head>,
        at: DateTime<Utc>,
    ) -> Result<End, LogError> {
        if let Some(h) = &recorded
            && h.ino == ino
            && h.bytes == len
        {
            return Ok(End {
                len,
                prev: h.hash.clone(),
                sealed: true,
                lines: Some(h.lines),
            });
        }
        let (prev, sealed) = last_line_hash(file, len).map_err(|source| LogError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let Some(expected) = recorded else {
            return Ok(End {
                len,
                prev,
                sealed,
                lines: None,
            });
        };
        match self.check_head_at(file, (len, ino), &prev, &expected) {
            Ok(lines) => Ok(End {
                len,
                prev,
                sealed,
                lines: Some(lines),
            }),
            Err(found) => {
                let found_lines = found.lines;
                let brk = Event::Break(Break {
                    expected: Extent {
                        lines: expected.lines,
                        bytes: expected.bytes,
                        hash: expected.hash,
                    },
                    found,
                });
                let (end, hash) = self.write_record(file, path, len, sealed, "", brk, at, &prev)?;
                // Whole lines found, the torn one sealed, and the break: the event follows it.
                Ok(End {
                    len: end,
                    prev: hex(&hash),
                    sealed: true,
                    lines: Some(found_lines + 1),
                })
            }
        }
    }

    /// Writes the event at `len` after `prev`, then records where the log now stands: in the head
    /// at once when durable, else for [`RunLog::sync`].
    #[allow(clippy::too_many_arguments)]
    fn write_event(
        &self,
        name: &str,
        event: Event,
        at: DateTime<Utc>,
        durable: Durable,
        (file, path, ino): (&mut File, &Path, u64),
        End {
            len,
            prev,
            sealed,
            lines,
        }: End,
        head_file: Option<&File>,
    ) -> Result<(), LogError> {
        let record = Record {
            v: VERSION,
            event,
            name: name.to_owned(),
            at: stamp(at),
            prev,
        };
        let written = self.write_line_or_reserve(file, path, len, sealed, &record, durable);
        let (end, hash) = match written {
            Ok(w) => w,
            Err(e) => {
                *self.known.borrow_mut() = None;
                return Err(e);
            }
        };
        // The head counts the whole lines there were, a torn one sealed, and this one; with no
        // head to start from, the whole segment is counted once.
        let lines = match lines {
            Some(before) => before + u64::from(!sealed) + 1,
            None => scan::count_lines(file).unwrap_or(0),
        };
        let head = head::Head {
            v: VERSION,
            lines,
            bytes: end,
            hash: hex(&hash),
            ino,
        };
        *self.known.borrow_mut() = Some(head.clone());
        if self.mirror
            && let Ok(mut line) = serde_json::to_vec(&record)
        {
            line.push(b'\n');
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&line).and_then(|()| out.flush());
        }
        match durable {
            Durable::Now => {
                let _ = head::record(&self.dir, head_file, &head);
                *self.pending.borrow_mut() = None;
            }
            // The head never runs ahead of what is on disk: it is written by `sync`. A handle
            // that cannot be kept for it syncs now instead.
            Durable::Later => match file.try_clone() {
                Ok(kept) => {
                    *self.pending.borrow_mut() = Some(Pending {
                        file: std::sync::Arc::new(kept),
                        ino,
                        head,
                    });
                }
                Err(_) => {
                    file.sync_data().map_err(|source| LogError::Write {
                        path: path.to_path_buf(),
                        source,
                    })?;
                    let _ = head::write(&self.dir, &head);
                    *self.pending.borrow_mut() = None;
                }
            },
        }
        Ok(())
    }

    /// Writes one more record (a seam, a break) at `len`, chained to `prev`; the new end and hash.
    #[allow(clippy::too_many_arguments)]
    fn write_record(
        &self,
        file: &mut File,
        path: &Path,
        len: u64,
        sealed: bool,
        name: &str,
        event: Event,
        at: DateTime<Utc>,
        prev: &str,
    ) -> Result<(u64, [u8; 32]), LogError> {
        let record = Record {
            v: VERSION,
            event,
            name: name.to_owned(),
            at: stamp(at),
            prev: prev.to_owned(),
        };
        self.write_line_or_reserve(file, path, len, sealed, &record, Durable::Now)
    }

    /// Renames the live segment aside and starts a new one with its `rotated` seam, whose head is
    /// recorded at once: a head left naming the rotated segment would lag across the seam.
    fn rotate(&self, path: &Path, at: DateTime<Utc>) -> Result<(File, u64, End), LogError> {
        let err = |source| LogError::Rotate {
            path: path.to_path_buf(),
            source,
        };
        // A new name sorts after every rotated segment still present, whatever retention deleted
        // (a free name can be older than the newest one) or however the clock moved.
        let newest = self
            .rotated_by_name()
            .first()
            .and_then(|p| segment_stamp(p));
        let mut t = match newest {
            Some(n) if n >= at => n + chrono::Duration::milliseconds(1),
            _ => at,
        };
        let mut name = segment_name(t);
        while self.dir.join(&name).exists() {
            t += chrono::Duration::milliseconds(1);
            name = segment_name(t);
        }
        std::fs::rename(path, self.dir.join(&name)).map_err(err)?;
        // Retention first, so the seam can say what it deleted.
        let pruned = self.prune();
        let mut file = open_log(path)?;
        let (end, hash) = self.write_seam(&mut file, path, &self.dir.join(&name), at, pruned)?;
        let (_, ino) = stat(&file, path)?;
        let seam = head::Head {
            v: VERSION,
            lines: 1,
            bytes: end,
            hash: hex(&hash),
            ino,
        };
        let _ = head::write(&self.dir, &seam);
        *self.known.borrow_mut() = Some(seam);
        Ok((
            file,
            ino,
            End {
                len: end,
                prev: hex(&hash),
                sealed: true,
                lines: Some(1),
            },
        ))
    }

    /// Writes the `rotated` line that starts the (empty) live segment `file`, chained to the last
    /// line of `previous`, naming the segments retention just deleted. On a full disk the reserve
    /// makes room for it, as for any line.
    fn write_seam(
        &self,
        file: &mut File,
        path: &Path,
        previous: &Path,
        at: DateTime<Utc>,
        pruned: Vec<String>,
    ) -> Result<(u64, [u8; 32]), LogError> {
        let err = |source| LogError::Rotate {
            path: path.to_path_buf(),
            source,
        };
        let old = open_segment(previous).map_err(err)?;
        let old_len = old.metadata().map_err(err)?.len();
        let (tail, _) = last_line_hash(&old, old_len).map_err(err)?;
        let seam = Event::Rotated(Rotated {
            previous: previous
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tail: tail.clone(),
            pruned: Some(pruned),
        });
        self.write_record(file, path, 0, true, "", seam, at, &tail)
    }

    /// [`write_line`], and once more after freeing the reserve when the disk is full: the room
    /// kept for exactly this records the line.
    fn write_line_or_reserve(
        &self,
        file: &mut File,
        path: &Path,
        len: u64,
        sealed: bool,
        record: &Record,
        durable: Durable,
    ) -> Result<(u64, [u8; 32]), LogError> {
        let sync = durable == Durable::Now;
        let written = write_line(file, path, len, sealed, record, sync);
        match &written {
            Err(LogError::Write { source, .. })
                if reserve::disk_full(source) && reserve::release(&self.dir) =>
            {
                write_line(file, path, len, sealed, record, sync)
            }
            _ => written,
        }
    }

    /// Checks the live segment (`len` bytes, last line hashing to `last`) against the recorded
    /// head `h`: the number of whole (newline-ended) lines before the next append when the log
    /// still holds the line the head ends at, else what was found. The head may lag (an append
    /// whose line is written but whose head is not yet, or was lost): the lines after it are
    /// counted, in this segment or, when it was recorded before a rotation, from this one's start.
    fn check_head_at(
        &self,
        file: &File,
        (len, ino): (u64, u64),
        last: &str,
        h: &head::Head,
    ) -> Result<u64, Extent> {
        let found = || Extent {
            lines: scan::count_lines(file).unwrap_or(0),
            bytes: len,
            hash: last.to_owned(),
        };
        let (from, holds) = if h.ino != 0 && h.ino != ino {
            (0, self.holds_before_seam(file, h))
        } else if h.bytes == len && h.hash == last {
            return Ok(h.lines);
        } else {
            (
                h.bytes,
                h.bytes < len && line_ends_at(file, h.bytes, &h.hash),
            )
        };
        if !holds {
            return Err(found());
        }
        scan::newlines_in(file, from, len)
            .map(|after| if from == 0 { after } else { h.lines + after })
            .map_err(|_| found())
    }

    /// Whether the head `h`, recorded before a rotation, still holds: the segment it names (found
    /// by walking back the seams from `live`, which starts with one) still ends a line where the
    /// head says, with the hash it recorded.
    fn holds_before_seam(&self, live: &File, h: &head::Head) -> bool {
        let mut seam = seam_of(live);
        // No further back than there are segments: a forged loop of seams ends here.
        for _ in 0..self.rotated_by_name().len() {
            let Some(s) = seam.take().filter(|s| is_segment_name(&s.previous)) else {
                return false;
            };
            let Ok(previous) = open_segment(&self.dir.join(&s.previous)) else {
                return false;
            };
            let Ok(meta) = previous.metadata() else {
                return false;
            };
            if std::os::unix::fs::MetadataExt::ino(&meta) == h.ino {
                return h.bytes <= meta.len() && line_ends_at(&previous, h.bytes, &h.hash);
            }
            seam = seam_of(&previous);
        }
        false
    }

    /// Deletes the oldest rotated segments beyond the retention limit; their names.
    fn prune(&self) -> Vec<String> {
        let mut rotated = self.segments();
        rotated.remove(0);
        let mut pruned = Vec::new();
        for old in rotated.iter().skip(self.keep) {
            if std::fs::remove_file(old).is_ok()
                && let Some(n) = old.file_name()
            {
                pruned.push(n.to_string_lossy().into_owned());
            }
        }
        pruned
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
            let meta = f.metadata()?;
            Ok((
                RevLines::new(f, meta.len())?,
                std::os::unix::fs::MetadataExt::ino(&meta),
            ))
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
            live_ino.is_none()
                || std::fs::metadata(p)
                    .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                    .ok()
                    != live_ino
        });
        Backwards {
            segments,
            current,
            unreadable: 0,
            error,
        }
    }
}

/// `runs-<UTC stamp to the millisecond>.jsonl`: names that sort in time order.
fn segment_name(t: DateTime<Utc>) -> String {
    format!("runs-{}.jsonl", t.format("%Y%m%dT%H%M%S%.3fZ"))
}

/// The time in a rotated segment's name, as [`segment_name`] writes it.
fn segment_stamp(path: &Path) -> Option<DateTime<Utc>> {
    let name = path.file_name()?.to_str()?;
    let stamp = name.strip_prefix("runs-")?.strip_suffix(".jsonl")?;
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%.3fZ")
        .ok()
        .map(|t| t.and_utc())
}

/// Whether `name` is one [`segment_name`] writes: a seam's `previous` names a file beside the log,
/// never a path elsewhere.
fn is_segment_name(name: &str) -> bool {
    name.strip_prefix("runs-")
        .and_then(|n| n.strip_suffix(".jsonl"))
        .is_some_and(|stamp| {
            !stamp.is_empty()
                && stamp
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.')
        })
}

/// Whether a whole line of `file` ends at `at` (its newline is the byte before) with the chain
/// hash `hash`.
fn line_ends_at(file: &File, at: u64, hash: &str) -> bool {
    matches!(last_line_hash(file, at), Ok((h, true)) if h == hash)
}

/// The segment a segment's first line says it was rotated from, if that line is a seam.
fn seam_previous(path: &Path) -> Option<std::ffi::OsString> {
    seam_of(&open_segment(path).ok()?).map(|r| r.previous.into())
}

/// The `rotated` seam a segment starts with, if it does.
fn seam_of(file: &File) -> Option<Rotated> {
    // A seam is a short line (with the names retention deleted); read no more than could hold one.
    let mut buf = vec![0u8; 4096];
    let n = file.read_at(&mut buf, 0).ok()?;
    let line = buf[..n].split(|&b| b == b'\n').next()?;
    match serde_json::from_slice::<Record>(line).ok()?.event {
        Event::Rotated(r) => Some(r),
        _ => None,
    }
}

/// Opens the live segment for appending: a link, FIFO or directory there is refused, never
/// followed or waited on (a dangling link must not create its target).
fn open_log(path: &Path) -> Result<File, LogError> {
    fsutil::open_regular(
        path,
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600),
    )
    .map_err(|source| LogError::Open {
        path: path.to_path_buf(),
        source,
    })
}

/// Opens a segment for reading under the same rules.
fn open_segment(path: &Path) -> io::Result<File> {
    fsutil::open_regular(path, OpenOptions::new().read(true))
}

/// Hash of the last line and whether the file ends with a newline (an empty file counts as sealed).
fn last_line_hash(file: &File, len: u64) -> io::Result<(String, bool)> {
    if len == 0 {
        return Ok((GENESIS.to_owned(), true));
    }
    let mut lines = RevLines::new(file.try_clone()?, len)?;
    let sealed = lines.ends_with_newline;
    match lines.next_item()? {
        Some(RevLine::Line(line)) => Ok((hex_sha256(&line), sealed)),
        Some(RevLine::TooLong { start, end }) => {
            Ok((hex(&scan::range_hash(file, start, end)?), sealed))
        }
        None => Ok((GENESIS.to_owned(), true)),
    }
}

/// The live segment's size and inode, by its path (what is there now, not what a handle holds).
fn stat_path(path: &Path) -> io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|m| (m.len(), std::os::unix::fs::MetadataExt::ino(&m)))
}

/// The size and inode of an open segment.
fn stat(file: &File, path: &Path) -> Result<(u64, u64), LogError> {
    file.metadata()
        .map(|m| (m.len(), std::os::unix::fs::MetadataExt::ino(&m)))
        .map_err(|source| LogError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes one line (and fsyncs it when `sync`); returns the file's new end and the line's sha256.
fn write_line(
    file: &mut File,
    path: &Path,
    len: u64,
    sealed: bool,
    record: &Record,
    sync: bool,
) -> Result<(u64, [u8; 32]), LogError> {
    let mut bytes = Vec::with_capacity(1024);
    if !sealed {
        bytes.push(b'\n');
    }
    serde_json::to_writer(&mut bytes, record).map_err(|e| LogError::Write {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    bytes.push(b'\n');
    // One write for the whole line; a short write (a full disk) is finished or fails with the
    // real error, which the truncation below then cleans up after.
    let result = match file.write(&bytes) {
        Ok(n) if n == bytes.len() => Ok(()),
        Ok(n) => file.write_all(&bytes[n..]),
        Err(e) => Err(e),
    }
    .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(source) = result {
        // Never leave a half line behind: cut the file back to where this append began.
        let _ = file.set_len(len);
        let _ = file.sync_data();
        return Err(LogError::Write {
            path: path.to_path_buf(),
            source,
        });
    }
    let line = &bytes[usize::from(!sealed)..bytes.len() - 1];
    Ok((len + bytes.len() as u64, sha2::Sha256::digest(line).into()))
}

fn hex(hash: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in hash {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The longest line a reader parses: a run's `finished` with both output tails full of escaped
/// bytes is well under 200 KiB. A longer line (a damaged log, a forged one) is passed over as
/// unreadable, never held whole, and costs its readers time linear in its length.
pub const LINE_MAX: usize = 1024 * 1024;

/// A line read backwards.
#[derive(Debug, PartialEq, Eq)]
pub enum RevLine {
    /// Its bytes, without the newline.
    Line(Vec<u8>),
    /// Longer than [`LINE_MAX`]: where it starts and ends in the file (its bytes were not kept).
    TooLong { start: u64, end: u64 },
}

/// Lines of a file from the end to the start, read in blocks: each byte is read and searched
/// once, and at most [`LINE_MAX`] of one line is held.
pub struct RevLines {
    file: File,
    /// File offset of `buf[0]`.
    pos: u64,
    /// The bytes from `pos` to the end of the line being assembled.
    buf: Vec<u8>,
    /// `buf[..unscanned]` has not been searched for a newline yet.
    unscanned: usize,
    /// The end of a line longer than [`LINE_MAX`] whose start is being looked for.
    skipping: Option<u64>,
    /// The size of the next read.
    block: u64,
    /// Whether the file's last byte is a newline.
    pub ends_with_newline: bool,
    /// The file's holes, looked up once a line too long to hold is being passed over.
    holes: Option<scan::Holes>,
}

const BLOCK: u64 = 64 * 1024;
const FIRST_BLOCK: u64 = 2 * 1024;

impl RevLines {
    /// Starts at `len` (the file's length).
    pub fn new(file: File, len: u64) -> io::Result<Self> {
        let mut last = [0u8; 1];
        let ends_with_newline = len > 0 && {
            file.read_exact_at(&mut last, len - 1)?;
            last[0] == b'\n'
        };
        let end = if ends_with_newline { len - 1 } else { len };
        Ok(Self {
            file,
            pos: end,
            buf: Vec::new(),
            unscanned: 0,
            skipping: None,
            block: FIRST_BLOCK,
            ends_with_newline,
            holes: None,
        })
    }

    /// The next line backwards (without its newline), or `None` at the start of the file. A line
    /// longer than [`LINE_MAX`] comes back empty (unreadable to every parser).
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.next_item()?.map(|l| match l {
            RevLine::Line(bytes) => bytes,
            RevLine::TooLong { .. } => Vec::new(),
        }))
    }

    /// The next line backwards, or where it lies when it is too long to hold.
    pub fn next_item(&mut self) -> io::Result<Option<RevLine>> {
        loop {
            if let Some(i) = self.buf[..self.unscanned].iter().rposition(|&b| b == b'\n') {
                let start = self.pos + i as u64 + 1;
                let item = match self.skipping.take() {
                    Some(end) => RevLine::TooLong { start, end },
                    None => RevLine::Line(self.buf[i + 1..].to_vec()),
                };
                self.buf.truncate(i);
                self.unscanned = i;
                return Ok(Some(item));
            }
            self.unscanned = 0;
            if self.skipping.is_none() && self.buf.len() > LINE_MAX {
                self.skipping = Some(self.pos + self.buf.len() as u64);
            }
            if self.skipping.is_some() {
                self.buf.clear();
                // Passing over a line too long to hold: its holes (zeros, no newline) unread.
                let (file, pos) = (&self.file, self.pos);
                let holes = self.holes.get_or_insert_with(|| scan::Holes::of(file, pos));
                if let Some((start, _)) = pos.checked_sub(1).and_then(|p| holes.around(p)) {
                    self.pos = start;
                }
            }
            if self.pos == 0 {
                if let Some(end) = self.skipping.take() {
                    return Ok(Some(RevLine::TooLong { start: 0, end }));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(RevLine::Line(std::mem::take(&mut self.buf))));
            }
            // Start small (most lines are short, and appends read just one) and grow.
            self.block = (self.block * 2).min(BLOCK);
            let n = self.block.min(self.pos);
            self.pos -= n;
            let mut block = vec![0u8; n as usize];
            self.file.read_exact_at(&mut block, self.pos)?;
            block.extend_from_slice(&self.buf);
            self.buf = block;
            self.unscanned = n as usize;
        }
    }
}

/// Records newest first across all segments; unreadable lines are counted and skipped.
pub struct Backwards {
    segments: Vec<PathBuf>,
    current: Option<(PathBuf, RevLines)>,
    /// Torn or invalid lines passed over so far.
    pub unreadable: u64,
    /// The first I/O error met (reading stops there).
    pub error: Option<LogError>,
}

impl Backwards {
    fn next_raw(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.current.is_none() {
                if self.segments.is_empty() {
                    return None;
                }
                let path = self.segments.remove(0);
                let opened = open_segment(&path).and_then(|f| {
                    let len = f.metadata()?.len();
                    RevLines::new(f, len)
                });
                match opened {
                    Ok(lines) => self.current = Some((path, lines)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(source) => {
                        self.error = Some(LogError::Read { path, source });
                        return None;
                    }
                }
            }
            let (path, lines) = self.current.as_mut().expect("set above");
            match lines.next_line() {
                Ok(Some(line)) => return Some(line),
                Ok(None) => self.current = None,
                Err(source) => {
                    self.error = Some(LogError::Read {
                        path: path.clone(),
                        source,
                    });
                    return None;
                }
            }
        }
    }
}

impl Iterator for Backwards {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            let line = self.next_raw()?;
            match Record::parse(&line) {
                Ok(r) if r.v == VERSION => return Some(r),
                _ => self.unreadable += 1,
            }
        }
    }
}

/// What `log verify` found.
#[derive(Debug, Default, Serialize)]
pub struct Verification {
    /// Lines checked.
    pub lines: u64,
    /// Segments checked, oldest first.
    pub segments: Vec<String>,
    /// Lines that are not valid records but whose bytes still chain (a torn write).
    pub unreadable: Vec<String>,
    /// Breaks in the chain: the evidence of an edit, a deletion or a reordering.
    pub breaks: Vec<String>,
    /// The last line has no newline: an interrupted write the next append seals.
    pub torn_tail: bool,
    /// The segment whose deletion (retention) the chain now starts after, if it does.
    pub starts_after: Option<String>,
    /// What the recorded head of the chain says against the log: `None` when none is recorded.
    pub head: Option<String>,
}

/// Checks the whole chain, oldest segment first, reading each line once and holding at most
/// [`LINE_MAX`] of one. O(log size), as a verification must be.
pub fn verify(log: &RunLog) -> Result<Verification, LogError> {
    let mut segments = log.segments();
    segments.reverse();
    let mut walk = Walk::default();
    let n_segments = segments.len();
    for (si, path) in segments.iter().enumerate() {
        let file = match open_segment(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(LogError::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        let live = si + 1 == n_segments;
        let (lines, last) =
            walk.segment(log, path, &file, live)
                .map_err(|source| LogError::Read {
                    path: path.clone(),
                    source,
                })?;
        if live {
            check_head(log, lines, &last, &mut walk.v);
        }
    }
    let mut v = walk.v;
    if !v.segments.iter().any(|s| s == LOG_FILE) {
        check_head(log, 0, "", &mut v);
    }
    // A seam whose segment retention did not record deleting: history removed by hand. (Seams
    // written before retention recorded its deletions are taken at their word.)
    if let Some(gone) = &v.starts_after
        && walk.start_recorded
        && !walk.pruned.contains(gone)
    {
        v.breaks.push(format!(
            "the chain starts at the seam of {gone}, which no rotation records deleting: rotated segments were removed by hand"
        ));
    }
    Ok(v)
}

/// What [`verify`] carries from line to line and segment to segment.
#[derive(Default)]
struct Walk {
    v: Verification,
    /// What the next line's `prev` must be: `None` before the first line.
    expected: Option<Expected>,
    /// What retention recorded deleting, and whether the seam the chain starts at says it can.
    pruned: std::collections::BTreeSet<String>,
    start_recorded: bool,
}

/// The chain hash the next line must name, and for a line too long to hash whole, where it is:
/// such a line was chained by all its bytes before it was chained by its ends, and either is
/// accepted.
struct Expected {
    hash: String,
    oversize: Option<(PathBuf, u64, u64)>,
}

impl Expected {
    fn matches(&self, prev: &str) -> bool {
        prev == self.hash
            || self.oversize.as_ref().is_some_and(|(path, start, end)| {
                open_segment(path)
                    .and_then(|f| scan::full_hash(&f, *start, *end))
                    .is_ok_and(|h| hex(&h) == prev)
            })
    }
}

impl Walk {
    /// Checks one segment's lines; its line count and the hash of its last line.
    fn segment(
        &mut self,
        log: &RunLog,
        path: &Path,
        file: &File,
        live: bool,
    ) -> io::Result<(u64, String)> {
        let seg_name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        self.v.segments.push(seg_name.clone());
        let len = file.metadata()?.len();
        let mut lines = scan::Forward::new(file, len, LINE_MAX);
        let (mut count, mut last_hash) = (0u64, String::new());
        while let Some(line) = lines.next_line()? {
            count += 1;
            self.v.lines += 1;
            if live && !line.ended {
                self.v.torn_tail = true;
            }
            let place = format!("{seg_name} line {count}");
            let hash = match &line.bytes {
                Some(bytes) => {
                    self.line(log, &place, count == 1, bytes);
                    hex_sha256(bytes)
                }
                None => {
                    // Chained like any line, never parsed.
                    self.v
                        .unreadable
                        .push(format!("{place} (longer than {} MiB)", LINE_MAX >> 20));
                    hex(&scan::range_hash(file, line.start, line.end)?)
                }
            };
            let oversize = (line.end - line.start > scan::HASHED_MAX)
                .then(|| (path.to_path_buf(), line.start, line.end));
            last_hash = hash.clone();
            self.expected = Some(Expected { hash, oversize });
        }
        Ok((count, last_hash))
    }

    /// Checks one line that could be read: its `prev`, and what a seam or a break says.
    fn line(&mut self, log: &RunLog, place: &str, first: bool, bytes: &[u8]) {
        let Ok(r) = serde_json::from_slice::<Record>(bytes) else {
            self.v.unreadable.push(place.to_owned());
            return;
        };
        // Retention deleted the segments before this one: the chain starts at its seam.
        if self.expected.is_none()
            && first
            && let Event::Rotated(rot) = &r.event
            && !log.dir.join(&rot.previous).exists()
        {
            self.v.starts_after = Some(rot.previous.clone());
            self.start_recorded = rot.pruned.is_some();
            self.expected = Some(Expected {
                hash: r.prev.clone(),
                oversize: None,
            });
        }
        let expected = self.expected.take().unwrap_or(Expected {
            hash: GENESIS.to_owned(),
            oversize: None,
        });
        let chained = expected.matches(&r.prev);
        if !chained {
            self.v.breaks.push(format!(
                "{place}: prev {} does not match the hash of the line before ({})",
                short(&r.prev),
                short(&expected.hash)
            ));
        }
        match &r.event {
            Event::Break(b) => self.v.breaks.push(format!(
                "{place}: the log was cut before this line was appended: the chain head recorded {} line(s) ({} bytes) ending in {}, the log held {} line(s) ({} bytes) ending in {}",
                b.expected.lines,
                b.expected.bytes,
                short(&b.expected.hash),
                b.found.lines,
                b.found.bytes,
                short(&b.found.hash)
            )),
            Event::Rotated(rot) => {
                self.pruned.extend(rot.pruned.iter().flatten().cloned());
                if !first {
                    self.v
                        .breaks
                        .push(format!("{place}: a rotated line inside a segment"));
                }
                if !(rot.tail == expected.hash || (chained && rot.tail == r.prev)) {
                    self.v.breaks.push(format!(
                        "{place}: rotated from {} whose tail does not match",
                        rot.previous
                    ));
                }
            }
            _ => {}
        }
    }
}

/// Compares the live segment (`lines`, last line's hash) with the recorded head of the chain.
fn check_head(log: &RunLog, lines: u64, last_hash: &str, v: &mut Verification) {
    let h = match head::read_checked(&log.dir) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(why) => {
            v.breaks.push(format!(
                "the chain head (state/head) cannot be read ({why}), so a cut tail would go unseen; remove it and the next append writes it again"
            ));
            v.head = Some("unreadable".into());
            return;
        }
    };
    let live_ino = std::fs::symlink_metadata(log.path())
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0);
    if h.ino != 0 && live_ino != 0 && h.ino != live_ino && lines > 0 {
        // Recorded before the last rotation: the segment it names must still end where it says.
        let holds = open_segment(&log.path()).is_ok_and(|live| log.holds_before_seam(&live, &h));
        if holds {
            v.head = Some("lags the log (recorded before the last rotation)".into());
        } else {
            v.breaks.push(format!(
                "{LOG_FILE} does not go on from where the chain head (state/head) says the log ended ({}): the log was cut before its last rotation, or replaced",
                short(&h.hash)
            ));
            v.head = Some("disagrees with the log".into());
        }
        return;
    }
    if lines < h.lines {
        v.breaks.push(format!(
            "{LOG_FILE} has {lines} line(s), but the chain head (state/head) records {} ending in {}: its tail was cut or it was emptied",
            h.lines,
            short(&h.hash)
        ));
        v.head = Some("ahead of the log".into());
        return;
    }
    // The head may lag (an append interrupted before it was recorded), never disagree.
    let at = if lines == h.lines {
        Some(last_hash.to_owned())
    } else {
        nth_line_hash(&log.path(), h.lines)
    };
    if at.as_deref() == Some(h.hash.as_str()) {
        v.head = Some(if lines == h.lines {
            "matches the log".into()
        } else {
            format!(
                "lags the log by {} line(s) (appended and not yet synced, or an interrupted append)",
                lines - h.lines
            )
        });
    } else {
        v.breaks.push(format!(
            "{LOG_FILE} line {} is not the line the chain head (state/head) records ({}): the log was cut and written again, or edited",
            h.lines,
            short(&h.hash)
        ));
        v.head = Some("disagrees with the log".into());
    }
}

/// The chain hash of line `n` (1-based) of the file at `path`.
fn nth_line_hash(path: &Path, n: u64) -> Option<String> {
    let file = open_segment(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut lines = scan::Forward::new(&file, len, LINE_MAX);
    let mut line = None;
    for _ in 0..n {
        line = Some(lines.next_line().ok()??);
    }
    let line = line?;
    match &line.bytes {
        Some(bytes) => Some(hex_sha256(bytes)),
        None => scan::range_hash(&file, line.start, line.end)
            .ok()
            .map(|h| hex(&h)),
    }
}

/// The first 12 characters of a hash for messages; a value from a tampered log need not be hex, so
/// never cut inside a character.
fn short(h: &str) -> &str {
    h.char_indices().nth(12).map_or(h, |(i, _)| &h[..i])
}

pub mod head;
pub mod index;
pub mod reserve;
pub mod scan;

/// [`Record::parse`]'s one pass.
mod fast {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

    use super::{Event, Record};

    /// The event of `tag`, read from `de`; `None` for a tag no event has.
    pub fn event_of<'de, D: de::Deserializer<'de>>(
        tag: &str,
        de: D,
    ) -> Option<Result<Event, D::Error>> {
        Some(match tag {
            "started" => Deserialize::deserialize(de).map(Event::Started),
            "finished" => Deserialize::deserialize(de).map(Event::Finished),
            "skipped" => Deserialize::deserialize(de).map(Event::Skipped),
            "paused" => Deserialize::deserialize(de).map(Event::Paused),
            "resumed" => Deserialize::deserialize(de).map(Event::Resumed),
            "ack" => Deserialize::deserialize(de).map(Event::Ack),
            "stop_all" => Deserialize::deserialize(de).map(Event::StopAll),
            "resume_all" => Deserialize::deserialize(de).map(Event::ResumeAll),
            "rotated" => Deserialize::deserialize(de).map(Event::Rotated),
            "break" => Deserialize::deserialize(de).map(Event::Break),
            _ => return None,
        })
    }

    #[derive(Default)]
    struct Common {
        v: Option<u32>,
        name: Option<String>,
        at: Option<String>,
        prev: Option<String>,
    }

    impl Common {
        /// Takes `key`'s value when it is one of the common fields; whether it was.
        fn take<'de, A: MapAccess<'de>>(
            &mut self,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error> {
            match key {
                "v" => self.v = Some(map.next_value()?),
                "name" => self.name = Some(map.next_value()?),
                "at" => self.at = Some(map.next_value()?),
                "prev" => self.prev = Some(map.next_value()?),
                _ => return Ok(false),
            }
            Ok(true)
        }
    }

    pub struct RecordVisitor;

    impl<'de> Visitor<'de> for RecordVisitor {
        type Value = Record;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a run log line")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
            let mut common = Common::default();
            let tag = loop {
                let Some(key) = map.next_key::<Cow<'de, str>>()? else {
                    return Err(de::Error::missing_field("event"));
                };
                if key == "event" {
                    break map.next_value::<Cow<'de, str>>()?;
                }
                if !common.take(&key, &mut map)? {
                    return Err(de::Error::custom("an event's field before `event`"));
                }
            };
            let rest = de::value::MapAccessDeserializer::new(Rest {
                map: &mut map,
                common: &mut common,
            });
            let event = event_of(&tag, rest)
                .unwrap_or_else(|| Err(de::Error::unknown_variant(&tag, &[])))?;
            let missing = |f| de::Error::missing_field(f);
            Ok(Record {
                v: common.v.ok_or_else(|| missing("v"))?,
                event,
                name: common.name.ok_or_else(|| missing("name"))?,
                at: common.at.ok_or_else(|| missing("at"))?,
                prev: common.prev.ok_or_else(|| missing("prev"))?,
            })
        }
    }

    /// The rest of a line's map as the event's fields, with the common ones taken out.
    struct Rest<'m, A> {
        map: &'m mut A,
        common: &'m mut Common,
    }

    impl<'de, A: MapAccess<'de>> MapAccess<'de> for Rest<'_, A> {
        type Error = A::Error;

        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, A::Error> {
            loop {
                let Some(key) = self.map.next_key::<Cow<'de, str>>()? else {
                    return Ok(None);
                };
                if !self.common.take(&key, self.map)? {
                    let key = de::value::StrDeserializer::<A::Error>::new(&key);
                    return seed.deserialize(key).map(Some);
                }
            }
        }

        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, A::Error> {
            self.map.next_value_seed(seed)
        }
    }
}

#[cfg(test)]
mod tests;
