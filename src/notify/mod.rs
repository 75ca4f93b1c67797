//! Notifications: people hear when an automation goes wrong (docs/health.md).
//!
//! A **look** computes the verdicts (`health::load::verdicts`, the same answer `health` gives), compares
//! each with the last verdict kept in `state/verdicts/<name>.json`, and queues a message only on a
//! transition: healthy → degraded, and an automatic pause. Repeats are silent, but for a reminder
//! each `remind_every_hours` while it stays degraded; a recovery is silent unless `recovery = true`,
//! and then only for a degradation that was notified. A queued message is delivered to every
//! configured channel that takes the automation's news (`only`/`except`); one a channel could not
//! take stays queued for it and is tried again at the next look. During quiet hours messages wait, and go once, at the first look
//! after. The runner looks after each run at its own automation; the `health-check` automation
//! (hourly) looks at all, since a missed day or a stopped timer leaves no run behind.
//!
//! A message is built only from fixed words, validated automation names and numbers — never a
//! run's output, a fact's name or an error's detail. `AUTOMATIONS_NOTIFY=off` turns delivery off
//! (no connection at all). A failed delivery prints one line on stderr and never fails a run.

pub mod channel;
pub mod drivers;
pub mod email;
pub mod settings;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{Timelike, Utc};
use serde::{Deserialize, Serialize};

use crate::health::{self, Rule, State, Verdict};
use crate::keys;
use crate::names::{Driver, Name};
use crate::schedule::TimeOfDay;
use crate::settings::Settings;

pub use channel::Notifier;
pub use settings::NotifySettings;

/// The variable that turns delivery off (`off`).
pub const ENV_NOTIFY: &str = "AUTOMATIONS_NOTIFY";

/// A message: a title and a body, fixed words, names and numbers only; and what it is about, as
/// data, for a receiver that reads it so (the webhook's document).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub title: String,
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<About>,
}

/// What a message is about: names, fixed words and ids only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct About {
    /// `degraded`, `auto_paused`, `recovered`, `reminder` or `test`.
    pub kind: String,
    pub automation: String,
    /// Its verdict when the message was made: `healthy`, `degraded` or `unknown`.
    pub verdict: String,
    /// The rules that found something, by the names `health --json` gives them.
    pub reasons: Vec<String>,
    pub host: String,
    /// Its latest finished run, when there is one.
    pub run: Option<String>,
    /// The command to look with.
    pub next: Option<String>,
}

impl About {
    /// What a message of `kind` about `v` is about.
    fn of(kind: &str, v: &Verdict, host: &str, next: Option<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            automation: v.name.clone(),
            verdict: v.verdict.as_str().to_owned(),
            reasons: v
                .reasons
                .iter()
                .filter_map(|r| {
                    serde_json::to_value(r.rule)
                        .ok()?
                        .as_str()
                        .map(str::to_owned)
                })
                .collect(),
            host: host.to_owned(),
            run: v.figures.last_run.clone(),
            next,
        }
    }
}

/// Whether a look can deliver anything: delivery is not turned off and `notify.toml` exists.
/// One `stat` when it does not, so a run without notifications pays nothing for them.
pub fn enabled(settings: &Settings) -> bool {
    !off() && std::fs::symlink_metadata(settings.layout().settings_file(settings::FILE)).is_ok()
}

fn off() -> bool {
    std::env::var_os(ENV_NOTIFY).is_some_and(|v| v == "off")
}

/// This machine's name for messages: the host name when it is a plain one (letters, digits, `.`,
/// `-`, `_`, at most 64), else "this machine" — like an automation name, never free text.
pub fn host() -> String {
    #[cfg(unix)]
    let name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok());
    #[cfg(windows)]
    let name = std::env::var("COMPUTERNAME").ok();
    name.filter(|h| {
        !h.is_empty()
            && h.len() <= 64
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    })
    .unwrap_or_else(|| "this machine".to_owned())
}

/// The failure kinds of a verdict's streak, in words ("" when it has none).
fn kinds_sentence(v: &Verdict) -> String {
    if v.figures.streak_kinds.is_empty() {
        String::new()
    } else {
        format!(" Failures: {}.", v.figures.streak_kinds.join(", "))
    }
}

