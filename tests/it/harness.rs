//! A sandbox per test: a temporary repository root, HOME and data root. The environment is set
//! only on the child process, so tests never touch the real user's agents folder, keychain or log.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: this build's, or `AUTOMATIONS_TEST_BIN` (to show a test failing on an
/// older build).
pub fn bin() -> PathBuf {
    std::env::var_os("AUTOMATIONS_TEST_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_automations")),
        PathBuf::from,
    )
}

/// The checkout this test binary was built from.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// True under CI, where a missing component is always a failure.
pub fn in_ci() -> bool {
    truthy(std::env::var_os("CI"))
}

fn truthy(v: Option<std::ffi::OsString>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether a test whose component is missing may be skipped instead of failing: only when the
/// person asked for it with AUTOMATIONS_TEST_SKIP_REAL=1, and never under CI.
pub fn may_skip(ci: bool, skip_real: Option<&std::ffi::OsStr>) -> bool {
    !ci && skip_real.is_some_and(|v| v == "1")
}

/// A test that cannot run here: fails, naming what is missing, unless skipping was asked for
/// (`may_skip`); then it says SKIPPED loudly and writes itself to the ledger `make test` counts.
pub fn skip(test: &str, why: &str) {
    let opted_out = may_skip(
        in_ci(),
        std::env::var_os("AUTOMATIONS_TEST_SKIP_REAL").as_deref(),
    );
    assert!(
        opted_out,
        "{test} cannot run here: {why}. `make test` installs what is missing (or prints the command \
         that does); AUTOMATIONS_TEST_SKIP_REAL=1 skips such tests outside CI"
    );
    eprintln!("SKIPPED: {test}: {why}");
    if let Some(ledger) = std::env::var_os("AUTOMATIONS_TEST_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(ledger)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// Sandboxes are `<tmp>/automations-it-<pid of the test process>-<random>`.
const SANDBOX_PREFIX: &str = "automations-it-";

/// Removes the sandboxes of test processes that no longer exist: a test killed mid-way (a
/// timeout, Ctrl-C) never ran the drop that removes its own. Once per test process.
fn sweep_orphans() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(SANDBOX_PREFIX))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<i32>().ok())
            else {
                continue;
            };
            let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH);
            if gone {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub data: PathBuf,
    /// The binary `cmd` runs: the one under test, or a stable copy (see `use_stable_bin`).
    pub bin: PathBuf,
    env: Vec<(String, String)>,
}

