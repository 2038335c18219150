//! A semi-sync source's waits for its replica's acknowledgement over an
//! interval, from the probes at the server's semi-sync hook: how many,
//! and how long each. MySQL waits once per binlog group at AFTER_SYNC
//! (`after_sync`), once per transaction at AFTER_COMMIT (`after_commit`);
//! MariaDB once per transaction at either (`commit_trx`). Each count is
//! the one the server keeps itself (`Rpl_semi_sync_*_yes_tx`), so the
//! two are set side by side.
use tracer_ebpf::{Counter, HistKind};

pub use crate::probes::plan::AckAt;
use readers::family::commit::{AckHooks, AT_COMMIT_NAME};

use crate::{
    deltas::{counter_since, hist_since, ratio},
    probes::Snapshot,
};

/// The acknowledgement waits between two reads.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct AckWaits {
    /// The hook they were timed at: `after_sync`, `after_commit` or
    /// (MariaDB) `commit_trx`.
    pub hook: &'static str,
    /// Waits: groups (MySQL, AFTER_SYNC) or transactions.
    pub waits: u64,
    /// Their time summed, µs (what `Rpl_semi_sync_*_tx_wait_time` sums).
    pub total_us: u64,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

impl AckWaits {
    /// The waits between two snapshots at the hook that waited: where
    /// both of MySQL's are probed (the wait point unknown), the one with
    /// more time in it; the other returns at once.
    pub fn between(prev: &Snapshot, cur: &Snapshot, at: AckAt, hooks: &AckHooks) -> Option<Self> {
        let d = |c| counter_since(prev, cur, c);
        let sync = (d(Counter::AckSyncCalls), d(Counter::AckSyncNs));
        let commit = (d(Counter::AckCommitCalls), d(Counter::AckCommitNs));
        let use_commit = at.commit && (!at.sync || commit.1 > sync.1);
        if !at.sync && !at.commit {
            return None;
        }
        let ((waits, ns), kind, hook) = if use_commit {
            (commit, HistKind::AckCommit, AT_COMMIT_NAME)
        } else {
            (sync, HistKind::AckSync, hooks.at_sync_name)
        };
        let h = hist_since(prev, cur, kind);
        Some(AckWaits {
            hook,
            waits,
            total_us: ns / 1000,
            mean_us: ratio(ns, waits).map(|v| v / 1000.0),
            p50_us: h.quantile_us(0.50),
            p99_us: h.quantile_us(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use readers::family::{MARIADB, MYSQL};

    fn snap(sync: (u64, u64), commit: (u64, u64)) -> Snapshot {
        let mut s = Snapshot::default();
        s.counters[Counter::AckSyncCalls as usize] = sync.0;
        s.counters[Counter::AckSyncNs as usize] = sync.1;
        s.counters[Counter::AckCommitCalls as usize] = commit.0;
        s.counters[Counter::AckCommitNs as usize] = commit.1;
        s
    }

    #[test]
    fn the_hook_that_waited_is_the_one_counted() {
        let both = AckAt {
            sync: true,
            commit: true,
        };
        // AFTER_SYNC: 10 groups waited 5 ms; 90 after-commit calls that
        // returned at once.
        let a = AckWaits::between(
            &Snapshot::default(),
            &snap((10, 5_000_000), (90, 90_000)),
            both,
            &MYSQL.ack,
        )
        .unwrap();
        assert_eq!((a.hook, a.waits, a.total_us), ("after_sync", 10, 5_000));
        assert_eq!(a.mean_us, Some(500.0));
        // AFTER_COMMIT: the other way round.
        let a = AckWaits::between(
            &Snapshot::default(),
            &snap((10, 20_000), (90, 9_000_000)),
            both,
            &MYSQL.ack,
        )
        .unwrap();
        assert_eq!((a.hook, a.waits), ("after_commit", 90));
        // MariaDB: one hook.
        let one = AckAt {
            sync: true,
            commit: false,
        };
        let a = AckWaits::between(
            &Snapshot::default(),
            &snap((7, 7_000), (0, 0)),
            one,
            &MARIADB.ack,
        )
        .unwrap();
        assert_eq!((a.hook, a.waits), ("commit_trx", 7));
        assert!(AckWaits::between(
            &Snapshot::default(),
            &snap((7, 7_000), (0, 0)),
            AckAt::default(),
            &MARIADB.ack
        )
        .is_none());
    }
}
