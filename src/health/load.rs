//! Gathers the health subjects from disk: definitions, the log's index, pause state, install
//! records. The I/O half of health; the rules are pure (`health::verdict`).
//!
//! Each automation's records are read newest first through the index, and only as far back as
//! its rules need: the window of runs, the last success, the missed-days window of a daily job,
//! the successes the headline rule compares. So health costs what it reports, not the log's size.

use std::collections::{BTreeMap, BTreeSet};

use super::{Now, Subject, ThresholdSet, Verdict, thresholds};
use crate::definition::{self, Checks};
use crate::history::Runs;
use crate::names::Name;
use crate::runlog::index::{Index, Snapshot};
use crate::runlog::{Event, Outcome, Record, RunLog};
use crate::schedule::Schedule;
use crate::settings::Settings;
use crate::state::State;

/// Why health's sources could not be read or judged.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `health.toml` cannot be used.
    #[error(transparent)]
    Thresholds(#[from] crate::settings::file::Refused),
    /// The definitions folder cannot be read.
    #[error("cannot read {}", .dir.display())]
    Definitions {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The run log (its index) cannot be read.
    #[error(transparent)]
    Log(#[from] crate::runlog::LogError),
    /// A listing of pauses, snoozes, pings or install records cannot be read.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

impl crate::exit::Exits for LoadError {
    /// Each cause's own.
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::Thresholds(e) => e.exit(),
            Self::Definitions { source, .. } => source.exit(),
            Self::Log(e) => e.exit(),
            Self::State(e) => e.exit(),
        }
    }
}

/// The most records read back for one automation, whatever its rules would like.
const MAX_RECORDS: usize = 20_000;
/// Runs read back at most to find the last success: an automation failing longer than that has
/// its last success from the index (so a look after each failure costs the same, however long it
/// has been failing), and its failing streak counted as far as this.
const FAILING_MAX: usize = 200;

/// What health reads once: the definitions (all, or the one asked about), the log's index and the
/// thresholds (the dashboard reads them too).
pub struct Sources {
    pub loaded: definition::Loaded,
    pub snapshot: Snapshot,
    pub thresholds: ThresholdSet,
    /// The installed watches the service manager stopped for good, with why: asked by the whole
    /// looks and by a firing's own ([`Sources::read`], [`Sources::of`]); a switch's sources are
    /// the data root's alone ([`Sources::of_data_root`]).
    pub stopped_watches: std::collections::HashMap<Name, String>,
}

impl Sources {
    /// Reads what the verdicts of `only` (or of every automation) need; a `health.toml` that
    /// cannot be used is an error.
    pub fn read(settings: &Settings, only: Option<&Name>) -> Result<Self, LoadError> {
        let thresholds = thresholds::load(&settings.data_root)?;
        Ok(Self::read_with(settings, only, thresholds)?.asking_manager(settings, only))
    }

    /// What the verdict of `name` needs from the data root alone: the service manager is not
    /// asked which watches it stopped (a switch's look at its one automation).
    pub fn of_data_root(settings: &Settings, name: &Name) -> Result<Self, LoadError> {
        let thresholds = thresholds::load(&settings.data_root)?;
        Self::read_with(settings, Some(name), thresholds)
    }

    /// These sources with the watches the service manager stopped (of `only`, or of all).
    fn asking_manager(self, settings: &Settings, only: Option<&Name>) -> Self {
        Self {
            stopped_watches: stopped_watches(settings, &self.loaded, only),
            ..self
        }
    }

    /// [`Sources::read`] for a page that shows what it cannot read: a `health.toml` that cannot be
    /// used is said (the returned problem) and the defaults apply.
    pub fn read_lenient(settings: &Settings) -> Result<(Self, Option<String>), LoadError> {
        let (thresholds, problem) = match thresholds::load(&settings.data_root) {
            Ok(t) => (t, None),
            Err(e) => (ThresholdSet::default(), Some(e.to_string())),
        };
        Ok((
            Self::read_with(settings, None, thresholds)?.asking_manager(settings, None),
            problem,
        ))
    }

    /// The sources of the one automation `def` already read (the runner's, after a run).
    pub fn of(settings: &Settings, def: definition::Definition) -> Result<Self, LoadError> {
        let name = def.name.clone();
        let src = Self {
            loaded: definition::Loaded {
                definitions: vec![def],
                problems: Vec::new(),
            },
            snapshot: Index::new(&RunLog::new(&settings.data_root)).refresh()?,
            thresholds: thresholds::load(&settings.data_root)?,
            stopped_watches: Default::default(),
        };
        Ok(src.asking_manager(settings, Some(&name)))
    }

    fn read_with(
        settings: &Settings,
        only: Option<&Name>,
        thresholds: ThresholdSet,
    ) -> Result<Self, LoadError> {
        let dir = settings.definitions_dir();
        let checks = Checks::of(settings);
        // One automation's verdict needs one definition, not the folder (the runner's look after
        // a run asks for exactly one).
        let loaded = match only {
            Some(name) => match definition::load_one(&dir, name, &checks) {
                Ok(d) => definition::Loaded {
                    definitions: vec![d],
                    problems: Vec::new(),
                },
                Err(definition::LoadError::Missing(_)) => definition::Loaded::default(),
                Err(definition::LoadError::Invalid(problems)) => definition::Loaded {
                    definitions: Vec::new(),
                    problems,
                },
            },
            None => definition::load_all(&dir, &checks)
                .map_err(|source| LoadError::Definitions { dir, source })?,
        };
        let snapshot = Index::new(&RunLog::new(&settings.data_root)).refresh()?;
        Ok(Self {
            loaded,
            snapshot,
            thresholds,
            stopped_watches: Default::default(),
        })
    }
}

/// What health found: each automation's subject and its verdict, in the same order.
pub struct Assessment {
    pub subjects: Vec<Subject>,
    pub verdicts: Vec<Verdict>,
}

/// The verdict pipeline for what shows subjects too (the dashboard): the subjects of `only` (or of
/// every automation) from `src`, and their verdicts now.
pub fn assess(
    settings: &Settings,
    src: &Sources,
    only: Option<&Name>,
) -> Result<Assessment, LoadError> {
    let (subjects, verdicts) = judge(settings, src, only, |subject, verdict| (subject, verdict))?
        .into_iter()
        .unzip();
    Ok(Assessment { subjects, verdicts })
}

/// The verdict pipeline for what needs only the verdicts (`health`, notifications, Healthchecks'
/// status): each subject is dropped by the worker that judged it, so the next one reuses its
/// memory (1,000 automations' runs held until the end took ~50 MB, most of `health`'s page faults).
pub fn verdicts(
    settings: &Settings,
    src: &Sources,
    only: Option<&Name>,
) -> Result<Vec<Verdict>, LoadError> {
    judge(settings, src, only, |_, verdict| verdict)
}

/// Every automation health knows of (defined ones, valid or not, names in the log, installed ones;
/// with `only`, just that one: [`judge_one`]), read and judged now, each then given to `keep` (by
/// the worker that judged it: what `keep` does not return is dropped there).
pub fn judge<R: Send>(
    settings: &Settings,
    src: &Sources,
    only: Option<&Name>,
    keep: impl Fn(Subject, Verdict) -> R + Sync,
) -> Result<Vec<R>, LoadError> {
    if let Some(name) = only {
        let (subject, verdict) = judge_one(settings, src, name);
        return Ok(vec![keep(subject, verdict)]);
    }
    let state = State::new(&settings.data_root);
    let installs: Installs = state
        .install_records_each()?
        .into_iter()
        .map(|(n, r)| (n, r.map_err(|e| crate::exit::chain_text(&e))))
        .collect();
    let mut names: BTreeSet<Name> = src
        .loaded
        .definitions
        .iter()
        .map(|d| d.name.clone())
        .collect();
    names.extend(src.loaded.problems.iter().filter_map(|p| p.name.clone()));
    names.extend(
        src.snapshot
            .names()
            .iter()
            .filter_map(|n| Name::new(n).ok()),
    );
    names.extend(installs.keys().cloned());
    let names: Vec<Name> = names.into_iter().collect();
    // Pauses, snoozes and ping records are read only for the automations that have one (one
    // listing each).
    let listed = Listed {
        definitions: src
            .loaded
            .definitions
            .iter()
            .map(|d| (&d.name, d))
            .collect(),
        invalid: src
            .loaded
            .problems
            .iter()
            .filter_map(|p| p.name.as_ref())
            .collect(),
        pauses: state.paused_names()?,
        snoozes: state.snoozed_names()?,
        pinged: crate::state::pinged_names(&settings.data_root)?,
        installs,
    };
    let now = now();
    let one = |n: &Name| {
        let (subject, verdict) = judge_with(settings, src, n, Some(&listed), &now);
        keep(subject, verdict)
    };
    Ok(crate::parallel::map(&names, PER_WORKER, one))
}

/// One automation's subject and verdict now, from `src` and its own files in the data root (its
/// pause, snooze, install record and pings; no listing of anyone else's).
pub fn judge_one(settings: &Settings, src: &Sources, name: &Name) -> (Subject, Verdict) {
    judge_with(settings, src, name, None, &now())
}

/// What a look at every automation lists once, so that each one's files are read only when it
/// has them: who is paused, snoozed or pinged, and every install record; and the definitions
/// and the invalid ones by name.
struct Listed<'s> {
    definitions: std::collections::HashMap<&'s Name, &'s definition::Definition>,
    invalid: BTreeSet<&'s Name>,
    pauses: BTreeSet<Name>,
    snoozes: BTreeSet<Name>,
    pinged: BTreeSet<Name>,
    installs: Installs,
}

