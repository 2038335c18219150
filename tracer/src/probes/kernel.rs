//! The kernel half: which mechanism counts fsync/fdatasync, and the write
//! syscalls. fentry/fexit (BPF trampolines) and kprobes sit on one kernel
//! function both syncs go through; the syscall tracepoints need two probes
//! (fsync and fdatasync) but work on kernels built without kprobes or
//! trampolines, like this project's CI machines. The writes go by the
//! syncs' mechanism (fentry or kprobe on the write syscall functions), so
//! that where the kernel allows it no syscall tracepoint is enabled: one
//! would put every syscall of every process through the slow path. On request
//! (`--fsync-probe libc`), uprobes on the traced server's own C library
//! (`probes::libc`) count both without slowing every other process's
//! syscalls.
use std::{num::NonZeroU32, path::Path};

use aya::{
    programs::{
        fentry::FEntryLinkId, fexit::FExitLinkId, kprobe::KProbeLinkId, FEntry, FExit, KProbe,
        TracePoint,
    },
    Btf, Ebpf,
};
use tracer_ebpf::programs as prog;

use super::fsync_choice::FsyncProbe;
use crate::error::{Error, Result};

/// What `auto` tries, best first, by the extra time per fdatasync measured
/// on Debian's 6.1 and 6.12 kernels (`cargo xtask vm-test`, sync-cost,
/// median of 3 x 100,000 syncs): fentry/fexit cost 0.5-0.9x a
/// kprobe/kretprobe pair (a trampoline call on return instead of a
/// hijacked return address), so fentry comes first where the kernel has
/// BTF and trampolines. Tracepoints come last: they are always there.
/// `Libc` is asked for by name only: it misses syscalls made without the
/// C library, and where fentry or kprobes work it gains nothing (no
/// tracepoint is enabled then); on CI's VMs the tracepoints cost about
/// 1.5 % of the `update` workload (docs/overhead.md).
pub const AUTO_ORDER: &[FsyncProbe] = &[FsyncProbe::Fentry, FsyncProbe::Kprobe];

const SYNC_TRACEPOINTS: &[&str] = &["fsync", "fdatasync"];
const WRITE_TRACEPOINTS: &[&str] = &["write", "pwrite64", "pwritev", "pwritev2"];

/// What got attached, for `-v` and the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAttach {
    pub used: FsyncProbe,
    /// The kernel functions the fentry/kprobe programs sit on (`do_fsync`,
    /// or the syscall wrappers where it is inlined); None with tracepoints.
    pub kernel_functions: Option<String>,
    /// What the kernel refused before `auto` settled on `used`.
    pub fallback_reason: Option<String>,
    /// How the writes are counted, for `-v` and the legend: "fentry on
    /// __x64_sys_write, ...", "tracepoints sys_enter_write, ..." where the
    /// kernel has neither fentry nor kprobes, or "uprobes on write, ... in
    /// <libc>" with `Libc`. None: the writes are not counted (the light
    /// tier on the C library's sync wrappers alone).
    pub write_probes: Option<String>,
    /// With `Libc`: the library and the write wrappers probed in it.
    pub libc: Option<super::libc::LibcAttach>,
}

impl KernelAttach {
    /// The syncs' latency is measured (a return probe): always but on the
    /// light tier's C library probes ([`light_syncs_timed`]).
    pub fn sync_timed(&self) -> bool {
        self.libc.as_ref().is_none_or(|l| l.timed)
    }
}

/// Whether the light tier times the syncs where the kernel gives `used`:
/// fentry/fexit and kprobes cost little (a trampoline or an ftrace call,
/// no trap), so yes;
/// in the C library (`used` there, or the tracepoints that light trades
/// for it) the return would be a second uprobe trap per sync on the
/// flush's path, so only for `--io`, which needs each sync's end.
pub fn light_syncs_timed(used: FsyncProbe, io: bool) -> bool {
    io || matches!(used, FsyncProbe::Fentry | FsyncProbe::Kprobe)
}

