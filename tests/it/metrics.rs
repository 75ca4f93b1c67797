//! `automations metrics`, the metrics textfile and the dashboard's `/metrics`, checked by the
//! Prometheus tools themselves: promtool on the output and on the alert rules, and a real
//! Prometheus server scraping both ways, whose answers must be `health --json`'s.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

use crate::dashboard::Dashboard;
use crate::harness::*;

/// promtool, or the test skips (fails under CI) naming the package.
fn tool(test: &str, name: &str) -> Option<std::path::PathBuf> {
    let path = std::path::PathBuf::from(format!("/usr/bin/{name}"));
    if path.exists() {
        Some(path)
    } else {
        skip(
            test,
            &format!("{} is missing (apt-get install prometheus)", path.display()),
        );
        None
    }
}

/// `health --json`'s verdict and last success of every automation.
fn health(sb: &Sandbox) -> BTreeMap<String, (String, Option<f64>)> {
    let out = sb.run(["health", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    doc["automations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let last = a["figures"]["last_success"].as_str().map(|t| {
                chrono::DateTime::parse_from_rfc3339(t)
                    .unwrap()
                    .timestamp_millis() as f64
                    / 1000.0
            });
            (
                a["name"].as_str().unwrap().to_owned(),
                (a["verdict"].as_str().unwrap().to_owned(), last),
            )
        })
        .collect()
}

/// The samples of one family in a text-format document: the labels of each (as written) and
/// its value.
fn samples<'a>(text: &'a str, family: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .map(|rest| {
            let (labels, value) = rest.rsplit_once("} ").unwrap();
            (labels, value.parse().unwrap())
        })
        .collect()
}

/// A label's value in a sample's labels.
fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    labels
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no {name} in {labels}"))
}

/// What a document says of each automation: its verdict (the one at 1) and last success.
fn said(text: &str) -> BTreeMap<String, (String, Option<f64>)> {
    let mut out: BTreeMap<String, (String, Option<f64>)> = BTreeMap::new();
    for (labels, v) in samples(text, "automations_verdict") {
        if v == 1.0 {
            let e = out
                .entry(label(labels, "automation").to_owned())
                .or_default();
            assert!(e.0.is_empty(), "two verdicts at 1 for {labels}");
            e.0 = label(labels, "verdict").to_owned();
        }
    }
    for (labels, v) in samples(text, "automations_last_success_timestamp_seconds") {
        out.entry(label(labels, "automation").to_owned())
            .or_default()
            .1 = Some(v);
    }
    out
}

