//! The Kubernetes target: one `batch/v1` CronJob per scheduled definition, and one kustomization
//! (docs/kubernetes.md). Typed with the fields it sets ([`api`]), for the oldest minor the tests
//! validate against ([`OLDEST_MINOR`]), written as YAML with sorted keys after one header comment naming the sha256 of what it was
//! rendered from (the definition, and the settings of `kubernetes.toml` that shape it), so the same
//! inputs always give the same bytes.
//!
//! What a cluster is, is said once in the repository's `kubernetes.toml` ([`Cluster`]): the
//! schedules' IANA zone (required: the controller's own zone is no one's local time), the
//! namespace and image kustomize applies, the pod's uid, where the data root lives, the Secrets
//! the variables and keys come from, and the pod's resources. The manifests name the image by a
//! fixed name ([`IMAGE_NAME`]); the kustomization maps it to the registry and pins its digest, so a
//! new image changes one file (the kustomization) and no manifest.
//!
//! Pure like the other renderers: no files, no clock, no environment ([`Cluster::load`] is the one
//! reader, called by commands).

pub mod api;
pub mod cron;
pub mod rules;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use api::{
    Capabilities, Container, CronJob, CronJobSpec, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    JobSpec, JobTemplateSpec, KeyToPath, ObjectMeta, PersistentVolumeClaimVolumeSource,
    PodSecurityContext, PodSpec, PodTemplateSpec, Quantity, ResourceRequirements, SeccompProfile,
    SecretKeySelector, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};

use super::{MachinePaths, UnitFile, program_arguments, stop_timeout};
use crate::definition::Definition;
use crate::names::{Label, Name, Namespace};

/// The folder of manifests in the repository root.
pub const DIR: &str = "kubernetes";
/// How every file this target writes begins; other files in [`DIR`] are left alone.
pub const HEADER_START: &str = "# Generated from ";
/// The cluster's settings, in the repository root.
pub const SETTINGS_FILE: &str = "kubernetes.toml";
/// The kustomization in [`DIR`].
pub const KUSTOMIZATION: &str = "kustomization.yaml";
/// The image name every manifest carries; the kustomization's `images:` maps it.
pub const IMAGE_NAME: &str = "automations";
/// The oldest Kubernetes minor the manifests are written for: the tests validate them against its
/// schema.
pub const OLDEST_MINOR: &str = "1.33";
/// The annotation holding the definition's sha256.
pub const HASH_ANNOTATION: &str = "automations/definition-sha256";

/// Where the image (Containerfile) puts the binary.
pub const BIN_IN_IMAGE: &str = "/usr/local/bin/automations";
/// Where the image puts the repository (`automations/`, `scripts/`).
pub const ROOT_IN_IMAGE: &str = "/app";
/// The pod's writable volume for the data root, and its HOME.
pub const DATA_MOUNT: &str = "/data";
/// The data root inside [`DATA_MOUNT`] (the runner creates it, private).
pub const DATA_ROOT_IN_POD: &str = "/data/automations";
/// The pod's writable TMPDIR.
pub const TMP_MOUNT: &str = "/tmp";
/// Where the key Secret is mounted (read by the file key backend).
pub const KEY_DIR_IN_POD: &str = "/var/run/secrets/automations";

/// Seconds a Job may take beyond the firing's own budget (`stop_timeout`): scheduling the pod and
/// pulling the image count against `activeDeadlineSeconds`.
pub const START_SLACK_SECONDS: u32 = 120;
/// Seconds from SIGTERM to SIGKILL: the runner's tree kill (its own grace) and its `finished`.
pub const TERMINATION_GRACE_SECONDS: i64 = crate::control::STOP_GRACE.as_secs() as i64 + 25;
/// How long a finished Job (and its pod, and the pod's log) stays.
pub const TTL_SECONDS_AFTER_FINISHED: i32 = 86_400;
/// Finished Jobs kept, of each outcome.
pub const HISTORY_LIMIT: i32 = 3;
/// The longest a firing may start late (the controller was down, the cluster full) and still
/// run; later ones are counted as missed and the next slot runs.
pub const MAX_STARTING_DEADLINE: u32 = 3600;

