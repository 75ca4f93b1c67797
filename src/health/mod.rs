//! Health: is each automation doing its job? (SPEC §9)
//!
//! [`verdicts`] is pure — no file, no clock, no environment: it takes what is known of each
//! automation ([`Subject`]: its definition, install time, pause, runs newest first), the
//! thresholds and "now", and returns a [`Verdict`] per automation with every reason and the
//! figures each rule used. `health`, notifications, auto-pause and the dashboard all use it, so
//! there is one answer to "is it healthy?". [`load`] gathers the subjects from disk.
//!
//! The rules (thresholds in [`thresholds`]):
//! - **success rate** over the last `window` runs below `min_success_rate`, once there are
//!   `min_runs`; skipped runs are not runs, interrupted runs are failures and are named;
//! - **stale**: for installed scheduled automations, the age of the last success (or of the install,
//!   when none) in awake time — more than `stale_intervals` intervals, or `stale_daily_hours` for a
//!   daily job. Within one boot the awake delta of the log's clocks; across boots the sum of the
//!   awake spans the log shows, an "at least"; with no clock to go by, wall-clock time, said so;
//! - **slow**: the latest finished run timed out, or took more than `slow_factor` × the median of
//!   the window's successes (needs `min_runs` of them);
//! - **missed days** (`daily_at`): days without any scheduled or skipped run among the last
//!   `missed_days_window`, more than `missed_days_max`; days before the install and since a current
//!   pause are excused;
//! - **headline** (opt-in): the latest success's headline against the median of the 7 before it —
//!   a drop to zero after usually non-zero, or a rise of `headline_rise_factor` times;
//! - **outside calls**: 4xx (403 and 429 included), 5xx, and no answer, each at `http_share` or more
//!   of the window's calls;
//! - **failing streak**: `auto_pause_after` failures in a row since the last resume (an outbound
//!   automation is paused for it; a local one is only marked degraded);
//! - **paused automatically**; a **definition that is invalid**; a name with **no definition**
//!   whose unit still fires and fails.
//!
//! Every reason is built from fixed words, names, counts and class names: never a run's output, a
//! fact's name or an error's detail.

pub mod load;
pub mod thresholds;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use serde::Serialize;

use crate::clock::Clock;
use crate::definition::Definition;
use crate::history::{RunView, Status};
use crate::runlog::{By, Trigger, parse_stamp};
use crate::schedule::Schedule;
use crate::state::Pause;

pub use thresholds::{ThresholdSet, Thresholds};

/// What is known of one automation.
#[derive(Clone, Debug)]
pub struct Subject {
    pub name: String,
    /// Its valid definition; `None` when there is none (or it is invalid).
    pub definition: Option<Definition>,
    /// A definition file exists but is invalid.
    pub invalid: bool,
    /// When its unit was installed on this machine.
    pub installed_at: Option<DateTime<Utc>>,
    /// Its pause, if paused.
    pub paused: Option<Pause>,
    /// When it was last resumed (a failing streak counts from there).
    pub resumed_at: Option<DateTime<Utc>>,
    /// Its runs, newest first (skips included), as far back as the rules need.
    pub runs: Vec<RunView>,
}

/// "Now", for the pure rules.
#[derive(Clone, Debug)]
pub struct Now<Tz: TimeZone> {
    /// Wall-clock time, in the zone days are counted in (local time).
    pub wall: DateTime<Tz>,
    /// The clocks now (boot, awake).
    pub clock: Clock,
}

/// Healthy or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Healthy,
    Degraded,
}

/// A rule that found something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    DefinitionInvalid,
    NoDefinition,
    AutoPaused,
    SuccessRate,
    FailingStreak,
    Stale,
    Slow,
    MissedDays,
    Headline,
    #[serde(rename = "http_4xx")]
    Http4xx,
    #[serde(rename = "http_5xx")]
    Http5xx,
    #[serde(rename = "http_no_answer")]
    HttpNoAnswer,
}

impl Rule {
    /// The fixed words a notification uses for it.
    pub fn words(self) -> &'static str {
        match self {
            Rule::DefinitionInvalid => "invalid definition",
            Rule::NoDefinition => "no definition, unit still firing",
            Rule::AutoPaused => "paused after repeated failures",
            Rule::SuccessRate => "low success rate",
            Rule::FailingStreak => "failing repeatedly",
            Rule::Stale => "no recent success",
            Rule::Slow => "slow run",
            Rule::MissedDays => "missed runs",
            Rule::Headline => "headline changed",
            Rule::Http4xx => "outside calls refused (4xx)",
            Rule::Http5xx => "outside server errors (5xx)",
            Rule::HttpNoAnswer => "outside calls unanswered",
        }
    }
}