/// The message of a verdict that just became degraded: what, where, why, and the command to look.
pub fn degraded_message(v: &Verdict, host: &str) -> Message {
    let words: Vec<String> = v
        .reasons
        .iter()
        .map(|r| words_with_numbers(v, r.rule))
        .collect();
    let next = next_step(v);
    Message {
        title: format!("automations: {} is degraded", v.name),
        body: format!(
            "{name} on {host} is degraded: {}.{} {next}",
            words.join(", "),
            kinds_sentence(v),
            name = v.name
        ),
        about: Some(About::of("degraded", v, host, command_of(&next))),
    }
}

/// The command at the end of a next step ("See the last run: automations show x").
fn command_of(next: &str) -> Option<String> {
    next.rsplit_once(": ").map(|(_, c)| c.to_owned())
}

/// The reminder of a degradation that goes on: how long, why, and the command to look.
pub fn reminder_message(v: &Verdict, host: &str, since_hours: u64) -> Message {
    let mut m = degraded_message(v, host);
    m.title = format!("automations: {} is still degraded (reminder)", v.name);
    m.body = format!(
        "Reminder: {}",
        m.body.replacen(
            " is degraded: ",
            &format!(" has been degraded for {since_hours} h: "),
            1
        )
    );
    if let Some(a) = &mut m.about {
        a.kind = "reminder".into();
    }
    m
}

/// The command a degraded message ends with: the one that fixes or shows its first reason (an
/// unapproved change is not in any run: its approval is).
fn next_step(v: &Verdict) -> String {
    let name = &v.name;
    let has = |rule: Rule| v.reasons.iter().any(|r| r.rule == rule);
    if has(Rule::NotApproved) {
        format!("Review the change and approve it: make automations-install NAME={name}")
    } else if has(Rule::DefinitionInvalid) {
        "See what is wrong: automations validate".to_owned()
    } else if has(Rule::NoDefinition) {
        "Its unit still fires: automations check says how to fix it".to_owned()
    } else if v.reasons.iter().all(|r| r.rule == Rule::PingsFailing) {
        "See its pings: automations healthchecks status".to_owned()
    } else {
        format!("See the last run: automations show {name}")
    }
}

/// The message of an automatic pause: the streak and its kinds, where, and what to do next.
pub fn auto_paused_message(v: &Verdict, host: &str) -> Message {
    Message {
        title: format!("automations: {} was paused automatically", v.name),
        body: format!(
            "{name} on {host} was paused after {} failures in a row.{} See the last failure: automations show {name} --failed. Fix the cause, then: automations resume {name}",
            v.figures.streak,
            kinds_sentence(v),
            name = v.name
        ),
        about: Some(About::of(
            "auto_paused",
            v,
            host,
            Some(format!("automations show {} --failed", v.name)),
        )),
    }
}

/// The message of a notified degradation that ended.
pub fn recovered_message(v: &Verdict, host: &str) -> Message {
    Message {
        title: format!("automations: {} recovered", v.name),
        body: format!("{} on {host} is healthy again", v.name),
        about: Some(About::of("recovered", v, host, None)),
    }
}

/// "low success rate (12 of 20 ok)": a rule's fixed words and the figures behind it.
fn words_with_numbers(v: &Verdict, rule: Rule) -> String {
    let f = &v.figures;
    let numbers = match rule {
        Rule::SuccessRate => Some(format!("{} of {} ok", f.ok, f.runs)),
        Rule::FailingStreak => Some(format!("{} in a row", f.streak)),
        Rule::MissedDays => f.missed_days.map(|d| format!("{d} days")),
        Rule::Stale => f.age_ms.map(health::human_ms),
        // Their figures are their detail: "ran 1.0 s, usually 20 s", "the latest run took 5 min,
        // usually 1 min", "3 of 4 recent outside calls got no answer (75 %)".
        Rule::TooShort | Rule::Slow | Rule::Http4xx | Rule::Http5xx | Rule::HttpNoAnswer => v
            .reasons
            .iter()
            .find(|r| r.rule == rule)
            .map(|r| r.detail.clone()),
        _ => None,
    };
    match numbers {
        Some(n) => format!("{} ({n})", rule.words()),
        None => rule.words().to_owned(),
    }
}

