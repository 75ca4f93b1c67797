//! Small filesystem helpers for the private data root: the root's own check, 0700 folders, 0600
//! files, safe opens, whole writes (docs/definitions.md). The names say which rule applies: files
//! `in_data_root` are never reached through a link, files opened `following` (definitions,
//! scripts: the repository's) may be; reads are capped; `write_durably` syncs before it renames,
//! `write_cache` does not, `create_durably` never replaces anything.
//!
//! Everything in the data root goes through here so the rules are decided in one place: the data
//! root is a directory the user owns that group and others cannot write (else it is refused, exit
//! 3); a file in it is opened without following a link, never waited on when it is a FIFO, and
//! refused unless it is a regular file; what is read whole is read under a size cap. This module
//! must never follow a path outside what its caller passed.

use crate::platform::{self, DirBuilderExt, OpenOptionsExt, Refused};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Why a file where one belongs was refused (wrapped in an `io::Error`; the caller names the path).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A symbolic link: never followed in the data root.
    #[error("it is a symbolic link, which is never followed in the data root; remove it")]
    Link,
    /// A FIFO, device, socket or directory where a regular file belongs.
    #[error("it is a {0}, not a regular file; remove it")]
    NotRegular(&'static str),
    /// Larger than the cap of what is read.
    #[error("it is larger than {0} bytes; refused")]
    TooLarge(u64),
    /// A private file group or others can read or write.
    #[error("it is readable or writable by group or others (mode {0:o}); run chmod 600 on it")]
    Exposed(u32),
}

impl FileError {
    fn io(self) -> io::Error {
        io::Error::other(self)
    }

    /// The refusal inside `e`, if `e` is one.
    pub fn of(e: &io::Error) -> Option<&FileError> {
        e.get_ref()?.downcast_ref()
    }
}

fn kind_of(meta: &fs::Metadata) -> &'static str {
    platform::kind_of(meta)
}

/// Opens `path` with `options`, never following a link in its last component and never blocking
/// on a FIFO, and refuses anything but a regular file.
pub fn open_in_data_root(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = platform::no_follow_nonblocking(options)
        .open(path)
        .map_err(|e| match platform::refused_kind(&e, path) {
            Some(Refused::Link) => FileError::Link.io(),
            // O_WRONLY|O_NONBLOCK on a FIFO nobody reads.
            Some(Refused::Fifo) => FileError::NotRegular("FIFO").io(),
            Some(Refused::Directory) => FileError::NotRegular("directory").io(),
            None => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_of(&meta)).io());
    }
    Ok(file)
}

/// Opens `path` for reading, following links (for files outside the data root, such as
/// definitions) but never blocking on a FIFO, and refuses anything but a regular file.
pub fn open_following(path: &Path) -> io::Result<File> {
    open_regular_following_sized(path).map(|(file, _)| file)
}

/// [`open_following`] and the file's size when opened.
fn open_regular_following_sized(path: &Path) -> io::Result<(File, u64)> {
    let file = platform::nonblocking(OpenOptions::new().read(true)).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_of(&meta)).io());
    }
    Ok((file, meta.len()))
}

