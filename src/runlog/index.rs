//! A per-automation index of the run log, so readers cost what they report (docs/running.md), also for an
//! automation that never ran or ran less than asked for.
//!
//! `<data root>/state/index/` holds one `<name>.idx` per automation — a 16-byte header (`AIDX`,
//! the format version) and fixed 16-byte entries, the segment id (u32), the first four bytes of the
//! line's sha256 and its byte offset (u64) of each line of that automation, oldest first — and
//! `cursor`, how far the index has read: the segments it knows, each identified by the hash of its
//! first line (stable across the rename at rotation, inode reuse, and a copy of the data root), the
//! position after the last line read and that line's hash, and how many entries each file holds.
//!
//! Readers keep it. Before answering, [`Index::refresh`] reads only the lines appended since the
//! cursor (under `state/index/lock`, so two readers never add the same entries) and appends their
//! entries. A firing pays nothing for it, except after a run that the runner looks at (when
//! notifications are configured, or an outbound run failed): that look is a reader too. The first reader
//! after N appended lines pays O(N) once; a reader after that pays O(what it reports). The index
//! is a cache, checked and never trusted blindly: missing, unreadable, or disagreeing with the log
//! (a line before the cursor changed, a segment vanished under it) it is rebuilt from the log; a
//! file whose header is wrong or that holds fewer entries than the cursor counted is rebuilt for
//! its automation, saying so on stderr; entries past the count (an interrupted write, or garbage)
//! are never read; an entry is trusted only if the line it points at still hashes as it did and
//! carries its automation's name (a damaged entry is said, and the file rebuilt for the next
//! reader); entries of deleted segments are skipped. Being a checked cache it is written without
//! fsync. Without write access (a read-only data root) the catch-up happens in memory only.

use crate::platform::{FileExt, OpenOptionsExt};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{LINE_MAX, LogError, Record, RunLog, VERSION, open_segment, scan};
use crate::fsutil;
use crate::names::Name;

const ENTRY: u64 = 16;
/// The header of an index file: magic, format version, and when its first entry's line was
/// written (Unix milliseconds, 0 = not known): where [`Snapshot::tally`]'s counts start.
const HEADER: u64 = 16;
const MAGIC: &[u8; 4] = b"AIDX";
/// The index format (files and cursor); another one is rebuilt. 3: a `finished` entry's kind
/// says its outcome.
const FORMAT: u32 = 3;

/// One entry: segment id, the first 4 bytes of the line's sha256, and the offset, whose top byte
/// says what kind of line it is (see [`kind_of`]), so a reader can pass over what it does not need
/// without reading it.
type Entry = (u32, u32, u64);

/// Offsets are below 2^56 (64 PiB): the top byte holds the kind.
const OFFSET_BITS: u32 = 56;
const KIND_STARTED: u64 = 1;
/// A `finished` whose outcome is none of [`OUTCOMES`]' (there is none today).
const KIND_FINISHED: u64 = 2;
const KIND_SKIPPED: u64 = 3;
const KIND_OTHER: u64 = 4;
/// A `finished` with the outcome `OUTCOMES[i]` is of kind `KIND_OUTCOME + i`.
const KIND_OUTCOME: u64 = 8;
/// The outcomes a `finished` entry's kind tells, so they are counted without reading a line.
pub const OUTCOMES: [&str; 4] = ["ok", "failed", "timeout", "stopped"];

/// The kind byte of a line's event (and a `finished` line's outcome).
fn kind_of(event: Option<&str>, outcome: Option<&str>) -> u64 {
    match event {
        Some("started") => KIND_STARTED,
        Some("finished") => OUTCOMES
            .iter()
            .position(|o| Some(*o) == outcome)
            .map_or(KIND_FINISHED, |i| KIND_OUTCOME + i as u64),
        Some("skipped") => KIND_SKIPPED,
        _ => KIND_OTHER,
    }
}

/// Whether an entry of this kind is a `finished` line.
fn is_finished(kind: u64) -> bool {
    kind == KIND_FINISHED || (KIND_OUTCOME..KIND_OUTCOME + OUTCOMES.len() as u64).contains(&kind)
}

/// An entry's offset with its kind.
fn tagged(offset: u64, event: Option<&str>, outcome: Option<&str>) -> u64 {
    offset | (kind_of(event, outcome) << OFFSET_BITS)
}

/// An entry's offset, without its kind.
fn offset_of(tagged: u64) -> u64 {
    tagged & ((1 << OFFSET_BITS) - 1)
}

/// Where the index reads up to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    v: u32,
    /// Known segments: id -> hash of the first line.
    segments: BTreeMap<u32, String>,
    /// The segment and offset after the last line read, with that line's start and hash.
    at: Option<Position>,
    /// Lines read that were not valid records (torn writes, damage).
    unreadable: u64,
    /// Entries each automation's file holds (what lies past that is never read).
    #[serde(default)]
    counts: BTreeMap<String, u64>,
    /// Each automation's last `finished` with outcome ok, so health finds it without reading back
    /// through a long run of failures.
    #[serde(default)]
    last_ok: BTreeMap<String, Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Position {
    segment: u32,
    offset: u64,
    last_start: u64,
    last_hash: String,
}

/// One segment of the log as found now, oldest first.
#[derive(Debug)]
struct Segment {
    path: PathBuf,
    first: String,
    len: u64,
}

/// Just enough of a line to index it.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow, default)]
    event: Option<&'a str>,
    #[serde(borrow, default)]
    outcome: Option<&'a str>,
}

/// The index of one data root's log.
pub struct Index {
    dir: PathBuf,
    layout: crate::layout::Layout,
    log: RunLog,
}

/// The index brought up to date: where each automation's lines are.
pub struct Snapshot {
    dir: PathBuf,
    layout: crate::layout::Layout,
    /// Segment id -> path, for the segments that exist.
    paths: HashMap<u32, PathBuf>,
    /// Entries found in memory only (a read-only data root), by name.
    memory: HashMap<String, Vec<Entry>>,
    /// Entries each file held when this snapshot was taken.
    counts: BTreeMap<String, u64>,
    /// Each automation's last successful `finished`.
    last_ok: BTreeMap<String, Entry>,
    /// Segments opened so far, shared by every reader of this snapshot (threads included).
    files: std::sync::Mutex<HashMap<u32, std::sync::Arc<File>>>,
    /// Whether [`Records`] count the entries they read for [`Snapshot::tally`] ([`Snapshot::keep_tallies`]).
    counting: std::sync::atomic::AtomicBool,
    /// Tallies counted by records that read all of their automation's entries.
    tallies: std::sync::Mutex<HashMap<String, Tally>>,
    /// Unreadable lines met in the whole log.
    pub unreadable: u64,
}

