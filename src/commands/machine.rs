//! Commands about this machine's units: `units`, `render`, `install`, `uninstall`, `check`,
//! `doctor`. Logic lives in `units`, `service` and `install`; this is parsing and printing.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};

use super::{data_root, load_all, one_definition};
use crate::cli::RenderTarget;
use crate::definition::Definition;
use crate::fsutil::Use;
use crate::install::{self, Finding};
use crate::names::Name;
use crate::service::{self, ServiceManager};
use crate::settings::{Manager, Settings};
use crate::units::{self, kubernetes, portable};
use crate::{CmdResult, Exit, Fail};

fn bad(msg: String) -> Fail {
    Fail::new(Exit::BadInput, anyhow!(msg))
}

/// Every definition, or exit 2 with every problem.
fn valid_definitions(settings: &Settings) -> Result<Vec<Definition>, Fail> {
    let loaded = load_all(settings)?;
    if !loaded.problems.is_empty() {
        let lines: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
        return Err(bad(format!(
            "invalid definitions (run `automations validate`):\n{}",
            lines.join("\n")
        )));
    }
    Ok(loaded.definitions)
}

/// The binary units will run: `--bin`, else this one; absolute, links resolved when it exists.
fn unit_binary(bin: Option<PathBuf>) -> Result<PathBuf, Fail> {
    let bin = match bin {
        Some(b) if b.is_absolute() => b,
        Some(b) => std::env::current_dir()?.join(b),
        None => std::env::current_exe().context("cannot find this binary's path")?,
    };
    Ok(std::fs::canonicalize(&bin).unwrap_or(bin))
}

/// The cluster settings of the repository (`kubernetes.toml`), if it has them.
fn cluster(settings: &Settings) -> Result<Option<kubernetes::Cluster>, Fail> {
    kubernetes::Cluster::load(&settings.root).map_err(bad)
}

/// What the rendered folders should hold, or exit 2 with every definition that cannot be rendered.
fn desired(
    settings: &Settings,
    defs: &[Definition],
) -> Result<(BTreeMap<PathBuf, Vec<u8>>, &'static str), Fail> {
    let cluster = cluster(settings)?;
    let folders = if cluster.is_some() {
        "units/ and kubernetes/"
    } else {
        "units/"
    };
    let files = portable::desired(defs, &settings.namespace, cluster.as_ref())
        .map_err(|problems| bad(format!("cannot render {folders}:\n{}", problems.join("\n"))))?;
    Ok((files, folders))
}

/// The fix for rendered files that differ: regenerate, and add the folders they are in.
fn units_fix(diffs: &[portable::Difference]) -> String {
    let mut folders: Vec<&str> = diffs
        .iter()
        .filter_map(|d| portable::folder_of(d.path()).map(|f| f.top))
        .collect();
    folders.sort_unstable();
    folders.dedup();
    format!("make automations-units && git add {}", folders.join(" "))
}

pub fn units(settings: &Settings, check: bool) -> CmdResult {
    let defs = valid_definitions(settings)?;
    let (desired, folders) = desired(settings, &defs)?;
    if check {
        let present = portable::present(&settings.root)
            .with_context(|| format!("cannot read {folders} in {}", settings.root.display()))?;
        let diffs = portable::compare(&present, &desired);
        for d in &diffs {
            outln!("{}", d.line());
            if let Some(diff) = d.diff() {
                out!("{diff}");
            }
        }
        if diffs.is_empty() {
            outln!(
                "{folders} match the definitions ({} file(s))",
                desired.len()
            );
            return Ok(Exit::Success);
        }
        outln!(
            "{folders} out of date: run `automations units` (make automations-units) and commit"
        );
        return Ok(Exit::Failure);
    }
    let fixed = portable::write(&settings.root, &desired)
        .with_context(|| format!("cannot write {folders} in {}", settings.root.display()))?;
    for d in &fixed {
        outln!("{}", d.line().replace(": ", ": rewrote, was "));
    }
    outln!(
        "{folders}: {} file(s), {} rewritten",
        desired.len(),
        fixed.len()
    );
    Ok(Exit::Success)
}

