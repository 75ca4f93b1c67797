//! Glue between the command line and the modules: resolve settings, call, print results.
//!
//! Output formatting of each command lives here; logic lives in its module. Errors are returned,
//! never printed (see `lib.rs`).

mod doctor;
pub mod fail;
mod health;
mod healthchecks;
mod http;
mod keys;
mod machine;
mod notify;

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, Command, Global, KeyCommand, LogCommand, NotifyCommand, NotifyKeyCommand};
use crate::control;
use crate::definition::{self, Checks, Definition};
use crate::fsutil::Use;
use crate::history::{self, Status};
use crate::names::{self, Name};
use crate::runlog::{self, By, RunLog, Trigger};
use crate::runner::{self, RunError, result};
use crate::settings::{OsFacts, Overrides, Settings};
use crate::state::State;
use crate::views;
use crate::{CmdResult, Exit, Fail};

/// Runs one parsed command line: one arm per command, each handing its arguments to the function
/// that does it.
pub fn dispatch(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "automations", &mut std::io::stdout());
            Ok(Exit::Success)
        }
        Command::Http(args) => http::http_cmd(&args),
        Command::Dashboard { port, no_open } => dashboard(&settings(&cli.global)?, port, no_open),
        Command::Healthchecks(c) => healthchecks::healthchecks_cmd(&settings(&cli.global)?, c),
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
        Command::Show { run, failed, json } => show(&settings(&cli.global)?, &run, failed, json),
        Command::Pause { name, reason } => pause(&settings(&cli.global)?, &name, &reason),
        Command::Resume { name } => resume(&settings(&cli.global)?, &name),
        Command::Ack { name, reason } => ack(&settings(&cli.global)?, &name, reason.as_deref()),
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
        Command::Check { json, diff } => machine::check(&settings(&cli.global)?, json, diff),
        Command::Doctor => doctor::doctor(&settings(&cli.global)?),
        Command::Key(KeyCommand::Store { name }) => keys::store(&settings(&cli.global)?, &name),
        Command::Key(KeyCommand::Check { name }) => keys::check(&settings(&cli.global)?, &name),
        Command::Key(KeyCommand::Delete { name }) => keys::delete(&settings(&cli.global)?, &name),
    }
}

/// `dashboard`: serves until interrupted.
fn dashboard(s: &Settings, port: u16, no_open: bool) -> CmdResult {
    data_root(s, Use::Write)?;
    crate::dashboard::serve(s, port, !no_open).map_err(|e| {
        // A port in use or not ours to take is this machine's state, not a failure.
        let taken = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::AddrInUse | std::io::ErrorKind::PermissionDenied
                )
            })
        });
        if taken {
            Fail::new(Exit::Environment, e)
        } else {
            Fail::from(e)
        }
    })?;
    Ok(Exit::Success)
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
pub(crate) fn data_root(s: &Settings, usage: crate::fsutil::Use) -> Result<bool, Fail> {
    crate::fsutil::check_data_root(&s.data_root, usage).map_err(|e| Fail::new(Exit::Environment, e))
}

/// The definition of `name`; missing or invalid is bad input (exit 2).
pub(crate) fn one_definition(s: &Settings, name: &Name) -> Result<Definition, Fail> {
    definition::load_one(&s.definitions_dir(), name, &Checks::of(s))
        .map_err(|e| Fail::new(Exit::BadInput, e))
}

/// Loads every definition; an unreadable folder is an environment problem.
pub(crate) fn load_all(s: &Settings) -> Result<definition::Loaded, Fail> {
    let dir = s.definitions_dir();
    definition::load_all(&dir, &Checks::of(s))
        .with_context(|| format!("cannot read {}", dir.display()))
        .map_err(|e| Fail::new(Exit::Environment, e))
}