/// One automation's runs by how they ended, and its skipped firings, counted since its index
/// file was made ([`Snapshot::tally`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// `finished` lines by outcome, in the order of [`OUTCOMES`].
    pub outcomes: [u64; 4],
    /// `skipped` lines.
    pub skipped: u64,
    /// When the first line counted was written (Unix milliseconds; 0 = not known).
    pub since_ms: u64,
}

impl Index {
    /// The index of `log` (in `<data root>/state/index`).
    pub fn new(log: &RunLog) -> Self {
        Self {
            dir: log.layout.index(),
            layout: log.layout.clone(),
            log: log.clone(),
        }
    }

    /// Catches up with the log and returns what it knows. Only an unreadable log is an error.
    pub fn refresh(&self) -> Result<Snapshot, LogError> {
        let segments = self.segments()?;
        let persist = fsutil::private_dir(&self.dir).is_ok();
        let _lock = if persist { self.lock() } else { None };
        let persist = persist && _lock.is_some();
        let mut cursor = if persist {
            self.read_cursor().unwrap_or_default()
        } else {
            Cursor::default()
        };
        let before = cursor.clone();
        let mut ids = segment_ids(&segments, &mut cursor);
        // Where to start: after the cursor, if the log still agrees with it; else from scratch.
        let start = match &cursor.at {
            Some(p) => ids
                .iter()
                .position(|id| *id == p.segment)
                .filter(|&i| agrees(&segments[i], p))
                .map(|i| (i, p.offset)),
            None => Some((0, 0)),
        };
        let (from_segment, from_offset) = match start {
            Some(s) => s,
            None => {
                self.clear();
                cursor = Cursor::default();
                ids.clear();
                for (id, seg) in segments.iter().enumerate() {
                    cursor.segments.insert(id as u32, seg.first.clone());
                    ids.push(id as u32);
                }
                (0, 0)
            }
        };
        cursor.segments.retain(|id, _| ids.contains(id));
        let mut found: HashMap<String, Vec<Entry>> = HashMap::new();
        for (i, seg) in segments.iter().enumerate().skip(from_segment) {
            let offset = if i == from_segment { from_offset } else { 0 };
            read_forward(seg, ids[i], offset, &mut found, &mut cursor).map_err(|source| {
                LogError::Read {
                    path: seg.path.clone(),
                    source,
                }
            })?;
        }
        cursor.v = FORMAT;
        // Nothing new (the common case for a reader, and the dashboard's refresh every few
        // seconds): nothing to write.
        let unchanged = found.is_empty() && cursor == before;
        let paths: HashMap<u32, PathBuf> = ids
            .iter()
            .zip(&segments)
            .map(|(id, s)| (*id, s.path.clone()))
            .collect();
        let persisted = persist && (unchanged || self.write(&found, &mut cursor, &paths).is_ok());
        Ok(Snapshot {
            dir: self.dir.clone(),
            layout: self.layout.clone(),
            paths,
            // Not kept on disk: what was found is answered from memory (on top of whatever index
            // could be read; repeats are dropped).
            memory: if persisted { HashMap::new() } else { found },
            counts: cursor.counts,
            last_ok: cursor.last_ok,
            files: Default::default(),
            counting: Default::default(),
            tallies: Default::default(),
            unreadable: cursor.unreadable,
        })
    }

    /// Every segment, oldest first, with its first line's hash; empty segments are left out.
    fn segments(&self) -> Result<Vec<Segment>, LogError> {
        let mut paths = self.log.segments();
        paths.reverse();
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let file = match open_segment(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => return Err(LogError::Read { path, source }),
            };
            let len = file
                .metadata()
                .map_err(|source| LogError::Read {
                    path: path.clone(),
                    source,
                })?
                .len();
            let mut lines = scan::Forward::new(&file, len, LINE_MAX);
            let first = match lines.next_line() {
                Ok(Some(l)) if l.ended => lines.hash(&l),
                // Empty, or a single torn line: nothing to index yet.
                Ok(_) => continue,
                Err(e) => Err(e),
            }
            .map_err(|source| LogError::Read {
                path: path.clone(),
                source,
            })?;
            out.push(Segment {
                path,
                first: super::hex(&first),
                len,
            });
        }
        Ok(out)
    }

    fn lock(&self) -> Option<File> {
        let f = fsutil::open_or_create_private(&self.layout.index_lock()).ok()?;
        f.lock().ok()?;
        Some(f)
    }

    fn read_cursor(&self) -> Option<Cursor> {
        let bytes =
            fsutil::read_in_data_root(&self.layout.index_cursor(), fsutil::SMALL_FILE).ok()??;
        serde_json::from_slice::<Cursor>(&bytes)
            .ok()
            .filter(|c| c.v == FORMAT)
    }

    /// Forgets everything (a rebuild follows).
    fn clear(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "idx") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let _ = std::fs::remove_file(self.layout.index_cursor());
    }

    /// Appends the new entries, each file first cut back to what the cursor counted (dropping
    /// what an interrupted write left), then replaces the cursor with the new counts. Nothing is
    /// synced: after a crash a file short of its count is found and rebuilt, and extra entries are
    /// never read.
    fn write(
        &self,
        found: &HashMap<String, Vec<Entry>>,
        cursor: &mut Cursor,
        paths: &HashMap<u32, PathBuf>,
    ) -> io::Result<()> {
        for (name, entries) in found {
            let Some(path) = file_of(&self.layout, name) else {
                continue;
            };
            let known = cursor.counts.get(name).copied().unwrap_or(0);
            let f = fsutil::open_in_data_root(
                &path,
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .mode(0o600),
            )?;
            if known == 0 || !has_header(&f) {
                f.set_len(0)?;
                f.write_all_at(&header(first_at(paths, entries.first())), 0)?;
            } else {
                f.set_len(HEADER + known * ENTRY)?;
            }
            f.write_all_at(&encode(entries), HEADER + known * ENTRY)?;
            cursor
                .counts
                .insert(name.clone(), known + entries.len() as u64);
        }
        let mut json = serde_json::to_vec(cursor).map_err(io::Error::other)?;
        json.push(b'\n');
        fsutil::write_cache(&self.layout.index_cursor(), &json)
    }
}

