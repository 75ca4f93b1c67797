//! The dashboard's HTTP/1.1 transport: hyper on a tokio runtime of one thread, with every limit a
//! server facing other local users needs . The page's logic is a plain function from a
//! request with its whole body to a response, run on a small pool of threads.
//!
//! - At most [`MAX_CONNECTIONS`] connections (fewer when the file limit is low), each holding only
//!   its socket and a small task until its first byte comes (then hyper's state and buffers, about
//!   16 KiB). Past that, the one idle the longest — open but with no request being answered — is
//!   closed for the new one, so a crowd of idle connections never keeps a client that asks
//!   something out; a file limit reached at `accept` is met the same way, never by exiting.
//! - A new connection's first byte must arrive within [`HEAD_TIMEOUT`], and a request's line and
//!   headers within [`HEAD_TIMEOUT`] of it (also between requests on a kept-alive connection) and fit in [`HEAD_MAX`] bytes, else 431 or the connection is closed; a
//!   body must fit in [`BODY_MAX`] bytes (413) and arrive within [`HEAD_TIMEOUT`] (408). Nothing
//!   past those limits is buffered.
//! - Exactly one `Host` header (RFC 9112 §3.2), else 400.
//! - The page's logic runs on at most [`HANDLERS`] threads: a slow request (a `stop-all` waits for
//!   runs to stop) never holds up reading and answering the others beyond that.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Notify;

/// Connections held at once, at most.
pub const MAX_CONNECTIONS: usize = 256;
/// A request line and its headers, at most.
pub const HEAD_MAX: usize = 16 * 1024;
/// A request body, at most.
pub const BODY_MAX: usize = 64 * 1024;
/// How long a request's head (and its body) may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Threads the page's logic runs on, at most.
pub const HANDLERS: usize = 4;

/// What answers a request: the request with its whole body, to a response.
pub type Handler = dyn Fn(Request<Vec<u8>>) -> Response<Vec<u8>> + Send + Sync;

/// One open connection, as the eviction sees it.
struct Slot {
    /// When it last finished answering a request (or was accepted).
    idle_since: Instant,
    /// A request of it is being answered.
    busy: bool,
    /// Told to close.
    close: Arc<Notify>,
}

#[derive(Default)]
struct Slots {
    open: HashMap<u64, Slot>,
    next: u64,
}

impl Slots {
    fn add(&mut self) -> (u64, Arc<Notify>) {
        let id = self.next;
        self.next += 1;
        let close = Arc::new(Notify::new());
        self.open.insert(
            id,
            Slot {
                idle_since: Instant::now(),
                busy: false,
                close: Arc::clone(&close),
            },
        );
        (id, close)
    }

    /// Closes the connection idle the longest; whether there was one.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .open
            .iter()
            .filter(|(_, s)| !s.busy)
            .min_by_key(|(_, s)| s.idle_since)
            .map(|(&id, _)| id);
        match oldest.and_then(|id| self.open.remove(&id)) {
            Some(slot) => {
                slot.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn set_busy(&mut self, id: u64, busy: bool) {
        if let Some(s) = self.open.get_mut(&id) {
            s.busy = busy;
            s.idle_since = Instant::now();
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit (at most 8192), as servers
/// do, and returns the connections to allow under it.
#[cfg(windows)]
fn connection_cap() -> usize {
    // Sockets are handles, not descriptors under a soft limit.
    MAX_CONNECTIONS
}

/// See the Windows one above.
#[cfg(unix)]
fn connection_cap() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 64;
    };
    let want = hard.min(8192);
    let soft = if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        want
    } else {
        soft
    };
    // Half the descriptors for connections: the rest for the log, index files and runs started.
    usize::try_from(soft / 2)
        .unwrap_or(MAX_CONNECTIONS)
        .clamp(8, MAX_CONNECTIONS)
}

/// Listens on `listener` (127.0.0.1) and serves until the process ends.
/// glibc gives each thread that allocates an arena of its own (up to eight per core), and what is
/// freed in one stays resident; two are enough for four answering threads that mostly wait
/// (docs/performance.md: 14.1 MiB against 14.5 MiB with 5,000 idle connections open).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn few_arenas() {
    // SAFETY: sets one parameter of the C allocator, before this server starts its threads.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn few_arenas() {}

pub fn serve(listener: std::net::TcpListener, handler: Arc<Handler>) -> std::io::Result<()> {
    few_arenas();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(HANDLERS)
        .thread_name("automations-dash")
        .build()?;
    let cap = connection_cap();
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let slots = Arc::new(Mutex::new(Slots::default()));
        let mut said_full = false;
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) if out_of_descriptors(&e) => {
                    // Out of descriptors: make room and try again, never end.
                    if !said_full {
                        errln!("dashboard: out of file descriptors; closing idle connections");
                        said_full = true;
                    }
                    let evicted = slots.lock().is_ok_and(|mut s| s.evict_one());
                    if !evicted {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
                // A connection that went away before it was accepted, and the like.
                Err(_) => continue,
            };
            let (id, close) = {
                let mut s = slots.lock().expect("the connection table");
                while s.open.len() >= cap && s.evict_one() {}
                s.add()
            };
            tokio::spawn(connection(
                stream,
                id,
                close,
                Arc::clone(&slots),
                Arc::clone(&handler),
            ));
        }
    })
}