/// `n`'s subject and verdict: its files read where `listed` (when given) says it has them.
fn judge_with(
    settings: &Settings,
    src: &Sources,
    n: &Name,
    listed: Option<&Listed<'_>>,
    now: &Now<chrono::Local>,
) -> (Subject, Verdict) {
    let has = |names: for<'l, 's> fn(&'l Listed<'s>) -> &'l BTreeSet<Name>| {
        listed.is_none_or(|l| names(l).contains(n))
    };
    let state = State::new(&settings.data_root);
    let definition = match listed {
        Some(l) => l.definitions.get(n).map(|d| (*d).clone()),
        None => src
            .loaded
            .definitions
            .iter()
            .find(|d| d.name == *n)
            .cloned(),
    };
    let th = src.thresholds.of(n.as_str());
    let mut subject = subject(
        settings,
        &src.snapshot,
        n,
        definition,
        th,
        has(|l| &l.pauses),
    );
    let install = match listed {
        Some(l) => l.installs.get(n).cloned(),
        None => state
            .install_record(n)
            .map_err(|e| crate::exit::chain_text(&e))
            .transpose(),
    };
    match install {
        Some(Ok(r)) => installed(&mut subject, &r, settings),
        Some(Err(e)) => subject.unreadable.push(e),
        None => {}
    }
    subject.invalid = match listed {
        Some(l) => l.invalid.contains(n),
        None => src
            .loaded
            .problems
            .iter()
            .any(|p| p.name.as_ref() == Some(n)),
    };
    if has(|l| &l.snoozes) {
        // A snooze that cannot be read holds nothing: alerts are the safe side, and the verdict
        // stays the automation's own.
        subject.snoozed = state.snoozed(n, chrono::Utc::now()).unwrap_or_else(|e| {
            errln!(
                "automations: {n}: its snooze is not honoured: {}",
                crate::exit::chain_text(&e)
            );
            None
        });
    }
    subject.watch_stopped = src.stopped_watches.get(n).cloned();
    if has(|l| &l.pinged) {
        match crate::state::read_pings(&settings.data_root, n) {
            Ok(p) => subject.pings = p,
            Err(e) => subject.unreadable.push(crate::exit::chain_text(&e)),
        }
    }
    let verdict = super::verdict(&subject, th, now);
    (subject, verdict)
}

