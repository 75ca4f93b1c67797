//! Moving in from cron (docs/cron.md): a crontab read line by line into the definitions that say
//! the same, or the reason a line needs a person. Pure: the caller reads the crontab, passes what
//! it knows of the machine ([`Context`]) and writes what [`plan`] returns, all or nothing.
//!
//! A job line's schedule becomes `[schedule] cron` as written; its command becomes an argv when it
//! has no shell syntax, else `["/bin/sh", "-c", line]`, as cron would run it. A script under the
//! home folder (which definitions may not name) is copied into the repository's `scripts/` when
//! asked. `NAME=value` lines become private env-file values of the jobs below them, never part of
//! a definition; cron's own settings (`CRON_TZ`, `TZ`, `SHELL`, `PATH`, `MAILTO`) are reported.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::definition::{self, Checks, PLACEHOLDER_ROOT};
use crate::names::{EnvName, Name};
use crate::schedule::Cron;

/// What the import knows of the machine and the repository.
pub struct Context<'a> {
    /// The user's home folder (cron's working directory; definitions may not name it).
    pub home: &'a Path,
    /// The repository root (its `scripts/` receives copied scripts).
    pub root: &'a Path,
    /// What definitions are checked against.
    pub checks: &'a Checks,
    /// The user running the import (system crontabs name a user per line).
    pub user: Option<&'a str>,
    /// This machine's zone, to tell a `CRON_TZ` that differs.
    pub zone: Option<&'a str>,
    /// The names that already have a definition.
    pub existing: &'a BTreeSet<String>,
    /// A system crontab: a user field after the schedule.
    pub system: bool,
    /// Copy scripts under the home folder into `scripts/`.
    pub copy_scripts: bool,
}

/// What became of one line.
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

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// 1-based.
    pub line: usize,
    /// The line as shown: a job as written, a `NAME=` line without its value.
    pub text: String,
    /// The definition's name, for a job.
    pub name: Option<String>,
    /// The schedule in words, for a job.
    pub schedule: Option<String>,
    pub status: Status,
    /// Why it needs you, or what was reported.
    pub reason: Option<String>,
    /// What a person should know about an imported job (it runs through /bin/sh, a zone, …).
    pub notes: Vec<String>,
    /// What is written for it.
    #[serde(skip)]
    pub files: Files,
}

/// What one imported job writes.
#[derive(Clone, Debug, Default)]
pub struct Files {
    /// `automations/<name>.toml`'s bytes.
    pub definition: Vec<u8>,
    /// Scripts to copy: from (under home) to (relative to the root, `scripts/<file>`).
    pub copies: Vec<(PathBuf, String)>,
    /// The env file's lines (`NAME=value`).
    pub env: Vec<(String, String)>,
}

/// cron's own settings: what each becomes here.
const CRON_SETTINGS: [(&str, &str); 5] = [
    (
        "MAILTO",
        "no mail is sent: output is kept in the run log (`automations show`), and failures notify through notify.toml (docs/notifications.md)",
    ),
    (
        "PATH",
        "not carried over: commands run with a fixed PATH (docs/running.md); name programs elsewhere by full path",
    ),
    (
        "SHELL",
        "not carried over: lines with shell syntax run with /bin/sh -c",
    ),
    ("CRON_TZ", ""),
    ("TZ", ""),
];

/// The schedule words of an `@reboot` job.
const AT_LOGIN_WORDS: &str = "at login (@reboot)";

/// Reads the crontab `text` into one row per line that is not blank or a comment.
pub fn plan(text: &str, cx: &Context<'_>) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut zone_note: Option<String> = None;
    let mut comment: Option<String> = None;
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let number = i + 1;
        if line.is_empty() {
            comment = None;
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            comment = Some(c.trim().to_owned()).filter(|c| !c.is_empty());
            continue;
        }
        let above = comment.take();
        if let Some((name, value)) = assignment(line) {
            rows.push(setting(number, name, value, cx, &mut env, &mut zone_note));
            continue;
        }
        let mut row = job(number, line, cx, &env, above.as_deref(), &mut taken);
        // A zone matters to a clock, not to a login.
        if row.status == Status::Imported
            && row.schedule.as_deref() != Some(AT_LOGIN_WORDS)
            && let Some(z) = &zone_note
        {
            row.notes.push(z.clone());
        }
        rows.push(row);
    }
    rows
}

