//! The binlog group commit. User space attaches each program where the
//! server family has that boundary (its row's `BinlogProfile`,
//! readers/src/family/binlog.rs); these only count and timestamp. MySQL:
//! a flush-stage leader opens its group and marks where it begins in the
//! count of flushed commits, and counts each member's cache it writes; a sync leader's fetch of its queue closes the
//! group before it, from the previous sync leader's mark to its own (see
//! `BinlogMarks`). MariaDB: one leader does it all, and the end of its
//! binlog sync closes the group.
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_ktime_get_ns,
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::{
    BinlogMarks, BinlogThread, CloseReason, CommitStage, Counter, HistKind, SizeHist, Split, Stamp,
    WaitKind, CLOSE_REASONS, MAX_THREADS,
};

use crate::{
    ack::ack_overlap,
    commit_path::{cp_add, cp_binlog_entered, cp_binlog_leave, cp_span},
    config::{cfg_u32, BINLOG_CLOSE_AT_FLUSH, PRED_G_ARG, PRED_G_MASK, PRED_G_OP, PRED_G_VALUE},
    helpers::{add, bump, count_size, count_size_at, is_target, predicate, record_kind},
    sched::now_stamped,
    wait_state::{wait_begins, wait_ends, wait_led},
};

/// Binlog group sizes: commits per group, exact.
#[map]
static BINLOG_SIZES: PerCpuArray<SizeHist> = PerCpuArray::with_max_entries(1, 0);

/// Binlog group sizes per [`CloseReason`] (its index).
#[map]
static BINLOG_CLOSED_SIZES: PerCpuArray<SizeHist> =
    PerCpuArray::with_max_entries(CLOSE_REASONS as u32, 0);

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

// The binlog group commit. User space attaches each program where the
// server family has that boundary (readers/src/family/binlog.rs, `BinlogProfile`);
// these only count and timestamp. MySQL: a flush-stage leader opens its
// group and marks where it begins in the count of flushed commits, and
// counts each member's cache it writes; a sync leader's fetch of its queue closes the group before it, from
// the previous sync leader's mark to its own (see `BinlogMarks`).
// MariaDB: one leader does it all, and the end of its binlog sync closes
// the group.

/// This thread's binlog state, created zeroed on first use.
#[inline(always)]
pub(crate) fn binlog_thread(id: u64) -> Option<*mut BinlogThread> {
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
        flush_st: Stamp::default(),
        write_st: Stamp::default(),
        flushed_st: Stamp::default(),
        sync_st: Stamp::default(),
        commit_st: Stamp::default(),
        redo_st: Stamp::default(),
        redo_cpu: 0,
        redo_runq: 0,
        leading: 0,
        fill_start: 0,
        fill_delay: 0,
        fill_steps: 0,
        closed_by: 0,
        fill_ns: 0,
    };
    let _ = BINLOG_THREADS.insert(id, zero, BPF_NOEXIST as u64);
    let p = BINLOG_THREADS.get_ptr_mut(id);
    if p.is_none() {
        bump(Counter::BinlogLost);
    }
    p
}

/// Whether thread `id` leads a binlog flush stage now (its syncs there
/// are the binlog's, not its commit's own).
#[inline(always)]
pub(crate) fn leads_flush_stage(id: u64) -> bool {
    BINLOG_THREADS
        .get_ptr(id)
        .is_some_and(|t| unsafe { (*t).flush_start } != 0)
}

