//! Steps 7–11 of a firing: the command's environment, the spawn of its program (a script runs
//! from the copy it was approved as), supervision of its whole tree, and what it left (output
//! tails, result facts, outside calls) turned into its `finished` event. Never fails: every
//! problem is an outcome.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::approval::{self, Prepared};
use super::fire::{Firing, started_on_disk};
use super::keeper::{self, Keeper};
use super::supervise::{self, Ending, Interrupt, Signals, Supervised};
use super::{env, result, run_marker, tree};
use crate::clock;
use crate::definition::{Definition, PLACEHOLDER_ROOT, PLACEHOLDER_SELF};
use crate::redact::Redactor;
use crate::runlog::{Dropped, ErrorInfo, Finished, Outcome, RunLog};
use crate::settings::Settings;

/// Steps 7–11: environment, spawn and supervise, result facts. Never fails: every problem is an
/// outcome in the returned `finished`.
///
/// Long because it is the firing's steps in the order docs/running.md gives, each a few lines that turn a failure into
/// an outcome; split up, the order would have to be read across functions.
pub(super) fn execute(
    firing: &Firing,
    log: &RunLog,
    Prepared { scratch, copy }: Prepared,
    (mut redactor, extra_env): (Redactor, Vec<(String, OsString)>),
    signals: &mut Signals,
    keeper: &mut Keeper,
) -> Finished {
    let Firing {
        settings: s,
        def,
        run_id,
        trigger,
        ..
    } = *firing;
    let fail =
        |class: &str, detail: String| failed_before_start(run_id, class, &detail, clock::now());
    if let Some(sig) = signals.stop_requested() {
        let mut f = fail(
            "stopped",
            format!("stopped by {sig} before the command started"),
        );
        f.outcome = Outcome::Stopped;
        return f;
    }
    let scratch = match scratch {
        Ok(sc) => sc,
        Err(e) => {
            return fail(
                "scratch",
                format!("cannot create the run's scratch folder: {e}"),
            );
        }
    };
    // The script runs from the copy its pin was taken of, never from the repository.
    let copy = match copy {
        Ok(c) => c,
        Err(why) => {
            let script = crate::pins::script_path(def, &s.root).unwrap_or_default();
            let rel = script.strip_prefix(&s.root).unwrap_or(&script).display();
            return fail(
                "spawn_failed",
                format!("cannot read {rel} to run it: {why}"),
            );
        }
    };
    let bin = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("automations"));
    let env_file = s.layout().env_file(def.name.as_str());
    // Every attempt of a firing carries the first one's id: the marker the keeper was split with.
    let vars = env::RunVars {
        run_id: firing.first_run,
        trigger: trigger.as_str(),
        result_file: &scratch.result(),
        http_log: &scratch.http_log(),
        tmpdir: &scratch.tmp(),
        bin: &bin,
        home: &s.home,
    };
    let mut command_env = match env::build(def, &vars, &env_file, &|k| std::env::var_os(k)) {
        Ok(e) => e,
        Err(e) => return fail("env_file", e.to_string()),
    };
    command_env.vars.extend(extra_env);
    for secret in &command_env.secrets {
        redactor.add(secret);
    }

    let mut argv = resolve_argv(&def.command, s, &bin);
    if let Some(program) = approval::program(&copy) {
        argv[0] = program.as_os_str().to_owned();
    }
    // The command runs in the root. The runner moves there itself instead of asking std to: every
    // path it still uses is absolute, and a Command without a working directory is spawned with
    // posix_spawn (a static glibc cannot look up posix_spawn_file_actions_addchdir_np), which
    // costs a fraction of a full fork of the runner.
    if let Err(e) = std::env::set_current_dir(&s.root) {
        return fail(
            "spawn_failed",
            format!("cannot enter the repository root {}: {e}", s.root.display()),
        );
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(command_env.vars.iter().map(|(k, v)| (k, v)));
    let subreaper = supervise::subreaper_wanted() && keeper::become_subreaper();
    // 5, done: `started` is on disk before the command can start. The keeper has been syncing it
    // since the split, while this process made all of the above.
    if let Err(unsynced) = started_on_disk(keeper, log) {
        return fail("log_sync", unsynced);
    }
    let sup = supervise::supervise(
        &mut cmd,
        Duration::from_secs(u64::from(def.timeout_seconds)),
        &redactor,
        signals,
        supervise::TreeSpec {
            subreaper,
            marker: run_marker(firing.first_run).into_bytes(),
            table: tree::system(),
        },
        &mut |group| {
            keeper.spawned(group);
            if let Some(p) = firing.pings {
                p.start();
            }
        },
    );
    // The whole tree is gone: the keeper has nothing left to guard (until another attempt runs;
    // it is told `done` when the firing's keeper handle is dropped).
    keeper.idle();

    // 11. Facts from the result file, and the HTTP log of the run's outside calls (docs/http.md),
    //     read strictly: a line the command could have forged is counted as invalid.
    let facts = result::read(&scratch.result());
    let mut finished = finish(run_id, def, &argv[0], sup, facts, &redactor);
    finished.http =
        crate::http::log::summarize(&scratch.http_log(), &|b| redactor.contains_secret(b))
            .map(Box::new);
    finished
}

