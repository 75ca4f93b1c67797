//! `--adopt`: once the imported automations are installed, the originals stop — the crontab's
//! lines commented out, a LaunchAgent booted out and its plist moved aside, a systemd timer
//! disabled and stopped and its files moved aside — each with a backup in the data root, and put
//! back as they were when a later step fails, so a job never runs twice and never zero times.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::service::exec::{ExecError, Program};

/// Why retiring the originals failed (and what was done about it).
#[derive(Debug, thiserror::Error)]
pub enum RetireError {
    /// A file or folder: what could not be done with it.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// `crontab`, `systemctl` or `launchctl` failed.
    #[error(transparent)]
    Program(#[from] ExecError),
    /// Refused, in words.
    #[error("{0}")]
    Refused(String),
    /// What was being done, or what was done about it (an undo), said first.
    #[error("{what}")]
    Then {
        what: String,
        #[source]
        source: Box<RetireError>,
    },
}

impl RetireError {
    fn then(self, what: impl Into<String>) -> Self {
        Self::Then {
            what: what.into(),
            source: Box::new(self),
        }
    }
}

/// A step of moving files aside or back.
impl From<std::io::Error> for RetireError {
    fn from(source: std::io::Error) -> Self {
        Self::Io {
            what: "moving a file".into(),
            source,
        }
    }
}

impl crate::exit::Exits for RetireError {
    /// A file of the data root that is no regular file is the environment's (3); the rest, 1.
    fn exit(&self) -> crate::exit::Exit {
        match self {
            Self::Io { source, .. } => source.exit(),
            Self::Then { source, .. } => source.exit(),
            Self::Program(_) | Self::Refused(_) => crate::exit::Exit::Failure,
        }
    }
}

/// `what` could not be done with a file or folder.
fn io(what: String) -> impl FnOnce(std::io::Error) -> RetireError {
    move |source| RetireError::Io { what, source }
}

/// What an imported job was, to retire it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Original {
    /// A line of the user's crontab, as it was read.
    CrontabLine { line: usize, text: String },
    /// A LaunchAgent: its label and plist.
    LaunchAgent { label: String, plist: PathBuf },
    /// A systemd user unit that starts a service (its `.timer` or `.path`), and every file of it
    /// that is moved aside (the unit, its service, their drop-in folders).
    SystemdUnit { unit: String, files: Vec<PathBuf> },
}

/// The marker that begins a crontab line `--adopt` commented out.
pub const CRONTAB_MARKER: &str = "#automations-adopted";

/// The crontab `text` with each of `lines` (its number, its text as read, and the label of the
/// automation that took it over) commented out behind [`CRONTAB_MARKER`]; an error that names the
/// line when the crontab no longer holds it as it was read.
pub fn comment_out(text: &str, lines: &[(usize, &str, &str)]) -> Result<String, String> {
    let mut out: Vec<String> = text.lines().map(str::to_owned).collect();
    for (number, was, label) in lines {
        let at = number
            .checked_sub(1)
            .filter(|i| out.get(*i).is_some_and(|l| l.trim_matches([' ', '\t', '\r']) == *was))
            .ok_or_else(|| {
                format!(
                    "line {number} of the crontab is no longer `{was}` (it changed since it was read): nothing was retired"
                )
            })?;
        out[at] = format!("{CRONTAB_MARKER} {label}: {}", out[at]);
    }
    let mut joined = out.join("\n");
    joined.push('\n');
    Ok(joined)
}

