//! The data root's layout: every path under `<data root>/` is a method of [`Layout`], and no other
//! module joins the data root's segments (docs/ARCHITECTURE.md, "The data root"). Pure: it only
//! names places; what may be there, and how it is opened, is each owner's.
//!
//! ```text
//! <data root>/
//!   runs.jsonl, runs-<stamp>.jsonl   the run log and its rotated segments     runlog
//!   runs.lock                        every append's lock                      runlog
//!   state/head, state/reserve        the chain's head; room kept for a full disk  runlog
//!   state/index/                     the per-automation index                 runlog::index
//!   state/paused/<name>.json, state/stop-all.json, state/installed/<name>.json  state
//!   state/snoozed/<name>.json        notifications held until a time          state
//!   state/healthchecks/<name>.json   what came of the pings                   state
//!   state/verdicts/                  the last verdicts notified               notify
//!   locks/<name>.lock                one run at a time                        locks
//!   locks/<name>.queue, locks/groups/<group>.lock  the one waiter; shared lock groups  locks
//!   state/replaced/<name>.json       who replaced a running firing            runner::overlap
//!   state/by-hand/<name>.json        a `run --unit` waiting for its unit start runner::cause
//!   state/chains.json                who follows whom (written by install, uninstall, units)  state
//!   scratch/<name>/                  a run's TMPDIR (tmp/), result file, HTTP log  runner
//!   env/<name>.env                   private variables for scheduled runs     runner
//!   state/metrics.lock               the metrics textfile's writers            metrics
//!   health.toml, notify.toml, healthchecks.toml, metrics.toml, spaces.json   private settings
//!   dashboard.token, dashboard-open.html  the dashboard's token and its opening page
//!   metrics.token                    the bearer token of the dashboard's /metrics  dashboard
//!   launchd/<name>.log               a LaunchAgent's stdout and stderr        units
//! ```

use std::path::{Path, PathBuf};

use crate::names::Name;

/// The live segment's file name.
pub const LOG_FILE: &str = "runs.jsonl";

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

    /// A private settings file by its name (`health.toml`, `notify.toml`, …).
    pub fn settings_file(&self, file_name: &str) -> PathBuf {
        self.root.join(file_name)
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
