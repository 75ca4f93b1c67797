//! Glue between the command line and the modules: resolve settings, call, print results.
//!
//! Output formatting of each command lives here; logic lives in its module. Errors are returned,
//! never printed (see `lib.rs`).

mod health;
mod http;
mod keys;
mod machine;
mod notify;

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;
use serde::Serialize;

use crate::cli::{Cli, Command, Global, KeyCommand, LogCommand, NotifyCommand, NotifyKeyCommand};
use crate::definition::{self, Checks, Definition, Schedule};
use crate::fsutil::Use;
use crate::history::{self, RunView, Status};
use crate::locks;
use crate::names::{self, Name};
use crate::runlog::{self, By, Event, RunLog, Trigger};
use crate::runner::{self, RunError, result};
use crate::settings::{OsFacts, Overrides, Settings};
use crate::state::{Pause, State, Stop};
use crate::{CmdResult, Exit, Fail};

/// Runs one parsed command line.
pub fn dispatch(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "automations", &mut std::io::stdout());
            Ok(Exit::Success)
        }
        Command::Http(args) => http::http_cmd(&args),
        Command::Notify(NotifyCommand::Test) => notify::test(&settings(&cli.global)?),
        Command::Notify(NotifyCommand::Look { name }) => {
            notify::look(&settings(&cli.global)?, name.as_ref())
        }
        Command::NotifyKey(NotifyKeyCommand::Store { ntfy }) => {
            notify::key_store(&settings(&cli.global)?, ntfy)
        }
        Command::NotifyKey(NotifyKeyCommand::Check { ntfy }) => {
            notify::key_check(&settings(&cli.global)?, ntfy)
        }
        Command::NotifyKey(NotifyKeyCommand::Delete { ntfy }) => {
            notify::key_delete(&settings(&cli.global)?, ntfy)
        }
        Command::Health { name, json } => {
            health::health_cmd(&settings(&cli.global)?, name.as_ref(), json)
        }
        Command::Validate => validate(&settings(&cli.global)?),
        Command::List { json } => list(&settings(&cli.global)?, json),
        Command::Run { name, trigger } => run(&settings(&cli.global)?, &name, trigger),
        Command::Result { facts, headline } => result_cmd(&facts, headline.as_deref()),
        Command::Runs { name, limit, json } => {
            runs(&settings(&cli.global)?, name.as_ref(), limit, json)
        }
        Command::Show { run, json } => show(&settings(&cli.global)?, &run, json),
        Command::Pause { name, reason } => pause(&settings(&cli.global)?, &name, &reason),
        Command::Resume { name } => resume(&settings(&cli.global)?, &name),
        Command::StopAll { reason } => stop_all(&settings(&cli.global)?, &reason),
        Command::ResumeAll => resume_all(&settings(&cli.global)?),
        Command::Log(LogCommand::Verify { json }) => log_verify(&settings(&cli.global)?, json),
        Command::Units { check } => machine::units(&settings(&cli.global)?, check),
        Command::Render {
            name,
            target,
            bin,
            json,
        } => machine::render(&settings(&cli.global)?, &name, target, bin, json),
        Command::Install { name, dry_run, bin } => {
            machine::install(&settings(&cli.global)?, &name, dry_run, bin)
        }
        Command::Uninstall { name, dry_run } => {
            machine::uninstall(&settings(&cli.global)?, &name, dry_run)
        }
        Command::Check { json } => machine::check(&settings(&cli.global)?, json),
        Command::Doctor => machine::doctor(&settings(&cli.global)?),
        Command::Key(KeyCommand::Store { name }) => keys::store(&settings(&cli.global)?, &name),
        Command::Key(KeyCommand::Check { name }) => keys::check(&settings(&cli.global)?, &name),
        Command::Key(KeyCommand::Delete { name }) => keys::delete(&settings(&cli.global)?, &name),
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

