//! Applying a plan: unit files written atomically, loaded only when their bytes changed (or they
//! are not loaded), the install recorded; on any failure the previous files and record put back.

use super::{InstallError, Plan, file};
use crate::fsutil;
use crate::service::ServiceManager;
use crate::settings::{Manager, Settings};
use crate::state::State;

/// Applies an install plan; on failure restores the previous files and record.
pub fn apply_install(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    let new_record = plan.new_record.as_ref().expect("an install plan");
    manager.preflight()?;
    let changed = plan.files_change();
    if settings.manager == Manager::Launchd {
        // launchd does not create the folder of StandardOutPath.
        let logs = settings.layout().launchd_logs();
        fsutil::private_dir(&logs).map_err(file(format!("cannot create {}", logs.display())))?;
    }
    std::fs::create_dir_all(&settings.agents_dir).map_err(file(format!(
        "cannot create the agents folder {}",
        settings.agents_dir.display()
    )))?;
    let result = (|| -> Result<(), InstallError> {
        write_files(plan)?;
        // The record (with its install time) goes first: a daily job that launchd starts at
        // load (RunAtLoad) must already see it, or the slot guard would run the missed slot.
        State::new(&settings.data_root).record_install(&plan.name, new_record)?;
        if changed || !plan.loaded {
            manager
                .load(&plan.label, &settings.agents_dir, changed, plan.stop_wait)
                .map_err(|e| InstallError::from(e).then(format!("cannot load {}", plan.label)))?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        let restored = rollback(settings, plan, manager);
        return Err(match restored {
            Ok(()) => {
                e.then("install rolled back: the previous unit files and record are restored")
            }
            Err(r) => e.then(format!(
                "install failed and the rollback failed too: {}",
                crate::exit::chain_text(&r)
            )),
        });
    }
    Ok(())
}

fn write_files(plan: &Plan) -> Result<(), InstallError> {
    for f in plan.files.iter().filter(|f| f.differs()) {
        match &f.new {
            Some(bytes) => fsutil::write_durably(&f.path, bytes, 0o644)
                .map_err(file(format!("cannot write {}", f.path.display())))?,
            None => {
                fsutil::remove_if_exists(&f.path)
                    .map_err(file(format!("cannot remove {}", f.path.display())))?;
            }
        }
    }
    Ok(())
}

/// Puts back the files and record a plan found, and reloads what was loaded before.
fn rollback(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    if !plan.loaded {
        // This install may have loaded a unit that was not loaded before: take it down while its
        // files still exist (an error only means it never got loaded).
        let _ = manager.unload(&plan.label, &settings.agents_dir, plan.stop_wait);
    }
    for f in plan.files.iter().filter(|f| f.differs()) {
        match &f.old {
            Some(bytes) => fsutil::write_durably(&f.path, bytes, 0o644),
            None => fsutil::remove_if_exists(&f.path).map(|_| ()),
        }
        .map_err(file(format!("restoring {} failed", f.path.display())))?;
    }
    let state = State::new(&settings.data_root);
    match &plan.record {
        Some(r) => state.record_install(&plan.name, r),
        None => state.forget_install(&plan.name).map(|_| ()),
    }
    .map_err(|e| InstallError::from(e).then("restoring the install record failed"))?;
    let reload = manager.files_changed().and_then(|()| {
        if plan.loaded {
            manager.load(&plan.label, &settings.agents_dir, true, plan.stop_wait)
        } else {
            Ok(())
        }
    });
    reload.map_err(|e| {
        InstallError::from(e)
            .then("the previous unit files and record are restored but reloading them failed")
    })
}

/// Applies an uninstall plan. A unit that will not unload keeps its files and record.
pub fn apply_uninstall(
    settings: &Settings,
    plan: &Plan,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    manager.preflight()?;
    if plan.loaded || !plan.files.is_empty() {
        manager
            .unload(&plan.label, &settings.agents_dir, plan.stop_wait)
            .map_err(|e| {
                InstallError::from(e).then(format!(
                    "cannot unload {}; its files are left in place",
                    plan.label
                ))
            })?;
    }
    write_files(plan)?;
    manager.files_changed()?;
    State::new(&settings.data_root).forget_install(&plan.name)?;
    Ok(())
}

/// Uninstalls `name` again, as it is now (an install undone: what ran before runs on).
pub fn uninstall_again(
    settings: &Settings,
    name: &crate::names::Name,
    manager: &dyn ServiceManager,
) -> Result<(), InstallError> {
    let plan = super::plan_uninstall(settings, name, manager)?;
    apply_uninstall(settings, &plan, manager)
}
