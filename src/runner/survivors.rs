//! What a killed firing left running. Its keeper ends the run's tree when the runner dies; when
//! both were killed at once (an OOM killer, `killall -9`), nothing did, and the tree may still
//! run. The lock file names the run whose tree is alive under it until that tree is gone (see
//! `locks`), so the next firing of the automation knows, and ends that run's tree before it starts
//! anything of its own: every process that carries the run's marker, and every process related to
//! one (a child, a member of a group or session one leads), found as the runner finds its own tree
//! (`tree::Walk::survivors`) — so a child that left with `setsid` and cleared its environment is
//! ended with its parent. One that outlived its parent as well carries nothing of the run any more; only the
//! service manager's cgroup (systemd kills what a unit leaves) ends it.

use std::time::{Duration, Instant};

use crate::process::{ProcessId, Signal};

use super::tree::{ProcessTable, Walk};

/// What was done about a killed firing's processes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// Processes found and ended.
    pub ended: u32,
    /// Processes that outlived SIGKILL (stuck in the kernel): the firing must not start beside them.
    pub left: u32,
}

/// Ends the tree of the run whose marker is `marker` (see the module doc): SIGTERM, up to `grace`
/// for it to go, then SIGKILL and up to `kill_wait` more. What it found, and what it could not end.
pub fn end(table: &dyn ProcessTable, marker: &[u8], grace: Duration, kill_wait: Duration) -> Ended {
    let walk = std::cell::RefCell::new(Walk::survivors(marker.to_vec()));
    let mut alive = || walk.borrow_mut().members(table);
    let found = alive();
    if found.is_empty() {
        return Ended::default();
    }
    // Each signal goes to the process found, known by its start time (a pid taken over since
    // by another process is left alone).
    let send = |pids: &[i32], sig| {
        for id in pids.iter().filter_map(|&pid| ProcessId::of(pid)) {
            let _ = id.signal(sig);
        }
    };
    send(&found, Signal::SIGTERM);
    let mut left = wait_until_gone(&mut alive, grace);
    if !left.is_empty() {
        send(&left, Signal::SIGKILL);
        left = wait_until_gone(&mut alive, kill_wait);
    }
    Ended {
        ended: (found.len() - left.len().min(found.len())) as u32,
        left: left.len() as u32,
    }
}

fn wait_until_gone(alive: &mut dyn FnMut() -> Vec<i32>, within: Duration) -> Vec<i32> {
    let until = Instant::now() + within;
    loop {
        let left = alive();
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
