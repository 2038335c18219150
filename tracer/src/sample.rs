//! The per-interval record: deltas of two cumulative snapshots, with fds
//! grouped by file class and log2 histograms turned into percentiles.
use std::collections::HashMap;

use readers::family::{
    commit::{AckHooks, StageName},
    redo::Source,
    Family,
};
use tracer_ebpf::{Counter, HistKind};

pub use crate::deltas::{counter_since, hist_since, ratio, LogHist, SizeQuantiles};
use crate::{
    fds::{FdTable, FileClass, FIRST_CARRIED_FD},
    probes::{snapshot::sizes_since, Probes, Snapshot, WriteProbe},
};

/// Batch sizes over an interval: how many requests each redo flush
/// carried, counted per exact size in the kernel.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Batch {
    /// Flushes per display bucket ([`tracer_ebpf::batch_bucket`]): 0, 1
    /// ... 16, 17-32, 33-64 ... 2049-4096, > 4096.
    pub hist: Vec<u64>,
    /// Flushes recorded (the histogram's total).
    pub flushes: u64,
    /// Exact mean batch size (the kernel sums the sizes too).
    pub mean: Option<f64>,
    /// Percentiles and maximum: sizes that occurred, exact up to
    /// [`tracer_ebpf::EXACT_SIZES`] - 2 (the last slot holds the rest).
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
}

/// The largest batch size a bucket holds (4097 stands for "> 4096").
pub fn batch_upper(bucket: usize) -> u64 {
    match bucket {
        0..=16 => bucket as u64,
        b if b + 1 >= tracer_ebpf::BATCH_BUCKETS => 4097,
        b => 1 << (b - 12),
    }
}

/// A bucket's label: "7", "17-32", ">4096".
pub fn batch_label(bucket: usize) -> String {
    match bucket {
        0..=16 => bucket.to_string(),
        b if b + 1 >= tracer_ebpf::BATCH_BUCKETS => ">4096".into(),
        b => format!("{}-{}", batch_upper(b - 1) + 1, batch_upper(b)),
    }
}

/// Exact sizes grouped into the display buckets.
pub fn size_buckets(sizes: &[u64]) -> Vec<u64> {
    let mut hist = vec![0u64; tracer_ebpf::BATCH_BUCKETS];
    for (n, count) in sizes.iter().enumerate() {
        hist[tracer_ebpf::batch_bucket(n as u64)] += count;
    }
    hist
}

impl Batch {
    /// From exact counts per size and the sizes' sum.
    pub fn from_sizes(sizes: &[u64], sum: u64) -> Self {
        let flushes: u64 = sizes.iter().sum();
        let q = SizeQuantiles::of(sizes);
        Batch {
            hist: size_buckets(sizes),
            flushes,
            mean: ratio(sum, flushes),
            p50: q.p50,
            p90: q.p90,
            p99: q.p99,
            max: q.max,
        }
    }
}

/// Leaders and followers over an interval (`--anatomy`, exact mode).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Anatomy {
    /// Durable write calls that ran the redo flush themselves.
    pub leaders: u64,
    /// Durable write calls that rode on another thread's flush.
    pub followers: u64,
    pub leader_wait_p50_us: Option<f64>,
    pub leader_wait_p99_us: Option<f64>,
    pub follower_wait_p50_us: Option<f64>,
    pub follower_wait_p99_us: Option<f64>,
    /// The share of the leaders' wait spent in fsync/fdatasync inside
    /// the flush (0..1).
    pub leader_sync_share: Option<f64>,
}

/// Per-class sync activity over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassTotals {
    pub syncs: u64,
    /// Time inside those syncs, ns (the exporter's histogram sums).
    pub sync_ns: u64,
    pub syncs_in_flush: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub hist: LogHist,
}

impl ClassTotals {
    /// Adds another interval's activity (the exporter's running totals).
    pub fn add(&mut self, o: &ClassTotals) {
        self.syncs += o.syncs;
        self.sync_ns += o.sync_ns;
        self.syncs_in_flush += o.syncs_in_flush;
        self.writes += o.writes;
        self.write_bytes += o.write_bytes;
        self.hist.add(&o.hist);
    }
}