/// Checks the data root for `usage` (SPEC §3): not ours, writable by others, not a directory or
/// not writable when it must be is exit 3 with the fix. Returns whether it exists.
pub(crate) fn data_root(s: &Settings, usage: crate::fsutil::Use) -> Result<bool, Fail> {
    crate::fsutil::check_data_root(&s.data_root, usage).map_err(|e| Fail::new(Exit::Environment, e))
}

pub(crate) fn checks(s: &Settings) -> Checks {
    Checks {
        home: s.home.clone(),
        data_root: s.data_root.clone(),
    }
}

/// The definition of `name`; missing or invalid is bad input (exit 2).
pub(crate) fn one_definition(s: &Settings, name: &Name) -> Result<Definition, Fail> {
    definition::load_one(&s.definitions_dir(), name, &checks(s))
        .map_err(|e| Fail::new(Exit::BadInput, e))
}

/// Loads every definition; an unreadable folder is an environment problem.
pub(crate) fn load_all(s: &Settings) -> Result<definition::Loaded, Fail> {
    let dir = s.definitions_dir();
    definition::load_all(&dir, &checks(s))
        .with_context(|| format!("cannot read {}", dir.display()))
        .map_err(|e| Fail::new(Exit::Environment, e))
}

fn validate(s: &Settings) -> CmdResult {
    let loaded = load_all(s)?;
    if loaded.problems.is_empty() {
        outln!("{} definitions valid", loaded.definitions.len());
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
    stopped: Option<Stop>,
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
    paused: Option<Pause>,
    running: bool,
    last_run: Option<LastRun>,
}

/// The last run of an automation, as `list --json` shows it.
#[derive(Serialize)]
struct LastRun {
    run: String,
    at: String,
    trigger: Trigger,
    status: Status,
    duration_ms: Option<u64>,
    headline: Option<u64>,
}

fn entry<'a>(
    s: &Settings,
    d: &'a Definition,
    state: &State,
    last: Option<&RunView>,
) -> Result<ListEntry<'a>, Fail> {
    Ok(ListEntry {
        name: d.name.as_str(),
        label: s.label(&d.name).to_string(),
        schedule: d.schedule.as_ref(),
        schedule_words: d
            .schedule
            .as_ref()
            .map_or_else(|| "manual only".into(), Schedule::words),
        outbound: d.outbound,
        description: d.description.as_deref(),
        paused: state.paused(&d.name)?,
        running: last.is_some_and(|r| r.status == Status::Running),
        last_run: last.map(|r| LastRun {
            run: r.run.clone().unwrap_or_default(),
            at: r.at.clone(),
            trigger: r.trigger,
            status: r.status,
            duration_ms: r.duration_ms(),
            headline: r.headline().map(|(_, v)| v),
        }),
    })
}