/// What was last said of one automation: `state/verdicts/<name>.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Last {
    degraded: bool,
    /// The degradation reached someone.
    notified: bool,
    /// The automatic pause whose news was queued: the time of its `paused` event. Each automatic
    /// pause is its own news, once; a second one after a resume is news again even if the
    /// verdict never went back to healthy in between.
    #[serde(default)]
    auto_pause_at: Option<String>,
    /// The latest ack (or resume) this state has taken in, and whether it has taken any in (a
    /// file from before acks were kept adopts the current one without treating it as news).
    #[serde(default)]
    acked_at: Option<String>,
    #[serde(default)]
    ack_seen: bool,
    /// When the degradation began, and when it was last told (its message or a reminder queued):
    /// a reminder is due `remind_every_hours` after that.
    #[serde(default)]
    degraded_at: Option<String>,
    #[serde(default)]
    told_at: Option<String>,
    /// Messages not yet delivered, and the drivers still to take each.
    pending: Vec<Pending>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Pending {
    message: Message,
    drivers: Vec<Driver>,
    /// This message tells of a degradation (or the automatic pause); delivering it makes the
    /// degradation "notified".
    degradation: bool,
}

fn state_path(settings: &Settings, name: &Name) -> PathBuf {
    settings.layout().verdict(name)
}

/// What a look did, for `notify look` and tests.
#[derive(Debug, Default)]
pub struct LookReport {
    /// (automation, driver, answer or error).
    pub deliveries: Vec<(String, Driver, Result<String, String>)>,
    /// Messages held by quiet hours.
    pub held: usize,
    /// Automations passed over because they are snoozed: their news waits for the snooze's end.
    pub snoozed: usize,
    /// Automations whose last verdicts could not be read or saved, and why: the look went on
    /// with the others.
    pub unreadable: Vec<String>,
    /// Another look held the lock for longer than this one waits: nothing was looked at, the
    /// next look does it.
    pub busy: bool,
}

/// How long the runner's look after a run waits for another look to finish: its firing is not
/// over until the look is, and the next look catches up on what this one leaves.
pub const RUNNER_WAIT: Duration = Duration::from_secs(1);
/// How long `notify look` waits for another look: as long as one may take, and a little more.
pub const LOOK_WAIT: Duration = Duration::from_secs(drivers::DEADLINE.as_secs() + 5);
/// Below this much of the look's deadline left, a delivery is not begun.
const LEAST_TIME: Duration = Duration::from_millis(250);

/// The drivers `notify.toml` names, whether or not their credentials can be had right now: a
/// message waits for each of them.
fn configured(cfg: &NotifySettings) -> Vec<Driver> {
    drivers::KINDS
        .iter()
        .filter(|k| (k.configured)(cfg))
        .map(|k| k.name)
        .collect()
}

/// Looks at `only` (or every automation): notes transitions, delivers what is due.
///
/// Why a look or a test could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `notify.toml` cannot be used.
    #[error(transparent)]
    Settings(#[from] crate::settings::file::Refused),
    /// There is no `notify.toml`: nothing to test.
    #[error("no {} in {}: nothing to test", settings::FILE, .data_root.display())]
    NotConfigured { data_root: std::path::PathBuf },
    /// Health's sources could not be read.
    #[error(transparent)]
    Load(#[from] health::load::LoadError),
    /// The looks' lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::locks::LockError),
}

impl crate::exit::Exits for NotifyError {
    /// Each cause's own; no `notify.toml` to test, 1.
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::Settings(e) => e.exit(),
            Self::NotConfigured { .. } => crate::exit::Exit::Failure,
            Self::Load(e) => e.exit(),
            Self::Lock(e) => e.exit(),
        }
    }
}

/// One look at a time (`state/verdicts/.lock`): the runner's look after a run and the hourly
/// health-check can meet, and each reads, changes and saves the same last verdicts. A look waits
/// at most `wait` for another, then leaves its work to the next look ([`LookReport::busy`]); all
/// its deliveries share one [`drivers::DEADLINE`].
pub fn look(
    settings: &Settings,
    only: Option<&Name>,
    wait: Duration,
) -> Result<LookReport, NotifyError> {
    if settings::load(&settings.data_root)?.is_none() {
        return Ok(LookReport::default());
    }
    look_at(
        settings,
        &health::load::Sources::read(settings, only)?,
        only,
        wait,
    )
}

