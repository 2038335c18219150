//! The binlog group commit over an interval: how many commits each binlog
//! group carried (exact sizes) and where a group's time went, stage by
//! stage. With MySQL's binlog on, this is where commits are grouped: the
//! flush-stage leader asks InnoDB for one redo flush for its whole queue,
//! so n_write:n_flush on the InnoDB side stays near 1 however many
//! commits share each flush.
use readers::binlog::Reason;
use tracer_ebpf::{Counter, HistKind};

use crate::{
    deltas::{counter_since, hist_since, ratio, SizeQuantiles},
    probes::Snapshot,
};

/// A stage as the kernel counts it: its name, the CSV column of its mean
/// per group (µs), the counters of its passes and their time, and its
/// histogram where it has one.
pub struct StageDef {
    pub name: &'static str,
    pub column: &'static str,
    pub count: Counter,
    pub ns: Counter,
    pub hist: Option<HistKind>,
}

/// The stages in path order. The flush's parts share its count where
/// they have none of their own.
pub const STAGES: [StageDef; 7] = [
    StageDef {
        name: "flush: queue wait",
        column: "binlog_queue_wait_us",
        count: Counter::BinlogQueueWaits,
        ns: Counter::BinlogQueueWaitNs,
        hist: Some(HistKind::BinlogQueueWait),
    },
    StageDef {
        name: "flush",
        column: "binlog_flush_us",
        count: Counter::BinlogFlushGroups,
        ns: Counter::BinlogFlushNs,
        hist: Some(HistKind::BinlogFlush),
    },
    StageDef {
        name: "flush: redo flush",
        column: "binlog_redo_flush_us",
        count: Counter::BinlogRedoFlushes,
        ns: Counter::BinlogRedoNs,
        hist: Some(HistKind::BinlogRedo),
    },
    StageDef {
        name: "flush: binlog write",
        column: "binlog_write_us",
        count: Counter::BinlogFlushGroups,
        ns: Counter::BinlogWriteNs,
        hist: None,
    },
    StageDef {
        name: "sync wait",
        column: "binlog_sync_wait_us",
        count: Counter::BinlogSyncs,
        ns: Counter::BinlogSyncWaitNs,
        hist: Some(HistKind::BinlogSyncWait),
    },
    StageDef {
        name: "sync",
        column: "binlog_sync_us",
        count: Counter::BinlogSyncs,
        ns: Counter::BinlogSyncNs,
        hist: Some(HistKind::BinlogSync),
    },
    StageDef {
        name: "commit",
        column: "binlog_commit_us",
        count: Counter::BinlogCommitGroups,
        ns: Counter::BinlogCommitNs,
        hist: Some(HistKind::BinlogCommit),
    },
];

/// One stage of a binlog group, per group that went through it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Stage {
    /// In path order: "flush: queue wait" (the leader's, from its commit's
    /// entry to its flush stage), "flush", "flush: redo flush" and "flush:
    /// binlog write" (parts of the flush), "sync wait", "sync", "commit".
    pub stage: &'static str,
    /// Groups that went through it.
    pub count: u64,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// The threads that led the groups: a group's leader does its flush
/// (and, on MySQL, its sync) for every member, so a few busy leaders
/// would be where the group's time is paid.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Leaders {
    /// Distinct threads that led at least one group.
    pub threads: u64,
    /// The groups the busiest of them led, and their share of all groups.
    pub busiest_groups: u64,
    pub busiest_share: f64,
}

impl Leaders {
    /// From the groups led per thread between two reads.
    fn between(
        prev: &std::collections::HashMap<u64, u64>,
        cur: &std::collections::HashMap<u64, u64>,
    ) -> Option<Self> {
        let led: Vec<u64> = cur
            .iter()
            .map(|(tid, n)| n.saturating_sub(prev.get(tid).copied().unwrap_or(0)))
            .filter(|n| *n > 0)
            .collect();
        let total: u64 = led.iter().sum();
        let busiest = led.iter().copied().max()?;
        Some(Leaders {
            threads: led.len() as u64,
            busiest_groups: busiest,
            busiest_share: busiest as f64 / total as f64,
        })
    }
}

/// The groups that closed for one reason.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClosedBy {
    pub reason: Reason,
    pub groups: u64,
    /// Commits per group (None without sizes: light tier).
    pub mean_size: Option<f64>,
    pub p99_size: Option<u64>,
    /// The leaders' wait for more commits, µs per group (0 for no wait).
    pub mean_wait_us: Option<f64>,
}

