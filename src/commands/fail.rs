//! How a command fails: an error on its way to the user and the exit code it ends in, decided
//! from what the error is ([`exit_for`]). Printed once, by the crate's `run`.

use crate::exit::Exit;
use crate::fsutil;
use crate::runlog;
use crate::settings;

/// An error on its way to the user, with the exit code it ends in.
#[derive(Debug)]
pub struct Fail {
    /// The exit code.
    pub exit: Exit,
    /// What went wrong, with its cause chain.
    pub error: anyhow::Error,
}

impl Fail {
    /// A failure with an explicit exit code.
    pub fn new(exit: Exit, error: impl Into<anyhow::Error>) -> Self {
        Self {
            exit,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Fail {
    fn from(error: E) -> Self {
        let error = error.into();
        Self {
            exit: exit_for(&error),
            error,
        }
    }
}

/// Exit 3 when anything in the chain says the environment is unusable: settings, the data root,
/// a file in it that is not a regular file (or is a link), a run log that cannot be opened; exit 2
/// for a settings file whose contents are wrong; else 1.
pub fn exit_for(error: &anyhow::Error) -> Exit {
    let settings_file = error
        .chain()
        .find_map(|c| c.downcast_ref::<settings::file::Refused>());
    match settings_file.map(|r| r.kind) {
        Some(settings::file::Problem::Unusable) => return Exit::Environment,
        Some(settings::file::Problem::Invalid) => return Exit::BadInput,
        None => {}
    }
    let environment = error.chain().any(|cause| {
        cause.is::<settings::SettingsError>()
            || cause.is::<fsutil::DataRootError>()
            || cause.is::<runlog::reserve::DiskFull>()
            || cause
                .downcast_ref::<runlog::LogError>()
                .is_some_and(runlog::LogError::unusable)
            || cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| fsutil::FileError::of(e).is_some())
    });
    if environment {
        Exit::Environment
    } else {
        Exit::Failure
    }
}

/// The result of a command.
pub type CmdResult = Result<Exit, Fail>;

/// Whether `error` is only that the reader went away (`automations runs | head -1`).
pub fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(crate::platform::broken_pipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}
