//! A run's scratch folder: its private TMPDIR, its result file and HTTP log, under
//! `<data root>/scratch/<name>/`. Made and cleared only under the automation's lock; nothing in
//! it is ever reached through a link. A strict command may write here and nowhere else in the data
//! root (see `sandbox`).

use std::path::{Path, PathBuf};

use crate::fsutil;
use crate::layout::Layout;
use crate::names::Name;

/// The scratch space of one automation's runs, `<data root>/scratch/<name>/`: `tmp/`, the
/// private TMPDIR each run gets in turn (runs of one automation never overlap: its lock), and
/// beside it the run's result file and HTTP log (outside TMPDIR, so a command cleaning its temp
/// folder cannot lose them). A run leaves `tmp/` empty; what an interrupted run left, the next one
/// clears.
///
/// The folder stays between runs: making and removing a folder per run cost a firing more than
/// one of its two fsyncs, and an empty folder is checked with one listing.
pub struct Scratch {
    layout: Layout,
    name: Name,
}

impl Scratch {
    /// Clears what interrupted runs of `name` left behind and returns its scratch. Only called
    /// with `name`'s lock held, when no run of it can be using it. A link where a folder belongs
    /// is refused or removed as a link, never followed: the run's files (and their cleanup) would
    /// go somewhere else.
    pub fn prepare(data_root: &Path, name: &Name) -> std::io::Result<Self> {
        let layout = Layout::new(data_root);
        folder(&layout.scratch_dir(), false)?;
        let dir = layout.scratch(name);
        // Holding only `tmp/`, a folder has three links (on APFS, where files count too, more):
        // then only the two files can be left, and they are removed below. Anything else (an
        // older layout's `approved/`, a stray folder) is cleared.
        if folder(&dir, true)?.is_some_and(|m| crate::platform::link_count(&m) != 3) {
            clear(&dir);
        }
        let tmp = layout.scratch_tmp(name);
        if folder(&tmp, true)?.is_some() {
            clear(&tmp);
        }
        let sc = Self {
            layout,
            name: name.clone(),
        };
        sc.remove_files();
        Ok(sc)
    }

    /// The automation's scratch folder itself, `<data root>/scratch/<name>/`.
    pub fn dir(&self) -> PathBuf {
        self.layout.scratch(&self.name)
    }

    pub fn tmp(&self) -> PathBuf {
        self.layout.scratch_tmp(&self.name)
    }

    pub fn result(&self) -> PathBuf {
        self.layout.result_file(&self.name)
    }

    pub fn http_log(&self) -> PathBuf {
        self.layout.http_log(&self.name)
    }

    fn remove_files(&self) {
        let _ = std::fs::remove_file(self.result());
        let _ = std::fs::remove_file(self.http_log());
    }
}

