//! Commands about this machine's units: `units`, `render`, `install`, `uninstall`, `check`,
//! `doctor`. Logic lives in `units`, `service` and `install`; this is parsing and printing.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::fail::FailContext;
use anyhow::anyhow;

use super::fail::{CmdResult, Fail};
use super::{data_root, load_all, one_definition};
use crate::cli::RenderTarget;
use crate::definition::Definition;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::install::{self, Finding};
use crate::names::Name;
use crate::service::{self, ServiceManager};
use crate::settings::{Manager, Settings};
use crate::units::portable::{self, Rendered};
use crate::units::{self, kubernetes};

pub(super) fn bad(msg: String) -> Fail {
    Fail::new(Exit::BadInput, anyhow!(msg))
}

/// Every definition, or exit 2 with every problem.
pub(super) fn valid_definitions(settings: &Settings) -> Result<Vec<Definition>, Fail> {
    checked_definitions(settings, false)
}

/// [`valid_definitions`], and with `env` no private env file any of them would fail on either
/// (what `install` needs of this machine).
pub(super) fn checked_definitions(settings: &Settings, env: bool) -> Result<Vec<Definition>, Fail> {
    let loaded = load_all(settings)?;
    let mut lines: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    if env {
        lines.extend(env_problems(settings, &loaded.definitions));
    }
    if !lines.is_empty() {
        return Err(bad(format!(
            "invalid definitions (run `automations validate`):\n{}",
            lines.join("\n")
        )));
    }
    Ok(loaded.definitions)
}

/// What is wrong with the private env files of `defs` on this machine (a file every run of its
/// automation would fail on), one line each, located like a definition's problems.
pub(super) fn env_problems(settings: &Settings, defs: &[Definition]) -> Vec<String> {
    defs.iter()
        .filter(|d| !d.env.is_empty())
        .filter_map(|d| {
            let file = settings.layout().env_file(&d.name);
            crate::runner::env::read_env_file(&file)
                .err()
                .map(|e| format!("automations/{}.toml: env: {e}", d.name))
        })
        .collect()
}

/// The binary units will run: `--bin`, else this one; absolute, links resolved when it exists.
pub(super) fn unit_binary(bin: Option<PathBuf>) -> Result<PathBuf, Fail> {
    let bin = match bin {
        Some(b) if b.is_absolute() => b,
        Some(b) => std::env::current_dir()?.join(b),
        None => crate::settings::this_binary()?,
    };
    Ok(crate::platform::canonical(&bin).unwrap_or(bin))
}

/// What the rendered folders should hold (`units/`, and `kubernetes/` where the repository opted
/// in).
fn desired(settings: &Settings, defs: &[Definition]) -> Result<Rendered, Fail> {
    Rendered::of(&settings.root, &settings.namespace, defs).map_err(bad)
}

/// What the rendered folders hold now, of those rendered.
fn present(settings: &Settings, rendered: &Rendered) -> Result<BTreeMap<PathBuf, Vec<u8>>, Fail> {
    rendered.present(&settings.root).with_context(|| {
        format!(
            "cannot read {} in {}",
            rendered.folders,
            settings.root.display()
        )
    })
}

/// How a problem of the cluster target is said: `kubernetes/ not rendered: …`.
fn cluster_line(problem: &str) -> String {
    format!(
        "{}/ not rendered ({} opted in to the Kubernetes target): {problem}",
        kubernetes::DIR,
        kubernetes::SETTINGS_FILE
    )
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
    let rendered = desired(settings, &defs)?;
    let (desired, folders) = (&rendered.files, rendered.folders);
    let cluster_failed = || {
        let problem = rendered.cluster_problem.as_deref()?;
        errln!("automations: {}", cluster_line(problem));
        Some(Exit::BadInput)
    };
    if check {
        let present = present(settings, &rendered)?;
        let diffs = portable::compare(&present, desired);
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
            return Ok(cluster_failed().unwrap_or(Exit::Success));
        }
        outln!(
            "{folders} out of date: run `automations units` (make automations-units) and commit"
        );
        cluster_failed();
        return Ok(Exit::Failure);
    }
    let fixed = portable::write(
        &settings.root,
        desired,
        rendered.cluster_problem.is_none(),
        &rendered.targets,
    )
    .with_context(|| format!("cannot write {folders} in {}", settings.root.display()))?;
    for d in &fixed {
        outln!("{}", d.line().replace(": ", ": rewrote, was "));
    }
    outln!(
        "{folders}: {} file(s), {} rewritten",
        desired.len(),
        fixed.len()
    );
    record_chains(settings);
    Ok(cluster_failed().unwrap_or(Exit::Success))
}

