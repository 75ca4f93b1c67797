//! The command's environment: built from nothing (docs/running.md).
//!
//! The command sees the basics (`PATH` fixed, `HOME`, `USER`, `LOGNAME`, `LANG`, `TZ` if set,
//! `TMPDIR` private to the run; on Windows also `TEMP`, `TMP` and the variables of its logon
//! session such as `SystemRoot`), the `AUTOMATION_*` variables, and exactly the names its definition
//! lists — taken from the runner's environment, else from the private `env/<name>.env` file so a
//! scheduled run gets them too. That file must be 0600: a file group or others can read is refused.
//! This module must never put a value in an error message.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::definition::Definition;
use crate::fsutil;
use crate::settings::FIXED_PATH;

/// `LANG` when the runner has none.
#[cfg(target_os = "macos")]
pub const DEFAULT_LANG: &str = "en_US.UTF-8";
/// `LANG` when the runner has none.
#[cfg(not(target_os = "macos"))]
pub const DEFAULT_LANG: &str = "C.UTF-8";

/// Why the environment could not be built; names the file and line, never a value.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("env file {0}: line {1} is not NAME=value")]
    BadLine(PathBuf, usize),
    #[error(
        "env file {path}: line {line}: the value of {name} is {len} character(s), too short to redact from output (every value there is treated as a secret): pass a setting this short in the definition's command instead"
    )]
    ShortValue {
        path: PathBuf,
        line: usize,
        name: String,
        len: usize,
    },
    #[error(
        "env file {path}: line {line}: the value of {name} holds a NUL byte, which no program's environment can carry"
    )]
    Nul {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error("env file {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("env file {0}: not UTF-8 text")]
    NotUtf8(PathBuf),
}

/// What a command that is this binary (`{self}`) also gets from the runner's environment: how to
/// reach the keychain, whether notifications are on, and where they go — so `{self} notify look`
/// (the health-check) does what the runner would. Any other command never sees them.
pub const SELF_PASSTHROUGH: [&str; 9] = [
    "DBUS_SESSION_BUS_ADDRESS",
    crate::notify::ENV_NOTIFY,
    crate::notify::drivers::ENV_PUSHOVER_API,
    crate::notify::drivers::ENV_PUSHOVER_USER,
    crate::notify::drivers::ENV_PUSHOVER_TOKEN,
    crate::notify::drivers::ENV_NTFY_TOKEN,
    crate::notify::drivers::ENV_WEBHOOK_SECRET,
    crate::notify::drivers::ENV_SMTP_PASSWORD,
    crate::anytype::ENV_API_URL,
];

/// Of those, the ones that hold secrets (the redactor learns their values).
const SELF_SECRETS: [&str; 5] = [
    crate::notify::drivers::ENV_PUSHOVER_USER,
    crate::notify::drivers::ENV_PUSHOVER_TOKEN,
    crate::notify::drivers::ENV_NTFY_TOKEN,
    crate::notify::drivers::ENV_WEBHOOK_SECRET,
    crate::notify::drivers::ENV_SMTP_PASSWORD,
];

/// What a Windows command gets from the runner's environment besides the basics: the variables
/// Windows sets for every logon session, which its own programs read.
#[cfg(windows)]
const WINDOWS_SESSION: [&str; 11] = [
    "SystemRoot",
    "windir",
    "SystemDrive",
    "ComSpec",
    "PATHEXT",
    "USERNAME",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
];

/// The per-run values the runner itself provides.
pub struct RunVars<'a> {
    pub run_id: &'a str,
    pub trigger: &'a str,
    pub result_file: &'a Path,
    pub http_log: &'a Path,
    pub tmpdir: &'a Path,
    pub bin: &'a Path,
    pub home: &'a Path,
    /// The slot a firing of a schedule on the clock stands for (`AUTOMATION_SLOT`).
    pub slot: Option<&'a str>,
}

/// The environment to give the command, and the private values the redactor must know.
pub struct CommandEnv {
    pub vars: Vec<(String, OsString)>,
    pub secrets: Vec<Vec<u8>>,
}

