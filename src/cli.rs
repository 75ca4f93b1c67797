//! The command line: every command, flag and its `--help` text, and nothing else.
//!
//! Doc comments here are the `--help` users read. Dispatch lives in `lib.rs`; this module must never
//! do I/O or resolve settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::names::Name;
use crate::runlog::Trigger;

/// Turns automations/<name>.toml definitions into OS-native scheduled units and runs every firing
/// safely: lock, pause state, clean environment, whole-tree timeout, redacted output, hash-chained
/// run log.
#[derive(Debug, Parser)]
#[command(
    name = "automations",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(
    after_help = "Exit codes: 0 fine, 1 not fine (failed run, drift, check failed), \
                        2 bad input (invocation or definitions), 3 environment unusable."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Where things are; each also comes from an environment variable, and otherwise a default.
#[derive(Debug, Args, Clone, Default)]
pub struct Global {
    /// Repository root holding automations/ [env: AUTOMATIONS_ROOT] [default: nearest ancestor of
    /// the working directory that holds automations/]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Namespace of labels, local.<namespace>.<name> [env: AUTOMATIONS_NAMESPACE] [default:
    /// automations]
    #[arg(long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Private data root: run log, state, locks, env files [env: AUTOMATIONS_DATA_ROOT] [default:
    /// $XDG_STATE_HOME/automations/<ns> on Linux, ~/Library/Application Support/automations/<ns>
    /// on macOS]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_root: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every definition and report every problem at once.
    ///
    /// Each problem is one line: automations/<file>: <key>: <what is wrong>.
    /// Exits 2 when any definition is invalid.
    ///
    /// Example: automations validate
    Validate,

    /// List the automations: schedule in words, outbound, description.
    ///
    /// Example: automations list --json
    List {
        /// Print a JSON document (format version 1) instead of a table.
        #[arg(long)]
        json: bool,
    },

    /// Run one automation now: the same runner every scheduled firing executes.
    ///
    /// Takes the lock, checks pause and the kill switch, gives the command a clean environment,
    /// enforces the timeout on its whole process tree, keeps a redacted tail of its output and
    /// appends started/finished to the run log. A manual run prints one summary line; a scheduled
    /// one prints only when something went wrong. Exits 0 when ok or skipped, 1 when the run
    /// failed, timed out or was stopped, 2 when the invocation or a manual run's definition is
    /// invalid.
    ///
    /// With --unit, the installed unit runs it instead, exactly as its timer would (its pins, its
    /// sandbox and limits, past the daily slot guard), and this waits for it and prints its summary
    /// line: how to try what only the unit applies.
    ///
    /// Example: automations run heartbeat
    Run {
        /// The automation (automations/<NAME>.toml).
        name: Name,
        /// What started this run.
        #[arg(long, default_value = "manual", value_parser = trigger_parser())]
        trigger: Trigger,
        /// Start its installed unit now and wait for the run (recorded with trigger `unit`).
        #[arg(long, conflicts_with = "trigger")]
        unit: bool,
        /// The slot of its schedule this firing stands for (RFC 3339): how a catch-up of a
        /// missed slot and `backfill` run one slot each.
        #[arg(long, hide = true, value_parser = slot_parser, conflicts_with = "unit")]
        slot: Option<chrono::DateTime<chrono::Utc>>,
    },

    /// Report facts from inside a command: writes the file named by $AUTOMATION_RESULT.
    ///
    /// For shell scripts run by `automations run`. Facts are name=count pairs (names
    /// ^[a-z][a-z0-9_]{0,39}$, counts 0..=2^53); calls add up, later values win.
    ///
    /// Example: "$AUTOMATION_BIN" result beats=1 --headline beats
    Result {
        /// name=count pairs.
        #[arg(value_name = "NAME=COUNT")]
        facts: Vec<String>,
        /// Which fact is the headline count.
        #[arg(long, value_name = "NAME")]
        headline: Option<String>,
    },

    /// Recent runs, newest first (never their output; see `show`).
    ///
    /// Example: automations runs heartbeat -n 5
    Runs {
        /// Only this automation.
        name: Option<Name>,
        /// How many runs.
        #[arg(short = 'n', long = "limit", default_value_t = 20,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        limit: usize,
        /// Print JSON (format version 1).
        #[arg(long)]
        json: bool,
    },

    /// One run in full, output tails included: a run id, or an automation's latest run.
    ///
    /// RUN is tried as a run id, then as a unique prefix of one, then as an automation name (its
    /// latest run; with --failed, its latest run that did not end ok). A prefix shared by several
    /// ids lists them. A run id or prefix always wins over a name (ids start with a date, so only a
    /// name such as "2026" could be taken for one; `automations runs NAME` lists its runs).
    ///
    /// Example: automations show 20261129T204512.123Z-3f9a1c
    /// Example: automations show backup --failed
    Show {
        /// A run id, a unique prefix of one, or an automation name.
        run: String,
        /// With an automation name: its latest run that failed, timed out, was stopped or was
        /// interrupted.
        #[arg(long)]
        failed: bool,
        /// Print the run's log events as JSON.
        #[arg(long)]
        json: bool,
    },

    /// Is each automation doing its job? A verdict per automation, with every reason.
    ///
    /// Computed from the run log each time: the success rate of recent runs (interrupted runs
    /// named), the age of the last success in awake time, slow runs, missed days of daily jobs,
    /// headline changes (opt-in), failing outside calls, failure streaks, automatic pauses,
    /// invalid definitions and units that fire without one. Thresholds: <data root>/health.toml.
    /// Prints names, counts and class names, never a run's output. Exits 1 when any automation is
    /// degraded, 2 when health.toml is invalid.
    ///
    /// Example: automations health --json
    Health {
        /// Only this automation.
        name: Option<Name>,
        /// Print {"version": 1, "degraded", "automations": [{name, verdict, reasons, figures}]}.
        #[arg(long)]
        json: bool,
    },

    /// What Prometheus scrapes: each automation's last run, last success, next run, firings by
    /// outcome, verdict and pause, in the Prometheus text format (or OpenMetrics).
    ///
    /// Read like `health` (the same verdicts). Families: automations_last_run_timestamp_seconds,
    /// automations_last_success_timestamp_seconds, automations_last_run_duration_seconds,
    /// automations_next_run_timestamp_seconds, automations_stale_after_seconds,
    /// automations_runs_total{outcome},
    /// automations_verdict{verdict}, automations_paused,
    /// automations_snoozed_until_timestamp_seconds, automations_installed_timestamp_seconds,
    /// automations_healthchecks_ping_failures, automations_stop_all, automations_info. Never a
    /// run's output. For node_exporter's textfile collector, name the file in
    /// <data root>/metrics.toml (`textfile = "/path/automations.prom"`):
    /// every firing and every `health` rewrite it. The dashboard serves the same at /metrics
    /// (docs/metrics.md).
    ///
    /// Example: automations metrics --openmetrics
    Metrics {
        /// OpenMetrics 1.0 (`_created` with each counter, `# EOF` at the end) instead of the
        /// Prometheus text format.
        #[arg(long)]
        openmetrics: bool,
    },

    /// What fires in the hours ahead: one row per automation, each firing of its installed
    /// schedule at the minute it starts (its slot, later by its jitter), and the busiest minutes,
    /// where firings pile up.
    ///
    /// Times are this machine's. A paused or uninstalled automation fires nothing; an interval
    /// of awake time has only its next firing (sleep moves it). The dashboard draws the same,
    /// beside the last 24 hours (docs/dashboard.md).
    ///
    /// Example: automations timeline --hours 12
    Timeline {
        /// How many hours ahead, 1 to 168.
        #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::timeline::MAX_HOURS)))]
        hours: u32,
        /// Print {"version": 1, "from", "to", "hours", "automations": [{name, state, firings:
        /// [{at, slot}], ...}], "busiest": [{minute, firings}]} instead of a table.
        #[arg(long)]
        json: bool,
    },

    /// Run the past slots of an automation's installed schedule, each once, oldest first.
    ///
    /// Each slot runs as a firing of its own (its lock, its log lines, trigger `backfill`) and
    /// gets AUTOMATION_SLOT, the slot it stands for. A slot that already has a successful run
    /// is passed over, so a second call after an interruption (Ctrl-C) goes on where the first
    /// stopped. WHEN is RFC 3339, or a date or date and time (2026-12-01, "2026-12-01 09:00") on
    /// the schedule's clock: its time_zone, else this machine's; a date alone for --to means the
    /// end of that day. More than 1,000 slots needs --max.
    ///
    /// Example: automations backfill report --from 2026-11-30 --to 2026-12-06
    Backfill {
        /// The automation (automations/<NAME>.toml), installed.
        name: Name,
        /// The first slot to consider.
        #[arg(long, value_name = "WHEN")]
        from: String,
        /// The last slot to consider (not after now).
        #[arg(long, value_name = "WHEN")]
        to: String,
        /// Say which slots would run and which are passed over; run nothing.
        #[arg(long)]
        dry_run: bool,
        /// Run slots that already succeeded too.
        #[arg(long)]
        again: bool,
        /// The most slots this call may run (needed beyond 1,000).
        #[arg(long, value_name = "N")]
        max: Option<usize>,
        /// Print {"version": 1, "name", "slots": [{slot, action, exit, summary}]} instead of
        /// lines.
        #[arg(long)]
        json: bool,
    },

    /// Pause an automation: its firings are skipped until `resume`.
    ///
    /// Example: automations pause heartbeat --reason "maintenance"
    Pause {
        name: Name,
        /// Why (recorded in the log and shown by `list`).
        #[arg(long)]
        reason: String,
    },

    /// Resume a paused automation.
    ///
    /// Example: automations resume heartbeat
    Resume { name: Name },

    /// Say "I fixed it": health counts success rate, slow runs, outside calls and the failing
    /// streak only from here.
    ///
    /// Records an `ack` event in the run log (a resume counts as one too). Staleness and missed
    /// days are not reset: only a run can end those. If the next run fails, that is a new
    /// degradation, and it is notified again.
    ///
    /// Example: automations ack backup --reason "rotated the expired token"
    Ack {
        name: Name,
        /// What was fixed (one line, recorded in the log).
        #[arg(long)]
        reason: Option<String>,
    },

    /// Hold an automation's notifications for a while (planned work): its runs go on and are
    /// recorded; no message, reminder or recovery of it is sent until the snooze ends by itself
    /// (or `unsnooze`), and then only what is news by then. `list` and `health` show "snoozed
    /// until …". DURATION: 30m, 2h, 1d, 1h30m (at most 30 days).
    ///
    /// Example: automations snooze backup 4h --reason "moving the NAS"
    Snooze {
        name: Name,
        duration: String,
        /// Why (one line, recorded in the log).
        #[arg(long)]
        reason: Option<String>,
    },

    /// End an automation's snooze now.
    ///
    /// Example: automations unsnooze backup
    Unsnooze { name: Name },

    /// The kill switch: skip every firing and stop every running run.
    ///
    /// Example: automations stop-all --reason "something is wrong"
    StopAll {
        /// Why (shown by `list` and in skipped runs).
        #[arg(long)]
        reason: String,
    },

    /// Turn the kill switch off.
    ///
    /// Example: automations resume-all
    ResumeAll,

    /// The run log.
    #[command(subcommand)]
    Log(LogCommand),

    /// Regenerate units/ (and kubernetes/) from the definitions, or check them.
    ///
    /// units/ holds, for both launchd and systemd, what each scheduled definition renders to, with
    /// @BIN@, @ROOT@ and @DATA_ROOT@ for machine paths. When the repository has a kubernetes.toml,
    /// kubernetes/ holds a CronJob per scheduled definition and a kustomization.yaml
    /// (docs/kubernetes.md). With --check nothing is written; any stale, hand-edited, extra or
    /// missing file is reported with a diff and exits 1 (a CronJob's spec.suspend, a pause, is
    /// never compared).
    ///
    /// Example: automations units --check
    Units {
        /// Compare instead of writing.
        #[arg(long)]
        check: bool,
    },

    /// Print the unit files this machine would install for an automation, or its CronJob.
    ///
    /// --target kubernetes prints the CronJob manifest `automations units` writes to
    /// kubernetes/<name>.yaml, with the cluster's settings from kubernetes.toml.
    ///
    /// Example: automations render heartbeat --target launchd
    Render {
        name: Name,
        /// Render for this target instead of this machine's service manager.
        #[arg(long, value_enum)]
        target: Option<RenderTarget>,
        /// The binary the unit runs [default: this one].
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
        /// Print {"version": 1, "files": [{"path", "content"}]}.
        #[arg(long)]
        json: bool,
    },

    /// Install automations' units on this machine and load them.
    ///
    /// Prints one plan for every automation named (or --all scheduled ones) with a diff of each
    /// unit, definition and script against what was approved, then asks once for y: stdin and
    /// stdout must be a terminal, and nothing skips the question. Nothing changes before the y;
    /// with nothing to change, nothing is asked. Refused from a linked git worktree and for a
    /// binary inside a cargo target/ folder (use `make automations-install`, which installs a
    /// release binary at ~/.local/bin/automations). A failed install restores that automation's
    /// previous unit files and record. --dry-run prints the plan and works anywhere.
    ///
    /// Example: automations install heartbeat backup --dry-run
    Install {
        /// The automations to install.
        names: Vec<Name>,
        /// Every definition with a [schedule].
        #[arg(long)]
        all: bool,
        /// Print the plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The binary the units run [default: this one]. It must exist and not be inside a
        /// target/ folder.
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
        /// Also put this program at --bin (after the y, and only when the bytes differ); the plan
        /// says so and how many installed automations run it.
        #[arg(long, requires = "bin")]
        install_binary: bool,
    },

    /// Unload automations' units and remove their files and install records.
    ///
    /// One plan for every automation named (or --all installed ones), one question; same
    /// terminal rule as install. A unit that will not unload keeps its files.
    ///
    /// Example: automations uninstall heartbeat
    Uninstall {
        /// The automations to uninstall.
        names: Vec<Name>,
        /// Every automation installed on this machine.
        #[arg(long)]
        all: bool,
        /// Print the plan and change nothing.
        #[arg(long)]
        dry_run: bool,
    },

    /// Drift check: units/ against the definitions, and this machine's installed units.
    ///
    /// This machine first, one line per finding: changed (definition, a path, or edited by
    /// hand), missing (file gone or not loaded), extra (our label prefix, never installed),
    /// orphaned (installed, definition gone or unscheduled); then units/, one line per file that
    /// is missing, stale, edited or extra. Each line ends with the command that fixes it; a
    /// summary line comes last. Exits 1 on any finding. This is what `make automations-check`
    /// and CI run.
    ///
    /// Example: automations check --diff
    Check {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
        /// Also print the diff of each units/ file that differs.
        #[arg(long)]
        diff: bool,
    },

    /// Secrets, one family: an automation's AnyType key, the notification credentials and the
    /// Healthchecks keys, in the OS keychain (macOS Keychain, Linux Secret Service) or, where
    /// <data root>/secrets.toml chooses them, private files of the data root (docs/keys.md).
    ///
    /// A SCOPE is an automation's name (its AnyType key), notify.pushover, notify.ntfy,
    /// notify.webhook, notify.email, healthchecks.ping or healthchecks.api. A secret is typed
    /// or pasted at a terminal, hidden; it never appears on a command line.
    #[command(subcommand)]
    Secret(SecretCommand),

    /// Moved: automations secret store|check|delete NAME.
    #[command(subcommand, hide = true)]
    Key(KeyCommand),

    /// Look over this machine's setup: each line ok / warn / fail, with the fix.
    ///
    /// Example: automations doctor
    Doctor,

    /// Call an outside service over HTTP(S), with a deadline, safe redirects and a record.
    ///
    /// For commands started by `automations run` ("$AUTOMATION_BIN" http get URL): each call
    /// appends {host, status, ms, class} to the run's HTTP log, which the run records. Redirects
    /// are followed by hand (at most 5, http/https only); credentials never cross to another
    /// scheme, host or port, and a body is never sent again to another origin. No retries.
    /// Secret headers go in --header-env or --header-file, and a URL holding a secret (a token in
    /// its path, query or user info) in --url-env or --url-file, never on the command line.
    ///
    /// Exit codes: 0 any HTTP answer; 22 with --fail when the status is 400 or more; 7 no answer
    /// (the class, none/dns, none/refused, none/timeout, none/tls or none/other, on stderr); 56 the
    /// body broke off; 63 the body is larger than --max-bytes; 2 bad arguments.
    ///
    /// Example: "$AUTOMATION_BIN" http get https://example.org/feed --header-env Authorization=FEED_AUTH --fail
    Http(HttpArgs),

    /// A local web page: every automation at a glance, and run now, pause, resume, stop-all.
    ///
    /// Listens on 127.0.0.1 only and prints `dashboard: http://127.0.0.1:PORT/?token=…` (the token
    /// is kept 0600 in the data root; the page then holds it in an HttpOnly cookie), and opens it in
    /// the browser unless --no-open; then where Prometheus scrapes /metrics (with the bearer token
    /// in <data root>/metrics.token). Runs until interrupted.
    ///
    /// Example: automations dashboard --port 8400
    Dashboard {
        /// The port (0: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Print the address, but do not open a browser.
        #[arg(long)]
        no_open: bool,
    },

    /// Notifications: send a test message, or look at every automation now.
    #[command(subcommand)]
    Notify(NotifyCommand),

    /// Moved: automations secret store|check|delete notify.DRIVER.
    #[command(subcommand, name = "notify-key", hide = true)]
    NotifyKey(NotifyKeyCommand),

    /// Healthchecks (hosted or self-hosted): pings from every firing, and remote checks kept in
    /// step with the definitions. Set up in <data root>/healthchecks.toml (docs/healthchecks.md).
    #[command(subcommand)]
    Healthchecks(HealthchecksCommand),

    /// Bring jobs in from elsewhere: a crontab's lines, LaunchAgents, systemd user timers.
    #[command(subcommand)]
    Import(ImportCommand),

    /// Print a shell completion script.
    ///
    /// Example: automations completions bash > ~/.local/share/bash-completion/completions/automations
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },

    /// Print the manual page automations(1), or write every page to a folder.
    ///
    /// With --out, one page per command as well (automations-run.1, automations-log-verify.1…),
    /// as the release packages ship them.
    ///
    /// Example: automations man | man -l -
    Man {
        /// Write automations.1 and one page per subcommand into this folder.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// The flags every `import` takes.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Print what would be written and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write the jobs that can be imported even when others need you.
    #[arg(long)]
    pub partial: bool,
    /// Print JSON (format version 1) instead of a table.
    #[arg(long, conflicts_with = "adopt")]
    pub json: bool,
    /// Also install what was imported and retire the originals in the same step, after one y
    /// (docs/moving-in.md): when an install or the retiring fails, what this step installed is
    /// uninstalled and the originals are left as they were — never both running, never neither.
    #[arg(long)]
    pub adopt: bool,
    /// With --adopt: the binary the units run [default: this one].
    #[arg(long, value_name = "PATH", requires = "adopt")]
    pub bin: Option<PathBuf>,
}

/// `automations import …`.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Turn a crontab's jobs into definitions, one per job line (docs/moving-in.md).
    ///
    /// Prints one row per line: its number, the definition's name, the schedule in words, and
    /// `imported` or `needs you` with the reason (and what was said about settings such as
    /// MAILTO or PATH). A line that is one command becomes its argv, its output redirection
    /// dropped so output reaches the run log; a line that needs a shell becomes
    /// scripts/cron-<name>.sh, which runs it from the home folder as cron did. Then writes
    /// automations/<name>.toml for every job, all or nothing: when any line needs you, nothing is
    /// written unless --partial. NAME=value lines become values in the jobs' private env files
    /// (<data root>/env/<name>.env, 0600), never definition text. Nothing is installed unless
    /// --adopt, which also comments the lines out of the crontab. Exits 0 when every job was
    /// imported, 1 when some need you, 2 when the crontab cannot be read.
    ///
    /// Example: automations import crontab --copy-scripts --dry-run
    Crontab {
        /// The crontab: a file, or - for standard input [default: the output of `crontab -l`].
        file: Option<PathBuf>,
        #[command(flatten)]
        common: ImportArgs,
        /// Copy scripts under the home folder that jobs run into the repository's scripts/, so
        /// they are versioned and pinned (definitions may not name the home folder).
        #[arg(long)]
        copy_scripts: bool,
        /// Keep a line's output redirection (`> log 2>&1`) as cron ran it: the line then runs
        /// through its own script, and its output does not reach the run log.
        #[arg(long)]
        keep_redirects: bool,
        /// A system crontab (/etc/crontab, /etc/cron.d/*): a user field follows the schedule;
        /// other users' jobs are listed as not imported.
        #[arg(long, conflicts_with = "adopt")]
        system: bool,
    },

    /// Turn LaunchAgents into definitions, one per plist (docs/moving-in.md).
    ///
    /// Reads Program/ProgramArguments, StartCalendarInterval (a dict or an array), StartInterval,
    /// RunAtLoad, WatchPaths, QueueDirectories, EnvironmentVariables (into private env files),
    /// WorkingDirectory, Nice, LowPriorityIO and ExitTimeOut; StandardOutPath and
    /// StandardErrorPath are dropped (output goes to the run log); KeepAlive and any other key
    /// are refused by name. The same report, all or nothing, --dry-run, --json and --adopt as the
    /// crontab's; --adopt boots each agent out and moves its plist aside, on macOS.
    ///
    /// Example: automations import launchd ~/Library/LaunchAgents/com.me.backup.plist --dry-run
    Launchd {
        /// The plists.
        #[arg(required = true, value_name = "PLIST")]
        plists: Vec<PathBuf>,
        #[command(flatten)]
        common: ImportArgs,
        /// Copy scripts under the home folder that agents run into the repository's scripts/.
        #[arg(long)]
        copy_scripts: bool,
    },

    /// Turn systemd user timers (with their services) and path units into definitions
    /// (docs/moving-in.md).
    ///
    /// Reads OnCalendar= (systemd's calendar syntax), OnBootSec=, OnStartupSec=,
    /// OnUnitActiveSec=, Persistent=, RandomizedDelaySec=; the service's ExecStart=,
    /// Environment= and EnvironmentFile= (into private env files), WorkingDirectory=,
    /// MemoryMax=, CPUQuota=, Nice=, IOSchedulingClass=, TimeoutStartSec=; a .path unit's
    /// PathChanged=, PathModified= and DirectoryNotEmpty=; OnSuccess=/OnFailure= between units
    /// imported together. Any other key is refused by name. The same report, all or nothing,
    /// --dry-run, --json and --adopt as the crontab's; --adopt disables and stops each timer and
    /// moves its files aside.
    ///
    /// Example: automations import systemd ~/.config/systemd/user/backup.timer --adopt
    Systemd {
        /// The .timer or .path units (each with its .service beside it).
        #[arg(required = true, value_name = "UNIT")]
        units: Vec<PathBuf>,
        #[command(flatten)]
        common: ImportArgs,
        /// Copy scripts under the home folder that units run into the repository's scripts/.
        #[arg(long)]
        copy_scripts: bool,
    },
}