pub fn render(
    settings: &Settings,
    name: &Name,
    target: Option<RenderTarget>,
    bin: Option<PathBuf>,
    json: bool,
) -> CmdResult {
    let def = one_definition(settings, name)?;
    let (files, folder) = match target {
        Some(RenderTarget::Kubernetes) => {
            let cluster = cluster(settings)?.ok_or_else(|| {
                bad(format!(
                    "{} has no {}: it says the cluster's time zone, image and namespace (docs/kubernetes.md)",
                    settings.root.display(),
                    kubernetes::SETTINGS_FILE
                ))
            })?;
            if def.schedule.is_none() {
                return Err(bad(format!(
                    "{name} has no [schedule]: there is no CronJob to render"
                )));
            }
            let file = kubernetes::render(&def, &settings.namespace, &cluster)
                .map_err(|why| bad(format!("{name} cannot be rendered for Kubernetes: {why}")))?;
            (vec![file], settings.root.join(kubernetes::DIR))
        }
        target => {
            let target = match target {
                Some(RenderTarget::Launchd) => units::Target::Launchd,
                Some(RenderTarget::Systemd) => units::Target::Systemd,
                _ => units::Target::of(settings.manager),
            };
            let paths = install::machine_paths(settings, &unit_binary(bin)?)?;
            let files = units::render(&def, &settings.namespace, &paths, target);
            if files.is_empty() {
                return Err(bad(format!(
                    "{name} has no [schedule]: there is no unit to render"
                )));
            }
            let agents = settings.agents_dir_of(match target {
                units::Target::Launchd => Manager::Launchd,
                units::Target::Systemd => Manager::Systemd,
            });
            (files, agents)
        }
    };
    if json {
        let files: Vec<_> = files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "path": folder.join(&f.name),
                    "content": String::from_utf8_lossy(&f.bytes),
                })
            })
            .collect();
        outln!("{}", serde_json::json!({"version": 1, "files": files}));
        return Ok(Exit::Success);
    }
    let out = &mut std::io::stdout().lock();
    for f in &files {
        if files.len() > 1 {
            writeln!(out, "# ==> {} <==", folder.join(&f.name).display())?;
        }
        out.write_all(&f.bytes)?;
    }
    Ok(Exit::Success)
}

