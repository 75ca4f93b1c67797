//! Per-automation run locks: `<data root>/locks/<name>.lock` (docs/running.md).
//!
//! The lock is an exclusive `flock` (`platform::try_lock`; on Windows a lock on one byte far past
//! the data, so what the file says of its holder stays readable) on a file that is never unlinked (so two
//! runners can never hold locks on two different inodes of one name); the holder writes its pid
//! into it, the id of the run whose tree is alive while it holds it (cleared when that tree is
//! gone), and who its keeper and runner are, each as a pid and a start time, so a stop reaches that
//! very firing and never a process that got a dead one's pid ([`ask_to_stop`]). A lock found free with a run id still in it belongs to a firing whose runner and keeper
//! were both killed: its tree may still be running, and the next firing ends it first. Readers that only want to know whether a run is alive must not take the lock — a probe
//! at the wrong instant would make a real firing skip as `already_running` — so on Linux they look
//! the lock up in `/proc/locks` instead. This module must never unlink a lock file.

use crate::platform::FileExt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil;
use crate::names::Name;

/// A held run lock; released when dropped (or when the process dies and no keeper holds it).
#[derive(Debug)]
pub struct RunLock {
    file: File,
    /// The run id the lock file named when it was taken: a firing that never ended cleanly.
    interrupted: Option<String>,
}

/// Where the run id sits in the lock file (after the pid's fixed width and a space), and its room.
const RUN_AT: u64 = 11;
const RUN_WIDTH: usize = 40;
/// Where the keeper's and the runner's `<pid> <start>` sit, after the run id, and their room.
const KEEPER_AT: u64 = RUN_AT + RUN_WIDTH as u64;
const RUNNER_AT: u64 = KEEPER_AT + ID_WIDTH as u64;
const ID_WIDTH: usize = 40;

impl RunLock {
    /// The run whose firing held this lock last and never said its tree was gone (its runner and
    /// keeper were both killed): what it left may still run.
    pub fn interrupted(&self) -> Option<&str> {
        self.interrupted.as_deref()
    }

    /// Names `run` as the run whose tree is alive under this lock.
    pub fn mark(&self, run: &str) -> io::Result<()> {
        let line = format!("{:<w$}\n", run, w = RUN_WIDTH - 1);
        self.file.write_all_at(line.as_bytes(), RUN_AT)
    }

    /// Says the run's tree is gone.
    pub fn clear(&self) -> io::Result<()> {
        let line = format!("{:<w$}\n", "", w = RUN_WIDTH - 1);
        self.file.write_all_at(line.as_bytes(), RUN_AT)
    }

    /// Names the calling process as the firing's runner (the keeper's child, after the split).
    pub fn runner(&self) -> io::Result<()> {
        write_id(&self.file, RUNNER_AT, crate::process::ProcessId::me())
    }

    /// Names the calling process as the firing's keeper again, as it is once it has taken its
    /// own name (which the identity holds).
    pub fn keeper(&self) -> io::Result<()> {
        write_id(&self.file, KEEPER_AT, crate::process::ProcessId::me())
    }
}

/// Writes `id` (or blanks) in its fixed place.
fn write_id(file: &File, at: u64, id: Option<crate::process::ProcessId>) -> io::Result<()> {
    let text = id
        .map(crate::process::ProcessId::to_text)
        .unwrap_or_default();
    file.write_all_at(format!("{text:<w$}\n", w = ID_WIDTH - 1).as_bytes(), at)
}

/// The identity written at `at` in the lock file, if one is.
fn read_id(file: &File, at: u64) -> Option<crate::process::ProcessId> {
    let mut room = [0u8; ID_WIDTH];
    let n = file.read_at(&mut room, at).ok()?;
    crate::process::ProcessId::parse(std::str::from_utf8(&room[..n]).ok()?)
}

/// What [`ask_to_stop`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Nothing holds the lock: nothing of this automation runs.
    NotRunning,
    /// The firing's keeper was sent SIGTERM (it passes it on to its runner).
    Keeper(i32),
    /// Its keeper is gone; its runner was sent SIGTERM.
    Runner(i32),
    /// The lock is held, but neither the keeper nor the runner it names is alive (a pid reused,
    /// or a firing of an older version that did not name them): nothing was sent.
    Unknown,
}