/// The method of an `http` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpMethod {
    Get,
    Head,
    Post,
}

#[derive(Debug, Args)]
pub struct HttpArgs {
    /// get, head or post.
    #[arg(value_enum)]
    pub method: HttpMethod,
    /// The http:// or https:// URL (visible in the process list: a URL holding a secret goes in
    /// --url-env or --url-file).
    #[arg(required_unless_present_any = ["url_env", "url_file"], conflicts_with_all = ["url_env", "url_file"])]
    pub url: Option<String>,
    /// The URL is in this environment variable (it holds a secret: never shown).
    #[arg(long, value_name = "VAR", conflicts_with = "url_file")]
    pub url_env: Option<String>,
    /// The URL is the first line of this file (it holds a secret: never shown).
    #[arg(long, value_name = "FILE")]
    pub url_file: Option<PathBuf>,
    /// A header that is not secret (it is visible in the process list): "Name: value".
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub headers: Vec<String>,
    /// A header whose value is in an environment variable: Authorization=API_AUTH.
    #[arg(long = "header-env", value_name = "NAME=VAR")]
    pub header_env: Vec<String>,
    /// A file of secret headers, "Name: value" per line.
    #[arg(long = "header-file", value_name = "FILE")]
    pub header_file: Vec<PathBuf>,
    /// The POST body: @FILE, or - for standard input.
    #[arg(long, value_name = "@FILE|-")]
    pub data: Option<String>,
    /// Write the body to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 22, writing no body, when the status is 400 or more.
    #[arg(long)]
    pub fail: bool,
    /// The deadline of the whole call, redirects included, in seconds (at most 120).
    #[arg(long, value_name = "S", default_value_t = 20.0)]
    pub max_time: f64,
    /// The most body bytes read; a larger body fails with exit 63.
    #[arg(long, value_name = "N", default_value_t = 5_000_000)]
    pub max_bytes: u64,
    /// Print {"version":1,"status","url","ms","class","bytes"} on stderr when done (the URL
    /// without its query and user info; from --url-env or --url-file, only its origin).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Read a secret (hidden) at a terminal, check it where it can be checked, then store it,
    /// replacing an earlier one in place.
    ///
    /// An automation's AnyType key is checked with AnyType (GET /v2/auth/whoami): only a key that
    /// grants exactly what its [anytype] declares is stored. The Pushover pair is checked with
    /// Pushover (nothing is sent); a Healthchecks key with Healthchecks. The ntfy token, the
    /// webhook's signing key and the SMTP password are stored as typed.
    ///
    /// Example: automations secret store task-digest
    /// Example: automations secret store healthchecks.ping
    Store { scope: Scope },

