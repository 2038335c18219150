//! commitscope's eBPF programs. They only count and timestamp into per-CPU
//! maps; user space reads the maps each interval and does all interpretation
//! (which function is "the write", which fd is the redo log, percentiles).
#![no_std]
#![no_main]
// The BPF target has no `AtomicI64::fetch_add` (core sees no CAS); the
// intrinsic, its result unused, becomes the kernel's atomic add (XADD).
#![feature(core_intrinsics)]
#![allow(internal_features)]

use core::intrinsics::{atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    macros::{fentry, fexit, kprobe, kretprobe, map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext,
};
use aya_log_ebpf::warn;
use tracer_ebpf::{
    fine_slot, log2_bucket, rwbs_kind, size_slot, AckSpan, BatchMember, BinlogMarks, BinlogThread,
    CommitSpan, CommitStage, CommitStats, Counter, FdStats, Group, Hist, HistKind, IoIssued,
    IoState, IoTag, JournalThreads, PredOp, SizeHist, SyncStart, WriteStart, ACK_RING_LEN,
    COUNTERS as N_COUNTERS, CP_STAGES, HISTS as N_HISTS, IO_ATTRIBUTED, IO_FLUSH, IO_FUA,
    IO_JOURNAL, MAX_FDS, MAX_THREADS, NR_PWRITEV, NR_PWRITEV2,
};

// Configuration, written by user space into .rodata before load (so the
// verifier can prune disabled branches). `read_volatile` keeps the compiler
// from folding the zero initialisers.
#[no_mangle]
static TARGET_TGID: u32 = 0;
/// Non-zero when the write return probe is attached: only then is the
/// entry timestamp worth a hash-map insert (else entries would pile up).
#[no_mangle]
static WRITE_TIMING: u32 = 0;
#[no_mangle]
static PRED_A_ARG: u32 = 0;
#[no_mangle]
static PRED_A_OP: u32 = 0;
#[no_mangle]
static PRED_A_MASK: u64 = 0;
#[no_mangle]
static PRED_A_VALUE: u64 = 0;
#[no_mangle]
static PRED_B_ARG: u32 = 0;
#[no_mangle]
static PRED_B_OP: u32 = 0;
#[no_mangle]
static PRED_B_MASK: u64 = 0;
#[no_mangle]
static PRED_B_VALUE: u64 = 0;
#[no_mangle]
static PRED_F_ARG: u32 = 0;
#[no_mangle]
static PRED_F_OP: u32 = 0;
#[no_mangle]
static PRED_F_MASK: u64 = 0;
#[no_mangle]
static PRED_F_VALUE: u64 = 0;
/// Which write-probe hits are batch members ([`BatchMember`]).
#[no_mangle]
static DURABLE_PRED: u32 = 0;
/// Non-zero without a flush function: a batch then begins at each fsync
/// of a redo fd (`REDO_FDS`, kept by user space).
#[no_mangle]
static BATCH_ON_SYNC: u32 = 0;
/// Non-zero for leaders/followers (needs the write return probe).
#[no_mangle]
static ANATOMY: u32 = 0;
/// Non-zero with `--commit-path`: stage probes add to the committing
/// thread's open commit (`CP_SPANS`).
#[no_mangle]
static COMMIT_PATH: u32 = 0;
/// `--io`: the block device under the redo log, as the block tracepoints
/// spell it (`major << 20 | minor`, the whole disk); 0 leaves I/O alone.
#[no_mangle]
static IO_DEV: u32 = 0;
/// Which threads write the journal for a redo sync ([`JournalThreads`]).
#[no_mangle]
static IO_JOURNAL_THREADS: u32 = 0;
/// Offsets in the block tracepoints' records, from their `format` files
/// (`dev` at 8 and `sector` at 16 are checked there too).
#[no_mangle]
static ISSUE_BYTES_OFF: u32 = 28;
#[no_mangle]
static ISSUE_RWBS_OFF: u32 = 34;
#[no_mangle]
static COMPLETE_RWBS_OFF: u32 = 34;
#[no_mangle]
static BIO_RWBS_OFF: u32 = 28;
/// Non-zero: a binlog group closes when its flush leader's function
/// returns (MariaDB's `trx_group_commit_leader`); zero: at the sync
/// stage's queue fetch, which predicate G selects (MySQL).
#[no_mangle]
static BINLOG_CLOSE_AT_FLUSH: u32 = 0;
#[no_mangle]
static PRED_G_ARG: u32 = 0;
#[no_mangle]
static PRED_G_OP: u32 = 0;
#[no_mangle]
static PRED_G_MASK: u64 = 0;
#[no_mangle]
static PRED_G_VALUE: u64 = 0;

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(N_COUNTERS, 0);
#[map]
static HISTS: PerCpuArray<Hist> = PerCpuArray::with_max_entries(N_HISTS, 0);
#[map]
static FD_STATS: PerCpuHashMap<u32, FdStats> = PerCpuHashMap::with_max_entries(MAX_FDS, 0);
/// Batch sizes: requests per flush (see `batch_begin`), exact.
#[map]
static BATCH: PerCpuArray<SizeHist> = PerCpuArray::with_max_entries(1, 0);
/// Binlog group sizes: commits per group, exact.
#[map]
static BINLOG_SIZES: PerCpuArray<SizeHist> = PerCpuArray::with_max_entries(1, 0);
/// MySQL's sync-group marks (see `BinlogMarks`), shared by all CPUs.
#[map]
static BINLOG_MARKS: Array<BinlogMarks> = Array::with_max_entries(1, 0);
/// Stage leaders' state, per thread.
#[map]
static BINLOG_THREADS: HashMap<u64, BinlogThread> = HashMap::with_max_entries(MAX_THREADS, 0);
/// Binlog groups led, per leader thread (pid_tgid): written by group
/// closers only, one at a time (LOCK_log or the sync stage's lock).
#[map]
static BINLOG_LEADERS: HashMap<u64, u64> = HashMap::with_max_entries(MAX_THREADS, 0);
/// Requests arrived since the last flush began, shared by all CPUs.
#[map]
static GROUP: Array<Group> = Array::with_max_entries(1, 0);
/// The target's redo-log fds, written by user space as it names fds.
#[map]
static REDO_FDS: HashMap<u32, u8> = HashMap::with_max_entries(64, 0);
/// Each thread's open commit (tid modulo the size, owner checked).
#[map]
static CP_SPANS: Array<CommitSpan> = Array::with_max_entries(MAX_THREADS, 0);
/// The commits' totals and their stages'.
#[map]
static CP_STATS: PerCpuArray<CommitStats> = PerCpuArray::with_max_entries(1, 0);
/// The span probes' current attachment (0: off), written by user space.
#[map]
static CP_GEN: Array<u64> = Array::with_max_entries(1, 0);
/// A semi-sync wait's entry, per thread.
#[map]
static ACK_START: HashMap<u64, u64> = HashMap::with_max_entries(MAX_THREADS, 0);
/// The latest acknowledgement waits inside the binlog's group commit
/// (`--commit-path`), and the count of spans ever pushed (the next slot).
#[map]
static ACK_RING: Array<AckSpan> = Array::with_max_entries(ACK_RING_LEN, 0);
#[map]
static ACK_HEAD: Array<u64> = Array::with_max_entries(1, 0);
/// A zeroed value to insert from, so no 300-byte struct lives on the stack.
#[map]
static ZERO_FD: PerCpuArray<FdStats> = PerCpuArray::with_max_entries(1, 0);

/// Entry timestamps per thread. One map per timed function because they
/// nest: log_write_up_to -> log_t::flush -> fdatasync. The write's, hit
/// on every commit, is an array slot per thread (tid modulo its size,
/// owner checked) rather than a hash insert and delete: cheaper on the
/// hottest path.
#[map]
static WRITE_START: Array<WriteStart> = Array::with_max_entries(MAX_THREADS, 0);
#[map]
static FLUSH_START: HashMap<u64, u64> = HashMap::with_max_entries(MAX_THREADS, 0);
#[map]
static SYNC_START: HashMap<u64, SyncStart> = HashMap::with_max_entries(MAX_THREADS, 0);

/// `--io`: the redo syncs in flight.
#[map]
static IO_STATE: Array<IoState> = Array::with_max_entries(1, 0);
/// Bios sent for a redo sync, by sector, until their request is issued.
/// LRU: a bio merged into another's request is never issued under its own
/// sector, and simply ages out.
#[map]
static IO_TAGS: LruHashMap<u64, IoTag> = LruHashMap::with_max_entries(8192, 0);
/// Requests issued on the device, by sector (cache flushes, which carry
/// none, under `u64::MAX`: one flush at a time per queue), until complete.
#[map]
static IO_ISSUED: LruHashMap<u64, IoIssued> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn cfg_u32(v: &u32) -> u32 {
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
fn cfg_u64(v: &u64) -> u64 {
    unsafe { core::ptr::read_volatile(v) }
}

/// True when the current task belongs to the traced process.
#[inline(always)]
fn is_target() -> Option<u64> {
    let id = bpf_get_current_pid_tgid();
    if (id >> 32) as u32 == cfg_u32(&TARGET_TGID) {
        Some(id)
    } else {
        None
    }
}

#[inline(always)]
fn bump(c: Counter) {
    if let Some(p) = COUNTERS.get_ptr_mut(c as u32) {
        unsafe { *p += 1 };
    }
}

#[inline(always)]
fn add(c: Counter, v: u64) {
    if let Some(p) = COUNTERS.get_ptr_mut(c as u32) {
        unsafe { *p += v };
    }
}

#[inline(always)]
fn record(hist: &mut Hist, ns: u64) {
    let b = log2_bucket(ns);
    if let Some(slot) = hist.buckets.get_mut(b) {
        *slot += 1;
    }
}

#[inline(always)]
fn record_kind(kind: HistKind, ns: u64) {
    if let Some(h) = HISTS.get_ptr_mut(kind as u32) {
        record(unsafe { &mut *h }, ns);
    }
}

/// Byte offsets in x86-64 `struct pt_regs` of the SysV argument registers
/// RDI, RSI, RDX, RCX, R8, R9.
const ARG_OFFSETS: [usize; 6] = [112, 104, 96, 88, 72, 64];

/// Argument `n` (chosen at run time by user space). A ctx pointer moved by
/// a variable offset is rejected by the verifier, so the register is read
/// with bpf_probe_read_kernel instead of a direct ctx load.
#[inline(always)]
fn arg(ctx: &ProbeContext, n: u32) -> u64 {
    let off = ARG_OFFSETS
        .get(n as usize)
        .copied()
        .unwrap_or(ARG_OFFSETS[0]);
    let base = ctx.regs as *const u8;
    unsafe { bpf_probe_read_kernel(base.wrapping_add(off) as *const u64) }.unwrap_or(0)
}

#[inline(always)]
fn predicate(ctx: &ProbeContext, argn: &u32, op: &u32, mask: &u64, value: &u64) -> bool {
    let op = cfg_u32(op);
    if op == PredOp::Always as u32 {
        return true;
    }
    if op == PredOp::Off as u32 {
        return false;
    }
    let v = arg(ctx, cfg_u32(argn)) & cfg_u64(mask);
    if op == PredOp::NonZero as u32 {
        v != 0
    } else {
        v == cfg_u64(value)
    }
}

/// Counts a write-probe hit and its predicates; returns (A, batch member).
#[inline(always)]
fn count_write(ctx: &ProbeContext) -> (bool, bool) {
    bump(Counter::WriteCalls);
    let a = predicate(ctx, &PRED_A_ARG, &PRED_A_OP, &PRED_A_MASK, &PRED_A_VALUE);
    if a {
        bump(Counter::WritePredA);
    }
    let b = predicate(ctx, &PRED_B_ARG, &PRED_B_OP, &PRED_B_MASK, &PRED_B_VALUE);
    if b {
        bump(Counter::WritePredB);
    }
    let member = match cfg_u32(&DURABLE_PRED) {
        x if x == BatchMember::PredA as u32 => a,
        x if x == BatchMember::PredB as u32 => b,
        _ => true,
    };
    if member {
        arrive();
    }
    (a, member)
}

/// `*p += v` atomically across CPUs.
#[inline(always)]
fn xadd(p: *mut i64, v: i64) {
    // SAFETY: `p` is an 8-byte aligned i64 inside a map value.
    let _ = unsafe { atomic_xadd::<i64, i64, { AtomicOrdering::Relaxed }>(p, v) };
}

/// One more request for the next flush to carry.
#[inline(always)]
fn arrive() {
    if let Some(g) = GROUP.get_ptr_mut(0) {
        xadd(unsafe { &raw mut (*g).arrived }, 1);
    }
}

/// A flush begins: what arrived since the previous one is its batch. The
/// count read is subtracted (not zeroed), so a request arriving between
/// the read and the subtraction is kept for the next batch.
#[inline(always)]
fn batch_begin() {
    let Some(g) = GROUP.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: as in `arrive`; a plain read of the shared counter.
    let n = unsafe { core::ptr::read_volatile(&raw const (*g).arrived) };
    let n = if n < 0 { 0 } else { n };
    xadd(unsafe { &raw mut (*g).arrived }, -n);
    add(Counter::BatchSum, n as u64);
    count_size(&BATCH, n as u64);
}

/// One more group of `n` in an exact size histogram.
#[inline(always)]
fn count_size(map: &PerCpuArray<SizeHist>, n: u64) {
    if let Some(h) = map.get_ptr_mut(0) {
        if let Some(slot) = unsafe { &mut *h }.counts.get_mut(size_slot(n)) {
            *slot += 1;
        }
    }
}

/// The flush runs on this thread: if it is inside the write function,
/// that call leads its group.
#[inline(always)]
fn mark_leader(id: u64) {
    if cfg_u32(&ANATOMY) == 0 {
        return;
    }
    if let Some(w) = write_slot(id) {
        unsafe { (*w).led = 1 };
    }
}

/// This thread's open write call, if it has one.
#[inline(always)]
fn write_slot(id: u64) -> Option<*mut WriteStart> {
    let w = WRITE_START.get_ptr_mut((id as u32) & (MAX_THREADS - 1))?;
    (unsafe { (*w).owner } == id).then_some(w)
}

// The commit path (`--commit-path`): the server's commit function opens
// a span on its thread; the probes that time the redo write and the
// binlog's stages add their time to the span of the thread they run on;
// the commit's return records the whole and each stage. Only commits that
// wrote are recorded (a redo write request or the binlog's group commit
// ran inside them): statement ends and read-only commits are not commits.

/// The span probes' current attachment; 0 while they are off.
#[inline(always)]
fn cp_generation() -> u64 {
    CP_GEN.get(0).copied().unwrap_or(0)
}

/// This thread's open commit, if it has one (opened under the current
/// attachment of the span probes).
#[inline(always)]
fn cp_span(id: u64) -> Option<*mut CommitSpan> {
    if cfg_u32(&COMMIT_PATH) == 0 {
        return None;
    }
    let generation = cp_generation();
    let s = CP_SPANS.get_ptr_mut((id as u32) & (MAX_THREADS - 1))?;
    let live = unsafe {
        (*s).owner == id && (*s).depth > 0 && generation != 0 && (*s).generation == generation
    };
    live.then_some(s)
}

/// `ns` more in `stage` of this thread's open commit.
#[inline(always)]
fn cp_add(id: u64, stage: CommitStage, ns: u64) {
    if let Some(s) = cp_span(id) {
        if let Some(v) = unsafe { &mut (*s).stage_ns }.get_mut(stage as usize) {
            *v += ns;
        }
    }
}

/// This thread's open commit wrote: it is a commit.
#[inline(always)]
fn cp_wrote(id: u64) {
    if let Some(s) = cp_span(id) {
        unsafe { (*s).wrote = 1 };
    }
}

#[uprobe]
pub fn commit_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let generation = cp_generation();
    if generation == 0 {
        return 0;
    }
    let Some(s) = CP_SPANS.get_ptr_mut((id as u32) & (MAX_THREADS - 1)) else {
        return 0;
    };
    unsafe {
        // A span of an earlier attachment is stale: its return was never
        // seen. It is replaced, not nested into and not counted lost.
        let current = (*s).generation == generation;
        if current && (*s).owner == id && (*s).depth > 0 {
            (*s).depth += 1;
            return 0;
        }
        if current && (*s).owner != 0 && (*s).depth > 0 {
            // Another thread's open commit in this slot (same tid modulo
            // the size): that one is lost, counted.
            if let Some(st) = CP_STATS.get_ptr_mut(0) {
                (*st).lost += 1;
            }
        }
        (*s).owner = id;
        (*s).start = bpf_ktime_get_ns();
        (*s).depth = 1;
        (*s).wrote = 0;
        (*s).binlog_entered = 0;
        (*s).in_binlog = 0;
        (*s).generation = generation;
        (*s).stage_ns = [0; CP_STAGES];
    }
    0
}

#[uretprobe]
pub fn commit_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(s) = CP_SPANS.get_ptr_mut((id as u32) & (MAX_THREADS - 1)) else {
        return 0;
    };
    let generation = cp_generation();
    unsafe {
        if (*s).owner != id || (*s).depth == 0 || (*s).generation != generation {
            return 0;
        }
        (*s).depth -= 1;
        if (*s).depth > 0 {
            return 0;
        }
        (*s).owner = 0;
        if (*s).wrote == 0 {
            return 0;
        }
    }
    let Some(st) = CP_STATS.get_ptr_mut(0) else {
        return 0;
    };
    let (st, sp) = unsafe { (&mut *st, &*s) };
    let total = now.saturating_sub(sp.start);
    st.commits += 1;
    st.total_ns += total;
    if let Some(slot) = st.total.slots.get_mut(fine_slot(total)) {
        *slot += 1;
    }
    for k in 0..CP_STAGES {
        let v = sp.stage_ns[k];
        if v == 0 {
            continue;
        }
        if let (Some(n), Some(sum), Some(h)) = (
            st.stage_commits.get_mut(k),
            st.stage_ns.get_mut(k),
            st.stage_hist.get_mut(k),
        ) {
            *n += 1;
            *sum += v;
            record(h, v);
        }
    }
    0
}

