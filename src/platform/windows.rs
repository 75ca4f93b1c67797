//! The Windows side of [`crate::platform`]: no mode bits (a folder's access list decides), no
//! FIFOs, positional I/O through `seek_read`/`seek_write`.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{FileExt as _, MetadataExt as _, OpenOptionsExt as _};

/// Positional reads and writes, as Unix's `FileExt` has them. Unlike Unix's, these move the
/// file's cursor; no caller reads it after them.
pub trait FileExt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self.seek_read(buf, offset) {
            // Reading at or past the end is an end, as on Unix.
            Err(e) if e.raw_os_error() == Some(ERROR_HANDLE_EOF) => Ok(0),
            other => other,
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.seek_write(buf, offset)
    }
}

const ERROR_HANDLE_EOF: i32 = 38;
const ERROR_ACCESS_DENIED: i32 = 5;
const ERROR_WRITE_PROTECT: i32 = 19;
const ERROR_DISK_FULL: i32 = 112;
const ERROR_HANDLE_DISK_FULL: i32 = 39;
const ERROR_NOT_SUPPORTED: i32 = 50;
const ERROR_INVALID_FUNCTION: i32 = 1;
const ERROR_CANT_ACCESS_FILE: i32 = 1920;
/// Opens a link itself rather than what it points to.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;

/// File modes do nothing on Windows (see the module's comment).
pub trait OpenOptionsExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl OpenOptionsExt for OpenOptions {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

/// Folder modes do nothing on Windows (see the module's comment).
pub trait DirBuilderExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl DirBuilderExt for DirBuilder {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

/// Windows has no FIFOs, sockets or devices among files.
pub fn special_kind(_t: &std::fs::FileType) -> &'static str {
    "special file"
}

/// Opens a link itself, never what it points to (the caller then finds it is not a regular file).
pub fn no_follow_nonblocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
}

/// Opens a link itself, never what it points to.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
}

/// Opens never block on Windows.
pub fn nonblocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

/// See the Unix side: Windows says "access denied" when a folder is opened as a file, so a folder
/// is told by looking; a link is opened itself, and refused by the caller as no regular file.
pub fn refused_kind(e: &io::Error, path: &std::path::Path) -> Option<super::Refused> {
    let folder = e.kind() == io::ErrorKind::IsADirectory
        || (e.raw_os_error() == Some(ERROR_ACCESS_DENIED)
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()));
    folder.then_some(super::Refused::Directory)
}

/// No mode bits on Windows.
pub fn mode_of(_meta: &Metadata) -> Option<u32> {
    None
}

/// No mode bits on Windows.
pub fn set_mode(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// A folder builder (modes do nothing on Windows).
pub fn dir_builder(_mode: u32) -> DirBuilder {
    DirBuilder::new()
}

/// Owners are access lists on Windows: never foreign by this test.
pub fn foreign_owner(_meta: &Metadata) -> Option<(u32, u32)> {
    None
}

/// Whether this process may write in `path`: not told ahead on Windows, which ignores a folder's
/// read-only attribute (Explorer sets it on folders it customises) and keeps the rest in access
/// lists; the first write says.
pub fn writable(path: &std::path::Path) -> io::Result<()> {
    std::fs::metadata(path).map(drop)
}

/// Whether an error means "this filesystem or folder cannot be written".
pub fn read_only(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ERROR_ACCESS_DENIED | ERROR_WRITE_PROTECT | ERROR_CANT_ACCESS_FILE)
    )
}

/// Whether an error means "this file system has no hard links".
pub fn no_hard_links(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ERROR_NOT_SUPPORTED | ERROR_INVALID_FUNCTION | ERROR_ACCESS_DENIED)
    )
}

/// Whether an error means "no room left on the disk".
pub fn disk_full(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ERROR_DISK_FULL | ERROR_HANDLE_DISK_FULL)
    )
}

/// `file`'s metadata and which file it is: its volume's serial number and its file index, the
/// same for every name of one file (a creation time is not: NTFS gives a file made again under a
/// name it just left the old one's).
pub fn file_meta_id(file: &File) -> io::Result<(Metadata, (u64, u64))> {
    Ok((file.metadata()?, file_id(file)?))
}

/// [`file_meta_id`] of what `path` names, following links.
pub fn path_meta_id(path: &std::path::Path) -> io::Result<(Metadata, (u64, u64))> {
    file_meta_id(&open_for_id(path, true)?)
}

/// Which file `file` is (see [`file_meta_id`]).
fn file_id(file: &File) -> io::Result<(u64, u64)> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
    };
    // SAFETY: plain data; zeroes are a valid value.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a handle `file` keeps open, and a structure of the size the call writes.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        u64::from(info.dwVolumeSerialNumber),
        (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    ))
}

/// A handle on what `path` names, for its identity only (folders too).
fn open_for_id(path: &std::path::Path, follow: bool) -> io::Result<File> {
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    let flags = FILE_FLAG_BACKUP_SEMANTICS
        | if follow {
            0
        } else {
            FILE_FLAG_OPEN_REPARSE_POINT
        };
    OpenOptions::new()
        .access_mode(0)
        .custom_flags(flags)
        .open(path)
}

/// Which link `path` is itself, when it is one.
pub fn link_id(path: &std::path::Path) -> io::Result<Option<(u64, u64)>> {
    if !std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Ok(None);
    }
    file_id(&open_for_id(path, false)?).map(Some)
}

