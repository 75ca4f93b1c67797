//! `import crontab`: reads the crontab, asks `import::crontab::plan` what each line becomes,
//! prints the report and writes the definitions (with copied scripts, the scripts written for
//! shell lines and private env files), all or nothing; with `--adopt`, installs them and comments
//! the lines out of the crontab in the same step (`install::install_then`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::fail::FailContext;
use anyhow::anyhow;

use super::fail::{CmdResult, Fail};
use crate::definition::Checks;
use crate::exit::Exit;
use crate::import::crontab;
use crate::import::retire::{self, Original};
use crate::import::{Row, Status};
use crate::names::Name;
use crate::settings::{DEFINITIONS_DIR, Settings};
use crate::text::field;

/// The flags every import takes.
pub struct Options {
    pub dry_run: bool,
    pub partial: bool,
    pub json: bool,
    /// Install what was imported and retire the originals in the same step.
    pub adopt: bool,
    /// The binary the units run (`--adopt`).
    pub bin: Option<PathBuf>,
}

impl From<crate::cli::ImportArgs> for Options {
    fn from(a: crate::cli::ImportArgs) -> Self {
        Self {
            dry_run: a.dry_run,
            partial: a.partial,
            json: a.json,
            adopt: a.adopt,
            bin: a.bin,
        }
    }
}

/// The flags only `import crontab` takes.
pub struct CrontabOptions {
    pub copy_scripts: bool,
    pub system: bool,
    pub keep_redirects: bool,
}

/// `import crontab|launchd|systemd`.
pub(super) fn import(s: &Settings, c: crate::cli::ImportCommand) -> CmdResult {
    use crate::cli::ImportCommand;
    match c {
        ImportCommand::Crontab {
            file,
            common,
            copy_scripts,
            keep_redirects,
            system,
        } => crontab(
            s,
            file.as_deref(),
            &Options::from(common),
            &CrontabOptions {
                copy_scripts,
                system,
                keep_redirects,
            },
        ),
        ImportCommand::Launchd {
            plists,
            common,
            copy_scripts,
        } => units(
            s,
            Source::Launchd,
            &plists,
            &Options::from(common),
            copy_scripts,
        ),
        ImportCommand::Systemd {
            units: files,
            common,
            copy_scripts,
        } => units(
            s,
            Source::Systemd,
            &files,
            &Options::from(common),
            copy_scripts,
        ),
    }
}

/// The largest crontab read.
const MAX_CRONTAB: u64 = 1024 * 1024;