#[uprobe]
pub fn write_entry(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (a, member) = count_write(&ctx);
    cp_wrote(id);
    if cfg_u32(&WRITE_TIMING) == 0 {
        return 0;
    }
    let Some(w) = WRITE_START.get_ptr_mut((id as u32) & (MAX_THREADS - 1)) else {
        return 0;
    };
    // SAFETY: a slot of our array map. Another thread's open call in it
    // (same tid modulo the size) is displaced and counted as lost.
    unsafe {
        if (*w).owner != 0 && (*w).owner != id {
            bump(Counter::TimingLost);
        }
        *w = WriteStart {
            owner: id,
            ts: bpf_ktime_get_ns(),
            pred_a: a as u64,
            durable: member as u64,
            led: 0,
            sync_ns: 0,
        };
    }
    0
}

#[uretprobe]
pub fn write_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(w) = write_slot(id) {
        let start = unsafe { *w };
        unsafe { (*w).owner = 0 };
        let wait = now.saturating_sub(start.ts);
        if start.pred_a != 0 {
            record_kind(HistKind::WriteWait, wait);
        }
        if cfg_u32(&ANATOMY) != 0 && start.durable != 0 {
            if start.led != 0 {
                bump(Counter::Leaders);
                add(Counter::LeaderWaitNs, wait);
                add(Counter::LeaderSyncNs, start.sync_ns);
                record_kind(HistKind::LeaderWait, wait);
                let sync = if start.sync_ns < wait {
                    start.sync_ns
                } else {
                    wait
                };
                cp_add(id, CommitStage::RedoLeaderWrite, wait - sync);
                cp_add(id, CommitStage::RedoLeaderSync, sync);
            } else {
                bump(Counter::Followers);
                add(Counter::FollowerWaitNs, wait);
                record_kind(HistKind::FollowerWait, wait);
                cp_add(id, CommitStage::RedoFollowerWait, wait);
            }
        }
    }
    0
}

