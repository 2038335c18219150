//! A replication group's part of the commits over an interval, from the
//! probes on the group's hook (Group Replication's `before_commit`):
//! how many commits went through the group, how long each spent there,
//! and where that went: flow control, the send, the wait for consensus
//! and certification, the rest. Counted on every commit (exact tier),
//! with or without `--commit-path`.
use readers::family::commit::StageName;
use tracer_ebpf::{CommitStage, Counter, HistKind};

use crate::{
    deltas::{counter_since, hist_since, ratio},
    probes::Snapshot,
};

/// The group's part of the commits between two reads.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct GroupWaits {
    /// What its family calls the group (`group`, `cluster`): its key.
    #[serde(skip)]
    pub word: &'static str,
    /// The family's commit-path stages: the steps' names.
    #[serde(skip)]
    pub names: &'static [StageName],
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
    /// Calls of the consensus step (Galera's `certify`), and of those:
    /// conflicts (certification failed), aborted once sent (brute force),
    /// never sent (interrupted before), and other errors.
    pub consensus_calls: u64,
    pub consensus_conflicts: u64,
    pub consensus_aborted: u64,
    pub consensus_unsent: u64,
    pub consensus_failed: u64,
}

impl GroupWaits {
    /// The consensus steps that sent their commit to the group (Galera:
    /// the write sets replicated): every call but those never sent.
    pub fn sent(&self) -> u64 {
        self.consensus_calls.saturating_sub(self.consensus_unsent)
    }

    /// The sent commits that did not pass: conflicts, and aborts once
    /// sent (Galera counts both as failed certifications).
    pub fn refused(&self) -> u64 {
        self.consensus_conflicts + self.consensus_aborted
    }

    /// The steps the family names, each with its time per commit, µs
    /// (the hook's rest last), for the summary's line.
    pub fn steps(&self) -> Vec<(&'static str, Option<f64>)> {
        let us = |slot| match slot {
            CommitStage::GroupFlowControl => Some(self.flow_control_us),
            CommitStage::GroupSend => Some(self.send_us),
            CommitStage::GroupConsensus => Some(self.consensus_us),
            CommitStage::GroupRest => Some(self.rest_us),
            _ => None,
        };
        // In the family's path order; "group: flow control" -> "flow
        // control".
        self.names
            .iter()
            .filter_map(|n| {
                Some((
                    n.name.split_once(": ").map_or(n.name, |(_, b)| b),
                    us(n.slot)?,
                ))
            })
            .collect()
    }
}

/// A summary block a family names (`group`, `cluster`): its JSON key.
pub trait Worded {
    fn word(&self) -> &'static str;
}

impl Worded for GroupWaits {
    fn word(&self) -> &'static str {
        self.word
    }
}

/// Serializes a block under its family's word (`"cluster": {..}`),
/// flattened into the object that holds it.
pub fn under_its_word<T: Worded + serde::Serialize, S: serde::Serializer>(
    g: &Option<T>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(1))?;
    if let Some(g) = g {
        m.serialize_entry(g.word(), g)?;
    }
    m.end()
}

impl GroupWaits {
    pub fn between(
        prev: &Snapshot,
        cur: &Snapshot,
        word: &'static str,
        names: &'static [StageName],
    ) -> Self {
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
            word,
            names,
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
            consensus_calls: d(Counter::GroupConsensusCalls),
            consensus_conflicts: d(Counter::GroupConsensusConflicts),
            consensus_aborted: d(Counter::GroupConsensusAborts),
            consensus_unsent: d(Counter::GroupConsensusUnsent),
            consensus_failed: d(Counter::GroupConsensusFailed),
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
        let g = GroupWaits::between(&Snapshot::default(), &s, "group", &[]);
        assert_eq!(g.commits, 4);
        assert_eq!(g.mean_us, Some(10_000.0));
        assert_eq!(g.flow_control_us, Some(100.0));
        assert_eq!(g.send_us, Some(400.0));
        assert_eq!(g.consensus_us, Some(9_000.0));
        assert_eq!(g.rest_us, Some(500.0));
        assert_eq!((g.total_us, g.consensus_total_us), (40_000, 36_000));
        // No commit: no means.
        let none = GroupWaits::between(&s, &s, "group", &[]);
        assert_eq!((none.commits, none.mean_us), (0, None));
    }
}
