//! node_exporter's textfile collector: `<data root>/metrics.toml` names a `.prom` file. Every
//! firing, skipped or not, and every pause, resume, ack, snooze and unsnooze puts its automation's
//! samples now into it; `health`, `notify look` (of every automation), `stop-all`, `resume-all`
//! and `uninstall` write it whole (and an uninstall that leaves nothing installed removes it).
//! Each write is a new file renamed over the old one, so the collector never reads half of one,
//! and writers take turns (`state/metrics.lock`), so a whole write never puts back what a firing
//! just replaced (docs/metrics.md). None of it ever fails or changes a run or a command: a problem
//! is one line on stderr, naming the file.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Format, Machine, MetricsError, Samples};
use crate::layout::SettingsFile;
use crate::names::Name;
use crate::settings::Settings;
use crate::settings::file;

/// The settings file.
pub const FILE: SettingsFile = SettingsFile::Metrics;
/// The largest textfile read back to merge one automation's samples into.
const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// How long a firing (or a switch) waits for another writer before leaving its samples to the
/// next write: a firing is not over until this is.
const ONE_WAIT: Duration = Duration::from_secs(1);
/// How long a whole write waits for another writer.
const WHOLE_WAIT: Duration = Duration::from_secs(10);

/// Where the textfile goes, when `metrics.toml` names one.
fn configured(data_root: &Path) -> Result<Option<PathBuf>, file::Refused> {
    Ok(file::load(data_root, FILE, parse_table)?.flatten())
}

fn parse_table(t: &toml::Table) -> Result<Option<PathBuf>, Vec<String>> {
    let mut problems: Vec<String> = t
        .keys()
        .filter(|k| *k != "textfile")
        .map(|k| format!("{k}: unknown key (the one key is textfile)"))
        .collect();
    let path = match t.get("textfile") {
        None => None,
        Some(toml::Value::String(p)) => {
            let path = PathBuf::from(p);
            if !path.is_absolute() {
                problems.push(format!("textfile: {p:?} must be an absolute path"));
            } else if path.extension().is_none_or(|e| e != "prom") {
                problems.push(format!(
                    "textfile: {p:?} must end in .prom (node_exporter's textfile collector reads only those)"
                ));
            }
            Some(path)
        }
        Some(_) => {
            problems.push("textfile: must be a path, as a string".into());
            None
        }
    };
    if problems.is_empty() {
        Ok(path)
    } else {
        Err(problems)
    }
}

/// The textfile of a data root and the lock its writers share.
pub struct Textfile {
    path: PathBuf,
    lock: PathBuf,
}

impl Textfile {
    /// The textfile `metrics.toml` names, if it names one.
    pub fn of(settings: &Settings) -> Result<Option<Self>, file::Refused> {
        Ok(configured(&settings.data_root)?.map(|path| Self {
            path,
            lock: settings.layout().metrics_lock(),
        }))
    }

    /// Writes the samples of every automation (in the text format).
    pub fn write_all(&self, all: &[Samples], m: &Machine) -> Result<(), MetricsError> {
        let _turn = self.turn(WHOLE_WAIT)?;
        replace(&self.path, &super::render(all, m, Format::Text))
    }

    /// Puts one automation's samples now (`new`, in the text format) into the file, the other
    /// automations' kept as they are. Without a file of this data root to merge into, the whole
    /// file is written from `all`.
    pub fn update(
        &self,
        new: &Samples,
        m: &Machine,
        all: impl FnOnce() -> Result<Vec<Samples>, MetricsError>,
    ) -> Result<(), MetricsError> {
        let _turn = self.turn(ONE_WAIT)?;
        // The data root's own info line says this file was written whole for this namespace.
        let info = format!("namespace=\"{}\"", super::escape(&m.namespace));
        let text = match read(&self.path)? {
            Some(old)
                if old
                    .lines()
                    .any(|l| l.starts_with("automations_info{") && l.contains(&info)) =>
            {
                super::merge(&old, new, m)
            }
            _ => super::render(&all()?, m, Format::Text),
        };
        replace(&self.path, &text)
    }

    /// The writers' lock, within `wait`.
    fn turn(&self, wait: Duration) -> Result<std::fs::File, MetricsError> {
        crate::locks::within(&self.lock, wait)?.ok_or_else(|| MetricsError::Busy {
            lock: self.lock.clone(),
            seconds: wait.as_secs(),
        })
    }
}

/// The textfile as it is now; `None` when there is none, or something else than a file is there
/// (a whole write replaces it, never following a link).
fn read(path: &Path) -> Result<Option<String>, MetricsError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(unreadable(path, source)),
    }
    let mut f = crate::fsutil::open_in_data_root(path, std::fs::OpenOptions::new().read(true))
        .map_err(|e| unreadable(path, e))?;
    let mut text = String::new();
    f.by_ref()
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| unreadable(path, e))?;
    Ok(Some(text))
}

