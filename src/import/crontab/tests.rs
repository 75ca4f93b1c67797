use super::*;

use crate::import::fixture::Fixture;

/// What the crontab `text` becomes for alice in Berlin.
fn plan_for(
    f: &Fixture,
    text: &str,
    system: bool,
    copy_scripts: bool,
    keep_redirects: bool,
) -> Plan {
    let (root, home) = (f.root(), f.home());
    let cx = Context {
        home: &home,
        root: &root,
        checks: &f.checks,
        user: Some("alice"),
        zone: Some("Europe/Berlin"),
        existing: &f.existing,
        system,
        copy_scripts,
        keep_redirects,
    };
    plan(text, &cx)
}

trait Plans {
    fn plan(&self, text: &str, system: bool, copy_scripts: bool) -> Vec<Row>;
}

impl Plans for Fixture {
    fn plan(&self, text: &str, system: bool, copy_scripts: bool) -> Vec<Row> {
        plan_for(self, text, system, copy_scripts, false).rows
    }
}

fn fixture() -> Fixture {
    Fixture::new(&["home/bin"])
}

fn definition(row: &Row) -> crate::definition::Definition {
    let name = row.name.as_deref().unwrap();
    crate::definition::parse(
        &format!("{name}.toml"),
        &row.files.definition,
        &Checks {
            home: "/nonexistent-home".into(),
            data_root: "/nonexistent-data".into(),
            units_dir: "/nonexistent-units".into(),
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}"))
}

/// The script a row's shell line became, as text.
fn wrapper(row: &Row) -> String {
    assert_eq!(row.files.scripts.len(), 1, "{row:#?}");
    String::from_utf8(row.files.scripts[0].1.clone()).unwrap()
}

#[test]
fn plain_lines_become_an_argv_and_shell_syntax_runs_as_a_script_of_its_own() {
    let f = fixture();
    let rows = f.plan(
        "0 3 * * *   /usr/bin/rsync  -a /srv /mnt\n\
         */5 * * * * /usr/bin/curl -s https://x.example | /usr/bin/logger\n\
         0 4 * * * /usr/bin/date +\\%Y-\\%m-\\%d\n",
        false,
        false,
    );
    assert!(
        rows.iter().all(|r| r.status == Status::Imported),
        "{rows:#?}"
    );
    assert_eq!(
        definition(&rows[0]).command,
        ["/usr/bin/rsync", "-a", "/srv", "/mnt"]
    );
    // A pipe: the line runs as its own script, from home, through /bin/sh — pinned as argv[0].
    assert_eq!(
        definition(&rows[1]).command,
        ["{root}/scripts/cron-curl.sh"]
    );
    assert_eq!(rows[1].files.scripts[0].0, "scripts/cron-curl.sh");
    let text = wrapper(&rows[1]);
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    assert!(
        text.ends_with("cd || exit 1\n/usr/bin/curl -s https://x.example | /usr/bin/logger\n"),
        "{text}"
    );
    assert!(rows[1].notes.iter().any(|n| n.contains("it has a pipe")));
    // cron's \% is a literal %.
    assert_eq!(definition(&rows[2]).command, ["/usr/bin/date", "+%Y-%m-%d"]);
    assert_eq!(
        rows.iter()
            .map(|r| r.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["rsync", "curl", "date"]
    );
}

/// The wrapper runs: from home, where cron ran the line, and its copies beside it.
#[test]
fn a_shell_line_runs_from_home_with_its_copies_beside_it() {
    let f = fixture();
    let home = f.home();
    std::fs::create_dir_all(home.join("a")).unwrap();
    std::fs::write(home.join("a/run.sh"), "#!/bin/sh\necho a-ran in \"$PWD\"\n").unwrap();
    std::fs::write(home.join("note.txt"), "n").unwrap();
    let rows = f.plan(
        "0 * * * * ~/a/run.sh && cat note.txt | tr n N > out.txt\n",
        false,
        true,
    );
    assert_eq!(rows[0].status, Status::Imported, "{rows:#?}");
    assert_eq!(rows[0].name.as_deref(), Some("run"));
    let repo = f.dir.path().join("repo");
    // Written as the import would, then run as the runner would: argv[0] by its full path.
    let (rel, bytes) = &rows[0].files.scripts[0];
    let script = repo.join(rel);
    std::fs::write(&script, bytes).unwrap();
    std::fs::write(
        repo.join("scripts/run.sh"),
        "#!/bin/sh\necho a-ran in \"$PWD\"\n",
    )
    .unwrap();
    for p in [&script, &repo.join("scripts/run.sh")] {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = std::process::Command::new(&script)
        .current_dir(&repo)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("a-ran in {}\n", home.display())
    );
    assert_eq!(std::fs::read_to_string(home.join("out.txt")).unwrap(), "N");
}

#[test]
fn a_percent_sign_is_refused_with_why() {
    let f = fixture();
    let rows = f.plan("0 9 * * * /usr/bin/mail -s hi me%body text\n", false, false);
    assert_eq!(rows[0].status, Status::NeedsYou);
    assert!(
        rows[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("standard input"),
        "{rows:?}"
    );
}

#[test]
fn settings_are_said_and_values_go_to_env_files_of_the_jobs_below() {
    let f = fixture();
    let rows = f.plan(
        "0 1 * * * /usr/bin/true\n\
         MAILTO=ops@example.com\nSHELL=/bin/bash\nPATH=/opt/bin:/usr/bin\nHOME=/elsewhere\n\
         TOKEN = \"a secret value\"\nCRON_TZ=America/New_York\n\
         0 2 * * * /usr/bin/false\n@reboot /usr/bin/true\n",
        false,
        false,
    );
    let text: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
    assert!(!text.iter().any(|t| t.contains("secret")), "{text:?}");
    assert_eq!(text[5], "TOKEN=…");
    let reason = |i: usize| rows[i].reason.clone().unwrap();
    assert!(reason(1).starts_with("MAILTO: no mail"), "{}", reason(1));
    assert!(reason(2).starts_with("SHELL: not carried over"));
    assert!(reason(3).starts_with("PATH: not carried over"));
    assert!(reason(4).contains("not carried over"), "{}", reason(4));
    assert!(
        reason(6).contains("time_zone = \"America/New_York\""),
        "{}",
        reason(6)
    );
    // The job above the assignment has none; the one below has it, in its env file only.
    assert!(rows[0].files.env.is_empty());
    let below = &rows[7];
    assert_eq!(below.status, Status::Imported);
    assert_eq!(
        below.files.env,
        [("TOKEN".to_owned(), "a secret value".to_owned())]
    );
    let def = String::from_utf8(below.files.definition.clone()).unwrap();
    assert!(
        def.contains("env = [\"TOKEN\"]") && !def.contains("secret"),
        "{def}"
    );
    // The zone is kept: the job below is read in it, wherever it runs.
    assert!(def.contains("time_zone = \"America/New_York\""), "{def}");
    // The one above it is not.
    let above = String::from_utf8(rows[0].files.definition.clone()).unwrap();
    assert!(!above.contains("time_zone"), "{above}");
    // A zone means nothing to a run at login.
    assert_eq!(rows[8].status, Status::Imported);
    assert!(rows[8].notes.is_empty(), "{:?}", rows[8].notes);
    let login = String::from_utf8(rows[8].files.definition.clone()).unwrap();
    assert!(!login.contains("time_zone"), "{login}");
}

#[test]
fn a_zone_that_is_no_iana_name_is_said_and_the_jobs_keep_local_time() {
    let f = fixture();
    let rows = f.plan(
        "CRON_TZ=Moon/Base
0 2 * * * /usr/bin/false
",
        false,
        false,
    );
    let reason = rows[0].reason.clone().unwrap();
    assert!(
        reason.contains("not a zone of the IANA database"),
        "{reason}"
    );
    let def = String::from_utf8(rows[1].files.definition.clone()).unwrap();
    assert!(!def.contains("time_zone"), "{def}");
    assert!(
        rows[1].notes.iter().any(|n| n.contains("Moon/Base")),
        "{:?}",
        rows[1].notes
    );
}

#[test]
fn scripts_under_home_need_you_unless_copied() {
    let f = fixture();
    let script = f.home().join("bin/backup.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let line = format!("30 2 * * 1-5 {} --full\n", script.display());
    let rows = f.plan(&line, false, false);
    assert_eq!(rows[0].status, Status::NeedsYou);
    assert!(
        rows[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("--copy-scripts")
    );

    let rows = f.plan(&line, false, true);
    assert_eq!(rows[0].status, Status::Imported, "{rows:?}");
    assert_eq!(
        definition(&rows[0]).command,
        ["{root}/scripts/backup.sh", "--full"]
    );
    assert_eq!(
        rows[0].files.copies,
        [(script.clone(), "scripts/backup.sh".to_owned())]
    );
    // The comment in the file names home as ~.
    let def = String::from_utf8(rows[0].files.definition.clone()).unwrap();
    assert!(def.contains("~/bin/backup.sh --full"), "{def}");
    assert!(!def.contains(f.home().to_str().unwrap()), "{def}");
    // ~ with an output redirection, and a relative program (cron runs from home): argv, the
    // redirection dropped and said.
    let rows = f.plan(
        "0 * * * * ~/bin/backup.sh > /dev/null 2>&1\n0 * * * * bin/backup.sh\n",
        false,
        true,
    );
    assert_eq!(definition(&rows[0]).command, ["{root}/scripts/backup.sh"]);
    assert!(
        rows[0]
            .notes
            .iter()
            .any(|n| n.contains("drops its output redirection `> /dev/null 2>&1`")),
        "{:?}",
        rows[0].notes
    );
    assert_eq!(definition(&rows[1]).command, ["{root}/scripts/backup.sh"]);
    assert_eq!(rows[1].name.as_deref(), Some("backup-2"));
    // A home folder that is no script is the wrapper's to name, as cron did.
    let rows = f.plan("0 * * * * cd $HOME && /usr/bin/make\n", false, true);
    assert_eq!(rows[0].status, Status::Imported, "{rows:?}");
    assert!(wrapper(&rows[0]).ends_with("cd $HOME && /usr/bin/make\n"));
    // Another file already at the copy's place is left alone: the copy goes beside it.
    std::fs::write(f.dir.path().join("repo/scripts/backup.sh"), "other").unwrap();
    let rows = f.plan(&line, false, true);
    assert_eq!(
        definition(&rows[0]).command,
        ["{root}/scripts/bin-backup.sh", "--full"]
    );
}

#[test]
fn names_come_from_scripts_are_unique_and_never_overwrite() {
    let mut f = fixture();
    f.existing.insert("report".into());
    let rows = f.plan(
        "# Nightly report for the team\n\
         0 6 * * * /usr/local/bin/Report_Builder.py --all\n\
         0 7 * * * /usr/local/bin/report_builder.sh\n\
         0 8 * * * /usr/local/bin/report\n",
        false,
        false,
    );
    assert_eq!(rows[0].name.as_deref(), Some("report-builder"));
    assert_eq!(
        definition(&rows[0]).description.as_deref(),
        Some("Nightly report for the team")
    );
    assert_eq!(rows[1].name.as_deref(), Some("report-builder-2"));
    assert_eq!(rows[1].status, Status::Imported);
    assert_eq!(rows[2].status, Status::NeedsYou);
    assert!(
        rows[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("automations/report.toml exists")
    );
}

#[test]
fn system_crontabs_import_only_this_users_jobs() {
    let f = fixture();
    let rows = f.plan(
        "17 * * * * alice /usr/bin/true\n25 6 * * * root /usr/sbin/logrotate /etc/logrotate.conf\n@daily alice /usr/bin/false\n",
        true,
        false,
    );
    assert_eq!(rows[0].status, Status::Imported);
    assert_eq!(definition(&rows[0]).command, ["/usr/bin/true"]);
    assert_eq!(rows[1].status, Status::NotImported);
    assert!(rows[1].reason.as_deref().unwrap().contains("runs as root"));
    assert_eq!(rows[2].status, Status::Imported);
    // Without --system, a user field is taken for the program.
    let rows = f.plan("17 * * * * alice /usr/bin/true\n", false, false);
    assert_eq!(definition(&rows[0]).command, ["alice", "/usr/bin/true"]);
}

#[test]
fn schedules_and_reboot_and_lines_that_are_no_cron() {
    let f = fixture();
    let rows = f.plan(
        "@reboot /usr/bin/true\n61 * * * * /usr/bin/true\n* * * *\nhello world\n",
        false,
        false,
    );
    assert_eq!(rows[0].status, Status::Imported);
    assert_eq!(
        definition(&rows[0]).schedule,
        Some(crate::schedule::Schedule::AtLogin)
    );
    assert!(
        rows[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("61 is out of range")
    );
    assert!(
        rows[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("not a cron line")
    );
    assert!(
        rows[3]
            .reason
            .as_deref()
            .unwrap()
            .contains("not a cron line")
    );
    // The timeout is the time to the next firing, within 60 s and a day.
    let rows = f.plan(
        "*/10 * * * * /usr/bin/true\n* * * * * /usr/bin/true\n@weekly /usr/bin/true\n",
        false,
        false,
    );
    let timeouts: Vec<u32> = rows.iter().map(|r| definition(r).timeout_seconds).collect();
    assert_eq!(timeouts, [600, 60, 86_400]);
}

#[test]
fn each_script_gets_its_own_copy() {
    let f = fixture();
    let home = f.home();
    for d in ["a", "b"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
        std::fs::write(
            home.join(d).join("run.sh"),
            format!("#!/bin/sh\necho {d}\n"),
        )
        .unwrap();
    }
    let rows = f.plan(
        "0 1 * * * ~/a/run.sh\n0 2 * * * ~/b/run.sh\n0 3 * * * ~/a/run.sh && ~/b/run.sh\n",
        false,
        true,
    );
    assert!(
        rows.iter().all(|r| r.status == Status::Imported),
        "{rows:#?}"
    );
    assert_eq!(definition(&rows[0]).command, ["{root}/scripts/run.sh"]);
    assert_eq!(definition(&rows[1]).command, ["{root}/scripts/b-run.sh"]);
    assert_eq!(rows[1].files.copies[0].0, home.join("b/run.sh"));
    // One line with both: each to its copy, in the script written for the line.
    let text = wrapper(&rows[2]);
    assert!(
        text.ends_with("\"$here\"/run.sh && \"$here\"/b-run.sh\n"),
        "{text}"
    );
    assert!(text.contains("here=${0%/*}\n"));
}

#[test]
fn paths_are_read_from_home_as_cron_reads_them() {
    let f = fixture();
    let home = f.home();
    std::fs::write(home.join("bin/check.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(home.join("bin/x.sh"), "#!/bin/sh\n").unwrap();
    let lines = "0 1 * * * bin/check.sh > /dev/null 2>&1\n\
         0 2 * * * ${HOME:-}/bin/x.sh\n\
         0 3 * * * cd && ./bin/x.sh | logger\n\
         0 4 * * * cd bin; sh x.sh\n";
    // Without --copy-scripts every one needs you: each runs a script under home.
    for r in &f.plan(lines, false, false) {
        assert_eq!(r.status, Status::NeedsYou, "{r:#?}");
        assert!(
            r.reason.as_deref().unwrap().contains("--copy-scripts"),
            "{r:#?}"
        );
    }
    let rows = f.plan(lines, false, true);
    assert_eq!(definition(&rows[0]).command, ["{root}/scripts/check.sh"]);
    assert_eq!(definition(&rows[1]).command, ["{root}/scripts/x.sh"]);
    assert!(wrapper(&rows[2]).ends_with("cd && \"$here\"/x.sh | logger\n"));
    assert!(wrapper(&rows[3]).ends_with("cd bin; sh \"$here\"/x.sh\n"));
    // Names come from the script that does the work.
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["check", "x", "x-2", "x-3"]);
    // --keep-redirects keeps the line as cron ran it, in its own script.
    let kept = plan_for(
        &f,
        "0 1 * * * bin/check.sh > /dev/null 2>&1\n",
        false,
        true,
        true,
    )
    .rows;
    assert!(wrapper(&kept[0]).ends_with("\"$here\"/check.sh > /dev/null 2>&1\n"));
}

#[test]
fn names_say_what_does_the_work() {
    let f = fixture();
    let rows = f.plan(
        "0 1 * * * cd /srv/app && ./rotate.sh | logger\n\
         0 2 * * * find /var/tmp -mtime +7 -delete\n\
         0 3 * * * nice -n 10 /usr/bin/gzip -9 /srv/x\n",
        false,
        false,
    );
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_deref().unwrap()).collect();
    // /srv/app/rotate.sh does not exist here: the program is `./rotate.sh` all the same.
    assert_eq!(names, ["rotate", "find-tmp", "gzip-x"]);
}

#[test]
fn descriptions_never_carry_secrets() {
    let f = fixture();
    let rows = f.plan(
        "# old key: API_TOKEN=sk-live-abcdef123456\n0 1 * * * /usr/bin/true\n",
        false,
        false,
    );
    let def = String::from_utf8(rows[0].files.definition.clone()).unwrap();
    assert!(
        !def.contains("sk-live") && !def.contains("description"),
        "{def}"
    );
    assert!(
        rows[0]
            .notes
            .iter()
            .any(|n| n.contains("not its description")),
        "{:?}",
        rows[0].notes
    );
}

#[test]
fn a_no_break_space_is_part_of_a_word() {
    let f = fixture();
    let rows = f.plan(
        "0\u{a0}1 * * * /usr/bin/true\n0 1 * * * /usr/bin/echo a\u{a0}b\n",
        false,
        false,
    );
    assert_eq!(rows[0].status, Status::NeedsYou, "{rows:#?}");
    assert_eq!(definition(&rows[1]).command, ["/usr/bin/echo", "a\u{a0}b"]);
}

/// Thousands of lines of one script, and one line naming a script thousands of times: every
/// line shares one copy, and the work is linear (names are counted per base, copies looked up).
#[test]
fn many_lines_and_long_lines_share_one_copy() {
    let f = fixture();
    std::fs::write(f.home().join("s.sh"), "#!/bin/sh\n").unwrap();
    let many: String = (0..8000).map(|_| "0 1 * * * ~/s.sh\n").collect();
    let rows = f.plan(&many, false, true);
    assert_eq!(rows.len(), 8000);
    assert_eq!(rows[7999].name.as_deref(), Some("s-8000"));
    assert!(rows.iter().all(|r| r.files.copies.len() == 1));
    let long = format!("0 1 * * * {}\n", "~/s.sh;".repeat(20_000));
    let rows = f.plan(&long, false, true);
    assert_eq!(rows[0].status, Status::Imported, "{:?}", rows[0].reason);
    assert_eq!(rows[0].files.copies.len(), 1);
    assert_eq!(wrapper(&rows[0]).matches("\"$here\"/s.sh;").count(), 20_000);
}

#[test]
fn mailto_becomes_an_email_block() {
    let f = fixture();
    let p = plan_for(
        &f,
        "MAILTO=ops@example.com,bob\n0 1 * * * /usr/bin/true\n",
        false,
        false,
        false,
    );
    let block = p.email.unwrap();
    let parsed: toml::Table = toml::from_str(&block).unwrap();
    assert_eq!(
        parsed["email"]["to"].as_array().unwrap(),
        &[
            toml::Value::from("ops@example.com"),
            toml::Value::from("bob@localhost")
        ]
    );
    assert_eq!(parsed["email"]["tls"].as_str(), Some("none"));
    assert!(
        !p.rows[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("notifications.md")
    );
}
