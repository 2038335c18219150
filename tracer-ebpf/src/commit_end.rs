//! A commit's end (`--commit-path`): the commit function's return closes
//! the thread's span and records the whole and each stage. Where the
//! family's row leaves out the binlog entry's return probe (MySQL), the
//! commit's return also ends the binlog wait, so this module sits above
//! both the commit path's and the binlog's.
use aya_ebpf::{macros::uretprobe, programs::RetProbeContext};
use tracer_ebpf::{fine_slot, Split, CP_STAGES, MAX_THREADS};

use crate::{
    binlog::binlog_leave,
    commit_path::{cp_generation, CP_SPANS, CP_STATS},
    helpers::{is_target, record},
    sched::now_stamped,
};

#[uretprobe]
pub fn commit_return(_ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let (now, now_st) = now_stamped();
    let Some(s) = CP_SPANS.get_ptr_mut((id as u32) & (MAX_THREADS - 1)) else {
        return 0;
    };
    let generation = cp_generation();
    unsafe {
        if (*s).owner != id || (*s).depth == 0 || (*s).generation != generation {
            return 0;
        }
        if (*s).depth == 1 && (*s).in_binlog != 0 {
            // Still inside the binlog's group commit: the family's row
            // left out the entry's return, and the commit's return ends
            // the wait at the same instant as the whole.
            binlog_leave(id, now, now_st);
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
    let whole = Split::between(sp.start, sp.start_st, now, now_st);
    let total = whole.ns;
    st.commits += 1;
    st.total_ns += total;
    st.total_cpu_ns += whole.cpu;
    st.total_runq_ns += whole.runq;
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
        if let (Some(cpu), Some(runq)) = (st.stage_cpu_ns.get_mut(k), st.stage_runq_ns.get_mut(k)) {
            *cpu += sp.stage_cpu[k];
            *runq += sp.stage_runq[k];
        }
    }
    0
}
