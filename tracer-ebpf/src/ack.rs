//! A semi-sync source's waits for its replica's acknowledgement, at the
//! server's hook: counted, timed, and in the commit path the waiting
//! thread's stage; a leader's wait inside the binlog's group commit is
//! kept in a ring, so that its followers' waits can be split by it.
use aya_ebpf::{
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::{
    AckSpan, AckStart, CommitStage, Counter, HistKind, Split, ACK_RING_LEN, MAX_THREADS,
};

use crate::{
    commit_path::{cp_add, cp_span},
    helpers::{add, bump, is_target, record_kind},
    sched::now_stamped,
};

/// A semi-sync wait's entry, per thread.
#[map]
static ACK_START: HashMap<u64, AckStart> = HashMap::with_max_entries(MAX_THREADS, 0);

/// The latest acknowledgement waits inside the binlog's group commit
/// (`--commit-path`), and the count of spans ever pushed (the next slot).
#[map]
static ACK_RING: Array<AckSpan> = Array::with_max_entries(ACK_RING_LEN, 0);

#[map]
static ACK_HEAD: Array<u64> = Array::with_max_entries(1, 0);

/// How much of `[from, to)` the latest acknowledgement waits in
/// `ACK_RING` cover (they never overlap each other: one leader at a time
/// waits, under the server's lock).
#[inline(always)]
pub(crate) fn ack_overlap(from: u64, to: u64) -> u64 {
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
pub(crate) fn ack_push(id: u64, start: u64, end: u64) {
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
pub(crate) const ACK_JOIN_NS: u64 = 50_000;

#[inline(always)]
pub(crate) fn ack_enter() -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (ts, st) = now_stamped();
    if ACK_START.insert(id, AckStart { ts, st }, 0).is_err() {
        bump(Counter::TimingLost);
    }
    0
}

/// A wait for the replica ends: counted, and in the commit path the
/// thread's own stage; inside the group commit, its followers' too.
#[inline(always)]
pub(crate) fn ack_leave(calls: Counter, ns: Counter, kind: HistKind) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(start) = (unsafe { ACK_START.get(id) }).copied() else {
        return 0;
    };
    let _ = ACK_START.remove(id);
    let (now, now_st) = now_stamped();
    let wait = Split::between(start.ts, start.st, now, now_st);
    bump(calls);
    add(ns, wait.ns);
    record_kind(kind, wait.ns);
    if let Some(s) = cp_span(id) {
        cp_add(id, CommitStage::ReplicaAck, wait);
        if unsafe { (*s).in_binlog } != 0 {
            ack_push(id, start.ts, now);
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
