//! Why a firing runs (docs/triggers.md): a unit starts every unattended firing with
//! `--trigger schedule`; what started the unit is read here. systemd (≥ 250) tells a service
//! which timer or path unit started it (`TRIGGER_UNIT`, `TRIGGER_PATH`); a chain leaves a request
//! file for its downstream before it starts the downstream's unit. Also the two bounds of
//! event-started firings: the settle wait and `max_per_hour`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::definition::{Definition, trigger};
use crate::layout::Layout;
use crate::names::Name;
use crate::runlog::{Trigger, Upstream};
use crate::settings::{Manager, Settings};
use crate::state::{self, StateError};

/// Set by systemd in a service a timer or path unit started: that unit's name.
const TRIGGER_UNIT: &str = "TRIGGER_UNIT";
/// Set by systemd in a service a path unit started: the path that changed.
const TRIGGER_PATH: &str = "TRIGGER_PATH";

/// What started a firing, as its `started` records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub trigger: Trigger,
    /// A path-started firing's watched paths (the one that changed, when the manager said).
    pub paths: Option<Vec<String>>,
    /// A chained firing's upstream firing.
    pub after: Option<Upstream>,
    /// The slot a firing of a schedule on the clock stands for: the latest of its schedule when it
    /// began, for its timer's firings (and `run --unit`, which runs as the timer would). The slot
    /// guard, the jitter delay and `AUTOMATION_SLOT` all read this one.
    pub slot: Option<DateTime<Utc>>,
    /// The zone its schedule is read in, when it names one: the slot is said in it.
    pub zone: Option<crate::schedule::ZoneName>,
}

impl Cause {
    /// A firing started by `trigger` alone.
    pub fn plain(trigger: Trigger) -> Self {
        Self {
            trigger,
            paths: None,
            after: None,
            slot: None,
            zone: None,
        }
    }

    /// Its slot as `AUTOMATION_SLOT` and `started` give it: RFC 3339 with the offset of its
    /// schedule's zone (the machine's, unless it names one).
    pub fn slot_stamp(&self) -> Option<String> {
        self.slot
            .map(|t| crate::schedule::slot_stamp(t, self.zone, &chrono::Local))
    }
}

/// Whether the service manager says a path unit started this process.
pub fn by_path_unit() -> bool {
    std::env::var(TRIGGER_UNIT).is_ok_and(|u| u.ends_with(".path"))
}

/// What started this firing of `def`, which the command line says was `trigger`: only a unit's
/// firing (`schedule`) is looked at more closely; and the slot it stands for. A `slot` given on
/// the command line (a catch-up of a missed slot, a backfill) is that slot.
pub fn of(
    settings: &Settings,
    def: &Definition,
    trigger: Trigger,
    slot: Option<DateTime<Utc>>,
) -> Cause {
    let zone = def
        .schedule
        .as_ref()
        .and_then(crate::schedule::Schedule::zone);
    if let Some(slot) = slot {
        return Cause {
            slot: Some(slot),
            zone,
            ..Cause::plain(trigger)
        };
    }
    let now = chrono::Local::now();
    let latest = || crate::schedule::latest_slot(def.schedule.as_ref()?, &now);
    let mut cause = started_by(settings, def, trigger, latest);
    if matches!(cause.trigger, Trigger::Schedule | Trigger::Unit) {
        cause.slot = latest();
        cause.zone = zone;
    }
    cause
}