/// An inlined copy of the write function whose predicate arguments sit in
/// their calling-convention registers at its entry: counted like a call.
/// Not timed: an inlined copy has no return to probe.
#[uprobe]
pub fn write_site(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let _ = count_write(&ctx);
    cp_wrote(id);
    0
}

/// An inlined copy of the write function where the arguments cannot be
/// read: a request whose durability is unknown.
#[uprobe]
pub fn write_site_unknown(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    cp_wrote(id);
    bump(Counter::WriteCalls);
    bump(Counter::WriteUnknown);
    0
}

/// An inlined copy of the redo flush function: counted, not timed (no
/// return to probe, so its fsyncs are not marked as inside the flush).
#[uprobe]
pub fn flush_site(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if predicate(&ctx, &PRED_F_ARG, &PRED_F_OP, &PRED_F_MASK, &PRED_F_VALUE) {
        bump(Counter::FlushCalls);
        batch_begin();
        mark_leader(id);
    }
    0
}

/// The redo flush function. Predicate F filters calls that are not redo
/// flushes (MySQL 5.6/5.7's `fil_flush(space_id)` serves every tablespace).
#[uprobe]
pub fn flush_entry(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if !predicate(&ctx, &PRED_F_ARG, &PRED_F_OP, &PRED_F_MASK, &PRED_F_VALUE) {
        return 0;
    }
    bump(Counter::FlushCalls);
    batch_begin();
    mark_leader(id);
    if FLUSH_START
        .insert(id, unsafe { bpf_ktime_get_ns() }, 0)
        .is_err()
    {
        bump(Counter::TimingLost);
    }
    0
}