/// An index file's header, its first entry's line written at `first_ms`.
fn header(first_ms: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..8].copy_from_slice(&FORMAT.to_le_bytes());
    h[8..].copy_from_slice(&first_ms.to_le_bytes());
    h
}

/// Whether `h` is this format's header.
fn is_header(h: &[u8]) -> bool {
    h.len() >= 8 && h[..8] == header(0)[..8]
}

/// Whether `f` starts with this format's header.
fn has_header(f: &File) -> bool {
    header_ms(f).is_some()
}

/// The time in `f`'s header (see [`header`]), when it starts with this format's header.
fn header_ms(f: &File) -> Option<u64> {
    let mut h = [0u8; HEADER as usize];
    f.read_exact_at(&mut h, 0).ok()?;
    is_header(&h).then(|| first_ms(&h))
}

/// The time a header holds.
fn first_ms(h: &[u8]) -> u64 {
    u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"))
}

/// Counts one entry into `tally` by its kind.
fn count(tally: &mut Tally, e: &Entry) {
    match e.2 >> OFFSET_BITS {
        KIND_SKIPPED => tally.skipped += 1,
        k if (KIND_OUTCOME..KIND_OUTCOME + OUTCOMES.len() as u64).contains(&k) => {
            tally.outcomes[(k - KIND_OUTCOME) as usize] += 1;
        }
        _ => {}
    }
}

/// When the line `entry` points at was written (Unix milliseconds; 0 when it cannot be read):
/// one line read, when an index file is made.
fn first_at(paths: &HashMap<u32, PathBuf>, entry: Option<&Entry>) -> u64 {
    #[derive(Deserialize)]
    struct At<'a> {
        #[serde(borrow)]
        at: &'a str,
    }
    entry
        .and_then(|&(seg, _, tagged)| {
            let file = open_segment(paths.get(&seg)?).ok()?;
            let line = read_line_at(&file, offset_of(tagged))?;
            let at = serde_json::from_slice::<At>(&line).ok()?;
            super::parse_stamp(at.at)
        })
        .map_or(0, |t| t.timestamp_millis().max(0) as u64)
}

fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY as usize);
    for (seg, hash, offset) in entries {
        bytes.extend_from_slice(&seg.to_le_bytes());
        bytes.extend_from_slice(&hash.to_le_bytes());
        bytes.extend_from_slice(&offset.to_le_bytes());
    }
    bytes
}

/// One entry of an index file (16 bytes, as [`encode`] wrote it).
fn decode(c: &[u8]) -> Entry {
    (
        u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        u64::from_le_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]),
    )
}

/// The first four bytes of a line's sha256, as an entry keeps them.
fn line_hash(line: &[u8]) -> u32 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(line);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// Today's segments mapped to the cursor's ids (a segment is known by the hash of its first line);
/// a segment the cursor does not know gets the next id.
fn segment_ids(segments: &[Segment], cursor: &mut Cursor) -> Vec<u32> {
    let mut next_id = cursor.segments.keys().max().map_or(0, |m| m + 1);
    segments
        .iter()
        .map(|seg| {
            cursor
                .segments
                .iter()
                .find(|(_, h)| **h == seg.first)
                .map(|(id, _)| *id)
                .unwrap_or_else(|| {
                    let id = next_id;
                    next_id += 1;
                    cursor.segments.insert(id, seg.first.clone());
                    id
                })
        })
        .collect()
}

/// Whether the line the cursor says it read last is still there, unchanged.
fn agrees(seg: &Segment, p: &Position) -> bool {
    if p.offset > seg.len || p.last_start >= p.offset {
        return false;
    }
    let Ok(file) = open_segment(&seg.path) else {
        return false;
    };
    let mut newline = [0u8; 1];
    if file.read_exact_at(&mut newline, p.offset - 1).is_err() || newline[0] != b'\n' {
        return false;
    }
    scan::range_hash(&file, p.last_start, p.offset - 1).is_ok_and(|h| super::hex(&h) == p.last_hash)
}

/// Reads complete lines of `seg` from `offset` to its end, noting each named line's position. A
/// line longer than [`LINE_MAX`] is passed over unread (its holes skipped), never held.
fn read_forward(
    seg: &Segment,
    id: u32,
    offset: u64,
    found: &mut HashMap<String, Vec<Entry>>,
    cursor: &mut Cursor,
) -> io::Result<()> {
    let file = open_segment(&seg.path)?;
    let len = file.metadata()?.len();
    let mut lines = scan::Forward::from(&file, offset, len, LINE_MAX);
    // The last line read: where it starts and ends, and its hash, put in the cursor once, at the end.
    let mut last: Option<(u64, u64, [u8; 32])> = None;
    loop {
        let line = match lines.next_line()? {
            // A line still being written is left for the next reader.
            Some(l) if l.ended => l,
            _ => break,
        };
        let digest = lines.hash(&line)?;
        last = Some((line.start, line.end + 1, digest));
        let Some(bytes) = &line.bytes else {
            // Chained like any line, never parsed.
            cursor.unreadable += 1;
            continue;
        };
        let short = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]);
        match serde_json::from_slice::<Head>(bytes) {
            Ok(h) if !h.name.is_empty() => {
                if Name::new(h.name).is_ok() {
                    let entry = (id, short, tagged(line.start, h.event, h.outcome));
                    found.entry(h.name.to_owned()).or_default().push(entry);
                    if h.event == Some("finished") && h.outcome == Some("ok") {
                        cursor.last_ok.insert(h.name.to_owned(), entry);
                    }
                }
            }
            Ok(_) => {}
            Err(_) => cursor.unreadable += 1,
        }
    }
    if let Some((start, end, digest)) = last {
        cursor.at = Some(Position {
            segment: id,
            offset: end,
            last_start: start,
            last_hash: super::hex(&digest),
        });
    }
    Ok(())
}

