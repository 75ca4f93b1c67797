//! Moving in (docs/moving-in.md): jobs scheduled elsewhere — a crontab's lines, LaunchAgents,
//! systemd user timers — read into the definitions that say the same, or the reason one needs a
//! person. Each reader is pure: the caller reads the sources, passes what it knows of the machine
//! and writes what comes back, all or nothing (`commands/import.rs`); retiring the originals
//! (`--adopt`) is [`retire`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::definition::Checks;
use crate::names::Name;

pub mod crontab;
#[cfg(test)]
mod fixture;
pub mod launchd;
pub mod retire;
pub mod shell;
pub mod systemd;
pub mod when;

/// What `import launchd` and `import systemd` know of the machine and the repository.
pub struct Context<'a> {
    pub home: &'a Path,
    pub root: &'a Path,
    pub checks: &'a Checks,
    /// The names that already have a definition.
    pub existing: &'a BTreeSet<String>,
    /// Copy scripts under the home folder into `scripts/`.
    pub copy_scripts: bool,
    /// This tool's own labels begin with it (`local.<namespace>.`): not imported again.
    pub own_prefix: &'a str,
}

/// What became of one job (a crontab line, a plist, a timer) or setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A job that becomes a definition.
    Imported,
    /// A job (or line) a person must look at; nothing is written for it.
    NeedsYou,
    /// A setting that is said, not carried over (`MAILTO`, `PATH`, …), or carried into env files.
    Reported,
    /// A job of another user (system crontabs).
    NotImported,
}

/// One row of an import's report.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The crontab line (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The file read (a plist, a unit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line as shown (a `NAME=` line without its value), or the job's label or unit.
    pub text: String,
    /// The definition's name, for a job.
    pub name: Option<String>,
    /// The schedule in words, for a job.
    pub schedule: Option<String>,
    pub status: Status,
    /// Why it needs you, or what was reported.
    pub reason: Option<String>,
    /// What a person should know about an imported job (its shell script, a dropped redirect, …).
    pub notes: Vec<String>,
    /// What `--adopt` retires once the new unit is installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<retire::Original>,
    /// What is written for it.
    #[serde(skip)]
    pub files: Files,
}

impl Row {
    /// A row that needs you until the reader says otherwise.
    pub fn new(line: Option<usize>, file: Option<String>, text: String) -> Self {
        Self {
            line,
            file,
            text,
            name: None,
            schedule: None,
            status: Status::NeedsYou,
            reason: None,
            notes: Vec::new(),
            original: None,
            files: Files::default(),
        }
    }
}

/// What one imported job writes.
#[derive(Clone, Debug, Default)]
pub struct Files {
    /// `automations/<name>.toml`'s bytes.
    pub definition: Vec<u8>,
    /// Scripts to copy: from (under home) to (relative to the root, `scripts/<file>`).
    pub copies: Vec<(PathBuf, String)>,
    /// Scripts the import writes (relative to the root, their bytes), executable.
    pub scripts: Vec<(String, Vec<u8>)>,
    /// The env file's lines (`NAME=value`).
    pub env: Vec<(String, String)>,
}

/// A definition as an import writes it: where it came from in comments, then its keys.
pub struct Draft<'a> {
    pub name: &'a str,
    /// Comment lines above it (without `# `): what it was imported from.
    pub origin: Vec<String>,
    pub description: Option<&'a str>,
    pub command: &'a [String],
    pub env: &'a [(String, String)],
    /// 0: the time to its next firing ([`Draft::checked`]).
    pub timeout: u32,
    /// Why that timeout, as a comment.
    pub timeout_why: &'a str,
    /// Top-level `key = value` lines (TOML values already written).
    pub keys: Vec<(String, String)>,
    /// `[schedule]` lines; none: no schedule table.
    pub schedule: Vec<(String, String)>,
    /// `[trigger]` lines.
    pub trigger: Vec<(String, String)>,
    /// `[limits]` lines.
    pub limits: Vec<(String, String)>,
}

