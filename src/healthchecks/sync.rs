//! Checks that follow the definitions: one remote check per scheduled, installed automation, with
//! the schedule its unit fires on.
//!
//! A calendar schedule (`daily_at` and its kinds, a wall-clock grid) becomes the very `OnCalendar`
//! expressions of its systemd timer, one per line, with `tz` = this machine's zone; an interval of
//! awake time becomes a simple `timeout` (a sleeping laptop shows late there: that interval does
//! not fire on wake); at-login-only has nothing regular to watch and gets no check. The grace is
//! the firing's longest time (jitter, every attempt, the waits between them) plus five minutes,
//! or `grace_seconds`.
//!
//! [`plan`] compares what should be with what the server has and says each difference; `sync`
//! applies it, `check` only reports it. A check is identified to people by its automation and
//! slug, never by its UUID.

use super::api::{Api, ApiError, Remote, Spec};
use super::settings::{CheckId, SECONDS_MAX, SECONDS_MIN};
use super::{HcSettings, Watch};
use crate::definition::Definition;
use crate::names::{Name, Namespace};
use crate::schedule::Schedule;

/// The margin added to a firing's longest time for the grace.
pub const GRACE_MARGIN: u32 = 300;
/// The longest `schedule` Healthchecks accepts.
pub const SCHEDULE_MAX: usize = 100;

/// What one automation's check should be, or why it gets none.
#[derive(Clone, Debug)]
pub struct Wanted {
    pub name: Name,
    pub watch: Watch,
    pub spec: Result<Spec, String>,
}

/// The check each of `defs` (scheduled and installed, or only `only`) should have.
pub fn wanted(
    cfg: &HcSettings,
    namespace: &Namespace,
    defs: &[&Definition],
    zone: Option<&str>,
    host: &str,
) -> Vec<Wanted> {
    defs.iter()
        .filter_map(|def| {
            let watch = super::watch(cfg, namespace, &def.name);
            (watch != Watch::Off).then(|| Wanted {
                name: def.name.clone(),
                spec: spec(cfg, namespace, def, &watch, zone, host),
                watch,
            })
        })
        .collect()
}

/// The check of `def`, or why it can have none.
pub fn spec(
    cfg: &HcSettings,
    namespace: &Namespace,
    def: &Definition,
    watch: &Watch,
    zone: Option<&str>,
    host: &str,
) -> Result<Spec, String> {
    let schedule = def.schedule.as_ref().ok_or("it has no schedule")?;
    let grace = cfg.grace_seconds.unwrap_or_else(|| {
        (crate::units::stop_timeout(def) + GRACE_MARGIN).clamp(SECONDS_MIN, SECONDS_MAX)
    });
    let mut spec = Spec {
        name: format!("{} ({namespace})", def.name),
        slug: match watch {
            Watch::Slug(s) => Some(s.clone()),
            _ => None,
        },
        tags: super::tag(namespace),
        desc: format!(
            "{}{} on {host}, {}. Kept in step with its definition by `automations healthchecks sync`.",
            def.description
                .as_deref()
                .map_or_else(String::new, sentence),
            def.name,
            schedule.words()
        ),
        grace,
        ..Spec::default()
    };
    let lines = crate::schedule::on_calendar(schedule);
    match schedule {
        Schedule::AtLogin => return Err("it runs only at login: nothing regular to watch".into()),
        Schedule::EveryMinutes { every_minutes, .. } if lines.is_empty() => {
            spec.timeout = Some((every_minutes * 60).clamp(SECONDS_MIN, SECONDS_MAX));
        }
        _ => {
            // A cron expression is given as such (a Healthchecks cron check); the rest as the
            // timer's own OnCalendar lines.
            let (text, what) = match schedule {
                Schedule::Cron { cron, .. } => (cron.numeric(), "cron expression".to_owned()),
                _ => (
                    lines.join("\n"),
                    format!("{} OnCalendar lines", lines.len()),
                ),
            };
            if text.len() > SCHEDULE_MAX {
                return Err(format!(
                    "its {what}: {} characters; Healthchecks takes at most {SCHEDULE_MAX}",
                    text.len()
                ));
            }
            spec.schedule = Some(text);
            // The schedule's own zone first: its wall clock is read there, wherever it runs.
            spec.tz = Some(
                schedule
                    .zone()
                    .map(|z| z.name().to_owned())
                    .or_else(|| cfg.tz.clone())
                    .or_else(|| zone.map(str::to_owned))
                    .ok_or("this machine's time zone cannot be told: set tz = \"Area/City\" in healthchecks.toml")?,
            );
        }
    }
    Ok(spec)
}

