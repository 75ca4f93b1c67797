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
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
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
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let (tx_out, rx_out) = std::sync::mpsc::channel();
        let (tx_err, rx_err) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            let _ = tx_out.send(s);
        });
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = err.read_to_end(&mut s);
            let _ = tx_err.send(s);
        });
        let until = Instant::now() + deadline;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() >= until => {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(child.id() as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => break None,
            }
        };
        // Output still held open by something outside the group is not waited for long.
        let grace = Duration::from_secs(1);
        let stdout =
            String::from_utf8_lossy(&rx_out.recv_timeout(grace).unwrap_or_default()).into_owned();
        let stderr =
            String::from_utf8_lossy(&rx_err.recv_timeout(grace).unwrap_or_default()).into_owned();
        match status {
            None => Err(fail(
                format!("timed out after {} s", DEADLINE.as_secs()),
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
