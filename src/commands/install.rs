//! `install` and `uninstall` (docs/units.md): every automation named (or `--all`) in one plan, one
//! question, then each applied in turn. Nothing changes before the `y` — not a unit, not a record,
//! not the binary the units run — and a plan that changes nothing asks nothing. The logic of one
//! automation's plan lives in `install`; this is choosing, printing and asking.

use crate::exit::Exits as _;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use super::fail::{CmdResult, Fail};
use super::machine::{
    bad, checked_definitions, confirm, preflight, refuse_linked_worktree, require_terminal,
    unit_binary,
};
use super::{data_root, one_definition};
use crate::definition::Definition;
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::install::{self, Plan};
use crate::names::Name;
use crate::service::{self, ServiceManager};
use crate::settings::Settings;
use crate::state::State;
use crate::units;

/// The scheduled definitions named, or with `all` every scheduled definition; each name once.
fn to_install(settings: &Settings, names: &[Name], all: bool) -> Result<Vec<Definition>, Fail> {
    match (all, names.is_empty()) {
        (true, false) => return Err(bad("name automations or give --all, not both".into())),
        (false, true) => return Err(bad("name at least one automation, or give --all".into())),
        _ => {}
    }
    if all {
        let (examples, defs): (Vec<Definition>, Vec<Definition>) =
            checked_definitions(settings, true)?
                .into_iter()
                .filter(Definition::has_units)
                .partition(|d| d.example);
        for d in &examples {
            outln!(
                "{} is an example (example = true): --all leaves it out; `automations install {}` installs it",
                d.name,
                d.name
            );
        }
        if defs.is_empty() {
            return Err(bad(
                "no definition but the examples has a [schedule] or [trigger]: nothing to install"
                    .into(),
            ));
        }
        if let Some(def) = defs.iter().find(|d| d.policy.sandbox) {
            sandboxable(settings, &def.name)?;
        }
        return Ok(defs);
    }
    // Nothing is installed while the folder does not validate: a sibling's problem (a chain
    // loop, a broken definition it follows) is this install's too, as is an env file that would
    // fail every run.
    checked_definitions(settings, true)?;
    let mut defs: Vec<Definition> = Vec::new();
    for name in names {
        if defs.iter().any(|d| &d.name == name) {
            continue;
        }
        let def = one_definition(settings, name)?;
        if def.policy.sandbox {
            sandboxable(settings, name)?;
        }
        if !def.has_units() {
            return Err(bad(format!(
                "{name} has no [schedule] or [trigger]: there is nothing to install (run it with `automations run {name}`)"
            )));
        }
        defs.push(def);
    }
    Ok(defs)
}

/// Refuses the sandboxed automation `name` where it could not run once installed.
fn sandboxable(settings: &Settings, name: &Name) -> Result<(), Fail> {
    install::sandbox_refused(settings, name).map_or(Ok(()), |why| Err(bad(why)))
}

pub fn install(
    settings: &Settings,
    names: &[Name],
    all: bool,
    dry_run: bool,
    bin: Option<PathBuf>,
    install_binary: bool,
) -> CmdResult {
    let defs = to_install(settings, names, all)?;
    data_root(settings, if dry_run { Use::Read } else { Use::Write })?;
    let bin = unit_binary(bin)?;
    let manager = service::for_manager(settings.manager);
    let copy = if install_binary {
        install::BinaryCopy::plan(settings, &bin).map_err(|e| Fail::new(e.exit(), e))?
    } else {
        None
    };
    let paths = install::machine_paths(settings, &bin)?;
    // The binary first: replacing it changes every automation that runs it, not only these.
    if let Some(c) = &copy {
        outln!("{}", c.describe());
    }
    let mut plans = Vec::new();
    for def in &defs {
        let plan = install::plan_install(settings, def, &bin, manager.as_ref())?;
        if plan.is_empty() {
            outln!("{} is already installed and up to date", plan.label);
        } else {
            print_plan(def, &plan, &bin);
            match crate::install::sandbox_exposure(settings, def, &paths) {
                Some(Ok(exposure)) => outln!("  sandbox: {exposure}"),
                Some(Err(why)) => outln!("  sandbox: exposure not measured: {why}"),
                None => {}
            }
            plans.push((def, plan));
        }
    }
    if plans.is_empty() && copy.is_none() {
        // Nothing to change, nothing asked: what comes next for each, as after an install.
        for def in &defs {
            after_install(settings, def, &bin)?;
            super::healthchecks::up_to_date_hint(settings, &def.name);
        }
        return Ok(Exit::Success);
    }
    if dry_run {
        outln!("dry run: nothing changed");
        return Ok(Exit::Success);
    }
    refuse_linked_worktree(&settings.root)?;
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    check_binary(&bin, copy.is_some(), &names)?;
    let users = copy.as_ref().map(|c| c.users()).filter(|n| *n > 0);
    let mut question = match (plans.as_slice(), users) {
        ([], Some(users)) => format!("Replace the binary {users} installed automation(s) run"),
        ([], None) => "Install the binary".to_owned(),
        ([(_, plan)], _) => format!("Install {}", plan.label),
        (many, _) => format!("Install {} automations", many.len()),
    };
    if let (Some(users), false) = (users, plans.is_empty()) {
        question.push_str(&format!(
            " and replace the binary {users} installed automation(s) run"
        ));
    }
    require_terminal(&question)?;
    preflight(manager.as_ref())?;
    let installing: Vec<Definition> = plans.iter().map(|(d, _)| (*d).clone()).collect();
    for w in install::privacy_warnings(settings, &installing) {
        errln!("warning: {w}");
    }
    if !confirm(&question)? {
        outln!("not confirmed: nothing changed");
        return Ok(Exit::Failure);
    }
    if let Some(c) = &copy {
        c.apply()?;
        outln!("installed the binary at {}", c.to().display());
    }
    apply_each(settings, &plans, &bin, manager.as_ref())
}

