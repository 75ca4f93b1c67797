//! `validate`, `list`, `completions` and `--help` through the real binary.

use crate::harness::*;
use crate::schema::*;

#[test]
fn validate_reports_every_broken_file_in_one_run() {
    let sb = Sandbox::new();
    sb.definition("good", "name = \"good\"\ncommand = [\"true\"]\n");
    sb.definition("a", "name = \"b\"\ncommand = [\"true\"]\n");
    sb.definition(
        "c",
        "name = \"c\"\ncommand = [\"~/bin/x\"]\n[schedule]\nevery_minutes = 0\n",
    );
    sb.definition(
        "d",
        "name = \"d\"\ncommand = [\"true\"]\nenv = [\"AUTOMATION_X\"]\nbogus = 1\n",
    );
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    let err = stderr(&o);
    for line in [
        "automations/a.toml: name: \"b\" does not match the file name \"a\"",
        "automations/c.toml: command: element 1 \"~/bin/x\" starts with ~",
        "automations/c.toml: schedule.every_minutes: 0 is out of range 1..=1440",
        "automations/d.toml: env: AUTOMATION_X is reserved",
        "automations/d.toml: bogus: unknown key",
        "5 problem(s) in 3 file(s); 1 definition(s) valid",
    ] {
        assert!(err.contains(line), "missing {line:?} in:\n{err}");
    }
}

#[test]
fn validate_accepts_the_shipped_definitions() {
    let sb = Sandbox::new();
    copy_dir(
        &repo_root().join("automations"),
        &sb.root.join("automations"),
    );
    let o = sb.run(["validate"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("definitions valid"));
}

#[test]
fn validate_refuses_an_oversized_file_and_home_paths() {
    let sb = Sandbox::new();
    let big = format!(
        "name = \"big\"\ncommand = [\"true\"]\n#{}\n",
        "x".repeat(65 * 1024)
    );
    sb.definition("big", &big);
    let home_arg = format!(
        "name = \"h\"\ncommand = [\"cat\", \"{}/notes\"]\n",
        sb.home.display()
    );
    sb.definition("h", &home_arg);
    let o = sb.run(["validate"]);
    assert_code(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("automations/big.toml: file: larger than 64 KiB"),
        "{err}"
    );
    assert!(
        err.contains("automations/h.toml: command: element 2 contains the home directory path"),
        "{err}"
    );
}

#[test]
fn no_repository_root_is_an_environment_error() {
    let sb = Sandbox::new();
    let mut c = sb.cmd(["validate"]);
    c.env_remove("AUTOMATIONS_ROOT").current_dir(&sb.home);
    let o = c.output().unwrap();
    assert_code(&o, 3);
    assert!(stderr(&o).contains("no repository root"), "{}", stderr(&o));
}

#[test]
fn list_json_is_a_strict_versioned_document() {
    let sb = Sandbox::new();
    sb.definition(
        "daily",
        "name = \"daily\"\ndescription = \"d\"\ncommand = [\"true\"]\noutbound = true\n[schedule]\ndaily_at = \"08:30\"\nweekdays = [\"mon\",\"tue\",\"wed\",\"thu\",\"fri\"]\n",
    );
    sb.definition(
        "every",
        "name = \"every\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.definition(
        "manual",
        "name = \"manual\"\ncommand = [\"{root}/scripts/m.sh\", \"x\"]\n",
    );
    sb.definition("broken", "name = \"broken\"\n");
    let doc = list_doc(&sb);
    assert_eq!(doc.version, 1);
    let names: Vec<&str> = doc.automations.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["daily", "every", "manual"]);
    let daily = &doc.automations[0];
    assert_eq!(daily.label, "local.automations.daily");
    assert_eq!(daily.schedule_words, "daily at 08:30 on weekdays");
    assert_eq!(
        daily.schedule,
        Some(ScheduleJson::DailyAt {
            daily_at: "08:30".into(),
            weekdays: ["mon", "tue", "wed", "thu", "fri"]
                .map(String::from)
                .to_vec(),
            days_of_month: None,
        })
    );
    assert!(daily.outbound);
    assert_eq!(daily.description.as_deref(), Some("d"));
    assert_eq!(
        doc.automations[1].schedule,
        Some(ScheduleJson::EveryMinutes {
            every_minutes: 5,
            offset_minutes: None
        })
    );
    assert_eq!(doc.automations[1].schedule_words, "every 5 minutes");
    assert_eq!(doc.automations[2].schedule_words, "manual only");
    // The repository file a command runs, which an install pins; none for a program on PATH.
    assert_eq!(doc.automations[2].script.as_deref(), Some("scripts/m.sh"));
    assert_eq!(doc.automations[1].script, None);
    // Nothing is installed here: no next firing, since nothing fires them (the next firing of an
    // installed one: systemd::list_check_and_uninstall_say_what_is_installed_and_what_to_do).
    assert_eq!(doc.automations[1].installed.as_deref(), Some("no"));
    assert_eq!(doc.automations[2].installed, None);
    for e in &doc.automations {
        assert!(e.next.is_none() && e.next_words.is_none() && e.next_from.is_none());
    }
    assert!(doc.stopped.is_none());
    for e in &doc.automations {
        assert!(e.paused.is_none() && !e.running && e.last_run.is_none());
    }
    assert_eq!(doc.invalid.len(), 1);
    assert_eq!(doc.invalid[0].file, "automations/broken.toml");
    assert_eq!(doc.invalid[0].key, "command");
    assert!(doc.invalid[0].message.contains("missing"));

    let o = sb.run(["list"]);
    assert_code(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("every 5 minutes") && text.contains("1 invalid definition"),
        "{text}"
    );
}

#[test]
fn help_explains_each_command_with_an_example() {
    let sb = Sandbox::new();
    for cmd in ["validate", "list", "completions"] {
        let o = sb.run([cmd, "--help"]);
        assert_code(&o, 0);
        assert!(
            stdout(&o).contains("Example: automations"),
            "{cmd}: {}",
            stdout(&o)
        );
    }
    let o = sb.run(["completions", "bash"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("_automations"));
    let o = sb.run(["no-such-command"]);
    assert_code(&o, 2);
}
