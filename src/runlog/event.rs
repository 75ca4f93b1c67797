//! The run log's events: one JSON object per line, its fields as the module doc of `runlog`
//! specifies them. Only types and the words they are written with; reading and writing lines is
//! the other files' job.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// A person, from the command line.
    Manual,
    /// launchd or systemd.
    Schedule,
    /// The dashboard.
    Dashboard,
    /// A watched file or folder changed (the `[trigger]` table's `paths`).
    Path,
    /// Another automation's firing ended (`after_success` / `after_failure`).
    After,
    /// A person, through the installed unit (`run NAME --unit`): as the timer would run it, past
    /// the slot guard.
    Unit,
    /// `automations backfill`: one past slot of its schedule, run on purpose.
    Backfill,
}

impl Trigger {
    /// Every trigger.
    pub const ALL: [Trigger; 7] = [
        Trigger::Manual,
        Trigger::Schedule,
        Trigger::Dashboard,
        Trigger::Path,
        Trigger::After,
        Trigger::Unit,
        Trigger::Backfill,
    ];

    /// The trigger `word` names (the log's word for it).
    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == word)
    }

    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Schedule => "schedule",
            Trigger::Dashboard => "dashboard",
            Trigger::Path => "path",
            Trigger::After => "after",
            Trigger::Unit => "unit",
            Trigger::Backfill => "backfill",
        }
    }

    /// Whether it runs as its installed unit runs it: the service manager started it (a schedule,
    /// a watched path, a chain, or a person's `run --unit`). Such a firing runs only what was
    /// installed, under what the unit applies, retries, and is recorded even when its definition
    /// is broken.
    pub fn unattended(self) -> bool {
        matches!(
            self,
            Trigger::Schedule | Trigger::Path | Trigger::After | Trigger::Unit
        )
    }
}

/// The firing a chained one follows: the upstream automation, its run and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub name: String,
    pub run: String,
    pub outcome: Outcome,
}

/// How a run that started ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Timeout,
    Stopped,
}

impl Outcome {
    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
            Outcome::Stopped => "stopped",
        }
    }
}

/// Why a firing did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Paused,
    Stopped,
    AlreadyRunning,
    SlotDone,
    /// A scheduled firing whose definition differs from the one installed (see `pins`).
    DefinitionChanged,
    /// A scheduled firing whose pinned script differs from the one installed.
    ScriptChanged,
    /// A scheduled firing with no install record (with pins) to check against; or a chained one
    /// whose automation is not installed, so its unit cannot be started.
    NotInstalled,
    /// An event-started firing past its automation's `max_per_hour`.
    RateLimited,
    /// `overlap = "queue"`: a firing already waits for the running one.
    AlreadyQueued,
    /// `catch_up = "none"`: its slot passed while the machine slept or was off.
    MissedSlot,
}

impl SkipReason {
    /// The word used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Paused => "paused",
            SkipReason::Stopped => "stopped",
            SkipReason::AlreadyRunning => "already_running",
            SkipReason::SlotDone => "slot_done",
            SkipReason::DefinitionChanged => "definition_changed",
            SkipReason::ScriptChanged => "script_changed",
            SkipReason::NotInstalled => "not_installed",
            SkipReason::RateLimited => "rate_limited",
            SkipReason::AlreadyQueued => "already_queued",
            SkipReason::MissedSlot => "missed_slot",
        }
    }
}

/// Who paused or resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Hand,
    Auto,
}

/// A failure class and its detail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A fixed word: `exit_status`, `timeout`, `definition_invalid`, …
    pub class: String,
    /// One line for people; never holds a secret.
    pub detail: String,
}

/// Bytes of output dropped before the tails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub stdout: u64,
    pub stderr: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub run: String,
    pub trigger: Trigger,
    pub pid: u32,
    pub definition: Option<String>,
    pub clock: Clock,
    /// How long a scheduled firing waited before it ran (its `jitter_seconds` delay for the slot);
    /// absent when it did not wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// Which attempt of a firing that retries this is (1, 2, …); absent when it does not retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The first attempt's run id, on the second attempt and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<String>,
    /// When the firing before it was killed with its keeper (its tree left running): that run,
    /// and how many of its processes this firing ended before it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<EndedRun>,
    /// A path-started firing: the paths whose change started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// A chained firing: the firing it follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Upstream>,
    /// A firing of a schedule on the clock: the slot it stands for (RFC 3339 with the machine's
    /// offset), as its command's `AUTOMATION_SLOT` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// Processes of an earlier, killed firing ended by this one before it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedRun {
    pub run: String,
    pub processes: u32,
}

