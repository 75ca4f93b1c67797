//! Rendering checked by the real tools: `systemd-analyze verify`, python's `plistlib`; `units/`
//! checks; launchd and Task Scheduler logic against recording fakes of `launchctl` and `schtasks`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;

const SHAPES: &[(&str, &str)] = &[
    ("every", "[schedule]\nevery_minutes = 5\n"),
    ("minutely", "[schedule]\nevery_minutes = 1\n"),
    ("sixhourly", "[schedule]\nevery_minutes = 360\n"),
    ("awake", "[schedule]\nevery_minutes = 7\n"),
    ("daily", "[schedule]\ndaily_at = \"08:30\"\n"),
    (
        "weekdays",
        "[schedule]\ndaily_at = \"07:05\"\nweekdays = [\"fri\", \"mon\", \"sun\"]\n",
    ),
    (
        "twice",
        "[schedule]\ndaily_at = [\"18:00\", \"08:15\"]\nweekdays = [\"tue\", \"mon\"]\n",
    ),
    (
        "monthly",
        "[schedule]\ndaily_at = \"03:00\"\ndays_of_month = [31, 1]\n",
    ),
    (
        "offset",
        "[schedule]\nevery_minutes = 15\noffset_minutes = 5\n",
    ),
    ("login", "[schedule]\nat_login = true\n"),
    (
        "cron",
        "[schedule]\ncron = \"*/15 9-17 * jan-mar mon-fri\"\n",
    ),
    (
        "crondays",
        "[schedule]\ncron = \"0 9 1,15 * fri\"\nat_login = true\n",
    ),
    (
        "hourlylogin",
        "[schedule]\nevery_minutes = 60\nat_login = true\n",
    ),
    (
        "jittered",
        "[schedule]\ndaily_at = \"08:30\"\njitter_seconds = 900\n",
    ),
    (
        "watched",
        "[trigger]\npaths = [\"{root}/in box\", \"~/Documents/Inbox\"]\nsettle_seconds = 2\n",
    ),
    (
        "queue",
        "[schedule]\ndaily_at = \"08:00\"\n[trigger]\npaths = [\"{root}/queue\"]\non = \"not_empty\"\n",
    ),
    (
        "chained",
        "[trigger]\nafter_success = [\"daily\"]\nafter_failure = [\"every\"]\n",
    ),
    (
        "limited",
        "overlap = \"queue\"\nlock = \"disk\"\n[schedule]\ndaily_at = \"02:00\"\n[limits]\nmemory_max = \"1.5G\"\ncpu_quota = \"250%\"\nnice = 19\nio = \"low\"\ntasks_max = 64\n",
    ),
    (
        "sandboxed",
        "overlap = \"replace\"\nwrites = [\"~/Documents\", \"{root}/automations\"]\n[schedule]\nevery_minutes = 30\n[limits]\nio = \"idle\"\n[sandbox]\nlevel = \"strict\"\n",
    ),
];

/// The systemd units a shape renders: a service, its timer when scheduled, its path unit when
/// it watches paths.
fn systemd_units(name: &str) -> usize {
    match name {
        "watched" => 2,
        "queue" => 3,
        "chained" => 1,
        _ => 2,
    }
}

/// A sandbox whose root, data root and binary live under paths with a space, `%`, `&`, `<`, a
/// non-ASCII letter and (when `quotes`) quotes, which systemd refuses in an executable's path.
struct Awkward {
    sb: Sandbox,
    root: PathBuf,
    data: PathBuf,
    bin: PathBuf,
}

fn awkward(quotes: bool) -> Awkward {
    let mut sb = Sandbox::new();
    let base = sb.path(if quotes {
        "Répertoire 100% & <x> \"q\" it's"
    } else {
        "Répertoire 100% & <x>"
    });
    let root = base.join("repo");
    let data = base.join("data");
    std::fs::create_dir_all(root.join("automations")).unwrap();
    std::fs::create_dir_all(sb.home.join("Documents")).unwrap();
    let bin = stable_bin(&base.join("bin dir"));
    sb.bin = bin.clone();
    for (name, schedule) in SHAPES {
        std::fs::write(
            root.join("automations").join(format!("{name}.toml")),
            format!("name = \"{name}\"\ndescription = \"100% real & <ok>\"\ncommand = [\"true\"]\n{schedule}"),
        )
        .unwrap();
    }
    Awkward {
        sb,
        root,
        data,
        bin,
    }
}