/// One finding: the rule and its detail (fixed words, names, numbers and class names only).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reason {
    pub rule: Rule,
    pub detail: String,
}

/// Which clock an age was measured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgeClock {
    /// Awake time within one boot: exact.
    Awake,
    /// Awake time across boots: the spans the log shows, so at least this much.
    AwakeAtLeast,
    /// Wall-clock time: no clock reading to go by.
    Wall,
}

/// The figures the rules used, so the dashboard and scripts never recompute.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Runs in the window (skips not counted) and how many were ok.
    pub runs: usize,
    pub ok: usize,
    pub success_rate: Option<f64>,
    /// Interrupted runs in the window, by id.
    pub interrupted: Vec<String>,
    /// The last success's start, when there is one in what was read.
    pub last_success: Option<String>,
    /// The age of the last success (or of the install) and the clock it was measured on.
    pub age_ms: Option<u64>,
    pub age_clock: Option<AgeClock>,
    /// The age past which it is stale.
    pub stale_after_ms: Option<u64>,
    /// Days missed in the missed-days window (daily jobs).
    pub missed_days: Option<u32>,
    /// Failures in a row since the last resume, and their kinds.
    pub streak: u32,
    pub streak_kinds: Vec<String>,
    /// Outside calls in the window, and the share of each failing class.
    pub http_calls: u64,
    pub http_4xx: f64,
    pub http_5xx: f64,
    pub http_none: f64,
    /// The latest finished run's duration and the median success's.
    pub last_duration_ms: Option<u64>,
    pub median_duration_ms: Option<u64>,
    /// The pause, when paused: `hand` or `auto`.
    pub paused_by: Option<By>,
}

/// The verdict on one automation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub name: String,
    pub verdict: State,
    pub reasons: Vec<Reason>,
    pub figures: Figures,
}

impl Verdict {
    pub fn degraded(&self) -> bool {
        self.verdict == State::Degraded
    }
}

/// The verdict on each subject. Pure.
pub fn verdicts<Tz: TimeZone>(
    subjects: &[Subject],
    thresholds: &ThresholdSet,
    now: &Now<Tz>,
) -> Vec<Verdict> {
    subjects
        .iter()
        .map(|s| verdict(s, thresholds.of(&s.name), now))
        .collect()
}

/// Whether a finished run counts as a failure (everything but ok).
fn failed(v: &RunView) -> bool {
    matches!(
        v.status,
        Status::Failed | Status::Timeout | Status::Stopped | Status::Interrupted
    )
}

/// Runs that are runs: started ones, not skips, not the one still running.
fn real_runs(s: &Subject) -> impl Iterator<Item = &RunView> {
    s.runs
        .iter()
        .filter(|r| r.status != Status::Skipped && r.status != Status::Running)
}

