//! `units/` in the repository: the rendering of every scheduled definition, for both targets, with
//! placeholders for machine paths. `automations units` rewrites it; `automations units --check`
//! fails on any difference, so CI catches a definition changed without regenerating, a file edited
//! by hand, and files that should not (or should) be there. Only `*.plist`, `*.service` and
//! `*.timer` files under `units/launchd/` and `units/systemd/` are ever touched.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::Target;
use super::{MachinePaths, header_definition_hash, render};
use crate::definition::Definition;
use crate::names::Namespace;

/// The folder of portable units in the repository root.
pub const UNITS_DIR: &str = "units";

/// What `units/` should hold: relative path -> bytes.
pub fn desired(defs: &[Definition], namespace: &Namespace) -> BTreeMap<PathBuf, Vec<u8>> {
    let paths = MachinePaths::portable();
    let mut out = BTreeMap::new();
    for def in defs {
        for target in Target::ALL {
            for f in render(def, namespace, &paths, target) {
                out.insert(Path::new(target.dir()).join(&f.name), f.bytes);
            }
        }
    }
    out
}

/// What `units/` holds now: relative path -> bytes (only files this module owns).
pub fn present(units: &Path) -> io::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for target in Target::ALL {
        let dir = target.dir();
        for (_, path) in crate::fsutil::list_named(&units.join(dir), "", target.extensions())? {
            if std::fs::symlink_metadata(&path)?.is_file() {
                let name = path.file_name().unwrap_or_default();
                out.insert(Path::new(dir).join(name), std::fs::read(&path)?);
            }
        }
    }
    Ok(out)
}

/// One difference between `units/` and the definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// A scheduled definition's file is not there.
    Missing(PathBuf),
    /// A file no scheduled definition renders.
    Extra(PathBuf),
    /// Rendered from an older version of its definition.
    Stale { path: PathBuf, diff: String },
    /// Same definition, different bytes: someone edited the file.
    Edited { path: PathBuf, diff: String },
}

impl Difference {
    /// One line for people, `units/<path>: <what>`.
    pub fn line(&self) -> String {
        match self {
            Difference::Missing(p) => format!("{UNITS_DIR}/{}: missing", p.display()),
            Difference::Extra(p) => format!(
                "{UNITS_DIR}/{}: extra (no scheduled definition renders it)",
                p.display()
            ),
            Difference::Stale { path, .. } => format!(
                "{UNITS_DIR}/{}: stale (its definition changed since it was rendered)",
                path.display()
            ),
            Difference::Edited { path, .. } => {
                format!("{UNITS_DIR}/{}: edited by hand", path.display())
            }
        }
    }

    /// The unified diff from what is there to what should be, when the file is there.
    pub fn diff(&self) -> Option<&str> {
        match self {
            Difference::Stale { diff, .. } | Difference::Edited { diff, .. } => Some(diff),
            _ => None,
        }
    }
}

/// Every difference between what is and what should be.
pub fn compare(
    present: &BTreeMap<PathBuf, Vec<u8>>,
    desired: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<Difference> {
    let mut out = Vec::new();
    for (path, want) in desired {
        match present.get(path) {
            None => out.push(Difference::Missing(path.clone())),
            Some(have) if have == want => {}
            Some(have) => {
                let diff = unified_diff(
                    &format!("{UNITS_DIR}/{}", path.display()),
                    Some(have),
                    Some(want),
                );
                let path = path.clone();
                if header_definition_hash(have) != header_definition_hash(want) {
                    out.push(Difference::Stale { path, diff });
                } else {
                    out.push(Difference::Edited { path, diff });
                }
            }
        }
    }
    for path in present.keys() {
        if !desired.contains_key(path) {
            out.push(Difference::Extra(path.clone()));
        }
    }
    out
}

/// A unified diff of two files' bytes (lossy for non-UTF-8); a side that is no file (`None`) is
/// labelled `(absent)`, not `(present)` or `(rendered)`.
pub fn unified_diff(name: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    unified_diff_as(name, ("present", old), ("rendered", new))
}

/// [`unified_diff`] with the words that say what each side is (`approved`, `now`).
pub fn unified_diff_as(
    name: &str,
    (old_word, old): (&str, Option<&[u8]>),
    (new_word, new): (&str, Option<&[u8]>),
) -> String {
    let label = |side: Option<&[u8]>, what: &str| match side {
        Some(_) => format!("{name} ({what})"),
        None => format!("{name} (absent)"),
    };
    let text = |side: Option<&[u8]>| String::from_utf8_lossy(side.unwrap_or_default()).into_owned();
    let (old_text, new_text) = (text(old), text(new));
    similar::TextDiff::from_lines(&old_text, &new_text)
        .unified_diff()
        .context_radius(2)
        .header(&label(old, old_word), &label(new, new_word))
        .to_string()
}

/// Rewrites `units/` to match: writes what differs or is missing, removes extra files. Returns the
/// differences it repaired.
pub fn write(units: &Path, desired: &BTreeMap<PathBuf, Vec<u8>>) -> io::Result<Vec<Difference>> {
    let present = present(units)?;
    let diffs = compare(&present, desired);
    for d in &diffs {
        match d {
            Difference::Missing(p)
            | Difference::Stale { path: p, .. }
            | Difference::Edited { path: p, .. } => {
                let dest = units.join(p);
                std::fs::create_dir_all(dest.parent().unwrap_or(units))?;
                std::fs::write(dest, &desired[p])?;
            }
            Difference::Extra(p) => std::fs::remove_file(units.join(p))?,
        }
    }
    Ok(diffs)
}
