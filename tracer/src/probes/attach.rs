//! Loads the eBPF object, attaches it to one server process per the
//! [`Plan`], and opens and closes the light tier's exact windows. Links
//! detach when [`Probes`] drops.
use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
};

use aya::{
    programs::{
        trace_point::{TracePointLink, TracePointLinkId},
        uprobe::{UProbeLink, UProbeLinkId},
    },
    Ebpf, EbpfLoader,
};
use readers::{
    family::redo::{Pred, Source},
    probes::symbols::Resolved,
};
use tracer_ebpf::{globals as g, maps, programs as prog, BatchMember};

use super::{
    binlog, clock, ebpf_log, group, io,
    kernel::{self, KernelAttach},
    plan::{site_readable, AckAt, AckPlan, Plan, Target, WaitPoint, WriteProbe},
    sched_split,
    tier::Tier,
    uprobe::{attach_uprobe, loaded_uprobe},
    wakeups,
};
use crate::error::{Error, Result};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

/// The embedded eBPF object, for `--version`'s hash.
pub fn ebpf_object() -> &'static [u8] {
    OBJECT
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

/// The loaded, attached programs.
pub struct Probes {
    pub(super) ebpf: Ebpf,
    pub(super) logs: Option<aya_log::EbpfLogger<ebpf_log::StderrLog>>,
    pub plan: Plan,
    pub kernel: KernelAttach,
    pub attached: Vec<AttachedProbe>,
    /// Leaders and followers are counted (in light: in windows).
    pub anatomy: bool,
    pub tier: Tier,
    /// The write return probe goes with the write probe.
    pub(super) write_timing: bool,
    /// The write probes of the open exact window (light tier).
    pub(super) window: Option<Vec<(&'static str, UProbeLinkId)>>,
    /// `--wakeups` in the light tier: the scheduler's tracepoints of the
    /// open window.
    pub(super) window_sched: Vec<(&'static str, TracePointLinkId)>,
    pub(super) pid: u32,
    /// The fds in the kernel's `REDO_FDS`, and when they were last looked at.
    pub(super) redo_fds: Vec<u32>,
    pub(super) redo_checked: Option<std::time::Instant>,
    /// CLOCK_MONOTONIC when every probe was in place: calls begun earlier
    /// may have no return probe to close them (see `settle`).
    pub(super) attached_at_ns: u64,
    /// `--io`: where the redo log is (None without `--io`).
    pub io: Option<io::Place>,
    /// The binlog group commit's probes are attached.
    pub(super) binlog: bool,
    /// The commit path is counted (`--commit-path`): its span probes are
    /// attached (exact tier), or go on with each exact window (light).
    pub commit_path: bool,
    /// Whether the commit path's stages are split by the scheduler's
    /// accounting, or why not.
    pub sched_split: sched_split::SplitState,
    /// `--wakeups`: the scheduler tracepoints count the followers'
    /// wake-ups.
    pub wakeups: bool,
    /// The span probes' attachments so far (`CP_GEN`'s last value).
    pub(super) cp_generation: u64,
    /// The semi-sync hooks probed (light: in its exact windows; none: no
    /// replication figures).
    pub ack: AckAt,
    /// A replication group's hook, probed where the server has the
    /// group's plugin loaded (exact tier).
    pub group: Option<group::GroupPlan>,
}

fn set_pred<'a>(l: &mut EbpfLoader<'a>, names: [&'a str; 4], p: &'a Pred, op: &'a u32) {
    l.override_global(names[0], &p.arg, true)
        .override_global(names[1], op, true)
        .override_global(names[2], &p.mask, true)
        .override_global(names[3], &p.value, true);
}

/// `--io`: where the redo log of `pid` is (or its datadir, where the log
/// is not open as a file).
fn io_place(pid: u32) -> Result<io::Place> {
    let err = |detail: String| Error::Attach {
        what: "--io: the device under the redo log".into(),
        detail,
    };
    let file = io::redo_file(pid).ok_or_else(|| {
        err(format!(
            "neither server {pid}'s redo log (ib_logfile*, #ib_redo*) nor its datadir can be read from /proc"
        ))
    })?;
    io::locate(&file).map_err(err)
}

/// The probes of an exact window, taken off their programs: dropping
/// them detaches them while the rest stays.
pub struct WindowLinks {
    uprobes: Vec<UProbeLink>,
    /// `--wakeups`: the scheduler's tracepoints, machine-wide, so on only
    /// while a window is open.
    tracepoints: Vec<TracePointLink>,
}

impl WindowLinks {
    /// How many probes the window had attached.
    pub fn len(&self) -> usize {
        self.uprobes.len() + self.tracepoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The semi-sync hooks worth probing: MySQL's after-commit one runs for
/// every commit, so it is left out where the wait point is known to be
/// the other.
fn ack_hooks(a: &AckPlan, wait: Option<WaitPoint>) -> AckAt {
    AckAt {
        sync: true,
        commit: a.at_commit.is_some() && wait != Some(WaitPoint::AfterSync),
    }
}

/// Attaches the semi-sync hooks `on` asks for (each return before its
/// entry); each link goes into `links` as it is made, `note` hears of each
/// hook.
fn attach_acks(
    ebpf: &mut Ebpf,
    a: &AckPlan,
    on: AckAt,
    exe: &Path,
    pid: NonZeroU32,
    links: &mut Vec<(&'static str, UProbeLinkId)>,
    mut note: impl FnMut(&Resolved),
) -> Result<()> {
    let hooks = [
        (
            on.sync.then_some(&a.at_sync),
            prog::ACK_SYNC_RETURN,
            prog::ACK_SYNC_ENTRY,
        ),
        (
            a.at_commit.as_ref().filter(|_| on.commit),
            prog::ACK_COMMIT_RETURN,
            prog::ACK_COMMIT_ENTRY,
        ),
    ];
    for (at, ret, entry) in hooks {
        let Some(at) = at else { continue };
        for name in [ret, entry] {
            links.push((
                name,
                attach_uprobe(ebpf, name, at.file_offset, at, exe, pid)?,
            ));
        }
        note(at);
    }
    Ok(())
}

/// Tells the kernel side which attachment of the span probes is live
/// (0: none).
fn set_cp_generation(ebpf: &mut Ebpf, generation: u64) -> Result<()> {
    let err = |detail: String| Error::Attach {
        what: "--commit-path: the span generation".into(),
        detail,
    };
    let map = ebpf
        .map_mut(maps::CP_GEN)
        .ok_or_else(|| err("the object has no CP_GEN map".into()))?;
    let mut a = aya::maps::Array::<_, u64>::try_from(map).map_err(|e| err(e.to_string()))?;
    a.set(0, generation, 0).map_err(|e| err(e.to_string()))
}

/// Opens the commit path's spans as attachment `generation`: the
/// commit's return first, then its entry (a span opened before its end
/// is in place would never close). Each link goes into `links` as it is
/// made.
fn attach_spans(
    ebpf: &mut Ebpf,
    at: &Resolved,
    generation: u64,
    exe: &Path,
    pid: NonZeroU32,
    links: &mut Vec<(&'static str, UProbeLinkId)>,
) -> Result<()> {
    set_cp_generation(ebpf, generation)?;
    for name in [prog::COMMIT_RETURN, prog::COMMIT_ENTRY] {
        links.push((
            name,
            attach_uprobe(ebpf, name, at.file_offset, at, exe, pid)?,
        ));
    }
    Ok(())
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
        let io_place = if target.io {
            Some(io_place(target.pid)?)
        } else {
            None
        };
        if matches!(io_place, Some(io::Place::Device(_))) {
            kernel::ensure_tracefs()?;
        }
        let io_cfg = match &io_place {
            Some(io::Place::Device(d)) => Some((
                d.trace_dev(),
                d.journal as u32,
                io::layout(Path::new(kernel::TRACEFS)).map_err(|detail| Error::Attach {
                    what: "--io: the block tracepoints".into(),
                    detail,
                })?,
            )),
            _ => None,
        };
        let mut loader = EbpfLoader::new();
        loader.override_global(g::TARGET_TGID, &target.pid, true);
        if let Some((dev, journal, layout)) = &io_cfg {
            loader
                .override_global(g::IO_DEV, dev, true)
                .override_global(g::IO_JOURNAL_THREADS, journal, true)
                .override_global(g::ISSUE_BYTES_OFF, &layout.issue_bytes, true)
                .override_global(g::ISSUE_RWBS_OFF, &layout.issue_rwbs, true)
                .override_global(g::COMPLETE_RWBS_OFF, &layout.complete_rwbs, true)
                .override_global(g::BIO_RWBS_OFF, &layout.bio_rwbs, true);
        }
        let write_timing = u32::from(target.write_timing);
        loader.override_global(g::WRITE_TIMING, &write_timing, true);
        loader.override_global(g::DURABLE_PRED, &member, true);
        loader.override_global(g::BATCH_ON_SYNC, &batch_on_sync, true);
        loader.override_global(g::ANATOMY, &anatomy, true);
        // The commit path: where the commit function is out of line (its
        // return is the span's end). Per commit: the exact tier attaches
        // its spans now, a light tier with each exact window.
        let commit_at = plan.commit.as_ref().filter(|_| target.commit_path);
        let commit_path = u32::from(commit_at.is_some());
        loader.override_global(g::COMMIT_PATH, &commit_path, true);
        // Each stage's split by the thread's scheduler accounting, where
        // the kernel's BTF says where that accounting is.
        let sched_split = sched_split::SplitState::for_run(commit_path != 0 && target.sched_split);
        let offsets = sched_split.offsets();
        let split_on = u32::from(offsets.is_some());
        let o = offsets.unwrap_or(sched_split::TaskOffsets {
            sum_exec_runtime: 0,
            exec_start: 0,
            run_delay: 0,
            cfs_rq: 0,
            cfs_rq_rq: 0,
            rq_clock: 0,
            rq_clock_task: 0,
        });
        loader
            .override_global(g::SCHED_SPLIT, &split_on, true)
            .override_global(g::TASK_SUM_EXEC_OFF, &o.sum_exec_runtime, true)
            .override_global(g::TASK_EXEC_START_OFF, &o.exec_start, true)
            .override_global(g::TASK_RUN_DELAY_OFF, &o.run_delay, true)
            .override_global(g::TASK_CFS_RQ_OFF, &o.cfs_rq, true)
            .override_global(g::CFS_RQ_RQ_OFF, &o.cfs_rq_rq, true)
            .override_global(g::RQ_CLOCK_OFF, &o.rq_clock, true)
            .override_global(g::RQ_CLOCK_TASK_OFF, &o.rq_clock_task, true);
        // The followers' wake-ups: the scheduler tracepoints' layout.
        let wake_layout = if target.wakeups && commit_path != 0 {
            kernel::ensure_tracefs()?;
            Some(
                wakeups::layout(Path::new(kernel::TRACEFS)).map_err(|detail| Error::Attach {
                    what: "--wakeups: the scheduler tracepoints".into(),
                    detail,
                })?,
            )
        } else {
            None
        };
        let wake_on = u32::from(wake_layout.is_some());
        loader.override_global(g::WAKEUPS, &wake_on, true);
        // What the family's group hook counts as a commit and how its
        // consensus step says a conflict and an abort.
        let (needs_step, codes) = readers::family::Family::of(plan.server)
            .group
            .as_ref()
            .map_or((0, [0; 3]), |r| {
                let c = &r.step_codes;
                (
                    u32::from(r.appliers_pass_hook),
                    [c.conflict, c.abort, c.unsent],
                )
            });
        loader
            .override_global(g::GROUP_NEEDS_STEP, &needs_step, true)
            .override_global(g::GROUP_CONFLICT_RET, &codes[0], true)
            .override_global(g::GROUP_ABORT_RET, &codes[1], true)
            .override_global(g::GROUP_UNSENT_RET, &codes[2], true);
        if let Some(l) = &wake_layout {
            loader
                .override_global(g::WAKEUP_PID_OFF, &l.wakeup_pid, true)
                .override_global(g::SWITCH_PREV_STATE_OFF, &l.switch_prev_state, true)
                .override_global(g::SWITCH_NEXT_PID_OFF, &l.switch_next_pid, true);
        }
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
        // The binlog set only where the server has its binlog open: with
        // it off the probes would never fire, and each costs its attach
        // and detach. Its per-commit probes go with the per-commit tier.
        let binlog_plan = plan
            .binlog
            .as_ref()
            .filter(|_| crate::fds::has_binlog_open(target.pid));
        let pred_g = binlog_plan
            .and_then(|b| b.group_close.as_ref())
            .map_or(Pred::OFF, |(_, p)| *p);
        let close_at_flush = u32::from(binlog_plan.is_some_and(|b| b.group_close.is_none()));
        let op_g = pred_g.op as u32;
        loader.override_global(g::BINLOG_CLOSE_AT_FLUSH, &close_at_flush, true);
        set_pred(
            &mut loader,
            [g::PRED_G_ARG, g::PRED_G_OP, g::PRED_G_MASK, g::PRED_G_VALUE],
            &pred_g,
            &op_g,
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
        let kernel = kernel::attach(
            &mut ebpf,
            target.fsync_probe,
            pid,
            target.tier,
            io_cfg.is_some(),
        )?;
        if io_cfg.is_some() {
            kernel::attach_block(&mut ebpf)?;
        }
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
            // Light counts the flush at its entry alone (the program of
            // the inlined copies): its return would be a second trap per
            // flush, and serves only the flush's time and which syncs
            // ran inside it, which light does not report.
            if f.out_of_line && !target.tier.per_commit() {
                attach_uprobe(&mut ebpf, prog::FLUSH_SITE, f.file_offset, f, exe, pid)?;
                note("flush", "uprobe", f, f.file_offset, None);
            } else if f.out_of_line {
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
        let binlog = binlog_plan.is_some();
        if let Some(b) = binlog_plan {
            binlog::attach(
                &mut ebpf,
                b,
                binlog::Per {
                    commit: target.tier.per_commit(),
                    commit_path: commit_path != 0,
                },
                exe,
                pid,
                |kind, at| note("binlog", kind, at, at.file_offset, None),
            )?;
        }
        // A semi-sync source's wait for its replica: free where the
        // server never waits (the hooks run only with semi-sync on), per
        // commit on MariaDB, so the exact tier's. MySQL's after-commit
        // hook runs for every commit: left out where the wait point is
        // known to be the other.
        // Light: the hooks its exact windows attach.
        // Where the hooks serve every observer, only with the semi-sync
        // plugin loaded: a group member's hooks are its group's.
        let semi_sync_loaded = readers::family::Family::of(plan.server)
            .ack
            .library
            .is_none_or(|l| crate::fds::mapped_library(target.pid, l).is_some());
        let ack = match plan
            .ack
            .as_ref()
            .filter(|_| binlog_plan.is_some() && semi_sync_loaded)
        {
            Some(a) => ack_hooks(a, target.semi_sync_wait),
            None => AckAt::default(),
        };
        if let Some(a) = plan.ack.as_ref().filter(|_| target.tier.per_commit()) {
            attach_acks(&mut ebpf, a, ack, exe, pid, &mut Vec::new(), |at| {
                note("replica ack", "uretprobe", at, at.file_offset, None);
                note("replica ack", "uprobe", at, at.file_offset, None);
            })?;
        }
        // A replication group's hook, in the plugin library the server
        // loaded (per commit: the exact tier's), before the spans.
        // Found whatever the tier: a light tier attaches them with each
        // exact window.
        let group_row = readers::family::Family::of(plan.server).group.as_ref();
        let group = match group_row {
            Some(row) => match group::find(target.pid, row, &target.debug_root) {
                Ok(g) => g,
                Err(line) => {
                    eprintln!("commitscope: {line}");
                    None
                }
            },
            None => None,
        };
        let mut group_probes = Vec::new();
        if let Some(g) = group.as_ref().filter(|_| target.tier.per_commit()) {
            group::attach(&mut ebpf, g, pid, &mut Vec::new(), |kind, at| {
                group_probes.push(AttachedProbe {
                    role: group_row.map_or("group", |r| r.word),
                    kind,
                    symbol: at.symbol.clone(),
                    file: g.library.clone(),
                    offset: at.file_offset,
                    found_in: format!("{} ({})", at.source_text(), at.found_in.display()),
                    inlined_into: None,
                })
            })?;
        }
        // The wake-ups' tracepoints before the spans: every wait opened
        // has them counting. In the light tier they go on with each exact
        // window (they fire machine-wide, at every context switch).
        if wake_on != 0 && target.tier.per_commit() {
            wakeups::attach(&mut ebpf)?;
        }
        let mut cp_generation = 0;
        if let Some(at) = commit_at.filter(|_| target.tier.per_commit()) {
            cp_generation = 1;
            attach_spans(&mut ebpf, at, cp_generation, exe, pid, &mut Vec::new())?;
            note("commit", "uretprobe", at, at.file_offset, None);
            note("commit", "uprobe", at, at.file_offset, None);
        }
        attached.extend(group_probes);
        let mut p = Probes {
            group,
            binlog,
            commit_path: commit_path != 0,
            sched_split,
            wakeups: wake_on != 0,
            cp_generation,
            ack,
            ebpf,
            logs,
            plan,
            kernel,
            attached,
            anatomy: anatomy != 0,
            tier: target.tier,
            write_timing: target.write_timing,
            window: None,
            window_sched: Vec::new(),
            pid: target.pid,
            redo_fds: Vec::new(),
            redo_checked: None,
            attached_at_ns: clock::monotonic_ns(),
            io: io_place,
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
        let mut rest = |window: &mut Vec<_>| -> Result<()> {
            // The binlog's groups get their sizes in the window too (and,
            // with the commit path, each commit's wait in the group).
            if let Some(b) = self.plan.binlog.as_ref().filter(|_| self.binlog) {
                binlog::attach_window(&mut self.ebpf, b, self.commit_path, &exe, pid, window)?;
            }
            // A semi-sync source's waits for its replica.
            if let Some(a) = self.plan.ack.as_ref() {
                attach_acks(&mut self.ebpf, a, self.ack, &exe, pid, window, |_| {})?;
            }
            // A replication group's part of each commit.
            if let Some(g) = self.group.as_ref() {
                group::attach(&mut self.ebpf, g, pid, window, |_, _| {})?;
            }
            // The wake-ups' tracepoints before the spans, as at attach.
            if self.wakeups {
                self.window_sched = wakeups::attach(&mut self.ebpf)?;
            }
            // The commit path's spans last, as at attach: every span
            // opened has its stages' probes in place.
            if let Some(at) = self.plan.commit.as_ref().filter(|_| self.commit_path) {
                self.cp_generation += 1;
                attach_spans(&mut self.ebpf, at, self.cp_generation, &exe, pid, window)?;
            }
            Ok(())
        };
        let done = links.and_then(|mut l| {
            let r = rest(&mut l);
            self.window = Some(l);
            r
        });
        if done.is_err() {
            // A partly attached window: the links made so far go in the
            // next close (here, at once).
            drop(self.close_window());
        }
        done
    }

    /// Whether the light tier times the syncs on this kernel, with this
    /// run's `--io` (for the cost said under `-v`, whichever tier runs).
    pub fn light_syncs_timed(&self) -> bool {
        kernel::light_syncs_timed(self.kernel.used, self.io_counted())
    }

    /// The binlog group commit's probes are attached (its figures exist).
    pub fn binlog_counted(&self) -> bool {
        self.binlog
    }

    /// `--io` on a block device: its requests are counted (the `--io`
    /// figures and columns exist).
    pub fn io_counted(&self) -> bool {
        matches!(self.io, Some(io::Place::Device(_)))
    }

    /// Whether an exact window is open.
    pub fn window_open(&self) -> bool {
        self.window.is_some()
    }

    /// Takes the window's write probes off the programs. Dropping what it
    /// returns detaches them: the kernel takes a while for that, so a
    /// caller holding a lock drops it after letting go.
    pub fn close_window(&mut self) -> WindowLinks {
        // The spans first: from here the commits in flight add nothing,
        // and a span whose return is detached below is stale for the next
        // window (see tracer-ebpf's `CP_GEN`).
        if self.commit_path && !self.tier.per_commit() {
            let _ = set_cp_generation(&mut self.ebpf, 0);
        }
        let mut uprobes = Vec::new();
        for (name, id) in self.window.take().unwrap_or_default() {
            if let Ok(p) = loaded_uprobe(&mut self.ebpf, name) {
                if let Ok(l) = p.take_link(id) {
                    uprobes.push(l);
                }
            }
        }
        let sched = std::mem::take(&mut self.window_sched);
        WindowLinks {
            uprobes,
            tracepoints: wakeups::take_links(&mut self.ebpf, sched),
        }
    }

    /// Without a flush function a batch begins at each fsync of a redo
    /// fd: tells the kernel which fds those are now (the redo files are
    /// opened at start, MySQL 8.0.30+ rotates them). At most once a
    /// second: a server may hold thousands of fds.
    pub fn refresh_redo_fds(&mut self) {
        let pid = self.pid;
        // With `--io` the kernel asks at every sync whether it is a redo
        // sync, flush function or not.
        if (self.plan.flush.is_some() && self.io.is_none())
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
}