impl Draft<'_> {
    /// The definition text, its timeout the time to its next firing (60 s to a day) unless it
    /// has one, checked as `validate` checks it: the text and the definition, or why it is
    /// refused, every problem named.
    pub fn checked(
        mut self,
        until_next: &'static str,
        checks: &Checks,
    ) -> Result<(String, crate::definition::Definition), String> {
        let file = format!("{}.toml", self.name);
        let parse = |text: &str| crate::definition::parse(&file, text.as_bytes(), checks);
        if self.timeout == 0 {
            self.timeout = crate::definition::MAX_TIMEOUT_SECONDS;
            let gap = parse(&self.text())
                .ok()
                .and_then(|d| d.schedule.map(|s| s.shortest_gap_seconds()))
                .unwrap_or(crate::definition::MAX_TIMEOUT_SECONDS);
            self.timeout = gap.clamp(60, crate::definition::MAX_TIMEOUT_SECONDS);
            self.timeout_why = until_next;
        }
        let text = self.text();
        match parse(&text) {
            Ok(def) => Ok((text, def)),
            Err(problems) => {
                let all: Vec<String> = problems
                    .iter()
                    .map(|p| format!("{}: {}", p.key, p.message))
                    .collect();
                Err(format!(
                    "the definition it makes is refused: {}",
                    all.join("; ")
                ))
            }
        }
    }
}

/// A TOML string.
pub fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A TOML array of strings.
pub fn quote_all<S: AsRef<str>>(items: &[S]) -> String {
    let all: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", all.join(", "))
}

impl Draft<'_> {
    /// The definition file.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in &self.origin {
            out.push_str(&format!("# {}\n", line.replace('\n', " ")));
        }
        out.push_str(&format!("name = {}\n", quote(self.name)));
        if let Some(desc) = self.description {
            let desc: String = desc.chars().take(200).collect();
            out.push_str(&format!("description = {}\n", quote(&desc)));
        }
        out.push_str(&format!("command = {}\n", quote_all(self.command)));
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.iter().map(|(n, _)| n.as_str()).collect();
            out.push_str(&format!(
                "# Values in the private env file, <data root>/env/{}.env.\nenv = {}\n",
                self.name,
                quote_all(&names)
            ));
        }
        out.push_str(&format!(
            "# {}\ntimeout_seconds = {}\n",
            self.timeout_why, self.timeout
        ));
        for (k, v) in &self.keys {
            out.push_str(&format!("{k} = {v}\n"));
        }
        for (table, lines) in [
            ("schedule", &self.schedule),
            ("trigger", &self.trigger),
            ("limits", &self.limits),
        ] {
            if !lines.is_empty() {
                out.push_str(&format!("\n[{table}]\n"));
                for (k, v) in lines {
                    out.push_str(&format!("{k} = {v}\n"));
                }
            }
        }
        out
    }
}

/// What one import has given so far: names, and where each copied script went.
#[derive(Default)]
pub struct Given {
    pub names: Names,
    /// Source (under home) -> its copy (`scripts/<file>`).
    copies: BTreeMap<PathBuf, String>,
    /// The copies' places, taken.
    places: BTreeSet<String>,
}

/// `line` with the home folder written `~` (a repository does not name it).
pub fn home_as_tilde(line: &str, home: &Path) -> String {
    match home.to_str() {
        Some(h) if h.len() > 1 => line.replace(h, "~"),
        _ => line.to_owned(),
    }
}

/// The repository place of the copy of `from`: `scripts/<file>`, or, when another script has that
/// place, `scripts/<folder>-<file>` and then numbered — never another source's copy.
pub fn place_for(
    from: &Path,
    root: &Path,
    home: &Path,
    given: &mut Given,
) -> Result<String, String> {
    if let Some(rel) = given.copies.get(from) {
        return Ok(rel.clone());
    }
    let shown = home_as_tilde(&from.to_string_lossy(), home);
    let file = from
        .file_name()
        .and_then(|f| f.to_str())
        .filter(|f| !f.is_empty())
        .ok_or_else(|| format!("{shown} has no file name that can be copied"))?;
    let folder = from
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|f| f.to_str())
        .unwrap_or("home");
    let bytes = std::fs::read(from).map_err(|e| format!("{shown} cannot be read: {e}"))?;
    let candidates = std::iter::once(format!("scripts/{file}"))
        .chain(std::iter::once(format!("scripts/{folder}-{file}")))
        .chain((2..).map(|n| format!("scripts/{folder}-{n}-{file}")));
    for rel in candidates.take(1000) {
        if given.places.contains(&rel) {
            continue;
        }
        match std::fs::read(root.join(&rel)) {
            // The same script, imported before: shared.
            Ok(there) if there == bytes => {}
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{rel} cannot be read: {e}")),
        }
        given.places.insert(rel.clone());
        given.copies.insert(from.to_path_buf(), rel.clone());
        return Ok(rel);
    }
    Err(format!("no free place in scripts/ for {shown}"))
}

