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

/// The whole page.
pub fn page(s: &Settings, b: &Board) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "automations" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body {
                header {
                    h1 { "automations" }
                    span.switch data-field="switch" {
                        @match &b.stopped {
                            Some(stop) => { "kill switch ON since " (short(&stop.at)) ": " (stop.reason) }
                            None => { "kill switch off" }
                        }
                    }
                    form.stop-all data-action="stop-all" {
                        input name="reason" placeholder="reason to stop everything" required;
                        button type="submit" { "Stop all" }
                    }
                    button data-action="resume-all" { "Resume all" }
                    span.status data-field="status" {}
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
                main {
                    @if b.cards.is_empty() {
                        p.empty { "No automations: add a definition to automations/ (docs/definitions.md)." }
                    }
                    @for c in &b.cards { (card(s, b, c)) }
                }
            }
        }
    }
}

/// `0.42 s`.
fn seconds(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

fn verdict_class(c: &Card) -> String {
    format!("card {}", c.verdict.verdict.as_str())
}

fn card(s: &Settings, b: &Board, c: &Card) -> Markup {
    let entry = b.entry(s, c);
    let def = b.definition(&c.name);
    html! {
        article class=(verdict_class(c)) data-name=(c.name) {
            h2 {
                span.name { (c.name) }
                span.verdict data-field="verdict" {
                    (c.verdict.verdict.as_str())
                }
            }
            @if let Some(d) = def.and_then(|d| d.description.as_deref()) { p.description { (d) } }
            ul.reasons data-field="reasons" {
                @for r in &c.verdict.reasons { li { (r.detail) } }
            }
            dl {
                dt { "State" }
                dd data-field="state" {
                    @if c.verdict.reasons.iter().any(|r| r.rule == crate::health::Rule::Unreadable) { "unknown: its state cannot be read" }
                    @else { @match entry.as_ref().and_then(|e| e.paused.as_ref()) {
                        Some(p) if p.by == By::Auto => { "paused automatically: " (p.reason) }
                        Some(p) => { "paused: " (p.reason) }
                        None => @if def.is_none() { "no definition" } @else if c.recent.first().is_some_and(|r| r.status == Status::Running) { "running" } @else { "active" }
                    }
                    }
                }
                dt { "Schedule" }
                dd { (entry.as_ref().map_or("no definition".to_owned(), |e| e.schedule_words.clone())) @if !c.installed { " · not installed" } }
                dt { "Next" }
                dd data-field="next" { (entry.as_ref().and_then(|e| e.next_words.clone()).unwrap_or_else(|| "-".into())) }
                dt { "Last run" }
                dd data-field="last" { (last_run(c.recent.iter().find(|r| r.run.is_some()))) }
            }
            (strip(c))
            details.latest {
                summary { "Latest result" }
                div data-field="latest" { (latest(c.latest.as_ref())) }
            }
            table.runs {
                thead { tr { th { "Started" } th { "Trigger" } th { "Status" } th { "Duration" } th { "Headline" } } }
                tbody data-field="runs" {
                    @if c.recent.is_empty() { tr { td colspan="5" { "no runs yet" } } }
                    @for r in &c.recent { (run_row(r)) }
                }
            }
            @if def.is_some() {
                form.actions data-name=(c.name) {
                    button type="button" data-action="run" { "Run now" }
                    input name="reason" placeholder="reason to pause";
                    button type="button" data-action="pause" { "Pause" }
                    button type="button" data-action="resume" { "Resume" }
                    button type="button" data-action="ack" title="I fixed it: health counts runs from now" { "Acknowledge" }
                }
            }
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
            // Month, day and minute fit the column; the whole time and reason are a hover away.
            td title=(short(&r.at)) { (r.at.get(5..16).map_or(r.at.as_str(), |t| t).replace('T', " ")) }
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
            @for m in &c.strip.marks {
                rect class=(format!("mark {}", m.status.as_str())) x=(m.minute) y="0" width="6" height="12" {}
            }
            @for m in &c.strip.missed {
                rect.missed x=(m) y="1" width="6" height="10" {}
            }
        }
    }
}
