//! Definitions: `automations/<name>.toml` parsed strictly into a typed model (docs/definitions.md).
//!
//! The raw TOML is walked key by key instead of derived with serde, so that one pass reports
//! **every** problem at once, each located as `automations/<file>: <key>: <what is wrong>`.
//! Nothing downstream ever sees raw TOML. This module reads definition files and nothing else; it
//! must never panic on any input (see the fuzz test below) and never touches the data root.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};
use toml::{Table, Value};

use crate::names::{EnvName, FactName, Name, truncate};
use crate::schedule::{CatchUp, Cron, Schedule, TimeOfDay, Weekday, ZoneName};
use crate::settings::DEFINITIONS_DIR;

pub mod policy;
pub mod trigger;
pub use policy::{IoClass, Limits, Overlap, Policy};
pub use trigger::{ChainIndex, Followers, PathEvent, Triggers};

/// Definition files larger than this are refused unread.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// The largest `timeout_seconds`.
pub const MAX_TIMEOUT_SECONDS: u32 = 86_400;
/// `timeout_seconds` when the definition does not say.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 300;
/// The placeholder for the repository root in `command`.
pub const PLACEHOLDER_ROOT: &str = "{root}";
/// What to do instead of naming the home directory in a definition.
const HOME_INSTEAD: &str = "instead, run a script in the repository, such as [\"{root}/scripts/x.sh\"], that uses $HOME, which the command's environment has";

/// The placeholder for this binary in `command`.
pub const PLACEHOLDER_SELF: &str = "{self}";

/// One located problem in one definition file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `automations/<file>`.
    pub file: String,
    /// The automation the file is named for, when its name is one (`backup.toml`: backup).
    #[serde(skip)]
    pub name: Option<Name>,
    /// The key (dotted for tables), or `file` / `toml` for whole-file problems.
    pub key: String,
    /// What is wrong, as a lowercase fragment.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.key, self.message)
    }
}

/// The AnyType access an automation declares (docs/keys.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AnyTypeAccess {
    /// The permission word AnyType reports (`read`, `readwrite`, …).
    pub permission: String,
    /// Exactly the spaces the key must reach.
    pub spaces: Vec<String>,
}

/// A valid definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// The automation's name (= file stem).
    pub name: Name,
    /// One line saying what it does.
    pub description: Option<String>,
    /// argv, with `{root}` / `{self}` placeholders not yet substituted.
    pub command: Vec<String>,
    /// The deadline for one run.
    pub timeout_seconds: u32,
    /// A success shorter than this did not do its work (health's too-short rule).
    pub expect_min_seconds: Option<u32>,
    /// Calls outside services (auto-pause applies).
    pub outbound: bool,
    /// A shipped example: `install --all` leaves it out (install it by name).
    pub example: bool,
    /// The fact that is the headline count.
    pub headline: Option<FactName>,
    /// Variables the command may see.
    pub env: Vec<EnvName>,
    /// Declared AnyType access.
    pub anytype: Option<AnyTypeAccess>,
    /// When the OS fires it; `None` = manual only.
    pub schedule: Option<Schedule>,
    /// The most a scheduled firing waits before it runs (the wait is the same for one slot: see
    /// `schedule::jitter_delay`); 0 = none.
    pub jitter_seconds: u32,
    /// How a failed scheduled firing is tried again.
    pub retry: Retry,
    /// What else starts it: watched paths, other automations' firings (`[trigger]`).
    pub trigger: Option<Triggers>,
    /// Overlap, lock group, limits and sandbox (docs/policies.md).
    pub policy: Policy,
    /// Hex sha256 of the file's bytes (what `started` records and install pins).
    pub sha256: String,
}

impl Definition {
    /// Every key at its default, as a file that sets none would have it: what [`fields`] reads a
    /// file's keys into. `name` and `command` have no default (a file must set both; the draft
    /// holds stand-ins until it does), nor has `sha256` (set from the file's bytes once it is
    /// valid).
    fn draft(stem: &str) -> Self {
        Self {
            name: Name::new(stem)
                .or_else(|_| Name::new("draft"))
                .expect("a valid name"),
            description: None,
            command: Vec::new(),
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            expect_min_seconds: None,
            outbound: false,
            example: false,
            headline: None,
            env: Vec::new(),
            anytype: None,
            schedule: None,
            jitter_seconds: 0,
            retry: Retry::default(),
            trigger: None,
            policy: Policy::default(),
            sha256: String::new(),
        }
    }

    /// Whether the service manager starts it at all (a schedule, a `[trigger]`), so it has units
    /// to install; else it is run by hand only.
    pub fn has_units(&self) -> bool {
        self.schedule.is_some() || self.trigger.is_some()
    }
}

/// What a failed attempt is, for `retry_on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// The command exited with a status other than 0.
    ExitStatus,
    /// The command ran past `timeout_seconds`.
    Timeout,
    /// Its outside calls got a server error (5xx), 429, or no answer.
    Outbound,
}

