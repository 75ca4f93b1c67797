//! A sandbox per test: a temporary repository root, HOME and data root. The environment is set
//! only on the child process, so tests never touch the real user's agents folder, keychain or log.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_automations"))
}

/// The checkout this test binary was built from.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// True under CI, where a missing component is a failure instead of a skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Says loudly that a test could not run; panics under CI so CI can never be green without it.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED: {test}: {why}");
    assert!(!in_ci(), "{test} cannot be skipped under CI=true: {why}");
}

pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub data: PathBuf,
    env: Vec<(String, String)>,
}

impl Sandbox {
    /// An empty repository root (with `automations/` and `scripts/`), HOME and data root.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("automations-it-")
            .tempdir()
            .unwrap();
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
            env: Vec::new(),
        }
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

    /// Writes an executable script under `scripts/`.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root.join("scripts").join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
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
        let mut c = Command::new(bin());
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

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
