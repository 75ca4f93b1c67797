//! The dashboard's pictures of time (docs/dashboard.md), server-rendered SVG with no script of
//! their own: the **timeline** of the last and the next 24 hours across every automation (on the
//! page), and per automation its **duration trend** over the last 100 runs and a **calendar
//! strip** of the last 30 days (fetched when its row opens: reading 100 runs of every automation
//! for every page would cost the page what only an open row needs).
//!
//! Every mark has a text equivalent: its `<title>`, which is both its tooltip and the name a
//! screen reader reads (a link's, for a mark that opens a run); each picture a label that says
//! what it shows in words. Colours are the stylesheet's classes, light and dark.

use chrono::{DateTime, Duration, Local, NaiveDate, Utc};
use maud::{Markup, html};

use super::board::{Board, Card};
use crate::history::{RunView, Status};
use crate::timeline::{self, Ahead};

/// Minutes across the timeline: the last 24 hours, then the next 24.
const SPAN: i64 = 48 * 60;
/// The histogram's bars: one per half hour.
const BARS: usize = 96;
/// Runs the duration trend draws.
pub const TREND_RUNS: usize = 100;
/// Days the calendar strip shows.
pub const CALENDAR_DAYS: i64 = 30;

/// `03:00` in this machine's time.
fn hm(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local).format("%H:%M").to_string()
}

/// `2026-12-06 03:00` in this machine's time.
fn day_hm(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local).format("%Y-%m-%d %H:%M").to_string()
}

/// `0.42 s`, `3.2 min`, `1.5 h`: a duration for a label.
fn took(ms: u64) -> String {
    crate::health::human_ms(ms)
}