/// One automation's install plan, as the question will cover it.
fn print_plan(def: &Definition, plan: &Plan, bin: &Path) {
    let words = crate::views::schedule_words(def);
    outln!(
        "install {} ({words}) running {}:",
        plan.label,
        bin.display()
    );
    out!("{}", plan.describe());
}

/// What follows an install in the same step (`import --adopt` retires the originals): what it
/// will do, said with the plan before the one question, and the doing, after every automation is
/// installed, which says what it did.
pub(super) struct Then<'a> {
    pub plan: Vec<String>,
    pub question: String,
    pub apply: Box<dyn FnOnce() -> Result<Vec<String>, crate::import::retire::RetireError> + 'a>,
}

/// What [`install_then`] would refuse before it asks — the binary the units run, a terminal to
/// ask at, a service manager that takes units — checked before an import writes anything.
pub(super) fn ready_to_install(
    settings: &Settings,
    names: &[&str],
    bin: Option<PathBuf>,
) -> Result<(), Fail> {
    let bin = unit_binary(bin)?;
    check_binary(&bin, false, names)?;
    refuse_linked_worktree(&settings.root)?;
    require_terminal("Install and retire the originals")?;
    preflight(service::for_manager(settings.manager).as_ref())
}

/// Installs `names` and then does `then`, after one question: when an install or `then` fails,
/// the automations installed in this step are uninstalled again, so what ran before runs on and
/// nothing runs twice.
pub(super) fn install_then(
    settings: &Settings,
    names: &[Name],
    bin: Option<PathBuf>,
    then: Then<'_>,
) -> CmdResult {
    let defs = to_install(settings, names, false)?;
    data_root(settings, Use::Write)?;
    let bin = unit_binary(bin)?;
    let manager = service::for_manager(settings.manager);
    let mut plans = Vec::new();
    for def in &defs {
        let plan = install::plan_install(settings, def, &bin, manager.as_ref())?;
        print_plan(def, &plan, &bin);
        plans.push((def, plan));
    }
    for line in &then.plan {
        outln!("{line}");
    }
    refuse_linked_worktree(&settings.root)?;
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    check_binary(&bin, false, &names)?;
    require_terminal(&then.question)?;
    preflight(manager.as_ref())?;
    if !confirm(&then.question)? {
        outln!("not confirmed: nothing installed, nothing retired");
        return Ok(Exit::Failure);
    }
    let undo = |done: &[(&Definition, Plan)]| {
        for (def, _) in done.iter().rev() {
            match install::uninstall_again(settings, &def.name, manager.as_ref()) {
                Ok(()) => errln!("uninstalled {} again", settings.label(&def.name)),
                Err(e) => errln!(
                    "warning: {} could not be uninstalled again: {why}",
                    settings.label(&def.name),
                    why = crate::exit::chain_text(&e)
                ),
            }
        }
        super::machine::record_chains(settings);
    };
    for (i, (def, plan)) in plans.iter().enumerate() {
        if let Err(e) = install::apply_install(settings, plan, manager.as_ref()) {
            undo(&plans[..i]);
            return Err(Fail::from(e).context(format!(
                "{} was not installed; nothing was retired",
                def.name
            )));
        }
        outln!("installed {}", plan.label);
    }
    super::machine::record_chains(settings);
    match (then.apply)() {
        Ok(lines) => {
            for line in lines {
                outln!("{line}");
            }
        }
        Err(e) => {
            undo(&plans);
            return Err(Fail::new(Exit::Failure, e).context(
                "the originals are as they were, and what this step installed is uninstalled again",
            ));
        }
    }
    for (def, _) in &plans {
        after_install(settings, def, &bin)?;
        super::healthchecks::after_install(settings, &def.name);
    }
    linger_warning(settings);
    Ok(Exit::Success)
}

