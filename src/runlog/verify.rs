//! `automations log verify`: the whole chain, oldest segment first, each line read once; the seams
//! of rotation and retention; and the live segment against the recorded head.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::event::{Event, Record};
use super::{GENESIS, LINE_MAX, LOG_FILE, LogError, RunLog, head, hex, open_segment, scan};
use crate::definition::hex_sha256;

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
    /// What is worth knowing and breaks nothing (a `break` an older version wrote in error).
    pub notes: Vec<String>,
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
            && !log.layout.segment(&rot.previous).exists()
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
            Event::Break(b) if b.expected == b.found => self.v.notes.push(format!(
                "{place}: an older version took a copied or restored data root for a cut log and wrote this break; the head and the log agreed ({} line(s), {} bytes, ending in {}): nothing is missing",
                b.found.lines,
                b.found.bytes,
                short(&b.found.hash)
            )),
            Event::Break(b) => self.v.breaks.push(format!(
                "{place}: the log was cut before this line was appended: {} (the chain head recorded {} line(s), {} bytes, ending in {}; the log held {} line(s), {} bytes, ending in {})",
                what_differs(&b.expected, &b.found),
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
    // The head names a line of the live segment: it matches the log, or lags (an append it
    // never recorded).
    let at = match lines.cmp(&h.lines) {
        std::cmp::Ordering::Equal => Some(last_hash.to_owned()),
        std::cmp::Ordering::Greater => nth_line_hash(&log.path(), h.lines),
        std::cmp::Ordering::Less => None,
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
        return;
    }
    // Or a line of a segment before the last rotation, known by its bytes (never by an inode: a
    // copied or restored data root is the same log).
    let before_seam =
        lines > 0 && open_segment(&log.path()).is_ok_and(|live| log.holds_before_seam(&live, &h));
    if before_seam {
        v.head = Some("lags the log (recorded before the last rotation)".into());
        return;
    }
    v.breaks.push(if lines < h.lines {
        format!(
            "{LOG_FILE} has {lines} line(s), but the chain head (state/head) records {} ending in {}: {} line(s) are gone from its end (its tail was cut or it was emptied)",
            h.lines,
            short(&h.hash),
            h.lines - lines
        )
    } else {
        format!(
            "{LOG_FILE} line {} is not the line the chain head (state/head) records ({}): the log was cut and written again, edited, or replaced",
            h.lines,
            short(&h.hash)
        )
    });
    v.head = Some(if lines < h.lines {
        "ahead of the log".into()
    } else {
        "disagrees with the log".into()
    });
}

/// What a `break` found against what the head recorded, in words.
fn what_differs(expected: &crate::runlog::Extent, found: &crate::runlog::Extent) -> String {
    use std::cmp::Ordering;
    match found.lines.cmp(&expected.lines) {
        Ordering::Less => format!(
            "{} line(s) were gone from its end",
            expected.lines - found.lines
        ),
        Ordering::Equal => "its last line was not the one recorded".into(),
        Ordering::Greater => format!(
            "it held {} more line(s) than recorded, and not the recorded line where the head said",
            found.lines - expected.lines
        ),
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
