//! The health rules as a table (docs/health.md): each rule is one small function that reads what is known
//! of one automation ([`Input`]), fills the figures it used and returns what it found. A new rule
//! is one more function and one more line in [`table`]; `verdict` runs them in that order, which
//! is the order reasons are listed (and notifications read them).

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};

use super::{AgeClock, Figures, Now, Reason, Rule, Subject, Thresholds, human_ms};
use crate::history::{RunView, Status};
use crate::runlog::{By, SkipReason, Trigger, parse_stamp};
use crate::schedule::Schedule;

/// What every rule reads: the subject, its thresholds, now, and its window of runs.
pub struct Input<'a, Tz: TimeZone> {
    pub s: &'a Subject,
    pub th: &'a Thresholds,
    pub now: &'a Now<Tz>,
    /// The last `window` runs that are runs (no skips, not the one running), newest first.
    pub window: Vec<&'a RunView>,
}

impl<'a, Tz: TimeZone> Input<'a, Tz> {
    pub fn new(s: &'a Subject, th: &'a Thresholds, now: &'a Now<Tz>) -> Self {
        Self {
            s,
            th,
            now,
            window: real_runs(s)
                .take_while(|r| since_ack(s, r))
                .take(th.window)
                .collect(),
        }
    }
}

/// Whether `r` started after the subject's latest ack or resume (every run, when there is none).
fn since_ack(s: &Subject, r: &RunView) -> bool {
    match (s.acked_at, parse_stamp(&r.at)) {
        (Some(ack), Some(t)) => t > ack,
        _ => true,
    }
}

/// A rule: fills the figures it uses, returns its findings.
pub type Check<Tz> = fn(&Input<'_, Tz>, &mut Figures) -> Vec<Reason>;

/// Every rule, in the order its reasons are listed.
pub fn table<Tz: TimeZone>() -> [Check<Tz>; 16] {
    [
        definition_invalid,
        no_definition,
        not_approved,
        auto_paused,
        success_rate,
        failing_streak_rule,
        failing_since_ack,
        stale,
        slow,
        too_short,
        missed_days_rule,
        headline,
        outside_calls,
        pings_failing,
        rate_limited,
        watch_stopped,
    ]
}

/// The latest run succeeded in less than `short_factor` × the median of the successes before it
/// (once there are `short_min_successes` of them since the last ack), or in less than its
/// definition's `expect_min_seconds`: it exited 0, but did not do its work.
fn too_short<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    let Some(latest) = i.window.iter().find(|r| r.finished.is_some()) else {
        return Vec::new();
    };
    let (Status::Ok, Some(took)) = (latest.status, latest.duration_ms()) else {
        return Vec::new();
    };
    let expected =
        i.s.definition
            .as_ref()
            .and_then(|d| d.expect_min_seconds)
            .map(|s| u64::from(s) * 1000);
    if let Some(min) = expected.filter(|min| took < *min) {
        return reason(
            Rule::TooShort,
            format!(
                "ran {}, expected at least {} (expect_min_seconds)",
                human_ms(took),
                human_ms(min)
            ),
        );
    }
    let mut before: Vec<u64> = i
        .window
        .iter()
        .skip_while(|r| !std::ptr::eq(**r, *latest))
        .skip(1)
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| r.duration_ms())
        .collect();
    if before.len() < i.th.short_min_successes {
        return Vec::new();
    }
    before.sort_unstable();
    let usual = before[before.len() / 2];
    if (took as f64) < i.th.short_factor * usual as f64 {
        return reason(
            Rule::TooShort,
            format!("ran {}, usually {}", human_ms(took), human_ms(usual)),
        );
    }
    Vec::new()
}

/// The service manager stopped watching its paths for good (systemd's trigger limit): nothing
/// starts it from them until it is installed again, and no firing would say so.
fn watch_stopped<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    match &i.s.watch_stopped {
        Some(why) => reason(
            Rule::WatchStopped,
            format!(
                "the service manager stopped watching its paths ({why}): make automations-install NAME={} watches them again",
                i.s.name
            ),
        ),
        None => Vec::new(),
    }
}