/// The verdict on one subject.
pub fn verdict<Tz: TimeZone>(s: &Subject, th: &Thresholds, now: &Now<Tz>) -> Verdict {
    let mut reasons = Vec::new();
    let mut f = Figures {
        paused_by: s.paused.as_ref().map(|p| p.by),
        ..Figures::default()
    };

    if s.invalid {
        reasons.push(Reason {
            rule: Rule::DefinitionInvalid,
            detail: "its definition is invalid (automations validate)".into(),
        });
    }
    if s.definition.is_none() && !s.invalid {
        let last = real_runs(s).next();
        if let Some(r) = last
            && r.trigger == Trigger::Schedule
            && failed(r)
        {
            reasons.push(Reason {
                rule: Rule::NoDefinition,
                detail: "no definition, but its unit still fires and fails: reinstall or uninstall its unit".into(),
            });
        }
    }
    if let Some(p) = &s.paused
        && p.by == By::Auto
    {
        reasons.push(Reason {
            rule: Rule::AutoPaused,
            detail: "paused automatically after repeated failures; fix the cause, then resume"
                .into(),
        });
    }

    // The window.
    let window: Vec<&RunView> = real_runs(s).take(th.window).collect();
    f.runs = window.len();
    f.ok = window.iter().filter(|r| r.status == Status::Ok).count();
    f.interrupted = window
        .iter()
        .filter(|r| r.status == Status::Interrupted)
        .filter_map(|r| r.run.clone())
        .collect();
    if f.runs > 0 {
        f.success_rate = Some(f.ok as f64 / f.runs as f64);
    }
    if f.runs >= th.min_runs && f.success_rate.is_some_and(|r| r < th.min_success_rate) {
        let mut detail = format!(
            "low success rate: {} of {} runs ok ({:.0} %)",
            f.ok,
            f.runs,
            f.success_rate.unwrap_or(0.0) * 100.0
        );
        if !f.interrupted.is_empty() {
            detail.push_str(&format!("; interrupted: {}", f.interrupted.join(", ")));
        }
        reasons.push(Reason {
            rule: Rule::SuccessRate,
            detail,
        });
    }

    // The failing streak since the last resume.
    let (streak, kinds) = failing_streak(&s.runs, s.resumed_at);
    f.streak = streak;
    f.streak_kinds = kinds.iter().map(|k| (*k).to_owned()).collect();
    let auto_paused = s.paused.as_ref().is_some_and(|p| p.by == By::Auto);
    if streak >= th.auto_pause_after && !auto_paused && s.paused.is_none() {
        reasons.push(Reason {
            rule: Rule::FailingStreak,
            detail: format!("{streak} failures in a row ({})", kinds.join(", ")),
        });
    }

    // Stale: the age of the last success, for installed scheduled automations.
    let last_success = s.runs.iter().find(|r| r.status == Status::Ok);
    f.last_success = last_success.map(|r| r.at.clone());
    if let (Some(def), Some(installed)) = (&s.definition, s.installed_at)
        && let Some(schedule) = &def.schedule
    {
        let limit_ms: u64 = match schedule {
            Schedule::EveryMinutes { every_minutes } => {
                u64::from(*every_minutes) * 60_000 * u64::from(th.stale_intervals)
            }
            Schedule::DailyAt { .. } => u64::from(th.stale_daily_hours) * 3_600_000,
        };
        f.stale_after_ms = Some(limit_ms);
        let paused_since = s.paused.as_ref().and_then(|p| parse_stamp(&p.at));
        let (age, clock) = match last_success {
            Some(r) => age_of(r, &s.runs, now),
            None => (
                (now.wall.with_timezone(&Utc) - installed)
                    .num_milliseconds()
                    .max(0) as u64,
                AgeClock::Wall,
            ),
        };
        f.age_ms = Some(age);
        f.age_clock = Some(clock);
        if age > limit_ms && paused_since.is_none() {
            let what = match last_success {
                Some(_) => "last success",
                None => "installed, never succeeded; installed",
            };
            reasons.push(Reason {
                rule: Rule::Stale,
                detail: format!(
                    "{what} {} ago{} (stale after {})",
                    human_ms(age),
                    match clock {
                        AgeClock::Awake => " in awake time",
                        AgeClock::AwakeAtLeast => " in awake time at least",
                        AgeClock::Wall => " by the wall clock",
                    },
                    human_ms(limit_ms)
                ),
            });
        }
    }

    // Slow.
    if let Some(latest) = window.iter().find(|r| r.finished.is_some()) {
        f.last_duration_ms = latest.duration_ms();
        let mut oks: Vec<u64> = window
            .iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| r.duration_ms())
            .collect();
        oks.sort_unstable();
        let median = (oks.len() >= th.min_runs).then(|| oks[oks.len() / 2]);
        f.median_duration_ms = median;
        if latest.status == Status::Timeout {
            reasons.push(Reason {
                rule: Rule::Slow,
                detail: "the latest run timed out".into(),
            });
        } else if let (Some(m), Some(d)) = (median, latest.duration_ms())
            && d as f64 > th.slow_factor * m.max(1) as f64
            && d >= u64::from(th.slow_min_seconds) * 1000
        {
            reasons.push(Reason {
                rule: Rule::Slow,
                detail: format!(
                    "the latest run took {}, usually {}",
                    human_ms(d),
                    human_ms(m)
                ),
            });
        }
    }

    // Missed days.
    if let (Some(def), Some(installed)) = (&s.definition, s.installed_at)
        && let Some(schedule @ Schedule::DailyAt { .. }) = &def.schedule
    {
        let missed = missed_days(s, schedule, installed, th, now);
        f.missed_days = Some(missed);
        if missed > th.missed_days_max {
            reasons.push(Reason {
                rule: Rule::MissedDays,
                detail: format!("missed {missed} of the last {} days", th.missed_days_window),
            });
        }
    }

    // Headline.
    if th.headline_check
        && let Some(detail) = headline_change(s, th)
    {
        reasons.push(Reason {
            rule: Rule::Headline,
            detail,
        });
    }

    // Outside calls.
    let (mut calls, mut c4, mut c5, mut cn) = (0u64, 0u64, 0u64, 0u64);
    for r in &window {
        if let Some(h) = r.finished.as_ref().and_then(|f| f.http.as_ref()) {
            for class in crate::http::Class::ALL {
                let n = h.count(class);
                calls += n;
                if class.is_4xx() {
                    c4 += n;
                } else if class == crate::http::Class::ServerError {
                    c5 += n;
                } else if class.is_none() {
                    cn += n;
                }
            }
        }
    }
    f.http_calls = calls;
    if calls > 0 {
        let share = |n: u64| n as f64 / calls as f64;
        f.http_4xx = share(c4);
        f.http_5xx = share(c5);
        f.http_none = share(cn);
        for (rule, n, what) in [
            (Rule::Http4xx, c4, "refused by the server (4xx)"),
            (Rule::Http5xx, c5, "answered with a server error (5xx)"),
            (Rule::HttpNoAnswer, cn, "got no answer"),
        ] {
            if n > 0 && share(n) >= th.http_share {
                reasons.push(Reason {
                    rule,
                    detail: format!(
                        "{n} of {calls} recent outside calls {what} ({:.0} %)",
                        share(n) * 100.0
                    ),
                });
            }
        }
    }

    Verdict {
        name: s.name.clone(),
        verdict: if reasons.is_empty() {
            State::Healthy
        } else {
            State::Degraded
        },
        reasons,
        figures: f,
    }
}

