//! `run NAME --unit`: the installed unit starts the firing now, as its timer would (pins, sandbox,
//! limits; past the slot guard: a request file tells the firing a person asked), and this waits
//! for its record.

use std::time::{Duration, Instant};

use crate::definition::Definition;
use crate::exit::Exit;
use crate::names::{Label, Name};
use crate::runlog::{RunLog, Trigger};
use crate::service::ExecError;
use crate::settings::Settings;
use crate::state::{State, StateError};

use super::Report;

/// Why no run of the unit can be said.
#[derive(Debug, thiserror::Error)]
pub enum UnitRunError {
    #[error(
        "{0} is not installed here: --unit starts its installed unit (make automations-install NAME={0}), or run it without --unit"
    )]
    NotInstalled(Name),
    #[error("cannot leave the unit its request")]
    Request(#[source] StateError),
    #[error(
        "{0}'s unit did not run it (its manager says why: systemctl --user status {0}.service)"
    )]
    NotStarted(Label, #[source] ExecError),
    #[error(
        "{0}'s unit started, but no run of it was recorded (it was already running, or could not start)"
    )]
    NotRecorded(Label),
}

impl crate::exit::Exits for UnitRunError {
    /// Not installed is the person's to change (2); the rest fail (1).
    fn exit(&self) -> Exit {
        match self {
            Self::NotInstalled(_) => Exit::BadInput,
            Self::Request(_) | Self::NotStarted(..) | Self::NotRecorded(_) => Exit::Failure,
        }
    }
}

/// Starts `def`'s installed unit and waits, as long as a firing may take, for the run it records.
pub fn run(settings: &Settings, def: &Definition) -> Result<Report, UnitRunError> {
    let name = &def.name;
    let state = State::new(&settings.data_root);
    if state.install_record(name).ok().flatten().is_none() {
        return Err(UnitRunError::NotInstalled(name.clone()));
    }
    let layout = settings.layout();
    let since = chrono::Utc::now() - chrono::Duration::milliseconds(5);
    super::cause::leave_unit_request(&layout, name).map_err(UnitRunError::Request)?;
    let label = Label::new(&settings.namespace, name);
    // As long as a firing may take: its timeout, a queued wait, the unit's backstop, slack.
    let wait = Duration::from_secs(u64::from(def.timeout_seconds) * 2 + 120);
    let started = crate::service::for_manager(settings.manager).start_and_wait(&label, wait);
    let until = Instant::now()
        + if started.is_ok() {
            wait
        } else {
            Duration::ZERO
        };
    let report = loop {
        if let Some(r) = recorded(settings, name, since) {
            break Some(r);
        }
        if Instant::now() >= until {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // A start folded into a firing already under way takes no request: none is left for later.
    let _ = crate::fsutil::remove_if_exists(&layout.unit_request(name));
    match (report, started) {
        (Some(r), _) => Ok(r),
        (None, Err(e)) => Err(UnitRunError::NotStarted(label, e)),
        (None, Ok(())) => Err(UnitRunError::NotRecorded(label)),
    }
}

/// The firing a `run --unit` asked for, once it is recorded: its skip, or its end.
fn recorded(
    settings: &Settings,
    name: &Name,
    since: chrono::DateTime<chrono::Utc>,
) -> Option<Report> {
    use crate::runlog::Event;
    let mut finished: Option<Box<crate::runlog::Finished>> = None;
    for rec in RunLog::new(&settings.data_root).backwards() {
        if rec.time().is_some_and(|t| t < since) {
            return None;
        }
        if rec.name != name.as_str() {
            continue;
        }
        match rec.event {
            Event::Skipped(s) if s.trigger == Trigger::Unit => {
                return Some(Report::Skipped {
                    reason: s.reason,
                    detail: String::new(),
                });
            }
            Event::Finished(f) if finished.is_none() => finished = Some(Box::new(f)),
            Event::Started(s) if s.trigger == Trigger::Unit => {
                let f = finished.filter(|f| f.run == s.run)?;
                return Some(Report::Finished {
                    run: s.run,
                    finished: f,
                    auto_paused: None,
                    of_this_run: Vec::new(),
                });
            }
            _ => {}
        }
    }
    None
}