pub(super) fn crontab(
    settings: &Settings,
    file: Option<&Path>,
    o: &Options,
    c: &CrontabOptions,
) -> CmdResult {
    if o.adopt && c.system {
        return Err(super::machine::bad(
            "--adopt retires lines of your own crontab (`crontab -l`); a system crontab's lines are root's to remove".into(),
        ));
    }
    if o.adopt && file.is_some() {
        return Err(super::machine::bad(
            "--adopt reads your crontab itself (`crontab -l`), the one whose lines it comments out: leave out the file".into(),
        ));
    }
    // Whatever keeps the crontab from being read is the invocation's to change.
    let text = read_crontab(file).map_err(|e| Fail::new(Exit::BadInput, e.error))?;
    let existing = existing_names(settings)?;
    // Whose jobs a system crontab's lines are: this user's.
    let user = crate::settings::user_name(&|k| std::env::var_os(k))
        .map(|u| u.to_string_lossy().into_owned());
    let zone = crate::healthchecks::machine_zone();
    let checks = Checks::of(settings);
    let cx = crontab::Context {
        home: &settings.home,
        root: &settings.root,
        checks: &checks,
        user: user.as_deref(),
        zone: zone.as_deref(),
        existing: &existing,
        system: c.system,
        copy_scripts: c.copy_scripts,
        keep_redirects: c.keep_redirects,
    };
    let plan = crontab::plan(&text, &cx);
    let rows = plan.rows;
    let outcome = write_and_report(settings, &rows, o, "LINE", plan.email.as_deref())?;
    if !outcome.written || !o.adopt {
        if (outcome.written || o.dry_run) && !o.json {
            say_what_to_retire(&rows, o.adopt);
        }
        return Ok(outcome.exit);
    }
    let imported = imported_names(&rows)?;
    let labels: Vec<(usize, String, String)> = rows
        .iter()
        .filter(|r| r.status == Status::Imported)
        .filter_map(|r| match (&r.original, &r.name) {
            (Some(Original::CrontabLine { line, text }), Some(name)) => Some((
                *line,
                text.clone(),
                settings.label(&Name::new(name).ok()?).to_string(),
            )),
            _ => None,
        })
        .collect();
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let backup = retire::backup_dir(&settings.data_root, "crontab", &stamp).join("crontab");
    let then = super::install::Then {
        plan: vec![format!(
            "then retire the crontab's lines {}: commented out (`crontab -`), the crontab as it was kept at {}",
            crontab_lines(&rows),
            backup.display()
        )],
        question: format!(
            "Install {} automation(s) and comment their lines out of the crontab",
            imported.len()
        ),
        apply: Box::new(move || {
            retire::retire_crontab(
                &crate::service::exec::Program::new("crontab"),
                &labels,
                &backup,
            )
        }),
    };
    let result = super::install::install_then(settings, &imported, o.bin.clone(), then)?;
    Ok(if result == Exit::Success {
        outcome.exit
    } else {
        result
    })
}

/// Which scheduler `import launchd|systemd` reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Launchd,
    Systemd,
}

/// `import launchd PLIST…` and `import systemd UNIT…`: the same report, all or nothing, and with
/// `--adopt` the same one step as the crontab's.
pub(super) fn units(
    settings: &Settings,
    from: Source,
    files: &[PathBuf],
    o: &Options,
    copy_scripts: bool,
) -> CmdResult {
    let (manager, what) = match from {
        Source::Launchd => (crate::settings::Manager::Launchd, "LaunchAgents"),
        Source::Systemd => (crate::settings::Manager::Systemd, "systemd user units"),
    };
    if o.adopt && settings.manager != manager {
        return Err(super::machine::bad(format!(
            "--adopt retires {what}, which this machine's service manager does not run: import without it, and install here"
        )));
    }
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()))
        .collect();
    let rows = unit_rows(settings, from, &files, copy_scripts)?;
    let outcome = write_and_report(settings, &rows, o, "FILE", None)?;
    let originals: Vec<&Original> = rows
        .iter()
        .filter(|r| r.status == Status::Imported)
        .filter_map(|r| r.original.as_ref())
        .collect();
    if !outcome.written || !o.adopt {
        if (outcome.written || o.dry_run) && !o.json && !originals.is_empty() {
            if o.adopt {
                let listed: Vec<String> = originals.iter().map(|o| original_name(o)).collect();
                outln!(
                    "with --adopt (not in a dry run), these are installed and then {} retired",
                    listed.join(", ")
                );
            } else {
                outln!("{}", retire_by_hand(&originals));
            }
        }
        return Ok(outcome.exit);
    }
    adopt_units(
        settings,
        from,
        rows.as_slice(),
        &originals,
        o,
        what,
        outcome.exit,
    )
}

/// What `import launchd|systemd` reads the files into.
fn unit_rows(
    settings: &Settings,
    from: Source,
    files: &[PathBuf],
    copy_scripts: bool,
) -> Result<Vec<Row>, Fail> {
    let existing = existing_names(settings)?;
    let checks = Checks::of(settings);
    let prefix = format!("local.{}.", settings.namespace);
    let cx = crate::import::Context {
        home: &settings.home,
        root: &settings.root,
        checks: &checks,
        existing: &existing,
        copy_scripts,
        own_prefix: &prefix,
    };
    Ok(match from {
        Source::Launchd => crate::import::launchd::plan(files, &cx),
        Source::Systemd => crate::import::systemd::plan(files, &cx),
    })
}

