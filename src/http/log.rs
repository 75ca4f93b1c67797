//! The HTTP log of a run (docs/http.md): one line per call of `automations http`, written by the client
//! into `$AUTOMATION_HTTP_LOG`, read strictly by the runner into `finished.http`.
//!
//! # A line
//!
//! `{"host": "example.org", "status": 200, "ms": 42, "class": "2xx"}` — exactly these four keys:
//! the host asked for (never a path, query, header or body), the final status (`null` when there was
//! no answer), the whole call's milliseconds, and the class ([`Class`]). The client appends it with
//! one `O_APPEND` write.
//!
//! # What the runner records
//!
//! The command can write to that file too, so the runner trusts nothing in it: a line that is not
//! exactly that shape, has a class that does not fit its status, a host that is not a host name or
//! carries a secret, is counted as `invalid` and otherwise ignored. [`Summary`] holds the counts
//! per class (`invalid` among them), the first [`LISTED`] valid calls, and how many more there were.
//! At most [`MAX_READ`] bytes are read; whatever lies beyond counts as one `invalid`.

use crate::platform::OpenOptionsExt;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fsutil;

/// Calls listed one by one in `finished.http`; the rest are counted.
pub const LISTED: usize = 50;
/// The most of an HTTP log the runner reads.
pub const MAX_READ: u64 = 1024 * 1024;
/// The key under which unreadable or forged lines are counted.
pub const INVALID: &str = "invalid";

/// What became of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Class {
    #[serde(rename = "2xx")]
    Success,
    #[serde(rename = "3xx")]
    Redirect,
    #[serde(rename = "4xx")]
    ClientError,
    /// 403.
    #[serde(rename = "blocked")]
    Blocked,
    /// 429.
    #[serde(rename = "rate_limited")]
    RateLimited,
    #[serde(rename = "5xx")]
    ServerError,
    #[serde(rename = "none/dns")]
    Dns,
    #[serde(rename = "none/refused")]
    Refused,
    #[serde(rename = "none/timeout")]
    Timeout,
    #[serde(rename = "none/tls")]
    Tls,
    #[serde(rename = "none/other")]
    Other,
}

impl Class {
    /// Every class, in the order reports list them.
    pub const ALL: [Class; 11] = [
        Class::Success,
        Class::Redirect,
        Class::ClientError,
        Class::Blocked,
        Class::RateLimited,
        Class::ServerError,
        Class::Dns,
        Class::Refused,
        Class::Timeout,
        Class::Tls,
        Class::Other,
    ];

    /// The class of an answer with `status`.
    pub fn of_status(status: u16) -> Class {
        match status {
            403 => Class::Blocked,
            429 => Class::RateLimited,
            200..=299 => Class::Success,
            300..=399 => Class::Redirect,
            400..=499 => Class::ClientError,
            _ => Class::ServerError,
        }
    }

    /// The word in the log and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Success => "2xx",
            Class::Redirect => "3xx",
            Class::ClientError => "4xx",
            Class::Blocked => "blocked",
            Class::RateLimited => "rate_limited",
            Class::ServerError => "5xx",
            Class::Dns => "none/dns",
            Class::Refused => "none/refused",
            Class::Timeout => "none/timeout",
            Class::Tls => "none/tls",
            Class::Other => "none/other",
        }
    }

    /// No answer at all.
    pub fn is_none(self) -> bool {
        matches!(
            self,
            Class::Dns | Class::Refused | Class::Timeout | Class::Tls | Class::Other
        )
    }

    /// A client-side answer (4xx, 403 and 429 included).
    pub fn is_4xx(self) -> bool {
        matches!(
            self,
            Class::ClientError | Class::Blocked | Class::RateLimited
        )
    }
}

/// One line of the HTTP log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub host: String,
    pub status: Option<u16>,
    pub ms: u64,
    pub class: Class,
}

impl Call {
    /// Whether the line is one the client could have written: a host name, a class that fits the
    /// status, a time within reason.
    fn valid(&self) -> bool {
        let host_ok = !self.host.is_empty()
            && self.host.len() <= 253
            && self.host.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']')
            });
        let class_ok = match self.status {
            Some(s) => (100..=599).contains(&s) && Class::of_status(s) == self.class,
            None => self.class.is_none(),
        };
        host_ok && class_ok && self.ms <= 3_600_000
    }
}

/// `finished.http`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Calls per class, `invalid` among them.
    pub counts: BTreeMap<String, u64>,
    /// The first [`LISTED`] valid calls.
    pub requests: Vec<Call>,
    /// Valid calls beyond those listed.
    pub more: u64,
}

impl Summary {
    /// Valid calls of `class`.
    pub fn count(&self, class: Class) -> u64 {
        self.counts.get(class.as_str()).copied().unwrap_or(0)
    }
}