/// Reads at most `cap` bytes of `path` under the rules of [`open_following`] (a caller that
/// must refuse a larger file asks for one byte more than it allows).
pub fn read_following(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let (file, size) = open_regular_following_sized(path)?;
    // Room for the whole file and the read that finds its end: one read, where an empty buffer
    // made four (32-byte probes first) for each of 1,000 definitions.
    let room = usize::try_from(size.min(cap))
        .unwrap_or(0)
        .saturating_add(1);
    let mut bytes = Vec::with_capacity(room.min(1 << 20));
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads `path` whole (at most `cap` bytes) under the rules of [`open_in_data_root`]; `None` when it
/// does not exist.
pub fn read_in_data_root(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    read_opened(path, cap, false)
}

/// [`read_in_data_root`] for a file holding private values: also refused when group or others can read
/// or write it.
pub fn read_private(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    read_opened(path, cap, true)
}

fn read_opened(path: &Path, cap: u64, private: bool) -> io::Result<Option<Vec<u8>>> {
    let file = match open_in_data_root(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if private {
        let m = mode(&file)?;
        if exposed(m) {
            return Err(FileError::Exposed(m).io());
        }
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge(cap).io());
    }
    Ok(Some(bytes))
}

/// The cap of small private files read whole (state, settings).
pub const SMALL_FILE: u64 = 1024 * 1024;

/// Why the data root cannot be used; each message says how to fix it. Exit 3.
#[derive(Debug, thiserror::Error)]
pub enum DataRootError {
    #[error(
        "the data root {path} is not a directory (a {kind} is in the way); move it aside or choose another data root with --data-root"
    )]
    NotDirectory { path: PathBuf, kind: &'static str },
    #[error(
        "the data root {path} belongs to uid {owner}, not to you (uid {me}), so it is not private; use a data root of your own (--data-root), or as its owner: chown -R {me} {path}"
    )]
    Foreign { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "the data root {path} is writable by group or others (mode {mode:o}), so anyone could plant files in it; fix: chmod 700 {path}"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error(
        "the data root {path} cannot be written ({source}); make it writable, or choose another data root with --data-root"
    )]
    ReadOnly {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is a symbolic link to a folder ({target}); folders in the data root are never followed to somewhere else. Remove the link (the folder is made again where it belongs)"
    )]
    LinkedFolder { path: PathBuf, target: PathBuf },
    #[error("cannot use the data root {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl crate::exit::Exits for DataRootError {
    /// A data root that cannot be used is the environment's (3).
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::Environment
    }
}

/// A file of the data root that is no regular file (a link, a FIFO) is the environment's (3);
/// any other I/O error fails (1).
impl crate::exit::Exits for io::Error {
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::environment_if(FileError::of(self).is_some())
    }
}

/// What a command needs of the data root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Only reads: a missing data root is fine (nothing recorded yet).
    Read,
    /// Writes: created 0700 when missing, and must be writable.
    Write,
}

/// Checks the data root at `path`: a directory this user owns, not writable by group or others
/// (and writable by us, for `Use::Write`, which creates it 0700 when missing). Returns whether it
/// exists.
pub fn check_data_root(path: &Path, usage: Use) -> Result<bool, DataRootError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound && usage == Use::Read => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            private_dir(path).map_err(|source| match source.kind() {
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
                    DataRootError::NotDirectory {
                        path: path.into(),
                        kind: fs::metadata(path).map_or("file", |m| kind_of(&m)),
                    }
                }
                _ if read_only(&source) => DataRootError::ReadOnly {
                    path: path.into(),
                    source,
                },
                _ => DataRootError::Io {
                    path: path.into(),
                    source,
                },
            })?;
            fs::metadata(path).map_err(|source| DataRootError::Io {
                path: path.into(),
                source,
            })?
        }
        Err(source) => {
            return Err(DataRootError::Io {
                path: path.into(),
                source,
            });
        }
    };
    if !meta.is_dir() {
        return Err(DataRootError::NotDirectory {
            path: path.into(),
            kind: kind_of(&meta),
        });
    }
    if let Some((owner, me)) = platform::foreign_owner(&meta) {
        return Err(DataRootError::Foreign {
            path: path.into(),
            owner,
            me,
        });
    }
    if let Some(mode) = platform::mode_of(&meta).filter(|mode| mode & 0o022 != 0) {
        return Err(DataRootError::Exposed {
            path: path.into(),
            mode,
        });
    }
    if usage == Use::Write {
        platform::writable(path).map_err(|source| DataRootError::ReadOnly {
            path: path.into(),
            source,
        })?;
    }
    for dir in [path.to_path_buf(), crate::layout::Layout::new(path).state()] {
        linked_folders(&dir)?;
    }
    Ok(true)
}

/// Refuses a symbolic link to a folder among the entries of `dir`: every folder of the data root
/// sits directly in it or in `state/`, and is made with `mkdir`, which would follow such a link
/// and put our files elsewhere (a dangling one makes `mkdir` fail). A link where a file belongs
/// is refused by whoever opens that file.
fn linked_folders(dir: &Path) -> Result<(), DataRootError> {
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(()),
        Err(source) => {
            return Err(DataRootError::Io {
                path: dir.into(),
                source,
            });
        }
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        let path = entry.path();
        if fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            let target = fs::read_link(&path).unwrap_or_default();
            return Err(DataRootError::LinkedFolder { path, target });
        }
    }
    Ok(())
}

