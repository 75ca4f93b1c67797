//! Room kept for the log on a full disk (docs/running.md; "disk full at `finished`").
//!
//! `<data root>/state/reserve` is a file of [`BYTES`] allocated once. An append that finds the disk
//! full frees it and tries again, so the `finished` of a command that filled the disk is still
//! recorded. A firing checks it with one `stat` (and the free space with one `statvfs`) before it
//! starts: when it is gone and cannot be made again, or the disk is full but for it, the disk is
//! full before anything ran, and the firing refuses to start rather than spend the reserve on
//! `started` and run a command whose result could not be recorded.

use crate::platform::OpenOptionsExt;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil;

/// The room kept: a `finished` line at its largest (two 8 KiB tails escaped at worst six times
/// over, facts, HTTP calls) plus the state written after it.
pub const BYTES: u64 = 256 * 1024;

/// Why a firing cannot record anything.
#[derive(Debug, thiserror::Error)]
#[error(
    "the disk of the data root {path} is full: there is no room to record a run (automations keeps {} KiB in reserve for the log); not starting it. Free some space",
    BYTES / 1024
)]
pub struct DiskFull {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl crate::exit::Exits for DiskFull {
    /// A full disk is the environment's (3).
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::Environment
    }
}

fn path(dir: &Path) -> PathBuf {
    crate::layout::Layout::new(dir).reserve()
}

/// Room a firing needs besides the reserve: its `started` line and the state written with it.
/// With less free, the reserve would go to `started`, and nothing would be left for `finished`.
#[cfg(unix)]
const MARGIN: u64 = 64 * 1024;

/// Makes sure the reserve is there and the disk has room besides it: a `stat` and a `statvfs`
/// when it is; allocates it when not.
pub fn ensure(dir: &Path) -> Result<(), DiskFull> {
    let p = path(dir);
    if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.len() >= BYTES) {
        // The field types differ by OS (u32 block counts on macOS): the casts are not idle there.
        #[cfg(unix)]
        #[allow(clippy::unnecessary_cast)]
        let free = |v: &nix::sys::statvfs::Statvfs| {
            (v.blocks_available() as u64).saturating_mul(v.fragment_size() as u64)
        };
        // Windows: no statvfs in reach; an append that finds the disk full still has the reserve.
        #[cfg(windows)]
        return Ok(());
        #[cfg(unix)]
        return match nix::sys::statvfs::statvfs(dir) {
            Ok(v) if free(&v) < MARGIN => Err(DiskFull {
                path: dir.to_path_buf(),
                source: io::Error::from_raw_os_error(nix::libc::ENOSPC),
            }),
            // Cannot tell: go on (an append that finds the disk full still has the reserve).
            _ => Ok(()),
        };
    }
    allocate(&p).map_err(|source| {
        let _ = std::fs::remove_file(&p);
        DiskFull {
            path: dir.to_path_buf(),
            source,
        }
    })
}

fn allocate(p: &Path) -> io::Result<()> {
    if let Some(parent) = p.parent() {
        fsutil::private_dir(parent)?;
    }
    let _ = std::fs::remove_file(p);
    let file =
        crate::platform::no_follow(OpenOptions::new().write(true).create_new(true).mode(0o600))
            .open(p)?;
    #[cfg(target_os = "linux")]
    {
        nix::fcntl::posix_fallocate(&file, 0, BYTES as i64).map_err(io::Error::from)?;
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No fallocate: write the bytes (not zeros, which a filesystem could keep sparse).
        let chunk = vec![0xa5u8; 64 * 1024];
        for _ in 0..BYTES / chunk.len() as u64 {
            std::io::Write::write_all(&mut &file, &chunk)?;
        }
    }
    file.sync_all()
}

/// Frees the reserve for an append that found the disk full; returns whether there was one.
pub fn release(dir: &Path) -> bool {
    std::fs::remove_file(path(dir)).is_ok()
}

/// Whether an error means the disk (or the user's quota) is full.
pub fn disk_full(e: &io::Error) -> bool {
    crate::platform::disk_full(e)
}
