//! The dashboard: `automations dashboard [--port N] [--no-open]` (docs/dashboard.md). A local web page over
//! the same data the command line reads, running only while you run it (no daemon).
//!
//! # What it protects against
//!
//! - It listens on 127.0.0.1 only (port 0: any free port).
//! - Every request needs the token kept 0600 in `<data root>/dashboard.token`: given once in the
//!   printed URL (the browser is opened on a 0600 file that forwards to it, so it is never on a
//!   command line), which a redirect exchanges for an `HttpOnly; SameSite=Strict` cookie holding a
//!   value of this process only (cookies reach every port of a host). Without either: 401.
//! - A Host other than `127.0.0.1:PORT` or `localhost:PORT` is refused (DNS rebinding); a POST also
//!   needs an Origin of exactly those (cross-site requests).
//! - `Content-Security-Policy: default-src 'self'` with no inline script or style, so markup in
//!   a run's output could not run even if it were not escaped (it is: maud escapes every value, the
//!   script sets `textContent`, and the one markup it parses — an open row's pictures — is the
//!   server's own, escaped by maud). No caching, no referrer (the first URL holds the token).
//!
//! Actions go through the same functions as the command line (`control`, and the runner started
//! in the background with `--trigger dashboard`), so they are checked and recorded the same way.

pub mod board;
mod page;
mod pictures;
mod server;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response};

use crate::control;
use crate::fsutil;
use crate::history;
use crate::layout::SettingsFile;
use crate::locks;
use crate::names::Name;
use crate::runlog::RunLog;
use crate::settings::Settings;

use board::Board;

/// The token file in the data root.
pub const TOKEN_FILE: SettingsFile = SettingsFile::DashboardToken;
/// The bearer token of `GET /metrics` (docs/metrics.md): a token of its own, since the one who
/// holds it (Prometheus) may read the samples and do nothing else.
pub const METRICS_TOKEN_FILE: SettingsFile = SettingsFile::MetricsToken;
const COOKIE: &str = "automations_dashboard";
const APP_JS: &str = include_str!("static/app.js");
const APP_CSS: &str = include_str!("static/app.css");
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// 32 random bytes, in hex.
fn random_hex() -> Result<String, DashboardError> {
    let mut raw = [0u8; 32];
    getrandom::getrandom(&mut raw)
        .map_err(|e| DashboardError::Random(std::io::Error::other(e.to_string())))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token kept in `file` of the data root (the dashboard's, or /metrics'): read, or made (32
/// random bytes, hex) and kept 0600.
pub fn token(data_root: &std::path::Path, file: SettingsFile) -> Result<String, DashboardError> {
    let path = crate::layout::Layout::new(data_root).settings_file(file);
    let bytes = fsutil::read_private(&path, 1024).map_err(|source| DashboardError::Read {
        path: path.clone(),
        source,
    })?;
    if let Some(bytes) = bytes {
        let t = String::from_utf8_lossy(&bytes).trim().to_owned();
        if t.len() >= 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(t);
        }
    }
    let t = random_hex()?;
    fsutil::write_private(&path, format!("{t}\n").as_bytes()).map_err(|source| {
        DashboardError::Write {
            path: path.clone(),
            source,
        }
    })?;
    Ok(t)
}

/// Serves until interrupted.
pub fn serve(settings: &Settings, port: u16, open: bool) -> Result<(), DashboardError> {
    let metrics_token = token(&settings.data_root, METRICS_TOKEN_FILE)?;
    let token = token(&settings.data_root, TOKEN_FILE)?;
    let listen = |source| DashboardError::Listen { port, source };
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(listen)?;
    let port = listener.local_addr().map_err(listen)?.port();
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    // The token goes to a terminal only: a service's stdout is kept in its journal, where anyone
    // who may read the journal would find it. Elsewhere the opening page (0600) holds it.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        outln!("dashboard: {url}");
    } else {
        let page = opening_page(&settings.data_root, &url).map_err(DashboardError::Page)?;
        outln!(
            "dashboard: http://127.0.0.1:{port}/ (open {} in a browser: it holds the token, which is printed only on a terminal)",
            page.display()
        );
    }
    outln!(
        "metrics: http://127.0.0.1:{port}/metrics (Authorization: Bearer, the token in {})",
        crate::layout::Layout::new(&settings.data_root)
            .settings_file(METRICS_TOKEN_FILE)
            .display()
    );
    if open {
        open_browser(&settings.data_root, &url);
    }
    let ctx = Arc::new(Ctx {
        settings: settings.clone(),
        token,
        metrics_token,
        // The cookie holds a value of this process only: browsers send a cookie to every port
        // of 127.0.0.1, and one that reaches another local server is worthless once this ends.
        session: random_hex()?,
        port,
        exe: crate::settings::this_binary().map_err(DashboardError::Binary)?,
    });
    server::serve(
        listener,
        Arc::new(move |request| secured(route(&ctx, &request))),
    )
    .map_err(DashboardError::Serve)
}

