//! What an uninstall leaves in place, and the command that removes each (said after every
//! uninstall).

use crate::names::Name;
use crate::secrets::Scope;
use crate::settings::Settings;
use crate::units;

/// What an uninstall leaves in place (it removes only the unit files and the install record),
/// each with the command that removes it.
pub fn left_behind(
    settings: &Settings,
    names: &[&Name],
    records: &[&crate::state::Record],
) -> Vec<String> {
    let mut out = vec!["left in place, and how to remove each:".to_owned()];
    for name in names {
        left_of_one(settings, name, &mut out);
    }
    let remaining = crate::state::State::new(&settings.data_root).install_records();
    let others = remaining.as_ref().map_or(1, |r| r.len());
    let mut bins: Vec<&str> = records.iter().map(|r| r.bin.as_str()).collect();
    bins.sort_unstable();
    bins.dedup();
    for bin in bins {
        // Those still installed that run this very binary.
        let users = remaining
            .as_ref()
            .map_or(1, |r| r.values().filter(|r| r.bin == bin).count());
        if users == 0 {
            out.push(format!(
                "  the binary {bin}: no unit runs it any more; rm {}",
                units::shell_word(bin)
            ));
        } else {
            out.push(format!(
                "  the binary {bin}: {users} installed automation(s) still run it"
            ));
        }
    }
    // The secrets of what went: the AnyType keys of these automations (those whose definition
    // uses one, or is gone), and when nothing is installed any more, the notification and Healthchecks
    // credentials. Only those stored are named; a store that cannot answer is said once.
    let mut scopes: Vec<Scope> = names
        .iter()
        .filter(|n| uses_key(settings, n))
        .map(|n| Scope::Automation((*n).clone()))
        .collect();
    if others == 0 {
        scopes.extend(Scope::fixed());
    }
    if !scopes.is_empty() {
        let store = crate::keys::for_settings(settings);
        let mut cannot_tell = None;
        for (scope, _, answer) in crate::secrets::ask(store.as_ref(), &settings.namespace, scopes) {
            match answer {
                Ok(true) => out.push(format!(
                    "  the secret {scope} in {}: automations secret delete {scope}",
                    crate::keys::Place::of(settings).describe()
                )),
                Ok(false) => {}
                Err(e) => cannot_tell = Some(e),
            }
        }
        if let Some(e) = cannot_tell {
            out.push(format!(
                "  secrets: whether any is stored cannot be told ({e}); automations secret list shows them"
            ));
        }
    }
    if others == 0 {
        out.push(format!(
            "  the data root {} (the run log, settings and state of every automation): rm -r {}",
            settings.data_root.display(),
            units::shell_word(&settings.data_root.to_string_lossy())
        ));
    }
    out
}

/// What an uninstall leaves of `name` itself.
fn left_of_one(settings: &Settings, name: &Name, out: &mut Vec<String>) {
    let def = settings.definitions_dir().join(format!("{name}.toml"));
    if def.exists() {
        out.push(format!(
            "  the definition {}: a manual run still works; delete it (and commit) to retire {name}",
            def.display()
        ));
    }
    let env = settings.layout().env_file(name);
    if env.exists() {
        out.push(format!(
            "  its private environment {}: rm {}",
            env.display(),
            units::shell_word(&env.to_string_lossy())
        ));
    }
    if let Some(stamp) = timer_stamp(settings, name).filter(|p| p.exists()) {
        out.push(format!(
            "  its timer's stamp file {} (when the timer last fired, for catching up): rm {}",
            stamp.display(),
            units::shell_word(&stamp.to_string_lossy())
        ));
    }
    out.push(format!(
        "  its runs in the run log under {} (history; `automations runs {name}` shows them)",
        settings.data_root.display()
    ));
}

/// Whether `name` may have an AnyType key: its definition uses one, or there is no valid
/// definition to say it does not (retiring a job usually deletes it first).
fn uses_key(settings: &Settings, name: &Name) -> bool {
    crate::definition::load_one(
        &settings.definitions_dir(),
        name,
        &crate::definition::Checks::of(settings),
    )
    .map_or(true, |d| d.anytype.is_some())
}

/// Where the user's systemd keeps when `name`'s timer last fired (`Persistent=true`), which
/// disabling the timer leaves: `$XDG_DATA_HOME/systemd/timers/stamp-<label>.timer`. None beside
/// launchd, which keeps no such file.
fn timer_stamp(settings: &Settings, name: &Name) -> Option<std::path::PathBuf> {
    if settings.manager != crate::settings::Manager::Systemd {
        return None;
    }
    let data_home = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| settings.home.join(".local/share"));
    Some(
        data_home
            .join("systemd/timers")
            .join(format!("stamp-{}.timer", settings.label(name))),
    )
}
