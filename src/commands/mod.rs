//! Glue between the command line and the modules: resolve settings, call, print results.
//!
//! Output formatting of each command lives here; logic lives in its module. Errors are returned,
//! never printed (see `lib.rs`).

mod backfill;
mod dashboard;
mod definitions;
mod doctor;
pub mod fail;
mod health;
mod healthchecks;
mod http;
mod import;
mod install;
mod keys;
mod machine;
mod metrics;
mod notify;
mod runs;
mod secrets;
mod switches;
mod timeline;

use clap::CommandFactory;

use crate::cli::{Cli, Command, Global, HealthchecksCommand, LogCommand, NotifyCommand};
use crate::definition::{self, Checks, Definition};
use crate::exit::Exit;
use crate::names::Name;
use crate::settings::{OsFacts, Overrides, Settings};
use fail::{CmdResult, Fail};

/// Runs one parsed command line: one arm per command, each handing its arguments to the function
/// that does it.
pub fn dispatch(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "automations", &mut std::io::stdout());
            Ok(Exit::Success)
        }
        Command::Man { out } => man(out.as_deref()),
        Command::Http(args) => http::http_cmd(&args),
        Command::Result { facts, headline } => runs::result_cmd(&facts, headline.as_deref()),
        command => with_settings(command, &settings(&cli.global)?),
    }
}

/// `man`: automations(1) on stdout, or every page (one per command) into `out`.
fn man(out: Option<&std::path::Path>) -> CmdResult {
    use fail::FailContext as _;
    let cmd = Cli::command();
    match out {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot make {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
        }
    }
    Ok(Exit::Success)
}

/// The commands that work on this installation's settings.
fn with_settings(command: Command, s: &Settings) -> CmdResult {
    match command {
        Command::Completions { .. }
        | Command::Man { .. }
        | Command::Http(_)
        | Command::Result { .. } => {
            unreachable!("dispatched without settings")
        }
        Command::Import(c) => import::import(s, c),
        Command::Dashboard { port, no_open } => dashboard::dashboard(s, port, no_open),
        Command::Healthchecks(HealthchecksCommand::Key(c)) => Ok(secrets::old_healthchecks_key(&c)),
        Command::Healthchecks(c) => healthchecks::healthchecks_cmd(s, c),
        Command::Notify(NotifyCommand::Test) => notify::test(s),
        Command::Notify(NotifyCommand::Look { name }) => notify::look(s, name.as_ref()),
        Command::NotifyKey(c) => Ok(secrets::old_notify_key(&c)),
        Command::Secret(c) => secrets::secret(s, c),
        Command::Health { name, json } => health::health_cmd(s, name.as_ref(), json),
        Command::Metrics { openmetrics } => metrics::metrics(s, openmetrics),
        Command::Timeline { hours, json } => timeline::timeline(s, hours, json),
        Command::Validate => definitions::validate(s),
        Command::List { json } => definitions::list(s, json),
        Command::Run { name, unit, .. } if unit => runs::run_unit(s, &name),
        Command::Run {
            name,
            trigger,
            slot,
            ..
        } => runs::run(s, &name, trigger, slot),
        c @ Command::Backfill { .. } => backfill::command(s, c),
        Command::Runs { name, limit, json } => runs::runs(s, name.as_ref(), limit, json),
        Command::Show { run, failed, json } => runs::show(s, &run, failed, json),
        Command::Pause { name, reason } => switches::pause(s, &name, &reason),
        Command::Resume { name } => switches::resume(s, &name),
        Command::Ack { name, reason } => switches::ack(s, &name, reason.as_deref()),
        Command::Snooze {
            name,
            duration,
            reason,
        } => switches::snooze(s, &name, &duration, reason.as_deref()),
        Command::Unsnooze { name } => switches::unsnooze(s, &name),
        Command::StopAll { reason } => switches::stop_all(s, &reason),
        Command::ResumeAll => switches::resume_all(s),
        Command::Log(LogCommand::Verify { json }) => runs::log_verify(s, json),
        Command::Units { check } => machine::units(s, check),
        Command::Render {
            name,
            target,
            bin,
            json,
        } => machine::render(s, &name, target, bin, json),
        Command::Install {
            names,
            all,
            dry_run,
            bin,
            install_binary,
        } => install::install(s, &names, all, dry_run, bin, install_binary),
        Command::Uninstall {
            names,
            all,
            dry_run,
        } => install::uninstall(s, &names, all, dry_run),
        Command::Check { json, diff } => machine::check(s, json, diff),
        Command::Doctor => doctor::doctor(s),
        Command::Key(c) => Ok(secrets::old_key(&c)),
    }
}

/// Resolves settings from the global flags and this process's environment.
pub fn settings(global: &Global) -> Result<Settings, Fail> {
    let os = OsFacts::from_process()?;
    let flags = Overrides {
        root: global.root.clone(),
        namespace: global.namespace.clone(),
        data_root: global.data_root.clone(),
    };
    Ok(Settings::resolve(&flags, &os)?)
}

/// Checks the data root for `usage` (docs/definitions.md): not ours, writable by others, not a directory or
/// not writable when it must be is exit 3 with the fix. Returns whether it exists.
pub(crate) fn data_root(settings: &Settings, usage: crate::fsutil::Use) -> Result<bool, Fail> {
    crate::fsutil::check_data_root(&settings.data_root, usage)
        .map_err(|e| Fail::new(Exit::Environment, e))
}

/// The definition of `name`; missing or invalid is bad input (exit 2).
pub(crate) fn one_definition(settings: &Settings, name: &Name) -> Result<Definition, Fail> {
    definition::load_one(&settings.definitions_dir(), name, &Checks::of(settings))
        .map_err(|e| Fail::new(Exit::BadInput, e))
}

/// Loads every definition; an unreadable folder is an environment problem.
pub(crate) fn load_all(settings: &Settings) -> Result<definition::Loaded, Fail> {
    let dir = settings.definitions_dir();
    definition::load_all(&dir, &Checks::of(settings)).map_err(|e| {
        Fail::new(
            Exit::Environment,
            anyhow::Error::new(e).context(format!("cannot read {}", dir.display())),
        )
    })
}

pub(crate) use crate::text::{escape_controls, field};
