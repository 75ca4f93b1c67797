//! Gathers the health subjects from disk: definitions, the log's index, pause state, install
//! records. The I/O half of health; the rules are pure (`health::verdicts`).
//!
//! Each automation's records are read newest first through the index, and only as far back as
//! its rules need: the window of runs, the last success, the missed-days window of a daily job,
//! the successes the headline rule compares. So health costs what it reports, not the log's size.

use std::collections::BTreeSet;

use anyhow::Context;

use super::{Now, Subject, ThresholdSet};
use crate::definition::{self, Checks};
use crate::history::Runs;
use crate::names::Name;
use crate::runlog::index::{Index, Snapshot};
use crate::runlog::{Event, Outcome, Record, RunLog};
use crate::schedule::Schedule;
use crate::settings::Settings;
use crate::state::State;

/// The most records read back for one automation, whatever its rules would like.
const MAX_RECORDS: usize = 20_000;

/// What health reads once: the definitions and the log's index (the dashboard reads them too).
pub struct Sources {
    pub loaded: definition::Loaded,
    pub snapshot: Snapshot,
}

impl Sources {
    pub fn read(s: &Settings) -> anyhow::Result<Self> {
        let dir = s.definitions_dir();
        let checks = Checks {
            home: s.home.clone(),
            data_root: s.data_root.clone(),
        };
        let loaded = definition::load_all(&dir, &checks)
            .with_context(|| format!("cannot read {}", dir.display()))?;
        let snapshot = Index::new(&RunLog::new(&s.data_root)).refresh()?;
        Ok(Self { loaded, snapshot })
    }
}

/// Every automation health knows of: defined ones (valid or not), names in the log, installed ones.
/// With `only`, just that one.
pub fn subjects(
    s: &Settings,
    thresholds: &ThresholdSet,
    only: Option<&Name>,
) -> anyhow::Result<Vec<Subject>> {
    subjects_from(s, &Sources::read(s)?, thresholds, only)
}

/// [`subjects`] from sources already read.
pub fn subjects_from(
    s: &Settings,
    src: &Sources,
    thresholds: &ThresholdSet,
    only: Option<&Name>,
) -> anyhow::Result<Vec<Subject>> {
    let Sources { loaded, snapshot } = src;
    let invalid: BTreeSet<String> = loaded
        .problems
        .iter()
        .filter_map(|p| {
            p.file
                .rsplit('/')
                .next()
                .and_then(|f| f.strip_suffix(".toml"))
                .map(str::to_owned)
        })
        .collect();
    let installs = State::new(&s.data_root).install_records()?;
    let mut names: BTreeSet<String> = loaded
        .definitions
        .iter()
        .map(|d| d.name.to_string())
        .collect();
    names.extend(invalid.iter().cloned());
    names.extend(snapshot.names());
    names.extend(installs.keys().map(|n| n.to_string()));
    if let Some(n) = only {
        names.retain(|x| x == n.as_str());
        names.insert(n.to_string());
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let Ok(n) = Name::new(&name) else { continue };
        let definition = loaded.definitions.iter().find(|d| d.name == n).cloned();
        let mut subject = subject(s, snapshot, &n, definition, thresholds.of(&name))?;
        subject.installed_at = installs.get(&n).map(|r| r.installed_at);
        subject.invalid = invalid.contains(&name);
        out.push(subject);
    }
    Ok(out)
}

/// One automation's subject (without its install time and validity, which `subjects` adds).
pub fn subject(
    s: &Settings,
    snapshot: &Snapshot,
    name: &Name,
    definition: Option<crate::definition::Definition>,
    th: &super::Thresholds,
) -> anyhow::Result<Subject> {
    let (runs, resumed_at) = gather(
        snapshot,
        s,
        name.as_str(),
        th,
        definition.as_ref().and_then(|d| d.schedule.as_ref()),
    );
    Ok(Subject {
        name: name.to_string(),
        paused: State::new(&s.data_root).paused(name)?,
        installed_at: None,
        invalid: false,
        definition,
        resumed_at,
        runs,
    })
}

/// "Now": local wall-clock time and the clocks.
pub fn now() -> Now<chrono::Local> {
    Now {
        wall: chrono::Local::now(),
        clock: crate::clock::now(),
    }
}

/// The runs of `name` (newest first) as far back as its rules need, and its last resume.
fn gather(
    snapshot: &Snapshot,
    s: &Settings,
    name: &str,
    th: &super::Thresholds,
    schedule: Option<&Schedule>,
) -> (
    Vec<crate::history::RunView>,
    Option<chrono::DateTime<chrono::Utc>>,
) {
    let since_days = match schedule {
        Some(Schedule::DailyAt { .. }) => {
            Some(chrono::Utc::now() - chrono::Duration::days(i64::from(th.missed_days_window) + 2))
        }
        _ => None,
    };
    let mut records: Vec<Record> = Vec::new();
    let (mut runs, mut successes) = (0usize, 0usize);
    let mut resumed_at = None;
    for r in snapshot.records(name) {
        let started = matches!(r.event, Event::Started(_));
        if let Event::Finished(f) = &r.event
            && f.outcome == Outcome::Ok
        {
            successes += 1;
        }
        if let Event::Resumed(_) = &r.event
            && resumed_at.is_none()
        {
            resumed_at = r.time();
        }
        let old_enough = since_days.is_none_or(|t| r.time().is_some_and(|at| at < t));
        records.push(r);
        if started {
            runs += 1;
            let enough = runs >= th.window
                && successes >= 1
                && old_enough
                && (!th.headline_check || successes >= th.headline_min_successes);
            if enough || records.len() >= MAX_RECORDS {
                break;
            }
        }
    }
    let views = Runs::new(records.into_iter(), &s.data_root).collect();
    (views, resumed_at)
}
