//! Policies for a shared machine (docs/policies.md) against a real, private systemd user manager:
//! lock groups, `overlap = "queue"` and `"replace"`, `[limits]` and `[sandbox]`.

use crate::harness::*;
use crate::systemd::UserManager;
use crate::triggers::wait_until;

/// The `kind` events of `name`.
fn of(sb: &Sandbox, kind: &str, name: &str) -> Vec<serde_json::Value> {
    sb.events(kind)
        .into_iter()
        .filter(|e| e["name"] == name)
        .collect()
}

fn service(name: &str) -> String {
    format!("local.automations.{name}.service")
}

/// A sandbox with a private manager, these definitions installed (one `y`); `None` when the
/// manager cannot run here (said SKIPPED by `UserManager::start`).
fn installed(test: &str, defs: &[(&str, String)]) -> Option<(Sandbox, UserManager)> {
    let mut sb = Sandbox::new();
    sb.use_stable_bin();
    let m = UserManager::start(&mut sb, test)?;
    std::fs::create_dir(sb.root.join("idle")).unwrap();
    for (name, toml) in defs {
        sb.definition(name, toml);
    }
    let mut args = vec!["install".to_owned()];
    args.extend(defs.iter().map(|(n, _)| n.to_string()));
    let r = run_on_pty(sb.cmd(&args), "Type y to confirm", "y");
    assert_eq!(r.code, Some(0), "{}", r.output);
    Some((sb, m))
}

/// What makes a definition installable without anything starting it but the test: a watch on a
/// folder nobody touches (`{root}/idle`, made by [`installed`]).
const NEVER: &str = "[trigger]\npaths = [\"{root}/idle\"]\n";

/// A definition in lock group `disk` with `overlap`, running `command`.
fn grouped(name: &str, overlap: &str, command: &str) -> String {
    format!(
        "name = \"{name}\"\ncommand = {command}\noverlap = \"{overlap}\"\nlock = \"disk\"\ntimeout_seconds = 120\n{NEVER}"
    )
}

/// A command that runs until the file `{root}/go` exists.
const UNTIL_GO: &str = "[\"sh\", \"-c\", \"while [ ! -e {root}/go ]; do sleep 0.05; done\"]";

