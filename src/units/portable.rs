//! The repository's rendered folders: `units/` (launchd and systemd, and Windows when asked, with
//! placeholders for machine paths) and, when the repository has a `kubernetes.toml`, `kubernetes/` (a CronJob per scheduled
//! definition and a kustomization). `automations units` rewrites them; `automations units --check`
//! fails on any difference, so CI catches a definition changed without regenerating, a file edited
//! by hand, and files that should not (or should) be there. Only `*.plist`, `*.service`, `*.timer`,
//! `*.path` and `*.xml` files under `units/launchd/`, `units/systemd/` and `units/windows/`, and the `*.yaml` files directly under
//! `kubernetes/` that start with the generated header, are ever touched. A CronJob's
//! `spec.suspend: true` is runtime state (a pause) and is never compared.
//!
//! A repository may say which service managers it renders for in its `automations.toml`
//! (`[units] targets = ["systemd"]`): a Linux-only team keeps no plists, and `units/launchd/` is
//! then neither rendered nor compared. Without it, launchd and systemd; Windows only when named.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::Target;
use super::kubernetes::{self, Cluster};
use super::{MachinePaths, header_hashes, render};
use crate::definition::Definition;
use crate::names::Namespace;

/// The top folder of the cluster target's files.
const CLUSTER_TOP: &str = "kubernetes/";

/// The folder of portable units in the repository root.
pub const UNITS_DIR: &str = "units";

/// The repository's own settings, at its root.
pub const REPO_SETTINGS: &str = "automations.toml";

/// `automations.toml`: what the repository says of itself.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RepoSettings {
    units: Option<UnitsSettings>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitsSettings {
    /// The service managers `units/` holds files for.
    targets: Vec<Target>,
}

/// The targets `units/` holds: `automations.toml`'s `[units] targets`, or every one when the file
/// or the key is absent; an error names the file and what is wrong.
pub fn targets(root: &Path) -> Result<Vec<Target>, String> {
    let path = root.join(REPO_SETTINGS);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::DEFAULT.to_vec()),
        Err(e) => return Err(format!("{REPO_SETTINGS}: {e}")),
    };
    let settings: RepoSettings =
        toml::from_str(&text).map_err(|e| format!("{REPO_SETTINGS}: {}", e.message()))?;
    let Some(units) = settings.units else {
        return Ok(Target::DEFAULT.to_vec());
    };
    if units.targets.is_empty() {
        return Err(format!(
            "{REPO_SETTINGS}: [units] targets is empty; name one or more of \"launchd\", \"systemd\", \"windows\""
        ));
    }
    Ok(Target::ALL
        .into_iter()
        .filter(|t| units.targets.contains(t))
        .collect())
}

/// One folder of rendered files and how it is compared: a new render target is one more entry
/// in [`folders`].
pub struct Folder {
    /// Repository-relative.
    dir: PathBuf,
    /// The endings of the files it holds.
    extensions: &'static [&'static str],
    /// When set, only files that begin with it are ours; the others are the team's own (a
    /// namespace or claim manifest beside the CronJobs) and never compared or removed.
    ours_begin: Option<&'static str>,
    /// What a stale file was rendered from: "stale (<this> changed since it was rendered)".
    rendered_from: fn(&Path) -> &'static str,
    /// Runtime state taken out of what is there before it is compared (a CronJob's pause).
    normalize: fn(&[u8]) -> Cow<'_, [u8]>,
    /// The top folder to `git add` after regenerating.
    pub top: &'static str,
    /// The service manager it holds units for (`None`: the cluster).
    target: Option<Target>,
}

