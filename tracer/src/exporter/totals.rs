//! A server's counts since the exporter first saw it: each read of the
//! maps adds its delta over the previous read of the same attachment, so
//! a re-attach (new maps, counting from zero) continues the totals and a
//! Prometheus counter never goes down.
use std::time::SystemTime;

use crate::{
    fds::{FdTable, FileClass},
    probes::Snapshot,
    sample::{size_buckets, ClassTotals, Columns, Delta, LogHist},
};
use tracer_ebpf::{Counter, HistKind, BATCH_BUCKETS, HIST_BUCKETS};

/// The file classes, in the order of [`Totals::classes`].
pub const CLASSES: [FileClass; 4] = [
    FileClass::Redo,
    FileClass::Binlog,
    FileClass::Data,
    FileClass::Other,
];

/// A log2-ns histogram with its exact sum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimeHist {
    pub hist: LogHist,
    pub sum_ns: u64,
}

/// Cumulative counts of one server (over all its attachments).
#[derive(Clone, Debug, PartialEq)]
pub struct Totals {
    /// Write-probe hits: `log_write_up_to` calls (exact), or server-layer
    /// commits (fallback).
    pub requests: u64,
    /// The durable part (exact mode).
    pub durable: u64,
    /// Hits at inlined copies whose durability cannot be read.
    pub unknown: u64,
    /// Redo flushes: flush-function hits, else redo fsyncs.
    pub flushes: u64,
    pub classes: [ClassTotals; 4],
    pub lost: u64,
    /// Flushes per batch-size bucket, and the sizes' sum.
    pub batch: [u64; BATCH_BUCKETS],
    pub batch_sum: u64,
    pub leaders: TimeHist,
    pub followers: TimeHist,
    /// Light tier: commits by the server's own counter, summed over its
    /// reads (a restarted server's counter starts again; the sum goes on).
    pub commits: u64,
    /// Binlog groups (where their probes are attached), the commits they
    /// carried, and the groups per size bucket (the batch buckets).
    pub binlog_groups: u64,
    pub binlog_commits: u64,
    pub binlog_sizes: [u64; BATCH_BUCKETS],
    /// Per binlog stage (`binlog::STAGES` order): passes and their ns.
    pub binlog_stages: [(u64, u64); crate::binlog::STAGES.len()],
    /// Per reason a binlog group closed (`binlog::Reason::ALL` order):
    /// the groups and their leaders' wait for more commits, ns.
    pub binlog_closed: [(u64, u64); 4],
    /// `--io`: the block counters under the redo syncs, in
    /// [`IO_COUNTERS`] order.
    pub io: [u64; IO_COUNTERS.len()],
}

/// How an `--io` counter is exposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoUnit {
    Count,
    Bytes,
    /// Counted in ns, exposed in seconds.
    Seconds,
}

/// The block I/O counters under the redo syncs (`--io`), as the exporter
/// exposes them: the kernel's counter, the metric's name before its
/// unit and `_total`, its help, its unit. What the main command's I/O
/// block divides per redo sync, left to the queries to divide (a ratio
/// of rates aggregates; a ratio inside the exporter would not).
pub const IO_COUNTERS: [(Counter, &str, &str, IoUnit); 8] = [
    (
        Counter::IoReqs,
        "commitscope_io_requests",
        "Block requests the server's redo syncs waited on (--io: issued on the redo log's device while a redo sync ran, by the server or the filesystem's journal)",
        IoUnit::Count,
    ),
    (
        Counter::IoBytes,
        "commitscope_io",
        "Bytes of those requests",
        IoUnit::Bytes,
    ),
    (
        Counter::IoFlushes,
        "commitscope_io_cache_flushes",
        "Device cache flushes issued while a redo sync ran",
        IoUnit::Count,
    ),
    (
        Counter::IoDeviceNs,
        "commitscope_io_device",
        "Device time (issue to completion) of those requests, summed",
        IoUnit::Seconds,
    ),
    (
        Counter::IoJournalReqs,
        "commitscope_io_journal_requests",
        "Of those requests, the ones the filesystem's journal thread issued",
        IoUnit::Count,
    ),
    (
        Counter::IoJournalDeviceNs,
        "commitscope_io_journal_device",
        "Their device time, summed (part of commitscope_io_device_seconds_total)",
        IoUnit::Seconds,
    ),
    (
        Counter::IoQueueNs,
        "commitscope_io_queue",
        "Time those requests spent between submission and issue (plugged, in the I/O scheduler), summed",
        IoUnit::Seconds,
    ),
    (
        Counter::IoSyncsWithoutWrite,
        "commitscope_io_syncs_without_write",
        "Redo syncs during which no request with data was issued (nothing to write, or written before, as with O_DIRECT)",
        IoUnit::Count,
    ),
];

