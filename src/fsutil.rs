//! Small filesystem helpers for the private data root: 0700 folders, 0600 files, atomic writes.
//!
//! Everything private goes through here so permissions are decided in one place. This module must
//! never follow a path outside what its caller passed.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (and missing parents) with mode 0700.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Opens `path` for reading and writing, creating it 0600.
pub fn open_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename), mode 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    private_dir(path.parent().unwrap_or(Path::new(".")))?;
    write_atomic_mode(path, bytes, 0o600)
}

/// Writes `bytes` to `path` atomically with `mode`; the folder must exist.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = tmp_sibling(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn tmp_sibling(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

/// Removes `path`; a file that is already gone is fine. Returns whether it existed.
pub fn remove_if_exists(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads `path`, `None` when it does not exist.
pub fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The permission bits of an open file.
pub fn mode(file: &File) -> io::Result<u32> {
    Ok(file.metadata()?.permissions().mode() & 0o777)
}

/// True when `mode` lets group or others read or write: not private.
pub fn exposed(mode: u32) -> bool {
    mode & 0o077 != 0
}
