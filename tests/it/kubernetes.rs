//! The Kubernetes target end to end: `render --target kubernetes`, `units` writing and checking
//! kubernetes/, the folder validated by kubernetes-validate (PyPI, strict) and built by
//! `kubectl kustomize`, and the runner started the way the manifest starts it in a pod.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::fixtures::*;
use crate::harness::*;

const CLUSTER: &str = "time_zone = \"Europe/Berlin\"\nimage = \"registry.example/automations\"\n";

/// A repository with the shapes a cluster can run, and its cluster settings.
fn repository(sb: &Sandbox, cluster_extra: &str) {
    sb.shell_definition("every", "echo every", "[schedule]\nevery_minutes = 5\n");
    sb.shell_definition(
        "offset",
        "echo offset",
        "env = [\"API_TOKEN\"]\n[schedule]\nevery_minutes = 20\noffset_minutes = 7\n",
    );
    // Its policy and limits: concurrencyPolicy Replace, a CPU limit and a memory request and
    // limit of its own, for the validator to see.
    sb.shell_definition(
        "hours",
        "echo hours",
        "overlap = \"replace\"\n[schedule]\nevery_minutes = 360\nretries = 2\n[limits]\nmemory_max = \"96M\"\ncpu_quota = \"50%\"\n",
    );
    sb.shell_definition(
        "weekdays",
        "echo weekdays",
        "[schedule]\ndaily_at = [\"08:15\", \"17:15\"]\nweekdays = [\"mon\", \"fri\"]\n",
    );
    sb.shell_definition(
        "monthly",
        "echo monthly",
        "[schedule]\ndaily_at = \"06:00\"\ndays_of_month = [1, 15]\n",
    );
    sb.shell_definition(
        "reader",
        "echo reader",
        "[anytype]\npermission = \"read\"\nspaces = [\"agent\"]\n[schedule]\nevery_minutes = 60\n",
    );
    sb.shell_definition("manual", "echo manual", "");
    std::fs::write(
        sb.root.join("kubernetes.toml"),
        format!("{CLUSTER}{cluster_extra}"),
    )
    .unwrap();
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn render_prints_the_cronjob_and_refuses_what_the_target_cannot_say() {
    let sb = Sandbox::new();
    sb.shell_definition("every", "true", "[schedule]\nevery_minutes = 5\n");
    let o = sb.run(["render", "every", "--target", "kubernetes"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("has no kubernetes.toml") && stderr(&o).contains("time zone"),
        "{}",
        stderr(&o)
    );
    repository(&sb, "");
    sb.shell_definition("awake", "true", "[schedule]\nevery_minutes = 7\n");
    sb.shell_definition("login", "true", "[schedule]\nat_login = true\n");

    let o = sb.run(["render", "every", "--target", "kubernetes"]);
    assert_code(&o, 0);
    let yaml = stdout(&o);
    assert!(yaml.starts_with("# Generated from automations/every.toml (sha256 "));
    let v: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(v["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(v["spec"]["timeZone"], "Europe/Berlin");

    let o = sb.run(["render", "every", "--target", "kubernetes", "--json"]);
    assert_code(&o, 0);
    let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j["version"], 1);
    assert_eq!(
        j["files"][0]["path"],
        sb.root.join("kubernetes/every.yaml").display().to_string()
    );
    assert_eq!(j["files"][0]["content"], yaml.as_str());

    for (name, why) in [
        ("awake", "every 7 minutes counts awake time"),
        ("login", "a cluster has no login"),
        ("manual", "has no [schedule]"),
    ] {
        let o = sb.run(["render", name, "--target", "kubernetes"]);
        assert_code(&o, 2);
        assert!(stderr(&o).contains(why), "{name}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
    // The OS targets are unchanged by the cluster.
    let o = sb.run(["render", "awake", "--target", "systemd"]);
    assert_code(&o, 0);
}

/// Regression: the repository shipped a `kubernetes.toml`, so every user's definitions rendered
/// CronJobs, and one the cluster cannot say (`at_login`) made `units` and `check` exit 2 and
/// `doctor` say `fail drift` with no drift at all. The cluster target is opt-in now, and its
/// problems never block `units/`, the machine part of `check`, or `doctor`'s other lines.
#[test]
fn the_cluster_target_is_opt_in_and_never_blocks_the_rest() {
    assert!(
        !repo_root().join("kubernetes.toml").exists() && !repo_root().join("kubernetes").exists(),
        "the repository ships no cluster settings and no kubernetes/"
    );
    let sb = Sandbox::new();
    sb.shell_definition("every", "echo every", "[schedule]\nevery_minutes = 5\n");
    sb.shell_definition("login", "true", "[schedule]\nat_login = true\n");
    // Not opted in: nothing of the cluster anywhere.
    let o = sb.run(["units"]);
    assert_code(&o, 0);
    assert!(!sb.root.join("kubernetes").exists());
    let o = sb.run(["check"]);
    assert_code(&o, 0);
    assert!(!stdout(&o).contains("kubernetes"), "{}", stdout(&o));
    // Opted in, with a definition the cluster cannot say: units/ is still written, the problem
    // is said once, on its own.
    std::fs::write(sb.root.join("kubernetes.toml"), CLUSTER).unwrap();
    sb.shell_definition("later", "true", "[schedule]\nevery_minutes = 10\n");
    let o = sb.run(["units"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("kubernetes/ not rendered")
            && stderr(&o).contains("login: not rendered for Kubernetes"),
        "{}",
        stderr(&o)
    );
    assert!(
        sb.root
            .join("units/systemd/local.automations.later.timer")
            .exists(),
        "units/ is written whatever the cluster target says"
    );
    assert!(!sb.root.join("kubernetes").exists());
    let o = sb.run(["check"]);
    assert_code(&o, 1);
    let out = stdout(&o);
    assert!(
        !out.contains("units/systemd") && out.contains("kubernetes/ not rendered"),
        "{out}"
    );
    let o = sb.run(["doctor"]);
    let out = stdout(&o);
    assert!(
        out.lines()
            .any(|l| l.starts_with("ok") && l.contains("drift")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("fail") && l.contains("kubernetes") && l.contains("login")),
        "{out}"
    );
}

#[test]
fn units_writes_kubernetes_and_check_sees_every_drift_but_a_pause() {
    let sb = Sandbox::new();
    repository(&sb, "");
    sb.shell_definition("awake", "true", "[schedule]\nevery_minutes = 7\n");
    // A definition the cluster cannot say stops the folder, naming it and the way out.
    let o = sb.run(["units"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("awake: not rendered for Kubernetes: every 7 minutes")
            && stderr(&o).contains("exclude"),
        "{}",
        stderr(&o)
    );
    std::fs::write(
        sb.root.join("kubernetes.toml"),
        format!("{CLUSTER}exclude = [\"awake\"]\n"),
    )
    .unwrap();
    let o = sb.run(["units"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("units/ and kubernetes/: "),
        "{}",
        stdout(&o)
    );
    let dir = sb.root.join("kubernetes");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "every.yaml",
            "hours.yaml",
            "kustomization.yaml",
            "monthly.yaml",
            "offset.yaml",
            "reader.yaml",
            "weekdays.yaml"
        ]
    );
    let k: Value = serde_yaml_ng::from_str(&read(&dir.join("kustomization.yaml"))).unwrap();
    assert_eq!(k["resources"].as_array().unwrap().len(), 6);
    assert_eq!(k["images"][0]["newName"], "registry.example/automations");
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 0);

    // A pause (kubectl patch … suspend) written back into the file is not drift.
    let every = dir.join("every.yaml");
    let rendered = read(&every);
    std::fs::write(
        &every,
        rendered.replace("  schedule: ", "  suspend: true\n  schedule: "),
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 0);
    let o = sb.run(["check"]);
    assert!(
        stdout(&o).contains("units/ and kubernetes/ match the definitions"),
        "{}",
        stdout(&o)
    );

    // `suspend: false` is: applied, it would undo a pause.
    std::fs::write(
        &every,
        rendered.replace("  schedule: ", "  suspend: false\n  schedule: "),
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("kubernetes/every.yaml: edited by hand"),
        "{}",
        stdout(&o)
    );
    // A manifest of the team's own (no generated header) is theirs: never compared or removed.
    std::fs::write(
        dir.join("namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\n",
    )
    .unwrap();

    // Anything else is: an edit, a definition changed, settings changed, an extra file.
    std::fs::write(
        &every,
        rendered.replace("backoffLimit: 0", "backoffLimit: 6"),
    )
    .unwrap();
    sb.shell_definition("hours", "echo changed", "[schedule]\nevery_minutes = 360\n");
    std::fs::write(
        dir.join("old.yaml"),
        "# Generated from automations/old.toml (sha256 0)\nkind: CronJob\n",
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    let out = stdout(&o);
    for line in [
        "kubernetes/every.yaml: edited by hand",
        "kubernetes/hours.yaml: stale (its definition or kubernetes.toml changed since it was rendered)",
        "kubernetes/old.yaml: extra (no scheduled definition renders it)",
        "units/systemd/local.automations.hours.service: stale",
        "-      backoffLimit: 6",
    ] {
        assert!(out.contains(line), "{line} not in\n{out}");
    }
    let o = sb.run(["check", "--json"]);
    assert_code(&o, 1);
    let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        j["fixes"]
            .as_array()
            .unwrap()
            .contains(&"make automations-units && git add kubernetes/ units/".into()),
        "{j}"
    );
    let o = sb.run(["units"]);
    assert_code(&o, 0);
    assert!(!dir.join("old.yaml").exists());
    assert_code(&sb.run(["units", "--check"]), 0);
    assert!(dir.join("namespace.yaml").exists());

    // The cluster settings are a source too: the pod's settings are every CronJob's, the image
    // and namespace the kustomization's alone.
    std::fs::write(
        sb.root.join("kubernetes.toml"),
        format!("{CLUSTER}exclude = [\"awake\"]\nmemory_limit = \"512Mi\"\n"),
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("kubernetes/every.yaml: stale")
            && !stdout(&o).contains("kustomization.yaml"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["units"]), 0);
    std::fs::write(
        sb.root.join("kubernetes.toml"),
        format!(
            "{CLUSTER}exclude = [\"awake\"]\nmemory_limit = \"512Mi\"\ndigest = \"sha256:4444444444444444444444444444444444444444444444444444444444444444\"\n"
        ),
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    let lines: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| {
            l.contains(".yaml: ")
                || l.contains(".service: ")
                || l.contains(".timer: ")
                || l.contains(".plist: ")
        })
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        [
            "kubernetes/kustomization.yaml: stale (the definitions or kubernetes.toml changed since it was rendered)"
        ],
        "a new image changes one file"
    );
    // Bad settings name the file; no settings, no cluster: the folder is extra.
    std::fs::write(sb.root.join("kubernetes.toml"), "time_zone = \"Local\"\n").unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("kubernetes.toml: time_zone: \"Local\""),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(sb.root.join("kubernetes.toml")).unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("kubernetes/every.yaml: extra"),
        "{}",
        stdout(&o)
    );
}

/// kubernetes-validate from the virtual environment `make test` installs it into.
fn kubernetes_validate() -> Option<PathBuf> {
    let p = repo_root().join("target/kubernetes-validate/bin/kubernetes-validate");
    p.exists().then_some(p)
}

/// Runs kubernetes-validate strictly against the oldest supported minor; (passed, output).
fn validate(tool: &Path, files: &[PathBuf]) -> (bool, String) {
    let o = Command::new(tool)
        .args(["--strict", "--kubernetes-version"])
        .arg(format!(
            "{}.0",
            automations::units::kubernetes::OLDEST_MINOR
        ))
        .args(files)
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    // A warning (a schema it could not find, say) is a failure too.
    let clean = o.status.success() && !text.contains("WARN") && !text.contains("ERROR");
    (clean, text)
}

#[test]
#[ignore = "a real component: kubernetes-validate (test venv) and kubectl"]
fn the_folder_passes_kubernetes_validate_strict_and_kubectl_kustomize() {
    let test = "the_folder_passes_kubernetes_validate_strict_and_kubectl_kustomize";
    let Some(tool) = kubernetes_validate() else {
        skip(
            test,
            "kubernetes-validate is not in target/kubernetes-validate (make test installs it)",
        );
        return;
    };
    let sb = Sandbox::new();
    repository(
        &sb,
        "data_claim = \"automations-data\"\ndigest = \"sha256:2222222222222222222222222222222222222222222222222222222222222222\"\n",
    );
    assert_code(&sb.run(["units"]), 0);
    let dir = sb.root.join("kubernetes");
    let cronjobs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    assert_eq!(cronjobs.len(), 6);
    let (ok, text) = validate(&tool, &cronjobs);
    assert!(ok, "kubernetes-validate refused:\n{text}");
    assert_eq!(
        text.matches("passed for resource cronjob/").count(),
        6,
        "{text}"
    );

    // The validator is real: a field the API does not have, and a number where a string goes,
    // are refused.
    let every = read(&dir.join("every.yaml"));
    for (what, bad) in [
        (
            "an unknown field",
            every.replace(
                "  concurrencyPolicy: Forbid\n",
                "  concurrencyPolicy: Forbid\n  concurrency: 1\n",
            ),
        ),
        (
            "a wrong type",
            every.replace("  timeZone: Europe/Berlin", "  timeZone: 5"),
        ),
    ] {
        let f = sb.path("bad.yaml");
        std::fs::write(&f, bad).unwrap();
        let (ok, text) = validate(&tool, &[f]);
        assert!(!ok, "{what} passed:\n{text}");
    }

    // The kustomize build: only where kubectl is.
    let Some(kubectl) = crate::units::which("kubectl") else {
        skip(
            test,
            "kubectl is not on PATH (make test installs Debian's kubernetes-client)",
        );
        return;
    };

    let built = Command::new(&kubectl)
        .args(["kustomize"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_code(&built, 0);
    let built_text = stdout(&built);
    let docs: Vec<Value> = built_text
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 6);
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], "automations", "{d}");
        assert_eq!(
            d["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.example/automations@sha256:2222222222222222222222222222222222222222222222222222222222222222"
        );
    }
    let built_file = sb.path("built.yaml");
    std::fs::write(&built_file, &built_text).unwrap();
    let (ok, text) = validate(&tool, &[built_file]);
    assert!(ok, "the kustomize build was refused:\n{text}");

    // The shipped definitions with the shipped example of kubernetes.toml, as a user who opts in
    // by copying it gets them.
    let shipped = crate::systemd::shipped();
    std::fs::copy(
        repo_root().join("docs/kubernetes.example.toml"),
        shipped.root.join("kubernetes.toml"),
    )
    .unwrap();
    assert_code(&shipped.run(["units"]), 0);
    let built = Command::new(&kubectl)
        .arg("kustomize")
        .arg(shipped.root.join("kubernetes"))
        .output()
        .unwrap();
    assert_code(&built, 0);
    let ours_built = sb.path("ours.yaml");
    std::fs::write(&ours_built, stdout(&built)).unwrap();
    let (ok, text) = validate(&tool, &[ours_built]);
    assert!(ok, "the example's kubernetes/ was refused:\n{text}");
    assert!(text.contains("cronjob/heartbeat"), "{text}");
}

/// The rendered container of `name`.
fn container(sb: &Sandbox, name: &str) -> Manifest {
    let o = sb.run(["render", name, "--target", "kubernetes"]);
    assert_code(&o, 0);
    let v: Value = serde_yaml_ng::from_str(&stdout(&o)).unwrap();
    let c = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let args = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let mut literal = Vec::new();
    let mut from_secret = Vec::new();
    for e in c["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap().to_owned();
        match e["value"].as_str() {
            Some(v) => literal.push((name, v.to_owned())),
            None => from_secret.push(name),
        }
    }
    (args, literal, from_secret)
}

/// The pod's uid and gid (kubernetes.toml's default `run_as_user`, also its fsGroup).
const POD_UID: u32 = 65532;

/// Whether this test can run the runner as the pod's user (it is root): then the repository and
/// everything else is read-only to it, as under `readOnlyRootFilesystem`, but the volumes.
fn as_pod_user() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A pod's file system: the volumes (emptyDir: 0777, the group fsGroup's), and the Secret volume
/// the kubelet writes (files root's, group fsGroup, 0440).
struct Pod {
    dir: PathBuf,
}

impl Pod {
    fn new(sb: &Sandbox) -> Self {
        use std::os::unix::fs::PermissionsExt;
        // The pod's user must reach the repository and the volumes, and may write only the volumes.
        std::fs::set_permissions(sb.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = sb.path("pod");
        for v in ["data", "tmp"] {
            std::fs::create_dir_all(dir.join(v)).unwrap();
            std::fs::set_permissions(dir.join(v), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        Pod { dir }
    }

    /// A path of the pod (`/data/automations`) in this sandbox.
    fn at(&self, pod_path: &str) -> PathBuf {
        self.dir.join(pod_path.trim_start_matches('/'))
    }

    /// The Secret volume at `/var/run/secrets/automations`, as the kubelet lays it out.
    fn secret(&self, items: &[(&str, &str)]) {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let d = self.at("/var/run/secrets/automations");
        let version = d.join("..2026_12_01_10_00_00.1");
        std::fs::create_dir_all(&version).unwrap();
        for (k, v) in items {
            let f = version.join(k);
            std::fs::write(&f, v).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o440)).unwrap();
            if as_pod_user() {
                std::os::unix::fs::chown(&f, Some(0), Some(POD_UID)).unwrap();
            }
            symlink(Path::new("..data").join(k), d.join(k)).unwrap();
        }
        symlink("..2026_12_01_10_00_00.1", d.join("..data")).unwrap();
    }

    /// The runner as `manifest` (a rendered container) starts it: its args and literal env (pod
    /// paths mapped into the sandbox), the `env` names from the Secret, and nothing else; as the
    /// pod's uid and gid when this test is root.
    fn fire(
        &self,
        sb: &Sandbox,
        manifest: &Manifest,
        secret_env: &[(&str, &str)],
    ) -> std::process::Output {
        let (args, literal, from_secret) = manifest;
        let map = |v: &str| {
            if v == "/app" {
                sb.root.display().to_string()
            } else if v.starts_with('/') && !v.starts_with("/usr") {
                self.at(v).display().to_string()
            } else {
                v.to_owned()
            }
        };
        let mut c = if as_pod_user() {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={POD_UID}"))
                .arg(format!("--regid={POD_UID}"))
                .arg("--clear-groups")
                .arg(&sb.bin);
            c
        } else {
            Command::new(&sb.bin)
        };
        c.env_clear().current_dir(&sb.root);
        c.args(args.iter().map(|a| map(a)));
        for (k, v) in literal {
            c.env(k, map(v));
        }
        for k in from_secret {
            let v = secret_env.iter().find(|(n, _)| n == k).unwrap().1;
            c.env(k, v);
        }
        for (k, v) in secret_env {
            if k.starts_with("ANYTYPE_") {
                c.env(k, v);
            }
        }
        c.output().unwrap()
    }
}

/// A rendered container: (args after the binary, literal env, env names from the Secret).
type Manifest = (Vec<String>, Vec<(String, String)>, Vec<String>);

/// The lines of the run log under the pod's data root.
fn log_lines(pod: &Pod) -> Vec<Value> {
    read(&pod.at("/data/automations/runs.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_runner_fires_in_a_pod_as_the_manifest_starts_it() {
    let sb = Sandbox::new();
    std::fs::write(sb.root.join("kubernetes.toml"), CLUSTER).unwrap();
    sb.shell_definition(
        "tick",
        "echo \"tick $API_TOKEN in $TZ\"",
        "env = [\"API_TOKEN\"]\n[schedule]\nevery_minutes = 5\n",
    );
    let pod = Pod::new(&sb);
    let manifest = container(&sb, "tick");
    let o = pod.fire(&sb, &manifest, &[("API_TOKEN", "s3cr3t-token-value")]);
    assert_code(&o, 0);
    // Every event is on stdout, one JSON line each, exactly as in the (ephemeral) log.
    let events: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    let log = log_lines(&pod);
    assert_eq!(events, log);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["started", "finished"], "{events:?}");
    assert_eq!(events[0]["trigger"], "schedule");
    assert_eq!(events[1]["outcome"], "ok", "{}", events[1]);
    let out = events[1]["stdout_tail"].as_str().unwrap();
    assert!(out.contains("tick [redacted] in Europe/Berlin"), "{out}");
    assert!(
        !stdout(&o).contains("s3cr3t"),
        "the Secret's value reached stdout"
    );
    if as_pod_user() {
        // It ran as the pod's user, which made the data root its own, private.
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(pod.at("/data/automations")).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (POD_UID, 0o700));
    }

    // The manifest pins the definition: an image holding another version skips, and says so.
    sb.shell_definition(
        "tick",
        "echo changed",
        "env = [\"API_TOKEN\"]\n[schedule]\nevery_minutes = 5\n",
    );
    let o = pod.fire(&sb, &manifest, &[("API_TOKEN", "s3cr3t-token-value")]);
    let last: Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "skipped", "{}", stdout(&o));
    assert_eq!(last["reason"], "definition_changed");
}

#[test]
fn an_anytype_key_comes_from_the_mounted_secret_never_a_keychain() {
    let sb = Sandbox::new();
    std::fs::write(sb.root.join("kubernetes.toml"), CLUSTER).unwrap();
    sb.shell_definition(
        "reader",
        "echo \"header: $ANYTYPE_OPENAPI_MCP_HEADERS\"",
        "[anytype]\npermission = \"read\"\nspaces = [\"agent\"]\n[schedule]\nevery_minutes = 60\n",
    );
    let key = "Pod9Kx2Wv7pLm_secret_volume_key";
    let api = FakeAnytype::start(Answer::Reply(200, whoami("read", &["id-agent"])));
    let pod = Pod::new(&sb);
    // No keychain at all: no D-Bus session, nothing to fall back to.
    let manifest = container(&sb, "reader");
    let missing = pod.fire(&sb, &manifest, &[("ANYTYPE_API_URL", &api.url)]);
    let f = log_lines(&pod).pop().unwrap();
    assert_eq!(f["outcome"], "failed", "{}", stdout(&missing));
    let detail = f["error"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("no key is stored for local.automations.reader"),
        "{detail}"
    );
    pod.secret(&[("local.automations.reader", key), ("spaces.json", SPACES)]);
    let o = pod.fire(&sb, &manifest, &[("ANYTYPE_API_URL", &api.url)]);
    assert_code(&o, 0);
    let f = log_lines(&pod).pop().unwrap();
    assert_eq!(f["outcome"], "ok", "{f}");
    assert!(
        f["stdout_tail"]
            .as_str()
            .unwrap()
            .contains("header: [redacted]"),
        "{f}"
    );
    assert_eq!(
        api.seen.lock().unwrap().last().unwrap().1,
        format!("Bearer {key}")
    );
    assert!(!stdout(&o).contains(&key[..8]) && !stderr(&o).contains(&key[..8]));
}
