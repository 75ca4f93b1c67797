use std::collections::BTreeSet;

use super::*;
use crate::names::Namespace;
use crate::units::{MachinePaths, Target};

use crate::import::fixture::Fixture;

/// A home with a LaunchAgents folder.
fn home_with_agents() -> Fixture {
    Fixture::new(&["home/Library/LaunchAgents"])
}

trait Agents {
    fn plist(&self, label: &str, body: &str) -> PathBuf;
    fn plan(&self, plists: &[PathBuf], copy: bool) -> Vec<Row>;
}

impl Agents for Fixture {
    /// A plist with `body` (XML inside the top dict) beside the label and program.
    fn plist(&self, label: &str, body: &str) -> PathBuf {
        let p = self
            .home()
            .join(format!("Library/LaunchAgents/{label}.plist"));
        std::fs::write(
            &p,
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>Label</key><string>{label}</string>
<key>ProgramArguments</key><array><string>/usr/bin/true</string><string>--x</string></array>
{body}
</dict></plist>
"#
            ),
        )
        .unwrap();
        p
    }

    fn plan(&self, plists: &[PathBuf], copy: bool) -> Vec<Row> {
        self.with_context(copy, |cx| plan(plists, cx))
    }
}

fn def(row: &Row) -> crate::definition::Definition {
    crate::definition::parse(
        &format!("{}.toml", row.name.as_deref().unwrap()),
        &row.files.definition,
        &crate::definition::Checks {
            home: "/nonexistent-home".into(),
            data_root: "/nonexistent-data".into(),
            units_dir: "/nonexistent-units".into(),
        },
    )
    .unwrap()
}

/// `StartCalendarInterval` as a set of entries, each a sorted list of (key, value), Sunday 0.
fn entries(v: &Value) -> BTreeSet<Vec<(String, u64)>> {
    let one = |d: &Dictionary| {
        let mut e: Vec<(String, u64)> = d
            .iter()
            .map(|(k, v)| {
                let n = v.as_unsigned_integer().unwrap();
                (k.clone(), if k == "Weekday" { n % 7 } else { n })
            })
            .collect();
        e.sort();
        e
    };
    match v {
        Value::Dictionary(d) => [one(d)].into(),
        Value::Array(a) => a.iter().map(|d| one(d.as_dictionary().unwrap())).collect(),
        other => panic!("{other:?}"),
    }
}

fn int_dict(pairs: &[(&str, u64)]) -> String {
    let inner: String = pairs
        .iter()
        .map(|(k, v)| format!("<key>{k}</key><integer>{v}</integer>"))
        .collect();
    format!("<dict>{inner}</dict>")
}

/// Ten real-world `StartCalendarInterval`s: each imported plist, rendered again, gives the same
/// entries.
#[test]
fn calendar_intervals_render_back_to_the_same_entries() {
    let h = home_with_agents();
    let weekdays: Vec<String> = (1..=5)
        .map(|w| int_dict(&[("Weekday", w), ("Hour", 9), ("Minute", 0)]))
        .collect();
    let cases: Vec<(&str, String)> = vec![
        ("backup", int_dict(&[("Hour", 3), ("Minute", 0)])),
        ("standup", format!("<array>{}</array>", weekdays.concat())),
        ("hourly", int_dict(&[("Minute", 0)])),
        (
            "invoice",
            int_dict(&[("Day", 1), ("Hour", 4), ("Minute", 30)]),
        ),
        (
            "twice",
            format!(
                "<array>{}{}</array>",
                int_dict(&[("Hour", 9), ("Minute", 0)]),
                int_dict(&[("Hour", 17), ("Minute", 30)])
            ),
        ),
        (
            "sunday",
            int_dict(&[("Weekday", 0), ("Hour", 2), ("Minute", 15)]),
        ),
        (
            "quarter-hours",
            format!(
                "<array>{}</array>",
                [0, 15, 30, 45].map(|m| int_dict(&[("Minute", m)])).concat()
            ),
        ),
        (
            "new-year",
            int_dict(&[("Month", 1), ("Day", 1), ("Hour", 0), ("Minute", 0)]),
        ),
        (
            "fortnight",
            format!(
                "<array>{}{}</array>",
                int_dict(&[("Day", 1), ("Hour", 6), ("Minute", 0)]),
                int_dict(&[("Day", 15), ("Hour", 6), ("Minute", 0)])
            ),
        ),
        (
            "weekend",
            format!(
                "<array>{}{}</array>",
                int_dict(&[("Weekday", 6), ("Hour", 10), ("Minute", 0)]),
                int_dict(&[("Weekday", 7), ("Hour", 10), ("Minute", 0)])
            ),
        ),
    ];
    let ns = Namespace::new("automations").unwrap();
    for (name, interval) in cases {
        let p = h.plist(
            &format!("com.example.{name}"),
            &format!("<key>StartCalendarInterval</key>{interval}"),
        );
        let rows = h.plan(std::slice::from_ref(&p), false);
        assert_eq!(rows[0].status, Status::Imported, "{name}: {rows:#?}");
        let d = def(&rows[0]);
        let file =
            &crate::units::render(&d, &ns, &MachinePaths::portable(), Target::Launchd).unwrap()[0];
        let rendered: Value = plist::from_bytes(&file.bytes).unwrap();
        let original: Value = plist::from_file(&p).unwrap();
        let key = |v: &Value| v.as_dictionary().unwrap()["StartCalendarInterval"].clone();
        assert_eq!(
            entries(&key(&rendered)),
            entries(&key(&original)),
            "{name}: {:?}",
            d.schedule
        );
    }
}

