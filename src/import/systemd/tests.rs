use super::*;

fn cron(spec: &str) -> Result<String, String> {
    calendar_cron(spec).map(|(c, _)| c.text())
}

#[test]
fn calendar_expressions_become_cron_fields() {
    for (spec, want) in [
        ("daily", "0 0 * * *"),
        ("weekly", "0 0 * * 1"),
        ("hourly", "0 * * * *"),
        ("quarterly", "0 0 1 1,4,7,10 *"),
        ("*-*-* 03:30:00", "30 3 * * *"),
        ("Mon..Fri 09:00", "0 9 * * 1-5"),
        ("Sat,Sun 10:15", "15 10 * * 6,0"),
        ("Fri..Sun 08:00", "0 8 * * 5-7"),
        ("*-*-01 04:00:00", "0 4 1 * *"),
        ("*-01,07-01 00:00", "0 0 1 1,7 *"),
        ("*:0/15", "0-59/15 * * * *"),
        ("*-*-* 8..18/2:00", "0 8-18/2 * * *"),
        ("*-*-* *:05:00", "5 * * * *"),
        ("Mon", "0 0 * * 1"),
        ("*-*-1,15 12:00", "0 12 1,15 * *"),
    ] {
        assert_eq!(cron(spec).as_deref(), Ok(want), "{spec}");
    }
    for (spec, why) in [
        ("*-*-* 10:00:30", "seconds"),
        ("2027-*-* 10:00", "years"),
        ("*-*~01 10:00", "month's end"),
        (
            "Mon *-*-01 10:00",
            "both the day of the month and the weekday",
        ),
        ("*-*-* 10:00 Mars/Olympus", "IANA"),
        ("*-*-* 25:00", "out of range"),
    ] {
        let e = cron(spec).unwrap_err();
        assert!(e.contains(why), "{spec}: {e}");
    }
}

/// A zone on an `OnCalendar=` line becomes the definition's `time_zone`; lines in two zones
/// cannot be one schedule.
#[test]
fn a_zone_on_the_calendar_becomes_time_zone() {
    let (c, z) = calendar_cron("Mon..Fri *-*-* 09:00 America/New_York").unwrap();
    assert_eq!(c.text(), "0 9 * * 1-5");
    assert_eq!(z.map(|z| z.name()), Some("America/New_York"));
    let (c, z) = calendar_cron("daily UTC").unwrap();
    assert_eq!(
        (c.text().as_str(), z.map(|z| z.name())),
        ("0 0 * * *", Some("UTC"))
    );
    let keys = calendar_keys(&["*-*-* 08:00 Europe/Berlin", "*-*-* 18:00 Europe/Berlin"]).unwrap();
    assert!(
        keys.contains(&("time_zone".to_owned(), "\"Europe/Berlin\"".to_owned())),
        "{keys:?}"
    );
    let e = calendar_keys(&["*-*-* 08:00 Europe/Berlin", "*-*-* 18:00 UTC"]).unwrap_err();
    assert!(e.contains("different zones"), "{e}");
    let plain = calendar_keys(&["*-*-* 08:00"]).unwrap();
    assert!(plain.iter().all(|(k, _)| k != "time_zone"), "{plain:?}");
}

#[test]
fn exec_start_words_spans_and_units() {
    let home = Path::new("/home/al");
    assert_eq!(
        exec_words(
            r#"/usr/bin/rsync -a "/srv/my files" '%h/b' x\ y 100%%"#,
            home
        )
        .unwrap(),
        [
            "/usr/bin/rsync",
            "-a",
            "/srv/my files",
            "/home/al/b",
            "x y",
            "100%"
        ]
    );
    assert!(
        exec_words("/bin/echo $HOME", home)
            .unwrap_err()
            .contains("expands")
    );
    assert!(exec_words("/bin/echo %n", home).unwrap_err().contains("%n"));
    assert_eq!(time_span("5min"), Ok(300));
    assert_eq!(time_span("1h 30min"), Ok(5400));
    assert_eq!(time_span("90"), Ok(90));
    assert_eq!(time_span("2d"), Ok(172_800));
    assert!(time_span("soon").is_err());
}