/// Failures in a row, newest first, among runs started after `since` (to the millisecond), and
/// their kinds in a fixed order: what the outside calls said, a timeout, an interruption, or the
/// command itself failing. A success ends the streak; skips are not runs.
pub fn failing_streak(runs: &[RunView], since: Option<DateTime<Utc>>) -> (u32, Vec<&'static str>) {
    let mut n = 0;
    let mut seen = std::collections::BTreeSet::new();
    for r in runs {
        // A run someone stopped (stop-all, a stop request) says nothing of the automation: like a
        // skip, it neither counts nor ends the streak.
        if matches!(
            r.status,
            Status::Skipped | Status::Running | Status::Stopped
        ) {
            continue;
        }
        if let (Some(since), Some(t)) = (since, parse_stamp(&r.at))
            && t <= since
        {
            break;
        }
        if !failed(r) {
            break;
        }
        n += 1;
        for k in kinds(r) {
            seen.insert(k);
        }
    }
    (n, seen.into_iter().map(|(_, k)| k).collect())
}

/// The kinds of one failed run, each with its place in the fixed order.
fn kinds(r: &RunView) -> Vec<(u8, &'static str)> {
    use crate::http::Class;
    let mut out = Vec::new();
    if let Some(h) = r.finished.as_ref().and_then(|f| f.http.as_ref()) {
        for (order, class, word) in [
            (0, Some(Class::Blocked), "blocked (403)"),
            (1, Some(Class::RateLimited), "rate limited (429)"),
            (2, Some(Class::ServerError), "server errors (5xx)"),
            (3, Some(Class::ClientError), "other client errors (4xx)"),
            (4, None, "no network or no answer"),
        ] {
            let n = match class {
                Some(c) => h.count(c),
                None => Class::ALL
                    .iter()
                    .filter(|c| c.is_none())
                    .map(|c| h.count(*c))
                    .sum(),
            };
            if n > 0 {
                out.push((order, word));
            }
        }
    }
    match r.status {
        Status::Timeout => out.push((5, "timeout")),
        Status::Interrupted => out.push((6, "interrupted")),
        _ if out.is_empty() => out.push((7, "command failed")),
        _ => {}
    }
    out
}

