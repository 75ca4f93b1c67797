//! The process exit codes, one enum for every command.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | fine: the command did what was asked (a skipped run is fine; see 75) |
//! | 1 | not fine: a run failed, timed out, was refused or stopped; drift found; a check failed |
//! | 2 | bad input: invalid invocation or invalid definitions |
//! | 3 | environment unusable: no repository root, unreadable data root, missing tools |
//! | 75 | a scheduled firing (`run --trigger schedule`) was skipped: nothing ran (the systemd unit counts it as success) |
//!
//! `automations http` also answers like curl, whose exit codes shell scripts already test: 7 no
//! answer, 22 a status of 400 or more with `--fail`, 56 the body broke off, 63 the body is larger
//! than `--max-bytes`.
//!
//! This module must never print: printing happens once, in `lib.rs`.

use std::process::ExitCode;

/// What a command ended in. Converted to the process exit code in exactly one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done, nothing wrong.
    Success = 0,
    /// 1: the command ran but the outcome is not fine.
    Failure = 1,
    /// 2: the invocation or the definitions are invalid.
    BadInput = 2,
    /// 3: the environment cannot be used (no root, unwritable data root, missing tool).
    Environment = 3,
    /// A scheduled firing that skipped: nothing ran, and why is on stderr. sysexits' EX_TEMPFAIL;
    /// the systemd service lists it in `SuccessExitStatus=`.
    Skipped = 75,
    /// `http`: no answer at all (curl's 7).
    NoAnswer = 7,
    /// `http --fail`: a status of 400 or more (curl's 22).
    HttpError = 22,
    /// `http`: the body broke off (curl's 56).
    BrokeOff = 56,
    /// `http`: the body is larger than `--max-bytes` (curl's 63).
    TooLarge = 63,
}

impl Exit {
    /// 3 when what failed is the environment's (a data root's file that is no regular file, a log
    /// that cannot be opened), else 1.
    pub fn environment_if(unusable: bool) -> Exit {
        if unusable {
            Exit::Environment
        } else {
            Exit::Failure
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// An error that says the exit a command failing with it ends in, decided where the error is made
/// (never read back from its causes). A command's `?` turns such an error into its failure with
/// that exit (`commands::fail::Fail`); an error type without one does not convert.
pub trait Exits: std::error::Error + Send + Sync + 'static {
    /// The exit a command failing with this error ends in.
    fn exit(&self) -> Exit;
}

/// JSON written to standard output: a reader that went away is nothing wrong (`lib.rs`), anything
/// else fails (1).
impl Exits for serde_json::Error {
    fn exit(&self) -> Exit {
        Exit::Failure
    }
}

/// Any error's message and every cause, on one line.
pub fn chain_text(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(c) = cause {
        parts.push(c.to_string());
        cause = c.source();
    }
    parts.join(": ")
}
