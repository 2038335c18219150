//! fsync/fdatasync by the traced process: per fd, counted and timed, from
//! the syscall tracepoints, kprobes or fentry/fexit (the kernel's choice);
//! a redo sync begins a batch where no flush function is probed.
use aya_ebpf::{
    macros::{fentry, fexit, kprobe, kretprobe, tracepoint},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext,
};
use tracer_ebpf::{CommitStage, Counter, Split, SyncStart};

use crate::{
    binlog::leads_flush_stage,
    block_io::{io_sync_begins, io_sync_ends},
    commit_path::cp_add,
    config::{cfg_u32, ANATOMY, BATCH_ON_SYNC},
    helpers::{bump, fd_from_regs, fd_slot, is_target, record},
    maps::{REDO_FDS, SYNC_START},
    redo::{batch_begin, in_flush, write_slot},
    sched::now_stamped,
};

/// No flush function: a redo fsync is where a batch begins.
#[inline(always)]
pub(crate) fn batch_on_redo_sync(fd: u64) {
    if cfg_u32(&BATCH_ON_SYNC) != 0 && REDO_FDS.get_ptr(fd as u32).is_some() {
        batch_begin();
    }
}

#[inline(always)]
pub(crate) fn sync_enter(id: u64, fd: u64) {
    batch_on_redo_sync(fd);
    let (io, io_issued) = io_sync_begins(fd as u32);
    let (ts, st) = now_stamped();
    let start = SyncStart {
        ts,
        st,
        fd: fd as u32,
        in_flush: in_flush(id) as u32,
        io,
        _pad: 0,
        io_issued,
    };
    if SYNC_START.insert(id, start, 0).is_err() {
        bump(Counter::TimingLost);
    }
}

#[inline(always)]
pub(crate) fn sync_exit<C: EbpfContext>(ctx: &C, id: u64) {
    let (now, now_st) = now_stamped();
    let Some(start) = SYNC_START.get_ptr(id) else {
        return;
    };
    let start = unsafe { *start };
    let _ = SYNC_START.remove(id);
    if start.io != 0 {
        io_sync_ends(start.io_issued);
    }
    let t = Split::between(start.ts, start.st, now, now_st);
    let ns = t.ns;
    // A leader's own fsync: the part of its wait spent on the disk.
    if start.in_flush != 0 && cfg_u32(&ANATOMY) != 0 {
        if let Some(w) = write_slot(id) {
            unsafe {
                (*w).sync_ns += ns;
                (*w).sync_cpu += t.cpu;
                (*w).sync_runq += t.runq;
            }
        }
    }
    // The commit path without the redo write's return (the server-layer
    // fallback): a sync the committing thread makes itself is its
    // commit's fsync, unless a binlog flush stage it leads has it.
    if cfg_u32(&ANATOMY) == 0 && !leads_flush_stage(id) {
        cp_add(id, CommitStage::RedoLeaderSync, t);
    }
    if let Some(s) = fd_slot(ctx, start.fd, Counter::SyncLost) {
        let s = unsafe { &mut *s };
        s.syncs += 1;
        s.sync_ns += ns;
        s.syncs_in_flush += start.in_flush as u64;
        record(&mut s.hist, ns);
    }
}

/// `syscalls/sys_enter_fsync` and `sys_enter_fdatasync`: the first syscall
/// argument (the fd) sits at offset 16 of the tracepoint record.
#[tracepoint]
pub fn sync_enter_tp(ctx: TracePointContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    sync_enter(id, fd);
    0
}

#[tracepoint]
pub fn sync_exit_tp(ctx: TracePointContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// kprobe on `do_fsync(unsigned int fd, int datasync)`, the common path of
/// fsync(2) and fdatasync(2): one probe instead of two syscall tracepoints,
/// with the fd as its first argument.
#[kprobe]
pub fn sync_enter_kprobe(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    let fd: u64 = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    sync_enter(id, fd);
    0
}

/// kprobe on the syscall wrappers `__x64_sys_fsync`/`__x64_sys_fdatasync`,
/// for kernels where `do_fsync` is inlined (Debian 12's 6.1).
#[kprobe]
pub fn sync_enter_sys_kprobe(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0).unwrap_or(0)));
    0
}

#[kretprobe]
pub fn sync_exit_kprobe(ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

// fentry/fexit: BPF trampolines instead of breakpoints, where the kernel
// has BTF and direct ftrace calls. The attach target is fixed when the
// program loads, so each probed function has its own pair of programs.

/// fentry on `do_fsync(unsigned int fd, int datasync)`.
#[fentry]
pub fn sync_enter_fentry(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, ctx.arg::<u64>(0) & 0xffff_ffff);
    0
}

/// fentry on `__x64_sys_fsync(const struct pt_regs *)`.
#[fentry]
pub fn sync_enter_fentry_fsync(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0)));
    0
}

/// fentry on `__x64_sys_fdatasync(const struct pt_regs *)`.
#[fentry]
pub fn sync_enter_fentry_fdatasync(ctx: FEntryContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, fd_from_regs(ctx.arg::<u64>(0)));
    0
}

/// fexit of `do_fsync`.
#[fexit]
pub fn sync_exit_fexit(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// fexit of `__x64_sys_fsync`.
#[fexit]
pub fn sync_exit_fexit_fsync(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// fexit of `__x64_sys_fdatasync`.
#[fexit]
pub fn sync_exit_fexit_fdatasync(ctx: FExitContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}
