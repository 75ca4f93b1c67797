//! The Windows side of [`super`]: the command starts suspended, joins a Job Object made for this
//! run, and only then runs, so every process it ever starts is in the job (Windows puts a
//! process's children in its job; none can break away). The job is made "kill on close": if the
//! runner dies, Windows closes its handle and ends the whole tree. At the deadline, or on a stop,
//! the command's console group gets Ctrl-Break (what a console program hears as a request to end),
//! up to the grace for the job to empty, then the job is terminated. After a normal exit, what is
//! left in the job is counted and ended the same way. Two threads read the output pipes; this
//! thread waits on what they read, the main process, the clock and the stop flag, never longer
//! than the deadline.

use std::io;
use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, GenerateConsoleCtrlEvent, SetConsoleCtrlHandler,
};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME,
};

use super::super::tail::Tail;
use super::{Ending, GRACE, Interrupt, KILL_WAIT, Signal, Supervised, TreeSpec, not_started};
use crate::redact::Redactor;

/// How long output still buffered in the pipes is read once the tree is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// How often the loop looks at the main process and the stop flag while no output comes.
const TICK: Duration = Duration::from_millis(20);
/// Bytes per read of an output pipe.
const READ_BYTES: usize = 16 * 1024;
/// The exit code the job's processes get when the runner ends them.
const KILLED: u32 = 0xC000_013A;

/// The first stop the console asked for (a signal number), 0 for none.
static STOP: AtomicI32 = AtomicI32::new(0);

unsafe extern "system" fn on_console(event: u32) -> windows_sys::core::BOOL {
    let sig = match event {
        CTRL_C_EVENT => Signal::SIGINT,
        // Ctrl-Break, the console closed, logoff, shutdown.
        _ => Signal::SIGTERM,
    };
    let _ = STOP.compare_exchange(0, sig as i32, Ordering::SeqCst, Ordering::SeqCst);
    1
}

/// The runner's stop requests: the console's Ctrl-C, Ctrl-Break and close, remembered.
pub struct Signals {
    stop: Option<Signal>,
}

impl Signals {
    /// Installs the console handler. From here on Ctrl-C no longer ends the runner; it becomes a
    /// request to stop the command and record the run as `stopped`.
    pub fn install() -> io::Result<Self> {
        // SAFETY: registers a handler that only stores to an atomic.
        if unsafe { SetConsoleCtrlHandler(Some(on_console), 1) } == 0 {
            return Err(io::Error::last_os_error());
        }
        STOP.store(0, Ordering::SeqCst);
        Ok(Self { stop: None })
    }