/// The byte `try_lock` and its kin lock: far past any data, so a locked file stays readable by
/// others (Windows enforces a lock on the bytes it covers, where Unix's `flock` only advises).
fn lock_range() -> windows_sys::Win32::System::IO::OVERLAPPED {
    // SAFETY: plain data; zeroes are a valid value.
    let mut o: windows_sys::Win32::System::IO::OVERLAPPED = unsafe { std::mem::zeroed() };
    o.Anonymous.Anonymous.OffsetHigh = 0x4000_0000;
    o
}

fn lock_with(file: &File, flags: u32) -> Result<(), std::fs::TryLockError> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{LOCKFILE_FAIL_IMMEDIATELY, LockFileEx};
    const ERROR_LOCK_VIOLATION: i32 = 33;
    let mut range = lock_range();
    // SAFETY: a handle `file` keeps open; the call is synchronous (no overlapped handle), so the
    // structure need only live for the call.
    let locked = unsafe {
        LockFileEx(
            file.as_raw_handle(),
            flags | LOCKFILE_FAIL_IMMEDIATELY,
            0,
            1,
            0,
            &mut range,
        )
    };
    if locked != 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION) {
        Err(std::fs::TryLockError::WouldBlock)
    } else {
        Err(std::fs::TryLockError::Error(e))
    }
}

/// Takes `file`'s exclusive lock without waiting (one byte far past its data: see [`lock_range`]).
pub fn try_lock(file: &File) -> Result<(), std::fs::TryLockError> {
    lock_with(
        file,
        windows_sys::Win32::Storage::FileSystem::LOCKFILE_EXCLUSIVE_LOCK,
    )
}

/// Takes `file`'s shared lock without waiting.
pub fn try_lock_shared(file: &File) -> Result<(), std::fs::TryLockError> {
    lock_with(file, 0)
}

/// Lets go of `file`'s lock.
pub fn unlock(file: &File) -> io::Result<()> {
    use std::os::windows::io::AsRawHandle;
    let mut range = lock_range();
    // SAFETY: as in `lock_with`.
    let done = unsafe {
        windows_sys::Win32::Storage::FileSystem::UnlockFileEx(
            file.as_raw_handle(),
            0,
            1,
            0,
            &mut range,
        )
    };
    if done == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What changes when a file's contents change: size and write time.
pub fn change_stamp(meta: &Metadata) -> [i64; 5] {
    [
        meta.file_size() as i64,
        meta.last_write_time() as i64,
        meta.creation_time() as i64,
        0,
        0,
    ]
}

/// Windows folders have no link count; 0 stands for "not known".
pub fn link_count(_meta: &Metadata) -> u64 {
    0
}

/// Windows has no user ids; 0 stands for "this user".
pub fn uid() -> u32 {
    0
}

/// This process's user's name, as Windows sets it for every process.
pub fn account_name() -> Option<std::ffi::OsString> {
    std::env::var_os("USERNAME").filter(|u| !u.is_empty())
}

/// A console process group of its own: Ctrl-C at the terminal does not reach it.
pub fn own_group(cmd: &mut std::process::Command) {
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    std::os::windows::process::CommandExt::creation_flags(cmd, CREATE_NEW_PROCESS_GROUP);
}

/// Ends `child` (what it started is not reached: the service programs this is for start none).
pub fn kill_group(child: &mut std::process::Child) {
    let _ = child.kill();
}

/// Runs `read` with the console on stdin not echoing what is typed, and echo back on after.
pub fn without_echo<T>(read: impl FnOnce() -> T) -> io::Result<T> {
    use windows_sys::Win32::System::Console::{
        ENABLE_ECHO_INPUT, GetConsoleMode, GetStdHandle, STD_INPUT_HANDLE, SetConsoleMode,
    };
    // SAFETY: plain calls on this process's own standard input handle, with a live out-pointer.
    unsafe {
        let input = GetStdHandle(STD_INPUT_HANDLE);
        let mut saved = 0;
        if GetConsoleMode(input, &mut saved) == 0 {
            return Err(io::Error::last_os_error());
        }
        if SetConsoleMode(input, saved & !ENABLE_ECHO_INPUT) == 0 {
            return Err(io::Error::last_os_error());
        }
        let got = read();
        SetConsoleMode(input, saved);
        Ok(got)
    }
}

/// `path` with every link resolved, absolute, as a person writes it: without the `\\?\` prefix
/// Windows' own answer carries (`\\?\C:\x` is `C:\x`, `\\?\UNC\host\share` is `\\host\share`),
/// which a task's command line or a message should not show.
pub fn canonical(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    let real = std::fs::canonicalize(path)?;
    let text = real.to_string_lossy();
    if let Some(unc) = text.strip_prefix(r"\\?\UNC\") {
        return Ok(format!(r"\\{unc}").into());
    }
    match text.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => Ok(rest.into()),
        _ => Ok(real),
    }
}

/// Whether `e` says the reader of a pipe went away: "the pipe is being closed" (232, which std
/// reads as a broken pipe) or "no process is on the other end" (233, which it does not).
pub fn broken_pipe(e: &io::Error) -> bool {
    const ERROR_PIPE_NOT_CONNECTED: i32 = 233;
    e.kind() == io::ErrorKind::BrokenPipe || e.raw_os_error() == Some(ERROR_PIPE_NOT_CONNECTED)
}

/// A folder cannot be opened as a file to sync it on Windows; NTFS journals its names itself.
pub fn sync_dir(_dir: &std::path::Path) -> io::Result<()> {
    Ok(())
}