/// One interval (or the whole run, for the summary).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Interval {
    /// Seconds since tracing started, at the end of this interval.
    pub elapsed_s: f64,
    /// Length of the interval in seconds.
    pub interval_s: f64,
    /// Write-probe requests (the study's n_write; in server-layer fallback
    /// mode: commits counted at the server layer).
    pub n_write: u64,
    /// Requests that asked for durability (None in fallback mode).
    pub durable: Option<u64>,
    /// Requests at inlined copies where durability cannot be read (None
    /// unless there are such copies): in `n_write`, not in `durable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durable_unknown: Option<u64>,
    /// Redo flushes: flush-function hits, else redo fsyncs from the kernel.
    pub n_flush: u64,
    /// durable (or n_write in fallback mode) per n_flush.
    pub write_per_flush: Option<f64>,
    pub redo_fsync: u64,
    /// Redo syncs issued from inside the flush function (None without
    /// one); the rest are other redo syncs, e.g. checkpoint header writes.
    pub redo_fsync_in_flush: Option<u64>,
    pub redo_p50_us: Option<f64>,
    pub redo_p99_us: Option<f64>,
    /// Writes to the redo file (durable by themselves under O_DSYNC);
    /// None where the writes are not probed (light on the C library).
    pub redo_writes: Option<u64>,
    pub redo_write_bytes: Option<u64>,
    pub binlog_fsync: u64,
    pub data_fsync: u64,
    pub other_fsync: u64,
    /// Time inside the write function for durable requests.
    pub write_wait_p50_us: Option<f64>,
    pub write_wait_p99_us: Option<f64>,
    /// Flush-function hits (None when it is inlined or absent).
    pub flush_calls: Option<u64>,
    /// fsync/fdatasync calls not attributed to an fd (fd map full).
    pub lost_syncs: u64,
    /// Everything the kernel side could not record (syncs, writes, timings).
    pub lost_events: u64,
    /// Requests per redo flush (durable writes, or commits in fallback).
    pub batch: Batch,
    /// Leaders and followers (None without `--anatomy` or in fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<Anatomy>,
    /// `--io` on a block device: what the disk did for the redo syncs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoFigures>,
    /// The binlog group commit, where its probes are attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binlog: Option<crate::binlog::BinlogGroups>,
    /// `--commit-path`: each commit's time, stage by stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_path: Option<crate::commit_path::CommitPath>,
    /// A semi-sync source's waits for its replica, where the hooks are
    /// probed and it waited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication: Option<crate::replication::AckWaits>,
    /// A replication group's part of the commits, where its hook is
    /// probed and commits went through it (`trace.group`; a cluster's,
    /// `trace.cluster`: under its family's word).
    #[serde(
        flatten,
        serialize_with = "crate::group::under_its_word",
        skip_serializing_if = "Option::is_none"
    )]
    pub group: Option<crate::group::GroupWaits>,
    /// The server's threads over the interval, from /proc with no probe:
    /// time on a CPU and time runnable but waiting for one, ms (None
    /// where the threads cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_runq_ms: Option<f64>,
    /// The main command's own process (the built-in workload's clients
    /// and this collector), the same way: the clients' share of the CPUs
    /// the server's threads waited for. None under `trace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_cpu_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_runq_ms: Option<f64>,
}

/// `--io`: the block requests the redo syncs caused over an interval, and
/// every request on the device for comparison.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct IoFigures {
    /// Redo syncs (fsync/fdatasync of a redo file): the divisor below.
    pub redo_syncs: u64,
    /// Requests with data attributed to them, and their bytes.
    pub requests: u64,
    pub bytes: u64,
    /// Of those, the ones the journal thread sent, and their bytes.
    pub journal_requests: u64,
    pub journal_bytes: u64,
    /// Redo syncs during which no attributed request with data was issued.
    pub syncs_without_write: u64,
    /// Cache flushes issued while a redo sync was in flight.
    pub cache_flushes: u64,
    /// Attributed writes with FUA.
    pub fua_writes: u64,
    pub requests_per_sync: Option<f64>,
    pub bytes_per_sync: Option<f64>,
    pub cache_flushes_per_sync: Option<f64>,
    /// Device time (issue to complete) per redo sync, µs.
    pub device_us_per_sync: Option<f64>,
    /// Redo sync time explained by the device: its own requests and the
    /// flushes (`device_share`), the journal's (`journal_share`), and the
    /// rest (`other_share`: waiting for the journal to start, queueing,
    /// CPU), each 0..1 of the time inside the redo syncs.
    pub device_share: Option<f64>,
    pub journal_share: Option<f64>,
    pub other_share: Option<f64>,
    /// Mean time inside a redo sync, µs: what the shares divide.
    pub redo_sync_mean_us: Option<f64>,
    /// Time attributed requests waited between submission and issue, µs
    /// per redo sync.
    pub queue_us_per_sync: Option<f64>,
    /// Device time of each attributed request.
    pub device_p50_us: Option<f64>,
    pub device_p99_us: Option<f64>,
    /// Every request the device completed, anyone's (biolatency's view).
    pub all_requests: u64,
    pub all_bytes: u64,
    pub all_device_ns: u64,
    pub all_p50_us: Option<f64>,
    pub all_p99_us: Option<f64>,
    /// Requests whose issue could not be remembered (map full).
    pub lost: u64,
}

