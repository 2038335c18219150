//! A process's threads as the scheduler saw them, with no probe at all:
//! each thread's CPU time and run-queue time (runnable, waiting for a
//! CPU), from `/proc/<pid>/task/<tid>/schedstat`. Read every tick beside
//! the probes' maps, so each line says how much of the server's thread
//! time went to waiting for a CPU: on a host with fewer cores than busy
//! threads that, not the commit, is where the clients' latency goes.
use std::collections::HashMap;

/// Cumulative CPU and run-queue ns per live thread at one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadTimes {
    by_tid: HashMap<u32, (u64, u64)>,
}

/// Time summed over a process's threads between two reads, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedTime {
    pub cpu_ns: u64,
    pub runq_ns: u64,
}

impl std::ops::AddAssign for SchedTime {
    fn add_assign(&mut self, o: SchedTime) {
        self.cpu_ns += o.cpu_ns;
        self.runq_ns += o.runq_ns;
    }
}

impl SchedTime {
    pub fn cpu_ms(&self) -> f64 {
        self.cpu_ns as f64 / 1e6
    }

    pub fn runq_ms(&self) -> f64 {
        self.runq_ns as f64 / 1e6
    }

    /// From milliseconds, as an interval's `server_cpu_ms` and
    /// `server_runq_ms` carry them.
    pub fn from_ms(cpu_ms: f64, runq_ms: f64) -> SchedTime {
        SchedTime {
            cpu_ns: (cpu_ms * 1e6) as u64,
            runq_ns: (runq_ms * 1e6) as u64,
        }
    }

    /// Of the threads' runnable time (running or waiting to), the part
    /// spent waiting for a CPU.
    pub fn runq_share(&self) -> Option<f64> {
        let all = self.cpu_ns + self.runq_ns;
        (all > 0).then(|| self.runq_ns as f64 / all as f64)
    }
}

/// `schedstat`'s first two fields: ns on a CPU, ns waiting on a run
/// queue (the third, timeslices, is not needed).
fn parse(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace().map(str::parse::<u64>);
    Some((f.next()?.ok()?, f.next()?.ok()?))
}

impl ThreadTimes {
    /// Every thread of `pid` now; empty where the process is gone or the
    /// kernel keeps no schedstat (CONFIG_SCHED_INFO off).
    pub fn read(pid: u32) -> ThreadTimes {
        let mut by_tid = HashMap::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return ThreadTimes::default();
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let path = t.path().join("schedstat");
            if let Some(v) = std::fs::read_to_string(path)
                .ok()
                .as_deref()
                .and_then(parse)
            {
                by_tid.insert(tid, v);
            }
        }
        ThreadTimes { by_tid }
    }

    pub fn is_empty(&self) -> bool {
        self.by_tid.is_empty()
    }

    /// What the threads did since `prev`: a thread new since then counts
    /// all its time (it began inside the interval); one that ended took
    /// its last part with it.
    pub fn since(&self, prev: &ThreadTimes) -> SchedTime {
        let mut out = SchedTime::default();
        for (tid, &(cpu, runq)) in &self.by_tid {
            let (c0, r0) = prev.by_tid.get(tid).copied().unwrap_or((0, 0));
            out.cpu_ns += cpu.saturating_sub(c0);
            out.runq_ns += runq.saturating_sub(r0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_give_cpu_and_run_queue() {
        assert_eq!(parse("99539 6670803 3\n"), Some((99539, 6670803)));
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn new_threads_count_whole_and_ended_ones_drop_out() {
        let prev = ThreadTimes {
            by_tid: HashMap::from([(1, (100, 10)), (2, (50, 5))]),
        };
        let cur = ThreadTimes {
            by_tid: HashMap::from([(1, (180, 30)), (3, (40, 4))]),
        };
        let d = cur.since(&prev);
        assert_eq!((d.cpu_ns, d.runq_ns), (120, 24));
        assert!((d.runq_share().unwrap() - 24.0 / 144.0).abs() < 1e-12);
    }

    /// This process's own threads: 20 ms of CPU burnt here, by the
    /// thread's own clock, shows up in the threads' schedstat sum.
    #[test]
    fn a_busy_thread_of_this_process_is_seen_on_a_cpu() {
        let thread_cpu_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let me = std::process::id();
        let before = ThreadTimes::read(me);
        assert!(!before.is_empty(), "no /proc/{me}/task/*/schedstat");
        let (c0, t0) = (thread_cpu_ns(), std::time::Instant::now());
        let mut x = 0u64;
        while thread_cpu_ns() - c0 < 20_000_000 && t0.elapsed().as_secs() < 30 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let d = ThreadTimes::read(me).since(&before);
        assert!(d.cpu_ns >= 19_000_000, "{d:?}");
    }
}
