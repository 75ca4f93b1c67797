//! Moving in from cron (docs/moving-in.md, docs/cron.md): a crontab read line by line into the
//! definitions that say the same, or the reason a line needs a person. Pure: the caller reads the
//! crontab, passes what it knows of the machine ([`Context`]) and writes what [`plan`] returns,
//! all or nothing.
//!
//! A job line's schedule becomes `[schedule] cron` as written. Its command is read as `/bin/sh`
//! reads it ([`super::shell`]): one command, at most with its output sent to a file, becomes an
//! argv (the redirection dropped, so output reaches the run log, unless kept); anything else
//! becomes a small script the import writes into `scripts/`, which starts in the home folder as
//! cron did and runs the line — the definition's `argv[0]`, so it is pinned. Scripts under the home
//! folder (which definitions may not name) are copied into `scripts/` when asked, each source to
//! its own copy. `NAME=value` lines become private env-file values of the jobs below them, never
//! part of a definition; `CRON_TZ=`/`TZ=` naming a zone other than the machine's becomes the
//! `time_zone` of the jobs below it; cron's other settings (`SHELL`, `PATH`, `MAILTO`) are
//! reported.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::shell::{self, Op, Token, Word};
use super::{Draft, Given, Row, Status, home_as_tilde, place_for, quote, retire::Original};
use crate::definition::{Checks, PLACEHOLDER_ROOT};
use crate::names::EnvName;
use crate::schedule::{Cron, ZoneName};

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
    /// Keep a line's output redirections (by default dropped, so output reaches the run log).
    pub keep_redirects: bool,
}

/// What a crontab becomes.
#[derive(Debug)]
pub struct Plan {
    /// One row per line that is not blank or a comment.
    pub rows: Vec<Row>,
    /// The `[email]` block of notify.toml that mails failures where `MAILTO` mailed output.
    pub email: Option<String>,
}

/// cron's own settings: what each becomes here.
const CRON_SETTINGS: [(&str, &str); 5] = [
    (
        "MAILTO",
        "no mail per run: output is kept in the run log (`automations show NAME`), and failures notify through <data root>/notify.toml (docs/health.md); the [email] block printed below mails them to the same address",
    ),
    (
        "PATH",
        "not carried over: commands run with a fixed PATH (docs/running.md); name programs elsewhere by full path",
    ),
    (
        "SHELL",
        "not carried over: lines with shell syntax run with /bin/sh",
    ),
    ("CRON_TZ", ""),
    ("TZ", ""),
];

/// The zone the job lines below a `CRON_TZ=`/`TZ=` line are read in.
#[derive(Default)]
struct Zone {
    /// A zone of the IANA database other than the machine's: their `time_zone`.
    name: Option<ZoneName>,
    /// What to tell of each job below, when the zone could not be kept.
    note: Option<String>,
}

/// The schedule words of an `@reboot` job.
const AT_LOGIN_WORDS: &str = "at login (@reboot)";

/// Reads the crontab `text` into one row per line that is not blank or a comment.
pub fn plan(text: &str, cx: &Context<'_>) -> Plan {
    let mut rows = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut zone = Zone::default();
    let mut comment: Option<String> = None;
    let mut mailto: Option<String> = None;
    let mut given = Given::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_matches([' ', '\t', '\r']);
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
            if name == "MAILTO" {
                mailto = Some(value.to_owned()).filter(|v| !v.is_empty());
            }
            rows.push(setting(number, name, value, cx, &mut env, &mut zone));
            continue;
        }
        let mut row = job(
            number,
            line,
            cx,
            &env,
            above.as_deref(),
            &mut given,
            zone.name,
        );
        // A zone matters to a clock, not to a login.
        if row.status == Status::Imported
            && row.schedule.as_deref() != Some(AT_LOGIN_WORDS)
            && let Some(z) = &zone.note
        {
            row.notes.push(z.clone());
        }
        rows.push(row);
    }
    let email = mailto.map(|to| email_block(&to, cx.user));
    Plan { rows, email }
}

