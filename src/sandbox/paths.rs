//! The Landlock ruleset of a strict command: what it may write (its `writes`, its scratch, the
//! null devices) and what it may read (everything but the data root). Reads are limited by
//! granting them on every sibling along the way down to the data root instead of on `/`:
//! Landlock only grants, so "all but one folder" is every neighbour of that folder and of each of
//! its parents. Listing folders stays allowed everywhere (names are no secret); reading a file's
//! bytes or running it is not, inside the data root.
//!
//! Built from the newest ABI this crate knows, best effort: an older kernel enforces what it
//! knows (`Support` says what), and where it cannot refuse truncation the seccomp filter refuses
//! `truncate(2)` instead (syscalls.rs).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::{SandboxError, Spec};

/// The newest Landlock ABI the rules are written for; a kernel offering less enforces what it has.
const TARGET: ABI = ABI::V9;

/// The Landlock ABI this kernel offers, or why there is none.
pub fn kernel_abi() -> Result<u32, &'static str> {
    use nix::libc;
    // SAFETY: the documented way to ask for the ABI version: no attributes, flag VERSION (1).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if let Ok(abi) = u32::try_from(v) {
        return Ok(abi);
    }
    Err(match nix::errno::Errno::last() {
        nix::errno::Errno::EOPNOTSUPP => {
            "this kernel has Landlock but did not enable it at boot (add landlock to its lsm= list)"
        }
        nix::errno::Errno::EPERM => {
            "a system call filter refuses Landlock (a unit installed by an older version: install it again)"
        }
        _ => "this kernel has no Landlock (Linux 5.13 or later has it)",
    })
}

/// The ruleset of `spec`, as the descriptor `landlock_restrict_self` takes.
pub(super) fn ruleset(spec: &Spec) -> Result<OwnedFd, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Prepare(e.to_string());
    // Everything is handled but listing a folder.
    let handled = AccessFs::from_all(TARGET) & !BitFlags::from(AccessFs::ReadDir);
    let read = AccessFs::ReadFile | AccessFs::Execute;
    let mut rules = Ruleset::default()
        .handle_access(handled)
        .map_err(err)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(err)?
        .create()
        .map_err(err)?;
    let hidden = crate::definition::policy::hidden_folder(spec.data_root);
    for fd in around(&hidden).map_err(|e| io_error(&hidden, e))? {
        rules = rules.add_rule(PathBeneath::new(fd, read)).map_err(err)?;
    }
    let mut writable: Vec<&Path> = vec![spec.scratch];
    writable.extend(spec.writes.iter().map(PathBuf::as_path));
    for p in writable {
        let fd = open_resolved(p).map_err(|e| io_error(p, e))?;
        let access = if is_dir(&fd) {
            handled
        } else {
            handled & AccessFs::from_file(TARGET)
        };
        rules = rules.add_rule(PathBeneath::new(fd, access)).map_err(err)?;
    }
    for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
        if let Ok(fd) = open_path(Path::new(dev)) {
            let access = AccessFs::ReadFile | AccessFs::WriteFile;
            rules = rules.add_rule(PathBeneath::new(fd, access)).map_err(err)?;
        }
    }
    Option::<OwnedFd>::from(rules).ok_or_else(|| {
        SandboxError::Unavailable("the kernel refused to make a Landlock ruleset".into())
    })
}

/// Every entry of every folder on the way from `/` down to `hidden`, but the next step of that way
/// and `hidden` itself: all a command may read. Links are left out (what they point to is
/// granted where it really is); a folder that cannot be listed grants nothing of its own.
fn around(hidden: &Path) -> std::io::Result<Vec<OwnedFd>> {
    let mut fds = Vec::new();
    let mut at = PathBuf::from("/");
    for step in hidden.components().skip(1) {
        let next = at.join(step);
        if let Ok(entries) = std::fs::read_dir(&at) {
            for e in entries.flatten() {
                let p = e.path();
                if p == next || e.file_type().is_ok_and(|t| t.is_symlink()) {
                    continue;
                }
                if let Ok(fd) = open_path(&p) {
                    fds.push(fd);
                }
            }
        }
        at = next;
    }
    Ok(fds)
}

/// `p` opened as a place (`O_PATH`), its last step never followed.
fn open_path(p: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(p, flags, nix::sys::stat::Mode::empty())?)
}

/// `p`, a path with no link in it (as `resolve_write` gives), opened only if that still holds: a
/// link put in its way since is refused, not followed. Kernels before 5.6 (no `openat2`) are
/// left with the check of the last step.
fn open_resolved(p: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, p, how) {
        Err(nix::errno::Errno::ENOSYS) => open_path(p),
        Err(nix::errno::Errno::ELOOP) => Err(std::io::Error::other(
            "a link was put in its way after it was checked; not followed",
        )),
        r => Ok(r?),
    }
}

fn is_dir(fd: &OwnedFd) -> bool {
    nix::sys::stat::fstat(fd.as_fd())
        .is_ok_and(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR)
}

fn io_error(p: &Path, e: std::io::Error) -> SandboxError {
    SandboxError::Prepare(format!("{}: {e}", p.display()))
}
