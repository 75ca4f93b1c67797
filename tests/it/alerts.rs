//! Alerts people keep switched on: a signed webhook routed to its automations, whose URL never
//! shows; reminders of a degradation that goes on, with the state's clock set back instead of a
//! sleep; and `notify test` saying what each channel answered.

use crate::fixtures::{FakeHttp, Reply, write_private};
use crate::harness::*;

const HOOK_PATH: &str = "/hooks/T0/B0/sekr3tPathValue";
const SIGNING_KEY: &str = "whsec_correct-horse-battery";

/// Two failing automations, `window = 3`; notifications through a webhook that takes only `job`'s
/// news (signed) and an ntfy topic that takes everything but `job`'s.
fn two_channels(hook: &FakeHttp, ntfy: &FakeHttp, more: &str) -> Sandbox {
    let mut sb = Sandbox::new();
    std::fs::create_dir_all(&sb.data).unwrap();
    sb.env("AUTOMATIONS_NOTIFY", "on")
        .env("AUTOMATIONS_WEBHOOK_SECRET", SIGNING_KEY);
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "{more}[webhook]\nurl = \"{}{HOOK_PATH}\"\nsign = true\nonly = [\"job\"]\n[ntfy]\nurl = \"{}/topic\"\nexcept = [\"job\"]\n",
            hook.url, ntfy.url
        ),
    );
    write_private(
        &sb.data.join("health.toml"),
        "[defaults]\nwindow = 3\nmin_runs = 3\n",
    );
    sb.shell_definition("job", "echo 'password=hunter2' >&2; exit 1", "");
    sb.shell_definition("other", "exit 1", "");
    sb
}

/// The documents the webhook received, each with its signature header.
fn documents(hook: &FakeHttp) -> Vec<(serde_json::Value, Vec<u8>, Option<String>)> {
    hook.seen()
        .iter()
        .map(|s| {
            (
                serde_json::from_slice(&s.body).unwrap(),
                s.body.clone(),
                s.header("x-automations-signature").map(str::to_owned),
            )
        })
        .collect()
}

fn hmac_hex(key: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_signed_webhook_gets_its_automations_news_and_its_url_never_shows() {
    let hook = FakeHttp::start(|_| Reply::Status(200, b"ok".to_vec()));
    let ntfy = FakeHttp::start(|_| Reply::Status(200, b"{}".to_vec()));
    let sb = two_channels(&hook, &ntfy, "");
    let mut said = String::new();
    for name in ["job", "other"] {
        for _ in 0..3 {
            let o = sb.run(["run", name]);
            said.push_str(&stdout(&o));
            said.push_str(&stderr(&o));
        }
    }
    // The webhook: one document, job's, signed with the key over the exact body.
    let docs = documents(&hook);
    assert_eq!(docs.len(), 1, "{docs:?}");
    let (doc, body, signature) = &docs[0];
    assert_eq!(
        signature.as_deref(),
        Some(format!("sha256={}", hmac_hex(SIGNING_KEY, body)).as_str())
    );
    assert_eq!(hook.seen()[0].path, HOOK_PATH);
    assert_eq!(
        hook.seen()[0].header("content-type"),
        Some("application/json")
    );
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["kind"], "degraded");
    assert_eq!(doc["automation"], "job");
    assert_eq!(doc["namespace"], "automations");
    assert_eq!(doc["verdict"], "degraded");
    assert!(
        doc["reasons"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("success_rate")),
        "{doc}"
    );
    assert_eq!(doc["next"], "automations show job");
    let last_job_run = sb
        .events("finished")
        .into_iter()
        .rfind(|e| e["name"] == "job")
        .unwrap()["run"]
        .clone();
    assert_eq!(doc["run"], last_job_run);
    assert!(doc["host"].as_str().is_some_and(|h| !h.is_empty()));
    assert!(doc["title"].as_str().unwrap().contains("job is degraded"));
    // A wrong key would not match: the receiver can tell.
    assert_ne!(
        signature.as_deref(),
        Some(format!("sha256={}", hmac_hex("another key", body)).as_str())
    );

    // ntfy: other's news only.
    let topics: Vec<String> = ntfy
        .seen()
        .iter()
        .map(|s| s.header("title").unwrap_or("").to_owned())
        .collect();
    assert_eq!(topics, ["automations: other is degraded"]);

    // Neither the URL's path nor the key anywhere: not in what the commands said, not in the log,
    // not in any state file. The command's output (kept in the run's record, as always) in no
    // message and no notification state.
    for (path, text) in files_under(&sb.data)
        .into_iter()
        .filter(|(p, _)| !p.ends_with("notify.toml"))
        .map(|(p, b)| (p, String::from_utf8_lossy(&b).into_owned()))
        .chain([("what the commands said".into(), said)])
    {
        for secret in ["sekr3tPath", SIGNING_KEY] {
            assert!(!text.contains(secret), "{secret} in {}", path.display());
        }
        if path.starts_with(sb.data.join("state/verdicts")) {
            assert!(!text.contains("hunter2"), "output in {}", path.display());
        }
    }
    let messages = hook
        .seen()
        .into_iter()
        .chain(ntfy.seen())
        .map(|s| String::from_utf8_lossy(&s.body).into_owned());
    for m in messages {
        assert!(!m.contains("hunter2") && !m.contains("password"), "{m}");
    }
}