/// What to do about one check.
#[derive(Clone, Debug)]
pub enum Step {
    /// No such check yet: create it.
    Create(Spec),
    /// It differs: these fields ("grace: 900 → 1230"), then set them.
    Update(CheckId, Spec, Vec<String>),
    /// It is as it should be.
    InStep,
    /// Its configured UUID names no check of the key's project.
    Missing,
    /// Not possible, and why (no schedule to watch, too long a schedule).
    Cannot(String),
    /// A check of this namespace that no installed automation has.
    Orphan(CheckId),
}

/// One line of a plan: whose check (automation, or the orphan's slug or name), and what to do.
#[derive(Clone, Debug)]
pub struct Line {
    pub who: String,
    pub step: Step,
}

impl Line {
    /// Whether this line is drift (something to do).
    pub fn is_drift(&self) -> bool {
        !matches!(self.step, Step::InStep | Step::Cannot(_))
    }

    /// The command that brings this line in step.
    pub fn fix(&self) -> &'static str {
        match self.step {
            Step::Orphan(_) => "automations healthchecks sync --prune",
            Step::Missing => {
                "put the check's UUID in healthchecks.toml's [checks], or remove it there"
            }
            _ => "automations healthchecks sync",
        }
    }

    /// The line for people; never a UUID.
    pub fn words(&self) -> String {
        let who = &self.who;
        match &self.step {
            Step::Create(spec) => format!("{who}: create ({})", summary(spec)),
            Step::Update(_, _, diffs) => format!("{who}: update ({})", diffs.join("; ")),
            Step::InStep => format!("{who}: in step"),
            Step::Missing => format!(
                "{who}: its configured check UUID is not a check of this project (fix [checks] in healthchecks.toml)"
            ),
            Step::Cannot(why) => format!("{who}: no check: {why}"),
            Step::Orphan(_) => format!("{who}: orphaned (no installed automation has it)"),
        }
    }
}

/// "schedule \"*-*-* 08:00:00\" in Europe/Berlin, grace 1230 s".
fn summary(spec: &Spec) -> String {
    let when = match (&spec.schedule, &spec.timeout) {
        (Some(s), _) => format!(
            "schedule {:?} in {}",
            s.replace('\n', " | "),
            spec.tz.as_deref().unwrap_or("?")
        ),
        (None, Some(t)) => format!("every {t} s (awake-time interval)"),
        (None, None) => "no schedule".into(),
    };
    format!("{when}, grace {} s", spec.grace)
}

/// How `remote` differs from `spec`, field by field.
fn differences(spec: &Spec, remote: &Remote) -> Vec<String> {
    let mut d = Vec::new();
    let mut field = |name: &str, want: String, have: String| {
        if want != have {
            d.push(format!("{name}: {have:?} → {want:?}"));
        }
    };
    field(
        "schedule",
        spec.schedule.clone().unwrap_or_default(),
        remote.schedule.clone().unwrap_or_default(),
    );
    if spec.schedule.is_some() {
        field(
            "tz",
            spec.tz.clone().unwrap_or_default(),
            remote.tz.clone().unwrap_or_default(),
        );
    }
    field(
        "timeout",
        spec.timeout.map_or_else(String::new, |t| t.to_string()),
        remote
            .timeout
            .filter(|_| remote.schedule.is_none())
            .map_or_else(String::new, |t| t.to_string()),
    );
    field("grace", spec.grace.to_string(), remote.grace.to_string());
    field("name", spec.name.clone(), remote.name.clone());
    if let Some(slug) = &spec.slug {
        field("slug", slug.clone(), remote.slug.clone());
    }
    if spec.desc != remote.desc {
        d.push("its description".into());
    }
    if !remote.has_tag(&spec.tags) {
        d.push(format!("tags: {:?} lacks {:?}", remote.tags, spec.tags));
    }
    d
}

