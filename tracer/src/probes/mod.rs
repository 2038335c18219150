//! Loads the eBPF object, attaches it to one server process, and reads the
//! cumulative per-CPU maps on demand. Links detach when `Probes` drops.
pub mod cost;
pub mod debuginfod;
pub mod dwarf;
pub mod ebpf_log;
pub mod kernel;
pub mod libc;
pub mod profiles;
pub mod prologue;
pub mod settle;
pub mod symbols;
pub mod tier;

use std::{
    collections::HashMap,
    num::NonZeroU32,
    path::{Path, PathBuf},
};

use aya::{
    maps::{PerCpuArray, PerCpuHashMap},
    programs::{
        uprobe::{UProbeAttachLocation, UProbeLink, UProbeLinkId, UProbeScope},
        UProbe,
    },
    Ebpf, EbpfLoader,
};
use tracer_ebpf::{
    globals as g, maps, programs as prog, BatchHist, BatchMember, Counter, FdStats, HistKind,
    BATCH_BUCKETS, HIST_BUCKETS,
};

use crate::error::{Error, Result};
use kernel::{FsyncProbe, KernelAttach};
use profiles::{Pred, Profile, ServerId, Source};
use symbols::{Resolved, Resolver};
use tier::Tier;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

/// The embedded eBPF object, for `--version`'s hash.
pub fn ebpf_object() -> &'static [u8] {
    OBJECT
}

/// What the user asked to trace.
#[derive(Clone, Debug)]
pub struct Target {
    pub pid: u32,
    /// The server executable (for symbols and the uprobe path).
    pub exe: PathBuf,
    pub debug_root: PathBuf,
    /// Which debuginfod servers may be asked for a debug file.
    pub debuginfod: debuginfod::Choice,
    pub server: Option<ServerId>,
    pub fsync_probe: FsyncProbe,
    /// Time each write request (entry + return probe). Off, the write probe
    /// only counts: one probe hit per commit instead of two, for callers
    /// that measure commit latency themselves (the main command's workload).
    pub write_timing: bool,
    /// Leaders and followers (exact mode, with `write_timing`).
    pub anatomy: bool,
    /// Light: no per-commit probe until a window opens
    /// ([`Probes::open_window`]); `write_timing` and `anatomy` then say
    /// what a window attaches.
    pub tier: Tier,
}

/// How the write probe was placed.
#[derive(Clone, Debug)]
pub enum WriteProbe {
    /// The InnoDB function of a profile row.
    Exact {
        profile: &'static Profile,
        at: Resolved,
    },
    /// The server-layer commit function: commits, not redo write requests.
    /// `also`: the binlog's two-phase commit function, probed beside it.
    ServerLayer {
        at: Resolved,
        also: Option<Resolved>,
        missing: String,
    },
}

impl WriteProbe {
    /// Every place the write programs attach to.
    pub fn points(&self) -> Vec<&Resolved> {
        match self {
            WriteProbe::Exact { at, .. } => vec![at],
            WriteProbe::ServerLayer { at, also, .. } => std::iter::once(at).chain(also).collect(),
        }
    }

    /// "log_write_up_to", or "ha_commit_one_phase + MYSQL_BIN_LOG::log_and_order".
    pub fn source_name(&self) -> String {
        self.points()
            .iter()
            .map(|r| profiles::short_name(&r.symbol))
            .collect::<Vec<_>>()
            .join(" + ")
    }

    pub fn resolved(&self) -> &Resolved {
        match self {
            WriteProbe::Exact { at, .. } | WriteProbe::ServerLayer { at, .. } => at,
        }
    }
}

/// The attach plan, before anything touches the kernel: pure ELF work, so
/// bad input is rejected without root.
#[derive(Clone, Debug)]
pub struct Plan {
    pub write: WriteProbe,
    pub flush: Option<Resolved>,
    /// Flush symbols tried and not found (likely inlined).
    pub flush_missing: Vec<&'static str>,
    pub server: Option<ServerId>,
    pub exe: PathBuf,
    /// Debug files looked for while resolving (for `-v`).
    pub debug_looked_for: Vec<PathBuf>,
    /// What debuginfod was asked, when the other sources fell short.
    pub debuginfod: Option<debuginfod::Looked>,
}

