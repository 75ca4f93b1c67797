//! Strict schemas of the JSON documents the binary prints; unknown fields fail the tests.

#![allow(dead_code)]

use serde::Deserialize;

use crate::harness::{Sandbox, assert_code};

/// `list --json`, parsed strictly.
pub fn list_doc(sb: &Sandbox) -> ListDoc {
    let o = sb.run(["list", "--json"]);
    assert_code(&o, 0);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("list --json: {e}\n{}", String::from_utf8_lossy(&o.stdout)))
}

/// The `list --json` format, version 1, deserialized strictly.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDoc {
    pub version: u32,
    pub stopped: Option<StopJson>,
    pub automations: Vec<ListEntry>,
    pub invalid: Vec<Problem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnoozedJson {
    pub until: String,
    pub reason: Option<String>,
    pub at: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListEntry {
    pub name: String,
    pub label: String,
    pub schedule: Option<ScheduleJson>,
    pub schedule_words: String,
    pub outbound: bool,
    pub description: Option<String>,
    pub paused: Option<PausedJson>,
    pub snoozed: Option<SnoozedJson>,
    /// ", snoozed until 2026-12-04 14:30" (local time) while snoozed, else "".
    pub snoozed_words: String,
    pub state_problem: Option<String>,
    pub running: bool,
    pub last_run: Option<LastRunJson>,
    /// `yes`, `no`, `changed`; null for a manual-only automation.
    pub installed: Option<String>,
    pub next: Option<String>,
    pub next_words: Option<String>,
    /// `installed` or `definition`.
    pub next_from: Option<String>,
    /// The most a scheduled firing waits (`jitter_seconds`); 0 = none.
    pub jitter_seconds: u32,
    /// The wait included in `next`, in milliseconds.
    pub next_jitter_ms: Option<i64>,
    /// The repository file its command runs (what an install pins), if any.
    pub script: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopJson {
    pub reason: String,
    pub at: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PausedJson {
    pub by: String,
    pub reason: String,
    pub at: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastRunJson {
    pub run: String,
    pub at: String,
    pub trigger: String,
    pub status: String,
    pub duration_ms: Option<u64>,
    pub headline: Option<u64>,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "snake_case")]
pub enum ScheduleJson {
    EveryMinutes {
        every_minutes: u32,
        /// Present when not 0.
        offset_minutes: Option<u32>,
    },
    DailyAt {
        /// One `HH:MM` as a string, several as a list.
        daily_at: serde_json::Value,
        weekdays: Vec<String>,
        /// Present when not empty.
        days_of_month: Option<Vec<u8>>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub file: String,
    pub key: String,
    pub message: String,
}
