//! The dashboard, used the way a person uses it: a real Chromium driven over WebDriver
//! (chromedriver), and its refusals checked over plain HTTP.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::webdriver::{Client, Locator};

use crate::harness::*;

/// A running `automations dashboard`, stopped on drop.
pub(crate) struct Dashboard {
    child: Child,
    url: String,
    pub(crate) port: u16,
    token: String,
    /// The session cookie's value (not the token).
    pub(crate) cookie: String,
}

impl Dashboard {
    pub(crate) fn start(sb: &Sandbox) -> Self {
        Self::start_with(sb, &["dashboard", "--no-open"])
    }

    fn start_with(sb: &Sandbox, args: &[&str]) -> Self {
        Self::start_from(sb.cmd(args), sb)
    }

    /// Under a limit of `files` open files (soft and hard), as a hostile neighbour would find it.
    fn start_limited(sb: &Sandbox, files: u64) -> Self {
        let mut cmd = sb.cmd(["dashboard", "--no-open"]);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_NOFILE,
                    files,
                    files,
                )
                .map_err(std::io::Error::from)
            });
        }
        Self::start_from(cmd, sb)
    }

    /// Starts the dashboard with its stdout a pipe (not a terminal): it prints its address without
    /// the token, which is read from the data root as a person would (its opening page).
    fn start_from(mut cmd: Command, sb: &Sandbox) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .strip_prefix("dashboard: ")
            .unwrap_or_else(|| panic!("printed {line:?}"))
            .to_owned();
        assert!(!address.contains("token="), "the token was printed: {line}");
        let port: u16 = address
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let page = sb.data.join("dashboard-open.html");
        assert!(address.contains(page.to_str().unwrap()), "{line}");
        let html = std::fs::read_to_string(&page).unwrap();
        let token = html
            .split("token=")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned();
        assert_eq!(
            std::fs::read_to_string(sb.data.join("dashboard.token"))
                .unwrap()
                .trim(),
            token
        );
        let url = format!("http://127.0.0.1:{port}/?token={token}");
        // What a browser gets for the token: the session cookie.
        let answer = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(&url)
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        let set = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
        let cookie = set
            .split(';')
            .next()
            .unwrap()
            .strip_prefix("automations_dashboard=")
            .unwrap_or_else(|| panic!("{set}"))
            .to_owned();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        Self {
            child,
            url,
            port,
            token,
            cookie,
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver on a free port, stopped on drop.
struct Driver {
    child: Child,
    pub(crate) port: u16,
}

impl Driver {
    fn start(test: &str) -> Option<Self> {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            if !std::path::Path::new(tool).exists() {
                skip(
                    test,
                    &format!("{tool} is missing (apt-get install chromium chromium-driver)"),
                );
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Its own process group, so that dropping it also ends the browsers it started (a test
        // that fails before closing its session would leave them running).
        let child = Command::new("/usr/bin/chromedriver")
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Driver { child, port };
        wait_for("chromedriver", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(d)
    }

    fn session(&self, profile: &std::path::Path) -> Client {
        self.session_with(profile, &[])
    }

    /// A session whose browser also gets `extra` flags (`--force-dark-mode`).
    fn session_with(&self, profile: &std::path::Path, extra: &[&str]) -> Client {
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,800",
            "--no-first-run",
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ]
        .iter()
        .chain(extra)
        .map(|a| (*a).to_owned())
        .collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": "/usr/bin/chromium", "args": args }),
        );
        let c = Client::connect(
            &format!("http://127.0.0.1:{}", self.port),
            serde_json::Value::Object(caps),
        )
        .expect("a WebDriver session");
        page_size(&c, 1280, 800);
        c
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const XSS: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

/// A sandbox with automations of every kind the page must show.
fn shop() -> Sandbox {
    let sb = Sandbox::new();
    // From the dashboard, the run waits (up to 60 s) until the test has seen it in progress and
    // opens the gate.
    sb.script(
        "backup.sh",
        &format!(
            "#!/bin/sh\nif [ \"$AUTOMATION_TRIGGER\" = dashboard ]; then i=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi\necho backed up 3 files\n\"$AUTOMATION_BIN\" result files=3 --headline files\n",
            sb.path("gate").display()
        ),
    );
    sb.definition(
        "backup",
        "name = \"backup\"\ndescription = \"Copies the notes folder\"\ncommand = [\"scripts/backup.sh\"]\n[schedule]\nevery_minutes = 60\n",
    );
    sb.definition(
        "digest",
        "name = \"digest\"\ndescription = \"Mails the open tasks\"\ncommand = [\"sh\", \"-c\", \"echo mail server refused >&2; exit 1\"]\noutbound = true\n[schedule]\ndaily_at = \"07:30\"\n",
    );
    sb.definition(
        "report",
        "name = \"report\"\ndescription = \"Weekly report\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\nweekdays = [\"mon\"]\n",
    );
    sb.definition(
        "xss",
        &format!(
            "name = \"xss\"\ncommand = [\"printf\", \"%s\", {}]\n",
            serde_json::to_string(XSS).unwrap()
        ),
    );
    sb.definition("broken", "name = \"broken\"\ncommand = []\n");
    // Installed here: a scheduled automation that is not is unknown, whatever its runs.
    sb.install_record("digest", chrono::Utc::now() - chrono::Duration::days(1));
    for _ in 0..3 {
        sb.run(["run", "backup"]);
        sb.run(["run", "digest"]);
    }
    sb.run(["run", "report"]);
    sb.run(["run", "xss"]);
    // A unit still firing a definition that is gone.
    sb.run(["run", "gone", "--trigger", "schedule"]);
    sb
}

fn card(name: &str, inner: &str) -> Locator<'static> {
    Locator::Css(Box::leak(
        format!("article[data-name='{name}'] {inner}").into_boxed_str(),
    ))
}

/// Opens an automation's row (its details), if it is not open yet.
fn open_row(c: &Client, name: &str) {
    let open = c
        .execute(
            "const d = document.querySelector(\"article[data-name='\" + arguments[0] + \"'] > details\"); return d.open;",
            vec![serde_json::json!(name)],
        )
        .unwrap();
    if open != serde_json::Value::Bool(true) {
        let summary = c.find(card(name, "> details > summary")).unwrap();
        c.execute(
            "arguments[0].scrollIntoView({block: 'center'}); return null;",
            vec![serde_json::to_value(&summary).unwrap()],
        )
        .unwrap();
        summary.click().unwrap();
    }
}

fn text_of(c: &Client, name: &str, inner: &str) -> String {
    c.find(card(name, inner)).unwrap().text().unwrap()
}

/// Fails with `what` when the page was loaded again since `window.__still_here` was set.
fn assert_not_reloaded(c: &Client, what: &str) {
    let still = c
        .execute("return window.__still_here === true;", vec![])
        .unwrap();
    assert_eq!(still, serde_json::Value::Bool(true), "{what}");
}

fn wait_text(c: &Client, name: &str, inner: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let t = text_of(c, name, inner);
        if ok(&t) {
            return t;
        }
        assert!(Instant::now() < until, "{what}: still {t:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "a real component: chromium and chromedriver"]
fn a_person_sees_every_automation_runs_one_and_pauses_another() {
    let Some(driver) = Driver::start("a_person_sees_every_automation") else {
        return;
    };
    let mut sb = shop();
    let argv_file = fake_opener(&mut sb);
    let dash = Dashboard::start_with(&sb, &["dashboard"]);
    let page = opened(&argv_file);
    let profile = sb.path("chromium-profile");
    {
        let c = driver.session(&profile);
        // What the browser is opened on: the private file that forwards to the token's address.
        // The token then moves from the address into a cookie, and the page loads.
        c.goto(&format!("file://{}", page.display())).unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while c.find(Locator::Css("article.row")).is_err() {
            assert!(
                Instant::now() < until,
                "the page never loaded: {}",
                c.source().unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let at = c.current_url().unwrap();
        assert_eq!(at.as_str(), format!("http://127.0.0.1:{}/", dash.port));
        // The printed address, opened by hand (a click in the terminal), lands there too.
        c.goto(&dash.url).unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while !c
            .current_url()
            .unwrap()
            .as_str()
            .ends_with(&format!("{}/", dash.port))
            || c.find(Locator::Css("article.row")).is_err()
        {
            assert!(
                Instant::now() < until,
                "the printed address did not land on the page"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Every automation, the broken one and the one known only from the log included, and
        // those two degraded — degraded ones first.
        let cards = c.find_all(Locator::Css("article.row")).unwrap();
        let mut names = Vec::new();
        for a in &cards {
            names.push(a.attr("data-name").unwrap().unwrap());
        }
        for n in ["backup", "digest", "report", "xss", "broken", "gone"] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        for n in ["broken", "gone", "digest"] {
            let class = c
                .find(Locator::Css(Box::leak(
                    format!("article[data-name='{n}']").into_boxed_str(),
                )))
                .unwrap()
                .attr("class")
                .unwrap()
                .unwrap();
            assert!(class.contains("degraded"), "{n}: {class}");
        }
        let first_healthy = names.iter().position(|n| n == "backup").unwrap();
        assert!(
            names[..first_healthy]
                .iter()
                .all(|n| ["broken", "gone", "digest"].contains(&n.as_str())),
            "{names:?}"
        );
        for n in ["gone", "backup", "report", "xss"] {
            open_row(&c, n);
        }
        assert!(
            text_of(&c, "gone", "[data-field=reasons]").contains("reinstall or uninstall its unit")
        );

        // Run now: the run in progress (it waits for the gate), then its outcome, without a
        // reload.
        c.execute("window.__still_here = true; return null;", vec![])
            .unwrap();
        c.find(card("backup", "button[data-action=run]"))
            .unwrap()
            .click()
            .unwrap();
        wait_text(
            &c,
            "backup",
            "[data-field=state]",
            "the run in progress",
            |t| t == "running",
        );
        // Run now is disabled while it runs.
        let until = Instant::now() + Duration::from_secs(20);
        while c
            .find(card("backup", "button[data-action=run]"))
            .unwrap()
            .is_enabled()
            .unwrap()
        {
            assert!(
                Instant::now() < until,
                "Run now stayed enabled while running"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::write(sb.path("gate"), "").unwrap();
        let last = wait_text(
            &c,
            "backup",
            "[data-field=last]",
            "the run's outcome",
            |t| t.starts_with("ok ") && t.ends_with("dashboard"),
        );
        assert!(last.contains(" s · "), "{last}");
        assert_not_reloaded(&c, "the page was reloaded");
        assert!(
            sb.events("started")
                .iter()
                .any(|e| e["name"] == "backup" && e["trigger"] == "dashboard")
        );

        // Pause with a reason: shown in the page and in `automations list`.
        let input = c.find(card("report", "input[name=reason]")).unwrap();
        input.send_keys("on vacation").unwrap();
        c.find(card("report", "button[data-action=pause]"))
            .unwrap()
            .click()
            .unwrap();
        wait_text(&c, "report", "[data-field=state]", "the pause", |t| {
            t == "paused: on vacation"
        });
        let list = stdout(&sb.run(["list"]));
        assert!(
            list.lines()
                .any(|l| l.starts_with("report") && l.contains("paused (on vacation)")),
            "{list}"
        );
        // Snooze, with a reason: its notifications are held for 4 h, said in the row and in
        // `automations list`, recorded; Unsnooze ends it.
        open_row(&c, "digest");
        let input = c.find(card("digest", "input[name=reason]")).unwrap();
        input.send_keys("planned move").unwrap();
        c.find(card("digest", "button[data-action=snooze]"))
            .unwrap()
            .click()
            .unwrap();
        wait_text(&c, "digest", "[data-field=state]", "the snooze", |t| {
            t.contains(", snoozed until ")
        });
        // For a person to look at: target/dashboard-snoozed.png.
        let png = c.screenshot().unwrap();
        std::fs::write(repo_root().join("target/dashboard-snoozed.png"), png).unwrap();
        let snoozed = sb.events("snoozed");
        assert_eq!(snoozed.len(), 1);
        assert_eq!(
            (&snoozed[0]["name"], &snoozed[0]["reason"]),
            (
                &serde_json::json!("digest"),
                &serde_json::json!("planned move")
            )
        );
        assert!(
            stdout(&sb.run(["list"]))
                .lines()
                .any(|l| l.starts_with("digest") && l.contains(", snoozed until ")),
        );
        c.find(card("digest", "button[data-action=unsnooze]"))
            .unwrap()
            .click()
            .unwrap();
        wait_text(
            &c,
            "digest",
            "[data-field=state]",
            "the snooze's end",
            |t| !t.contains("snoozed"),
        );
        assert_eq!(sb.events("unsnoozed").len(), 1);

        // Regression: Enter in a card's reason field submitted its form as a page load, and
        // nothing was paused. It pauses, in place.
        let input = c.find(card("xss", "input[name=reason]")).unwrap();
        input
            .send_keys(&format!("lunch{}", crate::webdriver::ENTER))
            .unwrap();
        wait_text(&c, "xss", "[data-field=state]", "the pause by Enter", |t| {
            t == "paused: lunch"
        });
        assert_not_reloaded(&c, "Enter reloaded the page");

        // A run's output is text: shown literally, and no dialog opens.
        c.find(card("xss", "details.latest summary"))
            .unwrap()
            .click()
            .unwrap();
        let out = text_of(&c, "xss", "pre.output");
        assert_eq!(out, XSS);
        assert!(c.get_alert_text().is_err(), "a dialog opened");

        assert!(c.get_alert_text().is_err(), "a dialog opened");
        c.close().unwrap();
    };
    sb.assert_log_verifies();
}

fn http(
    dash: &Dashboard,
    method: &str,
    path: &str,
    host: Option<&str>,
    origin: Option<&str>,
    cookie: bool,
) -> u16 {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}{path}", dash.port);
    let mut rb = client.request(method.parse().unwrap(), url);
    if let Some(h) = host {
        rb = rb.header("Host", h);
    }
    if let Some(o) = origin {
        rb = rb.header("Origin", o);
    }
    if cookie {
        rb = rb.header("Cookie", format!("automations_dashboard={}", dash.cookie));
    }
    rb.body("{\"reason\":\"x\"}")
        .send()
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn what_the_dashboard_refuses() {
    let sb = shop();
    let dash = Dashboard::start(&sb);
    let local = format!("http://127.0.0.1:{}", dash.port);
    // No token: refused.
    assert_eq!(http(&dash, "GET", "/", None, None, false), 401);
    assert_eq!(
        http(&dash, "GET", "/api/automations", None, None, false),
        401
    );
    // The token once: a page that sets the cookie and moves on to `/`.
    assert_eq!(
        http(
            &dash,
            "GET",
            &format!("/?token={}", dash.token),
            None,
            None,
            false
        ),
        200
    );
    assert_eq!(http(&dash, "GET", "/?token=0000", None, None, false), 401);
    assert_eq!(
        http(&dash, "GET", "/api/automations", None, None, true),
        200
    );
    // DNS rebinding: another Host is refused even with the token.
    let evil_host = format!("evil.example:{}", dash.port);
    assert_eq!(http(&dash, "GET", "/", Some(&evil_host), None, true), 403);
    // Cross-site writes: refused, and nothing changes.
    let before = sb.log_lines().len();
    assert_eq!(
        http(
            &dash,
            "POST",
            "/api/stop-all",
            None,
            Some("http://evil.example"),
            true
        ),
        403
    );
    assert_eq!(
        http(&dash, "POST", "/api/pause/report", None, None, true),
        403
    );
    assert_eq!(
        sb.log_lines().len(),
        before,
        "a refused write changed the log"
    );
    assert!(!sb.data.join("state/stop-all.json").exists());
    // The page's own origin may write; a name that is no definition may not run.
    assert_eq!(
        http(
            &dash,
            "POST",
            "/api/run/nonexistent",
            None,
            Some(&local),
            true
        ),
        400
    );
    assert_eq!(
        http(&dash, "POST", "/api/stop-all", None, Some(&local), true),
        200
    );
    assert!(sb.data.join("state/stop-all.json").exists());
    assert_eq!(sb.events("stop_all").len(), 1);
    // Acknowledge : an `ack` event with the reason given; never without the origin.
    assert_eq!(
        http(&dash, "POST", "/api/ack/report", None, None, true),
        403
    );
    assert_eq!(
        http(&dash, "POST", "/api/ack/report", None, Some(&local), true),
        200
    );
    let acks = sb.events("ack");
    assert_eq!(acks.len(), 1);
    assert_eq!(
        (&acks[0]["name"], &acks[0]["reason"]),
        (&"report".into(), &"x".into())
    );
    // JSON twins: the CLI's shapes.
    let client = reqwest::blocking::Client::new();
    let get = |path: &str| -> serde_json::Value {
        let resp_text = client
            .get(format!("{local}{path}"))
            .header("Cookie", format!("automations_dashboard={}", dash.cookie))
            .send()
            .unwrap()
            .text()
            .unwrap();
        serde_json::from_str(&resp_text).unwrap()
    };
    let doc = get("/api/automations");
    assert_eq!(doc["version"], 1);
    let backup = doc["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "backup")
        .unwrap();
    assert_eq!(backup["list"]["schedule_words"], "every hour");
    // Scheduled but never installed: not green .
    assert_eq!(backup["health"]["verdict"], "unknown");
    assert_eq!(backup["list"]["installed"], "no");
    let run = backup["runs"][0]["run"].as_str().unwrap().to_owned();
    let shown = get(&format!("/api/runs/{run}"));
    let cli: serde_json::Value =
        serde_json::from_slice(&sb.run(["show", &run, "--json"]).stdout).unwrap();
    assert_eq!(shown, cli, "the JSON twin differs from show --json");
    // The token is private, and only 127.0.0.1 answers.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(sb.data.join("dashboard.token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    for other in ["127.0.0.2", "[::1]"] {
        let addr = format!("{other}:{}", dash.port);
        let refused =
            std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2))
                .is_err();
        assert!(refused, "the dashboard answered on {addr}");
    }
    let hostname = Command::new("hostname")
        .arg("-I")
        .output()
        .map(|o| stdout(&o))
        .unwrap_or_default();
    for ip in hostname
        .split_whitespace()
        .filter(|ip| !ip.starts_with("127."))
    {
        let addr: std::net::SocketAddr = match format!("{ip}:{}", dash.port).parse() {
            Ok(a) => a,
            Err(_) => continue,
        };
        assert!(
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err(),
            "the dashboard answered on {addr}"
        );
    }
}

/// The page's body (with the cookie) and its status.
pub(crate) fn page_of(dash: &Dashboard, path: &str) -> (u16, String) {
    let resp = reqwest::blocking::Client::new()
        .get(format!("http://127.0.0.1:{}{path}", dash.port))
        .header("Cookie", format!("automations_dashboard={}", dash.cookie))
        .send()
        .unwrap();
    (resp.status().as_u16(), resp.text().unwrap())
}

/// Nothing yet is said in words; an unreadable file is named, never a blank page.
#[test]
fn empty_and_unreadable_are_shown_as_such() {
    let sb = Sandbox::new();
    let dash = Dashboard::start(&sb);
    let (code, body) = page_of(&dash, "/");
    assert_eq!(code, 200);
    assert!(body.contains("No automations: add a definition"), "{body}");
    // A definition that never ran; manual-only, so "not installed" is not said of it (it has
    // nothing to install), while a scheduled one not installed is.
    sb.definition("fresh", "name = \"fresh\"\ncommand = [\"true\"]\n");
    let (_, body) = page_of(&dash, "/");
    assert!(
        body.contains("no runs yet")
            && body.contains("manual only")
            && !body.contains("not installed"),
        "{body}"
    );
    sb.definition(
        "timed",
        "name = \"timed\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    let (_, body) = page_of(&dash, "/");
    assert!(body.contains("every 5 minutes · not installed"), "{body}");
    // A state file that is a link (never followed): the page names it and still shows the rest.
    std::fs::create_dir_all(sb.data.join("state")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", sb.data.join("state/stop-all.json")).unwrap();
    let (code, body) = page_of(&dash, "/");
    assert_eq!(code, 200);
    assert!(
        body.contains("Cannot be read or is invalid") && body.contains("stop-all.json"),
        "{body}"
    );
    assert!(body.contains("data-name=\"fresh\""), "{body}");
    // A pause file that cannot be read (the whole page was a 500): that one card says
    // unknown and names the file, never active; every other card still shows.
    std::fs::remove_file(sb.data.join("state/stop-all.json")).unwrap();
    sb.definition("other", "name = \"other\"\ncommand = [\"true\"]\n");
    std::fs::create_dir_all(sb.data.join("state/paused")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", sb.data.join("state/paused/fresh.json")).unwrap();
    let (code, body) = page_of(&dash, "/");
    assert_eq!(code, 200, "{body}");
    let fresh = body
        .split("<article")
        .find(|a| a.contains("data-name=\"fresh\""))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        fresh.contains("row unknown")
            && fresh.contains("paused/fresh.json")
            && fresh.contains("its state cannot be read")
            && !fresh.contains(">active<"),
        "{fresh}"
    );
    assert!(body.contains("data-name=\"other\""), "{body}");
    let (code, body) = page_of(&dash, "/api/automations");
    assert_eq!(code, 200, "{body}");
    std::fs::remove_file(sb.data.join("state/paused/fresh.json")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", sb.data.join("state/stop-all.json")).unwrap();
    // The run log itself unreadable: an error naming it, not an empty page.
    std::fs::remove_file(sb.data.join("state/stop-all.json")).unwrap();
    let _ = std::fs::remove_file(sb.data.join("runs.jsonl"));
    std::os::unix::fs::symlink("/etc/passwd", sb.data.join("runs.jsonl")).unwrap();
    let (code, body) = page_of(&dash, "/");
    assert_eq!(code, 500);
    assert!(body.contains("runs.jsonl"), "{body}");
    let (code, body) = page_of(&dash, "/api/automations");
    assert_eq!(code, 500);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        doc["error"].as_str().unwrap().contains("runs.jsonl"),
        "{doc}"
    );
}

/// Raw bytes to the server; its whole answer.
fn raw(dash: &Dashboard, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", dash.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Requests no browser sends: answered or dropped, and the server keeps serving. (It is built
/// with panic = abort, so one panic in a request's thread would end it.)
#[test]
fn hostile_requests_never_take_the_server_down() {
    let sb = Sandbox::new();
    let dash = Dashboard::start(&sb);
    let host = format!("Host: 127.0.0.1:{}\r\n", dash.port);
    // The token redirect always goes to the page itself; nothing of the request reaches a header.
    let answer = raw(
        &dash,
        format!(
            "GET /elsewhere/%0d%0aX:%20y?token={} HTTP/1.1\r\n{host}Connection: close\r\n\r\n",
            dash.token
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("content=\"0;url=/\""), "{answer}");
    assert!(!answer.contains("elsewhere"), "{answer}");
    let mut non_ascii = b"GET /\xc3\xa9/\xff?token=".to_vec();
    non_ascii.extend_from_slice(dash.token.as_bytes());
    non_ascii.extend_from_slice(format!(" HTTP/1.1\r\n{host}Connection: close\r\n\r\n").as_bytes());
    raw(&dash, &non_ascii);
    for hostile in [
        format!(
            "GET /api/runs/%ff%fe HTTP/1.1\r\n{host}Cookie: automations_dashboard={}\r\nConnection: close\r\n\r\n",
            dash.cookie
        ),
        format!(
            "POST /api/pause/%2e%2e%2fetc HTTP/1.1\r\n{host}Origin: http://127.0.0.1:{}\r\nCookie: automations_dashboard={}\r\nContent-Length: 4\r\nConnection: close\r\n\r\n{{\"re",
            dash.port, dash.cookie
        ),
        "GET / HTTP/1.1\r\nHost: \u{e9}\r\nConnection: close\r\n\r\n".to_owned(),
        "\r\n\r\n\r\n".to_owned(),
    ] {
        raw(&dash, hostile.as_bytes());
    }
    // Still serving.
    assert_eq!(page_of(&dash, "/").0, 200);
    assert!(!sb.data.join("state/paused").exists());
}

/// `Name:  value kB` from /proc/PID/status.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// about 510 idle connections made the dashboard exit silently (status 0) under a
/// 1,024-file limit, about 4,900 made it panic under a high one (a thread per connection), one
/// 1 GB header line grew it to 818 MB, and a duplicate Host was answered. Now it holds a bounded
/// number of connections, closing the one idle the longest for a new one, and limits heads and
/// bodies before buffering them.
#[test]
fn idle_crowds_trickled_heads_and_huge_requests_leave_the_page_answering() {
    use std::io::{Read, Write};
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= 6000,
        "this test holds 5,000 sockets; the hard file limit is {hard}"
    );
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let sb = Sandbox::new();
    sb.definition("backup", "name = \"backup\"\ncommand = [\"true\"]\n");
    let mut dash = Dashboard::start_limited(&sb, 1024);
    let pid = dash.child.id();
    assert_eq!(page_of(&dash, "/").0, 200);
    let rss_before = proc_status(pid, "VmRSS");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", dash.port).parse().unwrap();
    // 5,000 connections that never send a byte.
    let crowd: Vec<std::net::TcpStream> = (0..5000)
        .map(|i| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    let (code, body) = page_of(&dash, "/");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("data-name=\"backup\""), "{body}");
    assert!(
        dash.child.try_wait().unwrap().is_none(),
        "the dashboard ended"
    );
    // Memory grows by what the connections held hold, not with the crowd, and a connection that
    // has sent nothing holds no HTTP state or buffers: this grew 5.4 MiB when each of the 256 held
    // had hyper's 16 KiB, 1.2 MiB since (this build; the release build's figures are in
    // docs/performance.md).
    let rss = proc_status(pid, "VmRSS");
    assert!(
        rss < rss_before + 3 * 1024,
        "{rss} kB with 5,000 idle connections, {rss_before} kB before"
    );
    let threads = proc_status(pid, "Threads");
    assert!(
        threads <= 8,
        "{threads} threads with 5,000 idle connections"
    );
    drop(crowd);

    // A head trickled a byte at a time is cut off, and the page answers meanwhile.
    let mut trickle = std::net::TcpStream::connect(addr).unwrap();
    let mut writer = trickle.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        for b in b"GET / HTTP/1.1\r\nX-Slow: "
            .iter()
            .chain([b'a'; 10_000].iter())
        {
            if writer.write_all(&[*b]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    });
    assert_eq!(page_of(&dash, "/").0, 200);
    trickle
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    match trickle.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    assert!(
        trickler.join().unwrap(),
        "the trickled head was never cut off"
    );

    // A header line that never ends: refused within the head limit, never buffered whole.
    let mut huge = std::net::TcpStream::connect(addr).unwrap();
    huge.write_all(b"GET / HTTP/1.1\r\nX-Huge: ").unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 256 * 1024 * 1024 && huge.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    assert!(
        sent < 64 * 1024 * 1024,
        "the server took {sent} bytes of one header"
    );
    let rss = proc_status(pid, "VmRSS");
    assert!(
        rss < rss_before + 8 * 1024,
        "{rss} kB after a huge header, {rss_before} kB before"
    );

    // A body over the limit is refused before it is read; a second Host is refused.
    let host = format!("Host: 127.0.0.1:{}\r\n", dash.port);
    let answer = raw(
        &dash,
        format!(
            "POST /api/stop-all HTTP/1.1\r\n{host}Origin: http://127.0.0.1:{}\r\nCookie: automations_dashboard={}\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n",
            dash.port, dash.cookie
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!sb.data.join("state/stop-all.json").exists());
    let answer = raw(
        &dash,
        format!(
            "GET / HTTP/1.1\r\n{host}{host}Cookie: automations_dashboard={}\r\nConnection: close\r\n\r\n",
            dash.cookie
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(page_of(&dash, "/").0, 200);
}

/// Puts an `xdg-open` on the sandbox's PATH that writes its arguments to the returned file.
fn fake_opener(sb: &mut Sandbox) -> std::path::PathBuf {
    let fake = sb.path("fakebin");
    std::fs::create_dir_all(&fake).unwrap();
    let opener = fake.join("xdg-open");
    write_executable(
        &opener,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$ARGV_FILE.tmp\"\nmv \"$ARGV_FILE.tmp\" \"$ARGV_FILE\"\n",
    );
    let argv_file = sb.path("argv");
    sb.env(
        "PATH",
        &format!("{}:/usr/local/bin:/usr/bin:/bin", fake.display()),
    )
    .env("ARGV_FILE", argv_file.to_str().unwrap());
    argv_file
}

/// The file `automations dashboard` opened the browser on.
fn opened(argv_file: &std::path::Path) -> std::path::PathBuf {
    wait_for("the browser to be opened", || argv_file.exists());
    std::path::PathBuf::from(std::fs::read_to_string(argv_file).unwrap().trim())
}

/// Regression: the browser was opened with the token's address as an argument, where every local
/// user can read it (`/proc/*/cmdline`); and the cookie held the stored token itself, which
/// browsers also send to every other server on 127.0.0.1.
#[test]
fn the_token_stays_off_command_lines_and_out_of_the_cookie() {
    use std::os::unix::fs::PermissionsExt;
    let mut sb = Sandbox::new();
    let argv_file = fake_opener(&mut sb);
    let dash = Dashboard::start_with(&sb, &["dashboard"]);
    wait_for("the browser to be opened", || argv_file.exists());
    let argv = std::fs::read_to_string(&argv_file).unwrap();
    assert!(
        !argv.contains(&dash.token),
        "the token was on a command line: {argv}"
    );
    let page = std::path::PathBuf::from(argv.trim());
    assert!(page.starts_with(&sb.data), "{argv}");
    let mode = std::fs::metadata(&page).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(std::fs::read_to_string(&page).unwrap().contains(&dash.url));
    // The cookie is this server's own value; the token itself is no cookie.
    assert_ne!(dash.cookie, dash.token);
    let with = |value: &str| {
        reqwest::blocking::Client::new()
            .get(format!("http://127.0.0.1:{}/api/automations", dash.port))
            .header("Cookie", format!("automations_dashboard={value}"))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(with(&dash.token), 401);
    assert_eq!(with(&dash.cookie), 200);
    // A new server, a new session: the old cookie opens nothing.
    let old = dash.cookie.clone();
    drop(dash);
    let again = Dashboard::start(&sb);
    assert_ne!(again.cookie, old);
}

/// Fifty automations in every state .
pub(crate) fn fifty() -> Sandbox {
    fifty_with(|_| {})
}

/// [`fifty`], with `history` written to the log before any of their runs.
fn fifty_with(history: impl FnOnce(&Sandbox)) -> Sandbox {
    let mut sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    history(&sb);
    for i in 1..=8 {
        sb.shell_definition(&format!("fail-{i:02}"), "echo broken pipe >&2; exit 1", "");
        for _ in 0..3 {
            sb.run(["run", &format!("fail-{i:02}")]);
        }
    }
    sb.shell_definition("fetch-api", "exit 1", "outbound = true\n");
    for _ in 0..3 {
        sb.run(["run", "fetch-api"]);
    }
    for i in 1..=8 {
        sb.shell_definition(&format!("new-{i:02}"), "exit 0", "");
    }
    for i in 1..=5 {
        let n = format!("hold-{i:02}");
        sb.shell_definition(&n, "exit 0", "");
        sb.run(["run", &n]);
        sb.run(["pause", &n, "--reason", "on leave"]);
    }
    // Watched from outside: every run of `offsite` pings Healthchecks, which does not know it, so its
    // runs succeed and its pings fail (health says so after three).
    let hc = crate::fixtures::FakeHttp::start(|r| {
        if r.path.contains("/automations_offsite") {
            crate::fixtures::Reply::Status(404, b"not found".to_vec())
        } else {
            crate::fixtures::Reply::Status(200, b"OK".to_vec())
        }
    });
    crate::fixtures::write_private(
        &sb.data.join("healthchecks.toml"),
        &format!("ping_url = \"{0}\"\napi_url = \"{0}\"\n", hc.url),
    );
    sb.env(
        "AUTOMATIONS_HEALTHCHECKS_PING_KEY",
        "pk_0123456789abcdefghi",
    );
    // Scheduled and installed: only an automation that has a check is pinged.
    sb.shell_definition("offsite", "echo fine", "[schedule]\nevery_minutes = 60\n");
    sb.install_record("offsite", chrono::Utc::now());
    for _ in 0..2 {
        sb.run(["run", "offsite"]);
    }
    for i in 1..=26 {
        let n = format!("ok-{i:02}");
        sb.shell_definition(&n, "echo fine", "");
        sb.run(["run", &n]);
    }
    // An older failure, four successes since: healthy, and the failure's stderr a click away.
    let flag = sb.path("flaky-failed-once");
    sb.shell_definition(
        "flaky",
        &format!(
            "if [ ! -e '{f}' ]; then touch '{f}'; echo 'disk quota exceeded' >&2; exit 1; fi; echo synced",
            f = flag.display()
        ),
        "",
    );
    for _ in 0..5 {
        sb.run(["run", "flaky"]);
    }
    sb
}

/// The contrast of every visible element matching each selector against what is behind it (WCAG's
/// formula); the ones under 4.5:1, named.
const CONTRAST: &str = r#"
const lum = (c) => {
  const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map((v) => {
    v = Number(v) / 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const behind = (e) => {
  for (; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    const m = c.match(/[\d.]+/g);
    if (m && (m.length < 4 || Number(m[3]) > 0)) return c;
  }
  return "rgb(255, 255, 255)";
};
const bad = [];
let checked = 0;
for (const sel of arguments[0]) {
  for (const e of document.querySelectorAll(sel)) {
    if (!e.getClientRects().length || !e.textContent.trim()) continue;
    const a = lum(getComputedStyle(e).color), b = lum(behind(e));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    checked += 1;
    if (ratio < 4.5) bad.push(sel + " " + ratio.toFixed(2) + " " + getComputedStyle(e).color + " on " + behind(e));
  }
}
return [checked, bad];
"#;

const TEXT: &[&str] = &[
    "body",
    "header h1",
    ".count.degraded",
    ".count.unknown",
    ".count.paused",
    ".count.healthy",
    ".switch",
    ".refreshed",
    ".row .name",
    ".row .schedule",
    ".row .last",
    ".row .next",
    ".row.degraded .verdict",
    ".row.unknown .verdict",
    ".row.healthy .verdict",
    ".row.paused .verdict",
    ".reasons li",
    "dt",
    "dd",
    "tr.failed td",
    "tr.ok td",
    "button",
    "pre.output",
];

fn png_size(png: &[u8]) -> (u32, u32) {
    (
        u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
        u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
    )
}

fn shot(c: &Client, file: &str) {
    shot_at(c, file, (1280, 800));
}

fn js(c: &Client, script: &str) -> serde_json::Value {
    c.execute(script, vec![]).unwrap()
}

fn visible_names(c: &Client) -> Vec<String> {
    let v = js(
        c,
        "return [...document.querySelectorAll('article.row')].filter((r) => !r.hidden).map((r) => r.dataset.name);",
    );
    serde_json::from_value(v).unwrap()
}

fn contrast(c: &Client, what: &str) {
    let v = c.execute(CONTRAST, vec![serde_json::json!(TEXT)]).unwrap();
    let checked = v[0].as_u64().unwrap();
    assert!(checked > 50, "{what}: only {checked} elements checked");
    assert_eq!(v[1], serde_json::json!([]), "{what}: contrast under 4.5:1");
}

/// at 1280×800 the page showed about four automations per screen, no summary, a hairline
/// strip, only the latest run's output, Pause and Resume whatever the state, and refusals far from
/// the button. Now: a summary that filters, at least 20 compact rows above the fold, any run's
/// output a click away, actions that fit the state, a name filter, and readable contrast in light
/// and dark.
#[test]
#[ignore = "a real component: chromium and chromedriver"]
fn fifty_automations_at_a_glance() {
    let Some(driver) = Driver::start("fifty_automations_at_a_glance") else {
        return;
    };
    let sb = fifty();
    let health: serde_json::Value =
        serde_json::from_slice(&sb.run(["health", "--json"]).stdout).unwrap();
    let verdicts: Vec<&str> = health["automations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts.len(), 50);
    let n = |v: &str| verdicts.iter().filter(|x| **x == v).count();
    let dash = Dashboard::start(&sb);
    {
        let c = driver.session(&sb.path("light"));
        c.goto(&dash.url).unwrap();
        wait_for_rows(&c);
        assert_eq!(visible_names(&c).len(), 50);

        // At least 20 whole rows above the fold.
        let above = js(
            &c,
            "return [...document.querySelectorAll('article.row')].filter((r) => r.getBoundingClientRect().bottom <= window.innerHeight).length;",
        );
        assert!(above.as_u64().unwrap() >= 20, "{above} rows above the fold");

        // The summary counts are health's.
        let count = |cat: &'static str| {
            let c = &c;
            {
                c.find(Locator::Css(Box::leak(
                    format!("[data-field='count-{cat}']").into_boxed_str(),
                )))
                .unwrap()
                .text()
                .unwrap()
                .parse::<usize>()
                .unwrap()
            }
        };
        let (degraded, unknown, paused, healthy) = (
            count("degraded"),
            count("unknown"),
            count("paused"),
            count("healthy"),
        );
        assert_eq!(degraded, n("degraded"));
        assert_eq!(unknown, n("unknown"));
        // Paused counts every paused automation: the 5 held by hand (healthy otherwise) and the
        // one paused automatically, which is also counted under degraded (the summary said
        // "0 paused" while one was auto-paused).
        let paused_in_health = health["automations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["figures"].get("paused_at").is_some_and(|p| !p.is_null()))
            .count();
        assert_eq!(paused, paused_in_health);
        assert_eq!(paused + healthy, n("healthy") + 1);
        assert_eq!((degraded, unknown, paused), (10, 8, 6));
        // Degraded first, then unknown, paused, healthy.
        let names = visible_names(&c);
        assert!(
            names[..10]
                .iter()
                .all(|n| n.starts_with("fail-") || n == "fetch-api" || n == "offsite"),
            "{names:?}"
        );
        assert!(
            names[10..18].iter().all(|n| n.starts_with("new-")),
            "{names:?}"
        );
        assert!(
            names[18..23].iter().all(|n| n.starts_with("hold-")),
            "{names:?}"
        );
        // Runs that succeed while the outside watch is blind: said in its row.
        open_row(&c, "offsite");
        let why = text_of(&c, "offsite", "[data-field=reasons]");
        assert!(
            why.contains("its last 4 Healthchecks pings failed"),
            "{why}"
        );
        assert!(why.contains("404 not found"), "{why}");
        js(&c, "window.scrollTo(0, 0); return null;");
        shot(&c, "dashboard-pings.png");
        js(
            &c,
            "document.querySelector(\"article[data-name='offsite'] > details\").open = false; return null;",
        );

        // The name filter narrows as you type; a count filters to its category.
        let filter = c.find(Locator::Css("[data-field=filter]")).unwrap();
        filter.send_keys("hold").unwrap();
        let shown = visible_names(&c);
        assert_eq!(shown.len(), 5, "{shown:?}");
        assert!(shown.iter().all(|n| n.starts_with("hold-")));
        filter.clear().unwrap();
        js(
            &c,
            "document.querySelector('[data-field=filter]').dispatchEvent(new Event('input', {bubbles: true})); return null;",
        );
        c.find(Locator::Css("a.count.degraded"))
            .unwrap()
            .click()
            .unwrap();
        assert_eq!(visible_names(&c).len(), 10);
        assert!(
            c.current_url()
                .unwrap()
                .as_str()
                .ends_with("?filter=degraded")
        );
        c.goto(&format!("http://127.0.0.1:{}/?filter=unknown", dash.port))
            .unwrap();
        wait_for_rows(&c);
        assert_eq!(visible_names(&c).len(), 8);
        c.find(Locator::Css("a.count.all"))
            .unwrap()
            .click()
            .unwrap();
        assert_eq!(visible_names(&c).len(), 50);
        contrast(&c, "light, rows closed");
        js(&c, "window.scrollTo(0, 0); return null;");
        shot(&c, "dashboard.png");

        // An older failure's stderr, one click away in its row.
        open_row(&c, "flaky");
        c.find(card("flaky", "tr.failed button.open"))
            .unwrap()
            .click()
            .unwrap();
        let detail = wait_text(
            &c,
            "flaky",
            "[data-field=run-detail]",
            "the failed run",
            |t| t.contains("disk quota exceeded"),
        );
        assert!(detail.contains("failed (exit_status)"), "{detail}");
        // Its exit status is in the panel (it was not).
        assert!(detail.contains(" · exit 1"), "{detail}");

        // Actions that fit the state.
        let shown = |name: &'static str, action: &'static str| {
            let c = &c;
            {
                c.find(card(name, &format!("button[data-action={action}]")))
                    .unwrap()
                    .is_displayed()
                    .unwrap()
            }
        };
        open_row(&c, "hold-01");
        open_row(&c, "fail-01");
        assert!(!shown("hold-01", "pause"), "Pause on a paused automation");
        assert!(shown("hold-01", "resume"));
        assert!(shown("fail-01", "pause") && !shown("fail-01", "resume"));
        assert!(shown("fail-01", "ack") && !shown("flaky", "ack"));
        // A refused action says why next to its button: pausing without a reason.
        c.find(card("fail-01", "button[data-action=pause]"))
            .unwrap()
            .click()
            .unwrap();
        wait_text(&c, "fail-01", "[data-field=said]", "the refusal", |t| {
            t.contains("pause refused") && t.contains("reason")
        });
        contrast(&c, "light, rows open");
        c.find(card("flaky", "[data-field=run-detail]"))
            .unwrap()
            .click()
            .ok();
        js(
            &c,
            "document.querySelector(\"article[data-name='hold-01'] > details\").open = false; document.querySelector(\"article[data-name='fail-01'] > details\").open = false; document.querySelector(\"article[data-name='flaky']\").scrollIntoView(); window.scrollBy(0, -120); return null;",
        );
        shot(&c, "dashboard-row.png");
        assert!(c.get_alert_text().is_err(), "a dialog opened");
        c.close().unwrap();

        // Dark mode, from the system's preference.
        let c = driver.session_with(&sb.path("dark"), &["--force-dark-mode"]);
        c.goto(&dash.url).unwrap();
        wait_for_rows(&c);
        let dark = js(
            &c,
            "return matchMedia('(prefers-color-scheme: dark)').matches;",
        );
        assert_eq!(
            dark,
            serde_json::json!(true),
            "the browser does not prefer dark"
        );
        contrast(&c, "dark, rows closed");
        open_row(&c, "fail-01");
        contrast(&c, "dark, a row open");
        js(
            &c,
            "document.querySelector(\"article[data-name='fail-01'] > details\").open = false; window.scrollTo(0, 0); return null;",
        );
        shot(&c, "dashboard-dark.png");
        c.close().unwrap();
    };
    sb.assert_log_verifies();
}

fn wait_for_rows(c: &Client) {
    let until = Instant::now() + Duration::from_secs(20);
    while c.find(Locator::Css("article.row")).is_err() {
        assert!(Instant::now() < until, "the page never loaded");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Regressions: one successful firing whose first attempt failed showed two marks (a red square
/// for a firing that succeeded); runs in the same minute were identical "12-03 05:38" buttons.
#[test]
fn a_retried_firing_is_one_mark_and_runs_read_apart_to_the_second() {
    let sb = Sandbox::new();
    let flag = sb.path("failed-once");
    sb.shell_definition(
        "retried",
        &format!(
            "if [ ! -e '{f}' ]; then touch '{f}'; exit 4; fi",
            f = flag.display()
        ),
        "[schedule]\nevery_minutes = 60\nretries = 1\nretry_delay_seconds = 1\n",
    );
    sb.install_record("retried", chrono::Utc::now());
    assert_code(&sb.run(["run", "retried", "--trigger", "schedule"]), 0);
    assert_eq!(sb.events("started").len(), 2, "two attempts of one firing");
    let dash = Dashboard::start(&sb);
    let (_, body) = page_of(&dash, "/");
    let row = body.split("data-name=\"retried\"").nth(1).unwrap();
    let recent = row
        .split("data-field=\"recent\"")
        .nth(1)
        .unwrap()
        .split("</svg>")
        .next()
        .unwrap();
    assert_eq!(recent.matches("class=\"m ").count(), 1, "{recent}");
    assert!(
        recent.contains("class=\"m ok\"") && recent.contains("last 1 firings: 1 ok"),
        "{recent}"
    );
    // The table still lists each attempt, its time to the second.
    let buttons: Vec<&str> = row
        .split("data-action=\"open-run\"")
        .skip(1)
        .map(|b| b.split('>').nth(1).unwrap().split('<').next().unwrap())
        .collect();
    assert_eq!(buttons.len(), 2, "{row}");
    for b in &buttons {
        assert_eq!(b.len(), "12-03 05:38:12".len(), "{b}");
    }
    let (_, api) = page_of(&dash, "/api/automations");
    let doc: serde_json::Value = serde_json::from_str(&api).unwrap();
    let a = doc["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "retried")
        .unwrap();
    assert_eq!(a["runs"].as_array().unwrap().len(), 2, "{a}");
    assert_eq!(a["firings"].as_array().unwrap().len(), 1, "{a}");
}

/// Regression: the dashboard printed its `?token=` address on stdout whatever that was: run as the
/// user service docs/metrics.md suggests, the token went into the journal. Only a terminal gets
/// it now; elsewhere the address comes without it, pointing at the private opening page.
#[test]
fn the_token_is_printed_on_a_terminal_only() {
    let sb = Sandbox::new();
    // Piped (a service's journal): `start` asserts there is no token in the line.
    drop(Dashboard::start(&sb));
    // On a real terminal (`script` gives the command one).
    let command = format!("'{}' dashboard --no-open", sb.bin.display());
    // The sandbox's environment, for a command that is `script` instead of the binary.
    let cmd = sb.cmd(["dashboard"]);
    let mut term = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(&sb.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(term.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // The terminal goes: the dashboard on it gets SIGHUP.
    let _ = term.kill();
    let _ = term.wait();
    assert!(
        line.starts_with("dashboard: http://127.0.0.1:") && line.contains("/?token="),
        "{line:?}"
    );
}

/// Appends a scheduled run of `name` that started at `at`, took `ms` and ended `ok` or failed,
/// through the log's own writer (the chain stays whole): history from days ago, without waiting
/// for it.
fn past_run(sb: &Sandbox, name: &str, at: chrono::DateTime<chrono::Utc>, ms: u64, ok: bool) {
    use automations::runlog::{Record, RunLog, stamp};
    let log = RunLog::new(&sb.data);
    let run = format!("{}-{:06x}", at.format("%Y%m%dT%H%M%S%.3fZ"), ms);
    let clock = serde_json::json!({"boot": "past", "awake_ms": 1, "total_ms": 1});
    let end = at + chrono::Duration::milliseconds(ms as i64);
    let record = |v: serde_json::Value| -> Record { serde_json::from_value(v).unwrap() };
    let started = record(serde_json::json!({
        "v": 1, "event": "started", "run": run, "trigger": "schedule", "pid": 1,
        "definition": null, "clock": clock, "name": name, "at": stamp(at), "prev": "",
    }));
    log.append(name, started.event, at).unwrap();
    let finished = record(serde_json::json!({
        "v": 1, "event": "finished", "run": run, "outcome": if ok { "ok" } else { "failed" },
        "exit_code": if ok { 0 } else { 1 }, "signal": null, "duration_ms": ms,
        "error": if ok { serde_json::Value::Null } else { serde_json::json!({"class": "exit_status", "detail": "exit status 1"}) },
        "stdout_tail": "", "stderr_tail": if ok { "" } else { "disk full\n" },
        "dropped": {"stdout": 0, "stderr": 0}, "facts": {}, "headline": null, "http": null,
        "leftover_processes": 0, "clock": clock, "trigger": "schedule", "started_at": stamp(at),
        "name": name, "at": stamp(end), "prev": "",
    }));
    log.append(name, finished.event, end).unwrap();
}

/// The fifty, in time: eight nights at 03:00 that pile up, one with a 30-minute jitter, one every
/// ten minutes, and `report` (ok-11) with 100 runs over 30 days — about 20 s each, one slow, a few
/// failed — before its last run today, which took a moment (too short).
fn fifty_in_time() -> Sandbox {
    let now = chrono::Utc::now();
    let sb = fifty_with(|sb| {
        for i in 0..100i64 {
            let at = now - chrono::Duration::hours(7 * (100 - i)) - chrono::Duration::minutes(5);
            let ms = match i {
                60 => 80_000,
                _ => 18_000 + (i as u64 % 5) * 1_000,
            };
            past_run(sb, "ok-11", at, ms, !matches!(i, 40 | 41 | 77 | 90));
        }
        // The last night's 03:00, for the nights' runs in the last 24 hours.
        let today3 = chrono::Local::now()
            .date_naive()
            .and_hms_opt(3, 0, 0)
            .unwrap()
            .and_local_timezone(chrono::Local)
            .earliest()
            .unwrap()
            .with_timezone(&chrono::Utc);
        let night = if today3 < now {
            today3
        } else {
            today3 - chrono::Duration::days(1)
        };
        for n in 1..=8 {
            past_run(sb, &format!("ok-{n:02}"), night, 40_000 + n * 3_000, n != 5);
        }
    });
    for n in 1..=8 {
        let name = format!("ok-{n:02}");
        sb.shell_definition(&name, "echo fine", "[schedule]\ndaily_at = \"03:00\"\n");
        sb.install_record(&name, now - chrono::Duration::days(3));
    }
    sb.shell_definition(
        "ok-09",
        "echo fine",
        "[schedule]\ndaily_at = [\"09:30\", \"21:30\"]\njitter_seconds = 1800\n",
    );
    sb.install_record("ok-09", now - chrono::Duration::days(3));
    sb.shell_definition("ok-10", "echo fine", "[schedule]\nevery_minutes = 10\n");
    sb.install_record("ok-10", now - chrono::Duration::days(3));
    sb.shell_definition("ok-11", "echo fine", "[schedule]\ndaily_at = \"12:00\"\n");
    sb.install_record("ok-11", now - chrono::Duration::days(31));
    sb
}

/// Every mark of the pictures that has no text equivalent (a `<title>` of its own or of the link
/// around it: the name a screen reader reads), by class.
const UNLABELLED: &str = r#"
const named = (e) => e && [...e.children].some((c) => c.tagName === 'title' && c.textContent.trim());
return [...document.querySelectorAll('.bar, .tl-mark, .tl-next, .tl-dense, .tr-ok, .tr-failed, .cal')]
  .filter((e) => !(named(e) || named(e.closest('a'))))
  .map((e) => e.getAttribute('class'));
"#;

/// A page (not window) of `width`×`height`: the window grown by the browser's own frame.
fn page_size(c: &Client, width: u32, height: u32) {
    let frame = c
        .execute("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];", vec![])
        .unwrap();
    c.set_window_size(
        width + frame[0].as_u64().unwrap() as u32,
        height + frame[1].as_u64().unwrap() as u32,
    )
    .unwrap();
}

fn shot_at(c: &Client, file: &str, size: (u32, u32)) {
    let png = c.screenshot().unwrap();
    assert_eq!(png_size(&png), size);
    let out = repo_root().join("target").join(file);
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, png).unwrap();
}

/// The questions people ask with their eyes — what runs at 03:00, is report getting slower,
/// which days failed — had only tables for answers. Now: a timeline of the last and next 24 hours
/// (the busiest minutes at a glance, `automations timeline`'s own), a click on a past mark opens
/// that run, an open row draws its duration trend with health's thresholds and its last 30 days;
/// every mark has words; light and dark, 1280×800 and a phone's 390×844.
#[test]
#[ignore = "a real component: chromium and chromedriver"]
fn pictures_of_time_for_fifty_automations() {
    let Some(driver) = Driver::start("pictures_of_time_for_fifty_automations") else {
        return;
    };
    let sb = fifty_in_time();
    let cli: serde_json::Value =
        serde_json::from_slice(&sb.run(["timeline", "--json"]).stdout).unwrap();
    let first = &cli["busiest"][0];
    let minute = automations::runlog::parse_stamp(first["minute"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Local)
        .format("%H:%M")
        .to_string();
    assert_eq!(minute, "03:00", "{cli}");
    let busiest = format!("03:00 ({} firings)", first["firings"]);
    assert!(first["firings"].as_u64().unwrap() >= 8, "{cli}");
    let dash = Dashboard::start(&sb);
    for (profile, extra, size) in [
        ("light", &[][..], (1280, 800)),
        ("dark", &["--force-dark-mode"][..], (1280, 800)),
        ("phone", &[][..], (390, 844)),
        ("phone-dark", &["--force-dark-mode"][..], (390, 844)),
    ] {
        let c = driver.session_with(&sb.path(profile), extra);
        page_size(&c, size.0, size.1);
        c.goto(&dash.url).unwrap();
        wait_for_rows(&c);
        let said = c.find(Locator::Css(".busiest")).unwrap().text().unwrap();
        assert!(
            said.contains(&busiest),
            "{profile}: {said} (want {busiest})"
        );
        // The timeline, opened: a line per automation, each labelled in words.
        js(
            &c,
            "document.querySelector('details.tl-rows').open = true; return null;",
        );
        let until = Instant::now() + Duration::from_secs(20);
        while js(&c, "return document.querySelectorAll('.tl-row').length;") != serde_json::json!(50)
        {
            assert!(
                Instant::now() < until,
                "{profile}: the timeline's lines never came"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let lines = js(
            &c,
            "return [...document.querySelectorAll('.tl-row svg')].map((s) => s.getAttribute('aria-label'));",
        );
        let lines: Vec<String> = serde_json::from_value(lines).unwrap();
        assert_eq!(lines.len(), 50, "{profile}");
        let of = |name: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("{name} in {lines:?}"))
                .clone()
        };
        assert!(
            of("ok-01").ends_with("next 24 hours: 03:00"),
            "{}",
            of("ok-01")
        );
        assert!(
            of("ok-05").contains("2 firing(s) in the last 24 hours (1 ok, 1 failed)"),
            "{}",
            of("ok-05")
        );
        assert!(
            of("hold-01").ends_with("next 24 hours: by hand or on events"),
            "{}",
            of("hold-01")
        );
        let count = |sel: &str| {
            js(
                &c,
                &format!("return document.querySelectorAll(\"{sel}\").length;"),
            )
            .as_u64()
            .unwrap()
        };
        assert_eq!(
            count(".tl-row[data-tl='ok-09'] path.tl-jitter"),
            1,
            "{profile}"
        );
        let next = js(
            &c,
            "return document.querySelector(\".tl-row[data-tl='ok-09'] .tl-next title\").textContent;",
        );
        assert!(
            next.as_str()
                .unwrap()
                .ends_with("(each up to 30 min after its slot)"),
            "{next}"
        );
        assert_eq!(count(".tl-row[data-tl='ok-10'] .tl-dense"), 1, "{profile}");
        assert_eq!(count(".tl-row[data-tl='ok-01'] .tl-next"), 1, "{profile}");
        assert_eq!(
            js(&c, UNLABELLED),
            serde_json::json!([]),
            "{profile}: marks without words"
        );
        // Nothing wider than the page, at a phone's width too.
        let wide = js(&c, "return document.documentElement.scrollWidth;")
            .as_u64()
            .unwrap();
        assert!(wide <= u64::from(size.0), "{profile}: {wide} px wide");
        js(&c, "window.scrollTo(0, 0); return null;");
        shot_at(&c, &format!("dashboard-timeline-{profile}.png"), size);

        // A past mark opens its run in its row.
        let mark = c
            .find(Locator::Css(
                ".tl-row[data-tl='ok-05'] a[data-open-run]:has(rect.failed)",
            ))
            .unwrap();
        c.execute(
            "arguments[0].scrollIntoView({block: 'center'}); return null;",
            vec![serde_json::to_value(&mark).unwrap()],
        )
        .unwrap();
        mark.click().unwrap();
        let detail = wait_text(
            &c,
            "ok-05",
            "[data-field=run-detail]",
            "the run opened from the timeline",
            |t| t.contains("disk full"),
        );
        assert!(detail.contains("failed (exit_status)"), "{detail}");

        // report's pictures, drawn when its row opens.
        js(
            &c,
            "document.querySelector('details.tl-rows').open = false; return null;",
        );
        open_row(&c, "ok-11");
        wait_text(&c, "ok-11", "[data-field=pictures]", "the pictures", |t| {
            t.contains("too short below")
        });
        assert_eq!(
            count("article[data-name='ok-11'] figure.trend [role=img]"),
            100
        );
        assert_eq!(
            count("article[data-name='ok-11'] figure.trend .tr-failed"),
            4
        );
        assert_eq!(count("article[data-name='ok-11'] .tr-slow"), 1);
        assert_eq!(count("article[data-name='ok-11'] .tr-short"), 1);
        assert_eq!(count("article[data-name='ok-11'] .cal"), 30);
        assert!(
            count("article[data-name='ok-11'] .cal.failed")
                + count("article[data-name='ok-11'] .cal.mixed")
                >= 3
        );
        assert!(count("article[data-name='ok-11'] .cal.ok") >= 20);
        let caption = text_of(&c, "ok-11", "figure.trend figcaption");
        assert!(
            caption.starts_with("Duration of the last 100 run(s) of ok-11, usually 2")
                && caption.contains("; slow above 1 min; too short below 4.0 s")
                && caption.ends_with("; 4 did not end ok"),
            "{caption}"
        );
        assert_eq!(
            js(&c, UNLABELLED),
            serde_json::json!([]),
            "{profile}: marks without words"
        );
        let v = c
            .execute(
                CONTRAST,
                vec![serde_json::json!([
                    ".busiest",
                    ".tl-name",
                    ".tl-labels span",
                    "figcaption",
                    ".tl-rows > summary",
                    "body"
                ])],
            )
            .unwrap();
        assert_eq!(
            v[1],
            serde_json::json!([]),
            "{profile}: contrast under 4.5:1"
        );
        c.execute(
            "document.querySelector(\"article[data-name='ok-11']\").scrollIntoView(); window.scrollBy(0, -80); return null;",
            vec![],
        )
        .unwrap();
        shot_at(&c, &format!("dashboard-trend-{profile}.png"), size);
        c.close().unwrap();
    }
    sb.assert_log_verifies();
}