/// Every folder of rendered files: one per service-manager target under `units/`, and
/// `kubernetes/`.
fn folders() -> &'static [Folder] {
    static FOLDERS: std::sync::LazyLock<Vec<Folder>> = std::sync::LazyLock::new(|| {
        let units = Target::ALL.iter().map(|t| Folder {
            dir: Path::new(UNITS_DIR).join(t.dir()),
            extensions: t.extensions(),
            ours_begin: None,
            rendered_from: |_| "its definition",
            normalize: |have| Cow::Borrowed(have),
            top: "units/",
            target: Some(*t),
        });
        let cluster = Folder {
            dir: PathBuf::from(kubernetes::DIR),
            extensions: &[".yaml"],
            ours_begin: Some(kubernetes::HEADER_START),
            rendered_from: |path| {
                if path.ends_with(kubernetes::KUSTOMIZATION) {
                    // It lists every CronJob: adding or removing a definition changes it.
                    "the definitions or kubernetes.toml"
                } else {
                    "its definition or kubernetes.toml"
                }
            },
            normalize: |have| Cow::Owned(kubernetes::without_suspend(have)),
            top: CLUSTER_TOP,
            target: None,
        };
        units.chain(std::iter::once(cluster)).collect()
    });
    &FOLDERS
}

/// The folder `path` (repository-relative) is in; `None` for a path in none of them.
pub fn folder_of(path: &Path) -> Option<&'static Folder> {
    folders()
        .iter()
        .find(|f| path.parent() == Some(f.dir.as_path()))
}

/// What the rendered folders should hold: repository-relative path -> bytes; or every definition
/// the cluster target cannot say (and every stale exclusion).
pub fn desired(
    defs: &[Definition],
    namespace: &Namespace,
    cluster: Option<&Cluster>,
    targets: &[Target],
) -> Result<BTreeMap<PathBuf, Vec<u8>>, Vec<String>> {
    let paths = MachinePaths::portable();
    let mut out = BTreeMap::new();
    for def in defs {
        for &target in targets {
            // A target that cannot keep a definition's schedule has no file for it: installing
            // it there is refused by name (`units::refusal`).
            for f in render(def, namespace, &paths, target).unwrap_or_default() {
                out.insert(
                    Path::new(UNITS_DIR).join(target.dir()).join(&f.name),
                    f.bytes,
                );
            }
        }
    }
    if let Some(cluster) = cluster {
        for f in kubernetes::render_all(defs, namespace, cluster)? {
            out.insert(Path::new(kubernetes::DIR).join(&f.name), f.bytes);
        }
    }
    Ok(out)
}

/// What the rendered folders should hold. `units/` is always rendered; `kubernetes/` only when the
/// repository opted in with a `kubernetes.toml`, and a problem of the cluster target (its settings,
/// or a definition it cannot say) is kept apart: it never blocks `units/` or the machine's checks.
pub struct Rendered {
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// The service managers `units/` holds (the repository's `automations.toml`).
    pub targets: Vec<Target>,
    /// The folders `files` covers: `units/`, or `units/ and kubernetes/`.
    pub folders: &'static str,
    /// Why `kubernetes/` could not be rendered (then `files` and `present` leave it out).
    pub cluster_problem: Option<String>,
}

impl Rendered {
    /// What the rendered folders of the repository at `root` should hold for `defs`; the
    /// repository's targets that cannot be read are the error.
    pub fn of(root: &Path, namespace: &Namespace, defs: &[Definition]) -> Result<Self, String> {
        let targets = targets(root)?;
        let units_only = |cluster_problem| Rendered {
            files: desired(defs, namespace, None, &targets)
                .expect("units/ alone renders every valid definition"),
            targets: targets.clone(),
            folders: "units/",
            cluster_problem,
        };
        let cluster = match Cluster::load(root) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(units_only(None)),
            Err(e) => return Ok(units_only(Some(e))),
        };
        Ok(match desired(defs, namespace, Some(&cluster), &targets) {
            Ok(files) => Rendered {
                files,
                targets: targets.clone(),
                folders: "units/ and kubernetes/",
                cluster_problem: None,
            },
            Err(problems) => units_only(Some(problems.join("\n"))),
        })
    }

    /// What the rendered folders hold now, of the folders rendered.
    pub fn present(&self, root: &Path) -> io::Result<BTreeMap<PathBuf, Vec<u8>>> {
        present(root, self.cluster_problem.is_none(), &self.targets)
    }
}

