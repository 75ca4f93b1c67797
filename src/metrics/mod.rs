//! What Prometheus scrapes (docs/metrics.md): each automation's last run, last success, next run,
//! firings by outcome, verdict, pause and Healthchecks pings, in the Prometheus text format or in
//! OpenMetrics, for `automations metrics`, the dashboard's `/metrics` and node_exporter's textfile
//! collector ([`textfile`]).
//!
//! Read through the same pipeline as `health` (one [`health::load::judge`] pass: the verdicts are
//! health's own), and the firings by outcome from the index's entry kinds, without reading a line
//! of the log. Every value is a number, a name, a fixed word or the host name: never a run's
//! output, a reason's detail or anything a command said.

pub mod textfile;

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use crate::health::{self, State, Subject, Verdict};
use crate::names::Name;
use crate::runlog::index::{OUTCOMES, Tally};
use crate::settings::Settings;

/// The content type of the Prometheus text format.
pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The two ways of writing the same samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4 (what node_exporter's textfile collector reads): a
    /// counter's `_created` is a gauge family of its own, as the official Python client writes it.
    Text,
    /// OpenMetrics 1.0: `_created` belongs to its counter, and the text ends with `# EOF`.
    OpenMetrics,
}

impl Format {
    /// What an `Accept` header asks for: OpenMetrics when it names it with a weight above 0 and
    /// at least the text format's (as Prometheus does), else the text format.
    pub fn accepted(accept: &str) -> Self {
        let weight = |kind: &str| {
            accept
                .split(',')
                .filter_map(|part| {
                    let mut params = part.split(';').map(str::trim);
                    (params.next()? == kind).then(|| {
                        params
                            .find_map(|p| p.strip_prefix("q="))
                            .map_or(1.0, |q| q.parse::<f64>().unwrap_or(0.0))
                    })
                })
                .fold(None, |best: Option<f64>, q| {
                    Some(best.map_or(q, |b| b.max(q)))
                })
        };
        match (weight("application/openmetrics-text"), weight("text/plain")) {
            (Some(om), text) if om > 0.0 && om >= text.unwrap_or(0.0) => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// One automation's samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    /// When its latest run started (one still going included), Unix seconds.
    pub last_run: Option<f64>,
    /// When its latest success started.
    pub last_success: Option<f64>,
    /// How long its latest finished run took, seconds.
    pub last_duration: Option<f64>,
    /// When its installed unit fires next (not while paused).
    pub next_run: Option<f64>,
    /// How old its last success may grow before health calls it stale, seconds (scheduled,
    /// installed automations).
    pub stale_after: Option<f64>,
    /// Its firings the log holds, by outcome.
    pub tally: Tally,
    pub verdict: State,
    pub paused: bool,
    /// Until when its notifications are held (`snooze`), Unix seconds, while a snooze holds.
    pub snoozed_until: Option<f64>,
    /// When its unit was installed on this machine, Unix seconds.
    pub installed: Option<f64>,
    /// Healthchecks pings that failed in a row (0 without pings).
    pub ping_failures: u32,
}

/// What is one per data root.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub namespace: String,
    pub host: String,
    pub version: &'static str,
    /// The kill switch is on.
    pub stop_all: bool,
}

/// Why the samples could not be gathered, or the textfile not read or written.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Health's sources (definitions, the log, the state) could not be read.
    #[error(transparent)]
    Load(#[from] health::load::LoadError),
    /// The kill switch could not be read.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// `metrics.toml` cannot be used.
    #[error(transparent)]
    Settings(#[from] crate::settings::file::Refused),
    /// The writers' lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::locks::LockError),
    /// Another writer held the writers' lock for all of `seconds`.
    #[error(
        "another writer held {} for {seconds} s; these samples wait for the next write",
        .lock.display()
    )]
    Busy {
        lock: std::path::PathBuf,
        seconds: u64,
    },
    #[error("cannot read {}", .path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the metrics textfile {}", .path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove {}", .path.display())]
    Remove {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::exit::Exits for MetricsError {
    /// Each cause's own; a writer that kept the lock, 1.
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::Load(e) => e.exit(),
            Self::State(e) => e.exit(),
            Self::Settings(e) => e.exit(),
            Self::Lock(e) => e.exit(),
            Self::Busy { .. } => crate::exit::Exit::Failure,
            Self::Read { source, .. }
            | Self::Write { source, .. }
            | Self::Remove { source, .. } => source.exit(),
        }
    }
}