/// `kubernetes.toml`: what the manifests need to know about the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// The IANA zone of every schedule (`spec.timeZone`). Required.
    pub time_zone: String,
    /// The namespace kustomize puts every CronJob in.
    #[serde(default = "defaults::namespace")]
    pub namespace: String,
    /// The registry path of the image (kustomize's `newName`).
    #[serde(default = "defaults::image")]
    pub image: String,
    /// The image's digest, `sha256:…` (kustomize pins it); without one the tag `latest` is used.
    #[serde(default)]
    pub digest: Option<String>,
    /// The pod's numeric uid and gid (the restricted profile refuses root).
    #[serde(default = "defaults::uid")]
    pub run_as_user: i64,
    /// A PersistentVolumeClaim for the data root; without one it is an emptyDir (the run log then
    /// lives only in the pod's stdout, which the cluster's log collection keeps).
    #[serde(default)]
    pub data_claim: Option<String>,
    /// The Secret whose keys are the `env` variable names.
    #[serde(default = "defaults::env_secret")]
    pub env_secret: String,
    /// The Secret holding AnyType keys (one item per label) and `spaces.json`.
    #[serde(default = "defaults::key_secret")]
    pub key_secret: String,
    /// The pod's CPU request.
    #[serde(default = "defaults::cpu_request")]
    pub cpu_request: String,
    /// The pod's memory request.
    #[serde(default = "defaults::memory_request")]
    pub memory_request: String,
    /// The pod's memory limit.
    #[serde(default = "defaults::memory_limit")]
    pub memory_limit: String,
    /// Scheduled definitions that do not go to the cluster.
    #[serde(default)]
    pub exclude: Vec<Name>,
}

mod defaults {
    pub fn namespace() -> String {
        "automations".into()
    }
    pub fn image() -> String {
        super::IMAGE_NAME.into()
    }
    pub fn uid() -> i64 {
        65532
    }
    pub fn env_secret() -> String {
        "automations-env".into()
    }
    pub fn key_secret() -> String {
        "automations-keys".into()
    }
    pub fn cpu_request() -> String {
        "50m".into()
    }
    pub fn memory_request() -> String {
        "64Mi".into()
    }
    pub fn memory_limit() -> String {
        "256Mi".into()
    }
}

