//! The seccomp filter of a strict command: the few system calls it is refused (`EPERM`), every
//! other allowed. Opening a Unix socket (`socket(AF_UNIX, …)`: the session bus, the service
//! manager's private socket, the journal, any local daemon; `socketpair` still works, it reaches
//! no one), io_uring (which opens sockets and files past this filter), a terminal's `TIOCSTI` and
//! `TIOCLINUX` (typing into the terminal a person runs it from), and, where Landlock cannot refuse
//! truncation (ABI < 3), `truncate(2)`. A call of another architecture's ABI kills the process
//! (seccompiler's check), and on x86-64 the x32 numbers of these calls are refused as well.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::SandboxError;

/// The x32 ABI's system call numbers are x86-64's with this bit set.
const X32: i64 = 0x4000_0000;
/// x32's own number for `ioctl`.
#[cfg(target_arch = "x86_64")]
const X32_IOCTL: i64 = X32 | 514;

/// The filter for a command under a Landlock of `abi`.
pub(super) fn filter(abi: u32) -> Result<BpfProgram, SandboxError> {
    let err = |e: seccompiler::BackendError| SandboxError::Prepare(format!("seccomp: {e}"));
    let eq = |arg: u8, value: u64| -> Result<SeccompRule, SandboxError> {
        let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .map_err(err)?;
        SeccompRule::new(vec![cond]).map_err(err)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // Compared on the low 32 bits, as the kernel reads an int and an ioctl's command.
    let socket = vec![eq(0, libc::AF_UNIX as u64)?];
    // The C library's type for a request differs (glibc: an unsigned long; musl: an int).
    let ioctl = vec![
        eq(1, u64::from(libc::TIOCSTI as u32))?,
        eq(1, u64::from(libc::TIOCLINUX as u32))?,
    ];
    let mut always = vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ];
    if abi < 3 {
        always.push(libc::SYS_truncate);
    }
    let x32 = cfg!(target_arch = "x86_64");
    for nr in always {
        rules.insert(nr, Vec::new());
        if x32 {
            rules.insert(nr | X32, Vec::new());
        }
    }
    rules.insert(libc::SYS_socket, socket.clone());
    rules.insert(libc::SYS_ioctl, ioctl.clone());
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_socket | X32, socket);
        rules.insert(X32_IOCTL, ioctl);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| SandboxError::Unavailable(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    filter.try_into().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter is made for every Landlock ABI (with and without the `truncate` rule).
    #[test]
    fn the_filter_is_made_for_old_and_new_kernels() {
        let old = filter(1).unwrap();
        let new = filter(7).unwrap();
        assert!(old.len() > new.len(), "{} vs {}", old.len(), new.len());
    }
}