/// What `subject`'s install record says: when, whether what it runs now is what was approved, and
/// the schedule its unit fires on.
fn installed(subject: &mut Subject, r: &crate::state::Record, settings: &Settings) {
    subject.installed_at = Some(r.installed_at);
    subject.not_approved = subject
        .definition
        .as_ref()
        .filter(|d| d.has_units())
        .and_then(|d| crate::pins::check(Some(r), d, &settings.root))
        .map(|m| m.words(&subject.name));
    subject.fires_on = r.schedule.clone().or_else(|| {
        let d = subject.definition.as_ref()?;
        d.schedule
            .clone()
            .filter(|_| subject.not_approved.is_none())
    });
}

/// The installed automations (of `only`, or all) whose path watch the service manager stopped
/// for good, with why: one query, made only when an installed automation watches paths. A manager
/// that does not answer tells nothing here (`doctor` is where that is said).
fn stopped_watches(
    settings: &Settings,
    loaded: &definition::Loaded,
    only: Option<&Name>,
) -> std::collections::HashMap<Name, String> {
    let state = State::new(&settings.data_root);
    let watching: Vec<&Name> = loaded
        .definitions
        .iter()
        .filter(|d| d.trigger.as_ref().is_some_and(|t| !t.paths.is_empty()))
        .filter(|d| only.is_none_or(|o| *o == d.name))
        .filter(|d| matches!(state.install_record(&d.name), Ok(Some(_))))
        .map(|d| &d.name)
        .collect();
    if watching.is_empty() {
        return Default::default();
    }
    let labels: Vec<crate::names::Label> = watching.iter().map(|n| settings.label(n)).collect();
    let stopped = crate::service::for_manager(settings.manager)
        .stopped_watches(&labels)
        .unwrap_or_default();
    stopped
        .into_iter()
        .filter_map(|(label, why)| {
            let i = labels.iter().position(|l| *l == label)?;
            Some((watching[i].clone(), why))
        })
        .collect()
}