/// A group of `n` commits led by thread `leader` closes; its leader's
/// wait for more commits ended as `closed_by` (a stored `1 + reason`)
/// after `fill_ns`. Without the member probe (light tier) every group
/// has 0 members: it is counted, its size is not. Counted under its
/// reason even where the wait is not probed (all then `NoWait`): user
/// space shows the reasons only where it is.
#[inline(always)]
pub(crate) fn binlog_group(n: u64, leader: u64, closed_by: u64, fill_ns: u64) {
    bump(Counter::BinlogGroups);
    let reason = CloseReason::from_stored(closed_by);
    bump(reason.groups());
    add(reason.wait_ns(), fill_ns);
    if n > 0 {
        add(Counter::BinlogCommits, n);
        count_size(&BINLOG_SIZES, n);
        count_size_at(&BINLOG_CLOSED_SIZES, reason as u32, n);
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

/// Whether thread `id` leads its binlog group commit now (a flush stage
/// began since its commit entered the group commit, which has not
/// returned).
#[inline(always)]
pub(crate) fn leads_group_commit(id: u64) -> bool {
    BINLOG_THREADS
        .get_ptr(id)
        .is_some_and(|t| unsafe { (*t).leading } != 0)
}

/// A commit enters the binlog's group commit (MySQL's `ordered_commit`,
/// MariaDB's `write_transaction_to_binlog_events`): if its thread leads
/// the next flush stage, its wait until then is the group's queue wait.
/// Per commit, so exact tier only.
#[uprobe]
pub fn binlog_enter(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (now, st) = now_stamped();
    if let Some(t) = binlog_thread(id) {
        unsafe {
            (*t).entered = now;
            (*t).leading = 0;
        }
    }
    cp_binlog_entered(id, now, st);
    wait_begins(id, WaitKind::Binlog);
    0
}

/// The same entry for the commit's span alone: a light tier's exact
/// window. The binlog's own queue wait is the exact tier's: an entry
/// seen in a window and a flush after it would be a wait that never was.
#[uprobe]
pub fn binlog_enter_span(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (now, st) = now_stamped();
    cp_binlog_entered(id, now, st);
    wait_begins(id, WaitKind::Binlog);
    0
}

/// The commit leaves the binlog's group commit: if it did not lead a
/// flush stage (which clears its entry), it waited for its leader all
/// along.
#[uretprobe]
pub fn binlog_enter_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (now, now_st) = now_stamped();
    binlog_leave(id, now, now_st);
    0
}

/// Thread `id`'s commit leaves the binlog's group commit: at the entry's
/// return, or, where the family's row saves that probe (nothing a stage
/// times runs between the two), at the commit's own return; `now`.
#[inline(always)]
pub(crate) fn binlog_leave(id: u64, now: u64, now_st: Stamp) {
    let led = match BINLOG_THREADS.get_ptr_mut(id) {
        Some(t) => unsafe {
            let led = (*t).leading != 0;
            (*t).leading = 0;
            led
        },
        None => false,
    };
    wait_ends(id, WaitKind::Binlog, !led);
    if let Some(s) = cp_span(id) {
        unsafe { (*s).in_binlog = 0 };
        let entered = unsafe { (*s).binlog_entered };
        if let Some(wait) = cp_binlog_leave(s, now, now_st) {
            // Part of the wait may have been its leader's wait for the
            // replica's acknowledgement: that part is the ack's stage,
            // split in proportion (no probe marks its ends on this
            // thread).
            let acked = wait.part(ack_overlap(entered, now));
            cp_add(id, CommitStage::ReplicaAck, acked);
            cp_add(id, CommitStage::BinlogFollowerWait, wait.minus(acked));
        }
    }
}

/// The flush stage's redo flush begins (MySQL's `ha_flush_logs`), timed
/// only inside a flush stage (FLUSH LOGS and the like call it too).
#[uprobe]
pub fn binlog_redo_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
        unsafe {
            if (*t).flush_start != 0 {
                let (now, st) = now_stamped();
                (*t).redo_start = now;
                (*t).redo_st = st;
            }
        }
    }
    0
}

#[uretprobe]
pub fn binlog_redo_return(_ctx: RetProbeContext) -> u32 {
    let d = binlog_stage_ends(
        |t| unsafe { (&raw mut (*t).redo_start, (*t).redo_st) },
        Counter::BinlogRedoFlushes,
        Counter::BinlogRedoNs,
        HistKind::BinlogRedo,
        None,
    );
    if let Some(id) = is_target() {
        if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
            unsafe {
                (*t).redo_ns += d.ns;
                (*t).redo_cpu += d.cpu;
                (*t).redo_runq += d.runq;
            }
        }
    }
    0
}