/// What started this firing (see [`of`]); `latest` is its schedule's latest slot.
fn started_by(
    settings: &Settings,
    def: &Definition,
    trigger: Trigger,
    latest: impl Fn() -> Option<DateTime<Utc>>,
) -> Cause {
    if trigger != Trigger::Schedule {
        return Cause::plain(trigger);
    }
    let unit = std::env::var(TRIGGER_UNIT).ok();
    match unit.as_deref() {
        Some(u) if u.ends_with(".path") => return path_cause(settings, def),
        Some(_) => return Cause::plain(Trigger::Schedule),
        None => {}
    }
    let layout = Layout::new(&settings.data_root);
    if take_unit_request(&layout, &def.name) {
        return Cause::plain(Trigger::Unit);
    }
    if let Some(up) = take_request(&layout, &def.name) {
        return Cause {
            after: Some(up),
            ..Cause::plain(Trigger::After)
        };
    }
    // launchd says nothing of why it started a job: a job that watches paths and has no
    // schedule, or whose latest slot is not this minute, was started by its paths.
    let watches = def.trigger.as_ref().is_some_and(|t| !t.paths.is_empty());
    if settings.manager == Manager::Launchd && watches {
        let at_slot = latest().is_some_and(|slot| (Utc::now() - slot).num_seconds() < 90);
        if !at_slot {
            return path_cause(settings, def);
        }
    }
    Cause::plain(Trigger::Schedule)
}

fn path_cause(settings: &Settings, def: &Definition) -> Cause {
    let paths = match std::env::var(TRIGGER_PATH) {
        Ok(p) if !p.is_empty() => vec![p],
        _ => watched(settings, def)
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    };
    Cause {
        paths: Some(paths),
        ..Cause::plain(Trigger::Path)
    }
}

/// `def`'s watched paths on this machine.
pub fn watched(settings: &Settings, def: &Definition) -> Vec<PathBuf> {
    def.trigger.as_ref().map_or_else(Vec::new, |t| {
        t.paths
            .iter()
            .map(|p| trigger::resolve(p, &settings.root, &settings.home))
            .collect()
    })
}

/// A chain request as its file holds it.
#[derive(Serialize, Deserialize)]
struct Request {
    upstream: Upstream,
    at: String,
}

/// Leaves a request for `name`'s next unit start: the firing `upstream` ended and it follows.
pub fn leave_request(layout: &Layout, name: &Name, upstream: &Upstream) -> Result<(), StateError> {
    let req = Request {
        upstream: upstream.clone(),
        at: crate::runlog::stamp(Utc::now()),
    };
    state::write_json(&layout.chain_request(name), &req)
}

/// How old a chain request may be and still name why a unit started: the upstream starts the
/// unit right after leaving it, so an older one was left behind (its start folded into a firing
/// already under way) and says nothing of this one.
const REQUEST_FRESH: chrono::Duration = chrono::Duration::minutes(10);

/// Takes the request waiting for `name`, if a fresh one does: renamed away first, so two starts
/// never both take it.
fn take_request(layout: &Layout, name: &Name) -> Option<Upstream> {
    let req: Request = state::take_json(&layout.chain_request(name))?;
    let at = crate::runlog::parse_stamp(&req.at)?;
    (Utc::now() - at < REQUEST_FRESH).then_some(req.upstream)
}

/// A person's `run --unit`, as its request file holds it.
#[derive(Serialize, Deserialize)]
struct UnitRequest {
    at: String,
}

/// Leaves a request for `name`'s next unit start: a person asked for it (`run --unit`).
pub fn leave_unit_request(layout: &Layout, name: &Name) -> Result<(), StateError> {
    let req = UnitRequest {
        at: crate::runlog::stamp(Utc::now()),
    };
    state::write_json(&layout.unit_request(name), &req)
}

/// How old a `run --unit` request may be: the person's command starts the unit at once and waits
/// for it; an older one was never taken and says nothing of this start.
const UNIT_REQUEST_FRESH: chrono::Duration = chrono::Duration::minutes(1);

/// Takes the `run --unit` request waiting for `name`, if a fresh one does.
fn take_unit_request(layout: &Layout, name: &Name) -> bool {
    state::take_json::<UnitRequest>(&layout.unit_request(name))
        .and_then(|r| crate::runlog::parse_stamp(&r.at))
        .is_some_and(|at| Utc::now() - at < UNIT_REQUEST_FRESH)
}

/// How much longer a path-started firing waits for its paths to be quiet for `settle`: the
/// newest change among `paths` (and, for a folder, its entries) must be `settle` old.
pub fn settle_left(paths: &[PathBuf], settle: Duration, now: SystemTime) -> Duration {
    let newest = paths.iter().filter_map(|p| newest_change(p)).max();
    match newest {
        Some(t) => settle.saturating_sub(now.duration_since(t).unwrap_or_default()),
        None => Duration::ZERO,
    }
}