/// What the rendered folders hold now: repository-relative path -> bytes (only files this module
/// owns). Without `cluster`, `kubernetes/` is left out, and a folder of a target not in `targets`
/// too: it was not rendered, so its files are neither compared nor touched.
pub fn present(
    root: &Path,
    cluster: bool,
    targets: &[Target],
) -> io::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let rendered = |f: &&Folder| match f.target {
        Some(t) => targets.contains(&t),
        None => cluster,
    };
    for folder in folders().iter().filter(rendered) {
        for (_, path) in crate::fsutil::list_named(&root.join(&folder.dir), "", folder.extensions)?
        {
            if std::fs::symlink_metadata(&path)?.is_file() {
                let bytes = std::fs::read(&path)?;
                if folder
                    .ours_begin
                    .is_some_and(|begin| !bytes.starts_with(begin.as_bytes()))
                {
                    continue;
                }
                let name = path.file_name().unwrap_or_default();
                out.insert(folder.dir.join(name), bytes);
            }
        }
    }
    Ok(out)
}

/// One difference between the rendered folders and the definitions.
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
    /// One line for people, `units/<path>: <what>` or `kubernetes/<file>: <what>`.
    pub fn line(&self) -> String {
        match self {
            Difference::Missing(p) => format!("{}: missing", p.display()),
            Difference::Extra(p) => format!(
                "{}: extra (no scheduled definition renders it)",
                p.display()
            ),
            Difference::Stale { path, .. } => format!(
                "{}: stale ({} changed since it was rendered)",
                path.display(),
                folder_of(path).map_or("its definition", |f| (f.rendered_from)(path))
            ),
            Difference::Edited { path, .. } => {
                // Same sources, other bytes: a hand's edit, or a renderer that changed since.
                format!(
                    "{}: edited by hand, or rendered by another version of automations",
                    path.display()
                )
            }
        }
    }

    /// The file's repository-relative path.
    pub fn path(&self) -> &Path {
        match self {
            Difference::Missing(p)
            | Difference::Extra(p)
            | Difference::Stale { path: p, .. }
            | Difference::Edited { path: p, .. } => p,
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
        let have = present.get(path).map(|have| match folder_of(path) {
            Some(folder) => (folder.normalize)(have),
            None => Cow::Borrowed(have.as_slice()),
        });
        match have.as_deref() {
            None => out.push(Difference::Missing(path.clone())),
            Some(have) if have == want.as_slice() => {}
            Some(have) => {
                let diff = unified_diff(&path.display().to_string(), Some(have), Some(want));
                let path = path.clone();
                if header_hashes(have) != header_hashes(want) {
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

/// Rewrites the rendered folders under `root` to match: writes what differs or is missing,
/// removes extra files. Returns the differences it repaired. Without `cluster`, `kubernetes/` is
/// left as it is (its target could not be rendered).
pub fn write(
    root: &Path,
    desired: &BTreeMap<PathBuf, Vec<u8>>,
    cluster: bool,
    targets: &[Target],
) -> io::Result<Vec<Difference>> {
    let present = present(root, cluster, targets)?;
    let diffs = compare(&present, desired);
    for d in &diffs {
        match d {
            Difference::Missing(p)
            | Difference::Stale { path: p, .. }
            | Difference::Edited { path: p, .. } => {
                let dest = root.join(p);
                std::fs::create_dir_all(dest.parent().unwrap_or(root))?;
                std::fs::write(dest, &desired[p])?;
            }
            Difference::Extra(p) => std::fs::remove_file(root.join(p))?,
        }
    }
    Ok(diffs)
}