impl Default for Totals {
    fn default() -> Self {
        Totals {
            requests: 0,
            durable: 0,
            unknown: 0,
            flushes: 0,
            classes: [ClassTotals::default(); 4],
            lost: 0,
            batch: [0; BATCH_BUCKETS],
            batch_sum: 0,
            leaders: TimeHist::default(),
            followers: TimeHist::default(),
            commits: 0,
            binlog_groups: 0,
            binlog_commits: 0,
            binlog_sizes: [0; BATCH_BUCKETS],
            binlog_stages: [(0, 0); crate::binlog::STAGES.len()],
            binlog_closed: [(0, 0); 4],
            io: [0; IO_COUNTERS.len()],
        }
    }
}

impl Totals {
    /// Adds what happened between two reads of one attachment's maps.
    pub fn absorb(&mut self, prev: &Snapshot, cur: &Snapshot, fds: &FdTable, cols: &Columns) {
        self.add(&Delta {
            prev,
            cur,
            fds,
            cols,
        });
    }

    /// Adds `d`, read by the rules every consumer shares ([`Delta`]).
    /// Light probes: the write counters move only while a window is
    /// open, and a window's figures are its own (never folded in here).
    pub fn add(&mut self, d: &Delta) {
        self.requests += d.requests().unwrap_or(0);
        if d.cols.per_commit {
            self.durable += d.durable().unwrap_or(0);
            self.unknown += d.unknown().unwrap_or(0);
        }
        for (sum, class) in self.classes.iter_mut().zip(CLASSES) {
            sum.add(&d.class(class));
        }
        self.flushes += d.flushes(&d.class(FileClass::Redo));
        self.lost += d.lost_events();
        // The kernel's exact sizes, in the exporter's buckets.
        for (b, n) in self.batch.iter_mut().zip(size_buckets(&d.batch_sizes())) {
            *b += n;
        }
        if d.cols.per_commit {
            self.batch_sum += d.counter(Counter::BatchSum);
        }
        if d.cols.binlog {
            self.binlog_groups += d.counter(Counter::BinlogGroups);
            self.binlog_commits += d.counter(Counter::BinlogCommits);
            for (b, n) in self
                .binlog_sizes
                .iter_mut()
                .zip(size_buckets(&d.binlog_sizes()))
            {
                *b += n;
            }
            for (sum, def) in self.binlog_stages.iter_mut().zip(&crate::binlog::STAGES) {
                sum.0 += d.counter(def.count);
                sum.1 += d.counter(def.ns);
            }
        }
        if d.cols.io {
            for (sum, (c, ..)) in self.io.iter_mut().zip(IO_COUNTERS) {
                *sum += d.counter(c);
            }
        }
        if d.cols.binlog_closed_by {
            for (sum, r) in self
                .binlog_closed
                .iter_mut()
                .zip(readers::binlog::Reason::ALL)
            {
                sum.0 += d.counter(r.kernel().groups());
                sum.1 += d.counter(r.kernel().wait_ns());
            }
        }
        if d.cols.anatomy {
            self.leaders.hist.add(&d.hist(HistKind::LeaderWait));
            self.leaders.sum_ns += d.counter(Counter::LeaderWaitNs);
            self.followers.hist.add(&d.hist(HistKind::FollowerWait));
            self.followers.sum_ns += d.counter(Counter::FollowerWaitNs);
        }
    }

    pub fn class(&self, c: FileClass) -> &ClassTotals {
        &self.classes[CLASSES.iter().position(|x| *x == c).unwrap_or(3)]
    }
}

/// The upper bound, in seconds, of log2-ns bucket `i` (the last one is
/// open: +Inf), as a Prometheus `le`.
pub fn le_seconds(i: usize) -> f64 {
    if i + 1 >= HIST_BUCKETS {
        f64::MAX
    } else {
        (1u64 << (i + 1)) as f64 / 1e9
    }
}

