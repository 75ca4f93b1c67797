//! `import crontab`: reads the crontab, asks `crontab::plan` what each line becomes, prints the
//! report and writes the definitions (with copied scripts and private env files), all or nothing.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};

use super::fail::{CmdResult, Fail};
use crate::crontab::{self, Row, Status};
use crate::definition::Checks;
use crate::exit::Exit;
use crate::fsutil::create_new;
use crate::settings::{DEFINITIONS_DIR, Settings};
use crate::text::field;

/// The flags of `import crontab`.
pub struct Options {
    pub dry_run: bool,
    pub partial: bool,
    pub copy_scripts: bool,
    pub system: bool,
    pub json: bool,
}

/// The largest crontab read.
const MAX_CRONTAB: u64 = 1024 * 1024;

pub(super) fn crontab(settings: &Settings, file: Option<&Path>, o: &Options) -> CmdResult {
    let text = read_crontab(file).map_err(|e| Fail::new(Exit::BadInput, e))?;
    let existing: BTreeSet<String> =
        crate::fsutil::list_named(&settings.definitions_dir(), "", &[".toml"])
            .with_context(|| format!("reading {}", settings.definitions_dir().display()))?
            .into_iter()
            .map(|(stem, _)| stem)
            .collect();
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
        system: o.system,
        copy_scripts: o.copy_scripts,
    };
    let rows = crontab::plan(&text, &cx);
    let needs_you = rows.iter().filter(|r| r.status == Status::NeedsYou).count();
    let imported: Vec<&Row> = rows
        .iter()
        .filter(|r| r.status == Status::Imported)
        .collect();
    let write = !o.dry_run && (needs_you == 0 || o.partial) && !imported.is_empty();
    if write {
        write_all(settings, &imported)?;
    }
    let out = &mut std::io::stdout().lock();
    if o.json {
        let doc = serde_json::json!({
            "version": 1,
            "written": write,
            "lines": rows,
        });
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        print_rows(out, &rows)?;
        let jobs = rows
            .iter()
            .filter(|r| r.name.is_some() || r.status == Status::NeedsYou)
            .count();
        let summary = match (write, o.dry_run, needs_you) {
            (true, _, 0) => format!(
                "wrote {} definition(s) to {DEFINITIONS_DIR}/; nothing is installed yet: `automations validate`, then `automations install --all`",
                imported.len()
            ),
            (true, _, n) => format!(
                "wrote the {} definition(s) that could be imported (--partial); {n} line(s) need you",
                imported.len()
            ),
            (false, true, _) => format!(
                "dry run: {} of {jobs} job line(s) can be imported, {needs_you} need you; nothing written",
                imported.len()
            ),
            (false, false, 0) => "no job lines to import; nothing written".to_owned(),
            (false, false, n) => format!(
                "{n} line(s) need you, so nothing was written (all or nothing); fix them, or write the rest with --partial"
            ),
        };
        writeln!(out, "{summary}")?;
    }
    Ok(if needs_you == 0 {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The crontab: a file, standard input (`-`), or what `crontab -l` prints.
fn read_crontab(file: Option<&Path>) -> anyhow::Result<String> {
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
                return Err(anyhow!(
                    "`crontab -l` failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            o.stdout
        }
    };
    if bytes.len() as u64 > MAX_CRONTAB {
        return Err(anyhow!(
            "the crontab is larger than {} KiB; that is no crontab",
            MAX_CRONTAB / 1024
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "the crontab is not UTF-8 text (a byte at {} is not)",
            e.utf8_error().valid_up_to()
        )
    })
}

/// One row per line: number, name, schedule, result; the line itself and notes below it.
fn print_rows(out: &mut dyn Write, rows: &[Row]) -> std::io::Result<()> {
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
    writeln!(
        out,
        "LINE  {:name_w$}  {:sched_w$}  RESULT",
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
        writeln!(
            out,
            "{:<4}  {:name_w$}  {:sched_w$}  {}",
            r.line,
            r.name.as_deref().unwrap_or("-"),
            r.schedule.as_deref().unwrap_or("-"),
            field(&result)
        )?;
        writeln!(out, "      {}", field(&r.text))?;
        for note in &r.notes {
            writeln!(out, "      note: {}", field(note))?;
        }
    }
    Ok(())
}

/// Writes every imported row's files, or none: what was made is removed when one fails.
fn write_all(settings: &Settings, rows: &[&Row]) -> Result<(), Fail> {
    let mut made: Vec<PathBuf> = Vec::new();
    let result = rows
        .iter()
        .try_for_each(|row| write_row(settings, row, &mut made));
    if let Err(e) = result {
        for p in made.iter().rev() {
            let _ = std::fs::remove_file(p);
        }
        return Err(Fail::new(
            Exit::Failure,
            e.context("nothing was imported (the files already written were removed)"),
        ));
    }
    Ok(())
}

fn write_row(settings: &Settings, row: &Row, made: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let name = row.name.as_deref().unwrap_or_default();
    for (from, rel) in &row.files.copies {
        let dest = settings.root.join(rel);
        if dest.exists() {
            // The same content (checked when planned): shared with another job, or imported before.
            continue;
        }
        let bytes = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        let mode = std::fs::metadata(from)
            .map(|m| m.permissions().mode() & 0o755)
            .unwrap_or(0o644);
        std::fs::create_dir_all(dest.parent().unwrap_or(&settings.root))
            .with_context(|| format!("making the folder of {rel}"))?;
        create_new(&dest, &bytes, mode).with_context(|| format!("writing {rel}"))?;
        made.push(dest);
    }
    if !row.files.env.is_empty() {
        let name = crate::names::Name::new(name).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let path = settings.layout().env_file(&name);
        let text: String = row
            .files
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        crate::fsutil::private_dir(path.parent().unwrap_or(&settings.data_root))
            .with_context(|| format!("making the folder of {}", path.display()))?;
        create_new(&path, text.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", path.display()))?;
        made.push(path);
    }
    let path = settings.definitions_dir().join(format!("{name}.toml"));
    create_new(&path, &row.files.definition, 0o644)
        .with_context(|| format!("writing {DEFINITIONS_DIR}/{name}.toml"))?;
    made.push(path);
    Ok(())
}
