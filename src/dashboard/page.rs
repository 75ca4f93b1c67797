//! The dashboard's HTML, rendered on the server with maud: every value is escaped, so a run's
//! output is shown as text, never markup. No inline script or style (the Content-Security-Policy
//! forbids both): behaviour is `/static/app.js`, looks `/static/app.css`, and each element a
//! refresh updates carries a `data-field`.

use maud::{DOCTYPE, Markup, html};

use super::board::{Board, Card};
use crate::history::{RunView, Status};
use crate::runlog::By;
use crate::settings::Settings;
use crate::views::short_time as short;

/// The whole page: a summary line (counts per category, each a filter), a name filter, and one
/// compact row per automation that expands in place.
pub fn page(settings: &Settings, b: &Board) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { "automations" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body {
                header {
                    h1 { "automations" }
                    nav.summary aria-label="automations by verdict" {
                        @for (cat, n) in b.counts() {
                            a class={ "count " (cat.as_str()) } href={ "?filter=" (cat.as_str()) } data-filter=(cat.as_str()) {
                                span data-field={ "count-" (cat.as_str()) } { (n) } " " (cat.as_str())
                            }
                        }
                        a.count.all href="?" data-filter="" { "all " (b.cards.len()) }
                    }
                    span.switch data-field="switch" {
                        @match &b.stopped {
                            Some(stop) => { "kill switch ON since " (short(&stop.at)) ": " (stop.reason) }
                            None => { "kill switch off" }
                        }
                    }
                    span.refreshed data-field="refreshed" { "as of " (b.now.format("%H:%M:%S UTC")) }
                }
                div.tools {
                    input type="search" data-field="filter" placeholder="filter by name" aria-label="Filter automations by name";
                    form.stop-all data-action="stop-all" {
                        input name="reason" placeholder="reason to stop everything" required aria-label="Reason to stop every automation";
                        button type="submit" { "Stop all" }
                    }
                    button type="button" data-action="resume-all" { "Resume all" }
                    span.status data-field="status" role="status" aria-live="polite" {}
                }
                @if !b.problems.is_empty() || !b.invalid.is_empty() {
                    section.problems {
                        h2 { "Cannot be read or is invalid" }
                        ul {
                            @for p in &b.problems { li { (p) } }
                            @for p in &b.invalid { li { (p.to_string()) } }
                        }
                    }
                }
                (super::pictures::timeline(b))
                main {
                    @if b.cards.is_empty() {
                        p.empty { "No automations: add a definition to automations/ (docs/definitions.md)." }
                    }
                    @for c in &b.cards { (row(settings, b, c)) }
                }
            }
        }
    }
}