/// One window's figures on one server.
#[derive(Clone, Debug)]
pub struct Figures {
    pub start: SystemTime,
    pub end: SystemTime,
    /// Counted as the exact tier counts (requests, durable, flushes,
    /// batches, leaders and followers), over the window only.
    pub totals: Totals,
    /// `--commit-path`: the commits that began and ended inside the
    /// window, and where their time went.
    pub commit_path: Option<crate::commit_path::CommitPath>,
    /// A semi-sync source's waits for its replica inside the window.
    pub replication: Option<crate::replication::AckWaits>,
    /// The server's own count of them and their time over the window
    /// (`Rpl_semi_sync_*_yes_tx`, `_tx_wait_time`), read on the light
    /// tier's login: the check beside ours.
    pub server_acks: Option<crate::server::status::ServerAcks>,
    /// A replication group member's commits through its group inside the
    /// window, and its own count of them over the same window
    /// (`COUNT_TRANSACTIONS_LOCAL_PROPOSED`: the column, the count).
    pub group: Option<crate::group::GroupWaits>,
    pub server_group_proposed: Option<(&'static str, u64)>,
    /// Its own count of failed consensus steps over the window, where it
    /// keeps one (Galera's `wsrep_local_cert_failures`).
    pub server_group_failed: Option<(&'static str, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::FdTotals;
    use readers::family::redo::Source;

    fn cols(has_flush_fn: bool) -> Columns {
        Columns {
            requests: Source::AllCalls,
            durable: Some(Source::PredA),
            has_flush_fn,
            flush_timed: has_flush_fn,
            sync_timed: true,
            unknown_sites: false,
            anatomy: true,
            per_commit: true,
            writes: true,
            io: false,
            binlog: false,
            binlog_forms_group: false,
            binlog_closed_by: false,
            commit_stages: None,
            ack: Default::default(),
            ack_hooks: &readers::family::MARIADB.ack,
            group: None,
        }
    }

    fn snap(calls: u64, durable: u64, flushes: u64, redo_syncs: u64) -> Snapshot {
        let mut s = Snapshot::default();
        s.counters[Counter::WriteCalls as usize] = calls;
        s.counters[Counter::WritePredA as usize] = durable;
        s.counters[Counter::FlushCalls as usize] = flushes;
        s.counters[Counter::Followers as usize] = durable;
        s.counters[Counter::FollowerWaitNs as usize] = durable * 1000;
        s.hists[HistKind::FollowerWait as usize][9] = durable;
        s.fds.insert(
            3,
            FdTotals {
                syncs: redo_syncs,
                sync_ns: redo_syncs * 500,
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn a_reattach_continues_the_totals() {
        let fds = FdTable::new(u32::MAX);
        let mut t = Totals::default();
        // First attachment: 0 -> 10 -> 25 calls.
        t.absorb(&Snapshot::default(), &snap(10, 8, 4, 4), &fds, &cols(true));
        t.absorb(&snap(10, 8, 4, 4), &snap(25, 20, 9, 9), &fds, &cols(true));
        // Re-attached: the new maps start from zero again.
        t.absorb(&Snapshot::default(), &snap(5, 5, 2, 2), &fds, &cols(true));
        assert_eq!(t.requests, 30);
        assert_eq!(t.durable, 25);
        assert_eq!(t.flushes, 11);
        assert_eq!(t.followers.sum_ns, 25_000);
        assert_eq!(t.followers.hist.count(), 25);
        // fd 3 is unnamed here: "other".
        assert_eq!(t.class(FileClass::Other).syncs, 11);
        assert_eq!(t.class(FileClass::Other).sync_ns, 5500);
    }

    #[test]
    fn without_a_flush_function_flushes_are_redo_syncs() {
        let fds = FdTable::new(u32::MAX);
        let mut t = Totals::default();
        t.absorb(&Snapshot::default(), &snap(10, 8, 0, 3), &fds, &cols(false));
        // fd 3 is not a redo file here, so no redo sync is counted.
        assert_eq!(t.flushes, 0);
    }

    #[test]
    fn bucket_bounds_are_seconds_and_the_last_is_open() {
        assert_eq!(le_seconds(0), 2e-9);
        assert_eq!(le_seconds(9), 1024e-9);
        assert_eq!(le_seconds(HIST_BUCKETS - 1), f64::MAX);
    }
}