/// `render NAME --target T --json` through the awkwardly placed binary: file name -> content.
fn render(a: &Awkward, name: &str, target: &str) -> Vec<(String, String)> {
    let mut c = a.sb.cmd(["render", name, "--target", target, "--json"]);
    c.env("AUTOMATIONS_ROOT", &a.root)
        .env("AUTOMATIONS_DATA_ROOT", &a.data)
        .current_dir(&a.root);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            (
                path.rsplit('/').next().unwrap().to_owned(),
                f["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
#[ignore = "a real component: systemd-analyze"]
fn every_rendered_systemd_pair_passes_systemd_analyze_verify() {
    if which("systemd-analyze").is_none() {
        return skip(
            "systemd_analyze_verify",
            "systemd-analyze is not installed (apt-get install systemd)",
        );
    }
    for a in [awkward(false), awkward(true)] {
        for (name, _) in SHAPES {
            let files = render(&a, name, "systemd");
            assert_eq!(files.len(), systemd_units(name), "{name}");
            let dir = a.sb.path(&format!("units-{name}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut paths = Vec::new();
            for (file, content) in &files {
                std::fs::write(dir.join(file), content).unwrap();
                paths.push(dir.join(file));
            }
            let runtime = a.sb.path("runtime");
            std::fs::create_dir_all(&runtime).unwrap();
            let o = Command::new("systemd-analyze")
                .args(["verify", "--user"])
                .args(&paths)
                .env("HOME", &a.sb.home)
                .env("XDG_RUNTIME_DIR", &runtime)
                .env("SYSTEMD_LOG_LEVEL", "notice")
                .output()
                .unwrap();
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "{name}: systemd-analyze verify said:\n{}{}",
                stdout(&o),
                stderr(&o)
            );
            let exec = &files[0].1;
            assert_eq!(
                exec.contains("ExecStart=/usr/bin/env "),
                a.bin.to_str().unwrap().contains('"'),
                "{exec}"
            );
        }
    }
}

#[test]
#[ignore = "a real component: python3's plistlib"]
fn every_plist_parses_back_the_same_with_plist_and_plistlib() {
    if which("python3").is_none() {
        return skip("plistlib", "python3 is missing");
    }
    let a = awkward(true);
    for (name, _) in SHAPES {
        let files = render(&a, name, "launchd");
        assert_eq!(files.len(), 1);
        let (file, content) = &files[0];
        assert_eq!(file, &format!("local.automations.{name}.plist"));
        let ours: plist::Value = plist::from_bytes(content.as_bytes()).unwrap();
        let ours = serde_json::to_value(&ours).unwrap();
        let mut py = Command::new("python3")
            .args(["-c", "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(py.stdin.as_mut().unwrap(), content.as_bytes()).unwrap();
        let out = py.wait_with_output().unwrap();
        assert!(out.status.success());
        let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(ours, theirs, "{name}");
        assert_eq!(theirs["ProgramArguments"][0], a.bin.to_str().unwrap());
        assert_eq!(theirs["WorkingDirectory"], a.root.to_str().unwrap());
        // The default timeout (300 s) plus the 30 s backstop, plus the jitter's delay, plus a
        // watcher's settle wait (three times settle_seconds) and its cool-down (60 s), plus a
        // queued firing's wait (its timeout) or a replacing one's (30 s).
        let extra = match *name {
            "jittered" => 900,
            "watched" => 3 * 2 + 60,
            "queue" => 3 * 5 + 60,
            "limited" => 300,
            "sandboxed" => 30,
            _ => 0,
        };
        assert_eq!(theirs["ExitTimeOut"], 330 + extra, "{name}");
        let calendar = &theirs["StartCalendarInterval"];
        match *name {
            "every" => {
                assert_eq!(
                    each(calendar, "Minute"),
                    (0..60).step_by(5).collect::<Vec<u64>>()
                );
                assert!(calendar[0].get("Hour").is_none());
                assert!(theirs.get("StartInterval").is_none() && theirs.get("RunAtLoad").is_none());
            }
            "minutely" => assert_eq!(calendar.as_array().unwrap().len(), 60),
            "sixhourly" => {
                assert_eq!(each(calendar, "Hour"), [0, 6, 12, 18]);
                assert!(
                    calendar
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|c| c["Minute"] == 0)
                );
            }
            "offset" => assert_eq!(each(calendar, "Minute"), [5, 20, 35, 50]),
            "watched" => {
                let home = a.sb.home.to_str().unwrap();
                assert_eq!(
                    theirs["WatchPaths"],
                    serde_json::json!([
                        format!("{}/in box", a.root.display()),
                        format!("{home}/Documents/Inbox")
                    ])
                );
                assert!(calendar.is_null() && theirs.get("RunAtLoad").is_none());
                assert!(content.contains("Also started when in box/ or Inbox/ changes"));
            }
            "queue" => {
                let queue = format!("{}/queue", a.root.display());
                assert_eq!(theirs["QueueDirectories"], serde_json::json!([queue]));
                assert!(theirs.get("WatchPaths").is_none());
                assert_eq!(theirs["RunAtLoad"], true);
            }
            "chained" => {
                // Nothing of its own starts it: the upstream's runner kickstarts it.
                for key in [
                    "StartCalendarInterval",
                    "StartInterval",
                    "WatchPaths",
                    "RunAtLoad",
                ] {
                    assert!(theirs.get(key).is_none(), "{key}");
                }
                assert!(content.contains("Also started after daily succeeds, after every fails"));
            }
            "awake" => {
                assert_eq!(theirs["StartInterval"], 420);
                assert!(calendar.is_null());
                assert!(content.contains("counts awake time; does not fire on wake"));
            }
            "limited" => {
                assert_eq!(theirs["RunAtLoad"], true);
                assert_eq!(theirs["Nice"], 19);
                assert_eq!(theirs["LowPriorityIO"], true);
                assert!(theirs.get("LowPriorityBackgroundIO").is_none());
                assert!(content.contains(
                    "[limits] memory_max, cpu_quota, tasks_max: launchd has no equivalent"
                ));
            }
            "sandboxed" => {
                assert_eq!(each(calendar, "Minute"), [0, 30]);
                assert_eq!(theirs["LowPriorityIO"], true);
                assert_eq!(theirs["LowPriorityBackgroundIO"], true);
                assert!(
                    content
                        .contains("[sandbox] strict: launchd has no equivalent; install refuses")
                );
            }
            _ => assert_eq!(theirs["RunAtLoad"], true, "{name}"),
        }
    }
}

/// The value of `key` in each entry of a `StartCalendarInterval` array.
fn each(calendar: &serde_json::Value, key: &str) -> Vec<u64> {
    calendar
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[key].as_u64().unwrap())
        .collect()
}

pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(["/usr/bin".into(), "/bin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[test]
fn units_check_catches_a_stale_or_hand_edited_units_folder() {
    let sb = Sandbox::new();
    sb.definition(
        "x",
        "name = \"x\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("units/systemd/local.automations.x.timer: missing"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["units"]), 0);
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 0);
    assert_code(&sb.run(["check"]), 0);

    // A definition edited without regenerating.
    sb.definition(
        "x",
        "name = \"x\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 10\n",
    );
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    let text = stdout(&o);
    assert!(
        text.contains("units/systemd/local.automations.x.timer: stale"),
        "{text}"
    );
    assert!(
        text.contains("-OnCalendar=*-*-* *:00/5:00")
            && text.contains("+OnCalendar=*-*-* *:00/10:00"),
        "{text}"
    );
    assert_code(&sb.run(["check"]), 1);
    assert_code(&sb.run(["units"]), 0);

    // A file edited by hand.
    let timer = sb.root.join("units/systemd/local.automations.x.timer");
    let edited = std::fs::read_to_string(&timer)
        .unwrap()
        .replace("AccuracySec=1s", "AccuracySec=1h");
    std::fs::write(&timer, edited).unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("local.automations.x.timer: edited by hand"),
        "{}",
        stdout(&o)
    );

    // An extra file, and a definition that lost its schedule.
    assert_code(&sb.run(["units"]), 0);
    std::fs::write(
        sb.root.join("units/systemd/local.automations.gone.timer"),
        "x",
    )
    .unwrap();
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("local.automations.gone.timer: extra"),
        "{}",
        stdout(&o)
    );
    assert_code(&sb.run(["units"]), 0);
    assert!(
        !sb.root
            .join("units/systemd/local.automations.gone.timer")
            .exists()
    );
    sb.definition("x", "name = \"x\"\ncommand = [\"true\"]\n");
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 1);
    assert_eq!(stdout(&o).matches(": extra").count(), 3);
}

/// A Linux-only repository says so in automations.toml: no plists are rendered, and plists left
/// over are neither compared nor touched — `check` is clean where it failed over each one.
#[test]
fn a_repository_renders_only_the_targets_it_names() {
    let sb = Sandbox::new();
    sb.definition(
        "x",
        "name = \"x\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    // The team renders for systemd only, by hand: check fails over the plist it never wanted.
    std::fs::create_dir_all(sb.root.join("units/launchd")).unwrap();
    std::fs::write(
        sb.root.join("units/launchd/local.automations.old.plist"),
        "x",
    )
    .unwrap();
    assert_code(&sb.run(["units"]), 0);
    std::fs::write(
        sb.root.join("units/launchd/local.automations.old.plist"),
        "x",
    )
    .unwrap();
    std::fs::remove_file(sb.root.join("units/launchd/local.automations.x.plist")).unwrap();
    let o = sb.run(["check"]);
    assert_code(&o, 1);
    assert!(
        stdout(&o).contains("units/launchd/local.automations.x.plist: missing"),
        "{}",
        stdout(&o)
    );

    std::fs::write(
        sb.root.join("automations.toml"),
        "[units]\ntargets = [\"systemd\"]\n",
    )
    .unwrap();
    let o = sb.run(["check"]);
    assert_code(&o, 0);
    let o = sb.run(["units"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("units/: 2 file(s)"), "{}", stdout(&o));
    // Not this target's: left alone.
    assert!(
        sb.root
            .join("units/launchd/local.automations.old.plist")
            .exists()
    );
    assert!(
        !sb.root
            .join("units/launchd/local.automations.x.plist")
            .exists()
    );

    // A file that says something else is refused by name.
    for (text, says) in [
        (
            "[units]\ntargets = [\"solaris\"]\n",
            "unknown variant `solaris`",
        ),
        ("[units]\ntargets = []\n", "targets is empty"),
        ("[unit]\n", "unknown field `unit`"),
    ] {
        std::fs::write(sb.root.join("automations.toml"), text).unwrap();
        let o = sb.run(["units", "--check"]);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("automations.toml: ") && stderr(&o).contains(says),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn the_committed_units_folder_is_current() {
    let sb = Sandbox::new();
    copy_dir(
        &repo_root().join("automations"),
        &sb.root.join("automations"),
    );
    copy_dir(&repo_root().join("units"), &sb.root.join("units"));
    let o = sb.run(["units", "--check"]);
    assert_code(&o, 0);
}

#[test]
fn install_without_a_terminal_is_refused_and_dry_run_prints_the_plan() {
    let mut sb = Sandbox::new();
    sb.definition(
        "x",
        "name = \"x\"\ncommand = [\"true\"]\n[schedule]\nevery_minutes = 5\n",
    );
    sb.definition("manual", "name = \"manual\"\ncommand = [\"true\"]\n");
    let debug_build = sb.run(["install", "x"]);
    sb.use_stable_bin();
    let agents = sb.home.join(".config/systemd/user");
    let o = sb.run(["install", "x"]);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("needs a person at a terminal"),
        "{}",
        stderr(&o)
    );
    let o = sb.run(["uninstall", "x"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("not installed on this machine: nothing to do"),
        "{}",
        stdout(&o)
    );
    assert!(
        !agents.exists(),
        "a refused install changed the agents folder"
    );
    let o = sb.run(["install", "x", "--dry-run"]);
    assert_code(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("create")
            && text.contains("local.automations.x.timer")
            && text.contains("dry run: nothing changed"),
        "{text}"
    );
    assert!(
        text.contains("+OnCalendar=*-*-* *:00/5:00"),
        "the plan shows the diff: {text}"
    );
    assert!(!agents.exists());
    let o = sb.run(["install", "manual", "--dry-run"]);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("has no [schedule]"));
    // The binary under test lives in a cargo target/ folder: install from there is refused
    // before it asks.
    assert_code(&debug_build, 3);
    assert!(
        stderr(&debug_build).contains("inside a cargo target/ folder"),
        "{}",
        stderr(&debug_build)
    );
}

/// A fake `launchctl` that records every call and fails as told by files in its folder:
/// `fail-<verb>` holds the exit codes to answer, one per call, before succeeding; `no-gui` makes
/// `print gui/<uid>` answer 125; `refuse-if` holds a pattern: `bootstrap` of a plist containing it
/// always fails with 5; `stopping` holds how many more `print`s still see a job that
/// `bootout` answered 36 for. Its `list` always claims the job is loaded, as the caller's own domain
/// might, so trusting `list` would show.
fn fake_launchctl(dir: &Path) -> PathBuf {
    let path = dir.join("launchctl");
    write_executable(
        &path,
        r#"#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/calls"
verb=$1
f="$dir/fail-$verb"
if [ -s "$f" ]; then
    code=$(head -n 1 "$f"); sed -i 1d "$f"
    echo "simulated $verb failure $code" >&2
    exit "$code"
fi
case "$verb" in
    bootstrap)
        if [ -s "$dir/refuse-if" ] && grep -qF "$(cat "$dir/refuse-if")" "$3"; then
            echo "simulated bootstrap failure 5: Input/output error" >&2; exit 5
        fi
        touch "$dir/loaded" ;;
    bootout)
        [ -e "$dir/loaded" ] || { echo "Boot-out failed: 3: No such process" >&2; exit 3; }
        if [ -s "$dir/stopping" ]; then echo "Boot-out failed: 36: Operation now in progress" >&2; exit 36; fi
        rm -f "$dir/loaded" ;;
    print)
        case "$2" in
            */*/*)
                if [ -s "$dir/stopping" ]; then
                    n=$(cat "$dir/stopping")
                    if [ "$n" -le 1 ]; then rm -f "$dir/stopping" "$dir/loaded"; else echo $((n - 1)) > "$dir/stopping"; fi
                    exit 0
                fi
                [ -e "$dir/loaded" ] || { echo "Could not find service" >&2; exit 113; } ;;
            *) [ -e "$dir/no-gui" ] && { echo "Domain does not support specified action" >&2; exit 125; } ;;
        esac ;;
    list) printf -- '-\t0\t%s\n' "$(cat "$dir/label")" ;;
esac
exit 0
"#,
    );
    path
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

mod launchd {
    use super::*;
    use automations::names::{Label, Name, Namespace};
    use automations::service::launchd::Launchd;
    use automations::service::{PreflightError, ServiceManager};
    use automations::settings::{Manager, OsFacts, Overrides, Settings};
    use std::time::{Duration, Instant};

    const WAIT: Duration = Duration::from_secs(5);

    fn setup() -> (tempfile::TempDir, Launchd, Label) {
        setup_uid(501)
    }

    fn setup_uid(uid: u32) -> (tempfile::TempDir, Launchd, Label) {
        let d = tempfile::tempdir().unwrap();
        let fake = fake_launchctl(d.path());
        let label = Label::new(
            &Namespace::new("automations").unwrap(),
            &Name::new("x").unwrap(),
        );
        std::fs::write(d.path().join("label"), label.as_str()).unwrap();
        let mut l = Launchd::new(fake.to_str().unwrap(), uid);
        l.pause = Duration::from_millis(1);
        (d, l, label)
    }

    fn count(d: &Path, prefix: &str) -> usize {
        calls(d).iter().filter(|c| c.starts_with(prefix)).count()
    }

    #[test]
    fn install_sequence_is_pinned() {
        let (d, l, label) = setup();
        l.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        assert_eq!(
            calls(d.path()),
            [
                "enable gui/501/local.automations.x",
                "bootout gui/501/local.automations.x",
                "bootstrap gui/501 /agents/local.automations.x.plist",
                "print gui/501/local.automations.x",
            ]
        );
        assert!(
            l.loaded(std::slice::from_ref(&label))
                .unwrap()
                .contains(&label)
        );
        // Unchanged and loaded: nothing is reloaded.
        std::fs::remove_file(d.path().join("calls")).unwrap();
        l.load(&label, Path::new("/agents"), false, WAIT).unwrap();
        assert_eq!(calls(d.path()), ["print gui/501/local.automations.x"]);
        // Reinstalling a loaded job boots it out and waits until it is gone.
        std::fs::remove_file(d.path().join("calls")).unwrap();
        l.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        assert_eq!(
            calls(d.path()),
            [
                "enable gui/501/local.automations.x",
                "bootout gui/501/local.automations.x",
                "print gui/501/local.automations.x",
                "bootstrap gui/501 /agents/local.automations.x.plist",
                "print gui/501/local.automations.x",
            ]
        );
    }

    /// Regression: `loaded` read the legacy `launchctl list`, which answers for the caller's own
    /// domain (wrong over SSH). Here `list` claims the job is loaded; `print` says it is not.
    #[test]
    fn loaded_comes_from_print_never_from_list() {
        let (d, l, label) = setup();
        assert!(l.loaded(std::slice::from_ref(&label)).unwrap().is_empty());
        assert_eq!(calls(d.path()), ["print gui/501/local.automations.x"]);
        assert_eq!(count(d.path(), "list"), 0);
        // Any other answer of print is an error, never "not loaded".
        std::fs::write(d.path().join("fail-print"), "5\n").unwrap();
        assert_eq!(
            l.loaded(std::slice::from_ref(&label)).unwrap_err().code,
            Some(5)
        );
    }

    #[test]
    fn bootout_36_means_still_stopping_and_is_polled_until_gone() {
        let (d, l, label) = setup();
        l.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        std::fs::remove_file(d.path().join("calls")).unwrap();
        // Booting out answers 36, and the job stays loaded for three more looks.
        std::fs::write(d.path().join("stopping"), "3\n").unwrap();
        l.unload(&label, Path::new("/agents"), WAIT).unwrap();
        let c = calls(d.path());
        assert_eq!(c[0], "bootout gui/501/local.automations.x");
        assert_eq!(count(d.path(), "print"), 4, "{c:?}");
        assert!(!d.path().join("loaded").exists());
        // Still loaded when the wait is over: an error, so its files stay.
        l.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        std::fs::write(d.path().join("stopping"), "1000000\n").unwrap();
        let e = l
            .unload(&label, Path::new("/agents"), Duration::from_millis(50))
            .unwrap_err();
        assert!(e.to_string().contains("still loaded"), "{e}");
    }

    #[test]
    fn bootstrap_retries_5_and_37_with_backoff_until_it_succeeds() {
        let (d, l, label) = setup();
        std::fs::write(d.path().join("fail-bootstrap"), "5\n37\n5\n5\n37\n5\n").unwrap();
        let t0 = Instant::now();
        l.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(15));
        assert_eq!(count(d.path(), "bootstrap"), 7);
    }

    #[test]
    fn bootstrap_gives_up_when_the_retry_time_is_over_and_at_once_on_other_codes() {
        let (d, mut l, label) = setup();
        l.retry_for = Duration::from_millis(40);
        std::fs::write(d.path().join("fail-bootstrap"), "5\n".repeat(1000)).unwrap();
        let e = l
            .load(&label, Path::new("/agents"), true, WAIT)
            .unwrap_err();
        assert_eq!(e.code, Some(5));
        assert!(
            e.to_string().contains("simulated bootstrap failure 5"),
            "{e}"
        );
        let n = count(d.path(), "bootstrap");
        assert!((2..1000).contains(&n), "{n} attempts");
        let (d, l, label) = setup();
        std::fs::write(d.path().join("fail-bootstrap"), "1\n").unwrap();
        assert_eq!(
            l.load(&label, Path::new("/agents"), true, WAIT)
                .unwrap_err()
                .code,
            Some(1)
        );
        assert_eq!(count(d.path(), "bootstrap"), 1);
    }

    #[test]
    fn bootout_tolerates_3_and_113_but_not_others() {
        let (d, l, label) = setup();
        for code in ["3", "113"] {
            std::fs::write(d.path().join("fail-bootout"), format!("{code}\n")).unwrap();
            l.unload(&label, Path::new("/agents"), WAIT).unwrap();
        }
        std::fs::write(d.path().join("fail-bootout"), "1\n").unwrap();
        assert_eq!(
            l.unload(&label, Path::new("/agents"), WAIT)
                .unwrap_err()
                .code,
            Some(1)
        );
    }

    /// A launchd install of `x` that must fail: its settings, definition and error.
    fn failed_install(
        sb: &Sandbox,
        l: &Launchd,
    ) -> (Settings, automations::definition::Definition, String) {
        let (s, def) = launchd_install(sb);
        let bin = stable_bin(&sb.path("bin"));
        let plan = automations::install::plan_install(&s, &def, &bin, l).unwrap();
        let e = format!(
            "{:#}",
            automations::install::apply_install(&s, &plan, l).unwrap_err()
        );
        (s, def, e)
    }

    /// Settings and the definition of `x` (daily) for a launchd install in a sandbox.
    fn launchd_install(sb: &Sandbox) -> (Settings, automations::definition::Definition) {
        sb.definition(
            "x",
            "name = \"x\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"08:00\"\n",
        );
        let os = OsFacts::new(sb.home.clone(), sb.root.clone(), Manager::Launchd, vec![]);
        let flags = Overrides {
            root: Some(sb.root.clone()),
            data_root: Some(sb.data.clone()),
            ..Overrides::default()
        };
        let s = Settings::resolve(&flags, &os).unwrap();
        let def = automations::definition::load_one(
            &s.definitions_dir(),
            &Name::new("x").unwrap(),
            &automations::definition::Checks {
                home: sb.home.clone(),
                data_root: sb.data.clone(),
                units_dir: "/nonexistent-units".into(),
            },
        )
        .unwrap();
        (s, def)
    }

    #[test]
    fn no_gui_session_says_log_in_at_the_screen_and_writes_nothing() {
        let (d, l, _) = setup();
        std::fs::write(d.path().join("no-gui"), "").unwrap();
        let sb = Sandbox::new();
        let (_, _, e) = failed_install(&sb, &l);
        assert!(e.contains("log in at the Mac's screen"), "{e}");
        assert!(matches!(
            l.preflight(),
            Err(PreflightError::NoGuiSession { uid: 501 })
        ));
        let agents = sb.home.join("Library/LaunchAgents");
        assert!(
            !agents.join("local.automations.x.plist").exists(),
            "a plist was written"
        );
        assert!(!sb.data.join("state/installed/x.json").exists());
        assert_eq!(count(d.path(), "bootstrap") + count(d.path(), "enable"), 0);
    }

    #[test]
    fn root_is_refused_before_anything_is_asked_or_written() {
        let (d, l, _) = setup_uid(0);
        assert!(matches!(l.preflight(), Err(PreflightError::Root)));
        assert!(calls(d.path()).is_empty(), "launchctl was not even asked");
        let sb = Sandbox::new();
        let (s, def, e) = failed_install(&sb, &l);
        assert!(e.contains("without sudo"), "{e}");
        assert!(
            !sb.home
                .join("Library/LaunchAgents/local.automations.x.plist")
                .exists()
        );
        let plan = automations::install::plan_uninstall(&s, &def.name, &l).unwrap();
        assert!(automations::install::apply_uninstall(&s, &plan, &l).is_err());
    }

    #[test]
    fn install_rolls_back_when_bootstrap_keeps_failing() {
        let (d, mut l, _) = setup();
        l.retry_for = Duration::from_millis(20);
        let sb = Sandbox::new();
        let (s, def) = launchd_install(&sb);
        let checks = automations::definition::Checks {
            home: sb.home.clone(),
            data_root: sb.data.clone(),
            units_dir: "/nonexistent-units".into(),
        };
        let bin = stable_bin(&sb.path("bin"));
        let agents = sb.home.join("Library/LaunchAgents");
        std::fs::create_dir_all(&agents).unwrap();
        let other = agents.join("com.example.other.plist");
        std::fs::write(&other, "not ours").unwrap();
        // A first install whose bootstrap keeps failing leaves nothing behind: no plist, no
        // record, and the job taken down again.
        std::fs::write(d.path().join("refuse-if"), "local.automations.x").unwrap();
        let plan = automations::install::plan_install(&s, &def, &bin, &l).unwrap();
        assert!(automations::install::apply_install(&s, &plan, &l).is_err());
        std::fs::remove_file(d.path().join("refuse-if")).unwrap();
        assert!(!agents.join("local.automations.x.plist").exists());
        assert!(
            automations::state::State::new(&s.data_root)
                .install_record(&def.name)
                .unwrap()
                .is_none()
        );
        let c = calls(d.path());
        let last_bootstrap = c.iter().rposition(|x| x.starts_with("bootstrap")).unwrap();
        assert!(
            c[last_bootstrap..].iter().any(|x| x.starts_with("bootout")),
            "{c:?}"
        );
        // A first install succeeds.
        let plan = automations::install::plan_install(&s, &def, &bin, &l).unwrap();
        automations::install::apply_install(&s, &plan, &l).unwrap();
        let plist = agents.join("local.automations.x.plist");
        let before = std::fs::read(&plist).unwrap();
        let record = automations::state::State::new(&s.data_root)
            .install_record(&def.name)
            .unwrap()
            .unwrap();
        assert!(sb.data.join("launchd").is_dir());
        // The definition changes, and launchd refuses the new job every time.
        sb.definition(
            "x",
            "name = \"x\"\ncommand = [\"true\"]\n[schedule]\ndaily_at = \"09:00\"\n",
        );
        let def =
            automations::definition::load_one(&s.definitions_dir(), &def.name, &checks).unwrap();
        let plan = automations::install::plan_install(&s, &def, &bin, &l).unwrap();
        // launchd refuses the new job (Hour 9) every time, but takes the previous one back.
        std::fs::write(d.path().join("refuse-if"), "<integer>9</integer>").unwrap();
        let e = automations::install::apply_install(&s, &plan, &l).unwrap_err();
        let msg = automations::exit::chain_text(&e);
        assert!(
            msg.contains("rolled back") && msg.contains("simulated bootstrap failure 5"),
            "{msg}"
        );
        assert_eq!(
            std::fs::read(&plist).unwrap(),
            before,
            "previous plist restored"
        );
        assert_eq!(
            automations::state::State::new(&s.data_root)
                .install_record(&def.name)
                .unwrap()
                .unwrap(),
            record
        );
        assert_eq!(std::fs::read(&other).unwrap(), b"not ours");
        // The rollback loaded the previous job again.
        assert!(calls(d.path()).last().unwrap().starts_with("print"));
        assert!(d.path().join("loaded").exists());
    }
}

/// A fake `schtasks` that records every call and keeps the registered tasks' paths in `tasks`:
/// `/Create /TN P … ` adds P (unless `refuse-create` exists), `/Delete /TN P /F` removes it or
/// fails with 1 as schtasks does for a task that is not there, `/Query /FO CSV /NH` lists every
/// task as schtasks does (one quoted row each, another user's task among them). `fail-query`
/// makes the listing fail; `keep-on-delete` makes a delete fail while the task stays.
fn fake_schtasks(dir: &Path) -> PathBuf {
    let path = dir.join("schtasks");
    write_executable(
        &path,
        r#"#!/bin/sh
dir=$(dirname "$0")
printf '%s\n' "$*" >> "$dir/calls"
touch "$dir/tasks"
case "$1" in
    /Query)
        [ -e "$dir/fail-query" ] && { echo "ERROR: Access is denied." >&2; exit 1; }
        printf '%s\n' '"\Microsoft\Windows\Defrag\ScheduledDefrag","N/A","Ready"' \
            '"\local\automations\xy","12/7/2026 9:00:00 AM","Ready"'
        while read -r t; do printf '"%s","12/7/2026 9:00:00 AM","Ready"\n' "$t"; done < "$dir/tasks" ;;
    /Create)
        [ -e "$dir/refuse-create" ] && { echo "ERROR: The task XML is malformed." >&2; exit 1; }
        grep -qxF "$3" "$dir/tasks" || printf '%s\n' "$3" >> "$dir/tasks" ;;
    /Delete)
        grep -qxF "$3" "$dir/tasks" || { echo "ERROR: The system cannot find the file specified." >&2; exit 1; }
        [ -e "$dir/keep-on-delete" ] && { echo "ERROR: Access is denied." >&2; exit 1; }
        grep -vxF "$3" "$dir/tasks" > "$dir/tasks.new"; mv "$dir/tasks.new" "$dir/tasks" ;;
    /Run)
        grep -qxF "$3" "$dir/tasks" || { echo "ERROR: The system cannot find the file specified." >&2; exit 1; } ;;
esac
exit 0
"#,
    );
    path
}

mod task_scheduler {
    use super::*;
    use automations::names::{Label, Name, Namespace};
    use automations::service::task_scheduler::TaskScheduler;
    use automations::service::{PreflightError, ServiceManager};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(5);
    const QUERY: &str = "/Query /FO CSV /NH";

    fn setup() -> (tempfile::TempDir, TaskScheduler, Label) {
        let d = tempfile::tempdir().unwrap();
        let fake = fake_schtasks(d.path());
        let label = Label::new(
            &Namespace::new("automations").unwrap(),
            &Name::new("x").unwrap(),
        );
        (d, TaskScheduler::new(fake.to_str().unwrap()), label)
    }

    #[test]
    fn install_sequence_is_pinned_and_read_back_from_the_listing() {
        let (d, t, label) = setup();
        let one = std::slice::from_ref(&label);
        // Another task whose path starts like this one's is not it.
        assert!(t.loaded(one).unwrap().is_empty());
        std::fs::remove_file(d.path().join("calls")).unwrap();
        t.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        assert_eq!(
            calls(d.path()),
            [
                "/Create /TN \\local\\automations\\x /XML /agents/local.automations.x.xml /F",
                QUERY,
            ]
        );
        assert!(t.loaded(one).unwrap().contains(&label));
        // Unchanged and registered: nothing is registered again.
        std::fs::remove_file(d.path().join("calls")).unwrap();
        t.load(&label, Path::new("/agents"), false, WAIT).unwrap();
        assert_eq!(calls(d.path()), [QUERY]);
        // A task schtasks takes but does not list is an error, never "installed".
        std::fs::write(d.path().join("tasks"), "").unwrap();
        std::fs::write(d.path().join("refuse-create"), "").unwrap();
        let e = t
            .load(&label, Path::new("/agents"), true, WAIT)
            .unwrap_err();
        assert_eq!(e.code, Some(1), "{e}");
        assert!(e.to_string().contains("malformed"), "{e}");
    }

    #[test]
    fn a_task_already_gone_is_uninstalled_and_one_that_stays_is_an_error() {
        let (d, t, label) = setup();
        // Never registered: the delete fails, the listing shows it absent, so it is gone.
        t.unload(&label, Path::new("/agents"), WAIT).unwrap();
        assert_eq!(
            calls(d.path()),
            ["/Delete /TN \\local\\automations\\x /F", QUERY]
        );
        t.load(&label, Path::new("/agents"), true, WAIT).unwrap();
        t.start(&label).unwrap();
        // A delete that fails while the task is still listed: an error, so its file stays.
        std::fs::write(d.path().join("keep-on-delete"), "").unwrap();
        let e = t.unload(&label, Path::new("/agents"), WAIT).unwrap_err();
        assert!(e.to_string().contains("Access is denied"), "{e}");
        std::fs::remove_file(d.path().join("keep-on-delete")).unwrap();
        t.unload(&label, Path::new("/agents"), WAIT).unwrap();
        assert!(t.loaded(std::slice::from_ref(&label)).unwrap().is_empty());
        assert!(t.start(&label).is_err(), "a deleted task does not start");
    }

    #[test]
    fn a_listing_that_fails_is_a_manager_that_does_not_answer() {
        let (d, t, label) = setup();
        t.preflight().unwrap();
        std::fs::write(d.path().join("fail-query"), "").unwrap();
        assert!(matches!(
            t.preflight().unwrap_err(),
            PreflightError::Unreachable(_)
        ));
        assert!(t.loaded(std::slice::from_ref(&label)).is_err());
        assert!(t.reachable().is_err());
    }
}