/// `p` as a real folder: its metadata when it was there; `None` when it was missing (and made,
/// 0700, when `make`). A link or anything else where it belongs is refused, never followed.
fn folder(p: &Path, make: bool) -> std::io::Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(Some(m)),
        Ok(_) => Err(not_a_folder(p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if make {
                fsutil::private_dir(p)?;
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Windows: std's removal of a folder's tree opens each entry without following a link (a link
/// is removed as a link), so a link put in a folder's place cannot redirect it.
#[cfg(windows)]
fn clear(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if removed.is_err() {
            // A link to a folder is a folder to remove_file.
            let _ = std::fs::remove_dir(&path);
        }
    }
}

/// How deep folders are walked with a handle each; a folder deeper than this is moved up to the
/// folder being cleared and cleared from there, so any depth is cleared with at most this many
/// handles open.
#[cfg(unix)]
const DEPTH: u32 = 32;
/// At most this many rounds of moving deep folders up (each clears `DEPTH` levels of every chain).
#[cfg(unix)]
const ROUNDS: u32 = 4096;

/// Removes every entry of the folder `dir`, if it is one (a link is not followed), at any depth.
/// Everything goes through open folder handles, never through paths below `dir`: a link put in
/// a folder's place while it is cleared cannot redirect the removal elsewhere.
#[cfg(unix)]
fn clear(dir: &Path) {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(mut d) = nix::dir::Dir::open(dir, flags, nix::sys::stat::Mode::empty()) else {
        return;
    };
    let top = d.as_raw_fd();
    let mut moved = 0u64;
    for _ in 0..ROUNDS {
        let before = moved;
        clear_at(&mut d, flags, 0, top, &mut moved);
        if moved == before {
            break;
        }
    }
}

/// Clears the folder `d` (at `depth` below the one being cleared, whose handle is `top`); a
/// folder at [`DEPTH`] is moved up into `top` under a fresh name, counted in `moved`.
#[cfg(unix)]
fn clear_at(
    d: &mut nix::dir::Dir,
    flags: nix::fcntl::OFlag,
    depth: u32,
    top: std::os::fd::RawFd,
    moved: &mut u64,
) {
    use nix::dir::Type;
    use nix::unistd::{UnlinkatFlags, unlinkat};
    use std::os::fd::AsRawFd;
    let entries: Vec<(std::ffi::CString, Option<Type>)> = d
        .iter()
        .flatten()
        .filter(|e| ![&b"."[..], b".."].contains(&e.file_name().to_bytes()))
        .map(|e| (e.file_name().to_owned(), e.file_type()))
        .collect();
    for (name, kind) in entries {
        let is_dir = match kind {
            Some(t) => t == Type::Directory,
            None => {
                use nix::sys::stat::SFlag;
                nix::sys::stat::fstatat(
                    &*d,
                    name.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits())
            }
        };
        if !is_dir {
            let _ = unlinkat(&*d, name.as_c_str(), UnlinkatFlags::NoRemoveDir);
        } else if depth + 1 >= DEPTH {
            *moved += 1;
            let fresh = format!(".deep-{}-{}", std::process::id(), *moved);
            // SAFETY: renameat with two open folder handles and two C strings.
            let fresh = std::ffi::CString::new(fresh).expect("no NUL");
            unsafe {
                nix::libc::renameat(d.as_raw_fd(), name.as_ptr(), top, fresh.as_ptr());
            }
        } else {
            if let Ok(mut sub) =
                nix::dir::Dir::openat(&*d, name.as_c_str(), flags, nix::sys::stat::Mode::empty())
            {
                clear_at(&mut sub, flags, depth + 1, top, moved);
            }
            let _ = unlinkat(&*d, name.as_c_str(), UnlinkatFlags::RemoveDir);
        }
    }
}

fn not_a_folder(p: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} is not a folder (a link?); remove it",
        p.display()
    ))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove_files();
        // Usually empty: one listing; removals only when the command left files. The command may
        // have put a link where `tmp` was: that is removed as a link, never followed (the next
        // run makes the folder again).
        let tmp = self.tmp();
        match std::fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_dir() => clear(&tmp),
            Ok(_) => {
                let _ = std::fs::remove_file(&tmp);
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an interrupted run left (its result file, its HTTP log, files in TMPDIR, an older
    /// layout's per-run folder) is gone before the next run starts, and a run leaves its scratch
    /// empty.
    #[test]
    fn scratch_is_cleared_before_and_after_each_run() {
        let d = tempfile::tempdir().unwrap();
        let n = Name::new("x").unwrap();
        let a = Scratch::prepare(d.path(), &n).unwrap();
        std::fs::write(a.result(), "{\"stale\": 1}").unwrap();
        std::fs::write(a.http_log(), "x").unwrap();
        std::fs::write(a.tmp().join("f"), "x").unwrap();
        std::fs::create_dir(a.tmp().join("sub")).unwrap();
        std::fs::create_dir(
            d.path()
                .join("scratch/x")
                .join("20261129T204512.123Z-aaaaaa"),
        )
        .unwrap();
        std::mem::forget(a); // interrupted: no cleanup
        let b = Scratch::prepare(d.path(), &n).unwrap();
        let names = |p: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&d.path().join("scratch/x")), ["tmp"]);
        assert!(names(&b.tmp()).is_empty());
        std::fs::write(b.result(), "{}").unwrap();
        std::fs::write(b.tmp().join("g"), "x").unwrap();
        let dir = d.path().join("scratch/x").clone();
        drop(b);
        assert_eq!(names(&dir), ["tmp"]);
        assert!(names(&dir.join("tmp")).is_empty());
        // A link where `tmp` belongs is never followed: removed as a link (or refused), and
        // what it points at is untouched.
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("keep"), "x").unwrap();
        std::fs::remove_dir(dir.join("tmp")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("tmp")).unwrap();
        let c = Scratch::prepare(d.path(), &n).unwrap();
        assert!(std::fs::symlink_metadata(c.tmp()).unwrap().is_dir());
        drop(c);
        assert!(elsewhere.join("keep").exists());
        // A command that put a link where `tmp` was: the run's cleanup removes the link only.
        let e = Scratch::prepare(d.path(), &n).unwrap();
        std::fs::remove_dir(e.tmp()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, e.tmp()).unwrap();
        drop(e);
        assert!(elsewhere.join("keep").exists());
        assert!(std::fs::symlink_metadata(dir.join("tmp")).is_err());
        // Beside another folder (three links, as a tidy scratch has), the link is refused.
        std::fs::create_dir(dir.join("other")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("tmp")).unwrap();
        assert!(Scratch::prepare(d.path(), &n).is_err());
        assert!(elsewhere.join("keep").exists());
        // Regression: `scratch` itself a link (to a folder holding an `x`) was found out only after
        // `x` had been emptied. Now refused before anything in it is touched.
        let root = d.path().join("root2");
        std::fs::create_dir(&root).unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir_all(victim.join("x")).unwrap();
        std::fs::write(victim.join("x/keep"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, root.join("scratch")).unwrap();
        assert!(Scratch::prepare(&root, &n).is_err());
        assert!(victim.join("x/keep").exists());
    }

    /// Nested folders and links inside TMPDIR are cleared through handles; a link's target
    /// survives.
    #[test]
    fn clearing_removes_nested_folders_and_never_follows_links() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let dir = d.path().join("dir");
        std::fs::create_dir_all(dir.join("a/b/c")).unwrap();
        std::fs::write(dir.join("a/b/c/f"), "x").unwrap();
        std::fs::write(dir.join("a/g"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("a/b/link")).unwrap();
        std::os::unix::fs::symlink(&target, dir.join("top-link")).unwrap();
        clear(&dir);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(target.join("keep").exists());
        // A link given as the folder to clear: nothing happens.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        clear(&link);
        assert!(target.join("keep").exists());
    }

    /// Regression: folders nested deeper than the walk's 64 handles were left in TMPDIR (5.7 MB
    /// stayed after a command left 200 nested folders and a file at the bottom). Any depth is
    /// cleared now, with a bounded number of handles.
    #[test]
    fn folders_nested_deeper_than_the_walk_are_cleared_too() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("tmp");
        std::fs::create_dir(&dir).unwrap();
        // Made one step at a time through folder handles: the whole path is longer than
        // PATH_MAX (and the test process's working folder is everyone's).
        use nix::fcntl::{OFlag, open, openat};
        use nix::sys::stat::{Mode, mkdirat};
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut at = open(&dir, flags, Mode::empty()).unwrap();
        for _ in 0..300 {
            mkdirat(&at, "deeper-folder-name", Mode::S_IRWXU).unwrap();
            at = openat(&at, "deeper-folder-name", flags, Mode::empty()).unwrap();
        }
        let file = openat(
            &at,
            "bottom",
            OFlag::O_WRONLY | OFlag::O_CREAT,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .unwrap();
        nix::unistd::write(&file, &vec![0u8; 1 << 20]).unwrap();
        drop((file, at));
        clear(&dir);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}
