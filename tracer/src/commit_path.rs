//! The commit path over an interval (`--commit-path`): every commit's time
//! inside the server, from the server layer's commit function to its
//! return, split into the stages the kernel side timed on the committing
//! thread (the redo flush as leader, the wait as follower, the binlog's
//! stages) and the rest, `unattributed`. The stages never overlap on a
//! thread, so with the rest they add up to the commits' time exactly.
use readers::{
    commit_path::{SchedSplit, UNATTRIBUTED},
    family::commit::StageName,
};
use tracer_ebpf::CommitStage;

use crate::{
    deltas::{fine_quantile_us, ratio, LogHist},
    probes::snapshot::CommitTotals,
};

/// The CSV's share columns: one per kernel slot whatever the family
/// calls it, and the rest.
pub const CSV_SHARES: [(Option<CommitStage>, &str); 11] = [
    (Some(CommitStage::RedoLeaderWrite), "cp_redo_write_share"),
    (Some(CommitStage::RedoLeaderSync), "cp_redo_sync_share"),
    (Some(CommitStage::RedoFollowerWait), "cp_redo_wait_share"),
    (Some(CommitStage::BinlogQueueWait), "cp_binlog_queue_share"),
    (Some(CommitStage::BinlogFlush), "cp_binlog_flush_share"),
    (
        Some(CommitStage::BinlogSyncWait),
        "cp_binlog_sync_wait_share",
    ),
    (Some(CommitStage::BinlogSync), "cp_binlog_sync_share"),
    (Some(CommitStage::BinlogCommit), "cp_binlog_commit_share"),
    (
        Some(CommitStage::BinlogFollowerWait),
        "cp_binlog_follower_share",
    ),
    (Some(CommitStage::ReplicaAck), "cp_replica_ack_share"),
    (None, "cp_unattributed_share"),
];

/// The group's stages' share columns: at the CSV's end, so that the
/// columns before keep their places.
pub const CSV_GROUP_SHARES: [(Option<CommitStage>, &str); 4] = [
    (Some(CommitStage::GroupFlowControl), "cp_group_flow_share"),
    (Some(CommitStage::GroupSend), "cp_group_send_share"),
    (
        Some(CommitStage::GroupConsensus),
        "cp_group_consensus_share",
    ),
    (Some(CommitStage::GroupRest), "cp_group_rest_share"),
];

/// With `--io`, the leader's redo fsync in three parts: (name, short).
pub const IO_PARTS: [(&str, &str); 3] = [
    ("redo fsync (leader): device", "sync_dev"),
    ("redo fsync (leader): journal", "sync_jnl"),
    ("redo fsync (leader): other", "sync_oth"),
];

/// The rest's short form on the tick line.
pub const UNATTRIBUTED_SHORT: &str = "rest";

/// Each family's stage names, for the tables that spell them.
const FAMILIES: [(&str, &[StageName]); 2] = [
    ("MySQL", readers::family::commit::MYSQL_STAGES),
    ("MariaDB", readers::family::commit::MARIADB_STAGES),
];