impl Machine {
    /// This data root's, with the kill switch read now.
    pub fn read(settings: &Settings) -> Result<Self, MetricsError> {
        Self::unswitched(settings).switched(&settings.data_root)
    }

    /// This data root's before its kill switch is read: the textfile's writers read it in their
    /// turn ([`Machine::switched`]), so what they write is the switch as it is then.
    pub fn unswitched(settings: &Settings) -> Self {
        Self {
            namespace: settings.namespace.as_str().to_owned(),
            host: crate::notify::host(),
            version: env!("CARGO_PKG_VERSION"),
            stop_all: false,
        }
    }

    /// With the kill switch of `data_root` read now.
    pub fn switched(self, data_root: &std::path::Path) -> Result<Self, MetricsError> {
        Ok(Self {
            stop_all: crate::state::State::new(data_root).stopped()?.is_some(),
            ..self
        })
    }
}

/// Unix seconds of an RFC 3339 time.
fn seconds(at: &str) -> Option<f64> {
    crate::runlog::parse_stamp(at).map(unix)
}

fn unix(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

/// The samples of one judged automation.
pub fn row(
    subject: &Subject,
    verdict: &Verdict,
    tally: Tally,
    now: &health::Now<chrono::Local>,
) -> Row {
    let last = subject
        .runs
        .iter()
        .find(|r| r.status != crate::history::Status::Skipped);
    let next_run = subject
        .fires_on
        .as_ref()
        .filter(|_| subject.paused.is_none())
        .and_then(|schedule| {
            let jitter = subject.definition.as_ref().map_or(0, |d| d.jitter_seconds);
            let last_start = last.and_then(|r| crate::runlog::parse_stamp(&r.at));
            crate::schedule::next_run(schedule, &subject.name, jitter, &now.wall, last_start)
        })
        .and_then(|(next, _)| next.instant())
        .map(unix);
    Row {
        name: subject.name.clone(),
        last_run: last.and_then(|r| seconds(&r.at)),
        last_success: verdict.figures.last_success.as_deref().and_then(seconds),
        last_duration: verdict
            .figures
            .last_duration_ms
            .map(|ms| ms as f64 / 1000.0),
        next_run,
        stale_after: verdict.figures.stale_after_ms.map(|ms| ms as f64 / 1000.0),
        tally,
        verdict: verdict.verdict,
        paused: subject.paused.is_some(),
        snoozed_until: subject.snoozed.as_ref().and_then(|s| seconds(&s.until)),
        installed: subject.installed_at.map(unix),
        ping_failures: subject.pings.as_ref().map_or(0, |p| p.failures_in_row),
    }
}

/// One automation's samples, written out family by family (by the worker that judged it, so the
/// formatting is shared among the cores as the reading is).
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    name: String,
    /// The lines of each family of [`FAMILIES`].
    families: Vec<String>,
}

impl Samples {
    /// `row`'s samples in `format`.
    pub fn of(row: &Row, m: &Machine, format: Format) -> Self {
        let labels = own_labels(&row.name, m);
        Self {
            name: row.name.clone(),
            families: FAMILIES
                .iter()
                .map(|family| {
                    let mut lines = String::new();
                    samples(family, row, format, &labels, &mut lines);
                    lines
                })
                .collect(),
        }
    }
}

/// The samples of `only` (or of every automation health knows of), by name, in `format`.
pub fn collect(
    settings: &Settings,
    src: &health::load::Sources,
    only: Option<&Name>,
    m: &Machine,
    format: Format,
) -> Result<Vec<Samples>, MetricsError> {
    let now = health::load::now();
    src.snapshot.keep_tallies();
    // Each worker keeps only the samples: the verdict and the subject are dropped where made.
    let all = health::load::judge(settings, src, only, |subject, verdict| {
        let tally = src.snapshot.tally(&subject.name);
        (!subject.retired(&verdict))
            .then(|| Samples::of(&row(&subject, &verdict, tally, &now), m, format))
    })?;
    Ok(all.into_iter().flatten().collect())
}

/// The samples of `name` now, from `src` and its own files (`None` once health no longer reports
/// it).
pub fn collect_one(
    settings: &Settings,
    src: &health::load::Sources,
    name: &Name,
    m: &Machine,
    format: Format,
) -> Option<Samples> {
    src.snapshot.keep_tallies();
    let (subject, verdict) = health::load::judge_one(settings, src, name);
    let tally = src.snapshot.tally(&subject.name);
    let now = health::load::now();
    (!subject.retired(&verdict))
        .then(|| Samples::of(&row(&subject, &verdict, tally, &now), m, format))
}

