//! Health thresholds: the defaults of docs/health.md and `<data root>/health.toml`, parsed strictly.
//!
//! ```toml
//! [defaults]                  # every automation
//! window = 20
//! [automations.task-digest]   # one automation; what it leaves out comes from [defaults]
//! headline_check = true
//! auto_pause_after = 5
//! ```
//!
//! An unknown key, a value of the wrong type or out of its range is refused by name (exit 2), like
//! a definition. The file is private (0600) and read under the data root's rules.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Value;

use crate::layout::SettingsFile;
use crate::names::Name;
use crate::settings::file::{self, Refused};

/// The file in the data root.
pub const FILE: SettingsFile = SettingsFile::Health;

/// What "healthy" means for one automation.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Runs the success rate (and slow, HTTP) rules look at.
    pub window: usize,
    /// Below this share of ok runs in the window: degraded.
    pub min_success_rate: f64,
    /// Runs needed before the rate and slow rules apply.
    pub min_runs: usize,
    /// Interval jobs are stale after this many intervals (awake time) without a success.
    pub stale_intervals: u32,
    /// Daily jobs are stale after this many hours (awake time) without a success.
    pub stale_daily_hours: u32,
    /// The latest run took more than this many times the median success: slow.
    pub slow_factor: f64,
    /// ...and at least this many seconds: a run of a second that took three is not worth a
    /// message.
    pub slow_min_seconds: u32,
    /// More missed days than this in the window: degraded.
    pub missed_days_max: u32,
    /// The days the missed-days rule looks back.
    pub missed_days_window: u32,
    /// Opt in to the headline rule.
    pub headline_check: bool,
    /// Successes needed before the headline rule applies.
    pub headline_min_successes: usize,
    /// A headline this many times its usual value is a large rise.
    pub headline_rise_factor: f64,
    /// A class of outside calls at this share of the recent calls or more: degraded.
    pub http_share: f64,
    /// Failures in a row that pause an outbound automation (and degrade a local one).
    pub auto_pause_after: u32,
    /// A success in less than this share of the usual (median) success: too short.
    pub short_factor: f64,
    /// Successes needed (since the last ack) before the too-short rule applies.
    pub short_min_successes: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            window: 20,
            min_success_rate: 0.8,
            min_runs: 3,
            stale_intervals: 3,
            stale_daily_hours: 30,
            slow_factor: 3.0,
            slow_min_seconds: 5,
            missed_days_max: 1,
            missed_days_window: 14,
            headline_check: false,
            headline_min_successes: 8,
            headline_rise_factor: 5.0,
            http_share: 0.25,
            auto_pause_after: 3,
            short_factor: 0.2,
            short_min_successes: 10,
        }
    }
}

/// The defaults and the per-automation settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThresholdSet {
    pub defaults: Thresholds,
    pub per_name: BTreeMap<String, Thresholds>,
}

impl ThresholdSet {
    /// The thresholds of `name`.
    pub fn of(&self, name: &str) -> &Thresholds {
        self.per_name.get(name).unwrap_or(&self.defaults)
    }
}

/// Reads `<data root>/health.toml`; none is the defaults.
pub fn load(data_root: &Path) -> Result<ThresholdSet, Refused> {
    Ok(file::load(data_root, FILE, parse_table)?.unwrap_or_default())
}

/// Parses the text of `health.toml`.
pub fn parse(text: &str) -> Result<ThresholdSet, Vec<String>> {
    parse_table(&file::table(text)?)
}

fn parse_table(table: &toml::Table) -> Result<ThresholdSet, Vec<String>> {
    let mut problems = Vec::new();
    let mut set = ThresholdSet::default();
    let mut per_name_raw = Vec::new();
    for (key, value) in table {
        match (key.as_str(), value) {
            ("defaults", Value::Table(t)) => {
                set.defaults = apply(&Thresholds::default(), t, "defaults", &mut problems)
            }
            ("automations", Value::Table(t)) => {
                for (name, v) in t {
                    match (Name::new(name), v) {
                        (Ok(_), Value::Table(t)) => per_name_raw.push((name.clone(), t.clone())),
                        (Err(_), _) => {
                            problems.push(format!("automations.{name}: not an automation name"))
                        }
                        (Ok(_), _) => {
                            problems.push(format!("automations.{name}: expected a table"))
                        }
                    }
                }
            }
            ("defaults" | "automations", _) => problems.push(format!("{key}: expected a table")),
            _ => problems.push(format!("{key}: unknown key (known: defaults, automations)")),
        }
    }
    for (name, t) in per_name_raw {
        let th = apply(
            &set.defaults,
            &t,
            &format!("automations.{name}"),
            &mut problems,
        );
        set.per_name.insert(name, th);
    }
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(problems)
    }
}

