//! systemd user units: a `Type=oneshot` service and its timer.
//!
//! `daily_at`, and an `every_minutes` that is a wall-clock grid (see `schedule::is_grid`), use
//! `OnCalendar=` with `Persistent=true`: slots missed while the machine slept or was off coalesce
//! into one run at wake or boot (the runner's slot guard keeps a daily job to one run per slot).
//! Any other `every_minutes` uses monotonic timers (`OnActiveSec` + `OnUnitActiveSec`), whose
//! CLOCK_MONOTONIC stops during suspend: they count awake time and do not fire on wake, which the
//! unit's header says. The service sets `StartLimitIntervalSec=0`: systemd's default start limit
//! (5 starts in 10 s) would refuse a person's `systemctl --user start` after a few tries and record
//! nothing, while the runner's lock already keeps runs one at a time. Values are escaped for systemd: `%` specifiers, `$`
//! expansion and quoting of `ExecStart=` arguments.

use std::fmt::Write as _;

use super::{MachinePaths, UnitFile, header_text, notes, program_arguments, stop_timeout};
use crate::definition::Definition;
use crate::names::{Label, Namespace};
use crate::schedule::Schedule;
use crate::settings::FIXED_PATH_LINUX as FIXED_PATH;

/// The units of `def`: its service; its timer when it has a schedule; its path unit when it
/// watches paths. (A chain starts the service itself.)
pub fn units(
    def: &Definition,
    namespace: &Namespace,
    label: &Label,
    paths: &MachinePaths,
) -> Vec<UnitFile> {
    let mut header = format!("# {}\n", header_text(def));
    for note in notes(def) {
        header.push_str(&format!("# {note}\n"));
    }
    let mut service = header.clone();
    let what = def
        .description
        .as_deref()
        .map_or_else(String::new, |d| format!(" - {d}"));
    let _ = write!(
        service,
        "[Unit]\nDescription={}\nStartLimitIntervalSec=0\n\n[Service]\nType=oneshot\nWorkingDirectory={}\nEnvironment=PATH={FIXED_PATH}\nEnvironment={}={}\nExecStart={}\nSuccessExitStatus={}\nTimeoutStartSec={}\nKillMode=control-group\n",
        escape_specifiers(&format!("automations: {}{what}", def.name)),
        escape_specifiers(&paths.root),
        super::ENV_SKIP_STATUS,
        crate::exit::Exit::Skipped as u8,
        exec_start(&program_arguments(def, namespace, paths)),
        crate::exit::Exit::Skipped as u8,
        stop_timeout(def),
    );

    service.push_str(&policy_lines(def, paths));

    let mut units = vec![UnitFile {
        name: format!("{label}.service"),
        bytes: service.into_bytes(),
    }];
    if let Some(schedule) = &def.schedule {
        units.push(timer(def, label, schedule, header.clone()));
    }
    if let Some(tr) = def.trigger.as_ref().filter(|t| !t.paths.is_empty()) {
        units.push(path_unit(def, label, tr, paths, header));
    }
    units
}

/// `[limits]` and `[sandbox]` as service settings (docs/policies.md); nothing without them.
/// `OOMPolicy=continue` keeps the runner alive when the kernel kills a process of the tree for
/// memory, so it can record the run (`out_of_memory`) instead of the manager stopping the unit.
fn policy_lines(def: &Definition, paths: &MachinePaths) -> String {
    use crate::definition::IoClass;
    let mut out = String::new();
    let limits = &def.policy.limits;
    if let Some(m) = &limits.memory_max {
        let _ = write!(
            out,
            "MemoryMax={}\nMemorySwapMax=0\nOOMPolicy=continue\n",
            m.bytes
        );
    }
    if let Some(q) = limits.cpu_quota {
        let _ = writeln!(out, "CPUQuota={q}%");
    }
    if let Some(n) = limits.nice {
        let _ = writeln!(out, "Nice={n}");
    }
    match limits.io {
        Some(IoClass::Idle) => out.push_str("IOSchedulingClass=idle\n"),
        Some(IoClass::Low) => {
            out.push_str("IOSchedulingClass=best-effort\nIOSchedulingPriority=7\n")
        }
        Some(IoClass::Normal) => {
            out.push_str("IOSchedulingClass=best-effort\nIOSchedulingPriority=4\n");
        }
        None => {}
    }
    if let Some(t) = limits.tasks_max {
        let _ = writeln!(out, "TasksMax={t}");
    }
    if def.policy.sandbox {
        out.push_str(SANDBOX);
        // The runner writes the data root (log, locks, scratch); the command, its writes. A
        // missing one (`-`) is left out rather than failing the start: the write is refused then.
        let mut writable = vec![escape_specifiers(&paths.data_root)];
        for w in &def.policy.writes {
            writable.push(match w.strip_prefix("~/") {
                Some(rest) => format!("%h/{}", escape_specifiers(rest)),
                None => escape_specifiers(&super::machine_path(w, paths)),
            });
        }
        let list: Vec<String> = writable
            .iter()
            .map(|p| path_word(&format!("-{p}")))
            .collect();
        let _ = writeln!(out, "ReadWritePaths={}", list.join(" "));
    }
    out
}