/// The timeline: the busiest half hours at a glance and the busiest minutes in words; "Per
/// automation" opens to a line each (fetched then: [`timeline_lines`]).
pub fn timeline(b: &Board) -> Markup {
    let now = b.now;
    let from = now - Duration::hours(24);
    // Runs behind, firings ahead, per half hour.
    let mut past = vec![0usize; BARS / 2];
    for c in &b.cards {
        for m in &c.strip.marks {
            past[(m.minute as usize / 30).min(BARS / 2 - 1)] += 1;
        }
    }
    let ahead = timeline::histogram(b.cards.iter().map(|c| &c.ahead), now, 24, BARS / 2);
    let highest = past.iter().chain(&ahead).copied().max().unwrap_or(0).max(1);
    let busiest = timeline::busiest(b.cards.iter().map(|c| &c.ahead), 3);
    // The three busiest half hours ahead, marked as such.
    let mut order: Vec<usize> = (0..ahead.len()).filter(|i| ahead[*i] >= 2).collect();
    order.sort_by(|a, b| ahead[*b].cmp(&ahead[*a]).then(a.cmp(b)));
    order.truncate(3);
    let busy_words = if busiest.is_empty() {
        "no two firings start in the same minute".to_owned()
    } else {
        busiest
            .iter()
            .map(|b| format!("{} ({} firings)", hm(b.minute), b.firings))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels: Vec<String> = (0..8)
        .map(|k| {
            let at = from + Duration::hours(6 * k);
            if k == 4 {
                format!("now {}", hm(at))
            } else {
                hm(at)
            }
        })
        .collect();
    html! {
        section.timeline aria-labelledby="timeline-title" {
            div.tl-head {
                h2 #timeline-title { "Timeline" }
                p.busiest data-field="busiest" { "Busiest minutes ahead: " (busy_words) }
            }
            div.tl-line {
                span.tl-name { "all" }
                svg.tl-bars viewBox={ "0 0 " (SPAN) " 30" } preserveAspectRatio="none" role="group"
                    aria-label={ "Firings per half hour: " (bar_words(&past, &ahead)) } {
                    @for (i, n) in past.iter().enumerate().filter(|(_, n)| **n > 0) {
                        (bar(i, *n, highest, "past", &format!("{}–{}: {n} firing(s) behind", hm(from + Duration::minutes(i as i64 * 30)), hm(from + Duration::minutes(i as i64 * 30 + 30)))))
                    }
                    @for (i, n) in ahead.iter().enumerate().filter(|(_, n)| **n > 0) {
                        (bar(BARS / 2 + i, *n, highest, if order.contains(&i) { "ahead busy" } else { "ahead" },
                            &format!("{}–{}: {n} firing(s)", hm(now + Duration::minutes(i as i64 * 30)), hm(now + Duration::minutes(i as i64 * 30 + 30)))))
                    }
                    rect.tl-now x=(SPAN / 2 - 1) y="0" width="2" height="30" {}
                }
            }
            div.tl-line.tl-axis aria-hidden="true" {
                span.tl-name {}
                span.tl-labels { @for l in &labels { span { (l) } } }
            }
            // The lines are fetched when this opens: a thousand automations' marks are megabytes
            // that only a person who opens them needs.
            details.tl-rows {
                summary { "Per automation (" (b.cards.len()) ") · the last 24 hours and the next 24, in this machine's time" }
                div.tl-lines data-field="tl-lines" {}
            }
        }
    }
}

/// The timeline's line per automation (what "Per automation" fetches when it opens), in the
/// page's order: its runs of the last 24 hours (each opens its run) and its firings of the next
/// 24 (jitter as a band).
pub fn timeline_lines(b: &Board) -> Markup {
    let from = b.now - Duration::hours(24);
    let minute = |t: DateTime<Utc>| (t - from).num_minutes().clamp(0, SPAN - 1);
    html! {
        @for c in &b.cards { (row(c, &minute)) }
    }
}

/// One bar of the histogram: half hour `i` of the 96, `n` of at most `highest`.
fn bar(i: usize, n: usize, highest: usize, class: &str, words: &str) -> Markup {
    // By the square root: a half hour of 3 still shows beside one of 50 (its title has the count).
    let h = ((n as f64 / highest as f64).sqrt() * 28.0).ceil().max(2.0) as i64;
    html! {
        rect class={ "bar " (class) } x=(i * 30 + 2) y=(30 - h) width="26" height=(h) role="img" { title { (words) } }
    }
}

/// "12 firing(s) in the last 24 hours, 40 in the next 24": the histogram in words.
fn bar_words(past: &[usize], ahead: &[usize]) -> String {
    format!(
        "{} firing(s) in the last 24 hours, {} in the next 24",
        past.iter().sum::<usize>(),
        ahead.iter().sum::<usize>()
    )
}

/// One automation's line of the timeline.
fn row(c: &Card, minute: &dyn Fn(DateTime<Utc>) -> i64) -> Markup {
    let firings = c.ahead.firings();
    let dense = c.ahead.dense(24);
    let jitter_minutes = match &c.ahead {
        Ahead::Scheduled { jitter_seconds, .. } => f64::from(*jitter_seconds) / 60.0,
        _ => 0.0,
    };
    let label = row_words(c);
    html! {
        div.tl-line.tl-row data-tl=(c.name) {
            a.tl-name href={ "#a-" (c.name) } title=(label) { (c.name) }
            svg.tl viewBox={ "0 0 " (SPAN) " 14" } preserveAspectRatio="none" role="group" aria-label=(label) {
                rect.tl-axis x="0" y="6" width=(SPAN) height="2" {}
                // A run opens from its mark; the skips, which have no run to open, are one shape.
                @for (m, run) in c.strip.marks.iter().filter_map(|m| Some((m, m.run.as_ref()?))) {
                    a tabindex="0" data-open-run=(run) {
                        title { "open the run of " (day_hm(m.at)) " · " (m.status.as_str()) }
                        rect class={ "tl-mark " (m.status.as_str()) } x=(minute(m.at)) y="1" width="12" height="12" {}
                    }
                }
                @let skips: Vec<DateTime<Utc>> = c.strip.marks.iter().filter(|m| m.run.is_none()).map(|m| m.at).collect();
                @if !skips.is_empty() {
                    path.tl-mark.skipped d=(shapes(skips.iter().map(|t| (minute(*t), 12.0)), 1, 12)) role="img" {
                        title { "skipped: " (skips.iter().map(|t| day_hm(*t)).collect::<Vec<_>>().join(", ")) }
                    }
                }
                @if dense {
                    @let (first, last) = (firings[0].at, firings[firings.len() - 1].at);
                    @let words = format!("{} firings from {} to {}", firings.len(), hm(first), hm(last));
                    rect.tl-dense x=(minute(first)) y="3" width=((last - first).num_minutes().max(1)) height="8" role="img" { title { (words) } }
                } @else if !firings.is_empty() {
                    // One shape for the firings ahead, one for their jitter bands: a line of an
                    // hourly job is 24 marks, and a thousand lines would be megabytes of them.
                    @if jitter_minutes > 0.0 {
                        path.tl-jitter d=(shapes(firings.iter().map(|f| (minute(f.slot), jitter_minutes.max(2.0))), 2, 10)) {}
                    }
                    path.tl-next d=(shapes(firings.iter().map(|f| (minute(f.at), 12.0)), 1, 12)) role="img" {
                        title { (ahead_words(firings, jitter_minutes)) }
                    }
                }
                rect.tl-now x=(SPAN / 2 - 1) y="0" width="2" height="14" {}
            }
        }
    }
}

/// A path of rectangles: one `width` wide and `height` tall at each `(x, width)`, from `y`.
fn shapes(at: impl Iterator<Item = (i64, f64)>, y: u32, height: u32) -> String {
    use std::fmt::Write as _;
    let mut d = String::new();
    for (x, w) in at {
        let _ = write!(d, "M{x} {y}h{w:.1}v{height}h-{w:.1}z");
    }
    d
}

/// The firings ahead in words: "next: 2026-12-07 03:00, 2026-12-07 15:00", with the jitter's span.
fn ahead_words(firings: &[timeline::Firing], jitter_minutes: f64) -> String {
    let times: Vec<String> = firings.iter().map(|f| day_hm(f.at)).collect();
    let mut words = format!("next: {}", times.join(", "));
    if jitter_minutes > 0.0 {
        words.push_str(&format!(
            " (each up to {jitter_minutes:.0} min after its slot)"
        ));
    }
    words
}

/// What a timeline row shows, in words: "backup: 3 firing(s) in the last 24 hours (2 ok, 1
/// failed); next 24 hours: 03:00, 15:00" (a firing: a run, or a skip).
fn row_words(c: &Card) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for m in &c.strip.marks {
        let s = m.status.as_str();
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    let past = if counts.is_empty() {
        "nothing in the last 24 hours".to_owned()
    } else {
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        format!(
            "{} firing(s) in the last 24 hours ({})",
            c.strip.marks.len(),
            parts.join(", ")
        )
    };
    let firings = c.ahead.firings();
    let next = match &c.ahead {
        Ahead::Scheduled { .. } if !firings.is_empty() && firings.len() <= 6 => {
            let times: Vec<String> = firings.iter().map(|f| hm(f.at)).collect();
            format!("next 24 hours: {}", times.join(", "))
        }
        other => format!("next 24 hours: {}", other.words()),
    };
    format!("{}: {past}; {next}", c.name)
}

/// The runs and figures an open row draws: its last [`TREND_RUNS`] finished runs and every run of
/// the last [`CALENDAR_DAYS`] days (newest first).
pub struct History {
    pub name: String,
    pub runs: Vec<RunView>,
    pub thresholds: crate::health::Thresholds,
    /// Its definition's `expect_min_seconds`.
    pub expect_min_seconds: Option<u32>,
    /// Its latest ack or resume: health's window starts there.
    pub acked_at: Option<DateTime<Utc>>,
    pub today: NaiveDate,
}

impl History {
    /// Reads `name`'s runs back as far as both pictures need.
    pub fn read(
        settings: &crate::settings::Settings,
        name: &crate::names::Name,
    ) -> Result<Self, crate::health::load::LoadError> {
        // Its definition, thresholds and the log's index, as health reads them (one read).
        let src = crate::health::load::Sources::read(settings, Some(name))?;
        let today = Local::now().date_naive();
        let since = today - Duration::days(CALENDAR_DAYS - 1);
        let mut runs = Vec::new();
        let mut finished = 0;
        for run in crate::history::runs_of(&src.snapshot, &settings.data_root, name.as_str()) {
            let day =
                crate::runlog::parse_stamp(&run.at).map(|t| t.with_timezone(&Local).date_naive());
            let in_calendar = day.is_some_and(|d| d >= since);
            if finished >= TREND_RUNS && !in_calendar {
                break;
            }
            if run.duration_ms().is_some() {
                finished += 1;
            }
            runs.push(run);
        }
        let thresholds = src.thresholds.of(name.as_str()).clone();
        let expect_min_seconds = src
            .loaded
            .definitions
            .first()
            .and_then(|d| d.expect_min_seconds);
        // Its latest ack or resume, where health's window starts.
        let acked_at = crate::health::load::assess(settings, &src, Some(name))?
            .subjects
            .first()
            .and_then(|s| s.acked_at);
        Ok(Self {
            name: name.to_string(),
            runs,
            thresholds,
            expect_min_seconds,
            acked_at,
            today,
        })
    }
}

/// The duration trend and the calendar strip of one automation (the fragment an open row loads).
pub fn fragment(h: &History) -> Markup {
    html! {
        (trend(h))
        (calendar(h))
    }
}

/// The thresholds health applies to the next run: slow above, too short below (either may not
/// apply yet: too few successes).
pub struct Lines {
    pub median_ms: Option<u64>,
    pub slow_ms: Option<u64>,
    pub short_ms: Option<u64>,
}

/// What health's slow and too-short rules compare the next run with, over the same window they
/// judge: the last `window` runs (not skips, not one still running) since the latest ack.
pub fn lines(h: &History) -> Lines {
    let th = &h.thresholds;
    let window: Vec<&RunView> = h
        .runs
        .iter()
        .filter(|r| r.status != Status::Skipped && r.status != Status::Running)
        .take_while(|r| {
            h.acked_at
                .is_none_or(|ack| crate::runlog::parse_stamp(&r.at).is_none_or(|t| t > ack))
        })
        .take(th.window)
        .collect();
    let median = |oks: Vec<u64>| -> Option<u64> {
        let mut oks = oks;
        oks.sort_unstable();
        (!oks.is_empty()).then(|| oks[oks.len() / 2])
    };
    let oks = |runs: &[&RunView]| -> Vec<u64> {
        runs.iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| r.duration_ms())
            .collect()
    };
    // Slow: the median success of the window, once it holds `min_runs` of them.
    let all = oks(&window);
    let usual = (all.len() >= th.min_runs).then(|| median(all)).flatten();
    let slow = usual.map(|m| {
        ((th.slow_factor * m.max(1) as f64) as u64).max(u64::from(th.slow_min_seconds) * 1000)
    });
    // Too short: the median of the successes before the latest run, once there are
    // `short_min_successes`; or the definition's `expect_min_seconds`.
    let before = oks(window.get(1..).unwrap_or(&[]));
    let short_rule = (before.len() >= th.short_min_successes)
        .then(|| median(before))
        .flatten()
        .map(|m| (th.short_factor * m as f64) as u64);
    let expected = h.expect_min_seconds.map(|s| u64::from(s) * 1000);
    let short = match (short_rule, expected) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    Lines {
        median_ms: usual,
        slow_ms: slow,
        short_ms: short,
    }
}