/// The whole document of every automation in `src`, in `format` (`automations metrics`, the
/// dashboard's `/metrics`).
pub fn document(
    settings: &Settings,
    src: &health::load::Sources,
    format: Format,
) -> Result<String, MetricsError> {
    let m = Machine::read(settings)?;
    Ok(render(
        &collect(settings, src, None, &m, format)?,
        &m,
        format,
    ))
}

/// [`collect`] with each automation's verdict, from the one pass (`health` writes the textfile
/// and prints the verdicts): every verdict, and the samples of those the metrics show.
pub fn collect_with_verdicts(
    settings: &Settings,
    src: &health::load::Sources,
    only: Option<&Name>,
    m: &Machine,
    format: Format,
) -> Result<Vec<(Option<Samples>, Verdict)>, MetricsError> {
    let now = health::load::now();
    src.snapshot.keep_tallies();
    Ok(health::load::judge(
        settings,
        src,
        only,
        |subject, verdict| {
            let tally = src.snapshot.tally(&subject.name);
            let row = row(&subject, &verdict, tally, &now);
            let samples = (!subject.retired(&verdict)).then(|| Samples::of(&row, m, format));
            (samples, verdict)
        },
    )?)
}

/// What a family holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    LastRun,
    LastSuccess,
    LastDuration,
    NextRun,
    StaleAfter,
    Runs,
    RunsCreated,
    Verdict,
    Paused,
    SnoozedUntil,
    Installed,
    PingFailures,
}

/// One family of samples per automation: its name (without `_total` for a counter), type and help.
struct Family {
    which: Which,
    name: &'static str,
    kind: &'static str,
    help: &'static str,
}

/// The families of each automation, in the order they are written.
const FAMILIES: [Family; 12] = [
    Family {
        which: Which::LastRun,
        name: "automations_last_run_timestamp_seconds",
        kind: "gauge",
        help: "When the automation's latest run started (one still running included).",
    },
    Family {
        which: Which::LastSuccess,
        name: "automations_last_success_timestamp_seconds",
        kind: "gauge",
        help: "When the automation's latest successful run started.",
    },
    Family {
        which: Which::LastDuration,
        name: "automations_last_run_duration_seconds",
        kind: "gauge",
        help: "How long the automation's latest finished run took.",
    },
    Family {
        which: Which::NextRun,
        name: "automations_next_run_timestamp_seconds",
        kind: "gauge",
        help: "When the automation's installed unit fires next (absent while paused or not installed).",
    },
    Family {
        which: Which::StaleAfter,
        name: "automations_stale_after_seconds",
        kind: "gauge",
        help: "How old the automation's last success may grow before health calls it stale (its schedule's interval with health.toml's slack).",
    },
    Family {
        which: Which::Runs,
        name: "automations_runs",
        kind: "counter",
        help: "Firings the run log holds, by outcome (skipped: did not run).",
    },
    Family {
        which: Which::RunsCreated,
        name: "automations_runs_created",
        kind: "gauge",
        help: "When automations_runs_total started counting: the oldest line the run log holds.",
    },
    Family {
        which: Which::Verdict,
        name: "automations_verdict",
        kind: "gauge",
        help: "The automation's health verdict: 1 on the current one (healthy, degraded, unknown).",
    },
    Family {
        which: Which::Paused,
        name: "automations_paused",
        kind: "gauge",
        help: "1 when the automation is paused (by hand or automatically).",
    },
    Family {
        which: Which::SnoozedUntil,
        name: "automations_snoozed_until_timestamp_seconds",
        kind: "gauge",
        help: "Until when the automation's notifications are held (automations snooze); absent when not snoozed. The shipped alert rules hold its alerts until then too.",
    },
    Family {
        which: Which::Installed,
        name: "automations_installed_timestamp_seconds",
        kind: "gauge",
        help: "When the automation's unit was installed on this machine (absent when not installed).",
    },
    Family {
        which: Which::PingFailures,
        name: "automations_healthchecks_ping_failures",
        kind: "gauge",
        help: "Healthchecks pings of the automation that failed in a row.",
    },
];