/// Asks the firing holding `name`'s lock to stop, with SIGTERM to its keeper, or to its runner
/// when the keeper is gone: the runner then ends its command's tree and records the run `stopped`.
/// A process is signalled only while it is still the one the lock names (its start time).
pub fn ask_to_stop(data_root: &Path, name: &Name) -> io::Result<Asked> {
    use crate::process::Signal;
    let Some(holder) = holder(data_root, name) else {
        return Ok(Asked::NotRunning);
    };
    let Ok(file) = fsutil::open_in_data_root(
        &path(data_root, name),
        std::fs::OpenOptions::new().read(true),
    ) else {
        return Ok(Asked::Unknown);
    };
    // The keeper is the process that took the lock: one named there that does not hold it now is
    // a firing's before.
    if let Some(k) = read_id(&file, KEEPER_AT)
        && u32::try_from(k.pid) == Ok(holder)
        && k.signal(Signal::SIGTERM)?
    {
        return Ok(Asked::Keeper(k.pid));
    }
    if let Some(r) = read_id(&file, RUNNER_AT)
        && r.signal(Signal::SIGTERM)?
    {
        return Ok(Asked::Runner(r.pid));
    }
    Ok(Asked::Unknown)
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Who held it is no one now: a stop later reads no stale keeper or runner.
        let _ = write_id(&self.file, KEEPER_AT, None);
        let _ = write_id(&self.file, RUNNER_AT, None);
        // An explicit unlock, not just a close: the run's keeper shares this open file description
        // and would otherwise hold the lock until it has exited too.
        let _ = crate::platform::unlock(&self.file);
    }
}

/// The result of trying to take a lock.
#[derive(Debug)]
pub enum Acquired {
    /// This process holds it now.
    Held(RunLock),
    /// Another process holds it.
    Busy,
}

/// Why a lock file could not be opened or locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot open {}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot lock {}", .path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl crate::exit::Exits for LockError {
    /// A lock file that is no regular file is the data root's problem (3); the rest fail (1).
    fn exit(&self) -> crate::exit::Exit {
        let (Self::Open { source, .. } | Self::Lock { source, .. }) = self;
        crate::exit::Exits::exit(source)
    }
}

/// Takes the lock file at `path` (made 0600 when missing) within `wait`, trying every 20 ms;
/// `None` when another process kept it that long: the looks' lock, the metrics textfile's.
pub fn within(path: &Path, wait: std::time::Duration) -> Result<Option<File>, LockError> {
    let lock = fsutil::open_or_create_private(path).map_err(|source| LockError::Open {
        path: path.into(),
        source,
    })?;
    let until = std::time::Instant::now() + wait;
    loop {
        match crate::platform::try_lock(&lock) {
            Ok(()) => return Ok(Some(lock)),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(LockError::Lock {
                    path: path.into(),
                    source,
                });
            }
        }
    }
}

/// The lock file of `name`.
pub fn path(data_root: &Path, name: &Name) -> PathBuf {
    crate::layout::Layout::new(data_root).lock(name)
}

/// Tries to take the lock of `name` without waiting; writes this process's pid into it.
pub fn try_acquire(data_root: &Path, name: &Name) -> io::Result<Acquired> {
    let Some(file) = take(&path(data_root, name))? else {
        return Ok(Acquired::Busy);
    };
    // The run the last holder left named, if it did not clear it.
    let mut room = [0u8; RUN_WIDTH];
    let n = file.read_at(&mut room, RUN_AT).unwrap_or(0);
    let interrupted = std::str::from_utf8(&room[..n])
        .ok()
        .map(str::trim)
        .filter(|r| {
            !r.is_empty()
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        })
        .map(str::to_owned);
    // Fixed width, written in place: no truncation (a journalled metadata change) on the hot path.
    file.write_all_at(format!("{:<10}\n", std::process::id()).as_bytes(), 0)?;
    // This process becomes the firing's keeper; its runner names itself once it is split off.
    write_id(&file, KEEPER_AT, crate::process::ProcessId::me())?;
    write_id(&file, RUNNER_AT, None)?;
    Ok(Acquired::Held(RunLock { file, interrupted }))
}

/// A held lock that only keeps others out — a lock group's, or the one place a queued firing
/// waits in — naming its holder; released when dropped.
#[derive(Debug)]
pub struct Plain {
    file: File,
}

impl Drop for Plain {
    fn drop(&mut self) {
        // Explicit, as for a run lock: the keeper shares this open file description.
        let _ = crate::platform::unlock(&self.file);
    }
}

/// Room for the holder's name, after the pid's line.
const WHO_WIDTH: usize = 64;

/// Tries to take the lock at `path` without waiting; `None` when another process holds it. The
/// holder writes its pid and `who` (its automation) into it.
pub fn try_plain(path: &Path, who: &str) -> io::Result<Option<Plain>> {
    let Some(file) = take(path)? else {
        return Ok(None);
    };
    let line = format!(
        "{:<10}\n{:<w$}\n",
        std::process::id(),
        who,
        w = WHO_WIDTH - 1
    );
    file.write_all_at(line.as_bytes(), 0)?;
    Ok(Some(Plain { file }))
}

/// Whoever holds the lock at `path`, if it is held: its pid, the name it wrote, and the pid it
/// wrote (which differs from the first while a new holder has not yet written its own). Never
/// takes the lock on Linux.
pub fn plain_holder(path: &Path) -> Option<(u32, String, Option<u32>)> {
    let file = fsutil::open_in_data_root(path, std::fs::OpenOptions::new().read(true)).ok()?;
    let mut room = [0u8; 11 + WHO_WIDTH];
    let n = file.read_at(&mut room, 0).unwrap_or(0);
    let text = String::from_utf8_lossy(&room[..n]).into_owned();
    let mut lines = text.lines();
    let written = lines.next().and_then(|l| l.trim().parse().ok());
    let who = lines.next().unwrap_or_default().trim().to_owned();
    Some((owner(file)?, who, written))
}

