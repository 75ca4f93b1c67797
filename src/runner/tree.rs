//! Finding every process of a run's command, wherever it went (docs/running.md).
//!
//! On Linux the runner is a child subreaper, so whatever escapes its process group is re-parented
//! to it. macOS has no subreaper, and a process that left with `setsid` and then lost its parent
//! hangs under launchd. So the runner also walks the process table: a process belongs to the run
//! when its parent does, when it sits in the command's process group or in a group or session that
//! a member led, or when its environment carries the run's marker (`AUTOMATION_RUN_ID=<run id>`,
//! which every descendant inherits, so even a double-forked daemon whose intermediate parent was
//! never seen is found).
//!
//! One trait, [`ProcessTable`], in front of two sources: `/proc` on Linux and libproc on macOS.
//! [`Walk::members`] is pure over a snapshot, and is what the runner and its keeper both use. This
//! module only reads the process table; it never signals.

use std::collections::BTreeSet;

/// One process, as the table shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
}

/// A source of processes.
pub trait ProcessTable {
    /// Every live (not zombie) process this user can see.
    fn snapshot(&self) -> Vec<Proc>;
    /// Whether `pid`'s environment holds exactly the entry `marker` (`NAME=value`).
    fn has_marker(&self, pid: i32, marker: &[u8]) -> bool;
}

/// The table of this machine.
pub fn system() -> &'static dyn ProcessTable {
    &System
}

/// The OS process table.
pub struct System;

#[cfg(target_os = "linux")]
impl ProcessTable for System {
    fn snapshot(&self) -> Vec<Proc> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                parse_stat(pid, &stat)
            })
            .collect()
    }

    fn has_marker(&self, pid: i32, marker: &[u8]) -> bool {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|entry| entry == marker))
    }
}

/// `pid (comm) state ppid pgrp session …`; comm may hold spaces and parentheses. Zombies and dead
/// processes are left out: they cannot be signalled into anything.
#[cfg(target_os = "linux")]
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    Some(Proc {
        pid,
        ppid: f.next()?.parse().ok()?,
        pgid: f.next()?.parse().ok()?,
        sid: f.next()?.parse().ok()?,
    })
}

#[cfg(target_os = "macos")]
impl ProcessTable for System {
    fn snapshot(&self) -> Vec<Proc> {
        use nix::libc;
        // SAFETY: a null buffer asks for the number of pids.
        let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
        if n <= 0 {
            return Vec::new();
        }
        // Room for processes started since the count.
        let mut pids = vec![0 as libc::c_int; n as usize + 64];
        let bytes = (pids.len() * std::mem::size_of::<libc::c_int>()) as libc::c_int;
        // SAFETY: the buffer holds `bytes` bytes; the call writes at most that many.
        let n = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
        if n <= 0 {
            return Vec::new();
        }
        pids.truncate(n as usize);
        pids.into_iter()
            .filter(|&pid| pid > 0)
            .filter_map(|pid| {
                // SAFETY: proc_bsdinfo is plain data; zeroes are a valid value.
                let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
                // SAFETY: `info` is `size` bytes.
                let got = unsafe {
                    libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size)
                };
                // SZOMB = 5: a zombie cannot be signalled into anything.
                if got != size || info.pbi_status == 5 {
                    return None;
                }
                // SAFETY: getsid only reads.
                let sid = unsafe { libc::getsid(pid) };
                Some(Proc {
                    pid,
                    ppid: info.pbi_ppid as i32,
                    pgid: info.pbi_pgid as i32,
                    sid,
                })
            })
            .collect()
    }

    fn has_marker(&self, pid: i32, marker: &[u8]) -> bool {
        use nix::libc;
        // KERN_PROCARGS2: argc (int), the executable path, NULs, argv, then the environment.
        let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
        let mut size: libc::size_t = 256 * 1024;
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds `size` bytes and the call updates `size` to what it wrote.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                3,
                buf.as_mut_ptr().cast(),
                &mut size,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 || size < 4 {
            return false;
        }
        buf.truncate(size);
        buf[4..].split(|&b| b == 0).any(|entry| entry == marker)
    }
}