fn list(s: &Settings, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let loaded = load_all(s)?;
    let state = State::new(&s.data_root);
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    let last = history::last_runs(&RunLog::new(&s.data_root), &s.data_root, &names)?;
    let entries = loaded
        .definitions
        .iter()
        .map(|d| entry(s, d, &state, last.get(d.name.as_str())))
        .collect::<Result<Vec<_>, _>>()?;
    let stop = state.stopped()?;
    let out = &mut std::io::stdout().lock();
    if json {
        let doc = ListJson {
            version: 1,
            stopped: stop,
            automations: entries,
            invalid: loaded.problems.iter().collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        if let Some(stop) = &stop {
            writeln!(
                out,
                "KILL SWITCH ON since {}: {} (automations resume-all)",
                stop.at, stop.reason
            )?;
        }
        let width = |f: &dyn Fn(&ListEntry) -> usize, min: usize| {
            entries.iter().map(f).max().unwrap_or(min).max(min)
        };
        let w = width(&|e| e.name.len(), 4);
        let sw = width(&|e| e.schedule_words.len(), 8);
        let states: Vec<String> = entries.iter().map(state_words).collect();
        let stw = states.iter().map(String::len).max().unwrap_or(5).max(5);
        writeln!(
            out,
            "{:w$}  {:sw$}  {:8}  {:stw$}  {:31}  DESCRIPTION",
            "NAME", "SCHEDULE", "OUTBOUND", "STATE", "LAST RUN"
        )?;
        for (e, st) in entries.iter().zip(&states) {
            let last = e.last_run.as_ref().map_or_else(
                || "never".to_owned(),
                |r| format!("{} {}", r.status.as_str(), short_time(&r.at)),
            );
            writeln!(
                out,
                "{:w$}  {:sw$}  {:8}  {st:stw$}  {last:31}  {}",
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

fn state_words(e: &ListEntry) -> String {
    match (&e.paused, e.running) {
        (_, true) => "running".into(),
        (Some(p), _) if p.by == By::Auto => {
            format!("paused automatically ({})", names::truncate(&p.reason, 30))
        }
        (Some(p), _) => format!("paused ({})", names::truncate(&p.reason, 30)),
        (None, false) => "active".into(),
    }
}

/// `2026-11-29T20:45:12.123Z` → `2026-11-29 20:45:12Z`.
pub(crate) fn short_time(at: &str) -> String {
    match at.get(..19) {
        Some(t) => format!("{}Z", t.replace('T', " ")),
        None => at.to_owned(),
    }
}

fn run(s: &Settings, name: &Name, trigger: Trigger) -> CmdResult {
    let report = match runner::run(s, name, trigger) {
        Ok(r) => r,
        Err(RunError::Definition(e)) => return Err(Fail::new(Exit::BadInput, e)),
        Err(RunError::Io(e)) => return Err(Fail::from(e)),
        Err(e @ RunError::Unrecorded { .. }) => {
            return Err(Fail::new(
                Exit::Failure,
                anyhow::Error::from(e).context(format!("{name}")),
            ));
        }
    };
    let fine = report.is_fine();
    if trigger == Trigger::Manual || trigger == Trigger::Dashboard {
        outln!("{}", report.summary(name));
    } else if !fine {
        errln!("{}", report.summary(name));
    }
    Ok(if fine { Exit::Success } else { Exit::Failure })
}

fn result_cmd(pairs: &[String], headline: Option<&str>) -> CmdResult {
    let path = std::env::var_os("AUTOMATION_RESULT").filter(|p| !p.is_empty()).ok_or_else(|| {
        Fail::new(
            Exit::BadInput,
            anyhow::anyhow!("AUTOMATION_RESULT is not set: `automations result` reports facts from inside a command started by `automations run`"),
        )
    })?;
    let facts = result::parse_args(pairs, headline).map_err(|e| Fail::new(Exit::BadInput, e))?;
    result::write_merged(std::path::Path::new(&path), facts)
        .map_err(|e| Fail::new(Exit::Failure, e))?;
    Ok(Exit::Success)
}

/// One run in `runs --json` (format version 1).
#[derive(Serialize)]
struct RunJson<'a> {
    #[serde(flatten)]
    view: &'a RunView,
    duration_ms: Option<u64>,
    exit_code: Option<i32>,
    error_class: Option<&'a str>,
    headline: Option<HeadlineJson<'a>>,
}

#[derive(Serialize)]
struct HeadlineJson<'a> {
    name: &'a str,
    value: u64,
}

fn run_json(v: &RunView) -> RunJson<'_> {
    let f = v.finished.as_ref();
    RunJson {
        view: v,
        duration_ms: v.duration_ms(),
        exit_code: f.and_then(|f| f.exit_code),
        error_class: f.and_then(|f| f.error.as_ref()).map(|e| e.class.as_str()),
        headline: v
            .headline()
            .map(|(name, value)| HeadlineJson { name, value }),
    }
}

fn runs(s: &Settings, name: Option<&Name>, limit: usize, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let log = RunLog::new(&s.data_root);
    let recent = history::recent(&log, &s.data_root, name.map(Name::as_str), limit)?;
    let paused = match name {
        Some(n) => State::new(&s.data_root).paused(n)?,
        None => None,
    };
    let out = &mut std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({
            "version": 1,
            "paused": paused,
            "runs": recent.runs.iter().map(run_json).collect::<Vec<_>>(),
            "unreadable_lines": recent.unreadable,
        });
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(Exit::Success);
    }
    if let (Some(n), Some(p)) = (name, &paused) {
        writeln!(
            out,
            "{n}: paused {} since {}: {}",
            if p.by == By::Auto {
                "automatically"
            } else {
                "by hand"
            },
            short_time(&p.at),
            p.reason
        )?;
    }
    if recent.runs.is_empty() {
        writeln!(out, "no runs yet")?;
    } else {
        let nw = recent
            .runs
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            out,
            "{:31}  {:nw$}  {:9}  {:20}  {:24}  {:>9}  HEADLINE",
            "RUN", "NAME", "TRIGGER", "STARTED", "STATUS", "DURATION"
        )?;
        for r in &recent.runs {
            let status = match (
                &r.reason,
                r.finished.as_ref().and_then(|f| f.error.as_ref()),
            ) {
                (Some(reason), _) => format!("skipped ({})", reason.as_str()),
                (None, Some(e)) if r.status != Status::Ok => {
                    format!("{} ({})", r.status.as_str(), e.class)
                }
                _ => r.status.as_str().to_owned(),
            };
            writeln!(
                out,
                "{:31}  {:nw$}  {:9}  {:20}  {:24}  {:>9}  {}",
                r.run.as_deref().unwrap_or("-"),
                r.name,
                r.trigger.as_str(),
                short_time(&r.at),
                status,
                r.duration_ms()
                    .map_or_else(String::new, |ms| format!("{:.2} s", ms as f64 / 1000.0)),
                r.headline()
                    .map_or_else(String::new, |(h, v)| format!("{h}={v}")),
            )?;
        }
    }
    if recent.unreadable > 0 {
        writeln!(
            out,
            "({} unreadable line(s) passed over; automations log verify)",
            recent.unreadable
        )?;
    }
    Ok(Exit::Success)
}

