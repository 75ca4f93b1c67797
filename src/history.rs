//! Runs as people think of them, assembled from the run log read backwards (docs/running.md).
//!
//! A `started` with its `finished` is a finished run; a `started` without one is **running** while
//! its lock is held by the pid that started it, else **interrupted**; a `skipped` is shown as such.
//! Every reader here stops as soon as it has what it reports; readers of one automation go through
//! the index (`runlog::index`), so they cost what they report even for a name that never ran. This
//! module writes nothing but the index.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::locks;
use crate::names::Name;
use crate::runlog::index::{self, Index, Snapshot};
use crate::runlog::{
    Event, Finished, LogError, Outcome, Record, RunLog, SkipReason, Started, Trigger,
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
    /// The firing a chained one followed (or would have, when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<crate::runlog::Upstream>,
    /// A skip for a busy lock group: the group and the automation that held it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<crate::runlog::HeldBy>,
    #[serde(skip)]
    pub started: Option<Started>,
    #[serde(skip)]
    pub finished: Option<Finished>,
}

impl RunView {
    /// The slot of its schedule a run stood for (a scheduled firing's, a caught-up or backfilled
    /// one's), as its `started` or `finished` says.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        self.started
            .as_ref()
            .and_then(|s| s.slot.as_deref())
            .or_else(|| self.finished.as_ref().and_then(|f| f.slot.as_deref()))
            .and_then(crate::runlog::parse_stamp)
    }

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
        after: s.after.clone(),
        held_by: None,
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

/// Runs assembled from records read newest first: each `finished` is held until its `started`
/// comes by. The source is the whole log read backwards, or one automation's records through the
/// index; either way a reader holds on to nothing it will not report.
pub struct Runs<'a, I: Iterator<Item = Record>> {
    records: I,
    pending: HashMap<String, Finished>,
    data_root: &'a Path,
    /// A `finished` that says how and when its run started is a whole run by itself (see
    /// `index::Records::ends_first`).
    ends_first: bool,
}

impl<'a, I: Iterator<Item = Record>> Runs<'a, I> {
    /// Runs from `records`, newest first.
    pub fn new(records: I, data_root: &'a Path) -> Self {
        Self {
            records,
            pending: HashMap::new(),
            data_root,
            ends_first: false,
        }
    }
}

impl<I: Iterator<Item = Record>> Runs<'_, I> {
    /// Takes a `finished` that says how and when its run started as the whole run, for records
    /// read with `index::Records::ends_first`.
    pub fn ends_first(mut self) -> Self {
        self.ends_first = true;
        self
    }
}

impl<I: Iterator<Item = Record>> Iterator for Runs<'_, I> {
    type Item = RunView;

    fn next(&mut self) -> Option<RunView> {
        loop {
            let r = self.records.next()?;
            match r.event {
                Event::Finished(f) => {
                    if self.ends_first
                        && let (Some(trigger), Some(at)) = (f.trigger, f.started_at.clone())
                    {
                        return Some(RunView {
                            run: Some(f.run.clone()),
                            name: r.name,
                            trigger,
                            at,
                            status: Status::of(f.outcome),
                            reason: None,
                            after: None,
                            held_by: None,
                            started: None,
                            finished: Some(f),
                        });
                    }
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
                        after: s.after,
                        held_by: s.held_by,
                        started: None,
                        finished: None,
                    });
                }
                _ => {}
            }
        }
    }
}

/// The runs of `name`, newest first, through the index (O(what is read), also for a name that
/// never ran).
pub fn runs_of<'a>(
    snapshot: &'a Snapshot,
    data_root: &'a Path,
    name: &str,
) -> Runs<'a, index::Records<'a>> {
    Runs::new(snapshot.records(name), data_root)
}

/// The `n` newest runs (of `name` only, when given), newest first.
pub fn recent(
    log: &RunLog,
    data_root: &Path,
    name: Option<&str>,
    n: usize,
) -> Result<Recent, LogError> {
    match name {
        Some(name) => {
            let snapshot = Index::new(log).refresh()?;
            let runs = runs_of(&snapshot, data_root, name).take(n).collect();
            Ok(Recent {
                runs,
                unreadable: snapshot.unreadable,
            })
        }
        None => {
            let mut runs = Runs::new(log.backwards(), data_root);
            let views = runs.by_ref().take(n).collect();
            if let Some(e) = runs.records.error.take() {
                return Err(e);
            }
            Ok(Recent {
                runs: views,
                unreadable: runs.records.unreadable,
            })
        }
    }
}

