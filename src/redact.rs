//! The redactor: every secret the runner knows is replaced by `[redacted]` in a stream of bytes,
//! before anything is cut or stored (docs/running.md).
//!
//! It works on raw bytes as they arrive, holding back `longest secret − 1` bytes so a secret split
//! across two writes is still seen whole. Overlapping and adjacent occurrences are merged into one
//! marker, so no fragment of a self-overlapping secret survives between two markers. This module
//! must never log, print or keep a secret anywhere but its own list.

/// What replaces a secret.
pub const MARKER: &[u8] = b"[redacted]";

/// Fragments of keys this long or longer are redacted too (see [`Redactor::add_key`]).
pub const FRAGMENT: usize = 6;

/// Secrets shorter than this are not redacted: a 1 or 2 byte "secret" would shred ordinary
/// output (an env file refuses such a value instead: see `runner::env`).
pub const MIN_SECRET_LEN: usize = 3;

/// The set of secrets to remove.
#[derive(Clone, Debug)]
pub struct Redactor {
    secrets: Vec<Vec<u8>>,
    max_len: usize,
    first: [bool; 256],
}

impl Default for Redactor {
    fn default() -> Self {
        Self {
            secrets: Vec::new(),
            max_len: 0,
            first: [false; 256],
        }
    }
}

impl Redactor {
    /// A redactor for `secrets` (short and duplicate ones are ignored).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut r = Self::default();
        for s in secrets {
            r.add(s.as_ref());
        }
        r
    }

    /// Adds one secret.
    pub fn add(&mut self, secret: &[u8]) {
        if secret.len() < MIN_SECRET_LEN || self.secrets.iter().any(|s| s == secret) {
            return;
        }
        self.first[secret[0] as usize] = true;
        self.max_len = self.max_len.max(secret.len());
        self.secrets.push(secret.to_vec());
    }

    /// Adds a key, and every fragment of it of `FRAGMENT` bytes or more: a command printing half a
    /// key (split across stdout and stderr, say) must not leak that half.
    pub fn add_key(&mut self, key: &[u8]) {
        self.add(key);
        if key.len() > FRAGMENT {
            for w in key.windows(FRAGMENT) {
                self.add(w);
            }
        }
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// A streaming redactor writing into `sink`.
    pub fn stream<S: Sink>(&self, sink: S) -> Stream<'_, S> {
        Stream {
            redactor: self,
            buf: Vec::new(),
            redact_until: 0,
            in_marker: false,
            sink,
        }
    }

    /// Redacts a whole string at once (error details, fact names, notifications).
    pub fn scrub(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        let mut s = self.stream(Vec::new());
        s.push(text.as_bytes());
        String::from_utf8_lossy(&s.finish()).into_owned()
    }

    /// True when `text` contains any secret whole.
    pub fn contains_secret(&self, text: &[u8]) -> bool {
        self.secrets
            .iter()
            .any(|s| text.windows(s.len()).any(|w| w == s.as_slice()))
    }
}

/// Where redacted bytes go.
pub trait Sink {
    /// Takes the next redacted bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// One redacted stream (stdout or stderr).
pub struct Stream<'r, S: Sink> {
    redactor: &'r Redactor,
    /// Raw bytes not yet decided.
    buf: Vec<u8>,
    /// Index into `buf` up to which bytes are covered by an occurrence.
    redact_until: usize,
    /// Whether the last thing emitted was the marker (adjacent ranges share one).
    in_marker: bool,
    sink: S,
}