/// `0.42 s`.
fn seconds(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

/// The classes a row's looks and its actions follow: its category, and whether it is paused or
/// running.
fn row_class(c: &Card) -> String {
    let mut class = format!("row {}", c.category().as_str());
    if c.paused.is_some() {
        class.push_str(" is-paused");
    }
    if c.running() {
        class.push_str(" is-running");
    }
    class
}

/// One automation: a line that says what matters (mark, name, verdict, schedule, last run, next
/// firing, its recent runs), which opens in place to everything else.
fn row(settings: &Settings, b: &Board, c: &Card) -> Markup {
    let entry = b.entry(settings, c);
    let def = b.definition(&c.name);
    let last = c.recent.iter().find(|r| r.run.is_some());
    html! {
        article id={ "a-" (c.name) } class=(row_class(c)) data-name=(c.name) data-category=(c.category().as_str()) {
            details {
                summary {
                    span.mark aria-hidden="true" {}
                    span.name { (c.name) }
                    span.verdict data-field="verdict" title={ "verdict: " (c.verdict.verdict.as_str()) } { (c.category().as_str()) }
                    span.schedule { (entry.as_ref().map_or("no definition".to_owned(), |e| e.schedule_words.clone())) }
                    span.last data-field="last-short" title=(last_run(last)) { (last_short(last, b.now)) }
                    span.next data-field="next-short" { (entry.as_ref().and_then(|e| e.next_words.clone()).unwrap_or_else(|| "-".into())) }
                    (recent_marks(&c.firings()))
                }
                div.body {
                    @if let Some(d) = def.and_then(|d| d.description.as_deref()) { p.description { (d) } }
                    ul.reasons data-field="reasons" {
                        @for r in &c.verdict.reasons { li { (r.detail) } }
                    }
                    dl {
                        dt { "State" }
                        dd data-field="state" { (state_words(c, entry.as_ref(), def.is_some())) }
                        dt { "Schedule" }
                        dd { (entry.as_ref().map_or("no definition".to_owned(), |e| e.schedule_words.clone())) @if !c.installed && def.is_some_and(crate::definition::Definition::has_units) { " · not installed" } }
                        dt { "Next" }
                        dd data-field="next" { (entry.as_ref().and_then(|e| e.next_words.clone()).unwrap_or_else(|| "-".into())) }
                        dt { "Last run" }
                        dd data-field="last" { (last_run(last)) }
                    }
                    (strip(c))
                    div.pictures data-field="pictures" {}
                    details.latest {
                        summary { "Latest result" }
                        div data-field="latest" { (latest(c.latest.as_ref())) }
                    }
                    table.runs {
                        caption { "Recent runs: open one to see its output" }
                        thead { tr { th { "Started" } th { "Trigger" } th { "Status" } th { "Duration" } th { "Headline" } } }
                        tbody data-field="runs" {
                            @if c.recent.is_empty() { tr { td colspan="5" { "no runs yet" } } }
                            @for r in &c.recent { (run_row(r)) }
                        }
                    }
                    div.run-detail data-field="run-detail" {}
                    @if def.is_some() {
                        form.actions data-name=(c.name) {
                            button type="button" data-action="run" disabled[c.running()] { "Run now" }
                            input name="reason" placeholder="reason (pause, acknowledge)" aria-label={ "Reason for " (c.name) };
                            button type="button" data-action="pause" { "Pause" }
                            button type="button" data-action="resume" { "Resume" }
                            button type="button" data-action="ack" title="I fixed it: health counts runs from now" { "Acknowledge" }
                            button type="button" data-action="snooze" title="Hold its notifications for 4 hours; its runs go on" { "Snooze 4 h" }
                            button type="button" data-action="unsnooze" { "Unsnooze" }
                            span.said data-field="said" role="status" aria-live="polite" {}
                        }
                    }
                }
            }
        }
    }
}

/// The state line: unknown when its state cannot be read, else paused (how and why), running or
/// active.
fn state_words(c: &Card, entry: Option<&crate::views::ListEntry>, defined: bool) -> String {
    if c.verdict
        .reasons
        .iter()
        .any(|r| r.rule == crate::health::Rule::Unreadable)
    {
        return "unknown: its state cannot be read".into();
    }
    let words: String = match entry.and_then(|e| e.paused.as_ref()) {
        Some(p) if p.by == By::Auto => format!("paused automatically: {}", p.reason),
        Some(p) => format!("paused: {}", p.reason),
        None if !defined => "no definition".into(),
        None if c.running() => "running".into(),
        None => "active".into(),
    };
    words + &crate::views::snoozed_words(c.snoozed.as_ref().map(|z| z.until.as_str()))
}

/// "ok · 3 min ago": the last run's status and age, for the row's line.
fn last_short(r: Option<&RunView>, now: chrono::DateTime<chrono::Utc>) -> String {
    let Some(r) = r else {
        return "never".into();
    };
    let status = r.reason.as_ref().map_or(r.status.as_str(), |_| "skipped");
    match crate::runlog::parse_stamp(&r.at) {
        Some(t) => format!(
            "{status} · {} ago",
            crate::health::human_ms((now - t).num_milliseconds().max(0) as u64)
        ),
        None => status.to_owned(),
    }
}

/// The recent runs, oldest left, one readable mark each (10 px): a shape and a colour per status,
/// so colour is not the only signal, and a title with the time and status.
fn recent_marks(runs: &[&RunView]) -> Markup {
    let label = recent_label(runs);
    html! {
        svg.recent viewBox="0 0 140 12" width="140" height="12" data-field="recent" role="img" aria-label=(label) {
            @for (i, r) in runs.iter().rev().enumerate() {
                (mark_shape(i, r.reason.as_ref().map_or(r.status.as_str(), |_| "skipped"), &format!("{} · {}", short(&r.at), status_words(r))))
            }
        }
    }
}

/// "last 3 runs: 2 ok, 1 failed".
fn recent_label(runs: &[&RunView]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in runs {
        let s = r.reason.as_ref().map_or(r.status.as_str(), |_| "skipped");
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    if counts.is_empty() {
        return "no runs yet".into();
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!("last {} firings: {}", runs.len(), parts.join(", "))
}

/// One mark at slot `i`: ok a disc, failed (and stopped, interrupted) a square, timeout a
/// triangle, skipped a hollow diamond, running a ring.
fn mark_shape(i: usize, status: &str, title: &str) -> Markup {
    let x = i * 14 + 1;
    let (cx, cy) = (x + 5, 6);
    html! {
        @match status {
            "ok" => circle class="m ok" cx=(cx) cy=(cy) r="5" { title { (title) } },
            "timeout" => polygon class="m timeout" points={ (x) ",11 " (cx) ",1 " (x + 10) ",11" } { title { (title) } },
            "skipped" => polygon class="m skipped" points={ (cx) ",1 " (x + 10) ",6 " (cx) ",11 " (x) ",6" } { title { (title) } },
            "running" => circle class="m running" cx=(cx) cy=(cy) r="4" { title { (title) } },
            other => rect class={ "m failed " (other) } x=(x) y="1" width="10" height="10" { title { (title) } },
        }
    }
}

/// "ok · 2026-11-30 17:10:04Z · 0.42 s · manual".
pub fn last_run(r: Option<&RunView>) -> String {
    match r {
        None => "never".into(),
        Some(r) => {
            let mut parts = vec![status_words(r), short(&r.at)];
            if let Some(ms) = r.duration_ms() {
                parts.push(seconds(ms));
            }
            parts.push(r.trigger.as_str().into());
            parts.join(" · ")
        }
    }
}

fn status_words(r: &RunView) -> String {
    match (
        &r.reason,
        r.finished.as_ref().and_then(|f| f.error.as_ref()),
    ) {
        (Some(reason), _) => format!("skipped ({})", reason.as_str()),
        (None, Some(e)) if r.status != Status::Ok => format!("{} ({})", r.status.as_str(), e.class),
        _ => r.status.as_str().to_owned(),
    }
}

fn run_row(r: &RunView) -> Markup {
    html! {
        tr class=(r.status.as_str()) {
            // Month, day and second fit the column; the whole time and reason are a hover away.
            td title=(short(&r.at)) {
                @let when = r.at.get(5..19).map_or(r.at.as_str(), |t| t).replace('T', " ");
                @match &r.run {
                    Some(id) => button.open type="button" data-action="open-run" data-run=(id) aria-label={ "Open the run of " (short(&r.at)) } { (when) },
                    None => (when),
                }
            }
            td { (r.trigger.as_str()) }
            td title=(status_words(r)) { (r.reason.as_ref().map_or(r.status.as_str(), |_| "skipped")) }
            td { (r.duration_ms().map_or(String::new(), seconds)) }
            td { (r.headline().map_or(String::new(), |(h, v)| format!("{h}={v}"))) }
        }
    }
}

fn latest(r: Option<&RunView>) -> Markup {
    let Some(f) = r.and_then(|r| r.finished.as_ref()) else {
        return html! { p { "no run has finished yet" } };
    };
    html! {
        p.facts {
            @if f.facts.is_empty() { "no facts" }
            @for (k, v) in &f.facts { span.fact { (k) "=" (v) } " " }
        }
        h3 { "stdout" @if f.dropped.stdout > 0 { " (" (f.dropped.stdout) " earlier bytes dropped)" } }
        pre.output { (f.stdout_tail) }
        h3 { "stderr" @if f.dropped.stderr > 0 { " (" (f.dropped.stderr) " earlier bytes dropped)" } }
        pre.output { (f.stderr_tail) }
    }
}

/// 24 hours as 1440 minutes: a mark per run, a hollow one per missed daily slot. SVG attributes,
/// not inline styles, so the policy that forbids inline style allows it.
fn strip(c: &Card) -> Markup {
    html! {
        svg.strip viewBox="0 0 1440 12" preserveAspectRatio="none" data-field="strip" role="img" aria-label="runs in the last 24 hours" {
            rect.axis x="0" y="5" width="1440" height="2" {}
            // One shape per status: a busy automation's day is hundreds of marks.
            @for (status, d) in strip_paths(&c.strip.marks) {
                path class={ "mark " (status) } d=(d) {}
            }
            @for m in &c.strip.missed {
                rect.missed x=(m) y="1" width="6" height="10" {}
            }
        }
    }
}

/// The strip's marks as one path per status (6 minutes wide, the strip's height each).
fn strip_paths(marks: &[super::board::Mark]) -> Vec<(&'static str, String)> {
    use std::fmt::Write as _;
    let mut out: Vec<(&'static str, String)> = Vec::new();
    for m in marks {
        let status = m.status.as_str();
        let d = match out.iter_mut().find(|(s, _)| *s == status) {
            Some((_, d)) => d,
            None => {
                out.push((status, String::new()));
                &mut out.last_mut().expect("just pushed").1
            }
        };
        let _ = write!(d, "M{} 0h6v12h-6z", m.minute);
    }
    out
}