#[test]
fn a_unit_file_is_read_as_systemd_reads_it() {
    let mut u = Unit::default();
    u.parse("# c\n[Service]\nExecStart=/bin/a \\\n  --long\nEnvironment=A=1\nEnvironment=\nEnvironment=B=2\n")
        .unwrap();
    assert_eq!(u.last("Service", "ExecStart"), Some("/bin/a  --long"));
    assert_eq!(u.all("Service", "Environment"), ["B=2"]);
    assert!(
        Unit::default()
            .parse("Key=1\n")
            .unwrap_err()
            .contains("before any")
    );
}

use crate::import::fixture::Fixture;

/// A home with a user unit folder.
fn home_with_units() -> Fixture {
    Fixture::new(&["home/.config/systemd/user"])
}

trait Units {
    fn unit(&self, name: &str, text: &str) -> PathBuf;
    fn plan(&self, arms: &[PathBuf], copy: bool) -> Vec<Row>;
}

impl Units for Fixture {
    fn unit(&self, name: &str, text: &str) -> PathBuf {
        let p = self.home().join(".config/systemd/user").join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn plan(&self, arms: &[PathBuf], copy: bool) -> Vec<Row> {
        self.with_context(copy, |cx| plan(arms, cx))
    }
}

fn text(row: &Row) -> String {
    String::from_utf8(row.files.definition.clone()).unwrap()
}

#[test]
fn a_timer_and_its_service_become_one_definition() {
    let h = home_with_units();
    let t = h.unit(
        "backup.timer",
        "[Unit]\nDescription=Nightly backup\n[Timer]\nOnCalendar=Mon..Fri 02:30\nPersistent=true\nRandomizedDelaySec=5min\n[Install]\nWantedBy=timers.target\n",
    );
    h.unit(
        "backup.service",
        "[Unit]\nDescription=Nightly backup\nAfter=network-online.target\n[Service]\nType=oneshot\nExecStart=/usr/bin/restic backup /srv\nEnvironment=RESTIC_REPOSITORY=/mnt/r \"RESTIC_PASSWORD=hunter2 x\"\nNice=10\nIOSchedulingClass=idle\nMemoryMax=1G\nCPUQuota=50%\nTimeoutStartSec=2h\n",
    );
    let rows = h.plan(std::slice::from_ref(&t), false);
    assert_eq!(rows[0].status, Status::Imported, "{rows:#?}");
    let def = text(&rows[0]);
    for want in [
        "name = \"backup\"",
        "description = \"Nightly backup\"",
        "command = [\"/usr/bin/restic\", \"backup\", \"/srv\"]",
        "env = [\"RESTIC_REPOSITORY\", \"RESTIC_PASSWORD\"]",
        "timeout_seconds = 7200",
        "daily_at = \"02:30\"",
        "weekdays = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]",
        "jitter_seconds = 300",
        "nice = 10",
        "io = \"idle\"",
        "memory_max = \"1G\"",
        "cpu_quota = \"50%\"",
    ] {
        assert!(def.contains(want), "{want} in\n{def}");
    }
    assert!(!def.contains("hunter2"));
    assert_eq!(
        rows[0].files.env,
        [
            ("RESTIC_REPOSITORY".to_owned(), "/mnt/r".to_owned()),
            ("RESTIC_PASSWORD".to_owned(), "hunter2 x".to_owned())
        ]
    );
    match &rows[0].original {
        Some(Original::SystemdUnit { unit, files }) => {
            assert_eq!(unit, "backup.timer");
            assert_eq!(files.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn what_it_cannot_say_is_refused_by_name() {
    let h = home_with_units();
    let svc = "[Service]\nExecStart=/usr/bin/true\n";
    for (timer, service, why) in [
        (
            "[Timer]\nOnCalendar=daily\nWakeSystem=true\n",
            svc,
            "[Timer] WakeSystem=",
        ),
        (
            "[Timer]\nOnCalendar=daily\n",
            "[Service]\nExecStart=/usr/bin/true\nUser=root\n",
            "[Service] User=",
        ),
        (
            "[Timer]\nOnCalendar=daily\n",
            "[Service]\nType=forking\nExecStart=/usr/bin/true\n",
            "Type=forking",
        ),
        (
            "[Timer]\nOnCalendar=daily\n",
            "[Service]\nExecStart=-/usr/bin/true\n",
            "prefix",
        ),
        (
            "[Timer]\nOnCalendar=daily\n",
            "[Service]\nExecStart=/a\nExecStart=/b\n",
            "several ExecStart=",
        ),
        (
            "[Timer]\nOnCalendar=Mon 9:00\nOnCalendar=Tue 10:00\n",
            svc,
            "several OnCalendar=",
        ),
        ("[Timer]\nOnActiveSec=5min\n", svc, "[Timer] OnActiveSec="),
        (
            "[Unit]\n[Timer]\nOnCalendar=daily\n",
            "[Unit]\nOnFailure=mail@%n.service\n[Service]\nExecStart=/usr/bin/true\n",
            "not imported with it",
        ),
    ] {
        let t = h.unit("j.timer", timer);
        h.unit("j.service", service);
        let rows = h.plan(&[t], false);
        assert_eq!(rows[0].status, Status::NeedsYou, "{timer}{service}");
        let reason = rows[0].reason.clone().unwrap();
        assert!(reason.contains(why), "{why}: {reason}");
    }
}

#[test]
fn intervals_logins_paths_and_chains() {
    let h = home_with_units();
    let a = h.unit("a.timer", "[Timer]\nOnBootSec=5min\nOnUnitActiveSec=1h\n");
    h.unit(
        "a.service",
        "[Unit]\nOnSuccess=b.service\n[Service]\nExecStart=/usr/bin/true\n",
    );
    std::fs::create_dir_all(h.dir.path().join("home/inbox")).unwrap();
    let b = h.unit("b.path", "[Path]\nPathChanged=%h/inbox\nUnit=b.service\n");
    h.unit("b.service", "[Service]\nExecStart=/usr/bin/true\n");
    let rows = h.plan(&[a, b], false);
    assert!(
        rows.iter().all(|r| r.status == Status::Imported),
        "{rows:#?}"
    );
    let a = text(&rows[0]);
    assert!(
        a.contains("every_minutes = 60") && a.contains("at_login = true"),
        "{a}"
    );
    let b = text(&rows[1]);
    assert!(
        b.contains("paths = [\"~/inbox\"]")
            && b.contains("on = \"changed\"")
            && b.contains("after_success = [\"a\"]"),
        "{b}"
    );
}

#[test]
fn a_script_under_home_is_copied_when_asked() {
    let h = home_with_units();
    let script = h.dir.path().join("home/bin/job.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let t = h.unit("job.timer", "[Timer]\nOnCalendar=hourly\n");
    h.unit("job.service", "[Service]\nExecStart=%h/bin/job.sh --all\n");
    let rows = h.plan(std::slice::from_ref(&t), false);
    assert!(
        rows[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("--copy-scripts")
    );
    let rows = h.plan(&[t], true);
    assert!(
        text(&rows[0]).contains("command = [\"{root}/scripts/job.sh\", \"--all\"]"),
        "{}",
        text(&rows[0])
    );
    assert_eq!(
        rows[0].files.copies,
        [(script, "scripts/job.sh".to_owned())]
    );
}

/// `WorkingDirectory=` is kept: the job runs through a script written for it that starts there.
#[test]
fn a_working_directory_is_where_its_script_starts() {
    let h = home_with_units();
    let work = h.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let t = h.unit("here.timer", "[Timer]\nOnCalendar=daily\n");
    h.unit(
        "here.service",
        &format!(
            "[Service]\nExecStart=/bin/sh -c 'pwd > out'\nWorkingDirectory={}\n",
            work.display()
        ),
    );
    let rows = h.plan(&[t], false);
    assert_eq!(rows[0].status, Status::Imported, "{rows:#?}");
    assert!(text(&rows[0]).contains("command = [\"{root}/scripts/systemd-here.sh\"]"));
    let (rel, bytes) = &rows[0].files.scripts[0];
    let script = h.dir.path().join("repo").join(rel);
    std::fs::write(&script, bytes).unwrap();
    let o = std::process::Command::new("/bin/sh")
        .arg(&script)
        .env("HOME", h.dir.path().join("home"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(work.join("out")).unwrap().trim(),
        work.display().to_string()
    );
}
