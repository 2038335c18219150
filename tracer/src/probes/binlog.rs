//! Attaching the binlog group commit's probes: each boundary of the
//! plan's [`BinlogPlan`] gets its program (tracer-ebpf's `binlog_*`).
//! Every boundary but two fires once per group, cheap enough for the
//! light tier: groups and their stages. The member probe (a group's
//! size) and the commit's entry (the leader's queue wait) fire once per
//! commit: exact tier, or an exact window for the sizes.
use std::{num::NonZeroU32, path::Path};

use aya::{programs::uprobe::UProbeLinkId, Ebpf};
use readers::probes::symbols::Resolved;
use tracer_ebpf::programs as prog;

use super::{
    plan::{BinlogPlan, ClosePlan},
    uprobe::attach_uprobe,
};
use crate::error::Result;

/// Which of the per-commit probes go on.
pub struct Per {
    /// The exact tier: the member (sizes) and the commit's entry (the
    /// leader's queue wait).
    pub commit: bool,
    /// `--commit-path`: the entry's return too (a follower's wait), where
    /// the family's row needs it.
    pub commit_path: bool,
}

/// Attaches every boundary (and the per-commit ones `per` asks for);
/// `note(kind, at)` hears of each probe.
pub fn attach(
    ebpf: &mut Ebpf,
    plan: &BinlogPlan,
    per: Per,
    exe: &Path,
    pid: NonZeroU32,
    mut note: impl FnMut(&'static str, &Resolved),
) -> Result<()> {
    let mut put = |name: &'static str, at: &Resolved, kind: &'static str| -> Result<()> {
        attach_uprobe(ebpf, name, at.file_offset, at, exe, pid)?;
        note(kind, at);
        Ok(())
    };
    // Closers before openers: a stage opened before its closer is in
    // place would stay open.
    put(prog::BINLOG_FLUSH_CLOSE, &plan.write, "uretprobe")?;
    if let Some(at) = &plan.sync {
        put(prog::BINLOG_SYNC_RETURN, at, "uretprobe")?;
    }
    if let Some(at) = &plan.commit {
        put(prog::BINLOG_COMMIT_RETURN, at, "uretprobe")?;
    }
    if let Some(at) = &plan.redo {
        put(prog::BINLOG_REDO_RETURN, at, "uretprobe")?;
    }
    if let Some((at, _)) = &plan.group_close {
        put(prog::BINLOG_GROUP_CLOSE, at, "uprobe")?;
    }
    attach_close_exits(plan, &mut put)?;
    if per.commit {
        put(prog::BINLOG_MEMBER, &plan.member, "uprobe")?;
    }
    if let Some(at) = plan
        .enter
        .as_ref()
        .filter(|_| per.commit_path && plan.profile.enter_return)
    {
        put(prog::BINLOG_ENTER_RETURN, at, "uretprobe")?;
    }
    put(prog::BINLOG_WRITE_ENTRY, &plan.write, "uprobe")?;
    if let Some(at) = &plan.sync {
        put(prog::BINLOG_SYNC_ENTRY, at, "uprobe")?;
    }
    if let Some(at) = &plan.commit {
        put(prog::BINLOG_COMMIT_ENTRY, at, "uprobe")?;
    }
    if let Some(at) = &plan.redo {
        put(prog::BINLOG_REDO_ENTRY, at, "uprobe")?;
    }
    if let Ok(ClosePlan::Polled { wait: at, .. } | ClosePlan::Triggers { wait: at, .. }) =
        &plan.close
    {
        put(prog::BINLOG_FILL_ENTRY, at, "uprobe")?;
    }
    put(prog::BINLOG_FLUSH_OPEN, &plan.flush_open, "uprobe")?;
    if per.commit {
        if let Some(at) = &plan.enter {
            put(prog::BINLOG_ENTER, at, "uprobe")?;
        }
    }
    Ok(())
}

/// Where a leader's wait for a fuller group ends (once per group, light
/// tier too): MySQL's return and its steps, MariaDB's exits' adds (each
/// an instruction inside the wait: its site is probed, not its entry).
fn attach_close_exits(
    plan: &BinlogPlan,
    put: &mut impl FnMut(&'static str, &Resolved, &'static str) -> Result<()>,
) -> Result<()> {
    match &plan.close {
        Ok(ClosePlan::Polled { wait, step }) => {
            put(prog::BINLOG_FILL_RETURN, wait, "uretprobe")?;
            put(prog::BINLOG_FILL_STEP, step, "uprobe")?;
        }
        Ok(ClosePlan::Triggers { wait, exits }) => {
            for (name, offsets) in [
                (prog::BINLOG_FILLED_COUNT, &exits.count),
                (prog::BINLOG_FILLED_TIMEOUT, &exits.timeout),
                (prog::BINLOG_FILLED_LOCK_WAIT, &exits.lock_wait),
            ] {
                for off in offsets {
                    let site = Resolved {
                        file_offset: *off,
                        ..wait.clone()
                    };
                    put(name, &site, "uprobe (inside)")?;
                }
            }
        }
        Err(_) => {}
    }
    Ok(())
}

/// An exact window's part on light probes: the member probe, so the
/// window's groups have sizes (the binlog's queue wait stays out: a
/// commit's entry seen in a window and its flush after it would be a wait
/// that never was). With the commit path, the commit's entry and return
/// for its span alone (`binlog_enter_span`, return first). Each link goes
/// into `links` as it is made, so a failure part way leaves none behind.
pub fn attach_window(
    ebpf: &mut Ebpf,
    plan: &BinlogPlan,
    commit_path: bool,
    exe: &Path,
    pid: NonZeroU32,
    links: &mut Vec<(&'static str, UProbeLinkId)>,
) -> Result<()> {
    let mut put = |name: &'static str, at: &Resolved| -> Result<()> {
        links.push((
            name,
            attach_uprobe(ebpf, name, at.file_offset, at, exe, pid)?,
        ));
        Ok(())
    };
    put(prog::BINLOG_MEMBER, &plan.member)?;
    if let Some(at) = plan.enter.as_ref().filter(|_| commit_path) {
        if plan.profile.enter_return {
            put(prog::BINLOG_ENTER_RETURN, at)?;
        }
        put(prog::BINLOG_ENTER_SPAN, at)?;
    }
    Ok(())
}
