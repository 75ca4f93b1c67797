//! The CronJob mapping, one property per test, and the rules that guard it.

use super::*;
use crate::units::tests::{def, ns};
use serde_json::{Value, json};

fn cluster(extra: &str) -> Cluster {
    Cluster::parse(format!("time_zone = \"Europe/Berlin\"\n{extra}").as_bytes()).unwrap()
}

/// The rendered CronJob as JSON, read back from the YAML file.
fn rendered(d: &Definition, c: &Cluster) -> Value {
    let f = render(d, &ns(), c).unwrap();
    serde_yaml_ng::from_slice(&f.bytes).unwrap()
}

const EVERY_5: &str = "[schedule]\nevery_minutes = 5\n";

#[test]
fn a_cronjob_snapshot_with_env_and_anytype() {
    let d = def(
        "notes",
        "env = [\"GITHUB_TOKEN\"]\n[anytype]\npermission = \"read\"\nspaces = [\"agent\"]\n[schedule]\ndaily_at = [\"08:15\", \"17:15\"]\nweekdays = [\"mon\", \"fri\"]\n",
    );
    let f = render(
        &d,
        &ns(),
        &cluster(
            "digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"",
        ),
    )
    .unwrap();
    assert_eq!(f.name, "notes.yaml");
    insta::assert_snapshot!("cronjob_notes", String::from_utf8(f.bytes).unwrap());
}

#[test]
fn a_kustomization_snapshot() {
    let c = cluster(
        "namespace = \"jobs\"\nimage = \"ghcr.io/example/automations\"\ndigest = \"sha256:1111111111111111111111111111111111111111111111111111111111111111\"\n",
    );
    let k = kustomization(&["b.yaml".into(), "a.yaml".into()], &c);
    insta::assert_snapshot!("kustomization", String::from_utf8(k.bytes).unwrap());
    let without = kustomization(&["a.yaml".into()], &cluster(""));
    let v: Value = serde_yaml_ng::from_slice(&without.bytes).unwrap();
    assert_eq!(
        v["images"],
        json!([{"name": "automations", "newName": "automations", "newTag": "latest"}])
    );
    assert_eq!(v["namespace"], "automations");
}

#[test]
fn name_labels_and_the_definition_hash() {
    let d = def("heartbeat", EVERY_5);
    let v = rendered(&d, &cluster(""));
    assert_eq!(v["apiVersion"], "batch/v1");
    assert_eq!(v["kind"], "CronJob");
    assert_eq!(v["metadata"]["name"], "heartbeat");
    assert!(
        v["metadata"].get("namespace").is_none(),
        "left to kustomize"
    );
    assert_eq!(
        v["metadata"]["annotations"][HASH_ANNOTATION],
        d.sha256.as_str()
    );
    let want = json!({
        "app.kubernetes.io/component": "automation",
        "app.kubernetes.io/instance": "heartbeat",
        "app.kubernetes.io/managed-by": "automations",
        "app.kubernetes.io/name": "heartbeat",
        "app.kubernetes.io/part-of": "automations",
    });
    assert_eq!(v["metadata"]["labels"], want);
    assert_eq!(v["spec"]["jobTemplate"]["metadata"]["labels"], want);
    assert_eq!(
        v["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"],
        want
    );
    // The longest automation name still leaves the controller room for its Job suffix.
    let long = "a".repeat(48);
    let v = rendered(&def(&long, EVERY_5), &cluster(""));
    assert_eq!(v["metadata"]["name"], long.as_str());
}