/// An automation installed here whose definition cannot be read now (invalid, or gone): its check
/// is still its own, never an orphan, and is left as it is.
#[derive(Clone, Debug)]
pub struct Unreadable {
    pub name: Name,
    pub watch: Watch,
    /// Why its definition cannot be read (`automations/x.toml: command: …`).
    pub why: String,
}

/// A description as the first sentence of a check's: its own final `.`, `?` or `!` kept, a `.`
/// added when it has none ("Is my website up?. site-check" read wrong).
fn sentence(description: &str) -> String {
    let d = description.trim_end();
    if d.ends_with(['.', '?', '!']) {
        format!("{d} ")
    } else {
        format!("{d}. ")
    }
}

/// The plan: for each wanted check, what to do; then the checks of installed automations whose
/// definitions cannot be read (left as they are); with `prune`-able orphans of `namespace` last.
/// `all` says whether `wanted` covers every automation (only then are orphans looked for).
pub fn plan(
    api: &Api,
    namespace: &Namespace,
    wanted: &[Wanted],
    unreadable: &[Unreadable],
    all: bool,
) -> Result<Vec<Line>, ApiError> {
    let remote = api.list(None)?;
    let mut claimed: Vec<&CheckId> = Vec::new();
    let mut lines = Vec::new();
    for w in wanted {
        let who = w.name.to_string();
        let spec = match &w.spec {
            Ok(s) => s.clone(),
            Err(why) => {
                lines.push(Line {
                    who,
                    step: Step::Cannot(why.clone()),
                });
                continue;
            }
        };
        if w.watch == Watch::Off {
            continue;
        }
        let step = step_for(&remote, namespace, w, spec, &mut claimed);
        lines.push(Line { who, step });
    }
    for u in unreadable {
        if let Found::Ours(r) = find(&remote, namespace, &u.name, &u.watch)
            && let Some(id) = &r.uuid
        {
            claimed.push(id);
        }
        lines.push(Line {
            who: u.name.to_string(),
            step: Step::Cannot(format!(
                "its definition cannot be read ({}); its check is left as it is",
                u.why
            )),
        });
    }
    if all {
        let tag = super::tag(namespace);
        for r in remote.iter().filter(|r| r.has_tag(&tag)) {
            if let Some(id) = &r.uuid
                && !claimed.contains(&id)
            {
                let who = if r.slug.is_empty() {
                    r.name.clone()
                } else {
                    r.slug.clone()
                };
                lines.push(Line {
                    who,
                    step: Step::Orphan(id.clone()),
                });
            }
        }
    }
    Ok(lines)
}

/// What one readable, watched definition's check needs; a check found
/// as ours is recorded in `claimed` so `--all` does not call it orphaned.
fn step_for<'r>(
    remote: &'r [Remote],
    namespace: &Namespace,
    w: &Wanted,
    spec: Spec,
    claimed: &mut Vec<&'r CheckId>,
) -> Step {
    match find(remote, namespace, &w.name, &w.watch) {
        Found::NotThere if matches!(w.watch, Watch::Uuid(_)) => Step::Missing,
        Found::NotThere => Step::Create(spec),
        Found::Foreign(r, owner) => Step::Cannot(format!(
            "the check with the slug {} belongs to namespace {owner} (its tag automations-{owner} says so); it is not taken over",
            r.slug
        )),
        Found::Ours(r) => {
            if let Some(id) = &r.uuid {
                claimed.push(id);
            }
            let diffs = differences(&spec, r);
            match (&r.uuid, diffs.is_empty()) {
                (_, true) => Step::InStep,
                (Some(id), false) => Step::Update(id.clone(), with_tags(spec, r), diffs),
                (None, false) => {
                    Step::Cannot("the API key is read-only: it cannot change checks".into())
                }
            }
        }
    }
}