impl IoFigures {
    /// The figures between two snapshots; `redo` is the redo syncs' class.
    fn between(prev: &Snapshot, cur: &Snapshot, redo: &ClassTotals) -> Self {
        let d = |c| counter_since(prev, cur, c);
        let h = |k| hist_since(prev, cur, k);
        let per = |v: u64| ratio(v, redo.syncs);
        let share = |ns: u64| ratio(ns, redo.sync_ns).map(|s| s.min(1.0));
        let (dev_ns, jnl_ns) = (d(Counter::IoDeviceNs), d(Counter::IoJournalDeviceNs));
        let own = share(dev_ns.saturating_sub(jnl_ns));
        let jnl = share(jnl_ns);
        let (mine, all) = (h(HistKind::IoDevice), h(HistKind::DevDevice));
        IoFigures {
            redo_syncs: redo.syncs,
            requests: d(Counter::IoReqs),
            bytes: d(Counter::IoBytes),
            journal_requests: d(Counter::IoJournalReqs),
            journal_bytes: d(Counter::IoJournalBytes),
            syncs_without_write: d(Counter::IoSyncsWithoutWrite),
            cache_flushes: d(Counter::IoFlushes),
            fua_writes: d(Counter::IoFua),
            requests_per_sync: per(d(Counter::IoReqs)),
            bytes_per_sync: per(d(Counter::IoBytes)),
            cache_flushes_per_sync: per(d(Counter::IoFlushes)),
            device_us_per_sync: per(dev_ns).map(|ns| ns / 1000.0),
            device_share: own,
            journal_share: jnl,
            other_share: own.zip(jnl).map(|(a, b)| (1.0 - a - b).max(0.0)),
            redo_sync_mean_us: per(redo.sync_ns).map(|ns| ns / 1000.0),
            queue_us_per_sync: per(d(Counter::IoQueueNs)).map(|ns| ns / 1000.0),
            device_p50_us: mine.quantile_us(0.50),
            device_p99_us: mine.quantile_us(0.99),
            all_requests: d(Counter::DevReqs),
            all_bytes: d(Counter::DevBytes),
            all_device_ns: d(Counter::DevDeviceNs),
            all_p50_us: all.quantile_us(0.50),
            all_p99_us: all.quantile_us(0.99),
            lost: d(Counter::IoLost),
        }
    }
}

/// How to read a snapshot pair: which counters feed which column.
#[derive(Clone, Debug)]
pub struct Columns {
    pub requests: Source,
    pub durable: Option<Source>,
    /// The flush function is counted (out of line or inlined copies).
    pub has_flush_fn: bool,
    /// ... and timed: its out-of-line copy has a return probe, so fsyncs
    /// inside it are told apart (exact tier only).
    pub flush_timed: bool,
    /// The syncs' latency is measured (not by light on the C library).
    pub sync_timed: bool,
    /// Some write probes sit on inlined copies whose durability cannot be
    /// read: their count is reported apart.
    pub unknown_sites: bool,
    /// Leaders and followers are counted.
    pub anatomy: bool,
    /// The per-commit write probes are attached (exact tier). Without
    /// them (light) n_write is the server's commit counter and there is
    /// no durable count, batch or anatomy.
    pub per_commit: bool,
    /// The server's write calls are counted (not by light on the C
    /// library alone).
    pub writes: bool,
    /// `--io` on a block device: the block requests are counted.
    pub io: bool,
    /// The binlog group commit's probes are attached.
    pub binlog: bool,
    /// ... and the commits group there (see `BinlogProfile::forms_group`).
    pub binlog_forms_group: bool,
    /// ... and why each group closed (the family's wait for a fuller
    /// group is probed).
    pub binlog_closed_by: bool,
    /// `--commit-path`: the family's stage names in path order (None
    /// where the commit path is not probed).
    pub commit_stages: Option<&'static [StageName]>,
    /// The semi-sync hooks probed (a semi-sync source's waits for its
    /// replica), and the family's hooks (their names).
    pub ack: crate::replication::AckAt,
    pub ack_hooks: &'static AckHooks,
    /// A replication group's hook is probed: what the family calls its
    /// group (`group`, `cluster`: the summary's word and JSON key), and
    /// its stages' names.
    pub group: Option<(&'static str, &'static [StageName])>,
}