/// Stage names by family, spelled once: "`a`" where both families use
/// the same, else "MySQL `a`, MariaDB `b`" ("-" for none).
fn spelled(uses: &[(&str, &str)]) -> String {
    match uses {
        [] => "-".into(),
        [(_, a), (_, b)] if a == b => format!("`{a}`"),
        _ => uses
            .iter()
            .map(|(f, n)| format!("{f} `{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Each family's name of a kernel slot, [`spelled`].
fn names_of(slot: CommitStage) -> String {
    let uses: Vec<(&str, &str)> = FAMILIES
        .iter()
        .filter_map(|(f, stages)| stages.iter().find(|s| s.slot == slot).map(|s| (*f, s.name)))
        .collect();
    spelled(&uses)
}

/// `cp_top`'s short names and the stages they stand for, for `--help`'s
/// neighbours in docs/commit-path.md (the suite checks its copy).
pub fn short_names() -> Vec<(String, String)> {
    let mut rows: Vec<(String, Vec<(&str, &str)>)> = Vec::new();
    for (family, stages) in FAMILIES {
        for s in stages {
            match rows.iter_mut().find(|(k, _)| k == s.short) {
                Some((_, v)) => v.push((family, s.name)),
                None => rows.push((s.short.to_string(), vec![(family, s.name)])),
            }
        }
    }
    let mut rows: Vec<(String, String)> = rows
        .into_iter()
        .map(|(short, uses)| (short, spelled(&uses)))
        .collect();
    for (name, short) in IO_PARTS {
        rows.push((short.into(), format!("with --io: `{name}`")));
    }
    rows.push((
        UNATTRIBUTED_SHORT.into(),
        format!("`{UNATTRIBUTED}`: the server's own work and any wait no probe times"),
    ));
    rows
}

/// The CSV's share columns and the stage each is the share of.
pub fn csv_share_columns() -> Vec<(String, String)> {
    CSV_SHARES
        .iter()
        .chain(&CSV_GROUP_SHARES)
        .map(|(slot, col)| {
            let what = slot.map_or_else(|| format!("`{UNATTRIBUTED}`"), names_of);
            (
                col.to_string(),
                format!("the share of the commits' time in {what}"),
            )
        })
        .collect()
}

/// One stage over the interval.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathStage {
    pub stage: &'static str,
    /// The tick line's short form.
    #[serde(skip)]
    pub short: &'static str,
    /// The kernel's slot (None: the unattributed rest).
    #[serde(skip)]
    pub slot: Option<CommitStage>,
    /// Commits that spent time in it (every commit for `unattributed`).
    pub commits: u64,
    /// Per commit that spent time in it.
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Its part of all the commits' time.
    pub share: Option<f64>,
    /// Of `mean_us`: on a CPU, runnable on a run queue, and blocked (the
    /// rest: I/O, a lock, a condition); None without the scheduler split.
    #[serde(flatten)]
    pub sched: Option<SchedSplit>,
}

/// The commits of an interval and where their time went.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CommitPath {
    pub commits: u64,
    pub mean_us: Option<f64>,
    /// From a histogram of 16 slots per power of two (within about 4 %).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// In path order, `unattributed` last.
    pub stages: Vec<PathStage>,
    /// Commits the kernel could not time (their slot was taken).
    pub lost: u64,
    /// The whole commit's `mean_us` split by the scheduler's accounting.
    #[serde(flatten)]
    pub sched: Option<SchedSplit>,
    /// `--wakeups`: how the followers' waits ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<crate::wakeups::Wakeups>,
    /// The clients' own latency over the same window (the main command's
    /// workload): server time and everything outside it side by side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_p99_us: Option<f64>,
}

impl CommitPath {
    /// The commits between two reads; `stages` names the kernel's stage
    /// slots in path order (the server family's, see
    /// `family::Family::stages`).
    pub fn between(prev: Option<&CommitTotals>, cur: &CommitTotals, stages: &[StageName]) -> Self {
        let zero = CommitTotals::default();
        let prev = prev.unwrap_or(&zero);
        let commits = cur.commits.saturating_sub(prev.commits);
        let total_ns = cur.total_ns.saturating_sub(prev.total_ns);
        let total: Vec<u64> = crate::probes::snapshot::sizes_since(&prev.total, &cur.total);
        let share = |ns: u64| (total_ns > 0).then(|| ns as f64 / total_ns as f64);
        let total_cpu = cur.total_cpu_ns.saturating_sub(prev.total_cpu_ns);
        let total_runq = cur.total_runq_ns.saturating_sub(prev.total_runq_ns);
        // Every commit runs on a CPU for a while: no CPU time at all is
        // no split (off, or the kernel has no accounting to read).
        let measured = total_cpu > 0;
        let mut attributed = 0;
        let (mut attributed_cpu, mut attributed_runq) = (0, 0);
        let mut out: Vec<PathStage> = stages
            .iter()
            .filter_map(|&StageName { slot, name, short }| {
                let k = slot as usize;
                let n = cur.stage_commits[k].saturating_sub(prev.stage_commits[k]);
                let ns = cur.stage_ns[k].saturating_sub(prev.stage_ns[k]);
                let cpu = cur.stage_cpu_ns[k].saturating_sub(prev.stage_cpu_ns[k]);
                let runq = cur.stage_runq_ns[k].saturating_sub(prev.stage_runq_ns[k]);
                attributed += ns;
                attributed_cpu += cpu;
                attributed_runq += runq;
                let h = LogHist(cur.stage_hist[k]).since(&LogHist(prev.stage_hist[k]));
                (n > 0).then(|| PathStage {
                    stage: name,
                    short,
                    slot: Some(slot),
                    commits: n,
                    mean_us: ratio(ns, n).map(|v| v / 1000.0),
                    p50_us: h.quantile_us(0.50),
                    p99_us: h.quantile_us(0.99),
                    share: share(ns),
                    sched: SchedSplit::of(ns, cpu, runq, n, measured),
                })
            })
            .collect();
        let rest = total_ns.saturating_sub(attributed);
        let rest_cpu = total_cpu.saturating_sub(attributed_cpu);
        let rest_runq = total_runq.saturating_sub(attributed_runq);
        if commits > 0 {
            out.push(PathStage {
                stage: UNATTRIBUTED,
                short: UNATTRIBUTED_SHORT,
                slot: None,
                commits,
                mean_us: ratio(rest, commits).map(|v| v / 1000.0),
                p50_us: None,
                p99_us: None,
                share: share(rest),
                sched: SchedSplit::of(rest, rest_cpu, rest_runq, commits, measured),
            });
        }
        CommitPath {
            commits,
            mean_us: ratio(total_ns, commits).map(|v| v / 1000.0),
            p50_us: fine_quantile_us(&total, 0.50),
            p99_us: fine_quantile_us(&total, 0.99),
            stages: out,
            lost: cur.lost.saturating_sub(prev.lost),
            sched: SchedSplit::of(total_ns, total_cpu, total_runq, commits, measured),
            wakeups: None,
            client_p50_us: None,
            client_p99_us: None,
        }
    }

    /// The share of the stage in `slot` (None: the unattributed rest),
    /// its parts summed where `--io` split it; None where no commit spent
    /// time in it.
    pub fn share_of(&self, slot: Option<CommitStage>) -> Option<f64> {
        let parts: Vec<f64> = self
            .stages
            .iter()
            .filter(|s| s.slot == slot)
            .filter_map(|s| s.share)
            .collect();
        (!parts.is_empty()).then(|| parts.iter().sum())
    }

    /// `--io`: the leaders' fsync split into what the device did for it
    /// (its own requests, cache flushes), the journal's part and the rest,
    /// in the interval's proportions of redo sync time (the block layer
    /// attributes requests to syncs, not to commits: each leader's fsync
    /// is given the interval's split).
    pub fn split_sync(&mut self, device: Option<f64>, journal: Option<f64>, other: Option<f64>) {
        let (Some(d), Some(j), Some(o)) = (device, journal, other) else {
            return;
        };
        let Some(at) = self
            .stages
            .iter()
            .position(|s| s.slot == Some(CommitStage::RedoLeaderSync))
        else {
            return;
        };
        let whole = self.stages.remove(at);
        let parts = [d, j, o].into_iter().zip(IO_PARTS);
        for (k, (part, (stage, short))) in parts.enumerate() {
            self.stages.insert(
                at + k,
                PathStage {
                    stage,
                    short,
                    slot: whole.slot,
                    commits: whole.commits,
                    mean_us: whole.mean_us.map(|m| m * part),
                    p50_us: None,
                    p99_us: None,
                    share: whole.share.map(|s| s * part),
                    sched: whole.sched.map(|x| x.scaled(part)),
                },
            );
        }
    }

    /// The named stage with the largest share (not `unattributed`), for
    /// the tick line.
    pub fn top(&self) -> Option<&PathStage> {
        self.stages
            .iter()
            .filter(|s| s.stage != UNATTRIBUTED)
            .max_by(|a, b| a.share.unwrap_or(0.0).total_cmp(&b.share.unwrap_or(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_ebpf::fine_slot;

    #[test]
    fn stages_and_the_rest_add_up_to_the_commits_time() {
        let prev = CommitTotals::default();
        // 4 commits of 1 ms: 2 followers waited 600 us each, 2 leaders
        // wrote 100 us and synced 500 us each.
        let mut cur = CommitTotals {
            commits: 4,
            total_ns: 4_000_000,
            ..Default::default()
        };
        cur.total[fine_slot(1_000_000)] = 4;
        let (w, s, f) = (
            CommitStage::RedoLeaderWrite as usize,
            CommitStage::RedoLeaderSync as usize,
            CommitStage::RedoFollowerWait as usize,
        );
        cur.stage_commits[w] = 2;
        cur.stage_ns[w] = 200_000;
        cur.stage_commits[s] = 2;
        cur.stage_ns[s] = 1_000_000;
        cur.stage_commits[f] = 2;
        cur.stage_ns[f] = 1_200_000;
        let names = readers::family::MARIADB.stages;
        let p = CommitPath::between(Some(&prev), &cur, names);
        assert_eq!(p.commits, 4);
        assert_eq!(p.mean_us, Some(1000.0));
        let sum: f64 = p.stages.iter().map(|s| s.share.unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-12, "{p:?}");
        let last = p.stages.last().unwrap();
        assert_eq!(last.stage, UNATTRIBUTED);
        assert!((last.share.unwrap() - 0.4).abs() < 1e-12);
        assert_eq!(p.stages[1].mean_us, Some(500.0));
        // Within its slot: 1 ms is read back within 1/16 of an octave.
        let p50 = p.p50_us.unwrap();
        assert!(
            (1000.0 * 15.0 / 16.0..1000.0 * 17.0 / 16.0).contains(&p50),
            "{p50}"
        );
        assert_eq!(p.top().unwrap().stage, "redo wait (follower)");
    }

    /// `--io`'s split keeps the stage's share, in three parts.
    #[test]
    fn io_splits_the_leaders_fsync_in_the_intervals_proportions() {
        let mut cur = CommitTotals {
            commits: 2,
            total_ns: 2_000_000,
            ..Default::default()
        };
        let s = CommitStage::RedoLeaderSync as usize;
        cur.stage_commits[s] = 2;
        cur.stage_ns[s] = 1_000_000;
        let names = readers::family::MARIADB.stages;
        let mut p = CommitPath::between(None, &cur, names);
        p.split_sync(Some(0.5), Some(0.3), Some(0.2));
        let names: Vec<&str> = p.stages.iter().map(|s| s.stage).collect();
        assert_eq!(
            names,
            [
                "redo fsync (leader): device",
                "redo fsync (leader): journal",
                "redo fsync (leader): other",
                UNATTRIBUTED
            ]
        );
        assert!((p.stages[0].share.unwrap() - 0.25).abs() < 1e-12);
        assert!((p.stages[1].mean_us.unwrap() - 150.0).abs() < 1e-9);
        assert!((p.share_of(Some(CommitStage::RedoLeaderSync)).unwrap() - 0.5).abs() < 1e-12);
        let sum: f64 = p.stages.iter().map(|s| s.share.unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-12);
    }

    #[test]
    fn no_commit_no_stage() {
        let t = CommitTotals::default();
        let p = CommitPath::between(None, &t, readers::family::MARIADB.stages);
        assert_eq!((p.commits, p.stages.len(), p.p50_us), (0, 0, None));
    }
}
