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

use super::{MachinePaths, UnitFile, awake_note, header_text, program_arguments, stop_timeout};
use crate::definition::Definition;
use crate::names::{Label, Namespace};
use crate::schedule::Schedule;
use crate::settings::FIXED_PATH_LINUX as FIXED_PATH;

/// The service and the timer of `def`.
pub fn pair(
    def: &Definition,
    namespace: &Namespace,
    label: &Label,
    paths: &MachinePaths,
) -> [UnitFile; 2] {
    let mut header = format!("# {}\n", header_text(def));
    if let Some(note) = awake_note(def) {
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

    let mut timer = header;
    let schedule = def
        .schedule
        .as_ref()
        .expect("render() only renders scheduled definitions");
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
            for line in crate::schedule::on_calendar(schedule) {
                let _ = writeln!(timer, "OnCalendar={line}");
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
    [
        UnitFile {
            name: format!("{label}.service"),
            bytes: service.into_bytes(),
        },
        UnitFile {
            name: format!("{label}.timer"),
            bytes: timer.into_bytes(),
        },
    ]
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