fn show(s: &Settings, id: &str, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let log = RunLog::new(&s.data_root);
    let view = match history::find(&log, &s.data_root, id)? {
        history::Found::One(v) => *v,
        history::Found::Nothing => {
            return Err(Fail::new(
                Exit::BadInput,
                anyhow::anyhow!("no run {id:?} in {}", log.path().display()),
            ));
        }
        history::Found::Ambiguous { some, all } => {
            let more = if all > some.len() {
                format!(" and {} more", all - some.len())
            } else {
                String::new()
            };
            return Err(Fail::new(
                Exit::BadInput,
                anyhow::anyhow!(
                    "{id:?} is the start of {all} run ids; give more of it: {}{more}",
                    some.join(", ")
                ),
            ));
        }
    };
    let out = &mut std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({
            "version": 1,
            "run": run_json(&view),
            "started": view.started,
            "finished": view.finished,
        });
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(Exit::Success);
    }
    writeln!(out, "run       {}", view.run.as_deref().unwrap_or("-"))?;
    writeln!(out, "name      {}", view.name)?;
    writeln!(out, "trigger   {}", view.trigger.as_str())?;
    writeln!(out, "started   {}", view.at)?;
    writeln!(out, "status    {}", view.status.as_str())?;
    if let Some(f) = &view.finished {
        writeln!(out, "duration  {:.3} s", f.duration_ms as f64 / 1000.0)?;
        if let Some(c) = f.exit_code {
            writeln!(out, "exit      {c}")?;
        }
        if let Some(sig) = f.signal {
            writeln!(out, "signal    {sig}")?;
        }
        if let Some(e) = &f.error {
            writeln!(out, "error     {}: {}", e.class, e.detail)?;
        }
        if !f.facts.is_empty() {
            let facts: Vec<String> = f.facts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            writeln!(out, "facts     {}", facts.join(" "))?;
        }
        if let Some(h) = &f.headline {
            writeln!(out, "headline  {h}")?;
        }
        if let Some(h) = &f.http {
            let total: u64 = h.counts.values().sum();
            let counts: Vec<String> = h.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "http      {total} call(s): {}", counts.join(", "))?;
            for c in &h.requests {
                writeln!(
                    out,
                    "          {} {} {} ms {}",
                    c.host,
                    c.status.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                    c.ms,
                    c.class.as_str()
                )?;
            }
            if h.more > 0 {
                writeln!(out, "          ({} more, counted above)", h.more)?;
            }
        }
        writeln!(out, "leftover  {} process(es)", f.leftover_processes)?;
        for (label, tail, dropped) in [
            ("stdout", &f.stdout_tail, f.dropped.stdout),
            ("stderr", &f.stderr_tail, f.dropped.stderr),
        ] {
            let note = if dropped > 0 {
                format!(" ({dropped} earlier bytes dropped)")
            } else {
                String::new()
            };
            writeln!(out, "--- {label}{note}")?;
            // On a terminal a command's escape sequences would be obeyed: show them instead.
            let shown = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                escape_controls(tail)
            } else {
                std::borrow::Cow::Borrowed(tail.as_str())
            };
            write!(out, "{shown}")?;
            if !shown.is_empty() && !shown.ends_with('\n') {
                writeln!(out)?;
            }
        }
    }
    Ok(Exit::Success)
}