impl<S: Sink> Stream<'_, S> {
    /// Feeds the next raw bytes.
    pub fn push(&mut self, data: &[u8]) {
        if self.redactor.is_empty() {
            self.sink.put(data);
            return;
        }
        self.buf.extend_from_slice(data);
        let limit = self.buf.len().saturating_sub(self.redactor.max_len - 1);
        self.decide(limit);
    }

    /// Flushes the held-back bytes and returns the sink.
    pub fn finish(mut self) -> S {
        let end = self.buf.len();
        self.decide(end);
        self.sink
    }

    /// The sink so far (bytes held back are not in it yet).
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// Decides bytes `[0, limit)`: every occurrence starting there is found, since at least
    /// `max_len − 1` bytes follow each such position (or the stream has ended).
    fn decide(&mut self, limit: usize) {
        let r = self.redactor;
        let mut plain_from = 0;
        for x in 0..limit {
            if r.first[self.buf[x] as usize] {
                for s in &r.secrets {
                    if self.buf[x..].starts_with(s) {
                        self.redact_until = self.redact_until.max(x + s.len());
                    }
                }
            }
            if x < self.redact_until {
                if plain_from < x {
                    self.sink.put(&self.buf[plain_from..x]);
                }
                if !self.in_marker {
                    self.sink.put(MARKER);
                    self.in_marker = true;
                }
                plain_from = x + 1;
            } else {
                self.in_marker = false;
            }
        }
        if plain_from < limit {
            self.sink.put(&self.buf[plain_from..limit]);
        }
        self.buf.drain(..limit);
        self.redact_until = self.redact_until.saturating_sub(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fragment of `secret` of `min` bytes or more that appears in `hay`.
    fn fragments(hay: &[u8], secret: &[u8], min: usize) -> Vec<String> {
        let mut found = Vec::new();
        for len in min..=secret.len() {
            for w in secret.windows(len) {
                if hay.windows(len).any(|h| h == w) {
                    found.push(String::from_utf8_lossy(w).into_owned());
                }
            }
        }
        found
    }

    fn chunked(r: &Redactor, input: &[u8], chunk: usize) -> Vec<u8> {
        let mut s = r.stream(Vec::new());
        for c in input.chunks(chunk.max(1)) {
            s.push(c);
        }
        s.finish()
    }

    #[test]
    fn replaces_whole_and_repeated_secrets() {
        let r = Redactor::new(["s3cr3t-key"]);
        assert_eq!(
            r.scrub("a s3cr3t-key b s3cr3t-key"),
            "a [redacted] b [redacted]"
        );
        assert_eq!(r.scrub("nothing here"), "nothing here");
        assert_eq!(r.scrub("s3cr3t-keys3cr3t-key"), "[redacted]");
    }

    #[test]
    fn secret_split_across_every_write_boundary() {
        let secret = b"AbCdEfGhIjKlMnOp";
        let r = Redactor::new([secret]);
        let input = [&b"prefix "[..], secret, b" middle ", secret, b" end"].concat();
        for chunk in 1..input.len() {
            let out = chunked(&r, &input, chunk);
            assert_eq!(
                out, b"prefix [redacted] middle [redacted] end",
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn self_overlapping_secrets_leave_no_fragment() {
        for (secret, text) in [
            ("abcdabcd", "xxabcdabcdabcdyy"),
            ("aaaaaa", "aaaaaaaaaaaaaaaaa"),
            ("abab-abab", "abab-abab-abab-abab"),
        ] {
            let r = Redactor::new([secret]);
            for chunk in [1, 2, 3, 7, 100] {
                let out = chunked(&r, text.as_bytes(), chunk);
                assert!(
                    fragments(&out, secret.as_bytes(), 4).is_empty(),
                    "{secret} in {text} (chunk {chunk}) -> {}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }

    #[test]
    fn several_secrets_of_different_lengths() {
        let r = Redactor::new(["short1", "a-much-longer-secret-value"]);
        let text = "x short1 y a-much-longer-secret-value z short1";
        for chunk in [1, 5, 64] {
            assert_eq!(
                String::from_utf8(chunked(&r, text.as_bytes(), chunk)).unwrap(),
                "x [redacted] y [redacted] z [redacted]"
            );
        }
    }

    #[test]
    fn key_fragments_of_six_bytes_or_more_are_redacted() {
        let key = b"AbCdEfGhIjKlMnOpQrSt";
        let mut r = Redactor::default();
        r.add_key(key);
        let text = [
            &b"first half "[..],
            &key[..10],
            b" | second half ",
            &key[10..],
            b" | tiny ",
            &key[3..8],
        ]
        .concat();
        for chunk in [1, 3, 64] {
            let out = chunked(&r, &text, chunk);
            assert!(
                fragments(&out, key, 6).is_empty(),
                "{}",
                String::from_utf8_lossy(&out)
            );
            assert!(
                String::from_utf8_lossy(&out)
                    .contains("first half [redacted] | second half [redacted]")
            );
        }
    }

    #[test]
    fn tiny_secrets_are_ignored_and_empty_redactor_passes_through() {
        let r = Redactor::new(["ab", ""]);
        assert!(r.is_empty());
        assert_eq!(r.scrub("ab ab"), "ab ab");
        assert!(Redactor::new(["abcd"]).contains_secret(b"xxabcdxx"));
        assert!(!Redactor::new(["abcd"]).contains_secret(b"abc"));
    }

    #[test]
    fn random_streams_never_leak_a_fragment() {
        let secret = b"Zq9-Kx2_Wv7pL";
        let r = Redactor::new([secret]);
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..300 {
            let mut input = Vec::new();
            for _ in 0..(next() % 12) {
                match next() % 3 {
                    0 => input.extend_from_slice(secret),
                    1 => input.extend_from_slice(&secret[..(next() % 4) as usize]),
                    _ => input.extend(std::iter::repeat_n(b'.', (next() % 9) as usize)),
                }
            }
            let out = chunked(&r, &input, 1 + (next() % 17) as usize);
            let whole = out.windows(secret.len()).any(|w| w == secret);
            assert!(!whole, "{}", String::from_utf8_lossy(&out));
        }
    }
}
