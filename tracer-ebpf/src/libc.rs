//! The C library's wrappers, probed in the traced process only. An enabled
//! syscall tracepoint sends every syscall of every process on the machine
//! through the kernel's slow path; these trap only when the server itself
//! calls them.
use aya_ebpf::{
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_ebpf::Counter;

use crate::{
    fsync::{batch_on_redo_sync, sync_enter, sync_exit},
    helpers::{fd_slot, is_target},
    writes::count_fd_write,
};

// The C library's wrappers, probed in the traced process only. An enabled
// syscall tracepoint sends every syscall of every process on the machine
// through the kernel's slow path; these trap only when the server itself
// calls them.

/// uprobe on the C library's `fsync(int fd)` and `fdatasync(int fd)`.
#[uprobe]
pub fn sync_enter_libc(ctx: ProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_enter(id, ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff);
    0
}

/// uretprobe of the same.
#[uretprobe]
pub fn sync_exit_libc(ctx: RetProbeContext) -> u32 {
    let Some(id) = is_target() else { return 0 };
    sync_exit(&ctx, id);
    0
}

/// uprobe on the same for the light tier: the sync counted where it
/// begins, not timed. No return probe: a uretprobe is a second trap on
/// the redo flush's path, which every committing client waits on, and
/// the light tier promises counts; the exact tier times them.
#[uprobe]
pub fn sync_count_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    batch_on_redo_sync(fd);
    if let Some(s) = fd_slot(&ctx, fd as u32, Counter::SyncLost) {
        unsafe { (*s).syncs += 1 };
    }
    0
}

/// uprobe on `write(int fd, const void *buf, size_t n)` and
/// `pwrite64(int fd, const void *buf, size_t n, off_t off)`.
#[uprobe]
pub fn write_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    count_fd_write(&ctx, fd, Some(ctx.arg::<u64>(2).unwrap_or(0)));
    0
}

/// uprobe on `pwritev`/`pwritev2(int fd, const struct iovec *, int, ...)`.
#[uprobe]
pub fn writev_libc(ctx: ProbeContext) -> u32 {
    if is_target().is_none() {
        return 0;
    }
    let fd = ctx.arg::<u64>(0).unwrap_or(u64::MAX) & 0xffff_ffff;
    count_fd_write(&ctx, fd, None);
    0
}