    /// Check the stored secret again where it can be checked (AnyType, Pushover, Healthchecks),
    /// else say whether one is stored; exit 1 when none is, or it is refused.
    ///
    /// Example: automations secret check notify.pushover
    Check { scope: Scope },

    /// Delete the stored secret.
    ///
    /// Example: automations secret delete notify.ntfy
    Delete { scope: Scope },

    /// Every scope this folder can use — each automation that declares [anytype], every
    /// notification driver, both Healthchecks keys — with whether a secret is stored for it and
    /// where secrets are kept. Never prints a secret.
    ///
    /// Example: automations secret list --json
    List {
        /// Print {"version": 1, "kind", "store", "secrets": [{scope, label, stored, error}]}.
        #[arg(long)]
        json: bool,
    },
}

pub use crate::secrets::Scope;

/// The spelling `secret` replaced: each says the new command and exits 2.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Moved: automations secret store NAME.
    Store { name: Name },
    /// Moved: automations secret check NAME.
    Check { name: Name },
    /// Moved: automations secret delete NAME.
    Delete { name: Name },
}

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Send one test message through every driver notify.toml configures, and say what each
    /// answered.
    ///
    /// Example: automations notify test
    Test,
    /// Look at every automation (or one) now: note what changed since the last look, and
    /// deliver what is due (what the health-check automation runs hourly). Exit 0 unless looking
    /// failed; degraded automations are health's business.
    ///
    /// Example: automations notify look
    Look {
        /// Only this automation.
        name: Option<Name>,
    },
}

