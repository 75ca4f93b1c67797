//! The Windows build, run under Wine (Debian's wine64) as a person on Windows would run it
//! (docs/windows.md): `--version`, `doctor` (whose probe goes through the Credential Manager),
//! `validate`, a `run` whose output reaches the log, a `run` whose timeout ends a tree of
//! processes, `runs`, `show` and `log verify` over the log those runs wrote under
//! `%LOCALAPPDATA%`. What Wine cannot stand in for (a real Task Scheduler, Windows' own Credential
//! Manager) is said in docs/windows.md.
//!
//! `make test` builds `target/x86_64-pc-windows-gnu/wine/automations.exe` first. Wine 8
//! (Debian 12) lacks `ProcessPrng`, the one function of `bcryptprimitives.dll` Rust's standard
//! library calls for random bytes; the test builds a stand-in from
//! tests/fixtures/wine/bcryptprimitives.c (RtlGenRandom underneath) and puts it beside the program,
//! where Windows looks first. A Wine that has it never loads the stand-in.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::*;

const WINE: &str = "/usr/lib/wine/wine64";
const MINGW: &str = "x86_64-w64-mingw32-gcc";

/// The Windows build, copied with the stand-in DLL into `dir`; `None` (skipped) when the build or
/// Wine is missing.
fn windows_build(test: &str, dir: &Path) -> Option<PathBuf> {
    let built = repo_root().join("target/x86_64-pc-windows-gnu/wine/automations.exe");
    if !built.exists() {
        skip(
            test,
            "the Windows build is missing: cargo build --profile wine --target x86_64-pc-windows-gnu (make test does)",
        );
        return None;
    }
    if !Path::new(WINE).exists() {
        skip(test, "Wine is missing (apt-get install wine64)");
        return None;
    }
    let exe = dir.join("automations.exe");
    std::fs::copy(&built, &exe).unwrap();
    let shim = repo_root().join("tests/fixtures/wine/bcryptprimitives.c");
    let built_dll = Command::new(MINGW)
        .args(["-shared", "-O2", "-o"])
        .arg(dir.join("bcryptprimitives.dll"))
        .arg(&shim)
        .arg(shim.with_extension("def"))
        .arg("-ladvapi32")
        .output();
    match built_dll {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => panic!("building the stand-in DLL: {}", stderr(&o)),
        Err(e) => {
            skip(
                test,
                &format!("{MINGW} cannot run ({e}): apt-get install gcc-mingw-w64-x86-64"),
            );
            None
        }
    }
}

/// Wine in its own prefix under `sb`, which it makes on first use and whose server is ended when
/// the value is dropped.
struct Wine {
    prefix: PathBuf,
    exe: PathBuf,
    repo: PathBuf,
}

impl Wine {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(WINE);
        c.arg(&self.exe)
            .args(args)
            .current_dir(&self.repo)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            // No window system here: Wine must not look for one.
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}

impl Drop for Wine {
    fn drop(&mut self) {
        let _ = Command::new("/usr/lib/wine/wineserver")
            .arg("-k")
            .env("WINEPREFIX", &self.prefix)
            .status();
    }
}

/// Processes of this machine, not zombies, whose command line holds `token`.
fn alive_with(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if state != "Z" && cmdline.contains(token) {
            found.push(format!("{pid} {state} {cmdline}"));
        }
    }
    found
}

#[test]
#[ignore = "a real component: Wine (wine64) running the Windows build"]
fn the_windows_build_runs_a_folder_under_wine() {
    let test = "the_windows_build_runs_a_folder_under_wine";
    let sb = Sandbox::new();
    let Some(exe) = windows_build(test, &sb.path("")) else {
        return;
    };
    let repo = sb.path("repo");
    std::fs::create_dir_all(repo.join("automations")).unwrap();
    std::fs::write(
        repo.join("automations/hello.toml"),
        "name = \"hello\"\ndescription = \"says hello\"\ncommand = [\"cmd\", \"/c\", \"echo hello from %AUTOMATION_NAME%\"]\ntimeout_seconds = 30\n",
    )
    .unwrap();
    // A tree: cmd starts one ping in the background and waits on another, both far longer than
    // the timeout. The count of pings marks them as this test's.
    std::fs::write(
        repo.join("automations/tree.toml"),
        "name = \"tree\"\ndescription = \"outlives its timeout\"\ncommand = [\"cmd\", \"/c\", \"start /b ping -n 97 127.0.0.1 >nul & ping -n 97 127.0.0.1\"]\ntimeout_seconds = 2\n",
    )
    .unwrap();
    let wine = Wine {
        prefix: sb.path("prefix"),
        exe,
        repo: repo.clone(),
    };

    let o = wine.run(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        format!("automations {}", env!("CARGO_PKG_VERSION"))
    );

    let o = wine.run(&["validate"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("2 definitions valid"), "{}", stdout(&o));

    // A run: its output reaches the log, which lives under %LOCALAPPDATA%.
    let o = wine.run(&["run", "hello"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let o = wine.run(&["show", "hello"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(shown.contains("status    ok"), "{shown}");
    assert!(shown.contains("hello from hello"), "{shown}");
    // doctor: the data root where Windows keeps a user's own data, and the Credential Manager (as
    // Wine implements it) storing, reading back and deleting a probe.
    let o = wine.run(&["doctor"]);
    let said = stdout(&o);
    for line in [
        "ok    secrets: kept in the Windows Credential Manager; a probe was stored, read back and deleted",
        "AppData\\Local\\automations\\automations is yours (private as its folder's access list keeps it)",
        "ok    definitions: 2 valid",
    ] {
        assert!(said.contains(line), "{line}\n{said}{}", stderr(&o));
    }

    let log = wine
        .prefix
        .join("drive_c/users")
        .read_dir()
        .unwrap()
        .flatten()
        .map(|u| {
            u.path()
                .join("AppData/Local/automations/automations/runs.jsonl")
        })
        .find(|p| p.exists())
        .expect("the run log under %LOCALAPPDATA%\\automations\\automations");

    // A tree past its timeout: ended, every process of it, and recorded as a timeout. Both pings
    // are seen alive while it runs (so the look after is a look at something).
    let token = "-n 97 127.0.0.1";
    let running = wine.command(&["run", "tree"]).spawn().unwrap();
    let seen = (0..400).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        alive_with(token).len() >= 2
    });
    // While it runs, another process reads the run's lock (Windows enforces a lock on the bytes
    // it covers: the lock is on a byte past the data) and says it is running, not interrupted.
    let during = wine.run(&["runs", "--json"]);
    let o = running.wait_with_output().unwrap();
    assert!(seen, "the tree's two pings were never seen running");
    let during: serde_json::Value = serde_json::from_str(&stdout(&during)).unwrap();
    assert_eq!(during["runs"][0]["name"], "tree", "{during}");
    assert_eq!(during["runs"][0]["status"], "running", "{during}");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("timed out after 2 s") || stdout(&o).contains("timed out after 2 s"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let left = alive_with(token);
    assert!(left.is_empty(), "the tree outlived its timeout: {left:?}");

    let o = wine.run(&["runs", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let statuses: Vec<(String, String)> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("tree".to_owned(), "timeout".to_owned()),
            ("hello".to_owned(), "ok".to_owned())
        ],
        "{runs}"
    );

    // The log: four lines, each JSON, chained; verify says so.
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    let o = wine.run(&["log", "verify"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("chain ok: 4 line(s)"), "{}", stdout(&o));
}