/// The age of a success in awake time when the log's clocks allow, else wall-clock time.
fn age_of<Tz: TimeZone>(success: &RunView, runs: &[RunView], now: &Now<Tz>) -> (u64, AgeClock) {
    let wall = || {
        let t = parse_stamp(&success.at).unwrap_or_else(|| now.wall.with_timezone(&Utc));
        (
            (now.wall.with_timezone(&Utc) - t).num_milliseconds().max(0) as u64,
            AgeClock::Wall,
        )
    };
    let Some(then) = success
        .finished
        .as_ref()
        .map(|f| &f.clock)
        .filter(|c| c.boot != "unknown")
    else {
        return wall();
    };
    if now.clock.boot == "unknown" {
        return wall();
    }
    if then.boot == now.clock.boot {
        return (
            now.clock.awake_ms.saturating_sub(then.awake_ms),
            AgeClock::Awake,
        );
    }
    // Across boots: the rest of the success's boot as far as the log saw it, every boot in
    // between (its awake time up to the last event seen), and the current boot so far. Only runs
    // since the success (`runs` is newest first): an older boot is no part of the age.
    let mut spans: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    let upto = runs
        .iter()
        .position(|r| r.run.is_some() && r.run == success.run)
        .map_or(runs.len(), |i| i + 1);
    for r in &runs[..upto] {
        for c in [
            r.started.as_ref().map(|s| &s.clock),
            r.finished.as_ref().map(|f| &f.clock),
        ]
        .into_iter()
        .flatten()
        {
            let e = spans.entry(c.boot.as_str()).or_default();
            *e = (*e).max(c.awake_ms);
        }
    }
    let mut total = now.clock.awake_ms;
    for (boot, max) in &spans {
        if *boot == now.clock.boot {
            continue;
        }
        total += if *boot == then.boot {
            max.saturating_sub(then.awake_ms)
        } else {
            *max
        };
    }
    (total, AgeClock::AwakeAtLeast)
}

/// Slots of the last `missed_days_window` days (before today) that the schedule did not fire for
/// (no scheduled run or skip after the slot and before the next one), after the install and before
/// the day a current pause began.
fn missed_days<Tz: TimeZone>(
    s: &Subject,
    schedule: &Schedule,
    installed: DateTime<Utc>,
    th: &Thresholds,
    now: &Now<Tz>,
) -> u32 {
    let tz = now.wall.timezone();
    let now_utc = now.wall.with_timezone(&Utc);
    let start_of = |day: NaiveDate| {
        crate::schedule::resolve_local(&tz, day, crate::schedule::TimeOfDay { hour: 0, minute: 0 })
            .unwrap_or(now_utc)
    };
    let today = now.wall.date_naive();
    let from = start_of(today - Duration::days(i64::from(th.missed_days_window))).max(installed);
    // The whole day a current pause began is excused, as is every day after it.
    let paused_on = s
        .paused
        .as_ref()
        .and_then(|p| parse_stamp(&p.at))
        .map(|t| t.with_timezone(&tz).date_naive());
    let to = start_of(paused_on.map_or(today, |d| d.min(today)));
    let fired: Vec<DateTime<Utc>> = s
        .runs
        .iter()
        .filter(|r| r.trigger == Trigger::Schedule)
        .filter_map(|r| parse_stamp(&r.at))
        .collect();
    crate::schedule::missed_slots(schedule, &tz, (from, to), now_utc, &fired).len() as u32
}

/// The headline rule, when it applies and finds something.
fn headline_change(s: &Subject, th: &Thresholds) -> Option<String> {
    let values: Vec<u64> = s
        .runs
        .iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| r.headline().map(|(_, v)| v))
        .take(8)
        .collect();
    let successes = s.runs.iter().filter(|r| r.status == Status::Ok).count();
    if successes < th.headline_min_successes || values.len() < 8 {
        return None;
    }
    let latest = values[0];
    let mut before = values[1..].to_vec();
    before.sort_unstable();
    let median = before[before.len() / 2];
    if latest == 0 && median > 0 {
        Some(format!("the headline dropped to 0, usually {median}"))
    } else if median > 0 && latest as f64 >= th.headline_rise_factor * median as f64 {
        Some(format!("the headline rose to {latest}, usually {median}"))
    } else {
        None
    }
}

/// `42 s`, `17 min`, `3 h 5 min`, `2 d 4 h`.
pub fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..10 => format!("{:.1} s", ms as f64 / 1000.0),
        10..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests;
