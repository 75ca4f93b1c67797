//! What a sandbox changes, in systemd's own rating: the exposure `systemd-analyze security` gives
//! a sandboxed automation's service with and without its sandbox, said by install and doctor.

use std::path::{Path, PathBuf};

use crate::definition::Definition;
use crate::settings::{Manager, Settings};
use crate::units;

/// The exposure `systemd-analyze security` gives the service of a sandboxed `def` as it would be
/// without its sandbox and as it is rendered ("9.8 UNSAFE" → "2.5 OK"): two throwaway copies in
/// the temp folder, read offline (no unit is loaded). `None` for a definition without a sandbox
/// or on a machine without systemd; the reason when the tool could not say. In words: "exposure
/// 2.5 OK (systemd-analyze security; 9.8 UNSAFE without it)", then what the runner's confinement
/// of the command adds, which systemd's rating cannot see.
pub fn sandbox_exposure(
    settings: &Settings,
    def: &Definition,
    paths: &units::MachinePaths,
) -> Option<Result<String, String>> {
    if !def.policy.sandbox || settings.manager != Manager::Systemd {
        return None;
    }
    let mut open = def.clone();
    open.policy.sandbox = false;
    // A folder of its own, made here: never one found there, where another user could have put
    // links.
    let dir = match fresh_private_dir() {
        Ok(d) => d,
        Err(e) => return Some(Err(format!("cannot make a folder in the temp folder: {e}"))),
    };
    let measured = (|| {
        let before = exposure_of(settings, &open, paths, &dir, "before")?;
        let after = exposure_of(settings, def, paths, &dir, "after")?;
        Ok(format!(
            "exposure {after} (systemd-analyze security; {before} without it); its command: {}",
            crate::sandbox::Support::here().words()
        ))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    Some(measured)
}

/// A new 0700 folder in the temp folder with an unguessable name; one already there is not used.
fn fresh_private_dir() -> std::io::Result<PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    let mut last = std::io::Error::other("no free name");
    for _ in 0..8 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let dir = std::env::temp_dir().join(format!("automations-exposure-{:016x}", h.finish()));
        match crate::platform::dir_builder(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// `systemd-analyze security --offline=yes --user` on `def`'s rendered service: its last line's
/// level ("2.5 OK").
fn exposure_of(
    settings: &Settings,
    def: &Definition,
    paths: &units::MachinePaths,
    dir: &Path,
    which: &str,
) -> Result<String, String> {
    let files = units::render(def, &settings.namespace, paths, units::Target::Systemd)?;
    let service = files
        .iter()
        .find(|f| f.name.ends_with(".service"))
        .ok_or("no service rendered")?;
    // Each copy in a folder of its own, under the unit's own name (the tool reports by it).
    let own = dir.join(which);
    std::fs::create_dir(&own).map_err(|e| format!("{}: {e}", own.display()))?;
    let at = own.join(&service.name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&at)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &service.bytes))
        .map_err(|e| format!("{}: {e}", at.display()))?;
    let mut cmd = std::process::Command::new("systemd-analyze");
    cmd.args(["security", "--offline=yes", "--user", "--no-pager"])
        .arg(&at)
        .stdin(std::process::Stdio::null());
    // It asks for the user's runtime folder even offline.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", dir);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run systemd-analyze: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for ")?
                .1
                .split_once(": ")
        })
        .map(|(_, level)| {
            level
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .ok_or_else(|| {
            let err = String::from_utf8_lossy(&out.stderr);
            format!(
                "systemd-analyze security said no exposure: {}",
                err.lines().last().unwrap_or("no output")
            )
        })
}
