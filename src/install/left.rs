//! What an uninstall leaves in place, and the command that removes each (said after every
//! uninstall).

use crate::names::Name;
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
    if others == 0 {
        if crate::healthchecks::enabled(settings) {
            out.push(
                "  the Healthchecks API and ping keys, if stored in the keychain: automations secret delete healthchecks.api; automations secret delete healthchecks.ping".to_owned(),
            );
        }
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
    out.push(format!(
        "  its AnyType key, if one was stored: automations secret delete {name}"
    ));
    out.push(format!(
        "  its runs in the run log under {} (history; `automations runs {name}` shows them)",
        settings.data_root.display()
    ));
}