fn validate(s: &Settings) -> CmdResult {
    let loaded = load_all(s)?;
    // Warnings (valid, but maybe not what was meant) go to stderr and do not fail.
    for w in loaded
        .definitions
        .iter()
        .flat_map(crate::definition::schedule_warnings)
    {
        errln!("{w}");
    }
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

fn list(s: &Settings, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let loaded = load_all(s)?;
    let state = State::new(&s.data_root);
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    let last = history::last_runs(&RunLog::new(&s.data_root), &s.data_root, &names)?;
    let installed = crate::install::installed(s, &loaded.definitions)?;
    let now = chrono::Local::now();
    let entries = loaded
        .definitions
        .iter()
        .map(|d| {
            // A pause file that cannot be read makes that one row's state unknown, naming the
            // file; the others are listed as usual.
            let (paused, state_problem) = match state.paused(&d.name) {
                Ok(p) => (p, None),
                Err(e) => (None, Some(crate::exit::chain_text(&e))),
            };
            let live = views::Live {
                paused,
                state_problem,
                last: last.get(d.name.as_str()),
                installed: installed.get(&d.name),
            };
            views::entry(s, d, live, &now)
        })
        .collect::<Vec<_>>();
    let stop = state.stopped()?;
    let out = &mut std::io::stdout().lock();
    if json {
        let doc = views::ListJson {
            version: 1,
            stopped: stop,
            automations: entries,
            invalid: loaded.problems.iter().collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        print_list(out, stop.as_ref(), &entries, loaded.problems.len())?;
    }
    Ok(Exit::Success)
}

/// `list`'s table: the kill switch when on, one row per automation, the count of invalid files.
fn print_list(
    out: &mut dyn Write,
    stop: Option<&crate::state::Stop>,
    entries: &[views::ListEntry],
    problems: usize,
) -> std::io::Result<()> {
    if let Some(stop) = stop {
        writeln!(
            out,
            "KILL SWITCH ON since {}: {} (automations resume-all)",
            field(&stop.at),
            field(&stop.reason)
        )?;
    }
    let width = |f: &dyn Fn(&views::ListEntry) -> usize, min: usize| {
        entries.iter().map(f).max().unwrap_or(min).max(min)
    };
    let w = width(&|e| e.name.len(), 4);
    let sw = width(&|e| e.schedule_words.len(), 8);
    let states: Vec<String> = entries.iter().map(state_words).collect();
    let stw = states.iter().map(String::len).max().unwrap_or(5).max(5);
    let nexts: Vec<&str> = entries
        .iter()
        .map(|e| e.next_words.as_deref().unwrap_or("-"))
        .collect();
    let nw = nexts.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:w$}  {:sw$}  {:8}  {:9}  {:stw$}  {:31}  {:nw$}  DESCRIPTION",
        "NAME", "SCHEDULE", "OUTBOUND", "INSTALLED", "STATE", "LAST RUN", "NEXT"
    )?;
    for ((e, st), next) in entries.iter().zip(&states).zip(&nexts) {
        let last = e.last_run.as_ref().map_or_else(
            || "never".to_owned(),
            |r| format!("{} {}", r.status.as_str(), field(&views::short_time(&r.at))),
        );
        writeln!(
            out,
            "{:w$}  {:sw$}  {:8}  {:9}  {st:stw$}  {last:31}  {next:nw$}  {}",
            e.name,
            e.schedule_words,
            if e.outbound { "yes" } else { "no" },
            e.installed.map_or("-", views::InstallWord::as_str),
            e.description.unwrap_or("")
        )?;
    }
    for e in entries {
        if let Some(problem) = &e.state_problem {
            writeln!(out, "{}: {}", e.name, field(problem))?;
        }
    }
    if problems > 0 {
        writeln!(
            out,
            "({problems} invalid definition problem(s); run `automations validate`)"
        )?;
    }
    Ok(())
}