#[test]
#[ignore = "a real component: promtool and a Prometheus server"]
fn fifty_automations_in_every_state_pass_promtool_and_say_what_health_says() {
    let test = "metrics::fifty_automations_in_every_state_pass_promtool_and_say_what_health_says";
    let Some(promtool) = tool(test, "promtool") else {
        return;
    };
    let sb = crate::dashboard::fifty();
    // And a kill switch, which every firing then skips.
    sb.run(["stop-all", "--reason", "moving racks"]);
    sb.run(["run", "ok-01"]);
    let now = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
    let out = sb.run(["metrics"]);
    assert_code(&out, 0);
    let text = stdout(&out);

    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // The verdicts and last successes are health's, for every automation (50, each once).
    let health = health(&sb);
    assert_eq!(health.len(), 50, "{health:?}");
    let seen = said(&text);
    for (name, (verdict, last)) in &health {
        let (v, l) = &seen[name];
        assert_eq!(v, verdict, "{name}");
        match (l, last) {
            (Some(a), Some(b)) => assert!((a - b).abs() < 0.001, "{name}: {a} vs {b}"),
            (a, b) => assert_eq!(a, b, "{name}"),
        }
    }
    assert_eq!(seen.len(), 50);
    let states: std::collections::BTreeSet<&str> = seen.values().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        states,
        ["degraded", "healthy", "unknown"].into_iter().collect(),
        "every verdict is among the fifty"
    );

    // The firings by outcome are the log's, counted line by line here.
    let mut counted: BTreeMap<(String, String), f64> = BTreeMap::new();
    for line in sb.log_lines() {
        let outcome = match line["event"].as_str() {
            Some("finished") => line["outcome"].as_str().unwrap().to_owned(),
            Some("skipped") => "skipped".to_owned(),
            _ => continue,
        };
        *counted
            .entry((line["name"].as_str().unwrap().to_owned(), outcome))
            .or_default() += 1.0;
    }
    let mut exported: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (labels, v) in samples(&text, "automations_runs_total") {
        if v > 0.0 {
            exported.insert(
                (
                    label(labels, "automation").to_owned(),
                    label(labels, "outcome").to_owned(),
                ),
                v,
            );
        }
    }
    assert_eq!(exported, counted);
    assert!(counted.contains_key(&("ok-01".to_owned(), "skipped".to_owned())));

    // Paused, stopped, pings failing, scheduled next: each where it belongs.
    let paused: Vec<&str> = samples(&text, "automations_paused")
        .into_iter()
        .filter(|(_, v)| *v == 1.0)
        .map(|(l, _)| label(l, "automation"))
        .collect();
    // fetch-api was paused by the runner (an outbound automation failing), the others by hand.
    assert_eq!(
        paused,
        [
            "fetch-api",
            "hold-01",
            "hold-02",
            "hold-03",
            "hold-04",
            "hold-05"
        ]
    );
    assert_eq!(
        samples(&text, "automations_stop_all"),
        [("namespace=\"automations\"", 1.0)]
    );
    let pings = samples(&text, "automations_healthchecks_ping_failures");
    assert_eq!(pings.len(), 50);
    assert!(
        pings
            .iter()
            .all(|(l, v)| (*v >= 2.0) == (label(l, "automation") == "offsite")),
        "{pings:?}"
    );
    let next = samples(&text, "automations_next_run_timestamp_seconds");
    assert_eq!(next.len(), 1, "only offsite is installed: {next:?}");
    assert!(next[0].1 > now && next[0].1 <= now + 3600.0, "{next:?}");
    assert_eq!(
        samples(&text, "automations_stale_after_seconds"),
        [(
            "automation=\"offsite\",namespace=\"automations\"",
            3.0 * 3600.0
        )]
    );

    // Nothing any command said reaches a sample.
    for words in [
        "broken pipe",
        "disk quota",
        "synced",
        "fine",
        "on leave",
        "moving racks",
    ] {
        assert!(!text.contains(words), "{words:?} in the metrics");
    }

    // OpenMetrics: the same samples, `_created` beside each counter, and an end.
    let om = stdout(&sb.run(["metrics", "--openmetrics"]));
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE automations_runs counter\n"));
    // Every counter of an automation with lines in the log says where it starts: eight never
    // ran, so theirs do not.
    assert_eq!(samples(&om, "automations_runs_total").len(), 50 * 5);
    let created = samples(&om, "automations_runs_created");
    assert_eq!(created.len(), 42 * 5);
    assert!(
        created
            .iter()
            .all(|(l, v)| !label(l, "automation").starts_with("new-") && *v > 1.0e9 && *v <= now)
    );
    assert_eq!(said(&om), said(&text));
}

