//! Health: is each automation doing its job? (docs/health.md)
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
//!   daily job, moved by as much as its longest gap between slots differs from a day (none for an
//!   automation that runs only at login). Within one boot the awake delta of the log's clocks;
//!   across boots the sum of the awake spans the log shows, an "at least"; with no clock to go by,
//!   wall-clock time, said so;
//! - **slow**: the latest finished run timed out, or took more than `slow_factor` × the median of
//!   the window's successes (needs `min_runs` of them);
//! - **missed days** (`daily_at`): slots (every listed time, on its days) without any scheduled or
//!   skipped run after them among the last `missed_days_window` days, more than `missed_days_max`;
//!   slots before the install and since the day a current pause began are excused;
//! - **headline** (opt-in): the latest success's headline against the median of the 7 before it —
//!   a drop to zero after usually non-zero, or a rise of `headline_rise_factor` times;
//! - **outside calls**: 4xx (403 and 429 included), 5xx, and no answer, each at `http_share` or more
//!   of the window's calls;
//! - **failing streak**: `auto_pause_after` failures in a row since the last resume (an outbound
//!   automation is paused for it; a local one is only marked degraded);
//! - **rate limited**: event-started firings skipped past `max_per_hour` in the last hour;
//! - **watch stopped**: the service manager stopped watching its paths for good;
//! - **paused automatically**; a **definition that is invalid**; a name with **no definition**
//!   whose unit still fires and fails.
//!
//! Every reason is built from fixed words, names, counts and class names: never a run's output, a
//! fact's name or an error's detail.

pub mod load;
mod rules;
pub mod thresholds;

pub use rules::failing_streak;

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use crate::clock::Clock;
use crate::definition::Definition;
use crate::history::RunView;
use crate::runlog::By;
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
    /// The schedule its installed unit fires on: the one its install recorded, else (an older
    /// record) its definition's while that is the one approved.
    pub fires_on: Option<crate::schedule::Schedule>,
    /// Its pause, if paused.
    pub paused: Option<Pause>,
    /// Its snooze, while one holds: its notifications are held (its verdict is its verdict).
    pub snoozed: Option<crate::state::Snooze>,
    /// When it was last acknowledged (`ack`) or resumed: the window rules and the failing streak
    /// count runs from there.
    pub acked_at: Option<DateTime<Utc>>,
    /// Why its definition or script as it is now is not what was installed (see `pins`), in words:
    /// its scheduled firings are skipped until it is installed again.
    pub not_approved: Option<String>,
    /// State files of it that could not be read (a pause or install record), each with why: its
    /// verdict is unknown, and nothing else is hidden by them.
    pub unreadable: Vec<String>,
    /// What came of its Healthchecks pings, when it has pinged.
    pub pings: Option<crate::state::Pings>,
    /// Why the service manager stopped its path watch for good, when it did
    /// (`trigger-limit-hit`).
    pub watch_stopped: Option<String>,
    /// Its runs, newest first (skips included), as far back as the rules need.
    pub runs: Vec<RunView>,
}

impl Subject {
    /// A name only the log still knows: its definition was deleted (not left invalid), no unit of
    /// it is installed here (and no install record of it is unreadable), and `verdict` is not
    /// degraded — a unit left firing it fails, and that stays in sight. The board and the metrics
    /// leave it out: nothing of it will run again, and `runs NAME` still shows its history.
    pub fn retired(&self, verdict: &Verdict) -> bool {
        self.definition.is_none()
            && !self.invalid
            && self.installed_at.is_none()
            && self.unreadable.is_empty()
            && verdict.verdict != State::Degraded
    }
}

/// "Now", for the pure rules.
#[derive(Clone, Debug)]
pub struct Now<Tz: TimeZone> {
    /// Wall-clock time, in the zone days are counted in (local time).
    pub wall: DateTime<Tz>,
    /// The clocks now (boot, awake).
    pub clock: Clock,
}

