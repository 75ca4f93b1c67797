//! `automations http` against servers on loopback: every class, redirect safety, the body cap,
//! secrets kept out of argv and every record, and the calls a run records.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::*;
use crate::harness::*;

/// `automations http ARGS --json` with the HTTP log at `log`; the parsed `--json` line.
fn call(sb: &Sandbox, log: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let mut c = sb.cmd(["http"]);
    c.args(args).arg("--json").env("AUTOMATION_HTTP_LOG", log);
    let o = c.output().unwrap();
    let meta = stderr(&o)
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (o, meta)
}

fn log_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn routes() -> FakeHttp {
    FakeHttp::start(|r| match r.path.as_str() {
        "/ok" => Reply::Status(200, vec![b'k'; 1024]),
        "/forbidden" => Reply::Status(403, b"no".to_vec()),
        "/slow-down" => Reply::Status(429, b"later".to_vec()),
        "/missing" => Reply::Status(404, b"?".to_vec()),
        "/down" => Reply::Status(503, b"down".to_vec()),
        "/hang" => Reply::Hang,
        "/drip" => Reply::Drip(100),
        p if p.starts_with("/chain/") => {
            let n: u32 = p[7..].parse().unwrap();
            if n == 0 {
                Reply::Status(200, b"end".to_vec())
            } else {
                Reply::Redirect(302, format!("/chain/{}", n - 1))
            }
        }
        _ => Reply::Status(500, b"unknown".to_vec()),
    })
}

#[test]
fn every_class_of_answer_and_of_no_answer() {
    let sb = Sandbox::new();
    let server = routes();
    let log = sb.path("http.jsonl");
    let u = |p: &str| format!("{}{p}", server.url);
    for (path, class, status) in [
        ("/ok", "2xx", 200),
        ("/forbidden", "blocked", 403),
        ("/slow-down", "rate_limited", 429),
        ("/missing", "4xx", 404),
        ("/down", "5xx", 503),
        ("/chain/5", "2xx", 200),
        ("/chain/6", "3xx", 302),
    ] {
        let (o, meta) = call(&sb, &log, &["get", &u(path)]);
        assert_code(&o, 0);
        assert_eq!(meta["class"], class, "{path}: {meta}");
        assert_eq!(meta["status"], status, "{path}: {meta}");
    }
    let (o, _) = call(&sb, &log, &["get", &u("/ok")]);
    assert_eq!(o.stdout.len(), 1024);
    // A name, resolved through the C library from /etc/hosts.
    let (o, meta) = call(
        &sb,
        &log,
        &["get", &format!("http://localhost:{}/ok", server.port)],
    );
    assert_code(&o, 0);
    assert_eq!(meta["class"], "2xx", "{}", stderr(&o));
    let (o, _) = call(&sb, &log, &["get", &u("/down"), "--fail"]);
    assert_code(&o, 22);
    assert!(o.stdout.is_empty(), "--fail writes no body");

    // No answer: exit 7, the class on stderr.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://127.0.0.1:{}/", closed.local_addr().unwrap().port());
    drop(closed);
    let (o, meta) = call(&sb, &log, &["get", &closed_url]);
    assert_code(&o, 7);
    assert_eq!(meta["class"], "none/refused");
    assert!(stderr(&o).contains("none/refused"), "{}", stderr(&o));

    let t0 = Instant::now();
    let (o, meta) = call(&sb, &log, &["get", &u("/hang"), "--max-time", "1"]);
    let took = t0.elapsed();
    assert_code(&o, 7);
    assert_eq!(meta["class"], "none/timeout");
    // The server never answers: anything but the deadline would wait for good. The bound leaves
    // room for a loaded machine; it is no measure of speed.
    assert!(took < Duration::from_secs(10), "took {took:?}");

    // Regression: once the body began, --max-time bounded only each read, so a server sending a
    // byte every 300 ms kept the call alive until --max-bytes. One deadline for the whole call.
    let t0 = Instant::now();
    let (o, _) = call(&sb, &log, &["get", &u("/drip"), "--max-time", "1"]);
    let took = t0.elapsed();
    assert_code(&o, 56);
    assert!(
        stderr(&o).contains("did not end before the deadline"),
        "{}",
        stderr(&o)
    );
    // The drip would last 30 s.
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let t0 = Instant::now();
    let (o, meta) = call(&sb, &log, &["get", "http://nonexistent.invalid/x"]);
    assert_code(&o, 7);
    assert_eq!(meta["class"], "none/dns", "{}", stderr(&o));
    // Under the call's own 20 s deadline: the lookup failed, it did not wait the deadline out.
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "waited on a network"
    );

    // One line per call, the host only.
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 14);
    for l in &lines {
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["class", "host", "ms", "status"], "{l}");
        assert!(!l.to_string().contains('/') || l["class"].as_str().unwrap().starts_with("none/"));
    }
    assert_eq!(lines[12]["status"], 200, "the dripping call: {}", lines[12]);
    assert_eq!(lines[13]["host"], "nonexistent.invalid");
    assert_eq!(lines[13]["status"], serde_json::Value::Null);
    assert_eq!(lines[8]["host"], "localhost");
}