impl Columns {
    pub fn new(write: &WriteProbe, has_flush_fn: bool) -> Self {
        let ack_hooks = &Family::of(None).ack;
        match write {
            WriteProbe::Exact { profile, .. } => Columns {
                requests: profile.requests,
                durable: Some(profile.durable),
                has_flush_fn,
                flush_timed: has_flush_fn,
                sync_timed: true,
                unknown_sites: false,
                anatomy: false,
                per_commit: true,
                writes: true,
                io: false,
                binlog: false,
                binlog_forms_group: false,
                binlog_closed_by: false,
                commit_stages: None,
                ack: Default::default(),
                ack_hooks,
                group: None,
            },
            WriteProbe::ServerLayer { .. } => Columns {
                requests: Source::AllCalls,
                durable: None,
                has_flush_fn: false,
                flush_timed: false,
                sync_timed: true,
                unknown_sites: false,
                anatomy: false,
                per_commit: true,
                writes: true,
                io: false,
                binlog: false,
                binlog_forms_group: false,
                binlog_closed_by: false,
                commit_stages: None,
                ack: Default::default(),
                ack_hooks,
                group: None,
            },
        }
    }

    pub fn of(probes: &Probes) -> Self {
        Self::with_writes(probes, probes.tier.per_commit())
    }

    /// The columns of an exact window on light probes: the write probes
    /// are attached while it lasts.
    pub fn window_of(probes: &Probes) -> Self {
        Self::with_writes(probes, true)
    }

    fn with_writes(probes: &Probes, per_commit: bool) -> Self {
        let plan = &probes.plan;
        let mut c = Columns::new(&plan.write, plan.flush.is_some());
        c.per_commit = per_commit;
        if !c.per_commit {
            c.durable = None;
        }
        c.anatomy = probes.anatomy && c.per_commit;
        c.flush_timed = c.has_flush_fn
            && probes.tier.per_commit()
            && plan.flush.as_ref().is_some_and(|f| f.out_of_line);
        c.sync_timed = probes.kernel.sync_timed();
        c.unknown_sites = c.durable.is_some() && plan.unknown_sites() > 0;
        c.writes = probes.kernel.write_probes.is_some();
        c.io = probes.io_counted();
        c.binlog = probes.binlog_counted();
        c.binlog_forms_group =
            c.binlog && plan.binlog.as_ref().is_some_and(|b| b.profile.forms_group);
        c.binlog_closed_by = c.binlog && plan.binlog.as_ref().is_some_and(|b| b.close.is_ok());
        let family = Family::of(plan.server);
        c.commit_stages = probes.commit_path.then_some(family.stages);
        c.ack = probes.ack;
        c.ack_hooks = &family.ack;
        // Light: in its exact windows only.
        c.group = family
            .group
            .as_ref()
            .map(|g| (g.word, family.stages))
            .filter(|_| probes.group.is_some() && c.per_commit);
        c
    }
}

/// The workload's writing commits per redo flush: true even when n_write
/// comes from the server-layer fallback. For ticks and summaries alike.
pub fn commits_per_flush(commits: u64, trace: Option<&Interval>) -> Option<f64> {
    trace.and_then(|t| ratio(commits, t.n_flush))
}

/// Sync/write activity by class between two snapshots.
pub fn by_class(prev: &Snapshot, cur: &Snapshot, fds: &FdTable, class: FileClass) -> ClassTotals {
    let mut t = ClassTotals::default();
    for (fd, now) in &cur.fds {
        let is = if now.syncs_in_flush > 0 {
            fds.class_synced_in_flush(*fd)
        } else {
            fds.class(*fd)
        };
        if is != class {
            continue;
        }
        let before = prev.fds.get(fd).copied().unwrap_or_default();
        t.syncs += now.syncs.saturating_sub(before.syncs);
        t.sync_ns += now.sync_ns.saturating_sub(before.sync_ns);
        t.syncs_in_flush += now.syncs_in_flush.saturating_sub(before.syncs_in_flush);
        t.writes += now.writes.saturating_sub(before.writes);
        t.write_bytes += now.write_bytes.saturating_sub(before.write_bytes);
        t.hist.add(&LogHist(now.hist).since(&LogHist(before.hist)));
    }
    t
}