impl ClosedBy {
    /// Every reason that closed a group between two snapshots.
    fn between(prev: &Snapshot, cur: &Snapshot) -> Vec<ClosedBy> {
        Reason::ALL
            .iter()
            .filter_map(|&reason| {
                let k = reason.kernel();
                let groups = counter_since(prev, cur, k.groups());
                let sizes = crate::probes::snapshot::sizes_since(
                    &prev.binlog_closed_sizes[k as usize],
                    &cur.binlog_closed_sizes[k as usize],
                );
                let q = SizeQuantiles::of(&sizes);
                let commits: u64 = sizes.iter().enumerate().map(|(n, c)| n as u64 * c).sum();
                (groups > 0).then(|| ClosedBy {
                    reason,
                    groups,
                    mean_size: ratio(commits, groups).filter(|_| commits > 0),
                    p99_size: q.p99,
                    mean_wait_us: ratio(counter_since(prev, cur, k.wait_ns()), groups)
                        .map(|ns| ns / 1000.0),
                })
            })
            .collect()
    }

    /// The groups of `reason` in `all`, 0 where none closed so.
    pub fn groups_of(all: &[ClosedBy], reason: Reason) -> u64 {
        all.iter()
            .find(|c| c.reason == reason)
            .map_or(0, |c| c.groups)
    }
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
    /// Who led the groups (None: no group closed).
    pub leaders: Option<Leaders>,
    /// Stage boundaries the kernel side could not record.
    pub lost: u64,
    /// These figures against independent counts of the same things.
    pub checks: Vec<Check>,
    /// The commits group here (MySQL 8+: one redo flush per flush-stage
    /// group); false where the binlog's groups are a second grouping after
    /// the redo's (MariaDB).
    pub forms_group: bool,
    /// Why the groups closed, per reason with groups (None where the
    /// family's wait for a fuller group is not probed).
    pub closed_by: Option<Vec<ClosedBy>>,
}

impl BinlogGroups {
    /// The figures between two snapshots, checked against the kernel's
    /// binlog fsyncs over the same interval.
    pub fn between(
        prev: &Snapshot,
        cur: &Snapshot,
        binlog_fsyncs: u64,
        forms_group: bool,
        closed_by: bool,
    ) -> Self {
        let d = |c| counter_since(prev, cur, c);
        let sizes = crate::probes::snapshot::sizes_since(&prev.binlog_sizes, &cur.binlog_sizes);
        let q = SizeQuantiles::of(&sizes);
        let stages = STAGES.iter().map(|def| {
            let count = d(def.count);
            let h = def.hist.map(|k| hist_since(prev, cur, k));
            Stage {
                stage: def.name,
                count,
                mean_us: ratio(d(def.ns), count).map(|v| v / 1000.0),
                p50_us: h.and_then(|h| h.quantile_us(0.50)),
                p99_us: h.and_then(|h| h.quantile_us(0.99)),
            }
        });
        let flush_groups = d(Counter::BinlogFlushGroups);
        let groups = d(Counter::BinlogGroups);
        let commits = d(Counter::BinlogCommits);
        let mut b = BinlogGroups {
            groups,
            commits,
            // Without the member probe (light tier) groups are counted,
            // their sizes are not.
            mean: ratio(commits, groups).filter(|_| commits > 0),
            p50: q.p50,
            p90: q.p90,
            p99: q.p99,
            max: q.max,
            flush_groups,
            stages: stages.filter(|s| s.count > 0).collect(),
            leaders: Leaders::between(&prev.binlog_leaders, &cur.binlog_leaders),
            lost: d(Counter::BinlogLost),
            checks: Vec::new(),
            forms_group,
            closed_by: closed_by.then(|| ClosedBy::between(prev, cur)),
        };
        if groups > 0 {
            b.checks.push(Check::new(
                "groups",
                groups,
                "binlog fsyncs (kernel; one per group with sync_binlog=1)",
                binlog_fsyncs,
            ));
        }
        // Each leader that waits for a fuller group syncs its group once:
        // the waits, counted where they end, against the kernel's syncs.
        let fills = d(Counter::BinlogFills);
        if closed_by && fills > 0 && binlog_fsyncs > 0 {
            b.checks.push(Check::new(
                "waits for a fuller group",
                fills,
                "binlog fsyncs (kernel; one per group with sync_binlog=1)",
                binlog_fsyncs,
            ));
        }
        b
    }

    /// The mean per pass of the stage named `name` (one of [`STAGES`]).
    pub fn stage_mean_us(&self, name: &str) -> Option<f64> {
        self.stages.iter().find(|s| s.stage == name)?.mean_us
    }

    /// Adds the check of the commits against the workload's.
    pub fn check_commits(&mut self, workload_commits: u64) {
        if self.groups > 0 && self.commits > 0 {
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
        let mut b = BinlogGroups::between(&prev, &cur, 7, true, false);
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
        let mut none = BinlogGroups::between(&prev, &prev, 3, true, false);
        none.check_commits(10);
        assert!(none.checks.is_empty());
    }
}
