//! What the dashboard shows, gathered once per request: every automation — names from the
//! definitions, the log and the install records, so a broken definition or a unit firing without
//! one shows as degraded, never disappears; a name only the log knows (deleted, not installed) is
//! left out —, degraded ones first, each with its verdict (from the one `health::load::judge`
//! pass, whose workers make the cards), its list entry (the `list --json` view, next firing
//! included), its last ten runs, its latest result, a 24-hour strip and its firings ahead (the
//! timeline). The page renders it; `/api/automations` is its JSON, built from the CLI's own
//! `--json` views.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::definition::{Definition, Problem};
use crate::health::{self, Verdict};
use crate::history::{self, RunView, Status};
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
    /// What is installed of each automation (for the next firing `list` shows).
    pub installs: std::collections::BTreeMap<crate::names::Name, crate::state::Installed>,
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
    /// Its pause, as health read it.
    pub paused: Option<crate::state::Pause>,
    pub snoozed: Option<crate::state::Snooze>,
    /// What its installed schedule fires in the next 24 hours (the timeline's right half).
    pub ahead: crate::timeline::Ahead,
}

/// Where a row goes and which count it adds to: what needs a look first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Degraded,
    Unknown,
    Paused,
    Healthy,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Degraded,
        Category::Unknown,
        Category::Paused,
        Category::Healthy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Degraded => "degraded",
            Category::Unknown => "unknown",
            Category::Paused => "paused",
            Category::Healthy => "healthy",
        }
    }
}

impl Card {
    /// Degraded or unknown by its verdict; otherwise paused or healthy.
    pub fn category(&self) -> Category {
        match self.verdict.verdict {
            crate::health::State::Degraded => Category::Degraded,
            crate::health::State::Unknown => Category::Unknown,
            crate::health::State::Healthy if self.paused.is_some() => Category::Paused,
            crate::health::State::Healthy => Category::Healthy,
        }
    }

    /// Its recent firings, newest first: a retried firing is one, its newest attempt (what the
    /// firing came to), as a person counts them.
    pub fn firings(&self) -> Vec<&RunView> {
        let mut seen: Vec<&str> = Vec::new();
        self.recent
            .iter()
            .filter(|r| {
                let firing = r
                    .started
                    .as_ref()
                    .and_then(|s| s.first_run.as_deref())
                    .or(r.run.as_deref());
                match firing {
                    Some(id) if seen.contains(&id) => false,
                    Some(id) => {
                        seen.push(id);
                        true
                    }
                    None => true,
                }
            })
            .collect()
    }

    /// Whether its newest run is still going.
    pub fn running(&self) -> bool {
        self.recent
            .first()
            .is_some_and(|r| r.status == Status::Running)
    }
}

impl Board {
    /// How many rows each category has; paused counts every paused row, also one whose verdict
    /// put it under degraded (paused automatically), so the summary never says "0 paused" then.
    pub fn counts(&self) -> [(Category, usize); 4] {
        Category::ALL.map(|cat| {
            let n = match cat {
                Category::Paused => self.cards.iter().filter(|c| c.paused.is_some()).count(),
                _ => self.cards.iter().filter(|c| c.category() == cat).count(),
            };
            (cat, n)
        })
    }
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
    /// Fired by the schedule (a skip included), not by hand or from the dashboard.
    pub scheduled: bool,
    /// When, exactly (the minute above is for drawing).
    #[serde(skip)]
    pub at: DateTime<Utc>,
    /// Its run (none for a skip): what a click on it opens.
    #[serde(skip)]
    pub run: Option<String>,
    /// The slot it stood for, when it says (a caught-up or backfilled run answers its slot).
    #[serde(skip)]
    pub slot: Option<DateTime<Utc>>,
}

