//! Snapshots of rendered units, and the properties every rendering must have.

use super::*;
use crate::definition::{Checks, parse};

/// A definition `name` running `scripts/x.sh` for 60 s, with `extra` TOML after it.
pub(crate) fn def(name: &str, extra: &str) -> Definition {
    let text = format!(
        "name = \"{name}\"\ndescription = \"Proves 100% that it works\"\ncommand = [\"scripts/x.sh\"]\ntimeout_seconds = 60\n{extra}"
    );
    parse(
        &format!("{name}.toml"),
        text.as_bytes(),
        &Checks {
            home: "/nonexistent-home".into(),
            data_root: "/nonexistent-data".into(),
            units_dir: "/nonexistent-units".into(),
        },
    )
    .unwrap()
}

pub(crate) fn ns() -> Namespace {
    Namespace::new("automations").unwrap()
}

/// The schedule shapes the snapshots cover.
pub(crate) fn shapes() -> Vec<(&'static str, Definition)> {
    vec![
        (
            "every_minutes",
            def("every", "[schedule]\nevery_minutes = 5\n"),
        ),
        (
            "every_hours",
            def("hours", "[schedule]\nevery_minutes = 360\n"),
        ),
        (
            "every_minutes_awake",
            def("awake", "[schedule]\nevery_minutes = 7\n"),
        ),
        (
            "daily_at",
            def("daily", "[schedule]\ndaily_at = \"08:30\"\n"),
        ),
        (
            "daily_at_weekdays",
            def(
                "weekdays",
                "[schedule]\ndaily_at = \"07:05\"\nweekdays = [\"fri\", \"mon\", \"sun\"]\n",
            ),
        ),
        (
            "daily_at_list_weekdays",
            def(
                "twice",
                "[schedule]\ndaily_at = [\"18:00\", \"08:15\"]\nweekdays = [\"tue\", \"mon\"]\n",
            ),
        ),
        (
            "days_of_month",
            def(
                "monthly",
                "[schedule]\ndaily_at = [\"03:00\", \"23:45\"]\ndays_of_month = [15, 1]\n",
            ),
        ),
        (
            "every_minutes_offset",
            def(
                "offset",
                "[schedule]\nevery_minutes = 15\noffset_minutes = 5\n",
            ),
        ),
        (
            "every_hours_offset",
            def(
                "hours-offset",
                "[schedule]\nevery_minutes = 120\noffset_minutes = 90\n",
            ),
        ),
        ("at_login", def("login", "[schedule]\nat_login = true\n")),
        ("cron", def("cron", "[schedule]\ncron = \"30 2 * * 1-5\"\n")),
        (
            "cron_either_day",
            def(
                "crondays",
                "[schedule]\ncron = \"0 9 1,15 * fri\"\nat_login = true\n",
            ),
        ),
        (
            "every_hour_and_at_login",
            def(
                "hourly-login",
                "[schedule]\nevery_minutes = 60\nat_login = true\n",
            ),
        ),
        (
            "retries",
            def(
                "retries",
                "[schedule]\ndaily_at = \"06:00\"\nretries = 2\nretry_on = [\"outbound\"]\n",
            ),
        ),
        (
            "jitter",
            def(
                "jitter",
                "[schedule]\ndaily_at = \"08:30\"\njitter_seconds = 600\n",
            ),
        ),
        (
            "policies",
            def(
                "policed",
                "overlap = \"replace\"\nlock = \"disk\"\nwrites = [\"~/Backups\", \"{root}/out\"]\n[schedule]\ndaily_at = \"02:00\"\n[limits]\nmemory_max = \"512M\"\ncpu_quota = \"50%\"\nnice = 10\nio = \"idle\"\ntasks_max = 64\n[sandbox]\nlevel = \"strict\"\n",
            ),
        ),
    ]
}

/// Machine paths with a space, `%`, `&`, `<`, a quote and a non-ASCII letter.
pub(crate) fn awkward_paths() -> MachinePaths {
    MachinePaths {
        bin: "/opt/My Tools/100% \"auto\" & <bin>/automations".into(),
        root: "/srv/Répertoire & <repo> 50%/it's".into(),
        data_root: "/var/lib/données 100%/<data> & \"x\"".into(),
        home: "/home/ünï 100% & <me>".into(),
    }
}