/// `(started, ended)` of every finished run of `name`, from its `finished` lines.
fn intervals(sb: &Sandbox, name: &str) -> Vec<(String, String)> {
    of(sb, "finished", name)
        .iter()
        .map(|f| {
            (
                f["started_at"].as_str().unwrap().to_owned(),
                f["at"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn two_automations_sharing_a_lock_never_overlap_over_20_rounds() {
    let test = "two_automations_sharing_a_lock_never_overlap_over_20_rounds";
    let work = "[\"sh\", \"-c\", \"sleep 0.1\"]";
    let Some((sb, m)) = installed(
        test,
        &[
            ("backup", grouped("backup", "queue", work)),
            ("repack", grouped("repack", "queue", work)),
        ],
    ) else {
        return;
    };
    const ROUNDS: usize = 20;
    for round in 1..=ROUNDS {
        let o = m.systemctl(&[
            "start",
            "--no-block",
            &service("backup"),
            &service("repack"),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        wait_until(&sb, "both runs of the round", |sb| {
            of(sb, "finished", "backup").len() == round
                && of(sb, "finished", "repack").len() == round
        });
        m.wait_inactive(&service("backup"));
        m.wait_inactive(&service("repack"));
    }
    // Every firing ran (queued, none skipped), and no two runs were ever under way together.
    assert!(
        sb.events("skipped").is_empty(),
        "{:#?}",
        sb.events("skipped")
    );
    let mut all = intervals(&sb, "backup");
    all.extend(intervals(&sb, "repack"));
    assert_eq!(all.len(), 2 * ROUNDS);
    assert!(
        of(&sb, "finished", "backup")
            .iter()
            .all(|f| f["outcome"] == "ok")
    );
    all.sort();
    for pair in all.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "two runs of the lock group overlapped: {pair:?}"
        );
    }
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn queue_waits_for_the_running_one_and_keeps_one_waiting() {
    let test = "queue_waits_for_the_running_one_and_keeps_one_waiting";
    let Some((sb, m)) = installed(
        test,
        &[
            ("first", grouped("first", "skip", UNTIL_GO)),
            ("second", grouped("second", "queue", "[\"true\"]")),
        ],
    ) else {
        return;
    };
    m.systemctl(&["start", "--no-block", &service("first")]);
    wait_until(&sb, "first's start", |sb| {
        !of(sb, "started", "first").is_empty()
    });
    m.systemctl(&["start", "--no-block", &service("second")]);
    wait_until(&sb, "second waiting", |sb| {
        sb.data.join("locks/second.queue").exists()
    });
    // A person's run of second meanwhile: only one firing waits, the other is skipped.
    let mut person = sb.cmd(["run", "second"]);
    let person = person
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(&sb, "the second firing's skip", |sb| {
        !of(sb, "skipped", "second").is_empty()
    });
    let skipped = of(&sb, "skipped", "second");
    assert_eq!(skipped.len(), 1, "{skipped:#?}");
    assert_eq!(skipped[0]["reason"], "already_queued");
    assert!(
        of(&sb, "started", "second").is_empty(),
        "second ran beside first"
    );
    std::fs::write(sb.root.join("go"), "").unwrap();
    wait_until(&sb, "second's run", |sb| {
        !of(sb, "finished", "second").is_empty()
    });
    let out = person.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    m.wait_inactive(&service("second"));
    let first = &intervals(&sb, "first")[0];
    let second = intervals(&sb, "second");
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(
        first.1 <= second[0].0,
        "second started before first ended: {first:?} {second:?}"
    );
    assert_eq!(of(&sb, "finished", "second")[0]["outcome"], "ok");
    let runs = stdout(&sb.run(["runs", "second"]));
    assert!(
        runs.contains("skipped (already_queued, disk held by first)"),
        "{runs}"
    );
    // Once it ran, the place to wait in is free for the next firing.
    for lock in ["locks/second.queue", "locks/groups/disk.lock"] {
        let holder = automations::locks::plain_holder(&sb.data.join(lock));
        assert!(holder.is_none(), "{lock} is still held: {holder:?}");
    }
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn replace_stops_the_running_one_records_why_and_runs() {
    let test = "replace_stops_the_running_one_records_why_and_runs";
    let Some((sb, m)) = installed(
        test,
        &[
            ("stale", grouped("stale", "skip", UNTIL_GO)),
            ("fresh", grouped("fresh", "replace", "[\"true\"]")),
            ("polite", grouped("polite", "skip", "[\"true\"]")),
        ],
    ) else {
        return;
    };
    m.systemctl(&["start", "--no-block", &service("stale")]);
    wait_until(&sb, "stale's start", |sb| {
        !of(sb, "started", "stale").is_empty()
    });
    // One that skips a busy group says who held it.
    let o = sb.run(["run", "polite"]);
    assert_code(&o, 0);
    let skip = &of(&sb, "skipped", "polite")[0];
    assert_eq!(skip["reason"], "already_running");
    assert_eq!(
        skip["held_by"],
        serde_json::json!({"lock": "disk", "name": "stale"})
    );
    assert!(
        stdout(&o).contains("lock group \"disk\" held by stale"),
        "{}",
        stdout(&o)
    );
    let runs = stdout(&sb.run(["runs", "polite"]));
    assert!(
        runs.contains("skipped (already_running, disk held by stale)"),
        "{runs}"
    );

    m.systemctl(&["start", "--no-block", &service("fresh")]);
    wait_until(&sb, "fresh's run", |sb| {
        !of(sb, "finished", "fresh").is_empty()
    });
    m.wait_inactive(&service("fresh"));
    let stale = &of(&sb, "finished", "stale")[0];
    let fresh = &of(&sb, "finished", "fresh")[0];
    assert_eq!(stale["outcome"], "stopped");
    assert_eq!(stale["error"]["class"], "replaced");
    assert_eq!(stale["replaced_by"], fresh["run"]);
    assert_eq!(fresh["outcome"], "ok");
    assert!(stale["at"].as_str() <= fresh["started_at"].as_str());
    let show = stdout(&sb.run(["show", stale["run"].as_str().unwrap()]));
    assert!(
        show.contains(&format!(
            "replaced  by the run {}",
            fresh["run"].as_str().unwrap()
        )) && show.contains("error     replaced: stopped to make way for a firing of fresh"),
        "{show}"
    );
    // No process of the stopped run is left, nor the note that named its replacement.
    assert_eq!(stale["leftover_processes"], 0);
    let notes = std::fs::read_dir(sb.data.join("state/replaced"))
        .unwrap()
        .count();
    assert_eq!(notes, 0, "a replace note was left behind");
}

/// Whether the manager's cgroups can enforce `MemoryMax=`: its cgroup v2 group offers the memory
/// controller, or (a hybrid hierarchy) the v1 memory hierarchy holds its group.
fn memory_enforced(m: &UserManager) -> Result<(), String> {
    let group = stdout(&m.systemctl(&["show", "-p", "ControlGroup", "--value"]))
        .trim()
        .trim_start_matches('/')
        .to_owned();
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory").join(&group);
    if v1.join("memory.limit_in_bytes").exists() {
        return Ok(());
    }
    let mut seen = Vec::new();
    for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let at = std::path::Path::new(mount)
            .join(&group)
            .join("cgroup.controllers");
        if let Ok(c) = std::fs::read_to_string(&at) {
            if c.split_whitespace().any(|w| w == "memory") {
                return Ok(());
            }
            seen.push(format!("{} offers [{}]", at.display(), c.trim()));
        }
    }
    Err(format!(
        "no memory controller for its group {group}: not in the v1 memory hierarchy, and {}",
        if seen.is_empty() {
            "no cgroup v2 group".to_owned()
        } else {
            seen.join("; ")
        }
    ))
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_job_past_memory_max_is_recorded_out_of_memory() {
    let test = "a_job_past_memory_max_is_recorded_out_of_memory";
    if crate::units::which("python3").is_none() {
        return skip(test, "python3 is missing");
    }
    // 300 MiB, touched, under a 64 MiB limit.
    let hog = "[\"python3\", \"-c\", \"b = bytearray(300 * 1024 * 1024); print(len(b))\"]";
    let toml = format!("name = \"hog\"\ncommand = {hog}\n[limits]\nmemory_max = \"64M\"\n{NEVER}");
    let Some((sb, m)) = installed(test, &[("hog", toml)]) else {
        return;
    };
    assert_eq!(m.prop(&service("hog"), "MemoryMax"), "67108864");
    assert_eq!(m.prop(&service("hog"), "OOMPolicy"), "continue");
    match memory_enforced(&m) {
        Ok(()) => {
            // Three firings, each killed by the kernel: health names why.
            for _ in 0..3 {
                m.systemctl(&["start", &service("hog")]);
            }
            let ends = of(&sb, "finished", "hog");
            assert_eq!(ends.len(), 3, "{ends:#?}");
            for f in &ends {
                assert_eq!(f["outcome"], "failed", "{f:#}");
                assert_eq!(f["error"]["class"], "out_of_memory", "{f:#}");
                assert!(
                    f["error"]["detail"]
                        .as_str()
                        .unwrap()
                        .starts_with("killed by the kernel")
                );
            }
            let health = stdout(&sb.run(["health", "hog"]));
            assert!(
                health.contains("3 failures in a row (out of memory (memory_max))"),
                "{health}"
            );
        }
        Err(why) => {
            // The unit says MemoryMax=, but nothing here enforces it: the hog gets its memory.
            eprintln!(
                "NOTE {test}: this machine's user manager cannot enforce MemoryMax ({why}); testing the unit's rendering and the runner's own rlimit path instead"
            );
            m.systemctl(&["start", &service("hog")]);
            let f = &of(&sb, "finished", "hog")[0];
            assert_eq!(
                f["outcome"], "ok",
                "the manager enforced MemoryMax after all: {f:#}"
            );
        }
    }
    // A person's run: the runner applies the limit itself (an address-space rlimit).
    let o = sb.run(["run", "hog"]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("limits applied to this run: memory_max 64M per process"),
        "{}",
        stderr(&o)
    );
    let f = of(&sb, "finished", "hog").pop().unwrap();
    assert_eq!(f["trigger"], "manual");
    assert_eq!(f["error"]["class"], "out_of_memory", "{f:#}");
    assert!(stdout(&sb.run(["show", "hog"])).contains(
        "error     out_of_memory: could not get more memory: its tree reached memory_max (64M)"
    ));
}

#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn a_strict_sandbox_writes_only_where_it_may() {
    let test = "a_strict_sandbox_writes_only_where_it_may";
    // Not under /tmp, which the sandbox's PrivateTmp= hides from the service (root only: the
    // private manager's own check says SKIPPED elsewhere).
    let mut sb = if nix::unistd::getuid().is_root() {
        Sandbox::outside_tmp()
    } else {
        Sandbox::new()
    };
    sb.use_stable_bin();
    let Some(m) = UserManager::start(&mut sb, test) else {
        return;
    };
    std::fs::create_dir_all(sb.home.join("Backups")).unwrap();
    std::fs::create_dir(sb.root.join("idle")).unwrap();
    let script = sb.root.join("scripts/boxed.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nset -e\necho kept > \"$HOME/Backups/ok\"\necho in-scratch > \"$TMPDIR/x\"\necho lost > \"$HOME/elsewhere\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    sb.definition(
        "boxed",
        &format!(
            "name = \"boxed\"\ncommand = [\"scripts/boxed.sh\"]\nwrites = [\"~/Backups\"]\n[sandbox]\nlevel = \"strict\"\n{NEVER}"
        ),
    );
    let r = run_on_pty(sb.cmd(["install", "boxed"]), "Type y to confirm", "y");
    assert_eq!(r.code, Some(0), "{}", r.output);
    // install shows systemd-analyze security's exposure without and with the sandbox.
    let exposure = r
        .output
        .lines()
        .find(|l| l.contains("sandbox: exposure"))
        .unwrap_or_else(|| panic!("no exposure line: {}", r.output))
        .to_owned();
    // Then what the runner's confinement adds ("its command: Landlock ABI 7 and seccomp …").
    let (exposure, command) = exposure
        .split_once("; its command: ")
        .expect("the command's part");
    assert!(command.starts_with("Landlock ABI "), "{command}");
    let levels: Vec<f64> = exposure
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(levels.len(), 2, "{exposure}");
    assert!(
        levels[0] < levels[1],
        "the sandbox should lower the exposure: {exposure}"
    );
    assert_eq!(m.prop(&service("boxed"), "ProtectSystem"), "strict");
    m.systemctl(&["start", &service("boxed")]);
    let f = &of(&sb, "finished", "boxed").pop().unwrap_or_else(|| {
        let status = m.systemctl(&["status", "--no-pager", "-l", "-n", "30", &service("boxed")]);
        panic!("no run recorded: {}{}", stdout(&status), stderr(&status))
    });
    assert_eq!(f["outcome"], "failed", "{f:#}");
    assert!(
        f["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{f:#}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.home.join("Backups/ok")).unwrap(),
        "kept\n"
    );
    assert!(!sb.home.join("elsewhere").exists());
    // The runner itself still wrote its log, and doctor says the same exposure.
    assert_eq!(of(&sb, "started", "boxed").len(), 1);
    let doctor = stdout(&sb.run(["doctor"]));
    assert!(doctor.contains("sandbox: boxed: exposure"), "{doctor}");
}