/// The newest modification time of `p`, or of the entries of folder `p` (the first 10,000).
fn newest_change(p: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(p).ok()?;
    let mut newest = meta.modified().ok()?;
    if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(p)
    {
        for e in entries.take(10_000).flatten() {
            if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                newest = newest.max(t);
            }
        }
    }
    Some(newest)
}

/// When an automation's event-started firings of the last hour started.
#[derive(Default, Serialize, Deserialize)]
struct Fired {
    at: Vec<String>,
}

/// Counts this event-started firing of `name` against `max_per_hour` (under its lock): `false`,
/// and nothing counted, when it would be past the cap. A count that cannot be read starts again.
pub fn count_event_firing(
    layout: &Layout,
    name: &Name,
    max_per_hour: u32,
    now: DateTime<Utc>,
) -> Result<bool, StateError> {
    let path = layout.event_firings(name);
    let mut fired: Fired = state::read_json(&path).ok().flatten().unwrap_or_default();
    let hour_ago = now - chrono::Duration::hours(1);
    fired
        .at
        .retain(|t| crate::runlog::parse_stamp(t).is_some_and(|t| t > hour_ago && t <= now));
    if fired.at.len() >= max_per_hour as usize {
        return Ok(false);
    }
    fired.at.push(crate::runlog::stamp(now));
    state::write_json(&path, &fired)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn the_cap_counts_the_last_hour_only() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(d.path());
        std::fs::create_dir_all(layout.state()).unwrap();
        let t0 = "2026-01-01T10:00:00Z".parse::<DateTime<Utc>>().unwrap();
        for i in 0..3 {
            let t = t0 + chrono::Duration::minutes(i);
            assert!(
                count_event_firing(&layout, &n("x"), 3, t).unwrap(),
                "firing {i}"
            );
        }
        let t = t0 + chrono::Duration::minutes(30);
        assert!(!count_event_firing(&layout, &n("x"), 3, t).unwrap());
        // The first leaves the hour at 11:00: one more fits, then none.
        let t = t0 + chrono::Duration::minutes(60) + chrono::Duration::seconds(1);
        assert!(count_event_firing(&layout, &n("x"), 3, t).unwrap());
        assert!(!count_event_firing(&layout, &n("x"), 3, t).unwrap());
        // Another automation has its own count.
        assert!(count_event_firing(&layout, &n("y"), 3, t).unwrap());
    }

    #[test]
    fn settle_waits_for_the_newest_change_in_a_folder() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a");
        std::fs::write(&f, "x").unwrap();
        let written = std::fs::metadata(&f).unwrap().modified().unwrap();
        let settle = Duration::from_secs(5);
        let dir = [d.path().to_path_buf()];
        assert_eq!(
            settle_left(&dir, settle, written + Duration::from_secs(2)),
            Duration::from_secs(3)
        );
        assert_eq!(
            settle_left(&dir, settle, written + Duration::from_secs(9)),
            Duration::ZERO
        );
        // A path that is not there has nothing to wait for.
        let gone = [d.path().join("none")];
        assert_eq!(settle_left(&gone, settle, written), Duration::ZERO);
    }

    #[test]
    fn a_request_is_taken_once() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(d.path());
        let up = Upstream {
            name: "backup".into(),
            run: "r1".into(),
            outcome: crate::runlog::Outcome::Ok,
        };
        leave_request(&layout, &n("offsite"), &up).unwrap();
        assert_eq!(take_request(&layout, &n("offsite")), Some(up.clone()));
        assert_eq!(take_request(&layout, &n("offsite")), None);
        // One left behind long ago says nothing of this start, and is gone once looked at.
        let stale = Request {
            upstream: up,
            at: crate::runlog::stamp(Utc::now() - chrono::Duration::minutes(11)),
        };
        let path = layout.chain_request(&n("offsite"));
        std::fs::write(&path, serde_json::to_vec(&stale).unwrap()).unwrap();
        assert_eq!(take_request(&layout, &n("offsite")), None);
        assert!(!path.exists());
    }
}