/// The lock file at `path` (made private when missing), locked exclusively without waiting;
/// `None` when another process holds it.
fn take(path: &Path) -> io::Result<Option<File>> {
    let file = fsutil::open_or_create_private(path)?;
    match crate::platform::try_lock(&file) {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// The pid of the process holding `name`'s lock, if it is held. Never takes the lock on Linux.
pub fn holder(data_root: &Path, name: &Name) -> Option<u32> {
    let file = fsutil::open_in_data_root(
        &path(data_root, name),
        std::fs::OpenOptions::new().read(true),
    )
    .ok()?;
    owner(file)
}

/// Linux: the lock table names the holder itself, so a holder that has not yet written its pid
/// into the file (or a stale pid left there) is never mistaken for it.
#[cfg(target_os = "linux")]
fn owner(file: File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let key = format!(
        "{:02x}:{:02x}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev),
        meta.ino()
    );
    // "1: FLOCK  ADVISORY  WRITE 12345 fd:01:1234567 0 EOF"; "->" marks waiters, not holders.
    let find = |locks: &str| {
        locks.lines().find_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&key.as_str()))
                .then(|| f.get(4).and_then(|p| p.parse().ok()))
                .flatten()
        })
    };
    // The kernel lists the table a page per read(), holding its lock for one read only: a lock
    // taken or let go between two reads shifts the lines, and one can be passed over (a held lock
    // not seen, as a test under load showed). Big reads, and two more looks before "free".
    (0..3).find_map(|_| lock_table().as_deref().and_then(find))
}

/// The kernel's lock table, read in reads as large as it gives.
#[cfg(target_os = "linux")]
fn lock_table() -> Option<String> {
    let mut file = File::open("/proc/locks").ok()?;
    let mut table = Vec::new();
    let mut room = vec![0u8; 64 * 1024];
    loop {
        match std::io::Read::read(&mut file, &mut room) {
            Ok(0) => return String::from_utf8(table).ok(),
            Ok(n) => table.extend_from_slice(&room[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn owner(mut file: File) -> Option<u32> {
    // No lock table to read: probe, let go at once, and trust the pid the holder wrote.
    match crate::platform::try_lock_shared(&file) {
        Ok(()) => {
            let _ = crate::platform::unlock(&file);
            None
        }
        Err(_) => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut file, &mut text).ok()?;
            text.lines().next()?.trim().parse().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_is_exclusive_and_visible_without_taking_it() {
        let d = tempfile::tempdir().unwrap();
        let n = Name::new("x").unwrap();
        assert_eq!(holder(d.path(), &n), None);
        let held = try_acquire(d.path(), &n).unwrap();
        assert!(matches!(held, Acquired::Held(_)));
        assert_eq!(holder(d.path(), &n), Some(std::process::id()));
        assert!(matches!(try_acquire(d.path(), &n).unwrap(), Acquired::Busy));
        drop(held);
        assert_eq!(holder(d.path(), &n), None);
        assert!(path(d.path(), &n).exists(), "lock files are never unlinked");
        let Acquired::Held(again) = try_acquire(d.path(), &n).unwrap() else {
            panic!("free");
        };
        assert_eq!(again.interrupted(), None);
        // A run named and never cleared (its firing killed) is seen by the next holder, once.
        again.mark("20261203T080000.000Z-abcdef").unwrap();
        drop(again);
        let Acquired::Held(next) = try_acquire(d.path(), &n).unwrap() else {
            panic!("free");
        };
        assert_eq!(next.interrupted(), Some("20261203T080000.000Z-abcdef"));
        next.clear().unwrap();
        drop(next);
        let Acquired::Held(last) = try_acquire(d.path(), &n).unwrap() else {
            panic!("free");
        };
        assert_eq!(last.interrupted(), None);
        assert_eq!(holder(d.path(), &n), Some(std::process::id()));
    }

    #[test]
    fn a_plain_lock_names_its_holder_and_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let at = d.path().join("locks/groups/disk.lock");
        assert_eq!(plain_holder(&at), None);
        let held = try_plain(&at, "backup").unwrap().expect("free");
        let me = std::process::id();
        assert_eq!(plain_holder(&at), Some((me, "backup".to_owned(), Some(me))));
        assert!(try_plain(&at, "repack").unwrap().is_none());
        drop(held);
        assert_eq!(plain_holder(&at), None);
        let again = try_plain(&at, "repack").unwrap().expect("free again");
        assert_eq!(plain_holder(&at).map(|h| h.1), Some("repack".to_owned()));
        drop(again);
    }
}