/// The install records health reads, each readable or why not.
type Installs = BTreeMap<Name, Result<crate::state::Record, String>>;

/// Automations each worker thread takes at least: below that, one thread does it all. Each
/// automation is read on its own (its index file, its lines), so the cores share them.
pub(super) const PER_WORKER: usize = 32;

/// One automation's subject (without its install time and validity, which `subjects` adds).
fn subject(
    settings: &Settings,
    snapshot: &Snapshot,
    name: &Name,
    definition: Option<crate::definition::Definition>,
    th: &super::Thresholds,
    may_be_paused: bool,
) -> Subject {
    let (runs, acked_at) = gather(snapshot, settings, name.as_str(), th, definition.as_ref());
    let mut unreadable = Vec::new();
    // Only a pause file that may be there is read (a listing told which are). One that cannot be
    // read makes this automation's verdict unknown, naming it; the others are not held up by it.
    let paused = if may_be_paused {
        State::new(&settings.data_root)
            .paused(name)
            .unwrap_or_else(|e| {
                unreadable.push(crate::exit::chain_text(&e));
                None
            })
    } else {
        None
    };
    Subject {
        name: name.to_string(),
        paused,
        snoozed: None,
        installed_at: None,
        fires_on: None,
        invalid: false,
        definition,
        acked_at,
        unreadable,
        not_approved: None,
        pings: None,
        watch_stopped: None,
        runs,
    }
}

