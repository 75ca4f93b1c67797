//! `automations health [NAME] [--json]`: the verdicts, printed.

use std::io::Write;

use super::data_root;
use super::fail::{CmdResult, Fail};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::health::{self, AgeClock, State};
use crate::names::Name;
use crate::settings::Settings;

/// The verdicts of `only` (or every automation), with the thresholds refused as bad input. A
/// look at every automation also rewrites the metrics textfile when `metrics.toml` names one
/// (from the same pass), saying on stderr when it cannot.
pub(crate) fn verdicts(
    settings: &Settings,
    only: Option<&Name>,
) -> Result<Vec<health::Verdict>, Fail> {
    let src = health::load::Sources::read(settings, only)?;
    let textfile = match only {
        Some(_) => None,
        None => crate::metrics::textfile::Textfile::of(settings).unwrap_or_else(|e| {
            errln!("automations: metrics: {e}");
            None
        }),
    };
    let verdicts = match textfile.map(|file| with_textfile(settings, &src, &file)) {
        Some(Ok(verdicts)) => verdicts,
        Some(Err(e)) => {
            // The verdicts come first: a textfile that cannot be written is only said.
            errln!(
                "automations: metrics: {why}",
                why = crate::exit::chain_text(&e)
            );
            health::load::verdicts(settings, &src, only)?
        }
        None => health::load::verdicts(settings, &src, only)?,
    };
    // A command that ends next: what was read is left to the exit.
    std::mem::forget(src);
    Ok(verdicts)
}

/// Every automation's verdict, and the metrics textfile written from the same pass.
fn with_textfile(
    settings: &Settings,
    src: &health::load::Sources,
    file: &crate::metrics::textfile::Textfile,
) -> Result<Vec<health::Verdict>, crate::metrics::MetricsError> {
    use crate::metrics::{self, Format, Machine};
    let machine = Machine::unswitched(settings);
    let (all, verdicts): (Vec<_>, Vec<_>) =
        metrics::collect_with_verdicts(settings, src, None, &machine, Format::Text)?
            .into_iter()
            .unzip();
    let all: Vec<_> = all.into_iter().flatten().collect();
    if let Err(e) = file.write_all(&all, &machine) {
        errln!(
            "automations: metrics: {why}",
            why = crate::exit::chain_text(&e)
        );
    }
    Ok(verdicts)
}

pub fn health_cmd(settings: &Settings, name: Option<&Name>, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let verdicts = verdicts(settings, name)?;
    let degraded = verdicts.iter().any(health::Verdict::degraded);
    // One write for the table, not one per line (1,000 automations made 1,001 writes).
    let out = &mut std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        serde_json::to_writer_pretty(
            &mut *out,
            &serde_json::json!({"version": 1, "degraded": degraded, "automations": verdicts}),
        )?;
        writeln!(out)?;
    } else if verdicts.is_empty() {
        writeln!(out, "no automations")?;
    } else {
        let w = verdicts
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            out,
            "{:w$}  {:8}  {:>4}  {:>5}  {:28}  REASONS",
            "NAME", "VERDICT", "RUNS", "OK", "LAST SUCCESS"
        )?;
        for v in &verdicts {
            let (rate, age, reasons) = row(v);
            writeln!(
                out,
                "{:w$}  {:8}  {:>4}  {:>5}  {:28}  {}",
                v.name,
                match v.verdict {
                    State::Degraded => "DEGRADED",
                    State::Unknown => "unknown",
                    State::Healthy => "healthy",
                },
                v.figures.runs,
                rate,
                age,
                reasons
            )?;
        }
    }
    out.flush()?;
    Ok(if degraded {
        Exit::Failure
    } else {
        Exit::Success
    })
}

/// One row's success rate, age of the last success and reasons, as text.
fn row(v: &health::Verdict) -> (String, String, String) {
    let f = &v.figures;
    let rate = f
        .success_rate
        .map_or_else(|| "-".to_owned(), |r| format!("{:.0} %", r * 100.0));
    let age = match (f.age_ms, f.age_clock, &f.last_success) {
        // No success yet: the age health measures runs from the install, which is no success.
        (_, _, None) => "never".into(),
        (Some(ms), Some(c), _) => format!(
            "{} ago ({})",
            health::human_ms(ms),
            match c {
                AgeClock::Awake => "awake",
                AgeClock::AwakeAtLeast => "awake, at least",
                AgeClock::Wall => "wall clock",
            }
        ),
        // Every row relative, as the ones health measures: its age by the wall clock.
        (_, _, Some(at)) => crate::runlog::parse_stamp(at).map_or_else(
            || super::field(&crate::views::short_time(at)).into_owned(),
            |t| {
                let ms = (chrono::Utc::now() - t).num_milliseconds().max(0) as u64;
                format!("{} ago (wall clock)", health::human_ms(ms))
            },
        ),
    };
    let mut reasons: Vec<String> = v
        .reasons
        .iter()
        .map(|r| super::field(&r.detail).into_owned())
        .collect();
    if let Some(n) = f.missed_slots.filter(|n| *n > 0) {
        reasons.push(format!(
            "{n} slot(s) passed while asleep or off, not run (catch_up = \"none\")"
        ));
    }
    if f.snoozed_until.is_some() {
        let words = crate::views::snoozed_words(f.snoozed_until.as_deref());
        reasons.push(words.trim_start_matches(", ").to_owned());
    }
    if v.verdict == State::Healthy
        && let Some(by) = f.paused_by
    {
        reasons.push(format!(
            "paused by {}",
            if by == crate::runlog::By::Auto {
                "the runner"
            } else {
                "hand"
            }
        ));
    }
    (rate, age, reasons.join("; "))
}
