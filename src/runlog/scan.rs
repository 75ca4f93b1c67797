//! Scanning a segment's bytes for line ends and chain hashes, at a cost bounded by what can hold a
//! line: the file's holes (sparse regions, which read as zeros and so hold no newline: a tail
//! extended by `truncate`, a damaged disk) are passed over without reading them, and a line too
//! long to be one the log wrote is chained by its length and its ends instead of every byte.
//!
//! This module only reads; it never changes a segment.

use crate::platform::FileExt;
use std::fs::File;
use std::io;

use sha2::Digest;

/// Lines up to this long are chained by the sha256 of all their bytes. A longer one cannot be a
/// record (the log writes lines well under a MiB): it is damage, chained by [`oversize_hash`], so
/// sealing or reading past it never hashes gigabytes.
pub const HASHED_MAX: u64 = 16 * 1024 * 1024;

/// How much of each end of an oversized line its chain hash covers.
const ENDS: u64 = 64 * 1024;

/// Holes recorded at most (a file with more is scanned byte by byte past the last one).
#[cfg(unix)]
const MAX_HOLES: usize = 4096;

const BLOCK: usize = 256 * 1024;

/// The holes of a file up to a length, oldest offset first, as the file system reports them
/// (`SEEK_HOLE` / `SEEK_DATA`); none where it reports none.
#[derive(Debug, Default)]
pub struct Holes(Vec<(u64, u64)>);

impl Holes {
    /// The holes of `file` below `len`. The file's own offset is left where it was.
    #[cfg(windows)]
    pub fn of(_file: &File, _len: u64) -> Self {
        Self::default()
    }

    /// The holes of `file` below `len`. The file's own offset is left where it was.
    #[cfg(unix)]
    pub fn of(file: &File, len: u64) -> Self {
        use nix::unistd::{Whence, lseek};
        use std::os::fd::AsFd;
        let fd = file.as_fd();
        let Ok(was) = lseek(fd, 0, Whence::SeekCur) else {
            return Self::default();
        };
        let mut holes = Vec::new();
        let mut at = 0u64;
        while at < len && holes.len() < MAX_HOLES {
            let Ok(hole) = lseek(fd, at as i64, Whence::SeekHole) else {
                break;
            };
            let hole = hole as u64;
            if hole >= len {
                break;
            }
            // No data after the hole: it runs to the end.
            let data =
                lseek(fd, hole as i64, Whence::SeekData).map_or(len, |d| (d as u64).min(len));
            if data <= hole {
                break;
            }
            holes.push((hole, data));
            at = data;
        }
        let _ = lseek(fd, was, Whence::SeekSet);
        Self(holes)
    }

    /// The hole holding byte `at`: its start and end.
    pub fn around(&self, at: u64) -> Option<(u64, u64)> {
        let i = self.0.partition_point(|&(_, end)| end <= at);
        self.0.get(i).copied().filter(|&(start, _)| start <= at)
    }
}

/// Newlines between `from` and `to`: the whole lines there. Holes are passed over.
pub fn newlines_in(file: &File, from: u64, to: u64) -> io::Result<u64> {
    let mut holes = None;
    let mut buf = vec![0u8; BLOCK];
    let (mut at, mut lines) = (from, 0u64);
    while at < to {
        // Past a MiB, look for holes once: a short gap is read faster than asked about.
        if at - from > BLOCK as u64 * 4 {
            let h = holes.get_or_insert_with(|| Holes::of(file, to));
            if let Some((_, end)) = h.around(at) {
                at = end;
                continue;
            }
        }
        let want = usize::try_from(to - at).unwrap_or(usize::MAX).min(BLOCK);
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        at += n as u64;
    }
    Ok(lines)
}

/// Lines in a file from its start: newline-ended ones, plus a torn last one.
pub fn count_lines(file: &File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let whole = newlines_in(file, 0, len)?;
    let mut last = [0u8; 1];
    let torn = len > 0 && {
        file.read_exact_at(&mut last, len - 1)?;
        last[0] != b'\n'
    };
    Ok(whole + u64::from(torn))
}

