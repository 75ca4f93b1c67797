//! The rules the API server (and the restricted Pod Security profile) enforce on a CronJob,
//! checked here because no cluster is at hand: each a small named function in one table, so a
//! new rule is one new row. The renderer runs them on every manifest it makes; the tests feed
//! them manifests that break each one.

use super::api::{Container, CronJob, PodSpec};

/// The longest CronJob name: the controller appends an 11-character suffix to name its Jobs,
/// which must stay within 63.
pub const MAX_NAME: usize = 52;
/// The shortest `startingDeadlineSeconds` we render: below it the controller may miss a run it
/// only looks for every 10 s, and says so.
pub const MIN_STARTING_DEADLINE: u32 = 60;

/// One rule: its name and what it finds wrong (`None` when the CronJob keeps it). The interval is
/// the schedule's shortest gap in seconds.
type Rule = fn(&CronJob, u32) -> Option<String>;

const RULES: &[(&str, Rule)] = &[
    ("name", name),
    ("labels", labels),
    ("schedule", schedule),
    ("time zone", time_zone),
    ("enums", enums),
    ("deadlines", deadlines),
    ("restricted pod security", restricted),
    ("volumes", volumes),
];

/// Every rule `cj` breaks, as `rule: what`.
pub fn problems(cj: &CronJob, interval_seconds: u32) -> Vec<String> {
    RULES
        .iter()
        .filter_map(|(rule, check)| check(cj, interval_seconds).map(|p| format!("{rule}: {p}")))
        .collect()
}

/// A DNS-1123 label: 1..=63 of a-z, 0-9, '-', starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 in all.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A resource quantity as written by people: digits (a fraction allowed) and one suffix.
pub fn is_quantity(s: &str) -> bool {
    const SUFFIXES: [&str; 14] = [
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let mut parts = number.split('.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    !whole.is_empty()
        && parts.next().is_none()
        && fraction.is_none_or(|f| !f.is_empty())
        && SUFFIXES.contains(&suffix)
}

/// The bytes a memory quantity means (`"256Mi"`, `"1G"`, `"300000000"`), when it is one.
pub fn quantity_bytes(s: &str) -> Option<u64> {
    if !is_quantity(s) {
        return None;
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let scale: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some((number.parse::<f64>().ok()? * scale) as u64)
}

/// A label value: at most 63 of alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= 63
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))))
}

/// Why `zone` is no `timeZone` the API server takes: it loads an IANA name from its database and
/// refuses `Local` (the controller's own zone is no one's).
pub fn time_zone_problem(zone: &str) -> Option<String> {
    if zone == "Local" || zone.is_empty() {
        return Some(format!(
            "{zone:?}: the controller's own zone is no one's local time; name an IANA zone (Europe/Berlin, UTC)"
        ));
    }
    zone.parse::<chrono_tz::Tz>()
        .err()
        .map(|_| format!("{zone:?} is no IANA time zone (Europe/Berlin, America/New_York, UTC)"))
}

fn pod(cj: &CronJob) -> Option<&PodSpec> {
    cj.spec
        .as_ref()?
        .job_template
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()
}

fn containers(cj: &CronJob) -> &[Container] {
    pod(cj).map_or(&[], |p| &p.containers)
}

fn name(cj: &CronJob, _: u32) -> Option<String> {
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    if !is_dns_label(name) || name.len() > MAX_NAME {
        return Some(format!(
            "{name:?} is no CronJob name (1 to {MAX_NAME} of a-z, 0-9 and '-', starting and ending with a letter or digit)"
        ));
    }
    containers(cj)
        .iter()
        .find(|c| !is_dns_label(&c.name))
        .map(|c| format!("container name {:?} is no DNS label", c.name))
}

fn labels(cj: &CronJob, _: u32) -> Option<String> {
    let spec = cj.spec.as_ref()?;
    let template = spec.job_template.spec.as_ref()?;
    [
        cj.metadata.labels.as_ref(),
        spec.job_template.metadata.as_ref()?.labels.as_ref(),
        template.template.metadata.as_ref()?.labels.as_ref(),
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|(k, v)| {
        let (prefix, key) = k.rsplit_once('/').unwrap_or(("", k));
        !is_label_value(key)
            || key.is_empty()
            || !(prefix.is_empty() || is_dns_subdomain(prefix))
            || !is_label_value(v)
    })
    .map(|(k, v)| format!("label {k}={v:?} is no valid label"))
}

fn schedule(cj: &CronJob, _: u32) -> Option<String> {
    super::cron::problem(&cj.spec.as_ref()?.schedule)
}

fn time_zone(cj: &CronJob, _: u32) -> Option<String> {
    match cj.spec.as_ref()?.time_zone.as_deref() {
        None => Some("no timeZone: the schedule would follow the controller's zone".into()),
        Some(z) => time_zone_problem(z),
    }
}