#[test]
fn schedule_and_zone() {
    let v = rendered(&def("x", EVERY_5), &cluster(""));
    assert_eq!(v["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(v["spec"]["timeZone"], "Europe/Berlin");
    let v = rendered(
        &def(
            "x",
            "[schedule]\ndaily_at = \"06:45\"\ndays_of_month = [1]\n",
        ),
        &cluster(""),
    );
    assert_eq!(v["spec"]["schedule"], "45 6 1 * *");
    // A cron expression goes as itself, in the numbers the controller's parser takes.
    let v = rendered(
        &def("x", "[schedule]\ncron = \"30 2 * jan-mar mon-fri\"\n"),
        &cluster(""),
    );
    assert_eq!(v["spec"]["schedule"], "30 2 * 1-3 1-5");
    let v = rendered(&def("x", "[schedule]\ncron = \"@weekly\"\n"), &cluster(""));
    assert_eq!(v["spec"]["schedule"], "0 0 * * 0");
    for (toml, why) in [
        ("[schedule]\nevery_minutes = 7\n", "counts awake time"),
        ("[schedule]\nat_login = true\n", "at login"),
        (
            "[schedule]\nevery_minutes = 10\nat_login = true\n",
            "at login",
        ),
        (
            "[schedule]\nevery_minutes = 10\n[trigger]\nafter_success = [\"y\"]\n",
            "neither watches nor chains",
        ),
        (
            "[schedule]\nevery_minutes = 10\n[trigger]\npaths = [\"{root}/inbox\"]\n",
            "[trigger]",
        ),
        (
            "[schedule]\ndaily_at = \"09:00\"\ncatch_up = \"all\"\n",
            "a CronJob catches up by its own rules",
        ),
    ] {
        let e = render(&def("x", toml), &ns(), &cluster("")).unwrap_err();
        assert!(e.contains(why), "{toml}: {e}");
    }
}

#[test]
fn one_run_at_a_time_and_its_deadlines() {
    let d = def(
        "x",
        "[schedule]\nevery_minutes = 5\njitter_seconds = 20\nretries = 2\nretry_delay_seconds = 10\n",
    );
    let v = rendered(&d, &cluster(""));
    let spec = &v["spec"];
    let job = &spec["jobTemplate"]["spec"];
    let pod = &job["template"]["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Forbid");
    assert_eq!(job["backoffLimit"], 0);
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(job["podReplacementPolicy"], "Failed");
    assert_eq!(spec["startingDeadlineSeconds"], 300);
    // jitter 20 + 3 attempts × 60 + waits 10 + 20 + backstop 30, and the start-up slack.
    assert_eq!(super::super::stop_timeout(&d), 20 + 180 + 30 + 30);
    assert_eq!(job["activeDeadlineSeconds"], 260 + 120);
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 3);
    assert_eq!(job["ttlSecondsAfterFinished"], 86_400);
    assert!(spec.get("suspend").is_none() && job.get("suspend").is_none());
    let deadline = |toml: &str| {
        rendered(&def("x", toml), &cluster(""))["spec"]["startingDeadlineSeconds"].clone()
    };
    assert_eq!(deadline("[schedule]\nevery_minutes = 1\n"), 60);
    assert_eq!(deadline("[schedule]\nevery_minutes = 360\n"), 3600);
    assert_eq!(deadline("[schedule]\ndaily_at = \"09:00\"\n"), 3600);
}

/// A day-long timeout (backups, syncs) reaches every deadline derived from it alike.
#[test]
fn a_day_long_timeout_reaches_every_deadline() {
    let mut d = def(
        "x",
        "[schedule]\ncron = \"30 2 * * *\"\nretries = 1\nretry_delay_seconds = 600\n",
    );
    d.timeout_seconds = crate::definition::MAX_TIMEOUT_SECONDS;
    let stop = super::super::stop_timeout(&d);
    assert_eq!(stop, 2 * 86_400 + 600 + 30);
    let v = rendered(&d, &cluster(""));
    assert_eq!(
        v["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"],
        stop + 120
    );
    let units = crate::units::render(
        &d,
        &ns(),
        &crate::units::tests::awkward_paths(),
        crate::units::Target::Systemd,
    )
    .unwrap();
    let service = String::from_utf8(units[0].bytes.clone()).unwrap();
    assert!(
        service.contains(&format!("TimeoutStartSec={stop}\n")),
        "{service}"
    );
    let units = crate::units::render(
        &d,
        &ns(),
        &crate::units::tests::awkward_paths(),
        crate::units::Target::Launchd,
    )
    .unwrap();
    let plist: plist::Dictionary = plist::from_bytes(&units[0].bytes).unwrap();
    assert_eq!(
        plist
            .get("ExitTimeOut")
            .and_then(plist::Value::as_unsigned_integer),
        Some(u64::from(stop))
    );
}

#[test]
fn variables_come_from_a_secret_by_name_never_by_value() {
    let d = def("x", &format!("env = [\"API_TOKEN\", \"OTHER\"]\n{EVERY_5}"));
    let v = rendered(&d, &cluster("env_secret = \"team-env\""));
    let c = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let env = c["env"].as_array().unwrap();
    let by_name = |n: &str| env.iter().find(|e| e["name"] == n).cloned();
    assert_eq!(
        by_name("API_TOKEN").unwrap(),
        json!({"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "team-env", "key": "API_TOKEN", "optional": false}}})
    );
    assert!(by_name("OTHER").unwrap().get("value").is_none());
    assert_eq!(by_name("AUTOMATIONS_EVENTS").unwrap()["value"], "stdout");
    assert_eq!(
        by_name("AUTOMATIONS_PINNED_SHA256").unwrap()["value"],
        d.sha256.as_str()
    );
    assert_eq!(by_name("TZ").unwrap()["value"], "Europe/Berlin");
    assert_eq!(by_name("HOME").unwrap()["value"], DATA_MOUNT);
    assert!(
        by_name("AUTOMATIONS_KEY_DIR").is_none(),
        "no AnyType, no keys"
    );
    assert_eq!(c["command"], json!([BIN_IN_IMAGE]));
    assert_eq!(
        c["args"],
        json!([
            "run",
            "x",
            "--trigger",
            "schedule",
            "--root",
            ROOT_IN_IMAGE,
            "--data-root",
            DATA_ROOT_IN_POD,
            "--namespace",
            "automations"
        ])
    );
    assert_eq!(c["image"], IMAGE_NAME);
}

#[test]
fn the_anytype_key_is_a_file_of_its_own_secret_item() {
    let d = def(
        "notes",
        &format!("[anytype]\npermission = \"read\"\nspaces = [\"agent\"]\n{EVERY_5}"),
    );
    let v = rendered(&d, &cluster("key_secret = \"ak\""));
    let pod = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let keys = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "keys")
        .unwrap();
    assert_eq!(
        keys["secret"],
        json!({"secretName": "ak", "defaultMode": 0o440, "items": [
            {"key": "local.automations.notes", "path": "local.automations.notes"},
            {"key": "spaces.json", "path": "spaces.json"},
        ]})
    );
    let c = &pod["containers"][0];
    assert!(
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "keys", "mountPath": KEY_DIR_IN_POD, "readOnly": true}))
    );
    let env = c["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "AUTOMATIONS_KEY_DIR", "value": KEY_DIR_IN_POD})));
}