impl Plan {
    pub fn new(target: &Target) -> Result<Self> {
        let mut r = Resolver::open(&target.exe, &target.debug_root)?;
        let server = target.server.or_else(|| profiles::detect(&target.exe));
        // DWARF and debuginfod come last, only when the symbol tables fall
        // short: a server's DWARF or debug file is hundreds of MB.
        let complete = |r: &Resolver| {
            profiles::candidates(server)
                .iter()
                .find(|p| r.resolve(&[p.write_symbol]).is_some())
                .is_some_and(|p| r.resolve(p.flush_symbols).is_some())
        };
        let exact = |r: &Resolver| {
            profiles::candidates(server)
                .iter()
                .any(|p| r.resolve(&[p.write_symbol]).is_some())
        };
        if !complete(&r) {
            let names: Vec<&str> = profiles::candidates(server)
                .iter()
                .flat_map(|p| {
                    std::iter::once(p.write_symbol).chain(p.flush_symbols.iter().copied())
                })
                .collect();
            r.scan_dwarf(&names);
        }
        let mut debuginfod_looked = None;
        if !exact(&r) {
            if let Some(id) = r.build_id.clone().filter(|id| id.len() > 1) {
                let env = debuginfod::Env::from_process();
                let looked = debuginfod::lookup(&target.debuginfod, &env, &id, |path, data| {
                    let ok = r.add_fetched(path, data);
                    if ok && !complete(&r) {
                        r.scan_dwarf_of(path, data);
                    }
                    ok
                });
                if looked.interrupted {
                    return Err(Error::Interrupted {
                        phase: "debuginfod download",
                    });
                }
                debuginfod_looked = Some(looked);
            }
        }
        for p in profiles::candidates(server) {
            let Some(at) = r.resolve(&[p.write_symbol]) else {
                continue;
            };
            let mut flush = r.resolve(p.flush_symbols);
            // Inlined copies of a filtered flush function (MySQL 5.x's
            // fil_flush(space)) count only where the filter's argument
            // can be read; else the kernel's redo fsyncs stand in.
            if let Some(f) = &mut flush {
                if p.flush_filter.reads_arg() {
                    f.inlined
                        .retain(|s| s.dwarf.arg_readable(p.flush_filter.arg));
                }
                if !f.out_of_line && f.inlined.is_empty() {
                    flush = None;
                }
            }
            let flush_missing = if flush.is_none() {
                p.flush_symbols.to_vec()
            } else {
                Vec::new()
            };
            return Ok(Plan {
                write: WriteProbe::Exact { profile: p, at },
                flush,
                flush_missing,
                server,
                exe: target.exe.clone(),
                debug_looked_for: r.looked_for,
                debuginfod: debuginfod_looked,
            });
        }
        let wanted = "log_write_up_to".to_string();
        if let Some(at) = r.resolve(profiles::FALLBACKS) {
            let also = (at.symbol == profiles::FALLBACKS[0])
                .then(|| r.resolve(profiles::FALLBACK_TWO_PHASE))
                .flatten();
            return Ok(Plan {
                write: WriteProbe::ServerLayer {
                    at,
                    also,
                    missing: wanted,
                },
                flush: None,
                flush_missing: Vec::new(),
                server,
                exe: target.exe.clone(),
                debug_looked_for: r.looked_for,
                debuginfod: debuginfod_looked,
            });
        }
        Err(Error::NoProbeSymbol {
            path: target.exe.clone(),
            wanted,
            fallbacks: profiles::FALLBACKS
                .iter()
                .map(|s| profiles::short_name(s))
                .collect::<Vec<_>>()
                .join(", "),
            debug_root: target.debug_root.clone(),
        })
    }

    /// Inlined copies of the write function whose durability cannot be
    /// read (see [`Probes::attach`]).
    pub fn unknown_sites(&self) -> usize {
        let WriteProbe::Exact { profile, at } = &self.write else {
            return 0;
        };
        at.inlined
            .iter()
            .filter(|s| !site_readable(&[profile.pred_a, profile.pred_b], s))
            .count()
    }