impl Sandbox {
    /// An empty repository root (with `automations/` and `scripts/`), HOME and data root.
    pub fn new() -> Self {
        sweep_orphans();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SANDBOX_PREFIX}{}-", std::process::id()))
            .tempdir()
            .unwrap();
        Self::in_dir(dir)
    }

    /// As [`Sandbox::new`], outside /tmp and /var/tmp: for a unit with `PrivateTmp=yes`, which
    /// hides them (and a repository there) from its service. Under cargo's target/tmp unless the
    /// checkout itself is in a temp folder (a fresh clone in /tmp), else under
    /// /var/lib/automations-it (root only: only the private manager's tests need it).
    pub fn outside_tmp() -> Self {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let base = if target.starts_with("/tmp") || target.starts_with("/var/tmp") {
            let base = PathBuf::from("/var/lib/automations-it");
            std::fs::create_dir_all(&base).unwrap();
            base
        } else {
            target.to_path_buf()
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SANDBOX_PREFIX}{}-", std::process::id()))
            .tempdir_in(base)
            .unwrap();
        Self::in_dir(dir)
    }

    fn in_dir(dir: tempfile::TempDir) -> Self {
        let root = dir.path().join("repo");
        let home = dir.path().join("home");
        let data = dir.path().join("data");
        for d in [root.join("automations"), root.join("scripts"), home.clone()] {
            std::fs::create_dir_all(&d).unwrap();
        }
        Self {
            dir,
            root,
            home,
            data,
            bin: bin(),
            env: Vec::new(),
        }
    }

    /// Runs a copy of the binary outside target/, as an installed one would be.
    pub fn use_stable_bin(&mut self) -> PathBuf {
        self.bin = stable_bin(&self.dir.path().join("bin"));
        self.bin.clone()
    }

    /// `automations/<name>.toml` parsed as the program parses it, with this sandbox's home and
    /// data root.
    pub fn parsed(&self, name: &str) -> automations::definition::Definition {
        let bytes = std::fs::read(self.root.join(format!("automations/{name}.toml"))).unwrap();
        let checks = automations::definition::Checks {
            home: self.home.clone(),
            data_root: self.data.clone(),
            units_dir: "/nonexistent-units".into(),
        };
        automations::definition::parse(&format!("{name}.toml"), &bytes, &checks)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
    }

    /// Writes `automations/<name>.toml`.
    pub fn definition(&self, name: &str, toml: &str) -> &Self {
        std::fs::write(
            self.root.join("automations").join(format!("{name}.toml")),
            toml,
        )
        .unwrap();
        self
    }

    /// Writes a definition `name` whose command is `sh -c SCRIPT`, with `more` TOML lines after it.
    pub fn shell_definition(&self, name: &str, script: &str, more: &str) -> &Self {
        self.definition(
            name,
            &format!(
                "name = \"{name}\"\ncommand = [\"sh\", \"-c\", {}]\n{more}",
                serde_json::to_string(script).unwrap()
            ),
        )
    }

    /// Fails naming the file when any file under the data root holds one of `secrets`.
    pub fn assert_no_file_holds(&self, secrets: &[&str]) {
        let mut stack = vec![self.data.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                    continue;
                }
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                for secret in secrets {
                    assert!(
                        !text.contains(secret),
                        "{} holds a secret",
                        e.path().display()
                    );
                }
            }
        }
    }

    /// Writes an executable script under `scripts/`.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.root.join("scripts").join(name);
        write_executable(&p, body);
        p
    }

    /// Sets a variable on every child of this sandbox.
    pub fn env(&mut self, k: &str, v: &str) -> &mut Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// A command for the binary with a clean, sandboxed environment.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new(&self.bin);
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("AUTOMATIONS_ROOT", &self.root)
            .env("AUTOMATIONS_DATA_ROOT", &self.data)
            .env("AUTOMATIONS_NOTIFY", "off")
            .current_dir(&self.root)
            .args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs the binary and returns its output.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd(args).output().unwrap()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit code, showing both streams when it differs.
#[track_caller]
pub fn assert_code(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

/// Copies the folder `from` into `to`, modes kept, through `cp` (its scripts are run: see
/// [`install_executable`] for why this process never writes them).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let status = Command::new("cp")
        .arg("-R")
        .arg(from.join("."))
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -R {} {}",
        from.display(),
        to.display()
    );
}

impl Sandbox {
    /// An install record of `name` made at `at`, as `install` writes it (with placeholder paths and
    /// hashes): for tests of what a record changes, without a service manager.
    /// The record approves the definition as it is now, and the script its `argv[0]` names in
    /// the root, so scheduled firings run it .
    pub fn install_record(&self, name: &str, at: chrono::DateTime<chrono::Utc>) {
        use sha2::Digest as _;
        let sha = |bytes: &[u8]| format!("{:x}", sha2::Sha256::digest(bytes));
        let def = std::fs::read(self.root.join("automations").join(format!("{name}.toml")));
        let script = def
            .as_ref()
            .ok()
            .and_then(|b| toml::from_slice::<toml::Table>(b).ok())
            .and_then(|t| t.get("command")?.get(0)?.as_str().map(str::to_owned))
            .filter(|a0| a0.contains('/') && !a0.starts_with('/'))
            .and_then(|a0| {
                let bytes = std::fs::read(self.root.join(&a0)).ok()?;
                Some(serde_json::json!({"path": a0, "sha256": sha(&bytes)}))
            });
        let dir = self.data.join("state/installed");
        std::fs::create_dir_all(&dir).unwrap();
        let mut record = serde_json::json!({
            "label": format!("local.automations.{name}"), "target": "systemd", "files": {},
            "definition": def.as_deref().map_or_else(|_| "0".to_owned(), sha),
            "bin": "/x", "root": "/x", "data_root": "/x",
            "installed_at": at.to_rfc3339(), "pinned": true,
        });
        if let Some(s) = script {
            record["script"] = s;
        }
        std::fs::write(dir.join(format!("{name}.json")), record.to_string()).unwrap();
    }

