//! `--adopt`: once the imported automations are installed, the originals stop — the crontab's
//! lines commented out, a LaunchAgent booted out and its plist moved aside, a systemd timer
//! disabled and stopped and its files moved aside — each with a backup in the data root, and put
//! back as they were when a later step fails, so a job never runs twice and never zero times.

use std::path::{Path, PathBuf};

use serde::Serialize;

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

/// A folder of the data root for what `--adopt` moved aside: `imported/<what>-<stamp>/`.
pub fn backup_dir(data_root: &Path, what: &str, stamp: &str) -> PathBuf {
    data_root.join("imported").join(format!("{what}-{stamp}"))
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
