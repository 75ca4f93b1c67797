//! A home folder, a repository and a data root in a temporary folder, for the readers' tests.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::definition::Checks;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub checks: Checks,
    pub existing: BTreeSet<String>,
}

impl Fixture {
    /// With `folders` made below the temporary folder besides `home`, `repo/scripts` and `data`.
    pub fn new(folders: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "repo/scripts", "data"].iter().chain(folders) {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let checks = Checks {
            home: dir.path().join("home"),
            data_root: dir.path().join("data"),
            units_dir: "/nonexistent-units".into(),
        };
        Self {
            dir,
            checks,
            existing: BTreeSet::new(),
        }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// `f` with the context `import launchd` and `import systemd` read in.
    pub fn with_context<R>(
        &self,
        copy_scripts: bool,
        f: impl FnOnce(&super::Context<'_>) -> R,
    ) -> R {
        let (home, root) = (self.home(), self.root());
        f(&super::Context {
            home: &home,
            root: &root,
            checks: &self.checks,
            existing: &self.existing,
            copy_scripts,
            own_prefix: "local.automations.",
        })
    }
}
