//! What each tier costs in probe hits, at the rate a run sees: said under
//! `-v` after the first interval, so an operator knows what leaving the
//! probes on means before deciding (one uprobe hit costs a few µs).
use super::{snapshot::Snapshot, tier::Tier};
use tracer_ebpf::Counter;

/// Probe hits per second, by tier, at the rate counted so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hits {
    /// Per flush: the flush function (entry), each sync (entry, and
    /// return where `light_syncs_timed`), each write (entry).
    pub light: f64,
    /// Per flush the flush function and each sync at entry and return,
    /// each write; plus every write request (entry, and return when
    /// timed).
    pub exact: f64,
}

/// The hits `snap` (cumulative since attach) took over `secs`. In light,
/// write requests are not counted: `commits` (the server's counter over
/// the same time) stands in for them. `light_syncs_timed`: whether light
/// puts a return probe on the syncs here (`kernel::light_syncs_timed`).
pub fn hits(
    snap: &Snapshot,
    secs: f64,
    tier: Tier,
    write_timing: bool,
    commits: u64,
    light_syncs_timed: bool,
) -> Hits {
    let secs = secs.max(1e-3);
    let syncs: u64 = snap.fds.values().map(|f| f.syncs).sum();
    let writes: u64 = snap.fds.values().map(|f| f.writes).sum();
    let flushes = snap.counter(Counter::FlushCalls);
    let light_per_sync = if light_syncs_timed { 2 } else { 1 };
    let light = flushes + light_per_sync * syncs + writes;
    let requests = match tier {
        Tier::Exact => snap.counter(Counter::WriteCalls),
        Tier::Light => commits,
    };
    let per_request = if write_timing { 2 } else { 1 };
    let exact = 2 * flushes + 2 * syncs + writes + per_request * requests;
    Hits {
        light: light as f64 / secs,
        exact: exact as f64 / secs,
    }
}

/// What `--commit-path` costs, said when it starts: it traps on every
/// commit's entry and return and on the redo write's return. The figure
/// is `cargo xtask bench overhead --arms trace,trace-commit-path` here
/// (docs/overhead.md), a rate like every uprobe's: more commits per
/// second, more cost.
pub const COMMIT_PATH_COST: &str = "--commit-path traps on every commit's entry and return and on the redo write's return (MySQL: the binlog's entry instead): at 100 clients on MariaDB 10.11 it kept 0.93-0.96 of the untraced throughput, at 32 clients on MySQL 9.7 about 0.89 (docs/overhead.md)";

/// The exporter's: the commit path goes on with each exact window only,
/// so its cost is the window's share of the time.
pub const COMMIT_PATH_WINDOW_COST: &str = "--commit-path: each exact window also traps on every commit's entry and return; inside a window that keeps 0.93-0.96 of the untraced throughput at 100 clients on MariaDB 10.11 (docs/overhead.md), times the window's share of the time";

/// What `--wakeups` costs, said when it starts: unlike every other probe
/// of this tool, its two tracepoints run on every wake-up and context
/// switch of the host, not only the server's.
pub const WAKEUPS_COST: &str = "--wakeups: the scheduler's sched_wakeup and sched_switch tracepoints run on every wake-up and context switch of the host (a map lookup each), beside the commit path's probes (docs/overhead.md)";

/// The line said when the commit path is on (`attached`), with whether
/// its stages are split by the scheduler's accounting (`split`), or why
/// it is not where it was asked for.
pub fn commit_path_line(
    asked: bool,
    attached: bool,
    split: &super::sched_split::SplitState,
) -> Option<String> {
    match (asked, attached) {
        (true, true) => Some(match split.describe() {
            Some(s) => format!("{COMMIT_PATH_COST}; {s}"),
            None => COMMIT_PATH_COST.to_string(),
        }),
        (true, false) => Some(
            "--commit-path: the binary has no out-of-line ha_commit_trans to time commits by: no commit path in this run"
                .to_string(),
        ),
        _ => None,
    }
}

/// The `-v` line.
pub fn line(h: &Hits, tier: Tier) -> String {
    format!(
        "probe hits per second at this rate: light {:.0}, exact {:.0} (running {tier}; one uprobe hit costs a few µs of the server's CPU)",
        h.light, h.exact
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::FdTotals;

    #[test]
    fn light_counts_per_flush_and_exact_adds_the_requests() {
        let mut s = Snapshot::default();
        s.counters[Counter::FlushCalls as usize] = 100;
        s.counters[Counter::WriteCalls as usize] = 2000;
        s.fds.insert(
            5,
            FdTotals {
                syncs: 100,
                writes: 100,
                ..Default::default()
            },
        );
        let h = hits(&s, 2.0, Tier::Exact, true, 0, true);
        assert_eq!(h.light, (100.0 + 200.0 + 100.0) / 2.0);
        assert_eq!(h.exact, (200.0 + 200.0 + 100.0 + 2.0 * 2000.0) / 2.0);
        // Light on the C library: each sync at its entry only.
        let h = hits(&s, 2.0, Tier::Light, false, 1000, false);
        assert_eq!(h.light, (100.0 + 100.0 + 100.0) / 2.0);
        assert_eq!(h.exact, (200.0 + 200.0 + 100.0 + 1000.0) / 2.0);
    }
}
