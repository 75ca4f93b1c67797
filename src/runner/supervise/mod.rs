//! Spawning the command and owning its whole process tree until every process is gone
//! (docs/running.md). This is where the timeout is enforced.
//!
//! Here: what supervision takes and reports on every system. How: `unix.rs` (a process group, a
//! subreaper on Linux, a walk of the process table, signals through a self-pipe, one `poll` loop)
//! and `windows.rs` (a Job Object that holds every process the command starts and ends them all
//! at once, reader threads for the pipes, Ctrl-C and Ctrl-Break from the console).
//!
//! This module must never block without a deadline and never signal a process outside the tree.

use std::io;
use std::time::{Duration, Instant};

use crate::process::Signal;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{Signals, supervise};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{Signals, supervise};

/// Time between SIGTERM and SIGKILL (the stop contract `stop-all` waits on).
pub use crate::control::STOP_GRACE as GRACE;
/// How long SIGKILLed processes may take to disappear before the runner gives up on them.
pub const KILL_WAIT: Duration = Duration::from_secs(5);

/// How the main process ended.
#[derive(Debug)]
pub enum Ending {
    /// It could not be started.
    NotStarted(io::Error),
    /// It exited with a code.
    Exited(i32),
    /// A signal ended it.
    Signaled(Signal),
}

/// Why the runner ended the tree before the command finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// The deadline passed.
    Timeout,
    /// The runner was asked to stop.
    Stop(Signal),
}

/// Everything the supervision observed.
#[derive(Debug)]
pub struct Supervised {
    pub ending: Ending,
    pub interrupt: Option<Interrupt>,
    /// Processes still alive after the main process ended on its own, which had to be
    /// terminated (a run that is stopped or timed out counts none).
    pub leftover_processes: u32,
    /// Processes that outlived SIGKILL (stuck in the kernel); normally 0.
    pub unkillable: u32,
    pub stdout: (String, u64),
    pub stderr: (String, u64),
    pub duration: Duration,
}

/// The variable that turns the Linux subreaper off, so the runner finds its tree only by walking
/// the process table, as it must on macOS. For tests of that walk; nothing else should set it.
pub const ENV_SUBREAPER: &str = "AUTOMATIONS_SUBREAPER";

/// Whether the runner and its keeper are to be reapers of their orphans: always, unless a test
/// turns it off (`AUTOMATIONS_SUBREAPER=off`) to stand in for macOS, which has none.
pub fn subreaper_wanted() -> bool {
    std::env::var_os(ENV_SUBREAPER).is_none_or(|v| v != "off")
}

/// How the command's tree is found: whether the runner is its subreaper, and the environment
/// entry every member inherits.
pub struct TreeSpec<'a> {
    pub subreaper: bool,
    pub marker: Vec<u8>,
    pub table: &'a dyn super::tree::ProcessTable,
}

/// What supervision saw of a command that could not be spawned.
fn not_started(e: io::Error, started: Instant) -> Supervised {
    Supervised {
        ending: Ending::NotStarted(e),
        interrupt: None,
        leftover_processes: 0,
        unkillable: 0,
        stdout: (String::new(), 0),
        stderr: (String::new(), 0),
        duration: started.elapsed(),
    }
}

/// What the wait between two attempts asks of each system's [`Signals`].
trait Waits {
    /// Whether a stop was asked for.
    fn stopped(&mut self) -> bool;
    /// Waits at most `left`, returning early when a stop may have come.
    fn pause(&mut self, left: Duration);
}

/// Waits up to `d` for a stop request; whether one came.
fn wait_for_stop(w: &mut impl Waits, d: Duration) -> bool {
    let until = Instant::now() + d;
    loop {
        if w.stopped() {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        w.pause(left);
    }
}