/// The newest run of `name` (not a skip; its newest skip when it never ran) — with `failed`, the
/// newest that did not end ok — through the index, reading back only as far as it is.
pub fn latest(
    log: &RunLog,
    data_root: &Path,
    name: &str,
    failed: bool,
) -> Result<Option<RunView>, LogError> {
    let snapshot = Index::new(log).refresh()?;
    let mut runs = Runs::new(snapshot.records(name).without_skips(), data_root);
    let found = runs.find(|v| {
        v.run.is_some()
            && (!failed
                || matches!(
                    v.status,
                    Status::Failed | Status::Timeout | Status::Stopped | Status::Interrupted
                ))
    });
    if found.is_some() || failed {
        return Ok(found);
    }
    // Never ran, but skipped: the newest skip is what there is to show (`runs` lists it too).
    let mut all = Runs::new(snapshot.records(name), data_root);
    Ok(all.find(|v| v.status == Status::Skipped))
}

/// The last run (not a skip) of each name in `names`, through the index.
pub fn last_runs(
    log: &RunLog,
    data_root: &Path,
    names: &[&str],
) -> Result<HashMap<String, RunView>, LogError> {
    let mut found = HashMap::new();
    if names.is_empty() {
        return Ok(found);
    }
    let snapshot = Index::new(log).refresh()?;
    for name in names {
        let mut runs = Runs::new(snapshot.records(name).without_skips(), data_root);
        if let Some(view) = runs.find(|v| v.run.is_some()) {
            found.insert((*name).to_owned(), view);
        }
    }
    Ok(found)
}

/// What a run id or prefix names.
#[derive(Debug)]
pub enum Found {
    /// Exactly one run: the id itself, or the only one it is a prefix of.
    One(Box<RunView>),
    /// No run.
    Nothing,
    /// Several runs share the prefix: the newest few, and how many there are in all.
    Ambiguous { some: Vec<String>, all: usize },
}

/// How many candidates an ambiguous prefix lists.
const CANDIDATES: usize = 10;

/// How much earlier than its id says a run's lines may be (a clock stepped back since).
const CLOCK_SLACK: chrono::Duration = chrono::Duration::hours(1);

/// The earliest time the run `id` (or a run whose id starts with `id`) can have started: run ids
/// begin with their start time (`20261203T075523.420Z-…`), so a prefix as far as the date bounds
/// it. `None` for a shorter prefix.
fn earliest(id: &str) -> Option<DateTime<Utc>> {
    let stamp = id.get(..15).filter(|_| id.len() >= 15);
    let parsed = match stamp {
        Some(t) => chrono::NaiveDateTime::parse_from_str(t, "%Y%m%dT%H%M%S").ok(),
        None => chrono::NaiveDate::parse_from_str(id.get(..8)?, "%Y%m%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0)),
    };
    parsed.map(|t| t.and_utc())
}

/// One run by its id, or by a prefix only it has: an exact id always wins. Reads back from the
/// end only as far as the id's own time (ids start with it), less an hour for a clock stepped
/// back, and on only when nothing was found there (lines out of order by more than that); through
/// the index when the automation is known (`name`), reading only its lines. A prefix shorter than
/// a date reads the whole log.
pub fn find(
    log: &RunLog,
    data_root: &Path,
    id: &str,
    name: Option<&str>,
) -> Result<Found, LogError> {
    let since = earliest(id).map(|t| t - CLOCK_SLACK);
    let older = |r: &Record| since.is_some_and(|s| r.time().is_some_and(|t| t < s));
    for bounded in [true, false] {
        let mut stopped = false;
        let mut within = |r: &Record| {
            stopped |= bounded && older(r);
            !stopped
        };
        let found = match name {
            Some(name) => {
                let snapshot = Index::new(log).refresh()?;
                pick(
                    snapshot.records(name).take_while(&mut within),
                    data_root,
                    id,
                )
            }
            None => {
                let mut records = log.backwards();
                let found = pick(records.by_ref().take_while(&mut within), data_root, id);
                if let Some(e) = records.error.take() {
                    return Err(e);
                }
                found
            }
        };
        if !matches!(found, Found::Nothing) || !stopped {
            return Ok(found);
        }
    }
    Ok(Found::Nothing)
}

/// The run `id` names among `records` (newest first).
fn pick(records: impl Iterator<Item = Record>, data_root: &Path, id: &str) -> Found {
    let mut ids: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<Record> = Vec::new();
    let mut exact: Vec<Record> = Vec::new();
    for r in records {
        let run = match &r.event {
            Event::Started(s) => &s.run,
            Event::Finished(f) => &f.run,
            _ => continue,
        };
        if run == id {
            exact.push(r);
            continue;
        }
        if !run.starts_with(id) {
            continue;
        }
        if seen.insert(run.clone()) {
            ids.push(run.clone());
        }
        // Keep the records of the first candidate only: a second makes it ambiguous anyway.
        if ids.len() == 1 && ids[0] == *run {
            kept.push(r);
        }
    }
    let one = |recs: Vec<Record>| {
        Runs::new(recs.into_iter(), data_root)
            .next()
            .map_or(Found::Nothing, |v| Found::One(Box::new(v)))
    };
    if !exact.is_empty() {
        one(exact)
    } else if ids.len() == 1 {
        one(kept)
    } else if ids.is_empty() {
        Found::Nothing
    } else {
        Found::Ambiguous {
            all: ids.len(),
            some: ids.into_iter().take(CANDIDATES).collect(),
        }
    }
}

/// How far before the slot a scan of the log reads back: a firing's `at` can come a little
/// before the minute it stands for on a clock that was stepped back.
const SLOT_MARGIN_MINUTES: i64 = 5;

/// Whether `name`'s slot at `slot` has had its run: a scheduled `started` that stood for that
/// slot, or a backfill of it. A `started` written before slots were recorded stood for the latest
/// slot when it began, so any at or after `slot` counts. Reads back only a little past `slot`.
pub fn slot_ran(log: &RunLog, name: &str, slot: DateTime<Utc>) -> bool {
    let margin = slot - chrono::Duration::minutes(SLOT_MARGIN_MINUTES);
    for r in log.backwards() {
        let Some(t) = r.time() else { continue };
        if t < margin {
            return false;
        }
        let Event::Started(s) = &r.event else {
            continue;
        };
        if r.name != name || !matches!(s.trigger, Trigger::Schedule | Trigger::Backfill) {
            continue;
        }
        match s.slot.as_deref().and_then(crate::runlog::parse_stamp) {
            Some(x) if x == slot => return true,
            Some(_) => {}
            None => {
                if s.trigger == Trigger::Schedule && t >= slot {
                    return true;
                }
            }
        }
    }
    false
}

/// One firing of `name`'s schedule as the log has it, run or skipped: the slot it stood for
/// (`None` in records written before slots were), and when it fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fired {
    pub slot: Option<DateTime<Utc>>,
    pub at: DateTime<Utc>,
}

