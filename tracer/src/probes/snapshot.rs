//! What one read of the maps gives: cumulative counts since attach, summed
//! over CPUs. Plain data, so the samplers and the exporter's totals work
//! on it without the programs.
use std::collections::HashMap;

use readers::family::redo::Source;
use tracer_ebpf::{Counter, CP_STAGES, HIST_BUCKETS};

/// Cumulative counts since attach, summed over CPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub counters: [u64; tracer_ebpf::COUNTERS as usize],
    pub hists: [[u64; HIST_BUCKETS]; tracer_ebpf::HISTS as usize],
    pub fds: HashMap<u32, FdTotals>,
    /// Flushes per exact batch size ([`tracer_ebpf::SizeHist`]; empty
    /// before the first read).
    pub batch: Vec<u64>,
    /// Binlog groups per exact size in commits (empty: none counted).
    pub binlog_sizes: Vec<u64>,
    /// The same per [`tracer_ebpf::CloseReason`] (its index): why each
    /// group closed.
    pub binlog_closed_sizes: [Vec<u64>; tracer_ebpf::CLOSE_REASONS],
    /// Binlog groups led, per leader thread (pid_tgid; empty where the
    /// binlog is not probed).
    pub binlog_leaders: HashMap<u64, u64>,
    /// Light tier: the server's commit counter at this read (set by the
    /// caller, who can log in; 0 when nothing counts commits).
    pub commits: u64,
    /// `--commit-path`: the commits' totals (None where not attached).
    pub commit_path: Option<CommitTotals>,
    /// The server's threads' CPU and run-queue time at this read, from
    /// /proc (no probe; empty where unreadable). Not carried across a
    /// restart: the new server's threads count from their start.
    pub threads: crate::sched_time::ThreadTimes,
    /// `--wakeups`: the followers' waits and their wake-ups.
    pub wakeups: Option<super::wakeups::WakeTotals>,
}

/// The kernel's `CommitStats` summed over CPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitTotals {
    pub commits: u64,
    pub total_ns: u64,
    /// The whole commit's time ([`tracer_ebpf::FineHist`] slots).
    pub total: Vec<u64>,
    pub stage_commits: [u64; CP_STAGES],
    pub stage_ns: [u64; CP_STAGES],
    pub stage_hist: [[u64; HIST_BUCKETS]; CP_STAGES],
    pub lost: u64,
    /// Of the commits' and each stage's time, the committing threads' CPU
    /// and run-queue time (zeros without the scheduler split).
    pub total_cpu_ns: u64,
    pub total_runq_ns: u64,
    pub stage_cpu_ns: [u64; CP_STAGES],
    pub stage_runq_ns: [u64; CP_STAGES],
}

impl Default for CommitTotals {
    fn default() -> Self {
        CommitTotals {
            commits: 0,
            total_ns: 0,
            total: vec![0; tracer_ebpf::FINE_SLOTS],
            stage_commits: [0; CP_STAGES],
            stage_ns: [0; CP_STAGES],
            stage_hist: [[0; HIST_BUCKETS]; CP_STAGES],
            lost: 0,
            total_cpu_ns: 0,
            total_runq_ns: 0,
            stage_cpu_ns: [0; CP_STAGES],
            stage_runq_ns: [0; CP_STAGES],
        }
    }
}

impl CommitTotals {
    /// Adds one CPU's (or one attachment's) figures.
    pub fn add(&mut self, o: &CommitTotals) {
        self.commits += o.commits;
        self.total_ns += o.total_ns;
        add_sizes(&mut self.total, &o.total);
        for k in 0..CP_STAGES {
            self.stage_commits[k] += o.stage_commits[k];
            self.stage_ns[k] += o.stage_ns[k];
            self.stage_cpu_ns[k] += o.stage_cpu_ns[k];
            self.stage_runq_ns[k] += o.stage_runq_ns[k];
            for (a, b) in self.stage_hist[k].iter_mut().zip(o.stage_hist[k]) {
                *a += b;
            }
        }
        self.lost += o.lost;
        self.total_cpu_ns += o.total_cpu_ns;
        self.total_runq_ns += o.total_runq_ns;
    }
}

// By hand: arrays of more than 32 have no derived Default.
impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            counters: [0; tracer_ebpf::COUNTERS as usize],
            hists: Default::default(),
            fds: HashMap::new(),
            batch: Vec::new(),
            binlog_sizes: Vec::new(),
            binlog_closed_sizes: Default::default(),
            binlog_leaders: HashMap::new(),
            commits: 0,
            commit_path: None,
            threads: Default::default(),
            wakeups: None,
        }
    }
}

/// `FdStats` summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FdTotals {
    pub syncs: u64,
    pub sync_ns: u64,
    pub syncs_in_flush: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub hist: [u64; HIST_BUCKETS],
}

/// `into[n] += from[n]`, growing `into` as needed.
pub fn add_sizes(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// The growth per size from `prev` to `cur` (either may be empty).
pub fn sizes_since(prev: &[u64], cur: &[u64]) -> Vec<u64> {
    cur.iter()
        .enumerate()
        .map(|(i, c)| c.saturating_sub(prev.get(i).copied().unwrap_or(0)))
        .collect()
}

impl Snapshot {
    /// Adds `other`'s counts (fds with the same key are summed).
    pub fn absorb(&mut self, other: &Snapshot) {
        for (a, b) in self.counters.iter_mut().zip(other.counters) {
            *a += b;
        }
        for (h, o) in self.hists.iter_mut().zip(&other.hists) {
            for (a, b) in h.iter_mut().zip(o) {
                *a += b;
            }
        }
        add_sizes(&mut self.batch, &other.batch);
        add_sizes(&mut self.binlog_sizes, &other.binlog_sizes);
        for (a, b) in self
            .binlog_closed_sizes
            .iter_mut()
            .zip(&other.binlog_closed_sizes)
        {
            add_sizes(a, b);
        }
        for (tid, n) in &other.binlog_leaders {
            *self.binlog_leaders.entry(*tid).or_default() += n;
        }
        self.commits += other.commits;
        if let Some(o) = &other.commit_path {
            self.commit_path.get_or_insert_with(Default::default).add(o);
        }
        if let Some(o) = &other.wakeups {
            self.wakeups.get_or_insert_with(Default::default).add(o);
        }
        for (fd, t) in &other.fds {
            let e = self.fds.entry(*fd).or_default();
            e.syncs += t.syncs;
            e.sync_ns += t.sync_ns;
            e.syncs_in_flush += t.syncs_in_flush;
            e.writes += t.writes;
            e.write_bytes += t.write_bytes;
            for (a, b) in e.hist.iter_mut().zip(t.hist) {
                *a += b;
            }
        }
    }

    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
    pub fn source(&self, s: Source) -> u64 {
        match s {
            Source::AllCalls => self.counter(Counter::WriteCalls),
            Source::PredA => self.counter(Counter::WritePredA),
            Source::PredB => self.counter(Counter::WritePredB),
        }
    }
}
