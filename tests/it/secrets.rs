//! The secret family: one command for every secret, the data root's file store (private files, read
//! by a firing), the spellings it replaced, and a keyring started the way a server has it, made to
//! work by the command docs/keys.md gives.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use serde::Deserialize;

use crate::fixtures::*;
use crate::harness::*;
use crate::units::which;

const TOKEN: &str = "tk_Vq3Lr8Ws1Xn6Yb0Zc5Hd";
const KEY: &str = "Zq9Kx2Wv7pLm_files_store_T4b8";
const NTFY_LABEL: &str = "local.automations.notify.ntfy";

/// `secret list --json`, version 1, read strictly.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Listing {
    version: u32,
    kind: String,
    store: String,
    secrets: Vec<Row>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    scope: String,
    label: String,
    stored: Option<bool>,
    error: Option<String>,
}

fn listing(sb: &Sandbox, code: i32) -> Listing {
    let o = sb.run(["secret", "list", "--json"]);
    assert_code(&o, code);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("secret list --json: {e}\n{}", stdout(&o)))
}

fn row<'a>(l: &'a Listing, scope: &str) -> &'a Row {
    l.secrets
        .iter()
        .find(|r| r.scope == scope)
        .unwrap_or_else(|| panic!("no row for {scope}"))
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_file_store_keeps_secrets_private_and_a_firing_reads_them() {
    let mut sb = Sandbox::new();
    let bus = silent_bus(&mut sb);
    write_private(&sb.data.join("secrets.toml"), "store = \"files\"\n");
    write_private(
        &sb.data.join("notify.toml"),
        "[ntfy]\nurl = \"http://127.0.0.1:9/topic\"\n",
    );

    let before = listing(&sb, 0);
    assert_eq!((before.version, before.kind.as_str()), (1, "files"));
    assert!(
        before.store.contains("weaker than a keychain"),
        "{}",
        before.store
    );
    assert_eq!(row(&before, "notify.ntfy").stored, Some(false));
    assert_eq!(row(&before, "notify.ntfy").label, NTFY_LABEL);

    let r = run_on_pty(
        sb.cmd(["secret", "store", "notify.ntfy"]),
        "(input hidden)",
        TOKEN,
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(!r.output.contains(TOKEN), "echoed: {}", r.output);
    let file = sb.data.join("secrets").join(NTFY_LABEL);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), TOKEN);
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&sb.data.join("secrets")), 0o700);

    let o = sb.run(["secret", "check", "notify.ntfy"]);
    assert_code(&o, 0);
    let after = listing(&sb, 0);
    let ntfy = row(&after, "notify.ntfy");
    assert_eq!((ntfy.stored, ntfy.error.as_deref()), (Some(true), None));
    assert_eq!(row(&after, "healthchecks.api").stored, Some(false));

    // An AnyType key stored there gates a firing: the runner reads it from the file.
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent"])));
    sb.env("ANYTYPE_API_URL", &api.url);
    write_spaces(&sb, SPACES);
    sb.definition(
        "reader",
        "name = \"reader\"\ncommand = [\"sh\", \"-c\", \"echo ran\"]\n[anytype]\npermission = \"read\"\nspaces = [\"agent\"]\n",
    );
    let r = run_on_pty(sb.cmd(["secret", "store", "reader"]), "(input hidden)", KEY);
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert_eq!(row(&listing(&sb, 0), "reader").stored, Some(true));
    assert_code(&sb.run(["run", "reader"]), 0);
    assert_eq!(sb.last_finished()["stdout_tail"], "ran\n");
    assert_eq!(
        api.seen.lock().unwrap().last().unwrap().1,
        format!("Bearer {KEY}")
    );

    assert_code(&sb.run(["secret", "delete", "notify.ntfy"]), 0);
    assert!(!file.exists());
    assert_code(&sb.run(["secret", "check", "notify.ntfy"]), 1);
    assert!(
        bus.accept().is_err(),
        "the file store was chosen, yet the keychain was asked"
    );
    // doctor also asks the service manager, which speaks on the bus: not the keychain's business.
    let o = sb
        .cmd(["doctor"])
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains("a probe was stored, read back and deleted"),
        "{}",
        stdout(&o)
    );
    assert!(
        !sb.data
            .join("secrets/local.automations.doctor.probe")
            .exists()
    );

    // Nothing else under the data root holds them: the run log, the index, the scratch.
    for (p, bytes) in files_under(&sb.data) {
        if p.starts_with(sb.data.join("secrets")) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(TOKEN) && !text.contains(KEY),
            "{} holds a secret",
            p.display()
        );
    }
}