/// Its event-started firings (watched paths, chains) went past `max_per_hour` within the last
/// hour: some were skipped, and whatever fires it that often needs a look.
fn rate_limited<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    let hour_ago = i.now.wall.with_timezone(&Utc) - Duration::hours(1);
    let skipped =
        i.s.runs
            .iter()
            .filter(|r| r.reason == Some(crate::runlog::SkipReason::RateLimited))
            .filter(|r| parse_stamp(&r.at).is_some_and(|t| t > hour_ago))
            .count();
    if skipped == 0 {
        return Vec::new();
    }
    let cap =
        i.s.definition
            .as_ref()
            .and_then(|d| d.trigger.as_ref())
            .map_or(0, |t| t.max_per_hour);
    reason(
        Rule::RateLimited,
        format!(
            "{skipped} event firing(s) skipped in the last hour past its max_per_hour ({cap}): something changes its watched paths (or runs what it follows) that often"
        ),
    )
}

/// Its Healthchecks pings failed [`PINGS_FAILING_AFTER`] times in a row or more: whatever happens
/// to it, the outside watch does not hear.
fn pings_failing<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    match &i.s.pings {
        Some(p) if p.failures_in_row >= PINGS_FAILING_AFTER => reason(
            Rule::PingsFailing,
            format!(
                "its last {} Healthchecks pings failed (the last, {}: {}): automations healthchecks status",
                p.failures_in_row, p.ping, p.answer
            ),
        ),
        _ => Vec::new(),
    }
}

/// The failed pings in a row from which health says so.
pub const PINGS_FAILING_AFTER: u32 = 3;

fn reason(rule: Rule, detail: impl Into<String>) -> Vec<Reason> {
    vec![Reason {
        rule,
        detail: detail.into(),
    }]
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

fn definition_invalid<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    if !i.s.invalid {
        return Vec::new();
    }
    reason(
        Rule::DefinitionInvalid,
        "its definition is invalid (automations validate)",
    )
}

fn no_definition<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    let s = i.s;
    match real_runs(s).next() {
        Some(r)
            if s.definition.is_none()
                && !s.invalid
                && r.trigger == Trigger::Schedule
                && failed(r) =>
        {
            reason(
                Rule::NoDefinition,
                "no definition, but its unit still fires and fails: reinstall or uninstall its unit",
            )
        }
        _ => Vec::new(),
    }
}

fn not_approved<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    match &i.s.not_approved {
        Some(words) => reason(
            Rule::NotApproved,
            format!(
                "{words}: its scheduled firings are skipped until you approve it: make automations-install NAME={}",
                i.s.name
            ),
        ),
        None => Vec::new(),
    }
}

fn auto_paused<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    f.paused_by = i.s.paused.as_ref().map(|p| p.by);
    if f.paused_by != Some(By::Auto) {
        return Vec::new();
    }
    reason(
        Rule::AutoPaused,
        "paused automatically after repeated failures; fix the cause, then resume",
    )
}

fn success_rate<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    let window = &i.window;
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
    if f.runs < i.th.min_runs || f.success_rate.is_none_or(|r| r >= i.th.min_success_rate) {
        return Vec::new();
    }
    let mut detail = format!(
        "low success rate: {} of {} runs ok ({:.0} %)",
        f.ok,
        f.runs,
        f.success_rate.unwrap_or(0.0) * 100.0
    );
    if !f.interrupted.is_empty() {
        detail.push_str(&format!("; interrupted: {}", f.interrupted.join(", ")));
    }
    reason(Rule::SuccessRate, detail)
}

