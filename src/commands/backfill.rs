//! `backfill NAME --from WHEN --to WHEN [--dry-run] [--again] [--max N] [--json]`: the past slots
//! of an installed schedule, each run once (docs/units.md, "Backfill").

use std::io::{IsTerminal, Write};

use super::fail::{CmdResult, Fail};
use super::machine::bad;
use super::{data_root, one_definition};
use crate::backfill::{self, Action, MAX_SLOTS_UNASKED};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::names::Name;
use crate::schedule::{self, Schedule};
use crate::settings::Settings;

/// `--from` and `--to` as given.
struct Range {
    pub from: String,
    pub to: String,
}

/// The switches of one call.
struct Options {
    pub dry_run: bool,
    pub again: bool,
    pub max: Option<usize>,
    pub json: bool,
}

/// `automations backfill …` as the command line gave it.
pub(super) fn command(settings: &Settings, c: crate::cli::Command) -> CmdResult {
    let crate::cli::Command::Backfill {
        name,
        from,
        to,
        dry_run,
        again,
        max,
        json,
    } = c
    else {
        unreachable!("only backfill comes here");
    };
    let o = Options {
        dry_run,
        again,
        max,
        json,
    };
    backfill(settings, &name, &Range { from, to }, o)
}

fn backfill(settings: &Settings, name: &Name, range: &Range, o: Options) -> CmdResult {
    data_root(settings, if o.dry_run { Use::Read } else { Use::Write })?;
    let def = one_definition(settings, name)?;
    let state = crate::state::State::new(&settings.data_root);
    let record = state
        .install_record(name)
        .map_err(|e| Fail::new(Exit::Environment, e))?
        .ok_or_else(|| {
            bad(format!(
                "{name} is not installed: backfill runs the slots of the installed schedule (make automations-install NAME={name})"
            ))
        })?;
    let schedule = record
        .schedule
        .filter(Schedule::slotted_or_grid)
        .ok_or_else(|| {
            bad(format!(
                "{name}'s install record names no schedule on the clock (daily_at, cron, or an every_minutes grid): it has no slots to run (an install made before records kept the schedule: install it again)"
            ))
        })?;
    let zone = schedule.zone();
    let from = backfill::parse_when(&range.from, zone, &chrono::Local, false)
        .map_err(|e| bad(format!("--from: {e}")))?;
    let to = backfill::parse_when(&range.to, zone, &chrono::Local, true)
        .map_err(|e| bad(format!("--to: {e}")))?;
    if to < from {
        return Err(bad("--to is before --from".into()));
    }
    let log = crate::runlog::RunLog::new(&settings.data_root);
    let succeeded = if o.again {
        Default::default()
    } else {
        backfill::succeeded(&log, name.as_str(), from)
    };
    let now = chrono::Utc::now();
    let plan = backfill::plan(&schedule, (from, to), now, &succeeded, o.again);
    let to_run = plan.iter().filter(|(_, a)| *a == Action::Run).count();
    let limit = o.max.unwrap_or(MAX_SLOTS_UNASKED);
    if to_run > limit {
        let why = if o.max.is_some() {
            format!("{to_run} slots to run, more than --max {limit}")
        } else {
            format!(
                "{to_run} slots to run, more than {MAX_SLOTS_UNASKED}: say --max {to_run} if you mean it"
            )
        };
        return Err(bad(why));
    }
    let stamp = |slot| schedule::slot_stamp(slot, zone, &chrono::Local);
    if o.dry_run || to_run == 0 {
        return say_plan(name, &plan, &stamp, o.json, o.dry_run);
    }
    run_plan(settings, &def, &plan, &stamp, &o)
}

