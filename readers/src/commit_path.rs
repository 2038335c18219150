//! What a sweep's records keep of a commit path: the name of its
//! unattributed rest and the scheduler's split of a mean.

/// The rest of the commits' time: the server's own work and any wait no
/// probe times.
pub const UNATTRIBUTED: &str = "unattributed";

/// Where a mean time went by the scheduler's accounting, µs per commit:
/// the committing thread's CPU time and run-queue time over the same
/// interval, read from the kernel's own counters at the stage's ends;
/// blocked is the rest of the wall time (never below 0).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SchedSplit {
    pub on_cpu_us: f64,
    pub run_queue_us: f64,
    pub blocked_us: f64,
}

impl SchedSplit {
    /// The split of `ns` wall, `cpu` and `runq` ns summed over `n`
    /// commits; None without the split (no CPU time at all: every commit
    /// runs some) or without commits.
    pub fn of(ns: u64, cpu: u64, runq: u64, n: u64, measured: bool) -> Option<SchedSplit> {
        if !measured || n == 0 {
            return None;
        }
        let per = |v: u64| v as f64 / n as f64 / 1000.0;
        Some(SchedSplit {
            on_cpu_us: per(cpu),
            run_queue_us: per(runq),
            blocked_us: per(ns.saturating_sub(cpu + runq)),
        })
    }

    /// The same split scaled by `f` (a part of a stage).
    pub fn scaled(self, f: f64) -> SchedSplit {
        SchedSplit {
            on_cpu_us: self.on_cpu_us * f,
            run_queue_us: self.run_queue_us * f,
            blocked_us: self.blocked_us * f,
        }
    }

    /// On a CPU, on a run queue, blocked: each one's part of the three.
    pub fn shares(&self) -> [f64; 3] {
        let sum = self.on_cpu_us + self.run_queue_us + self.blocked_us;
        if sum <= 0.0 {
            return [0.0; 3];
        }
        [
            self.on_cpu_us / sum,
            self.run_queue_us / sum,
            self.blocked_us / sum,
        ]
    }
}