fn enums(cj: &CronJob, _: u32) -> Option<String> {
    let spec = cj.spec.as_ref()?;
    let job = spec.job_template.spec.as_ref()?;
    let pod = pod(cj)?;
    let seccomp = containers(cj)
        .iter()
        .filter_map(|c| c.security_context.as_ref()?.seccomp_profile.as_ref())
        .chain(
            pod.security_context
                .as_ref()
                .and_then(|s| s.seccomp_profile.as_ref()),
        )
        .map(|p| p.type_.as_str());
    let checks = [
        (
            "concurrencyPolicy",
            spec.concurrency_policy.as_deref(),
            &["Allow", "Forbid", "Replace"][..],
        ),
        (
            "podReplacementPolicy",
            job.pod_replacement_policy.as_deref(),
            &["TerminatingOrFailed", "Failed"],
        ),
        (
            // A Job's pods never restart in place with Always.
            "restartPolicy",
            pod.restart_policy.as_deref(),
            &["Never", "OnFailure"],
        ),
    ];
    for (field, value, allowed) in checks {
        if let Some(v) = value
            && !allowed.contains(&v)
        {
            return Some(format!("{field} {v:?} is not one of {allowed:?}"));
        }
    }
    if let Some(p) = pod
        .security_context
        .as_ref()
        .and_then(|s| s.fs_group_change_policy.as_deref())
        && !["OnRootMismatch", "Always"].contains(&p)
    {
        return Some(format!(
            "fsGroupChangePolicy {p:?} is not one of [\"OnRootMismatch\", \"Always\"]"
        ));
    }
    for t in seccomp {
        if !["RuntimeDefault", "Localhost", "Unconfined"].contains(&t) {
            return Some(format!("seccompProfile.type {t:?} is unknown"));
        }
    }
    None
}

fn deadlines(cj: &CronJob, interval: u32) -> Option<String> {
    let spec = cj.spec.as_ref()?;
    let job = spec.job_template.spec.as_ref()?;
    let pod = pod(cj)?;
    let starting = spec.starting_deadline_seconds;
    if let Some(s) = starting
        && (s < i64::from(MIN_STARTING_DEADLINE)
            || s > i64::from(interval.max(MIN_STARTING_DEADLINE)))
    {
        return Some(format!(
            "startingDeadlineSeconds {s} must be from {MIN_STARTING_DEADLINE} to the schedule's interval ({interval} s)"
        ));
    }
    let non_negative = [
        ("backoffLimit", job.backoff_limit.map(i64::from)),
        (
            "ttlSecondsAfterFinished",
            job.ttl_seconds_after_finished.map(i64::from),
        ),
        (
            "successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit.map(i64::from),
        ),
        (
            "failedJobsHistoryLimit",
            spec.failed_jobs_history_limit.map(i64::from),
        ),
        (
            "terminationGracePeriodSeconds",
            pod.termination_grace_period_seconds,
        ),
    ];
    if let Some((field, v)) = non_negative
        .into_iter()
        .find_map(|(f, v)| v.filter(|v| *v < 0).map(|v| (f, v)))
    {
        return Some(format!("{field} {v} is negative"));
    }
    match job.active_deadline_seconds {
        Some(d) if d <= 0 => Some(format!("activeDeadlineSeconds {d} must be positive")),
        None => Some(
            "no activeDeadlineSeconds: a stuck Job would hold the schedule (Forbid) for ever"
                .into(),
        ),
        Some(d) if d <= pod.termination_grace_period_seconds.unwrap_or(30) => Some(format!(
            "activeDeadlineSeconds {d} leaves no time beyond the termination grace"
        )),
        _ => None,
    }
}

fn restricted(cj: &CronJob, _: u32) -> Option<String> {
    let pod = pod(cj)?;
    if pod.automount_service_account_token != Some(false) {
        return Some("the service account token is mounted".into());
    }
    let pod_ctx = pod.security_context.as_ref();
    for c in containers(cj) {
        let ctx = c.security_context.as_ref();
        let non_root = ctx
            .and_then(|s| s.run_as_non_root)
            .or(pod_ctx.and_then(|s| s.run_as_non_root));
        let uid = ctx
            .and_then(|s| s.run_as_user)
            .or(pod_ctx.and_then(|s| s.run_as_user));
        let dropped_all = ctx
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.drop.as_ref())
            .is_some_and(|d| d.iter().any(|c| c == "ALL"));
        let added = ctx
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref())
            .is_some_and(|a| a.iter().any(|c| c != "NET_BIND_SERVICE"));
        let seccomp = ctx
            .and_then(|s| s.seccomp_profile.as_ref())
            .or(pod_ctx.and_then(|s| s.seccomp_profile.as_ref()))
            .map(|p| p.type_.as_str());
        let why = if non_root != Some(true) {
            "runAsNonRoot is not true"
        } else if uid.is_none_or(|u| u == 0) {
            "no numeric non-zero runAsUser"
        } else if ctx.and_then(|s| s.allow_privilege_escalation) != Some(false) {
            "allowPrivilegeEscalation is not false"
        } else if !dropped_all || added {
            "capabilities are not all dropped"
        } else if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            "seccompProfile is not RuntimeDefault"
        } else if ctx.and_then(|s| s.read_only_root_filesystem) != Some(true) {
            "the root filesystem is writable"
        } else if c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_none_or(|l| !l.contains_key("memory"))
        {
            "no memory limit"
        } else {
            continue;
        };
        return Some(format!("container {}: {why}", c.name));
    }
    None
}

/// Every mount is of a volume of the pod. (A hostPath, which the restricted profile refuses, is
/// not even a field of a volume here.)
fn volumes(cj: &CronJob, _: u32) -> Option<String> {
    let pod = pod(cj)?;
    let names: Vec<&str> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    for c in containers(cj) {
        if let Some(m) = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| !names.contains(&m.name.as_str()))
        {
            return Some(format!(
                "container {} mounts {}, which is no volume of the pod",
                c.name, m.name
            ));
        }
    }
    None
}