impl Cluster {
    /// Reads `<root>/kubernetes.toml`: `None` when there is none (the repository renders no
    /// cluster), else the settings or every problem, each naming the file.
    pub fn load(root: &Path) -> Result<Option<Cluster>, String> {
        let path = root.join(SETTINGS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::parse(&bytes)
            .map(Some)
            .map_err(|p| format!("{}: {}", path.display(), p.join("; ")))
    }

    /// The settings in `bytes`, or every problem.
    pub fn parse(bytes: &[u8]) -> Result<Cluster, Vec<String>> {
        let text = std::str::from_utf8(bytes).map_err(|_| vec!["not UTF-8 text".to_owned()])?;
        let c: Cluster = toml::from_str(text).map_err(|e| vec![toml_error(&e, text)])?;
        let problems = c.problems();
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems)
        }
    }

    /// The sha256 of the settings that shape a CronJob (named in every CronJob's header, so a
    /// change shows as stale there); the namespace, image and digest are the kustomization's.
    pub fn pod_sha256(&self) -> String {
        let pod = serde_json::json!([
            self.time_zone,
            self.run_as_user,
            self.data_claim,
            self.env_secret,
            self.key_secret,
            self.cpu_request,
            self.memory_request,
            self.memory_limit,
        ]);
        crate::definition::hex_sha256(pod.to_string().as_bytes())
    }

    /// The sha256 of the namespace, image and digest, and of the manifests listed (`resources`,
    /// sorted), named in the kustomization's header: a new image changes that one file, and a
    /// definition added or removed makes it stale, never "edited by hand".
    pub fn kustomize_sha256(&self, resources: &[String]) -> String {
        let kustomize = serde_json::json!([self.namespace, self.image, self.digest, resources]);
        crate::definition::hex_sha256(kustomize.to_string().as_bytes())
    }

    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = rules::time_zone_problem(&self.time_zone) {
            out.push(format!("time_zone: {p}"));
        }
        if !rules::is_dns_label(&self.namespace) {
            out.push(format!(
                "namespace {:?} is no Kubernetes namespace name (1 to 63 of a-z, 0-9 and '-', starting and ending with a letter or digit)",
                self.namespace
            ));
        }
        if self.image.is_empty()
            || self.image.contains('@')
            || self
                .image
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            out.push(format!(
                "image {:?} is no image name (a registry path without spaces; its digest goes in `digest`)",
                self.image
            ));
        }
        if let Some(d) = &self.digest
            && !(d.len() == 71
                && d.starts_with("sha256:")
                && d[7..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            out.push(format!(
                "digest {d:?} is not sha256: and 64 lowercase hex digits"
            ));
        }
        if !(1..=i64::from(i32::MAX)).contains(&self.run_as_user) {
            out.push(format!(
                "run_as_user {} must be a uid from 1 to {} (the restricted profile refuses root)",
                self.run_as_user,
                i32::MAX
            ));
        }
        for (what, name) in [
            ("env_secret", Some(&self.env_secret)),
            ("key_secret", Some(&self.key_secret)),
            ("data_claim", self.data_claim.as_ref()),
        ] {
            if let Some(name) = name
                && !rules::is_dns_subdomain(name)
            {
                out.push(format!(
                    "{what} {name:?} is no Kubernetes object name (a-z, 0-9, '-' and '.', at most 253)"
                ));
            }
        }
        for (what, q) in [
            ("cpu_request", &self.cpu_request),
            ("memory_request", &self.memory_request),
            ("memory_limit", &self.memory_limit),
        ] {
            if !rules::is_quantity(q) {
                out.push(format!(
                    "{what} {q:?} is no Kubernetes quantity (a number with an optional suffix: m, k, M, G, Ki, Mi, Gi …)"
                ));
            }
        }
        out
    }
}

/// A TOML error with the line it is on.
fn toml_error(e: &toml::de::Error, text: &str) -> String {
    match e.span() {
        Some(span) => format!(
            "line {}: {}",
            text[..span.start].matches('\n').count() + 1,
            e.message()
        ),
        None => e.message().to_owned(),
    }
}

/// The file name of `def`'s CronJob in [`DIR`].
pub fn file_name(name: &Name) -> String {
    format!("{name}.yaml")
}

/// The labels of the CronJob, its Jobs and their pods.
fn labels(name: &Name, namespace: &Namespace) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/component", "automation"),
        ("app.kubernetes.io/instance", name.as_str()),
        ("app.kubernetes.io/managed-by", "automations"),
        ("app.kubernetes.io/name", name.as_str()),
        ("app.kubernetes.io/part-of", namespace.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The runner's own variables in the pod, before the definition's `env` names.
fn runner_env(def: &Definition, cluster: &Cluster) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("HOME", DATA_MOUNT.to_owned()),
        ("TMPDIR", TMP_MOUNT.to_owned()),
        ("TZ", cluster.time_zone.clone()),
        (crate::settings::ENV_EVENTS, "stdout".to_owned()),
        (crate::settings::ENV_PINNED_SHA256, def.sha256.clone()),
    ];
    if def.anytype.is_some() {
        env.push((crate::settings::ENV_KEY_DIR, KEY_DIR_IN_POD.to_owned()));
    }
    env
}