impl Board {
    /// Gathers everything. Only an unreadable log or definitions folder is an error; other
    /// unreadable files become `problems`.
    pub fn gather(settings: &Settings) -> Result<Board, health::load::LoadError> {
        let (src, problem) = health::load::Sources::read_lenient(settings)?;
        let mut problems: Vec<String> = problem.into_iter().collect();
        let state = State::new(&settings.data_root);
        let stopped = state.stopped().unwrap_or_else(|e| {
            problems.push(crate::exit::chain_text(&e));
            None
        });
        if let Err(e) = crate::notify::settings::load(&settings.data_root) {
            problems.push(e.to_string());
        }
        let now = Utc::now();
        let day_ago = now - Duration::hours(24);
        // Each card is made by the worker that judged its automation (the cores share the
        // reading, as health's does).
        let cards = health::load::judge(settings, &src, None, |subject, verdict| {
            (!subject.retired(&verdict))
                .then(|| card_of(settings, &src.snapshot, &subject, verdict, day_ago, now))
        })?;
        let mut cards: Vec<Card> = cards.into_iter().flatten().collect();
        let health::load::Sources { loaded, .. } = src;
        let installs =
            crate::install::installed(settings, &loaded.definitions).unwrap_or_else(|e| {
                problems.push(crate::exit::chain_text(&e));
                Default::default()
            });
        // Degraded first, then unknown, paused and healthy; then by name.
        cards.sort_by(|a, b| a.category().cmp(&b.category()).then(a.name.cmp(&b.name)));
        for card in &mut cards {
            card.ahead = ahead_of(card, &loaded.definitions, &installs, now);
        }
        Ok(Board {
            stopped,
            problems,
            invalid: loaded.problems,
            definitions: loaded.definitions,
            cards,
            now,
            installs,
        })
    }

    /// The definition of `name`, if valid.
    pub fn definition(&self, name: &str) -> Option<&Definition> {
        self.definitions.iter().find(|d| d.name.as_str() == name)
    }