/// Where the next newline at or after `from` (and before `to`) is; holes are passed over.
pub fn next_newline(file: &File, from: u64, to: u64) -> io::Result<Option<u64>> {
    let mut holes = None;
    let mut buf = vec![0u8; BLOCK];
    let mut at = from;
    while at < to {
        if at - from > BLOCK as u64 * 4 {
            let h = holes.get_or_insert_with(|| Holes::of(file, to));
            if let Some((_, end)) = h.around(at) {
                at = end;
                continue;
            }
        }
        let want = usize::try_from(to - at).unwrap_or(usize::MAX).min(BLOCK);
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(at + i as u64));
        }
        at += n as u64;
    }
    Ok(None)
}

/// The chain hash of the line at `start..end` of `file` (without its newline): the sha256 of its
/// bytes, or for a line longer than [`HASHED_MAX`], [`oversize_hash`].
pub fn range_hash(file: &File, start: u64, end: u64) -> io::Result<[u8; 32]> {
    if end - start > HASHED_MAX {
        oversize_hash(file, start, end)
    } else {
        full_hash(file, start, end)
    }
}

/// The sha256 of every byte of `start..end`: how every line is chained, and how lines longer than
/// [`HASHED_MAX`] were before [`oversize_hash`] (`verify` accepts either for such a line).
pub fn full_hash(file: &File, start: u64, end: u64) -> io::Result<[u8; 32]> {
    let mut h = sha2::Sha256::new();
    let mut chunk = vec![0u8; BLOCK];
    let mut at = start;
    while at < end {
        let n = (end - at).min(BLOCK as u64) as usize;
        file.read_exact_at(&mut chunk[..n], at)?;
        h.update(&chunk[..n]);
        at += n as u64;
    }
    Ok(h.finalize().into())
}

/// How a line longer than [`HASHED_MAX`] is chained: the sha256 of a fixed tag, its length (8
/// bytes, little-endian), its first and its last 64 KiB. Such a line is damage; its ends and
/// length pin it as well as anything can, and hashing it costs the same whatever its size.
pub fn oversize_hash(file: &File, start: u64, end: u64) -> io::Result<[u8; 32]> {
    let len = end - start;
    let mut first = vec![0u8; ENDS.min(len) as usize];
    file.read_exact_at(&mut first, start)?;
    let mut last = vec![0u8; ENDS.min(len) as usize];
    let last_at = end - last.len() as u64;
    file.read_exact_at(&mut last, last_at)?;
    let mut h = sha2::Sha256::new();
    h.update(b"automations oversized line\n");
    h.update(len.to_le_bytes());
    h.update(&first);
    h.update(&last);
    Ok(h.finalize().into())
}

/// A line read forwards: where it lies, and its bytes when it is at most the reader's cap.
#[derive(Debug)]
pub struct Line {
    pub start: u64,
    /// Where it ends, before its newline.
    pub end: u64,
    /// Its bytes (without the newline), unless it is longer than the cap.
    pub bytes: Option<Vec<u8>>,
    /// Whether a newline ends it (the file's last line may be torn).
    pub ended: bool,
}

/// The lines of a file from its start, read in blocks; a line longer than the cap is passed over
/// (holes skipped), never held.
pub struct Forward<'f> {
    file: &'f File,
    len: u64,
    cap: usize,
    /// `buf[at..]` are the bytes from `pos` on that were read and not yet handed out.
    buf: Vec<u8>,
    at: usize,
    pos: u64,
}

impl<'f> Forward<'f> {
    /// Reads `file` up to `len`; lines longer than `cap` come back without their bytes.
    pub fn new(file: &'f File, len: u64, cap: usize) -> Self {
        Self::from(file, 0, len, cap)
    }

    /// Reads `file` from `pos` (the start of a line) up to `len`.
    pub fn from(file: &'f File, pos: u64, len: u64, cap: usize) -> Self {
        Self {
            file,
            len,
            cap,
            buf: Vec::new(),
            at: 0,
            pos,
        }
    }

    /// The chain hash of `line`, read by this reader.
    pub fn hash(&self, line: &Line) -> io::Result<[u8; 32]> {
        match &line.bytes {
            Some(bytes) => Ok(sha2::Sha256::digest(bytes).into()),
            None => range_hash(self.file, line.start, line.end),
        }
    }

