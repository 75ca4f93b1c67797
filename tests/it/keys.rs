//! Keys and the gate: a real gnome-keyring Secret Service, a fake AnyType on loopback, a recording
//! fake `security`, and the key never leaking into the data root.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use automations::definition::AnyTypeAccess;
use automations::keys::{KeyError, KeyStore, Secret};
use automations::names::{Label, Name, Namespace};

use crate::fixtures::*;
use crate::harness::*;

const KEY: &str = "Zq9Kx2Wv7pLm_lowercase_run_T4b8";
const LABEL: &str = "local.automations.reader";

fn reader_definition(sb: &Sandbox, permission: &str, spaces: &str, script: &str) {
    let script = serde_json::to_string(script).unwrap();
    sb.definition(
        "reader",
        &format!(
            "name = \"reader\"\ncommand = [\"sh\", \"-c\", {script}]\n[anytype]\npermission = \"{permission}\"\nspaces = {spaces}\n"
        ),
    );
}

/// With a key gate declared, `started` is on disk before the gate starts anything: a start that
/// cannot be synced (the test switch of faults.rs) never reaches the keychain, and the run says why.
#[test]
fn a_start_that_cannot_be_synced_never_reaches_the_keychain() {
    let mut sb = Sandbox::new();
    let listener = silent_bus(&mut sb);
    sb.env("AUTOMATIONS_TEST_STARTED_SYNC", "fail");
    write_spaces(&sb, SPACES);
    reader_definition(&sb, "read", "[\"agent\"]", "true");
    assert_code(&sb.run(["run", "reader"]), 1);
    assert!(
        listener.accept().is_err(),
        "the gate asked the keychain before the run's start was on disk"
    );
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "log_sync", "{f}");
    assert!(!refusal(&sb).contains("key_refused"), "{}", refusal(&sb));
}