/// `NAME=value` (spaces around `=` allowed, the value optionally quoted), as cron reads it.
fn assignment(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    let first = name.bytes().next()?;
    let valid = (first.is_ascii_alphabetic() || first == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return None;
    }
    let value = value.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
        .unwrap_or(value);
    Some((name, unquoted))
}

fn setting(
    number: usize,
    name: &str,
    value: &str,
    cx: &Context<'_>,
    env: &mut Vec<(String, String)>,
    zone_note: &mut Option<String>,
) -> Row {
    let mut row = Row {
        line: number,
        text: format!("{name}=…"),
        name: None,
        schedule: None,
        status: Status::Reported,
        reason: None,
        notes: Vec::new(),
        files: Files::default(),
    };
    let said = |what: &str| Some(format!("{name}: {what}"));
    row.reason = match CRON_SETTINGS.iter().find(|(n, _)| *n == name) {
        Some((n, _)) if *n == "CRON_TZ" || *n == "TZ" => {
            row.text = format!("{name}={value}");
            if cx.zone == Some(value) || value.is_empty() {
                *zone_note = None;
                said("the machine's own zone; definitions use local time")
            } else {
                let here = cx.zone.unwrap_or("this machine's zone");
                *zone_note = Some(format!(
                    "cron ran it in {value}; here it runs on local time ({here}): check the times"
                ));
                said(&format!(
                    "definitions use the machine's local time ({here}), not {value}: the jobs below run at these times in {here}"
                ))
            }
        }
        Some((_, what)) => said(what),
        None => match EnvName::new(name) {
            Ok(_) => {
                env.retain(|(n, _)| n != name);
                env.push((name.to_owned(), value.to_owned()));
                said(
                    "given to the jobs below through their private env files (0600), never written into a definition",
                )
            }
            Err(e) => said(&format!("not carried over: {e}")),
        },
    };
    row
}

/// A job line's schedule (`None` for `@reboot`) and command; `None` when it cannot be imported
/// as this user, with the row's status and reason said.
fn schedule_and_command<'l>(
    line: &'l str,
    cx: &Context<'_>,
    row: &mut Row,
) -> Option<(Option<Cron>, &'l str)> {
    let (schedule, user, command) = match split_job(line, cx.system) {
        Ok(parts) => parts,
        Err(why) => {
            row.reason = Some(why);
            return None;
        }
    };
    if let Some(user) = user
        && cx.user != Some(user)
    {
        row.status = Status::NotImported;
        row.reason = Some(match cx.user {
            Some(_) => format!("it runs as {user}; import it as that user"),
            None => format!("it runs as {user}, and which user this is cannot be told (set USER)"),
        });
        return None;
    }
    let cron = match schedule {
        s if s.eq_ignore_ascii_case("@reboot") => None,
        s => match Cron::parse(s) {
            Ok(c) => Some(c),
            Err(e) => {
                row.reason = Some(format!("its schedule {s:?}: {e}"));
                return None;
            }
        },
    };
    Some((cron, command))
}

/// One job line.
fn job(
    number: usize,
    line: &str,
    cx: &Context<'_>,
    env: &[(String, String)],
    comment: Option<&str>,
    taken: &mut BTreeSet<String>,
) -> Row {
    let mut row = Row {
        line: number,
        text: line.to_owned(),
        name: None,
        schedule: None,
        status: Status::NeedsYou,
        reason: None,
        notes: Vec::new(),
        files: Files::default(),
    };
    let Some((cron, command)) = schedule_and_command(line, cx, &mut row) else {
        return row;
    };
    row.schedule = Some(match &cron {
        Some(c) => c.words(),
        None => AT_LOGIN_WORDS.into(),
    });
    let command = match translate_command(command, cx, &mut row) {
        Some(c) => c,
        None => return row,
    };
    let name = unique_name(&command, taken);
    row.name = Some(name.clone());
    if cx.existing.contains(&name) {
        row.reason = Some(format!(
            "automations/{name}.toml exists already; rename or remove it, or import this line by hand"
        ));
        return row;
    }
    let timeout = cron.as_ref().map_or(definition::MAX_TIMEOUT_SECONDS, |c| {
        c.shortest_gap_seconds()
            .clamp(60, definition::MAX_TIMEOUT_SECONDS)
    });
    // The line as a comment, the home folder written `~` (a repository does not name it).
    let shown = match cx.home.to_str() {
        Some(h) if h.len() > 1 => line.replace(h, "~"),
        _ => line.to_owned(),
    };
    let text = definition_text(&DefinitionText {
        name: &name,
        line: &shown,
        description: comment,
        command: &command,
        env,
        timeout,
        cron: cron.as_ref(),
    });
    match definition::parse(&format!("{name}.toml"), text.as_bytes(), cx.checks) {
        Ok(_) => {
            row.status = Status::Imported;
            row.files.definition = text.into_bytes();
            row.files.env = env.to_vec();
        }
        Err(problems) => {
            let all: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
            row.reason = Some(format!(
                "the definition it makes is refused: {}",
                all.join("; ")
            ));
        }
    }
    row
}

