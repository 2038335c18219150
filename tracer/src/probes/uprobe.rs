//! Attaching one uprobe: the program by name, loaded on first use, and the
//! offset past a prologue the kernel would single-step. Shared by the
//! server's probes and the C library's.
use std::{num::NonZeroU32, path::Path};

use aya::{
    programs::{
        uprobe::{UProbeAttachLocation, UProbeLinkId, UProbeScope},
        UProbe,
    },
    Ebpf,
};
use readers::probes::symbols::Resolved;

use super::prologue;
use crate::error::{Error, Result};

/// The uprobe program `name`, loaded on first use: one program may attach
/// at several points.
pub fn loaded_uprobe<'a>(
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
pub fn attach_uprobe(
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
pub fn probe_offset(exe: &Path, offset: u64) -> u64 {
    offset + prologue::entry_skip(&prologue::code_at(exe, offset))
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