/// What a walk has learned about a run's tree so far. Kept across sweeps, so a process whose
/// parent has since exited is still recognised by the group or session that parent led.
#[derive(Debug)]
pub struct Walk {
    runner: Proc,
    marker: Vec<u8>,
    /// Whether any member's group and session make a process a member (the runner's own walk),
    /// or only a group or session a member leads (a stranger's walk: see [`Walk::survivors`]).
    by_shared: bool,
    groups: BTreeSet<i32>,
    sessions: BTreeSet<i32>,
    pids: BTreeSet<i32>,
    excluded: BTreeSet<i32>,
}

impl Walk {
    /// A walk for the command whose process group is `group` (when known), started by `runner`,
    /// whose environment holds `marker`.
    pub fn new(runner: Proc, group: Option<i32>, marker: Vec<u8>) -> Self {
        Self {
            runner,
            marker,
            by_shared: true,
            groups: group.into_iter().collect(),
            sessions: BTreeSet::new(),
            pids: BTreeSet::new(),
            excluded: BTreeSet::new(),
        }
    }

    /// A walk for what a killed run (`marker`) left, made by another process (the next firing):
    /// it knows nothing of that run's runner, so a group or session makes a process a member only
    /// when a member leads it — never one a member merely shares (the terminal session a person's
    /// run came from holds the person's shell).
    pub fn survivors(marker: Vec<u8>) -> Self {
        Self {
            by_shared: false,
            ..Self::new(me(), None, marker)
        }
    }

    /// The runner, as the walk sees it (its own process, group and session are never members).
    pub fn runner(&self) -> Proc {
        self.runner
    }

    /// Never counts `pid` as a member (the keeper excludes itself).
    pub fn exclude(&mut self, pid: i32) {
        self.excluded.insert(pid);
    }

    /// Every live member of the run in `table` (never the runner itself), and what it learned.
    pub fn members(&mut self, table: &dyn ProcessTable) -> Vec<i32> {
        let procs = table.snapshot();
        let mut ours: BTreeSet<i32> = BTreeSet::new();
        let (runner, excluded) = (self.runner.pid, self.excluded.clone());
        let candidate = move |p: &Proc, ours: &BTreeSet<i32>| {
            p.pid != runner && p.pid > 1 && !excluded.contains(&p.pid) && !ours.contains(&p.pid)
        };
        loop {
            // A fixpoint: membership spreads along parents, groups and sessions.
            loop {
                let before = ours.len();
                for p in &procs {
                    if !candidate(p, &ours) {
                        continue;
                    }
                    let related = p.ppid == self.runner.pid
                        || ours.contains(&p.ppid)
                        || self.pids.contains(&p.ppid)
                        || self.groups.contains(&p.pgid)
                        || self.sessions.contains(&p.sid)
                        || self.pids.contains(&p.sid)
                        || self.pids.contains(&p.pgid);
                    if related {
                        self.learn(p);
                        ours.insert(p.pid);
                    }
                }
                if ours.len() == before {
                    break;
                }
            }
            // The marker costs a read per process: only for those nothing else claimed. A find
            // takes its relatives in with it (another round of the fixpoint).
            let marked: Vec<Proc> = procs
                .iter()
                .filter(|p| candidate(p, &ours) && table.has_marker(p.pid, &self.marker))
                .copied()
                .collect();
            if marked.is_empty() {
                return ours.into_iter().collect();
            }
            for p in &marked {
                self.learn(p);
                ours.insert(p.pid);
            }
        }
    }

    fn learn(&mut self, p: &Proc) {
        self.pids.insert(p.pid);
        if !self.by_shared {
            return;
        }
        // The command shares the runner's session (and a command may share nothing else with it):
        // the runner's own group and session never make a process a member.
        if p.pgid != self.runner.pgid {
            self.groups.insert(p.pgid);
        }
        if p.sid != self.runner.sid {
            self.sessions.insert(p.sid);
        }
    }
}