impl RetryOn {
    const ALL: [RetryOn; 3] = [RetryOn::ExitStatus, RetryOn::Timeout, RetryOn::Outbound];

    fn as_str(self) -> &'static str {
        match self {
            RetryOn::ExitStatus => "exit_status",
            RetryOn::Timeout => "timeout",
            RetryOn::Outbound => "outbound",
        }
    }
}

/// `retries`, `retry_delay_seconds` and `retry_on` of `[schedule]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Retry {
    /// Attempts after the first, 0..=5.
    pub retries: u32,
    /// The wait before the second attempt; it doubles before each next one, at most an hour.
    pub delay_seconds: u32,
    /// Which failures are tried again.
    pub on: Vec<RetryOn>,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            retries: 0,
            delay_seconds: DEFAULT_RETRY_DELAY_SECONDS,
            on: RetryOn::ALL.to_vec(),
        }
    }
}

impl Retry {
    /// The wait after attempt `attempt` (1-based) failed.
    pub fn delay(&self, attempt: u32) -> std::time::Duration {
        let doubled = u64::from(self.delay_seconds) << (attempt.saturating_sub(1).min(12));
        std::time::Duration::from_secs(doubled.min(MAX_RETRY_DELAY_SECONDS))
    }

    /// Every wait of a firing whose attempts all fail, added up.
    pub fn total_delay(&self) -> std::time::Duration {
        (1..=self.retries).map(|a| self.delay(a)).sum()
    }
}

/// `retry_delay_seconds` when the definition does not say.
pub const DEFAULT_RETRY_DELAY_SECONDS: u32 = 30;
/// The longest wait between two attempts, however often it doubled.
const MAX_RETRY_DELAY_SECONDS: u64 = 3600;

/// Facts the home/data-root rule needs.
#[derive(Clone, Debug)]
pub struct Checks {
    /// The user's home directory.
    pub home: PathBuf,
    /// The private data root.
    pub data_root: PathBuf,
    /// Where the service manager reads this user's units from (a strict command may not write
    /// there: a unit it left would run unconfined).
    pub units_dir: PathBuf,
}

impl Checks {
    /// The checks of this installation: its home and its data root.
    pub fn of(settings: &crate::settings::Settings) -> Self {
        Self {
            home: settings.home.clone(),
            data_root: settings.data_root.clone(),
            units_dir: settings.agents_dir.clone(),
        }
    }
}

/// Why one definition could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No file for that name.
    #[error("automations/{0}.toml: file: no such definition")]
    Missing(Name),
    /// The file is there but invalid.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

/// All definitions of a folder, and every problem found in it.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Valid definitions, sorted by name.
    pub definitions: Vec<Definition>,
    /// Problems of the invalid files, in file order.
    pub problems: Vec<Problem>,
}

/// Loads every `*.toml` of the definitions folder `dir`. Only an unreadable folder is an error.
pub fn load_all(dir: &Path, checks: &Checks) -> std::io::Result<Loaded> {
    if !dir.is_dir() {
        // An unreadable folder is the one error; a missing one is too (nothing to validate).
        std::fs::read_dir(dir)?;
    }
    let files = crate::fsutil::list_named(dir, "", &[".toml"])?;
    let mut loaded = Loaded::default();
    // Parsing is most of `validate` and `list` over many definitions: the cores share it.
    for read in crate::parallel::map(&files, 64, |(_, path)| {
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        read_definition_file(path).and_then(|bytes| parse(&file_name, &bytes, checks))
    }) {
        match read {
            Ok(def) => loaded.definitions.push(def),
            Err(mut problems) => loaded.problems.append(&mut problems),
        }
    }
    loaded.definitions.sort_by(|a, b| a.name.cmp(&b.name));
    let root = dir.parent().unwrap_or(dir);
    trigger::relations(&mut loaded, root, &checks.home);
    policy::relations(&mut loaded, root, checks);
    Ok(loaded)
}

/// Loads the definition of `name` from the definitions folder `dir`.
pub fn load_one(dir: &Path, name: &Name, checks: &Checks) -> Result<Definition, LoadError> {
    let file_name = format!("{name}.toml");
    let path = dir.join(&file_name);
    if !path.exists() {
        return Err(LoadError::Missing(name.clone()));
    }
    read_definition_file(&path)
        .and_then(|bytes| parse(&file_name, &bytes, checks))
        .map_err(LoadError::Invalid)
}

fn read_definition_file(path: &Path) -> Result<Vec<u8>, Vec<Problem>> {
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let fail = |message: String| vec![problem(&file_name, "file", message)];
    // A FIFO or device named like a definition must never block validate, list, units or check.
    let bytes = crate::fsutil::read_following(path, MAX_FILE_BYTES + 1)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "larger than {} KiB; definitions are small",
            MAX_FILE_BYTES / 1024
        )));
    }
    Ok(bytes)
}

