//! The clocks every `started` / `finished` event carries (docs/running.md).
//!
//! `awake_ms` stops while the machine sleeps (Linux `CLOCK_MONOTONIC`, macOS `CLOCK_UPTIME_RAW`);
//! `total_ms` keeps counting (`CLOCK_BOOTTIME` / `CLOCK_MONOTONIC_RAW`). Within one boot id, the
//! awake time between two events is the difference of their `awake_ms`. Read-only; never panics.

use serde::{Deserialize, Serialize};

/// A reading of both clocks, tagged with the boot it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Identifies the boot; readings of different boots are not comparable.
    pub boot: String,
    /// Milliseconds of awake time since boot.
    pub awake_ms: u64,
    /// Milliseconds since boot, sleep included.
    pub total_ms: u64,
}

/// Reads the clocks now (the boot id once per process: it cannot change while it runs).
pub fn now() -> Clock {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    Clock {
        boot: BOOT.get_or_init(boot_id).clone(),
        awake_ms: read_ms(AWAKE),
        total_ms: read_ms(TOTAL),
    }
}

#[cfg(target_os = "linux")]
const AWAKE: nix::time::ClockId = nix::time::ClockId::CLOCK_MONOTONIC;
#[cfg(target_os = "linux")]
const TOTAL: nix::time::ClockId = nix::time::ClockId::CLOCK_BOOTTIME;
// nix names no Apple clocks; libc has their ids.
#[cfg(target_os = "macos")]
const AWAKE: nix::time::ClockId = nix::time::ClockId::from_raw(nix::libc::CLOCK_UPTIME_RAW);
#[cfg(target_os = "macos")]
const TOTAL: nix::time::ClockId = nix::time::ClockId::from_raw(nix::libc::CLOCK_MONOTONIC_RAW);

#[cfg(unix)]
fn read_ms(id: nix::time::ClockId) -> u64 {
    nix::time::clock_gettime(id)
        .map(|t| t.tv_sec() as u64 * 1000 + t.tv_nsec() as u64 / 1_000_000)
        .unwrap_or(0)
}

/// When this firing's session began: the "login" an `at_login` automation runs once in. On Linux,
/// the start of the systemd user manager that started the firing (`$MANAGERPID`, which systemd
/// sets for its services, by its process start time); otherwise — a firing by hand, or macOS, where
/// launchd gives a LaunchAgent no sign of the login it was loaded for — the boot.
pub fn session_start() -> chrono::DateTime<chrono::Utc> {
    let manager = std::env::var("MANAGERPID")
        .ok()
        .and_then(|p| p.parse().ok());
    session_start_of(manager)
}

/// When the session of the service manager `manager` (a pid) began; the boot without one.
fn session_start_of(manager: Option<u32>) -> chrono::DateTime<chrono::Utc> {
    let boot = chrono::Utc::now() - chrono::Duration::milliseconds(read_ms(TOTAL) as i64);
    boot + manager.and_then(started_after_boot).unwrap_or_default()
}

/// How long after boot process `pid` started.
#[cfg(target_os = "linux")]
fn started_after_boot(pid: u32) -> Option<chrono::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22, the start time in clock ticks since boot, counted from after the `(comm)` that may
    // hold spaces: the first field after `)` is field 3, so field 22 is the 20th.
    let ticks: i64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)?;
    Some(chrono::Duration::milliseconds(
        ticks * 1000 / per_second as i64,
    ))
}

/// Windows: the awake clock is the unbiased interrupt time (sleep left out), the total one the
/// tick count (sleep counted), both in milliseconds.
#[cfg(windows)]
const AWAKE: WindowsClock = WindowsClock::Awake;
#[cfg(windows)]
const TOTAL: WindowsClock = WindowsClock::Total;

#[cfg(windows)]
enum WindowsClock {
    Awake,
    Total,
}

#[cfg(windows)]
fn read_ms(id: WindowsClock) -> u64 {
    match id {
        WindowsClock::Awake => {
            let mut hundred_ns = 0u64;
            // SAFETY: writes one u64 to a live local.
            unsafe {
                windows_sys::Win32::System::WindowsProgramming::QueryUnbiasedInterruptTime(
                    &mut hundred_ns,
                )
            };
            hundred_ns / 10_000
        }
        // SAFETY: a plain call without arguments.
        WindowsClock::Total => unsafe {
            windows_sys::Win32::System::SystemInformation::GetTickCount64()
        },
    }
}

/// Windows gives a scheduled task no sign of the logon it was started for: the session is the boot.
#[cfg(windows)]
fn started_after_boot(_pid: u32) -> Option<chrono::Duration> {
    None
}

/// Windows has no boot id: the boot's minute (now less the tick count) stands for it.
#[cfg(windows)]
fn boot_id() -> String {
    let boot = chrono::Utc::now() - chrono::Duration::milliseconds(read_ms(TOTAL) as i64);
    boot.format("boot-%Y%m%dT%H%M").to_string()
}

/// launchd gives a LaunchAgent no sign of the login it was loaded for: the session is the boot.
#[cfg(target_os = "macos")]
fn started_after_boot(_pid: u32) -> Option<chrono::Duration> {
    None
}

#[cfg(target_os = "linux")]
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(target_os = "macos")]
fn boot_id() -> String {
    use std::ffi::CStr;
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    let name = c"kern.bootsessionuuid";
    // SAFETY: sysctlbyname writes at most `len` bytes into `buf` and updates `len`.
    let rc = unsafe {
        nix::libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return "unknown".into();
    }
    CStr::from_bytes_until_nul(&buf[..len.min(buf.len())])
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn clocks_are_sane() {
        let a = super::now();
        let b = super::now();
        assert!(!a.boot.is_empty() && a.boot != "unknown");
        assert_eq!(a.boot, b.boot);
        assert!(b.awake_ms >= a.awake_ms);
        assert!(a.total_ms >= a.awake_ms);
    }

    /// The session of a manager began when its process started: for this test process, after
    /// the boot and less than two minutes ago (it started moments before its tests ran).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_managers_start_is_read_from_its_process() {
        let boot = super::session_start_of(None);
        let session = super::session_start_of(Some(std::process::id()));
        let age = chrono::Utc::now() - session;
        assert!(session > boot, "{session} not after the boot {boot}");
        assert!(
            age < chrono::Duration::seconds(120),
            "this process started {age} ago"
        );
        // A pid that is no process: the boot.
        let none = super::session_start_of(Some(u32::MAX));
        assert!(
            (none - boot).num_milliseconds().abs() < 1000,
            "{none} vs {boot}"
        );
    }
}
