//! The email channel against a real SMTP server (aiosmtpd, scripts/smtp_sink.py) with a
//! certificate from a test CA that the binary trusts through SSL_CERT_FILE: STARTTLS and TLS from
//! the first byte, a login, one mail per transition, and what a wrong password, an unknown issuer
//! or a server without STARTTLS get — the password never shown, never sent in the clear.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::fixtures::write_private;
use crate::harness::*;

const USER: &str = "automations@example.org";
const PASSWORD: &str = "Sm7p_pa55-w0rd.xyz";

/// A test CA, a second one that signed nothing here, and a server certificate for localhost and
/// 127.0.0.1 signed by the first.
struct Certs {
    ca: PathBuf,
    stranger: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Certs {
    fn make(dir: &Path) -> Self {
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "stranger"] {
            let mut args = vec!["req", "-x509", "-days", "2", "-subj"];
            let subject = format!("/CN=automations test {ca}");
            let (key, pem) = (format!("{ca}.key"), format!("{ca}.pem"));
            args.extend([subject.as_str(), "-keyout", &key, "-out", &pem]);
            args.extend(ec);
            openssl(dir, &args);
        }
        let mut req = vec!["req", "-subj", "/CN=localhost", "-keyout", "leaf.key"];
        req.extend(["-out", "leaf.csr"]);
        req.extend(ec);
        openssl(dir, &req);
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "leaf.ext",
                "-out",
                "leaf.pem",
            ],
        );
        Self {
            ca: dir.join("ca.pem"),
            stranger: dir.join("stranger.pem"),
            cert: dir.join("leaf.pem"),
            key: dir.join("leaf.key"),
        }
    }
}

/// A running scripts/smtp_sink.py: `starttls`, `implicit` or `plain`.
struct Sink {
    child: Child,
    out: PathBuf,
    port: u16,
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test venv's Python, when it has aiosmtpd.
fn python() -> Option<PathBuf> {
    let python = repo_root().join("target/kubernetes-validate/bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import aiosmtpd"])
            .output()
            .is_ok_and(|o| o.status.success());
    ready.then_some(python)
}

impl Sink {
    fn start(python: &Path, mode: &str, certs: &Certs, out: PathBuf) -> Self {
        std::fs::create_dir_all(&out).unwrap();
        // A port that was free a moment ago; taken meanwhile, the server exits and another is tried.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new(python)
                .arg(repo_root().join("scripts/smtp_sink.py"))
                .arg(mode)
                .arg(port.to_string())
                .args([&out, &certs.cert, &certs.key])
                .args([USER, PASSWORD])
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            // Owned from here, so a failed wait still stops it.
            let mut sink = Self {
                child,
                out: out.clone(),
                port,
            };
            let mut exited = false;
            wait_for("the SMTP server", || {
                exited = sink.child.try_wait().unwrap().is_some();
                exited || out.join("ready").exists()
            });
            if !exited {
                return sink;
            }
        }
        panic!("the SMTP server did not start on any of five ports");
    }

    /// Every mail it took, in order.
    fn mails(&self) -> Vec<serde_json::Value> {
        (1..)
            .map(|n| self.out.join(format!("mail-{n}.json")))
            .take_while(|p| p.exists())
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect()
    }

    /// The logins tried, one line each (`user ok|refused`).
    fn logins(&self) -> String {
        std::fs::read_to_string(self.out.join("logins")).unwrap_or_default()
    }
}

/// The certificates and a server, or `None` (skipped, loudly) when this machine lacks openssl or
/// the test venv lacks aiosmtpd.
fn server(test: &str, sb: &Sandbox, mode: &str) -> Option<(Certs, Sink)> {
    if crate::units::which("openssl").is_none() {
        skip(test, "openssl is missing");
        return None;
    }
    let Some(python) = python() else {
        skip(
            test,
            "aiosmtpd is not in target/kubernetes-validate (scripts/test-prereqs.sh installs it)",
        );
        return None;
    };
    let dir = sb.path("tls");
    std::fs::create_dir_all(&dir).unwrap();
    let certs = Certs::make(&dir);
    let sink = Sink::start(&python, mode, &certs, sb.path(mode));
    Some((certs, sink))
}

fn notify_toml(sb: &Sandbox, port: u16, more: &str) {
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "[email]\nserver = \"localhost\"\nport = {port}\nfrom = \"automations <{USER}>\"\nto = [\"ops@example.org\", \"oncall@example.org\"]\nuser = \"{USER}\"\n{more}"
        ),
    );
}