/// Comments the imported lines out of the user's crontab: it is read again (`crontab -l`), kept
/// at `backup`, and written back (`crontab -`); a crontab that no longer holds a line as it was
/// read is left alone.
pub fn retire_crontab(
    crontab: &Program,
    lines: &[(usize, String, String)],
    backup: &Path,
) -> Result<Vec<String>, RetireError> {
    let now = run(crontab, &["-l"], None)
        .map_err(|e| e.then("reading the crontab again (`crontab -l`)"))?;
    let refs: Vec<(usize, &str, &str)> = lines
        .iter()
        .map(|(n, t, l)| (*n, t.as_str(), l.as_str()))
        .collect();
    let new = comment_out(&now, &refs).map_err(RetireError::Refused)?;
    crate::fsutil::private_dir(backup.parent().unwrap_or(backup))
        .map_err(io(format!("making {}", backup.display())))?;
    crate::fsutil::create_new(backup, now.as_bytes(), 0o600)
        .map_err(io(format!("keeping the crontab at {}", backup.display())))?;
    run(crontab, &["-"], Some(&new)).map_err(|e| e.then("writing the crontab (`crontab -`)"))?;
    let written = run(crontab, &["-l"], None).map_err(|e| e.then("reading the crontab back"))?;
    if written != new {
        // Put back what was there.
        let _ = run(crontab, &["-"], Some(&now));
        return Err(RetireError::Refused(
            "the crontab read back is not what was written; the one before was put back".into(),
        ));
    }
    Ok(vec![format!(
        "retired {} crontab line(s): commented out behind `{}`; the crontab as it was is at {}",
        lines.len(),
        CRONTAB_MARKER,
        backup.display()
    )])
}

/// Runs `crontab ARGS`, writing `input` to its standard input; its standard output.
fn run(crontab: &Program, args: &[&str], input: Option<&str>) -> Result<String, RetireError> {
    let done = crontab.run_with(
        args,
        input.map(str::as_bytes),
        crate::service::exec::DEADLINE,
    )?;
    Ok(done.stdout)
}

/// A folder of the data root for what `--adopt` moved aside: `imported/<what>-<stamp>/`.
pub fn backup_dir(data_root: &Path, what: &str, stamp: &str) -> PathBuf {
    data_root.join("imported").join(format!("{what}-{stamp}"))
}

/// Moves `from` into `dir` (made 0700), keeping its name; across file systems by copy.
fn move_into(from: &Path, dir: &Path) -> Result<PathBuf, RetireError> {
    crate::fsutil::private_dir(dir).map_err(io(format!("making {}", dir.display())))?;
    let to = dir.join(from.file_name().unwrap_or_default());
    move_to(from, &to)?;
    Ok(to)
}

fn move_to(from: &Path, to: &Path) -> Result<(), RetireError> {
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    // Another file system: copy (a drop-in folder's files too), then remove.
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            move_to(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::remove_dir(from)?;
    } else {
        std::fs::copy(from, to).map_err(io(format!("copying {}", from.display())))?;
        std::fs::remove_file(from)?;
    }
    Ok(())
}

/// What was done to one original, to undo it.
enum Done {
    /// Files moved: (where they were, where they are).
    Moved(Vec<(PathBuf, PathBuf)>),
    /// A systemd unit disabled and stopped (it was enabled / active before).
    Disabled {
        unit: String,
        enabled: bool,
        active: bool,
    },
    /// A LaunchAgent booted out.
    BootedOut { plist: PathBuf },
}

/// Retires systemd user units through `systemctl`: each disabled and stopped, its files (and
/// drop-in folders) moved into `backup`, then the manager reloaded. When a step fails, everything
/// done is undone (files back, units enabled and started as they were) and the error says what.
pub fn retire_systemd(
    systemctl: &Program,
    units: &[(String, Vec<PathBuf>)],
    backup: &Path,
) -> Result<Vec<String>, RetireError> {
    let user = |args: &[&str]| {
        let mut all = vec!["--user"];
        all.extend_from_slice(args);
        systemctl.run(&all)
    };
    let mut done: Vec<Done> = Vec::new();
    let result = (|| -> Result<(), RetireError> {
        for (unit, files) in units {
            let enabled = user(&["is-enabled", unit]).is_ok_and(|d| d.stdout.trim() == "enabled");
            let active = user(&["is-active", unit]).is_ok();
            user(&["disable", "--now", unit])?;
            done.push(Done::Disabled {
                unit: unit.clone(),
                enabled,
                active,
            });
            let mut moved = Vec::new();
            for f in files {
                let r = move_into(f, backup);
                match r {
                    Ok(to) => moved.push((f.clone(), to)),
                    Err(e) => {
                        done.push(Done::Moved(moved));
                        return Err(e.then(format!("moving {} aside", f.display())));
                    }
                }
            }
            done.push(Done::Moved(moved));
        }
        user(&["daemon-reload"])?;
        Ok(())
    })();
    if let Err(e) = result {
        let undo = undo_systemd(&user, done);
        return Err(match undo {
            Ok(()) => e.then("retiring the systemd units failed; they are back as they were"),
            Err(u) => e.then(format!(
                "retiring the systemd units failed, and putting them back failed too: {}",
                crate::exit::chain_text(&u)
            )),
        });
    }
    Ok(units
        .iter()
        .map(|(unit, _)| {
            format!(
                "retired {unit}: disabled and stopped, its files moved to {}",
                backup.display()
            )
        })
        .collect())
}

