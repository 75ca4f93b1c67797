//! The binary the units run, put in place by an install (`install --install-binary`, which `make
//! automations-install` gives): this program's own bytes, copied beside the target and renamed over
//! it, only when they differ.

use std::path::{Path, PathBuf};

use crate::exit::Exit;
use crate::settings::Settings;
use crate::state::State;

/// Why the copy cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("cannot find this program's own file: {0}")]
    Ours(#[source] std::io::Error),
    #[error("cannot read {}", .0.display())]
    Read(PathBuf, #[source] std::io::Error),
    #[error("{} is there and is no regular file: the units' binary cannot go there", .0.display())]
    NotAFile(PathBuf),
    #[error("cannot create {}", .0.display())]
    Folder(PathBuf, #[source] std::io::Error),
    #[error("cannot install the binary at {}", .0.display())]
    Install(PathBuf, #[source] std::io::Error),
}

impl crate::exit::Exits for BinaryError {
    /// A target that is no file is the person's to change (2); the rest, this machine's (1).
    fn exit(&self) -> Exit {
        match self {
            Self::NotAFile(_) => Exit::BadInput,
            Self::Ours(_) | Self::Read(..) | Self::Folder(..) | Self::Install(..) => Exit::Failure,
        }
    }
}

/// The binary the units run, put in place by this install (`--install-binary`, which
/// `make automations-install` gives): from this program's own file to `to`, when they differ.
pub struct BinaryCopy {
    from: PathBuf,
    /// This program's bytes as they were compared: what is written, whatever happens to `from`
    /// (a rebuild) before the y.
    bytes: Vec<u8>,
    to: PathBuf,
    /// Whether a binary is there now (else it is created).
    replaces: bool,
    /// The installed automations whose units run `to` now.
    users: usize,
}

impl BinaryCopy {
    /// What copying would change; `None` when `to` already holds these bytes.
    pub fn plan(settings: &Settings, to: &Path) -> Result<Option<Self>, BinaryError> {
        let from = crate::settings::this_binary().map_err(BinaryError::Ours)?;
        let from = crate::platform::canonical(&from).unwrap_or(from);
        if std::fs::symlink_metadata(to).is_ok_and(|m| !m.is_file()) {
            return Err(BinaryError::NotAFile(to.to_path_buf()));
        }
        let ours = std::fs::read(&from).map_err(|e| BinaryError::Read(from.clone(), e))?;
        let same_size = std::fs::metadata(to).is_ok_and(|m| m.len() == ours.len() as u64);
        if same_size && std::fs::read(to).is_ok_and(|b| b == ours) {
            return Ok(None);
        }
        let there = to.exists();
        let to_text = to.to_string_lossy();
        let users = State::new(&settings.data_root)
            .install_records()
            .map(|r| r.values().filter(|r| r.bin == to_text).count())
            .unwrap_or(0);
        Ok(Some(Self {
            from,
            bytes: ours,
            to: to.to_path_buf(),
            replaces: there,
            users,
        }))
    }

    /// The installed automations whose units run it now.
    pub fn users(&self) -> usize {
        self.users
    }

    /// Where the binary goes.
    pub fn to(&self) -> &Path {
        &self.to
    }

    /// The plan's line.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "{} the binary {} (a copy of {})",
            if self.replaces { "replace" } else { "install" },
            self.to.display(),
            self.from.display()
        );
        if self.users > 0 {
            line.push_str(&format!(
                "; the {} installed automation(s) that run it take the new build from their next firing",
                self.users
            ));
        }
        line
    }

    /// Copies beside the target, then renames over it: a firing running the old binary is never
    /// disturbed, and a reader never sees half a file.
    pub fn apply(&self) -> Result<(), BinaryError> {
        let dir = self.to.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| BinaryError::Folder(dir.into(), e))?;
        let tmp = dir.join(format!(".automations.new-{}", std::process::id()));
        // One left by an install that was killed here, with this pid, is no one's.
        let _ = std::fs::remove_file(&tmp);
        let copied = (|| {
            use crate::platform::OpenOptionsExt as _;
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o700)
                .open(&tmp)?;
            file.write_all(&self.bytes)?;
            // 0755 whatever the umask, as `install -m 0755` made it.
            crate::platform::set_mode(&file, 0o755)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.to)?;
            crate::platform::sync_dir(dir)
        })();
        if copied.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        copied.map_err(|e| BinaryError::Install(self.to.clone(), e))
    }
}