    /// Every whole line of the live run log, parsed. A last line without its newline is left out:
    /// read while a run appends, the file can end in part of a line being written.
    pub fn log_lines(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.data.join("runs.jsonl")).unwrap_or_default();
        text.split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("invalid log line {l:?}: {e}"))
            })
            .collect()
    }

    /// The log events of one kind.
    pub fn events(&self, event: &str) -> Vec<serde_json::Value> {
        self.log_lines()
            .into_iter()
            .filter(|l| l["event"] == event)
            .collect()
    }

    /// The last `finished` event.
    pub fn last_finished(&self) -> serde_json::Value {
        self.events("finished")
            .pop()
            .expect("no finished event in the log")
    }

    /// Asserts `log verify` passes.
    #[track_caller]
    pub fn assert_log_verifies(&self) {
        let o = self.run(["log", "verify"]);
        assert_code(&o, 0);
        assert!(stdout(&o).contains("chain ok"), "{}", stdout(&o));
    }
}

/// True while `pid` is a live (non-zombie) process.
/// The runner of a firing started as `firing`: the keeper's child (the firing splits in two; see
/// runner/keeper.rs). Waits for it to appear.
pub fn runner_of(firing: &std::process::Child) -> i32 {
    let keeper = firing.id();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let kids = std::fs::read_to_string(format!("/proc/{keeper}/task/{keeper}/children"))
            .unwrap_or_default();
        if let Some(pid) = kids.split_whitespace().next() {
            return pid.parse().unwrap();
        }
        assert!(std::time::Instant::now() < until, "the firing never split");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// SIGKILLs the runner of `firing` (not its keeper) and waits for the firing to end: the keeper
/// ends only once the run's whole tree is gone, the way its runner did.
pub fn kill_runner(firing: &mut std::process::Child) {
    use std::os::unix::process::ExitStatusExt;
    let runner = runner_of(firing);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(runner),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = firing.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the keeper ends like its runner: {status:?}"
    );
}

pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
    }
}

/// Pids written one per line to `file` by a test command.
pub fn read_pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits (bounded) for processes to disappear; returns the ones still alive.
pub fn survivors(pids: &[i32], within: std::time::Duration) -> Vec<i32> {
    let until = std::time::Instant::now() + within;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || std::time::Instant::now() >= until {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What a program printed on a pseudo-terminal, and how it ended.
pub struct PtyRun {
    pub output: String,
    pub code: Option<i32>,
}

/// Runs `cmd` on a real pseudo-terminal (its stdin, stdout and stderr; it becomes the controlling
/// terminal). When `prompt` appears in the output, types `answer` and a newline.
pub fn run_on_pty(cmd: Command, prompt: &str, answer: &str) -> PtyRun {
    run_on_pty_answers(cmd, &[(prompt, answer)])
}

/// Like `run_on_pty`, answering each prompt in turn as it appears.
pub fn run_on_pty_answers(mut cmd: Command, answers: &[(&str, &str)]) -> PtyRun {
    use nix::fcntl::OFlag;
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    // Both sides close-on-exec from the start (openpty's are not): a process another test thread
    // spawns meanwhile must not inherit the slave side, or reading the master would wait for it.
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
        .expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    #[cfg(target_os = "linux")]
    let name = nix::pty::ptsname_r(&master);
    // SAFETY: macOS has no ptsname_r; only compiled there (these tests run on Linux).
    #[cfg(not(target_os = "linux"))]
    let name = unsafe { nix::pty::ptsname(&master) };
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NOCTTY)
        .open(name.expect("ptsname"))
        .expect("open the pty's slave side");
    // try_clone duplicates close-on-exec; the child's dup2 onto 0, 1, 2 clears it there.
    let stdio = || std::process::Stdio::from(slave.try_clone().unwrap());
    cmd.stdin(stdio()).stdout(stdio()).stderr(stdio());
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn on pty");
    // Only the child may hold the terminal's slave side, or reading the master never ends.
    drop(cmd);
    drop(slave);
    let mut master = std::fs::File::from(std::os::fd::OwnedFd::from(master));
    let mut output = Vec::new();
    let mut next = 0;
    let mut seen_upto = 0;
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break, // EIO once the child side is closed
            Ok(n) => output.extend_from_slice(&buf[..n]),
        }
        if let Some((prompt, answer)) = answers.get(next) {
            let text = String::from_utf8_lossy(&output[seen_upto..]).into_owned();
            if let Some(at) = text.find(prompt) {
                seen_upto += at + prompt.len();
                master.write_all(format!("{answer}\n").as_bytes()).unwrap();
                next += 1;
            }
        }
    }
    let status = child.wait().unwrap();
    PtyRun {
        output: String::from_utf8_lossy(&output).replace("\r\n", "\n"),
        code: status.code(),
    }
}