impl Snapshot {
    /// Every automation the log has a line of.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.memory.keys().cloned().collect();
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if let Some(n) = e
                    .file_name()
                    .to_str()
                    .and_then(|f| f.strip_suffix(".idx"))
                    .filter(|n| Name::new(n).is_ok())
                {
                    names.push(n.to_owned());
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// Segment `seg`, opened once for every reader of this snapshot.
    fn segment(&self, seg: u32) -> Option<std::sync::Arc<File>> {
        let mut files = self.files.lock().ok()?;
        if let Some(f) = files.get(&seg) {
            return Some(f.clone());
        }
        let f = std::sync::Arc::new(open_segment(self.paths.get(&seg)?).ok()?);
        files.insert(seg, f.clone());
        Some(f)
    }

    /// Whether the index has seen a successful `finished` of `name` (without reading it).
    pub fn has_last_ok(&self, name: &str) -> bool {
        self.last_ok.contains_key(name)
    }

    /// The last successful `finished` of `name`, when the index has seen one and it is still there.
    pub fn last_ok(&self, name: &str) -> Option<Record> {
        let &(seg, hash, offset) = self.last_ok.get(name)?;
        let file = self.segment(seg)?;
        read_line_at(&file, offset_of(offset))
            .filter(|l| line_hash(l) == hash)
            .and_then(|l| Record::parse(&l).ok())
            .filter(|r| r.v == VERSION && r.name == name)
    }

    /// The records of `name`, newest first, read from the lines the index points at. A file that
    /// cannot be the index the cursor counted (a wrong header, fewer entries) is rebuilt from the
    /// log first, saying so.
    pub fn records(&self, name: &str) -> Records<'_> {
        let (path, file, entries, since) = self.checked_file(name);
        let counting = self.counting.load(std::sync::atomic::Ordering::Relaxed)
            && !self.memory.contains_key(name);
        Records {
            snapshot: self,
            name: name.to_owned(),
            path,
            file,
            next: entries,
            block: Vec::new(),
            memory: self.memory.get(name).cloned().unwrap_or_default(),
            seen: std::collections::HashSet::new(),
            dedupe: self.memory.contains_key(name),
            cache: None,
            damaged: false,
            skips: true,
            ends_first: false,
            end_pending: None,
            counted: since.filter(|_| counting).map(|since_ms| Tally {
                since_ms,
                ..Tally::default()
            }),
        }
    }

