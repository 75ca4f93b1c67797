//! Glue between the command line and the modules: resolve settings, call, print results.
//!
//! Output formatting of each command lives here; logic lives in its module. Errors are returned,
//! never printed (see `lib.rs`).

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;
use serde::Serialize;

use crate::cli::{Cli, Command, Global};
use crate::definition::{self, Checks, Definition, Schedule};
use crate::settings::{OsFacts, Overrides, Settings};
use crate::{CmdResult, Exit, Fail};

/// Runs one parsed command line.
pub fn dispatch(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "automations", &mut std::io::stdout());
            Ok(Exit::Success)
        }
        Command::Validate => validate(&settings(&cli.global)?),
        Command::List { json } => list(&settings(&cli.global)?, json),
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

fn checks(s: &Settings) -> Checks {
    Checks {
        home: s.home.clone(),
        data_root: s.data_root.clone(),
    }
}

/// Loads every definition; an unreadable folder is an environment problem.
fn load_all(s: &Settings) -> Result<definition::Loaded, Fail> {
    let dir = s.definitions_dir();
    definition::load_all(&dir, &checks(s))
        .with_context(|| format!("cannot read {}", dir.display()))
        .map_err(|e| Fail::new(Exit::Environment, e))
}

fn validate(s: &Settings) -> CmdResult {
    let loaded = load_all(s)?;
    if loaded.problems.is_empty() {
        println!("{} definitions valid", loaded.definitions.len());
        return Ok(Exit::Success);
    }
    let mut files: Vec<&str> = loaded.problems.iter().map(|p| p.file.as_str()).collect();
    files.dedup();
    let stderr = &mut std::io::stderr().lock();
    for p in &loaded.problems {
        let _ = writeln!(stderr, "{p}");
    }
    let _ = writeln!(
        stderr,
        "{} problem(s) in {} file(s); {} definition(s) valid",
        loaded.problems.len(),
        files.len(),
        loaded.definitions.len()
    );
    Ok(Exit::BadInput)
}

/// The `list --json` document (format version 1).
#[derive(Serialize)]
struct ListJson<'a> {
    version: u32,
    automations: Vec<ListEntry<'a>>,
    invalid: Vec<&'a definition::Problem>,
}

#[derive(Serialize)]
struct ListEntry<'a> {
    name: &'a str,
    label: String,
    schedule: Option<&'a Schedule>,
    schedule_words: String,
    outbound: bool,
    description: Option<&'a str>,
}

fn entry<'a>(s: &Settings, d: &'a Definition) -> ListEntry<'a> {
    ListEntry {
        name: d.name.as_str(),
        label: s.label(&d.name).to_string(),
        schedule: d.schedule.as_ref(),
        schedule_words: d
            .schedule
            .as_ref()
            .map_or_else(|| "manual only".into(), Schedule::words),
        outbound: d.outbound,
        description: d.description.as_deref(),
    }
}

fn list(s: &Settings, json: bool) -> CmdResult {
    let loaded = load_all(s)?;
    let entries: Vec<ListEntry> = loaded.definitions.iter().map(|d| entry(s, d)).collect();
    let out = &mut std::io::stdout().lock();
    if json {
        let doc = ListJson {
            version: 1,
            automations: entries,
            invalid: loaded.problems.iter().collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        let w = entries
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let sw = entries
            .iter()
            .map(|e| e.schedule_words.len())
            .max()
            .unwrap_or(8)
            .max(8);
        writeln!(
            out,
            "{:w$}  {:sw$}  {:8}  DESCRIPTION",
            "NAME", "SCHEDULE", "OUTBOUND"
        )?;
        for e in &entries {
            writeln!(
                out,
                "{:w$}  {:sw$}  {:8}  {}",
                e.name,
                e.schedule_words,
                if e.outbound { "yes" } else { "no" },
                e.description.unwrap_or("")
            )?;
        }
        if !loaded.problems.is_empty() {
            writeln!(
                out,
                "({} invalid definition problem(s); run `automations validate`)",
                loaded.problems.len()
            )?;
        }
    }
    Ok(Exit::Success)
}
