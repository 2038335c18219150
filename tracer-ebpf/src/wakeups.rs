//! How followers are woken (`--wakeups`): while a thread waits in a
//! place where it may be a follower (the binlog's group commit, a durable
//! redo write), the scheduler's wake-ups of it are counted with the
//! waker's role, a wake-up after which it blocks again inside the same
//! wait is wasted, and the time from each wake-up to running is timed.
//! The wait is kept only if the thread turned out a follower (it led no
//! flush stage, ran no redo flush). Two machine-wide tracepoints, so a
//! flag of its own: its cost is said when it starts.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_ebpf::{fine_slot, WakerRole};

use crate::{
    binlog::leads_group_commit,
    config::{cfg_u32, SWITCH_NEXT_PID_OFF, SWITCH_PREV_STATE_OFF, WAKEUP_PID_OFF},
    helpers::{has_prefix, is_target},
    redo::write_slot,
    wait_state::{FOLLOWER_WAITS, WAKE_STATS},
};

/// The current thread's role as a waker.
#[inline(always)]
fn waker_role() -> WakerRole {
    let Some(id) = is_target() else {
        return WakerRole::Other;
    };
    if leads_group_commit(id) {
        return WakerRole::BinlogLeader;
    }
    if write_slot(id).is_some_and(|w| unsafe { (*w).led } != 0) {
        return WakerRole::RedoWriter;
    }
    let comm = bpf_get_current_comm().unwrap_or_default();
    // MySQL's redo threads: ib_log_writer, ib_log_flush, ib_log_fl_notif,
    // ib_log_wr_notif.
    if has_prefix(&comm, b"ib_log") {
        return WakerRole::RedoWriter;
    }
    // The semi-sync acknowledgement receiver: MySQL names its thread
    // `ss_ack`. MariaDB names no thread (all read `mariadbd`): its
    // receiver's wake-ups count as other.
    if has_prefix(&comm, b"ss_ack") {
        return WakerRole::AckReceiver;
    }
    WakerRole::Other
}

/// `sched:sched_wakeup`: a thread in an open wait is woken.
#[tracepoint]
pub fn wake_sched_wakeup(ctx: TracePointContext) -> u32 {
    let tid: i32 = unsafe { ctx.read_at(cfg_u32(&WAKEUP_PID_OFF) as usize) }.unwrap_or(0);
    let Some(w) = FOLLOWER_WAITS.get_ptr_mut(tid as u32) else {
        return 0;
    };
    let role = waker_role();
    let w = unsafe { &mut *w };
    if w.kind == 0 {
        return 0;
    }
    w.wakeups += 1;
    w.woken = 1;
    if let Some(n) = w.by_role.get_mut(role as usize) {
        *n += 1;
    }
    w.woken_at = unsafe { bpf_ktime_get_ns() };
    0
}

/// `sched:sched_switch`: a woken follower runs (its wake-to-run time), or
/// one in an open wait blocks again after a wake-up (that one was
/// wasted).
#[tracepoint]
pub fn wake_sched_switch(ctx: TracePointContext) -> u32 {
    // The task switched out is the current one.
    let prev = bpf_get_current_pid_tgid() as u32;
    if let Some(w) = FOLLOWER_WAITS.get_ptr_mut(prev) {
        let state: i64 =
            unsafe { ctx.read_at(cfg_u32(&SWITCH_PREV_STATE_OFF) as usize) }.unwrap_or(0);
        let w = unsafe { &mut *w };
        // Not runnable (0 is TASK_RUNNING: a preemption) after a wake-up.
        if state != 0 && w.woken != 0 && w.kind != 0 {
            w.woken = 0;
            w.wasted += 1;
        }
    }
    let next: i32 = unsafe { ctx.read_at(cfg_u32(&SWITCH_NEXT_PID_OFF) as usize) }.unwrap_or(0);
    if let Some(w) = FOLLOWER_WAITS.get_ptr_mut(next as u32) {
        let w = unsafe { &mut *w };
        if w.woken_at != 0 && w.kind != 0 {
            let d = unsafe { bpf_ktime_get_ns() }.saturating_sub(w.woken_at);
            w.woken_at = 0;
            if let Some(st) = WAKE_STATS.get_ptr_mut(0) {
                if let Some(slot) = unsafe { &mut (*st).wake_to_run.slots }.get_mut(fine_slot(d)) {
                    *slot += 1;
                }
            }
        }
    }
    0
}