fn state_words(e: &views::ListEntry) -> String {
    if e.state_problem.is_some() {
        return "unknown (pause file unreadable)".into();
    }
    match (&e.paused, e.running) {
        (_, true) => "running".into(),
        (Some(p), _) if p.by == By::Auto => {
            format!(
                "paused automatically ({})",
                field(&names::truncate(&p.reason, 30))
            )
        }
        (Some(p), _) => format!("paused ({})", field(&names::truncate(&p.reason, 30))),
        (None, false) => "active".into(),
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
    } else if !fine || report.is_refusal() {
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
    let path = std::path::Path::new(&path);
    // What the command says, and the file it wrote before: bad input (2) when refused. Only a
    // file that cannot be written is a failure (1).
    let bad = |e| Fail::new(Exit::BadInput, e);
    let facts = result::parse_args(pairs, headline).map_err(bad)?;
    let merged = result::merge(result::read(path).map_err(bad)?, facts).map_err(bad)?;
    result::write(path, &merged).map_err(|e| Fail::new(Exit::Failure, e))?;
    Ok(Exit::Success)
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
            "runs": recent.runs.iter().map(views::run_json).collect::<Vec<_>>(),
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
            views::short_time(&p.at),
            p.reason
        )?;
    }
    if recent.runs.is_empty() {
        writeln!(out, "no runs yet")?;
    } else {
        print_runs(out, &recent.runs)?;
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

/// Which attempt of which firing a run is, when its firing retries: (number, first run id).
fn attempt_of(v: &history::RunView) -> Option<(u32, &str)> {
    match (&v.finished, &v.started) {
        (Some(f), _) if f.attempt.is_some() => f.attempt.map(|n| (n, f.firing())),
        (_, Some(s)) => s.attempt.map(|n| (n, s.firing())),
        _ => None,
    }
}

/// `runs`'s table.
fn print_runs(out: &mut dyn Write, runs: &[history::RunView]) -> std::io::Result<()> {
    let nw = runs.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:31}  {:nw$}  {:9}  {:20}  {:24}  {:>9}  HEADLINE",
        "RUN", "NAME", "TRIGGER", "STARTED", "STATUS", "DURATION"
    )?;
    for r in runs {
        let status = match (
            &r.reason,
            r.finished.as_ref().and_then(|f| f.error.as_ref()),
        ) {
            (Some(reason), _) => format!("skipped ({})", reason.as_str()),
            (None, Some(e)) if r.status != Status::Ok => {
                format!("{} ({})", r.status.as_str(), field(&e.class))
            }
            _ => r.status.as_str().to_owned(),
        };
        let status = match attempt_of(r) {
            Some((n, _)) => format!("{status}, attempt {n}"),
            None => status,
        };
        writeln!(
            out,
            "{:31}  {:nw$}  {:9}  {:20}  {:24}  {:>9}  {}",
            field(r.run.as_deref().unwrap_or("-")),
            field(&r.name),
            r.trigger.as_str(),
            field(&views::short_time(&r.at)),
            status,
            r.duration_ms()
                .map_or_else(String::new, |ms| format!("{:.2} s", ms as f64 / 1000.0)),
            r.headline()
                .map_or_else(String::new, |(h, v)| format!("{}={v}", field(h))),
        )?;
    }
    Ok(())
}

fn show(s: &Settings, id: &str, failed: bool, json: bool) -> CmdResult {
    data_root(s, Use::Read)?;
    let log = RunLog::new(&s.data_root);
    let found = if failed {
        history::Found::Nothing
    } else {
        history::find(&log, &s.data_root, id, None)?
    };
    let view = match found {
        history::Found::One(v) => *v,
        history::Found::Nothing => latest_of(s, &log, id, failed)?,
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
        let doc = views::show_json(&view);
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(Exit::Success);
    }
    print_run(out, &view)?;
    Ok(Exit::Success)
}

/// `show NAME [--failed]`: the latest run of an automation, when `id` is no run id.
fn latest_of(s: &Settings, log: &RunLog, id: &str, failed: bool) -> Result<history::RunView, Fail> {
    let bad = |msg: String| Fail::new(Exit::BadInput, anyhow::anyhow!(msg));
    let Ok(name) = Name::new(id) else {
        return Err(bad(if failed {
            format!("{id:?} is not an automation name (--failed takes a name)")
        } else {
            format!("no run {id:?} in {}", log.path().display())
        }));
    };
    if let Some(v) = history::latest(log, &s.data_root, name.as_str(), failed)? {
        return Ok(v);
    }
    let known = s.definitions_dir().join(format!("{name}.toml")).is_file();
    Err(bad(match (known, failed) {
        (true, true) => format!("{name} has no failed run"),
        (true, false) => format!("{name} has no runs yet (automations run {name})"),
        (false, _) => format!(
            "no run or automation {id:?} (no run id starts with it, and there is no automations/{name}.toml)"
        ),
    }))
}