/// `[sandbox] level = "strict"`: everything read-only but the data root and `writes`, and what
/// else holds for a user's service without breaking the runner (docs/policies.md). The system
/// call filter lets through the calls with which the runner confines the command further
/// (Landlock and seccomp, which systemd 252's `@system-service` leaves out; see `sandbox`).
const SANDBOX: &str = "ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
NoNewPrivileges=yes
RestrictSUIDSGID=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictNamespaces=yes
PrivateDevices=yes
CapabilityBoundingSet=
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service landlock_create_ruleset landlock_add_rule landlock_restrict_self seccomp
SystemCallErrorNumber=EPERM
";

/// A path in a space-separated list: quoted when it holds white space or quotes.
fn path_word(p: &str) -> String {
    if p.chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\\')
    {
        format!("\"{}\"", p.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        p.to_owned()
    }
}

/// The path unit: one `PathChanged=` / `PathModified=` / `DirectoryNotEmpty=` line per watched
/// path, starting the service. A home path is written with `%h`, which the user's manager expands
/// to the home folder, so `units/` says the same on every machine. Nothing is created for it
/// (`MakeDirectory=no`): a missing folder is the definition's error, not a folder to make.
fn path_unit(
    def: &Definition,
    label: &Label,
    tr: &crate::definition::Triggers,
    paths: &MachinePaths,
    header: String,
) -> UnitFile {
    let mut unit = header;
    let _ = write!(
        unit,
        "[Unit]\nDescription={}\n\n[Path]\n",
        escape_specifiers(&format!("automations: {} ({})", def.name, tr.words()))
    );
    let key = match tr.on {
        crate::definition::PathEvent::Changed => "PathChanged",
        crate::definition::PathEvent::Modified => "PathModified",
        crate::definition::PathEvent::NotEmpty => "DirectoryNotEmpty",
    };
    for p in &tr.paths {
        let line = match p.strip_prefix("~/") {
            Some(rest) => format!("%h/{}", escape_specifiers(rest)),
            None => escape_specifiers(&super::machine_path(p, paths)),
        };
        let _ = writeln!(unit, "{key}={line}");
    }
    let _ = write!(
        unit,
        "Unit={label}.service\nMakeDirectory=no\n\n[Install]\nWantedBy=paths.target\n"
    );
    UnitFile {
        name: format!("{label}.path"),
        bytes: unit.into_bytes(),
    }
}

/// The timer of a scheduled definition.
fn timer(def: &Definition, label: &Label, schedule: &Schedule, header: String) -> UnitFile {
    let mut timer = header;
    let _ = write!(
        timer,
        "[Unit]\nDescription={}\n\n[Timer]\n",
        escape_specifiers(&format!("automations: {} ({})", def.name, schedule.words()))
    );
    match schedule {
        Schedule::EveryMinutes { every_minutes, .. }
            if !crate::schedule::is_grid(*every_minutes) =>
        {
            let _ = write!(
                timer,
                "OnActiveSec={every_minutes}min\nOnUnitActiveSec={every_minutes}min\n"
            );
        }
        Schedule::AtLogin => {}
        _ => {
            // One line per expression: systemd fires at the union of a timer's OnCalendar= lines.
            // A schedule in a `time_zone` says it on each line (systemd ≥ 235 reads it there).
            let zone = schedule.zone().map(|z| format!(" {z}")).unwrap_or_default();
            for line in crate::schedule::on_calendar(schedule) {
                let _ = writeln!(timer, "OnCalendar={line}{zone}");
            }
            timer.push_str("Persistent=true\n");
        }
    }
    // At login: when the user's manager starts (and at once when the timer starts later, as at
    // install: an OnStartupSec= already past elapses immediately).
    if schedule.at_login() {
        timer.push_str("OnStartupSec=0\n");
    }
    let _ = write!(
        timer,
        "AccuracySec=1s\n\n[Install]\nWantedBy=timers.target\n"
    );
    UnitFile {
        name: format!("{label}.timer"),
        bytes: timer.into_bytes(),
    }
}

/// systemd refuses an executable path holding quotes, backslashes or control characters, though
/// arguments may hold them.
const UNSAFE_IN_EXECUTABLE: &[char] = &['"', '\'', '\\'];

/// Where `env` lives on every Linux distribution.
pub const ENV: &str = "/usr/bin/env";

/// The `ExecStart=` value: the arguments quoted one by one. A binary path systemd will not take as
/// an executable is passed to `/usr/bin/env` as an argument instead, which then runs it.
fn exec_start(argv: &[String]) -> String {
    let mut words: Vec<String> = Vec::with_capacity(argv.len() + 1);
    if argv[0].contains(UNSAFE_IN_EXECUTABLE) {
        words.push(ENV.into());
    }
    words.extend(argv.iter().map(|a| exec_arg(a)));
    words.join(" ")
}

/// `%` starts a specifier in almost every unit setting; a literal one is `%%`.
pub fn escape_specifiers(s: &str) -> String {
    s.replace('%', "%%")
}

/// One `ExecStart=` argument: specifiers and `$` expansion escaped, quoted when it holds white
/// space, quotes, backslashes or `;`, or is empty.
pub fn exec_arg(s: &str) -> String {
    let escaped = escape_specifiers(s).replace('$', "$$");
    let plain = !escaped.is_empty()
        && !escaped
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'));
    if plain {
        escaped
    } else {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    }
}
