//! `--fsync-probe`: the user's choice of how the kernel half counts syncs,
//! a plain value the CLI, the errors and the attach code all name (the
//! attaching itself is `kernel`'s).
use std::fmt;

/// `--fsync-probe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncProbe {
    /// fentry if the kernel allows it, else kprobe, else tracepoints.
    Auto,
    /// fentry/fexit on do_fsync (or the fsync/fdatasync syscall
    /// functions): needs kernel BTF and BPF trampolines.
    Fentry,
    /// kprobe/kretprobe on the same functions.
    Kprobe,
    /// uprobes on the traced server's C library: fsync, fdatasync, and
    /// (exact tier) the write wrappers; no syscall tracepoint at all. Misses syscalls made
    /// without the C library (raw syscall(2), io_uring).
    Libc,
    /// The sys_enter/sys_exit tracepoints of fsync and fdatasync (every
    /// syscall on the host then takes the kernel's slow path).
    Tracepoint,
}

impl fmt::Display for FsyncProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsyncProbe::Auto => "auto",
            FsyncProbe::Fentry => "fentry",
            FsyncProbe::Kprobe => "kprobe",
            FsyncProbe::Libc => "libc",
            FsyncProbe::Tracepoint => "tracepoint",
        })
    }
}