/// Appends `call` to the HTTP log at `path` with one write (never following a link).
pub fn append(path: &Path, call: &Call) -> io::Result<()> {
    let mut line = serde_json::to_vec(call).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut file = fsutil::open_in_data_root(
        path,
        OpenOptions::new().append(true).create(true).mode(0o600),
    )?;
    // One write: lines of concurrent calls never interleave.
    let n = file.write(&line)?;
    if n != line.len() {
        return Err(io::Error::other("short write to the HTTP log"));
    }
    Ok(())
}

/// Reads the HTTP log at `path` strictly; `None` when no call was made. `is_secret` says whether
/// a host holds something the run must not record.
pub fn summarize(path: &Path, is_secret: &dyn Fn(&[u8]) -> bool) -> Option<Summary> {
    use std::io::Read;
    let file = match fsutil::open_in_data_root(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(_) => {
            let mut s = Summary::default();
            s.counts.insert(INVALID.into(), 1);
            return Some(s);
        }
    };
    let mut bytes = Vec::new();
    let _ = file.take(MAX_READ + 1).read_to_end(&mut bytes);
    let mut s = Summary::default();
    let mut invalid = 0u64;
    if bytes.len() as u64 > MAX_READ {
        bytes.truncate(MAX_READ as usize);
        invalid += 1;
    }
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Call>(line) {
            Ok(c) if c.valid() && !is_secret(c.host.as_bytes()) => {
                *s.counts.entry(c.class.as_str().to_owned()).or_default() += 1;
                if s.requests.len() < LISTED {
                    s.requests.push(c);
                } else {
                    s.more += 1;
                }
            }
            _ => invalid += 1,
        }
    }
    if invalid > 0 {
        s.counts.insert(INVALID.into(), invalid);
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_fit_their_statuses() {
        for (status, class) in [
            (200, "2xx"),
            (204, "2xx"),
            (302, "3xx"),
            (403, "blocked"),
            (429, "rate_limited"),
            (404, "4xx"),
            (503, "5xx"),
        ] {
            assert_eq!(Class::of_status(status).as_str(), class);
        }
        for c in Class::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
    }

    #[test]
    fn the_runner_counts_forged_and_malformed_lines_as_invalid() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("http.jsonl");
        assert_eq!(summarize(&p, &|_| false), None);
        append(
            &p,
            &Call {
                host: "a.example".into(),
                status: Some(200),
                ms: 3,
                class: Class::Success,
            },
        )
        .unwrap();
        let mut lines = std::fs::read_to_string(&p).unwrap();
        for forged in [
            r#"{"host":"a.example","status":500,"ms":1,"class":"2xx"}"#,
            r#"{"host":"a.example","status":null,"ms":1,"class":"5xx"}"#,
            r#"{"host":"a.example","status":200,"ms":1,"class":"2xx","path":"/secret"}"#,
            r#"{"host":"a/b?q=1","status":200,"ms":1,"class":"2xx"}"#,
            r#"{"host":"sekrit-token","status":200,"ms":1,"class":"2xx"}"#,
            r#"{"host":"a.example","status":200,"ms":1}"#,
            "not json",
        ] {
            lines.push_str(forged);
            lines.push('\n');
        }
        std::fs::write(&p, lines).unwrap();
        let s = summarize(&p, &|b| b == b"sekrit-token").unwrap();
        assert_eq!(s.count(Class::Success), 1);
        assert_eq!(s.counts[INVALID], 7);
        assert_eq!(s.requests.len(), 1);
        // Past the cap: counted, never read.
        std::fs::write(&p, vec![b'x'; MAX_READ as usize + 10]).unwrap();
        assert_eq!(summarize(&p, &|_| false).unwrap().counts[INVALID], 2);
    }

    /// Regression: a call to a host with `_` (a docker-compose service name), which the client
    /// writes as it is, was counted invalid.
    #[test]
    fn a_host_with_an_underscore_is_a_valid_call() {
        let call = Call {
            host: "my_service".into(),
            status: Some(200),
            ms: 3,
            class: Class::Success,
        };
        assert!(call.valid());
        let url = reqwest::Url::parse("http://my_service:8080/x").unwrap();
        assert_eq!(url.host_str(), Some("my_service"));
    }

    #[test]
    fn fifty_listed_the_rest_counted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("http.jsonl");
        for i in 0..120 {
            append(
                &p,
                &Call {
                    host: "h".into(),
                    status: Some(200),
                    ms: i,
                    class: Class::Success,
                },
            )
            .unwrap();
        }
        let s = summarize(&p, &|_| false).unwrap();
        assert_eq!(
            (s.requests.len(), s.more, s.count(Class::Success)),
            (50, 70, 120)
        );
    }
}