#[derive(Debug, Subcommand)]
pub enum HealthchecksCommand {
    /// Create or update one remote check per scheduled, installed automation (or NAME), with the
    /// schedule its unit fires on; print the plan first. Needs the API key.
    ///
    /// Calendar schedules are given as the systemd timer's own OnCalendar lines with this
    /// machine's time zone; awake-time intervals as a simple period. Exit 1 when something could
    /// not be done.
    ///
    /// Example: automations healthchecks sync --dry-run
    Sync {
        /// Only this automation.
        name: Option<Name>,
        /// Print the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also delete the namespace's checks that no installed automation has.
        #[arg(long)]
        prune: bool,
    },
    /// Each installed automation's remote check status beside its local verdict and the last
    /// ping sent from here.
    ///
    /// Example: automations healthchecks status --json
    Status {
        /// Print {"version": 1, "automations": [{name, remote, last_ping, verdict, last_sent, failures_in_row}]}.
        #[arg(long)]
        json: bool,
    },
    /// Moved: automations secret store|check|delete healthchecks.ping|api.
    #[command(subcommand, hide = true)]
    Key(HealthchecksKeyCommand),
}

/// Which Healthchecks key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HealthchecksKey {
    /// The project's ping key (Project Settings → Ping key).
    Ping,
    /// A read-write API key (Project Settings → API Access).
    Api,
}

