//! Writes per fd by the traced process (redo modes where each write is
//! durable by itself), from the write syscalls' tracepoints, kprobes or
//! fentry.
use aya_ebpf::{
    macros::{fentry, kprobe, tracepoint},
    programs::{FEntryContext, ProbeContext, TracePointContext},
    EbpfContext,
};
use tracer_ebpf::{Counter, NR_PWRITEV, NR_PWRITEV2};

use crate::helpers::{fd_from_regs, fd_slot, is_target, user_arg};

/// One write on `fd` by the traced process; `bytes` is None where the
/// size is spread over an iovec array (pwritev), which is not read.
#[inline(always)]
pub(crate) fn count_fd_write<C: EbpfContext>(ctx: &C, fd: u64, bytes: Option<u64>) {
    if let Some(s) = fd_slot(ctx, fd as u32, Counter::WriteLost) {
        let s = unsafe { &mut *s };
        s.writes += 1;
        if let Some(b) = bytes {
            s.write_bytes += b;
        }
    }
}

/// `sys_enter_write`, `sys_enter_pwrite64`, `sys_enter_pwritev`(2): counts
/// writes per fd, for redo modes where each write is durable (O_DSYNC,
/// write-through) and no fsync ever happens.
#[tracepoint]
pub fn write_syscall_tp(ctx: TracePointContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let nr: i32 = unsafe { ctx.read_at(8) }.unwrap_or(-1);
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let count: u64 = unsafe { ctx.read_at(32) }.unwrap_or(0);
    let vectored = nr == NR_PWRITEV || nr == NR_PWRITEV2;
    count_fd_write(&ctx, fd, (!vectored).then_some(count));
    0
}

// The write syscall wrappers `__x64_sys_write`, `__x64_sys_pwrite64`,
// `__x64_sys_pwritev`(2) (`const struct pt_regs *`: fd in RDI, size in
// RDX), where the kernel has kprobes or trampolines: unlike the write
// tracepoints, they leave the other processes' syscalls on the fast path.

/// kprobe on `__x64_sys_write` and `__x64_sys_pwrite64`.
#[kprobe]
pub fn write_sys_kprobe(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs = ctx.arg::<u64>(0).unwrap_or(0);
    count_fd_write(&ctx, fd_from_regs(regs), Some(user_arg::<2>(regs)));
    0
}

/// kprobe on `__x64_sys_pwritev` and `__x64_sys_pwritev2` (size not read).
#[kprobe]
pub fn writev_sys_kprobe(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs = ctx.arg::<u64>(0).unwrap_or(0);
    count_fd_write(&ctx, fd_from_regs(regs), None);
    0
}

/// fentry on a write wrapper (one program per function: a trampoline's
/// target is fixed when it loads).
#[inline(always)]
pub(crate) fn write_fentry(ctx: &FEntryContext, vectored: bool) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let regs: u64 = ctx.arg::<u64>(0);
    let bytes = (!vectored).then(|| user_arg::<2>(regs));
    count_fd_write(ctx, fd_from_regs(regs), bytes);
    0
}

/// fentry on `__x64_sys_write`.
#[fentry]
pub fn write_fentry_write(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, false)
}

/// fentry on `__x64_sys_pwrite64`.
#[fentry]
pub fn write_fentry_pwrite64(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, false)
}

/// fentry on `__x64_sys_pwritev`.
#[fentry]
pub fn write_fentry_pwritev(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, true)
}

/// fentry on `__x64_sys_pwritev2`.
#[fentry]
pub fn write_fentry_pwritev2(ctx: FEntryContext) -> u32 {
    write_fentry(&ctx, true)
}