/// A script that runs `argv` in `dir`, as the scheduler it came from did (`WorkingDirectory`):
/// `scripts/<from>-<name>.sh`, which the definition runs instead — pinned like any script. A
/// copied script in `argv` (`{root}/scripts/x.sh`) is named beside it; a folder under home is
/// written from `$HOME`. An error names a file already there with other content.
pub fn starts_in(
    from: &str,
    name: &str,
    dir: &str,
    home: &Path,
    root: &Path,
    argv: &[String],
) -> Result<(String, Vec<u8>), String> {
    let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let own = format!("{}/scripts/", crate::definition::PLACEHOLDER_ROOT);
    let mut uses_here = false;
    let words: Vec<String> = argv
        .iter()
        .map(|a| match a.strip_prefix(&own) {
            Some(file) => {
                uses_here = true;
                format!("\"$here\"/{}", q(file))
            }
            None => q(a),
        })
        .collect();
    let cd = match Path::new(dir).strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "cd || exit 1".to_owned(),
        Ok(rest) => format!("cd \"$HOME\"/{} || exit 1", q(&rest.to_string_lossy())),
        Err(_) => format!("cd {} || exit 1", q(dir)),
    };
    let rel = format!("scripts/{from}-{name}.sh");
    let text = format!(
        "#!/bin/sh\n# {from} ran this job in {dir}; this starts it there, as {from} did.\n# Written by `automations import {from}` for automations/{name}.toml, which runs it pinned:\n# an edit runs unattended only after `automations install {name}` (docs/moving-in.md).\n{}{cd}\nexec {}\n",
        if uses_here { "here=${0%/*}\n" } else { "" },
        words.join(" ")
    );
    if let Ok(there) = std::fs::read(root.join(&rel))
        && there != text.as_bytes()
    {
        return Err(format!(
            "{rel} exists already with other content; move it aside or import this job by hand"
        ));
    }
    Ok((rel, text.into_bytes()))
}

/// A file an import could not write: nothing was imported.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}; nothing was imported (the files already written were removed)")]
pub struct WriteError {
    what: String,
    #[source]
    source: std::io::Error,
}

/// Writes every imported row's files — copied scripts, scripts written for a job, private env
/// files (0600), definitions — or none: what was made is removed when one fails. A copy or script
/// already there has the same bytes (checked when planned) and is shared.
pub fn write(
    root: &Path,
    definitions: &Path,
    layout: &crate::layout::Layout,
    rows: &[&Row],
) -> Result<(), WriteError> {
    let mut made: Vec<PathBuf> = Vec::new();
    let result = rows
        .iter()
        .try_for_each(|row| write_row(root, definitions, layout, row, &mut made));
    if result.is_err() {
        for p in made.iter().rev() {
            let _ = std::fs::remove_file(p);
        }
    }
    result
}

fn write_row(
    root: &Path,
    definitions: &Path,
    layout: &crate::layout::Layout,
    row: &Row,
    made: &mut Vec<PathBuf>,
) -> Result<(), WriteError> {
    let failed = |what: String| move |source| WriteError { what, source };
    let mut new_file = |path: PathBuf, bytes: &[u8], mode: u32, shown: String| {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(failed(format!("making the folder of {shown}")))?;
        }
        crate::fsutil::create_new(&path, bytes, mode)
            .map_err(failed(format!("writing {shown}")))?;
        made.push(path);
        Ok::<(), WriteError>(())
    };
    for (from, rel) in &row.files.copies {
        let dest = root.join(rel);
        if dest.exists() {
            continue;
        }
        let bytes = std::fs::read(from).map_err(failed(format!("reading {}", from.display())))?;
        let mode = std::fs::metadata(from)
            .ok()
            .and_then(|m| crate::platform::mode_of(&m))
            .map_or(0o644, |m| m & 0o755);
        new_file(dest, &bytes, mode, rel.clone())?;
    }
    for (rel, bytes) in &row.files.scripts {
        let dest = root.join(rel);
        if !dest.exists() {
            new_file(dest, bytes, 0o755, rel.clone())?;
        }
    }
    let name = row.name.as_deref().unwrap_or_default();
    if !row.files.env.is_empty() {
        let valid = Name::new(name).map_err(|e| WriteError {
            what: format!("the env file of {name}"),
            source: std::io::Error::other(e.to_string()),
        })?;
        let path = layout.env_file(&valid);
        let text: String = row
            .files
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        if let Some(dir) = path.parent() {
            crate::fsutil::private_dir(dir)
                .map_err(failed(format!("making the folder of {}", path.display())))?;
        }
        let shown = path.display().to_string();
        new_file(path, text.as_bytes(), 0o600, shown)?;
    }
    let path = definitions.join(format!("{name}.toml"));
    new_file(
        path,
        &row.files.definition,
        0o644,
        format!("automations/{name}.toml"),
    )
}

