//! `[limits]` as the runner sees them (docs/policies.md). A unit hands them to the service
//! manager, which enforces them on the whole tree; a person's `run` has no unit, so the runner
//! applies what a process can set for its children itself — nice, the I/O class and the memory
//! limit as an address-space rlimit — and says which limits only the unit enforces. It also tells
//! a run the kernel killed for memory (its cgroup's `oom_kill` count rose) from any other death.

#[cfg(unix)]
use std::io;
use std::path::PathBuf;

use crate::definition::{IoClass, Limits};

/// What a person's run applies to its command, and how it is said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByHand {
    nice: Option<i32>,
    io: Option<IoClass>,
    memory: Option<u64>,
}

impl ByHand {
    /// What the runner can apply of `limits`, if any.
    pub fn of(limits: &Limits) -> Option<ByHand> {
        let by_hand = ByHand {
            nice: limits.nice.map(i32::from),
            io: limits.io,
            memory: limits.memory_max.as_ref().map(|m| m.bytes),
        };
        (by_hand.nice.is_some() || by_hand.io.is_some() || by_hand.memory.is_some())
            .then_some(by_hand)
    }

    /// Whether it limits memory (a failure may then be the limit's).
    pub fn limits_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// One line for stderr: what this run applies, and what only the unit enforces.
    pub fn words(&self, limits: &Limits) -> String {
        let mut applied = Vec::new();
        if let Some(n) = self.nice {
            applied.push(format!("nice {n}"));
        }
        if let Some(io) = self.io {
            applied.push(format!("io {}", io.as_str()));
        }
        if let Some(m) = &limits.memory_max {
            applied.push(format!(
                "memory_max {} per process (an address-space limit, stricter than the unit's)",
                m.written
            ));
        }
        let mut unit_only = Vec::new();
        if limits.cpu_quota.is_some() {
            unit_only.push("cpu_quota");
        }
        if limits.tasks_max.is_some() {
            unit_only.push("tasks_max");
        }
        let mut line = format!("limits applied to this run: {}", applied.join(", "));
        if !unit_only.is_empty() {
            line.push_str(&format!(
                "; {} only its installed unit enforces",
                unit_only.join(" and ")
            ));
        }
        line
    }

    /// Applies it to the calling process; run in the child between fork and exec, so only
    /// system calls (async-signal-safe).
    #[cfg(unix)]
    pub fn apply(&self) -> io::Result<()> {
        if let Some(n) = self.nice {
            // SAFETY: setpriority only changes this process's nice value.
            if unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, n) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(target_os = "linux")]
        if let Some(io_class) = self.io {
            // ioprio_set(IOPRIO_WHO_PROCESS, 0, class << 13 | level): idle 3, best effort 2.
            let value = match io_class {
                IoClass::Idle => 3 << 13,
                IoClass::Low => (2 << 13) | 7,
                IoClass::Normal => (2 << 13) | 4,
            };
            // SAFETY: ioprio_set only changes this process's I/O priority.
            if unsafe { nix::libc::syscall(nix::libc::SYS_ioprio_set, 1, 0, value) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(bytes) = self.memory {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, bytes, bytes)
                .map_err(io::Error::from)?;
        }
        Ok(())
    }
}

/// What a run's limits are watched with: what a person's run applies itself, and the unit's
/// count of kills for memory before the command.
pub struct Watch {
    by_hand: Option<ByHand>,
    oom_before: Option<u64>,
}