/// The failing streak since the last ack or resume; a paused automation is not said to be failing
/// (an automatic pause is its own reason).
fn failing_streak_rule<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    let (streak, kinds) = failing_streak(&i.s.runs, i.s.acked_at);
    f.streak = streak;
    f.streak_kinds = kinds.iter().map(|k| (*k).to_owned()).collect();
    if streak < i.th.auto_pause_after || i.s.paused.is_some() {
        return Vec::new();
    }
    reason(
        Rule::FailingStreak,
        format!("{streak} failures in a row ({})", kinds.join(", ")),
    )
}

/// An ack (or resume) of an automation that was failing is "fixed": when every run since has failed
/// too, it is not, and that is a new degradation at the first such run (below the streak the
/// failing-streak rule waits for). Not for an ack of an automation with no failure in the window
/// of runs before it.
fn failing_since_ack<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    let s = i.s;
    if s.acked_at.is_none() || s.paused.is_some() {
        return Vec::new();
    }
    let mut since = real_runs(s)
        .filter(|r| r.status != Status::Stopped)
        .take_while(|r| since_ack(s, r));
    let mut n = 0usize;
    for r in since.by_ref() {
        if !failed(r) {
            return Vec::new();
        }
        n += 1;
    }
    // The runs before the ack, as far back as a window: the ack answered failures when they hold
    // one. None read means they are older than the window, which then holds only failures since.
    let mut before = real_runs(s)
        .filter(|r| r.status != Status::Stopped)
        .filter(|r| !since_ack(s, r))
        .take(i.th.window)
        .peekable();
    let answered_failures = before.peek().is_none() || before.any(failed);
    if n == 0 || !answered_failures {
        return Vec::new();
    }
    let (_, kinds) = failing_streak(&s.runs, s.acked_at);
    reason(
        Rule::FailingSinceAck,
        format!(
            "failed {n} time(s) since it was acknowledged or resumed ({})",
            kinds.join(", ")
        ),
    )
}

/// Why a subject no rule found anything wrong with is not known to work, if it is not: scheduled
/// but not installed here, or no finished run yet. A manual-only automation needs only a run.
pub fn unknown(s: &Subject) -> Option<Reason> {
    if let Some(why) = not_installed(s) {
        return Some(why);
    }
    let finished = s.runs.iter().any(|r| r.finished.is_some());
    if !finished {
        return Some(Reason {
            rule: Rule::NoRuns,
            detail: format!("no finished run yet: automations run {}", s.name),
        });
    }
    None
}

/// A scheduled or event-started automation that is not installed on this machine, never or no
/// longer: whatever its past runs were, it is `unknown (not installed)`. One a chain tried to
/// start says so.
pub fn not_installed(s: &Subject) -> Option<Reason> {
    let def = s.definition.as_ref()?;
    if !def.has_units() || s.installed_at.is_some() {
        return None;
    }
    let what = if def.schedule.is_some() {
        "scheduled"
    } else {
        "started by its [trigger]"
    };
    let chained = s.runs.iter().find_map(|r| {
        (r.status == Status::Skipped && r.trigger == Trigger::After)
            .then(|| r.after.as_ref().map(|u| u.name.clone()))
            .flatten()
    });
    let chain = chained.map_or_else(String::new, |up| {
        format!(" (the chain from {up} skipped it)")
    });
    Some(Reason {
        rule: Rule::NotInstalled,
        detail: format!(
            "{what}, but not installed on this machine{chain}: make automations-install NAME={}",
            s.name
        ),
    })
}