/// Output as text a terminal shows but never obeys: control characters other than newline and tab
/// (ESC, BEL, CSI, OSC, …) become `\u{1b}`-style escapes.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// An automation must exist to be paused or resumed, so a typo is not silently accepted.
fn require_definition(s: &Settings, name: &Name) -> Result<(), Fail> {
    let path = s.definitions_dir().join(format!("{name}.toml"));
    if path.is_file() {
        Ok(())
    } else {
        Err(Fail::new(
            Exit::BadInput,
            anyhow::anyhow!("no automation {name} ({} does not exist)", path.display()),
        ))
    }
}

fn pause(s: &Settings, name: &Name, reason: &str) -> CmdResult {
    require_definition(s, name)?;
    data_root(s, Use::Write)?;
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().any(char::is_control) {
        return Err(Fail::new(
            Exit::BadInput,
            anyhow::anyhow!("--reason must be one non-empty line"),
        ));
    }
    let now = chrono::Utc::now();
    State::new(&s.data_root).pause(
        name,
        &Pause {
            by: By::Hand,
            reason: reason.to_owned(),
            at: runlog::stamp(now),
        },
    )?;
    RunLog::new(&s.data_root).append(
        name.as_str(),
        Event::Paused(runlog::Paused {
            by: By::Hand,
            reason: reason.to_owned(),
        }),
        now,
    )?;
    outln!("{name}: paused ({reason})");
    Ok(Exit::Success)
}

fn resume(s: &Settings, name: &Name) -> CmdResult {
    require_definition(s, name)?;
    data_root(s, Use::Write)?;
    if !State::new(&s.data_root).resume(name)? {
        outln!("{name}: was not paused");
        return Ok(Exit::Success);
    }
    RunLog::new(&s.data_root).append(
        name.as_str(),
        Event::Resumed(runlog::Resumed { by: By::Hand }),
        chrono::Utc::now(),
    )?;
    outln!("{name}: resumed");
    Ok(Exit::Success)
}

