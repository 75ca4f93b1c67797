//! node_exporter's textfile collector: `<data root>/metrics.toml` names a `.prom` file, which every
//! firing (its own automation's samples), every `health` and every `notify look` of every
//! automation (all of them) rewrite whole, as a new file renamed over the old one, so the collector
//! never reads half of one (docs/metrics.md).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Format, Machine, Samples};
use crate::settings::Settings;
use crate::settings::file;

/// The settings file.
pub const FILE: &str = "metrics.toml";
/// The largest textfile read back to merge a firing's samples into.
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Where the textfile goes, when `metrics.toml` names one.
pub fn configured(data_root: &Path) -> Result<Option<PathBuf>, file::Refused> {
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

/// Writes the samples of every automation (in the text format) to `path`.
pub fn write_all(path: &Path, all: &[Samples], m: &Machine) -> anyhow::Result<()> {
    replace(path, &super::render(all, m, Format::Text))
}

/// Puts one automation's samples now (`new`, in the text format) into the textfile at `path`, the other automations' kept as they are
/// (under `lock`, so two firings that end together both land). Without a textfile of this data
/// root to merge into, the whole file is written from `all`.
pub fn update(
    path: &Path,
    lock: &Path,
    new: &Samples,
    m: &Machine,
    all: impl FnOnce() -> anyhow::Result<Vec<Samples>>,
) -> anyhow::Result<()> {
    let lock = crate::fsutil::open_or_create_private(lock)
        .with_context(|| format!("cannot open {}", lock.display()))?;
    lock.lock()
        .with_context(|| "cannot lock the metrics textfile's lock")?;
    let old = read(path)?;
    // The data root's own info line says this file was written whole for this namespace once.
    let info = format!("namespace=\"{}\"", super::escape(&m.namespace));
    let text = match old {
        Some(old)
            if old
                .lines()
                .any(|l| l.starts_with("automations_info{") && l.contains(&info)) =>
        {
            super::merge(&old, new, m)
        }
        _ => super::render(&all()?, m, Format::Text),
    };
    replace(path, &text)
}

/// The textfile as it is now; `None` when there is none.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    let mut f = match crate::fsutil::open_in_data_root(path, std::fs::OpenOptions::new().read(true))
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut text = String::new();
    f.by_ref()
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Some(text))
}

/// Replaces `path` with `text`, readable by everyone (node_exporter runs as another user), by a
/// rename: a reader sees the old file or the new one, never half of one.
fn replace(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::fsutil::replace_readable(path, text.as_bytes())
        .with_context(|| format!("cannot write the metrics textfile {}", path.display()))
}

/// Rewrites the textfile with every automation's samples now, when `metrics.toml` names one.
pub fn write_now(settings: &Settings) -> anyhow::Result<()> {
    let Some(path) = configured(&settings.data_root)? else {
        return Ok(());
    };
    let src = crate::health::load::Sources::read(settings, None)?;
    let m = Machine::read(settings, &src.snapshot)?;
    write_all(
        &path,
        &super::collect(settings, &src, None, &m, Format::Text)?,
        &m,
    )
}

/// The samples of every automation now, in the text format (for the first write).
pub fn all_now(settings: &Settings, m: &Machine) -> anyhow::Result<Vec<Samples>> {
    let src = crate::health::load::Sources::read(settings, None)?;
    super::collect(settings, &src, None, m, Format::Text)
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
