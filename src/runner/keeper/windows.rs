//! The Windows side of [`super`]: no second process. The run's Job Object (see
//! `supervise/windows.rs`) ends the command's tree when the runner dies; the lock is the runner's
//! own, let go by Windows when it ends.

use std::io;

/// The firing's keeper, which on Windows is the runner itself.
#[derive(Debug)]
pub struct Keeper {
    /// What `first` gave, until read.
    answer: Option<io::Result<()>>,
}

impl Keeper {
    /// Runs `first` here and keeps its answer for [`Keeper::first_answer`]. `marker` and
    /// `subreaper` are Unix's.
    pub fn split(
        _marker: &[u8],
        _subreaper: bool,
        first: &dyn Fn() -> io::Result<()>,
    ) -> io::Result<Self> {
        Ok(Self {
            answer: Some(first()),
        })
    }

    /// This process: it holds the lock, and it is what Task Scheduler started.
    pub fn pid(&self) -> u32 {
        std::process::id()
    }

    /// What `first` gave (asked once; later calls answer `Ok`).
    pub fn first_answer(&mut self) -> Option<io::Result<()>> {
        Some(self.answer.take().unwrap_or(Ok(())))
    }

    /// The Job Object holds the command's tree: there is no one to tell.
    pub fn spawned(&mut self, _group: i32) {}

    /// See [`Keeper::spawned`].
    pub fn idle(&mut self) {}

    /// See [`Keeper::spawned`].
    pub fn done(&mut self) {}
}

/// The runner's exit code is the firing's: no keeper waits for it.
pub fn hand_over(_code: u8) {}

/// Windows has no subreaper: the Job Object holds the orphans.
pub fn become_subreaper() -> bool {
    false
}