/// What the probes counted between two reads of one attachment, read
/// through the columns' rules (which counter is `n_write`, what a flush
/// is, which probes were on): the one derivation `trace`, the main
/// command and the exporter share. [`Interval::between`] makes a line's
/// figures of it; the exporter adds it to its running totals.
pub struct Delta<'a> {
    pub prev: &'a Snapshot,
    pub cur: &'a Snapshot,
    pub fds: &'a FdTable,
    pub cols: &'a Columns,
}

impl Delta<'_> {
    pub fn counter(&self, c: Counter) -> u64 {
        counter_since(self.prev, self.cur, c)
    }

    pub fn hist(&self, k: HistKind) -> LogHist {
        hist_since(self.prev, self.cur, k)
    }

    fn source(&self, s: Source) -> u64 {
        self.cur.source(s).saturating_sub(self.prev.source(s))
    }

    /// Write-probe requests, where the per-commit probes are attached
    /// (None: light, whose `n_write` is the server's commit counter).
    pub fn requests(&self) -> Option<u64> {
        self.cols
            .per_commit
            .then(|| self.source(self.cols.requests))
    }

    /// The durable ones (None in fallback mode or light).
    pub fn durable(&self) -> Option<u64> {
        self.cols.durable.map(|s| self.source(s))
    }

    /// Requests at inlined copies whose durability cannot be read.
    pub fn unknown(&self) -> Option<u64> {
        self.cols
            .unknown_sites
            .then(|| self.counter(Counter::WriteUnknown))
    }

    /// Sync and write activity of one file class.
    pub fn class(&self, class: FileClass) -> ClassTotals {
        by_class(self.prev, self.cur, self.fds, class)
    }

    /// Flush-function hits, where it is counted.
    pub fn flush_calls(&self) -> Option<u64> {
        self.cols
            .has_flush_fn
            .then(|| self.counter(Counter::FlushCalls))
    }

    /// Redo flushes: the flush function's hits, else the redo fsyncs
    /// (`redo`: the redo class's activity).
    pub fn flushes(&self, redo: &ClassTotals) -> u64 {
        self.flush_calls().unwrap_or(redo.syncs)
    }

    /// Everything the kernel side could not record.
    pub fn lost_events(&self) -> u64 {
        self.counter(Counter::SyncLost)
            + self.counter(Counter::TimingLost)
            + self.counter(Counter::WriteLost)
    }

    /// Requests per flush, as exact counts per size (empty without the
    /// write probes: nothing arrives between flushes then).
    pub fn batch_sizes(&self) -> Vec<u64> {
        if self.cols.per_commit {
            sizes_since(&self.prev.batch, &self.cur.batch)
        } else {
            Vec::new()
        }
    }

    /// Binlog group sizes, exact counts per size.
    pub fn binlog_sizes(&self) -> Vec<u64> {
        sizes_since(&self.prev.binlog_sizes, &self.cur.binlog_sizes)
    }
}

impl Interval {
    pub fn between(
        prev: &Snapshot,
        cur: &Snapshot,
        fds: &FdTable,
        cols: &Columns,
        elapsed_s: f64,
        interval_s: f64,
    ) -> Self {
        Self::of(
            &Delta {
                prev,
                cur,
                fds,
                cols,
            },
            elapsed_s,
            interval_s,
        )
    }