/// The names an import gives, each once: a base that is taken gets `-2`, `-3`, … (counted per
/// base, so thousands of lines with one script stay linear).
#[derive(Default)]
pub struct Names {
    taken: BTreeSet<String>,
    next: BTreeMap<String, u32>,
}

impl Names {
    /// A valid name from `hint` (a script's or program's stem), not yet given by this import.
    pub fn give(&mut self, hint: &str) -> String {
        let base = name_base(hint);
        let mut n = self.next.get(&base).copied().unwrap_or(1);
        let mut name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        while self.taken.contains(&name) || Name::new(&name).is_err() {
            n += 1;
            name = format!("{base}-{n}");
        }
        self.next.insert(base, n + 1);
        self.taken.insert(name.clone());
        name
    }
}

/// `hint`'s file stem, lower case, runs of anything else one `-`, at most 40 characters; `job`
/// when nothing is left.
fn name_base(hint: &str) -> String {
    let file = hint.rsplit('/').next().unwrap_or(hint);
    let stem = file.split('.').next().unwrap_or(file);
    let mut base = String::with_capacity(stem.len());
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            base.push(c);
        } else if !base.is_empty() && !base.ends_with('-') {
            base.push('-');
        }
    }
    let mut base: String = base.trim_end_matches('-').chars().take(40).collect();
    while base.ends_with('-') {
        base.pop();
    }
    if base.is_empty() { "job".into() } else { base }
}

/// A comment or label fit to be a description — in the committed definition, `list` and the
/// unit's `Description=` — or why it is not: one that assigns a value (`API_TOKEN=…`) or holds a
/// string shaped like a key is never carried over.
pub fn safe_description(text: &str) -> Result<String, &'static str> {
    let text = text.trim();
    let words = text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'');
    for word in words {
        if let Some((name, value)) = word.split_once('=')
            && !name.is_empty()
            && !value.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err("it assigns a value (NAME=value)");
        }
        if token_like(word) {
            return Err("it holds a string shaped like a key or token");
        }
    }
    Ok(text.chars().take(200).collect())
}

/// A key's shape: a known prefix (`sk-`, `ghp_`, `xoxb-`, `AKIA`, …) or 20 and more characters of
/// a key's alphabet that mix letters and digits.
fn token_like(word: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "sk-",
        "sk_",
        "pk_",
        "ghp_",
        "gho_",
        "github_pat_",
        "xox",
        "AKIA",
        "glpat-",
    ];
    let word = word.trim_matches(|c: char| ",.;:()[]<>".contains(c));
    if PREFIXES
        .iter()
        .any(|p| word.starts_with(p) && word.len() >= p.len() + 8)
    {
        return true;
    }
    let run = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_+/=".contains(c));
    run && word.len() >= 20
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_counted_per_base() {
        let mut n = Names::default();
        let given: Vec<String> = [
            "Report_Builder.py",
            "report-builder.sh",
            "x/report_builder",
            "--",
            "ß",
        ]
        .iter()
        .map(|h| n.give(h))
        .collect();
        assert_eq!(
            given,
            [
                "report-builder",
                "report-builder-2",
                "report-builder-3",
                "job",
                "job-2"
            ]
        );
        // Linear in the number of lines of one name.
        let mut n = Names::default();
        for _ in 0..20_000 {
            n.give("s.sh");
        }
        assert_eq!(n.give("s.sh"), "s-20001");
    }

    #[test]
    fn descriptions_never_carry_values_or_keys() {
        assert_eq!(
            safe_description(" Nightly report for the team ").as_deref(),
            Ok("Nightly report for the team")
        );
        for bad in [
            "old key: API_TOKEN=sk-live-abc",
            "token sk-live-4eC39HqLyjWDarjtT1zdp7dc",
            "uses ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "key AbCdEf0123456789AbCdEf0123",
        ] {
            assert!(safe_description(bad).is_err(), "{bad}");
        }
        // Ordinary words with digits are no keys.
        assert!(safe_description("Rotate logs of 2024-01-01 at /var/log/app").is_ok());
    }
}