#[test]
fn the_restricted_profile_and_resources() {
    let v = rendered(
        &def("x", EVERY_5),
        &cluster("run_as_user = 1000\nmemory_limit = \"1Gi\""),
    );
    let pod = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
               "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}})
    );
    let c = &pod["containers"][0];
    assert_eq!(
        c["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true,
               "runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}})
    );
    assert_eq!(
        pod["volumes"],
        json!([{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}])
    );
    assert_eq!(
        c["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}])
    );
    let v = rendered(
        &def("x", EVERY_5),
        &cluster("data_claim = \"automations-data\""),
    );
    assert_eq!(
        v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"][0],
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "automations-data"}})
    );
}

#[test]
fn the_bytes_are_deterministic_with_sorted_keys_and_one_header() {
    let d = def("x", &format!("env = [\"B\", \"A\"]\n{EVERY_5}"));
    let c = cluster("");
    let a = render(&d, &ns(), &c).unwrap().bytes;
    assert_eq!(a, render(&d, &ns(), &c).unwrap().bytes);
    let text = String::from_utf8(a).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("# Generated from automations/x.toml (sha256 "),
        "{header}"
    );
    assert!(header.contains(&format!("kubernetes.toml (sha256 {})", c.pod_sha256())));
    assert!(
        !lines.clone().any(|l| l.trim_start().starts_with('#')),
        "one comment only"
    );
    // Every mapping's keys in order, at every depth.
    let mut last: Vec<Option<String>> = Vec::new();
    for l in lines {
        let indent = l.len() - l.trim_start_matches([' ', '-']).len();
        let key = l
            .trim_start_matches([' ', '-'])
            .split(':')
            .next()
            .unwrap()
            .to_owned();
        if l.trim_start().starts_with("- ") || !l.contains(':') {
            last.truncate(indent);
            continue;
        }
        last.resize(indent + 1, None);
        if let Some(prev) = &last[indent] {
            assert!(prev < &key, "{prev} before {key} in\n{text}");
        }
        last[indent] = Some(key);
    }
}