/// Writes who follows whom from the definitions as they are now (`install::record_chains`); a
/// failure is said, never fatal.
pub(super) fn record_chains(settings: &Settings) {
    if let Err(e) = install::record_chains(settings) {
        errln!("warning: {}", crate::exit::chain_text(&e));
    }
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
            let cluster = kubernetes::Cluster::load(&settings.root).map_err(bad)?.ok_or_else(|| {
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
                Some(RenderTarget::Windows) => units::Target::Windows,
                _ => units::Target::of(settings.manager),
            };
            let paths = install::machine_paths(settings, &unit_binary(bin)?)?;
            let files = units::render(&def, &settings.namespace, &paths, target).map_err(bad)?;
            if files.is_empty() {
                return Err(bad(format!(
                    "{name} has no [schedule] or [trigger]: there is no unit to render"
                )));
            }
            // Where the manager reads them; a task has no folder (`schtasks /Create /XML` takes
            // the file from anywhere, and keeps the task in its own store).
            let folder = match target {
                units::Target::Launchd => settings.agents_dir_of(Manager::Launchd),
                units::Target::Systemd => settings.agents_dir_of(Manager::Systemd),
                // Not `units/windows/`: that is the portable copy, which `check` compares.
                units::Target::Windows => PathBuf::new(),
            };
            (files, folder)
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

/// Refuses a root that is a linked git worktree (`install::linked_worktree`).
pub(super) fn refuse_linked_worktree(root: &Path) -> Result<(), Fail> {
    install::linked_worktree(root).map_or(Ok(()), |why| {
        Err(Fail::new(Exit::Environment, anyhow!(why)))
    })
}

/// Refuses unless stdin and stdout are a terminal, where a person can type y.
pub(super) fn require_terminal(question: &str) -> Result<(), Fail> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(bad(format!(
            "{question}: needs a person at a terminal (stdin and stdout must be a terminal) to type y; use --dry-run to see the plan"
        )));
    }
    Ok(())
}

/// Asks the person at the terminal to type y. There is deliberately no flag or variable that
/// answers for them.
pub(super) fn confirm(question: &str) -> Result<bool, Fail> {
    require_terminal(question)?;
    out!("{question}? Type y to confirm: ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Refuses, before anything is asked or written, a machine where the manager cannot take units.
pub(super) fn preflight(manager: &dyn ServiceManager) -> Result<(), Fail> {
    manager
        .preflight()
        .map_err(|e| Fail::new(Exit::Environment, e))
}

/// The lines `check` prints of the remote checks.
fn remote_lines(r: &Result<Vec<String>, String>, say: &mut dyn FnMut(&str)) {
    match r {
        Ok(lines) if lines.is_empty() => say("healthchecks: the remote checks are in step"),
        Ok(lines) => {
            for l in lines {
                // Each line already ends with its own fix.
                say(&format!("healthchecks: {l}"));
            }
        }
        Err(e) => say(&format!(
            "healthchecks: the remote checks were not looked at: {e}"
        )),
    }
}

/// Both halves of the drift check.
pub(super) struct Drift {
    pub units: Vec<portable::Difference>,
    /// The rendered folders compared (`units/`, and `kubernetes/` when there is a cluster).
    pub folders: &'static str,
    pub machine: Vec<Finding>,
    /// Why `kubernetes/` could not be rendered, when the repository has a `kubernetes.toml`.
    pub cluster_problem: Option<String>,
}

pub(super) fn drift(settings: &Settings, manager: &dyn ServiceManager) -> Result<Drift, Fail> {
    let defs = valid_definitions(settings)?;
    let rendered = desired(settings, &defs)?;
    let present = present(settings, &rendered)?;
    Ok(Drift {
        units: portable::compare(&present, &rendered.files),
        folders: rendered.folders,
        machine: install::check_machine(settings, &defs, manager)?,
        cluster_problem: rendered.cluster_problem,
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
    let remote = crate::healthchecks::installed::drift(settings);
    let remote_drift = matches!(&remote, Some(Ok(lines)) if !lines.is_empty());
    let clean =
        d.units.is_empty() && d.machine.is_empty() && !remote_drift && d.cluster_problem.is_none();
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
            serde_json::json!({"version": 1, "ok": clean, "units": units, "machine": d.machine, "kubernetes": d.cluster_problem, "fixes": fixes})
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
    if let Some(problem) = &d.cluster_problem {
        outln!("{}", cluster_line(problem));
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
            "check: {} finding(s) on this machine, {} file(s) of {} out of date{}{}{}",
            d.machine.len(),
            d.units.len(),
            d.folders,
            if d.cluster_problem.is_some() {
                ", kubernetes/ not rendered"
            } else {
                ""
            },
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
