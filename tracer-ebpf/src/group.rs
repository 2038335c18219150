//! A replication group's part of each commit, on the committing thread:
//! the plugin's before-commit hook (Group Replication's
//! `group_replication_trans_before_commit`) is timed whole, and the calls
//! inside it that are the group's own steps (flow control, the send, the
//! wait for consensus and certification) each as a stage; what the hook
//! spends between them is its rest. Counted only inside the hook: the
//! same functions serve the plugin's other threads.
use aya_ebpf::{
    macros::{map, uprobe, uretprobe},
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::{AckStart, CommitStage, Counter, GroupOpen, HistKind, Split, MAX_THREADS};

use crate::{
    commit_path::cp_add,
    helpers::{add, bump, is_target, record_kind},
    sched::now_stamped,
};

/// Each thread's open before-commit hook.
#[map]
static GROUP_OPEN: HashMap<u64, GroupOpen> = HashMap::with_max_entries(MAX_THREADS, 0);

/// Each thread's open step inside it.
#[map]
static GROUP_PART: HashMap<u64, AckStart> = HashMap::with_max_entries(MAX_THREADS, 0);

#[uprobe]
pub fn group_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (ts, st) = now_stamped();
    let open = GroupOpen {
        ts,
        st,
        inner: Split::default(),
    };
    if GROUP_OPEN.insert(id, open, 0).is_err() {
        bump(Counter::TimingLost);
    }
    0
}

/// The hook returns: one commit through the group, timed; in the commit
/// path its time outside the steps is the stage `GroupRest`.
#[uretprobe]
pub fn group_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(open) = (unsafe { GROUP_OPEN.get(id) }).copied() else {
        return 0;
    };
    let _ = GROUP_OPEN.remove(id);
    let (now, now_st) = now_stamped();
    let whole = Split::between(open.ts, open.st, now, now_st);
    bump(Counter::GroupCommits);
    add(Counter::GroupNs, whole.ns);
    record_kind(HistKind::GroupWait, whole.ns);
    cp_add(id, CommitStage::GroupRest, whole.minus(open.inner));
    0
}

/// A step's entry (one program for all three: a thread runs one at a
/// time), inside an open hook only.
#[uprobe]
pub fn group_part_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if unsafe { GROUP_OPEN.get(id) }.is_none() {
        return 0;
    }
    let (ts, st) = now_stamped();
    if GROUP_PART.insert(id, AckStart { ts, st }, 0).is_err() {
        bump(Counter::TimingLost);
    }
    0
}

#[inline(always)]
fn part_return(stage: CommitStage, ns: Counter) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(start) = (unsafe { GROUP_PART.get(id) }).copied() else {
        return 0;
    };
    let _ = GROUP_PART.remove(id);
    let (now, now_st) = now_stamped();
    let t = Split::between(start.ts, start.st, now, now_st);
    add(ns, t.ns);
    if let Some(open) = GROUP_OPEN.get_ptr_mut(id) {
        unsafe { (*open).inner = (*open).inner.plus(t) };
    }
    cp_add(id, stage, t);
    0
}

#[uretprobe]
pub fn group_flow_return(_ctx: RetProbeContext) -> u32 {
    part_return(CommitStage::GroupFlowControl, Counter::GroupFlowNs)
}

#[uretprobe]
pub fn group_send_return(_ctx: RetProbeContext) -> u32 {
    part_return(CommitStage::GroupSend, Counter::GroupSendNs)
}

#[uretprobe]
pub fn group_consensus_return(_ctx: RetProbeContext) -> u32 {
    part_return(CommitStage::GroupConsensus, Counter::GroupConsensusNs)
}
