//! Machine-wide CPU time from `/proc/stat`, for the overhead benchmark.
//!
//! On a shared VM the tps of a CPU-bound run follows the CPU the host
//! lends it: the `steal` column says how much it took back. Printing the
//! steal and idle share of each window, and transactions per busy
//! CPU-second beside tps, shows whether a window's tps moved because the
//! probes cost something or because the host did.

/// Cumulative CPU time of all CPUs, in clock ticks (USER_HZ).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time the hypervisor ran something else while this VM wanted a CPU.
    pub steal: u64,
}

impl CpuTimes {
    /// The aggregate `cpu` line of `/proc/stat` now; None where it cannot
    /// be read or parsed (the benchmark then prints tps alone).
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the first line of a `/proc/stat` text:
    /// `cpu user nice system idle iowait irq softirq steal ...`.
    pub fn parse(stat: &str) -> Option<Self> {
        let mut fields = stat.lines().next()?.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
        let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = v[..] else {
            return None;
        };
        Some(Self {
            busy: user + nice + system + irq + softirq,
            idle: idle + iowait,
            steal,
        })
    }

    /// What accrued from `earlier` to `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            busy: self.busy.saturating_sub(earlier.busy),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    fn total(self) -> u64 {
        self.busy + self.idle + self.steal
    }

    /// Share of the interval's CPU time that was stolen, in percent.
    pub fn steal_pct(self) -> f64 {
        pct(self.steal, self.total())
    }

    /// Share of the interval's CPU time left idle, in percent.
    pub fn idle_pct(self) -> f64 {
        pct(self.idle, self.total())
    }

    /// Busy CPU-seconds in the interval.
    pub fn busy_seconds(self) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        self.busy as f64 / if hz > 0 { hz as f64 } else { 100.0 }
    }
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_line_and_subtracts() {
        let a = CpuTimes::parse("cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                busy: 160,
                idle: 820,
                steal: 10
            }
        );
        let b = CpuTimes::parse("cpu  200 5 90 840 20 3 2 30 0 0\n").unwrap();
        let d = b.since(a);
        assert_eq!((d.busy, d.idle, d.steal), (140, 40, 20));
        assert!((d.steal_pct() - 10.0).abs() < 1e-9);
        assert!((d.idle_pct() - 20.0).abs() < 1e-9);
    }

    #[test]
    fn refuses_what_is_not_a_cpu_line() {
        assert_eq!(CpuTimes::parse("intr 1 2 3\n"), None);
        assert_eq!(CpuTimes::parse("cpu 1 2 3\n"), None);
        assert_eq!(CpuTimes::parse(""), None);
    }
}
