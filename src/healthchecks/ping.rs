//! Pings from a firing: `/start` when the run starts, the exit status or `/fail` when it ends,
//! `/log` when the last run still runs.
//!
//! Each ping is bounded: a try waits at most [`TRY`], a 5xx, a 429 or no answer is tried again,
//! and all tries of one ping end within [`BOUND`]. The start ping goes on its own thread, so the
//! command never waits for it; the end ping waits for the start ping (a start after the end would
//! leave the check "started") but only until the end's own bound. So a firing's pings add at most
//! [`BOUND`] after its run, which is over and recorded by then, its lock already released. A ping
//! never changes the run's outcome or exit status. What came of each is kept in
//! `state/healthchecks/<name>.json` (never its URL, which holds the key or the UUID).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{HcSettings, KeyKind, Watch};
use crate::definition::Definition;
use crate::keys::Secret;
use crate::names::Name;
use crate::runlog::{Finished, Outcome, SkipReason};
use crate::settings::Settings;

/// The longest one try of a ping waits for its answer.
pub const TRY: Duration = Duration::from_secs(5);
/// All tries of one ping (the first and two more) end within this.
pub const BOUND: Duration = Duration::from_secs(10);
const TRIES: u32 = 3;
/// Below this much time left, a try is not begun.
const LEAST_TIME: Duration = Duration::from_millis(200);

/// What a ping says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ping {
    Start,
    /// The command's exit status (0 is success).
    Exit(u8),
    Fail,
    Log,
}

impl Ping {
    fn suffix(self) -> String {
        match self {
            Ping::Start => "/start".into(),
            Ping::Exit(code) => format!("/{code}"),
            Ping::Fail => "/fail".into(),
            Ping::Log => "/log".into(),
        }
    }

    /// Its name in state and messages: `start`, `exit 0`, `fail`, `log`.
    pub fn word(self) -> String {
        match self {
            Ping::Exit(code) => format!("exit {code}"),
            Ping::Start => "start".into(),
            Ping::Fail => "fail".into(),
            Ping::Log => "log".into(),
        }
    }

    /// The end ping of a finished run: its exit status when the command ran and exited (0 for
    /// ok), else `/fail` (a timeout, a stop, a refused key, a signal, a run that never started).
    pub fn of(finished: &Finished) -> Self {
        let class = finished.error.as_ref().map(|e| e.class.as_str());
        match (finished.outcome, class, finished.exit_code) {
            (Outcome::Ok, _, _) => Ping::Exit(0),
            (Outcome::Failed, Some("exit_status"), Some(c)) => {
                u8::try_from(c).map_or(Ping::Fail, Ping::Exit)
            }
            _ => Ping::Fail,
        }
    }
}

