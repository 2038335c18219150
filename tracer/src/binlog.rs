//! The binlog group commit over an interval: how many commits each binlog
//! group carried (exact sizes) and where a group's time went, stage by
//! stage. With MySQL's binlog on, this is where commits are grouped: the
//! flush-stage leader asks InnoDB for one redo flush for its whole queue,
//! so n_write:n_flush on the InnoDB side stays near 1 however many
//! commits share each flush.
use tracer_ebpf::{Counter, HistKind};

use crate::{
    deltas::{counter_since, hist_since, ratio, SizeQuantiles},
    probes::Snapshot,
};

/// One stage of a binlog group, per group that went through it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Stage {
    /// "flush", "flush: binlog write" (a part of the flush), "sync wait",
    /// "sync", "commit".
    pub stage: &'static str,
    /// Groups that went through it.
    pub count: u64,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// Binlog groups between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct BinlogGroups {
    /// Groups closed (MySQL: sync-stage groups, one binlog fsync each
    /// with `sync_binlog=1`).
    pub groups: u64,
    /// Commits they carried: their sizes summed.
    pub commits: u64,
    /// Commits per group, exact.
    pub mean: Option<f64>,
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
    /// Flush-stage groups (MySQL merges several into one sync group).
    pub flush_groups: u64,
    /// Stages in path order.
    pub stages: Vec<Stage>,
    /// Stage boundaries the kernel side could not record.
    pub lost: u64,
    /// These figures against independent counts of the same things.
    pub checks: Vec<Check>,
    /// The commits group here (MySQL 8+: one redo flush per flush-stage
    /// group); false where the binlog's groups are a second grouping after
    /// the redo's (MariaDB).
    pub forms_group: bool,
}

impl BinlogGroups {
    /// The figures between two snapshots, checked against the kernel's
    /// binlog fsyncs over the same interval.
    pub fn between(prev: &Snapshot, cur: &Snapshot, binlog_fsyncs: u64, forms_group: bool) -> Self {
        let d = |c| counter_since(prev, cur, c);
        let sizes = crate::probes::snapshot::sizes_since(&prev.binlog_sizes, &cur.binlog_sizes);
        let q = SizeQuantiles::of(&sizes);
        let stage = |name, count: u64, ns: u64, hist: Option<HistKind>| {
            let h = hist.map(|k| hist_since(prev, cur, k));
            Stage {
                stage: name,
                count,
                mean_us: ratio(ns, count).map(|v| v / 1000.0),
                p50_us: h.and_then(|h| h.quantile_us(0.50)),
                p99_us: h.and_then(|h| h.quantile_us(0.99)),
            }
        };
        let flush_groups = d(Counter::BinlogFlushGroups);
        let syncs = d(Counter::BinlogSyncs);
        let stages = vec![
            stage(
                "flush",
                flush_groups,
                d(Counter::BinlogFlushNs),
                Some(HistKind::BinlogFlush),
            ),
            stage(
                "flush: binlog write",
                flush_groups,
                d(Counter::BinlogWriteNs),
                None,
            ),
            stage(
                "sync wait",
                syncs,
                d(Counter::BinlogSyncWaitNs),
                Some(HistKind::BinlogSyncWait),
            ),
            stage(
                "sync",
                syncs,
                d(Counter::BinlogSyncNs),
                Some(HistKind::BinlogSync),
            ),
            stage(
                "commit",
                d(Counter::BinlogCommitGroups),
                d(Counter::BinlogCommitNs),
                Some(HistKind::BinlogCommit),
            ),
        ];
        let groups = d(Counter::BinlogGroups);
        let commits = d(Counter::BinlogCommits);
        let mut b = BinlogGroups {
            groups,
            commits,
            mean: ratio(commits, groups),
            p50: q.p50,
            p90: q.p90,
            p99: q.p99,
            max: q.max,
            flush_groups,
            stages: stages.into_iter().filter(|s| s.count > 0).collect(),
            lost: d(Counter::BinlogLost),
            checks: Vec::new(),
            forms_group,
        };
        if groups > 0 {
            b.checks.push(Check::new(
                "groups",
                groups,
                "binlog fsyncs (kernel; one per group with sync_binlog=1)",
                binlog_fsyncs,
            ));
        }
        b
    }

    /// Adds the check of the commits against the workload's.
    pub fn check_commits(&mut self, workload_commits: u64) {
        if self.groups > 0 {
            self.checks.push(Check::new(
                "commits",
                self.commits,
                "commits (workload)",
                workload_commits,
            ));
        }
    }
}

/// Ours against another count of the same thing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub ours: &'static str,
    pub value: u64,
    pub against: &'static str,
    pub reference: u64,
    /// (value - reference) / reference, in percent.
    pub diff_pct: Option<f64>,
}

impl Check {
    fn new(ours: &'static str, value: u64, against: &'static str, reference: u64) -> Self {
        Check {
            ours,
            value,
            against,
            reference,
            diff_pct: (reference > 0)
                .then(|| (value as f64 - reference as f64) / reference as f64 * 100.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_stages_come_from_the_deltas() {
        let prev = Snapshot {
            binlog_sizes: vec![0, 5, 1],
            ..Default::default()
        };
        let mut cur = prev.clone();
        // 3 more groups of 1, 1 of 2, 2 of 9: 7 groups, 3 + 2 + 18 commits.
        cur.binlog_sizes = vec![0, 8, 2, 0, 0, 0, 0, 0, 0, 2];
        cur.counters[Counter::BinlogGroups as usize] = 7;
        cur.counters[Counter::BinlogCommits as usize] = 23;
        cur.counters[Counter::BinlogSyncs as usize] = 7;
        cur.counters[Counter::BinlogSyncNs as usize] = 7_000_000;
        let mut b = BinlogGroups::between(&prev, &cur, 7, true);
        assert_eq!((b.groups, b.commits), (7, 23));
        assert_eq!((b.p50, b.p90, b.max), (Some(1), Some(9), Some(9)));
        assert!((b.mean.unwrap() - 23.0 / 7.0).abs() < 1e-12);
        // Only stages that ran are listed (the sync's wait and the sync
        // itself, once per sync); the sync's mean is exact.
        let names: Vec<&str> = b.stages.iter().map(|s| s.stage).collect();
        assert_eq!(names, ["sync wait", "sync"]);
        assert_eq!(b.stages[1].mean_us, Some(1000.0));
        assert_eq!(b.stages[0].mean_us, Some(0.0));
        b.check_commits(24);
        assert_eq!(b.checks[0].diff_pct, Some(0.0));
        assert!((b.checks[1].diff_pct.unwrap() + 100.0 / 24.0).abs() < 1e-9);
        // No group: nothing to check.
        let mut none = BinlogGroups::between(&prev, &prev, 3, true);
        none.check_commits(10);
        assert!(none.checks.is_empty());
    }
}
