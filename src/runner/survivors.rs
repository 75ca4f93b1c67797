//! What a killed firing left running. Its keeper ends the run's tree when the runner dies; when
//! both were killed at once (an OOM killer, `killall -9`), nothing did, and the tree may still
//! run. The lock file names the run whose tree is alive under it until that tree is gone (see
//! `locks`), so the next firing of the automation knows, and ends every process that carries
//! that run's marker before it starts anything of its own.

use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use super::tree::ProcessTable;

/// What was done about a killed firing's processes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// Processes found and ended.
    pub ended: u32,
    /// Processes that outlived SIGKILL (stuck in the kernel): the firing must not start beside them.
    pub left: u32,
}

/// Ends every process that carries `marker`: SIGTERM, up to `grace` for them to go, then SIGKILL
/// and up to `kill_wait` more. What it found, and what it could not end.
pub fn end(table: &dyn ProcessTable, marker: &[u8], grace: Duration, kill_wait: Duration) -> Ended {
    let me = std::process::id() as i32;
    let alive = || -> Vec<i32> {
        table
            .snapshot()
            .into_iter()
            .map(|p| p.pid)
            .filter(|&pid| pid != me && table.has_marker(pid, marker))
            .collect()
    };
    let found = alive();
    if found.is_empty() {
        return Ended::default();
    }
    let send = |pids: &[i32], sig| {
        for &pid in pids {
            let _ = signal::kill(Pid::from_raw(pid), sig);
        }
    };
    send(&found, Signal::SIGTERM);
    let mut left = wait_until_gone(&alive, grace);
    if !left.is_empty() {
        send(&left, Signal::SIGKILL);
        left = wait_until_gone(&alive, kill_wait);
    }
    Ended {
        ended: (found.len() - left.len().min(found.len())) as u32,
        left: left.len() as u32,
    }
}

fn wait_until_gone(alive: &dyn Fn() -> Vec<i32>, within: Duration) -> Vec<i32> {
    let until = Instant::now() + within;
    loop {
        let left = alive();
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