#[test]
#[ignore = "a real component: openssl (a throwaway certificate)"]
fn a_self_signed_server_is_none_tls() {
    let sb = Sandbox::new();
    let Some(openssl) = crate::units::which("openssl") else {
        return skip("a_self_signed_server_is_none_tls", "openssl is missing");
    };
    let key = sb.path("key.pem");
    let cert = sb.path("cert.pem");
    let made = Command::new(&openssl)
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(&openssl)
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(port.to_string())
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the TLS server", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let (o, meta) = call(
        &sb,
        &sb.path("h"),
        &["get", &format!("https://127.0.0.1:{port}/")],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_code(&o, 7);
    assert_eq!(meta["class"], "none/tls", "{}", stderr(&o));
}

#[test]
fn credentials_and_bodies_never_cross_to_another_origin() {
    let sb = Sandbox::new();
    let other = FakeHttp::start(|_| Reply::Status(200, b"other".to_vec()));
    let to = other.url.clone();
    let first = FakeHttp::start(move |r| match r.path.as_str() {
        "/away" => Reply::Redirect(302, format!("{to}/landed")),
        "/here" => Reply::Redirect(302, "/landed".into()),
        "/see-other" => Reply::Redirect(303, format!("{to}/landed")),
        "/temporary" => Reply::Redirect(307, format!("{to}/landed")),
        "/file" => Reply::Redirect(302, "file:///etc/passwd".into()),
        "/ftp" => Reply::Redirect(302, "ftp://127.0.0.1/x".into()),
        _ => Reply::Status(200, b"landed".to_vec()),
    });
    let secret_file = sb.path("headers");
    std::fs::write(&secret_file, "X-File-Token: file-secret-1\n").unwrap();
    let args = |path: &str, extra: &[&str]| {
        let mut c = sb.cmd(["http"]);
        c.args(extra)
            .arg(format!("{}{path}", first.url))
            .args([
                "--header",
                "Authorization: Bearer argv-token",
                "--header",
                "X-Plain: plain",
            ])
            .args(["--header-env", "X-Env-Token=TOKEN_VAR", "--header-file"])
            .arg(&secret_file)
            .env("TOKEN_VAR", "env-secret-2");
        c.output().unwrap()
    };
    // Same origin: everything goes along.
    assert_code(&args("/here", &["get"]), 0);
    let landed = first
        .seen()
        .into_iter()
        .find(|s| s.path == "/landed")
        .unwrap();
    assert_eq!(landed.header("x-env-token"), Some("env-secret-2"));
    assert_eq!(landed.header("authorization"), Some("Bearer argv-token"));
    // Another port: no credential arrives there; a harmless header does.
    assert_code(&args("/away", &["get"]), 0);
    let seen = other.seen();
    assert_eq!(seen.len(), 1);
    for h in ["authorization", "x-env-token", "x-file-token"] {
        assert_eq!(seen[0].header(h), None, "{h} crossed: {:?}", seen[0]);
    }
    assert_eq!(seen[0].header("x-plain"), Some("plain"));
    // A POST body is never sent again elsewhere: 307 is not followed, 303 becomes a bodiless GET.
    let body = sb.path("body");
    std::fs::write(&body, "payload-3").unwrap();
    let data = format!("@{}", body.display());
    let o = args("/temporary", &["post", "--data", &data]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("not followed"), "{}", stderr(&o));
    assert_eq!(
        other.seen().len(),
        1,
        "a 307 carried the body to another origin"
    );
    let o = args("/see-other", &["post", "--data", &data]);
    assert_code(&o, 0);
    let seen = other.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].method, "GET");
    assert!(seen[1].body.is_empty());
    assert!(first.seen().iter().any(|s| s.body == b"payload-3"));
    // Only http(s) is followed.
    for path in ["/file", "/ftp"] {
        let o = args(path, &["get"]);
        assert_code(&o, 0);
        assert!(
            stderr(&o).contains("not followed"),
            "{path}: {}",
            stderr(&o)
        );
    }
}

