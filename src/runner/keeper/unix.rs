//! The Unix side of [`super`].
//!
//! Right after taking the run lock, while still single-threaded, the firing splits in two with one
//! fork: the **parent becomes the keeper** and the child goes on as the runner. The keeper is the
//! process systemd, launchd or the shell started and waits on; it shares the lock's open file
//! description, so the lock is held until both have let go. The runner moves into a process group
//! of its own, so a signal meant for the job (Ctrl-C, `kill %1`, a service stop) reaches the keeper,
//! which passes INT, TERM, HUP and QUIT on to the runner: the runner then stops its command's tree
//! and records the run as `stopped`.
//!
//! On Linux the keeper is a child subreaper before it forks, so whatever the runner's tree leaves
//! behind when the runner dies — a double-forked daemon in its own session with its environment
//! cleared included — is re-parented to the keeper, never to init. The runner tells the keeper the
//! command's process group and, at the very end, `done`. If the runner dies without saying it was
//! done, the keeper SIGKILLs every process it has left (its children, until none is left; without a
//! subreaper — macOS — every member the process table shows: the group, sessions that members led,
//! the run's environment marker), and only then exits, freeing the lock. Either way the keeper ends
//! the way the runner did: its exit code, or its signal.
//!
//! The keeper never writes the run log: it outlives a runner that may have died of a full disk,
//! and `started` without `finished` already reads as interrupted. Its one service to the log comes
//! first, right after the fork: the runner appended `started` just before it, and the keeper makes
//! that line durable (`first`, the `fdatasync` of step 5 in docs/running.md) while the runner prepares the
//! command on the other core; the runner waits for the answer before anything of the command
//! runs ([`Keeper::first_answer`]). The keeper sets its own signal handlers before that sync; in
//! the moment between the fork and them, the runner's (installed before the split) turn a stop
//! signal to the keeper into a byte on the runner's signal pipe, which both share.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

use super::super::tree::{self, Walk};

/// How long the keeper keeps killing before it gives up and frees the lock anyway.
const KILL_FOR: Duration = Duration::from_secs(30);

/// The signals the keeper passes on to the runner.
const PASSED_ON: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The runner's pid, for the keeper's signal handler.
static RUNNER: AtomicI32 = AtomicI32::new(0);

/// In the runner: the keeper's pipe, kept open until the process hands over its exit code.
static PIPE: std::sync::Mutex<Option<OwnedFd>> = std::sync::Mutex::new(None);

/// The runner's end of the keeper's pipe. Dropping it (every way the runner returns) says `done`;
/// only a runner that dies without returning leaves the keeper to clean up.
#[derive(Debug)]
pub struct Keeper {
    write: Option<OwnedFd>,
    /// The keeper's answer to `first`, until read.
    answer: Option<OwnedFd>,
    /// The keeper's pid: the process that holds the lock and that was started for this firing.
    pid: u32,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.done();
    }
}