#[test]
fn a_secrets_toml_that_cannot_be_read_keeps_and_reads_nothing() {
    let mut sb = Sandbox::new();
    let bus = silent_bus(&mut sb);
    write_private(&sb.data.join("secrets.toml"), "store = \"disk\"\n");
    let r = run_on_pty(
        sb.cmd(["secret", "store", "notify.ntfy"]),
        "(input hidden)",
        TOKEN,
    );
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("secrets.toml") && r.output.contains("store: expected"),
        "{}",
        r.output
    );
    assert!(!r.output.contains(TOKEN));
    assert!(!sb.data.join("secrets").exists());
    let l = listing(&sb, 1);
    assert_eq!(l.kind, "none");
    assert!(
        l.secrets
            .iter()
            .all(|r| r.stored.is_none() && r.error.is_some())
    );
    assert!(
        bus.accept().is_err(),
        "a broken choice fell back to the keychain"
    );
}

#[test]
fn the_spellings_the_family_replaced_say_the_new_command() {
    let sb = Sandbox::new();
    for (old, new) in [
        ("key store reader", "secret store reader"),
        ("key delete reader", "secret delete reader"),
        ("notify-key store", "secret store notify.pushover"),
        ("notify-key check --ntfy", "secret check notify.ntfy"),
        ("notify-key delete --email", "secret delete notify.email"),
        ("notify-key store --webhook", "secret store notify.webhook"),
        (
            "healthchecks key store api",
            "secret store healthchecks.api",
        ),
        (
            "healthchecks key check ping",
            "secret check healthchecks.ping",
        ),
    ] {
        let o = sb.run(old.split(' '));
        assert_code(&o, 2);
        assert_eq!(
            stderr(&o),
            format!("automations {old} is now: automations {new}\n"),
            "{old}"
        );
    }
    // A scope that is none of them is refused by name.
    let o = sb.run(["secret", "check", "notify.sms"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("notify.sms"), "{}", stderr(&o));
}

#[test]
#[ignore = "a real component: make"]
fn the_make_targets_the_family_replaced_say_the_new_one() {
    if which("make").is_none() {
        return skip(
            "the_make_targets_the_family_replaced_say_the_new_one",
            "make is missing",
        );
    }
    for (target, vars, new) in [
        (
            "automations-key-store",
            "NAME=reader",
            "make automations-secret-store SCOPE=reader",
        ),
        (
            "automations-notify-key-check",
            "NTFY=1",
            "make automations-secret-check SCOPE=notify.ntfy",
        ),
    ] {
        let o = std::process::Command::new("make")
            .args(["-s", target, vars])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains(&format!("is now: {new}")),
            "{}",
            stderr(&o)
        );
    }
}

/// The lines of docs/keys.md's first headless route that do the unlocking: the ones a person copies.
fn documented_unlock() -> String {
    let doc = std::fs::read_to_string(repo_root().join("docs/keys.md")).unwrap();
    let lines: Vec<&str> = doc
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("export DBUS_SESSION_BUS_ADDRESS")
                || l.contains("gnome-keyring-daemon --replace")
        })
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "docs/keys.md's unlock changed shape: {lines:?}"
    );
    lines.join("\n")
}

#[test]
#[ignore = "a real component: gnome-keyring started by D-Bus activation, as on a server"]
fn on_a_server_the_documented_unlock_makes_every_store_work() {
    let mut sb = Sandbox::new();
    let test = "on_a_server_the_documented_unlock_makes_every_store_work";
    let Some(keyring) = Keyring::on_a_server(&mut sb, test) else {
        return;
    };
    sb.env("XDG_RUNTIME_DIR", keyring.runtime().to_str().unwrap());
    write_private(
        &sb.data.join("notify.toml"),
        "[ntfy]\nurl = \"http://127.0.0.1:9/topic\"\n",
    );
    // As found: the bus starts a keyring with no login collection, and a store fails, saying so.
    let r = run_on_pty(
        sb.cmd(["secret", "store", "notify.ntfy"]),
        "(input hidden)",
        TOKEN,
    );
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(!r.output.contains(TOKEN));
    let o = sb.run(["doctor"]);
    assert!(
        stdout(&o).contains("does not work now") && stdout(&o).contains("docs/keys.md"),
        "{}",
        stdout(&o)
    );
    assert_eq!(keyring.lookup(NTFY_LABEL), None);

    // The documented lines, as a person runs them in an SSH session: the password typed once.
    let mut shell = keyring
        .command("bash")
        .args(["-c", &documented_unlock()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut shell.stdin.take().unwrap(), b"server-password\n").unwrap();
    let o = shell.wait_with_output().unwrap();
    assert_code(&o, 0);

    let r = run_on_pty(
        sb.cmd(["secret", "store", "notify.ntfy"]),
        "(input hidden)",
        TOKEN,
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert_eq!(keyring.lookup(NTFY_LABEL).as_deref(), Some(TOKEN));
    let o = sb.run(["doctor"]);
    assert!(
        stdout(&o).contains("a probe was stored, read back and deleted"),
        "{}",
        stdout(&o)
    );
    let l = listing(&sb, 0);
    assert_eq!(l.kind, "keychain");
    assert_eq!(row(&l, "notify.ntfy").stored, Some(true));
}