/// The run id Healthchecks pairs a start with its end by: a UUID derived from the firing's first
/// run id, so both pings carry the same one.
pub fn rid(run_id: &str) -> String {
    let h = Sha256::digest(run_id.as_bytes());
    let mut b: [u8; 16] = h[..16].try_into().expect("16 of 32 bytes");
    b[6] = (b[6] & 0x0f) | 0x40; // version 4 (random-looking)
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let x: String = b.iter().map(|v| format!("{v:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..]
    )
}

/// The URL of a ping (a secret: it holds the ping key or the check UUID).
pub fn url(
    cfg: &HcSettings,
    watch: &Watch,
    key: Option<&Secret>,
    ping: Ping,
    rid: Option<&str>,
) -> Option<String> {
    let base = match (watch, key) {
        (Watch::Uuid(id), _) => format!("{}/{}", cfg.ping_url, id.expose()),
        (Watch::Slug(slug), Some(k)) => format!("{}/{}/{slug}", cfg.ping_url, k.expose()),
        (Watch::Slug(_), None) | (Watch::Off, _) => return None,
    };
    let query = rid.map_or_else(String::new, |r| format!("?rid={r}"));
    Some(format!("{base}{}{query}", ping.suffix()))
}

/// Sends one ping (a POST with `body`) before `deadline`; the server's answer, or why not —
/// never the URL, nor any of `secrets` (the key or UUID in it) when the server echoes them. A
/// 5xx, a 429 or no answer is tried again, up to [`TRIES`] tries.
pub fn send(url: &str, body: &[u8], deadline: Instant, secrets: &[&str]) -> Result<String, String> {
    // The URL's path (and query) is a secret too: a server or proxy that echoes it ("Cannot POST
    // /ping/<key>/…") must not put it in a state file or on a screen.
    let path = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("");
    let bare = path.split('?').next().unwrap_or("");
    let mut secrets = secrets.to_vec();
    secrets.extend([url, path, bare]);
    // One client for every try (building one loads the root certificates); each try has its
    // own timeout within what is left.
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(TRY)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            format!(
                "cannot build an HTTP client: {}",
                crate::http::classify(&e).as_str()
            )
        })?;
    let mut last = String::new();
    for attempt in 0..TRIES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < LEAST_TIME {
            break;
        }
        let answer = client
            .post(url)
            .timeout(left.min(TRY))
            .body(body.to_vec())
            .send();
        match answer {
            Ok(mut r) => {
                let status = r.status().as_u16();
                let (said, _) = crate::http::answer_capped(&mut r, 200).unwrap_or_default();
                let said = super::shown(&String::from_utf8_lossy(&said), &secrets, 60);
                let answer = format!("{status} {said}").trim().to_owned();
                if status == 200 || status == 201 {
                    return Ok(answer);
                }
                last = format!("refused: {answer}");
                if !(status >= 500 || status == 429) {
                    return Err(last);
                }
            }
            Err(e) => last = format!("no answer ({})", crate::http::classify(&e).as_str()),
        }
        // A short pause before the next try, inside the bound.
        let pause = Duration::from_millis(300 * u64::from(attempt + 1));
        if deadline.saturating_duration_since(Instant::now()) > pause + LEAST_TIME {
            std::thread::sleep(pause);
        }
    }
    if last.is_empty() {
        last = format!("no time left within {} s", BOUND.as_secs());
    }
    Err(last)
}

/// Adds `results` (in the order sent) to `name`'s ping state; a failure to write says so on
/// stderr and changes nothing else.
fn record(data_root: &Path, name: &Name, results: &[(Ping, Result<String, String>)]) {
    if results.is_empty() {
        return;
    }
    let mut st = crate::state::read_pings(data_root, name)
        .ok()
        .flatten()
        .unwrap_or_default();
    let now = crate::runlog::stamp(chrono::Utc::now());
    for (ping, r) in results {
        st.at = now.clone();
        st.ping = ping.word();
        st.ok = r.is_ok();
        match r {
            Ok(a) => {
                st.answer = a.clone();
                st.failures_in_row = 0;
                st.last_ok_at = Some(now.clone());
            }
            Err(e) => {
                st.answer = e.clone();
                st.failures_in_row += 1;
                errln!(
                    "automations: {name}: the Healthchecks {} ping failed ({e}); the run's outcome is unchanged",
                    ping.word()
                );
            }
        }
    }
    if let Err(e) = crate::state::write_json(&crate::state::pings_path(data_root, name), &st) {
        errln!("automations: {name}: cannot keep what came of its Healthchecks pings: {e}");
    }
}

/// What a firing's pings need: the settings, how it is watched, its key source.
struct Context {
    cfg: HcSettings,
    watch: Watch,
    name: Name,
    data_root: PathBuf,
    namespace: crate::names::Namespace,
    keys: crate::keys::Place,
}

impl Context {
    /// `None` when `healthchecks.toml` is absent, unreadable (said on stderr), says no check, or
    /// `name` has no check to ping (see [`super::has_check`]).
    fn of(
        settings: &Settings,
        name: &Name,
        def: Option<&Definition>,
        installed: Option<bool>,
    ) -> Option<Self> {
        if !super::enabled(settings) {
            return None;
        }
        let cfg = match super::settings::load(&settings.data_root) {
            Ok(Some(c)) => c,
            Ok(None) => return None,
            Err(e) => {
                errln!("automations: {name}: no Healthchecks pings: {e}");
                return None;
            }
        };
        let watch = super::watch(&cfg, &settings.namespace, name);
        super::has_check(settings, name, &watch, def, installed).then(|| Self {
            cfg,
            watch,
            name: name.clone(),
            data_root: settings.data_root.clone(),
            namespace: settings.namespace.clone(),
            keys: crate::keys::Place::of(settings),
        })
    }

