//! The maps more than one feature writes or reads: the counters and
//! histograms every feature adds to, the per-fd stats (syncs and writes),
//! the redo fds user space names, and the syncs in flight (the fsync
//! probes' and the block I/O's). A map one feature uses is beside it.
use aya_ebpf::{
    macros::map,
    maps::{HashMap, PerCpuArray, PerCpuHashMap},
};
use tracer_ebpf::{
    FdStats, Hist, SyncStart, COUNTERS as N_COUNTERS, HISTS as N_HISTS, MAX_FDS, MAX_THREADS,
};

#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(N_COUNTERS, 0);

#[map]
pub(crate) static HISTS: PerCpuArray<Hist> = PerCpuArray::with_max_entries(N_HISTS, 0);

#[map]
pub(crate) static FD_STATS: PerCpuHashMap<u32, FdStats> =
    PerCpuHashMap::with_max_entries(MAX_FDS, 0);

/// The target's redo-log fds, written by user space as it names fds.
#[map]
pub(crate) static REDO_FDS: HashMap<u32, u8> = HashMap::with_max_entries(64, 0);

/// A zeroed value to insert from, so no 300-byte struct lives on the stack.
#[map]
pub(crate) static ZERO_FD: PerCpuArray<FdStats> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub(crate) static SYNC_START: HashMap<u64, SyncStart> = HashMap::with_max_entries(MAX_THREADS, 0);
