//! `run`, `result`, `runs`, `show` and `log verify`: one firing now, a command reporting its facts,
//! and the record of runs.

use crate::exit::Exits as _;
use std::io::Write;

use super::fail::{CmdResult, Fail};
use super::{data_root, escape_controls, field};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::history::{self, Status};
use crate::names::Name;
use crate::runlog::{self, By, RunLog, Trigger};
use crate::runner::{self, RunError, result};
use crate::settings::Settings;
use crate::state::State;
use crate::views;

pub(super) fn run(
    settings: &Settings,
    name: &Name,
    trigger: Trigger,
    slot: Option<chrono::DateTime<chrono::Utc>>,
) -> CmdResult {
    if let Some(slot) = slot {
        slot_given(settings, name, trigger, slot)?;
    }
    let report = match runner::run(settings, name, trigger, slot) {
        Ok(r) => r,
        Err(e @ RunError::Unrecorded { .. }) => {
            let exit = e.exit();
            return Err(Fail::new(
                exit,
                anyhow::Error::from(e).context(format!("{name}")),
            ));
        }
        Err(e) => return Err(Fail::new(e.exit(), e)),
    };
    let fine = report.is_fine();
    if matches!(
        trigger,
        Trigger::Manual | Trigger::Dashboard | Trigger::Backfill
    ) {
        outln!("{}", report.summary(name));
        // A backfill tells its slots that did not run (paused, busy) from those that did.
        let skipped = matches!(report, runner::Report::Skipped { .. });
        return Ok(match () {
            () if skipped && trigger == Trigger::Backfill => Exit::Skipped,
            () if fine => Exit::Success,
            () => Exit::Failure,
        });
    }
    // A scheduled firing: the journal (or launchd's log) keeps stderr. Every skip says why and
    // what to do, and ends with its own status, which the unit counts as success but
    // `systemctl status` shows (a `systemctl --user start` that ran nothing does not read as
    // a run).
    if !fine || matches!(report, runner::Report::Skipped { .. }) {
        errln!("{}", report.summary(name));
    }
    Ok(match report {
        runner::Report::Skipped { .. } if skip_status_mapped() => Exit::Skipped,
        _ if fine => Exit::Success,
        _ => Exit::Failure,
    })
}

/// `--slot`: only for a firing of a slot (a catch-up's, a backfill's), of a slot its schedule
/// has, that has come.
fn slot_given(
    settings: &Settings,
    name: &Name,
    trigger: Trigger,
    slot: chrono::DateTime<chrono::Utc>,
) -> Result<(), Fail> {
    let bad = |why: String| Fail::new(Exit::BadInput, anyhow::anyhow!("--slot: {why}"));
    if !matches!(trigger, Trigger::Schedule | Trigger::Backfill) {
        return Err(bad("only with --trigger schedule or backfill".into()));
    }
    if slot > chrono::Utc::now() {
        return Err(bad("a slot that has not come yet".into()));
    }
    let def = super::one_definition(settings, name)?;
    let on_schedule = def.schedule.as_ref().is_some_and(|s| {
        crate::schedule::slots_between(s, &chrono::Local, slot - chrono::Duration::seconds(1), slot)
            == [slot]
    });
    if !on_schedule {
        return Err(bad(format!("{slot} is not a slot of {name}'s schedule")));
    }
    Ok(())
}