    /// A line's figures of `d`.
    pub fn of(d: &Delta, elapsed_s: f64, interval_s: f64) -> Self {
        let (prev, cur, cols) = (d.prev, d.cur, d.cols);
        let redo = d.class(FileClass::Redo);
        let binlog_fsync = d.class(FileClass::Binlog).syncs;
        let io = cols.io.then(|| IoFigures::between(prev, cur, &redo));
        let commit_path = cols.commit_stages.and_then(|names| {
            let now = cur.commit_path.as_ref()?;
            let mut c =
                crate::commit_path::CommitPath::between(prev.commit_path.as_ref(), now, names);
            c.wakeups =
                crate::wakeups::Wakeups::between(prev.wakeups.as_ref(), cur.wakeups.as_ref());
            if let Some(io) = &io {
                c.split_sync(io.device_share, io.journal_share, io.other_share);
            }
            Some(c)
        });
        let n_write = d
            .requests()
            .unwrap_or_else(|| cur.commits.saturating_sub(prev.commits));
        let durable = d.durable();
        let n_flush = d.flushes(&redo);
        let ww = d.hist(HistKind::WriteWait);
        let threads = (!cur.threads.is_empty()).then(|| cur.threads.since(&prev.threads));
        Interval {
            elapsed_s,
            interval_s,
            n_write,
            durable,
            durable_unknown: d.unknown(),
            n_flush,
            write_per_flush: ratio(durable.unwrap_or(n_write), n_flush),
            redo_fsync: redo.syncs,
            redo_fsync_in_flush: cols.flush_timed.then_some(redo.syncs_in_flush),
            redo_p50_us: cols
                .sync_timed
                .then(|| redo.hist.quantile_us(0.50))
                .flatten(),
            redo_p99_us: cols
                .sync_timed
                .then(|| redo.hist.quantile_us(0.99))
                .flatten(),
            redo_writes: cols.writes.then_some(redo.writes),
            redo_write_bytes: cols.writes.then_some(redo.write_bytes),
            binlog_fsync,
            data_fsync: d.class(FileClass::Data).syncs,
            other_fsync: d.class(FileClass::Other).syncs,
            write_wait_p50_us: ww.quantile_us(0.50),
            write_wait_p99_us: ww.quantile_us(0.99),
            flush_calls: d.flush_calls(),
            lost_syncs: d.counter(Counter::SyncLost),
            lost_events: d.lost_events(),
            batch: if cols.per_commit {
                Batch::from_sizes(&d.batch_sizes(), d.counter(Counter::BatchSum))
            } else {
                Batch::default()
            },
            anatomy: cols.anatomy.then(|| {
                let (lw, fw) = (d.hist(HistKind::LeaderWait), d.hist(HistKind::FollowerWait));
                Anatomy {
                    leaders: d.counter(Counter::Leaders),
                    followers: d.counter(Counter::Followers),
                    leader_wait_p50_us: lw.quantile_us(0.50),
                    leader_wait_p99_us: lw.quantile_us(0.99),
                    follower_wait_p50_us: fw.quantile_us(0.50),
                    follower_wait_p99_us: fw.quantile_us(0.99),
                    leader_sync_share: ratio(
                        d.counter(Counter::LeaderSyncNs),
                        d.counter(Counter::LeaderWaitNs),
                    ),
                }
            }),
            io,
            binlog: cols.binlog.then(|| {
                crate::binlog::BinlogGroups::between(
                    prev,
                    cur,
                    binlog_fsync,
                    cols.binlog_forms_group,
                    cols.binlog_closed_by,
                )
            }),
            commit_path,
            replication: crate::replication::AckWaits::between(prev, cur, cols.ack, cols.ack_hooks)
                .filter(|a| a.waits > 0),
            group: cols
                .group
                .map(|(word, names)| crate::group::GroupWaits::between(prev, cur, word, names))
                .filter(|g| g.commits > 0),
            server_cpu_ms: threads.map(|t| t.cpu_ms()),
            server_runq_ms: threads.map(|t| t.runq_ms()),
            workload_cpu_ms: None,
            workload_runq_ms: None,
        }
    }
}

impl Interval {
    /// The main command's own process over this interval.
    pub fn set_workload_threads(&mut self, t: crate::sched_time::SchedTime) {
        self.workload_cpu_ms = Some(t.cpu_ms());
        self.workload_runq_ms = Some(t.runq_ms());
    }
}

/// Turns successive probe reads into intervals on the caller's ticks, and
/// keeps the fd names fresh between ticks. Also remembers where a measured
/// window began, so warmup can be left out of the totals.
pub struct ProbeSampler {
    cols: Columns,
    fds: FdTable,
    start: std::time::Instant,
    last: std::time::Instant,
    prev: Snapshot,
    base: Snapshot,
    base_at: std::time::Instant,
    /// Whether the last tick saw any count move.
    changed: bool,
    /// What earlier attachments counted (a server restart was followed):
    /// added to every read so the totals continue across the restart.
    carried: Snapshot,
    /// The next key for a carried fd: from `u32::MAX` down to
    /// [`FIRST_CARRIED_FD`].
    next_carried_fd: u32,
}

impl ProbeSampler {
    /// Starts counting from what the maps hold now.
    pub fn new(probes: &Probes, pid: u32) -> crate::error::Result<Self> {
        Ok(Self::from(probes, pid, probes.read()?))
    }

    /// Starts counting from zero: the maps were created empty at attach,
    /// so nothing that happened since is missed.
    pub fn since_attach(probes: &Probes, pid: u32) -> Self {
        Self::from(probes, pid, Snapshot::default())
    }