#[test]
fn notify_test_says_what_every_channel_answered_and_only_the_webhooks_origin() {
    let hook = FakeHttp::start(|r| {
        if r.body.starts_with(b"{\"text\"") {
            Reply::Status(200, b"ok".to_vec())
        } else {
            Reply::Status(500, b"{\"errors\":[\"down\"]}".to_vec())
        }
    });
    let ntfy = FakeHttp::start(|_| Reply::Status(200, b"{}".to_vec()));
    let mut sb = two_channels(&hook, &ntfy, "");
    let origin = hook.url.clone();

    // The JSON document: the receiver fails it; ntfy takes it.
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("webhook ({origin}): not delivered (refused: 500"))
            && out.contains("ntfy: delivered (200)"),
        "{out}"
    );
    assert!(
        !out.contains("sekr3t") && !stderr(&o).contains("sekr3t"),
        "{out}"
    );
    let (doc, _, _) = &documents(&hook)[0];
    assert_eq!(doc["kind"], "test");

    // Slack's shape, which this receiver takes.
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "[webhook]\nurl = \"{}{HOOK_PATH}\"\nformat = \"slack\"\n",
            hook.url
        ),
    );
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains(&format!("webhook ({origin}): delivered (200)")),
        "{}",
        stdout(&o)
    );
    let last = hook.seen().pop().unwrap();
    // The machine it came from, named as every message names it.
    let host = automations::notify::host();
    let slack: serde_json::Value = serde_json::from_slice(&last.body).unwrap();
    assert!(
        slack["text"].as_str().unwrap().starts_with(&format!(
            "*automations: a test from {host}*\nA test from automations on {host} at "
        )),
        "{slack}"
    );
    assert_eq!(
        last.header("x-automations-signature"),
        None,
        "not asked to sign"
    );

    // To be signed, but no key to be had (none in the environment, and no keychain reachable in
    // this sandbox): said, and nothing is sent unsigned.
    write_private(
        &sb.data.join("notify.toml"),
        &format!(
            "[webhook]\nurl = \"{}{HOOK_PATH}\"\nsign = true\n",
            hook.url
        ),
    );
    sb.env("AUTOMATIONS_WEBHOOK_SECRET", "");
    let before = hook.seen().len();
    let o = sb.run(["notify", "test"]);
    assert_code(&o, 1);
    assert!(
        // Which words depends on whether a keychain answers here; either way, not sent.
        stdout(&o).contains(&format!(
            "webhook ({origin}): not delivered (the webhook's signing key: the keychain:"
        )) || stdout(&o).contains("not delivered (the webhook is to be signed but has no key"),
        "{}",
        stdout(&o)
    );
    assert_eq!(hook.seen().len(), before);
}

