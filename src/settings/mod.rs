//! Settings and machine paths, resolved once (docs/definitions.md).
//!
//! Precedence is always command-line flag > environment variable > default, and it is decided in
//! exactly one function, [`Settings::resolve`]. Facts about the machine (HOME, uid, the target OS,
//! the working directory) are gathered once into [`OsFacts`] and passed in, so tests re-root them
//! with a temporary HOME. This module never creates anything on disk.

pub mod file;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::names::{Label, Name, NameError, Namespace};

/// Environment variable naming the repository root.
pub const ENV_ROOT: &str = "AUTOMATIONS_ROOT";
/// Environment variable naming the namespace.
pub const ENV_NAMESPACE: &str = "AUTOMATIONS_NAMESPACE";
/// Environment variable naming the private data root.
pub const ENV_DATA_ROOT: &str = "AUTOMATIONS_DATA_ROOT";
/// In a pod (docs/kubernetes.md): `stdout` also writes every run-log event to stdout as one JSON line, so the
/// cluster's log collection keeps the record when the data root's volume goes with the pod.
pub const ENV_EVENTS: &str = "AUTOMATIONS_EVENTS";
/// In a pod: the folder of a mounted Secret the keys are read from (the file key backend).
pub const ENV_KEY_DIR: &str = "AUTOMATIONS_KEY_DIR";
/// In a pod: the sha256 of the definition its manifest was rendered from. A scheduled firing with
/// no install record runs only that version (the manifest is its install).
pub const ENV_PINNED_SHA256: &str = "AUTOMATIONS_PINNED_SHA256";
/// For tests only: the size past which the run log rotates, instead of 64 MiB, so a test can make
/// many rotations with real runs.
pub const ENV_TEST_ROTATE_BYTES: &str = "AUTOMATIONS_TEST_ROTATE_BYTES";
/// The namespace when neither flag nor environment names one.
pub const DEFAULT_NAMESPACE: &str = "automations";
/// The folder of definitions inside the repository root.
pub const DEFINITIONS_DIR: &str = "automations";

/// The fixed `PATH` of commands on macOS (and of every LaunchAgent).
pub const FIXED_PATH_MACOS: &str = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
/// The fixed `PATH` of commands on Linux (and of every systemd unit).
pub const FIXED_PATH_LINUX: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// The fixed `PATH` of every command on this machine.
#[cfg(target_os = "macos")]
pub const FIXED_PATH: &str = FIXED_PATH_MACOS;
/// The fixed `PATH` of every command on this machine.
#[cfg(all(unix, not(target_os = "macos")))]
pub const FIXED_PATH: &str = FIXED_PATH_LINUX;
/// The fixed `PATH` of every command on Windows: its own programs (where Windows is installed in
/// `C:\Windows`, as it is unless an administrator chose otherwise at setup).
#[cfg(windows)]
pub const FIXED_PATH: &str = r"C:\Windows\System32;C:\Windows;C:\Windows\System32\Wbem;C:\Windows\System32\WindowsPowerShell\v1.0";

/// What this machine is: the service manager that schedules its user's jobs, which also decides
/// its key store (the Keychain beside launchd, the Secret Service beside systemd) and its folders.
/// Not to be confused with what can be rendered (`units::Target`): a render target never needs a
/// machine, and a machine never needs to know every target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// macOS: launchd LaunchAgents, the login Keychain.
    Launchd,
    /// Linux: systemd user timers, the Secret Service.
    Systemd,
    /// Windows: Task Scheduler tasks, the Credential Manager.
    #[serde(rename = "task-scheduler")]
    TaskScheduler,
}

impl Manager {
    /// The manager of the machine this binary was built for.
    pub fn native() -> Self {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else if cfg!(windows) {
            Manager::TaskScheduler
        } else {
            Manager::Systemd
        }
    }

    /// Its name, as `doctor` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Launchd => "launchd",
            Manager::Systemd => "systemd",
            Manager::TaskScheduler => "Task Scheduler",
        }
    }
}

/// Facts about the machine, gathered once.
#[derive(Clone, Debug)]
pub struct OsFacts {
    /// The user's home directory (`HOME`).
    pub home: PathBuf,
    /// The working directory, where root discovery starts.
    pub cwd: PathBuf,
    /// The machine's service manager.
    pub manager: Manager,
    /// The environment the binary was started with (only what settings need is read from it).
    env: Vec<(OsString, OsString)>,
}