fn problem(file_name: &str, key: &str, message: impl Into<String>) -> Problem {
    Problem {
        file: format!("{DEFINITIONS_DIR}/{file_name}"),
        name: file_name
            .strip_suffix(".toml")
            .and_then(|n| Name::new(n).ok()),
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Collects the problems of one file.
struct Report<'a> {
    file_name: &'a str,
    problems: Vec<Problem>,
}

impl Report<'_> {
    fn add(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(problem(self.file_name, key, message));
    }

    fn wrong_type(&mut self, key: &str, expected: &str, found: &Value) {
        self.add(
            key,
            format!("expected {expected}, found {}", describe(found)),
        );
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(_) => "a string".into(),
        Value::Integer(i) => format!("the integer {i}"),
        Value::Float(_) => "a float".into(),
        Value::Boolean(_) => "a boolean".into(),
        Value::Datetime(_) => "a date-time".into(),
        Value::Array(_) => "an array".into(),
        Value::Table(_) => "a table".into(),
    }
}

/// Parses and validates one definition file's bytes. `file_name` is `<name>.toml`.
pub fn parse(file_name: &str, bytes: &[u8], checks: &Checks) -> Result<Definition, Vec<Problem>> {
    let mut r = Report {
        file_name,
        problems: Vec::new(),
    };
    let Some(table) = toml_table(&mut r, bytes) else {
        return Err(r.problems);
    };
    let stem = file_name.strip_suffix(".toml").unwrap_or(file_name);
    let mut d = fields(&mut r, &table, checks, stem);
    if !r.problems.is_empty() {
        return Err(r.problems);
    }
    d.sha256 = hex_sha256(bytes);
    Ok(d)
}

/// The file as a TOML table: small enough, UTF-8, valid TOML (the problem located by line and
/// column), or `None` with the one problem reported.
fn toml_table(r: &mut Report, bytes: &[u8]) -> Option<Table> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        r.add(
            "file",
            format!(
                "larger than {} KiB; definitions are small",
                MAX_FILE_BYTES / 1024
            ),
        );
        return None;
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            r.add(
                "file",
                format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
            );
            return None;
        }
    };
    toml::from_str(text)
        .map_err(|e| {
            let place = e
                .span()
                .map(|s| {
                    let before = &text[..s.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                    format!(" (line {line}, column {col})")
                })
                .unwrap_or_default();
            let msg = e.message().trim().replace('\n', " ");
            r.add("toml", format!("{msg}{place}"));
        })
        .ok()
}

/// Walks every key of `table` into a draft, reporting each problem (unknown keys included) and
/// the missing required ones. The draft starts from [`Definition::draft`]: a key that is missing
/// or wrong keeps its default there, and a draft with any problem is never returned.
fn fields(r: &mut Report, table: &Table, checks: &Checks, stem: &str) -> Definition {
    let mut f = Definition::draft(stem);
    for (key, value) in table {
        match key.as_str() {
            "name" => {
                if let Some(name) = check_name(r, value, stem) {
                    f.name = name;
                }
            }
            "description" => f.description = check_description(r, value),
            "kind" => check_kind(r, value),
            "command" => {
                if let Some(command) = check_command(r, value, checks) {
                    f.command = command;
                }
            }
            "timeout_seconds" => {
                let max = i64::from(MAX_TIMEOUT_SECONDS);
                if let Some(t) = check_int(r, "timeout_seconds", value, 1, max) {
                    f.timeout_seconds = t;
                }
            }
            "expect_min_seconds" => {
                let max = i64::from(MAX_TIMEOUT_SECONDS);
                f.expect_min_seconds = check_int(r, "expect_min_seconds", value, 1, max);
            }
            "outbound" => match value {
                Value::Boolean(b) => f.outbound = *b,
                v => r.wrong_type("outbound", "a boolean", v),
            },
            "example" => match value {
                Value::Boolean(b) => f.example = *b,
                v => r.wrong_type("example", "a boolean", v),
            },
            "headline" => match value {
                Value::String(s) => match FactName::new(s) {
                    Ok(h) => f.headline = Some(h),
                    Err(e) => r.add("headline", e.to_string()),
                },
                v => r.wrong_type("headline", "a string", v),
            },
            "env" => f.env = check_env(r, value),
            "anytype" => f.anytype = check_anytype(r, value),
            "schedule" => {
                if let Some(k) = check_schedule(r, value) {
                    f.schedule = Some(k.schedule);
                    f.jitter_seconds = k.jitter_seconds;
                    f.retry = k.retry;
                }
            }
            "trigger" => f.trigger = trigger::check(r, value, checks),
            "overlap" => f.policy.overlap = policy::check_overlap(r, value),
            "lock" => f.policy.lock = policy::check_lock(r, value),
            "writes" => f.policy.writes = policy::check_writes(r, value, checks),
            "limits" => f.policy.limits = policy::check_limits(r, value),
            "sandbox" => f.policy.sandbox = policy::check_sandbox(r, value),
            other => r.add(other, "unknown key"),
        }
    }
    together(r, &f);
    if !table.contains_key("name") {
        r.add("name", format!("missing; add name = {stem:?}"));
    }
    if !table.contains_key("command") {
        r.add(
            "command",
            "missing; the argv to run, e.g. command = [\"scripts/x.sh\"]",
        );
    }
    f
}