    /// Reads the ping key when pinging by slug (`Ok(None)` when pinging by UUID), on whichever
    /// thread calls it.
    fn key_reader(&self) -> impl FnOnce() -> Result<Option<Secret>, String> + Send + 'static {
        let (slug, namespace, keys) = (
            matches!(self.watch, Watch::Slug(_)),
            self.namespace.clone(),
            self.keys.clone(),
        );
        move || {
            if !slug {
                return Ok(None);
            }
            match super::key(KeyKind::Ping, &namespace, &|| keys.open())? {
                Some(k) => Ok(Some(k)),
                None => Err(format!(
                    "no ping key ({} or `automations secret store healthchecks.ping`)",
                    super::ENV_PING_KEY
                )),
            }
        }
    }

    /// Sends `ping` with `body` before `deadline`, the key already read.
    fn send(
        &self,
        key: Option<&Secret>,
        ping: Ping,
        rid: Option<&str>,
        body: &str,
        deadline: Instant,
    ) -> Result<String, String> {
        let url = url(&self.cfg, &self.watch, key, ping, rid).ok_or("no ping key")?;
        let body = cut(body, self.cfg.body_limit);
        let mut secrets: Vec<&str> = key.iter().map(|k| k.expose()).collect();
        if let Watch::Uuid(id) = &self.watch {
            secrets.push(id.expose());
        }
        send(&url, body.as_bytes(), deadline, &secrets)
    }
}

/// `s` cut to at most `limit` bytes, at a character's edge.
pub fn cut(s: &str, limit: usize) -> &str {
    if s.len() <= limit {
        return s;
    }
    let mut end = limit;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The pings of one firing.
pub struct Pings {
    ctx: std::sync::Arc<Context>,
    rid: String,
    /// Once the start ping is on its way: the key its thread read, then what its ping came to.
    started: std::sync::OnceLock<Started>,
}

type Started = (
    mpsc::Receiver<Result<Option<Secret>, String>>,
    mpsc::Receiver<Result<String, String>>,
);

impl Pings {
    /// The firing's pings; `None` when its automation has no check (one `stat` when there is no
    /// `healthchecks.toml`). Nothing is sent yet.
    /// `installed`: whether the firing found an install record (it read it for the pins).
    pub fn prepare(
        settings: &Settings,
        def: &Definition,
        installed: bool,
        run_id: &str,
    ) -> Option<Self> {
        let ctx = Context::of(settings, &def.name, Some(def), Some(installed))?;
        Some(Self {
            ctx: std::sync::Arc::new(ctx),
            rid: rid(run_id),
            started: std::sync::OnceLock::new(),
        })
    }

    /// Sends `/start` on a thread of its own, once (the runner calls it when the command has
    /// been spawned, so neither waits for the other).
    pub fn start(&self) {
        self.started.get_or_init(|| {
            let (key_tx, keys) = mpsc::channel();
            let (start_tx, started) = mpsc::channel();
            let (c, r) = (self.ctx.clone(), self.rid.clone());
            let spawned = std::thread::Builder::new()
                .name("healthchecks".into())
                .spawn(move || {
                    let deadline = Instant::now() + BOUND;
                    let key = c.key_reader()();
                    let _ = key_tx.send(key.clone());
                    let result =
                        key.and_then(|k| c.send(k.as_ref(), Ping::Start, Some(&r), "", deadline));
                    let _ = start_tx.send(result);
                });
            if let Err(e) = spawned {
                errln!(
                    "automations: {}: no Healthchecks start ping: {e}",
                    self.ctx.name
                );
            }
            (keys, started)
        });
    }

    /// After the run is recorded: waits for the start ping, if one was sent (within the end's
    /// bound), sends the end ping with the run's summary, and keeps what came of both.
    pub fn end(self, finished: &Finished) {
        let deadline = Instant::now() + BOUND;
        let left = || deadline.saturating_duration_since(Instant::now());
        let ping = Ping::of(finished);
        let text = body(&self.ctx.name, finished);
        let Some((keys, started)) = self.started.into_inner() else {
            // The command never started (a refused key, say): the end alone.
            let end = one(&self.ctx, ping, Some(&self.rid), &text);
            record(&self.ctx.data_root, &self.ctx.name, &[(ping, end)]);
            return;
        };
        let key = keys
            .recv_timeout(left())
            .unwrap_or_else(|_| Err("the ping key could not be read in time".into()));
        let start = started
            .recv_timeout(left())
            .unwrap_or_else(|_| Err(format!("no answer within {} s", BOUND.as_secs())));
        let end = key.and_then(|k| {
            self.ctx
                .send(k.as_ref(), ping, Some(&self.rid), &text, deadline)
        });
        record(
            &self.ctx.data_root,
            &self.ctx.name,
            &[(Ping::Start, start), (ping, end)],
        );
    }
}

/// The end ping of a run that never started (a scheduled firing of a broken definition).
pub fn unstarted(settings: &Settings, name: &Name, finished: &Finished) {
    if let Some(ctx) = Context::of(settings, name, None, None) {
        let r = one(&ctx, Ping::Fail, None, &body(name, finished));
        record(&settings.data_root, name, &[(Ping::Fail, r)]);
    }
}

/// The ping of a firing that was skipped: `/log` when the last run still runs, `/fail` when its
/// definition is not what was installed (it will not run until it is); nothing for a pause, the
/// kill switch or a slot already done.
pub fn skipped(settings: &Settings, def: &Definition, reason: SkipReason, detail: &str) {
    let name = &def.name;
    let ping = match reason {
        SkipReason::AlreadyRunning | SkipReason::AlreadyQueued => Ping::Log,
        SkipReason::DefinitionChanged | SkipReason::ScriptChanged | SkipReason::NotInstalled => {
            Ping::Fail
        }
        _ => return,
    };
    if let Some(ctx) = Context::of(settings, name, Some(def), None) {
        let text = format!(
            "automations: {name} on {}: a firing was skipped: {}{}",
            crate::notify::host(),
            reason.as_str(),
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({detail})")
            }
        );
        let r = one(&ctx, ping, None, &text);
        record(&settings.data_root, name, &[(ping, r)]);
    }
}

