//! Step 4 with a definition's policies (docs/policies.md): the automation's lock and its lock
//! group's, and what a firing does when either is busy — skip (the default), wait in the one
//! queue place (`queue`), or stop the running firing and take its place (`replace`).
//!
//! Locks are always taken in one order, the automation's then its group's, and none is held while
//! waiting: a waiting firing holds only `locks/<name>.queue`, so readers never see it as running.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::supervise::Signals;
use super::{RunError, new_run_id};
use crate::definition::{Definition, Overlap};
use crate::layout::Layout;
use crate::locks::{self, Acquired, Plain, RunLock};
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
    Group { name: String, pid: Option<u32> },
}

/// Takes the automation's lock and its group's, applying its `overlap` while either is busy.
pub fn acquire(
    settings: &Settings,
    def: &Definition,
    signals: &mut Signals,
) -> Result<Result<Held, Busy>, RunError> {
    let layout = settings.layout();
    let policy = &def.policy;
    let name = def.name.as_str();
    let mut queued: Option<Plain> = None;
    let mut replacing: Option<(String, Instant)> = None;
    let queue_until = Instant::now() + Duration::from_secs(u64::from(def.timeout_seconds));
    loop {
        let holder = match try_both(settings, def)? {
            Ok((lock, group)) => {
                let run_id = replacing.map(|(id, _)| id);
                if run_id.is_some() {
                    // Claimed by the stopped firing; one that ended by itself first left it.
                    let _ = crate::fsutil::remove_if_exists(&layout.replaced_note(name));
                }
                return Ok(Ok(Held {
                    lock,
                    group,
                    run_id,
                }));
            }
            Err(holder) => holder,
        };
        let held_by = match &holder {
            Holder::Group { name: holder, .. } => policy.lock.as_ref().map(|g| HeldBy {
                lock: g.to_string(),
                name: holder.clone(),
            }),
            Holder::Own => None,
        };
        let busy = |reason, detail: String| Busy {
            reason,
            detail,
            held_by: held_by.clone(),
        };
        match policy.overlap {
            Overlap::Skip => return Ok(Err(busy(SkipReason::AlreadyRunning, String::new()))),
            Overlap::Queue => {
                if queued.is_none() {
                    match locks::try_plain(&layout.queue_lock(name), name).map_err(io)? {
                        Some(place) => queued = Some(place),
                        None => {
                            let detail = ": another firing already waits for the running one";
                            return Ok(Err(busy(SkipReason::AlreadyQueued, detail.into())));
                        }
                    }
                    errln!(
                        "automations: {name}: {} is running; waiting for it (overlap = \"queue\", at most {} s)",
                        who(&holder, name),
                        def.timeout_seconds
                    );
                }
                if Instant::now() >= queue_until {
                    let detail = format!(
                        ": waited {} s (its timeout_seconds) and {} was still running",
                        def.timeout_seconds,
                        who(&holder, name)
                    );
                    return Ok(Err(busy(SkipReason::AlreadyRunning, detail)));
                }
            }
            Overlap::Replace => match &replacing {
                None => {
                    let id = new_run_id(chrono::Utc::now());
                    if let Err(why) = ask_to_stop(settings, def, &holder, &id) {
                        return Ok(Err(busy(SkipReason::AlreadyRunning, format!(": {why}"))));
                    }
                    errln!(
                        "automations: {name}: stopping {} to run in its place (overlap = \"replace\")",
                        who(&holder, name)
                    );
                    replacing = Some((id, Instant::now() + replace_wait()));
                }
                Some((_, until)) if Instant::now() >= *until => {
                    let detail = format!(
                        ": {} did not end within {} s of being asked to stop",
                        who(&holder, name),
                        replace_wait().as_secs()
                    );
                    return Ok(Err(busy(SkipReason::AlreadyRunning, detail)));
                }
                Some(_) => {}
            },
        }
        if signals.wait_for_stop(POLL) {
            let detail = ": stopped while it waited for the running firing".to_owned();
            return Ok(Err(busy(SkipReason::Stopped, detail)));
        }
    }
}

/// Both locks, in order; or whose was busy (none is kept then).
fn try_both(
    settings: &Settings,
    def: &Definition,
) -> Result<Result<(RunLock, Option<Plain>), Holder>, RunError> {
    let lock = match locks::try_acquire(&settings.data_root, &def.name).map_err(|e| {
        let at = locks::path(&settings.data_root, &def.name);
        io(e).context(format!("cannot take the lock {}", at.display()))
    })? {
        Acquired::Held(l) => l,
        Acquired::Busy => return Ok(Err(Holder::Own)),
    };
    let Some(group) = &def.policy.lock else {
        return Ok(Ok((lock, None)));
    };
    let at = settings.layout().group_lock(group.as_str());
    match locks::try_plain(&at, def.name.as_str()).map_err(|e| {
        io(e).context(format!(
            "cannot take the lock group's lock {}",
            at.display()
        ))
    })? {
        Some(g) => Ok(Ok((lock, Some(g)))),
        None => {
            let (pid, name) = locks::plain_holder(&at).unzip();
            Ok(Err(Holder::Group {
                name: name.unwrap_or_default(),
                pid,
            }))
        }
    }
}

/// Who holds it, in words.
fn who(holder: &Holder, name: &str) -> String {
    match holder {
        Holder::Own => format!("the previous firing of {name}"),
        Holder::Group { name: other, .. } if other == name => {
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
/// records the run `stopped` (class `replaced`). Why not, when it cannot.
fn ask_to_stop(
    settings: &Settings,
    def: &Definition,
    holder: &Holder,
    run_id: &str,
) -> Result<(), String> {
    let (victim, pid) = match holder {
        Holder::Own => (
            def.name.to_string(),
            locks::holder(&settings.data_root, &def.name),
        ),
        Holder::Group { name, pid } => (name.clone(), *pid),
    };
    let pid = pid
        .filter(|p| *p > 1 && *p != std::process::id())
        .ok_or_else(|| format!("cannot tell which process runs {victim}, to replace it"))?;
    let note = Note {
        by: run_id.to_owned(),
        name: def.name.to_string(),
        at: crate::runlog::stamp(chrono::Utc::now()),
    };
    let at = settings.layout().replaced_note(&victim);
    crate::state::write_json(&at, &note)
        .map_err(|e| format!("cannot leave the note for the run it replaces: {e}"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .map_err(|e| format!("cannot ask {victim}'s runner (pid {pid}) to stop: {e}"))
}

/// For a stopped run of `name`: the firing that replaced it (its run id and automation), when a
/// fresh note says so. The note is taken (renamed away first), so only one run claims it.
pub fn replaced_by(layout: &Layout, name: &str) -> Option<(String, String)> {
    let at = layout.replaced_note(name);
    let taken = at.with_extension("taken");
    std::fs::rename(&at, &taken).ok()?;
    let note: Option<Note> = crate::state::read_json(&taken).ok().flatten();
    let _ = std::fs::remove_file(&taken);
    let note = note?;
    let left = crate::runlog::parse_stamp(&note.at)?;
    let age = chrono::Utc::now().signed_duration_since(left);
    (age < chrono::Duration::seconds(replace_wait().as_secs() as i64 + 30))
        .then_some((note.by, note.name))
}

fn io(e: std::io::Error) -> anyhow::Error {
    anyhow::Error::from(e)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replacing_firing_waits_longer_than_a_stop_takes() {
        let stop = super::super::supervise::GRACE + super::super::supervise::KILL_WAIT;
        assert!(super::replace_wait() >= stop + std::time::Duration::from_secs(5));
    }
}
