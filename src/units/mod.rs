//! Rendering: `(definition, machine paths) -> unit files`, for launchd and systemd (docs/units.md).
//!
//! Pure functions of their inputs: no files, no clock, no environment. The same rendering with the
//! placeholders `@BIN@`, `@ROOT@`, `@DATA_ROOT@` is what `units/` in the repository holds, so CI can
//! see a definition change that was not regenerated. Every file starts with a header naming its
//! source definition and saying it is generated. This module must never write anything.

pub mod kubernetes;
pub mod launchd;
pub mod portable;
pub mod systemd;
pub mod windows;

use std::path::Path;

use crate::definition::Definition;
use crate::names::{Label, Namespace};
use crate::settings::Manager;

/// Set by the systemd service beside `SuccessExitStatus=75`: a skipped scheduled firing may end
/// with status 75, which the unit counts as success and `systemctl status` shows.
pub const ENV_SKIP_STATUS: &str = "AUTOMATIONS_SKIP_STATUS";

/// What can be rendered: the unit formats of each service manager. A target never needs the
/// machine it is rendered on (`render --target launchd` works on Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// A macOS LaunchAgent property list.
    Launchd,
    /// A systemd user service and timer.
    Systemd,
    /// A Windows Task Scheduler task (only rendered: no Windows service manager here yet).
    Windows,
}

impl Target {
    /// Every target, in the order `units/` lists them.
    pub const ALL: [Target; 3] = [Target::Launchd, Target::Systemd, Target::Windows];

    /// What `units/` holds when the repository does not say: the two systems the program runs
    /// on. Windows is asked for (`[units] targets`), so no team commits tasks it has no use for.
    pub const DEFAULT: [Target; 2] = [Target::Launchd, Target::Systemd];

    /// The target this machine's service manager loads.
    pub fn of(manager: Manager) -> Self {
        match manager {
            Manager::Launchd => Target::Launchd,
            Manager::Systemd => Target::Systemd,
            Manager::TaskScheduler => Target::Windows,
        }
    }

    /// Its folder in `units/`.
    pub fn dir(self) -> &'static str {
        match self {
            Target::Launchd => "launchd",
            Target::Systemd => "systemd",
            Target::Windows => "windows",
        }
    }

    /// The endings of the files it renders.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Target::Launchd => &[".plist"],
            Target::Systemd => &[".service", ".timer", ".path"],
            Target::Windows => &[".xml"],
        }
    }
}

/// Seconds the service manager waits beyond a run's own timeout before it stops the run itself
/// (systemd `TimeoutStartSec`, launchd `ExitTimeOut`): room for the runner's own tree kill.
pub const BACKSTOP_SECONDS: u32 = 30;

/// How long the service manager may let one firing take (with `catch_up = "all"`, the firings of
/// the missed slots it runs first too): its jitter delay, every attempt's
/// timeout and the waits between them, and the backstop.
pub fn stop_timeout(def: &Definition) -> u32 {
    let attempts = def.retry.retries + 1;
    let waits = def.retry.total_delay().as_secs() as u32;
    // A path-started firing may wait for its paths to settle, and one that does not run holds
    // its unit a while (docs/triggers.md).
    let events = def
        .trigger
        .as_ref()
        .filter(|t| !t.paths.is_empty())
        .map_or(0, |t| {
            3 * t.settle_seconds + crate::definition::trigger::COOL_DOWN_SECONDS
        });
    // A queued firing may wait a timeout for the running one; a replacing one, for it to stop.
    let overlap = match def.policy.overlap {
        crate::definition::Overlap::Skip => 0,
        crate::definition::Overlap::Queue => def.timeout_seconds,
        crate::definition::Overlap::Replace => crate::definition::policy::REPLACE_WAIT_SECONDS,
    };
    let one = def.jitter_seconds + attempts * def.timeout_seconds + waits + events + overlap;
    // `catch_up = "all"`: the firing on wake runs each missed slot before its own.
    let firings = match def
        .schedule
        .as_ref()
        .map(crate::schedule::Schedule::catch_up)
    {
        Some(crate::schedule::CatchUp::All) => crate::schedule::zone::CATCH_UP_SLOTS as u32 + 1,
        _ => 1,
    };
    one.saturating_mul(firings).saturating_add(BACKSTOP_SECONDS)
}