#[uretprobe]
pub fn flush_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(ts) = FLUSH_START.get_ptr(id) {
        let ts = unsafe { *ts };
        let _ = FLUSH_START.remove(id);
        record_kind(HistKind::Flush, now.saturating_sub(ts));
    }
    0
}

// The binlog group commit. User space attaches each program where the
// server family has that boundary (probes/profiles.rs, `BinlogProfile`);
// these only count and timestamp. MySQL: a flush-stage leader opens its
// group and marks where it begins in the count of flushed commits, and
// counts each member's cache it writes; a sync leader's fetch of its queue closes the group before it, from
// the previous sync leader's mark to its own (see `BinlogMarks`).
// MariaDB: one leader does it all, and the end of its binlog sync closes
// the group.

/// This thread's binlog state, created zeroed on first use.
#[inline(always)]
fn binlog_thread(id: u64) -> Option<*mut BinlogThread> {
    if let Some(p) = BINLOG_THREADS.get_ptr_mut(id) {
        return Some(p);
    }
    let zero = BinlogThread {
        flush_start: 0,
        members: 0,
        write_start: 0,
        flushed_at: 0,
        sync_start: 0,
        commit_start: 0,
        entered: 0,
        redo_start: 0,
        redo_ns: 0,
        mark: 0,
    };
    let _ = BINLOG_THREADS.insert(id, zero, BPF_NOEXIST as u64);
    let p = BINLOG_THREADS.get_ptr_mut(id);
    if p.is_none() {
        bump(Counter::BinlogLost);
    }
    p
}

/// A group of `n` commits led by thread `leader` closes. Without the
/// member probe (light tier) every group has 0 members: it is counted,
/// its size is not.
#[inline(always)]
fn binlog_group(n: u64, leader: u64) {
    bump(Counter::BinlogGroups);
    if n > 0 {
        add(Counter::BinlogCommits, n);
        count_size(&BINLOG_SIZES, n);
    }
    if leader == 0 {
        return;
    }
    match BINLOG_LEADERS.get_ptr_mut(leader) {
        Some(c) => unsafe { *c += 1 },
        None => {
            if BINLOG_LEADERS
                .insert(leader, 1, BPF_NOEXIST as u64)
                .is_err()
            {
                bump(Counter::BinlogLost);
            }
        }
    }
}

/// A commit enters the binlog's group commit (MySQL's `ordered_commit`,
/// MariaDB's `write_transaction_to_binlog_events`): if its thread leads
/// the next flush stage, its wait until then is the group's queue wait.
/// Per commit, so exact tier only.
#[uprobe]
pub fn binlog_enter(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(t) = binlog_thread(id) {
        unsafe { (*t).entered = now };
    }
    cp_binlog_entered(id, now);
    0
}

/// The commit's span entered the binlog's group commit at `now`.
#[inline(always)]
fn cp_binlog_entered(id: u64, now: u64) {
    if let Some(s) = cp_span(id) {
        unsafe {
            (*s).wrote = 1;
            (*s).binlog_entered = now;
            (*s).in_binlog = 1;
        }
    }
}

/// The same entry for the commit's span alone: a light tier's exact
/// window. The binlog's own queue wait is the exact tier's: an entry
/// seen in a window and a flush after it would be a wait that never was.
#[uprobe]
pub fn binlog_enter_span(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    cp_binlog_entered(id, unsafe { bpf_ktime_get_ns() });
    0
}

/// The commit leaves the binlog's group commit: if it did not lead a
/// flush stage (which clears its entry), it waited for its leader all
/// along.
#[uretprobe]
pub fn binlog_enter_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(s) = cp_span(id) {
        unsafe { (*s).in_binlog = 0 };
        let entered = unsafe { (*s).binlog_entered };
        if entered != 0 {
            unsafe { (*s).binlog_entered = 0 };
            let now = unsafe { bpf_ktime_get_ns() };
            let d = now.saturating_sub(entered);
            // Part of the wait may have been its leader's wait for the
            // replica's acknowledgement: that part is the ack's stage.
            let acked = ack_overlap(entered, now).min(d);
            cp_add(id, CommitStage::ReplicaAck, acked);
            cp_add(id, CommitStage::BinlogFollowerWait, d - acked);
        }
    }
    0
}

/// How much of `[from, to)` the latest acknowledgement waits in
/// `ACK_RING` cover (they never overlap each other: one leader at a time
/// waits, under the server's lock).
#[inline(always)]
fn ack_overlap(from: u64, to: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..ACK_RING_LEN {
        if let Some(a) = ACK_RING.get(i) {
            let lo = if a.start > from { a.start } else { from };
            let hi = if a.end < to { a.end } else { to };
            if hi > lo {
                sum += hi - lo;
            }
        }
    }
    sum
}

/// Records an acknowledgement wait `[start, end)` that thread `id` made
/// for its group. Its back-to-back waits (MariaDB's leader, one per
/// member) extend its last span.
#[inline(always)]
fn ack_push(id: u64, start: u64, end: u64) {
    let Some(head) = ACK_HEAD.get_ptr_mut(0) else {
        return;
    };
    let n = unsafe { *head };
    if n > 0 {
        if let Some(last) = ACK_RING.get_ptr_mut(((n - 1) % ACK_RING_LEN as u64) as u32) {
            unsafe {
                if (*last).owner == id && start.saturating_sub((*last).end) < ACK_JOIN_NS {
                    (*last).end = end;
                    return;
                }
            }
        }
    }
    if let Some(slot) = ACK_RING.get_ptr_mut((n % ACK_RING_LEN as u64) as u32) {
        unsafe {
            (*slot).owner = id;
            (*slot).start = start;
            (*slot).end = end;
            *head = n + 1;
        }
    }
}

