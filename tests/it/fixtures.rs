//! Real and fake outside components for the key tests: a D-Bus session with a real gnome-keyring
//! Secret Service, and a fake AnyType API on loopback.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{Sandbox, skip};

/// A "session bus" for `sb` that nobody answers on: a test asks `accept` whether anything
/// connected to it (the keychain asked, where it must not be).
pub fn silent_bus(sb: &mut Sandbox) -> std::os::unix::net::UnixListener {
    let sock = sb.path("bus.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    sb.env(
        "DBUS_SESSION_BUS_ADDRESS",
        &format!("unix:path={}", sock.display()),
    );
    listener
}

/// Whether the keyring tests' programs are installed; else a loud skip naming the first missing.
fn keyring_tools(test: &str, tools: &[&str]) -> bool {
    for tool in tools {
        if !["/usr/bin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(tool).exists())
        {
            skip(
                test,
                &format!("{tool} is missing (apt-get install dbus gnome-keyring libsecret-tools)"),
            );
            return false;
        }
    }
    true
}

/// A private runtime folder (0700) for one keyring: its bus socket and control socket.
fn private_runtime(sb: &Sandbox) -> PathBuf {
    let runtime = sb.path("keyring-runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    runtime
}

/// Starts `dbus_daemon` as a session bus listening in `runtime`; the child and its address.
fn session_bus(mut dbus_daemon: Command, runtime: &Path) -> (Child, String) {
    let mut bus = dbus_daemon
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address=unix:path={}/bus", runtime.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut address = String::new();
    BufReader::new(bus.stdout.take().unwrap())
        .read_line(&mut address)
        .unwrap();
    (bus, address.trim().to_owned())
}

/// A private D-Bus session bus with gnome-keyring's Secret Service, unlocked with a password.
pub struct Keyring {
    bus: Child,
    pub address: String,
    home: PathBuf,
    /// Its own runtime folder: gnome-keyring's control socket lives there, and tests running in
    /// parallel must never find each other's daemon through it.
    runtime: PathBuf,
}

impl Keyring {
    /// Starts it and points the sandbox's commands at it; None (after a loud skip) without the
    /// packages.
    pub fn start(sb: &mut Sandbox, test: &str) -> Option<Self> {
        let tools = [
            "dbus-daemon",
            "gnome-keyring-daemon",
            "secret-tool",
            "dbus-send",
        ];
        if !keyring_tools(test, &tools) {
            return None;
        }
        let runtime = private_runtime(sb);
        // The bus's socket in the sandbox, not /tmp: the daemon is killed at the end, which
        // leaves its socket behind (one /tmp/dbus-* per test run, hundreds of them).
        let (bus, address) = session_bus(Command::new("dbus-daemon"), &runtime);
        let k = Keyring {
            bus,
            address: address.clone(),
            home: sb.home.clone(),
            runtime,
        };
        let mut unlock = k
            .command("gnome-keyring-daemon")
            .args(["--unlock", "--components=secrets"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        unlock
            .stdin
            .take()
            .unwrap()
            .write_all(b"test-password")
            .unwrap();
        assert!(unlock.wait().unwrap().success());
        let started = k
            .command("gnome-keyring-daemon")
            .args(["--start", "--components=secrets"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(started.success());
        // Ready when it takes a write: right after starting, the default collection is not always
        // the unlocked login one yet, and a store would read as "locked".
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut probe = k
                .command("secret-tool")
                .args(["store", "--label=probe", "service", "readiness-probe"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            probe.stdin.take().unwrap().write_all(b"x").unwrap();
            if probe.wait().unwrap().success() && k.lookup("readiness-probe").is_some() {
                break;
            }
            assert!(
                std::time::Instant::now() < until,
                "the keyring never took a write"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = k
            .command("secret-tool")
            .args(["clear", "service", "readiness-probe"])
            .status();
        sb.env("DBUS_SESSION_BUS_ADDRESS", &address);
        Some(k)
    }

    /// The session a server has: a bus that starts gnome-keyring's Secret Service itself on the
    /// first call (D-Bus activation), which no one has unlocked and which has no login keyring.
    /// None (after a loud skip) without the packages.
    pub fn on_a_server(sb: &mut Sandbox, test: &str) -> Option<Self> {
        if !keyring_tools(
            test,
            &["dbus-daemon", "gnome-keyring-daemon", "secret-tool"],
        ) {
            return None;
        }
        let runtime = private_runtime(sb);
        // The bus hands its own environment to what it starts: the sandbox's, never the real one.
        let mut daemon = Command::new("dbus-daemon");
        daemon
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &sb.home)
            .env("XDG_RUNTIME_DIR", &runtime);
        let (bus, address) = session_bus(daemon, &runtime);
        sb.env("DBUS_SESSION_BUS_ADDRESS", &address);
        Some(Keyring {
            bus,
            address,
            home: sb.home.clone(),
            runtime,
        })
    }

    /// Its runtime folder (`XDG_RUNTIME_DIR`).
    pub fn runtime(&self) -> &Path {
        &self.runtime
    }

    /// A command in this session.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address);
        c
    }

    /// Stores `secret` under `label` with secret-tool (independent of our code).
    pub fn store(&self, label: &str, secret: &str) {
        let mut c = self
            .command("secret-tool")
            .args(["store", "--label", "test", "service", label])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(secret.as_bytes())
            .unwrap();
        assert!(c.wait().unwrap().success());
    }

    /// The secret under `label`, read with secret-tool.
    pub fn lookup(&self, label: &str) -> Option<String> {
        let o = self
            .command("secret-tool")
            .args(["lookup", "service", label])
            .output()
            .unwrap();
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// How many items carry `service = label`.
    pub fn count(&self, label: &str) -> usize {
        let o = self
            .command("secret-tool")
            .args(["search", "--all", "service", label])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&o.stderr).lines())
            .filter(|l| l.starts_with("label = "))
            .count()
    }

    /// Locks the login collection, as a headless session finds it.
    pub fn lock(&self) {
        let o = self
            .command("dbus-send")
            .args([
                "--session",
                "--dest=org.freedesktop.secrets",
                "--type=method_call",
                "--print-reply",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.Lock",
                "array:objpath:/org/freedesktop/secrets/collection/login",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        // gnome-keyring-daemon leaves with its bus.
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

/// How the fake AnyType answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Status and body.
    Reply(u16, String),
    /// The body, after a pause.
    Slow(Duration, String),
    /// Close the connection without a word.
    Hangup,
}

/// A fake AnyType API on 127.0.0.1 that records what it was asked.
pub struct FakeAnytype {
    pub url: String,
    answer: Arc<Mutex<Answer>>,
    /// (request line, Authorization header) of every request.
    pub seen: Arc<Mutex<Vec<(String, String)>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

/// A whoami body: restricted, scoped, `permission` on the key and on each of `spaces`.
pub fn whoami(permission: &str, spaces: &[&str]) -> String {
    let spaces: Vec<String> = spaces
        .iter()
        .map(|s| format!("{{\"id\": \"{s}\", \"permission\": \"{permission}\"}}"))
        .collect();
    format!(
        "{{\"key\": {{\"kind\": \"restricted\", \"scoped\": true, \"all_spaces\": false, \"permission\": \"{permission}\", \"expires_at\": null, \"spaces\": [{}]}}}}",
        spaces.join(", ")
    )
}

impl FakeAnytype {
    pub fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(Mutex::new(answer));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s, st) = (answer.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (a, s) = (a.clone(), s.clone());
                std::thread::spawn(move || serve(conn, &a, &s));
            }
        });
        FakeAnytype {
            url: format!("http://127.0.0.1:{port}"),
            answer,
            seen,
            stop,
            port,
        }
    }

    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }
}

fn serve(mut conn: TcpStream, answer: &Mutex<Answer>, seen: &Mutex<Vec<(String, String)>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request = String::new();
    let _ = reader.read_line(&mut request);
    let mut auth = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line
            .strip_prefix("authorization: ")
            .or_else(|| line.strip_prefix("Authorization: "))
        {
            auth = v.trim().to_owned();
        }
    }
    seen.lock().unwrap().push((request.trim().to_owned(), auth));
    let answer = answer.lock().unwrap().clone();
    let (status, body) = match answer {
        Answer::Hangup => return,
        Answer::Reply(status, body) => (status, body),
        Answer::Slow(pause, body) => {
            std::thread::sleep(pause);
            (200, body)
        }
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut rest = Vec::new();
    let _ = conn.set_read_timeout(Some(Duration::from_millis(10)));
    let _ = reader.read_to_end(&mut rest);
}

impl Drop for FakeAnytype {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Writes a 0600 `spaces.json` into the sandbox's data root.
pub fn write_spaces(sb: &Sandbox, json: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&sb.data).unwrap();
    let p = sb.data.join("spaces.json");
    std::fs::write(&p, json).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The standard policy of these tests: agent is fully writable, work is read-only for agents.
pub const SPACES: &str = r#"{"spaces": {
    "agent": {"anytype_id": "id-agent", "agent_read": true, "agent_write": "full"},
    "work": {"anytype_id": "id-work", "agent_read": true, "agent_write": "ask"}
}}"#;

/// A request a fake HTTP server saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a fake HTTP server answers.
pub enum Reply {
    /// A status and a body.
    Status(u16, Vec<u8>),
    /// A redirect with this status to this Location.
    Redirect(u16, String),
    /// 200 with a body of this many bytes, streamed.
    Big(u64),
    /// Accept, read the request, never answer.
    Hang,
    /// 200 announcing a body of this many bytes, then one byte every 300 ms.
    Drip(u64),
}

/// A fake HTTP/1.1 server on loopback: answers by `route`, records what it saw.
pub struct FakeHttp {
    pub url: String,
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl FakeHttp {
    pub fn start(route: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let route = Arc::new(route);
        let (s2, st2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (seen, stop, route) = (s2.clone(), st2.clone(), route.clone());
                        std::thread::spawn(move || serve_http(conn, &*route, &seen, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}"),
            port,
            seen,
            stop,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_http(
    mut conn: TcpStream,
    route: &(dyn Fn(&Seen) -> Reply + Send + Sync),
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
) {
    conn.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((n, v)) = line.trim_end().split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let req = Seen {
        method,
        path,
        headers,
        body,
    };
    seen.lock().unwrap().push(req.clone());
    let head = |code: u16, extra: &str, len: u64| {
        format!("HTTP/1.1 {code} X\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n")
    };
    let _ = match route(&req) {
        Reply::Status(code, b) => conn
            .write_all(head(code, "", b.len() as u64).as_bytes())
            .and_then(|()| conn.write_all(&b)),
        Reply::Redirect(code, to) => {
            conn.write_all(head(code, &format!("Location: {to}\r\n"), 0).as_bytes())
        }
        Reply::Big(n) => (|| {
            conn.write_all(head(200, "", n).as_bytes())?;
            let chunk = vec![b'z'; 64 * 1024];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                conn.write_all(&chunk[..k])?;
                left -= k as u64;
            }
            Ok(())
        })(),
        Reply::Drip(n) => (|| {
            conn.write_all(head(200, "", n).as_bytes())?;
            for _ in 0..n {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                conn.write_all(b"d")?;
                std::thread::sleep(Duration::from_millis(300));
            }
            Ok(())
        })(),
        Reply::Hang => {
            let until = std::time::Instant::now() + Duration::from_secs(15);
            while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
    };
}

/// Writes a settings file the way the data root requires it: owner-only (0600), its folder made
/// when missing.
pub fn write_private(p: &std::path::Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}
