//! Step 4 with a definition's policies (docs/policies.md): the automation's lock and its lock
//! group's, and what a firing does when either is busy — skip (the default), wait in the one
//! queue place (`queue`), or stop the running firing and take its place (`replace`).
//!
//! Locks are always taken in one order, the automation's then its group's, never by waiting, and
//! none is held while waiting: a waiting firing holds only `locks/<name>.queue` and looks at a busy
//! group without taking its automation's lock, so readers do not see it as running.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::supervise::Signals;
use super::{RunError, new_run_id};
use crate::definition::{Definition, Overlap};
use crate::layout::Layout;
use crate::locks::{self, Acquired, Plain, RunLock};
use crate::names::Name;
use crate::runlog::{HeldBy, SkipReason};
use crate::settings::Settings;

/// How often a waiting firing looks at the locks again.
const POLL: Duration = Duration::from_millis(50);

/// How long a replacing firing waits for the one it stopped to end.
pub fn replace_wait() -> Duration {
    Duration::from_secs(u64::from(crate::definition::policy::REPLACE_WAIT_SECONDS))
}

/// What a firing holds once it may run.
pub struct Held {
    pub lock: RunLock,
    /// Its lock group's, when it names one.
    pub group: Option<Plain>,
    /// A replacing firing's run id, made before it asked the running one to stop (whose
    /// `finished` names it).
    pub run_id: Option<String>,
}

/// A firing that may not run: why, in the log's words and for people, and which automation held
/// its lock group.
pub struct Busy {
    pub reason: SkipReason,
    pub detail: String,
    pub held_by: Option<HeldBy>,
}

/// Whose lock was busy.
enum Holder {
    /// The automation's own: another firing of it.
    Own,
    /// Its group's, held by this automation (maybe itself, from a person's run).
    Group { name: String },
}

/// Takes the automation's lock and its group's, applying its `overlap` while either is busy.
pub fn acquire(
    settings: &Settings,
    def: &Definition,
    signals: &mut Signals,
) -> Result<Result<Held, Busy>, RunError> {
    let layout = settings.layout();
    let mut queued: Option<Plain> = None;
    let mut replacing: Option<Replacing> = None;
    let queue_until = Instant::now() + Duration::from_secs(u64::from(def.timeout_seconds));
    loop {
        let holder = match try_both(settings, def)? {
            Ok((lock, group)) => {
                forget(&layout, replacing.as_ref());
                return Ok(Ok(Held {
                    lock,
                    group,
                    run_id: replacing.map(|r| r.run_id),
                }));
            }
            Err(holder) => holder,
        };
        let waited = match def.policy.overlap {
            Overlap::Skip => Err((SkipReason::AlreadyRunning, String::new())),
            Overlap::Queue => queue(&layout, def, &holder, &mut queued, queue_until)?,
            Overlap::Replace => replace(settings, def, &holder, &mut replacing),
        };
        let stopped = || {
            let detail = ": stopped while it waited for the running firing".to_owned();
            (SkipReason::Stopped, detail)
        };
        let skip = match waited {
            Ok(()) if signals.wait_for_stop(POLL) => stopped(),
            Ok(()) => continue,
            Err(skip) => skip,
        };
        // A note left for a firing that then ended by itself (or was never reached) must not
        // name this one when that automation is stopped later.
        forget(&layout, replacing.as_ref());
        let held_by = match holder {
            Holder::Group { name: holder, .. } => def.policy.lock.as_ref().map(|g| HeldBy {
                lock: g.to_string(),
                name: holder,
            }),
            Holder::Own => None,
        };
        return Ok(Err(Busy {
            reason: skip.0,
            detail: skip.1,
            held_by,
        }));
    }
}

/// What one look at busy locks decided: go on waiting, or the skip.
type Waited = Result<(), (SkipReason, String)>;

/// `queue`: takes the one place to wait in (or is the firing that finds it taken), and waits
/// until its timeout.
fn queue(
    layout: &Layout,
    def: &Definition,
    holder: &Holder,
    queued: &mut Option<Plain>,
    until: Instant,
) -> Result<Waited, RunError> {
    let name = &def.name;
    if queued.is_none() {
        let queue = layout.queue_lock(name);
        let place = locks::try_plain(&queue, name.as_str()).map_err(|e| lock_error(&queue, e))?;
        let Some(place) = place else {
            let detail = ": another firing already waits for the running one".to_owned();
            return Ok(Err((SkipReason::AlreadyQueued, detail)));
        };
        *queued = Some(place);
        errln!(
            "automations: {name}: {} is running; waiting for it (overlap = \"queue\", at most {} s)",
            who(holder, name),
            def.timeout_seconds
        );
    }
    if Instant::now() >= until {
        let detail = format!(
            ": waited {} s (its timeout_seconds) and {} was still running",
            def.timeout_seconds,
            who(holder, name)
        );
        return Ok(Err((SkipReason::AlreadyRunning, detail)));
    }
    Ok(Ok(()))
}