    fn from(probes: &Probes, pid: u32, mut cur: Snapshot) -> Self {
        // The server's threads count from now, whatever the maps hold.
        if cur.threads.is_empty() {
            cur.threads = crate::sched_time::ThreadTimes::read(pid);
        }
        let now = std::time::Instant::now();
        let mut fds = FdTable::new(pid);
        fds.refresh(cur.fds.keys().copied());
        ProbeSampler {
            cols: Columns::of(probes),
            fds,
            start: now,
            last: now,
            base: cur.clone(),
            prev: cur,
            base_at: now,
            changed: false,
            carried: Snapshot::default(),
            next_carried_fd: u32::MAX,
        }
    }

    /// The probes' cumulative counts plus what earlier attachments counted.
    fn read(&self, probes: &Probes) -> crate::error::Result<Snapshot> {
        let mut cur = probes.read()?;
        cur.absorb(&self.carried);
        Ok(cur)
    }

    /// The server's commit counter at the sampler's start (light tier):
    /// the first interval's commits are counted from it.
    pub fn set_commit_base(&mut self, commits: u64) {
        self.prev.commits = commits;
        self.base.commits = commits;
    }

    /// Continues counting on `probes`, freshly attached to `pid` (the
    /// restarted server): what was counted so far is kept, under fd keys
    /// of its own, so the next tick is a delta over the new probes only
    /// and the totals span both servers.
    pub fn reattach(&mut self, probes: &Probes, pid: u32) {
        let mut keys = HashMap::new();
        for fd in self.prev.fds.keys().chain(self.base.fds.keys()) {
            if *fd >= FIRST_CARRIED_FD || keys.contains_key(fd) {
                continue;
            }
            let key = self.next_carried_fd;
            self.next_carried_fd -= 1;
            self.fds.pin(key, *fd);
            keys.insert(*fd, key);
        }
        let rekey = |s: &Snapshot| Snapshot {
            fds: s
                .fds
                .iter()
                .map(|(fd, t)| (keys.get(fd).copied().unwrap_or(*fd), *t))
                .collect(),
            ..s.clone()
        };
        self.carried = rekey(&self.prev);
        self.prev = self.carried.clone();
        self.base = rekey(&self.base);
        self.fds.follow(pid);
        self.cols = Columns::of(probes);
    }

    /// Whether the last [`ProbeSampler::tick`] saw any count move.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The interval since the previous tick.
    pub fn tick(&mut self, probes: &Probes) -> crate::error::Result<Interval> {
        self.tick_with(probes, None)
    }

    /// The interval since the previous tick, with the server's commit
    /// counter read just before (light tier; None keeps the last value,
    /// so a failed read shows as no commits rather than a jump).
    pub fn tick_with(
        &mut self,
        probes: &Probes,
        commits: Option<u64>,
    ) -> crate::error::Result<Interval> {
        let mut cur = self.read(probes)?;
        cur.commits = commits.unwrap_or(self.prev.commits);
        self.fds.refresh(cur.fds.keys().copied());
        let now = std::time::Instant::now();
        let i = Interval::between(
            &self.prev,
            &cur,
            &self.fds,
            &self.cols,
            (now - self.start).as_secs_f64(),
            (now - self.last).as_secs_f64(),
        );
        self.changed = cur != self.prev;
        self.prev = cur;
        self.last = now;
        Ok(i)
    }

    /// Names fds opened since the last look (call often: fds get reused).
    pub fn poll_fds(&mut self, probes: &mut Probes) {
        if let Ok(keys) = probes.fds() {
            self.fds.refresh(keys);
        }
        probes.refresh_redo_fds();
        probes.drain_logs();
    }

    /// The measured window starts at the last tick.
    pub fn mark_base(&mut self) {
        self.base = self.prev.clone();
        self.base_at = self.last;
    }

    /// Totals from the measured window's start to the last tick.
    pub fn totals(&self) -> Interval {
        Interval::between(
            &self.base,
            &self.prev,
            &self.fds,
            &self.cols,
            (self.last - self.start).as_secs_f64(),
            (self.last - self.base_at).as_secs_f64(),
        )
    }
}

/// One tick of a traced run: the workload's and the probes' halves of the
/// same interval (None when the run is untraced).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Joined {
    pub workload: workload::stats::IntervalSample,
    pub trace: Option<Interval>,
    /// The workload's committed transactions per redo flush: true even
    /// when n_write comes from the server-layer fallback.
    pub commits_per_flush: Option<f64>,
    /// Seconds without a completed commit, once they reach
    /// [`STALL_AFTER_S`]: a stopped or wedged server shows as such
    /// instead of as a quiet 0 tps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled_s: Option<f64>,
    /// `--replica semi-sync`: the source's semi-sync was OFF at this
    /// tick (it fell back to async).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub semi_sync_off: bool,
    /// `--replica group`: members ONLINE and the group's size at this
    /// tick, as the primary sees them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_online: Option<crate::server::group_end::Online>,
    /// `--replica semi-sync`: what the source's own semi-sync counters
    /// moved over this tick, beside `trace.replication`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_acks: Option<crate::server::status::ServerAcks>,
}