fn job(cj: &mut CronJob) -> &mut JobSpec {
    cj.spec
        .as_mut()
        .unwrap()
        .job_template
        .spec
        .as_mut()
        .unwrap()
}

fn pod(cj: &mut CronJob) -> &mut PodSpec {
    job(cj).template.spec.as_mut().unwrap()
}

#[test]
fn each_api_rule_catches_what_it_guards() {
    let good = cronjob(&def("x", EVERY_5), &ns(), &cluster("")).unwrap();
    assert_eq!(rules::problems(&good, 300), Vec::<String>::new());
    type Edit = fn(&mut CronJob);
    let cases: Vec<(&str, Edit)> = vec![
        ("name:", |cj| cj.metadata.name = Some("a".repeat(53))),
        ("name:", |cj| cj.metadata.name = Some("Upper".into())),
        ("labels:", |cj| {
            cj.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert("app.kubernetes.io/name".into(), "-bad".into());
        }),
        ("schedule:", |cj| {
            cj.spec.as_mut().unwrap().schedule = "*/5 * * *".into()
        }),
        ("schedule:", |cj| {
            cj.spec.as_mut().unwrap().schedule = "TZ=UTC */5 * * * *".into()
        }),
        ("time zone:", |cj| {
            cj.spec.as_mut().unwrap().time_zone = Some("Local".into())
        }),
        ("time zone:", |cj| {
            cj.spec.as_mut().unwrap().time_zone = Some("Mars/Olympus".into())
        }),
        ("time zone:", |cj| {
            cj.spec.as_mut().unwrap().time_zone = None
        }),
        ("enums:", |cj| {
            cj.spec.as_mut().unwrap().concurrency_policy = Some("forbid".into())
        }),
        ("enums:", |cj| {
            pod(cj).restart_policy = Some("Always".into())
        }),
        ("enums:", |cj| {
            job(cj).pod_replacement_policy = Some("Never".into());
        }),
        ("deadlines:", |cj| {
            cj.spec.as_mut().unwrap().starting_deadline_seconds = Some(30)
        }),
        ("deadlines:", |cj| {
            cj.spec.as_mut().unwrap().starting_deadline_seconds = Some(301)
        }),
        ("deadlines:", |cj| {
            job(cj).active_deadline_seconds = None;
        }),
        ("deadlines:", |cj| {
            job(cj).active_deadline_seconds = Some(20);
        }),
        ("deadlines:", |cj| {
            cj.spec.as_mut().unwrap().failed_jobs_history_limit = Some(-1)
        }),
        ("restricted pod security:", |cj| {
            pod(cj).automount_service_account_token = None
        }),
        ("restricted pod security:", |cj| {
            let p = pod(cj);
            p.security_context = None;
            p.containers[0]
                .security_context
                .as_mut()
                .unwrap()
                .run_as_user = Some(0);
        }),
        ("restricted pod security:", |cj| {
            pod(cj).containers[0]
                .security_context
                .as_mut()
                .unwrap()
                .allow_privilege_escalation = None;
        }),
        ("restricted pod security:", |cj| {
            pod(cj).containers[0]
                .security_context
                .as_mut()
                .unwrap()
                .capabilities = None;
        }),
        ("restricted pod security:", |cj| {
            pod(cj).containers[0]
                .security_context
                .as_mut()
                .unwrap()
                .read_only_root_filesystem = Some(false);
        }),
        ("restricted pod security:", |cj| {
            pod(cj).containers[0].resources = None
        }),
        ("volumes:", |cj| {
            pod(cj).volumes.as_mut().unwrap().remove(1);
        }),
    ];
    for (i, (rule, edit)) in cases.iter().enumerate() {
        let mut cj = good.clone();
        edit(&mut cj);
        let p = rules::problems(&cj, 300);
        assert!(
            p.len() == 1 && p[0].starts_with(rule),
            "case {i} ({rule}) found {p:?}"
        );
    }
}

