//! Healthchecks : pings from every firing and checks synced from the definitions,
//! against a fake server that speaks the documented API as healthchecks' own views do (ping by
//! UUID and by ping key + slug, `rid` must be a UUID, bodies cut at PING_BODY_LIMIT, API keys of
//! 32 characters in X-Api-Key, `unique`, 409 on resuming a check that is not paused).

use std::sync::{Arc, Mutex};

use crate::fixtures::{FakeHttp, Keyring, Reply, Seen, write_private};
use crate::harness::*;

const PING_KEY: &str = "pk_0123456789abcdefghi"; // 22 characters, as Healthchecks makes them
const API_KEY: &str = "ak_0123456789abcdefghijklmnopqrs"; // 32
const BODY_LIMIT: usize = 10_000;

#[derive(Clone, Debug)]
struct Check {
    uuid: String,
    name: String,
    slug: String,
    tags: String,
    desc: String,
    grace: u64,
    timeout: Option<u64>,
    schedule: Option<String>,
    tz: Option<String>,
    status: String,
    channels: String,
}

impl Check {
    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "uuid": self.uuid, "name": self.name, "slug": self.slug, "tags": self.tags,
            "desc": self.desc, "grace": self.grace, "status": self.status, "last_ping": null,
            "n_pings": 0, "ping_url": format!("https://hc.example/ping/{}", self.uuid),
            "channels": self.channels,
        });
        match (&self.schedule, self.timeout) {
            (Some(s), _) => {
                v["schedule"] = s.clone().into();
                v["tz"] = self.tz.clone().into();
            }
            (None, t) => v["timeout"] = t.unwrap_or(86400).into(),
        }
        v
    }
}

/// A ping the server took.
#[derive(Clone, Debug)]
struct Pinged {
    uuid: String,
    kind: String,
    rid: Option<String>,
    body: String,
}

#[derive(Default)]
struct Hc {
    checks: Vec<Check>,
    pings: Vec<Pinged>,
    next: u32,
    /// Refuse every ping and API change with `Cannot <METHOD> <path>`, as a server or proxy
    /// that echoes the request's path does.
    echo: bool,
}

impl Hc {
    fn new_uuid(&mut self) -> String {
        self.next += 1;
        format!("{:08x}-1111-4222-8333-{:012x}", self.next, self.next)
    }

    fn add(&mut self, slug: &str, tags: &str) -> String {
        let uuid = self.new_uuid();
        self.checks.push(Check {
            uuid: uuid.clone(),
            name: slug.into(),
            slug: slug.into(),
            tags: tags.into(),
            desc: String::new(),
            grace: 3600,
            timeout: Some(86400),
            schedule: None,
            tz: None,
            status: "new".into(),
            channels: String::new(),
        });
        uuid
    }
}

fn is_uuid(s: &str) -> bool {
    let g: Vec<usize> = s.split('-').map(str::len).collect();
    g == [8, 4, 4, 4, 12] && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

fn status(code: u16, body: &str) -> Reply {
    Reply::Status(code, body.as_bytes().to_vec())
}

fn json(code: u16, v: serde_json::Value) -> Reply {
    Reply::Status(code, v.to_string().into_bytes())
}

/// Healthchecks' `ping` and `ping_by_slug` views.
fn ping(hc: &mut Hc, parts: &[&str], query: &str, r: &Seen) -> Reply {
    let (uuid, rest) = if is_uuid(parts[0]) {
        match hc.checks.iter().find(|c| c.uuid == parts[0]) {
            Some(c) => (c.uuid.clone(), &parts[1..]),
            None => return status(404, "not found"),
        }
    } else {
        let (Some(key), Some(slug)) = (parts.first(), parts.get(1)) else {
            return status(404, "not found");
        };
        if slug.to_lowercase() != *slug {
            return status(400, "invalid url format");
        }
        match hc
            .checks
            .iter()
            .find(|c| *key == PING_KEY && c.slug == *slug)
        {
            Some(c) => (c.uuid.clone(), &parts[2..]),
            None => return status(404, "not found"),
        }
    };
    let kind = match rest.first() {
        None => "success".to_owned(),
        Some(k @ (&"start" | &"fail" | &"log")) => (*k).to_owned(),
        Some(n) => match n.parse::<u16>() {
            Ok(n) if n <= 255 => format!("exit {n}"),
            _ => return status(400, "invalid url format"),
        },
    };
    let rid = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("rid="))
        .map(str::to_owned);
    if rid.as_deref().is_some_and(|r| !is_uuid(r)) {
        return status(400, "invalid uuid format");
    }
    let body = String::from_utf8_lossy(&r.body[..r.body.len().min(BODY_LIMIT)]).into_owned();
    let c = &mut hc
        .checks
        .iter_mut()
        .find(|c| c.uuid == uuid)
        .unwrap()
        .status;
    match kind.as_str() {
        "start" | "log" => {}
        "success" | "exit 0" => *c = "up".into(),
        _ => *c = "down".into(),
    }
    hc.pings.push(Pinged {
        uuid,
        kind,
        rid,
        body,
    });
    status(200, "OK")
}