/// Seconds without a commit after which a tick is marked stalled.
pub const STALL_AFTER_S: f64 = 2.0;

/// Counts the seconds since the workload last committed, tick by tick.
#[derive(Clone, Copy, Debug, Default)]
pub struct StallClock {
    idle_s: f64,
}

impl StallClock {
    /// The stall to mark on this tick, if any.
    pub fn tick(&mut self, w: &workload::stats::IntervalSample) -> Option<f64> {
        if w.txns > 0 {
            self.idle_s = 0.0;
        } else {
            self.idle_s += w.interval_s;
        }
        (self.idle_s + 1e-3 >= STALL_AFTER_S).then_some(self.idle_s)
    }
}

impl Joined {
    pub fn new(workload: workload::stats::IntervalSample, trace: Option<Interval>) -> Self {
        let commits_per_flush = commits_per_flush(workload.commits, trace.as_ref());
        Joined {
            workload,
            trace,
            commits_per_flush,
            stalled_s: None,
            semi_sync_off: false,
            group_online: None,
            server_acks: None,
        }
    }
}

/// An interval with round numbers for the reports' unit tests: 300
/// requests, 100 flushes, `durable` and in-flush syncs as given.
#[cfg(test)]
pub fn test_interval(durable: Option<u64>, inside: Option<u64>) -> Interval {
    Interval {
        elapsed_s: 1.0,
        interval_s: 1.0,
        n_write: 300,
        durable,
        durable_unknown: None,
        n_flush: 100,
        write_per_flush: Some(3.0),
        redo_fsync: 102,
        redo_fsync_in_flush: inside,
        redo_p50_us: Some(150.0),
        redo_p99_us: Some(900.0),
        redo_writes: Some(100),
        redo_write_bytes: Some(51200),
        binlog_fsync: 0,
        data_fsync: 4,
        other_fsync: 0,
        write_wait_p50_us: Some(3.0),
        write_wait_p99_us: Some(1500.0),
        flush_calls: inside,
        lost_syncs: 0,
        lost_events: 0,
        batch: Default::default(),
        anatomy: None,
        io: None,
        binlog: None,
        commit_path: None,
        replication: None,
        group: None,
        server_cpu_ms: None,
        workload_cpu_ms: None,
        workload_runq_ms: None,
        server_runq_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_ebpf::HIST_BUCKETS;

    #[test]
    fn a_stall_is_marked_after_two_seconds_without_a_commit() {
        let w = |txns| workload::stats::IntervalSample {
            tick: 1,
            elapsed_s: 1.0,
            interval_s: 1.0,
            warmup: false,
            txns,
            commits: txns,
            tps: txns as f64,
            latency: Default::default(),
            errors: 0,
            retries: 0,
            tpcc: None,
        };
        let mut c = StallClock::default();
        assert_eq!(c.tick(&w(5)), None);
        assert_eq!(c.tick(&w(0)), None);
        assert_eq!(c.tick(&w(0)), Some(2.0));
        assert_eq!(c.tick(&w(0)), Some(3.0));
        assert_eq!(c.tick(&w(1)), None);
    }

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let mut h = [0u64; HIST_BUCKETS];
        h[10] = 100; // 1024..2048 ns
        let h = LogHist(h);
        let p50 = h.quantile_us(0.5).unwrap();
        assert!((p50 - 1.536).abs() < 1e-9, "{p50}");
        assert!(h.quantile_us(0.99).unwrap() <= 2.048);
        assert_eq!(LogHist::default().quantile_us(0.5), None);
    }

    #[test]
    fn quantiles_are_monotone() {
        let mut h = [0u64; HIST_BUCKETS];
        for (i, slot) in h.iter_mut().enumerate().take(20) {
            *slot = (i as u64 * 7) % 5 + 1;
        }
        let h = LogHist(h);
        let qs: Vec<f64> = [0.1, 0.5, 0.9, 0.99, 1.0]
            .iter()
            .map(|q| h.quantile_us(*q).unwrap())
            .collect();
        assert!(qs.windows(2).all(|w| w[0] <= w[1]), "{qs:?}");
    }
}
