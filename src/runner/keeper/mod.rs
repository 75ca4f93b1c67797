//! The keeper: the command's tree dies with the runner, even when the runner is killed, and no
//! second run starts beside a survivor (docs/running.md).
//!
//! On Unix a process of its own (`unix.rs`: the firing forks, the parent keeps). On Windows the
//! run's Job Object does the keeping (`windows.rs`): Windows ends every process in it when the
//! runner's handle closes, however the runner ended, so there is nothing to fork and the keeper's
//! first act, the sync of `started`, is done in the runner itself.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
