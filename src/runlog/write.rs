//! Appending to the log: one whole line under the log's lock, chained to the last, checked against
//! the head of the chain first (a cut is written into the chain as a `break`), rotated past its
//! size with a seam, synced, and the head recorded. A write that fails leaves no half line.

use crate::platform::OpenOptionsExt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use chrono::{DateTime, Utc};
use sha2::Digest;

use super::event::*;
use super::{
    GENESIS, LogError, RevLine, RevLines, RunLog, VERSION, fsutil, head, hex, open_segment,
    reserve, scan, seam_of,
};
use crate::definition::hex_sha256;

/// An append not yet on disk: the file it went to, and the head the log will have once synced.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    file: std::sync::Arc<File>,
    ino: u64,
    head: head::Head,
}

/// Where the live segment ends, as the next line chains to it.
pub(super) struct End {
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
pub(super) enum Durable {
    /// fsync'd before the append returns (and the head recorded).
    Now,
    /// Written; made durable by [`RunLog::sync`], the next durable append, or the kernel.
    Later,
}

impl RunLog {
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
        let lock_path = self.layout.log_lock();
        let lock = fsutil::open_or_create_private(&lock_path).map_err(|source| LogError::Open {
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
        while self.layout.segment(&name).exists() {
            t += chrono::Duration::milliseconds(1);
            name = segment_name(t);
        }
        std::fs::rename(path, self.layout.segment(&name)).map_err(err)?;
        // Retention first, so the seam can say what it deleted.
        let pruned = self.prune();
        let mut file = open_log(path)?;
        let (end, hash) =
            self.write_seam(&mut file, path, &self.layout.segment(&name), at, pruned)?;
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
        (len, _ino): (u64, u64),
        last: &str,
        h: &head::Head,
    ) -> Result<u64, Extent> {
        let found = || Extent {
            lines: scan::count_lines(file).unwrap_or(0),
            bytes: len,
            hash: last.to_owned(),
        };
        if h.bytes == len && h.hash == last {
            return Ok(h.lines);
        }
        // The head names a line of this segment (it lags: an append it never recorded), or of
        // one before its last rotation (recorded before the seam). Either is known by its bytes,
        // never by its inode: a data root copied, restored or moved is the same log.
        let from = if h.bytes < len && line_ends_at(file, h.bytes, &h.hash) {
            h.bytes
        } else if self.holds_before_seam(file, h) {
            0
        } else {
            return Err(found());
        };
        scan::newlines_in(file, from, len)
            .map(|after| if from == 0 { after } else { h.lines + after })
            .map_err(|_| found())
    }

    /// Whether the head `h`, recorded before a rotation, still holds: a segment before `live`
    /// (found by walking back the seams) still ends a line where the head says, with the hash it
    /// recorded.
    pub(super) fn holds_before_seam(&self, live: &File, h: &head::Head) -> bool {
        let mut seam = seam_of(live);
        // No further back than there are segments: a forged loop of seams ends here.
        for _ in 0..self.rotated_by_name().len() {
            let Some(s) = seam.take().filter(|s| is_segment_name(&s.previous)) else {
                return false;
            };
            let Ok(previous) = open_segment(&self.layout.segment(&s.previous)) else {
                return false;
            };
            let Ok(meta) = previous.metadata() else {
                return false;
            };
            if h.bytes <= meta.len() && line_ends_at(&previous, h.bytes, &h.hash) {
                return true;
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
}

/// `runs-<UTC stamp to the millisecond>.jsonl`: names that sort in time order.
pub(super) fn segment_name(t: DateTime<Utc>) -> String {
    format!("runs-{}.jsonl", t.format("%Y%m%dT%H%M%S%.3fZ"))
}

/// The time in a rotated segment's name, as [`segment_name`] writes it.
pub(super) fn segment_stamp(path: &Path) -> Option<DateTime<Utc>> {
    let name = path.file_name()?.to_str()?;
    let stamp = name.strip_prefix("runs-")?.strip_suffix(".jsonl")?;
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%.3fZ")
        .ok()
        .map(|t| t.and_utc())
}

/// Whether `name` is one [`segment_name`] writes: a seam's `previous` names a file beside the log,
/// never a path elsewhere.
pub(super) fn is_segment_name(name: &str) -> bool {
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
pub(super) fn line_ends_at(file: &File, at: u64, hash: &str) -> bool {
    matches!(last_line_hash(file, at), Ok((h, true)) if h == hash)
}

/// Opens the live segment for appending: a link, FIFO or directory there is refused, never
/// followed or waited on (a dangling link must not create its target).
pub(super) fn open_log(path: &Path) -> Result<File, LogError> {
    fsutil::open_in_data_root(
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

/// Hash of the last line and whether the file ends with a newline (an empty file counts as sealed).
pub(super) fn last_line_hash(file: &File, len: u64) -> io::Result<(String, bool)> {
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
pub(super) fn stat_path(path: &Path) -> io::Result<(u64, u64)> {
    crate::platform::path_meta_id(path).map(|(meta, (_, ino))| (meta.len(), ino))
}

/// The size and inode of an open segment.
pub(super) fn stat(file: &File, path: &Path) -> Result<(u64, u64), LogError> {
    crate::platform::file_meta_id(file)
        .map(|(meta, (_, ino))| (meta.len(), ino))
        .map_err(|source| LogError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes one line (and fsyncs it when `sync`); returns the file's new end and the line's sha256.
pub(super) fn write_line(
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