/// The runs of `records` (newest first, as `gather` read them): a firing tried again counts once,
/// by its last attempt (the newest, read first), since rates, streaks, auto-pause and
/// notifications count firings, not attempts; and when none of them succeeded, the last success
/// the index knows of, from its end alone (its age is all that is needed).
fn runs_of(
    records: Vec<Record>,
    runs: usize,
    no_success: bool,
    snapshot: &Snapshot,
    settings: &Settings,
    name: &str,
) -> Vec<crate::history::RunView> {
    let mut views: Vec<crate::history::RunView> = Vec::with_capacity(runs + 1);
    views.extend(Runs::new(records.into_iter(), &settings.data_root).ends_first());
    let mut firings = std::collections::HashSet::new();
    views.retain(|v| {
        let attempt = match (&v.finished, &v.started) {
            (Some(f), _) if f.attempt.is_some() => Some(f.firing()),
            (None, Some(st)) if st.attempt.is_some() => Some(st.firing()),
            _ => None,
        };
        attempt.is_none_or(|firing| firings.insert(firing.to_owned()))
    });
    if no_success
        && let Some(ok) = snapshot.last_ok(name)
        && let Event::Finished(f) = ok.event
    {
        views.push(crate::history::RunView {
            run: Some(f.run.clone()),
            name: ok.name,
            trigger: crate::runlog::Trigger::Manual,
            at: ok.at,
            status: crate::history::Status::Ok,
            reason: None,
            after: None,
            held_by: None,
            started: None,
            finished: Some(f),
        });
    }
    views
}

/// "Now": local wall-clock time and the clocks.
pub fn now() -> Now<chrono::Local> {
    Now {
        wall: chrono::Local::now(),
        clock: crate::clock::now(),
    }
}

/// The runs of `name` (newest first) as far back as its rules need, and its last ack or resume:
/// one stopping rule over one backwards read (the window, the last success, a daily job's days,
/// the headline's successes) that every record updates.
fn gather(
    snapshot: &Snapshot,
    settings: &Settings,
    name: &str,
    th: &super::Thresholds,
    def: Option<&crate::definition::Definition>,
) -> (
    Vec<crate::history::RunView>,
    Option<chrono::DateTime<chrono::Utc>>,
) {
    let schedule = def.and_then(|d| d.schedule.as_ref());
    let since_days = match schedule {
        Some(s) if s.counts_missed_slots() => {
            Some(chrono::Utc::now() - chrono::Duration::days(i64::from(th.missed_days_window) + 2))
        }
        _ => None,
    };
    // A run is a line or two: room for the window's, so the vector is not moved as it grows.
    let mut records: Vec<Record> = Vec::with_capacity(th.window * 2 + 2);
    let (mut runs, mut successes) = (0usize, 0usize);
    let mut acked_at = None;
    // An automation the index knows no success of has none to look for (and the line of the one
    // it knows is read only when the runs read hold none).
    let any_ok = snapshot.has_last_ok(name);
    // Skipped firings count only for the missed slots of a calendar schedule, and for the cap
    // and the chains of event-started ones.
    let calendar = schedule.is_some_and(Schedule::counts_missed_slots)
        || def.is_some_and(|d| d.trigger.is_some());
    // A run is read from its end; its start only when the end does not say it or there is none.
    let records_of = snapshot.records(name).ends_first();
    let records_of = if calendar {
        records_of
    } else {
        records_of.without_skips()
    };
    let mut last_end: Option<String> = None;
    for r in records_of {
        // One run: a `finished`, or a `started` that is not the start of the end just read.
        let started = match &r.event {
            Event::Finished(f) if f.trigger.is_some() && f.started_at.is_some() => {
                last_end = Some(f.run.clone());
                true
            }
            Event::Started(st) => last_end.take().is_none_or(|run| run != st.run),
            _ => false,
        };
        if let Event::Finished(f) = &r.event
            && f.outcome == Outcome::Ok
        {
            successes += 1;
        }
        if let Event::Resumed(_) | Event::Ack(_) = &r.event
            && acked_at.is_none()
        {
            acked_at = r.time();
        }
        let old_enough = since_days.is_none_or(|t| r.time().is_some_and(|at| at < t));
        records.push(r);
        if started {
            runs += 1;
            // The last success is looked for among the newest FAILING_MAX runs only: beyond that
            // the index names it.
            let success_known = successes >= 1 || !any_ok || runs >= FAILING_MAX;
            let enough = runs >= th.window
                && success_known
                && old_enough
                && (!th.headline_check || successes >= th.headline_min_successes);
            if enough || records.len() >= MAX_RECORDS {
                break;
            }
        }
    }
    let views = runs_of(records, runs, successes == 0, snapshot, settings, name);
    (views, acked_at)
}