/// notify.toml's `[email]` block for `MAILTO`'s addresses, through this machine's mail server as
/// cron used it.
fn email_block(to: &str, user: Option<&str>) -> String {
    let to: Vec<String> = to
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            if a.contains('@') {
                a.to_owned()
            } else {
                format!("{a}@localhost")
            }
        })
        .collect();
    let from = format!("automations <{}@localhost>", user.unwrap_or("automations"));
    format!(
        "[email]\nserver = \"localhost\"   # the machine's own mail server, as cron's MAILTO used it\ntls = \"none\"\nfrom = {}\nto = {}\n",
        quote(&from),
        super::quote_all(&to)
    )
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
    zone: &mut Zone,
) -> Row {
    let mut row = Row::new(Some(number), None, format!("{name}=…"));
    row.status = Status::Reported;
    let said = |what: &str| Some(format!("{name}: {what}"));
    row.reason = match CRON_SETTINGS.iter().find(|(n, _)| *n == name) {
        Some((n, _)) if *n == "CRON_TZ" || *n == "TZ" => {
            row.text = format!("{name}={value}");
            *zone = Zone::default();
            if cx.zone == Some(value) || value.is_empty() {
                said("the machine's own zone; the jobs below keep it")
            } else if let Ok(z) = ZoneName::parse(value) {
                zone.name = Some(z);
                // cronie reads CRON_TZ for the schedule; TZ is the jobs' environment in Debian's
                // cron and cronie, and the schedule's zone only in some crons: said either way.
                let tz_note = if *n == "TZ" {
                    " (cron may have read TZ= only as the jobs' environment and run them on the machine's clock: check the times)"
                } else {
                    ""
                };
                said(&format!(
                    "the jobs below get time_zone = \"{z}\": their times are read in {z}, whatever this machine's zone{tz_note}"
                ))
            } else {
                let here = cx.zone.unwrap_or("this machine's zone");
                zone.note = Some(format!(
                    "cron ran it in {value}; here it runs on local time ({here}): check the times"
                ));
                said(&format!(
                    "{value:?} is not a zone of the IANA database, so the jobs below run at these times in {here}"
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
    given: &mut Given,
    zone: Option<ZoneName>,
) -> Row {
    let mut row = Row::new(Some(number), None, line.to_owned());
    let Some((cron, command)) = schedule_and_command(line, cx, &mut row) else {
        return row;
    };
    row.schedule = Some(match &cron {
        Some(c) => c.words(),
        None => AT_LOGIN_WORDS.into(),
    });
    let Some(run) = translate(command, number, cx, &mut row, given) else {
        return row;
    };
    let name = run.name.clone();
    row.name = Some(name.clone());
    if cx.existing.contains(&name) {
        row.reason = Some(format!(
            "automations/{name}.toml exists already; rename or remove it, or import this line by hand"
        ));
        return row;
    }
    let description = match comment.map(super::safe_description) {
        Some(Ok(d)) => Some(d),
        Some(Err(why)) => {
            row.notes.push(format!(
                "the comment above it is not its description: {why}"
            ));
            None
        }
        None => None,
    };
    let schedule = match &cron {
        Some(c) => std::iter::once(("cron".to_owned(), quote(c.text())))
            .chain(zone.map(|z| ("time_zone".to_owned(), quote(z.name()))))
            .collect(),
        None => vec![("at_login".to_owned(), "true".to_owned())],
    };
    let checked = Draft {
        name: &name,
        origin: vec![
            "Imported from a crontab line by `automations import crontab`:".into(),
            format!("  {}", shorter(&home_as_tilde(line, cx.home))),
        ],
        description: description.as_deref(),
        command: &run.argv,
        env,
        timeout: 0,
        timeout_why: "",
        keys: Vec::new(),
        schedule,
        trigger: Vec::new(),
        limits: Vec::new(),
    }
    .checked(
        "cron lets a job run until it ends; this is the time to its next firing (at most a day).",
        cx.checks,
    );
    match checked {
        Ok((text, _)) => {
            row.status = Status::Imported;
            row.files.definition = text.into_bytes();
            row.files.env = env.to_vec();
            row.files.copies = run.copies;
            row.files.scripts = run.scripts;
            row.original = Some(Original::CrontabLine {
                line: number,
                text: line.to_owned(),
            });
        }
        Err(why) => row.reason = Some(why),
    }
    row
}

/// At most 300 characters of `line` (a long line is whole in the script written for it).
fn shorter(line: &str) -> String {
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// The schedule (five fields or a shortcut), the user (system crontabs) and the command.
fn split_job(line: &str, system: bool) -> Result<(&str, Option<&str>, &str), String> {
    let fields = if line.starts_with('@') { 1 } else { 5 };
    let before_command = fields + usize::from(system);
    // Each word's span, as written.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(before_command);
    let mut at = 0;
    while spans.len() < before_command {
        // Fields are split on spaces and tabs, as cron does: a no-break space is part of a word.
        let Some(start) = line[at..]
            .find(|c: char| c != ' ' && c != '\t')
            .map(|i| at + i)
        else {
            break;
        };
        let end = line[start..]
            .find([' ', '\t'])
            .map_or(line.len(), |i| start + i);
        spans.push((start, end));
        at = end;
    }
    let command = line[at..].trim_matches([' ', '\t']);
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

/// How a job's command runs here.
struct Translated {
    name: String,
    argv: Vec<String>,
    copies: Vec<(PathBuf, String)>,
    scripts: Vec<(String, Vec<u8>)>,
}

/// A script a line runs: where it is written in the line, and the file.
struct Script {
    span: (usize, usize),
    path: PathBuf,
}

/// Programs that run the rest of their words (`nice -n 5 x.sh`): a name comes from what they run.
const RUNNERS: [&str; 12] = [
    "nice",
    "ionice",
    "timeout",
    "env",
    "flock",
    "nohup",
    "chronic",
    "exec",
    "time",
    "sudo",
    "setsid",
    "systemd-cat",
];

/// Tools whose name says little: a job running one is named after the folder or file it works
/// on as well (`find /var/tmp … -delete` is `find-tmp`).
const TOOLS: [&str; 10] = [
    "find",
    "rm",
    "tar",
    "du",
    "cp",
    "mv",
    "chmod",
    "chown",
    "tmpreaper",
    "gzip",
];

/// Where the system's own programs are.
const SYSTEM_PLACES: [&str; 8] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/etc",
    "/opt/homebrew",
    "/System",
    "/Library",
];

/// File endings of scripts: such a file named by a line is a script it runs, executable or not.
const SCRIPT_ENDINGS: [&str; 9] = [
    ".sh", ".bash", ".zsh", ".py", ".pl", ".rb", ".js", ".php", ".lua",
];

/// The command of a cron line as an argv or as a script of its own, or `None` with `row.reason`.
fn translate(
    command: &str,
    number: usize,
    cx: &Context<'_>,
    row: &mut Row,
    given: &mut Given,
) -> Option<Translated> {
    let unescaped = unescape(command, row)?;
    let tokens = match shell::tokens(&unescaped) {
        Ok(t) => t,
        Err(why) => {
            row.reason = Some(format!(
                "its command cannot be read as /bin/sh reads it: {why}"
            ));
            return None;
        }
    };
    let (cmds, joined) = shell::commands(&tokens);
    if cmds.iter().all(|c| c.words.is_empty()) {
        row.reason = Some("it has no command".into());
        return None;
    }
    let mut shell_because = shell_reasons(&tokens, cx.keep_redirects);
    let (scripts, program) = scripts_run(&cmds, cx, &mut shell_because);
    let placed = place_copies(&scripts, cx, row, given)?;
    let copies: Vec<(PathBuf, String)> = {
        let mut seen: Vec<(PathBuf, String)> = Vec::new();
        for (s, p) in scripts.iter().zip(&placed) {
            if let Some(rel) = p
                && !seen.iter().any(|(from, _)| *from == s.path)
            {
                seen.push((s.path.clone(), rel.clone()));
            }
        }
        seen
    };
    let name = given.names.give(&name_hint(&scripts, program));
    if cmds.len() == 1 && !joined && shell_because.is_empty() {
        let argv = as_argv(&cmds[0], &scripts, &placed);
        if let Some(redirect) = redirection(&cmds[0], &unescaped) {
            row.notes.push(format!(
                "drops its output redirection `{}`: output reaches the run log (`automations show {name}`); --keep-redirects keeps it",
                home_as_tilde(redirect, cx.home)
            ));
        }
        return Some(Translated {
            name,
            argv,
            copies,
            scripts: Vec::new(),
        });
    }
    let rel = format!("scripts/cron-{name}.sh");
    let text = own_script(number, &name, &unescaped, &scripts, &placed);
    if let Ok(there) = std::fs::read(cx.root.join(&rel))
        && there != text.as_bytes()
    {
        row.reason = Some(format!(
            "{rel} exists already with other content; move it aside or import this line by hand"
        ));
        return None;
    }
    row.notes.push(format!(
        "runs as {rel}, written for it (pinned), through /bin/sh from the home folder as cron did: {}",
        if shell_because.is_empty() {
            "it is more than one command".to_owned()
        } else {
            shell_because.join("; ")
        }
    ));
    Some(Translated {
        name,
        argv: vec![format!("{PLACEHOLDER_ROOT}/{rel}")],
        copies,
        scripts: vec![(rel, text.into_bytes())],
    })
}

/// The command with cron's `\%` as `%`; `None` (the reason said) for a bare `%`, which cron turns
/// into a newline and whose rest it feeds to the command's standard input.
fn unescape(command: &str, row: &mut Row) -> Option<String> {
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
    Some(unescaped)
}

/// What in the line keeps it from being one argv, in words, each once.
fn shell_reasons(tokens: &[Token], keep_redirects: bool) -> Vec<String> {
    let mut because: Vec<String> = Vec::new();
    for t in tokens {
        let why = match t {
            Token::Op(Op::Pipe, _) => "it has a pipe",
            Token::Op(Op::List, _) => "it chains commands",
            Token::Op(Op::Group, _) => "it has a subshell",
            Token::Op(Op::In, _) => "it redirects standard input",
            Token::Op(Op::Out, _) if keep_redirects => {
                "it keeps its output redirection (--keep-redirects)"
            }
            Token::Word(w) if w.assignment => "it sets a variable for the command",
            Token::Word(w) if !w.literal => "it expands variables, commands or globs",
            _ => continue,
        };
        add_reason(&mut because, why);
    }
    because
}

fn add_reason(because: &mut Vec<String>, why: &str) {
    if !because.iter().any(|b| b == why) {
        because.push(why.to_owned());
    }
}

/// Every script the line runs, following `cd` as the line goes (cron starts in the home
/// folder), and its first program with the first absolute path it is given.
fn scripts_run<'t>(
    cmds: &[shell::Simple<'t>],
    cx: &Context<'_>,
    shell_because: &mut Vec<String>,
) -> (Vec<Script>, Option<(&'t Word, Option<&'t Word>)>) {
    let home = cx.home;
    let mut cwd: Option<PathBuf> = Some(home.to_path_buf());
    let mut scripts: Vec<Script> = Vec::new();
    let mut program = None;
    for cmd in cmds {
        let words: Vec<&Word> = cmd
            .words
            .iter()
            .copied()
            .skip_while(|w| w.assignment)
            .collect();
        let Some(first) = words.first() else {
            continue;
        };
        if first.literal && !first.home && first.text == "cd" {
            cwd = match words.get(1) {
                None => Some(home.to_path_buf()),
                Some(w) => resolve(w, cwd.as_deref(), home).filter(|p| p.is_dir()),
            };
            continue;
        }
        let main = words
            .iter()
            .position(|w| {
                !(RUNNERS.contains(&w.text.as_str())
                    || w.text.starts_with('-')
                    || w.text.bytes().all(|b| b.is_ascii_digit())
                    || w.assignment)
            })
            .unwrap_or(0);
        if program.is_none() {
            let target = words[main + 1..]
                .iter()
                .copied()
                .find(|w| w.literal && w.text.starts_with('/') && w.text.len() > 1);
            program = Some((words[main], target));
        }
        for (i, w) in words.iter().enumerate() {
            match script_at(w, i == main, cwd.as_deref(), home) {
                Found::Script(path) => scripts.push(Script { span: w.span, path }),
                Found::UnderHome => add_reason(
                    shell_because,
                    "it names a folder or file under the home folder",
                ),
                Found::Relative => add_reason(
                    shell_because,
                    "it names relative paths, which cron read from the home folder",
                ),
                Found::Nothing => {}
            }
        }
    }
    (scripts, program)
}

/// What a word names.
enum Found {
    Script(PathBuf),
    /// A folder or file under home that is no script.
    UnderHome,
    /// A relative path, which cron read from home.
    Relative,
    Nothing,
}

fn script_at(w: &Word, program: bool, cwd: Option<&Path>, home: &Path) -> Found {
    if w.text.starts_with('-') && !w.home {
        return Found::Nothing;
    }
    let ending = SCRIPT_ENDINGS.iter().any(|e| w.text.ends_with(e));
    if !(w.home || w.text.contains('/') || ending) {
        return Found::Nothing;
    }
    let Some(path) = resolve(w, cwd, home) else {
        return Found::Nothing;
    };
    let under_home = path.starts_with(home);
    // The system's programs are programs; a script is the user's own.
    let system = !under_home && SYSTEM_PLACES.iter().any(|p| path.starts_with(p));
    let is_script = (ending || !system)
        && std::fs::metadata(&path).is_ok_and(|m| {
            let runnable = crate::platform::mode_of(&m).is_none_or(|mode| mode & 0o111 != 0);
            m.is_file() && (program || runnable || ending)
        });
    if is_script {
        Found::Script(path)
    } else if under_home {
        Found::UnderHome
    } else if !Path::new(&w.text).is_absolute() && !w.home {
        Found::Relative
    } else {
        Found::Nothing
    }
}

/// Each script's copy (`scripts/…`) when it is under home, `None` for one elsewhere (said when
/// it is outside the repository: not pinned); `None` overall, the reason said, when a script
/// under home cannot be copied.
fn place_copies(
    scripts: &[Script],
    cx: &Context<'_>,
    row: &mut Row,
    given: &mut Given,
) -> Option<Vec<Option<String>>> {
    let mut placed = Vec::with_capacity(scripts.len());
    for s in scripts {
        if !s.path.starts_with(cx.home) {
            if !s.path.starts_with(cx.root) {
                let note = format!(
                    "runs {} from outside the repository: it is not pinned (copy it into scripts/ to pin it)",
                    s.path.display()
                );
                if !row.notes.contains(&note) {
                    row.notes.push(note);
                }
            }
            placed.push(None);
            continue;
        }
        let shown = home_as_tilde(&s.path.to_string_lossy(), cx.home);
        if !cx.copy_scripts {
            row.reason = Some(format!(
                "it runs {shown}, under the home folder, which definitions may not name: --copy-scripts copies it into scripts/ (versioned and pinned there)"
            ));
            return None;
        }
        match place_for(&s.path, cx.root, cx.home, given) {
            Ok(rel) => {
                let note = format!("copies {shown} to {rel}");
                if !row.notes.contains(&note) {
                    row.notes.push(note);
                }
                placed.push(Some(rel));
            }
            Err(why) => {
                row.reason = Some(why);
                return None;
            }
        }
    }
    Some(placed)
}

/// What a job is named after: the script that does the work, else its program (and what a tool
/// works on).
fn name_hint(scripts: &[Script], program: Option<(&Word, Option<&Word>)>) -> String {
    match (scripts.first(), program) {
        (Some(s), _) => s.path.to_string_lossy().into_owned(),
        (None, Some((p, target))) => {
            let prog = p.text.rsplit('/').next().unwrap_or(&p.text);
            match target {
                Some(t) if TOOLS.contains(&prog) => {
                    let last = t
                        .text
                        .trim_end_matches('/')
                        .rsplit('/')
                        .next()
                        .unwrap_or("");
                    format!("{prog}-{last}")
                }
                _ => prog.to_owned(),
            }
        }
        (None, None) => "job".to_owned(),
    }
}

/// One command's words, each copied script by its place in the repository.
fn as_argv(cmd: &shell::Simple<'_>, scripts: &[Script], placed: &[Option<String>]) -> Vec<String> {
    cmd.words
        .iter()
        .map(
            |w| match scripts.iter().zip(placed).find(|(s, _)| s.span == w.span) {
                Some((_, Some(rel))) => format!("{PLACEHOLDER_ROOT}/{rel}"),
                _ => w.text.clone(),
            },
        )
        .collect()
}

/// A command's output redirections as written (`> /dev/null 2>&1`), if it has any.
fn redirection<'l>(cmd: &shell::Simple<'_>, line: &'l str) -> Option<&'l str> {
    let first = cmd.outs.first()?.0.0;
    let last = cmd
        .outs
        .iter()
        .map(|(op, target)| target.map_or(op.1, |t| t.span.1))
        .max()
        .unwrap_or(first);
    Some(&line[first..last])
}

/// The script written for a line that needs a shell: it starts in the home folder, as cron did,
/// and runs the line with each copied script named beside it (`"$here"/x.sh`).
fn own_script(
    number: usize,
    name: &str,
    line: &str,
    scripts: &[Script],
    placed: &[Option<String>],
) -> String {
    let mut body = String::with_capacity(line.len() + 64);
    let mut at = 0;
    let mut replaced: Vec<(&Script, &str)> = scripts
        .iter()
        .zip(placed)
        .filter_map(|(s, p)| p.as_deref().map(|p| (s, p)))
        .collect();
    replaced.sort_by_key(|(s, _)| s.span.0);
    let uses_here = !replaced.is_empty();
    for (s, place) in replaced {
        body.push_str(&line[at..s.span.0]);
        let file = place.strip_prefix("scripts/").unwrap_or(place);
        body.push_str(&format!("\"$here\"/{}", sh_quote(file)));
        at = s.span.1;
    }
    body.push_str(&line[at..]);
    format!(
        "#!/bin/sh\n# Line {number} of the crontab, as cron ran it: through /bin/sh, from the home folder.\n# Written by `automations import crontab` for automations/{name}.toml, which runs it pinned:\n# an edit runs unattended only after `automations install {name}` (docs/moving-in.md).\n{}cd || exit 1\n{body}\n",
        if uses_here { "here=${0%/*}\n" } else { "" }
    )
}

/// `s` quoted for sh when it needs it.
fn sh_quote(s: &str) -> String {
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./+".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Where a word points, read from `cwd` (unknown after a `cd` that could not be followed).
fn resolve(w: &Word, cwd: Option<&Path>, home: &Path) -> Option<PathBuf> {
    if w.home {
        return Some(home.join(w.text.trim_start_matches('/')));
    }
    if !w.literal {
        return None;
    }
    let p = Path::new(&w.text);
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    cwd.map(|c| c.join(p))
}

#[cfg(test)]
mod tests;
