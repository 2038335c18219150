//! Attaching the binlog group commit's probes: each boundary of the
//! plan's [`BinlogPlan`] gets its program (tracer-ebpf's `binlog_*`).
//! Per group but one: the member probe fires once per commit, so the set
//! goes with the per-commit (exact) tier.
use std::{num::NonZeroU32, path::Path};

use aya::Ebpf;
use tracer_ebpf::programs as prog;

use super::{plan::BinlogPlan, symbols::Resolved, uprobe::attach_uprobe};
use crate::error::Result;

/// Attaches every boundary; `note(kind, at)` hears of each probe.
pub fn attach(
    ebpf: &mut Ebpf,
    plan: &BinlogPlan,
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
    if let Some((at, _)) = &plan.group_close {
        put(prog::BINLOG_GROUP_CLOSE, at, "uprobe")?;
    }
    put(prog::BINLOG_MEMBER, &plan.member, "uprobe")?;
    put(prog::BINLOG_WRITE_ENTRY, &plan.write, "uprobe")?;
    if let Some(at) = &plan.sync {
        put(prog::BINLOG_SYNC_ENTRY, at, "uprobe")?;
    }
    if let Some(at) = &plan.commit {
        put(prog::BINLOG_COMMIT_ENTRY, at, "uprobe")?;
    }
    put(prog::BINLOG_FLUSH_OPEN, &plan.flush_open, "uprobe")
}