/// The API views: list (with ?tag= and ?slug=), create (with unique), update, pause, resume,
/// delete; X-Api-Key of 32 characters.
fn api(hc: &mut Hc, parts: &[&str], query: &str, r: &Seen) -> Reply {
    match r.header("X-Api-Key") {
        Some(k) if k.len() == 32 && k == API_KEY => {}
        Some(k) if k.len() == 32 => {
            return json(401, serde_json::json!({"error": "wrong api key"}));
        }
        _ => return json(401, serde_json::json!({"error": "missing api key"})),
    }
    let spec = || serde_json::from_slice::<serde_json::Value>(&r.body).unwrap_or_default();
    match (r.method.as_str(), parts) {
        ("GET", ["checks", ""] | ["checks"]) => {
            let tags: Vec<&str> = query
                .split('&')
                .filter_map(|kv| kv.strip_prefix("tag="))
                .collect();
            let list: Vec<_> = hc
                .checks
                .iter()
                .filter(|c| tags.iter().all(|t| c.tags.split(' ').any(|x| x == *t)))
                .map(Check::json)
                .collect();
            json(200, serde_json::json!({ "checks": list }))
        }
        ("POST", ["checks", ""] | ["checks"]) => {
            let s = spec();
            if let Some(e) = invalid(&s) {
                return json(400, serde_json::json!({ "error": e }));
            }
            let unique_slug = s["unique"]
                .as_array()
                .is_some_and(|u| u.iter().any(|x| x == "slug"));
            let found = hc
                .checks
                .iter()
                .position(|c| unique_slug && Some(c.slug.as_str()) == s["slug"].as_str());
            let (i, code) = match found {
                Some(i) => (i, 200),
                None => {
                    let uuid = hc.new_uuid();
                    hc.add("", "");
                    let last = hc.checks.len() - 1;
                    hc.checks[last].uuid = uuid;
                    (last, 201)
                }
            };
            set(&mut hc.checks[i], &s);
            json(code, hc.checks[i].json())
        }
        ("POST", ["checks", uuid]) => match hc.checks.iter_mut().find(|c| c.uuid == *uuid) {
            Some(c) => {
                let s = spec();
                if let Some(e) = invalid(&s) {
                    return json(400, serde_json::json!({ "error": e }));
                }
                set(c, &s);
                json(200, c.json())
            }
            None => status(404, "not found"),
        },
        ("POST", ["checks", uuid, action @ ("pause" | "resume")]) => {
            match hc.checks.iter_mut().find(|c| c.uuid == *uuid) {
                Some(c) if *action == "resume" && c.status != "paused" => {
                    status(409, "check is not paused")
                }
                Some(c) => {
                    c.status = if *action == "pause" { "paused" } else { "new" }.into();
                    json(200, c.json())
                }
                None => status(404, "not found"),
            }
        }
        ("DELETE", ["checks", uuid]) => match hc.checks.iter().position(|c| c.uuid == *uuid) {
            Some(i) => json(200, hc.checks.remove(i).json()),
            None => status(404, "not found"),
        },
        _ => status(404, "not found"),
    }
}

/// Healthchecks' Spec validation, the parts this tool can get wrong.
fn invalid(s: &serde_json::Value) -> Option<String> {
    for k in ["grace", "timeout"] {
        if let Some(v) = s.get(k) {
            match v.as_u64() {
                Some(n) if (60..=31_536_000).contains(&n) => {}
                _ => return Some(format!("json validation error: {k} is too small")),
            }
        }
    }
    if let Some(sc) = s.get("schedule") {
        if sc.as_str().is_none_or(|t| t.len() > 100) {
            return Some("json validation error: schedule is too long".into());
        }
        if s.get("tz").and_then(|t| t.as_str()).is_none() {
            return Some("json validation error: tz is not a valid timezone".into());
        }
    }
    if let Some(slug) = s.get("slug").and_then(|v| v.as_str())
        && !slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Some("json validation error: slug does not match pattern".into());
    }
    None
}

fn set(c: &mut Check, s: &serde_json::Value) {
    let text = |k: &str| s.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    if let Some(v) = text("name") {
        c.name = v;
    }
    if let Some(v) = text("slug") {
        c.slug = v;
    }
    if let Some(v) = text("tags") {
        c.tags = v;
    }
    if let Some(v) = text("desc") {
        c.desc = v;
    }
    if let Some(v) = text("channels") {
        c.channels = v;
    }
    if let Some(v) = s.get("grace").and_then(|v| v.as_u64()) {
        c.grace = v;
    }
    if let Some(v) = s.get("timeout").and_then(|v| v.as_u64()) {
        c.timeout = Some(v);
        c.schedule = None;
        c.tz = None;
    }
    if let Some(v) = text("schedule") {
        c.schedule = Some(v);
        c.tz = text("tz");
    }
}

/// A fake Healthchecks: pings under `/ping/`, the API under `/api/v3/`.
struct FakeHc {
    http: FakeHttp,
    state: Arc<Mutex<Hc>>,
}

impl FakeHc {
    fn start() -> Self {
        let state = Arc::new(Mutex::new(Hc::default()));
        let st = state.clone();
        let http = FakeHttp::start(move |r| {
            let (path, query) = r.path.split_once('?').unwrap_or((r.path.as_str(), ""));
            let mut hc = st.lock().unwrap();
            if hc.echo && (path.starts_with("/ping/") || r.method != "GET") {
                return status(404, &format!("Cannot {} {}", r.method, r.path));
            }
            if let Some(rest) = path.strip_prefix("/ping/") {
                let parts: Vec<&str> = rest.split('/').collect();
                ping(&mut hc, &parts, query, r)
            } else if let Some(rest) = path.strip_prefix("/api/v3/") {
                let parts: Vec<&str> = rest.split('/').collect();
                api(&mut hc, &parts, query, r)
            } else {
                status(404, "not found")
            }
        });
        Self { http, state }
    }

    fn pings(&self) -> Vec<Pinged> {
        self.state.lock().unwrap().pings.clone()
    }

    fn checks(&self) -> Vec<Check> {
        self.state.lock().unwrap().checks.clone()
    }

    fn check(&self, slug: &str) -> Check {
        self.checks()
            .into_iter()
            .find(|c| c.slug == slug)
            .unwrap_or_else(|| panic!("no check {slug}"))
    }

    fn settings(&self, more: &str) -> String {
        format!(
            "ping_url = \"{0}/ping\"\napi_url = \"{0}\"\n{more}",
            self.http.url
        )
    }
}

/// Points `sb` at `hc`: healthchecks.toml written, a fixed zone, and a stand-in `systemctl` first
/// on PATH (for `check` and install, which ask the manager about units). No key is set.
fn watch(sb: &mut Sandbox, hc: &FakeHc, more: &str) {
    let fake = sb.path("fake-bin");
    crate::systemd::fake_systemctl(&fake);
    sb.env(
        "PATH",
        &format!("{}:/usr/local/bin:/usr/bin:/bin", fake.display()),
    );
    std::fs::create_dir_all(&sb.data).unwrap();
    write_private(&sb.data.join("healthchecks.toml"), &hc.settings(more));
    sb.env("TZ", "Europe/Berlin");
}

