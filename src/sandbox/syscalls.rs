//! The seccomp filter of a strict command: the few system calls it is refused (`EPERM`), every
//! other allowed. Opening a Unix socket (`socket(AF_UNIX, …)`: the session bus, the service
//! manager's private socket, the journal, any local daemon) and a datagram pair (`socketpair(AF_UNIX,
//! SOCK_DGRAM)`, whose `sendto` reaches any datagram socket by its path; a stream pair reaches no
//! one and still works); io_uring (which opens sockets and files past this filter); a terminal's
//! `TIOCSTI` and `TIOCLINUX` (typing into the terminal a person runs it from). What Landlock does
//! not cover, as its documentation says: changing an owner or group (`chown` and its family),
//! setting or removing extended attributes, and a mode that lets others write or runs as its
//! owner (`chmod` and its family with o+w, setuid or setgid; other bits still change, so that
//! `rsync -a` and `cp -p` into its `writes` keep working). Where Landlock cannot refuse truncation
//! (ABI < 3): `truncate(2)`, an `open` with `O_TRUNC` for reading (which truncates on Linux) and
//! `openat2` (whose flags a filter cannot read). A call of another architecture's ABI kills the
//! process (seccompiler's check), and on x86-64 the x32 numbers of these calls are refused as well.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::SandboxError;

/// The x32 ABI's system call numbers are x86-64's with this bit set.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;
/// x32's own number for `ioctl`.
#[cfg(target_arch = "x86_64")]
const X32_IOCTL: i64 = X32 | 514;
/// Calls newer than some C libraries' tables; numbered alike on every architecture since 5.1.
const FCHMODAT2: i64 = 452;
const SETXATTRAT: i64 = 463;
const REMOVEXATTRAT: i64 = 466;

/// The mode bits a strict command may not set: others may write, set-user-ID, set-group-ID.
const REFUSED_MODE_BITS: [u64; 3] = [0o002, 0o4000, 0o2000];

/// One rule: every condition holds.
fn rule<const N: usize>(
    conditions: [(u8, SeccompCmpOp, u64); N],
) -> Result<SeccompRule, SandboxError> {
    let err = |e: seccompiler::BackendError| SandboxError::Prepare(format!("seccomp: {e}"));
    let conditions = conditions
        .into_iter()
        .map(|(arg, op, value)| {
            // Compared on the low 32 bits, as the kernel reads an int, a mode and an ioctl's command.
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(err)
        })
        .collect::<Result<Vec<_>, _>>()?;
    SeccompRule::new(conditions).map_err(err)
}

/// Refuses a mode argument (`arg`) holding any of [`REFUSED_MODE_BITS`].
fn mode_rules(arg: u8) -> Result<Vec<SeccompRule>, SandboxError> {
    REFUSED_MODE_BITS
        .iter()
        .map(|&bit| rule([(arg, SeccompCmpOp::MaskedEq(bit), bit)]))
        .collect()
}

/// Every refused call: its number and the rules under which it is refused (none: always).
fn refused(abi: u32) -> Result<Vec<(i64, Vec<SeccompRule>)>, SandboxError> {
    let af_unix = libc::AF_UNIX as u64;
    let mut calls: Vec<(i64, Vec<SeccompRule>)> = Vec::new();
    let mut always = vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        SETXATTRAT,
        REMOVEXATTRAT,
    ];
    #[cfg(target_arch = "x86_64")]
    always.extend([libc::SYS_chown, libc::SYS_lchown]);
    // Reading with `O_TRUNC` truncates: refused where Landlock does not refuse truncation.
    let read_trunc = |arg: u8| {
        let mask = (libc::O_ACCMODE | libc::O_TRUNC) as u64;
        rule([(arg, SeccompCmpOp::MaskedEq(mask), libc::O_TRUNC as u64)])
    };
    if abi < 3 {
        always.extend([libc::SYS_truncate, libc::SYS_openat2]);
        calls.push((libc::SYS_openat, vec![read_trunc(2)?]));
        #[cfg(target_arch = "x86_64")]
        calls.push((libc::SYS_open, vec![read_trunc(1)?]));
    }
    calls.extend(always.into_iter().map(|nr| (nr, Vec::new())));
    calls.push((
        libc::SYS_socket,
        vec![rule([(0, SeccompCmpOp::Eq, af_unix)])?],
    ));
    let dgram = libc::SOCK_DGRAM as u64;
    calls.push((
        libc::SYS_socketpair,
        vec![rule([
            (0, SeccompCmpOp::Eq, af_unix),
            (1, SeccompCmpOp::MaskedEq(0xf), dgram),
        ])?],
    ));
    // The C library's type for a request differs (glibc: an unsigned long; musl: an int).
    calls.push((
        libc::SYS_ioctl,
        vec![
            rule([(1, SeccompCmpOp::Eq, u64::from(libc::TIOCSTI as u32))])?,
            rule([(1, SeccompCmpOp::Eq, u64::from(libc::TIOCLINUX as u32))])?,
        ],
    ));
    calls.push((libc::SYS_fchmod, mode_rules(1)?));
    calls.push((libc::SYS_fchmodat, mode_rules(2)?));
    calls.push((FCHMODAT2, mode_rules(2)?));
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_chmod, mode_rules(1)?));
    Ok(calls)
}

/// The filter for a command under a Landlock of `abi`.
pub(super) fn filter(abi: u32) -> Result<BpfProgram, SandboxError> {
    let err = |e: seccompiler::BackendError| SandboxError::Prepare(format!("seccomp: {e}"));
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, how) in refused(abi)? {
        #[cfg(target_arch = "x86_64")]
        rules.insert(
            if nr == libc::SYS_ioctl {
                X32_IOCTL
            } else {
                nr | X32
            },
            how.clone(),
        );
        rules.insert(nr, how);
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
