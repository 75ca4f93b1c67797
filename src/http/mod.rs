//! Outside calls: `automations http get|head|post URL` (docs/http.md), the small HTTP client every
//! automation uses, so each call has a deadline, is safe across redirects and is recorded.
//!
//! One call is one request and the redirects it leads to, followed here by hand: at most
//! [`MAX_REDIRECTS`], only to `http`/`https`. When a redirect leaves the origin (scheme, host or
//! port), credentials stay behind — every header given with `--header-env` or `--header-file`, and
//! `Authorization`, `Proxy-Authorization` and `Cookie` whatever their source — and a body is never
//! sent again: a 303 (and a 301 or 302 answering a POST) becomes a GET without it; a 307 or 308
//! that would resend a body elsewhere is not followed. There are no retries.
//!
//! The whole call has one deadline (`--max-time`, default 20 s, at most 120 s) and the body one cap
//! (`--max-bytes`, default 5 MB), streamed, never buffered whole. Names are resolved the way every
//! program of this machine resolves them (the C library's `getaddrinfo`: `/etc/hosts`, DNS, what
//! `nsswitch.conf` says), through [`resolve::System`], whose failures are told apart as `none/dns`.
//!
//! Each call appends one line to `$AUTOMATION_HTTP_LOG` when it is set (see [`log`]). Nothing here
//! ever prints or records a query, a header value or a body; errors name the host.

pub mod log;
pub mod resolve;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};

pub use log::{Call, Class};

/// Redirects followed at most; the answer after that is recorded as `3xx`.
pub const MAX_REDIRECTS: usize = 5;
/// `--max-time` when not given.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(20);
/// The largest `--max-time`.
pub const MAX_MAX_TIME: Duration = Duration::from_secs(120);
/// `--max-bytes` when not given.
pub const DEFAULT_MAX_BYTES: u64 = 5_000_000;
/// The largest request body read from `--data`.
pub const MAX_BODY: u64 = 16 * 1024 * 1024;
/// The variable naming the run's HTTP log.
pub const ENV_LOG: &str = "AUTOMATION_HTTP_LOG";

/// Exit codes of `automations http`, chosen to match curl's where curl has one.
pub mod exit {
    /// An HTTP answer (any status, unless `--fail`).
    pub const ANSWER: u8 = 0;
    /// `--fail` and a status of 400 or more.
    pub const HTTP_ERROR: u8 = 22;
    /// No answer at all; the class is on stderr.
    pub const NO_ANSWER: u8 = 7;
    /// The body broke off after the answer began.
    pub const BROKE_OFF: u8 = 56;
    /// The body is larger than `--max-bytes`.
    pub const TOO_LARGE: u8 = 63;
}

/// Where a header came from: only `--header` ones are not secret.
#[derive(Clone, Debug)]
pub struct Header {
    pub name: HeaderName,
    pub value: HeaderValue,
    pub secret: bool,
}

/// One call, as the command line asked for it.
#[derive(Debug)]
pub struct Request {
    pub method: Method,
    pub url: Url,
    pub headers: Vec<Header>,
    pub body: Option<Vec<u8>>,
    pub max_time: Duration,
    pub max_bytes: u64,
    /// `--fail`: the body of a status of 400 or more is not written.
    pub fail: bool,
    /// The URL came from `--url-env` or `--url-file`: it holds a secret, so only its origin is
    /// ever shown.
    pub secret_url: bool,
}