    /// The `list --json` entry of a card (with its last run), when it has a definition. The
    /// pause comes from the verdict's subject, read once with everything else.
    pub fn entry<'a>(&'a self, settings: &Settings, card: &Card) -> Option<views::ListEntry<'a>> {
        let def = self.definition(&card.name)?;
        let live = views::Live {
            paused: card.paused.clone(),
            snoozed: card.snoozed.clone(),
            // Health already names an unreadable pause file among the card's reasons.
            state_problem: None,
            last: card.recent.iter().find(|r| r.run.is_some()),
            installed: self.installs.get(&def.name),
        };
        Some(views::entry(
            settings,
            def,
            live,
            &self.now.with_timezone(&chrono::Local),
        ))
    }

    /// `/api/automations`: every part in the CLI's `--json` shape.
    pub fn json(&self, settings: &Settings) -> serde_json::Value {
        let automations: Vec<serde_json::Value> = self
            .cards
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "list": self.entry(settings, c),
                    "health": c.verdict,
                    "category": c.category(),
                    "runs": c.recent.iter().map(views::run_json).collect::<Vec<_>>(),
                    "firings": c.firings().into_iter().map(views::run_json).collect::<Vec<_>>(),
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

/// What `card`'s installed schedule fires in the next 24 hours, in this machine's time.
fn ahead_of(
    card: &Card,
    definitions: &[Definition],
    installs: &std::collections::BTreeMap<crate::names::Name, crate::state::Installed>,
    now: DateTime<Utc>,
) -> crate::timeline::Ahead {
    let Some(def) = definitions.iter().find(|d| d.name.as_str() == card.name) else {
        return crate::timeline::Ahead::Unscheduled;
    };
    let last_start = card
        .recent
        .iter()
        .find(|r| r.run.is_some())
        .and_then(|r| crate::runlog::parse_stamp(&r.at));
    let subject = crate::timeline::Subject::of(
        def,
        installs.get(&def.name),
        card.paused.is_some(),
        last_start,
    );
    crate::timeline::ahead(&subject, &chrono::Local, now, 24)
}

/// One automation's card: its last ten runs (and back 24 hours for the strip), its newest finished
/// run, and the daily slots of the 24 hours no run followed.
fn card_of(
    settings: &Settings,
    snapshot: &crate::runlog::index::Snapshot,
    subject: &health::Subject,
    verdict: Verdict,
    day_ago: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Card {
    // The last ten runs, whole; then back to 24 hours ago for the strip, by their ends alone
    // (an hourly job's day is 24 runs, and the strip needs only when each started and how it
    // ended: half the lines, none of their starts parsed).
    let mut recent = Vec::new();
    let mut latest = None;
    for run in history::runs_of(snapshot, &settings.data_root, &subject.name) {
        if latest.is_none() && run.finished.is_some() {
            latest = Some(run.clone());
        }
        if recent.len() < RECENT {
            recent.push(run);
        } else if latest.is_some() {
            break;
        }
    }
    let mut marks = Vec::new();
    let ends = snapshot.records(&subject.name).ends_first();
    for run in history::Runs::new(ends, &settings.data_root).ends_first() {
        let Some(t) = crate::runlog::parse_stamp(&run.at) else {
            continue;
        };
        if t <= day_ago {
            break;
        }
        marks.push(Mark {
            minute: (t - day_ago).num_minutes().clamp(0, 1439) as u32,
            status: run.status,
            scheduled: run.trigger == crate::runlog::Trigger::Schedule,
            at: t,
            slot: run.slot(),
            run: run.run,
        });
    }
    let missed = missed_slots(
        subject.definition.as_ref(),
        subject.installed_at,
        &marks,
        day_ago,
        now,
    );
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
        paused: subject.paused.clone(),
        snoozed: subject.snoozed.clone(),
        ahead: crate::timeline::Ahead::Unscheduled,
    }
}

/// The minutes (from `from`) of daily slots in the last 24 hours the schedule did not fire: no
/// scheduled run (or skip) between the slot and the next one. A run by hand is no firing, and
/// nothing is missed before the unit was installed.
fn missed_slots(
    def: Option<&Definition>,
    installed: Option<DateTime<Utc>>,
    marks: &[Mark],
    from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<u32> {
    // With `catch_up = "none"` a missed slot is not run on purpose (health reports it apart).
    let Some(schedule) = def
        .and_then(|d| d.schedule.as_ref())
        .filter(|s| s.counts_missed_slots() && s.catch_up() != crate::schedule::CatchUp::None)
    else {
        return Vec::new();
    };
    let Some(installed) = installed else {
        return Vec::new();
    };
    let fired: Vec<DateTime<Utc>> = marks.iter().filter(|m| m.scheduled).map(|m| m.at).collect();
    let answered: Vec<DateTime<Utc>> = marks.iter().filter_map(|m| m.slot).collect();
    crate::schedule::missed_slots(
        schedule,
        &chrono::Local,
        (from.max(installed), now),
        now,
        (&fired, &answered),
    )
    .into_iter()
    .map(|t| (t - from).num_minutes().clamp(0, 1439) as u32)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daily job whose slot was 3 hours ago (local time), the window 24 hours back from now.
    fn daily_3h_ago() -> (Definition, DateTime<Utc>, DateTime<Utc>) {
        let now = Utc::now();
        let slot = (now - Duration::hours(3)).with_timezone(&chrono::Local);
        let toml = format!(
            "name = \"d\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"{}\"\n",
            slot.format("%H:%M")
        );
        let checks = crate::definition::Checks {
            home: "/nonexistent-home".into(),
            data_root: "/nonexistent-data".into(),
            units_dir: "/nonexistent-units".into(),
        };
        let def = crate::definition::parse("d.toml", toml.as_bytes(), &checks).unwrap();
        (def, now - Duration::hours(24), now)
    }

    fn mark(at: DateTime<Utc>, from: DateTime<Utc>, scheduled: bool) -> Mark {
        Mark {
            minute: (at - from).num_minutes().clamp(0, 1439) as u32,
            status: Status::Ok,
            scheduled,
            at,
            run: None,
            slot: None,
        }
    }

    /// Regression: any later run, one by hand included, hid a missed slot.
    #[test]
    fn a_slot_is_missed_unless_the_schedule_fired_after_it() {
        let (def, from, now) = daily_3h_ago();
        let slot = 21 * 60 - 1; // about 21 hours after `from`, to the minute
        let long_ago = Some(now - Duration::days(3));
        // Not installed, or installed after the slot: nothing is missed.
        assert!(missed_slots(Some(&def), None, &[], from, now).is_empty());
        assert!(
            missed_slots(Some(&def), Some(now - Duration::hours(1)), &[], from, now).is_empty()
        );
        let missed = missed_slots(Some(&def), long_ago, &[], from, now);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(missed[0].abs_diff(slot) <= 1, "{missed:?}");
        let after = from + Duration::minutes(i64::from(missed[0]) + 30);
        assert_eq!(
            missed_slots(Some(&def), long_ago, &[mark(after, from, false)], from, now),
            missed
        );
        assert!(
            missed_slots(Some(&def), long_ago, &[mark(after, from, true)], from, now).is_empty()
        );
        // A scheduled run before the slot is no firing of it.
        let before = from + Duration::minutes(i64::from(missed[0]) - 60);
        assert_eq!(
            missed_slots(Some(&def), long_ago, &[mark(before, from, true)], from, now),
            missed
        );
    }
}