/// A sandbox watched by `hc`, with both keys in the environment.
fn watched(hc: &FakeHc, more: &str) -> Sandbox {
    let mut sb = Sandbox::new();
    watch(&mut sb, hc, more);
    sb.env("AUTOMATIONS_HEALTHCHECKS_PING_KEY", PING_KEY)
        .env("AUTOMATIONS_HEALTHCHECKS_API_KEY", API_KEY);
    sb
}

/// Everything a run wrote or printed holds none of `secrets`.
fn assert_nothing_holds(sb: &Sandbox, outputs: &[&std::process::Output], secrets: &[&str]) {
    sb.assert_no_file_holds(&[PING_KEY, API_KEY]);
    for o in outputs {
        for s in secrets.iter().chain([&PING_KEY, &API_KEY]) {
            assert!(
                !stdout(o).contains(s) && !stderr(o).contains(s),
                "{s} printed"
            );
        }
    }
}

/// An automation that has a check to ping: scheduled (every hour) and installed here, its command
/// `sh -c SCRIPT`, with `more` keys before its `[schedule]`.
fn pinged_job(sb: &Sandbox, name: &str, script: &str, more: &str) {
    sb.shell_definition(
        name,
        script,
        &format!("{more}[schedule]\nevery_minutes = 60\n"),
    );
    sb.install_record(name, chrono::Utc::now());
}