impl OsFacts {
    /// Reads the facts of this process.
    pub fn from_process() -> Result<Self, SettingsError> {
        // Windows sets USERPROFILE; HOME only where a Unix-like shell does.
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var_os("USERPROFILE").filter(|h| cfg!(windows) && !h.is_empty()))
            .map(PathBuf::from)
            .ok_or(SettingsError::NoHome)?;
        // A relative HOME would make a relative data root: a run could start, then not record.
        if !home.is_absolute() {
            return Err(SettingsError::RelativeHome(home));
        }
        let cwd = std::env::current_dir().map_err(SettingsError::Cwd)?;
        Ok(Self {
            home,
            cwd,
            manager: Manager::native(),
            env: std::env::vars_os().collect(),
        })
    }

    /// Facts for a test: an explicit home, working directory, manager and environment.
    pub fn new(
        home: PathBuf,
        cwd: PathBuf,
        manager: Manager,
        env: Vec<(OsString, OsString)>,
    ) -> Self {
        Self {
            home,
            cwd,
            manager,
            env,
        }
    }

    /// A variable of the captured environment; empty counts as unset.
    pub fn var(&self, key: &str) -> Option<&OsString> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    }
}

/// What the command line said, before precedence is applied.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--root`.
    pub root: Option<PathBuf>,
    /// `--namespace`.
    pub namespace: Option<String>,
    /// `--data-root`.
    pub data_root: Option<PathBuf>,
}

/// Why settings could not be resolved; every message names the setting and where it came from.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// No usable HOME.
    #[error("HOME is not set; it is needed to find the data root and the agents folder")]
    NoHome,
    /// HOME is not an absolute path.
    #[error("HOME ({}) must be an absolute path; it is needed to find the data root and the agents folder", .0.display())]
    RelativeHome(PathBuf),
    /// The working directory is unreadable.
    #[error("cannot read the working directory")]
    Cwd(#[source] std::io::Error),
    /// No ancestor holds `automations/`.
    #[error(
        "no repository root: no folder from {0} upwards holds an automations/ folder (use --root or {ENV_ROOT})"
    )]
    NoRoot(PathBuf),
    /// The given root has no definitions folder.
    #[error("repository root {path} (from {from}) has no automations/ folder")]
    BadRoot { path: PathBuf, from: &'static str },
    /// A relative data root.
    #[error("data root {path} (from {from}) must be an absolute path")]
    RelativeDataRoot { path: PathBuf, from: &'static str },
    /// A pod setting that is not what it must be.
    #[error("{0}")]
    Pod(String),
    /// The namespace is invalid.
    #[error("namespace (from {from}): {source}")]
    Namespace {
        from: &'static str,
        #[source]
        source: NameError,
    },
}

impl crate::exit::Exits for SettingsError {
    /// Settings that cannot be resolved (no root, no home) are the environment's (3).
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::Environment
    }
}

/// Who runs this program, as `env` reads variables: `USER`, else `LOGNAME` (launchd, systemd and
/// login shells set them), else the C library's user database for this uid (NSS: local users, LDAP
/// and SSSD alike). The one place the name is worked out.
pub fn user_name(env: &dyn Fn(&str) -> Option<OsString>) -> Option<OsString> {
    env("USER")
        .filter(|u| !u.is_empty())
        .or_else(|| env("LOGNAME").filter(|u| !u.is_empty()))
        .or_else(crate::platform::account_name)
}

/// This binary's own path: what the kernel says (`/proc/self/exe` on Linux), else the path it was
/// started by when that is one (`argv[0]` with a `/`, which the runner's units always give). Never
/// a bare name, which `PATH` could resolve to another program. Why not, when neither says.
pub fn this_binary() -> std::io::Result<PathBuf> {
    let kernel = match std::env::current_exe() {
        Ok(p) => return Ok(p),
        Err(e) => e,
    };
    let arg0 = std::env::args_os().next().map(PathBuf::from);
    match arg0 {
        Some(p) if p.is_absolute() => Ok(p),
        Some(p) if p.components().count() > 1 => Ok(std::env::current_dir()?.join(p)),
        _ => Err(std::io::Error::other(format!(
            "this binary's own path cannot be found ({kernel}; it was started by a bare name): start it by its full path"
        ))),
    }
}