/// Copies the binary under test to `dir/automations`: units must not point into target/.
pub fn stable_bin(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let dest = dir.join("automations");
    install_executable(&bin(), &dest);
    dest
}

/// Writes `content` to `path` as an executable (0755).
pub fn write_executable(path: &Path, content: impl AsRef<[u8]>) {
    let src = path.with_file_name(format!(
        ".{}.src",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&src, content).unwrap();
    install_executable(&src, path);
    std::fs::remove_file(&src).unwrap();
}

/// Copies `from` to `to` as an executable (0755) through a child process, never a file this process
/// holds open for writing: another test of this binary forking at that moment would inherit the
/// handle until its exec, and running a file any process holds open for writing fails with
/// ETXTBSY ("Text file busy") — which once failed a test under load.
fn install_executable(from: &Path, to: &Path) {
    let status = Command::new("install")
        .args(["-m", "0755"])
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "install {} {}",
        from.display(),
        to.display()
    );
}

/// Every file under `dir` (in every folder below it), with its bytes.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.push((p, bytes));
            }
        }
    }
    out
}

/// Polls `cond` every 10 ms until it holds; panics naming `what` after 60 s.
#[track_caller]
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    // Only a guard against a hang: a loaded CI machine may take seconds to start a debug binary.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A private (0700) tmpfs of `size` mounted at a path for one test, unmounted on drop: a small
/// disk to fill. Needs root.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, size: &str) -> Option<Self> {
        Self::mount_with(at, &format!("size={size},mode=0700"))
    }

    /// With explicit mount options (`ro`, `size=…`).
    pub fn mount_with(at: &Path, options: &str) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }

    /// Fills every free byte with a file `filler`.
    pub fn fill(&self) {
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = vec![0u8; 4096];
        while std::io::Write::write_all(&mut filler, &chunk).is_ok() {}
        let one = [0u8; 1];
        while std::io::Write::write_all(&mut filler, &one).is_ok() {}
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Runs `cmd` and returns its output; panics naming `what` if it has not ended within `secs`
/// (the guard of every "must not block" test).
#[track_caller]
pub fn run_within(mut cmd: Command, secs: u64, what: &str) -> Output {
    use std::io::Read;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut stdout)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_end(&mut stderr)
                .unwrap();
            return Output {
                status,
                stdout,
                stderr,
            };
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {secs} s (it blocked)");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// Peak resident memory (KiB) of `cmd` as GNU time reports it, with its output; None only when
/// /usr/bin/time is missing. Not `wait4`'s `ru_maxrss` of a child spawned here: Linux carries the spawning
/// process's own high-water mark into the child at exec, and under `cargo test` that process holds
/// every test's threads and buffers (a 3 MiB child read 235 MiB in CI once). GNU time is a small
/// process whose child starts from its own few MiB.
pub fn peak_rss(cmd: Command) -> Option<(std::process::Output, u64)> {
    if !Path::new("/usr/bin/time").exists() {
        return None;
    }
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    let o = timed.output().unwrap();
    let report = std::fs::read_to_string(report.path()).unwrap();
    let kib = report
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("GNU time reported no peak RSS: {report:?}"));
    Some((o, kib))
}

/// The flake behind CI's failure of 2026-12-01: a 3 MiB `notify test` read 235 MiB because this
/// process (every test's threads, under `cargo test`) had once been that large. With this process
/// grown past 256 MiB, `peak_rss` of `/bin/true` is still `/bin/true`'s.
#[test]
#[ignore = "a real component: GNU time (peak memory)"]
fn peak_rss_is_the_commands_own_not_the_test_process() {
    let mut ballast = vec![0u8; 256 << 20];
    for page in ballast.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(&ballast);
    let Some((o, kib)) = peak_rss(Command::new("/bin/true")) else {
        return skip("peak_rss_is_the_commands_own", "GNU time is missing");
    };
    drop(ballast);
    assert!(o.status.success());
    assert!(kib < 16 * 1024, "/bin/true peaked at {kib} KiB");
}