#[test]
fn the_settings_file_says_what_is_wrong_and_where() {
    let c = cluster("");
    assert_eq!(
        (
            c.namespace.as_str(),
            c.image.as_str(),
            c.run_as_user,
            c.digest.as_deref()
        ),
        ("automations", "automations", 65532, None)
    );
    // A new image or namespace is the kustomization's alone; the pod's settings are the CronJobs'.
    let d = def("x", EVERY_5);
    let pinned = cluster(
        "image = \"r.example/a\"\ndigest = \"sha256:3333333333333333333333333333333333333333333333333333333333333333\"\nnamespace = \"other\"",
    );
    assert_eq!(
        render(&d, &ns(), &pinned).unwrap().bytes,
        render(&d, &ns(), &c).unwrap().bytes
    );
    assert_ne!(pinned.kustomize_sha256(&[]), c.kustomize_sha256(&[]));
    let bigger = cluster("memory_limit = \"1Gi\"");
    assert_eq!(bigger.kustomize_sha256(&[]), c.kustomize_sha256(&[]));
    assert_ne!(bigger.pod_sha256(), c.pod_sha256());
    for (text, want) in [
        ("namespace = \"x\"\n", "missing field `time_zone`"),
        ("time_zone = \"Local\"\n", "no one's local time"),
        ("time_zone = \"Europe/Atlantis\"\n", "no IANA time zone"),
        (
            "time_zone = \"UTC\"\nimage_name = \"x\"\n",
            "line 2: unknown field `image_name`",
        ),
        (
            "time_zone = \"UTC\"\ndigest = \"sha256:abc\"\n",
            "64 lowercase hex",
        ),
        (
            "time_zone = \"UTC\"\nimage = \"r/a@sha256:00\"\n",
            "goes in `digest`",
        ),
        ("time_zone = \"UTC\"\nrun_as_user = 0\n", "refuses root"),
        (
            "time_zone = \"UTC\"\nnamespace = \"Team_A\"\n",
            "no Kubernetes namespace",
        ),
        ("time_zone = \"UTC\"\nenv_secret = \"a b\"\n", "env_secret"),
        (
            "time_zone = \"UTC\"\nmemory_limit = \"lots\"\n",
            "memory_limit \"lots\"",
        ),
        (
            "time_zone = \"UTC\"\nexclude = [\"Bad Name\"]\n",
            "not a valid name",
        ),
    ] {
        let e = Cluster::parse(text.as_bytes()).unwrap_err().join("; ");
        assert!(e.contains(want), "{text}: {e}");
    }
    for q in ["50m", "1", "0.5", "64Mi", "1Gi", "2k"] {
        assert!(rules::is_quantity(q), "{q}");
    }
    for q in ["", "m", "1.", ".5", "1.2.3", "5 Mi", "5mi", "-1"] {
        assert!(!rules::is_quantity(q), "{q}");
    }
}

#[test]
fn suspend_is_runtime_state_and_never_compared() {
    let f = render(&def("x", EVERY_5), &ns(), &cluster("")).unwrap();
    let text = String::from_utf8(f.bytes.clone()).unwrap();
    let paused = text.replace("  schedule: ", "  suspend: true\n  schedule: ");
    assert_ne!(paused, text);
    assert_eq!(without_suspend(paused.as_bytes()), f.bytes);
    // Only a pause: `suspend: false` would undo one when applied, and is a difference.
    let resumed = text.replace("  schedule: ", "  suspend: false\n  schedule: ");
    assert_ne!(without_suspend(resumed.as_bytes()), f.bytes);
    // Only the CronJob's own: a Job template's suspend is a real difference.
    let job_suspended = text.replace(
        "      backoffLimit: 0\n",
        "      backoffLimit: 0\n      suspend: true\n",
    );
    assert_ne!(without_suspend(job_suspended.as_bytes()), f.bytes);
}

/// Regression: adding a definition changed the kustomization's `resources` but not the hash in its
/// header, so `check` called the file "edited by hand" when it was only out of date.
#[test]
fn a_kustomization_out_of_date_is_stale_not_edited_by_hand() {
    use crate::units::portable::{Difference, compare};
    let c = cluster("");
    let one = kustomization(&["a.yaml".into()], &c);
    let two = kustomization(&["a.yaml".into(), "b.yaml".into()], &c);
    let path = std::path::PathBuf::from(DIR).join(KUSTOMIZATION);
    let present = std::collections::BTreeMap::from([(path.clone(), one.bytes)]);
    let desired = std::collections::BTreeMap::from([(path, two.bytes)]);
    let found = compare(&present, &desired);
    assert!(
        matches!(found.as_slice(), [Difference::Stale { .. }]),
        "{found:?}"
    );
    assert_eq!(
        found[0].line(),
        "kubernetes/kustomization.yaml: stale (the definitions or kubernetes.toml changed since it was rendered)"
    );
}

