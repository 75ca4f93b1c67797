//! Reading the log backwards, newest first, block by block: readers cost what they report, not
//! the size of the log, and never hold more than [`LINE_MAX`] of one line.

use crate::platform::FileExt;
use std::fs::File;
use std::io;
use std::path::PathBuf;

use super::VERSION;
use super::event::Record;
use super::{LogError, open_segment, scan};

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
    pub(super) segments: Vec<PathBuf>,
    pub(super) current: Option<(PathBuf, RevLines)>,
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