    /// ".symtab", "debuginfod https://…", "dwarf-inlined (3 sites)", with
    /// the flush function's when it is not the write's.
    pub fn symbol_source(&self, write_from: &str) -> String {
        let mut s = match self.write.resolved().source {
            symbols::SymbolSource::Dwarf | symbols::SymbolSource::DwarfInlined => {
                self.write.resolved().source_text()
            }
            _ => write_from.to_string(),
        };
        if let Some(f) = &self.flush {
            let from = f.source_text();
            if f.source != self.write.resolved().source || !f.inlined.is_empty() {
                s.push_str(&format!("; flush: {from}"));
            }
        }
        s
    }

    /// The one line said at start when n_write cannot be exact.
    pub fn fallback_line(&self) -> Option<String> {
        let WriteProbe::ServerLayer { missing, .. } = &self.write else {
            return None;
        };
        Some(format!(
            "{missing} not found in {} (stripped, no debug file): counting commits at {}; install the -dbgsym package for exact n_write",
            self.exe.display(),
            self.write.source_name()
        ))
    }
}

/// True when every predicate that reads an argument finds it in its
/// register at this inlined copy's entry.
fn site_readable(preds: &[Pred], site: &symbols::Site) -> bool {
    preds
        .iter()
        .all(|p| !p.reads_arg() || site.dwarf.arg_readable(p.arg))
}

/// One attached probe, for `-v`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AttachedProbe {
    pub role: &'static str,
    pub kind: &'static str,
    pub symbol: String,
    pub file: PathBuf,
    pub offset: u64,
    pub found_in: String,
    /// For an inlined copy: the function it sits in.
    pub inlined_into: Option<String>,
}

/// Cumulative counts since attach, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub counters: [u64; tracer_ebpf::COUNTERS as usize],
    pub hists: [[u64; HIST_BUCKETS]; tracer_ebpf::HISTS as usize],
    pub fds: HashMap<u32, FdTotals>,
    /// Flushes per batch-size bucket ([`tracer_ebpf::batch_bucket`]).
    pub batch: [u64; BATCH_BUCKETS],
    /// Light tier: the server's commit counter at this read (set by the
    /// caller, who can log in; 0 when nothing counts commits).
    pub commits: u64,
}

/// `FdStats` summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FdTotals {
    pub syncs: u64,
    pub sync_ns: u64,
    pub syncs_in_flush: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub hist: [u64; HIST_BUCKETS],
}

impl Snapshot {
    /// Adds `other`'s counts (fds with the same key are summed).
    pub fn absorb(&mut self, other: &Snapshot) {
        for (a, b) in self.counters.iter_mut().zip(other.counters) {
            *a += b;
        }
        for (h, o) in self.hists.iter_mut().zip(&other.hists) {
            for (a, b) in h.iter_mut().zip(o) {
                *a += b;
            }
        }
        for (a, b) in self.batch.iter_mut().zip(other.batch) {
            *a += b;
        }
        self.commits += other.commits;
        for (fd, t) in &other.fds {
            let e = self.fds.entry(*fd).or_default();
            e.syncs += t.syncs;
            e.sync_ns += t.sync_ns;
            e.syncs_in_flush += t.syncs_in_flush;
            e.writes += t.writes;
            e.write_bytes += t.write_bytes;
            for (a, b) in e.hist.iter_mut().zip(t.hist) {
                *a += b;
            }
        }
    }

    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
    pub fn source(&self, s: Source) -> u64 {
        match s {
            Source::AllCalls => self.counter(Counter::WriteCalls),
            Source::PredA => self.counter(Counter::WritePredA),
            Source::PredB => self.counter(Counter::WritePredB),
        }
    }
}

