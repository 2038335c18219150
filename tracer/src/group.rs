//! A replication group's part of the commits over an interval, from the
//! probes on the group's hook (Group Replication's `before_commit`):
//! how many commits went through the group, how long each spent there,
//! and where that went: flow control, the send, the wait for consensus
//! and certification, the rest. Counted on every commit (exact tier),
//! with or without `--commit-path`.
use tracer_ebpf::{Counter, HistKind};

use crate::{
    deltas::{counter_since, hist_since, ratio},
    probes::Snapshot,
};

/// The group's part of the commits between two reads.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct GroupWaits {
    /// Commits that went through the group's hook.
    pub commits: u64,
    /// Their time in it, per commit, µs.
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Of `mean_us`: flow control, the send, consensus and
    /// certification, and the rest of the hook.
    pub flow_control_us: Option<f64>,
    pub send_us: Option<f64>,
    pub consensus_us: Option<f64>,
    pub rest_us: Option<f64>,
    /// Sums over the interval, µs: what the server's counters sum.
    pub total_us: u64,
    pub flow_control_total_us: u64,
    pub consensus_total_us: u64,
}

impl GroupWaits {
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Self {
        let d = |c| counter_since(prev, cur, c);
        let commits = d(Counter::GroupCommits);
        let ns = d(Counter::GroupNs);
        let (flow, send, cons) = (
            d(Counter::GroupFlowNs),
            d(Counter::GroupSendNs),
            d(Counter::GroupConsensusNs),
        );
        let per = |v: u64| ratio(v, commits).map(|x| x / 1000.0);
        let h = hist_since(prev, cur, HistKind::GroupWait);
        GroupWaits {
            commits,
            mean_us: per(ns),
            p50_us: h.quantile_us(0.50),
            p99_us: h.quantile_us(0.99),
            flow_control_us: per(flow),
            send_us: per(send),
            consensus_us: per(cons),
            rest_us: per(ns.saturating_sub(flow + send + cons)),
            total_us: ns / 1000,
            flow_control_total_us: flow / 1000,
            consensus_total_us: cons / 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hooks_time_splits_into_its_steps_and_the_rest() {
        let mut s = Snapshot::default();
        let set = |s: &mut Snapshot, c: Counter, v: u64| s.counters[c as usize] = v;
        set(&mut s, Counter::GroupCommits, 4);
        set(&mut s, Counter::GroupNs, 40_000_000);
        set(&mut s, Counter::GroupFlowNs, 400_000);
        set(&mut s, Counter::GroupSendNs, 1_600_000);
        set(&mut s, Counter::GroupConsensusNs, 36_000_000);
        let g = GroupWaits::between(&Snapshot::default(), &s);
        assert_eq!(g.commits, 4);
        assert_eq!(g.mean_us, Some(10_000.0));
        assert_eq!(g.flow_control_us, Some(100.0));
        assert_eq!(g.send_us, Some(400.0));
        assert_eq!(g.consensus_us, Some(9_000.0));
        assert_eq!(g.rest_us, Some(500.0));
        assert_eq!((g.total_us, g.consensus_total_us), (40_000, 36_000));
        // No commit: no means.
        let none = GroupWaits::between(&s, &s);
        assert_eq!((none.commits, none.mean_us), (0, None));
    }
}
