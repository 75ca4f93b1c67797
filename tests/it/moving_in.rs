//! Moving in with `--adopt` (docs/moving-in.md): what is imported is installed on a real, private
//! systemd user manager and the originals retired in the same step — or, when a step fails, the
//! new units are gone again and the originals as they were.

use std::path::PathBuf;

use crate::harness::*;
use crate::systemd::UserManager;

/// A `crontab` stand-in: `-l` prints the crontab file, `-` replaces it with standard input (or
/// refuses, when the refuse file exists); every call is recorded, with what it was given.
fn crontab_stand_in(sb: &mut Sandbox, text: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = sb.path("stand-in");
    std::fs::create_dir_all(&dir).unwrap();
    let file = sb.path("crontab.current");
    let calls = sb.path("crontab.calls");
    let refuse = sb.path("crontab.refuse");
    std::fs::write(&file, text).unwrap();
    write_executable(
        &dir.join("crontab"),
        format!(
            "#!/bin/sh\necho \"crontab $*\" >> '{calls}'\ncase \"$1\" in\n-l) cat '{file}' ;;\n-) if [ -e '{refuse}' ]; then echo 'crontab: refused' >&2; exit 1; fi; tee -a '{calls}' > '{file}' ;;\n*) exit 2 ;;\nesac\n",
            calls = calls.display(),
            file = file.display(),
            refuse = refuse.display(),
        ),
    );
    sb.env(
        "PATH",
        &format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
    );
    (file, calls, refuse)
}

/// 25 lines come in pinned, are installed as 25 timers, and leave the crontab commented out with
/// a backup; an edited script is caught by `check` like any installed one.
#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_25_line_crontab_is_adopted_in_one_step() {
    let mut sb = Sandbox::new();
    sb.use_stable_bin();
    let Some(_m) = UserManager::start(&mut sb, "a_25_line_crontab_is_adopted_in_one_step") else {
        return;
    };
    crate::cron::home_scripts(&sb.home);
    let text = crate::cron::CRONTAB.replace("HOME/", &format!("{}/", sb.home.display()));
    let (file, calls, _) = crontab_stand_in(&mut sb, &text);

    let r = run_on_pty(
        sb.cmd(["import", "crontab", "--copy-scripts", "--adopt"]),
        "Type y to confirm",
        "y",
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(
        r.output
            .contains("Install 25 automation(s) and comment their lines out of the crontab"),
        "{}",
        r.output
    );
    assert!(
        r.output.contains("retired 25 crontab line(s)"),
        "{}",
        r.output
    );

    // Every job line is commented out behind the marker, naming its automation; the rest stays.
    let now = std::fs::read_to_string(&file).unwrap();
    let adopted: Vec<&str> = now
        .lines()
        .filter(|l| l.starts_with("#automations-adopted local.automations."))
        .collect();
    assert_eq!(adopted.len(), 25, "{now}");
    assert!(now.contains("MAILTO=ops@example.com\n"), "{now}");
    assert!(
        adopted
            .iter()
            .any(|l| l.ends_with(": 30 2 * * 1-5 ") || l.contains("db-dump.sh --gzip")),
        "{now}"
    );
    // A backup of the crontab as it was, private, in the data root.
    let backups: Vec<PathBuf> = std::fs::read_dir(sb.data.join("imported"))
        .unwrap()
        .map(|e| e.unwrap().path().join("crontab"))
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read_to_string(&backups[0]).unwrap(), text);
    // The stand-in was read twice (`-l` to import, `-l` again before writing), written once, and
    // read back.
    let log = std::fs::read_to_string(&calls).unwrap();
    let verbs: Vec<&str> = log.lines().filter(|l| l.starts_with("crontab ")).collect();
    assert_eq!(
        verbs,
        ["crontab -l", "crontab -l", "crontab -", "crontab -l"],
        "{log}"
    );

    // Installed and in step, once units/ is rendered for them as the report says.
    assert!(r.output.contains("`automations units`"), "{}", r.output);
    assert_code(&sb.run(["units"]), 0);
    let o = sb.run(["check"]);
    assert_code(&o, 0);
    // A line that ended in a redirection is an argv of its copied script, pinned: an edit is a
    // finding, and the scheduled firing would be skipped.
    assert_eq!(sb.parsed("nightly").command, ["{root}/scripts/nightly.sh"]);
    std::fs::write(
        sb.root.join("scripts/nightly.sh"),
        "#!/bin/sh\necho edited\n",
    )
    .unwrap();
    let o = sb.run(["check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("scripts/nightly.sh changed since it was installed"),
        "{}",
        stdout(&o)
    );
}