#[test]
#[ignore = "a real component: promtool and a Prometheus server"]
fn the_documented_config_and_alert_rules_pass_promtool() {
    let test = "metrics::the_documented_config_and_alert_rules_pass_promtool";
    let Some(promtool) = tool(test, "promtool") else {
        return;
    };
    let dir = repo_root().join("docs/prometheus");
    let out = Command::new(&promtool)
        .args(["test", "rules", "rules.test.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success() && stdout(&out).contains("SUCCESS"),
        "promtool test rules: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // The example configuration, with its token file where this test has one.
    let sb = Sandbox::new();
    let token = sb.path("automations.token");
    std::fs::write(&token, "0123").unwrap();
    let config = std::fs::read_to_string(dir.join("prometheus.yml"))
        .unwrap()
        .replace("/etc/prometheus/automations.token", token.to_str().unwrap());
    assert!(config.contains(token.to_str().unwrap()));
    std::fs::write(sb.path("prometheus.yml"), config).unwrap();
    std::fs::copy(dir.join("rules.yml"), sb.path("rules.yml")).unwrap();
    let out = Command::new(&promtool)
        .args(["check", "config", "prometheus.yml"])
        .current_dir(sb.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success() && stdout(&out).contains("SUCCESS: 4 rules found"),
        "promtool check config: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // One way to scrape (the other only as a comment): two would send every alert twice.
    let config = std::fs::read_to_string(dir.join("prometheus.yml")).unwrap();
    let jobs: Vec<&str> = config
        .lines()
        .filter(|l| l.trim_start().starts_with("- job_name:"))
        .collect();
    assert_eq!(jobs, ["  - job_name: node"], "{config}");
}

/// A definition of the textfile test: `name` runs `script`, and has a schedule.
fn scheduled(sb: &Sandbox, name: &str, script: &str) {
    sb.shell_definition(name, script, "[schedule]\nevery_minutes = 30\n");
    sb.install_record(name, chrono::Utc::now());
}

#[test]
fn every_firing_rewrites_the_textfile_whole_and_health_rewrites_it_all() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    let dir = sb.path("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("automations.prom");
    crate::fixtures::write_private(
        &sb.data.join("metrics.toml"),
        &format!("textfile = \"{}\"\n", file.display()),
    );
    for i in 0..4 {
        scheduled(&sb, &format!("job-{i}"), "exit 0");
    }
    scheduled(&sb, "broken", "echo oops >&2; exit 1");

    // The first firing writes every automation (it has no file to merge into).
    sb.run(["run", "job-0"]);
    let first = std::fs::read_to_string(&file).unwrap();
    let verdicts = samples(&first, "automations_verdict");
    assert_eq!(
        verdicts.len(),
        15,
        "five automations, three states each:\n{first}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644,
        "node_exporter runs as another user"
    );

    for _ in 0..3 {
        sb.run(["run", "broken"]);
    }

    // Firings from four processes at once while a reader reads the file over and over: every
    // read is a whole document, and at the end each automation's count is its own.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (file, stop) = (file.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let text = std::fs::read_to_string(&file).unwrap();
                assert!(
                    text.starts_with("# HELP ") && text.ends_with("\"} 1\n"),
                    "a torn read:\n{text}"
                );
                assert_eq!(text.matches("# TYPE ").count(), 14, "{text}");
                reads += 1;
            }
            reads
        })
    };
    let firings: Vec<_> = (0..4)
        .map(|i| {
            let sb_cmd = |n: &str| sb.cmd(["run", n]);
            let cmds: Vec<Command> = (0..5).map(|_| sb_cmd(&format!("job-{i}"))).collect();
            std::thread::spawn(move || {
                for mut c in cmds {
                    c.stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .unwrap();
                }
            })
        })
        .collect();
    for f in firings {
        f.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();

    let text = std::fs::read_to_string(&file).unwrap();
    let ok: BTreeMap<&str, f64> = samples(&text, "automations_runs_total")
        .into_iter()
        .filter(|(l, _)| label(l, "outcome") == "ok")
        .map(|(l, v)| (label(l, "automation"), v))
        .collect();
    assert_eq!(
        ok,
        [
            ("broken", 0.0),
            ("job-0", 6.0),
            ("job-1", 5.0),
            ("job-2", 5.0),
            ("job-3", 5.0)
        ]
        .into_iter()
        .collect()
    );
    let failed: Vec<(&str, f64)> = samples(&text, "automations_runs_total")
        .into_iter()
        .filter(|(l, v)| label(l, "outcome") == "failed" && *v > 0.0)
        .map(|(l, v)| (label(l, "automation"), v))
        .collect();
    assert_eq!(failed, [("broken", 3.0)]);
    // What each firing wrote of its automation is health's verdict now.
    let from_firings = said(&text);
    assert_eq!(from_firings, health(&sb));
    assert_eq!(from_firings["broken"].0, "degraded");

    // The switches are news too: a pause, the kill switch, and the firing it skips.
    let paused = |text: &str| -> Vec<String> {
        samples(text, "automations_paused")
            .into_iter()
            .filter(|(_, v)| *v == 1.0)
            .map(|(l, _)| label(l, "automation").to_owned())
            .collect()
    };
    let now = || std::fs::read_to_string(&file).unwrap();
    sb.run(["pause", "job-2", "--reason", "x"]);
    assert_eq!(paused(&now()), ["job-2"]);
    sb.run(["stop-all", "--reason", "racks"]);
    assert_eq!(
        samples(&now(), "automations_stop_all"),
        [("namespace=\"automations\"", 1.0)]
    );
    sb.run(["run", "job-1"]);
    let skipped: Vec<(String, f64)> = samples(&now(), "automations_runs_total")
        .into_iter()
        .filter(|(l, v)| label(l, "outcome") == "skipped" && *v > 0.0)
        .map(|(l, v)| (label(l, "automation").to_owned(), v))
        .collect();
    assert_eq!(skipped, [("job-1".to_owned(), 1.0)]);
    sb.run(["resume-all"]);
    assert_eq!(
        samples(&now(), "automations_stop_all"),
        [("namespace=\"automations\"", 0.0)]
    );

    // An automation whose definition and install are gone: health rewrites the whole file, and
    // it leaves the samples (nothing of it will run again) while `health` still names it.
    std::fs::remove_file(sb.root.join("automations/job-3.toml")).unwrap();
    std::fs::remove_file(sb.data.join("state/installed/job-3.json")).unwrap();
    sb.run(["health"]);
    let text = now();
    assert_eq!(paused(&text), ["job-2"]);
    let mut told = health(&sb);
    assert!(told.remove("job-3").is_some(), "health still names job-3");
    assert_eq!(said(&text), told);
    assert!(!text.contains("automation=\"job-3\""), "{text}");
    assert!(
        !samples(&text, "automations_next_run_timestamp_seconds")
            .iter()
            .any(|(l, _)| label(l, "automation") == "job-2" || label(l, "automation") == "job-3"),
        "no next run while paused or not installed:\n{text}"
    );
    assert!(!text.contains("oops"));

    // The hourly health-check's `notify look` (here without notify.toml) writes it whole too.
    std::fs::remove_file(&file).unwrap();
    sb.run(["notify", "look"]);
    assert_eq!(said(&std::fs::read_to_string(&file).unwrap()), told);

    // A metrics.toml that is wrong is said by the firing, which still runs and is recorded.
    crate::fixtures::write_private(
        &sb.data.join("metrics.toml"),
        "textfile = \"automations.prom\"\n",
    );
    let out = sb.run(["run", "job-0"]);
    assert_code(&out, 0);
    assert!(
        stderr(&out)
            .contains("metrics.toml: textfile: \"automations.prom\" must be an absolute path"),
        "{}",
        stderr(&out)
    );
    sb.assert_log_verifies();
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server on loopback with its own data folder, stopped on drop.
struct Prometheus {
    child: Child,
    url: String,
}

impl Prometheus {
    /// Started with `config` (scrape interval 1 s); up once it answers its readiness check.
    fn start(prometheus: &std::path::Path, sb: &Sandbox, config: &str) -> Self {
        let config_path = sb.path("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let child = Command::new(prometheus)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", sb.path("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(sb.path("prometheus.log")).unwrap())
            .spawn()
            .unwrap();
        let p = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_for("Prometheus to be ready", || {
            reqwest::blocking::get(format!("{}/-/ready", p.url))
                .is_ok_and(|r| r.status().is_success())
        });
        p
    }

    fn api(&self, path: &str, query: &[(&str, &str)]) -> serde_json::Value {
        let client = reqwest::blocking::Client::new();
        let url =
            reqwest::Url::parse_with_params(&format!("{}/api/v1/{path}", self.url), query).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&client.get(url).send().unwrap().text().unwrap()).unwrap();
        assert_eq!(doc["status"], "success", "{doc}");
        doc["data"].clone()
    }

    /// Each job's target health, once every job has been scraped.
    fn targets(&self, jobs: &[&str]) -> BTreeMap<String, (String, String)> {
        let mut seen = BTreeMap::new();
        wait_for("every target scraped", || {
            seen = self.api("targets", &[])["activeTargets"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["health"] != "unknown")
                .map(|t| {
                    (
                        t["labels"]["job"].as_str().unwrap().to_owned(),
                        (
                            t["health"].as_str().unwrap().to_owned(),
                            t["lastError"].as_str().unwrap_or("").to_owned(),
                        ),
                    )
                })
                .collect();
            jobs.iter().all(|j| seen.contains_key(*j))
        });
        seen
    }

    /// What an instant query answers: each series' labels and value.
    fn query(&self, q: &str) -> Vec<(serde_json::Value, f64)> {
        self.api("query", &[("query", q)])["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["metric"].clone(),
                    r["value"][1].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "a real component: promtool and a Prometheus server"]
fn a_real_prometheus_scrapes_the_dashboard_with_its_token_and_the_textfile() {
    let test = "metrics::a_real_prometheus_scrapes_the_dashboard_with_its_token_and_the_textfile";
    let Some(prometheus) = tool(test, "prometheus") else {
        return;
    };
    let sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    let file = sb.path("automations.prom");
    crate::fixtures::write_private(
        &sb.data.join("metrics.toml"),
        &format!("textfile = \"{}\"\n", file.display()),
    );
    scheduled(&sb, "backup", "exit 0");
    scheduled(&sb, "sync", "exit 1");
    sb.shell_definition("by-hand", "exit 0", "");
    sb.shell_definition("never", "exit 0", "");
    for name in ["backup", "backup", "sync", "sync", "sync", "by-hand"] {
        sb.run(["run", name]);
    }
    sb.run(["pause", "by-hand", "--reason", "x"]);
    sb.run(["health"]);
    let expected = health(&sb);
    assert_eq!(expected["sync"].0, "degraded");

    let dash = Dashboard::start(&sb);
    // Prometheus reads its credentials from a file of its own (credentials_file), 0600.
    let token = std::fs::read_to_string(sb.data.join("metrics.token")).unwrap();
    let credentials = sb.path("prometheus.token");
    crate::fixtures::write_private(&credentials, token.trim());
    // The textfile as a static target, read at each scrape (as node_exporter would).
    let served = file.clone();
    let files = crate::fixtures::FakeHttp::start(move |_| {
        crate::fixtures::Reply::Status(200, std::fs::read(&served).unwrap())
    });
    let config = format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: dashboard
    authorization:
      credentials_file: {credentials}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: no-token
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: textfile
    metrics_path: /automations.prom
    static_configs:
      - targets: ["127.0.0.1:{files}"]
"#,
        credentials = credentials.display(),
        port = dash.port,
        files = files.port,
        rules = repo_root().join("docs/prometheus/rules.yml").display(),
    );
    let prom = Prometheus::start(&prometheus, &sb, &config);
    let targets = prom.targets(&["dashboard", "no-token", "textfile"]);
    assert_eq!(targets["dashboard"].0, "up", "{targets:?}");
    assert_eq!(targets["textfile"].0, "up", "{targets:?}");
    assert_eq!(targets["no-token"].0, "down", "{targets:?}");
    assert!(targets["no-token"].1.contains("401"), "{targets:?}");

    for job in ["dashboard", "textfile"] {
        let mut got: BTreeMap<String, (String, Option<f64>)> = BTreeMap::new();
        wait_for("the first samples to be queryable", || {
            !prom
                .query(&format!("automations_verdict{{job=\"{job}\"}} == 1"))
                .is_empty()
        });
        for (m, _) in prom.query(&format!("automations_verdict{{job=\"{job}\"}} == 1")) {
            got.entry(m["automation"].as_str().unwrap().to_owned())
                .or_default()
                .0 = m["verdict"].as_str().unwrap().to_owned();
        }
        for (m, v) in prom.query(&format!(
            "automations_last_success_timestamp_seconds{{job=\"{job}\"}}"
        )) {
            got.entry(m["automation"].as_str().unwrap().to_owned())
                .or_default()
                .1 = Some(v);
        }
        assert_eq!(got.len(), expected.len(), "{job}: {got:?}");
        for (name, (verdict, last)) in &expected {
            assert_eq!(&got[name].0, verdict, "{job}: {name}");
            match (got[name].1, last) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 0.001, "{job}: {name}: {a} vs {b}"),
                (a, b) => assert_eq!(a, *b, "{job}: {name}"),
            }
        }
        let info = prom.query(&format!("automations_info{{job=\"{job}\"}}"));
        assert_eq!(info.len(), 1, "{info:?}");
        assert_eq!(info[0].0["namespace"], "automations");
    }
    // The dashboard answered in OpenMetrics (Prometheus asks for it first): its counters' start.
    let created = prom.query(
        "automations_runs_created{job=\"dashboard\",automation=\"sync\",outcome=\"failed\"}",
    );
    assert_eq!(created.len(), 1, "{created:?}");
    assert!(created[0].1 > 1.0e9);
    let failed = prom
        .query("automations_runs_total{job=\"dashboard\",automation=\"sync\",outcome=\"failed\"}");
    assert_eq!(failed[0].1, 3.0);

    // The shipped rules: sync's degraded verdict is an alert on its way (pending for its 15
    // minutes), from each job; a snooze holds it back in the very next evaluation, and the
    // snooze's end is a sample of its own.
    let pending = || -> Vec<String> {
        prom.query("ALERTS{alertname=\"AutomationDegraded\"}")
            .into_iter()
            .map(|(m, _)| {
                format!(
                    "{}/{}",
                    m["automation"].as_str().unwrap(),
                    m["job"].as_str().unwrap()
                )
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    wait_for("sync's alert to be pending", || pending().len() == 2);
    assert_eq!(pending(), ["sync/dashboard", "sync/textfile"]);
    let out = sb.run([
        "snooze",
        "sync",
        "2h",
        "--reason",
        "known: the mirror is down",
    ]);
    assert_code(&out, 0);
    wait_for("the snooze to hold the alert back", || pending().is_empty());
    let until = prom.query("automations_snoozed_until_timestamp_seconds{automation=\"sync\"}");
    assert_eq!(until.len(), 2, "{until:?}");
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(
        until
            .iter()
            .all(|(_, v)| *v > now + 7000.0 && *v <= now + 7200.0),
        "{until:?}"
    );
    // Its verdict is its own still: snoozing holds the news, not the truth.
    assert_eq!(
        prom.query("automations_verdict{automation=\"sync\",verdict=\"degraded\"} == 1")
            .len(),
        2
    );
    drop(prom);

    // By hand: no token, a wrong one, the page's cookie instead, a wrong Host.
    let client = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{}/metrics", dash.port);
    let status = |rb: reqwest::blocking::RequestBuilder| rb.send().unwrap().status().as_u16();
    assert_eq!(status(client.get(&url)), 401);
    assert_eq!(status(client.get(&url).bearer_auth("0".repeat(64))), 401);
    assert_eq!(
        status(
            client
                .get(&url)
                .header("Cookie", format!("automations_dashboard={}", dash.cookie))
        ),
        401
    );
    assert_eq!(
        status(
            client
                .get(&url)
                .bearer_auth(token.trim())
                .header("Host", "evil.example:80")
        ),
        403
    );
    let text = client.get(&url).bearer_auth(token.trim()).send().unwrap();
    assert_eq!(text.status().as_u16(), 200);
    assert_eq!(
        text.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let body = text.text().unwrap();
    assert_eq!(said(&body), expected);
    // The metrics token opens nothing else.
    assert_eq!(
        status(
            client
                .get(format!("http://127.0.0.1:{}/api/automations", dash.port))
                .bearer_auth(token.trim())
        ),
        401
    );
}

/// A switch is one write and one event, and the textfile follows it for the one automation it
/// concerns: a pause, resume or ack judges that automation alone from the data root (the service
/// manager is not asked, not even of an installed watch), a snooze or unsnooze writes its one
/// sample, the kill switch its own; no other automation is judged (here `other`, whose snooze
/// file cannot be read, would say so on stderr).
#[test]
fn a_switch_updates_the_textfile_for_its_own_automation_and_asks_no_service_manager() {
    let mut sb = Sandbox::new();
    std::fs::create_dir_all(sb.data.join("state/snoozed")).unwrap();
    let file = sb.path("automations.prom");
    crate::fixtures::write_private(
        &sb.data.join("metrics.toml"),
        &format!("textfile = \"{}\"\n", file.display()),
    );
    // A systemctl that records what it was asked (and knows of no stopped watch).
    let bin = sb.path("bin");
    let calls = sb.path("systemctl-calls");
    std::fs::create_dir(&bin).unwrap();
    write_executable(
        &bin.join("systemctl"),
        format!("#!/bin/sh\necho \"$*\" >> {}\n", calls.display()),
    );
    sb.env(
        "PATH",
        &format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    );
    std::fs::create_dir(sb.root.join("in")).unwrap();
    sb.definition(
        "inbox",
        "name = \"inbox\"\ncommand = [\"true\"]\n[trigger]\npaths = [\"{root}/in\"]\n",
    );
    sb.install_record("inbox", chrono::Utc::now());
    scheduled(&sb, "broken", "exit 1");
    scheduled(&sb, "other", "exit 0");
    for _ in 0..3 {
        sb.run(["run", "broken"]);
    }
    sb.run(["run", "other"]);
    std::fs::write(sb.data.join("state/snoozed/other.json"), "not json").unwrap();
    let now = || std::fs::read_to_string(&file).unwrap();
    let other_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("automation=\"other\""))
            .map(str::to_owned)
            .collect()
    };
    let before = other_lines(&now());
    assert!(!before.is_empty(), "{}", now());
    let _ = std::fs::remove_file(&calls);
    let value = |text: &str, family: &str, name: &str| -> Option<f64> {
        samples(text, family)
            .into_iter()
            .find(|(l, _)| label(l, "automation") == name)
            .map(|(_, v)| v)
    };

    let switch = |args: &[&str]| {
        let out = sb.run(args);
        assert_code(&out, 0);
        assert!(
            !stderr(&out).contains("other"),
            "{args:?} judged another automation: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&calls).unwrap_or_default(),
            "",
            "{args:?} asked the service manager"
        );
        now()
    };
    let text = switch(&["pause", "inbox", "--reason", "moving"]);
    assert_eq!(value(&text, "automations_paused", "inbox"), Some(1.0));
    let text = switch(&["snooze", "inbox", "2h"]);
    let until = value(
        &text,
        "automations_snoozed_until_timestamp_seconds",
        "inbox",
    )
    .unwrap();
    let want = (chrono::Utc::now() + chrono::Duration::hours(2)).timestamp() as f64;
    assert!((until - want).abs() < 120.0, "{until} against {want}");
    assert_eq!(value(&text, "automations_paused", "inbox"), Some(1.0));
    let text = switch(&["unsnooze", "inbox"]);
    assert_eq!(
        value(
            &text,
            "automations_snoozed_until_timestamp_seconds",
            "inbox"
        ),
        None
    );
    let text = switch(&["resume", "inbox"]);
    assert_eq!(value(&text, "automations_paused", "inbox"), Some(0.0));
    // An ack is judged: the verdict the file says is health's after it.
    assert_eq!(said(&text)["broken"].0, "degraded");
    let text = switch(&["ack", "broken"]);
    // No switch rewrote `other`'s samples: they are the first firing's, byte for byte.
    assert_eq!(other_lines(&text), before);
    assert_eq!(said(&text)["broken"], health(&sb)["broken"]);
    let _ = std::fs::remove_file(&calls); // `health` asks it, of the watch
    // `health` wrote the whole file; from here the kill switch leaves it as that wrote it.
    let before = other_lines(&now());
    let text = switch(&["stop-all", "--reason", "racks"]);
    assert_eq!(
        samples(&text, "automations_stop_all"),
        [("namespace=\"automations\"", 1.0)]
    );
    let text = switch(&["resume-all"]);
    assert_eq!(
        samples(&text, "automations_stop_all"),
        [("namespace=\"automations\"", 0.0)]
    );
    assert_eq!(other_lines(&text), before);
    // What a whole write does: it judges `other`, which says its snooze is not honoured.
    let whole = sb.run(["notify", "look"]);
    assert!(
        stderr(&whole).contains("other: its snooze is not honoured"),
        "{}",
        stderr(&whole)
    );
    sb.assert_log_verifies();
}
