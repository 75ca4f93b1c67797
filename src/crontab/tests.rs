use std::collections::BTreeSet;

use super::*;

struct Fixture {
    dir: tempfile::TempDir,
    checks: Checks,
    existing: BTreeSet<String>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["home/bin", "repo/scripts", "data"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let checks = Checks {
            home: dir.path().join("home"),
            data_root: dir.path().join("data"),
            units_dir: "/nonexistent-units".into(),
        };
        Self {
            dir,
            checks,
            existing: BTreeSet::new(),
        }
    }

    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("home")
    }

    fn plan(&self, text: &str, system: bool, copy_scripts: bool) -> Vec<Row> {
        let root = self.dir.path().join("repo");
        let home = self.home();
        let cx = Context {
            home: &home,
            root: &root,
            checks: &self.checks,
            user: Some("alice"),
            zone: Some("Europe/Berlin"),
            existing: &self.existing,
            system,
            copy_scripts,
        };
        plan(text, &cx)
    }
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

#[test]
fn plain_lines_become_an_argv_and_shell_syntax_runs_through_sh() {
    let f = Fixture::new();
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
    assert_eq!(
        definition(&rows[1]).command,
        [
            "/bin/sh",
            "-c",
            "/usr/bin/curl -s https://x.example | /usr/bin/logger"
        ]
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

#[test]
fn a_percent_sign_is_refused_with_why() {
    let f = Fixture::new();
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
    let f = Fixture::new();
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
    assert!(reason(6).contains("not America/New_York"), "{}", reason(6));
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
    assert!(below.notes.iter().any(|n| n.contains("America/New_York")));
    // A zone means nothing to a run at login.
    assert_eq!(rows[8].status, Status::Imported);
    assert!(rows[8].notes.is_empty(), "{:?}", rows[8].notes);
}

#[test]
fn scripts_under_home_need_you_unless_copied() {
    let f = Fixture::new();
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
    // ~ and $HOME in a shell line, and a relative program (cron runs from home).
    let rows = f.plan(
        "0 * * * * ~/bin/backup.sh > /dev/null\n0 * * * * bin/backup.sh\n",
        false,
        true,
    );
    assert_eq!(
        definition(&rows[0]).command[2],
        "{root}/scripts/backup.sh > /dev/null"
    );
    assert_eq!(definition(&rows[1]).command, ["{root}/scripts/backup.sh"]);
    assert_eq!(rows[1].name.as_deref(), Some("backup-2"));
    // A home path that is no file cannot be copied.
    let rows = f.plan("0 * * * * cd $HOME && /usr/bin/make\n", false, true);
    assert_eq!(rows[0].status, Status::NeedsYou, "{rows:?}");
    // Another file already at the copy's place is left alone.
    std::fs::write(f.dir.path().join("repo/scripts/backup.sh"), "other").unwrap();
    let rows = f.plan(&line, false, true);
    assert!(
        rows[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("exists already")
    );
}

#[test]
fn names_come_from_scripts_are_unique_and_never_overwrite() {
    let mut f = Fixture::new();
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
    let f = Fixture::new();
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
    let f = Fixture::new();
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
