//! What one read of the maps gives: cumulative counts since attach, summed
//! over CPUs. Plain data, so the samplers and the exporter's totals work
//! on it without the programs.
use std::collections::HashMap;

use tracer_ebpf::{Counter, BATCH_BUCKETS, HIST_BUCKETS};

use super::profiles::Source;

/// Cumulative counts since attach, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub counters: [u64; tracer_ebpf::COUNTERS as usize],
    pub hists: [[u64; HIST_BUCKETS]; tracer_ebpf::HISTS as usize],
    pub fds: HashMap<u32, FdTotals>,
    /// Flushes per batch-size bucket ([`tracer_ebpf::batch_bucket`]).
    pub batch: [u64; BATCH_BUCKETS],
    /// Light tier: the server's commit counter at this read (set by the
    /// caller, who can log in; 0 when nothing counts commits).
    pub commits: u64,
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
        for (a, b) in self.batch.iter_mut().zip(other.batch) {
            *a += b;
        }
        self.commits += other.commits;
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
