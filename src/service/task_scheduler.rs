//! Task Scheduler through `schtasks.exe` (docs/windows.md): a task per label at
//! `\local\<namespace>\<name>`, created from the XML the install wrote into the agents folder.
//!
//! `schtasks` exits 1 for every failure, and its words are in the machine's language, so "not
//! there" is never read from an error: which tasks exist is read from one listing
//! (`/Query /FO CSV /NH`, whose first column is each task's full path), and a failed delete of a
//! task the listing no longer shows is a task already gone.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::exec::Program;
use super::{ExecError, PreflightError, ServiceManager};
use crate::names::Label;
use crate::settings::Manager;

/// The program on PATH (`%SystemRoot%\System32\schtasks.exe`).
pub const SCHTASKS: &str = "schtasks";

/// The Task Scheduler backend.
pub struct TaskScheduler {
    program: Program,
}

impl TaskScheduler {
    /// A backend calling `schtasks` (a path).
    pub fn new(schtasks: &str) -> Self {
        Self {
            program: Program::new(schtasks),
        }
    }

    /// Every task's full path (`\local\automations\backup`), from one listing.
    fn tasks(&self) -> Result<BTreeSet<String>, ExecError> {
        let done = self.program.run(&["/Query", "/FO", "CSV", "/NH"])?;
        Ok(done
            .stdout
            .lines()
            .filter_map(|line| {
                let rest = line.trim().strip_prefix('"')?;
                Some(rest.split_once('"')?.0.to_owned())
            })
            .collect())
    }

    fn exists(&self, label: &Label) -> Result<bool, ExecError> {
        Ok(self.tasks()?.contains(&task_path(label)))
    }
}

/// `local.<namespace>.<name>` as the task's path, `\local\<namespace>\<name>` (a name has no dot).
pub fn task_path(label: &Label) -> String {
    let (namespace, name) = label
        .as_str()
        .strip_prefix("local.")
        .and_then(|rest| rest.rsplit_once('.'))
        .unwrap_or(("", label.as_str()));
    format!("\\local\\{namespace}\\{name}")
}

impl ServiceManager for TaskScheduler {
    fn manager(&self) -> Manager {
        Manager::TaskScheduler
    }

    fn preflight(&self) -> Result<(), PreflightError> {
        self.tasks().map(drop).map_err(PreflightError::Unreachable)
    }

    fn loaded(&self, labels: &[Label]) -> Result<BTreeSet<Label>, ExecError> {
        let tasks = self.tasks()?;
        Ok(labels
            .iter()
            .filter(|l| tasks.contains(&task_path(l)))
            .cloned()
            .collect())
    }

    /// `/Create /XML … /F` replaces a task in place; a firing under way goes on to its end.
    fn load(
        &self,
        label: &Label,
        agents_dir: &Path,
        changed: bool,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        if !changed && self.exists(label)? {
            return Ok(());
        }
        let xml = agents_dir.join(format!("{label}.xml"));
        let xml = xml.to_string_lossy();
        let path = task_path(label);
        self.program
            .run(&["/Create", "/TN", &path, "/XML", &xml, "/F"])?;
        if self.exists(label)? {
            Ok(())
        } else {
            Err(ExecError {
                command: format!("schtasks /Create /TN {path} /XML {xml} /F"),
                what: "succeeded but the task is not listed".into(),
                code: None,
                stderr: String::new(),
            })
        }
    }

    /// `/Delete … /F`; a firing under way goes on to its end (Task Scheduler does not stop it).
    fn unload(
        &self,
        label: &Label,
        _agents_dir: &Path,
        _stop_wait: Duration,
    ) -> Result<(), ExecError> {
        match self
            .program
            .run(&["/Delete", "/TN", &task_path(label), "/F"])
        {
            Ok(_) => Ok(()),
            // Gone already (or never there): nothing to delete.
            Err(e) if self.exists(label)? => Err(e),
            Err(_) => Ok(()),
        }
    }

    fn stopped_watches(&self, _labels: &[Label]) -> Result<Vec<(Label, String)>, ExecError> {
        Ok(Vec::new())
    }

    fn start(&self, label: &Label) -> Result<(), ExecError> {
        self.program
            .run(&["/Run", "/TN", &task_path(label)])
            .map(drop)
    }

    fn files_changed(&self) -> Result<(), ExecError> {
        Ok(())
    }

    fn reachable(&self) -> Result<(), ExecError> {
        self.tasks().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{Name, Namespace};

    #[test]
    fn a_label_is_its_task_path() {
        let label = Label::new(
            &Namespace::new("automations").unwrap(),
            &Name::new("backup").unwrap(),
        );
        assert_eq!(task_path(&label), "\\local\\automations\\backup");
        assert_eq!(
            task_path(&label),
            crate::units::windows::task_path(
                &Namespace::new("automations").unwrap(),
                &Name::new("backup").unwrap()
            )
        );
    }
}