fn undo_systemd(
    user: &dyn Fn(&[&str]) -> Result<crate::service::exec::Done, crate::service::exec::ExecError>,
    done: Vec<Done>,
) -> Result<(), RetireError> {
    for d in done.iter().rev() {
        if let Done::Moved(files) = d {
            for (was, now) in files.iter().rev() {
                move_to(now, was)?;
            }
        }
    }
    user(&["daemon-reload"])?;
    for d in &done {
        if let Done::Disabled {
            unit,
            enabled,
            active,
        } = d
        {
            if *enabled {
                user(&["enable", unit])?;
            }
            if *active {
                user(&["start", unit])?;
            }
        }
    }
    Ok(())
}

/// Retires LaunchAgents through `launchctl`: each booted out of `gui/<uid>` (one not loaded is
/// fine: it was not running) and its plist moved into `backup`. When a step fails, everything
/// done is undone (plists back, bootstrapped again).
pub fn retire_launchd(
    launchctl: &Program,
    uid: u32,
    agents: &[(String, PathBuf)],
    backup: &Path,
) -> Result<Vec<String>, RetireError> {
    let domain = format!("gui/{uid}");
    let mut done: Vec<Done> = Vec::new();
    let result = (|| -> Result<(), RetireError> {
        for (label, plist) in agents {
            match launchctl.run(&["bootout", &format!("{domain}/{label}")]) {
                Ok(_) => done.push(Done::BootedOut {
                    plist: plist.clone(),
                }),
                // 3 (no such process), 113 (could not find service): it was not loaded.
                Err(e) if matches!(e.code, Some(3 | 113)) => {}
                Err(e) => return Err(e.into()),
            }
            let to = move_into(plist, backup)
                .map_err(|e| e.then(format!("moving {} aside", plist.display())))?;
            done.push(Done::Moved(vec![(plist.clone(), to)]));
        }
        Ok(())
    })();
    if let Err(e) = result {
        let undo = || -> Result<(), RetireError> {
            for d in done.iter().rev() {
                match d {
                    Done::Moved(files) => {
                        for (was, now) in files {
                            move_to(now, was)?;
                        }
                    }
                    Done::BootedOut { plist } => {
                        let p = plist.to_string_lossy();
                        launchctl.run(&["bootstrap", &domain, &p])?;
                    }
                    Done::Disabled { .. } => {}
                }
            }
            Ok(())
        };
        return Err(match undo() {
            Ok(()) => e.then("retiring the LaunchAgents failed; they are back as they were"),
            Err(u) => e.then(format!(
                "retiring the LaunchAgents failed, and putting them back failed too: {}",
                crate::exit::chain_text(&u)
            )),
        });
    }
    Ok(agents
        .iter()
        .map(|(label, _)| {
            format!(
                "retired {label}: booted out, its plist moved to {}",
                backup.display()
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crontab_lines_are_commented_out_only_as_they_were_read() {
        let text = "MAILTO=me\n0 3 * * * /usr/bin/true\n# kept\n5 4 * * * /x.sh >/dev/null\n";
        let out = comment_out(
            text,
            &[
                (2, "0 3 * * * /usr/bin/true", "local.a.true"),
                (4, "5 4 * * * /x.sh >/dev/null", "local.a.x"),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "MAILTO=me\n#automations-adopted local.a.true: 0 3 * * * /usr/bin/true\n# kept\n#automations-adopted local.a.x: 5 4 * * * /x.sh >/dev/null\n"
        );
        let err = comment_out(text, &[(3, "0 3 * * * /usr/bin/true", "l")]).unwrap_err();
        assert!(err.contains("line 3"), "{err}");
    }
}
