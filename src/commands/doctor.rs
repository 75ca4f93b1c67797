//! `automations doctor`: is this machine ready to run its automations? A table of checks, each a
//! small function that says `ok`, `warn` or `fail` with the fix (STYLE 25: a new check is one
//! function and one line in [`CHECKS`]). Doctor only looks; it never creates or changes anything
//! (but the throwaway copies in the temp folder that measure a sandbox's exposure, and a probe
//! secret stored, read back and deleted to prove the secret store works end to end).

use std::path::Path;

use super::fail::CmdResult;
use super::machine::drift;
use crate::exit::Exit;
use crate::fsutil::{self, Use};
use crate::service::{self, ServiceManager};
use crate::settings::{Manager, Settings};
use crate::state::State;

/// How a check came out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Warn,
    Fail,
}

/// One line of the report: the level, what was checked, and what was found (with the fix).
struct Line(Level, &'static str, String);

/// What every check may use.
struct Ctx<'a> {
    settings: &'a Settings,
    manager: Box<dyn ServiceManager>,
}

type Check = fn(&Ctx) -> Vec<Line>;

/// Every check, in the order they are printed.
const CHECKS: &[Check] = &[
    service_manager,
    lingering,
    agents_folder,
    binaries,
    data_root,
    privacy_folders,
    sandboxes,
    secrets,
    definitions_and_drift,
];

pub fn doctor(settings: &Settings) -> CmdResult {
    let ctx = Ctx {
        settings,
        manager: service::for_manager(settings.manager),
    };
    let mut failed = false;
    for Line(level, what, detail) in CHECKS.iter().flat_map(|check| check(&ctx)) {
        failed |= level == Level::Fail;
        let word = match level {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        };
        outln!("{word:4}  {what}: {detail}");
    }
    Ok(if failed { Exit::Failure } else { Exit::Success })
}

fn service_manager(c: &Ctx) -> Vec<Line> {
    vec![match c.manager.reachable() {
        Ok(()) => Line(
            Level::Ok,
            "service manager",
            format!("{} answers", c.settings.manager.as_str()),
        ),
        Err(e) => Line(
            Level::Fail,
            "service manager",
            format!(
                "{e}; fix: run from your login session (systemd: XDG_RUNTIME_DIR must name your user manager's runtime folder)"
            ),
        ),
    }]
}

fn lingering(c: &Ctx) -> Vec<Line> {
    let Some((user, on)) = crate::install::lingering(c.settings) else {
        return Vec::new();
    };
    vec![if on {
        Line(
            Level::Ok,
            "lingering",
            format!("on for {user}: timers fire without a login"),
        )
    } else {
        Line(
            Level::Warn,
            "lingering",
            format!(
                "off for {user}: timers fire only while you are logged in; fix: loginctl enable-linger {user}"
            ),
        )
    }]
}

/// Look, never create: the nearest existing folder on the way must be writable.
fn agents_folder(c: &Ctx) -> Vec<Line> {
    let dir = &c.settings.agents_dir;
    let existing = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    vec![match crate::platform::writable(existing) {
        Ok(()) => Line(
            Level::Ok,
            "agents folder",
            format!("{} is writable", dir.display()),
        ),
        Err(e) => Line(
            Level::Fail,
            "agents folder",
            format!(
                "{} is not writable ({e}); fix: make it writable by you",
                existing.display()
            ),
        ),
    }]
}

/// The binary each installed unit runs: there, and not in a build folder.
fn binaries(c: &Ctx) -> Vec<Line> {
    let records = match State::new(&c.settings.data_root).install_records() {
        Ok(r) => r,
        Err(e) => {
            return vec![Line(
                Level::Fail,
                "install records",
                crate::exit::chain_text(&e),
            )];
        }
    };
    if records.is_empty() {
        return vec![Line(Level::Ok, "binary", "nothing installed yet".into())];
    }
    // One line per binary, with the automations whose units run it: a fact once, not per unit.
    let mut by_bin: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (name, r) in records {
        by_bin.entry(r.bin).or_default().push(name.to_string());
    }
    by_bin
        .into_iter()
        .map(|(bin_text, names)| {
            let bin = Path::new(&bin_text);
            let who = match names.as_slice() {
                [one] => format!("{one}'s unit runs"),
                many => format!("{} units run", many.len()),
            };
            let fix = match names.as_slice() {
                [one] => format!("fix: make automations-install NAME={one}"),
                many => format!("fix: make automations-install NAME=\"{}\"", many.join(" ")),
            };
            if !bin.exists() {
                Line(
                    Level::Fail,
                    "binary",
                    format!("{who} {bin_text}, which is gone; {fix}"),
                )
            } else if crate::install::in_build_folder(bin) {
                Line(
                    Level::Fail,
                    "binary",
                    format!("{who} {bin_text}, inside a target/ folder; {fix}"),
                )
            } else {
                Line(Level::Ok, "binary", format!("{who} {bin_text}"))
            }
        })
        .collect()
}