fn unreadable(path: &Path, source: std::io::Error) -> MetricsError {
    MetricsError::Read {
        path: path.into(),
        source,
    }
}

/// Replaces `path` with `text`, readable by everyone (node_exporter runs as another user), by a
/// rename: a reader sees the old file or the new one, never half of one.
fn replace(path: &Path, text: &str) -> Result<(), MetricsError> {
    crate::fsutil::replace_readable(path, text.as_bytes()).map_err(|source| MetricsError::Write {
        path: path.into(),
        source,
    })
}

/// The samples of every automation now, in the text format.
pub fn all_now(settings: &Settings, m: &Machine) -> Result<Vec<Samples>, MetricsError> {
    let src = crate::health::load::Sources::read(settings, None)?;
    super::collect(settings, &src, None, m, Format::Text)
}

/// Puts `name`'s samples now into the textfile, read from `src` (the runner's, after a run).
pub fn update_from(
    settings: &Settings,
    file: &Textfile,
    src: &crate::health::load::Sources,
    name: &Name,
) -> Result<(), MetricsError> {
    let m = Machine::read(settings)?;
    let Some(own) = super::collect(settings, src, Some(name), &m, Format::Text)?.pop() else {
        return Ok(());
    };
    file.update(&own, &m, || all_now(settings, &m))
}

/// After a skipped firing, a pause, resume, ack, snooze or unsnooze of `only` (its samples), or the
/// kill switch (`None`: every automation's): the textfile brought up to date when `metrics.toml`
/// names one. A problem is said on stderr, never returned: what changed did change.
pub fn refresh(settings: &Settings, only: Option<&Name>) {
    let result = (|| -> Result<(), MetricsError> {
        let Some(file) = Textfile::of(settings)? else {
            return Ok(());
        };
        match only {
            None => {
                let m = Machine::read(settings)?;
                file.write_all(&all_now(settings, &m)?, &m)
            }
            Some(name) => {
                let src = crate::health::load::Sources::read(settings, Some(name))?;
                update_from(settings, &file, &src, name)
            }
        }
    })();
    if let Err(e) = result {
        errln!(
            "automations: metrics: {why}",
            why = crate::exit::chain_text(&e)
        );
    }
}

/// After an uninstall: while something is still installed here, the textfile is written whole
/// (the automations uninstalled say what is true now: not installed, no next run); once nothing
/// is, the textfile is removed, since nothing would keep it current (a manual run writes it
/// again). Returns the removed file. A problem is said on stderr, never returned.
pub fn after_uninstall(settings: &Settings) -> Option<PathBuf> {
    let result = (|| -> Result<Option<PathBuf>, MetricsError> {
        let Some(file) = Textfile::of(settings)? else {
            return Ok(None);
        };
        let installed = crate::state::State::new(&settings.data_root).install_records()?;
        if !installed.is_empty() {
            let m = Machine::read(settings)?;
            file.write_all(&all_now(settings, &m)?, &m)?;
            return Ok(None);
        }
        let _turn = file.turn(WHOLE_WAIT)?;
        match std::fs::remove_file(&file.path) {
            Ok(()) => Ok(Some(file.path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MetricsError::Remove {
                path: file.path,
                source,
            }),
        }
    })();
    result.unwrap_or_else(|e| {
        errln!(
            "automations: metrics: {why}",
            why = crate::exit::chain_text(&e)
        );
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<PathBuf>, Vec<String>> {
        parse_table(&file::table(text).unwrap())
    }

    #[test]
    fn metrics_toml_names_an_absolute_prom_file_and_nothing_else() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(
            parse("textfile = \"/var/lib/node_exporter/automations.prom\""),
            Ok(Some(PathBuf::from(
                "/var/lib/node_exporter/automations.prom"
            )))
        );
        assert_eq!(
            parse("textfile = \"automations.prom\""),
            Err(vec![
                "textfile: \"automations.prom\" must be an absolute path".to_owned()
            ])
        );
        assert_eq!(
            parse("textfile = \"/tmp/automations.txt\"\nport = 9100"),
            Err(vec![
                "port: unknown key (the one key is textfile)".to_owned(),
                "textfile: \"/tmp/automations.txt\" must end in .prom (node_exporter's textfile collector reads only those)".to_owned(),
            ])
        );
        assert_eq!(
            parse("textfile = 3"),
            Err(vec!["textfile: must be a path, as a string".to_owned()])
        );
    }
}