    /// From now on, records count the entries they read, so that a [`Snapshot::tally`] after
    /// them needs no read of its own when they read all of them (metrics judges every automation
    /// as health does, then counts its runs: the one read serves both).
    pub fn keep_tallies(&self) {
        self.counting
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// `name`'s index file, how many entries of it to read, and the time in its header (`None`
    /// for a file rebuilt here). A file that cannot be the index the cursor counted (a wrong
    /// header, fewer entries) is rebuilt from the log first, saying so.
    fn checked_file(&self, name: &str) -> (PathBuf, Option<File>, u64, Option<u64>) {
        let path = file_of(&self.layout, name).unwrap_or_default();
        let count = self.counts.get(name).copied().unwrap_or(0);
        let mut file = open_index(&path);
        let mut since = None;
        let ok = match &file {
            None => count == 0,
            Some(f) => {
                let len = f.metadata().map_or(0, |m| m.len());
                since = header_ms(f);
                since.is_some() && len >= HEADER + count * ENTRY
            }
        };
        if !ok {
            errln!(
                "automations: the run index {} does not match the log; rebuilding it from the log",
                path.display()
            );
            file = self.rebuild(name).ok().flatten();
        }
        let entries = match &file {
            Some(f) if !ok => (f.metadata().map_or(0, |m| m.len()).saturating_sub(HEADER)) / ENTRY,
            Some(_) => count,
            None => 0,
        };
        (path, file, entries, since.filter(|_| ok))
    }

    /// `name`'s `finished` lines by outcome, and its `skipped` lines, from the kinds of its index
    /// entries, without reading a line of the log. Counted since its index file was made: lines of
    /// segments retention deleted since stay counted, so the counts never go down; only a rebuilt
    /// file (the log replaced, or its index damaged) starts again, from a later `since_ms`.
    pub fn tally(&self, name: &str) -> Tally {
        if let Some(t) = self.tallies.lock().ok().and_then(|mut t| t.remove(name)) {
            return t;
        }
        let mut tally = Tally::default();
        // Entries found in memory (a read-only data root) may repeat the file's: only then are
        // the file's remembered.
        let memory = self.memory.get(name);
        let mut seen = std::collections::HashSet::new();
        let since = self.each_entry(name, |e| {
            if memory.is_some() {
                seen.insert((e.0, offset_of(e.2)));
            }
            count(&mut tally, e);
        });
        let mut first_new = None;
        for e in memory.into_iter().flatten() {
            if seen.insert((e.0, offset_of(e.2))) {
                first_new.get_or_insert(*e);
                count(&mut tally, e);
            }
        }
        tally.since_ms = match since {
            Some(ms) => ms,
            None => first_at(&self.paths, first_new.as_ref()),
        };
        tally
    }

    /// Every entry of `name`'s index file, oldest first; the header's first-line time, or `None`
    /// without a file. Most files are read whole in one read with their header, which is checked;
    /// one that is not what the cursor counted is rebuilt first ([`Snapshot::checked_file`]).
    fn each_entry(&self, name: &str, mut each: impl FnMut(&Entry)) -> Option<u64> {
        const BLOCK: u64 = 4096;
        let count = self.counts.get(name).copied().unwrap_or(0);
        if count <= BLOCK {
            let mut bytes = vec![0u8; (HEADER + count * ENTRY) as usize];
            if let Some(f) = file_of(&self.layout, name).and_then(|p| open_index(&p))
                && f.read_exact_at(&mut bytes, 0).is_ok()
                && is_header(&bytes)
            {
                bytes[HEADER as usize..]
                    .chunks_exact(ENTRY as usize)
                    .for_each(|c| each(&decode(c)));
                return Some(first_ms(&bytes));
            }
        }
        let (_, file, entries, _) = self.checked_file(name);
        let f = file?;
        let mut h = [0u8; HEADER as usize];
        f.read_exact_at(&mut h, 0).ok()?;
        let mut buf = vec![0u8; (BLOCK * ENTRY) as usize];
        let mut at = 0;
        while at < entries {
            let n = (entries - at).min(BLOCK);
            let bytes = &mut buf[..(n * ENTRY) as usize];
            if f.read_exact_at(bytes, HEADER + at * ENTRY).is_err() {
                break;
            }
            bytes
                .chunks_exact(ENTRY as usize)
                .for_each(|c| each(&decode(c)));
            at += n;
        }
        Some(first_ms(&h))
    }

    /// Writes `name`'s index file anew from every segment of the log (under the index lock) and
    /// records its count; the new file, open.
    fn rebuild(&self, name: &str) -> io::Result<Option<File>> {
        let lock = fsutil::open_or_create_private(&self.layout.index_lock())?;
        lock.lock()?;
        let mut ids: Vec<(&u32, &PathBuf)> = self.paths.iter().collect();
        ids.sort();
        let mut entries = Vec::new();
        let mut last_ok = None;
        for (id, path) in ids {
            let file = open_segment(path)?;
            let len = file.metadata()?.len();
            let mut lines = scan::Forward::new(&file, len, LINE_MAX);
            while let Some(line) = lines.next_line()? {
                let Some(bytes) = line.bytes.filter(|_| line.ended) else {
                    continue;
                };
                if let Ok(h) = serde_json::from_slice::<Head>(&bytes)
                    && h.name == name
                {
                    let entry = (
                        *id,
                        line_hash(&bytes),
                        tagged(line.start, h.event, h.outcome),
                    );
                    entries.push(entry);
                    if h.event == Some("finished") && h.outcome == Some("ok") {
                        last_ok = Some(entry);
                    }
                }
            }
        }
        let mut bytes = header(first_at(&self.paths, entries.first())).to_vec();
        bytes.extend_from_slice(&encode(&entries));
        let Some(path) = file_of(&self.layout, name) else {
            return Ok(None);
        };
        fsutil::write_cache(&path, &bytes)?;
        // The cursor counts the rebuilt file (what a refresh reads after this is appended anew
        // and repeats dropped by readers).
        let cursor_path = self.layout.index_cursor();
        if let Some(bytes) = fsutil::read_in_data_root(&cursor_path, fsutil::SMALL_FILE)?
            && let Ok(mut c) = serde_json::from_slice::<Cursor>(&bytes)
        {
            c.counts.insert(name.to_owned(), entries.len() as u64);
            match last_ok {
                Some(e) => c.last_ok.insert(name.to_owned(), e),
                None => c.last_ok.remove(name),
            };
            let mut json = serde_json::to_vec(&c).map_err(io::Error::other)?;
            json.push(b'\n');
            fsutil::write_cache(&cursor_path, &json)?;
        }
        Ok(open_index(&path))
    }
}

fn open_index(path: &Path) -> Option<File> {
    fsutil::open_in_data_root(path, OpenOptions::new().read(true)).ok()
}

/// Records of one automation, newest first: entries read backwards from its index file in blocks.
pub struct Records<'a> {
    snapshot: &'a Snapshot,
    name: String,
    path: PathBuf,
    file: Option<File>,
    /// Entries of the file not yet read (they come before `block`).
    next: u64,
    block: Vec<Entry>,
    /// Entries only in memory (read-only data root): newer than the file's.
    memory: Vec<Entry>,
    /// Entries already returned: the file's may repeat those found in memory.
    seen: std::collections::HashSet<(u32, u64)>,
    dedupe: bool,
    /// The last block read (segment, its start offset, bytes): the lines of one automation lie
    /// close together, newest first, so most are found in the block read for the one before.
    cache: Option<(u32, u64, Vec<u8>)>,
    /// An entry pointed at a line that is not the one it indexed.
    damaged: bool,
    /// Whether `skipped` lines are read (else passed over unread).
    skips: bool,
    /// Whether a run's `started` is passed over when its `finished` says what it said.
    ends_first: bool,
    /// Newest first, a `finished` was read and its `started` is still to come: whether that
    /// `finished` carried the start (so the `started` need not be read).
    end_pending: Option<bool>,
    /// The entries read so far, counted, when the snapshot keeps tallies (and this file's header
    /// was read, and nothing of this automation is in memory only).
    counted: Option<Tally>,
}

impl Drop for Records<'_> {
    fn drop(&mut self) {
        if let Ok(mut tallies) = self.snapshot.tallies.lock() {
            match self.counted.take() {
                Some(t) if self.next == 0 && !self.damaged => {
                    tallies.insert(self.name.clone(), t);
                }
                // A file found damaged is rebuilt below: no count from before stays.
                _ if self.damaged => {
                    tallies.remove(&self.name);
                }
                _ => {}
            }
        }
        if self.damaged {
            errln!(
                "automations: the run index {} pointed at lines it did not index (they were passed over); it is rebuilt from the log for the next reader",
                self.path.display()
            );
            let _ = std::fs::remove_file(&self.path);
            let _ = self.snapshot.rebuild(&self.name);
        }
    }
}