/// Everything a command needs to know about where things are. Built once per process.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The repository root (holds `automations/`).
    pub root: PathBuf,
    /// The namespace of labels.
    pub namespace: Namespace,
    /// The private data root.
    pub data_root: PathBuf,
    /// Where the service manager reads user units from.
    pub agents_dir: PathBuf,
    /// The user's home.
    pub home: PathBuf,
    /// Where the user's configuration lives on Linux (`$XDG_CONFIG_HOME`, else `~/.config`).
    pub config_home: PathBuf,
    /// The service manager of this machine.
    pub manager: Manager,
    /// Where keys are read from instead of the keychain (`AUTOMATIONS_KEY_DIR`, in a pod).
    pub key_dir: Option<PathBuf>,
    /// Whether each run-log event is also written to stdout (`AUTOMATIONS_EVENTS=stdout`).
    pub events_stdout: bool,
    /// The definition version a scheduled firing without an install record may run
    /// (`AUTOMATIONS_PINNED_SHA256`, in a pod).
    pub pinned_sha256: Option<String>,
    /// The run log's rotation size when a test sets one ([`ENV_TEST_ROTATE_BYTES`]).
    pub test_rotate_bytes: Option<u64>,
}

impl Settings {
    /// `--root R --data-root D --namespace N`: what a child `automations` needs to work on this
    /// very installation (a `{self}` command, the dashboard's run now).
    pub fn global_args(&self) -> [std::ffi::OsString; 6] {
        [
            "--root".into(),
            self.root.clone().into_os_string(),
            "--data-root".into(),
            self.data_root.clone().into_os_string(),
            "--namespace".into(),
            self.namespace.as_str().into(),
        ]
    }

    /// Applies flag > environment > default for every setting. The only place precedence lives.
    pub fn resolve(flags: &Overrides, os: &OsFacts) -> Result<Self, SettingsError> {
        let (namespace, ns_from) = match (&flags.namespace, os.var(ENV_NAMESPACE)) {
            (Some(ns), _) => (ns.clone(), "--namespace"),
            (None, Some(ns)) => (ns.to_string_lossy().into_owned(), ENV_NAMESPACE),
            (None, None) => (DEFAULT_NAMESPACE.to_owned(), "default"),
        };
        let namespace = Namespace::new(&namespace).map_err(|source| SettingsError::Namespace {
            from: ns_from,
            source,
        })?;

        let root = match (&flags.root, os.var(ENV_ROOT)) {
            (Some(p), _) => checked_root(absolute(&os.cwd, p), "--root")?,
            (None, Some(p)) => checked_root(absolute(&os.cwd, Path::new(p)), ENV_ROOT)?,
            (None, None) => discover_root(&os.cwd)?,
        };

        let data_root = match (&flags.data_root, os.var(ENV_DATA_ROOT)) {
            (Some(p), _) => checked_data_root(p.clone(), "--data-root")?,
            (None, Some(p)) => checked_data_root(PathBuf::from(p), ENV_DATA_ROOT)?,
            (None, None) => default_data_root(os, &namespace),
        };

        let config_home = xdg(os, "XDG_CONFIG_HOME").unwrap_or_else(|| os.home.join(".config"));
        let (key_dir, events_stdout, pinned_sha256) = pod_settings(os)?;
        Ok(Self {
            root,
            namespace,
            data_root,
            agents_dir: agents_dir(&os.home, &config_home, os.manager),
            home: os.home.clone(),
            config_home,
            manager: os.manager,
            key_dir,
            events_stdout,
            pinned_sha256,
            test_rotate_bytes: os
                .var(ENV_TEST_ROTATE_BYTES)
                .and_then(|v| v.to_str()?.parse().ok()),
        })
    }

    /// The folder of definitions.
    pub fn definitions_dir(&self) -> PathBuf {
        self.root.join(DEFINITIONS_DIR)
    }

