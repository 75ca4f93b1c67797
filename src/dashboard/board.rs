//! What the dashboard shows, gathered once per request: every automation — names from the
//! definitions, the log and the install records, so a broken definition or a unit firing without
//! one shows as degraded, never disappears —, degraded ones first, each with its verdict (from the
//! one `health::verdicts`), its list entry (the `list --json` view, next firing included), its last
//! ten runs, its latest result and a 24-hour strip. The page renders it; `/api/automations` is its
//! JSON, built from the CLI's own `--json` views.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::definition::{self, Checks, Definition, Problem, Schedule};
use crate::health::{self, Verdict};
use crate::history::{self, RunView, Status};
use crate::runlog::RunLog;
use crate::runlog::index::Index;
use crate::settings::Settings;
use crate::state::{State, Stop};
use crate::views;

/// Runs listed per automation.
pub const RECENT: usize = 10;

/// The page's data.
pub struct Board {
    pub stopped: Option<Stop>,
    /// Files that could not be read or are invalid, each naming the file: shown, never hidden.
    pub problems: Vec<String>,
    pub invalid: Vec<Problem>,
    pub definitions: Vec<Definition>,
    pub cards: Vec<Card>,
    pub now: DateTime<Utc>,
}

/// One automation.
pub struct Card {
    pub name: String,
    pub verdict: Verdict,
    /// The last [`RECENT`] runs, newest first (skips included).
    pub recent: Vec<RunView>,
    /// The newest run that finished: its facts and output.
    pub latest: Option<RunView>,
    pub strip: Strip,
    pub installed: bool,
}

/// The last 24 hours: runs as marks at their minute, and missed daily slots.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Strip {
    /// Where the strip starts (RFC 3339 UTC); marks count minutes from there (0..1440).
    pub from: String,
    pub marks: Vec<Mark>,
    /// Minutes of `daily_at` slots in the 24 hours that no run followed.
    pub missed: Vec<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Mark {
    pub minute: u32,
    pub status: Status,
}

impl Board {
    /// Gathers everything. Only an unreadable log or definitions folder is an error; other
    /// unreadable files become `problems`.
    pub fn gather(s: &Settings) -> anyhow::Result<Board> {
        let mut problems = Vec::new();
        let dir = s.definitions_dir();
        let checks = Checks {
            home: s.home.clone(),
            data_root: s.data_root.clone(),
        };
        let loaded = definition::load_all(&dir, &checks)?;
        let state = State::new(&s.data_root);
        let stopped = state.stopped().unwrap_or_else(|e| {
            problems.push(crate::chain_text(&e));
            None
        });
        let th = health::thresholds::load(&s.data_root).unwrap_or_else(|e| {
            problems.push(e.to_string());
            health::ThresholdSet::default()
        });
        if let Err(e) = crate::notify::settings::load(&s.data_root) {
            problems.push(e.to_string());
        }
        let subjects = health::load::subjects(s, &th, None)?;
        let verdicts = health::verdicts(&subjects, &th, &health::load::now());
        let log = RunLog::new(&s.data_root);
        let snapshot = Index::new(&log).refresh()?;
        let now = Utc::now();
        let day_ago = now - Duration::hours(24);
        let mut cards: Vec<Card> = subjects
            .iter()
            .zip(verdicts)
            .map(|(subject, verdict)| {
                // The last ten runs, and back to 24 hours ago for the strip.
                let mut recent = Vec::new();
                let mut latest = None;
                let mut marks = Vec::new();
                for run in history::runs_of(&snapshot, &s.data_root, &subject.name) {
                    let at = parse(&run.at);
                    let in_day = at.is_some_and(|t| t > day_ago);
                    if let Some(t) = at.filter(|_| in_day) {
                        marks.push(Mark {
                            minute: (t - day_ago).num_minutes().clamp(0, 1439) as u32,
                            status: run.status,
                        });
                    }
                    if latest.is_none() && run.finished.is_some() {
                        latest = Some(run.clone());
                    }
                    if recent.len() < RECENT {
                        recent.push(run);
                    } else if !in_day && latest.is_some() {
                        break;
                    }
                }
                let missed = missed_slots(subject.definition.as_ref(), &marks, day_ago, now);
                Card {
                    name: subject.name.clone(),
                    verdict,
                    recent,
                    latest,
                    strip: Strip {
                        from: crate::runlog::stamp(day_ago),
                        marks,
                        missed,
                    },
                    installed: subject.installed_at.is_some(),
                }
            })
            .collect();
        // Degraded first, then by name.
        cards.sort_by(|a, b| {
            b.verdict
                .degraded()
                .cmp(&a.verdict.degraded())
                .then(a.name.cmp(&b.name))
        });
        Ok(Board {
            stopped,
            problems,
            invalid: loaded.problems,
            definitions: loaded.definitions,
            cards,
            now,
        })
    }

    /// The definition of `name`, if valid.
    pub fn definition(&self, name: &str) -> Option<&Definition> {
        self.definitions.iter().find(|d| d.name.as_str() == name)
    }

    /// The `list --json` entry of a card (with its last run), when it has a definition.
    pub fn entry<'a>(&'a self, s: &Settings, card: &Card) -> Option<views::ListEntry<'a>> {
        let def = self.definition(&card.name)?;
        let last = card.recent.iter().find(|r| r.run.is_some());
        views::entry(s, def, &State::new(&s.data_root), last).ok()
    }

    /// `/api/automations`: every part in the CLI's `--json` shape.
    pub fn json(&self, s: &Settings) -> serde_json::Value {
        let automations: Vec<serde_json::Value> = self
            .cards
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "list": self.entry(s, c),
                    "health": c.verdict,
                    "runs": c.recent.iter().map(views::run_json).collect::<Vec<_>>(),
                    "latest": c.latest.as_ref().map(views::show_json),
                    "strip": c.strip,
                    "installed": c.installed,
                })
            })
            .collect();
        serde_json::json!({
            "version": 1,
            "stopped": self.stopped,
            "problems": self.problems,
            "invalid": self.invalid,
            "automations": automations,
        })
    }
}

fn parse(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The minutes (from `from`) of daily slots in the last 24 hours that no run followed.
fn missed_slots(
    def: Option<&Definition>,
    marks: &[Mark],
    from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<u32> {
    let Some(Schedule::DailyAt { daily_at, weekdays }) = def.and_then(|d| d.schedule.as_ref())
    else {
        return Vec::new();
    };
    let local_now = now.with_timezone(&chrono::Local);
    let mut out = Vec::new();
    let mut seen = BTreeMap::new();
    for back in 0..2 {
        let day = local_now.date_naive() - Duration::days(back);
        if !crate::schedule::allowed(day, weekdays) {
            continue;
        }
        let Some(slot) = crate::schedule::resolve_local(&chrono::Local, day, *daily_at) else {
            continue;
        };
        if slot <= from || slot > now {
            continue;
        }
        let minute = (slot - from).num_minutes().clamp(0, 1439) as u32;
        if seen.insert(minute, ()).is_none() && !marks.iter().any(|m| m.minute >= minute) {
            out.push(minute);
        }
    }
    out
}