/// The detail of the last run's error.
fn refusal(sb: &Sandbox) -> String {
    sb.last_finished()["error"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn access(permission: &str, spaces: &[&str]) -> AnyTypeAccess {
    AnyTypeAccess {
        permission: permission.into(),
        spaces: spaces.iter().map(|s| s.to_string()).collect(),
    }
}

fn secret(s: &str) -> Secret {
    Secret::new(s.into()).unwrap()
}

/// Every `n`-byte fragment of `key` found in any file under `dir`, with the file.
fn leaks(dir: &Path, key: &str, n: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (p, bytes) in files_under(dir) {
        for w in key.as_bytes().windows(n) {
            if bytes.windows(n).any(|b| b == w) {
                found.push(format!("{}: {}", p.display(), String::from_utf8_lossy(w)));
            }
        }
    }
    found
}

#[test]
#[ignore = "a real component: gnome-keyring's Secret Service in a D-Bus session"]
fn a_matching_key_runs_the_command_with_the_header_and_nothing_leaks() {
    let mut sb = Sandbox::new();
    let Some(keyring) = Keyring::start(&mut sb, "a_matching_key_runs_the_command") else {
        return;
    };
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent"])));
    sb.env("ANYTYPE_API_URL", &api.url);
    write_spaces(&sb, SPACES);
    keyring.store(LABEL, KEY);
    // The command leaks the key every way it can: whole, split across stdout and stderr, across
    // the 8 KiB cut, in fact names, and the header value itself.
    reader_definition(
        &sb,
        "read",
        "[\"agent\"]",
        r#"K=$(printf %s "$ANYTYPE_OPENAPI_MCP_HEADERS" | sed 's/.*Bearer \([^"]*\)".*/\1/')
echo "whole: $K"
printf 'half: %s\n' "$(printf %s "$K" | cut -c1-15)"
printf 'other half: %s\n' "$(printf %s "$K" | cut -c16-)" >&2
echo "headers: $ANYTYPE_OPENAPI_MCP_HEADERS" >&2
"$AUTOMATION_BIN" result "$K=1" || true
"$AUTOMATION_BIN" result lowercase_run=1
printf '%s' "$K"
head -c 8180 /dev/zero | tr '\0' '.'"#,
    );
    let o = sb.run(["run", "reader"]);
    let f = sb.last_finished();
    // The gate passed and the command ran; the fact named after a key fragment fails the run.
    assert_eq!(f["exit_code"], 0, "{f}");
    assert_eq!(f["error"]["class"], "result_invalid", "{f}");
    assert!(
        f["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("fact name contains a secret")
    );
    assert_code(&o, 1);
    let out = f["stdout_tail"].as_str().unwrap();
    let err = f["stderr_tail"].as_str().unwrap();
    assert!(err.contains("headers: [redacted]"), "{err}");
    assert!(err.contains("other half: [redacted]"), "{err}");
    assert!(
        f["dropped"]["stdout"].as_u64().unwrap() > 0,
        "the cut fell inside the output"
    );
    assert!(!out.contains(&KEY[..6]) && !err.contains(&KEY[..6]));
    assert_eq!(
        api.seen.lock().unwrap()[0],
        (
            "GET /v2/auth/whoami HTTP/1.1".to_owned(),
            format!("Bearer {KEY}")
        )
    );
    let found = leaks(&sb.data, KEY, 6);
    assert!(
        found.is_empty(),
        "the key leaked into the data root: {found:#?}"
    );
    let o = sb.run(["show", f["run"].as_str().unwrap()]);
    assert!(!stdout(&o).contains(&KEY[..6]));
}

#[test]
#[ignore = "a real component: gnome-keyring's Secret Service in a D-Bus session"]
fn refusals_fail_closed_and_name_every_difference() {
    let mut sb = Sandbox::new();
    let Some(keyring) = Keyring::start(&mut sb, "refusals_fail_closed") else {
        return;
    };
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent", "id-work"])));
    sb.env("ANYTYPE_API_URL", &api.url);
    write_spaces(&sb, SPACES);
    let marker = sb.path("ran");
    let script = format!("touch {}", marker.display());

    // No key stored yet.
    reader_definition(&sb, "read", "[\"agent\"]", &script);
    assert_code(&sb.run(["run", "reader"]), 1);
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "key_refused");
    assert!(
        f["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("no key is stored for local.automations.reader")
    );

    // A key reaching one space too many.
    keyring.store(LABEL, KEY);
    assert_code(&sb.run(["run", "reader"]), 1);
    let detail = refusal(&sb);
    assert!(
        detail.contains("the key also reaches space id-work"),
        "{detail}"
    );

    // A write declaration on a space agents may not write.
    reader_definition(&sb, "readwrite", "[\"agent\", \"work\"]", &script);
    assert_code(&sb.run(["run", "reader"]), 1);
    let detail = refusal(&sb);
    assert!(
        detail.contains("space work: policy agent_write is \"ask\""),
        "{detail}"
    );

    // Whatever the server says is scrubbed: an answer quoting the key never reaches the log.
    reader_definition(&sb, "read", "[\"agent\", \"work\"]", &script);
    api.set(Answer::Reply(
        200,
        whoami("read", &["id-agent", "id-work"]).replace("\"restricted\"", &format!("\"{KEY}\"")),
    ));
    assert_code(&sb.run(["run", "reader"]), 1);
    let detail = refusal(&sb);
    assert!(detail.contains("unknown kind \"[redacted]\""), "{detail}");
    assert!(leaks(&sb.data, KEY, 6).is_empty());

    // AnyType down.
    reader_definition(&sb, "read", "[\"agent\", \"work\"]", &script);
    api.set(Answer::Reply(500, "oops".into()));
    assert_code(&sb.run(["run", "reader"]), 1);
    assert!(
        sb.last_finished()["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("AnyType answered 500")
    );

    // A locked keyring: refused with the reason, before the command.
    api.set(Answer::Reply(200, whoami("read", &["id-agent", "id-work"])));
    assert_code(&sb.run(["run", "reader"]), 0);
    assert!(marker.exists(), "a matching key runs the command");
    std::fs::remove_file(&marker).unwrap();
    keyring.lock();
    let t0 = Instant::now();
    assert_code(&sb.run(["run", "reader"]), 1);
    assert!(t0.elapsed() < Duration::from_secs(20));
    let f = sb.last_finished();
    assert_eq!(f["error"]["class"], "key_refused");
    assert!(
        f["error"]["detail"].as_str().unwrap().contains("locked"),
        "{f}"
    );
    assert!(!marker.exists(), "the command started despite a refusal");
    assert!(leaks(&sb.data, KEY, 6).is_empty());
}

#[test]
fn a_definition_without_anytype_never_touches_the_keychain() {
    let mut sb = Sandbox::new();
    let listener = silent_bus(&mut sb);
    sb.definition("plain", "name = \"plain\"\ncommand = [\"true\"]\n");
    assert_code(&sb.run(["run", "plain"]), 0);
    assert!(
        listener.accept().is_err(),
        "a run without [anytype] connected to the keychain's bus"
    );
    // The control: a declaring automation does reach for it (and fails closed on this fake bus).
    write_spaces(&sb, SPACES);
    reader_definition(&sb, "read", "[\"agent\"]", "true");
    assert_code(&sb.run(["run", "reader"]), 1);
    assert!(
        listener.accept().is_ok(),
        "the gate never asked the keychain"
    );
    assert_eq!(sb.last_finished()["error"]["class"], "key_refused");
}

#[test]
#[ignore = "a real component: gnome-keyring's Secret Service in a D-Bus session"]
fn key_store_check_overwrite_and_delete_through_the_real_keyring() {
    let mut sb = Sandbox::new();
    let Some(keyring) = Keyring::start(&mut sb, "key_store_check_overwrite_and_delete") else {
        return;
    };
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent"])));
    sb.env("ANYTYPE_API_URL", &api.url);
    write_spaces(&sb, SPACES);
    reader_definition(&sb, "read", "[\"agent\"]", "true");

    // No terminal: refused, nothing stored.
    let o = sb.run(["secret", "store", "reader"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("needs a terminal"));
    assert_eq!(keyring.lookup(LABEL), None);

    // A key that does not match is not stored.
    api.set(Answer::Reply(200, whoami("readwrite", &["id-agent"])));
    let r = run_on_pty(sb.cmd(["secret", "store", "reader"]), "(input hidden)", KEY);
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("not stored") && r.output.contains("permission is \"readwrite\""),
        "{}",
        r.output
    );
    assert!(!r.output.contains(KEY), "the key was echoed: {}", r.output);
    assert_eq!(keyring.lookup(LABEL), None);

    // A matching key is stored, then overwritten in place.
    api.set(Answer::Reply(200, whoami("read", &["id-agent"])));
    let r = run_on_pty(sb.cmd(["secret", "store", "reader"]), "(input hidden)", KEY);
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(!r.output.contains(KEY));
    assert_eq!(keyring.lookup(LABEL).as_deref(), Some(KEY));
    let second = "Second-key-0123456789abcdef";
    let r = run_on_pty(
        sb.cmd(["secret", "store", "reader"]),
        "(input hidden)",
        second,
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert_eq!(keyring.lookup(LABEL).as_deref(), Some(second));
    assert_eq!(keyring.count(LABEL), 1, "overwritten in place, not added");

    let o = sb.run(["secret", "check", "reader"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("ok: the stored key grants exactly what reader declares"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        api.seen.lock().unwrap().last().unwrap().1,
        format!("Bearer {second}")
    );
    api.set(Answer::Reply(200, whoami("read", &["id-agent", "id-work"])));
    let o = sb.run(["secret", "check", "reader"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("- the key also reaches space id-work"),
        "{}",
        stdout(&o)
    );

    let o = sb.run(["secret", "delete", "reader"]);
    assert_code(&o, 0);
    assert_eq!(keyring.lookup(LABEL), None);
    let o = sb.run(["secret", "check", "reader"]);
    assert_code(&o, 1);
    assert!(stdout(&o).contains("no key is stored"));
}

fn inspect(api: &FakeAnytype, deadline: Duration) -> Result<Vec<String>, String> {
    let sb = Sandbox::new();
    write_spaces(
        &sb,
        &SPACES.replace(
            "{\"spaces\"",
            &format!("{{\"api_url\": \"{}\", \"spaces\"", api.url),
        ),
    );
    automations::anytype::gate::inspect(
        &secret(KEY),
        &access("read", &["agent"]),
        automations::anytype::gate::Policy::DataRoot(&sb.data),
        deadline,
    )
    .map(|i| i.differences)
    .map_err(|r| r.to_string())
}

#[test]
fn the_whoami_exchange_against_a_fake_anytype() {
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent"])));
    let d = Duration::from_secs(5);
    assert_eq!(inspect(&api, d), Ok(vec![]));
    let ok = whoami("read", &["id-agent"]);
    let mismatches = [
        (
            whoami("readwrite", &["id-agent"]),
            "the key's permission is \"readwrite\"",
        ),
        (
            ok.replace(
                "\"id\": \"id-agent\", \"permission\": \"read\"",
                "\"id\": \"id-agent\", \"permission\": \"write\"",
            ),
            "space agent: permission \"write\"",
        ),
        (
            whoami("read", &["id-agent", "id-work"]),
            "also reaches space id-work",
        ),
        (whoami("read", &[]), "declared space agent is not reached"),
        (
            ok.replace("\"all_spaces\": false", "\"all_spaces\": true"),
            "reaches all spaces",
        ),
        (ok.replace("\"restricted\"", "\"legacy\""), "legacy key"),
        (ok.replace("\"restricted\"", "\"full\""), "full key"),
        (
            ok.replace(
                "\"expires_at\": null",
                "\"expires_at\": \"2001-01-01T00:00:00Z\"",
            ),
            "expired",
        ),
    ];
    for (body, needle) in mismatches {
        api.set(Answer::Reply(200, body));
        let diffs = inspect(&api, d).unwrap();
        assert!(
            diffs.iter().any(|x| x.contains(needle)),
            "{needle}: {diffs:?}"
        );
    }
    let failures = [
        (
            Answer::Reply(200, "{\"key\": 1}".into()),
            "unreadable whoami answer",
        ),
        (
            Answer::Reply(200, "not json".into()),
            "unreadable whoami answer",
        ),
        (Answer::Reply(401, "{}".into()), "rejected the key (401)"),
        (Answer::Reply(500, "{}".into()), "answered 500"),
        (Answer::Hangup, "no answer from AnyType"),
        // the answer was read whole, whatever its size. A valid whoami padded to
        // 1 MiB is refused after 64 KiB.
        (
            Answer::Reply(
                200,
                ok.replace("{\"key\"", &format!("{}{{\"key\"", " ".repeat(1 << 20))),
            ),
            "whoami answer is larger than 64 KiB",
        ),
    ];
    for (answer, needle) in failures {
        api.set(answer);
        let e = inspect(&api, d).unwrap_err();
        assert!(e.contains(needle) && !e.contains(KEY), "{needle}: {e}");
    }
    // An answer far slower than any bound below: a call that waited for it would show, whatever
    // the load (no test rests on how fast this machine is).
    api.set(Answer::Slow(
        Duration::from_secs(60),
        whoami("read", &["id-agent"]),
    ));
    let t0 = Instant::now();
    let e = inspect(&api, Duration::from_millis(300)).unwrap_err();
    assert!(e.contains("did not answer within 0.3 s"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(20));
    // Nobody listening at all.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let sb = Sandbox::new();
    write_spaces(
        &sb,
        &SPACES.replace(
            "{\"spaces\"",
            &format!("{{\"api_url\": \"http://127.0.0.1:{port}\", \"spaces\""),
        ),
    );
    let e = automations::anytype::gate::inspect(
        &secret(KEY),
        &access("read", &["agent"]),
        automations::anytype::gate::Policy::DataRoot(&sb.data),
        d,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("no answer from AnyType"), "{e}");
}

/// A fake `security` that records argv and stdin, keeps one password in a file, and can hang.
/// A fake `security`: records argv and stdin; `exit-<verb>` makes that verb print `stderr-<verb>`
/// (if any) and exit with the code in it; `i-stderr` is what `security -i` prints on stderr while
/// still exiting 0, as the real one does after a failed command; `hang` makes it sleep.
fn fake_security(dir: &Path) -> String {
    let path = dir.join("security");
    write_executable(
        &path,
        r#"#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/argv"
[ -e "$dir/hang" ] && sleep 30
verb=$1
if [ -e "$dir/exit-$verb" ]; then
    [ -e "$dir/stderr-$verb" ] && cat "$dir/stderr-$verb" >&2
    exit "$(cat "$dir/exit-$verb")"
fi
case "$verb" in
    -i)
        input=$(cat)
        echo "$input" >> "$dir/stdin"
        if [ -e "$dir/i-stderr" ]; then cat "$dir/i-stderr" >&2; exit 0; fi
        if [ -e "$dir/password" ]; then echo "security: SecKeychainItemCreateFromContent (<default>): The specified item already exists in the keychain." >&2; exit 0; fi
        pw=$(printf '%s' "$input" | sed -n 's/.* -w "\(.*\)"$/\1/p')
        printf '%s' "$pw" > "$dir/password" ;;
    find-generic-password)
        [ -e "$dir/password" ] || { echo "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain." >&2; exit 44; }
        cat "$dir/password"; echo ;;
    delete-generic-password)
        [ -e "$dir/password" ] || { echo "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain." >&2; exit 44; }
        rm "$dir/password" ;;
esac
"#,
    );
    path.to_str().unwrap().to_owned()
}

fn label_of(name: &str) -> Label {
    Label::new(
        &Namespace::new("automations").unwrap(),
        &Name::new(name).unwrap(),
    )
}

#[test]
fn macos_backend_keeps_the_secret_off_argv_and_fails_after_the_deadline() {
    use automations::keys::security::SecurityCli;
    let d = tempfile::tempdir().unwrap();
    let store = SecurityCli::new(&fake_security(d.path()));
    let label = label_of("reader");
    assert_eq!(store.get(&label).unwrap(), None);
    store.set(&label, &secret(KEY)).unwrap();
    assert_eq!(store.get(&label).unwrap().unwrap().expose(), KEY);
    store.set(&label, &secret("Another-Key_42")).unwrap();
    assert_eq!(
        store.get(&label).unwrap().unwrap().expose(),
        "Another-Key_42"
    );
    // Store is delete, then add (never an update in place with -U): the new item carries a fresh
    // access list naming /usr/bin/security.
    let stdin = std::fs::read_to_string(d.path().join("stdin")).unwrap();
    assert_eq!(
        stdin
            .matches("add-generic-password -s \"local.automations.reader\" -a \"local.automations.reader\" -l \"local.automations.reader\" -T /usr/bin/security -w ")
            .count(),
        2,
        "{stdin}"
    );
    assert!(!stdin.contains(" -U"), "{stdin}");
    let argv: Vec<String> = std::fs::read_to_string(d.path().join("argv"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let deletes_then_adds: Vec<&str> = argv
        .iter()
        .map(|l| l.split(' ').next().unwrap())
        .filter(|v| *v != "find-generic-password")
        .collect();
    assert_eq!(
        deletes_then_adds,
        [
            "delete-generic-password",
            "-i",
            "delete-generic-password",
            "-i"
        ]
    );
    assert!(store.delete(&label).unwrap());
    assert!(!store.delete(&label).unwrap());
    let argv = std::fs::read_to_string(d.path().join("argv")).unwrap();
    assert!(
        !argv.contains(KEY) && !argv.contains("Another-Key_42"),
        "a secret reached argv: {argv}"
    );

    std::fs::write(d.path().join("hang"), "").unwrap();
    let mut store = SecurityCli::new(&fake_security(d.path()));
    store.deadline = Duration::from_millis(300);
    let t0 = Instant::now();
    assert_eq!(store.get(&label), Err(KeyError::Timeout));
    assert_eq!(store.set(&label, &secret(KEY)), Err(KeyError::Timeout));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn macos_backend_classifies_by_exit_code_never_by_text_holding_the_label() {
    use automations::keys::security::SecurityCli;
    let d = tempfile::tempdir().unwrap();
    let store = SecurityCli::new(&fake_security(d.path()));
    // A label with "locked" in it, which the stderr of every failure repeats.
    let label = label_of("unlocked-sync");
    let fail = |verb: &str, code: i32, stderr: &str| {
        std::fs::write(d.path().join(format!("exit-{verb}")), code.to_string()).unwrap();
        std::fs::write(d.path().join(format!("stderr-{verb}")), stderr).unwrap();
    };
    let said = |msg: &str| format!("security: SecKeychainSearchCopyNext ({label}): {msg}");
    for (code, want) in [
        (36, KeyError::Locked),
        (51, KeyError::AuthFailed),
        (128, KeyError::Cancelled),
    ] {
        fail("find-generic-password", code, &said("an error"));
        assert_eq!(store.get(&label), Err(want.clone()), "exit {code}");
        fail("delete-generic-password", code, &said("an error"));
        assert_eq!(store.delete(&label), Err(want), "exit {code}");
    }
    // 44 with the label (and "locked" in it) on stderr: not found, never locked.
    fail(
        "find-generic-password",
        44,
        &said("The specified item could not be found in the keychain."),
    );
    assert_eq!(store.get(&label), Ok(None));
    fail(
        "delete-generic-password",
        44,
        &said("The specified item could not be found in the keychain."),
    );
    assert_eq!(store.delete(&label), Ok(false));
    // Another code, with the label in the text: a plain failure, and the label is not quoted.
    fail("find-generic-password", 1, &said("unlocked and locked"));
    match store.get(&label) {
        Err(KeyError::Failed(m)) => {
            assert!(!m.contains("unlocked-sync"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // `security -i` exits 0 and says what failed on stderr.
    for f in ["exit-find-generic-password", "exit-delete-generic-password"] {
        std::fs::remove_file(d.path().join(f)).unwrap();
    }
    std::fs::write(
        d.path().join("i-stderr"),
        format!("security: add-generic-password {label}: The user name or passphrase you entered is not correct.\n"),
    )
    .unwrap();
    assert_eq!(store.set(&label, &secret(KEY)), Err(KeyError::AuthFailed));
    std::fs::write(
        d.path().join("i-stderr"),
        format!("security: add-generic-password {label}: User interaction is not allowed.\n"),
    )
    .unwrap();
    assert_eq!(store.set(&label, &secret(KEY)), Err(KeyError::Locked));
}

#[test]
fn macos_backend_refuses_an_oversized_key_before_spawning_anything() {
    use automations::keys::security::SecurityCli;
    let d = tempfile::tempdir().unwrap();
    let store = SecurityCli::new(&fake_security(d.path()));
    let huge = secret(&"k".repeat(2048));
    assert!(matches!(
        store.set(&label_of("reader"), &huge),
        Err(KeyError::Invalid(_))
    ));
    assert!(
        !d.path().join("argv").exists(),
        "security was run for an oversized key"
    );
}