/// [`look`] from sources already read (the runner's, after a run of `only`).
pub fn look_at(
    settings: &Settings,
    src: &health::load::Sources,
    only: Option<&Name>,
    wait: Duration,
) -> Result<LookReport, NotifyError> {
    let Some(cfg) = settings::load(&settings.data_root)? else {
        return Ok(LookReport::default());
    };
    let verdicts = health::load::verdicts(settings, src, only)?;
    let lock_path = crate::layout::Layout::new(&settings.data_root).verdicts_lock();
    let Some(lock) = crate::locks::within(&lock_path, wait)? else {
        return Ok(LookReport {
            busy: true,
            ..LookReport::default()
        });
    };
    let deadline = Instant::now() + drivers::DEADLINE;
    let names = configured(&cfg);
    let now = chrono::Local::now();
    let quiet = cfg.quiet_at(TimeOfDay {
        hour: now.hour() as u8,
        minute: now.minute() as u8,
    });
    // Credentials are looked up only when something is to be sent.
    let mut drivers: Option<Vec<Box<dyn Notifier>>> = None;
    let mut report = LookReport::default();
    let host = host();
    for v in &verdicts {
        // Snoozed: nothing of it is looked at, so what is news at the snooze's end is told then.
        if v.figures.snoozed_until.is_some() {
            report.snoozed += 1;
            continue;
        }
        let Ok(name) = Name::new(&v.name) else {
            report
                .unreadable
                .push(format!("{}: not an automation name", v.name));
            continue;
        };
        let path = state_path(settings, &name);
        let mut last: Last = match crate::state::read_json(&path) {
            Ok(l) => l.unwrap_or_default(),
            Err(e) => {
                report.unreadable.push(format!(
                    "{}: {why}",
                    v.name,
                    why = crate::exit::chain_text(&e)
                ));
                continue;
            }
        };
        let before = last.clone();
        // The channels that take this automation's news.
        let routed: Vec<Driver> = names
            .iter()
            .filter(|c| cfg.routes_to(**c, &v.name))
            .copied()
            .collect();
        // What waits for a channel that no longer takes this automation's news (an `except`
        // added, a channel removed) is not for it any more.
        for p in &mut last.pending {
            p.drivers.retain(|d| routed.contains(d));
        }
        last.pending.retain(|p| !p.drivers.is_empty());
        let at = Moment {
            now: now.with_timezone(&Utc),
            quiet,
        };
        transition(&mut last, v, &cfg, &routed, &host, at);
        if quiet || off() {
            report.held += last.pending.len();
        } else if !last.pending.is_empty() {
            let drivers = drivers.get_or_insert_with(|| self::drivers(settings, &cfg));
            deliver(&mut last, &v.name, drivers, deadline, &mut report);
        }
        // Most looks change nothing: nothing is written then.
        if last != before
            && let Err(e) = crate::state::write_json(&path, &last)
        {
            report.unreadable.push(format!(
                "{}: {why}",
                v.name,
                why = crate::exit::chain_text(&e)
            ));
        }
    }
    drop(lock);
    Ok(report)
}

/// When a look happens: the time, and whether it is within the quiet hours.
#[derive(Clone, Copy, Debug)]
struct Moment {
    now: chrono::DateTime<Utc>,
    quiet: bool,
}

