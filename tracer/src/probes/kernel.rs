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
    /// The kernel functions the kprobes sit on (`do_fsync`, or the syscall
    /// wrappers where it is inlined); None with tracepoints.
    pub kprobe_functions: Option<String>,
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

/// The kernel functions a kprobe may count syncs at, best first: the
/// common path of both syscalls with the fd as first argument, else the
/// syscall wrappers (the fd in the saved user registers) where `do_fsync`
/// is inlined, as on Debian 12's 6.1.
const KPROBE_TARGETS: &[(&str, &[&str])] = &[
    (prog::SYNC_ENTER_KPROBE, &[SYNC_KFUNC]),
    (
        prog::SYNC_ENTER_SYS_KPROBE,
        &["__x64_sys_fsync", "__x64_sys_fdatasync"],
    ),
];

fn kprobe<'a>(ebpf: &'a mut Ebpf, name: &str) -> std::result::Result<&'a mut KProbe, String> {
    let p: &mut KProbe = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    if p.fd().is_err() {
        p.load().map_err(|e| format!("{e}"))?;
    }
    Ok(p)
}

/// Attaches entry and return probes at every function of one target;
/// on a refusal, detaches what it attached and says why.
fn attach_kprobe_target(
    ebpf: &mut Ebpf,
    enter: &str,
    functions: &[&str],
) -> std::result::Result<(), String> {
    let mut done = Vec::new();
    let mut result = Ok(());
    'all: for f in functions {
        for name in [enter, prog::SYNC_EXIT_KPROBE] {
            match kprobe(ebpf, name).and_then(|p| p.attach(*f, 0).map_err(|e| format!("{f}: {e}")))
            {
                Ok(link) => done.push((name, link)),
                Err(e) => {
                    result = Err(e);
                    break 'all;
                }
            }
        }
    }
    if result.is_err() {
        for (name, link) in done {
            if let Ok(p) = kprobe(ebpf, name) {
                let _ = p.detach(link);
            }
        }
    }
    result
}

/// Attaches the first kprobe target the kernel accepts; returns the
/// functions it probes, or every refusal.
fn attach_kprobes(ebpf: &mut Ebpf) -> std::result::Result<String, String> {
    let mut refused = Vec::new();
    for (enter, functions) in KPROBE_TARGETS {
        match attach_kprobe_target(ebpf, enter, functions) {
            Ok(()) => return Ok(functions.join(", ")),
            Err(e) => refused.push(e),
        }
    }
    Err(refused.join("; "))
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
    let mut kprobe_functions = None;
    let used = match choice {
        FsyncProbe::Tracepoint => FsyncProbe::Tracepoint,
        FsyncProbe::Kprobe => {
            let f = attach_kprobes(ebpf).map_err(|detail| Error::KprobeUnavailable {
                function: KPROBE_TARGETS
                    .iter()
                    .flat_map(|(_, f)| f.iter().copied())
                    .collect::<Vec<_>>()
                    .join(", "),
                detail,
            })?;
            kprobe_functions = Some(f);
            FsyncProbe::Kprobe
        }
        FsyncProbe::Auto => match attach_kprobes(ebpf) {
            Ok(f) => {
                kprobe_functions = Some(f);
                FsyncProbe::Kprobe
            }
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
        kprobe_functions,
        fallback_reason,
        write_tracepoints,
    })
}