    /// Where `manager` would read user units from for this user (`agents_dir` is this machine's).
    pub fn agents_dir_of(&self, manager: Manager) -> PathBuf {
        agents_dir(&self.home, &self.config_home, manager)
    }

    /// The places of the data root.
    pub fn layout(&self) -> crate::layout::Layout {
        crate::layout::Layout::new(&self.data_root)
    }

    /// The label of `name` in this namespace.
    pub fn label(&self, name: &Name) -> Label {
        Label::new(&self.namespace, name)
    }
}

/// The three settings a pod's manifest gives the runner (docs/kubernetes.md), each refused when it is not
/// what it must be: a run in a pod must not quietly fall back to a keychain or lose its events.
fn pod_settings(os: &OsFacts) -> Result<(Option<PathBuf>, bool, Option<String>), SettingsError> {
    let key_dir = os.var(ENV_KEY_DIR).map(PathBuf::from);
    if let Some(d) = &key_dir
        && !d.is_absolute()
    {
        return Err(SettingsError::Pod(format!(
            "{ENV_KEY_DIR} ({}) must be an absolute path",
            d.display()
        )));
    }
    let events_stdout = match os.var(ENV_EVENTS).map(|v| v.to_string_lossy()) {
        None => false,
        Some(v) if v == "stdout" => true,
        Some(v) => {
            return Err(SettingsError::Pod(format!(
                "{ENV_EVENTS}={v:?}: the only value is \"stdout\""
            )));
        }
    };
    let pinned = match os
        .var(ENV_PINNED_SHA256)
        .map(|v| v.to_string_lossy().into_owned())
    {
        Some(h) if !(h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())) => {
            return Err(SettingsError::Pod(format!(
                "{ENV_PINNED_SHA256}={h:?} is not a sha256 (64 hex digits)"
            )));
        }
        h => h,
    };
    Ok((key_dir, events_stdout, pinned))
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

fn checked_root(path: PathBuf, from: &'static str) -> Result<PathBuf, SettingsError> {
    if path.join(DEFINITIONS_DIR).is_dir() {
        Ok(crate::platform::canonical(&path).unwrap_or(path))
    } else {
        Err(SettingsError::BadRoot { path, from })
    }
}

fn checked_data_root(path: PathBuf, from: &'static str) -> Result<PathBuf, SettingsError> {
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(SettingsError::RelativeDataRoot { path, from })
    }
}

fn discover_root(cwd: &Path) -> Result<PathBuf, SettingsError> {
    cwd.ancestors()
        .find(|dir| dir.join(DEFINITIONS_DIR).is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| SettingsError::NoRoot(cwd.to_path_buf()))
}

fn default_data_root(os: &OsFacts, namespace: &Namespace) -> PathBuf {
    let base = match os.manager {
        Manager::Launchd => os.home.join("Library/Application Support"),
        Manager::Systemd => {
            xdg(os, "XDG_STATE_HOME").unwrap_or_else(|| os.home.join(".local/state"))
        }
        // The user's own, unroamed application data: only they (and administrators) may open it.
        Manager::TaskScheduler => local_app_data(os),
    };
    base.join("automations").join(namespace.as_str())
}

/// `%LOCALAPPDATA%` when it is an absolute path, else `<home>\AppData\Local`, its default.
fn local_app_data(os: &OsFacts) -> PathBuf {
    os.var("LOCALAPPDATA")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| os.home.join("AppData").join("Local"))
}

fn agents_dir(home: &Path, config_home: &Path, manager: Manager) -> PathBuf {
    match manager {
        Manager::Launchd => home.join("Library/LaunchAgents"),
        Manager::Systemd => config_home.join("systemd/user"),
        // The tasks' XML as installed (Task Scheduler keeps its own copy of each).
        Manager::TaskScheduler => home.join("AppData").join("Local").join("automations-tasks"),
    }
}