/// The schedule (five fields or a shortcut), the user (system crontabs) and the command.
fn split_job(line: &str, system: bool) -> Result<(&str, Option<&str>, &str), String> {
    let fields = if line.starts_with('@') { 1 } else { 5 };
    let before_command = fields + usize::from(system);
    // Each word's span, as written.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(before_command);
    let mut at = 0;
    while spans.len() < before_command {
        let Some(start) = line[at..]
            .find(|c: char| !c.is_whitespace())
            .map(|i| at + i)
        else {
            break;
        };
        let end = line[start..]
            .find(char::is_whitespace)
            .map_or(line.len(), |i| start + i);
        spans.push((start, end));
        at = end;
    }
    let command = line[at..].trim();
    if spans.len() < before_command || command.is_empty() {
        let shape = if system {
            "five time fields (or an @shortcut), a user and a command"
        } else {
            "five time fields (or an @shortcut) and a command"
        };
        return Err(format!(
            "not a cron line: a job is {shape}, a setting is NAME=value"
        ));
    }
    let schedule = &line[spans[0].0..spans[fields - 1].1];
    let user = system.then(|| &line[spans[fields].0..spans[fields].1]);
    Ok((schedule, user, command))
}

/// The argv of a cron command, or `None` with `row.reason` set.
fn translate_command(command: &str, cx: &Context<'_>, row: &mut Row) -> Option<Vec<String>> {
    // cron turns an unescaped % into a newline and feeds what follows to the command's stdin.
    let mut unescaped = String::with_capacity(command.len());
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'%') => {
                unescaped.push('%');
                chars.next();
            }
            '%' => {
                row.reason = Some("it uses %, which cron turns into a newline and whose rest it feeds to the command's standard input; put that input into a script (or a file the command reads) and import the line that runs it".into());
                return None;
            }
            c => unescaped.push(c),
        }
    }
    let shell = needs_shell(&unescaped);
    let mut argv: Vec<String> = if shell {
        row.notes.push(format!(
            "runs through /bin/sh -c: {shell}",
            shell = shell_reason(&unescaped)
        ));
        vec!["/bin/sh".into(), "-c".into(), unescaped.clone()]
    } else {
        unescaped.split_whitespace().map(str::to_owned).collect()
    };
    // Home paths: in the argv's words, or in the shell line's.
    let words: Vec<String> = if shell {
        unescaped
            .split(|c: char| c.is_whitespace() || ";|&<>()`=:".contains(c))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        argv.clone()
    };
    for (i, word) in words.iter().enumerate() {
        let Some(path) = home_path(word, cx.home, !shell && i == 0) else {
            continue;
        };
        let rel = copy_target(word, &path, cx, row)?;
        let replacement = format!("{PLACEHOLDER_ROOT}/{rel}");
        if shell {
            argv[2] = argv[2].replace(word.as_str(), &replacement);
        } else {
            argv[i] = replacement;
        }
        if !row.files.copies.iter().any(|(_, r)| *r == rel) {
            row.files.copies.push((path, rel));
        }
    }
    Some(argv)
}

/// Where `word` points under the home folder, if it does: `~/x`, `$HOME/x`, `${HOME}/x`, the
/// home path itself, or (for the program) a relative path, which cron runs from the home folder.
fn home_path(word: &str, home: &Path, program: bool) -> Option<PathBuf> {
    for prefix in ["~/", "$HOME/", "${HOME}/"] {
        if let Some(rest) = word.strip_prefix(prefix) {
            return Some(home.join(rest));
        }
    }
    if matches!(word, "~" | "$HOME" | "${HOME}") {
        return Some(home.to_path_buf());
    }
    let p = Path::new(word);
    if p.is_absolute() {
        return p.starts_with(home).then(|| p.to_path_buf());
    }
    (program && word.contains('/')).then(|| home.join(word))
}