fn stop_all(s: &Settings, reason: &str) -> CmdResult {
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().any(char::is_control) {
        return Err(Fail::new(
            Exit::BadInput,
            anyhow::anyhow!("--reason must be one non-empty line"),
        ));
    }
    data_root(s, Use::Write)?;
    // The switch first, so a firing that starts now is skipped. A switch that cannot be saved (a
    // full disk) must not keep the running runs from being stopped: they are stopped regardless.
    let now = chrono::Utc::now();
    let saved = State::new(&s.data_root).stop_all(&Stop {
        reason: reason.to_owned(),
        at: runlog::stamp(now),
    });
    // Stop what is running now: every held run lock names a runner, which on SIGTERM ends its
    // command's tree and records the run as stopped.
    let mut running: Vec<(Name, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(s.data_root.join("locks")) {
        for entry in dir.flatten() {
            let file = entry.file_name();
            let Some(name) = file
                .to_str()
                .and_then(|f| f.strip_suffix(".lock"))
                .and_then(|n| Name::new(n).ok())
            else {
                continue;
            };
            if let Some(pid) = locks::holder(&s.data_root, &name) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
                running.push((name, pid));
            }
        }
    }
    // Wait (bounded) until they have recorded their runs, so the log is final when we return.
    let until =
        std::time::Instant::now() + runner::supervise::GRACE + std::time::Duration::from_secs(5);
    while running
        .iter()
        .any(|(n, pid)| locks::holder(&s.data_root, n) == Some(*pid))
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let still: Vec<&str> = running
        .iter()
        .filter(|(n, pid)| locks::holder(&s.data_root, n) == Some(*pid))
        .map(|(n, _)| n.as_str())
        .collect();
    let stopped = running.len() - still.len();
    let logged = RunLog::new(&s.data_root).append(
        "",
        Event::StopAll(runlog::StopAll {
            reason: reason.to_owned(),
            stopped: running.len() as u32,
        }),
        now,
    );
    let mut problems = Vec::new();
    match &saved {
        Ok(()) => outln!(
            "kill switch on: every firing is skipped until `automations resume-all`; stopped {stopped} running run(s)"
        ),
        Err(e) => {
            outln!("stopped {stopped} running run(s)");
            problems.push(format!(
                "the kill switch itself could not be saved ({}), so new firings will still run: free some space and run stop-all again",
                crate::chain_text(e)
            ));
        }
    }
    if let Err(e) = &logged {
        problems.push(format!(
            "the stop_all event could not be written to the run log ({})",
            crate::chain_text(e)
        ));
    }
    if !still.is_empty() {
        problems.push(format!("still running after SIGTERM: {}", still.join(", ")));
    }
    if problems.is_empty() {
        Ok(Exit::Success)
    } else {
        Err(Fail::new(
            Exit::Failure,
            anyhow::anyhow!(problems.join("; ")),
        ))
    }
}

fn resume_all(s: &Settings) -> CmdResult {
    data_root(s, Use::Write)?;
    if !State::new(&s.data_root).resume_all()? {
        outln!("kill switch was not on");
        return Ok(Exit::Success);
    }
    RunLog::new(&s.data_root).append(
        "",
        Event::ResumeAll(runlog::ResumeAll {}),
        chrono::Utc::now(),
    )?;
    outln!("kill switch off");
    Ok(Exit::Success)
}

fn log_verify(s: &Settings, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let log = RunLog::new(&s.data_root);
    let v = runlog::verify(&log)?;
    let broken = !v.breaks.is_empty();
    if json {
        let out = &mut std::io::stdout().lock();
        serde_json::to_writer_pretty(
            &mut *out,
            &serde_json::json!({"version": 1, "ok": !broken, "verification": v}),
        )?;
        writeln!(out)?;
    } else {
        for b in &v.breaks {
            outln!("broken chain: {b}");
        }
        for u in &v.unreadable {
            outln!("unreadable line (torn write or invalid JSON, still chained): {u}");
        }
        if v.torn_tail {
            outln!("the last line is torn (an interrupted write); the next append seals it");
        }
        if let Some(seg) = &v.starts_after {
            outln!("the chain starts at the seam of {seg}, which retention deleted");
        }
        if let Some(h) = &v.head {
            outln!("chain head (state/head): {h}");
        }
        outln!(
            "{}: {} line(s) in {} segment(s) of {}",
            if broken { "chain BROKEN" } else { "chain ok" },
            v.lines,
            v.segments.len(),
            log.path().display()
        );
    }
    Ok(if broken { Exit::Failure } else { Exit::Success })
}
