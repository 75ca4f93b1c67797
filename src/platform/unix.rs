//! The Unix side of [`crate::platform`].

use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

pub use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};

/// What a special file is ("FIFO", "socket", "device").
pub fn special_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

/// Never follows a link in the path's last component, and never blocks on a FIFO.
pub fn no_follow_nonblocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
}

/// Never follows a link in the path's last component.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(nix::libc::O_NOFOLLOW)
}

/// Never blocks on a FIFO.
pub fn nonblocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(nix::libc::O_NONBLOCK)
}

/// How an open refused by [`no_follow_nonblocking`] was refused, when it says something about the
/// file: a link, a FIFO nobody reads, a directory.
pub fn refused_kind(e: &io::Error, _path: &std::path::Path) -> Option<super::Refused> {
    match e.raw_os_error()? {
        nix::libc::ELOOP => Some(super::Refused::Link),
        nix::libc::ENXIO => Some(super::Refused::Fifo),
        nix::libc::EISDIR => Some(super::Refused::Directory),
        _ => None,
    }
}

/// The permission bits of `meta`.
pub fn mode_of(meta: &Metadata) -> Option<u32> {
    Some(meta.permissions().mode() & 0o7777)
}

/// Sets `file`'s permission bits to `mode`.
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// A folder builder making folders with `mode`.
pub fn dir_builder(mode: u32) -> DirBuilder {
    let mut b = DirBuilder::new();
    b.mode(mode);
    b
}

/// The owner of `meta` and this process's user, when they differ.
pub fn foreign_owner(meta: &Metadata) -> Option<(u32, u32)> {
    let me = nix::unistd::geteuid().as_raw();
    (meta.uid() != me).then_some((meta.uid(), me))
}

/// Whether this process may write in `path`.
pub fn writable(path: &std::path::Path) -> io::Result<()> {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK)
        .map_err(|errno| io::Error::from_raw_os_error(errno as i32))
}

/// Whether an error means "this filesystem or folder cannot be written".
pub fn read_only(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EROFS | nix::libc::EACCES | nix::libc::EPERM)
    )
}

/// Whether an error means "this file system has no hard links".
pub fn no_hard_links(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EPERM | nix::libc::EOPNOTSUPP)
    )
}

/// Whether an error means "no room left on the device" (or the quota).
pub fn disk_full(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::ENOSPC | nix::libc::EDQUOT)
    )
}

/// `file`'s metadata and which file it is — (device, inode), the same for every name of one
/// file — from one `fstat`.
pub fn file_meta_id(file: &File) -> io::Result<(Metadata, (u64, u64))> {
    let meta = file.metadata()?;
    let id = (meta.dev(), meta.ino());
    Ok((meta, id))
}

/// [`file_meta_id`] of what `path` names, following links, from one `stat`.
pub fn path_meta_id(path: &std::path::Path) -> io::Result<(Metadata, (u64, u64))> {
    let meta = std::fs::metadata(path)?;
    let id = (meta.dev(), meta.ino());
    Ok((meta, id))
}

/// Which link `path` is itself, when it is one.
pub fn link_id(path: &std::path::Path) -> io::Result<Option<(u64, u64)>> {
    let own = std::fs::symlink_metadata(path)?;
    Ok(own.file_type().is_symlink().then(|| (own.dev(), own.ino())))
}

/// Takes `file`'s exclusive lock without waiting (`flock`).
pub fn try_lock(file: &File) -> Result<(), std::fs::TryLockError> {
    file.try_lock()
}

/// Takes `file`'s shared lock without waiting (`flock`).
pub fn try_lock_shared(file: &File) -> Result<(), std::fs::TryLockError> {
    file.try_lock_shared()
}

/// Lets go of `file`'s lock.
pub fn unlock(file: &File) -> io::Result<()> {
    file.unlock()
}

/// What changes when a file's contents or names change: size, modification and change times.
pub fn change_stamp(meta: &Metadata) -> [i64; 5] {
    [
        meta.size() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ]
}

/// How many names a folder has (2 + its subfolders).
pub fn link_count(meta: &Metadata) -> u64 {
    meta.nlink()
}

/// This process's real user id.
pub fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// This process's user's name, from the user database (files, LDAP, SSSD alike).
pub fn account_name() -> Option<std::ffi::OsString> {
    let uid = nix::unistd::Uid::current();
    Some(nix::unistd::User::from_uid(uid).ok()??.name.into())
}

/// Starts `cmd` in a process group of its own, so [`kill_group`] reaches what it starts too.
pub fn own_group(cmd: &mut std::process::Command) {
    std::os::unix::process::CommandExt::process_group(cmd, 0);
}

/// Kills the process group [`own_group`] made for `child`.
pub fn kill_group(child: &mut std::process::Child) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Runs `read` with the terminal on stdin not echoing what is typed, and echo back on after.
/// Echo goes off without discarding input: a key pasted the moment the prompt appears is read,
/// not flushed away.
pub fn without_echo<T>(read: impl FnOnce() -> T) -> io::Result<T> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let stdin = io::stdin();
    let saved = tcgetattr(&stdin)?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet)?;
    let got = read();
    let _ = tcsetattr(&stdin, SetArg::TCSANOW, &saved);
    Ok(got)
}

/// `path` with every link resolved, absolute.
pub fn canonical(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    std::fs::canonicalize(path)
}

/// Whether `e` says the reader of a pipe went away.
pub fn broken_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// Makes the names in folder `dir` (a rename just done) durable.
pub fn sync_dir(dir: &std::path::Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