/// Sets `name`'s last-told time back by `hours`, as if that much time had passed since.
fn age_told(sb: &Sandbox, name: &str, hours: i64) {
    let path = sb.data.join(format!("state/verdicts/{name}.json"));
    let mut last: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let back = |v: &serde_json::Value| match v.as_str() {
        None => serde_json::Value::Null,
        Some(t) => {
            let t = chrono::DateTime::parse_from_rfc3339(t).unwrap();
            serde_json::json!(
                (t - chrono::Duration::hours(hours))
                    .with_timezone(&chrono::Utc)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        }
    };
    last["told_at"] = back(&last["told_at"]);
    last["degraded_at"] = back(&last["degraded_at"]);
    std::fs::write(&path, serde_json::to_string(&last).unwrap()).unwrap();
}

#[test]
fn a_degradation_that_goes_on_is_recalled_once_a_period_and_never_in_quiet_hours() {
    let hook = FakeHttp::start(|_| Reply::Status(200, b"ok".to_vec()));
    let ntfy = FakeHttp::start(|_| Reply::Status(200, b"{}".to_vec()));
    let sb = two_channels(&hook, &ntfy, "remind_every_hours = 6\n");
    for _ in 0..3 {
        sb.run(["run", "job"]);
    }
    assert_eq!(documents(&hook).len(), 1);
    // Looks within the period: nothing more.
    sb.run(["notify", "look", "job"]);
    assert_eq!(documents(&hook).len(), 1);
    // Seven hours on (the state's clock set back, not a sleep): one reminder, then none.
    age_told(&sb, "job", 7);
    sb.run(["notify", "look", "job"]);
    let docs = documents(&hook);
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert_eq!(docs[1].0["kind"], "reminder");
    assert!(
        docs[1].0["text"]
            .as_str()
            .unwrap()
            .starts_with("Reminder: job on "),
        "{}",
        docs[1].0
    );
    assert!(
        docs[1].0["text"]
            .as_str()
            .unwrap()
            .contains("has been degraded for 7 h")
    );
    sb.run(["notify", "look", "job"]);
    assert_eq!(documents(&hook).len(), 2);

    // Due again, but in quiet hours (from an hour ago to an hour on, across midnight if need be):
    // none.
    age_told(&sb, "job", 7);
    let now = chrono::Local::now();
    let quiet = format!(
        "quiet_hours = \"{}-{}\"\n",
        (now - chrono::Duration::hours(1)).format("%H:%M"),
        (now + chrono::Duration::hours(1)).format("%H:%M")
    );
    let toml = std::fs::read_to_string(sb.data.join("notify.toml")).unwrap();
    write_private(&sb.data.join("notify.toml"), &format!("{quiet}{toml}"));
    let o = sb.run(["notify", "look", "job"]);
    assert_code(&o, 0);
    assert_eq!(documents(&hook).len(), 2);
    // The quiet hours over: the reminder goes.
    write_private(&sb.data.join("notify.toml"), &toml);
    assert_code(&sb.run(["notify", "look", "job"]), 0);
    assert_eq!(documents(&hook).len(), 3);
    assert_eq!(documents(&hook)[2].0["kind"], "reminder");
}

#[test]
fn a_snooze_holds_the_news_while_runs_go_on_and_ends_by_itself() {
    let hook = FakeHttp::start(|_| Reply::Status(200, b"ok".to_vec()));
    let ntfy = FakeHttp::start(|_| Reply::Status(200, b"{}".to_vec()));
    let sb = two_channels(&hook, &ntfy, "remind_every_hours = 6\n");

    for bad in [["snooze", "job", "2 hours"], ["snooze", "job", "31d"]] {
        let o = sb.run(bad);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("is not a duration like 30m, 2h, 1d or 1h30m"),
            "{}",
            stderr(&o)
        );
    }
    assert_code(&sb.run(["snooze", "nobody", "2h"]), 2);
    let o = sb.run(["snooze", "job", "2h", "--reason", "moving the NAS"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("job: snoozed until "), "{}", stdout(&o));
    let ev = sb.events("snoozed");
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0]["name"].as_str(), ev[0]["by"].as_str()),
        (Some("job"), Some("hand"))
    );
    assert_eq!(ev[0]["reason"], "moving the NAS");
    let until = chrono::DateTime::parse_from_rfc3339(ev[0]["until"].as_str().unwrap()).unwrap();
    let left = until.with_timezone(&chrono::Utc) - chrono::Utc::now();
    assert!(left > chrono::Duration::minutes(118) && left <= chrono::Duration::minutes(120));

    // Its runs go on and are recorded, and degrade it; its news is held. The other's is not.
    for name in ["job", "job", "job", "other", "other", "other"] {
        sb.run(["run", name]);
    }
    assert_eq!(sb.events("finished").len(), 6);
    assert!(documents(&hook).is_empty());
    assert_eq!(ntfy.seen().len(), 1);
    let o = sb.run(["notify", "look"]);
    assert!(
        stdout(&o).contains("1 snoozed automation(s) passed over"),
        "{}",
        stdout(&o)
    );
    assert!(documents(&hook).is_empty());

    // Said wherever it is looked at.
    assert!(stdout(&sb.run(["list"])).contains(", snoozed until "));
    let list: serde_json::Value =
        serde_json::from_str(&stdout(&sb.run(["list", "--json"]))).unwrap();
    let job = list["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "job")
        .unwrap();
    assert_eq!(job["snoozed"]["reason"], "moving the NAS");
    assert!(
        job["snoozed_words"]
            .as_str()
            .unwrap()
            .starts_with(", snoozed until ")
    );
    let health = stdout(&sb.run(["health"]));
    let row = health.lines().find(|l| l.starts_with("job ")).unwrap();
    assert!(
        row.contains("DEGRADED") && row.contains("snoozed until "),
        "{row}"
    );
    let hj: serde_json::Value =
        serde_json::from_str(&stdout(&sb.run(["health", "--json"]))).unwrap();
    let fig = &hj["automations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "job")
        .unwrap()["figures"];
    assert_eq!(fig["snoozed_until"], ev[0]["until"]);

    // The snooze's time passes (its file's clock set back): it is over by itself, and what is
    // news by then is told.
    let path = sb.data.join("state/snoozed/job.json");
    let mut z: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    z["until"] = serde_json::json!("2020-01-01T00:00:00.000Z");
    std::fs::write(&path, z.to_string()).unwrap();
    sb.run(["notify", "look"]);
    let docs = documents(&hook);
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(docs[0].0["kind"], "degraded");
    assert!(!stdout(&sb.run(["list"])).contains("snoozed"));

    // A reminder falls due during a second snooze: none until `unsnooze`.
    sb.run(["snooze", "job", "1h"]);
    age_told(&sb, "job", 7);
    sb.run(["notify", "look"]);
    assert_eq!(documents(&hook).len(), 1);
    let o = sb.run(["unsnooze", "job"]);
    assert!(
        stdout(&o).contains("job: no longer snoozed"),
        "{}",
        stdout(&o)
    );
    assert_eq!(sb.events("unsnoozed").len(), 1);
    assert!(stdout(&sb.run(["unsnooze", "job"])).contains("job: was not snoozed"));
    sb.run(["notify", "look"]);
    let docs = documents(&hook);
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert_eq!(docs[1].0["kind"], "reminder");
    sb.assert_log_verifies();
}