/// The spelling `secret` replaced: each says the new command and exits 2.
#[derive(Debug, Subcommand)]
pub enum HealthchecksKeyCommand {
    /// Moved: automations secret store healthchecks.ping|api.
    Store { which: HealthchecksKey },
    /// Moved: automations secret check healthchecks.ping|api.
    Check { which: HealthchecksKey },
    /// Moved: automations secret delete healthchecks.ping|api.
    Delete { which: HealthchecksKey },
}

/// The spelling `secret` replaced: each says the new command and exits 2.
#[derive(Debug, Subcommand)]
pub enum NotifyKeyCommand {
    /// Moved: automations secret store notify.pushover|ntfy|webhook|email.
    Store(NotifyKeyWhich),
    /// Moved: automations secret check notify.pushover|ntfy|webhook|email.
    Check(NotifyKeyWhich),
    /// Moved: automations secret delete notify.pushover|ntfy|webhook|email.
    Delete(NotifyKeyWhich),
}

/// Which notification credential: the Pushover pair unless a flag names another.
#[derive(Debug, Args)]
pub struct NotifyKeyWhich {
    /// The ntfy access token instead of the Pushover pair.
    #[arg(long, conflicts_with_all = ["webhook", "email"])]
    pub ntfy: bool,
    /// The webhook's signing key (HMAC-SHA256) instead of the Pushover pair.
    #[arg(long, conflicts_with = "email")]
    pub webhook: bool,
    /// The password the SMTP server's login (`[email] user`) takes.
    #[arg(long)]
    pub email: bool,
}

