//! The Unix side of [`super`]: one thread, one `poll` loop over the two output pipes and a
//! self-pipe fed by the signal handler (SIGCHLD wakes it, SIGTERM/SIGINT/SIGHUP ask it to stop).
//! The command runs in its own process group; on Linux the runner is a child subreaper, so
//! anything that escapes with `setsid` or a double fork is re-parented to the runner instead of
//! init. At the deadline (awake clock: `Instant` is CLOCK_MONOTONIC / mach absolute time, which
//! stop during sleep): SIGTERM to the group and every descendant, up to 5 s grace — ended early
//! as soon as nothing is left — then SIGKILL. After a normal exit, leftovers are found, counted and
//! killed the same way. Output pipes are read as they fill but never waited on, so a process
//! holding stdout open cannot keep the runner past the deadline.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::super::tail::Tail;
use super::super::tree::{self, ProcessTable, Walk};
use super::{Ending, GRACE, Interrupt, KILL_WAIT, Supervised, TreeSpec, not_started};
use crate::redact::{Redactor, Stream};

/// How long output still buffered in the pipes is read once the tree is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// Bytes per read(2) of an output pipe (the pipe's own buffer is 64 KiB; a smaller buffer touches
/// fewer pages in the common case of little output).
const READ_BYTES: usize = 16 * 1024;
/// Bytes read per pipe before looking at the clock again.
const READ_BUDGET: usize = 1 << 20;

static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: nix::libc::c_int) {
    let saved = Errno::last_raw();
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is one valid byte on the stack.
        unsafe { nix::libc::write(fd, (&raw const byte).cast(), 1) };
    }
    Errno::set_raw(saved);
}

/// The self-pipe the handler writes to: made once and never closed. Once installed, the handler
/// stays installed for the life of the process, and may write at any moment: a pipe closed when
/// its `Signals` was dropped would leave the handler writing into whatever file next got that
/// descriptor's number (a chain head written whole then held a stray byte).
static PIPE: std::sync::OnceLock<(OwnedFd, OwnedFd)> = std::sync::OnceLock::new();

/// The runner's signal handling: SIGCHLD and stop requests arrive as bytes on a pipe.
pub struct Signals {
    read: std::os::fd::BorrowedFd<'static>,
    stop: Option<Signal>,
}

impl Signals {
    /// Installs the handlers. From here on SIGTERM/SIGINT/SIGHUP no longer kill the runner; they
    /// become a request to stop the command and record the run as `stopped`.
    pub fn install() -> io::Result<Self> {
        if PIPE.get().is_none() {
            let made = nonblocking_pipe()?;
            // Another thread may have made one meanwhile: then this one is closed, never used.
            let _ = PIPE.set(made);
        }
        let (read, write) = PIPE.get().expect("set above");
        SIGNAL_PIPE.store(write.as_raw_fd(), Ordering::Relaxed);
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::SA_RESTART | SaFlags::SA_NOCLDSTOP,
            SigSet::empty(),
        );
        for sig in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
        ] {
            // SAFETY: the handler only calls async-signal-safe functions.
            unsafe { signal::sigaction(sig, &action) }?;
        }
        let mut signals = Self {
            read: read.as_fd(),
            stop: None,
        };
        // What an earlier user of the pipe left (this process's earlier firing, in tests) is not
        // this one's.
        signals.drain();
        signals.stop = None;
        Ok(signals)
    }

    /// Reads pending signals; returns whether a SIGCHLD arrived. Stop requests are remembered.
    fn drain(&mut self) -> bool {
        let mut chld = false;
        let mut buf = [0u8; 64];
        while let Ok(n) = nix::unistd::read(self.read, &mut buf) {
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                match Signal::try_from(i32::from(b)) {
                    Ok(Signal::SIGCHLD) => chld = true,
                    Ok(s) => {
                        self.stop.get_or_insert(s);
                    }
                    Err(_) => {}
                }
            }
        }
        chld
    }

    /// The first stop signal received so far, if any.
    pub fn stop_requested(&mut self) -> Option<Signal> {
        self.drain();
        self.stop
    }

    /// Waits up to `d` for a stop request (the wait between two attempts); whether one came.
    pub fn wait_for_stop(&mut self, d: Duration) -> bool {
        super::wait_for_stop(self, d)
    }
}

impl super::Waits for Signals {
    fn stopped(&mut self) -> bool {
        self.stop_requested().is_some()
    }

    /// Until a signal arrives on the pipe, or `left` has passed.
    fn pause(&mut self, left: Duration) {
        let ms = left.as_millis().saturating_add(1).min(60_000) as u16;
        let mut fds = [PollFd::new(self.read.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(ms));
    }
}

/// A close-on-exec, non-blocking pipe. Linux makes it in one call; macOS has no `pipe2`, so the
/// flags are set right after (before any command is spawned, so no child can inherit it).
fn nonblocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (read, write) = nix::unistd::pipe()?;
        for fd in [&read, &write] {
            fcntl(fd, FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
            fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        }
        Ok((read, write))
    }
}