/// `def` as a CronJob, or why this target cannot say it.
pub fn cronjob(
    def: &Definition,
    namespace: &Namespace,
    cluster: &Cluster,
) -> Result<CronJob, String> {
    let schedule = def
        .schedule
        .as_ref()
        .ok_or_else(|| "it has no [schedule]".to_owned())?;
    if schedule.catch_up() != crate::schedule::CatchUp::Latest {
        return Err(format!(
            "catch_up = \"{}\": a CronJob catches up by its own rules (one late Job within startingDeadlineSeconds) and a pod keeps no record of the slots before it; leave catch_up out",
            schedule.catch_up().as_str()
        ));
    }
    if def.trigger.is_some() {
        return Err(
            "it also starts on [trigger] (watched paths, another automation's end), which a cluster neither watches nor chains: a CronJob cannot say it".into(),
        );
    }
    let concurrency = concurrency_policy(def, cluster)?;
    let cron = cron::cron(schedule)?;
    let pod = pod(def, namespace, cluster);
    let labels = labels(&def.name, namespace);
    let meta = |annotations: Option<BTreeMap<String, String>>, name: Option<String>| ObjectMeta {
        name,
        labels: Some(labels.clone()),
        annotations,
    };
    let job = JobSpec {
        active_deadline_seconds: Some(i64::from(stop_timeout(def) + START_SLACK_SECONDS)),
        backoff_limit: Some(0),
        pod_replacement_policy: Some("Failed".into()),
        ttl_seconds_after_finished: Some(TTL_SECONDS_AFTER_FINISHED),
        template: PodTemplateSpec {
            metadata: Some(meta(None, None)),
            spec: Some(pod),
        },
    };
    let starting_deadline = cron
        .interval_seconds
        .clamp(rules::MIN_STARTING_DEADLINE, MAX_STARTING_DEADLINE);
    let cj = CronJob {
        metadata: meta(
            Some(BTreeMap::from([(
                HASH_ANNOTATION.to_owned(),
                def.sha256.clone(),
            )])),
            Some(def.name.to_string()),
        ),
        spec: Some(CronJobSpec {
            schedule: cron.line,
            // The schedule's own zone when it names one; else the cluster's.
            time_zone: Some(
                def.schedule
                    .as_ref()
                    .and_then(crate::schedule::Schedule::zone)
                    .map_or_else(|| cluster.time_zone.clone(), |z| z.name().to_owned()),
            ),
            concurrency_policy: Some(concurrency.into()),
            starting_deadline_seconds: Some(i64::from(starting_deadline)),
            successful_jobs_history_limit: Some(HISTORY_LIMIT),
            failed_jobs_history_limit: Some(HISTORY_LIMIT),
            job_template: JobTemplateSpec {
                metadata: Some(meta(None, None)),
                spec: Some(job),
            },
        }),
    };
    let problems = rules::problems(&cj, cron.interval_seconds);
    if problems.is_empty() {
        Ok(cj)
    } else {
        Err(format!(
            "its CronJob breaks the API server's rules: {}",
            problems.join("; ")
        ))
    }
}

/// The CronJob's `concurrencyPolicy` for the definition's `overlap`, or why its policies cannot
/// be said in a cluster (docs/policies.md).
fn concurrency_policy(def: &Definition, cluster: &Cluster) -> Result<&'static str, String> {
    if def.policy.lock.is_some() && cluster.data_claim.is_none() {
        return Err(
            "its lock group is a lock in the data root, which pods share only through a claim: set data_claim in kubernetes.toml".into(),
        );
    }
    if !def.policy.writes.is_empty() {
        return Err(
            "its writes names folders of this machine, which a pod does not have (a pod writes only its data root; its file system is read-only already)".into(),
        );
    }
    match def.policy.overlap {
        crate::definition::Overlap::Skip => Ok("Forbid"),
        crate::definition::Overlap::Replace => Ok("Replace"),
        crate::definition::Overlap::Queue => Err(
            "its overlap = \"queue\" has no CronJob equivalent (concurrencyPolicy is Allow, Forbid or Replace): use \"skip\" or \"replace\"".into(),
        ),
    }
}

/// The pod of each firing: the runner as the one container, under the restricted profile.
fn pod(def: &Definition, namespace: &Namespace, cluster: &Cluster) -> PodSpec {
    let uid = cluster.run_as_user;
    let (volumes, mounts) = volumes(def, namespace, cluster);
    PodSpec {
        containers: vec![container(def, namespace, cluster, mounts)],
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(uid),
            run_as_group: Some(uid),
            fs_group: Some(uid),
            // The kubelet changes a claim's owner and modes only when its root does not match:
            // applied to every file at each mount, it would make the private data root
            // group-readable, which the runner refuses.
            fs_group_change_policy: Some("OnRootMismatch".into()),
            seccomp_profile: Some(runtime_default()),
        }),
        volumes: Some(volumes),
    }
}

