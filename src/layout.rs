//! The data root's layout: every path under `<data root>/` is a method of [`Layout`], and no other
//! module joins the data root's segments (docs/ARCHITECTURE.md, "The data root"). Pure: it only
//! names places; what may be there, and how it is opened, is each owner's. [`PLACES`] lists them
//! all, once: the table in docs/ARCHITECTURE.md is checked against it, and every method against it.

use std::path::{Path, PathBuf};

use crate::names::Name;

/// The live segment's file name.
pub const LOG_FILE: &str = "runs.jsonl";

/// One place of the data root: its path (`<name>` an automation's, `<group>` a lock group's,
/// `<stamp>` a segment's), what it holds, and the module that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub path: &'static str,
    pub holds: &'static str,
    pub owner: &'static str,
}

const fn place(path: &'static str, holds: &'static str, owner: &'static str) -> Place {
    Place { path, holds, owner }
}

/// Every place of a data root, in the order docs/ARCHITECTURE.md shows them.
pub const PLACES: &[Place] = &[
    place("runs.jsonl", "the run log's live segment", "runlog"),
    place(
        "runs-<stamp>.jsonl",
        "a rotated segment of the run log",
        "runlog",
    ),
    place("runs.lock", "the lock every append takes", "runlog"),
    place(
        "state/head",
        "the chain's head: the last line's hash",
        "runlog",
    ),
    place(
        "state/reserve",
        "room kept to record a run on a full disk",
        "runlog",
    ),
    place(
        "state/index/",
        "the per-automation index of the log (a cache: rebuilt when unsure)",
        "runlog::index",
    ),
    place(
        "state/index/cursor",
        "how far the index has read",
        "runlog::index",
    ),
    place(
        "state/index/lock",
        "the index's writers take turns",
        "runlog::index",
    ),
    place(
        "state/index/<name>.idx",
        "where an automation's lines are",
        "runlog::index",
    ),
    place(
        "state/paused/<name>.json",
        "a pause, who made it and why",
        "state",
    ),
    place("state/stop-all.json", "the kill switch", "state"),
    place(
        "state/installed/<name>.json",
        "what was approved at install: the definition's and script's hashes",
        "state",
    ),
    place(
        "state/snoozed/<name>.json",
        "notifications held until a time",
        "state",
    ),
    place(
        "state/healthchecks/<name>.json",
        "what came of the Healthchecks pings",
        "state",
    ),
    place(
        "state/verdicts/<name>.json",
        "the last verdict notified, and news waiting",
        "notify",
    ),
    place("state/verdicts/.lock", "the looks take turns", "notify"),
    place(
        "state/after/<name>.json",
        "a chain request waiting for its unit to start",
        "runner::cause",
    ),
    place(
        "state/events/<name>.json",
        "the event firings of the last hour",
        "runner::cause",
    ),
    place(
        "state/by-hand/<name>.json",
        "a `run --unit` waiting for the unit start it made",
        "runner::cause",
    ),
    place(
        "state/replaced/<name>.json",
        "who replaced a running firing",
        "runner::overlap",
    ),
    place(
        "state/chains.json",
        "who follows whom (install, uninstall and units write it)",
        "state",
    ),
    place(
        "state/metrics.lock",
        "the metrics textfile's writers take turns",
        "metrics",
    ),
    place(
        "locks/<name>.lock",
        "one firing at a time; the run whose tree is alive; its keeper and runner",
        "locks",
    ),
    place("locks/<name>.queue", "the one queued firing", "locks"),
    place(
        "locks/groups/<group>.lock",
        "a lock group shared by automations",
        "locks",
    ),
    place("scratch/<name>/", "a run's scratch folder", "runner"),
    place(
        "scratch/<name>/tmp/",
        "the command's TMPDIR, emptied before each run",
        "runner",
    ),
    place(
        "scratch/<name>/result.json",
        "the result file the command may write",
        "runner",
    ),
    place(
        "scratch/<name>/http.jsonl",
        "the run's outside calls",
        "runner",
    ),
    place(
        "env/<name>.env",
        "private variables for scheduled runs",
        "runner::env",
    ),
    place(
        "secrets/<label>",
        "a secret of the file store, when chosen in secrets.toml",
        "keys::data_root",
    ),
    place(
        "launchd/<name>.log",
        "a LaunchAgent's stdout and stderr",
        "units",
    ),
    place("health.toml", "health thresholds", "health::thresholds"),
    place(
        "notify.toml",
        "notification channels and routes",
        "notify::settings",
    ),
    place(
        "healthchecks.toml",
        "the Healthchecks server and what it watches",
        "healthchecks::settings",
    ),
    place(
        "metrics.toml",
        "where the metrics textfile goes",
        "metrics::textfile",
    ),
    place(
        "secrets.toml",
        "where secrets are kept: the keychain (default) or files",
        "keys",
    ),
    place(
        "spaces.json",
        "the AnyType spaces automations may declare",
        "anytype::gate",
    ),
    place("dashboard.token", "the dashboard's token", "dashboard"),
    place(
        "metrics.token",
        "the bearer token of the dashboard's /metrics",
        "dashboard",
    ),
    place(
        "dashboard-open.html",
        "the private page that opens the dashboard",
        "dashboard",
    ),
];

