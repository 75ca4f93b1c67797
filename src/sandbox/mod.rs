//! The strict sandbox's runner half (docs/policies.md#sandbox). A `[sandbox] level = "strict"`
//! unit already runs under systemd's read-only settings (units/systemd.rs); this module confines
//! the command itself, inside that unit and in a person's run alike, so that what only the runner
//! may use stays the runner's: the data root (the log, locks, state, env files, settings), the
//! service manager and the session bus.
//!
//! What the command keeps: reading and running anything outside the data root; writing its
//! `writes`, its own scratch folder (its TMPDIR, result file and HTTP log) and `/dev/null`. What it
//! loses: writing anywhere else, reading the data root, Unix sockets (the bus, the manager, every
//! other local daemon; a stream `socketpair` still works), io_uring, typing into a terminal,
//! changing owners and extended attributes, letting others write a file, set-user-ID and
//! set-group-ID bits, and tracing any process outside its own tree — and, from Landlock ABI 6
//! (Linux 6.12), signalling one (`Support::words` says what this kernel holds).
//!
//! Linux only: Landlock (the file system, signals, abstract sockets) and a seccomp filter, both
//! made in the runner and installed in the command's process between fork and exec, so the runner
//! and its keeper are never confined. A kernel without Landlock cannot run a strict automation: the
//! firing fails, saying so, rather than run unconfined. This module never runs the command.

#[cfg(target_os = "linux")]
mod paths;
#[cfg(target_os = "linux")]
mod syscalls;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::definition::Definition;

/// Why a strict command cannot be confined; the firing fails with class `sandbox`.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// This machine cannot confine a command (no Landlock, not Linux).
    #[error("the strict sandbox cannot run here: {0}")]
    Unavailable(String),
    /// A `writes` entry is not the place the definition names.
    #[error("writes entry {entry:?}: {why}")]
    Writes { entry: String, why: String },
    /// The rules could not be made.
    #[error("cannot prepare the strict sandbox: {0}")]
    Prepare(String),
}

/// What the runner confines a strict command to.
pub struct Spec<'a> {
    /// The data root: neither written nor read by the command (but for `scratch`).
    pub data_root: &'a Path,
    /// The run's own scratch folder (its TMPDIR, result file and HTTP log).
    pub scratch: &'a Path,
    /// The `writes` entries, resolved (see [`resolve_writes`]).
    pub writes: &'a [PathBuf],
}

/// What this kernel can enforce of the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI the kernel offers, or why it offers none.
    pub landlock: Result<u32, &'static str>,
}

impl Support {
    /// What this kernel offers, asked once.
    pub fn here() -> Self {
        #[cfg(target_os = "linux")]
        {
            Self {
                landlock: paths::kernel_abi(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Self {
                landlock: Err("only Linux confines a command (Landlock)"),
            }
        }
    }

    /// Whether a strict command can run here; the Landlock ABI when it can.
    pub fn usable(self) -> Result<u32, SandboxError> {
        self.landlock.map_err(|why| {
            SandboxError::Unavailable(format!(
                "{why}; without it a strict automation does not run (remove [sandbox] to run it unconfined)"
            ))
        })
    }

    /// What a confined command is refused here, in words (for a person's run and `doctor`).
    pub fn words(self) -> String {
        let Ok(abi) = self.landlock else {
            return "nothing: it cannot be confined here".into();
        };
        let mut held = vec![
            "writing outside its writes and scratch",
            "reading the data root",
            "Unix sockets (the bus, the service manager)",
            "io_uring",
            "tracing processes outside its tree",
        ];
        if abi >= 6 {
            held.push("signalling processes outside its tree");
        }
        format!("Landlock ABI {abi} and seccomp refuse {}", held.join(", "))
    }
}

/// `def`'s `writes`, each where it is on this machine (see `definition::policy::resolve_write`):
/// a link below the home folder or the repository is refused, not followed, and so is an entry
/// holding the data root or the folder of user units.
pub fn resolve_writes(
    def: &Definition,
    root: &Path,
    checks: &crate::definition::Checks,
) -> Result<Vec<PathBuf>, SandboxError> {
    def.policy
        .writes
        .iter()
        .map(|entry| {
            crate::definition::policy::resolve_write(entry, root, checks).map_err(|why| {
                SandboxError::Writes {
                    entry: entry.clone(),
                    why,
                }
            })
        })
        .collect()
}

/// Why a strict automation cannot run on this machine from this repository and data root, if it
/// cannot: a kernel without Landlock, or a place its unit cannot see (see [`placement_problem`]).
/// What `validate` warns of, `install` refuses and `doctor` fails on.
pub fn why_not_here(root: &Path, data_root: &Path) -> Option<String> {
    if let Err(e) = Support::here().usable() {
        return Some(e.to_string());
    }
    placement_problem(root, data_root)
}

/// Why a strict automation cannot run from this repository or data root, if it cannot: its unit's
/// `PrivateTmp=yes` gives it a /tmp and /var/tmp of its own, which hide a repository or data root
/// kept there (the unit would fail to start, `200/CHDIR`, before the runner could record it).
pub fn placement_problem(root: &Path, data_root: &Path) -> Option<String> {
    for (what, p) in [("repository", root), ("data root", data_root)] {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if real.starts_with("/tmp") || real.starts_with("/var/tmp") {
            return Some(format!(
                "its {what} is under {}, which its unit's PrivateTmp=yes hides from it: a strict automation cannot run from there (move the {what} out of /tmp and /var/tmp)",
                real.display()
            ));
        }
    }
    None
}

/// The confinement of one command, made in the runner; installed by [`Confinement::apply_to`].
pub struct Confinement {
    #[cfg(target_os = "linux")]
    ruleset: std::os::fd::OwnedFd,
    #[cfg(target_os = "linux")]
    filter: seccompiler::BpfProgram,
    /// What it enforces on this kernel.
    pub support: Support,
}

impl Confinement {
    /// Makes the rules of `spec` (a few dozen opened paths, a small filter); fails when this
    /// machine cannot confine a command.
    pub fn prepare(spec: &Spec) -> Result<Self, SandboxError> {
        let support = Support::here();
        let abi = support.usable()?;
        #[cfg(target_os = "linux")]
        {
            let ruleset = paths::ruleset(spec)?;
            let filter = syscalls::filter(abi)?;
            Ok(Self {
                ruleset,
                filter,
                support,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (spec, abi);
            Err(SandboxError::Unavailable("not Linux".into()))
        }
    }

    /// Installs the confinement in `cmd`'s process, after the fork and before the exec: only the
    /// command and what it starts are confined. A command that cannot be confined does not start
    /// (its spawn fails with the kernel's error).
    pub fn apply_to(self, cmd: &mut Command) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            use std::os::unix::process::CommandExt;
            let Self {
                ruleset, filter, ..
            } = self;
            // SAFETY: between fork and exec the closure only makes system calls (prctl,
            // landlock_restrict_self, seccomp) on data prepared before the fork; it allocates
            // nothing and takes no lock, and its errors are raw OS errors.
            unsafe {
                cmd.pre_exec(move || {
                    use nix::libc;
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let fd = ruleset.as_raw_fd();
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::last_os_error())
                });
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (self, cmd);
        }
    }
}
