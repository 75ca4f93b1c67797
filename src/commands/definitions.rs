//! `validate` and `list`: the definitions as they are, and what each does on this machine.

use std::io::Write;

use super::fail::CmdResult;
use super::{data_root, field, load_all};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::history::{self};
use crate::names::{self};
use crate::runlog::{By, RunLog};
use crate::settings::Settings;
use crate::state::State;
use crate::views;

pub(super) fn validate(settings: &Settings) -> CmdResult {
    let loaded = load_all(settings)?;
    // Warnings (valid, but maybe not what was meant) go to stderr and do not fail.
    for w in loaded
        .definitions
        .iter()
        .flat_map(crate::definition::schedule_warnings)
    {
        errln!("{w}");
    }
    if let Some(def) = loaded.definitions.iter().find(|d| d.policy.sandbox)
        && settings.manager == crate::settings::Manager::Systemd
        && let Some(why) = crate::sandbox::why_not_here(&settings.root, &settings.data_root)
    {
        errln!(
            "automations/{}.toml: [sandbox]: warning: valid, but {why}; install refuses it here",
            def.name
        );
    }
    // A private env file every run would fail on is this machine's problem, said as the
    // definition's (the data root may not exist: then there is none).
    let env = super::machine::env_problems(settings, &loaded.definitions);
    if loaded.problems.is_empty() && env.is_empty() {
        outln!("{} definitions valid", loaded.definitions.len());
        return Ok(Exit::Success);
    }
    let mut files: Vec<&str> = loaded.problems.iter().map(|p| p.file.as_str()).collect();
    files.dedup();
    let stderr = &mut std::io::stderr().lock();
    for p in &loaded.problems {
        let _ = writeln!(stderr, "{p}");
    }
    for p in &env {
        let _ = writeln!(stderr, "{p}");
    }
    let _ = writeln!(
        stderr,
        "{} problem(s) in {} file(s); {} definition(s) valid",
        loaded.problems.len() + env.len(),
        files.len() + env.len(),
        loaded.definitions.len()
    );
    Ok(Exit::BadInput)
}

pub(super) fn list(settings: &Settings, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let loaded = load_all(settings)?;
    let state = State::new(&settings.data_root);
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    let last = history::last_runs(
        &RunLog::new(&settings.data_root),
        &settings.data_root,
        &names,
    )?;
    let installed = crate::install::installed(settings, &loaded.definitions)?;
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
                // A snooze file that cannot be read holds nothing here; health names it.
                snoozed: state.snoozed(&d.name, chrono::Utc::now()).ok().flatten(),
                state_problem,
                last: last.get(d.name.as_str()),
                installed: installed.get(&d.name),
            };
            views::entry(settings, d, live, &now)
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
    let words = match (&e.paused, e.running) {
        (_, true) => "running".into(),
        (Some(p), _) if p.by == By::Auto => {
            format!(
                "paused automatically ({})",
                field(&names::truncate(&p.reason, 30))
            )
        }
        (Some(p), _) => format!("paused ({})", field(&names::truncate(&p.reason, 30))),
        (None, false) => "active".into(),
    };
    words + &e.snoozed_words
}