/// The last [`TREND_RUNS`] finished runs' durations, oldest left: successes a line of dots,
/// failures a red square at their time, the slow and too-short thresholds drawn across.
pub fn trend(h: &History) -> Markup {
    let runs: Vec<&RunView> = h
        .runs
        .iter()
        .filter(|r| r.duration_ms().is_some())
        .take(TREND_RUNS)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let l = lines(h);
    if runs.is_empty() {
        return html! { p.picture-empty { "Duration trend: no run has finished yet." } };
    }
    let (w, top, bottom, left, right) = (600.0, 10.0, 130.0, 46.0, 590.0);
    let highest = runs
        .iter()
        .filter_map(|r| r.duration_ms())
        .chain(l.slow_ms)
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let y = |ms: u64| bottom - (ms as f64 / highest) * (bottom - top);
    let step = if runs.len() > 1 {
        (right - left) / (runs.len() - 1) as f64
    } else {
        0.0
    };
    let x = |i: usize| left + i as f64 * step;
    let points: String = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == Status::Ok)
        .filter_map(|(i, r)| Some(format!("{:.1},{:.1}", x(i), y(r.duration_ms()?))))
        .collect::<Vec<_>>()
        .join(" ");
    let failed = runs.iter().filter(|r| r.status != Status::Ok).count();
    let mut summary = format!("Duration of the last {} run(s) of {}", runs.len(), h.name);
    if let Some(m) = l.median_ms {
        summary.push_str(&format!(", usually {}", took(m)));
    }
    if let Some(s) = l.slow_ms {
        summary.push_str(&format!("; slow above {}", took(s)));
    }
    if let Some(s) = l.short_ms {
        summary.push_str(&format!("; too short below {}", took(s)));
    }
    summary.push_str(&format!("; {failed} did not end ok"));
    html! {
        figure.picture.trend {
            figcaption { (summary) }
            svg viewBox={ "0 0 " (w) " 150" } role="group" aria-label=(summary) {
                line.tr-axis x1=(left) y1=(bottom) x2=(right) y2=(bottom) {}
                text.tr-label x=(left - 4.0) y=(top + 4.0) text-anchor="end" { (took(highest as u64)) }
                text.tr-label x=(left - 4.0) y=(bottom) text-anchor="end" { "0" }
                @if let Some(s) = l.slow_ms {
                    line.tr-slow x1=(left) y1=(format!("{:.1}", y(s))) x2=(right) y2=(format!("{:.1}", y(s))) {}
                    text.tr-label.tr-slow-label x=(right) y=(format!("{:.1}", y(s) - 3.0)) text-anchor="end" { "slow > " (took(s)) }
                }
                @if let Some(s) = l.short_ms {
                    line.tr-short x1=(left) y1=(format!("{:.1}", y(s))) x2=(right) y2=(format!("{:.1}", y(s))) {}
                    text.tr-label.tr-short-label x=(right) y=(format!("{:.1}", y(s) - 3.0)) text-anchor="end" { "too short < " (took(s)) }
                }
                @if !points.is_empty() { polyline.tr-line points=(points) {} }
                @for (i, r) in runs.iter().enumerate() {
                    @let d = r.duration_ms().unwrap_or(0);
                    @let words = format!("{} · {} · {}", day_hm_of(r), r.status.as_str(), took(d));
                    @if r.status == Status::Ok {
                        circle.tr-ok cx=(format!("{:.1}", x(i))) cy=(format!("{:.1}", y(d))) r="3" role="img" { title { (words) } }
                    } @else {
                        rect class={ "tr-failed " (r.status.as_str()) } x=(format!("{:.1}", x(i) - 4.0)) y=(format!("{:.1}", y(d) - 4.0)) width="8" height="8" role="img" { title { (words) } }
                    }
                }
                text.tr-label x=(left) y="146" { (runs.first().map(|r| day_hm_of(r)).unwrap_or_default()) }
                text.tr-label x=(right) y="146" text-anchor="end" { (runs.last().map(|r| day_hm_of(r)).unwrap_or_default()) }
            }
        }
    }
}