/// Runs the slots of `plan` that are to run, one firing each, and says how each went.
fn run_plan(
    settings: &Settings,
    def: &crate::definition::Definition,
    plan: &[(chrono::DateTime<chrono::Utc>, Action)],
    stamp: &dyn Fn(chrono::DateTime<chrono::Utc>) -> String,
    o: &Options,
) -> CmdResult {
    let name = &def.name;
    let to_run = plan.iter().filter(|(_, a)| *a == Action::Run).count();
    backfill::stop_on_interrupt();
    let bar = std::io::stderr().is_terminal() && !o.json;
    let mut rows = Vec::new();
    let (mut failed, mut skipped, mut done) = (0, 0, 0);
    for (slot, action) in plan {
        let at = stamp(*slot);
        if *action == Action::Succeeded {
            rows.push(serde_json::json!({"slot": at, "action": "passed_over"}));
            if !o.json {
                outln!("{at}  passed over: it already succeeded");
            }
            continue;
        }
        if backfill::interrupted() {
            break;
        }
        if bar {
            progress(done, to_run, &at);
        }
        let ran = backfill::run_slot(settings, def, *slot)
            .map_err(|e| Fail::new(Exit::Environment, anyhow::anyhow!("{name}: {e}")))?;
        if bar {
            errln_raw("\r\x1b[2K");
        }
        if backfill::interrupted() {
            // Stopped by the same Ctrl-C: it counts as not run, and the next call runs it.
            if !o.json {
                outln!("{at}  {}", ran.summary);
            }
            rows.push(serde_json::json!({
                "slot": at, "action": "interrupted", "exit": ran.exit, "summary": ran.summary,
            }));
            break;
        }
        done += 1;
        match ran.exit {
            Some(0) => {}
            Some(code) if code == Exit::Skipped as i32 => skipped += 1,
            _ => failed += 1,
        }
        if !o.json {
            outln!("{at}  {}", ran.summary);
        }
        rows.push(serde_json::json!({
            "slot": at, "action": "ran", "exit": ran.exit, "summary": ran.summary,
        }));
    }
    let stopped = backfill::interrupted() && done < to_run;
    if o.json {
        let doc = serde_json::json!({
            "version": 1, "name": name.as_str(), "slots": rows, "interrupted": stopped,
        });
        outln!("{doc}");
    } else if stopped {
        outln!(
            "interrupted: {done} of {to_run} slot(s) ran; the same command goes on with the rest"
        );
    } else if skipped > 0 {
        outln!(
            "{} slot(s) ran, {failed} failed, {skipped} skipped (the same command runs them once they can)",
            done - skipped
        );
    } else {
        outln!("{done} slot(s) ran, {failed} failed");
    }
    Ok(if stopped || failed > 0 || skipped > 0 {
        Exit::Failure
    } else {
        Exit::Success
    })
}

/// A dry run's lines (or a call with nothing to run): each slot and what a run would do.
fn say_plan(
    name: &Name,
    plan: &[(chrono::DateTime<chrono::Utc>, Action)],
    stamp: &dyn Fn(chrono::DateTime<chrono::Utc>) -> String,
    json: bool,
    dry_run: bool,
) -> CmdResult {
    let word = |a: Action| match (a, dry_run) {
        (Action::Run, true) => "would_run",
        (Action::Run, false) => "ran",
        (Action::Succeeded, _) => "passed_over",
    };
    if json {
        let slots: Vec<_> = plan
            .iter()
            .map(|(s, a)| serde_json::json!({"slot": stamp(*s), "action": word(*a)}))
            .collect();
        outln!(
            "{}",
            serde_json::json!({"version": 1, "name": name.as_str(), "slots": slots, "interrupted": false})
        );
        return Ok(Exit::Success);
    }
    for (slot, action) in plan {
        let what = match action {
            Action::Run => "would run",
            Action::Succeeded => "passed over: it already succeeded",
        };
        outln!("{}  {what}", stamp(*slot));
    }
    let runs = plan.iter().filter(|(_, a)| *a == Action::Run).count();
    if plan.is_empty() {
        outln!("{name}: no slot of its installed schedule in that range");
    } else if dry_run {
        outln!("{runs} of {} slot(s) would run", plan.len());
    } else {
        outln!(
            "nothing to run: every slot in that range already succeeded (--again runs them anyway)"
        );
    }
    Ok(Exit::Success)
}

/// The progress bar on a terminal's stderr: `[#####.....] 3/7  2026-12-03T09:00:00+01:00`.
fn progress(done: usize, all: usize, slot: &str) {
    const WIDTH: usize = 20;
    let filled = (done * WIDTH).checked_div(all).unwrap_or(0);
    errln_raw(&format!(
        "\r\x1b[2K[{}{}] {}/{all}  {slot}",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        done + 1
    ));
}

/// Writes `s` to stderr as it is (no newline).
fn errln_raw(s: &str) {
    let mut e = std::io::stderr();
    let _ = e.write_all(s.as_bytes());
    let _ = e.flush();
}