#[uprobe]
pub fn binlog_flush_open(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = binlog_thread(id) else { return 0 };
    let (now, now_st) = now_stamped();
    wait_led(id);
    unsafe {
        (*t).leading = 1;
        (*t).flush_start = now;
        (*t).flush_st = now_st;
        (*t).members = 0;
        (*t).redo_ns = 0;
        (*t).redo_cpu = 0;
        (*t).redo_runq = 0;
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
        if let Some(wait) = cp_binlog_leave(s, now, now_st) {
            cp_add(id, CommitStage::BinlogQueueWait, wait);
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
                let (now, st) = now_stamped();
                (*t).write_start = now;
                (*t).write_st = st;
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
    let (now, now_st) = now_stamped();
    let (start, n, write) = unsafe { ((*t).flush_start, (*t).members, (*t).write_start) };
    let (whole, redo) = unsafe {
        (
            Split::between(start, (*t).flush_st, now, now_st),
            Split {
                ns: (*t).redo_ns,
                cpu: (*t).redo_cpu,
                runq: (*t).redo_runq,
            },
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
        Split::between(write, unsafe { (*t).write_st }, now, now_st)
    } else {
        Split::default()
    };
    cp_add(id, CommitStage::BinlogSync, sync);
    cp_add(id, CommitStage::BinlogFlush, whole.minus(redo).minus(sync));
    let close_at_flush = cfg_u32(&BINLOG_CLOSE_AT_FLUSH) != 0;
    unsafe {
        (*t).flush_start = 0;
        (*t).write_start = 0;
        // A sync stage of its own waits from here (MySQL); where the
        // group closes here, there is none to wait for.
        if !close_at_flush {
            (*t).flushed_at = now;
            (*t).flushed_st = now_st;
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
        let (closed_by, fill_ns) = take_closed_by(t);
        binlog_group(n, id, closed_by, fill_ns);
    }
    0
}

/// How thread state `t`'s last wait for more commits ended and its time,
/// cleared: its group closes now.
#[inline(always)]
fn take_closed_by(t: *mut BinlogThread) -> (u64, u64) {
    unsafe {
        let r = ((*t).closed_by, (*t).fill_ns);
        (*t).closed_by = 0;
        (*t).fill_ns = 0;
        r
    }
}

/// A group's leader begins waiting for more commits: MySQL's sync leader
/// in `Commit_stage_manager::wait_count_or_timeout(count, usec, stage)`
/// (the delay, µs, its third argument after `this`), MariaDB's in
/// `MYSQL_BIN_LOG::wait_for_sufficient_commits()` (no argument: the
/// third register is not read there).
#[uprobe]
pub fn binlog_fill_entry(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = binlog_thread(id) else { return 0 };
    let delay: u64 = ctx.arg(2).unwrap_or(0);
    unsafe {
        (*t).fill_start = bpf_ktime_get_ns();
        (*t).fill_delay = delay;
        (*t).fill_steps = 0;
    }
    0
}

/// MySQL: one polling step of that wait (`my_sleep`), counted only
/// inside it (the server sleeps elsewhere too).
#[uprobe]
pub fn binlog_fill_step(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(t) = BINLOG_THREADS.get_ptr_mut(id) {
        unsafe {
            if (*t).fill_start != 0 {
                (*t).fill_steps += 1;
            }
        }
    }
    0
}

/// The wait ended as `reason`: stored for its group's close.
#[inline(always)]
fn fill_ends(reason: CloseReason) {
    let Some(id) = is_target() else { return };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return;
    };
    unsafe {
        let start = (*t).fill_start;
        if start == 0 {
            return;
        }
        (*t).fill_start = 0;
        bump(Counter::BinlogFills);
        (*t).closed_by = reason as u64 + 1;
        (*t).fill_ns = bpf_ktime_get_ns().saturating_sub(start);
    }
}

/// MySQL: the wait returns. The server polls the queue, then sleeps a
/// step of a tenth of the delay (at least 1 µs) and takes it off what is
/// left, until nothing is left or the queue holds the count. So the
/// delay's steps all taken is a timeout, fewer is the count reached, and
/// no delay is no wait: the loop's own test, on its own numbers.
#[uretprobe]
pub fn binlog_fill_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return 0;
    };
    let (delay, steps) = unsafe { ((*t).fill_delay as i64, (*t).fill_steps) };
    let reason = if delay <= 0 {
        CloseReason::NoWait
    } else {
        let delay = delay as u64;
        let step = if delay / 10 > 1 { delay / 10 } else { 1 };
        // The steps the whole delay takes, rounded up (a division: the
        // BPF target has no 128-bit multiply for an overflow check).
        if steps >= delay.div_ceil(step) {
            CloseReason::Timeout
        } else {
            CloseReason::Count
        }
    };
    fill_ends(reason);
    0
}

/// MariaDB: the wait's exits, each at the server's own add to the
/// trigger counter of that name (`Binlog_group_commit_trigger_*`).
#[uprobe]
pub fn binlog_filled_count(_ctx: ProbeContext) -> u32 {
    fill_ends(CloseReason::Count);
    0
}

#[uprobe]
pub fn binlog_filled_timeout(_ctx: ProbeContext) -> u32 {
    fill_ends(CloseReason::Timeout);
    0
}

#[uprobe]
pub fn binlog_filled_lock_wait(_ctx: ProbeContext) -> u32 {
    fill_ends(CloseReason::LockWait);
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
    // This leader's wait for more commits just ended: the reason of the
    // group it leads, which closes at the next leader's fetch.
    let (closed_by, fill_ns) = take_closed_by(t);
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
        let (prev_by, prev_ns) = ((*m).closed_by, (*m).fill_ns);
        (*m).closed_by = closed_by;
        (*m).fill_ns = fill_ns;
        if last != 0 {
            binlog_group(mark - last, leader, prev_by, prev_ns);
        }
    }
    0
}