#[test]
#[ignore = "a real component: aiosmtpd, in the test venv"]
fn a_degradation_is_mailed_once_over_starttls_with_a_login_and_the_password_shows_nowhere() {
    let test =
        "a_degradation_is_mailed_once_over_starttls_with_a_login_and_the_password_shows_nowhere";
    let mut sb = Sandbox::new();
    let Some((certs, sink)) = server(test, &sb, "starttls") else {
        return;
    };
    // The password from the key store (a folder of keys, as a pod mounts them), not the
    // environment.
    let keys = sb.path("keys");
    std::fs::create_dir_all(&keys).unwrap();
    write_private(&keys.join("local.automations.notify.email"), PASSWORD);
    sb.env("AUTOMATIONS_NOTIFY", "on")
        .env("SSL_CERT_FILE", certs.ca.to_str().unwrap())
        .env("AUTOMATIONS_KEY_DIR", keys.to_str().unwrap());
    std::fs::create_dir_all(&sb.data).unwrap();
    notify_toml(&sb, sink.port, "only = [\"job\"]\n");
    write_private(
        &sb.data.join("health.toml"),
        "[defaults]\nwindow = 3\nmin_runs = 3\n",
    );
    sb.shell_definition("job", "echo 'password=hunter2' >&2; exit 1", "");
    sb.shell_definition("other", "exit 1", "");

    let mut said = String::new();
    for name in ["job", "job", "job", "other", "other", "other", "job"] {
        let o = sb.run(["run", name]);
        said.push_str(&stdout(&o));
        said.push_str(&stderr(&o));
    }

    // One mail: job's degradation (other's is not routed here; job's fourth failure is no news),
    // over TLS, after a login that matched, to both receivers.
    let mails = sink.mails();
    assert_eq!(mails.len(), 1, "{mails:?}\n{said}");
    let mail = &mails[0];
    assert_eq!(mail["tls"], true);
    assert_eq!(mail["login"], USER);
    assert_eq!(sink.logins(), format!("{USER} ok\n"));
    assert_eq!(mail["mail_from"], USER);
    assert_eq!(
        mail["rcpt_tos"],
        serde_json::json!(["ops@example.org", "oncall@example.org"])
    );
    let data = mail["data"].as_str().unwrap().replace("\r\n", "\n");
    let (head, body) = data.split_once("\n\n").unwrap();
    for want in [
        "Subject: automations: job is degraded",
        &format!("From: automations <{USER}>"),
        "To: ops@example.org, oncall@example.org",
        "Content-Type: text/plain; charset=utf-8",
        "Auto-Submitted: auto-generated",
        "Date: ",
        "Message-ID: <",
    ] {
        assert!(head.contains(want), "{want} in\n{head}");
    }
    let last_job_run = sb
        .events("finished")
        .into_iter()
        .filter(|e| e["name"] == "job")
        .nth(2)
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(body.contains(" is degraded: "), "{body}");
    for want in [
        "automation: job (namespace automations)",
        "verdict: degraded (",
        &format!("last run: {last_job_run}"),
        "look with: automations show job",
    ] {
        assert!(body.contains(want), "{want} in\n{body}");
    }
    assert!(!data.contains("hunter2"), "the command's output in\n{data}");

    // The password: in no file of the data root, nothing the commands said, no mail.
    sb.assert_no_file_holds(&[PASSWORD]);
    assert!(!said.contains(PASSWORD), "{said}");
    assert!(!data.contains(PASSWORD));
}