/// What the keys say together: the policies' combinations, and `expect_min_seconds` below the
/// timeout.
fn together(r: &mut Report, f: &Definition) {
    policy::combined(r, &f.policy, f.timeout_seconds, f.schedule.as_ref());
    if let Some(min) = f.expect_min_seconds.filter(|m| *m >= f.timeout_seconds) {
        r.add(
            "expect_min_seconds",
            format!(
                "{min} is not below timeout_seconds ({}): every success would be too short or time out",
                f.timeout_seconds
            ),
        );
    }
}

fn check_kind(r: &mut Report, value: &Value) {
    match value {
        Value::String(s) if s == "command" => {}
        Value::String(s) => r.add(
            "kind",
            format!(
                "{:?} is not a kind; the only kind is \"command\"",
                truncate(s, 40)
            ),
        ),
        v => r.wrong_type("kind", "a string", v),
    }
}

/// Lowercase hex sha256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn check_name(r: &mut Report, value: &Value, stem: &str) -> Option<Name> {
    let Value::String(s) = value else {
        r.wrong_type("name", "a string", value);
        return None;
    };
    match Name::new(s) {
        Err(e) => {
            r.add("name", e.to_string());
            None
        }
        Ok(_) if s != stem => {
            r.add(
                "name",
                format!(
                    "{:?} does not match the file name {stem:?}",
                    truncate(s, 60)
                ),
            );
            None
        }
        Ok(n) => Some(n),
    }
}

fn check_description(r: &mut Report, value: &Value) -> Option<String> {
    let Value::String(s) = value else {
        r.wrong_type("description", "a string", value);
        return None;
    };
    if s.chars().any(char::is_control) {
        r.add("description", "must be one line without control characters");
    } else if s.chars().count() > 200 {
        r.add(
            "description",
            format!("{} characters; at most 200", s.chars().count()),
        );
    } else {
        return Some(s.clone());
    }
    None
}

fn check_int(r: &mut Report, key: &str, value: &Value, min: i64, max: i64) -> Option<u32> {
    match value {
        Value::Integer(i) if (min..=max).contains(i) => u32::try_from(*i).ok(),
        Value::Integer(i) => {
            r.add(key, format!("{i} is out of range {min}..={max}"));
            None
        }
        v => {
            r.wrong_type(key, "an integer", v);
            None
        }
    }
}

fn strings<'v>(r: &mut Report, key: &str, value: &'v Value) -> Option<Vec<&'v str>> {
    let Value::Array(items) = value else {
        r.wrong_type(key, "an array of strings", value);
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => out.push(s.as_str()),
            v => {
                r.add(
                    key,
                    format!("element {} is {}, not a string", i + 1, describe(v)),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// True when `hay` mentions the path `path` (followed by the end or a `/`, so `/home/al` does not
/// match `/home/alice`).
fn mentions_path(hay: &str, path: &Path) -> bool {
    let Some(p) = path.to_str() else { return false };
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        return false;
    }
    hay.match_indices(p).any(|(i, _)| {
        let rest = &hay[i + p.len()..];
        rest.is_empty() || rest.starts_with('/')
    })
}

/// Whether element `i` of `argv` is a script a shell runs: it follows a `-c` (or `-ec`, `-lc`…)
/// given to sh, bash, dash, zsh, ksh or ash. Only there does a `~` inside an element expand.
fn shell_script(argv: &[&str], i: usize) -> bool {
    let shell = argv[0].rsplit('/').next().unwrap_or_default();
    let flag = |a: &str| a.starts_with('-') && !a.starts_with("--") && a.contains('c');
    matches!(shell, "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash") && i >= 2 && flag(argv[i - 1])
}

/// Whether a shell script holds a `~` the shell expands to the home directory (`exec ~/bin/x`,
/// `PATH=$PATH:~/bin`, `>~/log`): at the start of a word, after a redirection, or after the `=`
/// or `:` of an assignment — not bash's `=~` operator.
fn tilde_word(script: &str) -> bool {
    let b = script.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        if c != b'~' {
            return false;
        }
        match i.checked_sub(1).map(|p| b[p]) {
            None => true,
            // `[[ $x =~ re ]]`: an operator, not an assignment.
            Some(b'=') => i < 2 || !b" \t[".contains(&b[i - 2]),
            Some(p) => b" \t\n:;|&(`<>".contains(&p),
        }
    })
}

