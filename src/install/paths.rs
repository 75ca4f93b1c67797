//! Where an install points, and whether it may: the machine paths its units name, whether the
//! binary is one that stays (not in a cargo build folder), whether a sandboxed automation can be
//! confined here, the folders macOS privacy protection guards, and lingering.

use std::path::Path;

use super::InstallError;
use crate::definition::Definition;
use crate::names::Name;
use crate::settings::{Manager, Settings};
use crate::units::MachinePaths;

/// The machine paths units of this checkout point to.
pub fn machine_paths(settings: &Settings, bin: &Path) -> Result<MachinePaths, InstallError> {
    let utf8 = |what: &str, p: &Path| {
        p.to_str().map(str::to_owned).ok_or_else(|| {
            InstallError::Refused(format!(
                "the {what} path {} is not UTF-8; units cannot name it",
                p.display()
            ))
        })
    };
    let paths = MachinePaths {
        bin: utf8("binary", bin)?,
        root: utf8("repository root", &settings.root)?,
        data_root: utf8("data root", &settings.data_root)?,
        home: utf8("home", &settings.home)?,
    };
    paths.check().map_err(InstallError::Refused)?;
    Ok(paths)
}

/// The profiles' folders of a cargo build: cargo's own, and this project's (Cargo.toml).
const PROFILE_DIRS: [&str; 4] = ["debug", "release", "test-build", "dist"];

/// True when `bin` lives in a cargo build folder (`…/target/<profile>/…` or
/// `…/target/<target triple>/<profile>/…`), which `cargo clean` or the next build can remove or
/// replace under a running schedule.
pub fn in_build_folder(bin: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = bin.iter().collect();
    let profile = |p: &std::ffi::OsStr| PROFILE_DIRS.iter().any(|d| p == *d);
    parts.windows(2).any(|w| w[0] == "target" && profile(w[1]))
        || parts.windows(3).any(|w| w[0] == "target" && profile(w[2]))
}

/// Why the unit binary `bin` (of the automations `names`) would not stay, if it would not: it must
/// be a file (or about to be `copied` there), and not in a cargo target/ folder that the next
/// build replaces.
pub fn binary_refused(bin: &Path, copied: bool, names: &[&str]) -> Option<String> {
    if !copied && !bin.is_file() {
        return Some(format!(
            "{} does not exist; the unit would have nothing to run",
            bin.display()
        ));
    }
    in_build_folder(bin).then(|| {
        format!(
            "{} is inside a cargo target/ folder, which the next build or `cargo clean` replaces; run `make automations-install NAME=\"{}\"`, which installs a release binary at ~/.local/bin/automations",
            bin.display(),
            names.join(" ")
        )
    })
}

/// Why the sandboxed automation `name` could not run here once installed, if it could not: not
/// on macOS (launchd has nothing that confines a job the way systemd's sandbox does, and running
/// it unconfined would quietly drop what its definition asks for), nor on a Linux machine that
/// cannot confine it.
pub fn sandbox_refused(settings: &Settings, name: &Name) -> Option<String> {
    if settings.manager == Manager::Launchd {
        return Some(format!(
            "{name} asks for [sandbox] level = \"strict\", which launchd cannot give (macOS has no per-job equivalent of systemd's sandbox): nothing installed. Remove [sandbox] from automations/{name}.toml to run it unconfined here (docs/policies.md)"
        ));
    }
    crate::sandbox::why_not_here(&settings.root, &settings.data_root).map(|why| {
        format!(
            "{name} asks for [sandbox] level = \"strict\", but {why}: nothing installed (docs/policies.md)"
        )
    })
}

/// Why the repository root cannot be installed from, if it cannot: a linked git worktree, whose
/// path can vanish with `git worktree remove` while units still point at it.
pub fn linked_worktree(root: &Path) -> Option<String> {
    let git = root.join(".git");
    if !git.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(&git).unwrap_or_default();
    text.contains("/worktrees/").then(|| {
        format!(
            "{} is a linked git worktree, which can be removed with its units still pointing at it; install from the main checkout",
            root.display()
        )
    })
}

/// Systemd's lingering for this user: the user's name, and whether it is on (timers fire after
/// boot without a login). `None` where it does not apply: another manager, no user name.
pub fn lingering(settings: &Settings) -> Option<(String, bool)> {
    if settings.manager != Manager::Systemd {
        return None;
    }
    let user = crate::settings::user_name(&|k| std::env::var_os(k))?
        .to_string_lossy()
        .into_owned();
    let on = Path::new("/var/lib/systemd/linger").join(&user).exists();
    (!user.is_empty()).then_some((user, on))
}

/// On Linux, timers of a user without lingering run only while that user is logged in: the
/// warning that says so, when it applies.
pub fn linger_warning(settings: &Settings) -> Option<String> {
    match lingering(settings)? {
        (_, true) => None,
        (user, false) => Some(format!(
            "lingering is off for {user}: the timer fires only while you are logged in; `loginctl enable-linger {user}` makes it fire after boot too"
        )),
    }
}