/// When a run started, in this machine's time.
fn day_hm_of(r: &RunView) -> String {
    crate::runlog::parse_stamp(&r.at).map_or_else(|| r.at.clone(), day_hm)
}

/// One day of the calendar strip.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Day {
    pub ok: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Its last run (not a skip) did not end ok.
    pub last_failed: bool,
}

impl Day {
    /// `none`, `ok`, `mixed` (failures, then ok), `failed` (ended failing), `skipped` (only
    /// skips).
    pub fn class(&self) -> &'static str {
        match self {
            Day {
                ok: 0,
                failed: 0,
                skipped: 0,
                ..
            } => "none",
            Day {
                ok: 0, failed: 0, ..
            } => "skipped",
            Day { failed: 0, .. } => "ok",
            Day {
                last_failed: true, ..
            } => "failed",
            _ => "mixed",
        }
    }
}

/// The last [`CALENDAR_DAYS`] days of `h`, oldest first, by this machine's days.
pub fn days(h: &History) -> Vec<(NaiveDate, Day)> {
    let first = h.today - Duration::days(CALENDAR_DAYS - 1);
    let mut out: Vec<(NaiveDate, Day)> = first
        .iter_days()
        .take(CALENDAR_DAYS as usize)
        .map(|d| (d, Day::default()))
        .collect();
    // Newest first: the first real run met on a day is its last.
    for r in &h.runs {
        let Some(day) =
            crate::runlog::parse_stamp(&r.at).map(|t| t.with_timezone(&Local).date_naive())
        else {
            continue;
        };
        let Some((_, d)) = out.iter_mut().find(|(x, _)| *x == day) else {
            continue;
        };
        match r.status {
            Status::Skipped => d.skipped += 1,
            Status::Running => {}
            Status::Ok => {
                d.ok += 1;
            }
            _ => {
                if d.ok == 0 && d.failed == 0 {
                    d.last_failed = true;
                }
                d.failed += 1;
            }
        }
    }
    out
}

