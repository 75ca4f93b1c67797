//! `automations`: definitions in, OS-native units out, and the runner every firing executes.
//!
//! This file owns dispatch and the one place where errors are printed: every command returns an
//! [`Exit`] or a [`Fail`], and [`run`] turns them into a message on stderr and an exit code.
//! Commands never print their own errors and never call `std::process::exit`.

/// `println!` that never panics: when stdout is gone (`automations runs | head -1`), output
/// just stops. Every command prints through this, `out!` and `errln!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that never panics (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics when stderr is gone.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod anytype;
pub mod cli;
pub mod clock;
pub mod control;
pub mod dashboard;
pub mod definition;
pub mod exit;
pub mod fsutil;

pub mod health;
pub mod healthchecks;
pub mod history;
pub mod http;
pub mod install;
pub mod keys;
pub mod locks;
pub mod names;
pub mod notify;
pub mod parallel;
pub mod pins;
pub mod redact;
pub mod runlog;
pub mod runner;
pub mod schedule;
pub mod service;
pub mod settings;
pub mod state;
pub mod text;
pub mod units;
pub mod views;

mod commands;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use exit::Exit;

/// An error on its way to the user, with the exit code it ends in.
#[derive(Debug)]
pub struct Fail {
    /// The exit code.
    pub exit: Exit,
    /// What went wrong, with its cause chain.
    pub error: anyhow::Error,
}

impl Fail {
    /// A failure with an explicit exit code.
    pub fn new(exit: Exit, error: impl Into<anyhow::Error>) -> Self {
        Self {
            exit,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Fail {
    fn from(error: E) -> Self {
        let error = error.into();
        Self {
            exit: exit_for(&error),
            error,
        }
    }
}

/// Exit 3 when anything in the chain says the environment is unusable: settings, the data root,
/// a file in it that is not a regular file (or is a link), a run log that cannot be opened; exit 2
/// for a settings file whose contents are wrong; else 1.
fn exit_for(error: &anyhow::Error) -> Exit {
    let settings_file = error
        .chain()
        .find_map(|c| c.downcast_ref::<settings::file::Refused>());
    match settings_file.map(|r| r.kind) {
        Some(settings::file::Problem::Unusable) => return Exit::Environment,
        Some(settings::file::Problem::Invalid) => return Exit::BadInput,
        None => {}
    }
    let environment = error.chain().any(|cause| {
        cause.is::<settings::SettingsError>()
            || cause.is::<fsutil::DataRootError>()
            || cause.is::<runlog::reserve::DiskFull>()
            || matches!(
                cause.downcast_ref::<runlog::LogError>(),
                Some(runlog::LogError::Open { .. })
            )
            || cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| fsutil::FileError::of(e).is_some())
    });
    if environment {
        Exit::Environment
    } else {
        Exit::Failure
    }
}

/// The result of a command.
pub type CmdResult = Result<Exit, Fail>;

/// Parses `args`, runs the command, prints any error once, and returns the exit code.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    // Every firing, and every `run` typed by hand, is parsed without building the whole clap
    // command tree (a third of a manual run's own work, a hundred page faults). Anything else, and
    // anything the fast path is unsure of, goes through clap.
    let parsed = match cli::fast_run(&args) {
        Some(cli) => Ok(cli),
        None => cli::Cli::try_parse_from(args),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::BadInput.into()
            } else {
                Exit::Success.into()
            };
        }
    };
    let exit = match commands::dispatch(cli) {
        Ok(exit) => exit,
        // The reader went away (`automations runs | head -1`): nothing is wrong.
        Err(Fail { error, .. }) if broken_pipe(&error) => Exit::Success,
        Err(Fail { exit, error }) => {
            errln!("automations: error: {}", chain(&error));
            exit
        }
    };
    // A firing's keeper (its parent) ends with this code now: all is said and recorded.
    runner::conclude(exit as u8);
    exit.into()
}

fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind());
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// `error: cause: cause`, the whole chain on one line.
fn chain(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// The same for any error: its message and every cause, on one line.
pub(crate) fn chain_text(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(c) = cause {
        parts.push(c.to_string());
        cause = c.source();
    }
    parts.join(": ")
}