/// One ping with its key, within [`BOUND`] in all (the key read included).
fn one(ctx: &Context, ping: Ping, rid: Option<&str>, body: &str) -> Result<String, String> {
    let deadline = Instant::now() + BOUND;
    let read = ctx.key_reader();
    let key =
        crate::keys::with_deadline(BOUND, move || read().map_err(crate::keys::KeyError::Failed))
            .map_err(|e| e.to_string())?;
    ctx.send(key.as_ref(), ping, rid, body, deadline)
}

/// The body of an end ping: the outcome, the duration, the class and detail of a failure, the
/// headline, and the output tails — all as the run log holds them, so already redacted.
pub fn body(name: &Name, f: &Finished) -> String {
    let mut b = format!(
        "automations: {name} on {}: {}{} in {}\n",
        crate::notify::host(),
        f.outcome.as_str(),
        f.exit_code
            .map_or_else(String::new, |c| format!(" (exit {c})")),
        crate::health::human_ms(f.duration_ms),
    );
    if let Some(e) = &f.error {
        b.push_str(&format!("error: {}: {}\n", e.class, e.detail));
    }
    if let Some(h) = &f.headline {
        b.push_str(&format!("headline: {h}\n"));
    }
    if let Some(a) = f.attempt {
        b.push_str(&format!("attempt: {a}\n"));
    }
    for (what, tail) in [("stdout", &f.stdout_tail), ("stderr", &f.stderr_tail)] {
        if !tail.is_empty() {
            b.push_str(&format!("--- {what} (last lines) ---\n{tail}\n"));
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rid_is_a_stable_uuid_per_run() {
        let a = rid("20261201T100000.000Z-abcdef");
        assert_eq!(a, rid("20261201T100000.000Z-abcdef"));
        assert_ne!(a, rid("20261201T100000.000Z-abcdee"));
        assert!(super::super::settings::CheckId::parse(&a).is_some(), "{a}");
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 10), "abc");
        assert_eq!(cut("abc", 0), "");
    }
}