/// Substitutes `{root}` and `{self}`, and anchors a relative program path at the root. A command
/// that is `{self}` itself runs this binary in this installation: the runner's `--root`,
/// `--data-root` and `--namespace` follow its arguments (global flags clap takes anywhere), so
/// `{self} notify look` looks at the same data root a unit's firing uses.
pub(super) fn resolve_argv(command: &[String], settings: &Settings, bin: &Path) -> Vec<OsString> {
    let root = &settings.root;
    let root_s = root.to_string_lossy();
    let bin_s = bin.to_string_lossy();
    let mut argv: Vec<OsString> = command
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            let a = arg
                .replace(PLACEHOLDER_ROOT, &root_s)
                .replace(PLACEHOLDER_SELF, &bin_s);
            if i == 0 && a.contains('/') && !a.starts_with('/') {
                root.join(a).into_os_string()
            } else {
                a.into()
            }
        })
        .collect();
    if command.first().is_some_and(|c| c == PLACEHOLDER_SELF) {
        argv.extend(settings.global_args());
    }
    argv
}

/// Turns what supervision saw into the `finished` event.
///
/// Long because it is one mapping: each way a run can end (exit, signal, deadline, stop, spawn
/// failure) to its outcome, class and redacted tails, field by field.
pub(super) fn finish(
    run_id: &str,
    def: &Definition,
    program: &OsString,
    sup: Supervised,
    facts: Result<result::Facts, result::ResultError>,
    redactor: &Redactor,
) -> Finished {
    let (exit_code, signal) = match &sup.ending {
        Ending::Exited(c) => (Some(*c), None),
        Ending::Signaled(s) => (None, Some(*s as i32)),
        Ending::NotStarted(_) => (None, None),
    };
    let timeout = def.timeout_seconds;
    let (mut outcome, mut error) = match (&sup.interrupt, &sup.ending) {
        (_, Ending::NotStarted(e)) => (
            Outcome::Failed,
            Some((
                "spawn_failed",
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )),
        ),
        (Some(Interrupt::Stop(sig)), _) => (
            Outcome::Stopped,
            Some(("stopped", format!("stopped by {sig}"))),
        ),
        (Some(Interrupt::Timeout), _) => (
            Outcome::Timeout,
            Some(("timeout", format!("timed out after {timeout} s"))),
        ),
        (None, Ending::Exited(0)) => (Outcome::Ok, None),
        (None, Ending::Exited(c)) => (
            Outcome::Failed,
            Some(("exit_status", format!("exited with {c}"))),
        ),
        (None, Ending::Signaled(s)) => {
            (Outcome::Failed, Some(("signal", format!("killed by {s}"))))
        }
    };
    if sup.unkillable > 0 && error.is_none() {
        outcome = Outcome::Failed;
        error = Some((
            "unkillable",
            format!("{} process(es) survived SIGKILL", sup.unkillable),
        ));
    }
    let facts = facts.and_then(|f| {
        if f.facts
            .keys()
            .any(|name| redactor.contains_secret(name.as_bytes()))
        {
            Err(result::ResultError("a fact name contains a secret".into()))
        } else {
            Ok(f)
        }
    });
    let (facts, headline) = match facts {
        Ok(f) => {
            let headline = f
                .headline
                .or_else(|| def.headline.as_ref().map(|h| h.to_string()))
                .filter(|h| f.facts.contains_key(h));
            (f.facts, headline)
        }
        Err(e) => {
            if outcome == Outcome::Ok {
                outcome = Outcome::Failed;
                error = Some(("result_invalid", e.0));
            }
            (Default::default(), None)
        }
    };
    Finished {
        run: run_id.to_owned(),
        outcome,
        exit_code,
        signal,
        duration_ms: sup.duration.as_millis() as u64,
        error: error.map(|(class, detail)| ErrorInfo {
            class: class.to_owned(),
            detail: redactor.scrub(&detail),
        }),
        stdout_tail: sup.stdout.0,
        stderr_tail: sup.stderr.0,
        dropped: Dropped {
            stdout: sup.stdout.1,
            stderr: sup.stderr.1,
        },
        facts,
        headline,
        http: None,
        leftover_processes: sup.leftover_processes,
        clock: clock::now(),
        trigger: None,
        started_at: None,
        attempt: None,
        first_run: None,
    }
}

/// A run that ended before its command started: failed, with its class and detail.
pub(super) fn failed_before_start(
    run: &str,
    class: &str,
    detail: &str,
    clock: clock::Clock,
) -> Finished {
    Finished {
        run: run.to_owned(),
        outcome: Outcome::Failed,
        exit_code: None,
        signal: None,
        duration_ms: 0,
        error: Some(ErrorInfo {
            class: class.to_owned(),
            detail: detail.to_owned(),
        }),
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        dropped: Dropped::default(),
        facts: Default::default(),
        headline: None,
        http: None,
        leftover_processes: 0,
        clock,
        trigger: None,
        started_at: None,
        attempt: None,
        first_run: None,
    }
}