impl Watch {
    /// Before the spawn: a person's run applies what a process can of `[limits]` to `cmd` (a
    /// unit's manager does it) and says so; an unattended one with `memory_max` reads its
    /// cgroup's count (a person's run shares the cgroup of their terminal, whose count says
    /// nothing of this run).
    pub fn before(
        def: &crate::definition::Definition,
        trigger: crate::runlog::Trigger,
        cmd: &mut std::process::Command,
    ) -> Watch {
        let limits = &def.policy.limits;
        let by_hand = (!trigger.unattended())
            .then(|| ByHand::of(limits))
            .flatten();
        // Windows: said, not applied (docs/windows.md).
        #[cfg(windows)]
        let by_hand = by_hand.and_then(|_| {
            errln!(
                "automations: {}: [limits] are not applied to a run on Windows",
                def.name
            );
            let _ = &cmd;
            None::<ByHand>
        });
        if let Some(b) = &by_hand {
            errln!("automations: {}: {}", def.name, b.words(limits));
            #[cfg(unix)]
            {
                let b = b.clone();
                // SAFETY: between fork and exec the child makes system calls only (`ByHand::apply`).
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(cmd, move || b.apply());
                }
            }
        }
        let oom_before = limits
            .memory_max
            .as_ref()
            .filter(|_| trigger.unattended())
            .and_then(|_| oom_kills());
        Watch {
            by_hand,
            oom_before,
        }
    }

    /// After the run: a failed run the kernel killed for memory (the count rose), or a person's
    /// run whose program could not get memory under the rlimit, is `out_of_memory`.
    pub fn after(
        &self,
        def: &crate::definition::Definition,
        finished: &mut crate::runlog::Finished,
    ) {
        let Some(m) = &def.policy.limits.memory_max else {
            return;
        };
        if finished.outcome != crate::runlog::Outcome::Failed {
            return;
        }
        let killed = self
            .oom_before
            .is_some_and(|b| oom_kills().is_some_and(|a| a > b));
        let said = self.by_hand.as_ref().is_some_and(ByHand::limits_memory)
            && said_out_of_memory(&finished.stderr_tail);
        let how = match (killed, said) {
            (true, _) => "killed by the kernel",
            (false, true) => "could not get more memory",
            (false, false) => return,
        };
        finished.error = Some(crate::runlog::ErrorInfo {
            class: "out_of_memory".into(),
            detail: format!("{how}: its tree reached memory_max ({})", m.written),
        });
    }
}

/// Whether a failed run under a memory rlimit failed for it: its program said what a refused
/// allocation makes it say (Python's `MemoryError`, the C library's `ENOMEM` text "Cannot allocate
/// memory", Rust's "memory allocation of N bytes failed"). Not a program's own "out of memory",
/// which it may print for any reason of its own (a cache full, a GPU).
pub fn said_out_of_memory(stderr_tail: &str) -> bool {
    [
        "MemoryError",
        "Cannot allocate memory",
        "memory allocation of ",
    ]
    .iter()
    .any(|w| stderr_tail.contains(w))
}

/// The kernel's count of processes killed for memory in the runner's own cgroup, when it can be
/// read: under a unit with `MemoryMax=`, the service's. cgroup v2 `memory.events`; on a hybrid
/// hierarchy, where memory is a v1 controller, `memory.oom_control`.
pub fn oom_kills() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let group = |prefix: &str| {
        own.lines()
            .find_map(|l| l.split_once(prefix).map(|(_, p)| p.trim_start_matches('/')))
    };
    let mut places: Vec<PathBuf> = Vec::new();
    if let Some(v1) = group(":memory:") {
        places.push(
            PathBuf::from("/sys/fs/cgroup/memory")
                .join(v1)
                .join("memory.oom_control"),
        );
    }
    if let Some(v2) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        let v2 = v2.trim_start_matches('/');
        for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            places.push(PathBuf::from(mount).join(v2).join("memory.events"));
        }
    }
    places.iter().find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        text.lines().find_map(|l| {
            l.strip_prefix("oom_kill ")
                .and_then(|n| n.trim().parse().ok())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::policy::Memory;

    #[test]
    fn a_person_s_run_says_what_it_applies_and_what_only_the_unit_does() {
        let limits = Limits {
            memory_max: Some(Memory {
                written: "64M".into(),
                bytes: 64 << 20,
            }),
            cpu_quota: Some(50),
            nice: Some(10),
            io: Some(IoClass::Idle),
            tasks_max: Some(64),
        };
        let b = ByHand::of(&limits).expect("something to apply");
        assert!(b.limits_memory());
        let words = b.words(&limits);
        assert!(
            words.contains("nice 10, io idle, memory_max 64M per process"),
            "{words}"
        );
        assert!(
            words.ends_with("cpu_quota and tasks_max only its installed unit enforces"),
            "{words}"
        );
        let unit_only = Limits {
            cpu_quota: Some(50),
            ..Limits::default()
        };
        assert_eq!(ByHand::of(&unit_only), None);
    }

    #[test]
    fn out_of_memory_is_read_from_what_programs_say() {
        assert!(said_out_of_memory("Traceback …\nMemoryError\n"));
        assert!(said_out_of_memory(
            "dd: memory exhausted: Cannot allocate memory"
        ));
        assert!(said_out_of_memory(
            "memory allocation of 1048576 bytes failed"
        ));
        assert!(!said_out_of_memory("error: disk full"));
        // Regression: a program's own words were taken for the limit's.
        assert!(!said_out_of_memory(
            "cache: out of memory for new entries\n"
        ));
    }
}
