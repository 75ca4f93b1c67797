//! What one firing came to, as the runner reports it to the command line: a skip or a recorded
//! run, its one-line summary and exit status; and why a firing could not even be recorded.

use crate::definition::LoadError;
use crate::names::Name;
use crate::runlog::{Finished, Outcome, SkipReason};

/// What one firing came to.
#[derive(Debug)]
pub enum Report {
    /// It did not run, and why.
    Skipped { reason: SkipReason, detail: String },
    /// It ran (or failed before its command started) and was recorded.
    Finished {
        run: String,
        finished: Box<Finished>,
        /// The reason, when this run paused its automation automatically.
        auto_paused: Option<String>,
        /// What health's rules about a run's time say of it, with their figures.
        of_this_run: Vec<String>,
    },
}

impl Report {
    /// Exit status of `run`: 0 ok or skipped, 1 anything else.
    pub fn is_fine(&self) -> bool {
        match self {
            Report::Skipped { .. } => true,
            Report::Finished { finished, .. } => finished.outcome == Outcome::Ok,
        }
    }

    /// The one-line summary: `heartbeat: ok in 0.42 s · beats=1`.
    pub fn summary(&self, name: &Name) -> String {
        match self {
            Report::Skipped { reason, detail } => {
                format!(
                    "{name}: skipped ({}{detail}){}",
                    reason.as_str(),
                    next(*reason, name)
                )
            }
            Report::Finished {
                run,
                finished: f,
                auto_paused,
                of_this_run,
            } => {
                let mut line = format!(
                    "{name}: {} in {:.2} s",
                    f.outcome.as_str(),
                    f.duration_ms as f64 / 1000.0
                );
                if let Some(h) = &f.headline
                    && let Some(v) = f.facts.get(h)
                {
                    line.push_str(&format!(" · {h}={v}"));
                }
                if let Some(e) = &f.error {
                    line.push_str(&format!(" · {}: {}", e.class, e.detail));
                }
                if f.leftover_processes > 0 {
                    line.push_str(&format!(
                        " · {} leftover process(es) killed",
                        f.leftover_processes
                    ));
                }
                for said in of_this_run {
                    line.push_str(&format!(" · {said}"));
                }
                if f.outcome != Outcome::Ok {
                    line.push_str(&format!(" (automations show {run})"));
                }
                if let Some(reason) = auto_paused {
                    line.push_str(&format!("; {reason}"));
                }
                line
            }
        }
    }
}

/// After a skip's summary: the command that does what the skip did not (the refusals of
/// unapproved changes already name theirs).
fn next(reason: SkipReason, name: &Name) -> String {
    match reason {
        SkipReason::Paused => format!("; `automations resume {name}` lets it run again"),
        SkipReason::Stopped => {
            "; `automations resume-all` lets every automation run again".to_owned()
        }
        SkipReason::AlreadyRunning | SkipReason::AlreadyQueued => {
            format!("; `automations runs {name}` shows the run under way")
        }
        SkipReason::SlotDone => {
            format!("; this slot already ran: `automations run {name}` runs it now")
        }
        SkipReason::RateLimited => {
            format!("; `automations run {name}` runs it now, or raise max_per_hour in [trigger]")
        }
        SkipReason::MissedSlot => format!(
            "; catch_up = \"none\" waits for the next slot: `automations backfill {name}` runs missed ones"
        ),
        SkipReason::DefinitionChanged | SkipReason::ScriptChanged | SkipReason::NotInstalled => {
            String::new()
        }
    }
}

/// Why a firing could not even be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A manual run of a missing or invalid definition: bad input, nothing recorded.
    #[error(transparent)]
    Definition(LoadError),
    /// The data root cannot be used.
    #[error(transparent)]
    DataRoot(#[from] crate::fsutil::DataRootError),
    /// No room to record a run.
    #[error(transparent)]
    DiskFull(#[from] crate::runlog::reserve::DiskFull),
    /// The switches' state cannot be read.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The run log cannot be written.
    #[error(transparent)]
    Log(#[from] crate::runlog::LogError),
    /// A lock (the automation's, its queue's or its group's) cannot be taken.
    #[error("cannot take the lock {}", .path.display())]
    Lock {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// This process cannot be set up to be stopped cleanly.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// The command ran, but `finished` could not be written. Said on stderr, which the journal or
    /// launchd's log keeps, since the run log cannot.
    #[error(
        "the command ran (outcome {}, exit {}) but its result could not be recorded",
        outcome.as_str(),
        exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string())
    )]
    Unrecorded {
        outcome: Outcome,
        exit_code: Option<i32>,
        #[source]
        source: crate::runlog::LogError,
    },
}

impl crate::exit::Exits for RunError {
    /// Bad input is 2 (a definition that is missing or invalid); an unusable data root, a full
    /// disk, a run log that cannot be opened, a state or lock file that is no regular file (a
    /// link, a FIFO) is 3; the rest 1.
    fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            Self::Definition(_) => Exit::BadInput,
            Self::DataRoot(_) | Self::DiskFull(_) => Exit::Environment,
            Self::Log(e) if e.unusable() => Exit::Environment,
            Self::State(e) if e.unusable() => Exit::Environment,
            Self::Lock { source, .. } if crate::fsutil::FileError::of(source).is_some() => {
                Exit::Environment
            }
            Self::State(_) | Self::Log(_) | Self::Lock { .. } | Self::Signals(_) => Exit::Failure,
            Self::Unrecorded { .. } => Exit::Failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunError;
    use crate::exit::{Exit, Exits as _};

    #[test]
    fn a_firing_that_could_not_be_recorded_says_its_exit() {
        let io = || std::io::Error::from_raw_os_error(nix::libc::EIO);
        let cases = [
            (
                RunError::DiskFull(crate::runlog::reserve::DiskFull {
                    path: "/d".into(),
                    source: io(),
                }),
                Exit::Environment,
            ),
            (
                RunError::Log(crate::runlog::LogError::Open {
                    path: "/d/runs.jsonl".into(),
                    source: io(),
                }),
                Exit::Environment,
            ),
            (
                RunError::Log(crate::runlog::LogError::Write {
                    path: "/d/runs.jsonl".into(),
                    source: io(),
                }),
                Exit::Failure,
            ),
            (
                RunError::Lock {
                    path: "/d/locks/x.lock".into(),
                    source: io(),
                },
                Exit::Failure,
            ),
            (RunError::Signals(io()), Exit::Failure),
        ];
        for (e, want) in cases {
            assert_eq!(e.exit(), want, "{e}");
        }
    }
}