/// Why the dashboard could not start (or stopped serving).
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("cannot have the system's random bytes for a token")]
    Random(#[source] std::io::Error),
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on 127.0.0.1:{port}")]
    Listen {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the dashboard's opening page")]
    Page(#[source] std::io::Error),
    #[error("cannot find this binary")]
    Binary(#[source] std::io::Error),
    #[error("the server stopped")]
    Serve(#[source] std::io::Error),
}

impl crate::exit::Exits for DashboardError {
    /// A file of the data root that is no regular file, a port in use, and anything not ours to
    /// take are this machine's state (3), not a failure; the rest, 1.
    fn exit(&self) -> crate::exit::Exit {
        use std::io::ErrorKind::{AddrInUse, PermissionDenied};
        let source = match self {
            Self::Read { source, .. } | Self::Write { source, .. } => source,
            Self::Random(source)
            | Self::Listen { source, .. }
            | Self::Page(source)
            | Self::Binary(source)
            | Self::Serve(source) => source,
        };
        if matches!(source.kind(), AddrInUse | PermissionDenied) {
            crate::exit::Exit::Environment
        } else {
            source.exit()
        }
    }
}

/// The page the browser is opened on: a private file in the data root that forwards to `url`,
/// so the token is never on a command line (`/proc/*/cmdline` is readable by every local user).
const OPEN_FILE: SettingsFile = SettingsFile::DashboardOpen;

fn open_browser(data_root: &std::path::Path, url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        // Opens a file with its default program: the browser, for a page.
        "explorer"
    } else {
        "xdg-open"
    };
    let started = opening_page(data_root, url).and_then(|page| {
        let mut cmd = std::process::Command::new(opener);
        cmd.arg(&page);
        spawn_detached(&mut cmd)
    });
    if started.is_err() {
        errln!("(could not start {opener}: open the address above yourself)");
    }
}

/// Writes the opening page that forwards to `url` (private, in the data root); where it is.
fn opening_page(data_root: &std::path::Path, url: &str) -> std::io::Result<PathBuf> {
    let page = crate::layout::Layout::new(data_root).settings_file(OPEN_FILE);
    let html = format!(
        "<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>automations</title><a href=\"{url}\">automations dashboard</a>\n"
    );
    fsutil::write_private(&page, html.as_bytes())?;
    Ok(page)
}

/// Starts `cmd` with no standard streams and does not wait for it; a thread reaps it when it
/// ends, so it never lingers as a zombie. Its own process group: Ctrl-C on the dashboard does not
/// reach a run it started (which would end as stopped).
fn spawn_detached(cmd: &mut std::process::Command) -> std::io::Result<()> {
    crate::platform::own_group(cmd);
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    std::thread::spawn(move || child.wait());
    Ok(())
}

struct Ctx {
    settings: Settings,
    token: String,
    metrics_token: String,
    session: String,
    port: u16,
    exe: PathBuf,
}

type Reply = Response<Vec<u8>>;

/// A response with `status`, `content_type` and `body`.
fn reply(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Reply {
    let mut r = Response::new(body.into());
    *r.status_mut() = hyper::StatusCode::from_u16(status).expect("a status code");
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r
}

/// Every response carries these.
fn secured(mut r: Reply) -> Reply {
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
    ] {
        r.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    r
}

fn text(code: u16, body: &str) -> Reply {
    reply(code, "text/plain; charset=utf-8", body)
}

fn json(code: u16, v: &serde_json::Value) -> Reply {
    reply(code, "application/json", v.to_string())
}

fn get_header<'a>(r: &'a Request<Vec<u8>>, name: &'static str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Equal in constant time (a token compare must not leak how much matched).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn route(ctx: &Ctx, request: &Request<Vec<u8>>) -> Reply {
    // DNS rebinding: only our own address names this server.
    let hosts = [
        format!("127.0.0.1:{}", ctx.port),
        format!("localhost:{}", ctx.port),
    ];
    if !get_header(request, "Host").is_some_and(|h| hosts.iter().any(|x| x == h)) {
        return text(403, "refused: wrong Host\n");
    }
    let path = request.uri().path();
    if path == "/metrics" {
        return metrics(ctx, request);
    }
    let query = request.uri().query().unwrap_or("");
    // The token once in the URL: set the cookie and drop the token from the address bar. By a page
    // that moves on to `/` itself rather than a 303: a redirect belongs to the navigation that
    // brought the token, and when that began elsewhere (the file the browser is opened on, a link
    // in another site) a SameSite=Strict cookie would not go with it; this page's own navigation is
    // same-site. Always to `/`: nothing from the request goes into the answer.
    if let Some(t) = query.split('&').find_map(|kv| kv.strip_prefix("token="))
        && same(t, &ctx.token)
        && *request.method() == Method::GET
    {
        let mut r = reply(
            200,
            "text/html; charset=utf-8",
            "<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/\"><title>automations</title><a href=\"/\">automations dashboard</a>\n",
        );
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            ctx.session
        );
        r.headers_mut().insert(
            hyper::header::SET_COOKIE,
            HeaderValue::from_str(&cookie).expect("a cookie of hex digits"),
        );
        return r;
    }
    let authed = get_header(request, "Cookie").is_some_and(|c| {
        c.split(';')
            .filter_map(|kv| kv.trim().strip_prefix(&format!("{COOKIE}=")))
            .any(|t| same(t, &ctx.session))
    });
    if !authed {
        return text(
            401,
            "no token: open the address `automations dashboard` printed (it carries the token)\n",
        );
    }
    match (request.method().clone(), path) {
        (Method::GET, "/") => match Board::gather(&ctx.settings) {
            Ok(b) => reply(
                200,
                "text/html; charset=utf-8",
                page::page(&ctx.settings, &b).into_string(),
            ),
            Err(e) => unreadable("the data", &e),
        },
        (Method::GET, "/static/app.js") => reply(200, "text/javascript; charset=utf-8", APP_JS),
        (Method::GET, "/static/app.css") => reply(200, "text/css; charset=utf-8", APP_CSS),
        (Method::GET, "/api/automations") => match Board::gather(&ctx.settings) {
            Ok(b) => json(200, &b.json(&ctx.settings)),
            Err(e) => failed(&e),
        },
        (Method::GET, p) if p.starts_with("/api/runs/") => run_api(ctx, &p["/api/runs/".len()..]),
        (Method::GET, "/api/timeline") => match Board::gather(&ctx.settings) {
            Ok(b) => reply(
                200,
                "text/html; charset=utf-8",
                pictures::timeline_lines(&b).into_string(),
            ),
            Err(e) => unreadable("the data", &e),
        },
        (Method::GET, p) if p.starts_with("/api/pictures/") => {
            pictures_api(ctx, &p["/api/pictures/".len()..])
        }
        (Method::POST, p) => {
            // Cross-site writes: the Origin must be this very page.
            let origins = hosts.map(|h| format!("http://{h}"));
            if !get_header(request, "Origin").is_some_and(|o| origins.iter().any(|x| x == o)) {
                return text(403, "refused: wrong or missing Origin\n");
            }
            action(ctx, p, &String::from_utf8_lossy(request.body()))
        }
        _ => text(404, "not found\n"),
    }
}

/// `GET /api/pictures/NAME`: the duration trend and calendar strip of one automation, as the HTML
/// an open row shows (server-rendered SVG; maud escapes every value).
fn pictures_api(ctx: &Ctx, name: &str) -> Reply {
    let Ok(name) = Name::new(name) else {
        return text(404, "no such automation\n");
    };
    match pictures::History::read(&ctx.settings, &name) {
        Ok(h) => reply(
            200,
            "text/html; charset=utf-8",
            pictures::fragment(&h).into_string(),
        ),
        Err(e) => unreadable("the runs", &e),
    }
}

/// `GET /metrics` with `Authorization: Bearer <the metrics token>`: the samples, in OpenMetrics when
/// the scraper asks for it (Prometheus does), else the text format. Not the cookie: the page's
/// visitor has no business here, and the scraper no business elsewhere.
fn metrics(ctx: &Ctx, request: &Request<Vec<u8>>) -> Reply {
    if *request.method() != Method::GET {
        return text(405, "only GET\n");
    }
    let authed = get_header(request, "Authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), &ctx.metrics_token));
    if !authed {
        let mut r = text(
            401,
            "no token: send Authorization: Bearer with the token in <data root>/metrics.token\n",
        );
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"automations\""),
        );
        return r;
    }
    let format = crate::metrics::Format::accepted(get_header(request, "Accept").unwrap_or(""));
    let s = &ctx.settings;
    let body = crate::health::load::Sources::read(s, None)
        .map_err(crate::metrics::MetricsError::from)
        .and_then(|src| crate::metrics::document(s, &src, format));
    match body {
        Ok(b) => reply(
            200,
            match format {
                crate::metrics::Format::OpenMetrics => crate::metrics::OPENMETRICS_TYPE,
                crate::metrics::Format::Text => crate::metrics::TEXT_TYPE,
            },
            b,
        ),
        Err(e) => unreadable("the data", &e),
    }
}

/// `/api/runs/<id>` or `/api/runs/<name>/<id>`: the `show --json` document. With the name, only
/// that automation's lines are read (through its index); either way only back to the run's time.
fn run_api(ctx: &Ctx, rest: &str) -> Reply {
    let log = RunLog::new(&ctx.settings.data_root);
    let (name, id) = match rest.split_once('/') {
        Some((n, id)) => match Name::new(n) {
            Ok(n) => (Some(n), id),
            Err(_) => return json(404, &serde_json::json!({"error": "no such run"})),
        },
        None => (None, rest),
    };
    match history::find(
        &log,
        &ctx.settings.data_root,
        id,
        name.as_ref().map(Name::as_str),
    ) {
        Ok(history::Found::One(v)) => json(200, &crate::views::show_json(&v)),
        Ok(_) => json(404, &serde_json::json!({"error": "no such run"})),
        Err(e) => failed(&e),
    }
}

/// The reason in a `{"reason": "…"}` body.
fn reason_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("reason")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn control_reply(r: Result<serde_json::Value, control::ControlError>) -> Reply {
    match r {
        Ok(v) => json(200, &v),
        Err(
            e @ (control::ControlError::Reason | control::ControlError::NoSuchAutomation { .. }),
        ) => json(400, &serde_json::json!({"error": e.to_string()})),
        Err(e) => failed(&e),
    }
}

fn action(ctx: &Ctx, path: &str, body: &str) -> Reply {
    let s = &ctx.settings;
    let named = |prefix: &str| path.strip_prefix(prefix).and_then(|n| Name::new(n).ok());
    if let Some(name) = named("/api/run/") {
        return run_now(ctx, &name);
    }
    // Pause, resume and the kill switch follow on the remote checks, as from the command line.
    let follow =
        |only: Option<&Name>, pause: bool| crate::healthchecks::follow::follow(s, only, pause);
    if let Some(name) = named("/api/pause/") {
        return control_reply(
            control::pause(s, &name, crate::runlog::By::Hand, &reason_of(body)).map(
                |p| serde_json::json!({"paused": p, "healthchecks": follow(Some(&name), true)}),
            ),
        );
    }
    if let Some(name) = named("/api/ack/") {
        let why = reason_of(body);
        return control_reply(
            control::ack(
                s,
                &name,
                Some(why.as_str()).filter(|w| !w.trim().is_empty()),
            )
            .map(|()| serde_json::json!({"acknowledged": name.as_str()})),
        );
    }
    if let Some(name) = named("/api/snooze/") {
        // Only a duration this module reads, and the reason as the command line takes it.
        let duration = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("duration")?.as_str().map(str::to_owned))
            .unwrap_or_default();
        let minutes = match control::snooze_minutes(&duration) {
            Ok(m) => m,
            Err(e) => return json(400, &serde_json::json!({"error": e})),
        };
        let why = reason_of(body);
        let until = chrono::Utc::now() + chrono::Duration::minutes(minutes as i64);
        return control_reply(
            control::snooze(
                s,
                &name,
                until,
                Some(why.as_str()).filter(|w| !w.trim().is_empty()),
            )
            .map(|z| serde_json::json!({"snoozed": z})),
        );
    }
    if let Some(name) = named("/api/unsnooze/") {
        return control_reply(
            control::unsnooze(s, &name).map(|was| serde_json::json!({"unsnoozed": was})),
        );
    }
    if let Some(name) = named("/api/resume/") {
        return control_reply(control::resume(s, &name).map(
            |was| serde_json::json!({"resumed": was, "healthchecks": follow(Some(&name), false)}),
        ));
    }
    match path {
        "/api/stop-all" => control_reply(control::stop_all(s, &reason_of(body)).map(|r| {
            let mut doc = serde_json::json!(r);
            doc["healthchecks"] = follow(None, true).into();
            doc
        })),
        "/api/resume-all" => {
            control_reply(control::resume_all(s).map(
                |was| serde_json::json!({"resumed": was, "healthchecks": follow(None, false)}),
            ))
        }
        _ => text(404, "not found\n"),
    }
}

