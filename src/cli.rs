//! The command line: every command, flag and its `--help` text, and nothing else.
//!
//! Doc comments here are the `--help` users read. Dispatch lives in `lib.rs`; this module must never
//! do I/O or resolve settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Turns automations/<name>.toml definitions into OS-native scheduled units and runs every firing
/// safely: lock, pause state, clean environment, whole-tree timeout, redacted output, hash-chained
/// run log.
#[derive(Debug, Parser)]
#[command(
    name = "automations",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(
    after_help = "Exit codes: 0 fine, 1 not fine (failed run, drift, check failed), \
                        2 bad input (invocation or definitions), 3 environment unusable."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Where things are; each also comes from an environment variable, and otherwise a default.
#[derive(Debug, Args, Clone, Default)]
pub struct Global {
    /// Repository root holding automations/ [env: AUTOMATIONS_ROOT] [default: nearest ancestor of
    /// the working directory that holds automations/]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Namespace of labels, local.<namespace>.<name> [env: AUTOMATIONS_NAMESPACE] [default:
    /// automations]
    #[arg(long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Private data root: run log, state, locks, env files [env: AUTOMATIONS_DATA_ROOT] [default:
    /// $XDG_STATE_HOME/automations/<ns> on Linux, ~/Library/Application Support/automations/<ns>
    /// on macOS]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_root: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every definition and report every problem at once.
    ///
    /// Each problem is one line: automations/<file>: <key>: <what is wrong>.
    /// Exits 2 when any definition is invalid.
    ///
    /// Example: automations validate
    Validate,

    /// List the automations: schedule in words, outbound, description.
    ///
    /// Example: automations list --json
    List {
        /// Print a JSON document (format version 1) instead of a table.
        #[arg(long)]
        json: bool,
    },

    /// Print a shell completion script.
    ///
    /// Example: automations completions bash > ~/.local/share/bash-completion/completions/automations
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
