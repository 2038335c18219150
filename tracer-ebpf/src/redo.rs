//! The redo log: `log_write_up_to` (each durable write request, a member
//! of the next flush's batch; timed for leaders and followers) and the
//! redo flush function (a batch begins), out of line or at inlined sites.
use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::{
    BatchMember, CommitStage, Counter, Group, HistKind, SizeHist, Split, WaitKind, WriteStart,
    MAX_THREADS,
};

use crate::{
    commit_path::{cp_add, cp_wrote},
    config::{
        cfg_u32, ANATOMY, DURABLE_PRED, PRED_A_ARG, PRED_A_MASK, PRED_A_OP, PRED_A_VALUE,
        PRED_B_ARG, PRED_B_MASK, PRED_B_OP, PRED_B_VALUE, PRED_F_ARG, PRED_F_MASK, PRED_F_OP,
        PRED_F_VALUE, WRITE_TIMING,
    },
    helpers::{add, bump, count_size, is_target, predicate, record_kind, xadd},
    sched::now_stamped,
    wait_state::{wait_begins, wait_ends, wait_led},
};

/// Batch sizes: requests per flush (see `batch_begin`), exact.
#[map]
static BATCH: PerCpuArray<SizeHist> = PerCpuArray::with_max_entries(1, 0);

/// Requests arrived since the last flush began, shared by all CPUs.
#[map]
static GROUP: Array<Group> = Array::with_max_entries(1, 0);

/// Entry timestamps per thread. One map per timed function because they
/// nest: log_write_up_to -> log_t::flush -> fdatasync. The write's, hit
/// on every commit, is an array slot per thread (tid modulo its size,
/// owner checked) rather than a hash insert and delete: cheaper on the
/// hottest path.
#[map]
static WRITE_START: Array<WriteStart> = Array::with_max_entries(MAX_THREADS, 0);

#[map]
static FLUSH_START: HashMap<u64, u64> = HashMap::with_max_entries(MAX_THREADS, 0);

/// Counts a write-probe hit and its predicates; returns (A, batch member).
#[inline(always)]
pub(crate) fn count_write(ctx: &ProbeContext) -> (bool, bool) {
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

/// One more request for the next flush to carry.
#[inline(always)]
pub(crate) fn arrive() {
    if let Some(g) = GROUP.get_ptr_mut(0) {
        xadd(unsafe { &raw mut (*g).arrived }, 1);
    }
}

/// A flush begins: what arrived since the previous one is its batch. The
/// count read is subtracted (not zeroed), so a request arriving between
/// the read and the subtraction is kept for the next batch.
#[inline(always)]
pub(crate) fn batch_begin() {
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

/// The flush runs on this thread: if it is inside the write function,
/// that call leads its group.
#[inline(always)]
pub(crate) fn mark_leader(id: u64) {
    if cfg_u32(&ANATOMY) == 0 {
        return;
    }
    if let Some(w) = write_slot(id) {
        unsafe { (*w).led = 1 };
        wait_led(id);
    }
}

/// This thread's open write call, if it has one.
#[inline(always)]
pub(crate) fn write_slot(id: u64) -> Option<*mut WriteStart> {
    let w = WRITE_START.get_ptr_mut((id as u32) & (MAX_THREADS - 1))?;
    (unsafe { (*w).owner } == id).then_some(w)
}

/// Whether thread `id` is inside the out-of-line redo flush function.
#[inline(always)]
pub(crate) fn in_flush(id: u64) -> bool {
    FLUSH_START.get_ptr(id).is_some()
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
        let (ts, st) = now_stamped();
        *w = WriteStart {
            owner: id,
            ts,
            pred_a: a as u64,
            durable: member as u64,
            led: 0,
            sync_ns: 0,
            st,
            sync_cpu: 0,
            sync_runq: 0,
        };
    }
    if member {
        wait_begins(id, WaitKind::Redo);
    }
    0
}

#[uretprobe]
pub fn write_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (now, now_st) = now_stamped();
    if let Some(w) = write_slot(id) {
        let start = unsafe { *w };
        unsafe { (*w).owner = 0 };
        let whole = Split::between(start.ts, start.st, now, now_st);
        let wait = whole.ns;
        wait_ends(id, WaitKind::Redo, start.durable != 0 && start.led == 0);
        if start.pred_a != 0 {
            record_kind(HistKind::WriteWait, wait);
        }
        if cfg_u32(&ANATOMY) != 0 && start.durable != 0 {
            if start.led != 0 {
                bump(Counter::Leaders);
                add(Counter::LeaderWaitNs, wait);
                add(Counter::LeaderSyncNs, start.sync_ns);
                record_kind(HistKind::LeaderWait, wait);
                let sync = Split {
                    ns: start.sync_ns.min(wait),
                    cpu: start.sync_cpu.min(whole.cpu),
                    runq: start.sync_runq.min(whole.runq),
                };
                cp_add(id, CommitStage::RedoLeaderWrite, whole.minus(sync));
                cp_add(id, CommitStage::RedoLeaderSync, sync);
            } else {
                bump(Counter::Followers);
                add(Counter::FollowerWaitNs, wait);
                record_kind(HistKind::FollowerWait, wait);
                cp_add(id, CommitStage::RedoFollowerWait, whole);
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