/// Marks every descriptor above stderr close-on-exec, so the command gets exactly its stdin,
/// stdout and stderr: whatever the runner's own starter left open (a shell's `exec 7>file`, a
/// server's sockets) never reaches it. The runner's own descriptors already are (std opens them
/// so). Linux 5.11+: one `close_range`; else, and on macOS, each descriptor listed in the fd folder.
fn close_inherited_on_exec() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors.
        let r = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_close_range,
                3u32,
                u32::MAX,
                nix::libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if r == 0 {
            return;
        }
    }
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD on a descriptor that may have closed meanwhile fails harmlessly.
        unsafe {
            nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC);
        }
    }
}

/// Runs `cmd` to the end of its whole tree. `cmd` has its program, args, env and cwd set.
pub fn supervise(
    cmd: &mut Command,
    timeout: Duration,
    redactor: &Redactor,
    signals: &mut Signals,
    spec: TreeSpec,
    on_spawn: &mut dyn FnMut(i32),
) -> Supervised {
    let started = Instant::now();
    let deadline = started + timeout;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    // No pre_exec hook (a parent-death signal used to live here): the run's keeper kills the whole
    // tree if the runner dies, on both OSes, and without a hook std spawns with posix_spawn
    // instead of a full fork of the runner.
    let mut out = redactor.stream(Tail::default());
    let mut err = redactor.stream(Tail::default());
    close_inherited_on_exec();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return not_started(e, started),
    };
    let main = Pid::from_raw(child.id() as i32);
    on_spawn(main.as_raw());
    let walk = Walk::new(tree::me(), Some(main.as_raw()), spec.marker);
    let pipes = [
        child.stdout.take().map(OwnedFd::from),
        child.stderr.take().map(OwnedFd::from),
    ];
    for fd in pipes.iter().flatten() {
        let _ = fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    }
    let mut io = Io {
        pipes,
        streams: [&mut out, &mut err],
        buf: vec![0u8; READ_BYTES],
    };
    let mut tree = Tree {
        main,
        main_status: None,
        signaled: BTreeSet::new(),
        leftovers: BTreeSet::new(),
        group_signaled: false,
        subreaper: spec.subreaper,
        walk,
        table: spec.table,
    };

    let interrupt = until_main_ends(&mut tree, &mut io, signals, deadline);
    // End whatever is left of the tree: after an interrupt that includes the main process.
    let mut unkillable = 0;
    if interrupt.is_some() || tree.reap() {
        unkillable = tree.terminate(&mut io, signals);
    }
    io.drain(signals);
    drop(io);
    let ending = match tree.main_status {
        Some(WaitStatus::Exited(_, code)) => Ending::Exited(code),
        Some(WaitStatus::Signaled(_, sig, _)) => Ending::Signaled(sig),
        _ => Ending::Signaled(Signal::SIGKILL),
    };
    Supervised {
        ending,
        interrupt,
        leftover_processes: tree.leftovers.len() as u32,
        unkillable,
        stdout: out.finish().finish(),
        stderr: err.finish().finish(),
        duration: started.elapsed(),
    }
}

/// Runs until the main process ends, the deadline passes, or the runner is asked to stop; the
/// interrupt, if one came first.
fn until_main_ends(
    tree: &mut Tree,
    io: &mut Io,
    signals: &mut Signals,
    deadline: Instant,
) -> Option<Interrupt> {
    while tree.main_status.is_none() {
        if let Some(s) = signals.stop {
            return Some(Interrupt::Stop(s));
        }
        let now = Instant::now();
        if now >= deadline {
            return Some(Interrupt::Timeout);
        }
        if io.wait(signals, deadline - now) {
            tree.reap();
        }
    }
    None
}

/// The two output pipes and their redacting tails.
struct Io<'a, 'r> {
    pipes: [Option<OwnedFd>; 2],
    streams: [&'a mut Stream<'r, Tail>; 2],
    buf: Vec<u8>,
}

impl Io<'_, '_> {
    /// Collects what is still buffered in the pipes once nothing of the tree can hold them any
    /// more, for at most [`DRAIN_WAIT`].
    fn drain(&mut self, signals: &mut Signals) {
        let until = Instant::now() + DRAIN_WAIT;
        while self.pipes.iter().any(Option::is_some) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            self.wait(signals, until - now);
        }
    }

    /// Waits up to `timeout` for output or a signal; reads what came. Returns whether a SIGCHLD
    /// arrived.
    fn wait(&mut self, signals: &mut Signals, timeout: Duration) -> bool {
        let ms = timeout.as_millis().saturating_add(1).min(60_000) as u16;
        let mut fds = vec![PollFd::new(signals.read.as_fd(), PollFlags::POLLIN)];
        for p in self.pipes.iter().flatten() {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        let ready = match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) => n > 0,
            Err(_) => false,
        };
        drop(fds);
        if ready {
            for i in 0..2 {
                self.pump(i);
            }
        }
        signals.drain()
    }

    /// Reads pipe `i` until it would block, closes it at EOF.
    fn pump(&mut self, i: usize) {
        let mut budget = READ_BUDGET;
        while let Some(fd) = &self.pipes[i] {
            match nix::unistd::read(fd, &mut self.buf) {
                Ok(0) => self.pipes[i] = None,
                Ok(n) => {
                    self.streams[i].push(&self.buf[..n]);
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        break;
                    }
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => break,
                Err(_) => self.pipes[i] = None,
            }
        }
    }
}