impl Started {
    /// The run id of the firing this run is an attempt of (its own, unless it is a retry).
    pub fn firing(&self) -> &str {
        self.first_run.as_deref().unwrap_or(&self.run)
    }
}

impl Finished {
    /// The run id of the firing this run is an attempt of (its own, unless it is a retry).
    pub fn firing(&self) -> &str {
        self.first_run.as_deref().unwrap_or(&self.run)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub run: String,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub error: Option<ErrorInfo>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub dropped: Dropped,
    pub facts: BTreeMap<String, u64>,
    pub headline: Option<String>,
    /// The run's outside calls (see `http::log`); `null` when it made none.
    pub http: Option<Box<crate::http::log::Summary>>,
    pub leftover_processes: u32,
    pub clock: Clock,
    /// What started the run and when (its `started` line's `trigger` and `at`), so a reader of
    /// the end needs not read the start (absent in lines written before they were recorded).
    #[serde(default)]
    pub trigger: Option<Trigger>,
    #[serde(default)]
    pub started_at: Option<String>,
    /// Which attempt of a firing that retries this is, and the first attempt's run id (from the
    /// second on), as its `started` says: a reader that reads only ends can group attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<String>,
    /// A run stopped by a firing with `overlap = "replace"` (class `replaced`): that firing's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
    /// The slot its firing stood for, as its `started` says (a reader of ends knows which slot a
    /// caught-up or backfilled run answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub trigger: Trigger,
    pub reason: SkipReason,
    /// A chained firing's: the firing it would have followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Upstream>,
    /// Busy because of its lock group: the group, and the automation that held it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<HeldBy>,
    /// A firing of a schedule on the clock: the slot it stood for (as `started` has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// Which automation held a lock group when a firing met it busy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBy {
    pub lock: String,
    pub name: String,
}

impl HeldBy {
    /// Who held the lock group, as said of a skip of `skipped`: the holder's name, or "its own
    /// earlier run" when the holder is the very automation that was skipped.
    pub fn holder_words(&self, skipped: &str) -> String {
        if self.name == skipped {
            "its own earlier run".to_owned()
        } else {
            self.name.clone()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    pub by: By,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    pub by: By,
}

/// A person said "fixed" (`automations ack`, the dashboard's Acknowledge): health's window rules
/// count runs from here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    pub by: By,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A person held an automation's notifications until a time (`automations snooze`); its runs go
/// on and are recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snoozed {
    pub by: By,
    /// Until when (RFC 3339 UTC).
    pub until: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A snooze ended before its time (`automations unsnooze`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsnoozed {
    pub by: By,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotated {
    pub previous: String,
    pub tail: String,
    /// The rotated segments retention deleted at this rotation (absent in lines written before it
    /// was recorded), so `verify` can tell a seam retention made from history deleted by hand.
    #[serde(default)]
    pub pruned: Option<Vec<String>>,
}

/// Where the live segment stood: its line count, size and last line's hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub lines: u64,
    pub bytes: u64,
    pub hash: String,
}

/// The log did not end where its head (`state/head`) said it did: its tail was cut or rewritten
/// between two appends. Written by the next append, so the cut stays in the chain for good.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Break {
    /// What the head recorded.
    pub expected: Extent,
    /// What the live segment held.
    pub found: Extent,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAll {
    pub reason: String,
    /// Running runs that were sent SIGTERM.
    pub stopped: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeAll {}

/// The event-specific part of a line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Started(Started),
    Finished(Finished),
    Skipped(Skipped),
    Paused(Paused),
    Resumed(Resumed),
    Ack(Ack),
    Snoozed(Snoozed),
    Unsnoozed(Unsnoozed),
    StopAll(StopAll),
    ResumeAll(ResumeAll),
    Rotated(Rotated),
    Break(Break),
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub v: u32,
    #[serde(flatten)]
    pub event: Event,
    pub name: String,
    pub at: String,
    pub prev: String,
}

impl Record {
    /// `at` parsed; `None` when a line carries a malformed time.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        parse_stamp(&self.at)
    }
}

/// RFC 3339 UTC with milliseconds, as every `at` is written.
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time as [`stamp`] writes it (any RFC 3339 time), in UTC; `None` when malformed.
pub fn parse_stamp(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