/// Peak RSS (KiB) of `automations http ARGS` under GNU time, with its output.
fn rss_of(sb: &Sandbox, args: &[&str]) -> (Output, u64) {
    let report = sb.path("rss");
    let o = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(&sb.bin)
        .arg("http")
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let kib = std::fs::read_to_string(&report)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    (o, kib)
}

/// A 50 MB answer with --max-bytes 1000000 stops with a clear message, and costs no more memory
/// than a 1 KiB answer (the release binary's absolute figure, at most 8 MB, is `make bench`'s).
#[test]
#[ignore = "a real component: GNU time (peak memory)"]
fn a_large_body_stops_at_the_cap_in_little_memory() {
    let sb = Sandbox::new();
    let server = FakeHttp::start(|r| match r.path.as_str() {
        "/big" => Reply::Big(50 * 1024 * 1024),
        _ => Reply::Status(200, vec![b'k'; 1024]),
    });
    if !Path::new("/usr/bin/time").exists() {
        return skip(
            "a_large_body_stops_at_the_cap_in_little_memory",
            "GNU time is missing",
        );
    }
    let out = sb.path("out");
    let (o, small) = rss_of(&sb, &["get", &format!("{}/small", server.url)]);
    assert_code(&o, 0);
    for to_file in [true, false] {
        let url = format!("{}/big", server.url);
        let mut args = vec!["get", url.as_str(), "--max-bytes", "1000000"];
        let out_s = out.to_str().unwrap();
        if to_file {
            args.extend(["--output", out_s]);
        }
        let (o, big) = rss_of(&sb, &args);
        assert_code(&o, 63);
        assert!(
            stderr(&o).contains("larger than --max-bytes 1000000"),
            "{}",
            stderr(&o)
        );
        assert!(
            big <= small + 2048,
            "peak RSS {big} KiB for 50 MB, {small} KiB for 1 KiB"
        );
        assert!(!out.exists(), "half a body was left in --output");
        assert!(o.stdout.len() <= 1_000_000);
    }
}

#[test]
fn a_streamed_body_without_length_stops_at_the_cap() {
    // A server that sends no Content-Length (closes to end the body).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let chunk = vec![b'z'; 64 * 1024];
            for _ in 0..800 {
                if conn.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
    });
    let sb = Sandbox::new();
    let o = sb.run([
        "http",
        "get",
        &format!("http://127.0.0.1:{port}/"),
        "--max-bytes",
        "1000000",
    ]);
    assert_code(&o, 63);
    assert!(o.stdout.len() <= 1_000_000);
}