/// Queues what the change from `last` to `v` calls for. News is keyed on its event: an automatic
/// pause by its `paused` event's time, a degradation by the verdict's turn from healthy (or
/// unknown) to degraded. Nothing is queued twice for one event. While it stays degraded, a
/// reminder is queued each `remind_every_hours` after it was last told (never in quiet hours: the
/// first look after them queues it), once the degradation reached someone.
fn transition(
    last: &mut Last,
    v: &Verdict,
    cfg: &NotifySettings,
    drivers: &[Driver],
    host: &str,
    at: Moment,
) {
    let queue = |last: &mut Last, message, degradation| {
        last.pending.push(Pending {
            message,
            drivers: drivers.to_vec(),
            degradation,
        })
    };
    close_answered(last, v);
    let auto_pause = v
        .reasons
        .iter()
        .any(|r| r.rule == Rule::AutoPaused)
        .then(|| v.figures.paused_at.clone())
        .flatten();
    if let Some(paused) = auto_pause
        && last.auto_pause_at.as_ref() != Some(&paused)
    {
        // The pause is the news, and says why: no separate "degraded" message for it.
        queue(last, auto_paused_message(v, host), true);
        last.auto_pause_at = Some(paused);
        last.told_at = Some(crate::runlog::stamp(at.now));
        if !last.degraded {
            last.degraded = true;
            last.notified = false;
            last.degraded_at = Some(crate::runlog::stamp(at.now));
        }
        return;
    }
    match (last.degraded, v.verdict) {
        (false, State::Degraded) => {
            queue(last, degraded_message(v, host), true);
            last.degraded = true;
            last.notified = false;
            last.degraded_at = Some(crate::runlog::stamp(at.now));
            last.told_at = last.degraded_at.clone();
        }
        (true, State::Degraded) => {
            if let Some(message) = reminder(last, v, cfg, host, at) {
                remind(last, message, drivers, at.now);
            }
        }
        (false, State::Healthy | State::Unknown) => {}
        (true, State::Healthy | State::Unknown) => {
            // A degradation nobody heard of needs no news of its end; an unknown verdict is no
            // recovery to announce.
            last.pending.retain(|p| !p.degradation);
            if cfg.recovery && last.notified && v.verdict == State::Healthy {
                queue(last, recovered_message(v, host), false);
            }
            last.degraded = false;
            last.notified = false;
            last.degraded_at = None;
            last.told_at = None;
        }
    }
}

/// An ack (or resume) closes the degradation it answered: what comes after it is new news, even
/// when no look saw the verdict healthy in between.
fn close_answered(last: &mut Last, v: &Verdict) {
    if last.ack_seen && last.acked_at != v.figures.acked_at && last.degraded {
        last.pending.retain(|p| !p.degradation);
        last.degraded = false;
        last.notified = false;
        last.degraded_at = None;
        last.told_at = None;
    }
    last.acked_at = v.figures.acked_at.clone();
    last.ack_seen = true;
}

/// Queues a reminder for the channels that owe nothing of the degradation: one that cannot take
/// messages now holds back no other's reminders.
fn remind(last: &mut Last, message: Message, drivers: &[Driver], now: chrono::DateTime<Utc>) {
    let owing: Vec<&Driver> = last
        .pending
        .iter()
        .filter(|p| p.degradation)
        .flat_map(|p| &p.drivers)
        .collect();
    let free: Vec<Driver> = drivers
        .iter()
        .filter(|d| !owing.contains(d))
        .copied()
        .collect();
    if !free.is_empty() {
        last.pending.push(Pending {
            message,
            drivers: free,
            degradation: true,
        });
        last.told_at = Some(crate::runlog::stamp(now));
    }
}

/// The reminder due now of a degradation that goes on, if one is: it reached someone, it is not
/// the quiet hours, and `remind_every_hours` have passed since it was last told (queued, or
/// delivered, whichever was later). A state from before reminders starts counting now.
fn reminder(
    last: &mut Last,
    v: &Verdict,
    cfg: &NotifySettings,
    host: &str,
    at: Moment,
) -> Option<Message> {
    let every = cfg.remind_every_hours?;
    let stamp = |t: &Option<String>| t.as_deref().and_then(crate::runlog::parse_stamp);
    let Some(told) = stamp(&last.told_at) else {
        last.told_at = Some(crate::runlog::stamp(at.now));
        return None;
    };
    let due = at.now - told >= chrono::Duration::hours(i64::from(every));
    if !due || at.quiet || !last.notified {
        return None;
    }
    let since = stamp(&last.degraded_at).unwrap_or(told);
    let hours = (at.now - since).num_hours().max(0) as u64;
    Some(reminder_message(v, host, hours))
}

