//! The followers' waits (`--wakeups`): a thread's wait that may be a
//! follower's opens where it begins (the binlog's group commit, a durable
//! redo write), is dropped where the thread turns out a leader, and, at
//! its end, adds its wake-ups (counted by the scheduler tracepoints in
//! [`crate::wakeups`]) to the totals. Below the features that open waits,
//! so that they import it and it imports none of them.
use aya_ebpf::{
    macros::map,
    maps::{HashMap, PerCpuArray},
};
use tracer_ebpf::{FollowerWait, WaitKind, WakeStats, WakerRole, MAX_THREADS, WAKER_ROLES};

use crate::config::{cfg_u32, WAKEUPS};

/// Open waits, by thread id (the low half of pid_tgid).
#[map]
pub(crate) static FOLLOWER_WAITS: HashMap<u32, FollowerWait> =
    HashMap::with_max_entries(MAX_THREADS, 0);

#[map]
pub(crate) static WAKE_STATS: PerCpuArray<WakeStats> = PerCpuArray::with_max_entries(1, 0);

/// Thread `id` begins a wait of `kind` (with `--wakeups`). A wait already
/// open on the thread (the binlog's, when its redo write begins inside
/// it) is a leader's: the new one replaces it.
#[inline(always)]
pub(crate) fn wait_begins(id: u64, kind: WaitKind) {
    if cfg_u32(&WAKEUPS) == 0 {
        return;
    }
    let w = FollowerWait {
        kind: kind as u32,
        ..FollowerWait::default()
    };
    let _ = FOLLOWER_WAITS.insert(id as u32, w, 0);
}

/// Thread `id` turned out a leader in its open wait: not a follower's.
#[inline(always)]
pub(crate) fn wait_led(id: u64) {
    if cfg_u32(&WAKEUPS) == 0 {
        return;
    }
    if let Some(w) = FOLLOWER_WAITS.get_ptr_mut(id as u32) {
        unsafe { (*w).kind = 0 };
    }
}

/// Thread `id`'s wait of `kind` ends; `follower`: it did not lead. A
/// follower's wait and its wake-ups are counted.
#[inline(always)]
pub(crate) fn wait_ends(id: u64, kind: WaitKind, follower: bool) {
    if cfg_u32(&WAKEUPS) == 0 {
        return;
    }
    let tid = id as u32;
    let Some(w) = FOLLOWER_WAITS.get_ptr(tid) else {
        return;
    };
    let w = unsafe { *w };
    if w.kind != kind as u32 {
        // Another kind's wait is open (the redo write inside a binlog
        // wait replaced it): not this one's end.
        return;
    }
    let _ = FOLLOWER_WAITS.remove(tid);
    if !follower {
        return;
    }
    let Some(st) = WAKE_STATS.get_ptr_mut(0) else {
        return;
    };
    let st = unsafe { &mut *st };
    st.waits += 1;
    st.wakeups += w.wakeups as u64;
    st.wasted += w.wasted as u64;
    for k in 0..WAKER_ROLES {
        st.by_role[k] += w.by_role[k] as u64;
    }
    // Of a leader's wake-ups in one wait, the last was its own group's
    // (the broadcast that ended it; the thread may still block on the
    // condition's mutex after it), the others were other groups'.
    if w.by_role[WakerRole::BinlogLeader as usize] > 0 {
        st.leader_ended += 1;
    }
}