/// Two waits of one leader less than this apart are one (its loop over
/// its members between them).
const ACK_JOIN_NS: u64 = 50_000;

#[inline(always)]
fn ack_enter() -> u32 {
    let Some(id) = is_target() else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    if ACK_START.insert(id, now, 0).is_err() {
        bump(Counter::TimingLost);
    }
    0
}

/// A wait for the replica ends: counted, and in the commit path the
/// thread's own stage; inside the group commit, its followers' too.
#[inline(always)]
fn ack_leave(calls: Counter, ns: Counter, kind: HistKind) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(start) = (unsafe { ACK_START.get(id) }).copied() else {
        return 0;
    };
    let _ = ACK_START.remove(id);
    let now = unsafe { bpf_ktime_get_ns() };
    let d = now.saturating_sub(start);
    bump(calls);
    add(ns, d);
    record_kind(kind, d);
    if let Some(s) = cp_span(id) {
        cp_add(id, CommitStage::ReplicaAck, d);
        if unsafe { (*s).in_binlog } != 0 {
            ack_push(id, start, now);
        }
    }
    0
}

#[uprobe]
pub fn ack_sync_entry(_ctx: ProbeContext) -> u32 {
    ack_enter()
}

#[uretprobe]
pub fn ack_sync_return(_ctx: RetProbeContext) -> u32 {
    ack_leave(Counter::AckSyncCalls, Counter::AckSyncNs, HistKind::AckSync)
}

#[uprobe]
pub fn ack_commit_entry(_ctx: ProbeContext) -> u32 {
    ack_enter()
}

#[uretprobe]
pub fn ack_commit_return(_ctx: RetProbeContext) -> u32 {
    ack_leave(
        Counter::AckCommitCalls,
        Counter::AckCommitNs,
        HistKind::AckCommit,
    )
}

/// The flush stage's redo flush begins (MySQL's `ha_flush_logs`), timed
/// only inside a flush stage (FLUSH LOGS and the like call it too).
#[uprobe]
pub fn binlog_redo_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
        unsafe {
            if (*t).flush_start != 0 {
                (*t).redo_start = bpf_ktime_get_ns();
            }
        }
    }
    0
}

#[uretprobe]
pub fn binlog_redo_return(_ctx: RetProbeContext) -> u32 {
    let d = binlog_stage_ends(
        |t| unsafe { &raw mut (*t).redo_start },
        Counter::BinlogRedoFlushes,
        Counter::BinlogRedoNs,
        HistKind::BinlogRedo,
        None,
    );
    if let Some(id) = is_target() {
        if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
            unsafe { (*t).redo_ns += d };
        }
    }
    0
}

#[uprobe]
pub fn binlog_flush_open(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = binlog_thread(id) else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    unsafe {
        (*t).flush_start = now;
        (*t).members = 0;
        (*t).redo_ns = 0;
        let entered = (*t).entered;
        if entered != 0 {
            (*t).entered = 0;
            let d = now.saturating_sub(entered);
            bump(Counter::BinlogQueueWaits);
            add(Counter::BinlogQueueWaitNs, d);
            record_kind(HistKind::BinlogQueueWait, d);
        }
        // MySQL: where this flush group begins in the count of flushed
        // commits (plain read: flush leaders come here one at a time,
        // under the server's LOCK_log).
        if cfg_u32(&BINLOG_CLOSE_AT_FLUSH) == 0 {
            if let Some(m) = BINLOG_MARKS.get_ptr_mut(0) {
                (*t).mark = (*m).flushed + 1;
            }
        }
    }
    // The commit path: this commit leads; its wait so far was the queue.
    if let Some(s) = cp_span(id) {
        let entered = unsafe { (*s).binlog_entered };
        if entered != 0 {
            unsafe { (*s).binlog_entered = 0 };
            cp_add(
                id,
                CommitStage::BinlogQueueWait,
                now.saturating_sub(entered),
            );
        }
    }
    0
}

/// A member's cache written by its flush leader: one per commit, under
/// LOCK_log on MySQL (so the count of flushed commits is a plain add).
#[uprobe]
pub fn binlog_member(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return 0;
    };
    unsafe {
        if (*t).flush_start == 0 {
            return 0;
        }
        (*t).members += 1;
    }
    if cfg_u32(&BINLOG_CLOSE_AT_FLUSH) == 0 {
        if let Some(m) = BINLOG_MARKS.get_ptr_mut(0) {
            unsafe { (*m).flushed += 1 };
        }
    }
    0
}

#[uprobe]
pub fn binlog_write_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
        unsafe {
            if (*t).flush_start != 0 {
                (*t).write_start = bpf_ktime_get_ns();
            }
        }
    }
    0
}

/// The flush stage ends (the binlog write returns): its commits go to the
/// sync stage, or close a group where the family has no separate one.
#[uretprobe]
pub fn binlog_flush_close(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    let (start, n, write, redo) = unsafe {
        (
            (*t).flush_start,
            (*t).members,
            (*t).write_start,
            (*t).redo_ns,
        )
    };
    if start == 0 {
        return 0;
    }
    // The redo flush inside it is the redo's stage (timed by the write
    // probe's return), not the binlog's. Where the group closes here
    // (MariaDB), the write function is the binlog's write-out and sync:
    // the sync's stage; before it, the leader waited for its group
    // (`binlog_commit_wait_*`) and wrote the members' caches.
    let closes_here = cfg_u32(&BINLOG_CLOSE_AT_FLUSH) != 0;
    let sync = if closes_here && write != 0 {
        now.saturating_sub(write)
    } else {
        0
    };
    cp_add(id, CommitStage::BinlogSync, sync);
    cp_add(
        id,
        CommitStage::BinlogFlush,
        now.saturating_sub(start)
            .saturating_sub(redo)
            .saturating_sub(sync),
    );
    let close_at_flush = cfg_u32(&BINLOG_CLOSE_AT_FLUSH) != 0;
    unsafe {
        (*t).flush_start = 0;
        (*t).write_start = 0;
        // A sync stage of its own waits from here (MySQL); where the
        // group closes here, there is none to wait for.
        if !close_at_flush {
            (*t).flushed_at = now;
        }
    }
    bump(Counter::BinlogFlushGroups);
    let d = now.saturating_sub(start);
    add(Counter::BinlogFlushNs, d);
    record_kind(HistKind::BinlogFlush, d);
    if write != 0 {
        add(Counter::BinlogWriteNs, now.saturating_sub(write));
    }
    if close_at_flush {
        binlog_group(n, id);
    }
    0
}