/// The runner's container: the unit's argv, its environment, requests and limits.
fn container(
    def: &Definition,
    namespace: &Namespace,
    cluster: &Cluster,
    mounts: Vec<VolumeMount>,
) -> Container {
    let uid = cluster.run_as_user;
    let paths = MachinePaths {
        bin: BIN_IN_IMAGE.into(),
        root: ROOT_IN_IMAGE.into(),
        data_root: DATA_ROOT_IN_POD.into(),
        home: String::new(),
    };
    let mut argv = program_arguments(def, namespace, &paths);
    let bin = argv.remove(0);
    Container {
        name: "automation".into(),
        image: Some(IMAGE_NAME.into()),
        command: Some(vec![bin]),
        args: Some(argv),
        working_dir: Some(ROOT_IN_IMAGE.into()),
        env: Some(container_env(def, cluster)),
        resources: Some(resources(def, cluster)),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(uid),
            run_as_group: Some(uid),
            seccomp_profile: Some(runtime_default()),
        }),
        volume_mounts: Some(mounts),
    }
}

/// The container's requests and limits: `kubernetes.toml`'s, with the definition's `[limits]`
/// over them (`memory_max` the memory limit, and the request when it is lower; `cpu_quota` a CPU
/// limit in millicores). nice, io and tasks_max have no container equivalent.
fn resources(def: &Definition, cluster: &Cluster) -> ResourceRequirements {
    let limits = &def.policy.limits;
    let mut request_memory = Quantity(cluster.memory_request.clone());
    let mut limit = BTreeMap::from([("memory".to_owned(), Quantity(cluster.memory_limit.clone()))]);
    if let Some(m) = &limits.memory_max {
        let bytes = m.bytes.to_string();
        if rules::quantity_bytes(&cluster.memory_request).is_none_or(|r| r > m.bytes) {
            request_memory = Quantity(bytes.clone());
        }
        limit.insert("memory".into(), Quantity(bytes));
    }
    if let Some(q) = limits.cpu_quota {
        limit.insert("cpu".into(), Quantity(format!("{}m", q * 10)));
    }
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".into(), Quantity(cluster.cpu_request.clone())),
            ("memory".into(), request_memory),
        ])),
        limits: Some(limit),
    }
}

/// The runner's own variables by value, then the definition's `env` names from the Secret (never
/// a value in the manifest).
fn container_env(def: &Definition, cluster: &Cluster) -> Vec<EnvVar> {
    // The definition's names never clash with these: it may not list HOME, TMPDIR, TZ or
    // AUTOMATIONS_* (names.rs).
    let ours = runner_env(def, cluster)
        .into_iter()
        .map(|(name, value)| EnvVar {
            name: name.into(),
            value: Some(value),
            ..Default::default()
        });
    let theirs = def.env.iter().map(|e| EnvVar {
        name: e.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: cluster.env_secret.clone(),
                key: e.to_string(),
                optional: Some(false),
            }),
        }),
        ..Default::default()
    });
    ours.chain(theirs).collect()
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
    }
}

/// The pod's volumes and the container's mounts: the data root (emptyDir or the claim), TMPDIR,
/// and for an AnyType automation its own key and the spaces policy from the key Secret.
fn volumes(
    def: &Definition,
    namespace: &Namespace,
    cluster: &Cluster,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let data = match &cluster.data_claim {
        Some(claim) => Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
            }),
            ..Default::default()
        },
        None => Volume {
            name: "data".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    };
    let tmp = Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
    };
    let mut volumes = vec![data, tmp];
    let mut mounts = vec![
        mount("data", DATA_MOUNT, false),
        mount("tmp", TMP_MOUNT, false),
    ];
    if def.anytype.is_some() {
        let label = Label::new(namespace, &def.name);
        let item = |key: &str| KeyToPath {
            key: key.into(),
            path: key.into(),
        };
        volumes.push(Volume {
            name: "keys".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(cluster.key_secret.clone()),
                // Owner and group (fsGroup) may read; nobody may write.
                default_mode: Some(0o440),
                items: Some(vec![
                    item(label.as_str()),
                    item(crate::anytype::gate::SPACES_FILE.file_name()),
                ]),
            }),
            ..Default::default()
        });
        mounts.push(mount("keys", KEY_DIR_IN_POD, true));
    }
    (volumes, mounts)
}