/// `--adopt` for units and agents: install what was imported, then retire the originals.
fn adopt_units(
    settings: &Settings,
    from: Source,
    rows: &[Row],
    originals: &[&Original],
    o: &Options,
    what: &str,
    exit: Exit,
) -> CmdResult {
    let imported = imported_names(rows)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let which = if from == Source::Launchd {
        "launchd"
    } else {
        "systemd"
    };
    let backup = retire::backup_dir(&settings.data_root, which, &stamp);
    let listed: Vec<String> = originals.iter().map(|o| original_name(o)).collect();
    let plan = vec![format!(
        "then retire {}: {}, the files moved to {}",
        listed.join(", "),
        if from == Source::Launchd {
            "booted out"
        } else {
            "disabled and stopped"
        },
        backup.display()
    )];
    let agents: Vec<(String, PathBuf)> = originals
        .iter()
        .filter_map(|o| match o {
            Original::LaunchAgent { label, plist } => Some((label.clone(), plist.clone())),
            _ => None,
        })
        .collect();
    let units: Vec<(String, Vec<PathBuf>)> = originals
        .iter()
        .filter_map(|o| match o {
            Original::SystemdUnit { unit, files } => Some((unit.clone(), files.clone())),
            _ => None,
        })
        .collect();
    let then = super::install::Then {
        plan,
        question: format!(
            "Install {} automation(s) and retire the {what} they replace",
            imported.len()
        ),
        apply: Box::new(move || match from {
            Source::Launchd => retire::retire_launchd(
                &crate::service::exec::Program::new(crate::service::launchd::LAUNCHCTL),
                crate::platform::uid(),
                &agents,
                &backup,
            ),
            Source::Systemd => retire::retire_systemd(
                &crate::service::exec::Program::new("systemctl"),
                &units,
                &backup,
            ),
        }),
    };
    let result = super::install::install_then(settings, &imported, o.bin.clone(), then)?;
    Ok(if result == Exit::Success {
        exit
    } else {
        result
    })
}

/// The unit or label an original is known by.
fn original_name(o: &Original) -> String {
    match o {
        Original::CrontabLine { line, .. } => format!("crontab line {line}"),
        Original::LaunchAgent { label, .. } => label.clone(),
        Original::SystemdUnit { unit, .. } => unit.clone(),
    }
}

/// What to run to retire the originals by hand, once the imported ones are installed.
fn retire_by_hand(originals: &[&Original]) -> String {
    let mut commands = Vec::new();
    for o in originals {
        match o {
            Original::LaunchAgent { label, plist } => commands.push(format!(
                "launchctl bootout gui/$(id -u)/{label} && mv {} <somewhere else>",
                plist.display()
            )),
            Original::SystemdUnit { unit, .. } => {
                commands.push(format!("systemctl --user disable --now {unit}"));
            }
            Original::CrontabLine { .. } => {}
        }
    }
    format!(
        "until the originals are retired they run too: once these are installed, `{}` — or import with --adopt, which installs these and retires those in one step",
        commands.join("`, `")
    )
}

/// What becomes of the crontab's imported lines: what `--adopt` would do (a dry run), or how to
/// remove them by hand.
fn say_what_to_retire(rows: &[Row], adopt: bool) {
    let lines = crontab_lines(rows);
    if lines.is_empty() {
        return;
    }
    if adopt {
        outln!(
            "with --adopt (not in a dry run), these are installed and the crontab's lines {lines} then commented out"
        );
    } else {
        outln!(
            "until the crontab's lines {lines} are removed, cron runs them too: once these are installed, `crontab -e` and delete them — or import with --adopt, which installs these and comments those lines out in one step"
        );
    }
}