/// The loaded, attached programs.
pub struct Probes {
    ebpf: Ebpf,
    logs: Option<aya_log::EbpfLogger<ebpf_log::StderrLog>>,
    pub plan: Plan,
    pub kernel: KernelAttach,
    pub attached: Vec<AttachedProbe>,
    /// Leaders and followers are counted (in light: in windows).
    pub anatomy: bool,
    pub tier: Tier,
    /// The write return probe goes with the write probe.
    write_timing: bool,
    /// The write probes of the open exact window (light tier).
    window: Option<Vec<(&'static str, UProbeLinkId)>>,
    pid: u32,
    /// The fds in the kernel's `REDO_FDS`, and when they were last looked at.
    redo_fds: Vec<u32>,
    redo_checked: Option<std::time::Instant>,
    /// CLOCK_MONOTONIC when every probe was in place: calls begun earlier
    /// may have no return probe to close them (see `settle`).
    attached_at_ns: u64,
}

fn set_pred<'a>(l: &mut EbpfLoader<'a>, names: [&'a str; 4], p: &'a Pred, op: &'a u32) {
    l.override_global(names[0], &p.arg, true)
        .override_global(names[1], op, true)
        .override_global(names[2], &p.mask, true)
        .override_global(names[3], &p.value, true);
}

/// The uprobe program `name`, loaded on first use: one program may attach
/// at several points.
pub(crate) fn loaded_uprobe<'a>(
    ebpf: &'a mut Ebpf,
    name: &str,
) -> std::result::Result<&'a mut UProbe, String> {
    let p: &mut UProbe = ebpf
        .program_mut(name)
        .ok_or_else(|| "missing from the object".to_string())?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    if p.fd().is_err() {
        p.load().map_err(|e| format!("{e}"))?;
    }
    Ok(p)
}

/// Attaches `prog_name` at `offset` in `exe` (the entry of `at`, or of
/// one of its inlined copies).
fn attach_uprobe(
    ebpf: &mut Ebpf,
    prog_name: &str,
    offset: u64,
    at: &Resolved,
    exe: &Path,
    pid: NonZeroU32,
) -> Result<UProbeLinkId> {
    let err = |detail: String| {
        // The kernel's answer then is a bare perf_event_open failure
        // (ESRCH): say what happened instead.
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Error::ExitedDuringAttach { pid: pid.get() };
        }
        Error::Attach {
            what: format!(
                "{prog_name} at {} ({}+{:#x})",
                at.symbol,
                exe.display(),
                offset
            ),
            detail,
        }
    };
    let p = loaded_uprobe(ebpf, prog_name).map_err(err)?;
    let offset = probe_offset(exe, offset);
    p.attach(
        UProbeAttachLocation::AbsoluteOffset(offset),
        exe,
        UProbeScope::OneProcess(pid),
    )
    .map_err(|e| err(format!("{e}")))
}

/// The offset to probe for a function entry at `offset` in `exe`: past a
/// prologue the kernel would single-step ([`prologue::entry_skip`]). An
/// `endbr64` there cost Debian 13's CET-built MariaDB 11.8 about 10 % of
/// its throughput under the per-commit probe where 10.11 lost 1-2 %.
pub(crate) fn probe_offset(exe: &Path, offset: u64) -> u64 {
    offset + prologue::entry_skip(&prologue::code_at(exe, offset))
}

/// The write probes of an exact window: the program and link of each, so
/// the window can take them off again while the rest stays.
pub struct WindowLinks(Vec<UProbeLink>);