/// When the crontab cannot be written, nothing was retired and what this step installed is
/// uninstalled again: cron still runs the job, and only cron.
#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_failed_retire_leaves_the_crontab_and_uninstalls_again() {
    let mut sb = Sandbox::new();
    sb.use_stable_bin();
    let Some(m) = UserManager::start(
        &mut sb,
        "a_failed_retire_leaves_the_crontab_and_uninstalls_again",
    ) else {
        return;
    };
    let text = "*/10 * * * * /usr/bin/uptime\n";
    let (file, _, refuse) = crontab_stand_in(&mut sb, text);
    std::fs::write(&refuse, "").unwrap();
    let r = run_on_pty(
        sb.cmd(["import", "crontab", "--adopt"]),
        "Type y to confirm",
        "y",
    );
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(r.output.contains("crontab: refused"), "{}", r.output);
    assert!(
        r.output
            .contains("uninstalled local.automations.uptime again"),
        "{}",
        r.output
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert_eq!(
        m.prop("local.automations.uptime.timer", "LoadState"),
        "not-found"
    );
    assert!(!sb.data.join("state/installed/uptime.json").exists());
    // The definition stays written, as a plain import leaves it.
    assert!(sb.root.join("automations/uptime.toml").exists());
}

/// Ten real-world timers' `OnCalendar=` (distributions' own and users'), each with a service.
const TIMERS: [(&str, &str); 10] = [
    ("logrotate", "daily"),
    ("fstrim", "weekly"),
    ("apt-daily", "*-*-* 6,18:00"),
    ("standup", "Mon..Fri 08:30"),
    ("poll", "*:0/15"),
    ("invoice", "*-*-01 03:00:00"),
    ("offsite", "Sun 04:00"),
    ("sync", "*-*-* 00/4:00:00"),
    ("weekend", "Sat,Sun 10:00"),
    ("quarter", "*-01,04,07,10-01 05:00:00"),
];

/// Writes each timer and its service into the sandbox's user unit folder; their paths.
fn user_timers(sb: &Sandbox) -> Vec<PathBuf> {
    let dir = sb.home.join(".config/systemd/user");
    std::fs::create_dir_all(&dir).unwrap();
    TIMERS
        .iter()
        .map(|(name, cal)| {
            std::fs::write(
                dir.join(format!("{name}.service")),
                format!("[Unit]\nDescription={name}\n[Service]\nType=oneshot\nExecStart=/usr/bin/true\n"),
            )
            .unwrap();
            let timer = dir.join(format!("{name}.timer"));
            std::fs::write(
                &timer,
                format!("[Unit]\nDescription={name}\n[Timer]\nOnCalendar={cal}\nPersistent=true\n[Install]\nWantedBy=timers.target\n"),
            )
            .unwrap();
            timer
        })
        .collect()
}