/// One YAML document with a header comment: `value`'s keys sorted (serde_json's map is ordered).
fn yaml(header: &str, value: &serde_json::Value) -> Vec<u8> {
    let body = serde_yaml_ng::to_string(value).expect("a JSON value is always YAML");
    format!("{HEADER_START}{header}\n{body}").into_bytes()
}

/// `def`'s manifest file, or why this target cannot say it.
pub fn render(
    def: &Definition,
    namespace: &Namespace,
    cluster: &Cluster,
) -> Result<UnitFile, String> {
    let cj = cronjob(def, namespace, cluster)?;
    let value = serde_json::to_value(&cj).expect("a CronJob serialises");
    Ok(UnitFile {
        name: file_name(&def.name),
        bytes: yaml(
            &format!(
                "automations/{}.toml (sha256 {}) and the pod settings of {SETTINGS_FILE} (sha256 {}) by `automations` - do not edit; change those and run `automations units`.",
                def.name,
                def.sha256,
                cluster.pod_sha256()
            ),
            &value,
        ),
    })
}

/// The kustomization of `files` (the CronJob manifests' names): the namespace, the image and its
/// digest.
pub fn kustomization(files: &[String], cluster: &Cluster) -> UnitFile {
    let mut image = serde_json::json!({"name": IMAGE_NAME, "newName": cluster.image});
    match &cluster.digest {
        Some(d) => image["digest"] = d.clone().into(),
        None => image["newTag"] = "latest".into(),
    }
    let mut resources = files.to_vec();
    resources.sort();
    let value = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": cluster.namespace,
        "images": [image],
        "resources": resources,
    });
    UnitFile {
        name: KUSTOMIZATION.into(),
        bytes: yaml(
            &format!(
                "the namespace and image of {SETTINGS_FILE} and the scheduled definitions (sha256 {}) by `automations` - do not edit; change them and run `automations units`.",
                cluster.kustomize_sha256(&resources)
            ),
            &value,
        ),
    }
}

/// The manifests of every definition going to the cluster (scheduled, not excluded), with the
/// kustomization; or every definition this target cannot say, and every exclusion that names no
/// scheduled definition.
pub fn render_all(
    defs: &[Definition],
    namespace: &Namespace,
    cluster: &Cluster,
) -> Result<Vec<UnitFile>, Vec<String>> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for name in &cluster.exclude {
        if !defs.iter().any(|d| &d.name == name && d.schedule.is_some()) {
            problems.push(format!(
                "{SETTINGS_FILE}: exclude names {name}, which is no scheduled definition"
            ));
        }
    }
    for def in defs {
        if def.schedule.is_none() || cluster.exclude.contains(&def.name) {
            continue;
        }
        match render(def, namespace, cluster) {
            Ok(f) => files.push(f),
            Err(why) => problems.push(format!(
                "{}: not rendered for Kubernetes: {why}; to keep it off the cluster, add it to `exclude` in {SETTINGS_FILE}",
                def.name
            )),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let names: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
    files.push(kustomization(&names, cluster));
    Ok(files)
}

/// `bytes` with the CronJob's `spec.suspend: true` line taken out: a pause is runtime state
/// (`kubectl patch … suspend`), never rendered, so the drift check does not see it either. A
/// `suspend: false` stays a difference: applied, it would undo a pause.
pub fn without_suspend(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let mut in_spec = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if !line.starts_with(' ') {
            in_spec = line.starts_with("spec:");
        }
        let top_of_spec = in_spec
            && line.starts_with("  ")
            && !line.starts_with("   ")
            && line[2..].trim_end() == "suspend: true";
        if !top_of_spec {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests;