    /// The first stop request received so far, if any.
    pub fn stop_requested(&mut self) -> Option<Signal> {
        if self.stop.is_none() {
            self.stop = match STOP.load(Ordering::SeqCst) {
                2 => Some(Signal::SIGINT),
                0 => None,
                _ => Some(Signal::SIGTERM),
            };
        }
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

    /// The console's handler sets a flag: it is looked at every tick.
    fn pause(&mut self, left: Duration) {
        std::thread::sleep(left.min(TICK));
    }
}

/// The run's Job Object; closing it ends every process still in it.
struct Job(HANDLE);

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle this value owns, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

impl Job {
    /// A new job that ends its processes when its last handle closes.
    fn new() -> io::Result<Self> {
        // SAFETY: no name, default security; the handle is owned by the value returned.
        let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if handle.is_null() {
            return Err(io::Error::last_os_error());
        }
        let job = Self(handle);
        // SAFETY: plain data; zeroes are a valid value.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: `info` is the structure the class names, with its size.
        let set = unsafe {
            SetInformationJobObject(
                job.0,
                JobObjectExtendedLimitInformation,
                (&raw const info).cast(),
                std::mem::size_of_val(&info) as u32,
            )
        };
        if set == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn assign(&self, child: &std::process::Child) -> io::Result<()> {
        // SAFETY: a live job and the child's process handle, which std keeps open.
        if unsafe { AssignProcessToJobObject(self.0, child.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// How many processes are in the job now.
    fn active(&self) -> u32 {
        // SAFETY: plain data; zeroes are a valid value.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is the structure the class names, with its size.
        let ok = unsafe {
            QueryInformationJobObject(
                self.0,
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                std::mem::size_of_val(&info) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 { 0 } else { info.ActiveProcesses }
    }

    fn terminate(&self) {
        // SAFETY: a live job handle.
        unsafe { TerminateJobObject(self.0, KILLED) };
    }

    /// Waits up to `within` for the job to empty; what is left.
    fn wait_empty(&self, within: Duration) -> u32 {
        let until = Instant::now() + within;
        loop {
            let left = self.active();
            if left == 0 || Instant::now() >= until {
                return left;
            }
            std::thread::sleep(TICK);
        }
    }
}

/// Resumes every thread of the suspended process `pid` (a new process has one).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of the system's threads, closed below.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snap.is_null() || snap as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain data; zeroes are a valid value.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: walking the snapshot with an entry of the size it says.
    let mut more = unsafe { Thread32First(snap, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: the thread's id from the snapshot; the handle is closed right after.
            unsafe {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if !thread.is_null() {
                    if ResumeThread(thread) != u32::MAX {
                        resumed += 1;
                    }
                    CloseHandle(thread);
                }
            }
        }
        // SAFETY: as above.
        more = unsafe { Thread32Next(snap, &mut entry) } != 0;
    }
    // SAFETY: the snapshot opened above, closed once.
    unsafe { CloseHandle(snap) };
    if resumed == 0 {
        return Err(io::Error::other("cannot resume the command's first thread"));
    }
    Ok(())
}

/// Runs `cmd` to the end of its whole tree. `cmd` has its program, args, env and cwd set.
pub fn supervise(
    cmd: &mut Command,
    timeout: Duration,
    redactor: &Redactor,
    signals: &mut Signals,
    _spec: TreeSpec,
    on_spawn: &mut dyn FnMut(i32),
) -> Supervised {
    let started = Instant::now();
    let deadline = started + timeout;
    let (job, mut child) = match start(cmd) {
        Ok(c) => c,
        Err(e) => return not_started(e, started),
    };
    on_spawn(child.id() as i32);
    let rx = read_output(&mut child);
    let mut out = redactor.stream(Tail::default());
    let mut err = redactor.stream(Tail::default());
    let mut put = |(i, bytes): (usize, Vec<u8>)| {
        if i == 0 {
            out.push(&bytes);
        } else {
            err.push(&bytes);
        }
    };

    let (status, interrupt) = until_main_ends(&mut child, signals, deadline, &rx, &mut put);
    // End whatever is left of the tree: Ctrl-Break to the command's console group, the grace,
    // then the job ended.
    let left = job.active();
    let leftovers = if status.is_some() { left } else { 0 };
    let mut unkillable = 0;
    let mut terminated = false;
    if left > 0 {
        // SAFETY: a plain call; a command without a console does not hear it (then the grace
        // only waits).
        unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, child.id()) };
        if job.wait_empty(GRACE) > 0 {
            job.terminate();
            terminated = true;
            unkillable = job.wait_empty(KILL_WAIT);
        }
    }
    // The main process is gone with its job, or stays (unkillable) no longer than this.
    let status = status.or_else(|| ended_within(&mut child, KILL_WAIT));
    // Output still buffered in the pipes, for a moment at most.
    let drain_until = Instant::now() + DRAIN_WAIT;
    while let Ok(chunk) = rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
        put(chunk);
    }
    // What the main process chose, unless the runner's end of the job ended it.
    let ending = match status.and_then(|s| s.code()) {
        Some(code) if terminated && code as u32 == KILLED => Ending::Signaled(Signal::SIGKILL),
        Some(code) => Ending::Exited(code),
        None => Ending::Signaled(Signal::SIGKILL),
    };
    Supervised {
        ending,
        interrupt,
        leftover_processes: leftovers,
        unkillable,
        stdout: out.finish().finish(),
        stderr: err.finish().finish(),
        duration: started.elapsed(),
    }
}

/// `child`'s status once it has ended, waiting no longer than `within`.
fn ended_within(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(TICK),
            _ => return None,
        }
    }
}

/// The command started suspended, put in a new job, and let run.
fn start(cmd: &mut Command) -> io::Result<(Job, std::process::Child)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
    let job = Job::new()?;
    let mut child = cmd.spawn()?;
    if let Err(e) = job.assign(&child).and_then(|()| resume(child.id())) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok((job, child))
}

/// A thread per output pipe, each sending what it reads, tagged 0 (stdout) or 1 (stderr).
fn read_output(child: &mut std::process::Child) -> mpsc::Receiver<(usize, Vec<u8>)> {
    let (tx, rx) = mpsc::channel();
    let pipes: [Option<Box<dyn io::Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn io::Read + Send>),
    ];
    for (i, pipe) in pipes.into_iter().enumerate() {
        let Some(mut pipe) = pipe else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; READ_BYTES];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 || tx.send((i, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// Until the main process ends (its status), the deadline passes, or a stop comes (the
/// interrupt), passing on the output as it comes.
fn until_main_ends(
    child: &mut std::process::Child,
    signals: &mut Signals,
    deadline: Instant,
    rx: &mpsc::Receiver<(usize, Vec<u8>)>,
    put: &mut dyn FnMut((usize, Vec<u8>)),
) -> (Option<std::process::ExitStatus>, Option<Interrupt>) {
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (Some(status), None);
        }
        if let Some(sig) = signals.stop_requested() {
            return (None, Some(Interrupt::Stop(sig)));
        }
        let now = Instant::now();
        if now >= deadline {
            return (None, Some(Interrupt::Timeout));
        }
        match rx.recv_timeout((deadline - now).min(TICK)) {
            Ok(chunk) => put(chunk),
            // Both pipes closed: nothing more to read, the loop only waits.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep((deadline - now).min(TICK));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}