/// The same check every command makes, so doctor never calls usable what they refuse.
fn data_root(c: &Ctx) -> Vec<Line> {
    let root = &c.settings.data_root;
    vec![match fsutil::check_data_root(root, Use::Read) {
        Ok(false) => Line(
            Level::Warn,
            "data root",
            format!(
                "{} does not exist yet; the first run creates it 0700",
                root.display()
            ),
        ),
        Ok(true) => {
            let mode = std::fs::metadata(root)
                .ok()
                .and_then(|m| crate::platform::mode_of(&m))
                .map(|m| m & 0o777);
            match mode {
                // Windows: no mode bits; its folder's access list decides (docs/windows.md).
                None => Line(
                    Level::Ok,
                    "data root",
                    format!(
                        "{} is yours (private as its folder's access list keeps it)",
                        root.display()
                    ),
                ),
                Some(mode) if mode & 0o077 == 0 => Line(
                    Level::Ok,
                    "data root",
                    format!("{} is yours and private ({mode:o})", root.display()),
                ),
                Some(mode) => Line(
                    Level::Warn,
                    "data root",
                    format!(
                        "{} is readable by others (mode {mode:o}); its files stay 0600, but fix: chmod 700 {}",
                        root.display(),
                        root.display()
                    ),
                ),
            }
        }
        Err(e) => Line(Level::Fail, "data root", e.to_string()),
    }]
}

fn privacy_folders(c: &Ctx) -> Vec<Line> {
    if c.settings.manager != Manager::Launchd {
        return Vec::new();
    }
    let defs = super::load_all(c.settings)
        .map(|l| l.definitions)
        .unwrap_or_default();
    let mut lines: Vec<Line> = crate::install::privacy_warnings(c.settings, &defs)
        .into_iter()
        .map(|w| Line(Level::Warn, "privacy folders", w))
        .collect();
    if lines.is_empty() {
        lines.push(Line(
            Level::Ok,
            "privacy folders",
            "the root, the data root and watched paths are outside folders macOS guards".into(),
        ));
    }
    lines
}

/// Each sandboxed automation's exposure as `systemd-analyze security` rates its service, without
/// and with the sandbox; on macOS, that install refuses it.
fn sandboxes(c: &Ctx) -> Vec<Line> {
    let defs = super::load_all(c.settings)
        .map(|l| l.definitions)
        .unwrap_or_default();
    let bin = crate::settings::this_binary().unwrap_or_default();
    let Ok(paths) = crate::install::machine_paths(c.settings, &bin) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let here = crate::sandbox::why_not_here(&c.settings.root, &c.settings.data_root);
    for def in defs.iter().filter(|d| d.policy.sandbox) {
        let name = &def.name;
        if let Some(why) = here
            .as_ref()
            .filter(|_| c.settings.manager == Manager::Systemd)
        {
            lines.push(Line(
                Level::Fail,
                "sandbox",
                format!("{name}: {why}; its firings fail or never start"),
            ));
            continue;
        }
        lines.push(match crate::install::sandbox_exposure(c.settings, def, &paths) {
            None => Line(
                Level::Warn,
                "sandbox",
                format!("{name}: [sandbox] strict has no launchd equivalent; install refuses it on macOS"),
            ),
            Some(Ok(exposure)) => Line(Level::Ok, "sandbox", format!("{name}: {exposure}")),
            Some(Err(why)) => Line(Level::Warn, "sandbox", format!("{name}: {why}")),
        });
    }
    lines
}

/// The definitions, and when they are valid, the drift `check` reports.
fn definitions_and_drift(c: &Ctx) -> Vec<Line> {
    let loaded = match super::load_all(c.settings) {
        Ok(l) => l,
        Err(e) => return vec![Line(Level::Fail, "definitions", format!("{:#}", e.error))],
    };
    if !loaded.problems.is_empty() {
        return vec![Line(
            Level::Fail,
            "definitions",
            format!(
                "{} problem(s); fix: automations validate",
                loaded.problems.len()
            ),
        )];
    }
    let defs = Line(
        Level::Ok,
        "definitions",
        format!("{} valid", loaded.definitions.len()),
    );
    let (drift, cluster) = match drift(c.settings, c.manager.as_ref()) {
        Ok(d) => (
            if d.units.is_empty() && d.machine.is_empty() {
                Line(Level::Ok, "drift", "none".into())
            } else {
                Line(
                    Level::Fail,
                    "drift",
                    format!(
                        "{} finding(s); fix: see automations check",
                        d.units.len() + d.machine.len()
                    ),
                )
            },
            // The cluster target's own line, and only for a repository that opted in to it.
            d.cluster_problem.map(|p| {
                Line(
                    Level::Fail,
                    "kubernetes",
                    format!("not rendered: {}", p.replace('\n', "; ")),
                )
            }),
        ),
        Err(e) => (Line(Level::Fail, "drift", format!("{:#}", e.error)), None),
    };
    [defs, drift].into_iter().chain(cluster).collect()
}

/// Where secrets are kept, proved end to end: a probe stored, read back and deleted. A failure
/// fails doctor when something here uses a secret (an `[anytype]` definition, notify.toml or
/// healthchecks.toml), and warns otherwise.
fn secrets(c: &Ctx) -> Vec<Line> {
    use crate::layout::SettingsFile;
    let settings = c.settings;
    let place = crate::keys::Place::of(settings);
    let kept = place.describe();
    if settings.key_dir.is_some() {
        return vec![Line(Level::Ok, "secrets", format!("read from {kept}"))];
    }
    let layout = settings.layout();
    let used = [SettingsFile::Notify, SettingsFile::Healthchecks]
        .iter()
        .any(|f| layout.settings_file(*f).exists())
        || super::load_all(settings)
            .is_ok_and(|l| l.definitions.iter().any(|d| d.anytype.is_some()));
    match crate::keys::prove(place.open().as_ref(), &settings.namespace) {
        Ok(()) => vec![Line(
            Level::Ok,
            "secrets",
            format!("kept in {kept}; a probe was stored, read back and deleted"),
        )],
        Err(e) => vec![Line(
            if used { Level::Fail } else { Level::Warn },
            "secrets",
            format!(
                "kept in {kept}, which does not work now: {e}; fix: on a server, see docs/keys.md \"On a headless Linux server\""
            ),
        )],
    }
}