/// Refuses a unit binary that would not stay (missing, or in a cargo build folder).
fn check_binary(bin: &Path, copied: bool, names: &[&str]) -> Result<(), Fail> {
    install::binary_refused(bin, copied, names).map_or(Ok(()), |why| {
        Err(Fail::new(Exit::Environment, anyhow!(why)))
    })
}

/// Applies each plan in turn; one that fails is rolled back (by `install`), the rest are not
/// tried, and what was and was not installed is said.
fn apply_each(
    settings: &Settings,
    plans: &[(&Definition, Plan)],
    bin: &Path,
    manager: &dyn ServiceManager,
) -> CmdResult {
    for (i, (def, plan)) in plans.iter().enumerate() {
        if let Err(e) = install::apply_install(settings, plan, manager) {
            let done: Vec<&str> = plans[..i].iter().map(|(d, _)| d.name.as_str()).collect();
            let left: Vec<&str> = plans[i + 1..]
                .iter()
                .map(|(d, _)| d.name.as_str())
                .collect();
            if !done.is_empty() || !left.is_empty() {
                errln!(
                    "installed: {}; not tried: {}",
                    list_or_none(&done),
                    list_or_none(&left)
                );
            }
            // Those installed before it chain as their definitions say.
            super::machine::record_chains(settings);
            return Err(Fail::from(e).context(format!("{} was not installed", def.name)));
        }
        outln!("installed {}", plan.label);
        if let Err(e) = after_install(settings, def, bin) {
            super::machine::record_chains(settings);
            return Err(e);
        }
        super::healthchecks::after_install(settings, &def.name);
    }
    super::machine::record_chains(settings);
    linger_warning(settings);
    Ok(Exit::Success)
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The names to uninstall: those given, or with `all` every automation with an install record.
fn to_uninstall(settings: &Settings, names: &[Name], all: bool) -> Result<Vec<Name>, Fail> {
    match (all, names.is_empty()) {
        (true, false) => Err(bad("name automations or give --all, not both".into())),
        (false, true) => Err(bad("name at least one automation, or give --all".into())),
        (true, true) => Ok(State::new(&settings.data_root)
            .install_records_each()?
            .into_keys()
            .collect()),
        (false, false) => {
            let mut out: Vec<Name> = Vec::new();
            for n in names {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
            Ok(out)
        }
    }
}

pub fn uninstall(settings: &Settings, names: &[Name], all: bool, dry_run: bool) -> CmdResult {
    let names = to_uninstall(settings, names, all)?;
    data_root(settings, if dry_run { Use::Read } else { Use::Write })?;
    let manager = service::for_manager(settings.manager);
    let mut plans = Vec::new();
    for name in &names {
        let plan = install::plan_uninstall(settings, name, manager.as_ref())?;
        if plan.files.is_empty() && plan.record.is_none() && !plan.loaded {
            outln!(
                "{} is not installed on this machine: nothing to do",
                plan.label
            );
        } else {
            outln!("uninstall {}:", plan.label);
            out!("{}", plan.describe());
            plans.push(plan);
        }
    }
    if plans.is_empty() {
        if all {
            outln!("nothing is installed on this machine");
        }
        return Ok(Exit::Success);
    }
    if dry_run {
        outln!("dry run: nothing changed");
        return Ok(Exit::Success);
    }
    let question = match plans.as_slice() {
        [plan] => format!("Uninstall {}", plan.label),
        many => format!("Uninstall {} automations", many.len()),
    };
    require_terminal(&question)?;
    preflight(manager.as_ref())?;
    if !confirm(&question)? {
        outln!("not confirmed: nothing changed");
        return Ok(Exit::Failure);
    }
    for (i, plan) in plans.iter().enumerate() {
        if let Err(e) = install::apply_uninstall(settings, plan, manager.as_ref()) {
            let done: Vec<&str> = plans[..i].iter().map(|p| p.name.as_str()).collect();
            let left: Vec<&str> = plans[i + 1..].iter().map(|p| p.name.as_str()).collect();
            if !done.is_empty() || !left.is_empty() {
                errln!(
                    "uninstalled: {}; not tried: {}",
                    list_or_none(&done),
                    list_or_none(&left)
                );
            }
            super::machine::record_chains(settings);
            return Err(Fail::from(e).context(format!("{} was not uninstalled", plan.name)));
        }
        outln!("uninstalled {}", plan.label);
        // It pings no more: what came of its pings (a failing streak) goes with it.
        if let Err(e) = crate::state::forget_pings(&settings.data_root, &plan.name) {
            errln!("warning: {e}");
        }
    }
    if let Some(file) = crate::metrics::textfile::after_uninstall(settings) {
        outln!(
            "removed the metrics textfile {}: nothing installed here keeps it current (a manual run writes it again)",
            file.display()
        );
    }
    let records: Vec<&crate::state::Record> =
        plans.iter().filter_map(|p| p.record.as_ref()).collect();
    let names: Vec<&Name> = plans.iter().map(|p| &p.name).collect();
    for line in install::left_behind(settings, &names, &records) {
        outln!("{line}");
    }
    for plan in &plans {
        super::healthchecks::uninstall_hint(settings, &plan.name);
    }
    super::machine::record_chains(settings);
    Ok(Exit::Success)
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
        let zone = def.schedule.as_ref().and_then(|s| s.zone());
        outln!("next firing: {}{jitter}", next.words_in(&now, zone));
    }
    let paths = install::machine_paths(settings, bin)?;
    outln!(
        "run it now: {}",
        units::run_now_command(def, &settings.namespace, &paths)
    );
    Ok(())
}

/// The warning that timers fire only while the user is logged in, when it applies.
fn linger_warning(settings: &Settings) {
    if let Some(w) = install::linger_warning(settings) {
        errln!("warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Manager, OsFacts, Overrides};

    /// A sandboxed automation on macOS is refused before anything is planned, by name and with the
    /// way out; an unsandboxed one is not.
    #[test]
    fn launchd_refuses_a_sandboxed_automation() {
        let d = tempfile::tempdir().unwrap();
        let (home, root) = (d.path().join("home"), d.path().join("repo"));
        std::fs::create_dir_all(root.join("automations")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            root.join("automations/boxed.toml"),
            "name = \"boxed\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"03:00\"\n[sandbox]\nlevel = \"strict\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("automations/open.toml"),
            "name = \"open\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"03:00\"\n",
        )
        .unwrap();
        let flags = Overrides {
            root: Some(root.clone()),
            data_root: Some(d.path().join("data")),
            ..Overrides::default()
        };
        let mac = Settings::resolve(
            &flags,
            &OsFacts::new(home.clone(), root.clone(), Manager::Launchd, vec![]),
        )
        .unwrap();
        let boxed = Name::new("boxed").unwrap();
        for refused in [
            to_install(&mac, std::slice::from_ref(&boxed), false),
            to_install(&mac, &[], true),
        ] {
            let e = format!("{:#}", refused.expect_err("refused").error);
            assert!(
                e.contains(
                    "boxed asks for [sandbox] level = \"strict\", which launchd cannot give"
                ),
                "{e}"
            );
            assert!(
                e.contains("Remove [sandbox] from automations/boxed.toml"),
                "{e}"
            );
        }
        assert!(to_install(&mac, &[Name::new("open").unwrap()], false).is_ok());
        // On Linux the sandbox is refused only where its unit could not see the repository.
        let under_tmp = crate::sandbox::placement_problem(&root, &d.path().join("data")).is_some();
        let linux =
            Settings::resolve(&flags, &OsFacts::new(home, root, Manager::Systemd, vec![])).unwrap();
        match to_install(&linux, &[boxed], false) {
            Ok(_) => assert!(!under_tmp),
            Err(e) => {
                let e = format!("{:#}", e.error);
                let no_landlock = crate::sandbox::Support::here().landlock.is_err();
                assert!(
                    (under_tmp && e.contains("PrivateTmp=yes hides")) || no_landlock,
                    "{e}"
                );
            }
        }
    }
}
