//! The last 8 KiB of a stream, with the count of bytes dropped before it (docs/running.md).
//!
//! Memory stays bounded (at most twice the tail) whatever the command prints. The cut is moved
//! forward to a UTF-8 boundary; bytes that are not UTF-8 become U+FFFD, so they stay visible instead
//! of being dropped. This module sees only redacted bytes: it must never be fed raw output.

use crate::redact::Sink;

/// Bytes kept per stream.
pub const TAIL_BYTES: usize = 8 * 1024;

/// A bounded tail of a byte stream.
#[derive(Debug)]
pub struct Tail {
    buf: Vec<u8>,
    cap: usize,
    dropped: u64,
}

impl Default for Tail {
    fn default() -> Self {
        Self::new(TAIL_BYTES)
    }
}

impl Tail {
    /// A tail keeping `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            dropped: 0,
        }
    }

    /// The tail as text, and the number of bytes dropped before it.
    pub fn finish(mut self) -> (String, u64) {
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
        // Only cut when something was dropped: then the first bytes may continue a character
        // whose start is gone.
        let mut start = 0;
        if self.dropped > 0 {
            while start < 3 && start < self.buf.len() && self.buf[start] & 0xC0 == 0x80 {
                start += 1;
            }
        }
        self.dropped += start as u64;
        (
            String::from_utf8_lossy(&self.buf[start..]).into_owned(),
            self.dropped,
        )
    }
}

impl Sink for Tail {
    fn put(&mut self, data: &[u8]) {
        if data.len() >= self.cap {
            self.dropped += (self.buf.len() + data.len() - self.cap) as u64;
            self.buf.clear();
            self.buf.extend_from_slice(&data[data.len() - self.cap..]);
            return;
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() > self.cap * 2 {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_counts_the_rest() {
        let mut t = Tail::new(8);
        for chunk in [&b"0123"[..], b"456789", b"abcdefghijklmnop", b"xyz"] {
            t.put(chunk);
        }
        let (text, dropped) = t.finish();
        assert_eq!(text, "lmnopxyz");
        assert_eq!(dropped, 29 - 8);
    }

    #[test]
    fn short_output_is_kept_whole() {
        let mut t = Tail::default();
        t.put(b"hello\n");
        assert_eq!(t.finish(), ("hello\n".to_string(), 0));
    }

    #[test]
    fn cut_moves_to_a_utf8_boundary() {
        let mut t = Tail::new(5);
        t.put("aé€€".as_bytes()); // 1 + 2 + 3 + 3 bytes; the last 5 start inside the first €
        let (text, dropped) = t.finish();
        assert_eq!(text, "€");
        assert_eq!(dropped, 9 - 3);
    }

    #[test]
    fn invalid_bytes_stay_visible() {
        let mut t = Tail::new(64);
        t.put(b"ok \xff\xfe end");
        let (text, _) = t.finish();
        assert_eq!(text, "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn huge_single_write() {
        let mut t = Tail::new(TAIL_BYTES);
        let big = vec![b'x'; 20 * 1024 * 1024];
        t.put(&big);
        t.put(b"END");
        let (text, dropped) = t.finish();
        assert_eq!(text.len(), TAIL_BYTES);
        assert!(text.ends_with("END"));
        assert_eq!(dropped, big.len() as u64 + 3 - TAIL_BYTES as u64);
    }
}