/// A factor or share of `key`, in its range; else the problem, said under `name`.
fn ratio(key: &str, v: &Value, name: &str, problems: &mut Vec<String>) -> Option<f64> {
    let (lo, hi, lo_open) = match key {
        "min_success_rate" => (0.0, 1.0, false),
        "http_share" | "short_factor" => (0.0, 1.0, true),
        _ => (1.0, 1000.0, true),
    };
    let f = match v {
        Value::Float(f) => *f,
        Value::Integer(i) => *i as f64,
        _ => {
            problems.push(format!("{name}: expected a number"));
            return None;
        }
    };
    if f <= hi && (f > lo || (!lo_open && f == lo)) {
        return Some(f);
    }
    problems.push(format!(
        "{name}: {f} is out of range {}{lo}..={hi}",
        if lo_open { "more than " } else { "" }
    ));
    None
}

/// `base` with the keys of `t` applied; problems named `where.key`.
fn apply(base: &Thresholds, t: &toml::Table, at: &str, problems: &mut Vec<String>) -> Thresholds {
    let mut th = base.clone();
    for (key, v) in t {
        let name = format!("{at}.{key}");
        let mut int = |lo: i64, hi: i64| -> Option<i64> {
            match v {
                Value::Integer(i) if (lo..=hi).contains(i) => Some(*i),
                Value::Integer(i) => {
                    problems.push(format!("{name}: {i} is out of range {lo}..={hi}"));
                    None
                }
                _ => {
                    problems.push(format!("{name}: expected an integer"));
                    None
                }
            }
        };
        match key.as_str() {
            "window" => int(1, 1000).map(|i| th.window = i as usize),
            "min_runs" => int(1, 1000).map(|i| th.min_runs = i as usize),
            "stale_intervals" => int(1, 10_000).map(|i| th.stale_intervals = i as u32),
            "stale_daily_hours" => int(1, 24 * 366).map(|i| th.stale_daily_hours = i as u32),
            "slow_min_seconds" => int(0, 86_400).map(|i| th.slow_min_seconds = i as u32),
            "missed_days_max" => int(0, 366).map(|i| th.missed_days_max = i as u32),
            "missed_days_window" => int(1, 366).map(|i| th.missed_days_window = i as u32),
            "headline_min_successes" => {
                int(2, 1000).map(|i| th.headline_min_successes = i as usize)
            }
            "auto_pause_after" => int(1, 1000).map(|i| th.auto_pause_after = i as u32),
            "short_min_successes" => int(2, 1000).map(|i| th.short_min_successes = i as usize),
            "min_success_rate"
            | "slow_factor"
            | "http_share"
            | "headline_rise_factor"
            | "short_factor" => {
                if let Some(f) = ratio(key, v, &name, problems) {
                    match key.as_str() {
                        "min_success_rate" => th.min_success_rate = f,
                        "slow_factor" => th.slow_factor = f,
                        "http_share" => th.http_share = f,
                        "short_factor" => th.short_factor = f,
                        _ => th.headline_rise_factor = f,
                    }
                }
                Some(())
            }
            "headline_check" => {
                match v {
                    Value::Boolean(b) => th.headline_check = *b,
                    _ => problems.push(format!("{name}: expected true or false")),
                }
                Some(())
            }
            _ => {
                problems.push(format!("{name}: unknown key"));
                Some(())
            }
        };
    }
    if th.min_runs > th.window {
        problems.push(format!(
            "{at}: min_runs ({}) is more than window ({})",
            th.min_runs, th.window
        ));
    }
    th
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_per_automation_and_every_problem_named() {
        let set = parse(
            "[defaults]\nwindow = 30\n[automations.digest]\nheadline_check = true\nmin_success_rate = 0.5\n",
        )
        .unwrap();
        assert_eq!(set.defaults.window, 30);
        assert_eq!(set.of("digest").window, 30);
        assert!(set.of("digest").headline_check);
        assert_eq!(set.of("other"), &set.defaults);
        let e = parse(
            "[defaults]\nwindow = 0\nwindoww = 3\nslow_factor = 0.5\nhttp_share = \"a\"\n[automations.Bad]\nx = 1\n[automations.ok]\nnope = 1\n[extra]\n",
        )
        .unwrap_err();
        for want in [
            "defaults.window: 0 is out of range 1..=1000",
            "defaults.windoww: unknown key",
            "defaults.slow_factor: 0.5 is out of range",
            "defaults.http_share: expected a number",
            "automations.Bad: not an automation name",
            "automations.ok.nope: unknown key",
            "extra: unknown key",
        ] {
            assert!(
                e.iter().any(|p| p.contains(want)),
                "{want} missing from {e:?}"
            );
        }
    }
}
