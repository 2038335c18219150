//! The committing thread's scheduler accounting, read where a stage
//! begins and ends: how much of the stage it ran, and how much it waited
//! for a CPU (the rest it was blocked). No event of its own: reads of
//! the current `task_struct` at offsets user space took from the
//! kernel's BTF, only with `--commit-path` (the verifier prunes them
//! otherwise).
use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::map,
    maps::PerCpuArray,
};
use tracer_ebpf::Stamp;

use crate::config::{
    cfg_u32, CFS_RQ_RQ_OFF, RQ_CLOCK_OFF, RQ_CLOCK_TASK_OFF, SCHED_SPLIT, TASK_CFS_RQ_OFF,
    TASK_EXEC_START_OFF, TASK_RUN_DELAY_OFF, TASK_SUM_EXEC_OFF,
};

/// Each CPU's run queue, kept after its first read (the `cfs_rq.rq` of a
/// task running there): a CPU's run queue never moves, and it saves two
/// dependent reads of kernel memory per stamp. The split's cost is
/// these reads, on every stage boundary of every commit.
#[map]
static CPU_RQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn read_at(task: u64, off: u32) -> u64 {
    unsafe { bpf_probe_read_kernel((task as *const u8).wrapping_add(off as usize) as *const u64) }
        .unwrap_or(0)
}

/// The running thread's accounting now (`now` from `bpf_ktime_get_ns`).
/// Its CPU time counts the slice it is running: the kernel adds a slice
/// to `sum_exec_runtime` only at a tick or a switch, from `exec_start`,
/// which is in the CPU's task clock (`rq.clock_task`: the run queue's
/// clock without the time stolen by the hypervisor or spent in
/// interrupts). That clock's distance from the probe's is this CPU's
/// `rq.clock - rq.clock_task` plus a constant, so the slice so far is
/// `now - (clock - clock_task) - exec_start` plus that constant, which
/// cancels in a difference, also across a migration to another CPU.
#[inline(always)]
pub(crate) fn stamp(now: u64) -> Stamp {
    let mut st = Stamp::default();
    stamp_into(now, &mut st);
    st
}

/// [`stamp`]'s work, out of line and writing every field on every path:
/// inlined, the compiler kept a value on the stack that only the split's
/// branch writes, and a verifier that refuses reads of unwritten stack
/// (Linux 5.10) then refused every program with a stage boundary.
#[inline(never)]
fn stamp_into(now: u64, out: &mut Stamp) {
    out.cpu = 0;
    out.runq = 0;
    if cfg_u32(&SCHED_SPLIT) == 0 {
        return;
    }
    let task = unsafe { bpf_get_current_task() };
    if task == 0 {
        return;
    }
    let (exec_start, sum) = read_pair(
        task,
        cfg_u32(&TASK_EXEC_START_OFF),
        cfg_u32(&TASK_SUM_EXEC_OFF),
    );
    let runq = read_at(task, cfg_u32(&TASK_RUN_DELAY_OFF));
    let rq = cpu_rq(task);
    let stolen = if rq == 0 {
        0
    } else {
        let (clock, clock_task) =
            read_pair(rq, cfg_u32(&RQ_CLOCK_OFF), cfg_u32(&RQ_CLOCK_TASK_OFF));
        clock.wrapping_sub(clock_task)
    };
    out.cpu = sum
        .wrapping_add(now)
        .wrapping_sub(stolen)
        .wrapping_sub(exec_start);
    out.runq = runq;
}

/// The clock and the accounting now, together.
#[inline(always)]
pub(crate) fn now_stamped() -> (u64, Stamp) {
    let now = unsafe { bpf_ktime_get_ns() };
    (now, stamp(now))
}

/// The u64s at `a` and `b` of `base`: one read where they are adjacent
/// (`se.exec_start` and `se.sum_exec_runtime`, `rq.clock` and
/// `rq.clock_task` in the kernels met), else two.
#[inline(always)]
fn read_pair(base: u64, a: u32, b: u32) -> (u64, u64) {
    let both = |at: u32| {
        unsafe {
            bpf_probe_read_kernel((base as *const u8).wrapping_add(at as usize) as *const [u64; 2])
        }
        .unwrap_or([0; 2])
    };
    if b == a.wrapping_add(8) {
        let v = both(a);
        (v[0], v[1])
    } else if a == b.wrapping_add(8) {
        let v = both(b);
        (v[1], v[0])
    } else {
        (read_at(base, a), read_at(base, b))
    }
}

/// This CPU's run queue: kept in [`CPU_RQ`], else read through the
/// running task's `se.cfs_rq` (BPF programs do not migrate mid-run).
#[inline(always)]
fn cpu_rq(task: u64) -> u64 {
    let Some(slot) = CPU_RQ.get_ptr_mut(0) else {
        return 0;
    };
    let kept = unsafe { *slot };
    if kept != 0 {
        return kept;
    }
    let cfs_rq = read_at(task, cfg_u32(&TASK_CFS_RQ_OFF));
    let rq = if cfs_rq == 0 {
        0
    } else {
        read_at(cfs_rq, cfg_u32(&CFS_RQ_RQ_OFF))
    };
    unsafe { *slot = rq };
    rq
}
