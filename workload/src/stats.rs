//! Per-interval samples and the run summary, from hdrhistogram latencies
//! (microsecond resolution, 3 significant figures).
use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// A latency histogram in microseconds, up to an hour.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50_us: h.value_at_quantile(0.50),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}

/// One tick of the workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct IntervalSample {
    /// 1-based tick number.
    pub tick: u64,
    /// Seconds since the workload started, at the end of the interval.
    pub elapsed_s: f64,
    pub interval_s: f64,
    /// True for ticks inside `--warmup` (excluded from the summary).
    pub warmup: bool,
    /// Transactions committed in the interval.
    pub txns: u64,
    /// Commits that wrote something: what commits/flush divides. Equal to
    /// `txns` for the single-statement workloads; TPC-C's Delivery commits
    /// per district, its reads and rollbacks write nothing.
    pub commits: u64,
    pub tps: f64,
    pub latency: Latency,
    /// Failed transactions (not retried), by error code.
    pub errors: u64,
    /// Deadlock / lock-wait-timeout retries.
    pub retries: u64,
    /// TPC-C's per-type figures (tpcc-mysql's interval line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<crate::tpcc::report::TpccInterval>,
}

/// The end-of-run record over the measured (post-warmup) window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    pub scenario: String,
    pub threads: u32,
    /// Thread per client, or one event loop (see `engine`).
    pub io_model: IoModel,
    pub measured_s: f64,
    pub warmup_s: f64,
    /// All transactions, warmup included.
    pub total_txns: u64,
    /// Transactions in the measured window.
    pub txns: u64,
    /// Writing commits in the measured window (see [`IntervalSample::commits`]).
    pub commits: u64,
    pub mean_tps: f64,
    /// Standard deviation of per-interval tps (measured intervals).
    pub tps_stddev: f64,
    pub intervals: u64,
    pub latency: Latency,
    pub errors: u64,
    pub retries: u64,
    /// Errors by code ("1213", "io", ...), whole run.
    pub errors_by_code: BTreeMap<String, u64>,
    /// For `--total-rows`: rows inserted and the wall time it took.
    pub rows_done: Option<u64>,
    pub rows_elapsed_s: Option<f64>,
    /// Commits of each client over the whole run (warmup included), in
    /// client order: shows a client starved at thousands of clients.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_commits: Vec<u64>,
    /// This process's peak resident memory at the end of the run: clients,
    /// histograms (and, traced, the probes' maps).
    pub peak_rss_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<crate::tpcc::report::TpccSummary>,
}

/// The clock both drivers sample on: tick numbers, interval lengths, and
/// the one rule for which intervals are warmup.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub start: std::time::Instant,
    last: std::time::Instant,
    tick: u64,
    warmup: std::time::Duration,
}

/// One interval as [`Clock::end_interval`] saw it.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    pub tick: u64,
    pub elapsed: std::time::Duration,
    pub interval_s: f64,
    /// An interval that began inside the warmup is warmup.
    pub warmup: bool,
}

impl Tick {
    /// `n` per second over this interval.
    pub fn rate(&self, n: u64) -> f64 {
        if self.interval_s > 0.0 {
            n as f64 / self.interval_s
        } else {
            0.0
        }
    }

    /// True once the warmup is over at the end of this interval: the
    /// measured window starts here.
    pub fn warmup_over(&self, warmup: std::time::Duration) -> bool {
        past_warmup(self.elapsed, warmup)
    }
}

/// Whether `elapsed` is past `warmup`, a millisecond early counting: a
/// tick set to end on the warmup fires a hair either side of it. The one
/// rule for a tick, the clock asked before a sample, and an interval's
/// own warmup mark.
fn past_warmup(elapsed: std::time::Duration, warmup: std::time::Duration) -> bool {
    elapsed + std::time::Duration::from_millis(1) >= warmup
}

impl Clock {
    pub fn new(warmup: std::time::Duration) -> Clock {
        let now = std::time::Instant::now();
        Clock {
            start: now,
            last: now,
            tick: 0,
            warmup,
        }
    }

    /// Whether an interval ended now would end the warmup: the measured
    /// window would start here ([`Tick::warmup_over`]), asked before the
    /// sample that ends it, so a caller can read other counters first.
    pub fn warmup_over_now(&self) -> bool {
        past_warmup(self.start.elapsed(), self.warmup)
    }

    /// Ends the current interval now.
    pub fn end_interval(&mut self) -> Tick {
        let now = std::time::Instant::now();
        let interval_s = (now - self.last).as_secs_f64();
        let elapsed = now - self.start;
        self.last = now;
        self.tick += 1;
        let began = elapsed.saturating_sub(std::time::Duration::from_secs_f64(interval_s));
        Tick {
            tick: self.tick,
            elapsed,
            interval_s,
            warmup: !past_warmup(began, self.warmup),
        }
    }
}

/// The measured (post-warmup) part of a run's samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub measured_s: f64,
    pub txns: u64,
    pub mean_tps: f64,
    /// Of the full intervals' tps: the partial last one, cut by the stop,
    /// is in the totals but not in the spread.
    pub tps_stddev: f64,
    pub intervals: u64,
    /// Every sample's transactions, warmup included.
    pub total_txns: u64,
    pub errors: u64,
    pub retries: u64,
}

impl Window {
    pub fn of(samples: &[IntervalSample]) -> Window {
        let measured: Vec<&IntervalSample> = samples.iter().filter(|s| !s.warmup).collect();
        let full = measured.len().saturating_sub(1);
        let tps: Vec<f64> = measured[..full].iter().map(|s| s.tps).collect();
        let (_, tps_stddev) = mean_stddev(&tps);
        let measured_s: f64 = measured.iter().map(|s| s.interval_s).sum();
        let txns: u64 = measured.iter().map(|s| s.txns).sum();
        Window {
            measured_s,
            txns,
            mean_tps: if measured_s > 0.0 {
                txns as f64 / measured_s
            } else {
                0.0
            },
            tps_stddev,
            intervals: measured.len() as u64,
            total_txns: samples.iter().map(|s| s.txns).sum(),
            errors: samples.iter().map(|s| s.errors).sum(),
            retries: samples.iter().map(|s| s.retries).sum(),
        }
    }
}

impl Summary {
    /// "1213: 3, io: 1": the errors by code, for a summary line.
    pub fn error_codes(&self) -> String {
        self.errors_by_code
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Mean and population standard deviation.
pub fn mean_stddev(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// How the workers talk to the server (see `engine`'s module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoModel {
    Threads,
    EventLoop,
}

impl IoModel {
    pub fn for_clients(clients: u32) -> IoModel {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if clients as usize <= cores {
            IoModel::Threads
        } else {
            IoModel::EventLoop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_monotone() {
        let mut h = new_hist();
        for v in 1..=10_000u64 {
            h.record(v * 7 % 9973 + 1).unwrap();
        }
        let l = Latency::of(&h);
        assert!(
            l.p50_us <= l.p95_us && l.p95_us <= l.p99_us && l.p99_us <= l.max_us,
            "{l:?}"
        );
        assert_eq!(Latency::of(&new_hist()), Latency::default());
    }

    #[test]
    fn stddev() {
        let (m, s) = mean_stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((m, s), (5.0, 2.0));
    }
}
