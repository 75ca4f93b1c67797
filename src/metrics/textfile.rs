//! node_exporter's textfile collector: `<data root>/metrics.toml` names a `.prom` file. Every
//! firing, skipped or not, puts its automation's samples now into it; every switch what it changed
//! ([`follow`]: one automation's, or the kill switch's sample); `health`, `notify look` (of every
//! automation) and `uninstall` write it whole (and an uninstall that leaves nothing installed
//! removes it).
//! Each write is a new file renamed over the old one, so the collector never reads half of one,
//! and writers take turns (`state/metrics.lock`), so a whole write never puts back what a firing
//! just replaced (docs/metrics.md). None of it ever fails or changes a run or a command: a problem
//! is one line on stderr, naming the file.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Format, Machine, MetricsError, Patch, Samples};
use crate::layout::SettingsFile;
use crate::names::Name;
use crate::runlog::Event;
use crate::settings::Settings;
use crate::settings::file;

/// The settings file.
pub const FILE: SettingsFile = SettingsFile::Metrics;
/// The largest textfile read back to merge one automation's samples into.
const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// How long a firing waits for another writer before leaving its samples to the next write: a
/// firing is not over until this is.
const ONE_WAIT: Duration = Duration::from_secs(1);
/// How long a whole write, or a switch (a person's command), waits for another writer.
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
    data_root: PathBuf,
}

impl Textfile {
    /// The textfile `metrics.toml` names, if it names one.
    pub fn of(settings: &Settings) -> Result<Option<Self>, file::Refused> {
        Ok(configured(&settings.data_root)?.map(|path| Self {
            path,
            lock: settings.layout().metrics_lock(),
            data_root: settings.data_root.clone(),
        }))
    }

    /// Writes the samples of every automation (in the text format).
    pub fn write_all(&self, all: &[Samples], m: &Machine) -> Result<(), MetricsError> {
        let _turn = self.turn(WHOLE_WAIT)?;
        let m = self.switch_now(m)?;
        replace(&self.path, &super::render(all, &m, Format::Text))
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
        self.patch(Patch::Samples(new), m, Some(all), ONE_WAIT)
            .map(|_| ())
    }

    /// Applies `patch` to the file, the other automations' samples kept as they are; without a
    /// file of this data root to apply it to, writes the whole file from `all`, if given; waits
    /// `wait` at most for its turn. Whether it wrote: not without a file and `all`, nor when the
    /// file holds no samples of the automation whose one sample `patch` changes.
    fn patch(
        &self,
        patch: Patch<'_>,
        m: &Machine,
        all: Option<impl FnOnce() -> Result<Vec<Samples>, MetricsError>>,
        wait: Duration,
    ) -> Result<bool, MetricsError> {
        let _turn = self.turn(wait)?;
        let m = &self.switch_now(m)?;
        // The data root's own info line says this file was written whole for this namespace.
        let info = format!("namespace=\"{}\"", super::escape(&m.namespace));
        let old = read(&self.path)?.filter(|old| {
            old.lines()
                .any(|l| l.starts_with("automations_info{") && l.contains(&info))
        });
        let text = match (old, all) {
            (Some(old), _) => match super::merge(&old, patch, m) {
                Some(text) => text,
                None => return Ok(false),
            },
            (None, Some(all)) => super::render(&all()?, m, Format::Text),
            (None, None) => return Ok(false),
        };
        replace(&self.path, &text)?;
        Ok(true)
    }

    /// `m` with the kill switch read in turn: read before it, a writer could put back the switch
    /// as it was before a `stop-all` that wrote meanwhile.
    fn switch_now(&self, m: &Machine) -> Result<Machine, MetricsError> {
        m.clone().switched(&self.data_root)
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
    let m = Machine::unswitched(settings);
    let Some(own) = super::collect_one(settings, src, name, &m, Format::Text) else {
        return Ok(());
    };
    file.update(&own, &m, || all_now(settings, &m))
}

/// Writes the whole file (`notify look` of every automation), when `metrics.toml` names one. A
/// problem is said on stderr, never returned.
pub fn rewrite(settings: &Settings) {
    said((|| {
        let Some(file) = Textfile::of(settings)? else {
            return Ok(());
        };
        let m = Machine::unswitched(settings);
        file.write_all(&all_now(settings, &m)?, &m)
    })());
}

/// After a skipped firing of `name`: its samples now in the textfile, when `metrics.toml` names
/// one. A problem is said on stderr, never returned: the firing is over.
pub fn after_skip(settings: &Settings, name: &Name) {
    said((|| {
        let Some(file) = Textfile::of(settings)? else {
            return Ok(());
        };
        let src = crate::health::load::Sources::read(settings, Some(name))?;
        update_from(settings, &file, &src, name)
    })());
}

/// After a switch, recorded as `event` of `name` (none for the kill switch): the textfile brought
/// in step with what it changed, when `metrics.toml` names one, without judging any other
/// automation or asking the service manager. A snooze or its end changes its one sample (health's
/// verdict does not depend on it); the kill switch and its release change the data root's own; a
/// pause, resume or ack changes the automation's verdict, which is judged now from the data root
/// alone (a watch the manager stopped shows without that reason until the next whole write says
/// it again: `health`, the hourly look).
/// A switch changes the file it finds: the first write of a data root's file is a firing's or a
/// whole one. A problem is said on stderr, never returned: what changed did change.
pub fn follow(settings: &Settings, name: Option<&Name>, event: &Event) {
    said((|| {
        let Some(file) = Textfile::of(settings)? else {
            return Ok(());
        };
        let m = Machine::unswitched(settings);
        let patch = match (name, event) {
            (Some(n), Event::Snoozed(s)) => Patch::SnoozedUntil {
                name: n.as_str(),
                until: crate::runlog::parse_stamp(&s.until).map(super::unix),
            },
            (Some(n), Event::Unsnoozed(_)) => Patch::SnoozedUntil {
                name: n.as_str(),
                until: None,
            },
            (Some(n), _) => return own_samples(settings, &file, n, &m),
            (None, _) => Patch::DataRoot,
        };
        match (file.patch(patch, &m, NO_WHOLE, WHOLE_WAIT)?, name) {
            (false, Some(n)) => own_samples(settings, &file, n, &m),
            _ => Ok(()),
        }
    })());
}

/// What writes the whole file when there is none to merge into.
type Whole = fn() -> Result<Vec<Samples>, MetricsError>;

/// No whole write: a switch's.
const NO_WHOLE: Option<Whole> = None;

/// `name`'s samples judged now from the data root alone, put into the file (when there is one).
fn own_samples(
    settings: &Settings,
    file: &Textfile,
    name: &Name,
    m: &Machine,
) -> Result<(), MetricsError> {
    let src = crate::health::load::Sources::of_data_root(settings, name)?;
    let Some(own) = super::collect_one(settings, &src, name, m, Format::Text) else {
        return Ok(());
    };
    file.patch(Patch::Samples(&own), m, NO_WHOLE, WHOLE_WAIT)
        .map(|_| ())
}

/// A write's problem, said on stderr.
fn said(result: Result<(), MetricsError>) {
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
            let m = Machine::unswitched(settings);
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