/// `replace`: asks the holder to stop once, then waits for it at most [`replace_wait`].
fn replace(
    settings: &Settings,
    def: &Definition,
    holder: &Holder,
    replacing: &mut Option<Replacing>,
) -> Waited {
    let name = &def.name;
    match replacing {
        None => {
            let run_id = new_run_id(chrono::Utc::now());
            let victim = ask_to_stop(settings, def, holder, &run_id)
                .map_err(|why| (SkipReason::AlreadyRunning, format!(": {why}")))?;
            errln!(
                "automations: {name}: stopping {} to run in its place (overlap = \"replace\")",
                who(holder, name)
            );
            *replacing = Some(Replacing {
                run_id,
                victim,
                until: Instant::now() + replace_wait(),
            });
            Ok(())
        }
        Some(r) if Instant::now() >= r.until => Err((
            SkipReason::AlreadyRunning,
            format!(
                ": {} did not end within {} s of being asked to stop",
                who(holder, name),
                replace_wait().as_secs()
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// A replacing firing asked `victim`'s runner to stop: its own run id, and how long it waits.
struct Replacing {
    run_id: String,
    victim: Name,
    until: Instant,
}

/// Removes the note a replacing firing left, if any.
fn forget(layout: &Layout, replacing: Option<&Replacing>) {
    if let Some(r) = replacing {
        let _ = crate::fsutil::remove_if_exists(&layout.replaced_note(&r.victim));
    }
}

/// Both locks, in order; or whose was busy (none is kept then). A busy group is seen without
/// taking the automation's lock, so a firing waiting for its group does not show as running.
fn try_both(
    settings: &Settings,
    def: &Definition,
) -> Result<Result<(RunLock, Option<Plain>), Holder>, RunError> {
    let group_at = def
        .policy
        .lock
        .as_ref()
        .map(|g| settings.layout().group_lock(g));
    if let Some(holder) = group_at.as_deref().and_then(group_holder) {
        return Ok(Err(holder));
    }
    let lock = match locks::try_acquire(&settings.data_root, &def.name)
        .map_err(|e| lock_error(&locks::path(&settings.data_root, &def.name), e))?
    {
        Acquired::Held(l) => l,
        Acquired::Busy => return Ok(Err(Holder::Own)),
    };
    let Some(at) = group_at else {
        return Ok(Ok((lock, None)));
    };
    let taken = locks::try_plain(&at, def.name.as_str()).map_err(|e| lock_error(&at, e))?;
    match taken {
        Some(g) => Ok(Ok((lock, Some(g)))),
        None => Ok(Err(group_holder(&at).unwrap_or(Holder::Group {
            name: String::new(),
        }))),
    }
}

/// Who holds the group lock at `at`, when it is held; its automation only when the holder has
/// written its own (the lock table's pid and the file's agree: not a holder that has just let go,
/// nor one that has not yet named itself).
fn group_holder(at: &std::path::Path) -> Option<Holder> {
    let (pid, name, written) = locks::plain_holder(at)?;
    let named = written == Some(pid);
    Some(Holder::Group {
        name: if named { name } else { String::new() },
    })
}

/// Who holds it, in words.
fn who(holder: &Holder, name: &Name) -> String {
    match holder {
        Holder::Own => format!("the previous firing of {name}"),
        Holder::Group { name: other, .. } if other == name.as_str() => {
            format!("another firing of {name} (its lock group)")
        }
        Holder::Group { name: other, .. } => format!("{other} (the same lock group)"),
    }
}

/// The note a replacing firing leaves for the one it stops.
#[derive(Serialize, Deserialize)]
struct Note {
    /// The replacing firing's run.
    by: String,
    /// Its automation.
    name: String,
    /// When it was left; an old one says nothing.
    at: String,
}

/// Leaves the note, then sends SIGTERM to the runner holding the lock, which ends its tree and
/// records the run `stopped` (class `replaced`); the automation it stops. Why not, when it cannot
/// (the note is gone again then).
fn ask_to_stop(
    settings: &Settings,
    def: &Definition,
    holder: &Holder,
    run_id: &str,
) -> Result<Name, String> {
    let unknown = || "cannot tell which process holds the lock, to replace it".to_owned();
    let victim = match holder {
        Holder::Own => def.name.clone(),
        Holder::Group { name } => Name::new(name).map_err(|_| unknown())?,
    };
    let note = Note {
        by: run_id.to_owned(),
        name: def.name.to_string(),
        at: crate::runlog::stamp(chrono::Utc::now()),
    };
    let at = settings.layout().replaced_note(&victim);
    crate::state::write_json(&at, &note)
        .map_err(|e| format!("cannot leave the note for the run it replaces: {e}"))?;
    // The holder's own run lock names its keeper and runner: only they are signalled.
    let why = match locks::ask_to_stop(&settings.data_root, &victim) {
        Ok(locks::Asked::Keeper(_) | locks::Asked::Runner(_)) => return Ok(victim),
        Ok(locks::Asked::NotRunning | locks::Asked::Unknown) => unknown(),
        Err(e) => format!("cannot ask {victim}'s firing to stop: {e}"),
    };
    let _ = crate::fsutil::remove_if_exists(&at);
    Err(why)
}

/// For a stopped run of `name`: the firing that replaced it (its run id and automation), when a
/// fresh note says so. The note is taken (renamed away first), so only one run claims it.
pub fn replaced_by(layout: &Layout, name: &Name) -> Option<(String, String)> {
    let note: Note = crate::state::take_json(&layout.replaced_note(name))?;
    let left = crate::runlog::parse_stamp(&note.at)?;
    let age = chrono::Utc::now().signed_duration_since(left);
    (age < chrono::Duration::seconds(replace_wait().as_secs() as i64 + 30))
        .then_some((note.by, note.name))
}

fn lock_error(path: &std::path::Path, source: std::io::Error) -> RunError {
    RunError::Lock {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replacing_firing_waits_longer_than_a_stop_takes() {
        let stop = super::super::supervise::GRACE + super::super::supervise::KILL_WAIT;
        assert!(super::replace_wait() >= stop + std::time::Duration::from_secs(5));
    }
}
