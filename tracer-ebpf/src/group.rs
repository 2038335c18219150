//! A replication group's part of each commit, on the committing thread:
//! the plugin's before-commit hook (Group Replication's
//! `group_replication_trans_before_commit`) is timed whole, and the calls
//! inside it that are the group's own steps (flow control, the send, the
//! wait for consensus and certification) each as a stage; what the hook
//! spends between them is its rest. Counted only inside the hook: the
//! same functions serve the plugin's other threads. Galera's hook comes
//! in two segments where a commit has two phases (`before_prepare`, with
//! the certification, then `before_commit`, with the commit order): the
//! first's time is carried to the second's return; with one phase the
//! first is called inside the second, and nests.
use aya_ebpf::{
    macros::{map, uprobe, uretprobe},
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::{AckStart, CommitStage, Counter, GroupOpen, HistKind, Split, MAX_THREADS};

use crate::{
    commit_path::cp_add,
    config::{cfg_u32, GROUP_ABORT_RET, GROUP_CONFLICT_RET, GROUP_NEEDS_STEP, GROUP_UNSENT_RET},
    helpers::{add, bump, is_target, record_kind},
    sched::now_stamped,
};

/// Each thread's open before-commit hook.
#[map]
static GROUP_OPEN: HashMap<u64, GroupOpen> = HashMap::with_max_entries(MAX_THREADS, 0);

/// Each thread's open step inside it.
#[map]
static GROUP_PART: HashMap<u64, AckStart> = HashMap::with_max_entries(MAX_THREADS, 0);

/// Starts the thread's hook afresh (whatever a hook whose return was
/// never seen left: a light tier's window detached it mid-call).
#[inline(always)]
fn open_fresh(id: u64, ts: u64, st: tracer_ebpf::Stamp) {
    let open = GroupOpen {
        ts,
        st,
        depth: 1,
        ..GroupOpen::default()
    };
    if GROUP_OPEN.insert(id, open, 0).is_err() {
        bump(Counter::TimingLost);
    }
}

/// The final hook's entry (Group Replication's before_commit, Galera's
/// `wsrep::transaction::before_commit`): it goes on from an earlier
/// segment that returned (depth 0), else starts afresh.
#[uprobe]
pub fn group_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (ts, st) = now_stamped();
    if let Some(o) = GROUP_OPEN.get_ptr_mut(id) {
        // SAFETY: the thread's own entry, written by this thread only.
        unsafe {
            if (*o).depth == 0 {
                (*o).ts = ts;
                (*o).st = st;
                (*o).depth = 1;
                return 0;
            }
        }
    }
    open_fresh(id, ts, st);
    0
}

/// An earlier segment's entry (Galera's `before_prepare`): inside an
/// open final hook it nests (a commit of one phase: depth 2); else a
/// commit's hook begins here afresh, whatever an earlier commit that
/// never reached its final hook (a failed certification) left.
#[uprobe]
pub fn group_first_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if let Some(o) = GROUP_OPEN.get_ptr_mut(id) {
        // SAFETY: as above.
        unsafe {
            if (*o).depth == 1 {
                (*o).depth = 2;
                return 0;
            }
        }
    }
    let (ts, st) = now_stamped();
    open_fresh(id, ts, st);
    0
}

/// An earlier segment returns: nested, the final hook goes on; else its
/// time is carried to the commit's final return.
#[uretprobe]
pub fn group_segment_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(o) = GROUP_OPEN.get_ptr_mut(id) else {
        return 0;
    };
    let (now, now_st) = now_stamped();
    // SAFETY: the thread's own entry, written by this thread only.
    unsafe {
        if (*o).depth == 2 {
            (*o).depth = 1;
        } else if (*o).depth == 1 {
            (*o).depth = 0;
            let seg = Split::between((*o).ts, (*o).st, now, now_st);
            (*o).carry = (*o).carry.plus(seg);
        }
    }
    0
}

/// The final hook returns: one commit through the group, timed (with
/// any earlier segment's time); in the commit path its time outside the
/// steps is the stage `GroupRest`.
#[uretprobe]
pub fn group_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let Some(open) = (unsafe { GROUP_OPEN.get(id) }).copied() else {
        return 0;
    };
    let _ = GROUP_OPEN.remove(id);
    let (now, now_st) = now_stamped();
    let whole = Split::between(open.ts, open.st, now, now_st).plus(open.carry);
    // An applier's pass (no consensus step) is no commit through the
    // group; its time is still its commit's stage.
    if open.stepped != 0 || cfg_u32(&GROUP_NEEDS_STEP) == 0 {
        bump(Counter::GroupCommits);
        add(Counter::GroupNs, whole.ns);
        record_kind(HistKind::GroupWait, whole.ns);
    }
    cp_add(id, CommitStage::GroupRest, whole.minus(open.inner));
    0
}

/// A step's entry (one program for all three: a thread runs one at a
/// time), inside an open hook only.
#[uprobe]
pub fn group_part_entry(_ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    if !unsafe { GROUP_OPEN.get(id) }.is_some_and(|o| o.depth > 0) {
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
    let _ = part_return_counted(stage, ns);
    0
}

/// A step's return; Some when it was timed.
#[inline(always)]
fn part_return_counted(stage: CommitStage, ns: Counter) -> Option<()> {
    let id = is_target()?;
    let start = (unsafe { GROUP_PART.get(id) }).copied()?;
    let _ = GROUP_PART.remove(id);
    let (now, now_st) = now_stamped();
    let t = Split::between(start.ts, start.st, now, now_st);
    add(ns, t.ns);
    if let Some(open) = GROUP_OPEN.get_ptr_mut(id) {
        unsafe {
            (*open).inner = (*open).inner.plus(t);
            if stage == CommitStage::GroupConsensus {
                (*open).stepped = 1;
            }
        }
    }
    cp_add(id, stage, t);
    Some(())
}

#[uretprobe]
pub fn group_flow_return(_ctx: RetProbeContext) -> u32 {
    part_return(CommitStage::GroupFlowControl, Counter::GroupFlowNs)
}

#[uretprobe]
pub fn group_send_return(_ctx: RetProbeContext) -> u32 {
    part_return(CommitStage::GroupSend, Counter::GroupSendNs)
}

/// The consensus step's return, counted with its outcome: the family's
/// conflict code (Galera's `certify`: certification failed), its abort
/// code (brute-force aborted once sent), its unsent code (interrupted
/// before it was sent), or another error (Group Replication's ticket
/// wait: any non-zero return).
#[uretprobe]
pub fn group_consensus_return(ctx: RetProbeContext) -> u32 {
    if part_return_counted(CommitStage::GroupConsensus, Counter::GroupConsensusNs).is_some() {
        bump(Counter::GroupConsensusCalls);
        let ret: u32 = ctx.ret();
        if ret == 0 {
            return 0;
        }
        let outcome = if ret == cfg_u32(&GROUP_CONFLICT_RET) {
            Counter::GroupConsensusConflicts
        } else if ret == cfg_u32(&GROUP_ABORT_RET) {
            Counter::GroupConsensusAborts
        } else if ret == cfg_u32(&GROUP_UNSENT_RET) {
            Counter::GroupConsensusUnsent
        } else {
            Counter::GroupConsensusFailed
        };
        bump(outcome);
    }
    0
}