/// Healthy, degraded, or not known yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Healthy,
    Degraded,
    /// Nothing says it works: a scheduled automation not installed here, one with no finished
    /// run yet, or one whose state cannot be read. Not green, not a problem to notify.
    Unknown,
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
    /// Every run since the latest ack (or resume) of a failing automation failed.
    FailingSinceAck,
    /// Its definition or script changed since it was installed: scheduled firings are skipped.
    NotApproved,
    /// Unknown: scheduled, but not installed on this machine.
    NotInstalled,
    /// Unknown: no finished run yet.
    NoRuns,
    /// Unknown: a state file of it cannot be read.
    Unreadable,
    /// Its Healthchecks pings failed several times in a row: the outside watch is blind to it.
    PingsFailing,
    /// Event-started firings were skipped past its `max_per_hour` within the last hour.
    RateLimited,
    /// The service manager stopped watching its paths (systemd's trigger limit).
    WatchStopped,
    /// The latest run succeeded far sooner than its successes usually take, or than its
    /// definition's `expect_min_seconds`: a backup done in 3 minutes instead of 50 did not back up.
    TooShort,
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
            Rule::FailingSinceAck => "failing again since it was acknowledged",
            Rule::NotApproved => "changed since it was installed, so its schedule skips it",
            Rule::NotInstalled => "not installed",
            Rule::NoRuns => "no runs yet",
            Rule::Unreadable => "its state cannot be read",
            Rule::PingsFailing => "its Healthchecks pings fail",
            Rule::RateLimited => "fired too often, firings skipped",
            Rule::WatchStopped => "its folder watch stopped",
            Rule::TooShort => "run too short",
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
    /// With `catch_up = "none"`: the slots of the missed-days window it did not run because they
    /// passed while the machine slept or was off. Reported, never a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_slots: Option<u32>,
    /// Failures in a row since the last resume, and their kinds.
    pub streak: u32,
    pub streak_kinds: Vec<String>,
    /// Outside calls in the window, and the share of each failing class.
    pub http_calls: u64,
    pub http_4xx: f64,
    pub http_5xx: f64,
    pub http_none: f64,
    /// The latest finished run (in the window: since the latest ack), its duration, and the
    /// median success's.
    pub last_run: Option<String>,
    pub last_duration_ms: Option<u64>,
    pub median_duration_ms: Option<u64>,
    /// The pause, when paused: `hand` or `auto`, and since when (RFC 3339 UTC).
    pub paused_by: Option<By>,
    pub paused_at: Option<String>,
    /// The latest ack or resume, from which the window and the streak count.
    pub acked_at: Option<String>,
    /// Until when its notifications are held (`automations snooze`), while they are.
    pub snoozed_until: Option<String>,
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

impl State {
    /// The word shown to people and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::Unknown => "unknown",
        }
    }
}

/// The verdict on one subject: every rule of [`rules::table`], in order; with no finding, unknown
/// when nothing shows it works ([`rules::unknown`]), else healthy. A state file that cannot be read
/// makes it unknown whatever the rules found, since they ran without it.
pub fn verdict<Tz: TimeZone>(s: &Subject, th: &Thresholds, now: &Now<Tz>) -> Verdict {
    let input = rules::Input::new(s, th, now);
    // What notifications key their news on: the pause's time, the latest ack or resume.
    let mut figures = Figures {
        paused_at: s.paused.as_ref().map(|p| p.at.clone()),
        snoozed_until: s.snoozed.as_ref().map(|z| z.until.clone()),
        acked_at: s.acked_at.map(crate::runlog::stamp),
        ..Figures::default()
    };
    let reasons: Vec<Reason> = rules::table()
        .iter()
        .flat_map(|rule| rule(&input, &mut figures))
        .collect();
    let unreadable: Vec<Reason> = s
        .unreadable
        .iter()
        .map(|why| Reason {
            rule: Rule::Unreadable,
            detail: why.clone(),
        })
        .collect();
    let (verdict, reasons) = if !unreadable.is_empty() {
        (
            State::Unknown,
            unreadable.into_iter().chain(reasons).collect(),
        )
    } else if let Some(why) = rules::not_installed(s) {
        // One rule for every scheduled automation that is not installed here (never, or no
        // longer): it does not run here, so its past runs are history, not health.
        (State::Unknown, vec![why])
    } else if !reasons.is_empty() {
        (State::Degraded, reasons)
    } else {
        match rules::unknown(s) {
            Some(why) => (State::Unknown, vec![why]),
            None => (State::Healthy, reasons),
        }
    };
    Verdict {
        name: s.name.clone(),
        verdict,
        reasons,
        figures,
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
