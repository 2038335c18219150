//! A replication group's hook, in the plugin library the server has
//! loaded (or, where the family calls its library through an interface
//! of its own, in the server binary once the library is loaded): found in the process's memory map, so that any member is
//! traced the same way, started by commitscope or not; and its probes
//! (the hook's return before its entry, each step's return before the
//! shared step entry: every hook opened has its steps in place).
use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
};

use aya::{programs::uprobe::UProbeLinkId, Ebpf};
use readers::{
    family::group::{GroupRow, ProbesIn},
    probes::{
        profiles,
        symbols::{Resolved, Resolver},
    },
};
use tracer_ebpf::{programs as prog, CommitStage};

use super::uprobe::attach_uprobe;
use crate::error::Result;

/// Where the group's probes go.
#[derive(Clone, Debug)]
pub struct GroupPlan {
    /// The library as the server mapped it.
    pub library: PathBuf,
    pub hook: Resolved,
    /// The hook's earlier segment, where the family has one and the
    /// binary has it out of line.
    pub first: Option<Resolved>,
    /// The steps found out of line; a missing one's time stays in the
    /// hook's rest.
    pub steps: Vec<(CommitStage, Resolved)>,
    /// The steps not found, by short name (said under `-v`).
    pub missing: Vec<String>,
}

/// The group's plan for `pid`: None where its plugin is not loaded; an
/// error line where it is but its hook cannot be probed.
pub fn find(
    pid: u32,
    row: &GroupRow,
    debug_root: &Path,
) -> std::result::Result<Option<GroupPlan>, String> {
    let Some(loaded) = crate::fds::mapped_library(pid, row.library) else {
        return Ok(None);
    };
    let library = match row.probes_in {
        ProbesIn::Library => loaded,
        ProbesIn::Server => std::fs::read_link(format!("/proc/{pid}/exe"))
            .map_err(|e| format!("cannot read the server's binary of pid {pid}: {e}"))?,
    };
    let r = Resolver::open(&library, debug_root).map_err(|e| e.to_string())?;
    let at = |names: &[&str]| r.resolve(names).filter(|x| x.out_of_line);
    let hook = at(row.hook).ok_or_else(|| {
        format!(
            "{} has no {} out of line: the group's part of each commit is not timed",
            library.display(),
            profiles::short_name(row.hook[0])
        )
    })?;
    let first = (!row.hook_first.is_empty())
        .then(|| at(row.hook_first))
        .flatten();
    let mut steps = Vec::new();
    let mut missing = Vec::new();
    if first.is_none() && !row.hook_first.is_empty() {
        missing.push(profiles::short_name(row.hook_first[0]));
    }
    for (stage, names) in row.steps {
        match at(names) {
            Some(x) => steps.push((*stage, x)),
            None => missing.push(profiles::short_name(names[0])),
        }
    }
    Ok(Some(GroupPlan {
        library,
        hook,
        first,
        steps,
        missing,
    }))
}

/// The return program of a step's stage.
fn step_return(stage: CommitStage) -> Option<&'static str> {
    match stage {
        CommitStage::GroupFlowControl => Some(prog::GROUP_FLOW_RETURN),
        CommitStage::GroupSend => Some(prog::GROUP_SEND_RETURN),
        CommitStage::GroupConsensus => Some(prog::GROUP_CONSENSUS_RETURN),
        _ => None,
    }
}

/// Attaches the plan's probes; each link goes into `links` as it is
/// made (a light tier's window takes them off again), `note` hears of
/// each (kind, place).
pub fn attach(
    ebpf: &mut Ebpf,
    plan: &GroupPlan,
    pid: NonZeroU32,
    links: &mut Vec<(&'static str, UProbeLinkId)>,
    mut note: impl FnMut(&'static str, &Resolved),
) -> Result<()> {
    let lib = plan.library.as_path();
    let h = &plan.hook;
    let mut one = |ebpf: &mut Ebpf, name: &'static str, at: &Resolved| -> Result<()> {
        links.push((
            name,
            attach_uprobe(ebpf, name, at.file_offset, at, lib, pid)?,
        ));
        Ok(())
    };
    one(ebpf, prog::GROUP_RETURN, h)?;
    note("uretprobe", h);
    if let Some(f) = &plan.first {
        one(ebpf, prog::GROUP_SEGMENT_RETURN, f)?;
        note("uretprobe", f);
    }
    for (stage, at) in &plan.steps {
        let Some(ret) = step_return(*stage) else {
            continue;
        };
        one(ebpf, ret, at)?;
        one(ebpf, prog::GROUP_PART_ENTRY, at)?;
        note("uretprobe", at);
        note("uprobe", at);
    }
    if let Some(f) = &plan.first {
        one(ebpf, prog::GROUP_FIRST_ENTRY, f)?;
        note("uprobe", f);
    }
    one(ebpf, prog::GROUP_ENTRY, h)?;
    note("uprobe", h);
    Ok(())
}