/// Delivers every pending message to every driver still to take it, before `deadline`.
fn deliver(
    last: &mut Last,
    name: &str,
    drivers: &[Box<dyn Notifier>],
    deadline: Instant,
    report: &mut LookReport,
) {
    for p in &mut last.pending {
        p.drivers.retain(|want| {
            // A driver whose credentials cannot be had now (a locked keychain, no session bus)
            // is a delivery that failed: the message waits for the next look. So is one there is
            // no time left for.
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = match drivers.iter().find(|d| d.name() == *want) {
                _ if left < LEAST_TIME => Err(format!(
                    "the look's {} s for deliveries ran out",
                    drivers::DEADLINE.as_secs()
                )),
                Some(d) => d.send(&p.message, left),
                None => Err("its credentials cannot be read now".to_owned()),
            };
            let delivered = answer.is_ok();
            if let Err(e) = &answer {
                errln!(
                    "automations: {name}: could not notify through {want} ({e}); it is tried again at the next look"
                );
            } else if p.degradation {
                // Told now: the next reminder counts from here, not from when it was queued.
                last.notified = true;
                last.told_at = Some(crate::runlog::stamp(Utc::now()));
            }
            report.deliveries.push((name.to_owned(), *want, answer));
            !delivered
        });
    }
    last.pending.retain(|p| !p.drivers.is_empty());
}

/// The configured drivers; one whose credentials cannot be had is left out, saying why.
pub fn drivers(settings: &Settings, cfg: &NotifySettings) -> Vec<Box<dyn Notifier>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let keys = keys::for_settings(settings);
    let setup = drivers::Setup {
        env: &env,
        keys: keys.as_ref(),
        namespace: &settings.namespace,
        settings: cfg,
    };
    drivers::KINDS
        .iter()
        .filter(|k| (k.configured)(cfg))
        .filter_map(|k| {
            (k.make)(&setup)
                .inspect_err(|e| errln!("automations: {e}"))
                .ok()
        })
        .collect()
}

/// The test message, naming the machine it came from (a team's channel hears from several).
fn test_message(host: &str, now: chrono::DateTime<Utc>) -> Message {
    Message {
        title: format!("automations: a test from {host}"),
        body: format!(
            "A test from automations on {host} at {}: notifications reach you.",
            now.format("%Y-%m-%d %H:%M UTC")
        ),
        about: None,
    }
}