#[test]
fn intervals_paths_environment_and_notes() {
    let h = home_with_agents();
    std::fs::create_dir_all(h.home().join("Inbox")).unwrap();
    let inbox = h.home().join("Inbox").display().to_string();
    let p = h.plist(
        "com.example.sorter",
        "<key>StartInterval</key><integer>600</integer><key>RunAtLoad</key><true/>\
             <key>EnvironmentVariables</key><dict><key>API_KEY</key><string>s3cr3t</string><key>PATH</key><string>/opt/bin</string></dict>\
             <key>StandardOutPath</key><string>/tmp/out.log</string><key>Nice</key><integer>5</integer><key>LowPriorityIO</key><true/>",
    );
    let q = h.plist(
        "com.example.queue",
        &format!("<key>QueueDirectories</key><array><string>{inbox}</string></array>"),
    );
    let rows = h.plan(&[p, q], false);
    assert!(
        rows.iter().all(|r| r.status == Status::Imported),
        "{rows:#?}"
    );
    let text = String::from_utf8(rows[0].files.definition.clone()).unwrap();
    for want in [
        "every_minutes = 10",
        "at_login = true",
        "env = [\"API_KEY\"]",
        "nice = 5",
        "io = \"low\"",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!text.contains("s3cr3t"));
    assert_eq!(
        rows[0].files.env,
        [("API_KEY".to_owned(), "s3cr3t".to_owned())]
    );
    assert!(
        rows[0]
            .notes
            .iter()
            .any(|n| n.contains("StandardOutPath is dropped"))
    );
    let text = String::from_utf8(rows[1].files.definition.clone()).unwrap();
    assert!(
        text.contains("paths = [\"~/Inbox\"]") && text.contains("on = \"not_empty\""),
        "{text}"
    );
    match &rows[1].original {
        Some(Original::LaunchAgent { label, .. }) => assert_eq!(label, "com.example.queue"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn what_it_cannot_say_is_refused_by_name() {
    let h = home_with_agents();
    for (label, body, why) in [
        ("a", "<key>KeepAlive</key><true/>", "KeepAlive"),
        (
            "b",
            "<key>StartCalendarInterval</key><dict><key>Hour</key><integer>3</integer></dict><key>LimitLoadToSessionType</key><string>Aqua</string>",
            "LimitLoadToSessionType has no equivalent",
        ),
        ("c", "", "starts on nothing"),
        (
            "d",
            "<key>StartInterval</key><integer>90</integer>",
            "whole number of minutes",
        ),
        (
            "e",
            &format!(
                "<key>StartCalendarInterval</key><array>{}{}</array>",
                int_dict(&[("Weekday", 1), ("Hour", 9), ("Minute", 0)]),
                int_dict(&[("Weekday", 2), ("Hour", 10), ("Minute", 0)])
            ),
            "no one cron expression",
        ),
        (
            "f",
            "<key>WatchPaths</key><array><string>/etc/hosts</string></array>",
            "outside the home folder",
        ),
    ] {
        let p = h.plist(&format!("com.example.{label}"), body);
        let rows = h.plan(&[p], false);
        assert_eq!(rows[0].status, Status::NeedsYou, "{label}");
        let reason = rows[0].reason.clone().unwrap();
        assert!(reason.contains(why), "{why}: {reason}");
    }
    let own = h.plist(
        "local.automations.x",
        "<key>StartInterval</key><integer>600</integer>",
    );
    assert!(
        h.plan(&[own], false)[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("this tool's own")
    );
}

/// `WorkingDirectory` is kept: a script written for the agent starts there, from `$HOME`.
#[test]
fn a_working_directory_is_where_its_script_starts() {
    let h = home_with_agents();
    std::fs::create_dir_all(h.home().join("proj")).unwrap();
    let p = h.plist(
        "com.example.proj",
        &format!(
            "<key>StartInterval</key><integer>600</integer><key>WorkingDirectory</key><string>{}</string>",
            h.home().join("proj").display()
        ),
    );
    let rows = h.plan(&[p], false);
    assert_eq!(rows[0].status, Status::Imported, "{rows:#?}");
    let (rel, bytes) = &rows[0].files.scripts[0];
    assert_eq!(rel, "scripts/launchd-proj.sh");
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        text.ends_with("cd \"$HOME\"/'proj' || exit 1\nexec '/usr/bin/true' '--x'\n"),
        "{text}"
    );
}