fn check_command(r: &mut Report, value: &Value, checks: &Checks) -> Option<Vec<String>> {
    let argv = strings(r, "command", value)?;
    let before = r.problems.len();
    if argv.is_empty() {
        r.add("command", "must not be empty; it is the argv to run");
        return None;
    }
    for (i, arg) in argv.iter().enumerate() {
        let n = i + 1;
        let shown = truncate(arg, 60);
        if arg.contains('\0') {
            r.add("command", format!("element {n} contains a NUL byte"));
        }
        if arg.starts_with('~') {
            r.add(
                "command",
                format!("element {n} {shown:?} starts with ~; definitions may not name the home directory ({HOME_INSTEAD})"),
            );
        } else if shell_script(&argv, i) && tilde_word(arg) {
            r.add(
                "command",
                format!("element {n} {shown:?} has a word that starts with ~, which a shell expands to the home directory; definitions may not name the home directory ({HOME_INSTEAD})"),
            );
        }
        if arg.contains("$HOME") || arg.contains("${HOME}") {
            r.add(
                "command",
                format!(
                    "element {n} {shown:?} uses $HOME; definitions may not name the home directory ({HOME_INSTEAD})"
                ),
            );
        }
        if mentions_path(arg, &checks.home) {
            r.add(
                "command",
                format!("element {n} contains the home directory path; use {PLACEHOLDER_ROOT} or a path outside home ({HOME_INSTEAD})"),
            );
        }
        if mentions_path(arg, &checks.data_root) {
            r.add(
                "command",
                format!("element {n} contains the data root path; the data root is private"),
            );
        }
        for word in placeholders(arg) {
            if word != PLACEHOLDER_ROOT && word != PLACEHOLDER_SELF {
                r.add(
                    "command",
                    format!("element {n} uses unknown placeholder {word}; only {PLACEHOLDER_ROOT} and {PLACEHOLDER_SELF} exist"),
                );
            }
        }
    }
    let program = argv[0];
    if program.is_empty() {
        r.add("command", "element 1 (the program) is empty");
    } else if program.contains('/')
        && !program.starts_with('/')
        && !program.starts_with(PLACEHOLDER_ROOT)
        && !program.starts_with(PLACEHOLDER_SELF)
        && Path::new(program)
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        r.add(
            "command",
            format!(
                "element 1 {:?} leaves the repository root with ..",
                truncate(program, 60)
            ),
        );
    }
    (r.problems.len() == before).then(|| argv.iter().map(|s| (*s).to_owned()).collect())
}