#[test]
#[ignore = "a real component: aiosmtpd, in the test venv"]
fn notify_test_says_what_the_server_answered_and_a_login_never_goes_where_it_is_unsafe() {
    let test =
        "notify_test_says_what_the_server_answered_and_a_login_never_goes_where_it_is_unsafe";
    let mut sb = Sandbox::new();
    let Some((certs, implicit)) = server(test, &sb, "implicit") else {
        return;
    };
    let python = python().unwrap();
    let plain = Sink::start(&python, "plain", &certs, sb.path("plain"));
    std::fs::create_dir_all(&sb.data).unwrap();
    let no_keys = sb.path("no-keys");
    std::fs::create_dir_all(&no_keys).unwrap();
    sb.env("SSL_CERT_FILE", certs.ca.to_str().unwrap())
        .env("AUTOMATIONS_KEY_DIR", no_keys.to_str().unwrap());
    notify_toml(&sb, implicit.port, "tls = \"implicit\"\n");
    let whom = format!("email (localhost:{})", implicit.port);

    // A login the server wants, and no password anywhere: said, nothing tried.
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains(&format!(
            "{whom}: not delivered (the SMTP server wants a login (user) but no password is stored (automations secret store notify.email"
        )),
        "{}",
        stdout(&o)
    );
    assert_eq!(implicit.logins(), "");

    // TLS from the first byte, the password from the environment (over the key store's, which
    // is wrong): delivered, and what the server answered is said.
    write_private(
        &no_keys.join("local.automations.notify.email"),
        "stale-password",
    );
    sb.env("AUTOMATIONS_SMTP_PASSWORD", PASSWORD);
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 0);
    assert_eq!(
        stdout(&o),
        format!("{whom}: delivered (250 2.0.0 queued as sink-1)\n")
    );
    let mails = implicit.mails();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0]["tls"], true);
    let data = mails[0]["data"].as_str().unwrap();
    let host = automations::notify::host();
    assert!(
        data.contains(&format!("Subject: automations: a test from {host}")),
        "{data}"
    );
    assert!(
        data.contains(&format!("A test from automations on {host} at ")),
        "{data}"
    );

    // A wrong password: the server's refusal, in its words, and never the password.
    sb.env("AUTOMATIONS_SMTP_PASSWORD", "not-the-password");
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains(&format!(
            "{whom}: not delivered (refused: permanent error (535): 5.7.8 Authentication credentials invalid)"
        )),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("not-the-password") && !stderr(&o).contains("not-the-password"));
    assert_eq!(implicit.mails().len(), 1);
    sb.env("AUTOMATIONS_SMTP_PASSWORD", PASSWORD);

    // A certificate from an issuer this machine does not trust: no login is tried.
    let logins = implicit.logins();
    sb.env("SSL_CERT_FILE", certs.stranger.to_str().unwrap());
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("not delivered (no answer (")
            && stdout(&o).contains("invalid peer certificate: UnknownIssuer"),
        "{}",
        stdout(&o)
    );
    assert_eq!(implicit.logins(), logins);
    sb.env("SSL_CERT_FILE", certs.ca.to_str().unwrap());

    // STARTTLS required (the default) from a server that does not offer it: the login is never
    // sent in the clear, and no mail either.
    notify_toml(&sb, plain.port, "");
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains(&format!(
            "email (localhost:{}): not delivered (not sent: the server does not offer STARTTLS, and nothing goes to it in the clear)",
            plain.port
        )),
        "{}",
        stdout(&o)
    );
    assert_eq!(plain.logins(), "");
    assert!(plain.mails().is_empty());

    // A relay on this machine, without TLS and without a login (cron's MAILTO way): delivered.
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "[email]\nserver = \"127.0.0.1\"\nport = {}\ntls = \"none\"\nfrom = \"{USER}\"\nto = \"root@localhost\"\n",
            plain.port
        ),
    );
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 0);
    let mails = plain.mails();
    assert_eq!(mails.len(), 1, "{}", stdout(&o));
    assert_eq!(
        (&mails[0]["tls"], &mails[0]["login"], &mails[0]["rcpt_tos"]),
        (
            &serde_json::json!(false),
            &serde_json::Value::Null,
            &serde_json::json!(["root@localhost"])
        )
    );
    assert_eq!(plain.logins(), "");

    // No TLS at all is for a relay on this machine only: a server elsewhere is refused when the
    // file is read.
    write_private(
        &sb.data.join("notify.toml"),
        "[email]\nserver = \"smtp.example.org\"\ntls = \"none\"\nfrom = \"a@example.org\"\nto = \"b@example.org\"\n",
    );
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("email.tls: \"none\" is for a relay on this machine only"),
        "{}",
        stderr(&o)
    );
}

/// A server that keeps answering, a line at a time, and never finishes its greeting: the message
/// is given up at the deadline (10 s), not when the server stops.
#[test]
fn a_server_that_never_finishes_its_greeting_is_given_up_at_the_deadline() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                // Five minutes of "220-" lines, each well within the client's read timeout.
                for _ in 0..600 {
                    if stream.write_all(b"220-still greeting\r\n").is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
            });
        }
    });
    let sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "[email]\nserver = \"127.0.0.1\"\nport = {port}\ntls = \"none\"\nfrom = \"a@example.org\"\nto = \"b@example.org\"\n"
        ),
    );
    let started = std::time::Instant::now();
    let o = sb.run(["notify", "test"]);
    let took = started.elapsed();
    assert_code(&o, 1);
    assert_eq!(
        stdout(&o),
        format!("email (127.0.0.1:{port}): not delivered (no answer (timeout))\n")
    );
    // The deadline is 10 s; the server would have gone on for five minutes.
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}
