//! commitscope's eBPF programs. They only count and timestamp into per-CPU
//! maps; user space reads the maps each interval and does all interpretation
//! (which function is "the write", which fd is the redo log, percentiles).
#![no_std]
#![no_main]
// The BPF target has no `AtomicI64::fetch_add` (core sees no CAS); the
// intrinsic, its result unused, becomes the kernel's atomic add (XADD).
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod ack;
mod binlog;
mod block_io;
mod commit_end;
mod commit_path;
mod config;
mod fsync;
mod group;
mod helpers;
mod libc;
mod maps;
mod redo;
mod sched;
mod wait_state;
mod wakeups;
mod writes;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