/// Where the URL comes from.
#[derive(Clone, Copy, Debug)]
pub enum UrlFrom<'a> {
    /// The command line.
    Arg(&'a str),
    /// `--url-env VAR`.
    Env(&'a str),
    /// `--url-file FILE`: its first line.
    File(&'a Path),
}

/// The most of a `--url-file` that is read.
const URL_FILE_MAX: u64 = 64 * 1024;

/// Why the command line could not become a request (exit 2). Never holds a secret value.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{0:?} is not an http:// or https:// URL")]
    Url(String),
    #[error("--url-env {0}: the variable is not set")]
    UrlEnvMissing(String),
    #[error("{0} does not hold an http:// or https:// URL (its value is not shown)")]
    SecretUrl(String),
    #[error("--url-file {}: {source}", path.display())]
    UrlFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--header {0:?} is not NAME:VALUE")]
    Header(String),
    #[error("--header-env {0:?} is not NAME=VARIABLE")]
    HeaderEnv(String),
    #[error("--header-env {name}: the variable {var} is not set")]
    MissingVar { name: String, var: String },
    #[error("{what}: {name} is not a valid header name or its value is not a valid header value")]
    Invalid { what: String, name: String },
    #[error("--header-file {0}: line {1} is not `Name: value`")]
    HeaderFileLine(PathBuf, usize),
    #[error("--header-file {0}")]
    HeaderFile(PathBuf, #[source] std::io::Error),
    #[error("--data {0}")]
    Data(String, #[source] std::io::Error),
    #[error("--data must be @FILE or - (standard input)")]
    DataSyntax,
    #[error("--data is larger than {} MiB", MAX_BODY / 1024 / 1024)]
    DataTooLarge,
    #[error("--max-time must be more than 0 and at most {} s", MAX_MAX_TIME.as_secs())]
    MaxTime,
    #[error("{0} takes no --data")]
    NoBody(&'static str),
}

fn header(name: &str, value: &str, what: &str, secret: bool) -> Result<Header, RequestError> {
    let invalid = || RequestError::Invalid {
        what: what.into(),
        name: name.trim().into(),
    };
    Ok(Header {
        name: HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| invalid())?,
        value: {
            let mut v = HeaderValue::from_str(value.trim()).map_err(|_| invalid())?;
            v.set_sensitive(secret);
            v
        },
        secret,
    })
}

/// `Name: value` lines of a header file (blank lines and `#` comments skipped). It holds secrets:
/// read under the data root's rules (never through a link, never waited on), wherever it is.
fn header_file(path: &Path) -> Result<Vec<Header>, RequestError> {
    let bytes = crate::fsutil::read_in_data_root(path, 64 * 1024)
        .map_err(|e| RequestError::HeaderFile(path.into(), e))?
        .ok_or_else(|| {
            RequestError::HeaderFile(path.into(), std::io::ErrorKind::NotFound.into())
        })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (n, v) = line
            .split_once(':')
            .ok_or_else(|| RequestError::HeaderFileLine(path.into(), i + 1))?;
        out.push(header(
            n,
            v,
            &format!("--header-file {}", path.display()),
            true,
        )?);
    }
    Ok(out)
}

/// What the command line gave, before it is checked.
pub struct Args<'a> {
    pub method: Method,
    pub url: UrlFrom<'a>,
    pub headers: &'a [String],
    pub header_env: &'a [String],
    pub header_files: &'a [PathBuf],
    pub data: Option<&'a str>,
    pub max_time: f64,
    pub max_bytes: u64,
    pub fail: bool,
}

impl Request {
    /// Checks the command line; `env` reads variables for `--header-env`, `stdin` is read for
    /// `--data -`. Each flag in turn, each refusal naming that flag.
    pub fn parse(
        a: &Args,
        env: &dyn Fn(&str) -> Option<String>,
        stdin: &mut dyn Read,
    ) -> Result<Self, RequestError> {
        let (url, secret_url) = url_of(&a.url, env)?;
        let headers = headers_of(a, env)?;
        let body = match a.data {
            None => None,
            Some(_) if a.method != Method::POST => {
                return Err(RequestError::NoBody(if a.method == Method::HEAD {
                    "head"
                } else {
                    "get"
                }));
            }
            Some("-") => Some(read_body(stdin).map_err(|e| RequestError::Data("-".into(), e))?),
            Some(d) => match d.strip_prefix('@') {
                Some(file) => {
                    let mut f =
                        std::fs::File::open(file).map_err(|e| RequestError::Data(d.into(), e))?;
                    Some(read_body(&mut f).map_err(|e| RequestError::Data(d.into(), e))?)
                }
                None => return Err(RequestError::DataSyntax),
            },
        };
        if let Some(b) = &body
            && b.len() as u64 > MAX_BODY
        {
            return Err(RequestError::DataTooLarge);
        }
        if !(a.max_time > 0.0 && a.max_time <= MAX_MAX_TIME.as_secs_f64()) {
            return Err(RequestError::MaxTime);
        }
        Ok(Request {
            method: a.method.clone(),
            url,
            headers,
            body,
            max_time: Duration::from_secs_f64(a.max_time),
            max_bytes: a.max_bytes,
            fail: a.fail,
            secret_url,
        })
    }
}

/// The URL, from the argument, a variable or a file; whether it is a secret (then shown and
/// recorded as its origin only).
fn url_of(
    from: &UrlFrom,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Url, bool), RequestError> {
    match from {
        UrlFrom::Arg(u) => Ok((
            web_url(u).ok_or_else(|| RequestError::Url((*u).to_owned()))?,
            false,
        )),
        UrlFrom::Env(var) => {
            let value = env(var).ok_or_else(|| RequestError::UrlEnvMissing((*var).to_owned()))?;
            let url = web_url(value.trim())
                .ok_or_else(|| RequestError::SecretUrl(format!("--url-env {var}")))?;
            Ok((url, true))
        }
        UrlFrom::File(path) => {
            let bytes = crate::fsutil::read_following(path, URL_FILE_MAX).map_err(|source| {
                RequestError::UrlFile {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            let text = String::from_utf8_lossy(&bytes);
            let url = web_url(text.lines().next().unwrap_or("").trim())
                .ok_or_else(|| RequestError::SecretUrl(format!("--url-file {}", path.display())))?;
            Ok((url, true))
        }
    }
}

/// The headers of `--header`, `--header-env` and `--header-file`, in that order.
fn headers_of(a: &Args, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Header>, RequestError> {
    let mut headers = Vec::new();
    for h in a.headers {
        let (n, v) = h
            .split_once(':')
            .ok_or_else(|| RequestError::Header(h.clone()))?;
        headers.push(header(n, v, "--header", false)?);
    }
    for h in a.header_env {
        let (n, var) = h
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| RequestError::HeaderEnv(h.clone()))?;
        let value = env(var).ok_or_else(|| RequestError::MissingVar {
            name: n.into(),
            var: var.into(),
        })?;
        headers.push(header(n, &value, "--header-env", true)?);
    }
    for f in a.header_files {
        headers.extend(header_file(f)?);
    }
    Ok(headers)
}

/// `u` as an http(s) URL with a host.
fn web_url(u: &str) -> Option<Url> {
    Url::parse(u)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

/// At most `cap` bytes of an answer's body, and whether there was more (left unread: the
/// connection is dropped with it). For the answers this binary reads for itself — a notification
/// service's, AnyType's whoami — which must never grow its memory with what a server sends.
pub fn answer_capped(r: &mut dyn Read, cap: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut b = Vec::new();
    r.take(cap + 1).read_to_end(&mut b)?;
    let more = b.len() as u64 > cap;
    b.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((b, more))
}

fn read_body(r: &mut dyn Read) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::new();
    r.take(MAX_BODY + 1).read_to_end(&mut b)?;
    Ok(b)
}

/// How a call ended.
#[derive(Debug)]
pub struct Outcome {
    /// The final status, when there was an answer.
    pub status: Option<u16>,
    /// Where the call ended (after redirects).
    pub url: Url,
    pub class: Class,
    pub elapsed: Duration,
    /// Body bytes written.
    pub bytes: u64,
    /// What went wrong, for people: no secret, no path or query.
    pub problem: Option<Problem>,
}

/// A call that did not end in a whole answer.
#[derive(Debug)]
pub enum Problem {
    /// No answer (see the class).
    NoAnswer(String),
    /// A redirect that was not followed, and why.
    NotFollowed(String),
    /// The body is larger than the cap.
    TooLarge(u64),
    /// The body broke off.
    BrokeOff(String),
}

/// `scheme://host:port`: credentials and bodies never leave it.
fn origin(u: &Url) -> (String, String, Option<u16>) {
    (
        u.scheme().to_owned(),
        u.host_str().unwrap_or_default().to_ascii_lowercase(),
        u.port_or_known_default(),
    )
}

/// Names that carry credentials whatever their source.
const CREDENTIALS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// One request of a call: where, how, with what. A redirect makes the next one.
#[derive(Clone)]
struct Hop {
    url: Url,
    method: Method,
    body: Option<Vec<u8>>,
    headers: Vec<Header>,
}

/// What a call ended in before writing any body: the status (if any), the class and why.
type Ended = (Option<u16>, Class, Problem);

/// Makes the call, writing the body to `out`. Never fails: every problem is in the outcome.
pub fn call(req: &Request, out: &mut dyn Write) -> Outcome {
    let started = Instant::now();
    let deadline = started + req.max_time;
    let mut hop = Hop {
        url: req.url.clone(),
        method: req.method.clone(),
        body: req.body.clone(),
        headers: req.headers.clone(),
    };
    let done = |status, url, class, bytes, problem| Outcome {
        status,
        url,
        class,
        elapsed: started.elapsed(),
        bytes,
        problem,
    };
    let mut redirects = 0;
    loop {
        let mut response = match send(&hop, deadline) {
            Ok(r) => r,
            Err((status, class, problem)) => return done(status, hop.url, class, 0, Some(problem)),
        };
        match next_hop(&response, &hop, redirects) {
            Ok(Some(next)) => {
                hop = next;
                redirects += 1;
                continue;
            }
            Ok(None) => {}
            Err((status, class, problem)) => return done(status, hop.url, class, 0, Some(problem)),
        }
        let code = response.status().as_u16();
        let class = Class::of_status(code);
        if hop.method == Method::HEAD || (req.fail && code >= 400) {
            return done(Some(code), hop.url, class, 0, None);
        }
        if response.content_length().is_some_and(|n| n > req.max_bytes) {
            let problem = Problem::TooLarge(req.max_bytes);
            return done(Some(code), hop.url, class, 0, Some(problem));
        }
        let (bytes, problem) = stream(&mut response, out, req.max_bytes, deadline);
        return done(Some(code), hop.url, class, bytes, problem);
    }
}

/// Sends one hop with what is left of the deadline.
fn send(hop: &Hop, deadline: Instant) -> Result<reqwest::blocking::Response, Ended> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        let why = Problem::NoAnswer("no answer before the deadline".into());
        return Err((None, Class::Timeout, why));
    }
    let client = reqwest::blocking::Client::builder()
        // The system's roots are read (and held) only for a hop that speaks TLS.
        .tls_built_in_root_certs(hop.url.scheme() == "https")
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(std::sync::Arc::new(resolve::System))
        .timeout(remaining)
        .connect_timeout(remaining)
        .user_agent(concat!("automations/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            let why = format!("cannot build an HTTP client: {}", cause(&e));
            (None, Class::Other, Problem::NoAnswer(why))
        })?;
    let mut map = HeaderMap::new();
    for h in &hop.headers {
        map.append(h.name.clone(), h.value.clone());
    }
    // The request's own timeout runs until the body has ended (the client's only bounds each
    // read of it): one deadline for the whole call.
    let mut rb = client
        .request(hop.method.clone(), hop.url.clone())
        .headers(map)
        .timeout(remaining);
    if let Some(b) = &hop.body {
        rb = rb.body(b.clone());
    }
    rb.send()
        .map_err(|e| (None, classify(&e), Problem::NoAnswer(cause(&e))))
}

/// The hop a redirect leads to (`None`: not a redirect, the answer is final), or why it is not
/// followed: too many, not http(s), or a body that would go to another origin. Leaving the origin
/// drops every credential.
fn next_hop(
    response: &reqwest::blocking::Response,
    hop: &Hop,
    redirects: usize,
) -> Result<Option<Hop>, Ended> {
    let status = response.status();
    let Some(next) = status
        .is_redirection()
        .then(|| response.headers().get(reqwest::header::LOCATION))
        .flatten()
        .and_then(|l| l.to_str().ok())
        .and_then(|l| hop.url.join(l).ok())
    else {
        return Ok(None);
    };
    let cross = origin(&next) != origin(&hop.url);
    // 303, and 301/302 answering a POST: a GET, without the body.
    let to_get = status == StatusCode::SEE_OTHER
        || (hop.method == Method::POST
            && matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND));
    let why_not = if redirects == MAX_REDIRECTS {
        Some(format!("more than {MAX_REDIRECTS} redirects"))
    } else if !matches!(next.scheme(), "http" | "https") {
        Some(format!("a redirect to a {}: URL", next.scheme()))
    } else if !to_get && hop.body.is_some() && cross {
        Some("a redirect that would send the body to another origin".to_owned())
    } else {
        None
    };
    if let Some(why) = why_not {
        return Err((
            Some(status.as_u16()),
            Class::Redirect,
            Problem::NotFollowed(why),
        ));
    }
    let mut hop = Hop {
        url: next,
        ..hop.clone()
    };
    if to_get {
        if hop.method != Method::HEAD {
            hop.method = Method::GET;
        }
        hop.body = None;
    }
    if cross {
        hop.headers
            .retain(|h| !h.secret && !CREDENTIALS.contains(&h.name.as_str()));
    }
    Ok(Some(hop))
}

/// Copies the body to `out`, at most `cap` bytes, until `deadline`.
fn stream(
    response: &mut dyn Read,
    out: &mut dyn Write,
    cap: u64,
    deadline: Instant,
) -> (u64, Option<Problem>) {
    let late = || Problem::BrokeOff("the body did not end before the deadline (--max-time)".into());
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match response.read(&mut buf) {
            Ok(0) => return (total, None),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) if Instant::now() >= deadline => return (total, Some(late())),
            Err(e) => return (total, Some(Problem::BrokeOff(io_cause(&e)))),
        };
        if Instant::now() >= deadline {
            return (total, Some(late()));
        }
        if total + n as u64 > cap {
            return (total, Some(Problem::TooLarge(cap)));
        }
        if let Err(e) = out.write_all(&buf[..n]) {
            return (
                total,
                Some(Problem::BrokeOff(format!("cannot write the body: {e}"))),
            );
        }
        total += n as u64;
    }
}

