//! A process known by more than its pid: the pid, the process's start time and its name (the
//! kernel's `comm`), which together never name another process (a pid is reused by a process that
//! started later; the start time counts in clock ticks, so one that got the number within the same
//! tick is told apart by its name). A signal goes only to the process they name: on Linux through a
//! pidfd opened before they are compared, so the process cannot be replaced between the look and
//! the signal. This is how `stop-all` and `overlap = "replace"` reach a run and nothing else.

#[cfg(unix)]
pub use nix::sys::signal::Signal;

/// The signals the runner speaks of on Windows, which has none: what a stop or a timeout stands
/// for there (a console's Ctrl-C, the end of a Job Object), named as on Unix in the run log.
#[cfg(windows)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Signal {
    SIGINT = 2,
    SIGKILL = 9,
    SIGTERM = 15,
}

#[cfg(windows)]
impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::SIGINT => "SIGINT",
            Signal::SIGKILL => "SIGKILL",
            Signal::SIGTERM => "SIGTERM",
        }
    }
}

#[cfg(windows)]
impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A process, as its pid, start time (Linux: clock ticks since boot; macOS: microseconds since
/// the epoch) and a hash of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: i32,
    pub start: u64,
    pub name: u32,
}

impl ProcessId {
    /// The process `pid` is now, if there is one.
    pub fn of(pid: i32) -> Option<Self> {
        (pid > 0).then_some(())?;
        let (start, name) = started(pid)?;
        Some(Self { pid, start, name })
    }

    /// This process.
    pub fn me() -> Option<Self> {
        Self::of(std::process::id() as i32)
    }

    /// Whether `pid` is still this very process.
    pub fn alive(&self) -> bool {
        started(self.pid) == Some((self.start, self.name))
    }

    /// Sends `sig` to this process, if `pid` is still it: `Ok(false)` when it is gone (or the pid
    /// names another process now), and nothing is sent.
    pub fn signal(&self, sig: Signal) -> std::io::Result<bool> {
        #[cfg(unix)]
        return self.send(sig).map_err(std::io::Error::from);
        #[cfg(windows)]
        return self.send(sig);
    }

    /// Windows has no signals to send to another process; asking a firing to stop is not built
    /// there (docs/windows.md).
    #[cfg(windows)]
    fn send(&self, _sig: Signal) -> std::io::Result<bool> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "asking another firing to stop is not built for Windows",
        ))
    }

    #[cfg(unix)]
    fn send(&self, sig: Signal) -> nix::Result<bool> {
        if self.pid <= 1 || self.pid == std::process::id() as i32 {
            return Ok(false);
        }
        #[cfg(target_os = "linux")]
        {
            use nix::libc;
            use std::os::fd::{FromRawFd, OwnedFd};
            // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid, 0) };
            if fd < 0 {
                return match nix::errno::Errno::last() {
                    nix::errno::Errno::ESRCH => Ok(false),
                    // A kernel before 5.3: the look and the signal, one after the other.
                    nix::errno::Errno::ENOSYS => self.look_then_kill(sig),
                    e => Err(e),
                };
            }
            // SAFETY: a descriptor just returned by the kernel, owned from here on.
            let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
            // The pidfd holds the process: if it is still the one started then, it is the one
            // signalled.
            if !self.alive() {
                return Ok(false);
            }
            use std::os::fd::AsRawFd;
            // SAFETY: pidfd_send_signal on a descriptor we own, with no siginfo.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    sig as i32,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            if r == 0 {
                return Ok(true);
            }
            match nix::errno::Errno::last() {
                nix::errno::Errno::ESRCH => Ok(false),
                e => Err(e),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.look_then_kill(sig)
        }
    }

    /// Where no pidfd can hold the process: the start time compared, then the signal.
    #[cfg(unix)]
    fn look_then_kill(&self, sig: Signal) -> nix::Result<bool> {
        if !self.alive() {
            return Ok(false);
        }
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), sig) {
            Ok(()) => Ok(true),
            Err(nix::errno::Errno::ESRCH) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `"<pid> <start> <name hash>"`, as a lock file holds it.
    pub fn to_text(self) -> String {
        format!("{} {} {:08x}", self.pid, self.start, self.name)
    }

    /// What [`ProcessId::to_text`] wrote.
    pub fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_ascii_whitespace();
        Some(Self {
            pid: words.next()?.parse().ok()?,
            start: words.next()?.parse().ok()?,
            name: u32::from_str_radix(words.next()?, 16).ok()?,
        })
    }
}

/// A name's hash (FNV-1a): a few bytes of the lock file, whatever the name.
#[cfg(unix)]
fn name_hash(name: &[u8]) -> u32 {
    name.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// When `pid` started, and its name's hash; `None` when there is no such (live) process.
#[cfg(target_os = "linux")]
fn started(pid: i32) -> Option<(u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses; starttime is the 22nd
    // field, the 20th after comm.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = name_hash(stat.get(open + 1..close)?.as_bytes());
    let mut f = stat[close + 1..].split_ascii_whitespace();
    if matches!(f.next()?, "Z" | "X") {
        return None;
    }
    Some((f.nth(18)?.parse().ok()?, name))
}

/// When `pid` started, and its name's hash; `None` when there is no such (live) process.
#[cfg(target_os = "macos")]
fn started(pid: i32) -> Option<(u64, u32)> {
    use nix::libc;
    // SAFETY: proc_bsdinfo is plain data; zeroes are a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: `info` is `size` bytes.
    let got =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size) };
    // SZOMB = 5.
    if got != size || info.pbi_status == 5 {
        return None;
    }
    let comm: Vec<u8> = info
        .pbi_comm
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some((
        info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
        name_hash(&comm),
    ))
}

/// When `pid` started (100 ns since 1601), and 0 for its name; `None` when there is no such
/// (live) process.
#[cfg(windows)]
fn started(pid: i32) -> Option<(u64, u32)> {
    use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    let pid = u32::try_from(pid).ok()?;
    // SAFETY: a plain call; a null handle is checked before use.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return None;
    }
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    let mut code = 0u32;
    // SAFETY: a handle just opened, and out-pointers to live locals.
    let (timed, coded) = unsafe {
        (
            GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user),
            GetExitCodeProcess(handle, &mut code),
        )
    };
    // SAFETY: the handle opened above, closed once.
    unsafe { CloseHandle(handle) };
    if timed == 0 || coded == 0 || code != STILL_ACTIVE as u32 {
        return None;
    }
    let start = (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
    Some((start, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process is known by its pid and start: a pid whose start differs (as after reuse) is
    /// never signalled.
    #[test]
    fn only_the_process_the_pair_names_is_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(child.id() as i32).unwrap();
        assert!(id.alive());
        // Another start, or another name at the same start (a pid taken within the same tick).
        for other in [
            ProcessId {
                start: id.start + 1,
                ..id
            },
            ProcessId {
                name: id.name ^ 1,
                ..id
            },
        ] {
            assert!(!other.alive());
            assert!(!other.signal(Signal::SIGTERM).unwrap());
        }
        assert!(id.alive(), "the process was signalled through a stale pair");
        assert_eq!(ProcessId::parse(&id.to_text()), Some(id));
        assert!(id.signal(Signal::SIGTERM).unwrap());
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(15)
        );
        assert!(!id.alive());
        assert!(!id.signal(Signal::SIGTERM).unwrap());
    }
}