#[test]
fn a_header_env_secret_reaches_no_argv_stderr_or_log() {
    let mut sb = Sandbox::new();
    let server = FakeHttp::start(|r| match r.path.as_str() {
        "/hang" => Reply::Hang,
        _ => Reply::Status(500, b"x".to_vec()),
    });
    const SECRET: &str = "sk-live-Zq9Kx2Wv7pLm";
    sb.env("API_KEY", SECRET);
    let log = sb.path("http.jsonl");
    let mut c = sb.cmd([
        "http",
        "get",
        &format!("{}/hang", server.url),
        "--max-time",
        "2",
    ]);
    c.args(["--header-env", "Authorization=API_KEY", "--json"])
        .env("AUTOMATION_HTTP_LOG", &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    wait_for("the request", || !server.seen().is_empty());
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(SECRET));
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 7);
    assert_eq!(server.seen()[0].header("authorization"), Some(SECRET));
    assert!(!stderr(&o).contains(SECRET) && !stdout(&o).contains(SECRET));
    assert!(!std::fs::read_to_string(&log).unwrap().contains(SECRET));
    // Through a run: the run log and everything under the data root stay clean too.
    sb.definition(
        "caller",
        &format!(
            "name = \"caller\"\ncommand = [\"sh\", \"-c\", \"$AUTOMATION_BIN http get {}/x --header-env Authorization=API_KEY --fail\"]\nenv = [\"API_KEY\"]\n",
            server.url
        ),
    );
    assert_code(&sb.run(["run", "caller"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["http"]["counts"]["5xx"], 1, "{f}");
    sb.assert_no_file_holds(&[SECRET]);
}

#[test]
fn a_run_records_its_calls_by_class_fifty_listed_and_forgeries_counted() {
    let sb = Sandbox::new();
    let server = routes();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let three = format!(
        "$AUTOMATION_BIN http get {u}/ok; $AUTOMATION_BIN http get {u}/down; $AUTOMATION_BIN http get http://127.0.0.1:{closed_port}/; true",
        u = server.url
    );
    sb.shell_definition("three", &three, "");
    assert_code(&sb.run(["run", "three"]), 0);
    let f = sb.last_finished();
    let counts = f["http"]["counts"].as_object().unwrap();
    assert_eq!(counts.len(), 3, "{f}");
    assert_eq!(
        (
            counts["2xx"].clone(),
            counts["5xx"].clone(),
            counts["none/refused"].clone()
        ),
        (1.into(), 1.into(), 1.into())
    );
    let id = f["run"].as_str().unwrap().to_owned();
    let shown = stdout(&sb.run(["show", &id]));
    assert!(
        shown.contains("http      3 call(s)") && shown.contains("127.0.0.1 503"),
        "{shown}"
    );

    let many = format!(
        "i=0; while [ $i -lt 120 ]; do $AUTOMATION_BIN http head {u}/ok; i=$((i+1)); done; echo '{{\"host\":\"x\",\"status\":200,\"ms\":1,\"class\":\"5xx\"}}' >> \"$AUTOMATION_HTTP_LOG\"; echo '{{\"host\":\"x\",\"status\":200,\"ms\":1,\"class\":\"2xx\",\"path\":\"/p\"}}' >> \"$AUTOMATION_HTTP_LOG\"",
        u = server.url
    );
    sb.shell_definition("many", &many, "timeout_seconds = 120\n");
    assert_code(&sb.run(["run", "many"]), 0);
    let f = sb.last_finished();
    assert_eq!(f["http"]["requests"].as_array().unwrap().len(), 50);
    assert_eq!(f["http"]["more"], 70);
    assert_eq!(f["http"]["counts"]["2xx"], 120);
    assert_eq!(f["http"]["counts"]["invalid"], 2);
    sb.assert_log_verifies();
}

/// Regression: `--output /dev/null` renamed a temporary file over the device, replacing it with a
/// regular file. A device (made here, in the sandbox) must stay a device.
#[test]
#[ignore = "a real component: root (a tmpfs, a device node, another uid or a mount namespace)"]
fn output_to_a_device_writes_to_it_and_never_replaces_it() {
    use std::os::unix::fs::FileTypeExt;
    let sb = Sandbox::new();
    let server = routes();
    let dev = sb.path("null");
    let made = Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    if !made.success() {
        return skip(
            "output_to_a_device_writes_to_it_and_never_replaces_it",
            "mknod needs root",
        );
    }
    let o = sb.run([
        "http",
        "get",
        &format!("{}/ok", server.url),
        "--output",
        dev.to_str().unwrap(),
    ]);
    assert_code(&o, 0);
    assert!(
        std::fs::metadata(&dev)
            .unwrap()
            .file_type()
            .is_char_device()
    );
    // A regular file gets the whole body, and only on success.
    let file = sb.path("page");
    let o = sb.run([
        "http",
        "get",
        &format!("{}/ok", server.url),
        "--output",
        file.to_str().unwrap(),
    ]);
    assert_code(&o, 0);
    assert_eq!(std::fs::read(&file).unwrap().len(), 1024);
    let leftovers: Vec<_> = std::fs::read_dir(sb.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".part."))
        .collect();
    assert!(leftovers.is_empty());
}

