//! The keeper: the command's tree dies with the runner, even when the runner is SIGKILLed
//! (SPEC §5.8, issue: "a SIGKILLed runner").
//!
//! Right after taking the run lock, while still single-threaded, the runner forks twice; the
//! grandchild is the keeper. It shares the lock's open file description, detaches into its own
//! session (Ctrl-C and hangups are the runner's business) and waits on a pipe. The runner writes the
//! command's process group once it has spawned it, and `done` at the very end, after which it
//! releases the lock itself (an explicit unlock also frees the keeper's copy, so the next firing is
//! never delayed by a keeper still on its way out).
//!
//! If the pipe ends without `done`, the runner died. The keeper then walks the process table for
//! the run's members ([`super::tree`]: group, sessions, the run's environment marker), SIGKILLs
//! them until none is left, and exits — only then is the lock free, so no second run of the
//! automation starts beside a survivor of the first. Its only output is one line on stderr, which
//! the journal or launchd's log keeps.
//!
//! This module must never touch the run log: a keeper outlives a runner that may have died of a
//! full disk, and `started` without `finished` already reads as interrupted.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::{ForkResult, Pid};

use super::tree::{self, Proc, Walk};

/// How long the keeper keeps killing before it gives up and frees the lock anyway.
const KILL_FOR: Duration = Duration::from_secs(30);

/// The runner's end of the keeper's pipe. Dropping it (every way the runner returns) says `done`;
/// only a runner that dies without returning leaves the keeper to clean up.
#[derive(Debug)]
pub struct Keeper {
    write: Option<OwnedFd>,
    /// The intermediate child, until reaped (see [`Keeper::settle`]).
    intermediate: Option<Pid>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.done();
    }
}

impl Keeper {
    /// Forks the keeper of run `run_id` (whose command will carry `marker` in its environment).
    ///
    /// # Safety of the fork
    /// Must be called while the runner has no other thread (before the key gate, which may start
    /// some): the forked processes run ordinary Rust code.
    pub fn start(marker: &[u8]) -> io::Result<Self> {
        let (read, write) = nix::unistd::pipe()?;
        let runner = tree::me();
        // SAFETY: the runner is single-threaded here (see above), so the child may allocate.
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Child => {
                drop(write);
                // SAFETY: as above; the intermediate child exits at once, so the keeper is
                // re-parented away from the runner and never shows up among its children.
                match unsafe { nix::unistd::fork() } {
                    Ok(ForkResult::Child) => keep(read, runner, marker),
                    _ => exit(0),
                }
            }
            ForkResult::Parent { child } => {
                drop(read);
                // Mark only our end close-on-exec: the command must never hold the pipe open.
                nix::fcntl::fcntl(
                    &write,
                    nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
                )?;
                // The intermediate child is reaped later (`settle`), so its fork and exit overlap
                // with the runner's own work instead of being waited for here.
                Ok(Self {
                    write: Some(write),
                    intermediate: Some(child),
                })
            }
        }
    }

    /// Reaps the intermediate child (which exits as soon as it has forked the keeper). Must be
    /// called before the command is spawned: from then on every child of the runner is part of
    /// the command's tree.
    pub fn settle(&mut self) {
        if let Some(pid) = self.intermediate.take() {
            while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitpid(pid, None) {}
        }
    }

    /// Tells the keeper the command's process group.
    pub fn spawned(&mut self, group: i32) {
        let mut msg = [0u8; 5];
        msg[0] = b'g';
        msg[1..].copy_from_slice(&group.to_le_bytes());
        self.send(&msg);
    }

    /// Tells the keeper the run is over; it exits without touching anything.
    pub fn done(&mut self) {
        if self.write.is_some() {
            self.send(b"d");
            self.write = None;
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(fd) = &self.write {
            // A keeper that is gone (killed with the service) leaves nothing to tell: EPIPE is
            // fine (std ignores SIGPIPE).
            let _ = nix::unistd::write(fd, bytes);
        }
    }
}

fn exit(code: i32) -> ! {
    // SAFETY: _exit ends the process without running the runner's destructors or atexit handlers,
    // which belong to the runner.
    unsafe { nix::libc::_exit(code) }
}

/// The keeper's whole life.
fn keep(read: OwnedFd, runner: Proc, marker: &[u8]) -> ! {
    let _ = nix::unistd::setsid();
    for sig in [
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGTERM,
        Signal::SIGPIPE,
    ] {
        // SAFETY: ignoring a signal installs no handler code.
        let _ = unsafe { signal::signal(sig, SigHandler::SigIgn) };
    }
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
    let mut group = None;
    let mut buf = [0u8; 64];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match nix::unistd::read(&read, &mut buf) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
        while let Some(&tag) = pending.first() {
            match tag {
                b'd' => exit(0),
                b'g' if pending.len() >= 5 => {
                    group = Some(i32::from_le_bytes([
                        pending[1], pending[2], pending[3], pending[4],
                    ]));
                    pending.drain(..5);
                }
                b'g' => break,
                _ => {
                    pending.remove(0);
                }
            }
        }
    }
    // The runner is gone without saying it was done.
    let killed = kill_tree(runner, group, marker);
    if killed > 0 {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!(
                "automations: the runner (pid {}) died mid-run; its keeper killed {killed} process(es) it left behind\n",
                runner.pid
            )
            .as_bytes(),
        );
    }
    exit(0)
}

/// SIGKILLs every member of the run until none is left (or `KILL_FOR` passes); returns how many
/// distinct processes it killed.
fn kill_tree(runner: Proc, group: Option<i32>, marker: &[u8]) -> usize {
    let mut walk = Walk::new(runner, group, marker.to_vec());
    walk.exclude(std::process::id() as i32);
    let table = tree::system();
    let mut killed = std::collections::BTreeSet::new();
    let until = Instant::now() + KILL_FOR;
    loop {
        if let Some(g) = group {
            let _ = signal::killpg(Pid::from_raw(g), Signal::SIGKILL);
        }
        let members = walk.members(table);
        if members.is_empty() || Instant::now() >= until {
            return killed.len();
        }
        for pid in members {
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