impl Records<'_> {
    /// The same records without the skipped firings, which are then never read.
    pub fn without_skips(mut self) -> Self {
        self.skips = false;
        self
    }

    /// The same records, but a run's `started` is read only when its `finished` does not say when
    /// and how the run started, or when it has none (a run still going, or interrupted): runs of
    /// one automation never overlap (its lock), so the `started` older than a `finished` is its
    /// own. Half the lines of a run, for readers that want its end (health).
    pub fn ends_first(mut self) -> Self {
        self.ends_first = true;
        self
    }

    fn next_entry(&mut self) -> Option<Entry> {
        if let Some(e) = self.memory.pop() {
            return Some(e);
        }
        if self.block.is_empty() {
            let file = self.file.as_ref()?;
            if self.next == 0 {
                return None;
            }
            // Counting, a file of up to 4,096 entries (64 KiB) is read whole in the one read,
            // so its tally comes with it.
            let n = match self.counted {
                Some(_) if self.next <= 4096 => self.next,
                _ => self.next.min(256),
            };
            let mut bytes = vec![0u8; (n * ENTRY) as usize];
            file.read_exact_at(&mut bytes, HEADER + (self.next - n) * ENTRY)
                .ok()?;
            self.next -= n;
            self.block = bytes.chunks_exact(ENTRY as usize).map(decode).collect();
            if let Some(t) = &mut self.counted {
                self.block.iter().for_each(|e| count(t, e));
            }
        }
        self.block.pop()
    }

    /// The record of an entry: the line must start where the entry says, hash as it did, and be
    /// this automation's. A line of a segment that is gone is no damage; any other miss is.
    fn read(&mut self, (seg, hash, tagged): Entry) -> Option<Record> {
        let offset = offset_of(tagged);
        let file = self.snapshot.segment(seg)?;
        let file = file.as_ref();
        if cached_range(&self.cache, seg, offset).is_none() {
            // One read for this line and the older ones of this automation close before it
            // (the next entries): lines of one automation in a log shared by few lie close
            // together; in one shared by many, only this line is read.
            let reach = self
                .block
                .iter()
                .rev()
                .map(|&(s, _, o)| (s, offset_of(o)))
                .take_while(|&(s, o)| s == seg && o < offset && offset - o <= BLOCK_REACH)
                .last()
                .map_or(offset, |(_, o)| o);
            let mut buf = self.cache.take().map(|(_, _, b)| b).unwrap_or_default();
            self.cache = read_block(file, reach, offset, &mut buf).map(|start| (seg, start, buf));
        }
        let long;
        let line = match (cached_range(&self.cache, seg, offset), &self.cache) {
            (Some(r), Some((_, _, bytes))) => Some(&bytes[r]),
            _ => {
                long = read_line_at(file, offset);
                long.as_deref()
            }
        };
        let record = Self::parse_line(line, hash, &self.name);
        self.damaged |= record.is_none();
        record
    }

    /// The record of `line` when it hashes as the entry says and is `name`'s.
    fn parse_line(line: Option<&[u8]>, hash: u32, name: &str) -> Option<Record> {
        line.filter(|l| line_hash(l) == hash)
            .and_then(|l| Record::parse(l).ok())
            .filter(|r| r.v == VERSION && r.name == name)
    }
}

/// How far before a line the older lines read with it may lie.
const BLOCK_REACH: u64 = 60 * 1024;

/// Reads from `from` (at most [`BLOCK_REACH`] before `offset`) to 4 KiB past `offset` into `buf`
/// in one go; where the bytes start.
fn read_block(file: &File, from: u64, offset: u64, buf: &mut Vec<u8>) -> Option<u64> {
    // From the byte before the first line: it must be a newline.
    let start = from
        .max(offset.saturating_sub(BLOCK_REACH))
        .saturating_sub(1);
    // A line is a few hundred bytes, one with output a few KiB: a longer one is read on.
    buf.resize((offset - start) as usize + 1536, 0);
    let n = file.read_at(buf, start).ok()?;
    buf.truncate(n);
    Some(start)
}

/// Where in the cached block the line at `offset` is, when the block holds all of it (and the byte
/// before it, which must be a newline).
fn cached_range(
    cache: &Option<(u32, u64, Vec<u8>)>,
    seg: u32,
    offset: u64,
) -> Option<std::ops::Range<usize>> {
    let (s, start, bytes) = cache.as_ref()?;
    if *s != seg || offset < *start || (offset == *start && offset != 0) {
        return None;
    }
    let at = usize::try_from(offset - start).ok()?;
    if at > 0 && bytes.get(at - 1) != Some(&b'\n') {
        return None;
    }
    let end = memchr::memchr(b'\n', bytes.get(at..)?)?;
    Some(at..at + end)
}

/// The whole line starting at `offset` (which must be a line's start), without its newline.
fn read_line_at(file: &File, offset: u64) -> Option<Vec<u8>> {
    if offset > 0 {
        let mut before = [0u8; 1];
        file.read_exact_at(&mut before, offset - 1).ok()?;
        if before[0] != b'\n' {
            return None;
        }
    }
    let mut line = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let mut at = offset;
    loop {
        let n = file.read_at(&mut chunk, at).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(i) = memchr::memchr(b'\n', &chunk[..n]) {
            line.extend_from_slice(&chunk[..i]);
            return Some(line);
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > LINE_MAX {
            // No record is that long: an entry pointing there is damaged.
            return None;
        }
        at += n as u64;
    }
}

impl Iterator for Records<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            let e = self.next_entry()?;
            let kind = e.2 >> OFFSET_BITS;
            if !self.skips && kind == KIND_SKIPPED {
                continue;
            }
            // Repeats can only come from entries found in memory on top of the file's.
            if self.dedupe && !self.seen.insert((e.0, offset_of(e.2))) {
                continue;
            }
            if self.ends_first && kind == KIND_STARTED && self.end_pending.take() == Some(true) {
                continue;
            }
            let Some(r) = self.read(e) else { continue };
            if self.ends_first && is_finished(kind) {
                let told = matches!(
                    &r.event,
                    super::Event::Finished(f) if f.trigger.is_some() && f.started_at.is_some()
                );
                self.end_pending = Some(told);
            }
            return Some(r);
        }
    }
}

/// The path of the index folder of a data root (for tests and `doctor`).
pub fn dir(data_root: &Path) -> PathBuf {
    crate::layout::Layout::new(data_root).index()
}