/// The sync stage's leader fetches its queue: the group before it ends
/// where this leader's own flush group began (see `BinlogMarks`). The
/// last group of a trace is closed by nobody, the first one seen is
/// skipped: it began before the probes.
#[uprobe]
pub fn binlog_group_close(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if !predicate(&ctx, &PRED_G_ARG, &PRED_G_OP, &PRED_G_MASK, &PRED_G_VALUE) {
        return 0;
    }
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return 0;
    };
    let Some(m) = BINLOG_MARKS.get_ptr_mut(0) else {
        return 0;
    };
    unsafe {
        let mark = (*t).mark;
        if mark == 0 {
            return 0;
        }
        (*t).mark = 0;
        let last = (*m).last;
        if mark < last {
            return 0;
        }
        (*m).last = mark;
        let leader = (*m).leader;
        (*m).leader = id;
        if last != 0 {
            binlog_group(mark - last, leader);
        }
    }
    0
}

#[uprobe]
pub fn binlog_sync_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = binlog_thread(id) else { return 0 };
    let now = unsafe { bpf_ktime_get_ns() };
    unsafe {
        (*t).sync_start = now;
        let flushed = (*t).flushed_at;
        if flushed != 0 {
            (*t).flushed_at = 0;
            let d = now.saturating_sub(flushed);
            add(Counter::BinlogSyncWaitNs, d);
            record_kind(HistKind::BinlogSyncWait, d);
            cp_add(id, CommitStage::BinlogSyncWait, d);
        }
    }
    0
}

/// A timed stage ends on this thread: the time since `start` (a field of
/// its state, cleared here) is counted under `count`, `ns` and `hist`.
#[inline(always)]
fn binlog_stage_ends(
    start: impl Fn(*mut BinlogThread) -> *mut u64,
    count: Counter,
    ns: Counter,
    hist: HistKind,
    stage: Option<CommitStage>,
) -> u64 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return 0;
    };
    let at = start(t);
    let began = unsafe { *at };
    if began == 0 {
        return 0;
    }
    unsafe { *at = 0 };
    let d = unsafe { bpf_ktime_get_ns() }.saturating_sub(began);
    bump(count);
    add(ns, d);
    record_kind(hist, d);
    if let Some(stage) = stage {
        cp_add(id, stage, d);
    }
    d
}

#[uretprobe]
pub fn binlog_sync_return(_ctx: RetProbeContext) -> u32 {
    binlog_stage_ends(
        |t| unsafe { &raw mut (*t).sync_start },
        Counter::BinlogSyncs,
        Counter::BinlogSyncNs,
        HistKind::BinlogSync,
        Some(CommitStage::BinlogSync),
    );
    0
}

#[uprobe]
pub fn binlog_commit_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(t) = binlog_thread(id) {
        unsafe { (*t).commit_start = bpf_ktime_get_ns() };
    }
    0
}

#[uretprobe]
pub fn binlog_commit_return(_ctx: RetProbeContext) -> u32 {
    binlog_stage_ends(
        |t| unsafe { &raw mut (*t).commit_start },
        Counter::BinlogCommitGroups,
        Counter::BinlogCommitNs,
        HistKind::BinlogCommit,
        Some(CommitStage::BinlogCommit),
    );
    0
}

/// The per-CPU stats slot of `fd`, created zeroed on first use. A full map
/// is counted and logged (aya-log): a rare event, never the hot path.
#[inline(always)]
fn fd_slot<C: EbpfContext>(ctx: &C, fd: u32, lost: Counter) -> Option<*mut FdStats> {
    if let Some(p) = FD_STATS.get_ptr_mut(fd) {
        return Some(p);
    }
    let zero = ZERO_FD.get_ptr(0)?;
    // By reference: a by-value copy would put ~300 bytes on the 512-byte
    // eBPF stack.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let _ = FD_STATS.insert(fd, unsafe { &*zero }, BPF_NOEXIST as u64);
    let p = FD_STATS.get_ptr_mut(fd);
    if p.is_none() {
        bump(lost);
        warn!(ctx, "fd map full: activity on fd {} not counted", fd);
    }
    p
}

/// No flush function: a redo fsync is where a batch begins.
#[inline(always)]
fn batch_on_redo_sync(fd: u64) {
    if cfg_u32(&BATCH_ON_SYNC) != 0 && REDO_FDS.get_ptr(fd as u32).is_some() {
        batch_begin();
    }
}

#[inline(always)]
fn sync_enter(id: u64, fd: u64) {
    batch_on_redo_sync(fd);
    let io_issued = io_sync_begins(fd as u32);
    let start = SyncStart {
        ts: unsafe { bpf_ktime_get_ns() },
        fd: fd as u32,
        in_flush: FLUSH_START.get_ptr(id).is_some() as u32,
        io: io_issued.is_some() as u32,
        _pad: 0,
        io_issued: io_issued.unwrap_or(0),
    };
    if SYNC_START.insert(id, start, 0).is_err() {
        bump(Counter::TimingLost);
    }
}

#[inline(always)]
fn sync_exit<C: EbpfContext>(ctx: &C, id: u64) {
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(start) = SYNC_START.get_ptr(id) else {
        return;
    };
    let start = unsafe { *start };
    let _ = SYNC_START.remove(id);
    if start.io != 0 {
        if let Some(st) = IO_STATE.get_ptr_mut(0) {
            xadd(unsafe { &raw mut (*st).inflight }, -1);
            // SAFETY: a plain read of the shared slot.
            let now = unsafe { core::ptr::read_volatile(&raw const (*st).data_issued) };
            if now == start.io_issued {
                bump(Counter::IoSyncsWithoutWrite);
            }
        }
    }
    let ns = now.saturating_sub(start.ts);
    // A leader's own fsync: the part of its wait spent on the disk.
    if start.in_flush != 0 && cfg_u32(&ANATOMY) != 0 {
        if let Some(w) = write_slot(id) {
            unsafe { (*w).sync_ns += ns };
        }
    }
    // The commit path without the redo write's return (the server-layer
    // fallback): a sync the committing thread makes itself is its
    // commit's fsync, unless a binlog flush stage it leads has it.
    if cfg_u32(&ANATOMY) == 0 {
        let in_binlog_flush = BINLOG_THREADS
            .get_ptr(id)
            .is_some_and(|t| unsafe { (*t).flush_start } != 0);
        if !in_binlog_flush {
            cp_add(id, CommitStage::RedoLeaderSync, ns);
        }
    }
    if let Some(s) = fd_slot(ctx, start.fd, Counter::SyncLost) {
        let s = unsafe { &mut *s };
        s.syncs += 1;
        s.sync_ns += ns;
        s.syncs_in_flush += start.in_flush as u64;
        record(&mut s.hist, ns);
    }
}

/// `--io`: a sync of a redo fd begins on thread `id`: block requests its
/// thread or the journal sends until it ends are the sync's. Some (the
/// attributed data requests issued so far) when counted in flight; its
/// end takes it off.
#[inline(always)]
fn io_sync_begins(fd: u32) -> Option<i64> {
    if cfg_u32(&IO_DEV) == 0 || REDO_FDS.get_ptr(fd).is_none() {
        return None;
    }
    let st = IO_STATE.get_ptr_mut(0)?;
    xadd(unsafe { &raw mut (*st).inflight }, 1);
    Some(unsafe { core::ptr::read_volatile(&raw const (*st).data_issued) })
}