/// Every `{word}` in `arg` where word is lowercase letters and `_`.
fn placeholders(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b == b'_') =>
            {
                out.push(&rest[open..open + close + 2]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

fn check_env(r: &mut Report, value: &Value) -> Vec<EnvName> {
    let Some(items) = strings(r, "env", value) else {
        return Vec::new();
    };
    let mut out: Vec<EnvName> = Vec::new();
    for item in items {
        match EnvName::new(item) {
            Err(e) => r.add("env", e.to_string()),
            Ok(n) if out.contains(&n) => r.add("env", format!("{n} is listed twice")),
            Ok(n) => out.push(n),
        }
    }
    out
}

fn check_anytype(r: &mut Report, value: &Value) -> Option<AnyTypeAccess> {
    let Value::Table(t) = value else {
        r.wrong_type("anytype", "a table", value);
        return None;
    };
    let before = r.problems.len();
    let mut permission = None;
    let mut spaces = Vec::new();
    for (key, v) in t {
        match key.as_str() {
            "permission" => match v {
                Value::String(s)
                    if !s.is_empty()
                        && s.len() <= 32
                        && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
                {
                    permission = Some(s.clone());
                }
                Value::String(s) => r.add(
                    "anytype.permission",
                    format!(
                        "{:?} is not a permission word (lowercase letters, e.g. \"read\")",
                        truncate(s, 40)
                    ),
                ),
                v => r.wrong_type("anytype.permission", "a string", v),
            },
            "spaces" => {
                if let Some(items) = strings(r, "anytype.spaces", v) {
                    if items.is_empty() {
                        r.add("anytype.spaces", "must name at least one space");
                    }
                    for s in items {
                        if s.is_empty()
                            || s.len() > 128
                            || s.chars().any(|c| c.is_whitespace() || c.is_control())
                        {
                            r.add(
                                "anytype.spaces",
                                format!("{:?} is not a space id", truncate(s, 40)),
                            );
                        } else if spaces.iter().any(|x: &String| x == s) {
                            r.add("anytype.spaces", format!("{s:?} is listed twice"));
                        } else {
                            spaces.push(s.to_owned());
                        }
                    }
                }
            }
            other => r.add(&format!("anytype.{other}"), "unknown key"),
        }
    }
    if !t.contains_key("permission") {
        r.add(
            "anytype.permission",
            "missing; the permission word the key must carry, e.g. \"read\"",
        );
    }
    if !t.contains_key("spaces") {
        r.add(
            "anytype.spaces",
            "missing; the space ids the key must reach",
        );
    }
    match permission {
        Some(permission) if r.problems.len() == before => {
            Some(AnyTypeAccess { permission, spaces })
        }
        _ => None,
    }
}

/// The largest `jitter_seconds`.
pub const MAX_JITTER_SECONDS: u32 = 3600;

/// What `[schedule]` said: when, the delay that spreads firings, and the retries.
struct ScheduleKeys {
    schedule: Schedule,
    jitter_seconds: u32,
    retry: Retry,
}

/// The keys of a `[schedule]` table, each checked on its own.
#[derive(Default)]
struct ScheduleFields {
    every: Option<u32>,
    cron: Option<Cron>,
    offset: u32,
    times: Vec<TimeOfDay>,
    weekdays: Vec<Weekday>,
    days_of_month: Vec<u8>,
    jitter: u32,
    at_login: bool,
    retry: Retry,
    time_zone: Option<ZoneName>,
    catch_up: CatchUp,
}

/// `[schedule]`: its keys, then what they mean together, then the schedule they make.
fn check_schedule(r: &mut Report, value: &Value) -> Option<ScheduleKeys> {
    let Value::Table(t) = value else {
        r.wrong_type("schedule", "a table", value);
        return None;
    };
    let before = r.problems.len();
    let f = schedule_fields(r, t);
    check_combinations(r, t, &f);
    check_offset(r, t, &f);
    if r.problems.len() != before {
        return None;
    }
    let schedule = match f.every {
        Some(every_minutes) => Schedule::EveryMinutes {
            every_minutes,
            offset_minutes: f.offset,
            time_zone: f.time_zone,
            catch_up: f.catch_up,
            at_login: f.at_login,
        },
        None if f.cron.is_some() => Schedule::Cron {
            cron: f.cron.expect("checked"),
            time_zone: f.time_zone,
            catch_up: f.catch_up,
            at_login: f.at_login,
        },
        None if f.times.is_empty() => Schedule::AtLogin,
        None => Schedule::DailyAt {
            daily_at: f.times,
            weekdays: f.weekdays,
            days_of_month: f.days_of_month,
            time_zone: f.time_zone,
            catch_up: f.catch_up,
            at_login: f.at_login,
        },
    };
    let jitter = f.jitter;
    // Only a jitter asks for the gap (for a cron it is worked out, and every firing parses this).
    let gap = if jitter > 0 {
        schedule.shortest_gap_seconds()
    } else {
        0
    };
    if jitter > 0 && jitter >= gap {
        r.add(
            "schedule.jitter_seconds",
            format!(
                "{jitter} is not less than the shortest time between two firings ({gap} s); a delay that long would run into the next one"
            ),
        );
        return None;
    }
    Some(ScheduleKeys {
        schedule,
        jitter_seconds: jitter,
        retry: f.retry,
    })
}

/// Each key of `[schedule]`, checked on its own; unknown keys refused.
fn schedule_fields(r: &mut Report, t: &Table) -> ScheduleFields {
    let mut f = ScheduleFields::default();
    for (key, v) in t {
        match key.as_str() {
            "every_minutes" => f.every = check_int(r, "schedule.every_minutes", v, 1, 1440),
            "offset_minutes" => {
                f.offset = check_int(r, "schedule.offset_minutes", v, 0, 1439).unwrap_or(0);
            }
            "daily_at" => f.times = check_times(r, v),
            "cron" => match v {
                // cron's @reboot is a run when the user's service manager starts.
                Value::String(s) if s.trim().eq_ignore_ascii_case("@reboot") => f.at_login = true,
                Value::String(s) => match Cron::parse(s) {
                    Ok(c) => f.cron = Some(c),
                    Err(e) => r.add("schedule.cron", format!("{:?}: {e}", truncate(s, 60))),
                },
                v => r.wrong_type("schedule.cron", "a string of five fields", v),
            },
            "weekdays" => f.weekdays = check_weekdays(r, v),
            "days_of_month" => f.days_of_month = check_days_of_month(r, v),
            "at_login" => match v {
                Value::Boolean(b) => f.at_login = *b,
                v => r.wrong_type("schedule.at_login", "a boolean", v),
            },
            "retries" => {
                f.retry.retries = check_int(r, "schedule.retries", v, 0, 5).unwrap_or(0);
            }
            "retry_delay_seconds" => {
                f.retry.delay_seconds = check_int(r, "schedule.retry_delay_seconds", v, 1, 3600)
                    .unwrap_or(DEFAULT_RETRY_DELAY_SECONDS);
            }
            "retry_on" => f.retry.on = check_retry_on(r, v),
            "time_zone" => match v {
                Value::String(z) => match ZoneName::parse(z) {
                    Ok(z) => f.time_zone = Some(z),
                    Err(e) => r.add("schedule.time_zone", e),
                },
                v => r.wrong_type("schedule.time_zone", "a string (an IANA zone name)", v),
            },
            "catch_up" => match v {
                Value::String(c) => match CatchUp::parse(c) {
                    Some(c) => f.catch_up = c,
                    None => r.add(
                        "schedule.catch_up",
                        format!(
                            "{:?} is not one of \"latest\", \"all\", \"none\"",
                            truncate(c, 40)
                        ),
                    ),
                },
                v => r.wrong_type("schedule.catch_up", "\"latest\", \"all\" or \"none\"", v),
            },
            "jitter_seconds" => {
                let max = i64::from(MAX_JITTER_SECONDS);
                f.jitter = check_int(r, "schedule.jitter_seconds", v, 0, max).unwrap_or(0);
            }
            other => r.add(&format!("schedule.{other}"), "unknown key"),
        }
    }
    f
}

/// The keys of `[schedule]` that exclude or need one another.
fn check_combinations(r: &mut Report, t: &Table, f: &ScheduleFields) {
    let has = |k: &str| t.contains_key(k);
    let kinds: Vec<&str> = ["every_minutes", "daily_at", "cron"]
        .into_iter()
        .filter(|k| has(k))
        .collect();
    if let [first, rest @ ..] = kinds.as_slice()
        && !rest.is_empty()
    {
        r.add(
            "schedule",
            format!("has both {first} and {}; choose one", rest.join(" and ")),
        );
    } else if kinds.is_empty() && !f.at_login {
        r.add(
            "schedule",
            "needs every_minutes, daily_at, cron or at_login = true (leave out [schedule] for manual only)",
        );
    }
    for key in ["weekdays", "days_of_month"] {
        if has(key) && has("every_minutes") {
            r.add(
                &format!("schedule.{key}"),
                "only allowed with daily_at, not with every_minutes",
            );
        } else if has(key) && has("cron") {
            r.add(
                &format!("schedule.{key}"),
                "only allowed with daily_at; with cron, write the days in its day fields",
            );
        } else if has(key) && !has("daily_at") {
            r.add(&format!("schedule.{key}"), "only allowed with daily_at");
        }
    }
    for key in ["retry_delay_seconds", "retry_on"] {
        if has(key) && f.retry.retries == 0 {
            r.add(
                &format!("schedule.{key}"),
                "only means something with retries = 1..5",
            );
        }
    }
    if has("weekdays") && has("days_of_month") {
        r.add(
            "schedule",
            "has both weekdays and days_of_month; choose one",
        );
    }
    // A zone and a catch-up belong to a clock: an interval of awake time and a login run have
    // neither slots to place nor slots to miss.
    let on_clock = has("daily_at")
        || has("cron") && f.cron.is_some()
        || f.every.is_some_and(crate::schedule::is_grid);
    for key in ["time_zone", "catch_up"] {
        if has(key) && !on_clock {
            let why = match f.every {
                Some(e) if kinds == ["every_minutes"] => format!(
                    "every {e} minutes counts awake time and has no clock; use an interval that divides the hour or the day, or daily_at or cron"
                ),
                _ => {
                    "only allowed with daily_at, cron, or an every_minutes on the clock".to_owned()
                }
            };
            r.add(&format!("schedule.{key}"), why);
        }
    }
}

/// `offset_minutes`: only on a wall-clock grid, and less than its interval.
fn check_offset(r: &mut Report, t: &Table, f: &ScheduleFields) {
    if !t.contains_key("offset_minutes") {
        return;
    }
    let offset = f.offset;
    match f.every {
        None => r.add(
            "schedule.offset_minutes",
            "only allowed with every_minutes (with daily_at or cron, write the times themselves)",
        ),
        Some(e) if !crate::schedule::is_grid(e) => r.add(
            "schedule.offset_minutes",
            format!(
                "every {e} minutes counts awake time and has no clock to be offset from; use an interval that divides the hour or the day"
            ),
        ),
        Some(e) if offset >= e => r.add(
            "schedule.offset_minutes",
            format!("{offset} is not less than every_minutes ({e}); use 0..={}", e - 1),
        ),
        _ => {}
    }
}

/// `retry_on`: a non-empty list of different failure classes.
fn check_retry_on(r: &mut Report, v: &Value) -> Vec<RetryOn> {
    let key = "schedule.retry_on";
    let mut on = Vec::new();
    let Some(items) = strings(r, key, v) else {
        return on;
    };
    if items.is_empty() {
        r.add(key, "must not be empty; leave out retries for none");
    }
    for s in items {
        match RetryOn::ALL.into_iter().find(|c| c.as_str() == s) {
            None => r.add(
                key,
                format!(
                    "{:?} is not a failure class; use exit_status, timeout, outbound",
                    truncate(s, 20)
                ),
            ),
            Some(c) if on.contains(&c) => r.add(key, format!("{s} is listed twice")),
            Some(c) => on.push(c),
        }
    }
    on
}

/// `daily_at`: one `"HH:MM"` or a list of 1..=24 different ones, sorted.
fn check_times(r: &mut Report, v: &Value) -> Vec<TimeOfDay> {
    let key = "schedule.daily_at";
    let one = [v.clone()];
    let items: &[Value] = match v {
        Value::String(_) => &one,
        Value::Array(items) => items,
        v => {
            r.wrong_type(key, "a string \"HH:MM\" or a list of them", v);
            return Vec::new();
        }
    };
    if items.is_empty() || items.len() > 24 {
        r.add(key, format!("lists {} times; list 1 to 24", items.len()));
        return Vec::new();
    }
    let mut times = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::String(s) => match TimeOfDay::parse(s) {
                Some(at) if times.contains(&at) => r.add(key, format!("{at} is listed twice")),
                Some(at) => times.push(at),
                None => r.add(
                    key,
                    format!(
                        "{:?} is not a time; write \"HH:MM\" (24 h, 00:00 to 23:59)",
                        truncate(s, 20)
                    ),
                ),
            },
            v => r.wrong_type(key, "a string \"HH:MM\"", v),
        }
    }
    times.sort();
    times
}