/// `run NAME --unit`: the installed unit starts the firing now, as its timer would, and this
/// prints the run's summary line (docs/running.md).
pub(super) fn run_unit(settings: &Settings, name: &Name) -> CmdResult {
    data_root(settings, Use::Write)?;
    let def = super::one_definition(settings, name)?;
    let r = runner::unit::run(settings, &def).map_err(|e| Fail::new(e.exit(), e))?;
    outln!("{}", r.summary(name));
    Ok(if r.is_fine() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// Whether the unit that started this firing counts [`Exit::Skipped`] as success: the systemd
/// service says so (`SuccessExitStatus=` and this variable, set together); a unit installed by an
/// older version, a LaunchAgent or a CronJob does not, and a skip there exits 0.
fn skip_status_mapped() -> bool {
    std::env::var_os(crate::units::ENV_SKIP_STATUS)
        .is_some_and(|v| v.to_str() == Some(&(Exit::Skipped as u8).to_string()))
}

pub(super) fn result_cmd(pairs: &[String], headline: Option<&str>) -> CmdResult {
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

pub(super) fn runs(
    settings: &Settings,
    name: Option<&Name>,
    limit: usize,
    json: bool,
) -> CmdResult {
    data_root(settings, Use::Read)?;
    let log = RunLog::new(&settings.data_root);
    let recent = history::recent(&log, &settings.data_root, name.map(Name::as_str), limit)?;
    let paused = match name {
        Some(n) => State::new(&settings.data_root).paused(n)?,
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

/// The slot a run stood for, when it is not the minute it started (a catch-up of a missed slot,
/// a backfill): on time, the start says it.
fn late_slot(r: &history::RunView) -> Option<&str> {
    let slot = r.started.as_ref()?.slot.as_deref()?;
    let (at, slot_at) = (
        crate::runlog::parse_stamp(&r.at)?,
        crate::runlog::parse_stamp(slot)?,
    );
    // A run waits its jitter after its slot: that is no lateness.
    let waited = jitter_ms(r).map_or(0, |ms| ms as i64 / 1000);
    let late = (at - slot_at).num_seconds() - waited > crate::schedule::zone::ON_TIME_SECONDS;
    (late || r.trigger == crate::runlog::Trigger::Backfill).then_some(slot)
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
            (Some(reason), _) => match &r.held_by {
                Some(h) => format!(
                    "skipped ({}, {} held by {})",
                    reason.as_str(),
                    field(&h.lock),
                    field(&h.holder_words(&r.name))
                ),
                None => format!("skipped ({})", reason.as_str()),
            },
            (None, Some(e)) if r.status != Status::Ok => {
                format!("{} ({})", r.status.as_str(), field(&e.class))
            }
            _ => r.status.as_str().to_owned(),
        };
        let status = match attempt_of(r) {
            Some((n, _)) => format!("{status}, attempt {n}"),
            None => status,
        };
        let status = match jitter_ms(r) {
            Some(ms) => format!("{status}, jitter {:.0} s", ms as f64 / 1000.0),
            None => status,
        };
        let status = match late_slot(r) {
            Some(slot) => format!("{status}, slot {}", field(slot)),
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

pub(super) fn show(settings: &Settings, id: &str, failed: bool, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let log = RunLog::new(&settings.data_root);
    let found = if failed {
        history::Found::Nothing
    } else {
        history::find(&log, &settings.data_root, id, None)?
    };
    // Asked by an automation's name: its next firing too, as `list` says it.
    let mut next = None;
    let view = match found {
        history::Found::One(v) => *v,
        history::Found::Nothing => {
            let v = latest_of(settings, &log, id, failed)?;
            next = next_words(settings, &log, &v.name);
            v
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
        let mut doc = views::show_json(&view);
        if let (Some(next), Some(obj)) = (&next, doc.as_object_mut()) {
            obj.insert("next_words".into(), next.clone().into());
        }
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(Exit::Success);
    }
    print_run(out, &view)?;
    if let Some(next) = next {
        writeln!(out, "next      {}", field(&next))?;
    }
    Ok(Exit::Success)
}

/// `name`'s next firing in words, as `list` gives it (on this machine's clock, and on its
/// schedule's when that names a zone); `None` when it has no definition or no next firing.
fn next_words(settings: &Settings, log: &RunLog, name: &str) -> Option<String> {
    let name = Name::new(name).ok()?;
    let def = super::one_definition(settings, &name).ok()?;
    let installed = crate::install::installed(settings, std::slice::from_ref(&def)).ok()?;
    let last = history::last_runs(log, &settings.data_root, &[name.as_str()]).ok()?;
    let state = State::new(&settings.data_root);
    let live = views::Live {
        paused: state.paused(&name).ok().flatten(),
        snoozed: state.snoozed(&name, chrono::Utc::now()).ok().flatten(),
        state_problem: None,
        last: last.get(name.as_str()),
        installed: installed.get(&name),
    };
    views::entry(settings, &def, live, &chrono::Local::now()).next_words
}

/// `show NAME [--failed]`: the latest run of an automation, when `id` is no run id.
fn latest_of(
    settings: &Settings,
    log: &RunLog,
    id: &str,
    failed: bool,
) -> Result<history::RunView, Fail> {
    let bad = |msg: String| Fail::new(Exit::BadInput, anyhow::anyhow!(msg));
    let Ok(name) = Name::new(id) else {
        return Err(bad(if failed {
            format!("{id:?} is not an automation name (--failed takes a name)")
        } else {
            format!("no run {id:?} in {}", log.path().display())
        }));
    };
    if let Some(v) = history::latest(log, &settings.data_root, name.as_str(), failed)? {
        return Ok(v);
    }
    let known = settings
        .definitions_dir()
        .join(format!("{name}.toml"))
        .is_file();
    Err(bad(match (known, failed) {
        (true, true) => format!("{name} has no failed run"),
        (true, false) => format!("{name} has no runs yet (automations run {name})"),
        (false, _) => format!(
            "no run or automation {id:?} (no run id starts with it, and there is no automations/{name}.toml)"
        ),
    }))
}

/// The jitter delay a run waited before it started, when it waited one.
fn jitter_ms(view: &history::RunView) -> Option<u64> {
    view.started
        .as_ref()
        .and_then(|s| s.jitter_ms)
        .filter(|ms| *ms > 0)
}

/// What started a run, for `show`: its trigger, and for a chained or path-started one the
/// upstream firing or the paths.
fn trigger_words(view: &history::RunView) -> String {
    let paths = view.started.as_ref().and_then(|s| s.paths.as_ref());
    match (&view.after, paths) {
        (Some(up), _) => format!(
            "after {} (its run {}, {})",
            field(&up.name),
            field(&up.run),
            up.outcome.as_str()
        ),
        (None, Some(paths)) => {
            let paths: Vec<_> = paths.iter().map(|p| field(p)).collect();
            format!("path ({})", paths.join(", "))
        }
        _ => view.trigger.as_str().to_owned(),
    }
}

/// `show`'s status line: a skip's reason (and who held its lock group), and the run that
/// replaced a stopped one.
fn print_status(out: &mut dyn Write, view: &history::RunView) -> std::io::Result<()> {
    match (&view.reason, &view.held_by) {
        (Some(reason), Some(h)) => writeln!(
            out,
            "status    skipped ({}): its lock group {} was held by {}",
            reason.as_str(),
            field(&h.lock),
            field(&h.holder_words(&view.name))
        )?,
        (Some(reason), None) => writeln!(out, "status    skipped ({})", reason.as_str())?,
        _ => writeln!(out, "status    {}", view.status.as_str())?,
    }
    if let Some(by) = view
        .finished
        .as_ref()
        .and_then(|f| f.replaced_by.as_deref())
    {
        writeln!(out, "replaced  by the run {}", field(by))?;
    }
    Ok(())
}

/// `show`'s text: the run's fields, its outside calls, then its output tails.
fn print_run(out: &mut dyn Write, view: &history::RunView) -> std::io::Result<()> {
    writeln!(
        out,
        "run       {}",
        field(view.run.as_deref().unwrap_or("-"))
    )?;
    writeln!(out, "name      {}", field(&view.name))?;
    writeln!(out, "trigger   {}", trigger_words(view))?;
    if let Some((attempt, firing)) = attempt_of(view) {
        writeln!(out, "attempt   {attempt} (of the firing {})", field(firing))?;
    }
    writeln!(out, "started   {}", field(&view.at))?;
    if let Some(slot) = view.started.as_ref().and_then(|s| s.slot.as_deref()) {
        writeln!(
            out,
            "slot      {} (the schedule's slot it ran for)",
            field(slot)
        )?;
    }
    if let Some(ms) = jitter_ms(view) {
        writeln!(
            out,
            "jitter    waited {:.1} s before it ran (jitter_seconds)",
            ms as f64 / 1000.0
        )?;
    }
    print_status(out, view)?;
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

pub(super) fn log_verify(settings: &Settings, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let log = RunLog::new(&settings.data_root);
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
        for n in &v.notes {
            outln!("note: {n}");
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
