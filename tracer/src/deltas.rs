//! Growth between two cumulative snapshots, and what histograms say:
//! log2-ns histograms interpolated, exact size histograms read as sizes
//! that occurred. Below `sample` and `binlog`, which both read them.
use tracer_ebpf::{Counter, HistKind, HIST_BUCKETS};

use crate::probes::Snapshot;

/// A log2-ns histogram (bucket i holds [2^i, 2^(i+1)) ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LogHist(pub [u64; HIST_BUCKETS]);

impl LogHist {
    pub fn since(&self, earlier: &LogHist) -> LogHist {
        let mut out = [0; HIST_BUCKETS];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.0[i].saturating_sub(earlier.0[i]);
        }
        LogHist(out)
    }

    pub fn add(&mut self, other: &LogHist) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The q-quantile in microseconds, linearly interpolated inside its
    /// bucket; `None` when empty. Accurate to the bucket (a factor of 2).
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (q * total as f64).max(1.0);
        let mut seen = 0.0;
        for (i, &n) in self.0.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let next = seen + n as f64;
            if next >= rank {
                let lo = if i == 0 { 0.0 } else { (1u64 << i) as f64 };
                let hi = (1u64 << (i + 1)) as f64;
                let frac = (rank - seen) / n as f64;
                return Some((lo + frac * (hi - lo)) / 1000.0);
            }
            seen = next;
        }
        None
    }
}

/// Percentiles of an exact size histogram (`sizes[n]` groups of size
/// `n`): the smallest size with at least `q` of the groups at or below
/// it, so always a size that occurred.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SizeQuantiles {
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
}

impl SizeQuantiles {
    pub fn of(sizes: &[u64]) -> Self {
        let total: u64 = sizes.iter().sum();
        let q = |q: f64| {
            let rank = ((q * total as f64).ceil() as u64).max(1);
            let mut seen = 0;
            sizes.iter().enumerate().find_map(|(n, c)| {
                seen += c;
                (total > 0 && seen >= rank).then_some(n as u64)
            })
        };
        SizeQuantiles {
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            max: sizes.iter().rposition(|c| *c > 0).map(|n| n as u64),
        }
    }
}

/// A counter's growth from `prev` to `cur`.
pub fn counter_since(prev: &Snapshot, cur: &Snapshot, c: Counter) -> u64 {
    cur.counter(c).saturating_sub(prev.counter(c))
}

/// A histogram's growth from `prev` to `cur`.
pub fn hist_since(prev: &Snapshot, cur: &Snapshot, k: HistKind) -> LogHist {
    LogHist(cur.hists[k as usize]).since(&LogHist(prev.hists[k as usize]))
}

pub fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// The q-quantile of a fine histogram's growth, in µs, interpolated in
/// its slot.
pub fn fine_quantile_us(slots: &[u64], q: f64) -> Option<f64> {
    let total: u64 = slots.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).max(1.0);
    let mut seen = 0.0;
    for (i, &n) in slots.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let next = seen + n as f64;
        if next >= rank {
            let lo = tracer_ebpf::fine_slot_low(i) as f64;
            let hi = if i + 1 < tracer_ebpf::FINE_SLOTS {
                tracer_ebpf::fine_slot_low(i + 1) as f64
            } else {
                lo
            };
            let hi = hi.max(lo);
            return Some((lo + (rank - seen) / n as f64 * (hi - lo)) / 1000.0);
        }
        seen = next;
    }
    None
}