/// Whether an error means "this filesystem or folder cannot be written".
pub fn read_only(e: &io::Error) -> bool {
    platform::read_only(e)
}

/// Creates `dir` (and missing parents) with mode 0700.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Opens `path` for reading and writing, creating it 0600 (and its folder, 0700, when that is
/// missing) under the rules of [`open_in_data_root`]. The folder is made only the first time, so a
/// firing's hot path spares the `mkdir`.
pub fn open_or_create_private(path: &Path) -> io::Result<File> {
    let open = || {
        open_in_data_root(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600),
        )
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            private_dir(path.parent().unwrap_or(Path::new(".")))?;
            open()
        }
        other => other,
    }
}

/// Writes `bytes` to `path` whole and durably (see [`write_durably`]), mode 0600, making its folder
/// (0700) when it is missing: a private file of the data root.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    private_dir(path.parent().unwrap_or(Path::new(".")))?;
    write_durably(path, bytes, 0o600)
}

/// Replaces `path` with `bytes` (0600) by a rename, without waiting for the disk: for caches that
/// are checked when read (the index), where a crash may lose the new file but never leaves half of
/// one.
pub fn write_cache(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_by_rename(path, bytes, 0o600)
}

/// Replaces `path` with `bytes` by a rename, mode 0644 whatever the umask, without waiting for the
/// disk: a file this program writes for another user to read (the metrics textfile), rewritten
/// whole each time, so a reader sees the old one or the new one.
pub fn replace_readable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_by_rename(path, bytes, 0o644)
}