/// `name`'s index file, when `name` is one an automation can have: a name the log carries that is
/// not (a forged line) has no file, so it never names a path outside the index.
fn file_of(layout: &crate::layout::Layout, name: &str) -> Option<PathBuf> {
    Name::new(name).ok().map(|n| layout.index_file(&n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runlog::{Event, SkipReason, Skipped, Trigger};
    use chrono::Utc;

    fn skip(log: &RunLog, name: &str, reason: SkipReason) {
        log.append(
            name,
            Event::Skipped(Skipped {
                trigger: Trigger::Manual,
                reason,
                after: None,
                held_by: None,
                slot: None,
            }),
            Utc::now(),
        )
        .unwrap();
    }

    fn reasons(snapshot: &Snapshot, name: &str) -> Vec<SkipReason> {
        snapshot
            .records(name)
            .map(|r| match r.event {
                Event::Skipped(s) => s.reason,
                e => panic!("{e:?}"),
            })
            .collect()
    }

    #[test]
    fn catches_up_incrementally_and_answers_per_name_newest_first() {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        let index = Index::new(&log);
        assert_eq!(index.refresh().unwrap().records("a").count(), 0);
        skip(&log, "a", SkipReason::Paused);
        skip(&log, "b", SkipReason::Stopped);
        skip(&log, "a", SkipReason::SlotDone);
        let s = index.refresh().unwrap();
        assert_eq!(reasons(&s, "a"), [SkipReason::SlotDone, SkipReason::Paused]);
        assert_eq!(reasons(&s, "b"), [SkipReason::Stopped]);
        assert_eq!(s.records("never").count(), 0);
        let idx = d.path().join("state/index/a.idx");
        assert_eq!(std::fs::metadata(&idx).unwrap().len(), HEADER + 2 * ENTRY);
        // Nothing new: nothing is written (the cursor is the same file as before).
        let ino = || {
            std::os::unix::fs::MetadataExt::ino(
                &std::fs::metadata(d.path().join("state/index/cursor")).unwrap(),
            )
        };
        let first = ino();
        assert_eq!(
            reasons(&index.refresh().unwrap(), "b"),
            [SkipReason::Stopped]
        );
        assert_eq!(ino(), first, "an unchanged cursor was written again");
        // Only what was appended since is read and added.
        skip(&log, "a", SkipReason::AlreadyRunning);
        let s = index.refresh().unwrap();
        assert_eq!(std::fs::metadata(&idx).unwrap().len(), HEADER + 3 * ENTRY);
        assert_eq!(reasons(&s, "a")[0], SkipReason::AlreadyRunning);
        // An interrupted index write (entries appended, cursor not moved): the next write cuts the
        // file back to what the cursor counted before appending, so nothing repeats.
        let cursor = std::fs::read(d.path().join("state/index/cursor")).unwrap();
        skip(&log, "a", SkipReason::Paused);
        index.refresh().unwrap();
        std::fs::write(d.path().join("state/index/cursor"), cursor).unwrap();
        let s = index.refresh().unwrap();
        assert_eq!(std::fs::metadata(&idx).unwrap().len(), HEADER + 4 * ENTRY);
        assert_eq!(
            reasons(&s, "a"),
            [
                SkipReason::Paused,
                SkipReason::AlreadyRunning,
                SkipReason::SlotDone,
                SkipReason::Paused
            ]
        );
    }

    fn finish(log: &RunLog, name: &str, outcome: crate::runlog::Outcome) {
        let finished = crate::runlog::Finished {
            run: "r".into(),
            outcome,
            exit_code: None,
            signal: None,
            duration_ms: 1,
            error: None,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            dropped: Default::default(),
            facts: Default::default(),
            headline: None,
            http: None,
            leftover_processes: 0,
            clock: crate::clock::now(),
            trigger: None,
            started_at: None,
            attempt: None,
            first_run: None,
            replaced_by: None,
            slot: None,
        };
        log.append(name, Event::Finished(finished), Utc::now())
            .unwrap();
    }

    #[test]
    fn the_tally_counts_from_the_entry_kinds_never_goes_down_and_says_where_it_starts() {
        use crate::runlog::Outcome;
        let d = tempfile::tempdir().unwrap();
        // Few enough segments that retention keeps every one until the test removes the oldest.
        let log = RunLog::new(d.path()).with_rotation(5000);
        let index = Index::new(&log);
        let before = Utc::now().timestamp_millis() as u64;
        let order = [
            Outcome::Ok,
            Outcome::Failed,
            Outcome::Ok,
            Outcome::Timeout,
            Outcome::Stopped,
        ];
        for i in 0..20 {
            finish(&log, "a", order[i % order.len()]);
            skip(&log, "a", SkipReason::Paused);
            finish(&log, "b", Outcome::Ok);
        }
        let segments = log.segments().len();
        assert!(
            (3..=crate::runlog::KEEP_SEGMENTS).contains(&segments),
            "{segments}"
        );
        let s = index.refresh().unwrap();
        let a = s.tally("a");
        assert_eq!((a.outcomes, a.skipped), ([8, 4, 4, 4], 20));
        assert!(a.since_ms >= before && a.since_ms <= Utc::now().timestamp_millis() as u64);
        assert_eq!(s.tally("b").outcomes, [20, 0, 0, 0]);
        assert_eq!(s.tally("never"), Tally::default());

        // Retention removes the oldest segment: the counts stay (a counter never goes down).
        let oldest = log.segments().pop().unwrap();
        let gone = std::fs::read_to_string(&oldest).unwrap();
        let gone_b = gone
            .lines()
            .filter(|l| l.contains("\"name\":\"b\""))
            .count() as u64;
        assert!(gone_b > 0);
        std::fs::remove_file(&oldest).unwrap();
        finish(&log, "b", Outcome::Failed);
        let s = index.refresh().unwrap();
        let b = s.tally("b");
        assert_eq!(b.outcomes, [20, 1, 0, 0]);
        assert_eq!(s.tally("a"), a);

        // An index file lost: rebuilt from what the log holds, it starts again, later.
        std::fs::remove_file(d.path().join("state/index/b.idx")).unwrap();
        let s = index.refresh().unwrap();
        let rebuilt = s.tally("b");
        assert_eq!(rebuilt.outcomes, [20 - gone_b, 1, 0, 0]);
        assert!(rebuilt.since_ms > b.since_ms, "{rebuilt:?} after {b:?}");
    }

    /// Records that read every entry of their automation count them, and the tally after them
    /// is that count; records that stopped short leave the tally to its own read. Both agree
    /// with a tally of a snapshot that keeps none.
    #[test]
    fn records_that_read_every_entry_count_them_for_the_tally() {
        use crate::runlog::Outcome;
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        let index = Index::new(&log);
        // 300 entries of `a`: more than the 256 of one block.
        for i in 0..150 {
            let o = if i % 3 == 0 {
                Outcome::Failed
            } else {
                Outcome::Ok
            };
            finish(&log, "a", o);
            skip(&log, "a", SkipReason::Paused);
        }
        for _ in 0..5 {
            finish(&log, "b", Outcome::Ok);
        }
        let alone = index.refresh().unwrap();
        let (want_a, want_b) = (alone.tally("a"), alone.tally("b"));
        assert_eq!((want_a.outcomes, want_a.skipped), ([100, 50, 0, 0], 150));
        let kept = |s: &Snapshot, name: &str| s.tallies.lock().unwrap().get(name).copied();

        let s = index.refresh().unwrap();
        assert_eq!(s.records("b").count(), 5);
        assert_eq!(kept(&s, "b"), None, "not asked to keep tallies");
        s.keep_tallies();
        // One block holds every entry of b: counted as the records read it.
        assert_eq!(s.records("b").take(1).count(), 1);
        assert_eq!(kept(&s, "b"), Some(want_b));
        // The tally is the one kept (taken, so it is not kept twice).
        assert_eq!(s.tally("b"), want_b);
        assert_eq!(kept(&s, "b"), None);
        // A file of more than a block (300 entries) is read whole at once while counting.
        assert_eq!(s.records("a").take(20).count(), 20);
        assert_eq!(kept(&s, "a"), Some(want_a));
        assert_eq!(s.tally("a"), want_a);
        // Records that stop before they have read every entry (here: before any) leave the
        // tally to its own read.
        let fresh = index.refresh().unwrap();
        fresh.keep_tallies();
        drop(fresh.records("a"));
        assert_eq!(kept(&fresh, "a"), None);
        assert_eq!(fresh.tally("a"), want_a);

        // A file that is not what the cursor counted is rebuilt as it is read: its count is left
        // to the tally's own read of the rebuilt file.
        let b_idx = d.path().join("state/index/b.idx");
        let whole = std::fs::read(&b_idx).unwrap();
        std::fs::write(&b_idx, &whole[..(HEADER + 2 * ENTRY) as usize]).unwrap();
        let torn = index.refresh().unwrap();
        torn.keep_tallies();
        assert_eq!(torn.records("b").count(), 5);
        assert_eq!(kept(&torn, "b"), None);
        assert_eq!(torn.tally("b").outcomes, want_b.outcomes);
    }

    /// Every outcome a `finished` line can have is one the index tells apart.
    #[test]
    fn every_outcome_has_its_kind() {
        use crate::runlog::Outcome;
        for o in [
            Outcome::Ok,
            Outcome::Failed,
            Outcome::Timeout,
            Outcome::Stopped,
        ] {
            // A new outcome fails to compile here until it is added to OUTCOMES.
            let i = match o {
                Outcome::Ok => 0,
                Outcome::Failed => 1,
                Outcome::Timeout => 2,
                Outcome::Stopped => 3,
            };
            assert_eq!(OUTCOMES[i], o.as_str());
            assert_eq!(
                kind_of(Some("finished"), Some(o.as_str())),
                KIND_OUTCOME + i as u64
            );
            assert!(is_finished(kind_of(Some("finished"), Some(o.as_str()))));
        }
        assert!(is_finished(kind_of(Some("finished"), Some("later"))));
        assert!(!is_finished(kind_of(Some("skipped"), None)));
    }

    #[test]
    fn follows_rotation_skips_deleted_segments_and_rebuilds_a_replaced_log() {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path()).with_rotation(600);
        let index = Index::new(&log);
        for _ in 0..12 {
            skip(&log, "a", SkipReason::Paused);
        }
        assert!(log.segments().len() > 2, "{:?}", log.segments());
        assert_eq!(index.refresh().unwrap().records("a").count(), 12);
        for _ in 0..6 {
            skip(&log, "a", SkipReason::Stopped);
        }
        let s = index.refresh().unwrap();
        assert_eq!(s.records("a").count(), 18);
        // The oldest segment goes (retention): its entries are skipped, the rest still found.
        let oldest = log.segments().pop().unwrap();
        let gone = std::fs::read_to_string(&oldest).unwrap().lines().count();
        std::fs::remove_file(&oldest).unwrap();
        let s = index.refresh().unwrap();
        assert_eq!(s.records("a").count(), 18 - gone);
        // A log replaced by another: the cursor no longer agrees, so the index is rebuilt.
        for seg in log.segments() {
            let _ = std::fs::remove_file(seg);
        }
        skip(&log, "b", SkipReason::Paused);
        let s = index.refresh().unwrap();
        assert_eq!(s.records("a").count(), 0);
        assert_eq!(reasons(&s, "b"), [SkipReason::Paused]);
    }

    #[test]
    fn a_snapshot_reads_only_what_it_indexed_and_passes_over_an_edited_line() {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path()).with_rotation(1200);
        for _ in 0..10 {
            skip(&log, "a", SkipReason::Paused);
            skip(&log, "b", SkipReason::Stopped);
        }
        assert!(log.segments().len() > 2, "{:?}", log.segments());
        let index = Index::new(&log);
        let snapshot = index.refresh().unwrap();
        for n in ["a", "b"] {
            assert_eq!(reasons(&snapshot, n).len(), 10);
        }
        // Appended after the snapshot was taken: not among its entries.
        skip(&log, "a", SkipReason::SlotDone);
        assert_eq!(reasons(&snapshot, "a").len(), 10);
        assert_eq!(
            reasons(&index.refresh().unwrap(), "a")[0],
            SkipReason::SlotDone
        );
        // A line edited in place (same length; the segment's second, so neither the line that
        // names the segment nor the one the cursor checks): its entry no longer hashes as the
        // line, so it is passed over and the index rebuilt.
        let newest = d.path().join("runs.jsonl");
        let text = std::fs::read_to_string(&newest).unwrap();
        let second = text.find('\n').unwrap() + 1;
        let at = second + text[second..].find("\"at\":\"2").unwrap();
        assert!(at < second + text[second..].find('\n').unwrap());
        let edited = format!("{}\"at\":\"1{}", &text[..at], &text[at + 7..]);
        std::fs::write(&newest, edited).unwrap();
        let s = index.refresh().unwrap();
        let seen = s.records("a").count() + s.records("b").count();
        assert_eq!(seen, 20, "the edited line was read as it was indexed");
        let s = index.refresh().unwrap();
        assert_eq!(
            s.records("a").count() + s.records("b").count(),
            21,
            "rebuilt"
        );
    }

    #[test]
    fn a_read_only_index_answers_from_memory() {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        skip(&log, "a", SkipReason::Paused);
        // The index folder cannot be made: a file is in its way.
        std::fs::create_dir_all(d.path().join("state")).unwrap();
        std::fs::write(d.path().join("state/index"), "").unwrap();
        let s = Index::new(&log).refresh().unwrap();
        assert_eq!(reasons(&s, "a"), [SkipReason::Paused]);
    }
}