impl Keeper {
    /// Splits the firing. In the parent this never returns: it becomes the keeper of the run
    /// `marker` names (the environment entry every process of the command inherits). The child
    /// returns, as the runner. `subreaper` makes the keeper the reaper of the runner's orphans
    /// (Linux; a test turns it off to stand in for macOS). `first` is the keeper's first act, whose
    /// answer the runner reads with [`Keeper::first_answer`].
    ///
    /// # Safety of the fork
    /// Must be called while the process has no other thread (before the key gate, which may start
    /// some): both halves go on running ordinary Rust code.
    pub fn split(
        marker: &[u8],
        subreaper: bool,
        first: &dyn Fn() -> io::Result<()>,
    ) -> io::Result<Self> {
        let subreaper = subreaper && become_subreaper();
        let (read, write) = nix::unistd::pipe()?;
        let (answer_read, answer_write) = nix::unistd::pipe()?;
        let keeper = std::process::id();
        // SAFETY: single-threaded here (see above).
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Parent { child } => {
                drop(write);
                drop(answer_read);
                // Its own handlers first, so no signal meant for the job finds the keeper
                // without them while `first` waits on the disk.
                guard(child);
                let code = match first() {
                    Ok(()) => 0,
                    Err(e) => e.raw_os_error().unwrap_or(-1),
                };
                // A runner that is gone reads nothing: EPIPE is fine (SIGPIPE is ignored).
                let _ = nix::unistd::write(&answer_write, &code.to_le_bytes());
                drop(answer_write);
                keep(read, child, marker, subreaper)
            }
            ForkResult::Child => {
                drop(read);
                drop(answer_write);
                // Only the runner's ends; close-on-exec, so no program it starts (the command, the
                // key gate's helpers) holds a pipe open.
                for fd in [&write, &answer_read] {
                    nix::fcntl::fcntl(
                        fd,
                        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
                    )?;
                }
                // A group of its own: what is sent to the job reaches the keeper, which passes it on.
                let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
                Ok(Self {
                    write: Some(write),
                    answer: Some(answer_read),
                    pid: keeper,
                })
            }
        }
    }

    /// The keeper's pid: the process holding the run's lock, and the one its starter waits on.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What `first` gave in the keeper (waiting for it; asked once, later calls answer `Ok`):
    /// `None` when the keeper ended without answering.
    pub fn first_answer(&mut self) -> Option<io::Result<()>> {
        let Some(fd) = self.answer.take() else {
            return Some(Ok(()));
        };
        let mut code = [0u8; 4];
        let mut got = 0;
        while got < code.len() {
            match nix::unistd::read(&fd, &mut code[got..]) {
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return None,
            }
        }
        Some(match i32::from_le_bytes(code) {
            0 => Ok(()),
            -1 => Err(io::Error::other("failed in the run's keeper")),
            errno => Err(io::Error::from_raw_os_error(errno)),
        })
    }

    /// Tells the keeper the command's process group.
    pub fn spawned(&mut self, group: i32) {
        let mut msg = [0u8; 5];
        msg[0] = b'g';
        msg[1..].copy_from_slice(&group.to_le_bytes());
        self.send(&msg);
    }

    /// Tells the keeper one attempt's tree is gone; another may follow (its `spawned` makes the
    /// keeper guard again).
    pub fn idle(&mut self) {
        self.send(b"d");
    }

    /// Tells the keeper the command's whole tree is gone: from here it has nothing to guard, and
    /// waits only for the runner's exit code ([`hand_over`]).
    pub fn done(&mut self) {
        if let Some(fd) = self.write.take() {
            let _ = nix::unistd::write(&fd, b"d");
            if let Ok(mut pipe) = PIPE.lock() {
                *pipe = Some(fd);
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(fd) = &self.write {
            // A keeper that is gone (killed with the job) leaves nothing to tell: EPIPE is fine
            // (std ignores SIGPIPE).
            let _ = nix::unistd::write(fd, bytes);
        }
    }
}

/// The runner's last word: its exit code, after everything is printed and recorded. The keeper
/// ends with it at once, so the firing is over for whoever waits on it while this process is
/// still tearing itself down. Does nothing outside a firing.
pub fn hand_over(code: u8) {
    let Some(fd) = PIPE.lock().ok().and_then(|mut p| p.take()) else {
        return;
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let _ = std::io::Write::flush(&mut std::io::stderr());
    let _ = nix::unistd::write(&fd, &[b'x', code]);
}

/// Makes this process the reaper of its orphaned descendants (Linux); whether it is one.
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

extern "C" fn pass_on(sig: nix::libc::c_int) {
    let runner = RUNNER.load(Ordering::Relaxed);
    if runner > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { nix::libc::kill(runner, sig) };
    }
}

fn exit(code: i32) -> ! {
    // SAFETY: _exit ends the process without running destructors or atexit handlers that belong
    // to the runner's half (a buffered stdout would be flushed twice).
    unsafe { nix::libc::_exit(code) }
}

/// The keeper's signal handling, set before anything else it does: INT, TERM, HUP and QUIT passed
/// on to `runner`, SIGPIPE ignored, SIGCHLD back to its default.
fn guard(runner: Pid) {
    RUNNER.store(runner.as_raw(), Ordering::Relaxed);
    let action = SigAction::new(
        SigHandler::Handler(pass_on),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in PASSED_ON {
        // SAFETY: the handler only calls kill, which is async-signal-safe.
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
    // SAFETY: ignoring a signal, or restoring its default action, installs no handler code. (The
    // runner's SIGCHLD handler, inherited, would only wake the runner for nothing.)
    let _ = unsafe { signal::signal(Signal::SIGPIPE, SigHandler::SigIgn) };
    let _ = unsafe { signal::signal(Signal::SIGCHLD, SigHandler::SigDfl) };
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_name(c"automations-kpr");
}

/// The keeper's life after its first act.
fn keep(read: OwnedFd, runner: Pid, marker: &[u8], subreaper: bool) -> ! {
    let heard = listen(&read);
    if let Some(code) = heard.exit.filter(|_| heard.done) {
        // All is over: the runner is only tearing itself down.
        exit(i32::from(code));
    }
    let (group, done) = (heard.group, heard.done);
    let status = loop {
        match waitpid(runner, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.ok(),
        }
    };
    // Nothing is left when the runner said so; otherwise (and to be sure) whatever is still there.
    let killed = if done && nothing_left() {
        0
    } else if subreaper {
        kill_children()
    } else {
        kill_members(runner, group, marker)
    };
    if killed > 0 {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!(
                "automations: the runner (pid {runner}) died mid-run; its keeper killed {killed} process(es) it left behind\n"
            )
            .as_bytes(),
        );
    }
    end_like(status)
}

/// What the runner told the keeper.
#[derive(Default)]
struct Heard {
    /// The command's process group.
    group: Option<i32>,
    /// The command's tree is gone.
    done: bool,
    /// The runner's exit code, handed over at its very end.
    exit: Option<u8>,
}

/// Reads the runner's messages until its exit code or the end of the pipe (the runner is gone, or
/// went without a word).
fn listen(read: &OwnedFd) -> Heard {
    let mut heard = Heard::default();
    let mut buf = [0u8; 64];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match nix::unistd::read(read, &mut buf) {
            Ok(0) => return heard,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return heard,
        }
        while let Some(&tag) = pending.first() {
            match tag {
                b'd' => {
                    heard.done = true;
                    pending.remove(0);
                }
                b'x' if pending.len() >= 2 => {
                    heard.exit = Some(pending[1]);
                    return heard;
                }
                b'x' => break,
                // A group: a command (another attempt's, after an idle) runs again.
                b'g' if pending.len() >= 5 => {
                    heard.done = false;
                    heard.group = Some(i32::from_le_bytes([
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
}

/// Whether the keeper has no child left (one call, the usual case after a run that ended well).
fn nothing_left() -> bool {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Err(nix::errno::Errno::ECHILD) => return true,
            Ok(WaitStatus::StillAlive) => return false,
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => return true,
        }
    }
}

/// With a subreaper: every orphan of the run comes back to the keeper, so SIGKILL its children
/// until none is left (or `KILL_FOR` passes); how many distinct processes were killed.
fn kill_children() -> usize {
    let me = std::process::id() as i32;
    let mut killed = std::collections::BTreeSet::new();
    let until = Instant::now() + KILL_FOR;
    loop {
        let children = tree::children_of(me);
        if children.is_empty() || Instant::now() >= until {
            return killed.len();
        }
        for pid in children {
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            killed.insert(pid);
        }
        while matches!(
            waitpid(None, Some(WaitPidFlag::WNOHANG)),
            Ok(s) if s != WaitStatus::StillAlive
        ) {}
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Without a subreaper: SIGKILLs every member of the run the process table shows until none is
/// left (or `KILL_FOR` passes); how many distinct processes it killed.
fn kill_members(runner: Pid, group: Option<i32>, marker: &[u8]) -> usize {
    let me = tree::me();
    let runner = tree::Proc {
        pid: runner.as_raw(),
        ppid: me.pid,
        pgid: runner.as_raw(),
        sid: me.sid,
    };
    let mut walk = Walk::new(runner, group, marker.to_vec());
    walk.exclude(me.pid);
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

/// Ends the keeper the way the runner ended: its exit code, or the same signal.
fn end_like(status: Option<WaitStatus>) -> ! {
    match status {
        Some(WaitStatus::Exited(_, code)) => exit(code),
        Some(WaitStatus::Signaled(_, sig, _)) => {
            // SAFETY: restoring the default action installs no handler code.
            let _ = unsafe { signal::signal(sig, SigHandler::SigDfl) };
            let _ = signal::sigprocmask(
                signal::SigmaskHow::SIG_UNBLOCK,
                Some(&SigSet::from(sig)),
                None,
            );
            let _ = signal::raise(sig);
            exit(128 + sig as i32)
        }
        _ => exit(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner's half whose keeper answered `bytes` to `first` (and then ended).
    fn answered(bytes: &[u8]) -> Keeper {
        let (read, write) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&write, bytes).unwrap();
        drop(write);
        Keeper {
            write: None,
            answer: Some(read),
            pid: std::process::id(),
        }
    }

    #[test]
    fn the_keepers_answer_to_its_first_act_reaches_the_runner() {
        let mut ok = answered(&0i32.to_le_bytes());
        assert!(matches!(ok.first_answer(), Some(Ok(()))));
        // Asked once: the answer is not waited for again (a retry's `started` syncs itself).
        assert!(matches!(ok.first_answer(), Some(Ok(()))));

        let eio = answered(&nix::libc::EIO.to_le_bytes()).first_answer();
        let err = eio.expect("an answer").expect_err("a failed sync");
        assert_eq!(err.raw_os_error(), Some(nix::libc::EIO));

        let other = answered(&(-1i32).to_le_bytes()).first_answer();
        assert!(other.expect("an answer").is_err());
    }

    #[test]
    fn a_keeper_gone_without_answering_leaves_the_act_to_the_runner() {
        // Nothing written, or a torn answer: the keeper ended first.
        assert!(answered(&[]).first_answer().is_none());
        assert!(answered(&[0, 0]).first_answer().is_none());
    }
}