/// The device of a block tracepoint's record, when it is the one watched.
#[inline(always)]
fn io_dev_matches(ctx: &TracePointContext) -> bool {
    let dev = cfg_u32(&IO_DEV);
    dev != 0 && unsafe { ctx.read_at::<u32>(8) }.unwrap_or(0) == dev
}

/// Whether any redo sync is in flight now.
#[inline(always)]
fn io_inflight() -> bool {
    let Some(st) = IO_STATE.get_ptr(0) else {
        return false;
    };
    // SAFETY: a plain read of the shared slot.
    unsafe { core::ptr::read_volatile(&raw const (*st).inflight) > 0 }
}

/// Whether the current thread is inside a redo sync itself.
#[inline(always)]
fn in_redo_sync() -> bool {
    let id = bpf_get_current_pid_tgid();
    SYNC_START
        .get_ptr(id)
        .is_some_and(|s| unsafe { (*s).io } != 0)
}

/// Whether the current task is the filesystem's journal writer. XFS
/// writes its log from kernel workers, as the page-cache flusher does
/// other files' data: there only metadata requests (`meta`: an `M` in
/// rwbs, as XFS marks its log writes) count as the journal's.
#[inline(always)]
fn is_journal_thread(meta: bool) -> bool {
    let Ok(comm) = bpf_get_current_comm() else {
        return false;
    };
    // The first 8 bytes as one word: no memcmp to link on this target.
    let head = u64::from_le_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    match cfg_u32(&IO_JOURNAL_THREADS) {
        x if x == JournalThreads::Jbd2 as u32 => head & 0xff_ffff_ffff == JBD2,
        x if x == JournalThreads::Kworker as u32 => meta && head == KWORKER,
        _ => false,
    }
}

/// Whether a `block_bio_queue` record's rwbs has the metadata flag.
#[inline(always)]
fn bio_is_meta(ctx: &TracePointContext) -> bool {
    let r = unsafe { ctx.read_at::<[u8; 8]>(cfg_u32(&BIO_RWBS_OFF) as usize) }.unwrap_or([0; 8]);
    r[1] == b'M' || r[2] == b'M' || r[3] == b'M' || r[4] == b'M' || r[5] == b'M' || r[6] == b'M'
}

/// `jbd2/` and `kworker/` as little-endian words.
const JBD2: u64 = u64::from_le_bytes(*b"jbd2/\0\0\0");
const KWORKER: u64 = u64::from_le_bytes(*b"kworker/");

/// `block:block_bio_queue`, in the submitter's context: a bio for the
/// redo sync in flight (its own thread's, or the journal's) is tagged by
/// sector until its request is issued.
#[tracepoint]
pub fn io_bio_queue(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    if !io_inflight() {
        return 0;
    }
    let flags = if in_redo_sync() {
        IO_ATTRIBUTED
    } else if is_journal_thread(bio_is_meta(&ctx)) {
        IO_ATTRIBUTED | IO_JOURNAL
    } else {
        return 0;
    };
    let sector: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let tag = IoTag {
        ts: unsafe { bpf_ktime_get_ns() },
        flags,
        _pad: 0,
    };
    let _ = IO_TAGS.insert(sector, tag, 0);
    0
}

/// The `rwbs` bytes of a block tracepoint record at `off`.
#[inline(always)]
fn rwbs_at(ctx: &TracePointContext, off: &u32) -> (bool, bool, bool) {
    rwbs_kind(unsafe { ctx.read_at::<[u8; 4]>(cfg_u32(off) as usize) }.unwrap_or([0; 4]))
}

/// `block:block_rq_issue`: the request goes to the device. Every request
/// on it is timed (the device's totals); one whose bio was tagged, or a
/// cache flush while a redo sync is in flight, is the sync's.
#[tracepoint]
pub fn io_rq_issue(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let sector: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let bytes: u32 = unsafe { ctx.read_at(cfg_u32(&ISSUE_BYTES_OFF) as usize) }.unwrap_or(0);
    let (flush, _, fua) = rwbs_at(&ctx, &ISSUE_RWBS_OFF);
    let mut flags = 0;
    let key = if flush {
        flags |= IO_FLUSH;
        if io_inflight() {
            flags |= IO_ATTRIBUTED;
            if !in_redo_sync() && is_journal_thread(false) {
                flags |= IO_JOURNAL;
            }
        }
        u64::MAX
    } else {
        if let Some(tag) = unsafe { IO_TAGS.get(sector) } {
            flags |= tag.flags;
            add(Counter::IoQueueNs, now.saturating_sub(tag.ts));
            let _ = IO_TAGS.remove(sector);
            if let Some(st) = IO_STATE.get_ptr_mut(0) {
                xadd(unsafe { &raw mut (*st).data_issued }, 1);
            }
        }
        sector
    };
    if fua {
        flags |= IO_FUA;
    }
    let is = IoIssued {
        ts: now,
        bytes,
        flags,
    };
    if IO_ISSUED.insert(key, is, 0).is_err() {
        bump(Counter::IoLost);
    }
    0
}

/// `block:block_rq_complete`: the device is done with a request.
#[tracepoint]
pub fn io_rq_complete(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let (flush, _, _) = rwbs_at(&ctx, &COMPLETE_RWBS_OFF);
    let key = if flush {
        u64::MAX
    } else {
        unsafe { ctx.read_at::<u64>(16) }.unwrap_or(u64::MAX)
    };
    let Some(is) = (unsafe { IO_ISSUED.get(key) }).copied() else {
        return 0;
    };
    let _ = IO_ISSUED.remove(key);
    let ns = now.saturating_sub(is.ts);
    bump(Counter::DevReqs);
    add(Counter::DevBytes, is.bytes as u64);
    add(Counter::DevDeviceNs, ns);
    record_kind(HistKind::DevDevice, ns);
    if is.flags & IO_ATTRIBUTED == 0 {
        return 0;
    }
    if is.flags & IO_FLUSH != 0 {
        bump(Counter::IoFlushes);
    } else {
        bump(Counter::IoReqs);
        add(Counter::IoBytes, is.bytes as u64);
    }
    if is.flags & IO_FUA != 0 {
        bump(Counter::IoFua);
    }
    if is.flags & IO_JOURNAL != 0 {
        bump(Counter::IoJournalReqs);
        add(Counter::IoJournalDeviceNs, ns);
        add(Counter::IoJournalBytes, is.bytes as u64);
    }
    add(Counter::IoDeviceNs, ns);
    record_kind(HistKind::IoDevice, ns);
    0
}

/// `syscalls/sys_enter_fsync` and `sys_enter_fdatasync`: the first syscall
/// argument (the fd) sits at offset 16 of the tracepoint record.
#[tracepoint]
pub fn sync_enter_tp(ctx: TracePointContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    sync_enter(id, fd);
    0
}