fn text(files: &[UnitFile]) -> String {
    files
        .iter()
        .map(|f| format!("==> {} <==\n{}", f.name, String::from_utf8_lossy(&f.bytes)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn snapshots() {
    for (shape, d) in shapes() {
        for (target, tname) in [(Target::Systemd, "systemd"), (Target::Launchd, "launchd")] {
            insta::assert_snapshot!(
                format!("{tname}_{shape}"),
                text(&render(&d, &ns(), &MachinePaths::portable(), target).unwrap())
            );
        }
    }
    let d = &shapes()[0].1;
    insta::assert_snapshot!(
        "systemd_awkward_paths",
        text(&render(d, &ns(), &awkward_paths(), Target::Systemd).unwrap())
    );
    insta::assert_snapshot!(
        "launchd_awkward_paths",
        text(&render(d, &ns(), &awkward_paths(), Target::Launchd).unwrap())
    );
}

#[test]
fn rendering_is_deterministic_and_headed() {
    for (_, d) in shapes() {
        for target in [Target::Systemd, Target::Launchd] {
            let a = render(&d, &ns(), &awkward_paths(), target).unwrap();
            let b = render(&d, &ns(), &awkward_paths(), target).unwrap();
            assert_eq!(a, b);
            for f in &a {
                let text = String::from_utf8(f.bytes.clone()).unwrap();
                assert!(text.contains(&format!("Generated from automations/{}.toml", d.name)));
                assert!(text.contains("do not edit"));
                assert_eq!(
                    header_hashes(&f.bytes).first().copied(),
                    Some(d.sha256.as_str())
                );
            }
        }
    }
    let manual = def("manual", "");
    assert!(
        render(&manual, &ns(), &awkward_paths(), Target::Systemd)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn plists_parse_back_to_what_was_meant() {
    let all = shapes();
    let d = &all
        .iter()
        .find(|(s, _)| *s == "daily_at_weekdays")
        .unwrap()
        .1;
    let files = render(d, &ns(), &awkward_paths(), Target::Launchd).unwrap();
    let v: plist::Value = plist::from_bytes(&files[0].bytes).unwrap();
    let dict = v.as_dictionary().unwrap();
    assert_eq!(
        dict["Label"].as_string(),
        Some("local.automations.weekdays")
    );
    let args: Vec<&str> = dict["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_string().unwrap())
        .collect();
    assert_eq!(args[0], awkward_paths().bin);
    assert_eq!(&args[1..5], ["run", "weekdays", "--trigger", "schedule"]);
    assert_eq!(args[6], awkward_paths().root);
    assert_eq!(args[8], awkward_paths().data_root);
    let cal = dict["StartCalendarInterval"].as_array().unwrap();
    let days: Vec<u64> = cal
        .iter()
        .map(|c| {
            c.as_dictionary().unwrap()["Weekday"]
                .as_unsigned_integer()
                .unwrap()
        })
        .collect();
    assert_eq!(days, [1, 5, 0], "mon, fri, sun with Sunday = 0");
    assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
    assert!(
        dict["StandardOutPath"]
            .as_string()
            .unwrap()
            .ends_with("/launchd/weekdays.log")
    );
}

#[test]
fn exec_args_are_quoted_for_systemd() {
    use systemd::exec_arg;
    assert_eq!(exec_arg("/usr/bin/x"), "/usr/bin/x");
    assert_eq!(exec_arg("a b"), "\"a b\"");
    assert_eq!(exec_arg("50%"), "50%%");
    assert_eq!(exec_arg("$HOME"), "$$HOME");
    assert_eq!(exec_arg("say \"hi\""), "\"say \\\"hi\\\"\"");
    assert_eq!(exec_arg("back\\slash"), "\"back\\\\slash\"");
    assert_eq!(exec_arg(""), "\"\"");
    assert_eq!(exec_arg("it's"), "\"it's\"");
    assert_eq!(exec_arg("é&<"), "é&<");
}

#[test]
fn machine_paths_with_control_characters_are_refused() {
    let mut p = awkward_paths();
    assert!(p.check().is_ok());
    p.root = "/a\nb".into();
    assert!(p.check().unwrap_err().contains("repository root"));
}

#[test]
fn limits_and_the_sandbox_reach_each_manager_as_far_as_it_has_them() {
    let d = def(
        "policed",
        "writes = [\"~/Backups\"]\n[schedule]\nevery_minutes = 30\n[limits]\nmemory_max = \"64M\"\nnice = 5\nio = \"low\"\n[sandbox]\nlevel = \"strict\"\n",
    );
    let paths = MachinePaths::portable();
    let service = String::from_utf8(
        systemd::units(&d, &ns(), &Label::new(&ns(), &d.name), &paths)[0]
            .bytes
            .clone(),
    )
    .unwrap();
    for line in [
        "MemoryMax=67108864\n",
        "MemorySwapMax=0\n",
        "OOMPolicy=continue\n",
        "Nice=5\n",
        "IOSchedulingClass=best-effort\nIOSchedulingPriority=7\n",
        "ProtectSystem=strict\n",
        "ProtectHome=read-only\n",
        "NoNewPrivileges=yes\n",
        "ReadWritePaths=-@DATA_ROOT@ -%h/Backups\n",
    ] {
        assert!(service.contains(line), "{line:?} missing from\n{service}");
    }
    assert!(
        !service.contains("CPUQuota") && !service.contains("TasksMax"),
        "{service}"
    );
    // Without policies, none of it: today's units are unchanged.
    let plain = def("plain", "[schedule]\nevery_minutes = 30\n");
    let plain = String::from_utf8(
        systemd::units(&plain, &ns(), &Label::new(&ns(), &plain.name), &paths)[0]
            .bytes
            .clone(),
    )
    .unwrap();
    for key in [
        "MemoryMax",
        "OOMPolicy",
        "Nice",
        "IOScheduling",
        "Protect",
        "ReadWritePaths",
    ] {
        assert!(!plain.contains(key), "{key} in\n{plain}");
    }
    // launchd: Nice and low-priority I/O; the rest is said in the header, not pretended.
    let plist = launchd::plist(&d, &ns(), &Label::new(&ns(), &d.name), &paths);
    let v: plist::Value = plist::from_bytes(&plist.bytes).unwrap();
    let dict = v.as_dictionary().unwrap();
    assert_eq!(
        dict.get("Nice").and_then(plist::Value::as_signed_integer),
        Some(5)
    );
    assert_eq!(
        dict.get("LowPriorityIO").and_then(plist::Value::as_boolean),
        Some(true)
    );
    assert!(dict.get("LowPriorityBackgroundIO").is_none());
    let text = String::from_utf8(plist.bytes).unwrap();
    assert!(
        text.contains("[limits] memory_max: launchd has no equivalent"),
        "{text}"
    );
    assert!(
        text.contains("[sandbox] strict: launchd has no equivalent; install refuses"),
        "{text}"
    );
}