/// The newest firing of `name`'s schedule (`started` or `skipped` with trigger `schedule`) since
/// `from` that `wanted` accepts; the log is read back only until it is found.
pub fn last_fired(
    log: &RunLog,
    name: &str,
    from: DateTime<Utc>,
    wanted: impl Fn(&Fired) -> bool,
) -> Option<Fired> {
    let margin = from - chrono::Duration::minutes(SLOT_MARGIN_MINUTES);
    for r in log.backwards() {
        let Some(at) = r.time() else { continue };
        if at < margin {
            return None;
        }
        if r.name != name {
            continue;
        }
        let (trigger, slot) = match &r.event {
            Event::Started(s) => (s.trigger, s.slot.as_deref()),
            Event::Skipped(s) => (s.trigger, s.slot.as_deref()),
            _ => continue,
        };
        let fired = Fired {
            slot: slot.and_then(crate::runlog::parse_stamp),
            at,
        };
        if trigger == Trigger::Schedule && wanted(&fired) {
            return Some(fired);
        }
    }
    None
}

/// The slots of `name` at or after `from` that have a run that succeeded: a scheduled firing, a
/// caught-up or a backfilled one that stood for the slot and finished `ok`.
pub fn slots_succeeded(
    log: &RunLog,
    name: &str,
    from: DateTime<Utc>,
) -> std::collections::BTreeSet<DateTime<Utc>> {
    let margin = from - chrono::Duration::minutes(SLOT_MARGIN_MINUTES);
    let mut ok_runs = std::collections::HashSet::new();
    let mut out = std::collections::BTreeSet::new();
    for r in log.backwards() {
        // A run starts after its slot: one that started before `from` stood for none.
        if r.time().is_some_and(|t| t < margin) {
            break;
        }
        if r.name != name {
            continue;
        }
        match &r.event {
            Event::Finished(f) if f.outcome == Outcome::Ok => {
                ok_runs.insert(f.run.clone());
            }
            Event::Started(s) => {
                if ok_runs.contains(&s.run)
                    && let Some(slot) = s.slot.as_deref().and_then(crate::runlog::parse_stamp)
                    && slot >= from
                {
                    out.insert(slot);
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `name` has a scheduled `started` at or after `since` (a person's run consumes no
/// slot). Reads back only a little past `since`.
pub fn scheduled_since(log: &RunLog, name: &str, since: DateTime<Utc>) -> bool {
    let margin = since - chrono::Duration::minutes(5);
    for r in log.backwards() {
        let Some(t) = r.time() else { continue };
        if t < margin {
            return false;
        }
        if r.name == name
            && t >= since
            && matches!(&r.event, Event::Started(s) if s.trigger == crate::runlog::Trigger::Schedule)
        {
            return true;
        }
    }
    false
}