/// `spec` with the check's own other tags kept beside ours.
fn with_tags(mut spec: Spec, remote: &Remote) -> Spec {
    let mut tags: Vec<&str> = remote.tags.split_whitespace().collect();
    if !tags.contains(&spec.tags.as_str()) {
        tags.push(&spec.tags);
    }
    spec.tags = tags.join(" ");
    spec
}

/// Applies every line of `plan` that drifts, giving each with what came of it to `done` as it
/// comes; the failed pings of a check made, updated or found in step are history then (its
/// streak starts again).
pub fn apply_all(
    settings: &crate::settings::Settings,
    api: &Api,
    plan: &[Line],
    prune: bool,
    mut done: impl FnMut(&Line, Result<&'static str, ApiError>),
) {
    let reset = |who: &str| {
        if let Ok(name) = Name::new(who) {
            let _ = crate::state::reset_ping_streak(&settings.data_root, &name);
        }
    };
    for line in plan.iter().filter(|l| l.is_drift()) {
        let result = apply(api, line, prune);
        if result.is_ok() && matches!(line.step, Step::Create(_) | Step::Update(..)) {
            reset(&line.who);
        }
        done(line, result);
    }
    for line in plan.iter().filter(|l| matches!(l.step, Step::InStep)) {
        reset(&line.who);
    }
}

/// Carries out one line: what was done, or why not. Orphans are deleted only with `prune`.
pub fn apply(api: &Api, line: &Line, prune: bool) -> Result<&'static str, ApiError> {
    match &line.step {
        Step::Create(spec) => api.create(spec).map(|_| "created"),
        Step::Update(id, spec, _) => api.update(id, spec).map(|_| "updated"),
        Step::Orphan(id) if prune => api.delete(id).map(|_| "deleted"),
        Step::Orphan(_) => Ok("left (--prune deletes it)"),
        Step::InStep => Ok("nothing to do"),
        Step::Missing | Step::Cannot(_) => Ok("left as it is"),
    }
}

/// What the server has for an automation's check.
#[derive(Debug)]
pub enum Found<'a> {
    /// Its check.
    Ours(&'a Remote),
    /// A check with its slug that another namespace's tag claims, and that namespace.
    Foreign(&'a Remote, String),
    NotThere,
}

impl<'a> Found<'a> {
    /// The check, when it is this automation's.
    pub fn ours(self) -> Option<&'a Remote> {
        match self {
            Found::Ours(r) => Some(r),
            _ => None,
        }
    }
}

/// The check of `name` (in `namespace`) on the server: by its UUID when one is configured; else by
/// its slug, unless another namespace's tag claims that check; else, from before slugs held a
/// `_`, by its old slug when the check carries this namespace's tag (`sync` then moves it to the
/// new slug). Used by sync, pause, resume and status alike.
pub fn find<'a>(
    remote: &'a [Remote],
    namespace: &Namespace,
    name: &Name,
    watch: &Watch,
) -> Found<'a> {
    match watch {
        Watch::Uuid(id) => remote
            .iter()
            .find(|r| r.uuid.as_ref() == Some(id))
            .map_or(Found::NotThere, Found::Ours),
        Watch::Off => Found::NotThere,
        Watch::Slug(slug) => {
            if let Some(r) = remote.iter().find(|r| &r.slug == slug) {
                let owners = super::owners(&r.tags);
                return match owners.iter().find(|o| **o != namespace.as_str()) {
                    Some(other) if !owners.contains(&namespace.as_str()) => {
                        Found::Foreign(r, (*other).to_owned())
                    }
                    _ => Found::Ours(r),
                };
            }
            let legacy = super::legacy_slug(namespace, name);
            remote
                .iter()
                .find(|r| r.slug == legacy && r.has_tag(&super::tag(namespace)))
                .map_or(Found::NotThere, Found::Ours)
        }
    }
}