fn check_weekdays(r: &mut Report, v: &Value) -> Vec<Weekday> {
    let key = "schedule.weekdays";
    let mut weekdays = Vec::new();
    let Some(items) = strings(r, key, v) else {
        return weekdays;
    };
    if items.is_empty() {
        r.add(key, "must not be empty; leave it out for every day");
    }
    for s in items {
        match Weekday::parse(s) {
            None => r.add(
                key,
                format!(
                    "{:?} is not a day; use mon, tue, wed, thu, fri, sat, sun",
                    truncate(s, 20)
                ),
            ),
            Some(d) if weekdays.contains(&d) => r.add(key, format!("{s} is listed twice")),
            Some(d) => weekdays.push(d),
        }
    }
    weekdays
}

/// `days_of_month`: a list of different days 1..=31, sorted.
fn check_days_of_month(r: &mut Report, v: &Value) -> Vec<u8> {
    let key = "schedule.days_of_month";
    let Value::Array(items) = v else {
        r.wrong_type(key, "an array of days 1..=31", v);
        return Vec::new();
    };
    if items.is_empty() {
        r.add(key, "must not be empty; leave it out for every day");
    }
    let mut days = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::Integer(d) if (1..=31).contains(d) => {
                let d = *d as u8;
                if days.contains(&d) {
                    r.add(key, format!("{d} is listed twice"));
                } else {
                    days.push(d);
                }
            }
            Value::Integer(d) => r.add(key, format!("{d} is not a day of the month; use 1..=31")),
            v => r.wrong_type(key, "an integer day 1..=31", v),
        }
    }
    days.sort_unstable();
    days
}