/// Serves one connection until it ends, times out or is told to close.
async fn connection(
    stream: tokio::net::TcpStream,
    id: u64,
    close: Arc<Notify>,
    slots: Arc<Mutex<Slots>>,
    handler: Arc<Handler>,
) {
    let service = {
        let slots = Arc::clone(&slots);
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let slots = Arc::clone(&slots);
            let handler = Arc::clone(&handler);
            async move {
                if let Ok(mut s) = slots.lock() {
                    s.set_busy(id, true);
                }
                let response = answer(req, handler).await;
                if let Ok(mut s) = slots.lock() {
                    s.set_busy(id, false);
                }
                Ok::<_, Infallible>(response)
            }
        })
    };
    // A connection costs its socket and this small task until a request starts to arrive:
    // hyper's connection (its state and buffers) is made then, on the heap, so a crowd of silent
    // connections holds none. One silent for the whole head timeout is closed.
    let mut first = [0u8; 1];
    let arrived = tokio::select! {
        n = tokio::time::timeout(HEAD_TIMEOUT, stream.peek(&mut first)) => matches!(n, Ok(Ok(1))),
        () = close.notified() => false,
    };
    if arrived {
        Box::pin(serve_connection(stream, service, close)).await;
    }
    if let Ok(mut s) = slots.lock() {
        s.open.remove(&id);
    }
}

/// hyper's HTTP/1.1 on `stream` until it ends, times out or is told to close.
async fn serve_connection<S>(stream: tokio::net::TcpStream, service: S, close: Arc<Notify>)
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Full<Bytes>>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(HEAD_MAX)
        .max_headers(64);
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => {}
        () = close.notified() => {}
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    r
}

/// Checks what the transport must, reads the body within its limits, and has `handler` answer on
/// the pool.
async fn answer(req: Request<Incoming>, handler: Arc<Handler>) -> Response<Full<Bytes>> {
    if req.headers().get_all(hyper::header::HOST).iter().count() != 1 {
        return plain(
            StatusCode::BAD_REQUEST,
            "refused: exactly one Host header\n",
        );
    }
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_MAX as u64) {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "refused: body too large\n");
    }
    let (parts, body) = req.into_parts();
    let body =
        match tokio::time::timeout(HEAD_TIMEOUT, Limited::new(body, BODY_MAX).collect()).await {
            Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "refused: body too slow\n"),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(StatusCode::PAYLOAD_TOO_LARGE, "refused: body too large\n");
            }
            Ok(Err(_)) => return plain(StatusCode::BAD_REQUEST, "refused: unreadable body\n"),
            Ok(Ok(collected)) => collected.to_bytes().to_vec(),
        };
    let request = Request::from_parts(parts, body);
    match tokio::task::spawn_blocking(move || handler(request)).await {
        Ok(response) => response.map(|b| Full::new(Bytes::from(b))),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "the request failed\n"),
    }
}

/// Whether accepting failed for want of file descriptors.
#[cfg(unix)]
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EMFILE | nix::libc::ENFILE)
    )
}

/// Sockets are handles on Windows, never short like descriptors.
#[cfg(windows)]
fn out_of_descriptors(_e: &std::io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_longest_is_closed_first_and_a_busy_one_never() {
        let mut s = Slots::default();
        let (a, close_a) = s.add();
        let (b, close_b) = s.add();
        let (c, _) = s.add();
        // a is answering a request; b went idle before c.
        s.set_busy(a, true);
        s.open.get_mut(&b).unwrap().idle_since -= Duration::from_secs(5);
        assert!(s.evict_one());
        assert!(!s.open.contains_key(&b) && s.open.contains_key(&a) && s.open.contains_key(&c));
        assert!(s.evict_one());
        assert!(!s.open.contains_key(&c));
        // Only the busy one is left: nothing to close.
        assert!(!s.evict_one());
        assert!(s.open.contains_key(&a));
        // The closed ones were told, the busy one not.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), close_b.notified())
                .await
                .expect("b was told to close");
            assert!(
                tokio::time::timeout(Duration::from_millis(10), close_a.notified())
                    .await
                    .is_err(),
                "a was told to close"
            );
        });
    }
}
