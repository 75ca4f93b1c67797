//! `automations`: definitions in, OS-native units out, and the runner every firing executes.
//!
//! This file owns dispatch and the one place where errors are printed: every command returns an
//! [`Exit`] or a [`Fail`], and [`run`] turns them into a message on stderr and an exit code.
//! Commands never print their own errors and never call `std::process::exit`. The layers and what
//! each owns: docs/ARCHITECTURE.md.

// No shipped function over 80 lines (clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

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
pub mod backfill;
pub mod cli;
pub mod clock;
pub mod control;
pub mod dashboard;
pub mod definition;
pub mod exit;
pub mod fsutil;
pub mod import;

pub mod health;
pub mod healthchecks;
pub mod history;
pub mod http;
pub mod install;
pub mod keys;
pub mod layout;
pub mod locks;
pub mod metrics;
pub mod names;
pub mod notify;
pub mod parallel;
pub mod pins;
pub mod platform;
pub mod process;
pub mod redact;
pub mod runlog;
pub mod runner;
pub mod sandbox;
pub mod schedule;
pub mod secrets;
pub mod service;
pub mod settings;
pub mod state;
pub mod text;
pub mod timeline;
pub mod units;
pub mod views;

mod commands;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use commands::fail::{CmdResult, Fail};
pub use exit::{Exit, chain_text};

/// Parses `args`, runs the command, prints any error once, and returns the exit code.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    // A unit's firing is read without building clap's command tree (most of a firing's own
    // start-up): its argv is one fixed shape. Everything else goes through clap.
    let parsed = match cli::unit_firing(&args) {
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
        Err(Fail { error, .. }) if commands::fail::broken_pipe(&error) => Exit::Success,
        Err(Fail { exit, error }) => {
            errln!("automations: error: {}", exit::chain_text(error.as_ref()));
            exit
        }
    };
    // A firing's keeper (its parent) ends with this code now: all is said and recorded.
    runner::conclude(exit as u8);
    exit.into()
}