/// Refuses when the root is a linked git worktree: its path can vanish with `git worktree remove`.
fn refuse_linked_worktree(root: &Path) -> Result<(), Fail> {
    let git = root.join(".git");
    if git.is_file() {
        let text = std::fs::read_to_string(&git).unwrap_or_default();
        if text.contains("/worktrees/") {
            return Err(Fail::new(
                Exit::Environment,
                anyhow!(
                    "{} is a linked git worktree, which can be removed with its units still pointing at it; install from the main checkout",
                    root.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses unless stdin and stdout are a terminal, where a person can type y.
fn require_terminal(question: &str) -> Result<(), Fail> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(bad(format!(
            "{question}: needs a person at a terminal (stdin and stdout must be a terminal) to type y; use --dry-run to see the plan"
        )));
    }
    Ok(())
}

/// Asks the person at the terminal to type y. There is deliberately no flag or variable that
/// answers for them.
fn confirm(question: &str) -> Result<bool, Fail> {
    require_terminal(question)?;
    out!("{question}? Type y to confirm: ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

pub(super) fn user_name() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| crate::runner::env::current_user().map(|u| u.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// Refuses, before anything is asked or written, a machine where the manager cannot take units.
fn preflight(manager: &dyn ServiceManager) -> Result<(), Fail> {
    manager
        .preflight()
        .map_err(|e| Fail::new(Exit::Environment, e))
}

/// The next firing and the command that runs the job now, after an install: the same runner,
/// data root and namespace as the unit, as a manual run. Not the unit's own start (`systemctl
/// --user start`, `launchctl kickstart`): that is a scheduled firing, which the slot guard skips
/// when today's slot of a daily job is already done.
fn after_install(settings: &Settings, def: &Definition, bin: &Path) -> Result<(), Fail> {
    let now = chrono::Local::now();
    if let Some((next, jitter)) = def.schedule.as_ref().and_then(|sch| {
        crate::schedule::next_run(sch, def.name.as_str(), def.jitter_seconds, &now, None)
    }) {
        let jitter = jitter.map_or_else(String::new, crate::schedule::jitter_words);
        outln!("next firing: {}{jitter}", next.words(&now));
    }
    let paths = install::machine_paths(settings, bin)?;
    outln!(
        "run it now: {}",
        units::run_now_command(def, &settings.namespace, &paths)
    );
    Ok(())
}

/// macOS privacy protection: folders a LaunchAgent cannot read without a prompt nobody sees.
pub(super) fn privacy_warnings(settings: &Settings, warn: &mut dyn FnMut(String)) {
    if settings.manager != Manager::Launchd {
        return;
    }
    for (what, path) in [
        ("repository root", &settings.root),
        ("data root", &settings.data_root),
    ] {
        if let Some(folder) = install::privacy_folder(&settings.home, path) {
            warn(format!(
                "the {what} {} is inside {folder}, which macOS privacy protection guards: a LaunchAgent gets \"Operation not permitted\" there, with no prompt, so scheduled runs would fail; move it outside ~/Documents, ~/Desktop, ~/Downloads and iCloud Drive (for example to ~/src)",
                path.display()
            ));
        }
    }
}

/// On Linux, timers of a user without lingering run only while that user is logged in.
fn linger_warning(settings: &Settings) {
    if settings.manager != Manager::Systemd {
        return;
    }
    let user = user_name();
    if !user.is_empty() && !Path::new("/var/lib/systemd/linger").join(&user).exists() {
        errln!(
            "warning: lingering is off for {user}: the timer fires only while you are logged in; `loginctl enable-linger {user}` makes it fire after boot too"
        );
    }
}

pub fn install(settings: &Settings, name: &Name, dry_run: bool, bin: Option<PathBuf>) -> CmdResult {
    let def = one_definition(settings, name)?;
    data_root(settings, if dry_run { Use::Read } else { Use::Write })?;
    let Some(schedule) = &def.schedule else {
        return Err(bad(format!(
            "{name} has no [schedule]: there is nothing to install (run it with `automations run {name}`)"
        )));
    };
    let bin = unit_binary(bin)?;
    let manager = service::for_manager(settings.manager);
    let plan = install::plan_install(settings, &def, &bin, manager.as_ref())?;
    outln!(
        "install {} ({}) running {}:",
        plan.label,
        schedule.words(),
        bin.display()
    );
    out!("{}", plan.describe());
    if dry_run {
        outln!("dry run: nothing changed");
        return Ok(Exit::Success);
    }
    refuse_linked_worktree(&settings.root)?;
    if !bin.is_file() {
        return Err(Fail::new(
            Exit::Environment,
            anyhow!(
                "{} does not exist; the unit would have nothing to run",
                bin.display()
            ),
        ));
    }
    if install::in_build_folder(&bin) {
        return Err(Fail::new(
            Exit::Environment,
            anyhow!(
                "{} is inside a cargo target/ folder, which the next build or `cargo clean` replaces; run `make automations-install NAME={name}`, which installs a release binary at ~/.local/bin/automations first",
                bin.display()
            ),
        ));
    }
    let question = format!("Install {}", plan.label);
    require_terminal(&question)?;
    preflight(manager.as_ref())?;
    privacy_warnings(settings, &mut |w| errln!("warning: {w}"));
    if !confirm(&question)? {
        outln!("not confirmed: nothing changed");
        return Ok(Exit::Failure);
    }
    if plan.is_empty() {
        outln!("{} is already installed and up to date", plan.label);
        after_install(settings, &def, &bin)?;
        return Ok(Exit::Success);
    }
    install::apply_install(settings, &plan, manager.as_ref())?;
    outln!("installed {}", plan.label);
    after_install(settings, &def, &bin)?;
    linger_warning(settings);
    super::healthchecks::install_hint(settings, name);
    Ok(Exit::Success)
}

pub fn uninstall(settings: &Settings, name: &Name, dry_run: bool) -> CmdResult {
    data_root(settings, if dry_run { Use::Read } else { Use::Write })?;
    let manager = service::for_manager(settings.manager);
    let plan = install::plan_uninstall(settings, name, manager.as_ref())?;
    if plan.files.is_empty() && plan.record.is_none() && !plan.loaded {
        outln!(
            "{} is not installed on this machine: nothing to do",
            plan.label
        );
        return Ok(Exit::Success);
    }
    outln!("uninstall {}:", plan.label);
    out!("{}", plan.describe());
    if dry_run {
        outln!("dry run: nothing changed");
        return Ok(Exit::Success);
    }
    let question = format!("Uninstall {}", plan.label);
    require_terminal(&question)?;
    preflight(manager.as_ref())?;
    if !confirm(&question)? {
        outln!("not confirmed: nothing changed");
        return Ok(Exit::Failure);
    }
    install::apply_uninstall(settings, &plan, manager.as_ref())?;
    outln!("uninstalled {}", plan.label);
    for line in left_behind(settings, name, plan.record.as_ref()) {
        outln!("{line}");
    }
    super::healthchecks::uninstall_hint(settings, name);
    Ok(Exit::Success)
}

/// The lines `check` prints of the remote checks.
fn remote_lines(r: &Result<Vec<String>, String>, say: &mut dyn FnMut(&str)) {
    match r {
        Ok(lines) if lines.is_empty() => say("healthchecks: the remote checks are in step"),
        Ok(lines) => {
            for l in lines {
                say(&format!(
                    "healthchecks: {l}; fix: automations healthchecks sync"
                ));
            }
        }
        Err(e) => say(&format!(
            "healthchecks: the remote checks were not looked at: {e}"
        )),
    }
}

/// What an uninstall leaves in place (it removes only the unit files and the install record),
/// each with the command that removes it.
fn left_behind(
    settings: &Settings,
    name: &Name,
    record: Option<&crate::state::Record>,
) -> Vec<String> {
    let mut out = vec!["left in place, and how to remove each:".to_owned()];
    let def = settings.definitions_dir().join(format!("{name}.toml"));
    if def.exists() {
        out.push(format!(
            "  the definition {}: a manual run still works; delete it (and commit) to retire {name}",
            def.display()
        ));
    }
    let env = settings.layout().env_file(name.as_str());
    if env.exists() {
        out.push(format!(
            "  its private environment {}: rm {}",
            env.display(),
            units::shell_word(&env.to_string_lossy())
        ));
    }
    out.push(format!(
        "  its AnyType key, if one was stored: automations key delete {name}"
    ));
    out.push(format!(
        "  its runs in the run log under {} (history; `automations runs {name}` shows them)",
        settings.data_root.display()
    ));
    let others = crate::state::State::new(&settings.data_root)
        .install_records()
        .map(|r| r.len())
        .unwrap_or(1);
    if let Some(bin) = record.map(|r| &r.bin) {
        if others == 0 {
            out.push(format!(
                "  the binary {bin}: no unit runs it any more; rm {}",
                units::shell_word(bin)
            ));
        } else {
            out.push(format!(
                "  the binary {bin}: {others} installed automation(s) still run it"
            ));
        }
    }
    if others == 0 {
        out.push(format!(
            "  the data root {} (the run log, settings and state of every automation): rm -r {}",
            settings.data_root.display(),
            units::shell_word(&settings.data_root.to_string_lossy())
        ));
    }
    out
}

/// Both halves of the drift check.
pub(super) struct Drift {
    pub units: Vec<portable::Difference>,
    /// The rendered folders compared (`units/`, and `kubernetes/` when there is a cluster).
    pub folders: &'static str,
    pub machine: Vec<Finding>,
}

pub(super) fn drift(settings: &Settings, manager: &dyn ServiceManager) -> Result<Drift, Fail> {
    let defs = valid_definitions(settings)?;
    let (desired, folders) = desired(settings, &defs)?;
    let present = portable::present(&settings.root)
        .with_context(|| format!("cannot read {folders} in {}", settings.root.display()))?;
    Ok(Drift {
        units: portable::compare(&present, &desired),
        folders,
        machine: install::check_machine(settings, &defs, manager)?,
    })
}

/// `check`: this machine's findings first (what fires here), then `units/` (and `kubernetes/`) one line per file, each
/// ending with its fix; the diffs only with `--diff`; a summary line last.
pub fn check(settings: &Settings, json: bool, diff: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let manager = service::for_manager(settings.manager);
    let d = drift(settings, manager.as_ref())?;
    // The remote checks, when healthchecks.toml exists: drift when the API key is readable,
    // else why it was not looked at (which is no finding).
    let remote = super::healthchecks::drift(settings);
    let remote_drift = matches!(&remote, Some(Ok(lines)) if !lines.is_empty());
    let clean = d.units.is_empty() && d.machine.is_empty() && !remote_drift;
    if json {
        let units: Vec<String> = d.units.iter().map(portable::Difference::line).collect();
        let fixes: Vec<String> = d
            .machine
            .iter()
            .map(Finding::fix)
            .chain((!d.units.is_empty()).then(|| units_fix(&d.units)))
            .collect();
        outln!(
            "{}",
            serde_json::json!({"version": 1, "ok": clean, "units": units, "machine": d.machine, "fixes": fixes})
        );
        if let Some(r) = &remote {
            // On stderr: stdout's document keeps its shape for scripts.
            remote_lines(r, &mut |l| errln!("{l}"));
        }
        return Ok(if clean { Exit::Success } else { Exit::Failure });
    }
    for f in &d.machine {
        outln!("{}", f.line());
    }
    if let Some(r) = &remote {
        remote_lines(r, &mut |l| outln!("{l}"));
    }
    for u in &d.units {
        outln!("{}; fix: {}", u.line(), units_fix(std::slice::from_ref(u)));
        if diff && let Some(text) = u.diff() {
            out!("{text}");
        }
    }
    if clean {
        outln!(
            "no drift: {} the definitions and this machine matches its install records",
            if d.folders == "units/" {
                "units/ matches"
            } else {
                "units/ and kubernetes/ match"
            }
        );
    } else {
        outln!(
            "check: {} finding(s) on this machine, {} file(s) of {} out of date{}{}",
            d.machine.len(),
            d.units.len(),
            d.folders,
            if remote_drift {
                ", remote checks out of step (automations healthchecks sync)"
            } else {
                ""
            },
            if !diff && d.units.iter().any(|u| u.diff().is_some()) {
                " (automations check --diff shows what differs)"
            } else {
                ""
            }
        );
    }
    Ok(if clean { Exit::Success } else { Exit::Failure })
}
