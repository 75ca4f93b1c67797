//! The exit codes table of docs/commands.md, one case per example given there (a FIFO
//! `notify.toml` exited 1 and a FIFO `health.toml` 2 where 3 was documented, `result --headline
//! zz` and too many facts exited 1 where other bad facts exit 2, a port in use exited 1, `runs -n
//! 0` printed "No runs yet", a data root that is a regular file was "a special file").

use std::process::Output;

use crate::harness::*;

/// One row's example: what to set up, what to run, the code and a piece of what it says.
struct Case {
    what: &'static str,
    code: i32,
    says: &'static str,
    run: fn(&mut Sandbox) -> Output,
}

fn fifo(path: &std::path::Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// `automations result ARGS` as a command inside a run sees it.
fn result(sb: &mut Sandbox, args: &[&str]) -> Output {
    let file = sb.path("result.json");
    sb.cmd(std::iter::once("result").chain(args.iter().copied()))
        .env("AUTOMATION_RESULT", &file)
        .output()
        .unwrap()
}

const CASES: &[Case] = &[
    Case {
        what: "a run that succeeded",
        code: 0,
        says: "t: ok",
        run: |sb| {
            sb.shell_definition("t", "exit 0", "");
            sb.run(["run", "t"])
        },
    },
    Case {
        what: "a scheduled firing skipped under a systemd service that maps 75 to success",
        code: 75,
        says: "skipped (paused: x); `automations resume t` lets it run again",
        run: |sb| {
            sb.shell_definition("t", "exit 0", "[schedule]\nevery_minutes = 5\n");
            sb.install_record("t", chrono::Utc::now());
            sb.run(["pause", "t", "--reason", "x"]);
            let mut c = sb.cmd(["run", "t", "--trigger", "schedule"]);
            c.env("AUTOMATIONS_SKIP_STATUS", "75");
            c.output().unwrap()
        },
    },
    Case {
        what: "a skipped run (paused)",
        code: 0,
        says: "skipped",
        run: |sb| {
            sb.shell_definition("t", "exit 0", "");
            sb.run(["pause", "t", "--reason", "x"]);
            sb.run(["run", "t"])
        },
    },
    Case {
        what: "a run that failed",
        code: 1,
        says: "failed",
        run: |sb| {
            sb.shell_definition("t", "exit 4", "");
            sb.run(["run", "t"])
        },
    },
    Case {
        what: "log verify found a break",
        code: 1,
        says: "BROKEN",
        run: |sb| {
            sb.shell_definition("t", "exit 0", "");
            sb.run(["run", "t"]);
            let log = sb.data.join("runs.jsonl");
            let text = std::fs::read_to_string(&log)
                .unwrap()
                .replace("manual", "schedule");
            std::fs::write(&log, text).unwrap();
            sb.run(["log", "verify"])
        },
    },
    Case {
        what: "an unknown flag",
        code: 2,
        says: "--frobnicate",
        run: |sb| sb.run(["list", "--frobnicate"]),
    },
    Case {
        what: "runs -n 0",
        code: 2,
        says: "0 is not in 1..",
        run: |sb| sb.run(["runs", "-n", "0"]),
    },
    Case {
        what: "an invalid definition",
        code: 2,
        says: "bad.toml",
        run: |sb| {
            sb.definition("bad", "name = \"bad\"\n");
            sb.run(["validate"])
        },
    },
    Case {
        what: "an unknown run id",
        code: 2,
        says: "no run",
        run: |sb| sb.run(["show", "20990101"]),
    },
    Case {
        what: "result: a bad fact",
        code: 2,
        says: "is not name=count",
        run: |sb| result(sb, &["beats"]),
    },
    Case {
        what: "result: --headline not one of the facts",
        code: 2,
        says: "--headline zz is not one of the facts",
        run: |sb| result(sb, &["a=1", "--headline", "zz"]),
    },
    Case {
        what: "result: more than 32 facts",
        code: 2,
        says: "33 facts; at most 32",
        run: |sb| {
            let facts: Vec<String> = (0..33).map(|i| format!("f{i}=1")).collect();
            let facts: Vec<&str> = facts.iter().map(String::as_str).collect();
            result(sb, &facts)
        },
    },
    Case {
        what: "health.toml whose contents are invalid",
        code: 2,
        says: "health.toml",
        run: |sb| {
            std::fs::create_dir_all(&sb.data).unwrap();
            use std::os::unix::fs::PermissionsExt;
            let file = sb.data.join("health.toml");
            std::fs::write(&file, "[defaults]\nwindow = \"x\"\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
            sb.run(["health"])
        },
    },
    Case {
        what: "no repository root",
        code: 3,
        says: "no repository root",
        run: |sb| {
            sb.cmd(["list"])
                .env_remove("AUTOMATIONS_ROOT")
                .current_dir("/")
                .output()
                .unwrap()
        },
    },
    Case {
        what: "a relative HOME",
        code: 3,
        says: "must be an absolute path",
        run: |sb| sb.cmd(["list"]).env("HOME", "rel").output().unwrap(),
    },
    Case {
        what: "a data root that is a regular file",
        code: 3,
        says: "(a regular file is in the way)",
        run: |sb| {
            std::fs::write(&sb.data, "x").unwrap();
            sb.run(["list"])
        },
    },
    Case {
        what: "a data root writable by others",
        code: 3,
        says: "chmod 700",
        run: |sb| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::create_dir_all(&sb.data).unwrap();
            std::fs::set_permissions(&sb.data, std::fs::Permissions::from_mode(0o777)).unwrap();
            sb.run(["list"])
        },
    },
    Case {
        what: "a FIFO health.toml",
        code: 3,
        says: "health.toml",
        run: |sb| {
            fifo(&sb.data.join("health.toml"));
            sb.run(["health"])
        },
    },
    Case {
        what: "a FIFO notify.toml",
        code: 3,
        says: "notify.toml",
        run: |sb| {
            fifo(&sb.data.join("notify.toml"));
            sb.run(["notify", "look"])
        },
    },
    Case {
        what: "dashboard --port already in use",
        code: 3,
        says: "cannot listen on 127.0.0.1:",
        run: |sb| {
            let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = taken.local_addr().unwrap().port().to_string();
            sb.run(["dashboard", "--no-open", "--port", &port])
        },
    },
];

#[test]
fn every_documented_exit_code_holds() {
    let mut wrong = Vec::new();
    for case in CASES {
        let mut sb = Sandbox::new();
        let o = (case.run)(&mut sb);
        let said = format!("{}{}", stdout(&o), stderr(&o));
        if o.status.code() != Some(case.code) || !said.contains(case.says) {
            wrong.push(format!(
                "{}: exit {:?} (want {}), said {said:?} (want {:?})",
                case.what,
                o.status.code(),
                case.code,
                case.says
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every code of the table has a case.
    for code in [0, 1, 2, 3, 75] {
        assert!(CASES.iter().any(|c| c.code == code), "no case for {code}");
    }
}

/// The table in docs/commands.md names every code this test checks, and the test every code the
/// table names but `http`'s (tested in http.rs).
#[test]
fn the_exit_codes_table_is_the_one_tested() {
    let doc = std::fs::read_to_string(repo_root().join("docs/commands.md")).unwrap();
    let table = doc
        .split("## Exit codes")
        .nth(1)
        .expect("docs/commands.md has an Exit codes section");
    for code in [
        "| 0 |",
        "| 1 |",
        "| 2 |",
        "| 3 |",
        "| 75 |",
        "| 7, 22, 56, 63 |",
    ] {
        assert!(table.contains(code), "the table lacks the row {code}");
    }
    assert!(table.contains("every_documented_exit_code_holds"));
}