/// The command's process tree, as seen from the runner.
struct Tree<'t> {
    main: Pid,
    main_status: Option<WaitStatus>,
    /// Every process other than the main one that was sent a signal.
    signaled: BTreeSet<i32>,
    /// Processes found alive after the main process ended on its own.
    leftovers: BTreeSet<i32>,
    /// Whether the group has been signalled (once is enough for SIGTERM). That happens only
    /// while the main process is unreaped, so only when the run is being stopped (its deadline, a
    /// stop request): what is still alive then is being ended, not left behind.
    group_signaled: bool,
    /// Whether orphans of the tree come back to the runner (Linux subreaper).
    subreaper: bool,
    walk: Walk,
    table: &'t dyn ProcessTable,
}

impl Tree<'_> {
    /// Reaps every exited child; returns whether any process of the tree may still be alive.
    fn reap(&mut self) -> bool {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return true,
                Ok(status) => {
                    if status.pid() == Some(self.main) {
                        self.main_status = Some(status);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(_) => return self.group_alive(),
            }
        }
    }

    /// Whether any member of the tree is left outside the runner's children. With a subreaper
    /// nothing can be: every orphan of the tree is re-parented to the runner. Without one (macOS)
    /// only a walk of the process table can tell.
    fn group_alive(&mut self) -> bool {
        !self.subreaper && !self.members().is_empty()
    }

    /// The live members of the tree.
    fn members(&mut self) -> Vec<i32> {
        self.walk.members(self.table)
    }

    /// Sends `sig` to the group (while its leader is unreaped, so the group id cannot have been
    /// reused) and to every descendant of the runner. With `only_new`, processes already sent a
    /// signal are left alone: a second SIGTERM means "exit now" to many programs, which would cut
    /// the grace short.
    fn signal_all(&mut self, sig: Signal, only_new: bool) {
        // Look before signalling: a process that dies of the group signal must still be counted.
        let pids = self.members();
        if self.main_status.is_none() && !(only_new && self.group_signaled) {
            let _ = signal::killpg(self.main, sig);
            self.group_signaled = true;
        }
        for pid in pids {
            if pid == self.main.as_raw() {
                continue;
            }
            if self.main_status.is_some() && !self.group_signaled {
                // Alive after the main process ended on its own (no stop signalled the group):
                // left behind.
                self.leftovers.insert(pid);
            }
            if self.signaled.insert(pid) || !only_new {
                let _ = signal::kill(Pid::from_raw(pid), sig);
            }
        }
    }

    /// SIGTERM, grace (ended as soon as nothing is left), SIGKILL. Returns how many processes
    /// outlived SIGKILL.
    fn terminate(&mut self, io: &mut Io, signals: &mut Signals) -> u32 {
        let stops_before = signals.stop;
        self.signal_all(Signal::SIGTERM, false);
        let grace_end = Instant::now() + GRACE;
        while self.reap() {
            let now = Instant::now();
            // A second stop request skips the rest of the grace.
            let hurried = signals.stop.is_some() && signals.stop != stops_before;
            if now >= grace_end || hurried {
                break;
            }
            io.wait(signals, (grace_end - now).min(Duration::from_millis(50)));
            // Processes re-parented to the runner since the last sweep get their SIGTERM too.
            self.signal_all(Signal::SIGTERM, true);
        }
        let kill_end = Instant::now() + KILL_WAIT;
        while self.reap() {
            self.signal_all(Signal::SIGKILL, false);
            let now = Instant::now();
            if now >= kill_end {
                return self.members().len() as u32;
            }
            io.wait(signals, (kill_end - now).min(Duration::from_millis(20)));
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: dropping `Signals` closed its pipe while the handler stayed installed, so a
    /// signal after the run (a SIGCHLD, a stop) wrote a byte into whatever file had reused the
    /// descriptor: a chain head written whole then held 193 bytes and `log verify` failed. The
    /// handler's descriptor now stays the pipe for the life of the process.
    #[test]
    fn the_handler_writes_to_its_pipe_after_signals_are_dropped() {
        {
            let _first = Signals::install().unwrap();
        }
        // Files opened now may take the lowest free descriptors; none of them is the handler's.
        let files: Vec<std::fs::File> = (0..8).map(|_| tempfile::tempfile().unwrap()).collect();
        let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
        // SAFETY: only fstat'd, while `files` keeps every descriptor opened here open.
        let st = nix::sys::stat::fstat(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).unwrap();
        assert_eq!(
            st.st_mode & nix::libc::S_IFMT,
            nix::libc::S_IFIFO,
            "the handler's descriptor is no longer its pipe"
        );
        // And a later install starts clean of what an earlier one left.
        on_signal(Signal::SIGTERM as i32);
        let mut again = Signals::install().unwrap();
        assert_eq!(again.stop_requested(), None);
        drop(files);
    }
}