/// The class of a call that got no answer, from the error's causes (never its URL).
pub fn classify(e: &reqwest::Error) -> Class {
    let mut refused = false;
    let mut timed_out = e.is_timeout();
    for c in causes(e) {
        if c.is::<resolve::LookupFailed>() {
            return Class::Dns;
        }
        if c.is::<rustls::Error>() {
            return Class::Tls;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => refused = true,
                std::io::ErrorKind::TimedOut => timed_out = true,
                _ => {}
            }
        }
    }
    if timed_out {
        Class::Timeout
    } else if refused {
        Class::Refused
    } else {
        Class::Other
    }
}

/// Every error in `e`'s chain. An `io::Error`'s `source()` skips the error it wraps (hyper and
/// rustls wrap theirs in one, sometimes twice), so the walk goes through `get_ref` there.
fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(e);
    while let Some(c) = next {
        out.push(c);
        next = match c.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => c.source(),
        };
    }
    out
}

/// The innermost cause of a failure, for people; reqwest's own message names the URL (its query
/// may hold a secret), so only what lies below it is shown.
fn cause(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer before the deadline".into();
    }
    causes(e)
        .into_iter()
        .skip(1)
        .last()
        .map_or_else(|| "the request failed".into(), |c| c.to_string())
}

fn io_cause(e: &std::io::Error) -> String {
    let mut s = e.to_string();
    if let Some(inner) = e.get_ref() {
        s = inner.to_string();
    }
    if s.contains("://") {
        "the connection broke".into()
    } else {
        s
    }
}