impl NotifyKeyWhich {
    /// The driver whose credential it is.
    pub fn driver(&self) -> crate::names::Driver {
        use crate::names::Driver;
        match (self.ntfy, self.webhook, self.email) {
            (true, _, _) => Driver::Ntfy,
            (_, true, _) => Driver::Webhook,
            (_, _, true) => Driver::Email,
            _ => Driver::Pushover,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Check the hash chain of the whole run log, every segment.
    ///
    /// Exits 1 on a broken chain (an edited, deleted or reordered line) and says where. A torn
    /// line (an interrupted write) is reported, not called tampering.
    ///
    /// Example: automations log verify
    Verify {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// What `render` can render: a service manager's units, or a Kubernetes CronJob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RenderTarget {
    /// A macOS LaunchAgent property list.
    Launchd,
    /// A systemd user service and timer.
    Systemd,
    /// A Windows Task Scheduler task (the XML `schtasks /Create /XML` takes).
    Windows,
    /// A Kubernetes batch/v1 CronJob (needs kubernetes.toml).
    Kubernetes,
}

/// The one command line read without clap: the fixed-position argv every installed unit runs,
/// exactly as `units::program_arguments` renders it — `<bin> run NAME --trigger schedule --root R
/// --data-root D --namespace N`, eleven words, each word where that function puts it. Building
/// clap's command tree is most of a firing's own start-up; this is no second reading of its
/// grammar, only a match of one shape. `None` for every other line (a person's `run` included),
/// which clap parses.
pub fn unit_firing(args: &[std::ffi::OsString]) -> Option<Cli> {
    let words: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let [
        _,
        "run",
        name,
        "--trigger",
        "schedule",
        "--root",
        root,
        "--data-root",
        data,
        "--namespace",
        ns,
    ] = words[..]
    else {
        return None;
    };
    // Values as clap would take them: nothing empty or that reads as an option.
    if [root, data, ns]
        .iter()
        .any(|v| v.is_empty() || v.starts_with('-'))
    {
        return None;
    }
    Some(Cli {
        global: Global {
            root: Some(PathBuf::from(root)),
            namespace: Some(ns.to_owned()),
            data_root: Some(PathBuf::from(data)),
        },
        command: Command::Run {
            name: Name::new(name).ok()?,
            trigger: Trigger::Schedule,
            unit: false,
            slot: None,
        },
    })
}

/// `--slot`: RFC 3339 with an offset.
fn slot_parser(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    crate::runlog::parse_stamp(s).ok_or_else(|| {
        format!("{s:?} is not an RFC 3339 time with an offset (2026-12-07T09:00:00-05:00)")
    })
}

/// `--trigger`'s words, each the log's own word for a trigger (the log's types know nothing of
/// the command line).
fn trigger_parser() -> impl clap::builder::TypedValueParser<Value = Trigger> {
    use clap::builder::TypedValueParser as _;
    // `path` and `after` are never given: a unit's firing says `schedule`, and the runner reads
    // what started the unit (docs/triggers.md).
    let given = [
        Trigger::Manual,
        Trigger::Schedule,
        Trigger::Dashboard,
        Trigger::Backfill,
    ];
    clap::builder::PossibleValuesParser::new(given.map(|t| {
        clap::builder::PossibleValue::new(t.as_str())
            .help(match t {
                Trigger::Schedule => "launchd or systemd (a timer, a watched path or a chain)",
                Trigger::Dashboard => "The dashboard",
                _ => "A person, from the command line",
            })
            // `backfill` runs one slot with `--slot`; `automations backfill` gives both.
            .hide(t == Trigger::Backfill)
    }))
    .map(|word: String| Trigger::from_word(&word).expect("one of the possible values"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The argv a unit renders is read without clap exactly as clap reads it; any other line
    /// is left to clap.
    #[test]
    fn a_units_argv_is_read_as_clap_reads_it() {
        let def = crate::definition::parse(
            "heartbeat.toml",
            b"name = \"heartbeat\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
            &crate::definition::Checks {
                home: "/home/u".into(),
                data_root: "/d/ata".into(),
                units_dir: "/nonexistent-units".into(),
            },
        )
        .unwrap();
        let paths = crate::units::MachinePaths {
            bin: "/bin/automations".into(),
            root: "/srv/r o".into(),
            data_root: "/d/ata".into(),
            home: "/home/u".into(),
        };
        let ns = crate::names::Namespace::new("ns").unwrap();
        let line: Vec<std::ffi::OsString> = crate::units::program_arguments(&def, &ns, &paths)
            .into_iter()
            .map(Into::into)
            .collect();
        let fast = unit_firing(&line).expect("a unit's argv takes the fixed form");
        let slow = Cli::try_parse_from(&line).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
        for other in [
            &["a", "run", "heartbeat"][..],
            &[
                "a",
                "run",
                "heartbeat",
                "--trigger",
                "schedule",
                "--root",
                "/r",
                "--data-root",
                "/d",
                "--namespace",
            ],
            &[
                "a",
                "run",
                "Bad",
                "--trigger",
                "schedule",
                "--root",
                "/r",
                "--data-root",
                "/d",
                "--namespace",
                "n",
            ],
            &[
                "a",
                "run",
                "x",
                "--trigger",
                "manual",
                "--root",
                "/r",
                "--data-root",
                "/d",
                "--namespace",
                "n",
            ],
            &[
                "a",
                "run",
                "x",
                "--trigger",
                "schedule",
                "--root",
                "--help",
                "--data-root",
                "/d",
                "--namespace",
                "n",
            ],
            &[
                "a",
                "run",
                "x",
                "--trigger",
                "schedule",
                "--data-root",
                "/d",
                "--root",
                "/r",
                "--namespace",
                "n",
            ],
        ] {
            let line: Vec<std::ffi::OsString> = other.iter().map(Into::into).collect();
            assert!(unit_firing(&line).is_none(), "{other:?}");
        }
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
