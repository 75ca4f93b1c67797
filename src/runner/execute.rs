//! Steps 7–11 of a firing: the command's environment, the spawn of its program (a script runs
//! where it is, after a look that it is still the file its pin was taken of), supervision of its
//! whole tree, and what it left (output tails, result facts, outside calls, a script that changed
//! while it ran) turned into its `finished` event. Never fails: every problem is an outcome.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::approval::Prepared;
use super::keeper::{self, Keeper};
use super::scratch::Scratch;
use super::supervise::{self, Ending, Interrupt, Signals, Supervised};
use super::{Firing, env, result, run_marker, started_on_disk, tree};
use crate::clock;
use crate::definition::{Definition, PLACEHOLDER_ROOT, PLACEHOLDER_SELF};
use crate::redact::Redactor;
use crate::runlog::{Dropped, ErrorInfo, Finished, Outcome, RunLog};
use crate::settings::Settings;

/// Steps 7–11: environment, spawn and supervise, result facts. Never fails: every problem is an
/// outcome in the returned `finished`.
pub(super) fn execute(
    firing: &Firing,
    log: &RunLog,
    Prepared { scratch, script }: Prepared,
    (redactor, extra_env): (Redactor, Vec<(String, OsString)>),
    signals: &mut Signals,
    keeper: &mut Keeper,
) -> Finished {
    let fail = |class: &str, detail: String| {
        failed_before_start(firing.run_id, class, &detail, clock::now())
    };
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
            let detail = format!("cannot create the run's scratch folder: {e}");
            return fail("scratch", detail);
        }
    };
    let script = match checked_script(firing, script) {
        Ok(s) => s,
        Err((class, detail)) => return fail(class, detail),
    };
    let (mut cmd, program, redactor) = match command(firing, &scratch, redactor, extra_env) {
        Ok(c) => c,
        Err((class, detail)) => return fail(class, detail),
    };
    let subreaper = supervise::subreaper_wanted() && keeper::become_subreaper();
    // 5, done: `started` is on disk before the command can start. The keeper has been syncing it
    // since the split, while this process made all of the above.
    if let Err(unsynced) = started_on_disk(keeper, log) {
        return fail("log_sync", unsynced);
    }
    let def = firing.def;
    let memory = super::limits::Watch::before(def, firing.cause.trigger, &mut cmd);
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
    let mut finished = finish(firing.run_id, def, &program, sup, facts, &redactor);
    memory.after(def, &mut finished);
    changed_while_running(firing, script.as_ref(), &mut finished);
    finished.http =
        crate::http::log::summarize(&scratch.http_log(), &|b| redactor.contains_secret(b))
            .map(Box::new);
    finished
}

/// The script an attempt is about to run, checked once more where it is: for an unattended
/// firing, the path must still name the very file its pin was taken of (a swap during the key gate
/// or the keeper's start is refused here). `Err` is why not.
fn checked_script(
    firing: &Firing,
    script: Result<Option<crate::pins::HashedScript>, String>,
) -> Result<Option<crate::pins::HashedScript>, Failure> {
    let Firing { settings, def, .. } = *firing;
    let rel = || {
        let path = crate::pins::script_path(def, &settings.root).unwrap_or_default();
        let rel = path.strip_prefix(&settings.root).unwrap_or(&path);
        rel.display().to_string()
    };
    let script = script.map_err(|why| {
        (
            "spawn_failed",
            format!("cannot read {} to run it: {why}", rel()),
        )
    })?;
    if firing.cause.trigger.unattended()
        && let Some(s) = &script
        && let Err(why) = s.unchanged(&settings.root)
    {
        let detail = format!(
            "{} changed between its check and its start ({why}): it did not run",
            rel()
        );
        return Err(("script_changed", detail));
    }
    Ok(script)
}

/// After an unattended run: a script that is no longer the file that was hashed changed while it
/// ran, so what ran may not be what was approved. The run is `failed`, class `script_changed`,
/// whatever it ended in.
fn changed_while_running(
    firing: &Firing,
    script: Option<&crate::pins::HashedScript>,
    finished: &mut Finished,
) {
    let Some(s) = script.filter(|_| firing.cause.trigger.unattended()) else {
        return;
    };
    if let Err(why) = s.unchanged(&firing.settings.root) {
        finished.outcome = Outcome::Failed;
        finished.error = Some(ErrorInfo {
            class: "script_changed".into(),
            detail: format!(
                "{} changed while it ran ({why}): what ran may not be what was installed",
                s.pin.path
            ),
        });
    }
}