/// The live children of `pid`. On Linux one read of `/proc/PID/task/PID/children` when the kernel
/// has it, else (and elsewhere) a walk of the table.
pub fn children_of(pid: i32) -> Vec<i32> {
    #[cfg(target_os = "linux")]
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        return text
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    system()
        .snapshot()
        .into_iter()
        .filter(|p| p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

/// Windows: the run's Job Object holds every process of the command and ends them all when the
/// runner's handle closes, so nothing is ever found outside it: the table has nothing to show.
#[cfg(windows)]
impl ProcessTable for System {
    fn snapshot(&self) -> Vec<Proc> {
        Vec::new()
    }

    fn has_marker(&self, _pid: i32, _marker: &[u8]) -> bool {
        false
    }
}

/// This process, as the table sees it (Windows has no groups or sessions to show).
#[cfg(windows)]
pub fn me() -> Proc {
    let pid = std::process::id() as i32;
    Proc {
        pid,
        ppid: 0,
        pgid: pid,
        sid: 0,
    }
}

/// This process, as the table sees it.
#[cfg(unix)]
pub fn me() -> Proc {
    let pid = nix::unistd::getpid();
    Proc {
        pid: pid.as_raw(),
        ppid: nix::unistd::getppid().as_raw(),
        pgid: nix::unistd::getpgrp().as_raw(),
        sid: nix::unistd::getsid(None).map_or(0, |s| s.as_raw()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A table from a list, with the processes whose environment holds the marker.
    struct Fake {
        procs: Vec<Proc>,
        marked: Vec<i32>,
    }

    impl ProcessTable for Fake {
        fn snapshot(&self) -> Vec<Proc> {
            self.procs.clone()
        }
        fn has_marker(&self, pid: i32, _: &[u8]) -> bool {
            self.marked.contains(&pid)
        }
    }

    fn p(pid: i32, ppid: i32, pgid: i32, sid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            sid,
        }
    }

    const RUNNER: Proc = Proc {
        pid: 100,
        ppid: 1,
        pgid: 100,
        sid: 50,
    };

    #[test]
    fn members_by_parent_group_session_and_marker() {
        let table = Fake {
            procs: vec![
                RUNNER,
                p(1, 0, 1, 1),
                p(50, 1, 50, 50), // the runner's shell: same session, never a member
                p(101, 100, 101, 50), // the command (its own group, the runner's session)
                p(102, 101, 101, 50), // a child in the command's group
                p(103, 1, 103, 103), // setsid escapee re-parented to init, led its own session
                p(104, 1, 103, 103), // ... and its child
                p(105, 1, 105, 105), // double-forked daemon: nothing links it but the marker
                p(106, 105, 106, 105), // the daemon's child: found through the daemon's session
                p(107, 100, 100, 50), // excluded by pid
                p(200, 1, 200, 200), // unrelated
                p(201, 50, 201, 50), // unrelated, in the runner's session
            ],
            marked: vec![105],
        };
        let mut walk = Walk::new(RUNNER, Some(101), b"AUTOMATION_RUN_ID=x".to_vec());
        walk.exclude(107);
        assert_eq!(walk.members(&table), vec![101, 102, 105, 106]);
        // 103 was a member the walk saw earlier (before its parent died): its session is known.
        walk.learn(&p(103, 102, 103, 103));
        let mut got = walk.members(&table);
        got.sort();
        assert_eq!(got, vec![101, 102, 103, 104, 105, 106]);
        let by_pid: BTreeMap<i32, Proc> = table.procs.iter().map(|p| (p.pid, *p)).collect();
        assert!(!got.contains(&by_pid[&200].pid) && !got.contains(&201) && !got.contains(&50));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_linux_table_sees_this_process() {
        let me = me();
        let table = system().snapshot();
        assert!(table.contains(&me), "{me:?} not in the table");
        assert!(parse_stat(7, "7 (a) b) c) R 1 7 7 0").is_some_and(|p| p.ppid == 1));
        assert!(parse_stat(7, "7 (z) Z 1 7 7 0").is_none());
    }
}
