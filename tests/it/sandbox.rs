//! The strict sandbox (docs/policies.md#sandbox): where it cannot run, said before it is installed;
//! `writes` that a link could move; and the sandbox tried from the inside, as an attacker would: the
//! command of a `[sandbox] level = "strict"` automation, started by a real private user manager,
//! tries to reach that manager and the session bus, to write the data root (another automation's
//! scratch, state, env files, settings, the log, locks), to read another automation's secrets, to
//! leave through `/proc`, and to signal or read its runner. The same script run by an automation
//! without the sandbox succeeds at each attempt (so every attempt is one that works when nothing
//! stops it); under the sandbox every one fails, while its `writes` folder and TMPDIR still take
//! its files.

use std::path::Path;

use crate::harness::*;
use crate::systemd::UserManager;

fn service(name: &str) -> String {
    format!("local.automations.{name}.service")
}

/// Each attempt: a name and a shell line that exits 0 only when the attempt got through. Every
/// line leaves a visible trace when it works (a file, a variable of the manager), which the test
/// reads itself: the script's own report is only a help to read a failure.
fn attempts(home: &Path, data: &Path, runtime: &Path) -> Vec<(&'static str, String)> {
    let (h, d, rt) = (home.display(), data.display(), runtime.display());
    let user = format!("env XDG_RUNTIME_DIR={rt} DBUS_SESSION_BUS_ADDRESS=unix:path={rt}/bus");
    vec![
        (
            "systemd-run",
            format!(
                "{user} systemd-run --user --wait --quiet --unit=escape-$$ /bin/sh -c 'echo x > {h}/escaped-by-systemd-run'"
            ),
        ),
        (
            "systemctl",
            format!("{user} systemctl --user set-environment ESCAPED_BY_SYSTEMCTL=1"),
        ),
        (
            "busctl",
            format!(
                "{user} busctl --user call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager SetEnvironment as 1 ESCAPED_BY_BUSCTL=1"
            ),
        ),
        (
            "dbus-send",
            format!(
                "{user} dbus-send --session --print-reply --dest=org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager.SetEnvironment array:string:ESCAPED_BY_DBUS_SEND=1"
            ),
        ),
        (
            "unix-socket",
            format!(
                "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{rt}/systemd/private')\""
            ),
        ),
        (
            "other-scratch",
            format!("echo evil > {d}/scratch/victim/tmp/planted"),
        ),
        ("state", format!(": >> {d}/state/installed/victim.json")),
        ("env-file-write", format!(": >> {d}/env/victim.env")),
        ("env-file-read", format!("cat {d}/env/victim.env")),
        ("settings", format!(": >> {d}/health.toml")),
        ("run-log", format!(": >> {d}/runs.jsonl")),
        ("locks", format!(": >> {d}/locks/victim.lock")),
        (
            "proc-self-root",
            format!("echo x > /proc/self/root{h}/escaped-by-proc-self-root"),
        ),
        (
            // Every ancestor's view of the file system: the manager's is outside the unit's
            // namespace, where nothing is read-only.
            "proc-ancestor-root",
            format!(
                "p=$PPID; ok=1; while [ \"$p\" -gt 1 ]; do echo x > /proc/$p/root{h}/escaped-by-proc-$p 2>/dev/null && ok=0; p=$(awk '/^PPid:/ {{print $2}}' /proc/$p/status); done; exit $ok"
            ),
        ),
        ("signal-runner", "kill -0 $PPID".to_owned()),
        ("runner-environ", "cat /proc/$PPID/environ".to_owned()),
    ]
}

/// The attacker's script: runs every attempt and reports `NAME through` or `NAME held` in the
/// file `report` (under its `writes` folder), then writes into its writes folder and TMPDIR.
fn script(attempts: &[(&str, String)], report: &Path) -> String {
    let mut s = String::from("#!/bin/sh\n");
    s.push_str(&format!(": > '{}'\n", report.display()));
    for (name, line) in attempts {
        s.push_str(&format!(
            "if ( {line} ) >/dev/null 2>&1; then echo '{name} through' >> '{r}'; else echo '{name} held' >> '{r}'; fi\n",
            r = report.display()
        ));
    }
    s.push_str(&format!(
        "echo kept > '{}'\necho scratch > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" >> '{}'\n",
        report.with_file_name("ok").display(),
        report.display()
    ));
    s
}