/// Builds the environment for `def`. `runner_env` reads the runner's own environment.
pub fn build(
    def: &Definition,
    run: &RunVars,
    env_file: &Path,
    runner_env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<CommandEnv, EnvError> {
    let mut vars: Vec<(String, OsString)> = Vec::with_capacity(16 + def.env.len());
    let mut set = |k: &str, v: OsString| vars.push((k.to_owned(), v));
    set("PATH", FIXED_PATH.into());
    set("HOME", run.home.into());
    let user = crate::settings::user_name(runner_env).unwrap_or_default();
    set("USER", user.clone());
    set("LOGNAME", runner_env("LOGNAME").unwrap_or(user));
    set(
        "LANG",
        runner_env("LANG").unwrap_or_else(|| DEFAULT_LANG.into()),
    );
    if let Some(tz) = runner_env("TZ") {
        set("TZ", tz);
    }
    set("TMPDIR", run.tmpdir.into());
    // Windows: what every logon session has and programs fail without (`SystemRoot` above all),
    // the user's folders, and the run's private temp folder under the names Windows reads.
    #[cfg(windows)]
    {
        for k in WINDOWS_SESSION {
            if let Some(v) = runner_env(k) {
                set(k, v);
            }
        }
        set("TEMP", run.tmpdir.into());
        set("TMP", run.tmpdir.into());
    }
    set("AUTOMATION_NAME", def.name.as_str().into());
    set("AUTOMATION_RUN_ID", run.run_id.into());
    set("AUTOMATION_TRIGGER", run.trigger.into());
    set("AUTOMATION_RESULT", run.result_file.into());
    set("AUTOMATION_HTTP_LOG", run.http_log.into());
    set("AUTOMATION_BIN", run.bin.into());
    if let Some(slot) = run.slot {
        set("AUTOMATION_SLOT", slot.into());
    }

    let mut secrets = Vec::new();
    if def
        .command
        .first()
        .is_some_and(|c| c == crate::definition::PLACEHOLDER_SELF)
    {
        for k in SELF_PASSTHROUGH {
            if let Some(v) = runner_env(k) {
                if SELF_SECRETS.contains(&k) {
                    secrets.push(v.as_encoded_bytes().to_vec());
                }
                vars.push((k.to_owned(), v));
            }
        }
    }
    let missing: Vec<&str> = def
        .env
        .iter()
        .map(|n| n.as_str())
        .filter(|n| runner_env(n).is_none())
        .collect();
    let from_file = if missing.is_empty() {
        Vec::new()
    } else {
        read_env_file(env_file)?
    };
    for name in &def.env {
        let name = name.as_str();
        let value = runner_env(name).or_else(|| {
            from_file
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into())
        });
        if let Some(v) = value {
            // A variable a definition asks for is usually a credential: keep it out of the log,
            // whatever its length (the redactor passes over one or two bytes, which an env file
            // refuses).
            secrets.push(v.as_encoded_bytes().to_vec());
            vars.push((name.to_owned(), v));
        }
    }
    Ok(CommandEnv { vars, secrets })
}

/// The largest env file read.
pub const MAX_ENV_FILE: u64 = 64 * 1024;

/// Reads `NAME=value` lines (blank lines and `#` comments skipped); a missing file is empty. The
/// file must be a regular file (no link, FIFO or device), private (0600) and at most
/// [`MAX_ENV_FILE`] bytes. Every value is a secret the redactor learns, so a value of one or two
/// characters (which would shred ordinary output) is refused, as is one holding a NUL byte.
pub fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, EnvError> {
    let bytes = match fsutil::read_private(path, MAX_ENV_FILE) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => return Err(EnvError::Io(path.to_path_buf(), e)),
    };
    let text = String::from_utf8(bytes).map_err(|_| EnvError::NotUtf8(path.to_path_buf()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v))
                if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                let (path, line, name) = (path.to_path_buf(), i + 1, k.to_owned());
                if v.contains('\0') {
                    return Err(EnvError::Nul { path, line, name });
                }
                let len = v.chars().count();
                if (1..crate::redact::MIN_SECRET_LEN).contains(&v.len()) {
                    return Err(EnvError::ShortValue {
                        path,
                        line,
                        name,
                        len,
                    });
                }
                out.push((k.to_owned(), v.to_owned()));
            }
            _ => return Err(EnvError::BadLine(path.to_path_buf(), i + 1)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Without USER and LOGNAME the name comes from the C library's user database.
    #[test]
    fn the_user_name_falls_back_to_the_user_database() {
        let me = crate::settings::user_name(&|_| None).expect("this uid has a name");
        let id = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        assert_eq!(me, String::from_utf8_lossy(&id.stdout).trim());
        let given = crate::settings::user_name(&|k| (k == "LOGNAME").then(|| "ann".into()));
        assert_eq!(given.as_deref(), Some(std::ffi::OsStr::new("ann")));
    }

    #[test]
    fn env_file_rules() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.env");
        assert!(read_env_file(&p).unwrap().is_empty());
        std::fs::write(&p, "# c\n\nA=one\nB=x=y\r\nC=\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_env_file(&p).unwrap(),
            [
                ("A".into(), "one".into()),
                ("B".into(), "x=y".into()),
                ("C".into(), "".into())
            ]
        );
        // Every value is redacted, so one too short to redact is refused; and a NUL no
        // environment can carry, with its line, never the value.
        std::fs::write(&p, "A=one\nDEBUG=12\n").unwrap();
        let e = read_env_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("line 2: the value of DEBUG is 2 character(s), too short to redact"),
            "{e}"
        );
        std::fs::write(&p, "A=one\nTOKEN=ab\0cdef\n").unwrap();
        let e = read_env_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("line 2: the value of TOKEN holds a NUL byte") && !e.contains("cdef"),
            "{e}"
        );
        std::fs::write(&p, "A=one\nsecretvalue\n").unwrap();
        let e = read_env_file(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && !e.contains("secretvalue"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_env_file(&p).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("x.env"), "{e}");
        // Never waited on, never followed, never read past the cap.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, vec![b'#'; MAX_ENV_FILE as usize + 1]).unwrap();
        let e = read_env_file(&p).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
        let fifo = d.path().join("f.env");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_env_file(&fifo).unwrap_err().to_string();
        assert!(e.contains("FIFO") && e.contains("f.env"), "{e}");
    }
}