/// The numbers of the lines that were imported: "3, 5, 9".
fn crontab_lines(rows: &[Row]) -> String {
    let lines: Vec<String> = rows
        .iter()
        .filter(|r| r.status == Status::Imported)
        .filter_map(|r| r.line.map(|l| l.to_string()))
        .collect();
    lines.join(", ")
}

/// The names of the definitions there are.
fn existing_names(settings: &Settings) -> Result<BTreeSet<String>, Fail> {
    Ok(
        crate::fsutil::list_named(&settings.definitions_dir(), "", &[".toml"])
            .with_context(|| format!("reading {}", settings.definitions_dir().display()))?
            .into_iter()
            .map(|(stem, _)| stem)
            .collect(),
    )
}

/// The names of the imported rows.
fn imported_names(rows: &[Row]) -> Result<Vec<Name>, Fail> {
    rows.iter()
        .filter(|r| r.status == Status::Imported)
        .filter_map(|r| r.name.as_deref())
        .map(|n| Name::new(n).map_err(|e| Fail::new(Exit::Failure, anyhow!("{n}: {e}"))))
        .collect()
}

/// What writing and reporting came to.
struct Outcome {
    written: bool,
    exit: Exit,
}

/// Writes the imported rows' files (all or nothing, or the importable ones with --partial), prints
/// the report, and says what comes next.
fn write_and_report(
    settings: &Settings,
    rows: &[Row],
    o: &Options,
    first_column: &str,
    email: Option<&str>,
) -> Result<Outcome, Fail> {
    let needs_you = rows.iter().filter(|r| r.status == Status::NeedsYou).count();
    let imported: Vec<&Row> = rows
        .iter()
        .filter(|r| r.status == Status::Imported)
        .collect();
    let write = !o.dry_run && (needs_you == 0 || o.partial) && !imported.is_empty();
    if write && o.adopt {
        // What the install would refuse is refused before a file is written.
        let names: Vec<&str> = imported.iter().filter_map(|r| r.name.as_deref()).collect();
        super::install::ready_to_install(settings, &names, o.bin.clone())?;
    }
    if write {
        write_all(settings, &imported)?;
    }
    let out = &mut std::io::stdout().lock();
    if o.json {
        let doc = serde_json::json!({
            "version": 1,
            "written": write,
            "lines": rows,
            "notify_email": email,
        });
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        print_rows(out, rows, first_column)?;
        if let Some(block) = email {
            writeln!(
                out,
                "to mail failures where MAILTO mailed output, put this in <data root>/notify.toml (docs/health.md):"
            )?;
            for line in block.lines() {
                writeln!(out, "    {line}")?;
            }
        }
        let jobs = rows
            .iter()
            .filter(|r| r.name.is_some() || r.status == Status::NeedsYou)
            .count();
        let next = if o.adopt {
            "`automations units` renders units/ for them; they are installed next (--adopt)"
        } else {
            "`automations units` renders units/ for them; nothing is installed yet: `automations validate`, then `automations install NAME…`"
        };
        let summary = match (write, o.dry_run, needs_you) {
            (true, _, 0) => format!(
                "wrote {} definition(s) to {DEFINITIONS_DIR}/; {next}",
                imported.len()
            ),
            (true, _, n) => format!(
                "wrote the {} definition(s) that could be imported (--partial); {n} need you; {next}",
                imported.len()
            ),
            (false, true, _) => format!(
                "dry run: {} of {jobs} job(s) can be imported, {needs_you} need you; nothing written",
                imported.len()
            ),
            (false, false, 0) => "no jobs to import; nothing written".to_owned(),
            (false, false, n) => format!(
                "{n} need you, so nothing was written (all or nothing); fix them, or write the rest with --partial"
            ),
        };
        writeln!(out, "{summary}")?;
    }
    Ok(Outcome {
        written: write,
        exit: if needs_you == 0 {
            Exit::Success
        } else {
            Exit::Failure
        },
    })
}