/// Where tracefs is mounted (by [`ensure_tracefs`] if it was not).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs if needed: syscall tracepoints live there.
pub fn ensure_tracefs() -> Result<()> {
    let dir = Path::new(TRACEFS);
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

/// One kernel function a sync probe can sit on, with its programs.
struct Site {
    function: &'static str,
    kprobe: &'static str,
    fentry: &'static str,
    fexit: &'static str,
}

/// The kernel functions syncs can be counted at, best first: the common
/// path of both syscalls with the fd as first argument (vfs_fsync_range
/// only sees a `struct file *`, which user space cannot map back to a
/// path), else the syscall wrappers (the fd in the saved user registers)
/// where `do_fsync` is inlined, as on Debian 12's 6.1.
const SITES: &[&[Site]] = &[
    &[Site {
        function: "do_fsync",
        kprobe: prog::SYNC_ENTER_KPROBE,
        fentry: prog::SYNC_ENTER_FENTRY,
        fexit: prog::SYNC_EXIT_FEXIT,
    }],
    &[
        Site {
            function: "__x64_sys_fsync",
            kprobe: prog::SYNC_ENTER_SYS_KPROBE,
            fentry: prog::SYNC_ENTER_FENTRY_FSYNC,
            fexit: prog::SYNC_EXIT_FEXIT_FSYNC,
        },
        Site {
            function: "__x64_sys_fdatasync",
            kprobe: prog::SYNC_ENTER_SYS_KPROBE,
            fentry: prog::SYNC_ENTER_FENTRY_FDATASYNC,
            fexit: prog::SYNC_EXIT_FEXIT_FDATASYNC,
        },
    ],
];

/// Every function of [`SITES`], for messages.
fn all_functions() -> String {
    SITES
        .iter()
        .flat_map(|set| set.iter().map(|s| s.function))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An attached link, kept to undo a partly attached set.
enum Link {
    Kprobe(&'static str, KProbeLinkId),
    Fentry(&'static str, FEntryLinkId),
    Fexit(&'static str, FExitLinkId),
}

fn program<'a, P>(ebpf: &'a mut Ebpf, name: &str) -> std::result::Result<&'a mut P, String>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))
}

/// Attaches the entry and return programs of one site by `kind`.
fn attach_site(
    ebpf: &mut Ebpf,
    kind: FsyncProbe,
    site: &Site,
    btf: Option<&Btf>,
    links: &mut Vec<Link>,
) -> std::result::Result<(), String> {
    let f = site.function;
    let err = |e: aya::programs::ProgramError| format!("{f}: {}", refusal(&e));
    match (kind, btf) {
        (FsyncProbe::Fentry, Some(btf)) => {
            let p: &mut FEntry = program(ebpf, site.fentry)?;
            p.load(f, btf).map_err(err)?;
            links.push(Link::Fentry(site.fentry, p.attach().map_err(err)?));
            let p: &mut FExit = program(ebpf, site.fexit)?;
            p.load(f, btf).map_err(err)?;
            links.push(Link::Fexit(site.fexit, p.attach().map_err(err)?));
        }
        _ => {
            for name in [site.kprobe, prog::SYNC_EXIT_KPROBE] {
                let p: &mut KProbe = program(ebpf, name)?;
                if p.fd().is_err() {
                    p.load().map_err(err)?;
                }
                links.push(Link::Kprobe(name, p.attach(f, 0).map_err(err)?));
            }
        }
    }
    Ok(())
}

/// A refusal in a few words: aya's text, without an empty verifier log,
/// and naming the missing kprobe PMU as such.
fn refusal(e: &aya::programs::ProgramError) -> String {
    if !Path::new(KPROBE_PMU).exists() && e.to_string().contains(KPROBE_PMU) {
        return "the kernel has no kprobes (built without CONFIG_KPROBES)".into();
    }
    let text = e.to_string();
    text.trim_end()
        .strip_suffix("Verifier output:")
        .map(|t| t.trim_end().trim_end_matches('.').to_string())
        .unwrap_or(text)
}

/// The kprobe PMU, absent on kernels built without kprobes.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

/// Detaches what a refused set had attached.
fn undo(ebpf: &mut Ebpf, links: Vec<Link>) {
    for link in links {
        let _ = match link {
            Link::Kprobe(n, l) => program::<KProbe>(ebpf, n).map(|p| p.detach(l).is_ok()),
            Link::Fentry(n, l) => program::<FEntry>(ebpf, n).map(|p| p.detach(l).is_ok()),
            Link::Fexit(n, l) => program::<FExit>(ebpf, n).map(|p| p.detach(l).is_ok()),
        };
    }
}

/// The kernel's BTF, which fentry programs load against; None for kprobes.
fn btf_for(kind: FsyncProbe) -> std::result::Result<Option<Btf>, String> {
    match kind {
        FsyncProbe::Fentry => Btf::from_sys_fs()
            .map(Some)
            .map_err(|e| format!("no kernel BTF at /sys/kernel/btf/vmlinux: {e}")),
        _ => Ok(None),
    }
}

/// Attaches `kind` (fentry or kprobe) at the first set of [`SITES`] the
/// kernel accepts; returns its functions, or every refusal.
fn attach_functions(ebpf: &mut Ebpf, kind: FsyncProbe) -> std::result::Result<String, String> {
    let btf = btf_for(kind)?;
    let mut refused = Vec::new();
    for set in SITES {
        let mut links = Vec::new();
        let attached = set
            .iter()
            .try_for_each(|site| attach_site(ebpf, kind, site, btf.as_ref(), &mut links));
        match attached {
            Ok(()) => {
                return Ok(set
                    .iter()
                    .map(|s| s.function)
                    .collect::<Vec<_>>()
                    .join(", "))
            }
            Err(e) => {
                undo(ebpf, links);
                refused.push(e);
            }
        }
    }
    Err(refused.join("; "))
}

pub(super) fn tracepoint<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut TracePoint> {
    let attach_err = |detail: String| Error::Attach {
        what: format!("eBPF program {name}"),
        detail,
    };
    let p: &mut TracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| attach_err("missing from the object".into()))?
        .try_into()
        .map_err(|e| attach_err(format!("{e}")))?;
    // Loaded once: the exporter's windows attach it again and again.
    if p.fd().is_err() {
        p.load().map_err(|e| attach_err(format!("{e}")))?;
    }
    Ok(p)
}

/// `--io`: the block layer's submit, issue and complete tracepoints. They
/// fire per block request, not per syscall: other processes' syscalls
/// stay on the fast path.
pub fn attach_block(ebpf: &mut Ebpf) -> Result<()> {
    ensure_tracefs()?;
    for (prog_name, event) in [
        (prog::IO_BIO_QUEUE, "block_bio_queue"),
        (prog::IO_RQ_ISSUE, "block_rq_issue"),
        (prog::IO_RQ_COMPLETE, "block_rq_complete"),
    ] {
        tracepoint(ebpf, prog_name)?
            .attach("block", event)
            .map_err(|e| Error::Attach {
                what: format!("tracepoint block/{event}"),
                detail: e.to_string(),
            })?;
    }
    Ok(())
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
/// tracepoints, or with `Libc` the uprobes on the server's C library for
/// both.
/// With the light tier, `auto` falls back to the server's C library
/// before the syscall tracepoints: a tier meant to stay on must not put
/// every syscall of the host on the slow path. Tracepoints remain where
/// the C library cannot be probed (a static server), said in the reason.
pub fn attach(
    ebpf: &mut Ebpf,
    choice: FsyncProbe,
    pid: NonZeroU32,
    tier: super::tier::Tier,
    io: bool,
) -> Result<KernelAttach> {
    let libc_timed = tier.per_commit() || light_syncs_timed(FsyncProbe::Libc, io);
    if choice == FsyncProbe::Libc {
        let l =
            super::libc::attach(ebpf, pid, tier.per_commit(), libc_timed).map_err(|detail| {
                Error::LibcProbeUnavailable {
                    pid: pid.get(),
                    detail,
                }
            })?;
        return Ok(libc_attach(l, None));
    }
    let light_auto = choice == FsyncProbe::Auto && !tier.per_commit();
    let mut refusals = Vec::new();
    let mut kernel_functions = None;
    let mut used = FsyncProbe::Tracepoint;
    let tries: &[FsyncProbe] = match choice {
        FsyncProbe::Auto => AUTO_ORDER,
        FsyncProbe::Tracepoint | FsyncProbe::Libc => &[],
        FsyncProbe::Fentry => &[FsyncProbe::Fentry],
        FsyncProbe::Kprobe => &[FsyncProbe::Kprobe],
    };
    for &kind in tries {
        match attach_functions(ebpf, kind) {
            Ok(f) => {
                kernel_functions = Some(f);
                used = kind;
                break;
            }
            Err(detail) if choice == kind => {
                return Err(Error::KernelProbeUnavailable {
                    kind,
                    functions: all_functions(),
                    detail,
                })
            }
            Err(detail) => refusals.push(format!("{kind}: {detail}")),
        }
    }
    if used == FsyncProbe::Tracepoint && light_auto {
        match super::libc::attach(ebpf, pid, false, libc_timed) {
            Ok(l) => return Ok(libc_attach(l, Some(refusals.join("; ")))),
            Err(detail) => refusals.push(format!("libc: {detail}")),
        }
    }
    let mut fallback_reason = (!refusals.is_empty()).then(|| refusals.join("; "));
    if used == FsyncProbe::Tracepoint {
        ensure_tracefs()?;
        attach_tracepoints(ebpf, prog::SYNC_ENTER_TP, false)?;
        attach_tracepoints(ebpf, prog::SYNC_EXIT_TP, true)?;
    }
    // The writes by the mechanism the syncs got; tracepoints only where
    // that is refused, since one enabled syscall tracepoint slows every
    // syscall on the host.
    let writes = match used {
        FsyncProbe::Fentry | FsyncProbe::Kprobe => match attach_write_functions(ebpf, used) {
            Ok(w) => Some(w),
            Err(why) => {
                let why = format!("writes by {used}: {why}");
                fallback_reason = Some(match fallback_reason {
                    Some(r) => format!("{r}; {why}"),
                    None => why,
                });
                None
            }
        },
        _ => None,
    };
    let write_probes = match writes {
        Some(w) => w,
        None => {
            ensure_tracefs()?;
            let p = tracepoint(ebpf, prog::WRITE_SYSCALL_TP)?;
            let mut tps = Vec::new();
            for sc in WRITE_TRACEPOINTS {
                let tp = format!("sys_enter_{sc}");
                // pwritev2 is missing on old kernels: skip what does not exist.
                if p.attach("syscalls", &tp).is_ok() {
                    tps.push(tp);
                }
            }
            format!("tracepoints {}", tps.join(", "))
        }
    };
    Ok(KernelAttach {
        used,
        kernel_functions,
        fallback_reason,
        write_probes: Some(write_probes),
        libc: None,
    })
}

/// What `-v` and the legend say when the writes are not counted.
pub const NO_WRITE_PROBES: &str =
    "none: the light tier counts writes by fentry or kprobe only, which this kernel refuses (--probes exact counts them)";

/// What the C library's uprobes count, for `-v` and the legend.
fn libc_attach(l: super::libc::LibcAttach, fallback_reason: Option<String>) -> KernelAttach {
    KernelAttach {
        used: FsyncProbe::Libc,
        kernel_functions: Some(format!(
            "fsync, fdatasync in {}{}",
            l.library.display(),
            if l.timed {
                ""
            } else {
                " (counted at entry, not timed)"
            }
        )),
        fallback_reason: fallback_reason.filter(|r| !r.is_empty()),
        write_probes: (!l.writes.is_empty()).then(|| {
            format!(
                "uprobes on {} in {}",
                l.writes.join(", "),
                l.library.display()
            )
        }),
        libc: Some(l),
    }
}

/// The write syscall wrappers and their fentry programs; the kprobes use
/// one program per size convention (`pwritev`'s iovec is not read).
const WRITE_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "__x64_sys_write",
        prog::WRITE_FENTRY_WRITE,
        prog::WRITE_SYS_KPROBE,
    ),
    (
        "__x64_sys_pwrite64",
        prog::WRITE_FENTRY_PWRITE64,
        prog::WRITE_SYS_KPROBE,
    ),
    (
        "__x64_sys_pwritev",
        prog::WRITE_FENTRY_PWRITEV,
        prog::WRITEV_SYS_KPROBE,
    ),
    (
        "__x64_sys_pwritev2",
        prog::WRITE_FENTRY_PWRITEV2,
        prog::WRITEV_SYS_KPROBE,
    ),
];

/// Attaches the write counting by `kind` (fentry or kprobe) on the
/// syscall wrappers, all or nothing: `pwritev2` may be absent (kernels
/// before 4.6), the other three are required. Returns what `-v` prints.
fn attach_write_functions(
    ebpf: &mut Ebpf,
    kind: FsyncProbe,
) -> std::result::Result<String, String> {
    let btf = btf_for(kind)?;
    let mut links = Vec::new();
    let mut done = Vec::new();
    for &(f, fentry, kprobe) in WRITE_FUNCTIONS {
        let err = |e: aya::programs::ProgramError| format!("{f}: {}", refusal(&e));
        let attached = match &btf {
            Some(btf) => program::<FEntry>(ebpf, fentry).and_then(|p| {
                p.load(f, btf).map_err(err)?;
                Ok(Link::Fentry(fentry, p.attach().map_err(err)?))
            }),
            None => program::<KProbe>(ebpf, kprobe).and_then(|p| {
                if p.fd().is_err() {
                    p.load().map_err(err)?;
                }
                Ok(Link::Kprobe(kprobe, p.attach(f, 0).map_err(err)?))
            }),
        };
        match attached {
            Ok(l) => {
                links.push(l);
                done.push(f);
            }
            Err(_) if f == "__x64_sys_pwritev2" => {}
            Err(e) => {
                undo(ebpf, links);
                return Err(e);
            }
        }
    }
    Ok(format!("{kind} on {}", done.join(", ")))
}