/// The repository path a script under home is copied to, or `None` with the reason.
fn copy_target(word: &str, path: &Path, cx: &Context<'_>, row: &mut Row) -> Option<String> {
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    if !cx.copy_scripts {
        row.reason = Some(format!(
            "it runs {word}, under the home folder, which definitions may not name: --copy-scripts copies it into scripts/ (versioned and pinned there)"
        ));
        return None;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && !file.is_empty() => {}
        _ => {
            row.reason = Some(format!(
                "it names {word}, under the home folder, which is not a script that can be copied: write a script in the repository that uses $HOME"
            ));
            return None;
        }
    }
    let rel = format!("scripts/{file}");
    let dest = cx.root.join(&rel);
    if let Ok(existing) = std::fs::read(&dest)
        && std::fs::read(path).ok().as_ref() != Some(&existing)
    {
        row.reason = Some(format!(
            "{rel} exists already with other content than {word}; copy it by hand under another name"
        ));
        return None;
    }
    row.notes.push(format!("copies {word} to {rel}"));
    Some(rel)
}

/// Characters that make a line shell syntax (pipes, redirects, lists, expansions, quotes, globs,
/// comments), or a first word that assigns a variable.
fn needs_shell(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or_default();
    command.contains(|c: char| "|&;<>()$`\\\"'*?[]#~".contains(c)) || first.contains('=')
}

fn shell_reason(command: &str) -> &'static str {
    let has = |s: &str| command.contains(s);
    if has("|") && !has("||") {
        "it has a pipe"
    } else if has(">") || has("<") {
        "it redirects"
    } else if has("&&") || has("||") || has(";") {
        "it chains commands"
    } else if has("$") || has("`") {
        "it expands variables or commands"
    } else if has("~") {
        "it names ~"
    } else if has("'") || has("\"") || has("\\") {
        "it quotes"
    } else {
        "it has shell syntax"
    }
}

/// The script's stem (or the program's), as a valid name not yet taken by this import.
fn unique_name(argv: &[String], taken: &mut BTreeSet<String>) -> String {
    let program = if argv.len() == 3 && argv[0] == "/bin/sh" {
        // The first word that looks like a path, else the first word.
        let words: Vec<&str> = argv[2].split_whitespace().collect();
        words
            .iter()
            .find(|w| w.contains('/'))
            .or(words.first())
            .copied()
            .unwrap_or("job")
            .to_owned()
    } else {
        argv[0].clone()
    };
    let file = program.rsplit('/').next().unwrap_or(&program);
    let stem = file.split('.').next().unwrap_or(file);
    let mut base: String = stem
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    base = base.trim_matches('-').to_owned();
    while base.contains("--") {
        base = base.replace("--", "-");
    }
    base.truncate(40);
    let base = base.trim_end_matches('-').to_owned();
    let base = if base.is_empty() {
        "job".to_owned()
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) || Name::new(&name).is_err() {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

struct DefinitionText<'a> {
    name: &'a str,
    line: &'a str,
    description: Option<&'a str>,
    command: &'a [String],
    env: &'a [(String, String)],
    timeout: u32,
    /// `None`: `@reboot`, a run at login.
    cron: Option<&'a Cron>,
}

/// The definition file, with where it came from in a comment.
fn definition_text(d: &DefinitionText<'_>) -> String {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut out = format!(
        "# Imported from a crontab line by `automations import crontab`:\n#   {}\n",
        d.line.replace('\n', " ")
    );
    out.push_str(&format!("name = {}\n", quote(d.name)));
    if let Some(desc) = d.description {
        let desc: String = desc.chars().take(200).collect();
        out.push_str(&format!("description = {}\n", quote(&desc)));
    }
    let argv: Vec<String> = d.command.iter().map(|a| quote(a)).collect();
    out.push_str(&format!("command = [{}]\n", argv.join(", ")));
    if !d.env.is_empty() {
        let names: Vec<String> = d.env.iter().map(|(n, _)| quote(n)).collect();
        out.push_str(&format!(
            "# Values in the private env file, <data root>/env/{}.env.\nenv = [{}]\n",
            d.name,
            names.join(", ")
        ));
    }
    out.push_str(&format!(
        "# cron lets a job run until it ends; this is the time to its next firing (at most a day).\ntimeout_seconds = {}\n",
        d.timeout
    ));
    out.push_str("\n[schedule]\n");
    match d.cron {
        Some(c) => out.push_str(&format!("cron = {}\n", quote(c.text()))),
        None => out.push_str("at_login = true\n"),
    }
    out
}

#[cfg(test)]
mod tests;