/// What `--json` prints on stderr: the final URL without its query and user info (they may hold a
/// secret); for a `secret_url`, its origin only.
pub fn meta(o: &Outcome, secret_url: bool) -> serde_json::Value {
    let mut shown = o.url.clone();
    if secret_url {
        shown.set_path("/");
    }
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_password(None);
    let _ = shown.set_username("");
    serde_json::json!({
        "version": 1,
        "status": o.status,
        "url": shown.as_str(),
        "ms": o.elapsed.as_millis() as u64,
        "class": o.class.as_str(),
        "bytes": o.bytes,
    })
}

/// The host the call asked for, as the HTTP log records it.
pub fn host(url: &Url) -> String {
    url.host_str().unwrap_or_default().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::web_url;

    /// Host names in URLs go through UTS 46 (url's idna, on the unicode-rs tables: Cargo.toml's
    /// idna_adapter): an internationalised name becomes the ASCII form DNS is asked for, and one
    /// that UTS 46 forbids is refused, not sent as it was written.
    #[test]
    fn an_international_host_name_becomes_its_ascii_form() {
        let u = web_url("https://BÜCHER.example/hook").unwrap();
        assert_eq!(u.host_str(), Some("xn--bcher-kva.example"));
        assert_eq!(
            web_url("http://mañana.com/").unwrap().host_str(),
            Some("xn--maana-pta.com")
        );
        assert!(web_url("http://a\u{200D}b.example/").is_none());
    }
}