const STOP_ALL: Family = Family {
    which: Which::Paused,
    name: "automations_stop_all",
    kind: "gauge",
    help: "1 while the kill switch (automations stop-all) holds every firing of this namespace.",
};
const INFO: Family = Family {
    which: Which::Paused,
    name: "automations",
    kind: "info",
    help: "The automations binary and the machine it reports on.",
};

/// A label value with `\`, `"` and newlines escaped, as both formats want.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The labels every sample of `name` starts with.
fn own_labels(name: &str, m: &Machine) -> String {
    format!(
        "automation=\"{}\",namespace=\"{}\"",
        escape(name),
        escape(&m.namespace)
    )
}

/// A sample's value: a whole number as one (counts, 0 and 1, whole seconds), else as Rust writes
/// a float (the shortest form that reads back the same).
struct Value(f64);

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v.fract() == 0.0 && v.abs() < 1e15 {
            write!(f, "{}", v as i64)
        } else {
            write!(f, "{v}")
        }
    }
}

/// The sample lines of `family` for one automation (whose own labels are `labels`), appended to
/// `out`.
fn samples(family: &Family, row: &Row, format: Format, labels: &str, out: &mut String) {
    let mut line = |suffix: &str, extra: &dyn std::fmt::Display, value: f64| {
        let _ = writeln!(
            out,
            "{}{suffix}{{{labels}{extra}}} {}",
            family.name,
            Value(value)
        );
    };
    let value = match family.which {
        Which::LastRun => row.last_run,
        Which::LastSuccess => row.last_success,
        Which::LastDuration => row.last_duration,
        Which::NextRun => row.next_run,
        Which::StaleAfter => row.stale_after,
        Which::Paused => Some(f64::from(u8::from(row.paused))),
        Which::SnoozedUntil => row.snoozed_until,
        Which::Installed => row.installed,
        Which::PingFailures => Some(f64::from(row.ping_failures)),
        Which::Runs => {
            for (outcome, count) in outcomes(&row.tally) {
                let extra = Extra("outcome", outcome);
                line("_total", &extra, count as f64);
                if format == Format::OpenMetrics
                    && let Some(since) = created(&row.tally)
                {
                    line("_created", &extra, since);
                }
            }
            None
        }
        Which::RunsCreated => {
            if let Some(since) = created(&row.tally).filter(|_| format == Format::Text) {
                for (outcome, _) in outcomes(&row.tally) {
                    line("", &Extra("outcome", outcome), since);
                }
            }
            None
        }
        Which::Verdict => {
            for state in [State::Healthy, State::Degraded, State::Unknown] {
                let value = f64::from(u8::from(row.verdict == state));
                line("", &Extra("verdict", state.as_str()), value);
            }
            None
        }
    };
    if let Some(v) = value {
        line("", &"", v);
    }
}

/// `,name="value"` after an automation's own labels (the values are fixed words).
struct Extra(&'static str, &'static str);

impl std::fmt::Display for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, ",{}=\"{}\"", self.0, self.1)
    }
}

/// When a tally's counts start, Unix seconds (when known).
fn created(t: &Tally) -> Option<f64> {
    (t.since_ms > 0).then(|| t.since_ms as f64 / 1000.0)
}

/// A tally by outcome word: `OUTCOMES`, then `skipped`.
fn outcomes(t: &Tally) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    OUTCOMES
        .iter()
        .copied()
        .zip(t.outcomes.iter().copied())
        .chain(std::iter::once(("skipped", t.skipped)))
}

/// A family's name in `format`: in the text format a counter's family is named with `_total`
/// (there is no other way to say it), and an info is a gauge named `_info`.
fn family_name(family: &Family, format: Format) -> (String, &'static str) {
    match (format, family.kind) {
        (Format::Text, "counter") => (format!("{}_total", family.name), "counter"),
        (Format::Text, "info") => (format!("{}_info", family.name), "gauge"),
        _ => (family.name.to_owned(), family.kind),
    }
}

/// Whether `family` is written in `format` (`_created` is a family of its own only in the text
/// format).
fn written(family: &Family, format: Format) -> bool {
    !(family.which == Which::RunsCreated && format == Format::OpenMetrics)
}