#[test]
fn a_firing_pings_start_and_its_exit_status_paired_by_rid_with_the_redacted_summary() {
    let hc = FakeHc::start();
    let uuid = hc
        .state
        .lock()
        .unwrap()
        .add("automations_job", "automations-automations");
    let sb = watched(&hc, "body_limit = 300\n");
    pinged_job(&sb, "job", "echo made 3 things; echo oops >&2; exit 3", "");
    let failed = sb.run(["run", "job"]);
    assert_code(&failed, 1);
    pinged_job(&sb, "job", "echo all good", "");
    let ok = sb.run(["run", "job"]);
    assert_code(&ok, 0);
    let pings = hc.pings();
    let kinds: Vec<&str> = pings.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, ["start", "exit 3", "start", "exit 0"], "{pings:?}");
    assert!(pings.iter().all(|p| p.uuid == uuid));
    // Each start and its end carry the same rid, and the two firings different ones.
    let rid = |i: usize| pings[i].rid.clone().expect("a rid");
    assert_eq!(rid(0), rid(1));
    assert_eq!(rid(2), rid(3));
    assert_ne!(rid(0), rid(2));
    // The end's body: outcome, exit status, the output tails; cut to body_limit.
    let body = &pings[1].body;
    assert!(
        body.contains("job on ")
            && body.contains("failed (exit 3)")
            && body.contains("made 3 things")
            && body.contains("oops"),
        "{body}"
    );
    assert!(pings.iter().all(|p| p.body.len() <= 300));
    assert_eq!(hc.check("automations_job").status, "up");
    // What came of it is kept, and no key or UUID is anywhere.
    let st: serde_json::Value = serde_json::from_slice(
        &std::fs::read(sb.data.join("state/healthchecks/job.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (st["ok"].as_bool(), st["failures_in_row"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(st["ping"], "exit 0");
    assert_nothing_holds(&sb, &[&failed, &ok], &[&uuid]);
    sb.assert_log_verifies();
}

#[test]
fn a_check_named_by_uuid_is_pinged_by_it_and_a_timeout_pings_fail() {
    let hc = FakeHc::start();
    let uuid = hc.state.lock().unwrap().add("whatever", "");
    let sb = watched(&hc, &format!("[checks]\nslow = \"{uuid}\"\noff = false\n"));
    sb.shell_definition("slow", "sleep 30", "timeout_seconds = 1\n");
    sb.shell_definition("off", "true", "");
    let slow = sb.run(["run", "slow"]);
    assert_code(&slow, 1);
    let off = sb.run(["run", "off"]);
    assert_code(&off, 0);
    let kinds: Vec<String> = hc.pings().into_iter().map(|p| p.kind).collect();
    assert_eq!(kinds, ["start", "fail"], "only `slow` pings, by its UUID");
    assert_eq!(hc.checks()[0].status, "down");
    assert!(!sb.data.join("state/healthchecks/off.json").exists());
    assert_nothing_holds(&sb, &[&slow, &off], &[&uuid]);
}

#[test]
fn failing_pings_never_change_the_outcome_and_health_says_so_after_three() {
    // No check with this slug (404), then a server that is down: the run is ok every time.
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    pinged_job(&sb, "job", "true", "");
    let o = sb.run(["run", "job"]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("Healthchecks start ping failed (refused: 404 not found)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(sb.last_finished()["outcome"], "ok");
    let h = sb.run(["health", "job", "--json"]);
    assert!(
        !stdout(&h).contains("pings_failing"),
        "two failures are not yet three"
    );
    drop(hc);
    let o = sb.run(["run", "job"]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("no answer"), "{}", stderr(&o));
    let h = sb.run(["health", "job", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    assert_eq!(doc["automations"][0]["verdict"], "degraded", "{doc}");
    let reasons = doc["automations"][0]["reasons"].as_array().unwrap().clone();
    let r = reasons
        .iter()
        .find(|r| r["rule"] == "pings_failing")
        .unwrap_or_else(|| panic!("{reasons:?}"));
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("last 4 Healthchecks pings failed"),
        "{r}"
    );
    assert_nothing_holds(&sb, &[&o, &h], &[]);
}

#[test]
fn a_hanging_server_delays_neither_the_command_nor_the_firing_past_the_bound() {
    let hang = FakeHttp::start(|_| Reply::Hang);
    let mut sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    write_private(
        &sb.data.join("healthchecks.toml"),
        &format!("ping_url = \"{}/ping\"\n", hang.url),
    );
    sb.env("AUTOMATIONS_HEALTHCHECKS_PING_KEY", PING_KEY);
    let stamp = sb.path("ran-at");
    pinged_job(
        &sb,
        "job",
        &format!("date +%s.%N > {}", stamp.display()),
        "",
    );
    let o = run_within(
        sb.cmd(["run", "job"]),
        60,
        "a firing with a hanging ping server",
    );
    let ended = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
    assert_code(&o, 0);
    assert_eq!(sb.last_finished()["outcome"], "ok");
    let ran_at: f64 = std::fs::read_to_string(&stamp)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let at = |event: &str| {
        let e = sb.events(event).pop().unwrap();
        automations::runlog::parse_stamp(e["at"].as_str().unwrap())
            .unwrap()
            .timestamp_millis() as f64
            / 1000.0
    };
    // The server holds every request for 15 s: had the command waited for the start ping, or
    // the firing for more than its 10 s bound after the run, these would show it. Measured from
    // the runner's own events, so a slow start of the binary on a loaded machine is not counted.
    let waited = ran_at - at("started");
    assert!(waited < 5.0, "the command waited {waited} s");
    let after = ended - at("finished");
    assert!(
        after < 13.0,
        "the firing ended {after} s after its run (bound: 10 s)"
    );
    assert!(stderr(&o).contains("ping failed"), "{}", stderr(&o));
}

#[test]
fn a_firing_skipped_because_the_last_still_runs_pings_log() {
    let hc = FakeHc::start();
    hc.state.lock().unwrap().add("automations_job", "");
    let sb = watched(&hc, "");
    let gate = sb.path("gate");
    pinged_job(
        &sb,
        "job",
        &format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display()),
        "",
    );
    let mut first = sb.cmd(["run", "job"]).spawn().unwrap();
    wait_for("the first run to start", || {
        !sb.events("started").is_empty()
    });
    let second = sb.run(["run", "job"]);
    std::fs::write(&gate, "").unwrap();
    assert!(first.wait().unwrap().success());
    assert!(stdout(&second).contains("already"), "{}", stdout(&second));
    let kinds: Vec<String> = hc.pings().into_iter().map(|p| p.kind).collect();
    assert!(kinds.contains(&"log".to_owned()), "{kinds:?}");
    let log = hc.pings().into_iter().find(|p| p.kind == "log").unwrap();
    assert!(log.body.contains("already_running"), "{}", log.body);
    // Paused: nothing at all.
    let before = hc.pings().len();
    assert_code(&sb.run(["pause", "job", "--reason", "x"]), 0);
    assert_code(&sb.run(["run", "job", "--trigger", "schedule"]), 0);
    assert_eq!(hc.pings().len(), before);
}

fn installed(sb: &Sandbox, name: &str, schedule: &str, timeout: u32) {
    sb.definition(
        name,
        &format!(
            "name = \"{name}\"\ndescription = \"The {name}\"\ncommand = [\"true\"]\ntimeout_seconds = {timeout}\n[schedule]\n{schedule}\n"
        ),
    );
    sb.install_record(name, chrono::Utc::now());
}

#[test]
fn sync_creates_updates_and_prunes_checks_with_the_timers_own_schedule() {
    let hc = FakeHc::start();
    let orphan = hc
        .state
        .lock()
        .unwrap()
        .add("automations_gone", "automations-automations");
    let foreign = hc.state.lock().unwrap().add("someone-elses", "other");
    let sb = watched(&hc, "");
    installed(
        &sb,
        "backup",
        "daily_at = [\"08:00\", \"18:30\"]\nweekdays = [\"mon\", \"fri\"]",
        600,
    );
    installed(&sb, "poll", "every_minutes = 7", 60);
    installed(&sb, "hello", "at_login = true", 60);
    installed(&sb, "dump", "cron = \"30 2 * * mon-fri\"", 600);
    // Scheduled but not installed here: no check.
    sb.definition(
        "draft",
        "name = \"draft\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    // Started only by its [trigger]: installed, but nothing to expect pings on.
    sb.definition(
        "follow",
        "name = \"follow\"\ncommand = [\"true\"]\n[trigger]\nafter_success = [\"backup\"]\n",
    );
    sb.install_record("follow", chrono::Utc::now());

    let dry = sb.run(["healthchecks", "sync", "--dry-run"]);
    assert_code(&dry, 0);
    let out = stdout(&dry);
    for want in [
        "backup: create (schedule \"Mon,Fri *-*-* 08:00:00 | Mon,Fri *-*-* 18:30:00\" in Europe/Berlin, grace 930 s)",
        "poll: create (every 420 s (awake-time interval), grace 390 s)",
        "hello: no check: it runs only at login",
        "follow: no check: it is started only by its [trigger]",
        "automations_gone: orphaned",
        "dry run: nothing changed",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    assert!(
        !out.contains("draft") && !out.contains("someone-elses"),
        "{out}"
    );
    assert_eq!(hc.checks().len(), 2, "a dry run changes nothing");

    // The real thing: created with the timer's lines, notifying every integration; the orphan
    // is left without --prune. `hello` cannot have one, which is said (and no failure).
    let o = sb.run(["healthchecks", "sync"]);
    assert_code(&o, 0);
    let backup = hc.check("automations_backup");
    assert_eq!(
        backup.schedule.as_deref(),
        Some("Mon,Fri *-*-* 08:00:00\nMon,Fri *-*-* 18:30:00")
    );
    // The very lines of its timer.
    let timer = stdout(&sb.run(["render", "backup"]));
    for line in backup.schedule.as_deref().unwrap().lines() {
        assert!(timer.contains(&format!("OnCalendar={line}\n")), "{timer}");
    }
    assert_eq!(backup.tz.as_deref(), Some("Europe/Berlin"));
    assert_eq!((backup.grace, backup.channels.as_str()), (930, "*"));
    assert!(backup.tags.contains("automations-automations") && backup.desc.contains("The backup"));
    let poll = hc.check("automations_poll");
    assert_eq!((poll.timeout, poll.schedule.clone()), (Some(420), None));
    // A cron expression is a cron check, in numbers (names written out), with the zone.
    let dump = hc.check("automations_dump");
    assert_eq!(dump.schedule.as_deref(), Some("30 2 * * 1-5"));
    assert_eq!(dump.tz.as_deref(), Some("Europe/Berlin"));
    assert!(
        stdout(&o).contains("automations_gone: left (--prune deletes it)"),
        "{}",
        stdout(&o)
    );
    // `unique` made the create an upsert: a second sync finds everything in step.
    let again = sb.run(["healthchecks", "sync"]);
    assert!(
        stdout(&again).contains("backup: in step")
            && stdout(&again).contains("poll: in step")
            && stdout(&again).contains("dump: in step"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        hc.checks()
            .iter()
            .filter(|c| c.slug == "automations_backup")
            .count(),
        1
    );

    // An edited definition: `check` sees the drift, sync names the field and fixes it.
    installed(&sb, "backup", "daily_at = \"09:00\"", 600);
    let c = sb.run(["check"]);
    assert!(
        stdout(&c).contains("healthchecks: backup: update (schedule:"),
        "{}{}",
        stdout(&c),
        stderr(&c)
    );
    // Each line ends with its one fix (one line said `fix:` twice).
    for line in stdout(&c)
        .lines()
        .filter(|l| l.starts_with("healthchecks:"))
    {
        assert!(line.matches("fix:").count() <= 1, "{line}");
    }
    let o = sb.run(["healthchecks", "sync", "backup"]);
    assert!(stdout(&o).contains("backup: updated"), "{}", stdout(&o));
    assert_eq!(
        hc.check("automations_backup").schedule.as_deref(),
        Some("*-*-* 09:00:00")
    );

    // --prune deletes the orphan of this namespace, never a check of another.
    let o = sb.run(["healthchecks", "sync", "--prune"]);
    assert!(
        stdout(&o).contains("automations_gone: deleted"),
        "{}",
        stdout(&o)
    );
    let left: Vec<String> = hc.checks().into_iter().map(|c| c.uuid).collect();
    assert!(!left.contains(&orphan) && left.contains(&foreign));
    assert_nothing_holds(
        &sb,
        &[&dry, &o, &c],
        &[&orphan, &foreign, &hc.check("automations_backup").uuid],
    );
}

#[test]
fn a_refused_api_key_and_a_missing_one_are_said_and_nothing_changes() {
    let hc = FakeHc::start();
    let mut sb = watched(&hc, "");
    installed(&sb, "poll", "every_minutes = 7", 60);
    sb.env(
        "AUTOMATIONS_HEALTHCHECKS_API_KEY",
        "ak_wrongwrongwrongwrongwrongwron",
    );
    let o = sb.run(["healthchecks", "sync"]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("refused the API key (401 wrong api key)"),
        "{}",
        stderr(&o)
    );
    assert!(hc.checks().is_empty());
    // `check` says it did not look, and is no failure for it.
    let c = sb.run(["check"]);
    assert!(
        stdout(&c).contains("healthchecks: the remote checks were not looked at"),
        "{}{}",
        stdout(&c),
        stderr(&c)
    );
    assert!(!stderr(&o).contains("ak_wrong"));
}

#[test]
fn pause_resume_and_the_kill_switch_follow_on_the_remote_checks() {
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    installed(&sb, "a", "every_minutes = 7", 60);
    installed(&sb, "b", "every_minutes = 7", 60);
    assert_code(&sb.run(["healthchecks", "sync"]), 0);
    let o = sb.run(["pause", "a", "--reason", "maintenance"]);
    assert!(
        stdout(&o).contains("healthchecks: a: remote check paused"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.check("automations_a").status, "paused");
    assert_eq!(hc.check("automations_b").status, "new");
    let o = sb.run(["stop-all", "--reason", "incident"]);
    assert_code(&o, 0);
    assert!(hc.checks().iter().all(|c| c.status == "paused"));
    // resume-all leaves `a`, paused on its own, paused.
    let o = sb.run(["resume-all"]);
    assert_code(&o, 0);
    assert_eq!(hc.check("automations_a").status, "paused");
    assert_eq!(hc.check("automations_b").status, "new");
    let o = sb.run(["resume", "a"]);
    assert!(
        stdout(&o).contains("healthchecks: a: remote check resumed"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.check("automations_a").status, "new");
    // Status: each remote status beside the local verdict.
    let o = sb.run(["healthchecks", "status", "--json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["automations"][0]["name"], "a");
    assert_eq!(doc["automations"][0]["remote"], "new");
    assert_eq!(doc["automations"][0]["verdict"], "unknown");
    // Without an API key the local pause still happens, and it says the remote one did not.
    let mut sb2 = watched(&hc, "");
    installed(&sb2, "a", "every_minutes = 7", 60);
    sb2.env("AUTOMATIONS_HEALTHCHECKS_API_KEY", "");
    let o = sb2.run(["pause", "a", "--reason", "x"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("healthchecks: the remote check(s) were not paused: "),
        "{}",
        stdout(&o)
    );
}

/// The keys kept in the real keyring (a private Secret Service): each is checked with the server
/// before it is stored, a refused one is not stored, the firing reads them from there, and no
/// typed key is echoed or written anywhere.
#[test]
#[ignore = "a real component: gnome-keyring's Secret Service in a D-Bus session"]
fn keys_are_checked_with_the_server_before_the_real_keyring_stores_them() {
    let hc = FakeHc::start();
    hc.state
        .lock()
        .unwrap()
        .add("automations_job", "automations-automations");
    let mut sb = Sandbox::new();
    let Some(keyring) = Keyring::start(&mut sb, "healthchecks_keys_in_the_real_keyring") else {
        return;
    };
    watch(&mut sb, &hc, "");
    let store = |kind: &str, key: &str| {
        run_on_pty_answers(
            sb.cmd(["secret", "store", &format!("healthchecks.{kind}")]),
            &[(&format!("Healthchecks {kind} key (input hidden): "), key)],
        )
    };
    let (api_label, ping_label) = (
        "local.automations.healthchecks.api",
        "local.automations.healthchecks.ping",
    );
    let mut said = String::new();
    // A key of the wrong form is refused before the server is asked.
    let r = store("api", "short");
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("not stored") && r.output.contains("32"),
        "{}",
        r.output
    );
    // A well-formed key the server refuses is not stored.
    let r = store("api", "ak_wrongwrongwrongwrongwrongwron");
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("not stored") && r.output.contains("401"),
        "{}",
        r.output
    );
    assert_eq!(keyring.lookup(api_label), None);
    said += &r.output;
    // The right one is stored, after the server listed the namespace's checks with it.
    let r = store("api", API_KEY);
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output.contains("1 check(s) of this namespace"),
        "{}",
        r.output
    );
    assert_eq!(keyring.lookup(api_label).as_deref(), Some(API_KEY));
    said += &r.output;
    // A ping key is proved by a /log ping to a check of the namespace; a wrong one gets a 404.
    let r = store("ping", "pk_wrongwrongwrongwron");
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("not stored") && r.output.contains("does not know automations_job"),
        "{}",
        r.output
    );
    assert_eq!(keyring.lookup(ping_label), None);
    let r = store("ping", PING_KEY);
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert_eq!(keyring.lookup(ping_label).as_deref(), Some(PING_KEY));
    said += &r.output;
    let logs: Vec<Pinged> = hc.pings().into_iter().filter(|p| p.kind == "log").collect();
    assert_eq!(logs.len(), 1, "one log ping proved the right key");
    for kind in ["api", "ping"] {
        let o = sb.run(["secret", "check", &format!("healthchecks.{kind}")]);
        assert_code(&o, 0);
        assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
    }
    // Without a terminal: refused before anything is asked.
    let o = sb.run(["secret", "store", "healthchecks.api"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("needs a terminal"), "{}", stderr(&o));
    // A firing reads the ping key from the keyring.
    pinged_job(&sb, "job", "true", "");
    let run = sb.run(["run", "job"]);
    assert_code(&run, 0);
    let kinds: Vec<String> = hc.pings().into_iter().map(|p| p.kind).collect();
    // (`secret check healthchecks.ping` proved it again with a second log ping.)
    assert_eq!(kinds, ["log", "log", "start", "exit 0"], "{}", stderr(&run));
    // Deleted, and then said to be missing.
    for kind in ["api", "ping"] {
        assert_code(
            &sb.run(["secret", "delete", &format!("healthchecks.{kind}")]),
            0,
        );
        let o = sb.run(["secret", "check", &format!("healthchecks.{kind}")]);
        assert_code(&o, 1);
        assert!(stdout(&o).contains("is stored"), "{}", stdout(&o));
    }
    assert_eq!(keyring.lookup(api_label), None);
    assert_eq!(keyring.lookup(ping_label), None);
    for key in [API_KEY, PING_KEY, "ak_wrong", "pk_wrong"] {
        assert!(!said.contains(key), "{key} echoed: {said}");
    }
    assert_nothing_holds(&sb, &[&o, &run], &[]);
}

/// Install offers the sync when healthchecks.toml exists; uninstall says whether the remote check
/// is left, or that it could not look.
#[test]
fn install_makes_the_check_and_uninstall_says_what_is_left_remotely() {
    let hc = FakeHc::start();
    let mut sb = crate::systemd::shipped();
    watch(&mut sb, &hc, "");
    sb.env("AUTOMATIONS_HEALTHCHECKS_API_KEY", API_KEY);
    // The install makes its check right away, and says so: its first firing pings a check that
    // is there.
    let r = crate::systemd::install(&sb, "heartbeat");
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output.contains("its remote check is made now")
            && r.output.contains("heartbeat: created"),
        "{}",
        r.output
    );
    hc.check("automations_heartbeat");
    // Uninstalled: the check is left on the server, and said so; what came of its pings (a
    // failing streak included) goes with the install.
    let pings = sb.data.join("state/healthchecks/heartbeat.json");
    std::fs::create_dir_all(pings.parent().unwrap()).unwrap();
    write_private(
        &pings,
        r#"{"at":"2026-12-01T10:00:00.000Z","ping":"start","ok":false,"answer":"x","failures_in_row":4}"#,
    );
    let r = crate::systemd::uninstall(&sb, "heartbeat");
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output.contains("its remote check is left on the server"),
        "{}",
        r.output
    );
    assert!(!pings.exists(), "the ping streak goes with the install");
    hc.check("automations_heartbeat");
    // Without the API key no check can be made, and the install says how to make it later; the
    // uninstall cannot look, and says so.
    sb.env("AUTOMATIONS_HEALTHCHECKS_API_KEY", "");
    let r = crate::systemd::install(&sb, "heartbeat");
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output
            .contains("healthchecks: no check was made or checked (")
            && r.output.contains("automations healthchecks sync heartbeat"),
        "{}",
        r.output
    );
    let r = crate::systemd::uninstall(&sb, "heartbeat");
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output
            .contains("a remote check may be left on the server (not looked"),
        "{}",
        r.output
    );
    assert!(!r.output.contains(API_KEY));
}

/// Regression: with a `healthchecks.toml`, every run of an automation without a check (manual
/// only, not installed, at login only) pinged a check `sync` never makes: "start ping failed (404)",
/// then DEGRADED "its last 4 Healthchecks pings failed" and a notification, a reason that
/// survived `ack`, a later `sync` and uninstall. Only automations with a check are pinged now, and
/// an ack or a sync starts the streak again.
#[test]
fn only_automations_with_a_check_are_pinged_and_an_ack_or_a_sync_ends_a_failing_streak() {
    let hc = FakeHc::start();
    let mut sb = watched(&hc, "");
    sb.shell_definition("photo", "true", "");
    sb.shell_definition("notyet", "true", "[schedule]\nevery_minutes = 60\n");
    sb.shell_definition("login", "true", "[schedule]\nat_login = true\n");
    sb.install_record("login", chrono::Utc::now());
    for name in ["photo", "notyet", "login", "photo", "notyet", "login"] {
        let o = sb.run(["run", name]);
        assert_code(&o, 0);
        assert!(!stderr(&o).contains("ping"), "{name}: {}", stderr(&o));
    }
    assert!(hc.pings().is_empty(), "{:?}", hc.pings());
    let h = sb.run(["health", "--json"]);
    assert!(!stdout(&h).contains("pings_failing"), "{}", stdout(&h));
    // Installed, its check not made yet: its pings fail (404), which is true, and health says so
    // after three.
    pinged_job(&sb, "job", "true", "");
    let streak = |sb: &Sandbox| {
        for _ in 0..2 {
            assert_code(&sb.run(["run", "job"]), 0);
        }
        let h = sb.run(["health", "job", "--json"]);
        assert!(stdout(&h).contains("pings_failing"), "{}", stdout(&h));
        assert!(
            stdout(&h).contains("automations healthchecks status"),
            "{}",
            stdout(&h)
        );
    };
    streak(&sb);
    // Acknowledged: the failed pings are history.
    assert_code(&sb.run(["ack", "job"]), 0);
    let h = sb.run(["health", "job", "--json"]);
    assert!(!stdout(&h).contains("pings_failing"), "{}", stdout(&h));
    // Failing again, then a sync makes the check: history too, and the next pings reach it.
    streak(&sb);
    sb.env("AUTOMATIONS_HEALTHCHECKS_API_KEY", API_KEY);
    assert_code(&sb.run(["healthchecks", "sync", "job"]), 0);
    let h = sb.run(["health", "job", "--json"]);
    assert!(!stdout(&h).contains("pings_failing"), "{}", stdout(&h));
    assert_code(&sb.run(["run", "job"]), 0);
    assert_eq!(hc.check("automations_job").status, "up");
    // `status` lists the at-login automation as having no check, as sync says, not "missing".
    let st = sb.run(["healthchecks", "status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let login = doc["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "login")
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(login["remote"], "none", "{doc}");
}

/// Regression: a ping answer kept 60 characters of what the server said with only control bytes
/// removed: a server or proxy echoing the path (`Cannot POST /ping/<key>/…`) put the ping key, or
/// a check's UUID, into stderr, the ping state, `health`, `healthchecks status` and the dashboard;
/// an API error the same for check UUIDs. Every answer kept or shown is now cut of them.
#[test]
fn a_server_that_echoes_the_path_never_puts_a_key_or_uuid_anywhere() {
    let hc = FakeHc::start();
    let uuid = hc
        .state
        .lock()
        .unwrap()
        .add("byid", "automations-automations");
    hc.state
        .lock()
        .unwrap()
        .add("automations_byslug", "automations-automations");
    let sb = watched(&hc, &format!("[checks]\nbyid = \"{uuid}\"\n"));
    installed(&sb, "byid", "every_minutes = 7", 60);
    installed(&sb, "byslug", "every_minutes = 7", 60);
    hc.state.lock().unwrap().echo = true;
    let mut outputs = Vec::new();
    for name in ["byid", "byslug"] {
        let o = sb.run(["run", name]);
        assert_code(&o, 0);
        assert!(
            stderr(&o).contains("refused: 404 Cannot POST [redacted]"),
            "{}",
            stderr(&o)
        );
        outputs.push(o);
    }
    for args in [
        &["pause", "byid", "--reason", "x"][..],
        &["resume", "byid"],
        &["healthchecks", "sync"],
        &["healthchecks", "status"],
        &["healthchecks", "status", "--json"],
        &["health"],
        &["health", "--json"],
    ] {
        outputs.push(sb.run(args));
    }
    let said: String = outputs.iter().map(|o| stdout(o) + &stderr(o)).collect();
    assert!(
        said.contains("[uuid]") || said.contains("[redacted]"),
        "{said}"
    );
    let dash = crate::dashboard::Dashboard::start(&sb);
    let (_, page) = crate::dashboard::page_of(&dash, "/");
    let (_, api) = crate::dashboard::page_of(&dash, "/api/automations");
    for text in [&said, &page, &api] {
        for secret in [PING_KEY, API_KEY, uuid.as_str()] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
    }
    let refs: Vec<&std::process::Output> = outputs.iter().collect();
    assert_nothing_holds(&sb, &refs, &[&uuid]);
}

/// Regression: `healthchecks sync --prune` deleted the remote check of an installed automation
/// whose definition was invalid for a moment (exit 0, no word of it); its unit kept firing into a
/// deleted check and the check's history was lost. An installed automation's check is now claimed
/// whatever its definition's state, and `--prune` refuses while a definition is invalid.
#[test]
fn prune_never_deletes_the_check_of_an_installed_automation_with_a_broken_definition() {
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    installed(&sb, "a", "every_minutes = 7", 60);
    installed(&sb, "b", "every_minutes = 7", 60);
    assert_code(&sb.run(["healthchecks", "sync"]), 0);
    assert_eq!(hc.checks().len(), 2);
    // b's definition broken, as an edit in progress leaves it.
    sb.definition("b", "name = \"b\"\ncommand = \"not a list\"\n");
    let o = sb.run(["healthchecks", "sync", "--prune"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("--prune refused") && stderr(&o).contains("automations/b.toml"),
        "{}",
        stderr(&o)
    );
    assert_eq!(hc.checks().len(), 2, "nothing deleted");
    // Without --prune the rest is synced and b's check is said to be left as it is.
    let o = sb.run(["healthchecks", "sync"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o)
            .contains("b: no check: its definition cannot be read (automations/b.toml: command:"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.checks().len(), 2);
    // A definition gone while it is installed: its check is still its own, not an orphan.
    std::fs::remove_file(sb.root.join("automations/b.toml")).unwrap();
    let o = sb.run(["healthchecks", "sync", "--prune"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("automations/b.toml is gone"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.checks().len(), 2, "{}", stdout(&o));
    // Once uninstalled (its record gone) it is an orphan, and pruned.
    std::fs::remove_file(sb.data.join("state/installed/b.json")).unwrap();
    let o = sb.run(["healthchecks", "sync", "--prune"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("automations_b: deleted"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.checks().len(), 1);
}

/// Regression: what a Healthchecks server says (a check's status, its last ping, an orphan's
/// name or slug, an API error) reached the terminal raw from `healthchecks status`, `sync` and the
/// remote-check line of `pause`: its escapes drove the terminal. They are now shown as text.
#[test]
fn terminal_escapes_from_a_healthchecks_server_are_shown_not_obeyed() {
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    installed(&sb, "a", "every_minutes = 7", 60);
    assert_code(&sb.run(["healthchecks", "sync"]), 0);
    {
        let mut st = hc.state.lock().unwrap();
        st.checks[0].status = "\u{1b}]0;owned\u{7}\u{1b}[31mdown".into();
        let orphan = st.add("\u{1b}[2Jgone", "automations-automations");
        let last = st.checks.len() - 1;
        st.checks[last].name = "\u{1b}[2Jorphan".into();
        assert!(!orphan.is_empty());
    }
    let mut said = String::new();
    for args in [
        &["healthchecks", "status"][..],
        &["healthchecks", "sync", "--dry-run"],
        &["check"],
    ] {
        let o = sb.run(args);
        said += &(stdout(&o) + &stderr(&o));
    }
    hc.state.lock().unwrap().echo = true;
    let o = sb.run(["pause", "a", "--reason", "x"]);
    said += &(stdout(&o) + &stderr(&o));
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{7}'),
        "{said:?}"
    );
    assert!(said.contains("\\u{1b}[31mdown"), "{said}");
    assert!(said.contains("\\u{1b}[2Jgone"), "{said}");
}

/// Regression: the dashboard's pause, resume, stop-all and resume-all made no Healthchecks calls,
/// while the command line pauses and resumes the remote checks. Now the dashboard does what the
/// command does, and says so.
#[test]
fn the_dashboards_pause_and_kill_switch_follow_on_the_remote_checks() {
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    installed(&sb, "a", "every_minutes = 7", 60);
    installed(&sb, "b", "every_minutes = 7", 60);
    assert_code(&sb.run(["healthchecks", "sync"]), 0);
    let dash = crate::dashboard::Dashboard::start(&sb);
    let post = |path: &str| -> serde_json::Value {
        let r = reqwest::blocking::Client::new()
            .post(format!("http://127.0.0.1:{}{path}", dash.port))
            .header("Cookie", format!("automations_dashboard={}", dash.cookie))
            .header("Origin", format!("http://127.0.0.1:{}", dash.port))
            .header("Content-Type", "application/json")
            .body("{\"reason\":\"maintenance\"}")
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        serde_json::from_str(&r.text().unwrap()).unwrap()
    };
    let doc = post("/api/pause/a");
    assert_eq!(
        doc["healthchecks"][0], "healthchecks: a: remote check paused",
        "{doc}"
    );
    assert_eq!(hc.check("automations_a").status, "paused");
    assert_eq!(hc.check("automations_b").status, "new");
    post("/api/stop-all");
    assert!(hc.checks().iter().all(|c| c.status == "paused"));
    post("/api/resume-all");
    assert_eq!(
        hc.check("automations_a").status,
        "paused",
        "paused on its own"
    );
    assert_eq!(hc.check("automations_b").status, "new");
    let doc = post("/api/resume/a");
    assert_eq!(
        doc["healthchecks"][0], "healthchecks: a: remote check resumed",
        "{doc}"
    );
    assert_eq!(hc.check("automations_a").status, "new");
}

/// Regression: check slugs collided across namespaces: namespace `a` with `b-c` and namespace
/// `a-b` with `c` both became `a-b-c`, so one sync took over the other's check and a prune could
/// delete it. Slugs are now `<namespace>_<name>` (neither holds a `_`); a check another
/// namespace's tag claims is never taken over; and a check of the old form is carried over to
/// the new slug only by its own namespace.
#[test]
fn check_slugs_never_collide_across_namespaces() {
    let hc = FakeHc::start();
    let a = watched(&hc, "");
    installed(&a, "b-c", "every_minutes = 7", 60);
    let mut ab = watched(&hc, "");
    ab.env("AUTOMATIONS_NAMESPACE", "a-b");
    installed(&ab, "c", "every_minutes = 7", 60);
    let mut a = a;
    a.env("AUTOMATIONS_NAMESPACE", "a");
    // Checks of the old form, each tagged by its namespace: each is carried over by its own.
    let old_a = hc.state.lock().unwrap().add("a-b-c", "automations-a");
    let old_ab = hc.state.lock().unwrap().add("a-b-c", "automations-a-b");
    // The install records name the default namespace's labels; the namespace is what decides.
    let o = a.run(["healthchecks", "sync"]);
    assert_code(&o, 0);
    let o2 = ab.run(["healthchecks", "sync"]);
    assert_code(&o2, 0);
    let checks = hc.checks();
    let of = |uuid: &str| checks.iter().find(|c| c.uuid == uuid).unwrap().slug.clone();
    assert_eq!(of(&old_a), "a_b-c", "{}", stdout(&o));
    assert_eq!(of(&old_ab), "a-b_c", "{}", stdout(&o2));
    assert_eq!(checks.len(), 2, "nothing created, nothing taken over");
    // Each namespace's firing pings its own check.
    assert_code(&a.run(["run", "b-c"]), 0);
    assert_code(&ab.run(["run", "c"]), 0);
    let pinged: Vec<String> = hc.pings().into_iter().map(|p| p.uuid).collect();
    assert!(
        pinged.contains(&old_a) && pinged.contains(&old_ab),
        "{pinged:?}"
    );
    // A check with this slug that another namespace's tag claims is refused, and named.
    let mut z = watched(&hc, "");
    z.env("AUTOMATIONS_NAMESPACE", "a");
    installed(&z, "b-c", "every_minutes = 7", 60);
    {
        let mut st = hc.state.lock().unwrap();
        let i = st.checks.iter().position(|c| c.uuid == old_a).unwrap();
        st.checks[i].tags = "automations-zzz".into();
    }
    let o = z.run(["healthchecks", "sync"]);
    assert!(
        stdout(&o)
            .contains("b-c: no check: the check with the slug a_b-c belongs to namespace zzz"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hc.checks().len(), 2, "not taken over, not duplicated");
}

/// Regression: a check's description read "Is my website up?. site-check on vm…".
#[test]
fn a_description_that_ends_a_sentence_is_not_given_a_second_end() {
    let hc = FakeHc::start();
    let sb = watched(&hc, "");
    for (name, description) in [("site", "Is my website up?"), ("plain", "Mails the digest")] {
        sb.definition(
            name,
            &format!(
                "name = \"{name}\"\ndescription = \"{description}\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 60\n"
            ),
        );
        sb.install_record(name, chrono::Utc::now());
    }
    assert_code(&sb.run(["healthchecks", "sync"]), 0);
    let site = hc.check("automations_site").desc;
    assert!(site.starts_with("Is my website up? site on "), "{site}");
    let plain = hc.check("automations_plain").desc;
    assert!(plain.starts_with("Mails the digest. plain on "), "{plain}");
}