/// Replaces `path` with `bytes` by a rename of a new sibling with exactly `mode` (whatever the
/// umask), not synced; the sibling is removed when anything fails.
fn replace_by_rename(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = tmp_sibling(path);
    let _ = fs::remove_file(&tmp);
    let result = write_new(&tmp, bytes, mode)
        .and_then(|f| platform::set_mode(&f, mode))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` holding `bytes` (0600), whole or not at all, even across a crash; fails with
/// `AlreadyExists` when anything is at `path` (a link or FIFO there is left alone, never
/// followed). The new file is written and synced under another name, then linked in place, so
/// nobody sees it empty; where the file system has no hard links, it is created in place.
pub fn create_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_sibling(path);
    let _ = fs::remove_file(&tmp);
    let linked = write_new(&tmp, bytes, 0o600)
        .and_then(|f| f.sync_data())
        .and_then(|()| fs::hard_link(&tmp, path));
    let _ = fs::remove_file(&tmp);
    match linked {
        Err(e) if platform::no_hard_links(&e) => write_new(path, bytes, 0o600).map(drop),
        other => other,
    }
}

/// Writes `bytes` to `path` whole and durably, with `mode`: a temporary file written and synced,
/// then renamed over it; the folder must exist. The temporary file is created new (a link or FIFO
/// planted at its name is removed, never followed); the rename replaces whatever is at `path`, a
/// link included, without following it.
pub fn write_durably(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = tmp_sibling(path);
    let _ = fs::remove_file(&tmp);
    let result = write_new(&tmp, bytes, mode)
        .and_then(|f| f.sync_all())
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates a new file at `path` (never one that is there, never through a link) with `mode`,
/// holding `bytes`, synced: a file that is written once, such as a definition an import makes.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_new(path, bytes, mode)?.sync_all()
}

/// A new file at `path` (never one that is there, never through a link) with `mode`, holding
/// `bytes`; the caller syncs it as it needs.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<File> {
    let mut f = platform::no_follow(OpenOptions::new().write(true).create_new(true).mode(mode))
        .open(path)?;
    f.write_all(bytes)?;
    Ok(f)
}

fn tmp_sibling(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

/// The entries of `dir` whose names start with `prefix` and end with one of `suffixes`, as (what is
/// between them, path), sorted by name. A missing folder has none; names that are not UTF-8 are
/// passed over. Only names are read: what kind of file each is, is the caller's to check.
pub fn list_named(
    dir: &Path,
    prefix: &str,
    suffixes: &[&str],
) -> io::Result<Vec<(String, PathBuf)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry?;
        let name = entry.file_name();
        let Some(stem) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| suffixes.iter().find_map(|s| rest.strip_suffix(s)))
        else {
            continue;
        };
        out.push((stem.to_owned(), entry.path()));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Removes `path`; a file that is already gone is fine. Returns whether it existed.
pub fn remove_if_exists(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The first symbolic link on the way from `base` down to `path`, and where it points: `None` when
/// every step below `base` is the thing itself. `base` and what lies above it are not looked at
/// (a home folder that is a link, as on Fedora Silverblue, is where the person's files are); a
/// `path` outside `base` is walked from `/`. A step that does not exist ends the walk.
pub fn link_below(base: &Path, path: &Path) -> io::Result<Option<(PathBuf, PathBuf)>> {
    let (mut at, rest) = match path.strip_prefix(base) {
        Ok(rest) => (base.to_path_buf(), rest),
        Err(_) => (PathBuf::from("/"), path.strip_prefix("/").unwrap_or(path)),
    };
    for step in rest.components() {
        at.push(step);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&at)?;
                return Ok(Some((at, to)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The permission bits of an open file (0o600 on Windows, whose files are as private as their folder).
pub fn mode(file: &File) -> io::Result<u32> {
    Ok(platform::mode_of(&file.metadata()?).map_or(0o600, |m| m & 0o777))
}

/// True when `mode` lets group or others read or write: not private.
pub fn exposed(mode: u32) -> bool {
    mode & 0o077 != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_regular_files_open_and_nothing_blocks() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        let dir = d.path().join("dir");
        fs::create_dir(&dir).unwrap();
        for (p, want) in [
            (&fifo, "FIFO"),
            (&link, "symbolic link"),
            (&dangling, "symbolic link"),
            (&dir, "directory"),
        ] {
            for opts in [
                OpenOptions::new().read(true),
                OpenOptions::new().read(true).write(true).create(true),
                OpenOptions::new().append(true).create(true),
            ] {
                let e = open_in_data_root(p, opts).unwrap_err();
                assert!(e.to_string().contains(want), "{}: {e}", p.display());
                assert!(FileError::of(&e).is_some());
            }
        }
        assert!(
            !d.path().join("nowhere").exists(),
            "a dangling link created its target"
        );
        let dev = Path::new("/dev/null");
        assert!(
            open_in_data_root(dev, OpenOptions::new().read(true))
                .unwrap_err()
                .to_string()
                .contains("device")
        );
        let big = d.path().join("big");
        fs::write(&big, vec![b'x'; 100]).unwrap();
        assert!(matches!(
            read_in_data_root(&big, 99).map_err(|e| FileError::of(&e).map(|f| f.to_string())),
            Err(Some(_))
        ));
        assert_eq!(read_in_data_root(&big, 100).unwrap().unwrap().len(), 100);
        assert_eq!(read_in_data_root(&d.path().join("none"), 1).unwrap(), None);
    }

    #[test]
    fn atomic_writes_replace_a_planted_link_without_following_it() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        fs::write(&target, "keep").unwrap();
        let p = d.path().join("state.json");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        std::os::unix::fs::symlink(&target, tmp_sibling(&p)).unwrap();
        write_private(&p, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert!(!fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
    }

    #[test]
    fn the_data_root_must_be_a_private_directory_of_ours() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("data");
        assert!(!check_data_root(&root, Use::Read).unwrap());
        assert!(check_data_root(&root, Use::Write).unwrap());
        assert_eq!(
            fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_data_root(&root, Use::Read).unwrap_err().to_string();
        assert!(e.contains("mode 777") && e.contains("chmod 700"), "{e}");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_data_root(&root, Use::Write).unwrap());
        let file = d.path().join("file");
        fs::write(&file, "").unwrap();
        for usage in [Use::Read, Use::Write] {
            let e = check_data_root(&file, usage).unwrap_err().to_string();
            assert!(e.contains("not a directory"), "{e}");
        }
    }
}