#[uprobe]
pub fn binlog_sync_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(t) = binlog_thread(id) else { return 0 };
    let (now, now_st) = now_stamped();
    unsafe {
        (*t).sync_start = now;
        (*t).sync_st = now_st;
        let flushed = (*t).flushed_at;
        if flushed != 0 {
            (*t).flushed_at = 0;
            let wait = Split::between(flushed, (*t).flushed_st, now, now_st);
            add(Counter::BinlogSyncWaitNs, wait.ns);
            record_kind(HistKind::BinlogSyncWait, wait.ns);
            cp_add(id, CommitStage::BinlogSyncWait, wait);
        }
    }
    0
}

/// A timed stage ends on this thread: the time since `start` (a field of
/// its state, cleared here, and the accounting taken with it) is counted
/// under `count`, `ns` and `hist`.
#[inline(always)]
pub(crate) fn binlog_stage_ends(
    start: impl Fn(*mut BinlogThread) -> (*mut u64, Stamp),
    count: Counter,
    ns: Counter,
    hist: HistKind,
    stage: Option<CommitStage>,
) -> Split {
    let Some(id) = is_target() else {
        return Split::default();
    };
    let Some(t) = BINLOG_THREADS.get_ptr_mut(id) else {
        return Split::default();
    };
    let (at, st) = start(t);
    let began = unsafe { *at };
    if began == 0 {
        return Split::default();
    }
    unsafe { *at = 0 };
    let (now, now_st) = now_stamped();
    let d = Split::between(began, st, now, now_st);
    bump(count);
    add(ns, d.ns);
    record_kind(hist, d.ns);
    if let Some(stage) = stage {
        cp_add(id, stage, d);
    }
    d
}

#[uretprobe]
pub fn binlog_sync_return(_ctx: RetProbeContext) -> u32 {
    binlog_stage_ends(
        |t| unsafe { (&raw mut (*t).sync_start, (*t).sync_st) },
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
        let (now, st) = now_stamped();
        unsafe {
            (*t).commit_start = now;
            (*t).commit_st = st;
        }
    }
    0
}

#[uretprobe]
pub fn binlog_commit_return(_ctx: RetProbeContext) -> u32 {
    binlog_stage_ends(
        |t| unsafe { (&raw mut (*t).commit_start, (*t).commit_st) },
        Counter::BinlogCommitGroups,
        Counter::BinlogCommitNs,
        HistKind::BinlogCommit,
        Some(CommitStage::BinlogCommit),
    );
    0
}