/// A square a day for the last 30 days, coloured by the day's outcome.
pub fn calendar(h: &History) -> Markup {
    let days = days(h);
    let bad = days.iter().filter(|(_, d)| d.failed > 0).count();
    let summary = format!(
        "Last {CALENDAR_DAYS} days of {}: {} day(s) with a failure, {} without a run",
        h.name,
        bad,
        days.iter().filter(|(_, d)| d.class() == "none").count()
    );
    html! {
        figure.picture.calendar {
            figcaption { (summary) }
            svg viewBox={ "0 0 " (CALENDAR_DAYS * 16) " 16" } role="group" aria-label=(summary) {
                @for (i, (date, d)) in days.iter().enumerate() {
                    @let words = day_words(*date, d);
                    rect class={ "cal " (d.class()) } x=(i * 16 + 1) y="1" width="14" height="14" rx="2" role="img" { title { (words) } }
                }
            }
            p.cal-ends aria-hidden="true" {
                span { (days.first().map(|(d, _)| d.format("%b %-d").to_string()).unwrap_or_default()) }
                span { "today" }
            }
        }
    }
}

/// "2026-12-01: 3 runs, 1 failed", "2026-12-02: no runs".
fn day_words(date: NaiveDate, d: &Day) -> String {
    let runs = d.ok + d.failed;
    let mut words = match runs {
        0 => format!("{date}: no runs"),
        n => format!("{date}: {n} run(s)"),
    };
    if d.failed > 0 {
        words.push_str(&format!(", {} failed", d.failed));
        if !d.last_failed {
            words.push_str(", ended ok");
        }
    }
    if d.skipped > 0 {
        words.push_str(&format!(", {} skipped", d.skipped));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished run (or a skip) started at `hour` of the local day `days_ago` days back, taking
    /// `ms`.
    fn run(days_ago: i64, hour: u32, status: Status, ms: u64) -> RunView {
        let day = Local::now().date_naive() - Duration::days(days_ago);
        let at = day
            .and_hms_opt(hour, 0, 0)
            .unwrap()
            .and_local_timezone(Local)
            .earliest()
            .unwrap()
            .with_timezone(&Utc);
        let outcome = match status {
            Status::Ok => "ok",
            _ => "failed",
        };
        let finished = serde_json::json!({
            "run": "r", "outcome": outcome, "exit_code": 0, "signal": null, "duration_ms": ms,
            "error": null, "stdout_tail": "", "stderr_tail": "",
            "dropped": {"stdout": 0, "stderr": 0}, "facts": {}, "headline": null, "http": null,
            "leftover_processes": 0, "clock": {"boot": "b", "awake_ms": 1, "total_ms": 1},
        });
        RunView {
            run: (status != Status::Skipped).then(|| "r".to_owned()),
            name: "job".into(),
            trigger: crate::runlog::Trigger::Schedule,
            at: crate::runlog::stamp(at),
            status,
            reason: (status == Status::Skipped).then_some(crate::runlog::SkipReason::Paused),
            after: None,
            held_by: None,
            started: None,
            finished: (status != Status::Skipped)
                .then(|| serde_json::from_value(finished).unwrap()),
        }
    }

    fn history(runs: Vec<RunView>) -> History {
        History {
            name: "job".into(),
            runs,
            thresholds: crate::health::Thresholds::default(),
            expect_min_seconds: None,
            acked_at: None,
            today: Local::now().date_naive(),
        }
    }

    #[test]
    fn a_day_is_coloured_by_how_it_ended() {
        // Newest first, as the log is read.
        let h = history(vec![
            run(0, 3, Status::Ok, 1000),
            run(1, 9, Status::Failed, 1000),
            run(1, 3, Status::Ok, 1000),
            run(2, 9, Status::Ok, 1000),
            run(2, 3, Status::Failed, 1000),
            run(3, 3, Status::Skipped, 0),
            run(40, 3, Status::Failed, 1000),
        ]);
        let days = days(&h);
        assert_eq!(days.len(), 30);
        let class = |ago: usize| days[29 - ago].1.class();
        assert_eq!(class(0), "ok");
        assert_eq!(class(1), "failed", "it ended failing");
        assert_eq!(class(2), "mixed", "a failure, then ok");
        assert_eq!(class(3), "skipped");
        assert_eq!(class(4), "none");
        assert_eq!(
            day_words(days[29 - 2].0, &days[29 - 2].1),
            format!("{}: 2 run(s), 1 failed, ended ok", days[29 - 2].0)
        );
        // Forty days ago is not on the strip.
        assert_eq!(days.iter().filter(|(_, d)| d.failed > 0).count(), 2);
    }

    #[test]
    fn the_lines_are_healths_over_its_window_since_the_ack() {
        // Twenty successes of 20 s, then the latest, a success of 1 s: usually 20 s.
        let mut runs = vec![run(0, 0, Status::Ok, 1_000)];
        runs.extend((0..20).map(|i| run(1, 19 - i, Status::Ok, 20_000)));
        let h = history(runs);
        let l = lines(&h);
        assert_eq!(l.median_ms, Some(20_000));
        assert_eq!(l.slow_ms, Some(60_000), "slow_factor 3");
        assert_eq!(
            l.short_ms,
            Some(4_000),
            "short_factor 0.2 of the successes before the latest"
        );
        // An ack just now: nothing of the window is left, so neither rule applies yet.
        let mut acked = history(h.runs.clone());
        acked.acked_at = Some(Utc::now());
        let l = lines(&acked);
        assert_eq!((l.slow_ms, l.short_ms), (None, None));
        // expect_min_seconds draws the too-short line by itself.
        acked.expect_min_seconds = Some(30);
        assert_eq!(lines(&acked).short_ms, Some(30_000));
    }
}