/// A private settings file at the top of the data root: the one spelling of each file's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsFile {
    Health,
    Notify,
    Healthchecks,
    Metrics,
    Secrets,
    Spaces,
    DashboardToken,
    MetricsToken,
    DashboardOpen,
}

impl SettingsFile {
    /// Every settings file.
    pub const ALL: [Self; 9] = [
        Self::Health,
        Self::Notify,
        Self::Healthchecks,
        Self::Metrics,
        Self::Secrets,
        Self::Spaces,
        Self::DashboardToken,
        Self::MetricsToken,
        Self::DashboardOpen,
    ];

    /// Its file name.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Health => "health.toml",
            Self::Notify => "notify.toml",
            Self::Healthchecks => "healthchecks.toml",
            Self::Metrics => "metrics.toml",
            Self::Secrets => "secrets.toml",
            Self::Spaces => "spaces.json",
            Self::DashboardToken => "dashboard.token",
            Self::MetricsToken => "metrics.token",
            Self::DashboardOpen => "dashboard-open.html",
        }
    }
}

impl std::fmt::Display for SettingsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.file_name())
    }
}

/// The places of one data root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(data_root: impl Into<PathBuf>) -> Self {
        Self {
            root: data_root.into(),
        }
    }

    /// The data root itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The live segment of the run log.
    pub fn log(&self) -> PathBuf {
        self.root.join(LOG_FILE)
    }

    /// A segment of the run log by its file name (`runs-<stamp>.jsonl`), beside the live one.
    pub fn segment(&self, file_name: &str) -> PathBuf {
        self.root.join(file_name)
    }

    /// The lock every append to the run log takes.
    pub fn log_lock(&self) -> PathBuf {
        self.root.join("runs.lock")
    }

    /// `state/`: what the commands keep between runs.
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    /// The head of the run log's chain.
    pub fn head(&self) -> PathBuf {
        self.state().join("head")
    }

    /// The room kept for the run log on a full disk.
    pub fn reserve(&self) -> PathBuf {
        self.state().join("reserve")
    }

    /// The per-automation index of the run log.
    pub fn index(&self) -> PathBuf {
        self.state().join("index")
    }

    /// How far the index has read.
    pub fn index_cursor(&self) -> PathBuf {
        self.index().join("cursor")
    }

    /// The lock of the index's writers.
    pub fn index_lock(&self) -> PathBuf {
        self.index().join("lock")
    }

    /// `name`'s index file.
    pub fn index_file(&self, name: &Name) -> PathBuf {
        self.index().join(format!("{name}.idx"))
    }

    /// The lock of the metrics textfile's writers.
    pub fn metrics_lock(&self) -> PathBuf {
        self.state().join("metrics.lock")
    }

    /// The snoozes, one file each.
    pub fn snoozed_dir(&self) -> PathBuf {
        self.state().join("snoozed")
    }

    /// `name`'s snooze.
    pub fn snoozed(&self, name: &Name) -> PathBuf {
        self.snoozed_dir().join(format!("{name}.json"))
    }

    /// The pauses, one file each.
    pub fn paused_dir(&self) -> PathBuf {
        self.state().join("paused")
    }

    /// `name`'s pause.
    pub fn paused(&self, name: &Name) -> PathBuf {
        self.paused_dir().join(format!("{name}.json"))
    }

    /// The kill switch.
    pub fn stop_all(&self) -> PathBuf {
        self.state().join("stop-all.json")
    }

    /// The install records, one file each.
    pub fn installed_dir(&self) -> PathBuf {
        self.state().join("installed")
    }

    /// `name`'s install record.
    pub fn installed(&self, name: &Name) -> PathBuf {
        self.installed_dir().join(format!("{name}.json"))
    }

    /// Chain requests waiting for their automation's unit to start it, one file each.
    pub fn chain_requests(&self) -> PathBuf {
        self.state().join("after")
    }

    /// The chain request waiting for `name`: the upstream firing that should start it.
    pub fn chain_request(&self, name: &Name) -> PathBuf {
        self.chain_requests().join(format!("{name}.json"))
    }

    /// Who follows whom (`definition::trigger::ChainIndex`).
    pub fn chains_index(&self) -> PathBuf {
        self.state().join("chains.json")
    }

    /// The request a person's `run NAME --unit` leaves for the unit start it makes.
    pub fn unit_request(&self, name: &Name) -> PathBuf {
        self.state().join("by-hand").join(format!("{name}.json"))
    }

    /// When each automation's event-started firings (paths, chains) of the last hour started.
    pub fn event_firings_dir(&self) -> PathBuf {
        self.state().join("events")
    }

    /// When `name`'s event-started firings of the last hour started.
    pub fn event_firings(&self, name: &Name) -> PathBuf {
        self.event_firings_dir().join(format!("{name}.json"))
    }

    /// What came of each automation's Healthchecks pings.
    pub fn pings_dir(&self) -> PathBuf {
        self.state().join("healthchecks")
    }

    /// What came of `name`'s last pings.
    pub fn pings(&self, name: &Name) -> PathBuf {
        self.pings_dir().join(format!("{name}.json"))
    }

    /// The last verdicts notified.
    pub fn verdicts(&self) -> PathBuf {
        self.state().join("verdicts")
    }

    /// The last verdict notified of `name`.
    pub fn verdict(&self, name: &Name) -> PathBuf {
        self.verdicts().join(format!("{name}.json"))
    }

    /// The lock of one look at the verdicts at a time.
    pub fn verdicts_lock(&self) -> PathBuf {
        self.verdicts().join(".lock")
    }

    /// The run locks.
    pub fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// `name`'s run lock.
    pub fn lock(&self, name: &Name) -> PathBuf {
        self.locks().join(format!("{name}.lock"))
    }

    /// The one place a firing of `name` waits in (`overlap = "queue"`).
    pub fn queue_lock(&self, name: &Name) -> PathBuf {
        self.locks().join(format!("{name}.queue"))
    }

    /// The lock of the group `group` (`lock = "…"` in definitions).
    pub fn group_lock(&self, group: &Name) -> PathBuf {
        self.locks().join("groups").join(format!("{group}.lock"))
    }

    /// The note a replacing firing leaves for the one it stops (`overlap = "replace"`).
    pub fn replaced_note(&self, name: &Name) -> PathBuf {
        self.state().join("replaced").join(format!("{name}.json"))
    }

    /// Every automation's scratch folder.
    pub fn scratch_dir(&self) -> PathBuf {
        self.root.join("scratch")
    }

    /// `name`'s scratch folder.
    pub fn scratch(&self, name: &Name) -> PathBuf {
        self.scratch_dir().join(name.as_str())
    }

    /// `name`'s run's TMPDIR.
    pub fn scratch_tmp(&self, name: &Name) -> PathBuf {
        self.scratch(name).join("tmp")
    }

    /// The result file of `name`'s run.
    pub fn result_file(&self, name: &Name) -> PathBuf {
        self.scratch(name).join("result.json")
    }

    /// The HTTP log of `name`'s run.
    pub fn http_log(&self, name: &Name) -> PathBuf {
        self.scratch(name).join("http.jsonl")
    }

    /// `name`'s private variables.
    pub fn env_file(&self, name: &Name) -> PathBuf {
        self.root.join("env").join(format!("{name}.env"))
    }

    /// A private settings file.
    pub fn settings_file(&self, file: SettingsFile) -> PathBuf {
        self.root.join(file.file_name())
    }

    /// The file store's folder of secrets.
    pub fn secrets_dir(&self) -> PathBuf {
        self.root.join("secrets")
    }

    /// Where LaunchAgents write their output, one file per automation.
    pub fn launchd_logs(&self) -> PathBuf {
        self.root.join("launchd")
    }

    /// `name`'s LaunchAgent's stdout and stderr.
    pub fn launchd_log(&self, name: &Name) -> PathBuf {
        self.launchd_logs().join(format!("{name}.log"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table docs/ARCHITECTURE.md shows, as [`PLACES`] renders it.
    fn rendered() -> String {
        let mut t = String::from("| path | what it holds | owner |\n|---|---|---|\n");
        for p in PLACES {
            t.push_str(&format!("| `{}` | {} | `{}` |\n", p.path, p.holds, p.owner));
        }
        t
    }

    /// Whether `path` is an instance of `pattern`, where `<…>` stands for one step's worth of
    /// characters.
    fn matches(pattern: &str, path: &str) -> bool {
        match pattern.find('<') {
            None => pattern == path,
            Some(open) => {
                let Some(close) = pattern[open..].find('>').map(|c| open + c) else {
                    return false;
                };
                let (before, after) = (&pattern[..open], &pattern[close + 1..]);
                let Some(rest) = path.strip_prefix(before) else {
                    return false;
                };
                (1..=rest.len()).any(|n| !rest[..n].contains('/') && matches(after, &rest[n..]))
            }
        }
    }

    #[test]
    fn the_docs_table_is_the_layouts() {
        let doc = include_str!("../docs/ARCHITECTURE.md");
        let begin =
            "<!-- the data root: generated from src/layout.rs PLACES, checked by its test -->\n";
        let end = "<!-- end of the data root's table -->";
        let at = doc
            .find(begin)
            .expect("docs/ARCHITECTURE.md has the table's begin marker");
        let table = &doc[at + begin.len()..];
        let table = &table[..table.find(end).expect("and its end marker")];
        assert_eq!(
            table,
            rendered(),
            "docs/ARCHITECTURE.md's data-root table differs from layout.rs's PLACES; paste this:\n{}",
            rendered()
        );
    }

    #[test]
    fn every_place_a_method_names_is_listed() {
        let l = Layout::new("/d");
        let n = Name::new("x").unwrap();
        let paths = [
            l.log(),
            l.segment("runs-20260101T000000Z.jsonl"),
            l.log_lock(),
            l.head(),
            l.reserve(),
            l.index_cursor(),
            l.index_lock(),
            l.index_file(&n),
            l.metrics_lock(),
            l.snoozed(&n),
            l.paused(&n),
            l.stop_all(),
            l.installed(&n),
            l.chain_request(&n),
            l.chains_index(),
            l.unit_request(&n),
            l.event_firings(&n),
            l.pings(&n),
            l.verdict(&n),
            l.verdicts_lock(),
            l.lock(&n),
            l.queue_lock(&n),
            l.group_lock(&n),
            l.replaced_note(&n),
            l.result_file(&n),
            l.http_log(&n),
            l.env_file(&n),
            l.secrets_dir().join("local.automations.x"),
            l.launchd_log(&n),
        ];
        let settings = SettingsFile::ALL.map(|f| l.settings_file(f));
        let folders = [l.index(), l.scratch(&n), l.scratch_tmp(&n)];
        let rel = |p: &PathBuf| p.strip_prefix("/d").unwrap().to_str().unwrap().to_owned();
        let folders = folders.iter().map(|p| rel(p) + "/");
        for rel in paths.iter().chain(&settings).map(rel).chain(folders) {
            let rel = rel.as_str();
            assert!(
                PLACES.iter().any(|place| matches(place.path, rel)),
                "{rel} is not in PLACES"
            );
        }
        // And the matcher is no yes-man.
        assert!(!matches("locks/<name>.lock", "locks/groups/x.lock"));
        assert!(matches("locks/groups/<group>.lock", "locks/groups/x.lock"));
    }
}
