//! The commit path (`--commit-path`): the server's commit function opens
//! a span on its thread; the probes that time the redo write and the
//! binlog's stages add their time to the span of the thread they run on;
//! the commit's return records the whole and each stage. Only commits that
//! wrote are recorded (a redo write request or the binlog's group commit
//! ran inside them): statement ends and read-only commits are not commits.
use aya_ebpf::{
    macros::{map, uprobe},
    maps::{Array, PerCpuArray},
    programs::ProbeContext,
};
use tracer_ebpf::{CommitSpan, CommitStage, CommitStats, Split, Stamp, CP_STAGES, MAX_THREADS};

use crate::{
    config::{cfg_u32, COMMIT_PATH},
    helpers::{is_target, on_innodb_thread},
    sched::now_stamped,
};

/// Each thread's open commit (tid modulo the size, owner checked).
#[map]
pub(crate) static CP_SPANS: Array<CommitSpan> = Array::with_max_entries(MAX_THREADS, 0);

/// The commits' totals and their stages'.
#[map]
pub(crate) static CP_STATS: PerCpuArray<CommitStats> = PerCpuArray::with_max_entries(1, 0);

/// The span probes' current attachment (0: off), written by user space.
#[map]
static CP_GEN: Array<u64> = Array::with_max_entries(1, 0);

// The commit path (`--commit-path`): the server's commit function opens
// a span on its thread; the probes that time the redo write and the
// binlog's stages add their time to the span of the thread they run on;
// the commit's return records the whole and each stage. Only commits that
// wrote are recorded (a redo write request or the binlog's group commit
// ran inside them): statement ends and read-only commits are not commits.

/// The span probes' current attachment; 0 while they are off.
#[inline(always)]
pub(crate) fn cp_generation() -> u64 {
    CP_GEN.get(0).copied().unwrap_or(0)
}

/// This thread's open commit, if it has one (opened under the current
/// attachment of the span probes).
#[inline(always)]
pub(crate) fn cp_span(id: u64) -> Option<*mut CommitSpan> {
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

/// `t` more in `stage` of this thread's open commit.
#[inline(always)]
pub(crate) fn cp_add(id: u64, stage: CommitStage, t: Split) {
    if let Some(s) = cp_span(id) {
        let k = stage as usize;
        let s = unsafe { &mut *s };
        if let (Some(ns), Some(cpu), Some(runq)) = (
            s.stage_ns.get_mut(k),
            s.stage_cpu.get_mut(k),
            s.stage_runq.get_mut(k),
        ) {
            *ns += t.ns;
            *cpu += t.cpu;
            *runq += t.runq;
        }
    }
}

/// This thread's open commit wrote: it is a commit.
#[inline(always)]
pub(crate) fn cp_wrote(id: u64) {
    if let Some(s) = cp_span(id) {
        unsafe { (*s).wrote = 1 };
    }
}

#[uprobe]
pub fn commit_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if on_innodb_thread() {
        return 0;
    }
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
        let (now, st) = now_stamped();
        (*s).owner = id;
        (*s).start = now;
        (*s).start_st = st;
        (*s).depth = 1;
        (*s).wrote = 0;
        (*s).binlog_entered = 0;
        (*s).in_binlog = 0;
        (*s).generation = generation;
        (*s).stage_ns = [0; CP_STAGES];
        (*s).stage_cpu = [0; CP_STAGES];
        (*s).stage_runq = [0; CP_STAGES];
        (*s).binlog_entered_st = Stamp::default();
    }
    0
}

/// The commit's span entered the binlog's group commit at `now`.
#[inline(always)]
pub(crate) fn cp_binlog_entered(id: u64, now: u64, st: Stamp) {
    if let Some(s) = cp_span(id) {
        unsafe {
            (*s).wrote = 1;
            (*s).binlog_entered = now;
            (*s).binlog_entered_st = st;
            (*s).in_binlog = 1;
        }
    }
}

/// The time since this span entered the binlog's group commit, split;
/// the entry is cleared. None outside the group commit.
#[inline(always)]
pub(crate) fn cp_binlog_leave(s: *mut CommitSpan, now: u64, now_st: Stamp) -> Option<Split> {
    let s = unsafe { &mut *s };
    let entered = s.binlog_entered;
    if entered == 0 {
        return None;
    }
    s.binlog_entered = 0;
    Some(Split::between(entered, s.binlog_entered_st, now, now_st))
}