    /// The next line, or `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        if self.pos >= self.len {
            return Ok(None);
        }
        let start = self.pos;
        let mut bytes = Vec::new();
        loop {
            if self.at == self.buf.len() {
                let want = usize::try_from(self.len - self.pos)
                    .unwrap_or(usize::MAX)
                    .min(BLOCK);
                self.buf.resize(want, 0);
                let n = self.file.read_at(&mut self.buf, self.pos)?;
                self.buf.truncate(n);
                self.at = 0;
                if n == 0 {
                    // Shorter than it was: what was read is the last line.
                    self.len = self.pos;
                    return Ok(Some(Line {
                        start,
                        end: self.pos,
                        bytes: Some(bytes),
                        ended: false,
                    }));
                }
            }
            let rest = &self.buf[self.at..];
            let newline = memchr::memchr(b'\n', rest);
            let chunk = &rest[..newline.unwrap_or(rest.len())];
            bytes.extend_from_slice(chunk);
            self.at += chunk.len();
            self.pos += chunk.len() as u64;
            if newline.is_some() {
                self.at += 1;
                self.pos += 1;
                return Ok(Some(self.line(start, self.pos - 1, bytes, true)));
            }
            if bytes.len() > self.cap {
                // Too long to hold: find its end without reading its holes.
                self.buf.clear();
                self.at = 0;
                let end = next_newline(self.file, self.pos, self.len)?;
                self.pos = end.map_or(self.len, |e| e + 1);
                return Ok(Some(Line {
                    start,
                    end: end.unwrap_or(self.len),
                    bytes: None,
                    ended: end.is_some(),
                }));
            }
            if self.pos >= self.len {
                return Ok(Some(self.line(start, self.pos, bytes, false)));
            }
        }
    }

    fn line(&self, start: u64, end: u64, bytes: Vec<u8>, ended: bool) -> Line {
        let fits = bytes.len() <= self.cap;
        Line {
            start,
            end,
            bytes: fits.then_some(bytes),
            ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with a 64 MiB hole in the middle and one at its end.
    fn sparse() -> (tempfile::NamedTempFile, u64) {
        let f = tempfile::NamedTempFile::new().unwrap();
        let file = f.as_file();
        file.write_all_at(b"a\nb\n", 0).unwrap();
        file.write_all_at(b"c\nd", 64 << 20).unwrap();
        let len = (128 << 20) + 7;
        file.set_len(len).unwrap();
        (f, len)
    }

    #[test]
    fn holes_are_passed_over_and_lines_counted_as_if_read() {
        let (f, len) = sparse();
        let file = f.as_file();
        assert_eq!(newlines_in(file, 0, len).unwrap(), 3);
        assert_eq!(count_lines(file).unwrap(), 4);
        assert_eq!(next_newline(file, 5, len).unwrap(), Some((64 << 20) + 1));
        assert_eq!(next_newline(file, (64 << 20) + 2, len).unwrap(), None);
        // Whatever the file system says of holes, the answers are those of reading every byte.
        let holes = Holes::of(file, len);
        for (start, end) in &holes.0 {
            let mut buf = vec![1u8; (end - start).min(1 << 20) as usize];
            file.read_exact_at(&mut buf, *start).unwrap();
            assert!(buf.iter().all(|&b| b == 0), "a hole reads as zeros");
        }
    }

    #[test]
    fn forward_lines_hold_short_lines_and_pass_over_long_ones() {
        let (f, len) = sparse();
        let file = f.as_file();
        let mut lines = Forward::new(file, len, 1024);
        let mut got = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            got.push((l.start, l.end, l.bytes, l.ended));
        }
        let far = 64u64 << 20;
        assert_eq!(
            got,
            [
                (0, 1, Some(b"a".to_vec()), true),
                (2, 3, Some(b"b".to_vec()), true),
                (4, far + 1, None, true),
                (far + 2, len, None, false),
            ]
        );
    }

    #[test]
    fn an_oversized_line_is_hashed_by_its_length_and_ends() {
        let (f, len) = sparse();
        let file = f.as_file();
        let start = (64 << 20) + 2;
        let a = range_hash(file, start, len).unwrap();
        assert_eq!(a, oversize_hash(file, start, len).unwrap());
        // Its length counts, and so does its last byte.
        assert_ne!(a, range_hash(file, start, len - 1).unwrap());
        file.write_all_at(b"x", len - 1).unwrap();
        assert_ne!(a, range_hash(file, start, len).unwrap());
        // A line within the limit is hashed whole, as `sha256` of its bytes.
        assert_eq!(
            range_hash(file, 0, 1).unwrap(),
            <[u8; 32]>::from(sha2::Sha256::digest(b"a"))
        );
    }
}
