//! The kernel half: which mechanism counts fsync/fdatasync, and the write
//! syscalls. A kprobe on `do_fsync` is one probe per sync; the syscall
//! tracepoints need two (fsync and fdatasync) but work on kernels built
//! without kprobes, like this project's CI machines.
use std::{fmt, path::Path};

use aya::{
    programs::{KProbe, TracePoint},
    Ebpf,
};
use tracer_ebpf::programs as prog;

use crate::error::{Error, Result};

/// `--fsync-probe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncProbe {
    /// kprobe if the kernel allows it, else tracepoints.
    Auto,
    Kprobe,
    Tracepoint,
}

impl fmt::Display for FsyncProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsyncProbe::Auto => "auto",
            FsyncProbe::Kprobe => "kprobe",
            FsyncProbe::Tracepoint => "tracepoint",
        })
    }
}

/// The kernel function both fsync(2) and fdatasync(2) go through, with the
/// fd as first argument (vfs_fsync_range only sees a `struct file *`, which
/// user space cannot map back to a path without BTF relocations).
pub const SYNC_KFUNC: &str = "do_fsync";

const SYNC_TRACEPOINTS: &[&str] = &["fsync", "fdatasync"];
const WRITE_TRACEPOINTS: &[&str] = &["write", "pwrite64", "pwritev", "pwritev2"];

/// What got attached, for `-v` and the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAttach {
    pub used: FsyncProbe,
    /// Why kprobes were not used, when `auto` fell back.
    pub fallback_reason: Option<String>,
    pub write_tracepoints: Vec<String>,
}

/// Mounts tracefs if needed: syscall tracepoints live there.
pub fn ensure_tracefs() -> Result<()> {
    let dir = Path::new("/sys/kernel/tracing");
    if dir.join("events").is_dir() {
        return Ok(());
    }
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .map_err(|e| Error::NoTracefs {
            detail: e.to_string(),
        })?;
    if status.success() && dir.join("events").is_dir() {
        Ok(())
    } else {
        Err(Error::NoTracefs {
            detail: format!("mount exited with {status}"),
        })
    }
}

fn attach_kprobes(ebpf: &mut Ebpf) -> std::result::Result<(), String> {
    for name in [prog::SYNC_ENTER_KPROBE, prog::SYNC_EXIT_KPROBE] {
        let p: &mut KProbe = ebpf
            .program_mut(name)
            .ok_or_else(|| format!("program {name} missing from the object"))?
            .try_into()
            .map_err(|e| format!("{e}"))?;
        p.load().map_err(|e| format!("{e}"))?;
        p.attach(SYNC_KFUNC, 0).map_err(|e| format!("{e}"))?;
    }
    Ok(())
}

fn tracepoint<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut TracePoint> {
    let attach_err = |detail: String| Error::Attach {
        what: format!("eBPF program {name}"),
        detail,
    };
    let p: &mut TracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| attach_err("missing from the object".into()))?
        .try_into()
        .map_err(|e| attach_err(format!("{e}")))?;
    p.load().map_err(|e| attach_err(format!("{e}")))?;
    Ok(p)
}

fn attach_tracepoints(ebpf: &mut Ebpf, prog_name: &str, exit: bool) -> Result<()> {
    let p = tracepoint(ebpf, prog_name)?;
    for sc in SYNC_TRACEPOINTS {
        let tp = format!("sys_{}_{sc}", if exit { "exit" } else { "enter" });
        p.attach("syscalls", &tp).map_err(|e| Error::Attach {
            what: format!("tracepoint syscalls/{tp}"),
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

/// Attaches the fsync/fdatasync probes (per `choice`) and the write
/// tracepoints.
pub fn attach(ebpf: &mut Ebpf, choice: FsyncProbe) -> Result<KernelAttach> {
    let mut fallback_reason = None;
    let used = match choice {
        FsyncProbe::Tracepoint => FsyncProbe::Tracepoint,
        FsyncProbe::Kprobe => {
            attach_kprobes(ebpf).map_err(|detail| Error::KprobeUnavailable {
                function: SYNC_KFUNC.into(),
                detail,
            })?;
            FsyncProbe::Kprobe
        }
        FsyncProbe::Auto => match attach_kprobes(ebpf) {
            Ok(()) => FsyncProbe::Kprobe,
            Err(why) => {
                fallback_reason = Some(why);
                FsyncProbe::Tracepoint
            }
        },
    };
    // The write tracepoints need tracefs whichever sync probe is used.
    ensure_tracefs()?;
    if used == FsyncProbe::Tracepoint {
        attach_tracepoints(ebpf, prog::SYNC_ENTER_TP, false)?;
        attach_tracepoints(ebpf, prog::SYNC_EXIT_TP, true)?;
    }
    let p = tracepoint(ebpf, prog::WRITE_SYSCALL_TP)?;
    let mut write_tracepoints = Vec::new();
    for sc in WRITE_TRACEPOINTS {
        let tp = format!("sys_enter_{sc}");
        // pwritev2 is missing on old kernels: skip what does not exist.
        if p.attach("syscalls", &tp).is_ok() {
            write_tracepoints.push(tp);
        }
    }
    Ok(KernelAttach {
        used,
        fallback_reason,
        write_tracepoints,
    })
}