/// What each attempt left when it got through: the files and variables the attempt's line makes.
fn traces(sb: &Sandbox, m: &UserManager) -> Vec<String> {
    let mut found = Vec::new();
    for f in ["escaped-by-systemd-run", "escaped-by-proc-self-root"] {
        if sb.home.join(f).exists() {
            found.push(f.to_owned());
        }
    }
    for e in std::fs::read_dir(&sb.home).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("escaped-by-proc-") && n != "escaped-by-proc-self-root" {
            found.push(n);
        }
    }
    if sb.data.join("scratch/victim/tmp/planted").exists() {
        found.push("planted in another automation's scratch".into());
    }
    let env = stdout(&m.systemctl(&["show-environment"]));
    for v in [
        "ESCAPED_BY_SYSTEMCTL",
        "ESCAPED_BY_BUSCTL",
        "ESCAPED_BY_DBUS_SEND",
    ] {
        if env.contains(v) {
            found.push(v.to_owned());
        }
    }
    found
}

/// Removes every trace, between the unsandboxed run and the sandboxed one.
fn clear_traces(sb: &Sandbox, m: &UserManager) {
    for e in std::fs::read_dir(&sb.home).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("escaped-by-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let _ = std::fs::remove_file(sb.data.join("scratch/victim/tmp/planted"));
    m.systemctl(&[
        "unset-environment",
        "ESCAPED_BY_SYSTEMCTL",
        "ESCAPED_BY_BUSCTL",
        "ESCAPED_BY_DBUS_SEND",
    ]);
}

fn report(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_strict_command_reaches_nothing_but_its_writes() {
    let test = "a_strict_command_reaches_nothing_but_its_writes";
    // Outside /tmp: the unit's PrivateTmp= hides it (root only; the manager's own check says
    // SKIPPED elsewhere).
    let mut sb = if nix::unistd::getuid().is_root() {
        Sandbox::outside_tmp()
    } else {
        Sandbox::new()
    };
    sb.use_stable_bin();
    let Some(m) = UserManager::start(&mut sb, test) else {
        return;
    };
    // The session bus a desktop session has (the user manager's own dbus.socket).
    let bus = m.systemctl(&["start", "dbus.socket"]);
    assert!(bus.status.success(), "{}", stderr(&bus));
    let out = sb.home.join("Backups");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir(sb.root.join("idle")).unwrap();
    let attempts = attempts(&sb.home, &sb.data, m.runtime());
    sb.script("attack.sh", &script(&attempts, &out.join("report")));
    let never = "[trigger]\npaths = [\"{root}/idle\"]\n";
    // The victim: an ordinary automation with a private variable; the same attack without the
    // sandbox (the control); and under it.
    sb.shell_definition(
        "victim",
        "true",
        &format!("env = [\"VICTIM_TOKEN\"]\n{never}"),
    );
    sb.definition(
        "open",
        &format!("name = \"open\"\ncommand = [\"scripts/attack.sh\"]\n{never}"),
    );
    sb.definition(
        "boxed",
        &format!(
            "name = \"boxed\"\ncommand = [\"scripts/attack.sh\"]\nwrites = [\"~/Backups\"]\n[sandbox]\nlevel = \"strict\"\n{never}"
        ),
    );
    let r = run_on_pty(
        sb.cmd(["install", "victim", "open", "boxed"]),
        "Type y to confirm",
        "y",
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    std::fs::create_dir_all(sb.data.join("env")).unwrap();
    let env_file = sb.data.join("env/victim.env");
    std::fs::write(&env_file, "VICTIM_TOKEN=victim-secret-value\n").unwrap();
    std::fs::set_permissions(
        &env_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(sb.data.join("health.toml"), "").unwrap();
    std::fs::set_permissions(
        sb.data.join("health.toml"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    m.systemctl(&["start", &service("victim")]);

    // Without the sandbox every attempt gets through: each is a real way out.
    m.systemctl(&["start", &service("open")]);
    let open = report(&out.join("report"));
    let held: Vec<&String> = open.iter().filter(|l| l.ends_with(" held")).collect();
    assert!(
        held.is_empty(),
        "without the sandbox these did not work: {held:?}"
    );
    assert!(!traces(&sb, &m).is_empty());
    clear_traces(&sb, &m);
    let victim_env = std::fs::read(&env_file).unwrap();
    let log_before = std::fs::read(sb.data.join("runs.jsonl")).unwrap();

    // Under it, none does; its writes and its TMPDIR still work.
    m.systemctl(&["start", &service("boxed")]);
    let boxed = report(&out.join("report"));
    let through: Vec<&String> = boxed.iter().filter(|l| l.ends_with(" through")).collect();
    assert!(through.is_empty(), "escaped the sandbox: {through:?}");
    assert_eq!(
        boxed.len(),
        attempts.len() + 1,
        "the report is incomplete: {boxed:?}"
    );
    assert_eq!(boxed.last().map(String::as_str), Some("scratch"));
    assert_eq!(std::fs::read_to_string(out.join("ok")).unwrap(), "kept\n");
    assert!(traces(&sb, &m).is_empty(), "{:?}", traces(&sb, &m));
    assert_eq!(std::fs::read(&env_file).unwrap(), victim_env);
    // The runner still recorded the run, after it: the log grew by its lines only.
    let log_after = std::fs::read(sb.data.join("runs.jsonl")).unwrap();
    assert!(log_after.starts_with(&log_before));
    let finished = sb
        .events("finished")
        .into_iter()
        .rfind(|e| e["name"] == "boxed")
        .expect("the boxed run is recorded");
    assert_eq!(finished["outcome"], "ok", "{finished:#}");
    assert!(
        !String::from_utf8_lossy(&log_after).contains("victim-secret-value"),
        "the victim's secret reached the log"
    );
    sb.assert_log_verifies();
}

/// Regression: `writes = ["~/Backups"]` checked once at install; the folder replaced later by a
/// link to the home folder (a `git pull`, a hand) let the strict job write into home. The firing
/// resolves its writes again and refuses a link, naming it; validate refuses one from the start.
#[test]
fn a_writes_entry_that_became_a_link_is_refused_at_the_firing() {
    let sb = Sandbox::new();
    let backups = sb.home.join("Backups");
    std::fs::create_dir(&backups).unwrap();
    sb.script(
        "save.sh",
        "#!/bin/sh\necho saved > \"$HOME/Backups/x\" && echo saved\n",
    );
    sb.definition(
        "boxed",
        "name = \"boxed\"\ncommand = [\"scripts/save.sh\"]\nwrites = [\"~/Backups\"]\n[sandbox]\nlevel = \"strict\"\n",
    );
    assert_code(&sb.run(["validate"]), 0);
    assert_code(&sb.run(["run", "boxed"]), 0);
    assert_eq!(
        std::fs::read_to_string(backups.join("x")).unwrap(),
        "saved\n"
    );
    std::fs::remove_dir_all(&backups).unwrap();
    std::os::unix::fs::symlink(&sb.home, &backups).unwrap();
    let o = sb.run(["run", "boxed"]);
    assert_code(&o, 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "sandbox", "{f:#}");
    let detail = f["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("Backups is a link (to "), "{detail}");
    assert!(!sb.home.join("x").exists(), "it wrote through the link");
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("Backups is a link"), "{}", stderr(&o));
}

/// Regression: what Landlock does not cover was open to a strict command: it could let others
/// write a file of its user's anywhere (`chmod o+w`), make one set-user-ID, change a group, set
/// extended attributes, and reach any datagram socket by its path through a `socketpair`. Each is
/// refused now (a command without the sandbox does each, so each is a real way out), while
/// changing the mode of a file in its `writes` as `cp -p` and `rsync -a` do still works.
#[test]
#[ignore = "a real component: python3 (extended attributes, a datagram socketpair)"]
fn what_landlock_does_not_cover_is_refused_to_a_strict_command() {
    if crate::units::which("python3").is_none() {
        return skip(
            "what_landlock_does_not_cover_is_refused_to_a_strict_command",
            "python3 is missing",
        );
    }
    if automations::sandbox::Support::here().usable().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "this kernel has no usable Landlock"
        );
        eprintln!("SKIPPED: this kernel has no usable Landlock");
        return;
    }
    let sb = Sandbox::new();
    let out = sb.home.join("Backups");
    std::fs::create_dir(&out).unwrap();
    let target = sb.home.join("notes.txt");
    std::fs::write(&target, "mine\n").unwrap();
    let socket = sb.home.join("listen.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (t, so) = (target.display(), socket.display());
    let attempts = [
        ("chmod-others-write", format!("chmod 0646 '{t}'")),
        ("chmod-setuid", format!("chmod 4700 '{t}'")),
        ("chgrp", format!("chgrp \"$(id -g)\" '{t}'")),
        (
            "setxattr",
            format!("python3 -c \"import os; os.setxattr('{t}', 'user.escaped', b'1')\""),
        ),
        (
            "dgram-pair",
            format!(
                "python3 -c \"import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'escaped', '{so}')\""
            ),
        ),
    ];
    let mut body = String::from("#!/bin/sh\n");
    for (name, line) in &attempts {
        body.push_str(&format!(
            "if ( {line} ) >/dev/null 2>&1; then echo '{name} through'; else echo '{name} held'; fi\n"
        ));
    }
    // What a copy into its writes does.
    body.push_str("echo x > \"$HOME/Backups/copy\" && chmod 0664 \"$HOME/Backups/copy\" && echo 'own-chmod ok'\n");
    sb.script("probe.sh", &body);
    sb.definition(
        "open",
        "name = \"open\"\ncommand = [\"scripts/probe.sh\"]\n",
    );
    sb.definition(
        "boxed",
        "name = \"boxed\"\ncommand = [\"scripts/probe.sh\"]\nwrites = [\"~/Backups\"]\n[sandbox]\nlevel = \"strict\"\n",
    );
    let reset = || {
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let _ = std::fs::remove_file(out.join("copy"));
        while listener.recv(&mut [0; 16]).is_ok() {}
    };
    use std::os::unix::fs::PermissionsExt;
    reset();
    assert_code(&sb.run(["run", "open"]), 0);
    let control = sb.last_finished()["stdout_tail"]
        .as_str()
        .unwrap()
        .to_owned();
    for (name, _) in &attempts {
        assert!(
            control.contains(&format!("{name} through")),
            "{name}: {control}"
        );
    }
    assert!(
        listener.recv(&mut [0; 16]).is_ok(),
        "without the sandbox no datagram arrived"
    );
    reset();
    assert_code(&sb.run(["run", "boxed"]), 0);
    let boxed = sb.last_finished()["stdout_tail"]
        .as_str()
        .unwrap()
        .to_owned();
    for (name, _) in &attempts {
        assert!(boxed.contains(&format!("{name} held")), "{name}: {boxed}");
    }
    assert!(boxed.contains("own-chmod ok"), "{boxed}");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "the mode of a file outside its writes changed");
    assert!(
        listener.recv(&mut [0; 16]).is_err(),
        "a datagram reached a socket outside"
    );
}

/// Regression: `writes = ["~/.local"]` (or any folder above the data root) was accepted, and a strict
/// command given it wrote the run log, env files and state of every automation; `writes =
/// ["~/.config"]` let it leave a user unit that would run unconfined. Both are refused by
/// validate, naming what the entry holds, and at the firing, before the command starts.
#[test]
fn a_writes_entry_holding_the_data_root_or_the_units_is_refused() {
    let sb = Sandbox::new();
    let above = sb.data.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(sb.home.join(".config")).unwrap();
    sb.script(
        "spill.sh",
        &format!(
            "#!/bin/sh\necho spilled >> '{}'\nmkdir -p \"$HOME/.config/systemd/user\" && : > \"$HOME/.config/systemd/user/left.service\"\n",
            sb.data.join("runs.jsonl").display()
        ),
    );
    for (name, entry, holds) in [
        ("above", above.display().to_string(), "holds the data root"),
        (
            "config",
            "~/.config".to_owned(),
            "holds the folder of user units",
        ),
    ] {
        sb.definition(
            name,
            &format!(
                "name = \"{name}\"\ncommand = [\"scripts/spill.sh\"]\nwrites = [\"{entry}\"]\n[sandbox]\nlevel = \"strict\"\n"
            ),
        );
        let o = sb.run(["validate"]);
        assert_code(&o, 2);
        assert!(stderr(&o).contains(holds), "{name}: {}", stderr(&o));
        let o = sb.run(["run", name]);
        assert_code(&o, 1);
        let f = sb.last_finished();
        assert_eq!(f["error"]["class"], "sandbox", "{f:#}");
        assert!(
            f["error"]["detail"].as_str().unwrap().contains(holds),
            "{f:#}"
        );
        std::fs::remove_file(sb.root.join(format!("automations/{name}.toml"))).unwrap();
    }
    let log = std::fs::read_to_string(sb.data.join("runs.jsonl")).unwrap_or_default();
    assert!(
        !log.contains("spilled"),
        "the command wrote the run log:\n{log}"
    );
    assert!(
        !sb.home.join(".config/systemd/user/left.service").exists(),
        "the command left a user unit"
    );
}

/// Regression: a strict automation whose data root (or repository) is under /tmp never ran (its
/// unit's PrivateTmp= hides it: `200/CHDIR`) while validate, install and doctor said it was fine,
/// and a person's run ran it unconfined without a word. Now validate warns, install refuses, doctor
/// fails, each naming the folder; a person's run is confined by the runner and says what only the
/// unit adds.
#[test]
fn a_strict_automation_under_tmp_is_named_before_it_is_installed() {
    let mut sb = Sandbox::new();
    let data = tempfile::Builder::new()
        .prefix("automations-it-data-")
        .tempdir_in("/var/tmp")
        .unwrap();
    sb.env("AUTOMATIONS_DATA_ROOT", data.path().to_str().unwrap());
    std::fs::create_dir(sb.root.join("idle")).unwrap();
    sb.definition(
        "boxed",
        "name = \"boxed\"\ncommand = [\"true\"]\n[trigger]\npaths = [\"{root}/idle\"]\n[sandbox]\nlevel = \"strict\"\n",
    );
    // The repository may be under /tmp too (where the sandbox is); whichever comes first is named.
    let o = sb.run(["validate"]);
    assert_code(&o, 0);
    let warning = stderr(&o);
    assert!(
        warning.contains("automations/boxed.toml: [sandbox]: warning: valid, but its ")
            && warning.contains(" is under /")
            && warning.contains("PrivateTmp=yes hides from it")
            && warning.contains("install refuses it here"),
        "{warning}"
    );
    let o = sb.run(["install", "boxed", "--dry-run"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("PrivateTmp=yes hides from it"),
        "{}",
        stderr(&o)
    );
    let o = sb.run(["doctor"]);
    assert!(
        stdout(&o).contains("sandbox: boxed: its ")
            && stdout(&o).contains("PrivateTmp=yes hides from it"),
        "{}",
        stdout(&o)
    );
    let o = sb.run(["run", "boxed"]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("boxed: sandbox applied to this run by the runner: Landlock ABI"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("is not: `automations run boxed --unit` runs it there"));
}

/// Regression: what only the unit applies (the sandbox, the limits) could not be tried at once: a
/// `systemctl --user start` of a daily job's service was `skipped (slot_done)`, so trying meant a
/// schedule edit and a reinstall, twice. `run NAME --unit` starts the installed unit now, past the
/// slot guard, waits, and prints the run's summary line.
#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn run_unit_tries_the_installed_unit_at_once() {
    let test = "run_unit_tries_the_installed_unit_at_once";
    let mut sb = if nix::unistd::getuid().is_root() {
        Sandbox::outside_tmp()
    } else {
        Sandbox::new()
    };
    sb.use_stable_bin();
    let Some(m) = UserManager::start(&mut sb, test) else {
        return;
    };
    let out = sb.home.join("Backups");
    std::fs::create_dir_all(&out).unwrap();
    sb.script(
        "try.sh",
        "#!/bin/sh\necho kept > \"$HOME/Backups/ok\"\nif echo x 2>\"$HOME/Backups/why\" >\"$HOME/outside\"; then echo escaped; fi\nexit 0\n",
    );
    sb.definition(
        "boxed",
        "name = \"boxed\"\ncommand = [\"scripts/try.sh\"]\nwrites = [\"~/Backups\"]\n[schedule]\ndaily_at = \"03:00\"\n[sandbox]\nlevel = \"strict\"\n",
    );
    let r = run_on_pty(sb.cmd(["install", "boxed"]), "Type y to confirm", "y");
    assert_eq!(r.code, Some(0), "{}", r.output);
    // The unit started by hand: its slot is done (installed after it).
    m.systemctl(&["start", &service("boxed")]);
    assert_eq!(sb.events("skipped").pop().unwrap()["reason"], "slot_done");
    let o = sb.run(["run", "boxed", "--unit"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).starts_with("boxed: ok in "),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let started = sb.events("started").pop().unwrap();
    assert_eq!(started["trigger"], "unit", "{started}");
    assert_eq!(std::fs::read_to_string(out.join("ok")).unwrap(), "kept\n");
    assert!(!sb.home.join("outside").exists());
    let why = std::fs::read_to_string(out.join("why")).unwrap();
    assert!(
        why.contains("Read-only file system") || why.contains("Permission denied"),
        "{why}"
    );
    // Not installed: said, nothing started.
    sb.shell_definition("loose", "true", "");
    let o = sb.run(["run", "loose", "--unit"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("loose is not installed here"),
        "{}",
        stderr(&o)
    );
}