#[test]
fn render_all_lists_every_refusal_and_honours_exclusions() {
    let defs = vec![
        def("every", EVERY_5),
        def("awake", "[schedule]\nevery_minutes = 7\n"),
        def("login", "[schedule]\nat_login = true\n"),
        def("manual", ""),
    ];
    let e = render_all(&defs, &ns(), &cluster("")).unwrap_err();
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with("awake: not rendered for Kubernetes: every 7 minutes"),
        "{e:?}"
    );
    assert!(
        e[1].starts_with("login: not rendered for Kubernetes"),
        "{e:?}"
    );
    let files = render_all(&defs, &ns(), &cluster("exclude = [\"awake\", \"login\"]")).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["every.yaml", "kustomization.yaml"]);
    let k: Value = serde_yaml_ng::from_slice(&files[1].bytes).unwrap();
    assert_eq!(k["resources"], json!(["every.yaml"]));
    let e = render_all(
        &defs,
        &ns(),
        &cluster("exclude = [\"awake\", \"login\", \"manual\", \"gone\"]"),
    )
    .unwrap_err();
    assert_eq!(
        e,
        [
            "kubernetes.toml: exclude names manual, which is no scheduled definition",
            "kubernetes.toml: exclude names gone, which is no scheduled definition",
        ]
    );
}

#[test]
fn overlap_and_limits_become_the_cronjob_s_policy_and_resources() {
    let c = cluster("memory_request = \"256Mi\"\nmemory_limit = \"1Gi\"");
    let v = rendered(
        &def(
            "x",
            "overlap = \"replace\"\n[schedule]\nevery_minutes = 5\n[limits]\nmemory_max = \"128M\"\ncpu_quota = \"150%\"\nnice = 5\n",
        ),
        &c,
    );
    assert_eq!(v["spec"]["concurrencyPolicy"], "Replace");
    let res = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"];
    // The limit is the definition's; the request no higher than it.
    assert_eq!(
        *res,
        json!({"requests": {"cpu": "50m", "memory": "134217728"}, "limits": {"cpu": "1500m", "memory": "134217728"}})
    );
    // A limit above the cluster's request keeps that request.
    let v = rendered(
        &def(
            "x",
            "[schedule]\nevery_minutes = 5\n[limits]\nmemory_max = \"2G\"\n",
        ),
        &c,
    );
    let res = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(res["requests"]["memory"], "256Mi");
    assert_eq!(res["limits"]["memory"], "2147483648");
    assert_eq!(v["spec"]["concurrencyPolicy"], "Forbid");
    let queued = render(
        &def("x", "overlap = \"queue\"\n[schedule]\nevery_minutes = 5\n"),
        &ns(),
        &c,
    );
    assert!(
        queued
            .unwrap_err()
            .contains("\"queue\" has no CronJob equivalent")
    );
    let writes = render(
        &def(
            "x",
            "writes = [\"~/b\"]\n[schedule]\nevery_minutes = 5\n[sandbox]\nlevel = \"strict\"\n",
        ),
        &ns(),
        &c,
    );
    assert!(writes.unwrap_err().contains("a pod does not have"));
    let grouped = def("x", "lock = \"disk\"\n[schedule]\nevery_minutes = 5\n");
    assert!(
        render(&grouped, &ns(), &c)
            .unwrap_err()
            .contains("set data_claim")
    );
    assert!(render(&grouped, &ns(), &cluster("data_claim = \"d\"")).is_ok());
}

#[test]
fn a_zoned_schedule_names_its_zone_in_the_cronjob() {
    let d = def(
        "x",
        "[schedule]\ndaily_at = \"09:00\"\ntime_zone = \"America/New_York\"\n",
    );
    let v = rendered(&d, &cluster(""));
    assert_eq!(v["spec"]["timeZone"], "America/New_York");
    let plain = rendered(
        &def("x", "[schedule]\ndaily_at = \"09:00\"\n"),
        &cluster(""),
    );
    assert_ne!(plain["spec"]["timeZone"], "America/New_York");
}