/// Each imported timer fires where systemd says its original does: the next 20 elapses of
/// `systemd-analyze calendar` for the original `OnCalendar=`, in four zones.
#[test]
#[ignore = "a real component: systemd-analyze"]
fn imported_timers_fire_where_systemd_fires_the_originals() {
    if crate::units::which("systemd-analyze").is_none() {
        return skip(
            "imported_timers_fire_where_systemd_fires_the_originals",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    let sb = Sandbox::new();
    let timers = user_timers(&sb);
    let mut args = vec![
        "import".to_owned(),
        "systemd".to_owned(),
        "--json".to_owned(),
    ];
    args.extend(timers.iter().map(|t| t.display().to_string()));
    let o = sb.run(&args);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["written"], true, "{doc:#}");
    // June: no zone here changes its offset during the first iterations (docs/cron.md says what
    // systemd does in a change).
    let base = chrono::DateTime::parse_from_rfc3339("2026-06-10T00:00:30Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    for (i, (name, cal)) in TIMERS.iter().enumerate() {
        let def = sb.parsed(name);
        let original = std::fs::read_to_string(&timers[i]).unwrap();
        for zone in [
            "Europe/Berlin",
            "America/New_York",
            "Asia/Kathmandu",
            "Australia/Lord_Howe",
        ] {
            let want = crate::calendar::systemd_elapses(&original, zone, base, 20);
            assert_eq!(want.len(), 20, "{cal}");
            let tz: chrono_tz::Tz = zone.parse().unwrap();
            let got = automations::schedule::slots_between(
                def.schedule.as_ref().unwrap(),
                &tz,
                base,
                want[19],
            );
            assert_eq!(got, want, "{name} ({cal}) in {zone}: {:?}", def.schedule);
        }
    }
}

/// `import systemd --adopt` on a real user manager: ours installed and active, the original
/// disabled, stopped and moved aside; when moving it aside fails, the original is enabled and
/// active again and ours uninstalled.
#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_systemd_timer_is_adopted_or_left_as_it_was() {
    let mut sb = Sandbox::new();
    sb.use_stable_bin();
    let Some(m) = UserManager::start(&mut sb, "a_systemd_timer_is_adopted_or_left_as_it_was")
    else {
        return;
    };
    let dir = sb.home.join(".config/systemd/user");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["nightly", "hourly"] {
        std::fs::write(
            dir.join(format!("{name}.service")),
            "[Service]\nType=oneshot\nExecStart=/usr/bin/true\n",
        )
        .unwrap();
        std::fs::write(
            dir.join(format!("{name}.timer")),
            "[Timer]\nOnCalendar=*-*-* 03:00\nPersistent=true\n[Install]\nWantedBy=timers.target\n",
        )
        .unwrap();
    }
    m.systemctl(&["daemon-reload"]);
    for t in ["nightly.timer", "hourly.timer"] {
        let o = m.systemctl(&["enable", "--now", t]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(m.prop(t, "ActiveState"), "active");
    }

    // A step that fails: the backup folder cannot be made (a file holds its place).
    std::fs::create_dir_all(&sb.data).unwrap();
    std::fs::write(sb.data.join("imported"), "in the way").unwrap();
    let r = run_on_pty(
        sb.cmd([
            "import",
            "systemd",
            dir.join("hourly.timer").to_str().unwrap(),
            "--adopt",
        ]),
        "Type y to confirm",
        "y",
    );
    assert_eq!(r.code, Some(1), "{}", r.output);
    assert!(
        r.output.contains("they are back as they were"),
        "{}",
        r.output
    );
    assert!(
        r.output
            .contains("uninstalled local.automations.hourly again"),
        "{}",
        r.output
    );
    assert_eq!(m.prop("hourly.timer", "ActiveState"), "active");
    assert_eq!(m.prop("hourly.timer", "UnitFileState"), "enabled");
    assert!(dir.join("hourly.timer").exists() && dir.join("hourly.service").exists());
    assert_eq!(
        m.prop("local.automations.hourly.timer", "LoadState"),
        "not-found"
    );
    std::fs::remove_file(sb.data.join("imported")).unwrap();

    let r = run_on_pty(
        sb.cmd([
            "import",
            "systemd",
            dir.join("nightly.timer").to_str().unwrap(),
            "--adopt",
        ]),
        "Type y to confirm",
        "y",
    );
    assert_eq!(r.code, Some(0), "{}", r.output);
    assert!(r.output.contains("retired nightly.timer"), "{}", r.output);
    assert_eq!(
        m.prop("local.automations.nightly.timer", "ActiveState"),
        "active"
    );
    assert_eq!(m.prop("nightly.timer", "LoadState"), "not-found");
    assert!(!dir.join("nightly.timer").exists() && !dir.join("nightly.service").exists());
    let moved: Vec<String> = std::fs::read_dir(sb.data.join("imported"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(moved.contains(&"nightly.timer".to_owned()), "{moved:?}");
}

/// Retiring LaunchAgents through a `launchctl` stand-in (macOS is not here; the flow around it is
/// the systemd one above): each booted out of gui/UID and its plist moved aside; when a later
/// step fails, the plists are back and bootstrapped again.
#[test]
fn launch_agents_are_retired_or_put_back() {
    use automations::import::retire::retire_launchd;
    use automations::service::exec::Program;
    let sb = Sandbox::new();
    let fake = sb.path("launchctl");
    let calls = sb.path("launchctl.calls");
    write_executable(
        &fake,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$1/$2\" in bootout/gui/501/com.example.gone) echo 'Boot-out failed: 3: No such process' >&2; exit 3 ;; bootout/gui/501/com.example.stuck) echo 'Boot-out failed: 5: Input/output error' >&2; exit 5 ;; esac\nexit 0\n",
            calls.display()
        ),
    );
    let agents_dir = sb.home.join("Library/LaunchAgents");
    std::fs::create_dir_all(&agents_dir).unwrap();
    let agent = |label: &str| {
        let p = agents_dir.join(format!("{label}.plist"));
        std::fs::write(&p, label).unwrap();
        (label.to_owned(), p)
    };
    let a = agent("com.example.a");
    let gone = agent("com.example.gone");
    let backup = sb.path("data/imported/launchd-1");
    let lines = retire_launchd(
        &Program::new(&fake),
        501,
        &[a.clone(), gone.clone()],
        &backup,
    )
    .unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(!a.1.exists() && backup.join("com.example.a.plist").exists());
    // Not loaded is fine: it was not running.
    assert!(backup.join("com.example.gone.plist").exists());
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        "bootout gui/501/com.example.a\nbootout gui/501/com.example.gone\n"
    );

    // An agent that will not boot out: the one before it is back where it was, bootstrapped
    // again, and the stuck one is left as it is.
    std::fs::remove_file(&calls).unwrap();
    let b = agent("com.example.b");
    let stuck = agent("com.example.stuck");
    let backup = sb.path("data/imported/launchd-2");
    let e = retire_launchd(
        &Program::new(&fake),
        501,
        &[b.clone(), stuck.clone()],
        &backup,
    )
    .unwrap_err();
    let text = automations::exit::chain_text(&e);
    assert!(
        text.contains("they are back as they were") && text.contains("Input/output error"),
        "{text}"
    );
    assert!(b.1.exists() && stuck.1.exists());
    assert!(!backup.join("com.example.b.plist").exists());
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        format!(
            "bootout gui/501/com.example.b\nbootout gui/501/com.example.stuck\nbootstrap gui/501 {}\n",
            b.1.display()
        )
    );
}

/// What the install would refuse — a binary in target/, no terminal to ask at — is refused before
/// anything is written: no definition, no script, the crontab as it was.
#[test]
fn adopt_refuses_before_it_writes() {
    let mut sb = Sandbox::new();
    let text = "0 3 * * * /usr/bin/uptime\n";
    let (file, _, _) = crontab_stand_in(&mut sb, text);
    // A dry run says what --adopt would do, and does nothing.
    let o = sb.run(["import", "crontab", "--adopt", "--dry-run"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("with --adopt (not in a dry run), these are installed and the crontab's lines 1 then commented out"),
        "{}",
        stdout(&o)
    );
    let o = sb.run(["import", "crontab", "--adopt"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("inside a cargo target/ folder"),
        "{}",
        stderr(&o)
    );
    sb.use_stable_bin();
    let o = sb.run(["import", "crontab", "--adopt"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("needs a person at a terminal"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_dir(sb.root.join("automations"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    // A file to import, or a system crontab, is no crontab of yours to retire lines from.
    let o = sb.run(["import", "crontab", file.to_str().unwrap(), "--adopt"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("leave out the file"), "{}", stderr(&o));
}
