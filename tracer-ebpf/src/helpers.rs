//! Small helpers every feature uses: is this the traced process, count,
//! time into a histogram, read an argument register, test a predicate.
use core::intrinsics::{atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_probe_read_kernel},
    maps::PerCpuArray,
    programs::ProbeContext,
    EbpfContext,
};
use aya_log_ebpf::warn;
use tracer_ebpf::{log2_bucket, size_slot, Counter, FdStats, Hist, HistKind, PredOp, SizeHist};

use crate::{
    config::{cfg_u32, cfg_u64, TARGET_TGID},
    maps::{COUNTERS, FD_STATS, HISTS, ZERO_FD},
};

/// Whether `comm` starts with `p`, byte by byte: a slice comparison would
/// call `memcmp`, a subprogram older verifiers (5.10) refuse to load
/// beside the programs.
#[inline(always)]
pub(crate) fn has_prefix<const N: usize>(comm: &[u8; 16], p: &[u8; N]) -> bool {
    let mut i = 0;
    while i < N && i < 16 {
        if comm[i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether the current thread is one of InnoDB's own (MySQL names them
/// `ib_*`: `ib_clone_gtid`, `ib_log_writer`, ...). Their commits are the
/// server's bookkeeping, not a client's: MySQL's `ib_clone_gtid` commits
/// the `mysql.gtid_executed` table about ten times a second, each with a
/// durable redo write, and counting those as commits put TPC-C's count
/// 1.2 to 1.9 % over the workload's. MariaDB names no thread.
#[inline(always)]
pub(crate) fn on_innodb_thread() -> bool {
    has_prefix(&bpf_get_current_comm().unwrap_or_default(), b"ib_")
}

/// True when the current task belongs to the traced process.
#[inline(always)]
pub(crate) fn is_target() -> Option<u64> {
    let id = bpf_get_current_pid_tgid();
    if (id >> 32) as u32 == cfg_u32(&TARGET_TGID) {
        Some(id)
    } else {
        None
    }
}

#[inline(always)]
pub(crate) fn bump(c: Counter) {
    if let Some(p) = COUNTERS.get_ptr_mut(c as u32) {
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub(crate) fn add(c: Counter, v: u64) {
    if let Some(p) = COUNTERS.get_ptr_mut(c as u32) {
        unsafe { *p += v };
    }
}

#[inline(always)]
pub(crate) fn record(hist: &mut Hist, ns: u64) {
    let b = log2_bucket(ns);
    if let Some(slot) = hist.buckets.get_mut(b) {
        *slot += 1;
    }
}

#[inline(always)]
pub(crate) fn record_kind(kind: HistKind, ns: u64) {
    if let Some(h) = HISTS.get_ptr_mut(kind as u32) {
        record(unsafe { &mut *h }, ns);
    }
}

/// Byte offsets in x86-64 `struct pt_regs` of the SysV argument registers
/// RDI, RSI, RDX, RCX, R8, R9.
pub(crate) const ARG_OFFSETS: [usize; 6] = [112, 104, 96, 88, 72, 64];

/// Argument `n` (chosen at run time by user space). A ctx pointer moved by
/// a variable offset is rejected by the verifier, so the register is read
/// with bpf_probe_read_kernel instead of a direct ctx load.
#[inline(always)]
pub(crate) fn arg(ctx: &ProbeContext, n: u32) -> u64 {
    let off = ARG_OFFSETS
        .get(n as usize)
        .copied()
        .unwrap_or(ARG_OFFSETS[0]);
    let base = ctx.regs as *const u8;
    unsafe { bpf_probe_read_kernel(base.wrapping_add(off) as *const u64) }.unwrap_or(0)
}

#[inline(always)]
pub(crate) fn predicate(ctx: &ProbeContext, argn: &u32, op: &u32, mask: &u64, value: &u64) -> bool {
    let op = cfg_u32(op);
    if op == PredOp::Always as u32 {
        return true;
    }
    if op == PredOp::Off as u32 {
        return false;
    }
    let v = arg(ctx, cfg_u32(argn)) & cfg_u64(mask);
    if op == PredOp::NonZero as u32 {
        v != 0
    } else {
        v == cfg_u64(value)
    }
}

/// `*p += v` atomically across CPUs.
#[inline(always)]
pub(crate) fn xadd(p: *mut i64, v: i64) {
    // SAFETY: `p` is an 8-byte aligned i64 inside a map value.
    let _ = unsafe { atomic_xadd::<i64, i64, { AtomicOrdering::Relaxed }>(p, v) };
}

/// One more group of `n` in an exact size histogram.
#[inline(always)]
pub(crate) fn count_size(map: &PerCpuArray<SizeHist>, n: u64) {
    count_size_at(map, 0, n);
}

/// [`count_size`] into the map's entry `at`.
#[inline(always)]
pub(crate) fn count_size_at(map: &PerCpuArray<SizeHist>, at: u32, n: u64) {
    if let Some(h) = map.get_ptr_mut(at) {
        if let Some(slot) = unsafe { &mut *h }.counts.get_mut(size_slot(n)) {
            *slot += 1;
        }
    }
}

/// The per-CPU stats slot of `fd`, created zeroed on first use. A full map
/// is counted and logged (aya-log): a rare event, never the hot path.
#[inline(always)]
pub(crate) fn fd_slot<C: EbpfContext>(ctx: &C, fd: u32, lost: Counter) -> Option<*mut FdStats> {
    if let Some(p) = FD_STATS.get_ptr_mut(fd) {
        return Some(p);
    }
    let zero = ZERO_FD.get_ptr(0)?;
    // By reference: a by-value copy would put ~300 bytes on the 512-byte
    // eBPF stack.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let _ = FD_STATS.insert(fd, unsafe { &*zero }, BPF_NOEXIST as u64);
    let p = FD_STATS.get_ptr_mut(fd);
    if p.is_none() {
        bump(lost);
        warn!(ctx, "fd map full: activity on fd {} not counted", fd);
    }
    p
}

/// Syscall argument `N` a syscall wrapper (`__x64_sys_fsync(const struct
/// pt_regs *)`) was called with: the caller's register in the saved user
/// registers (see ARG_OFFSETS); `u64::MAX` if unreadable.
#[inline(always)]
pub(crate) fn user_arg<const N: usize>(regs: u64) -> u64 {
    if regs == 0 {
        return u64::MAX;
    }
    unsafe { bpf_probe_read_kernel((regs as *const u8).wrapping_add(ARG_OFFSETS[N]) as *const u64) }
        .unwrap_or(u64::MAX)
}

/// The fd of a syscall wrapper's call (its first argument).
#[inline(always)]
pub(crate) fn fd_from_regs(regs: u64) -> u64 {
    user_arg::<0>(regs) & 0xffff_ffff
}