/// macOS privacy protection: what of `defs` (watched paths), the repository and the data root lies
/// in a folder a LaunchAgent cannot read without a prompt nobody sees, one warning each.
pub fn privacy_warnings(settings: &Settings, defs: &[Definition]) -> Vec<String> {
    if settings.manager != Manager::Launchd {
        return Vec::new();
    }
    let mut warnings = Vec::new();
    for (name, path, folder) in watched_in_privacy_folders(&settings.home, &settings.root, defs) {
        warnings.push(format!(
            "{name} watches {path}, inside {folder}, which macOS privacy protection guards: launchd may start it, but reading there gets \"Operation not permitted\" unless its binary has Full Disk Access (System Settings → Privacy & Security; docs/triggers.md)"
        ));
    }
    for (what, path) in [
        ("repository root", &settings.root),
        ("data root", &settings.data_root),
    ] {
        if let Some(folder) = privacy_folder(&settings.home, path) {
            warnings.push(format!(
                "the {what} {} is inside {folder}, which macOS privacy protection guards: a LaunchAgent gets \"Operation not permitted\" there, with no prompt, so scheduled runs would fail; move it outside ~/Documents, ~/Desktop, ~/Downloads and iCloud Drive (for example to ~/src)",
                path.display()
            ));
        }
    }
    warnings
}

/// The folder macOS privacy protection (TCC) guards that `path` lies in, if any: `~/Documents`,
/// `~/Desktop`, `~/Downloads` and iCloud Drive (`~/Library/Mobile Documents`). A LaunchAgent gets
/// EPERM there without a prompt.
fn privacy_folder(home: &Path, path: &Path) -> Option<&'static str> {
    [
        ("Documents", "~/Documents"),
        ("Desktop", "~/Desktop"),
        ("Downloads", "~/Downloads"),
        (
            "Library/Mobile Documents",
            "iCloud Drive (~/Library/Mobile Documents)",
        ),
    ]
    .into_iter()
    .find(|(dir, _)| path.starts_with(home.join(dir)))
    .map(|(_, name)| name)
}

/// The watched paths of `defs` inside a folder macOS privacy protection guards, as (automation,
/// path as written, folder).
fn watched_in_privacy_folders<'d>(
    home: &Path,
    root: &Path,
    defs: &'d [Definition],
) -> Vec<(&'d str, &'d str, &'static str)> {
    let mut found = Vec::new();
    for d in defs {
        let Some(tr) = &d.trigger else { continue };
        for p in &tr.paths {
            let at = crate::definition::trigger::resolve(p, root, home);
            if let Some(folder) = privacy_folder(home, &at) {
                found.push((d.name.as_str(), p.as_str(), folder));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn privacy_folders_are_recognised_by_whole_path() {
        let home = Path::new("/Users/al");
        for (p, want) in [
            ("/Users/al/Documents/repo", Some("~/Documents")),
            ("/Users/al/Desktop", Some("~/Desktop")),
            ("/Users/al/Downloads/x/y", Some("~/Downloads")),
            (
                "/Users/al/Library/Mobile Documents/com~apple~CloudDocs/r",
                Some("iCloud Drive (~/Library/Mobile Documents)"),
            ),
            ("/Users/al/DocumentsOld/repo", None),
            ("/Users/al/src/repo", None),
            ("/Users/al/Library/Application Support/automations", None),
            ("/Users/alice/Documents", None),
        ] {
            assert_eq!(privacy_folder(home, Path::new(p)), want, "{p}");
        }
    }

    #[test]
    fn watched_paths_in_privacy_folders_are_named() {
        let checks = crate::definition::Checks {
            home: PathBuf::from("/Users/al"),
            data_root: PathBuf::from("/Users/al/Library/Application Support/automations"),
            units_dir: "/nonexistent-units".into(),
        };
        let def = |name: &str, paths: &str| {
            let text =
                format!("name = \"{name}\"\ncommand = [\"true\"]\n[trigger]\npaths = {paths}\n");
            crate::definition::parse(&format!("{name}.toml"), text.as_bytes(), &checks).unwrap()
        };
        let defs = [
            def("inbox", "[\"~/Documents/Inbox\", \"~/src/queue\"]"),
            def("dl", "[\"/Users/al/Downloads\"]"),
            def("repo", "[\"{root}/inbox\"]"),
        ];
        let found = watched_in_privacy_folders(
            Path::new("/Users/al"),
            Path::new("/Users/al/src/repo"),
            &defs,
        );
        assert_eq!(
            found,
            [
                ("inbox", "~/Documents/Inbox", "~/Documents"),
                ("dl", "/Users/al/Downloads", "~/Downloads"),
            ]
        );
        // A repository inside a guarded folder makes its {root} paths guarded too.
        let found = watched_in_privacy_folders(
            Path::new("/Users/al"),
            Path::new("/Users/al/Desktop/repo"),
            &defs[2..],
        );
        assert_eq!(found, [("repo", "{root}/inbox", "~/Desktop")]);
    }

    #[test]
    fn every_profile_folder_is_a_build_folder_and_a_copy_beside_them_is_not() {
        for bin in [
            "/x/target/release/automations",
            "/x/target/test-build/automations",
            "/x/target/x86_64-unknown-linux-musl/dist/automations",
            "/x/target/debug/deps/automations-1234",
        ] {
            assert!(in_build_folder(Path::new(bin)), "{bin}");
        }
        for bin in [
            "/home/u/.local/bin/automations",
            "/x/target/tmp/automations-it-1/bin/automations",
        ] {
            assert!(!in_build_folder(Path::new(bin)), "{bin}");
        }
    }
}