/// Stale: the age of the last success, for installed scheduled automations.
fn stale<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    let (s, th, now) = (i.s, i.th, i.now);
    let last_success = s.runs.iter().find(|r| r.status == Status::Ok);
    f.last_success = last_success.map(|r| r.at.clone());
    let (Some(def), Some(installed)) = (&s.definition, s.installed_at) else {
        return Vec::new();
    };
    let Some(schedule) = &def.schedule else {
        return Vec::new();
    };
    let limit_ms: u64 = match schedule {
        Schedule::EveryMinutes { every_minutes, .. } => {
            u64::from(*every_minutes) * 60_000 * u64::from(th.stale_intervals)
        }
        // Logins come when they come: no age is too old.
        Schedule::AtLogin => return Vec::new(),
        // A cron pattern finer than hourly: its longest gap (a weekend, a night) and then as many
        // of its shortest as `stale_intervals` allows beyond the first.
        Schedule::Cron { cron, .. } if !schedule.counts_missed_slots() => {
            let shortest = i64::from(cron.shortest_gap_seconds()) * 1000;
            let longest = crate::schedule::longest_gap(
                schedule,
                &now.wall.timezone(),
                now.wall.with_timezone(&Utc),
            )
            .map_or(shortest, |g| g.num_milliseconds());
            (longest + i64::from(th.stale_intervals.saturating_sub(1)) * shortest) as u64
        }
        // A day's slots: `stale_daily_hours`; slots further apart (weekdays, days of the month)
        // or closer (several a day) move the limit by as much as their longest gap differs from
        // a day's.
        Schedule::DailyAt { .. } | Schedule::Cron { .. } => {
            let day_ms: i64 = 86_400_000;
            let gap_ms = crate::schedule::longest_gap(
                schedule,
                &now.wall.timezone(),
                now.wall.with_timezone(&Utc),
            )
            .map_or(day_ms, |g| g.num_milliseconds());
            let limit = i64::from(th.stale_daily_hours) * 3_600_000 + gap_ms - day_ms;
            limit.max(3_600_000) as u64
        }
    };
    f.stale_after_ms = Some(limit_ms);
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
    let paused = s.paused.as_ref().and_then(|p| parse_stamp(&p.at)).is_some();
    if age <= limit_ms || paused {
        return Vec::new();
    }
    let what = match last_success {
        Some(_) => "last success",
        None => "installed, never succeeded; installed",
    };
    let on = match clock {
        AgeClock::Awake => " in awake time",
        AgeClock::AwakeAtLeast => " in awake time at least",
        AgeClock::Wall => " by the wall clock",
    };
    reason(
        Rule::Stale,
        format!(
            "{what} {} ago{on} (stale after {})",
            human_ms(age),
            human_ms(limit_ms)
        ),
    )
}

/// Slow: the latest finished run timed out, or took far longer than the usual success.
fn slow<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    let Some(latest) = i.window.iter().find(|r| r.finished.is_some()) else {
        return Vec::new();
    };
    f.last_duration_ms = latest.duration_ms();
    f.last_run.clone_from(&latest.run);
    let mut oks: Vec<u64> = i
        .window
        .iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| r.duration_ms())
        .collect();
    oks.sort_unstable();
    let median = (oks.len() >= i.th.min_runs).then(|| oks[oks.len() / 2]);
    f.median_duration_ms = median;
    if latest.status == Status::Timeout {
        return reason(Rule::Slow, "the latest run timed out");
    }
    match (median, latest.duration_ms()) {
        (Some(m), Some(d))
            if d as f64 > i.th.slow_factor * m.max(1) as f64
                && d >= u64::from(i.th.slow_min_seconds) * 1000 =>
        {
            reason(
                Rule::Slow,
                format!(
                    "the latest run took {}, usually {}",
                    human_ms(d),
                    human_ms(m)
                ),
            )
        }
        _ => Vec::new(),
    }
}

