//! How a command fails: an error on its way to the user and the exit code it ends in, which the
//! error itself says ([`Exits`]) or the command chooses (`Fail::new`). Printed once, by the
//! crate's `run`.

use crate::exit::{Exit, Exits};

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

/// An error that says its exit fails the command with it.
impl<E: Exits> From<E> for Fail {
    fn from(error: E) -> Self {
        Self {
            exit: error.exit(),
            error: error.into(),
        }
    }
}

/// `context` and `with_context` for what a command fails with: the words said first, the exit the
/// error's own (an error that says no exit does not convert: see [`Exits`]).
pub trait FailContext<T> {
    /// Says `context` first.
    fn context<C>(self, context: C) -> Result<T, Fail>
    where
        C: std::fmt::Display + Send + Sync + 'static;

    /// Says what `context` makes first, made only on failure.
    fn with_context<C, F>(self, context: F) -> Result<T, Fail>
    where
        C: std::fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C;
}

impl<T, E: Into<Fail>> FailContext<T> for Result<T, E> {
    fn context<C>(self, context: C) -> Result<T, Fail>
    where
        C: std::fmt::Display + Send + Sync + 'static,
    {
        self.map_err(|e| e.into().context(context))
    }

    fn with_context<C, F>(self, context: F) -> Result<T, Fail>
    where
        C: std::fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C,
    {
        self.map_err(|e| e.into().context(context()))
    }
}

impl Fail {
    /// This failure with `context` said first; the same exit.
    pub fn context<C>(self, context: C) -> Self
    where
        C: std::fmt::Display + Send + Sync + 'static,
    {
        Self {
            exit: self.exit,
            error: self.error.context(context),
        }
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