/// `show`'s text: the run's fields, its outside calls, then its output tails.
fn print_run(out: &mut dyn Write, view: &history::RunView) -> std::io::Result<()> {
    writeln!(
        out,
        "run       {}",
        field(view.run.as_deref().unwrap_or("-"))
    )?;
    writeln!(out, "name      {}", field(&view.name))?;
    writeln!(out, "trigger   {}", view.trigger.as_str())?;
    if let Some((attempt, firing)) = attempt_of(view) {
        writeln!(out, "attempt   {attempt} (of the firing {})", field(firing))?;
    }
    writeln!(out, "started   {}", field(&view.at))?;
    writeln!(out, "status    {}", view.status.as_str())?;
    let Some(f) = &view.finished else {
        return Ok(());
    };
    writeln!(out, "duration  {:.3} s", f.duration_ms as f64 / 1000.0)?;
    if let Some(c) = f.exit_code {
        writeln!(out, "exit      {c}")?;
    }
    if let Some(sig) = f.signal {
        writeln!(out, "signal    {sig}")?;
    }
    if let Some(e) = &f.error {
        writeln!(out, "error     {}: {}", field(&e.class), field(&e.detail))?;
    }
    if !f.facts.is_empty() {
        let facts: Vec<String> = f
            .facts
            .iter()
            .map(|(k, v)| format!("{}={v}", field(k)))
            .collect();
        writeln!(out, "facts     {}", facts.join(" "))?;
    }
    if let Some(h) = &f.headline {
        writeln!(out, "headline  {}", field(h))?;
    }
    if let Some(h) = &f.http {
        print_http(out, h)?;
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
    Ok(())
}

/// A run's outside calls: counts per class, then each call listed.
fn print_http(out: &mut dyn Write, h: &crate::http::log::Summary) -> std::io::Result<()> {
    let total: u64 = h.counts.values().sum();
    let counts: Vec<String> = h.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    writeln!(out, "http      {total} call(s): {}", counts.join(", "))?;
    for c in &h.requests {
        writeln!(
            out,
            "          {} {} {} ms {}",
            field(&c.host),
            c.status.map_or_else(|| "-".to_owned(), |s| s.to_string()),
            c.ms,
            c.class.as_str()
        )?;
    }
    if h.more > 0 {
        writeln!(out, "          ({} more, counted above)", h.more)?;
    }
    Ok(())
}

pub(crate) use crate::text::{escape_controls, field};

/// A switch refused for bad input (no such automation, a bad reason) is exit 2.
fn control_fail(e: control::ControlError) -> Fail {
    match e {
        control::ControlError::Other(e) => Fail::from(e),
        e => Fail::new(Exit::BadInput, e),
    }
}

fn pause(s: &Settings, name: &Name, reason: &str) -> CmdResult {
    control::require_definition(s, name).map_err(control_fail)?;
    data_root(s, Use::Write)?;
    let p = control::pause(s, name, By::Hand, reason).map_err(control_fail)?;
    outln!("{name}: paused ({})", p.reason);
    healthchecks::follow_pause(s, Some(name), true);
    Ok(Exit::Success)
}

fn resume(s: &Settings, name: &Name) -> CmdResult {
    control::require_definition(s, name).map_err(control_fail)?;
    data_root(s, Use::Write)?;
    if control::resume(s, name).map_err(control_fail)? {
        outln!("{name}: resumed");
    } else {
        outln!("{name}: was not paused");
    }
    healthchecks::follow_pause(s, Some(name), false);
    Ok(Exit::Success)
}

fn ack(s: &Settings, name: &Name, reason: Option<&str>) -> CmdResult {
    control::require_definition(s, name).map_err(control_fail)?;
    data_root(s, Use::Write)?;
    control::ack(s, name, reason).map_err(control_fail)?;
    outln!(
        "{name}: acknowledged; health counts its runs from now (a failure next is a new degradation)"
    );
    Ok(Exit::Success)
}

fn stop_all(s: &Settings, reason: &str) -> CmdResult {
    data_root(s, Use::Write)?;
    let r = control::stop_all(s, reason).map_err(control_fail)?;
    let mut problems = Vec::new();
    match &r.switch_error {
        None => outln!(
            "kill switch on: every firing is skipped until `automations resume-all`; stopped {} running run(s)",
            r.stopped
        ),
        Some(e) => {
            outln!("stopped {} running run(s)", r.stopped);
            problems.push(format!(
                "the kill switch itself could not be saved ({e}), so new firings will still run: free some space and run stop-all again"
            ));
        }
    }
    if let Some(e) = &r.log_error {
        problems.push(format!(
            "the stop_all event could not be written to the run log ({e})"
        ));
    }
    if !r.still_running.is_empty() {
        problems.push(format!(
            "still running after SIGTERM: {}",
            r.still_running.join(", ")
        ));
    }
    healthchecks::follow_pause(s, None, true);
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
    if control::resume_all(s).map_err(control_fail)? {
        outln!("kill switch off");
    } else {
        outln!("kill switch was not on");
    }
    healthchecks::follow_pause(s, None, false);
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