/// Sends one test message through every configured channel; each channel's answer, or why it
/// could not be tried (its credentials cannot be had).
pub fn test(settings: &Settings) -> Result<BTreeMap<Driver, Result<String, String>>, NotifyError> {
    let cfg = settings::load(&settings.data_root)?.ok_or_else(|| NotifyError::NotConfigured {
        data_root: settings.data_root.clone(),
    })?;
    let m = test_message(&host(), Utc::now());
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let keys = keys::for_settings(settings);
    let setup = drivers::Setup {
        env: &env,
        keys: keys.as_ref(),
        namespace: &settings.namespace,
        settings: &cfg,
    };
    Ok(drivers::KINDS
        .iter()
        .filter(|k| (k.configured)(&cfg))
        .map(|k| {
            let answer = (k.make)(&setup).and_then(|d| d.send(&m, drivers::DEADLINE));
            (k.name, answer)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{Figures, Reason};

    fn v(name: &str, rules: &[Rule]) -> Verdict {
        Verdict {
            name: name.into(),
            verdict: if rules.is_empty() {
                State::Healthy
            } else {
                State::Degraded
            },
            reasons: rules
                .iter()
                .map(|r| Reason {
                    rule: *r,
                    detail: "never sent".into(),
                })
                .collect(),
            figures: Figures {
                ok: 2,
                runs: 5,
                ..Figures::default()
            },
        }
    }

    /// A look `hours` after a fixed start, outside quiet hours.
    fn at(hours: i64) -> Moment {
        Moment {
            now: chrono::DateTime::parse_from_rfc3339("2026-12-01T08:00:00Z")
                .unwrap()
                .with_timezone(&Utc)
                + chrono::Duration::hours(hours),
            quiet: false,
        }
    }

    fn paused_at(mut v: Verdict, at: &str) -> Verdict {
        v.figures.paused_at = Some(at.to_owned());
        v.figures.streak = 3;
        v.figures.streak_kinds = vec!["server errors (5xx)".into(), "timeout".into()];
        v
    }

    #[test]
    fn a_degradation_that_goes_on_is_recalled_each_period_but_not_in_quiet_hours() {
        let cfg = NotifySettings {
            remind_every_hours: Some(6),
            ..NotifySettings::default()
        };
        let d = vec![Driver::Webhook];
        let bad = v("x", &[Rule::FailingStreak]);
        let quiet = |h| Moment {
            quiet: true,
            ..at(h)
        };
        let delivered = |last: &mut Last| {
            last.pending.clear();
            last.notified = true;
        };
        let mut last = Last::default();
        transition(&mut last, &bad, &cfg, &d, "box", at(0));
        assert_eq!(last.pending.len(), 1);
        // Not delivered yet: no reminder on top of it, however long.
        transition(&mut last, &bad, &cfg, &d, "box", at(9));
        assert_eq!(last.pending.len(), 1);
        delivered(&mut last);
        transition(&mut last, &bad, &cfg, &d, "box", at(5));
        assert!(last.pending.is_empty());
        // Due at 6 h, but quiet: none; the first look after the quiet hours sends it.
        transition(&mut last, &bad, &cfg, &d, "box", quiet(6));
        transition(&mut last, &bad, &cfg, &d, "box", quiet(7));
        assert!(last.pending.is_empty());
        transition(&mut last, &bad, &cfg, &d, "box", at(8));
        assert_eq!(last.pending.len(), 1);
        let m = &last.pending[0].message;
        assert_eq!(m.title, "automations: x is still degraded (reminder)");
        assert_eq!(
            m.body,
            "Reminder: x on box has been degraded for 8 h: failing repeatedly (0 in a row). See the last run: automations show x"
        );
        assert_eq!(m.about.as_ref().unwrap().kind, "reminder");
        delivered(&mut last);
        // The next one counts from this reminder.
        transition(&mut last, &bad, &cfg, &d, "box", at(13));
        assert!(last.pending.is_empty());
        transition(&mut last, &bad, &cfg, &d, "box", at(14));
        assert_eq!(last.pending.len(), 1);
        delivered(&mut last);
        // Recovered, then degraded again: that is news of its own, not a reminder.
        transition(&mut last, &v("x", &[]), &cfg, &d, "box", at(15));
        transition(&mut last, &bad, &cfg, &d, "box", at(16));
        assert_eq!(last.pending[0].message.title, "automations: x is degraded");
        // A channel that still owes the news holds back no other's reminder.
        let two = vec![Driver::Webhook, Driver::Ntfy];
        let mut last = Last::default();
        transition(&mut last, &bad, &cfg, &two, "box", at(0));
        last.pending[0].drivers = vec![Driver::Webhook];
        last.notified = true;
        transition(&mut last, &bad, &cfg, &two, "box", at(7));
        assert_eq!(last.pending.len(), 2);
        assert_eq!(last.pending[1].drivers, [Driver::Ntfy]);
        assert_eq!(
            last.pending[1].message.about.as_ref().unwrap().kind,
            "reminder"
        );
        // Without remind_every_hours, never.
        let mut last = Last::default();
        let off = NotifySettings::default();
        transition(&mut last, &bad, &off, &d, "box", at(0));
        delivered(&mut last);
        transition(&mut last, &bad, &off, &d, "box", at(100));
        assert!(last.pending.is_empty());
    }

    /// Regression: an edited script's message said "See the last run: automations show report",
    /// which shows an old ok run; the fix (a reinstall) was only in `health` and `check`.
    #[test]
    fn a_degraded_message_ends_with_the_command_for_its_reason() {
        let body = |rules: &[Rule]| degraded_message(&v("report", rules), "box").body;
        assert!(
            body(&[Rule::NotApproved]).ends_with(
                "Review the change and approve it: make automations-install NAME=report"
            ),
            "{}",
            body(&[Rule::NotApproved])
        );
        assert!(body(&[Rule::DefinitionInvalid]).ends_with("automations validate"));
        assert!(body(&[Rule::PingsFailing]).ends_with("automations healthchecks status"));
        assert!(
            body(&[Rule::SuccessRate, Rule::PingsFailing])
                .ends_with("See the last run: automations show report")
        );
    }

    /// Regression: a too-short run's message said "run too short" without its figures, which
    /// only `health` had.
    #[test]
    fn a_message_about_a_rule_carries_its_figures() {
        let mut verdict = v("backup", &[Rule::TooShort]);
        verdict.reasons[0].detail = "ran 1.0 s, usually 20 s".into();
        let body = degraded_message(&verdict, "box").body;
        assert!(
            body.starts_with("backup on box is degraded: run too short (ran 1.0 s, usually 20 s)."),
            "{body}"
        );
        let mut verdict = v("backup", &[Rule::Slow]);
        verdict.reasons[0].detail = "the latest run took 5 min, usually 1 min".into();
        let body = degraded_message(&verdict, "box").body;
        assert!(
            body.contains("slow run (the latest run took 5 min, usually 1 min)"),
            "{body}"
        );
    }

    /// Regression: `notify test` did not say which machine it came from.
    #[test]
    fn the_test_message_names_its_host() {
        let m = test_message("backup-01", at(0).now);
        assert_eq!(m.title, "automations: a test from backup-01");
        assert!(
            m.body
                .starts_with("A test from automations on backup-01 at "),
            "{}",
            m.body
        );
    }

    #[test]
    fn only_transitions_queue_messages_of_fixed_words() {
        let cfg = NotifySettings::default();
        let d = vec![Driver::Pushover];
        let mut last = Last::default();
        transition(&mut last, &v("x", &[]), &cfg, &d, "box", at(0));
        assert!(last.pending.is_empty());
        transition(
            &mut last,
            &v("x", &[Rule::SuccessRate]),
            &cfg,
            &d,
            "box",
            at(0),
        );
        assert_eq!(last.pending.len(), 1);
        let m = &last.pending[0].message;
        assert_eq!(m.title, "automations: x is degraded");
        assert_eq!(
            m.body,
            "x on box is degraded: low success rate (2 of 5 ok). See the last run: automations show x"
        );
        assert!(!m.body.contains("never sent"));
        // Still degraded: silent.
        transition(
            &mut last,
            &v("x", &[Rule::SuccessRate, Rule::Slow]),
            &cfg,
            &d,
            "box",
            at(0),
        );
        assert_eq!(last.pending.len(), 1);
        // Then paused automatically: one more, its own title, the kinds and the next command.
        let paused = paused_at(v("x", &[Rule::AutoPaused]), "2026-12-01T10:00:00.000Z");
        transition(&mut last, &paused, &cfg, &d, "box", at(0));
        assert_eq!(last.pending.len(), 2);
        let m = &last.pending[1].message;
        assert_eq!(m.title, "automations: x was paused automatically");
        assert_eq!(
            m.body,
            "x on box was paused after 3 failures in a row. Failures: server errors (5xx), timeout. See the last failure: automations show x --failed. Fix the cause, then: automations resume x"
        );
        // The same pause again: nothing more.
        transition(&mut last, &paused, &cfg, &d, "box", at(0));
        assert_eq!(last.pending.len(), 2);
        // Another automatic pause (after a resume), though never healthy in between: news again.
        let again = paused_at(v("x", &[Rule::AutoPaused]), "2026-12-01T11:00:00.000Z");
        transition(&mut last, &again, &cfg, &d, "box", at(0));
        assert_eq!(last.pending.len(), 3);
        // Unknown is no recovery to announce.
        let cfg = NotifySettings {
            recovery: true,
            ..NotifySettings::default()
        };
        let mut unknown = v("x", &[Rule::NoRuns]);
        unknown.verdict = State::Unknown;
        let mut l2 = last.clone();
        l2.notified = true;
        transition(&mut l2, &unknown, &cfg, &d, "box", at(0));
        assert!(l2.pending.is_empty() && !l2.degraded);
        // Recovered before anything was delivered: the news is dropped, and nothing said.
        transition(&mut last, &v("x", &[]), &cfg, &d, "box", at(0));
        assert!(last.pending.is_empty());
        // Recovered after a delivery: said, with its own title.
        last.degraded = true;
        last.notified = true;
        transition(&mut last, &v("x", &[]), &cfg, &d, "box", at(0));
        assert_eq!(last.pending[0].message.title, "automations: x recovered");
        assert_eq!(last.pending[0].message.body, "x on box is healthy again");
    }
}