/// The crontab: a file, standard input (`-`), or what `crontab -l` prints.
fn read_crontab(file: Option<&Path>) -> Result<String, Fail> {
    let bytes = match file {
        Some(p) if p == Path::new("-") => {
            let mut b = Vec::new();
            std::io::stdin()
                .take(MAX_CRONTAB + 1)
                .read_to_end(&mut b)
                .context("reading the crontab from standard input")?;
            b
        }
        Some(p) => crate::fsutil::read_following(p, MAX_CRONTAB + 1)
            .with_context(|| format!("reading the crontab {}", p.display()))?,
        None => {
            let o = std::process::Command::new("crontab")
                .arg("-l")
                .output()
                .context("running `crontab -l` (no crontab command here? pass a file, or - to read standard input)")?;
            if !o.status.success() {
                return Err(bad(anyhow!(
                    "`crontab -l` failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )));
            }
            o.stdout
        }
    };
    if bytes.len() as u64 > MAX_CRONTAB {
        return Err(bad(anyhow!(
            "the crontab is larger than {} KiB; that is no crontab",
            MAX_CRONTAB / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        bad(anyhow!(
            "the crontab is not UTF-8 text (a byte at {} is not)",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn bad(e: anyhow::Error) -> Fail {
    Fail::new(Exit::BadInput, e)
}

/// One row per line: number, name, schedule, result; the line itself and notes below it.
fn print_rows(out: &mut dyn Write, rows: &[Row], first_column: &str) -> std::io::Result<()> {
    let name_w = rows
        .iter()
        .filter_map(|r| r.name.as_ref().map(String::len))
        .max()
        .unwrap_or(4)
        .max(4);
    let sched_w = rows
        .iter()
        .filter_map(|r| r.schedule.as_ref().map(|s| s.chars().count()))
        .max()
        .unwrap_or(8)
        .clamp(8, 40);
    let first_w = rows
        .iter()
        .map(|r| r.file.as_ref().map_or(4, |f| f.chars().count()))
        .max()
        .unwrap_or(4)
        .max(first_column.len());
    writeln!(
        out,
        "{first_column:first_w$}  {:name_w$}  {:sched_w$}  RESULT",
        "NAME", "SCHEDULE"
    )?;
    for r in rows {
        let result = match r.status {
            Status::Imported => "imported".to_owned(),
            Status::NeedsYou => format!("needs you: {}", r.reason.as_deref().unwrap_or_default()),
            Status::Reported => r.reason.clone().unwrap_or_default(),
            Status::NotImported => {
                format!("not imported: {}", r.reason.as_deref().unwrap_or_default())
            }
        };
        let first = match (&r.file, r.line) {
            (Some(f), _) => f.clone(),
            (None, Some(l)) => l.to_string(),
            (None, None) => String::new(),
        };
        writeln!(
            out,
            "{:<first_w$}  {:name_w$}  {:sched_w$}  {}",
            field(&first),
            r.name.as_deref().unwrap_or("-"),
            r.schedule.as_deref().unwrap_or("-"),
            field(&result)
        )?;
        writeln!(out, "{:first_w$}  {}", "", field(&r.text))?;
        for note in &r.notes {
            writeln!(out, "{:first_w$}  note: {}", "", field(note))?;
        }
    }
    Ok(())
}

/// Writes every imported row's files, or none (`import::write`).
fn write_all(settings: &Settings, rows: &[&Row]) -> Result<(), Fail> {
    if rows.iter().any(|r| !r.files.env.is_empty()) {
        // Env files are private: the data root is checked as every command that writes it does.
        super::data_root(settings, crate::fsutil::Use::Write)?;
    }
    crate::import::write(
        &settings.root,
        &settings.definitions_dir(),
        &settings.layout(),
        rows,
    )
    .map_err(|e| Fail::new(Exit::Failure, e))
}