fn missed_days_rule<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    let (Some(def), Some(installed)) = (&i.s.definition, i.s.installed_at) else {
        return Vec::new();
    };
    let Some(schedule) = def.schedule.as_ref().filter(|s| s.counts_missed_slots()) else {
        return Vec::new();
    };
    if schedule.catch_up() == crate::schedule::CatchUp::None {
        // Not run on purpose: the slots that passed while the machine slept or was off (those
        // recorded as `missed_slot`, and those no firing has answered yet) are reported, and
        // are no failure.
        let window = Duration::days(i64::from(i.th.missed_days_window));
        let since = i.now.wall.with_timezone(&Utc) - window;
        let skipped =
            i.s.runs
                .iter()
                .filter(|r| r.reason == Some(SkipReason::MissedSlot))
                .filter(|r| parse_stamp(&r.at).is_some_and(|t| t >= since))
                .count() as u32;
        // And the slots since its newest firing, which no firing has answered yet (the machine
        // is still off for them, or the firing on wake is still to come); the latest may be
        // under way.
        let now = i.now.wall.with_timezone(&Utc);
        let newest =
            i.s.runs
                .iter()
                .filter(|r| r.trigger == Trigger::Schedule)
                .filter_map(|r| parse_stamp(&r.at))
                .max()
                .unwrap_or(installed)
                .max(installed)
                .max(since);
        let pending = crate::schedule::slots_between(schedule, &i.now.wall.timezone(), newest, now)
            .len()
            .saturating_sub(1) as u32;
        f.missed_slots = Some(skipped + pending);
        return Vec::new();
    }
    let missed = missed_days(i.s, schedule, installed, i.th, i.now);
    f.missed_days = Some(missed);
    if missed <= i.th.missed_days_max {
        return Vec::new();
    }
    reason(
        Rule::MissedDays,
        format!(
            "missed {missed} of its firings in the last {} days",
            i.th.missed_days_window
        ),
    )
}

fn headline<Tz: TimeZone>(i: &Input<'_, Tz>, _: &mut Figures) -> Vec<Reason> {
    if !i.th.headline_check {
        return Vec::new();
    }
    headline_change(i.s, i.th)
        .map(|detail| reason(Rule::Headline, detail))
        .unwrap_or_default()
}

/// Outside calls: each failing class at `http_share` of the window's calls or more.
fn outside_calls<Tz: TimeZone>(i: &Input<'_, Tz>, f: &mut Figures) -> Vec<Reason> {
    use crate::http::Class;
    let (mut calls, mut c4, mut c5, mut cn) = (0u64, 0u64, 0u64, 0u64);
    for r in &i.window {
        if let Some(h) = r.finished.as_ref().and_then(|f| f.http.as_ref()) {
            for class in Class::ALL {
                let n = h.count(class);
                calls += n;
                if class.is_4xx() {
                    c4 += n;
                } else if class == Class::ServerError {
                    c5 += n;
                } else if class.is_none() {
                    cn += n;
                }
            }
        }
    }
    f.http_calls = calls;
    if calls == 0 {
        return Vec::new();
    }
    let share = |n: u64| n as f64 / calls as f64;
    f.http_4xx = share(c4);
    f.http_5xx = share(c5);
    f.http_none = share(cn);
    [
        (Rule::Http4xx, c4, "refused by the server (4xx)"),
        (Rule::Http5xx, c5, "answered with a server error (5xx)"),
        (Rule::HttpNoAnswer, cn, "got no answer"),
    ]
    .into_iter()
    .filter(|&(_, n, _)| n > 0 && share(n) >= i.th.http_share)
    .map(|(rule, n, what)| Reason {
        rule,
        detail: format!(
            "{n} of {calls} recent outside calls {what} ({:.0} %)",
            share(n) * 100.0
        ),
    })
    .collect()
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
    let class = r
        .finished
        .as_ref()
        .and_then(|f| f.error.as_ref())
        .map(|e| e.class.as_str());
    if class == Some("out_of_memory") {
        out.push((5, "out of memory (memory_max)"));
        return out;
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
pub(super) fn age_of<Tz: TimeZone>(
    success: &RunView,
    runs: &[RunView],
    now: &Now<Tz>,
) -> (u64, AgeClock) {
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
    // A slot a run stood for was answered, whenever it ran (caught up on wake, backfilled).
    let answered: Vec<DateTime<Utc>> = s
        .runs
        .iter()
        .filter(|r| matches!(r.trigger, Trigger::Schedule | Trigger::Backfill))
        .filter_map(crate::history::RunView::slot)
        .collect();
    crate::schedule::missed_slots(schedule, &tz, (from, to), now_utc, (&fired, &answered)).len()
        as u32
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
