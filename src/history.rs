//! Runs as people think of them, assembled from the run log read backwards (SPEC §6).
//!
//! A `started` with its `finished` is a finished run; a `started` without one is **running** while
//! its lock is held by the pid that started it, else **interrupted**; a `skipped` is shown as such.
//! Every reader here stops as soon as it has what it reports. This module never writes.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::locks;
use crate::names::Name;
use crate::runlog::{
    Backwards, Event, Finished, Outcome, Record, RunLog, SkipReason, Started, Trigger,
};

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    Timeout,
    Stopped,
    Running,
    Interrupted,
    Skipped,
}

impl Status {
    /// The word shown to people and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
            Status::Stopped => "stopped",
            Status::Running => "running",
            Status::Interrupted => "interrupted",
            Status::Skipped => "skipped",
        }
    }

    fn of(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Ok => Status::Ok,
            Outcome::Failed => Status::Failed,
            Outcome::Timeout => Status::Timeout,
            Outcome::Stopped => Status::Stopped,
        }
    }
}

/// One run (or one skipped firing).
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    /// The run id; `None` for a skipped firing.
    pub run: Option<String>,
    pub name: String,
    pub trigger: Trigger,
    /// When it started (or was skipped).
    pub at: String,
    pub status: Status,
    /// Why it was skipped.
    pub reason: Option<SkipReason>,
    #[serde(skip)]
    pub started: Option<Started>,
    #[serde(skip)]
    pub finished: Option<Finished>,
}

impl RunView {
    /// Milliseconds the run took, when finished.
    pub fn duration_ms(&self) -> Option<u64> {
        self.finished.as_ref().map(|f| f.duration_ms)
    }

    /// The headline value, when the run reported one.
    pub fn headline(&self) -> Option<(&str, u64)> {
        let f = self.finished.as_ref()?;
        let h = f.headline.as_deref()?;
        f.facts.get(h).map(|v| (h, *v))
    }
}

/// The newest runs, newest first.
#[derive(Debug, Default)]
pub struct Recent {
    pub runs: Vec<RunView>,
    /// Unreadable lines passed over while reading.
    pub unreadable: u64,
}

/// The view of a started run, with its `finished` if one was seen.
fn started_view(
    data_root: &Path,
    name: String,
    at: String,
    s: Started,
    finished: Option<Finished>,
) -> RunView {
    let status = match &finished {
        Some(f) => Status::of(f.outcome),
        None => status_of_unfinished(data_root, &name, s.pid),
    };
    RunView {
        run: Some(s.run.clone()),
        name,
        trigger: s.trigger,
        at,
        status,
        reason: None,
        started: Some(s),
        finished,
    }
}

fn status_of_unfinished(data_root: &Path, name: &str, pid: u32) -> Status {
    let held = Name::new(name)
        .ok()
        .and_then(|n| locks::holder(data_root, &n))
        .is_some_and(|holder| holder == pid);
    if held {
        Status::Running
    } else {
        Status::Interrupted
    }
}

/// Runs assembled from the log read backwards, newest start first: each `finished` is held until
/// its `started` comes by. `keep` picks the records that matter before any pairing, so a search
/// holds on to nothing it will not report.
struct Runs<'a, F: Fn(&Record) -> bool> {
    records: Backwards,
    pending: HashMap<String, Finished>,
    data_root: &'a Path,
    keep: F,
}

impl<'a, F: Fn(&Record) -> bool> Runs<'a, F> {
    fn new(log: &RunLog, data_root: &'a Path, keep: F) -> Self {
        Self {
            records: log.backwards(),
            pending: HashMap::new(),
            data_root,
            keep,
        }
    }
}

impl<F: Fn(&Record) -> bool> Iterator for Runs<'_, F> {
    type Item = RunView;

    fn next(&mut self) -> Option<RunView> {
        loop {
            let r = self.records.next()?;
            if !(self.keep)(&r) {
                continue;
            }
            match r.event {
                Event::Finished(f) => {
                    self.pending.insert(f.run.clone(), f);
                }
                Event::Started(s) => {
                    let finished = self.pending.remove(&s.run);
                    return Some(started_view(self.data_root, r.name, r.at, s, finished));
                }
                Event::Skipped(s) => {
                    return Some(RunView {
                        run: None,
                        name: r.name,
                        trigger: s.trigger,
                        at: r.at,
                        status: Status::Skipped,
                        reason: Some(s.reason),
                        started: None,
                        finished: None,
                    });
                }
                _ => {}
            }
        }
    }
}

/// The `n` newest runs (of `name` only, when given), newest first.
pub fn recent(log: &RunLog, data_root: &Path, name: Option<&str>, n: usize) -> Recent {
    let mut runs = Runs::new(log, data_root, |r: &Record| {
        name.is_none_or(|want| want == r.name)
    });
    let views = runs.by_ref().take(n).collect();
    Recent {
        runs: views,
        unreadable: runs.records.unreadable,
    }
}

/// The last run (not a skip) of each name in `names`, reading back until each is found.
pub fn last_runs(log: &RunLog, data_root: &Path, names: &[&str]) -> HashMap<String, RunView> {
    let mut found: HashMap<String, RunView> = HashMap::new();
    if names.is_empty() {
        return found;
    }
    for view in Runs::new(log, data_root, |r: &Record| {
        names.contains(&r.name.as_str())
    }) {
        if view.run.is_some() && !found.contains_key(&view.name) {
            found.insert(view.name.clone(), view);
            if found.len() == names.len() {
                break;
            }
        }
    }
    found
}

/// One run by id (or by a unique prefix of its id).
pub fn find(log: &RunLog, data_root: &Path, id: &str) -> Option<RunView> {
    let matches = |r: &Record| match &r.event {
        Event::Started(s) => s.run.starts_with(id),
        Event::Finished(f) => f.run.starts_with(id),
        _ => false,
    };
    Runs::new(log, data_root, matches).next()
}

/// Whether `name` has a `started` at or after `since`. Reads back only a little past `since`.
pub fn started_since(log: &RunLog, name: &str, since: DateTime<Utc>) -> bool {
    let margin = since - chrono::Duration::minutes(5);
    for r in log.backwards() {
        let Some(t) = r.time() else { continue };
        if t < margin {
            return false;
        }
        if r.name == name && t >= since && matches!(r.event, Event::Started(_)) {
            return true;
        }
    }
    false
}