/// Every family with its `# HELP` and `# TYPE` and what `each` writes of it, then the data
/// root's own: the kill switch and the info.
fn render_with(m: &Machine, format: Format, mut each: impl FnMut(usize, &mut String)) -> String {
    let mut out = String::with_capacity(4096);
    let header = |family: &Family, out: &mut String| {
        let (name, kind) = family_name(family, format);
        let _ = writeln!(out, "# HELP {name} {}", family.help);
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };
    for (i, family) in FAMILIES.iter().enumerate() {
        if written(family, format) {
            header(family, &mut out);
            each(i, &mut out);
        }
    }
    header(&STOP_ALL, &mut out);
    let _ = writeln!(
        out,
        "{}{{namespace=\"{}\"}} {}",
        STOP_ALL.name,
        escape(&m.namespace),
        u8::from(m.stop_all)
    );
    header(&INFO, &mut out);
    let _ = writeln!(
        out,
        "{}_info{{host=\"{}\",namespace=\"{}\",version=\"{}\"}} 1",
        INFO.name,
        escape(&m.host),
        escape(&m.namespace),
        escape(m.version)
    );
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The samples of every automation (in their order: by name) and of the data root, in the
/// `format` they were written in.
pub fn render(all: &[Samples], m: &Machine, format: Format) -> String {
    let size: usize = all.iter().flat_map(|s| &s.families).map(String::len).sum();
    let mut first = true;
    render_with(m, format, |i, out| {
        if std::mem::take(&mut first) {
            out.reserve(size + 4096);
        }
        for samples in all {
            out.push_str(&samples.families[i]);
        }
    })
}

/// What a write into the textfile changes.
#[derive(Clone, Copy, Debug)]
pub enum Patch<'a> {
    /// One automation's samples, all of them (written in the text format).
    Samples(&'a Samples),
    /// One automation's snooze: until when, Unix seconds, or none.
    SnoozedUntil { name: &'a str, until: Option<f64> },
    /// No automation's: the data root's own samples (the kill switch) only.
    DataRoot,
}

/// A text-format document written before (`old`, a textfile) with `patch` applied and the data
/// root's own samples written anew; the other automations' samples are kept as they were. Lines
/// that are none of ours are dropped. With every automation's samples patched in, the same
/// document [`render`] writes. `None` when `patch` changes one sample of an automation the
/// document holds none of (its whole samples are needed then).
pub fn merge(old: &str, patch: Patch<'_>, m: &Machine) -> Option<String> {
    // Per family: each automation's lines, by name, as `render` orders them.
    let mut kept: Vec<std::collections::BTreeMap<String, String>> =
        FAMILIES.iter().map(|_| Default::default()).collect();
    let ns = format!("namespace=\"{}\"", escape(&m.namespace));
    let renewed = match patch {
        Patch::Samples(new) => Some(escape(&new.name)),
        Patch::SnoozedUntil { .. } | Patch::DataRoot => None,
    };
    for line in old.lines().filter(|l| !l.starts_with('#')) {
        let Some((metric, rest)) = line.split_once('{') else {
            continue;
        };
        let Some(i) = FAMILIES
            .iter()
            .position(|f| written(f, Format::Text) && family_name(f, Format::Text).0 == metric)
        else {
            continue;
        };
        // Ours: the automation label first (a name never holds a quote), this namespace second.
        let Some((name, labels)) = rest
            .strip_prefix("automation=\"")
            .and_then(|r| r.split_once("\","))
            .filter(|(_, labels)| labels.starts_with(&ns))
        else {
            continue;
        };
        if renewed.as_deref() == Some(name) {
            continue;
        }
        let lines = kept[i].entry(name.to_owned()).or_default();
        let _ = writeln!(lines, "{metric}{{automation=\"{name}\",{labels}");
    }
    match patch {
        Patch::Samples(new) => {
            for (i, lines) in new.families.iter().enumerate() {
                kept[i].insert(escape(&new.name), lines.clone());
            }
        }
        Patch::SnoozedUntil { name, until } => {
            let key = escape(name);
            if !kept.iter().any(|family| family.contains_key(&key)) {
                return None;
            }
            let i = FAMILIES
                .iter()
                .position(|f| f.which == Which::SnoozedUntil)
                .expect("a family of snoozes");
            match until {
                Some(t) => {
                    let line = format!(
                        "{}{{{}}} {}\n",
                        FAMILIES[i].name,
                        own_labels(name, m),
                        Value(t)
                    );
                    kept[i].insert(key, line);
                }
                None => {
                    kept[i].remove(&key);
                }
            }
        }
        Patch::DataRoot => {}
    }
    Some(render_with(m, Format::Text, |i, out| {
        for lines in kept[i].values() {
            out.push_str(lines);
        }
    }))
}

#[cfg(test)]
mod tests;