/// a token that lives in the URL (its path, query or user info) had no way off the
/// command line, where every local user can read it. `--url-env` and `--url-file` take the URL
/// from a variable or a file; it reaches no argv, stderr, `--json` (the origin only) or record.
#[test]
fn a_secret_url_comes_from_a_variable_or_a_file_and_is_never_shown() {
    const TOKEN: &str = "tok-Ab3Xy9Qw";
    let mut sb = Sandbox::new();
    let server = FakeHttp::start(|r| match r.path.as_str() {
        p if p.starts_with("/hang/") => Reply::Hang,
        _ => Reply::Status(200, b"fine".to_vec()),
    });
    let secret = server
        .url
        .replacen("http://", &format!("http://u:{TOKEN}@"), 1);
    let hang = format!("{secret}/hang/{TOKEN}?key={TOKEN}");
    sb.env("FEED_URL", &hang);
    let log = sb.path("http.jsonl");
    let mut c = sb.cmd([
        "http",
        "get",
        "--url-env",
        "FEED_URL",
        "--max-time",
        "2",
        "--json",
    ]);
    c.env("AUTOMATION_HTTP_LOG", &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    wait_for("the request", || !server.seen().is_empty());
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(TOKEN));
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 7);
    assert_eq!(server.seen()[0].path, format!("/hang/{TOKEN}?key={TOKEN}"));
    assert!(!stderr(&o).contains(TOKEN), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("\"url\":\"{}/\"", server.url)),
        "{}",
        stderr(&o)
    );
    assert!(!std::fs::read_to_string(&log).unwrap().contains(TOKEN));
    // From a file (its first line), the same.
    let file = sb.path("feed-url");
    std::fs::write(&file, format!("{secret}/ok/{TOKEN}?key={TOKEN}\n")).unwrap();
    let (o, meta) = call(&sb, &log, &["get", "--url-file", file.to_str().unwrap()]);
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "fine");
    assert_eq!(meta["url"], format!("{}/", server.url));
    assert!(!stderr(&o).contains(TOKEN));
    // Refusals name the variable or file, never the value.
    sb.env("BAD_URL", &format!("ftp://{TOKEN}"));
    for args in [
        &["get", "--url-env", "BAD_URL"][..],
        &["get", "--url-env", "UNSET_URL"],
        &["get", "--url-file", "/nonexistent/url"],
        &["get", "http://example.org/", "--url-env", "FEED_URL"],
    ] {
        let o = sb.run(std::iter::once("http").chain(args.iter().copied()));
        assert_code(&o, 2);
        assert!(!stderr(&o).contains(TOKEN), "{args:?}: {}", stderr(&o));
    }
    let o = sb.run(["http", "get", "--url-env", "BAD_URL"]);
    assert!(
        stderr(&o).contains("--url-env BAD_URL does not hold an http:// or https:// URL"),
        "{}",
        stderr(&o)
    );
    // Through a run: nothing under the data root holds it.
    sb.definition(
        "caller",
        "name = \"caller\"\ncommand = [\"sh\", \"-c\", \"$AUTOMATION_BIN http get --url-env FEED_URL --max-time 1\"]\nenv = [\"FEED_URL\"]\n",
    );
    sb.run(["run", "caller"]);
    assert_eq!(
        sb.last_finished()["http"]["counts"]["none/timeout"],
        1,
        "{}",
        sb.last_finished()
    );
    sb.assert_no_file_holds(&[TOKEN]);
}