/// Starts the same runner a schedule uses, in the background, with `--trigger dashboard`. Only the
/// name of a definition is accepted; nothing else from the request reaches a command.
fn run_now(ctx: &Ctx, name: &Name) -> Reply {
    let s = &ctx.settings;
    if let Err(e) = control::require_definition(s, name) {
        return json(400, &serde_json::json!({"error": e.to_string()}));
    }
    if locks::holder(&s.data_root, name).is_some() {
        return json(
            409,
            &serde_json::json!({"error": format!("{name} is already running")}),
        );
    }
    let mut cmd = std::process::Command::new(&ctx.exe);
    cmd.args(["run", name.as_str(), "--trigger", "dashboard"])
        .args(s.global_args());
    match spawn_detached(&mut cmd) {
        Ok(()) => json(202, &serde_json::json!({"started": name.as_str()})),
        Err(e) => json(
            500,
            &serde_json::json!({"error": format!("cannot start the runner: {e}")}),
        ),
    }
}

/// A 500 saying what could not be read, and why.
fn unreadable(what: &str, e: &dyn std::error::Error) -> Reply {
    text(
        500,
        &format!("cannot read {what}: {}\n", crate::exit::chain_text(e)),
    )
}

/// A 500 with the error, and every cause, in JSON.
fn failed(e: &dyn std::error::Error) -> Reply {
    json(
        500,
        &serde_json::json!({"error": crate::exit::chain_text(e)}),
    )
}