#[tracepoint]
pub fn sync_exit_tp(ctx: TracePointContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// kprobe on `do_fsync(unsigned int fd, int datasync)`, the common path of
/// fsync(2) and fdatasync(2): one probe instead of two syscall tracepoints,
/// with the fd as its first argument.
#[kprobe]
pub fn sync_enter_kprobe(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let fd: u64 = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    sync_enter(id, fd);
    0
}

/// Syscall argument `N` a syscall wrapper (`__x64_sys_fsync(const struct
/// pt_regs *)`) was called with: the caller's register in the saved user
/// registers (see ARG_OFFSETS); `u64::MAX` if unreadable.
#[inline(always)]
fn user_arg<const N: usize>(regs: u64) -> u64 {
    if regs == 0 {
        return u64::MAX;
    }
    unsafe { bpf_probe_read_kernel((regs as *const u8).wrapping_add(ARG_OFFSETS[N]) as *const u64) }
        .unwrap_or(u64::MAX)
}

/// The fd of a syscall wrapper's call (its first argument).
#[inline(always)]
fn fd_from_regs(regs: u64) -> u64 {
    user_arg::<0>(regs) & 0xffff_ffff
}

/// kprobe on the syscall wrappers `__x64_sys_fsync`/`__x64_sys_fdatasync`,
/// for kernels where `do_fsync` is inlined (Debian 12's 6.1).
#[kprobe]
pub fn sync_enter_sys_kprobe(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0).unwrap_or(0)));
    0
}

#[kretprobe]
pub fn sync_exit_kprobe(ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

// fentry/fexit: BPF trampolines instead of breakpoints, where the kernel
// has BTF and direct ftrace calls. The attach target is fixed when the
// program loads, so each probed function has its own pair of programs.

/// fentry on `do_fsync(unsigned int fd, int datasync)`.
#[fentry]
pub fn sync_enter_fentry(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, ctx.arg::<u64>(0) & 0xffff_ffff);
    0
}

/// fentry on `__x64_sys_fsync(const struct pt_regs *)`.
#[fentry]
pub fn sync_enter_fentry_fsync(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0)));
    0
}

/// fentry on `__x64_sys_fdatasync(const struct pt_regs *)`.
#[fentry]
pub fn sync_enter_fentry_fdatasync(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0)));
    0
}

/// fexit of `do_fsync`.
#[fexit]
pub fn sync_exit_fexit(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// fexit of `__x64_sys_fsync`.
#[fexit]
pub fn sync_exit_fexit_fsync(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// fexit of `__x64_sys_fdatasync`.
#[fexit]
pub fn sync_exit_fexit_fdatasync(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// One write on `fd` by the traced process; `bytes` is None where the
/// size is spread over an iovec array (pwritev), which is not read.
#[inline(always)]
fn count_fd_write<C: EbpfContext>(ctx: &C, fd: u64, bytes: Option<u64>) {
    if let Some(s) = fd_slot(ctx, fd as u32, Counter::WriteLost) {
        let s = unsafe { &mut *s };
        s.writes += 1;
        if let Some(b) = bytes {
            s.write_bytes += b;
        }
    }
}

/// `sys_enter_write`, `sys_enter_pwrite64`, `sys_enter_pwritev`(2): counts
/// writes per fd, for redo modes where each write is durable (O_DSYNC,
/// write-through) and no fsync ever happens.
#[tracepoint]
pub fn write_syscall_tp(ctx: TracePointContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let nr: i32 = unsafe { ctx.read_at(8) }.unwrap_or(-1);
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let count: u64 = unsafe { ctx.read_at(32) }.unwrap_or(0);
    let vectored = nr == NR_PWRITEV || nr == NR_PWRITEV2;
    count_fd_write(&ctx, fd, (!vectored).then_some(count));
    0
}

// The write syscall wrappers `__x64_sys_write`, `__x64_sys_pwrite64`,
// `__x64_sys_pwritev`(2) (`const struct pt_regs *`: fd in RDI, size in
// RDX), where the kernel has kprobes or trampolines: unlike the write
// tracepoints, they leave the other processes' syscalls on the fast path.

/// kprobe on `__x64_sys_write` and `__x64_sys_pwrite64`.
#[kprobe]
pub fn write_sys_kprobe(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs = ctx.arg::<u64>(0).unwrap_or(0);
    count_fd_write(&ctx, fd_from_regs(regs), Some(user_arg::<2>(regs)));
    0
}

/// kprobe on `__x64_sys_pwritev` and `__x64_sys_pwritev2` (size not read).
#[kprobe]
pub fn writev_sys_kprobe(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs = ctx.arg::<u64>(0).unwrap_or(0);
    count_fd_write(&ctx, fd_from_regs(regs), None);
    0
}

/// fentry on a write wrapper (one program per function: a trampoline's
/// target is fixed when it loads).
#[inline(always)]
fn write_fentry(ctx: &FEntryContext, vectored: bool) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs: u64 = ctx.arg::<u64>(0);
    let bytes = (!vectored).then(|| user_arg::<2>(regs));
    count_fd_write(ctx, fd_from_regs(regs), bytes);
    0
}

/// fentry on `__x64_sys_write`.
#[fentry]
pub fn write_fentry_write(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, false)
}

/// fentry on `__x64_sys_pwrite64`.
#[fentry]
pub fn write_fentry_pwrite64(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, false)
}

/// fentry on `__x64_sys_pwritev`.
#[fentry]
pub fn write_fentry_pwritev(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, true)
}

/// fentry on `__x64_sys_pwritev2`.
#[fentry]
pub fn write_fentry_pwritev2(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, true)
}

// The C library's wrappers, probed in the traced process only. An enabled
// syscall tracepoint sends every syscall of every process on the machine
// through the kernel's slow path; these trap only when the server itself
// calls them.

/// uprobe on the C library's `fsync(int fd)` and `fdatasync(int fd)`.
#[uprobe]
pub fn sync_enter_libc(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff);
    0
}

/// uretprobe of the same.
#[uretprobe]
pub fn sync_exit_libc(ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// uprobe on the same for the light tier: the sync counted where it
/// begins, not timed. No return probe: a uretprobe is a second trap on
/// the redo flush's path, which every committing client waits on, and
/// the light tier promises counts; the exact tier times them.
#[uprobe]
pub fn sync_count_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    batch_on_redo_sync(fd);
    if let Some(s) = fd_slot(&ctx, fd as u32, Counter::SyncLost) {
        unsafe { (*s).syncs += 1 };
    }
    0
}

/// uprobe on `write(int fd, const void *buf, size_t n)` and
/// `pwrite64(int fd, const void *buf, size_t n, off_t off)`.
#[uprobe]
pub fn write_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    count_fd_write(&ctx, fd, Some(ctx.arg::<u64>(2).unwrap_or(0)));
    0
}

/// uprobe on `pwritev`/`pwritev2(int fd, const struct iovec *, int, ...)`.
#[uprobe]
pub fn writev_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    count_fd_write(&ctx, fd, None);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