/// Step 7 up to the spawn: the command's environment (its secrets added to `redactor`), its argv,
/// and the runner moved into the repository root. The command, its program, and the redactor; or
/// the failure's class and detail.
fn command(
    firing: &Firing,
    scratch: &Scratch,
    mut redactor: Redactor,
    extra_env: Vec<(String, OsString)>,
) -> Result<(Command, OsString, Redactor), (&'static str, String)> {
    let Firing { settings, def, .. } = *firing;
    let bin = crate::settings::this_binary().map_err(|e| ("spawn_failed", e.to_string()))?;
    let env_file = settings.layout().env_file(&def.name);
    let slot = firing.cause.slot_stamp();
    // Every attempt of a firing carries the first one's id: the marker the keeper was split with.
    let vars = env::RunVars {
        run_id: firing.first_run,
        trigger: firing.cause.trigger.as_str(),
        result_file: &scratch.result(),
        http_log: &scratch.http_log(),
        tmpdir: &scratch.tmp(),
        bin: &bin,
        home: &settings.home,
        slot: slot.as_deref(),
    };
    let mut command_env = env::build(def, &vars, &env_file, &|k| std::env::var_os(k))
        .map_err(|e| ("env_file", e.to_string()))?;
    command_env.vars.extend(extra_env);
    for secret in &command_env.secrets {
        redactor.add(secret);
    }
    let mut argv = resolve_argv(&def.command, settings, &bin);
    // The command runs in the root. The runner moves there itself instead of asking std to: every
    // path it still uses is absolute, and a Command without a working directory is spawned with
    // posix_spawn, which costs a fraction of a full fork of the runner.
    std::env::set_current_dir(&settings.root).map_err(|e| {
        let root = settings.root.display();
        (
            "spawn_failed",
            format!("cannot enter the repository root {root}: {e}"),
        )
    })?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(command_env.vars.iter().map(|(k, v)| (k, v)));
    if def.policy.sandbox {
        confine(firing, scratch, &mut cmd).map_err(|e| ("sandbox", e.to_string()))?;
    }
    Ok((cmd, argv.swap_remove(0), redactor))
}

/// `[sandbox] level = "strict"`: the command (and only it) confined to its `writes` and its
/// scratch (see `sandbox`). A person's run is told what only the installed unit adds.
fn confine(
    firing: &Firing,
    scratch: &Scratch,
    cmd: &mut Command,
) -> Result<(), crate::sandbox::SandboxError> {
    let Firing { settings, def, .. } = *firing;
    let writes = crate::sandbox::resolve_writes(
        def,
        &settings.root,
        &crate::definition::Checks::of(settings),
    )?;
    let dir = scratch.dir();
    let spec = crate::sandbox::Spec {
        data_root: &settings.data_root,
        scratch: &dir,
        writes: &writes,
    };
    let confinement = crate::sandbox::Confinement::prepare(&spec)?;
    if !firing.cause.trigger.unattended() {
        errln!(
            "automations: {}: sandbox applied to this run by the runner: {}; what only its installed unit adds (ProtectSystem=strict, PrivateTmp, PrivateDevices, its own system call filter…) is not: `automations run {} --unit` runs it there",
            def.name,
            confinement.support.words(),
            def.name
        );
    }
    confinement.apply_to(cmd);
    Ok(())
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

/// A failure's class and detail, before redaction.
type Failure = (&'static str, String);

/// Turns what supervision saw into the `finished` event: how the run ended, then what its result
/// file says, its redacted tails and counts.
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
    let (mut outcome, mut error) = ending(&sup, def.timeout_seconds, program);
    let (facts, headline) = match checked_facts(facts, redactor, def) {
        Ok(f) => f,
        Err(invalid) => {
            if outcome == Outcome::Ok {
                outcome = Outcome::Failed;
                error = Some(invalid);
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
        replaced_by: None,
        slot: None,
    }
}

/// How a run ended (exit, signal, deadline, stop, a failed spawn, processes that outlived
/// SIGKILL): its outcome, and its failure when it is one.
fn ending(sup: &Supervised, timeout: u32, program: &OsString) -> (Outcome, Option<Failure>) {
    let (outcome, error) = match (&sup.interrupt, &sup.ending) {
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
        let why = format!("{} process(es) survived SIGKILL", sup.unkillable);
        return (Outcome::Failed, Some(("unkillable", why)));
    }
    (outcome, error)
}

/// The facts of the result file and its headline (the definition's when the file names none),
/// or why the file is invalid (a fact name that holds a secret is).
fn checked_facts(
    facts: Result<result::Facts, result::ResultError>,
    redactor: &Redactor,
    def: &Definition,
) -> Result<(std::collections::BTreeMap<String, u64>, Option<String>), Failure> {
    let f = facts.map_err(|e| ("result_invalid", e.0))?;
    if f.facts
        .keys()
        .any(|name| redactor.contains_secret(name.as_bytes()))
    {
        return Err(("result_invalid", "a fact name contains a secret".into()));
    }
    let headline = f
        .headline
        .or_else(|| def.headline.as_ref().map(|h| h.to_string()))
        .filter(|h| f.facts.contains_key(h));
    Ok((f.facts, headline))
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
        replaced_by: None,
        slot: None,
    }
}