/// The header lines after the first: what else starts it, and an interval that counts awake
/// time, so the unit itself says them.
fn notes(def: &Definition) -> Vec<String> {
    let events = def
        .trigger
        .as_ref()
        .map(|t| format!("Also started {} (docs/triggers.md).", t.words()));
    events.into_iter().chain(awake_note(def)).collect()
}

/// A header line for an interval that counts awake time.
fn awake_note(def: &Definition) -> Option<String> {
    match def.schedule {
        Some(crate::schedule::Schedule::EveryMinutes { every_minutes, .. })
            if !crate::schedule::is_grid(every_minutes) =>
        {
            Some(format!(
                "every {every_minutes} minutes {}: it is not a divisor of the hour or the day, so it is not a wall-clock grid",
                crate::schedule::AWAKE_NOTE
            ))
        }
        _ => None,
    }
}

/// `text` as it can stand in an XML comment, which may not hold `--` (nor end in `-`).
pub fn comment_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '-' && out.ends_with('-') {
            out.push(' ');
        }
        out.push(c);
    }
    if out.ends_with('-') {
        out.push(' ');
    }
    out
}

/// The placeholder for the binary's path in portable units.
pub const BIN_PLACEHOLDER: &str = "@BIN@";
/// The placeholder for the repository root in portable units.
pub const ROOT_PLACEHOLDER: &str = "@ROOT@";
/// The placeholder for the data root in portable units.
pub const DATA_ROOT_PLACEHOLDER: &str = "@DATA_ROOT@";
/// The placeholder for the home folder in portable units (launchd's watched paths).
pub const HOME_PLACEHOLDER: &str = "@HOME@";

/// The machine paths a unit names, or their placeholders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachinePaths {
    /// The `automations` binary the unit runs.
    pub bin: String,
    /// The repository root.
    pub root: String,
    /// The private data root.
    pub data_root: String,
    /// The user's home folder.
    pub home: String,
}

impl MachinePaths {
    /// The placeholders of `units/`.
    pub fn portable() -> Self {
        Self {
            bin: BIN_PLACEHOLDER.into(),
            root: ROOT_PLACEHOLDER.into(),
            data_root: DATA_ROOT_PLACEHOLDER.into(),
            home: HOME_PLACEHOLDER.into(),
        }
    }

    /// Refuses paths a unit file cannot carry (control characters would end a line).
    pub fn check(&self) -> Result<(), String> {
        for (what, p) in [
            ("binary", &self.bin),
            ("repository root", &self.root),
            ("data root", &self.data_root),
            ("home", &self.home),
        ] {
            if p.chars().any(char::is_control) {
                return Err(format!(
                    "the {what} path {p:?} contains a control character"
                ));
            }
            if p.trim() != p {
                return Err(format!(
                    "the {what} path {p:?} starts or ends with white space"
                ));
            }
        }
        Ok(())
    }
}

/// One rendered file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitFile {
    /// The file name, `<label>.plist` / `.service` / `.timer`.
    pub name: String,
    /// Its exact bytes.
    pub bytes: Vec<u8>,
}

/// The files of `def` for `target`; empty when the definition is run by hand only. Refused, with
/// why, when `target` cannot fire it at the right instants ([`refusal`]).
pub fn render(
    def: &Definition,
    namespace: &Namespace,
    paths: &MachinePaths,
    target: Target,
) -> Result<Vec<UnitFile>, String> {
    if !def.has_units() {
        return Ok(Vec::new());
    }
    if let Some(why) = refusal(def, target) {
        return Err(why);
    }
    let label = Label::new(namespace, &def.name);
    Ok(match target {
        Target::Launchd => vec![launchd::plist(def, namespace, &label, paths)],
        Target::Systemd => systemd::units(def, namespace, &label, paths),
        Target::Windows => vec![windows::task(def, namespace, &label, paths)?],
    })
}