/// What `validate` says about a valid schedule that may not do what its author meant: a timeout
/// longer than the time between two firings, days of the month that some months do not have
/// (those months do not fire, as with cron and systemd).
pub fn schedule_warnings(def: &Definition) -> Vec<Problem> {
    let mut warnings: Vec<Problem> = overlong_timeout(def).into_iter().collect();
    warnings.extend(late_days(def));
    warnings
}

/// A run allowed to last longer than the time to the next firing: that firing finds it running
/// and is skipped (the lock), which `validate` says rather than refuses.
fn overlong_timeout(def: &Definition) -> Option<Problem> {
    let schedule = def.schedule.as_ref()?;
    if matches!(schedule, Schedule::AtLogin) {
        return None;
    }
    let gap = schedule.shortest_gap_seconds();
    let then = match def.policy.overlap {
        Overlap::Replace => "is stopped by the next firing (overlap = \"replace\")",
        _ => "makes the next firing skip (it is still running)",
    };
    (def.timeout_seconds > gap).then(|| Problem {
        file: format!("{DEFINITIONS_DIR}/{}.toml", def.name),
        name: Some(def.name.clone()),
        key: "timeout_seconds".into(),
        message: format!(
            "warning: {} s is longer than the shortest time between two firings ({gap} s): a run that takes that long {then}",
            def.timeout_seconds
        ),
    })
}

/// Days of the month that some months do not have.
fn late_days(def: &Definition) -> Option<Problem> {
    let Some(Schedule::DailyAt { days_of_month, .. }) = &def.schedule else {
        return None;
    };
    let late: Vec<String> = days_of_month
        .iter()
        .filter(|d| **d >= 29)
        .map(ToString::to_string)
        .collect();
    if late.is_empty() {
        return None;
    }
    let months = match days_of_month.iter().filter(|d| **d >= 29).min() {
        Some(29) => "February (but in leap years)",
        Some(30) => "February",
        _ => "February, April, June, September and November",
    };
    Some(Problem {
        file: format!("{DEFINITIONS_DIR}/{}.toml", def.name),
        name: Some(def.name.clone()),
        key: "schedule.days_of_month".into(),
        message: format!(
            "warning: {} is not in every month: it does not fire in {months} (like cron and systemd)",
            late.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests;