impl WindowLinks {
    /// How many probes the window had attached.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Attaches the write programs at every point of `write`: the per-commit
/// probes. Returns each link with its program, and notes each probe.
fn attach_writes(
    ebpf: &mut Ebpf,
    write: &WriteProbe,
    preds: [Pred; 2],
    write_timing: bool,
    exe: &Path,
    pid: NonZeroU32,
    mut note: impl FnMut(&'static str, &Resolved, u64, Option<&String>),
) -> Result<Vec<(&'static str, UProbeLinkId)>> {
    let mut links = Vec::new();
    for w in write.points() {
        if w.out_of_line {
            let id = attach_uprobe(ebpf, prog::WRITE_ENTRY, w.file_offset, w, exe, pid)?;
            links.push((prog::WRITE_ENTRY, id));
            note("uprobe", w, w.file_offset, None);
            if write_timing {
                let id = attach_uprobe(ebpf, prog::WRITE_RETURN, w.file_offset, w, exe, pid)?;
                links.push((prog::WRITE_RETURN, id));
                note("uretprobe", w, w.file_offset, None);
            }
        }
        for site in &w.inlined {
            // The durable test reads registers: only where DWARF puts
            // its arguments in them is the site's durability known.
            let (prog_name, kind) = if site_readable(&preds, site) {
                (prog::WRITE_SITE, "uprobe (inlined)")
            } else {
                (
                    prog::WRITE_SITE_UNKNOWN,
                    "uprobe (inlined, durable unknown)",
                )
            };
            let id = attach_uprobe(ebpf, prog_name, site.file_offset, w, exe, pid)?;
            links.push((prog_name, id));
            note(kind, w, site.file_offset, Some(&site.dwarf.caller));
        }
    }
    Ok(links)
}

impl Probes {
    /// Loads the object configured for `target.pid` and the plan's
    /// predicates, and attaches everything.
    pub fn attach(target: &Target, plan: Plan) -> Result<Self> {
        if OBJECT.is_empty() {
            return Err(Error::EmptyObject);
        }
        let pid = NonZeroU32::new(target.pid).ok_or(Error::NoSuchProcess { pid: 0 })?;
        let (pred_a, pred_b, pred_f) = match &plan.write {
            WriteProbe::Exact { profile, .. } => {
                (profile.pred_a, profile.pred_b, profile.flush_filter)
            }
            WriteProbe::ServerLayer { .. } => (Pred::ALWAYS, Pred::OFF, Pred::OFF),
        };
        let ops = [pred_a.op as u32, pred_b.op as u32, pred_f.op as u32];
        // Batch members: the durable requests (server-layer commits in
        // fallback mode); batches begin at the flush function, else at
        // redo fsyncs.
        let member = match &plan.write {
            WriteProbe::Exact { profile, .. } => match profile.durable {
                Source::AllCalls => BatchMember::AllCalls,
                Source::PredA => BatchMember::PredA,
                Source::PredB => BatchMember::PredB,
            },
            WriteProbe::ServerLayer { .. } => BatchMember::AllCalls,
        } as u32;
        let batch_on_sync = u32::from(plan.flush.is_none());
        let anatomy = u32::from(
            target.anatomy && target.write_timing && matches!(plan.write, WriteProbe::Exact { .. }),
        );
        let mut loader = EbpfLoader::new();
        loader.override_global(g::TARGET_TGID, &target.pid, true);
        let write_timing = u32::from(target.write_timing);
        loader.override_global(g::WRITE_TIMING, &write_timing, true);
        loader.override_global(g::DURABLE_PRED, &member, true);
        loader.override_global(g::BATCH_ON_SYNC, &batch_on_sync, true);
        loader.override_global(g::ANATOMY, &anatomy, true);
        set_pred(
            &mut loader,
            [g::PRED_A_ARG, g::PRED_A_OP, g::PRED_A_MASK, g::PRED_A_VALUE],
            &pred_a,
            &ops[0],
        );
        set_pred(
            &mut loader,
            [g::PRED_B_ARG, g::PRED_B_OP, g::PRED_B_MASK, g::PRED_B_VALUE],
            &pred_b,
            &ops[1],
        );
        set_pred(
            &mut loader,
            [g::PRED_F_ARG, g::PRED_F_OP, g::PRED_F_MASK, g::PRED_F_VALUE],
            &pred_f,
            &ops[2],
        );
        let mut ebpf = loader
            .load(OBJECT)
            .map_err(|e| Error::Load(e.to_string()))?;
        // Without the log map (an object built without any log call) there
        // is simply nothing to drain.
        let logs = aya_log::EbpfLogger::init_with_logger(&mut ebpf, ebpf_log::StderrLog).ok();

        let exe = target.exe.as_path();
        let mut attached = Vec::new();
        let mut note = |role, kind, at: &Resolved, offset: u64, caller: Option<&String>| {
            attached.push(AttachedProbe {
                role,
                kind,
                symbol: at.symbol.clone(),
                file: exe.to_owned(),
                offset,
                found_in: format!("{} ({})", at.source_text(), at.found_in.display()),
                inlined_into: caller.cloned(),
            })
        };
        // The kernel side first: a flush counted by the uprobe below must
        // find its fdatasync counted too. Attached after, a flush entered
        // in between (the master thread's, once a second) had its sync
        // missed: n_flush one above the redo syncs inside flushes in about
        // one trace in six here.
        let kernel = kernel::attach(&mut ebpf, target.fsync_probe, pid, target.tier)?;
        if target.tier.per_commit() {
            attach_writes(
                &mut ebpf,
                &plan.write,
                [pred_a, pred_b],
                target.write_timing,
                exe,
                pid,
                |kind, at, offset, caller| note("write", kind, at, offset, caller),
            )?;
        }
        if let Some(f) = &plan.flush {
            if f.out_of_line {
                attach_uprobe(&mut ebpf, prog::FLUSH_ENTRY, f.file_offset, f, exe, pid)?;
                note("flush", "uprobe", f, f.file_offset, None);
                attach_uprobe(&mut ebpf, prog::FLUSH_RETURN, f.file_offset, f, exe, pid)?;
                note("flush", "uretprobe", f, f.file_offset, None);
            }
            for site in &f.inlined {
                attach_uprobe(&mut ebpf, prog::FLUSH_SITE, site.file_offset, f, exe, pid)?;
                note(
                    "flush",
                    "uprobe (inlined)",
                    f,
                    site.file_offset,
                    Some(&site.dwarf.caller),
                );
            }
        }
        let mut p = Probes {
            ebpf,
            logs,
            plan,
            kernel,
            attached,
            anatomy: anatomy != 0,
            tier: target.tier,
            write_timing: target.write_timing,
            window: None,
            pid: target.pid,
            redo_fds: Vec::new(),
            redo_checked: None,
            attached_at_ns: settle::monotonic_ns(),
        };
        p.refresh_redo_fds();
        Ok(p)
    }

    /// Opens an exact window on light probes: attaches the per-commit
    /// write probes beside the light set, into the same maps, so the
    /// window's n_write and the light n_flush are read together. Exact
    /// probes already have them: an error then, as for a window already
    /// open.
    pub fn open_window(&mut self) -> Result<()> {
        if self.tier.per_commit() || self.window.is_some() {
            return Err(Error::Runtime(
                "the per-commit probes are already attached".into(),
            ));
        }
        let pid = NonZeroU32::new(self.pid).ok_or(Error::NoSuchProcess { pid: 0 })?;
        let (pred_a, pred_b) = match &self.plan.write {
            WriteProbe::Exact { profile, .. } => (profile.pred_a, profile.pred_b),
            WriteProbe::ServerLayer { .. } => (Pred::ALWAYS, Pred::OFF),
        };
        let exe = self.plan.exe.clone();
        let links = attach_writes(
            &mut self.ebpf,
            &self.plan.write,
            [pred_a, pred_b],
            self.write_timing,
            &exe,
            pid,
            |_, _, _, _| {},
        );
        match links {
            Ok(l) => {
                self.window = Some(l);
                Ok(())
            }
            Err(e) => {
                // A partly attached window: the links made so far go in
                // the next close (here, at once).
                drop(self.close_window());
                Err(e)
            }
        }
    }

    /// Whether an exact window is open.
    pub fn window_open(&self) -> bool {
        self.window.is_some()
    }

    /// Takes the window's write probes off the programs. Dropping what it
    /// returns detaches them: the kernel takes a while for that, so a
    /// caller holding a lock drops it after letting go.
    pub fn close_window(&mut self) -> WindowLinks {
        let mut out = Vec::new();
        for (name, id) in self.window.take().unwrap_or_default() {
            if let Ok(p) = loaded_uprobe(&mut self.ebpf, name) {
                if let Ok(l) = p.take_link(id) {
                    out.push(l);
                }
            }
        }
        WindowLinks(out)
    }

    /// Without a flush function a batch begins at each fsync of a redo
    /// fd: tells the kernel which fds those are now (the redo files are
    /// opened at start, MySQL 8.0.30+ rotates them). At most once a
    /// second: a server may hold thousands of fds.
    pub fn refresh_redo_fds(&mut self) {
        let pid = self.pid;
        if self.plan.flush.is_some()
            || self
                .redo_checked
                .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1))
        {
            return;
        }
        self.redo_checked = Some(std::time::Instant::now());
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return;
        };
        let now: Vec<u32> = dir
            .flatten()
            .filter_map(|e| {
                let fd: u32 = e.file_name().to_str()?.parse().ok()?;
                let path = std::fs::read_link(e.path()).ok()?;
                (crate::fds::classify(&path.to_string_lossy()) == crate::fds::FileClass::Redo)
                    .then_some(fd)
            })
            .collect();
        if now == self.redo_fds {
            return;
        }
        let Some(map) = self.ebpf.map_mut(maps::REDO_FDS) else {
            return;
        };
        let Ok(mut m) = aya::maps::HashMap::<_, u32, u8>::try_from(map) else {
            return;
        };
        for fd in self.redo_fds.iter().filter(|fd| !now.contains(fd)) {
            let _ = m.remove(fd);
        }
        for fd in &now {
            let _ = m.insert(fd, 1, 0);
        }
        self.redo_fds = now;
    }

    /// Prints what the eBPF programs logged since the last call.
    pub fn drain_logs(&mut self) {
        if let Some(l) = self.logs.as_mut() {
            l.flush();
        }
    }

    /// The fds that have synced or written so far (cheap: keys only), so
    /// they can be named while still open.
    pub fn fds(&self) -> Result<Vec<u32>> {
        let map = self.ebpf.map(maps::FD_STATS).ok_or(Error::MapRead {
            map: maps::FD_STATS,
            detail: "missing from the object".into(),
        })?;
        let fds: PerCpuHashMap<_, u32, FdStats> =
            PerCpuHashMap::try_from(map).map_err(|e| Error::MapRead {
                map: maps::FD_STATS,
                detail: e.to_string(),
            })?;
        Ok(fds.keys().filter_map(std::result::Result::ok).collect())
    }

    /// Reads every map once: cumulative totals since attach.
    pub fn read(&self) -> Result<Snapshot> {
        let map_err = |map: &'static str| {
            move |e: aya::maps::MapError| Error::MapRead {
                map,
                detail: e.to_string(),
            }
        };
        let missing = |map: &'static str| Error::MapRead {
            map,
            detail: "missing from the object".into(),
        };
        let mut snap = Snapshot::default();

        let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::COUNTERS)
                .ok_or_else(|| missing(maps::COUNTERS))?,
        )
        .map_err(map_err(maps::COUNTERS))?;
        for (i, slot) in snap.counters.iter_mut().enumerate() {
            let v = counters
                .get(&(i as u32), 0)
                .map_err(map_err(maps::COUNTERS))?;
            *slot = v.iter().sum();
        }

        // The fd stats right after the counters: a flush that completes
        // between the two reads is seen in one and not the other, so the
        // gap is kept as short as it can be.
        let fds: PerCpuHashMap<_, u32, FdStats> = PerCpuHashMap::try_from(
            self.ebpf
                .map(maps::FD_STATS)
                .ok_or_else(|| missing(maps::FD_STATS))?,
        )
        .map_err(map_err(maps::FD_STATS))?;
        for item in fds.iter() {
            let (fd, per_cpu) = item.map_err(map_err(maps::FD_STATS))?;
            let t = snap.fds.entry(fd).or_default();
            for s in per_cpu.iter() {
                t.syncs += s.syncs;
                t.sync_ns += s.sync_ns;
                t.syncs_in_flush += s.syncs_in_flush;
                t.writes += s.writes;
                t.write_bytes += s.write_bytes;
                for (acc, b) in t.hist.iter_mut().zip(s.hist.buckets) {
                    *acc += b;
                }
            }
        }
        let batch: PerCpuArray<_, BatchHist> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::BATCH)
                .ok_or_else(|| missing(maps::BATCH))?,
        )
        .map_err(map_err(maps::BATCH))?;
        for h in batch.get(&0, 0).map_err(map_err(maps::BATCH))?.iter() {
            for (acc, b) in snap.batch.iter_mut().zip(h.buckets) {
                *acc += b;
            }
        }

        let hists: PerCpuArray<_, tracer_ebpf::Hist> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::HISTS)
                .ok_or_else(|| missing(maps::HISTS))?,
        )
        .map_err(map_err(maps::HISTS))?;
        for kind in [
            HistKind::WriteWait,
            HistKind::Flush,
            HistKind::LeaderWait,
            HistKind::FollowerWait,
        ] {
            let v = hists.get(&(kind as u32), 0).map_err(map_err(maps::HISTS))?;
            for h in v.iter() {
                for (acc, b) in snap.hists[kind as usize].iter_mut().zip(h.buckets) {
                    *acc += b;
                }
            }
        }

        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_at_an_endbr64_moves_past_it_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("elf");
        // endbr64; push %rbp at 0, push %rbp at 5, end of file at 7.
        std::fs::write(&f, [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x55, 0x90]).unwrap();
        assert_eq!(probe_offset(&f, 0), 4);
        assert_eq!(probe_offset(&f, 5), 5);
        assert_eq!(probe_offset(&f, 6), 6);
        assert_eq!(probe_offset(&dir.path().join("absent"), 0), 0);
    }
}