/// An XDG base directory variable; the spec says relative values are invalid and ignored.
fn xdg(os: &OsFacts, key: &str) -> Option<PathBuf> {
    os.var(key).map(PathBuf::from).filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(dir: &Path, target: Manager, env: &[(&str, &str)]) -> OsFacts {
        OsFacts::new(
            dir.join("home"),
            dir.join("repo/sub"),
            target,
            env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
        )
    }

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("repo/automations")).unwrap();
        std::fs::create_dir_all(d.path().join("repo/sub")).unwrap();
        std::fs::create_dir_all(d.path().join("other/automations")).unwrap();
        d
    }

    #[test]
    fn defaults_on_linux_and_macos() {
        let d = repo();
        let s = Settings::resolve(
            &Overrides::default(),
            &facts(d.path(), Manager::Systemd, &[]),
        )
        .unwrap();
        let root = std::fs::canonicalize(d.path().join("repo")).unwrap();
        assert_eq!(s.root, root);
        assert_eq!(s.namespace.as_str(), "automations");
        assert_eq!(
            s.data_root,
            d.path().join("home/.local/state/automations/automations")
        );
        assert_eq!(s.agents_dir, d.path().join("home/.config/systemd/user"));

        let s = Settings::resolve(
            &Overrides::default(),
            &facts(d.path(), Manager::Launchd, &[]),
        )
        .unwrap();
        assert_eq!(
            s.data_root,
            d.path()
                .join("home/Library/Application Support/automations/automations")
        );
        assert_eq!(s.agents_dir, d.path().join("home/Library/LaunchAgents"));
    }

    #[test]
    fn xdg_variables_move_linux_defaults_but_relative_ones_are_ignored() {
        let d = repo();
        let env = [("XDG_STATE_HOME", "/st"), ("XDG_CONFIG_HOME", "/cf")];
        let s = Settings::resolve(
            &Overrides::default(),
            &facts(d.path(), Manager::Systemd, &env),
        )
        .unwrap();
        assert_eq!(s.data_root, Path::new("/st/automations/automations"));
        assert_eq!(s.agents_dir, Path::new("/cf/systemd/user"));
        let env = [("XDG_STATE_HOME", "rel")];
        let s = Settings::resolve(
            &Overrides::default(),
            &facts(d.path(), Manager::Systemd, &env),
        )
        .unwrap();
        assert!(s.data_root.starts_with(d.path().join("home/.local/state")));
    }

    #[test]
    fn flag_beats_env_beats_default() {
        let d = repo();
        let other = d.path().join("other");
        let env_root = other.to_str().unwrap();
        let env = [
            (ENV_ROOT, env_root),
            (ENV_NAMESPACE, "envns"),
            (ENV_DATA_ROOT, "/env/data"),
        ];
        let os = facts(d.path(), Manager::Systemd, &env);
        let s = Settings::resolve(&Overrides::default(), &os).unwrap();
        assert_eq!(s.root, std::fs::canonicalize(&other).unwrap());
        assert_eq!(s.namespace.as_str(), "envns");
        assert_eq!(s.data_root, Path::new("/env/data"));

        let flags = Overrides {
            root: Some(d.path().join("repo")),
            namespace: Some("flagns".into()),
            data_root: Some("/flag/data".into()),
        };
        let s = Settings::resolve(&flags, &os).unwrap();
        assert_eq!(
            s.root,
            std::fs::canonicalize(d.path().join("repo")).unwrap()
        );
        assert_eq!(s.namespace.as_str(), "flagns");
        assert_eq!(s.data_root, Path::new("/flag/data"));
    }

    #[test]
    fn bad_settings_name_their_source() {
        let d = repo();
        let os = facts(d.path(), Manager::Systemd, &[(ENV_NAMESPACE, "Bad")]);
        let e = Settings::resolve(&Overrides::default(), &os)
            .unwrap_err()
            .to_string();
        assert!(e.contains(ENV_NAMESPACE), "{e}");
        let flags = Overrides {
            data_root: Some("rel".into()),
            ..Overrides::default()
        };
        let e = Settings::resolve(&flags, &facts(d.path(), Manager::Systemd, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--data-root") && e.contains("absolute"), "{e}");
        let flags = Overrides {
            root: Some(d.path().join("home")),
            ..Overrides::default()
        };
        let e = Settings::resolve(&flags, &facts(d.path(), Manager::Systemd, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--root") && e.contains("no automations/"), "{e}");
        let os = OsFacts::new(d.path().into(), "/".into(), Manager::Systemd, vec![]);
        let e = Settings::resolve(&Overrides::default(), &os)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no repository root"), "{e}");
    }
}
