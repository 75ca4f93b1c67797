//! The one way external programs (`systemctl`, `launchctl`) are run: captured output, a deadline,
//! and a typed error carrying the command line and its stderr (STYLE 8).
//!
//! Nothing secret is ever passed to a program through here; the command line is part of errors.

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one call may take before it is killed and reported.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A failed call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("`{command}` {what}{}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
pub struct ExecError {
    /// The command line, for people.
    pub command: String,
    /// How it failed: "exited with 5", "could not start: …", "timed out after 30 s".
    pub what: String,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// Its stderr, trimmed.
    pub stderr: String,
}

/// A successful call's output.
#[derive(Debug, Clone)]
pub struct Done {
    pub stdout: String,
    pub stderr: String,
}

/// An external program.
#[derive(Debug, Clone)]
pub struct Program {
    path: OsString,
    display: String,
}

impl Program {
    /// `name` looked up on PATH, or a path.
    pub fn new(path: impl Into<OsString>) -> Self {
        let path = path.into();
        let display = path
            .to_string_lossy()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        Self { path, display }
    }

    /// Runs the program with `args`; a non-zero exit is an error.
    pub fn run(&self, args: &[&str]) -> Result<Done, ExecError> {
        self.run_with(args, None, DEADLINE)
    }

    /// Runs the program with `args`, writing `input` (a secret, for instance: never argv) to its
    /// stdin, and killing it at `deadline`.
    pub fn run_with(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
        deadline: Duration,
    ) -> Result<Done, ExecError> {
        let command = format!("{} {}", self.display, args.join(" "));
        let fail = |what: String, code, stderr: String| ExecError {
            command: command.clone(),
            what,
            code,
            stderr: stderr.trim().to_owned(),
        };
        let mut cmd = Command::new(&self.path);
        // Its own process group, so a deadline kills whatever it started too (which would
        // otherwise hold the output pipes open).
        crate::platform::own_group(&mut cmd);
        let mut child = cmd
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("could not start: {e}"), None, String::new()))?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            // A program that never reads must not block us: write on a thread, bounded by the
            // deadline below like everything else.
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                let _ = std::io::Write::write_all(&mut stdin, &bytes);
            });
        }
        // Read both outputs on threads (a full pipe must not stall the child) and wait with a
        // deadline.
        let out = collect(child.stdout.take().expect("piped"));
        let err = collect(child.stderr.take().expect("piped"));
        let status = wait_until(&mut child, Instant::now() + deadline);
        // Output still held open by something outside the group is not waited for long.
        let grace = Duration::from_secs(1);
        let text = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
            String::from_utf8_lossy(&rx.recv_timeout(grace).unwrap_or_default()).into_owned()
        };
        let (stdout, stderr) = (text(out), text(err));
        match status {
            None => Err(fail(
                format!("timed out after {} s", deadline.as_secs_f32()),
                None,
                stderr,
            )),
            Some(s) if s.success() => Ok(Done { stdout, stderr }),
            Some(s) => Err(fail(
                match s.code() {
                    Some(c) => format!("exited with {c}"),
                    None => "was killed by a signal".into(),
                },
                s.code(),
                stderr,
            )),
        }
    }
}

/// Reads `pipe` to its end on a thread; the bytes arrive on the receiver.
fn collect(mut pipe: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = pipe.read_to_end(&mut s);
        let _ = tx.send(s);
    });
    rx
}

/// Waits for `child` until `until`, then kills its process group; `None` when it was killed (or
/// cannot be waited for).
fn wait_until(child: &mut std::process::Child, until: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() >= until => {
                crate::platform::kill_group(child);
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_carry_command_code_and_stderr() {
        let sh = Program::new("sh");
        let done = sh.run(&["-c", "echo out; echo err >&2"]).unwrap();
        assert_eq!(
            (done.stdout.as_str(), done.stderr.as_str()),
            ("out\n", "err\n")
        );
        let e = sh.run(&["-c", "echo nope >&2; exit 5"]).unwrap_err();
        assert_eq!(e.code, Some(5));
        assert_eq!(
            e.to_string(),
            "`sh -c echo nope >&2; exit 5` exited with 5: nope"
        );
        let e = Program::new("/nonexistent/prog").run(&[]).unwrap_err();
        assert!(e.to_string().contains("could not start"), "{e}");
    }
}