/// Why `target` cannot fire `def` at the instants its definition says, if it cannot: launchd
/// reads `StartCalendarInterval` in the Mac's own zone, which changes when the Mac travels, so a
/// schedule in a `time_zone` would fire at the wrong instant (docs/units.md, "Time zones").
pub fn refusal(def: &Definition, target: Target) -> Option<String> {
    let zone = def.schedule.as_ref()?.zone()?;
    match target {
        Target::Launchd => Some(format!(
            "{}: time_zone = \"{zone}\" cannot be kept by launchd, which fires a calendar schedule in the Mac's own zone (and that zone changes when the Mac travels); remove time_zone to fire at the Mac's wall-clock times",
            def.name
        )),
        Target::Windows => Some(format!(
            "{}: time_zone = \"{zone}\" cannot be kept by Task Scheduler, which fires a calendar trigger in the machine's own zone (or at one fixed UTC offset, which a zone with DST is not); remove time_zone to fire at the machine's wall-clock times",
            def.name
        )),
        Target::Systemd => None,
    }
}

/// A watched path of a definition (`{root}/…`, `~/…` or absolute) on the machine `paths`
/// describes.
pub fn machine_path(p: &str, paths: &MachinePaths) -> String {
    let (root, home) = (Path::new(&paths.root), Path::new(&paths.home));
    crate::definition::trigger::resolve(p, root, home)
        .display()
        .to_string()
}

/// The argv a unit runs: `<bin> run <name> --trigger schedule --root … --data-root … --namespace …`.
pub fn program_arguments(
    def: &Definition,
    namespace: &Namespace,
    paths: &MachinePaths,
) -> Vec<String> {
    vec![
        paths.bin.clone(),
        "run".into(),
        def.name.to_string(),
        "--trigger".into(),
        "schedule".into(),
        "--root".into(),
        paths.root.clone(),
        "--data-root".into(),
        paths.data_root.clone(),
        "--namespace".into(),
        namespace.to_string(),
    ]
}

/// What a person types to run `def` now through the same runner, data root and namespace as its
/// unit, as a manual run: the unit's own arguments without `--trigger schedule`, quoted for a
/// shell. (Starting the unit itself is a scheduled firing, which the slot guard may skip.)
pub fn run_now_command(def: &Definition, namespace: &Namespace, paths: &MachinePaths) -> String {
    let mut args = program_arguments(def, namespace, paths);
    if let Some(at) = args.iter().position(|a| a == "--trigger") {
        args.drain(at..at + 2);
    }
    args.iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `a` as one word for a POSIX shell: as it is when it holds nothing a shell reads, else in
/// single quotes.
pub fn shell_word(a: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./@%+=:,".contains(c);
    if !a.is_empty() && a.chars().all(plain) {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// The one header line's words. It carries the definition's sha256, so drift checks can tell a
/// definition changed since rendering from a file edited by hand.
fn header_text(def: &Definition) -> String {
    format!(
        "Generated from automations/{}.toml (sha256 {}) by `automations` - do not edit; change the definition and reinstall.",
        def.name, def.sha256
    )
}

/// The sha256 of every source a rendered file's header line (the first naming one) names: the
/// definition's first, then any other (`kubernetes.toml`'s pod settings). Drift checks compare
/// them: when they differ the file was rendered from other sources (stale), else edited.
pub fn header_hashes(bytes: &[u8]) -> Vec<&str> {
    let head = &bytes[..bytes.len().min(1024)];
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    text.lines()
        .find(|l| l.contains("(sha256 "))
        .unwrap_or_default()
        .split("(sha256 ")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect()
}

#[cfg(test)]
mod tests;
