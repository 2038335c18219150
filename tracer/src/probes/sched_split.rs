//! Where the kernel keeps a thread's scheduler accounting, for
//! `--commit-path`'s split of each stage into on-CPU, run-queue and
//! blocked time: the byte offsets in `task_struct` of
//! `se.sum_exec_runtime`, `se.exec_start` and `sched_info.run_delay`,
//! read from the kernel's own BTF (they move with every build and
//! config). The eBPF side reads those three at the stage boundaries it
//! already probes, so the split costs no event of its own.
use std::path::Path;

use btfparse::{Error as BtfError, ErrorKind, Offset, Readable, TypeInformation};

/// The kernel's BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Byte offsets in `struct task_struct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskOffsets {
    pub sum_exec_runtime: u32,
    pub exec_start: u32,
    pub run_delay: u32,
    /// The way to the CPU's run queue: `task_struct.se.cfs_rq`,
    /// `cfs_rq.rq` (CONFIG_FAIR_GROUP_SCHED), and that queue's `clock`
    /// and `clock_task`, whose difference is the time the task clock
    /// leaves out (stolen by the hypervisor, spent in interrupts).
    pub cfs_rq: u32,
    pub cfs_rq_rq: u32,
    pub rq_clock: u32,
    pub rq_clock_task: u32,
}

/// Whether the commit path's stages are split, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitState {
    /// No commit path in this run: nothing to split.
    Off,
    On(TaskOffsets),
    /// Asked for, but this kernel cannot give it (said in one line).
    Unavailable(String),
}

impl SplitState {
    /// The split for a run with the commit path on (`commit_path`): the
    /// offsets of this kernel, or why there are none.
    pub fn for_run(commit_path: bool) -> SplitState {
        if !commit_path {
            return SplitState::Off;
        }
        match task_offsets(Path::new(VMLINUX_BTF)) {
            Ok(o) => SplitState::On(o),
            Err(why) => SplitState::Unavailable(why),
        }
    }

    pub fn offsets(&self) -> Option<TaskOffsets> {
        match self {
            SplitState::On(o) => Some(*o),
            _ => None,
        }
    }

    /// The words appended to the commit path's start line.
    pub fn describe(&self) -> Option<String> {
        match self {
            SplitState::Off => None,
            SplitState::On(_) => Some(
                "each stage split into on-CPU, run-queue and blocked time by the thread's own scheduler accounting"
                    .into(),
            ),
            SplitState::Unavailable(why) => {
                Some(format!("no on-CPU/run-queue split of the stages: {why}"))
            }
        }
    }
}

/// The offsets in the BTF file at `path`.
pub fn task_offsets(path: &Path) -> Result<TaskOffsets, String> {
    let data = std::fs::read(path).map_err(|e| {
        format!(
            "{}: {e} (a kernel built without CONFIG_DEBUG_INFO_BTF)",
            path.display()
        )
    })?;
    task_offsets_in(&data)
}

/// BTF data in memory, as the parser reads it.
struct Bytes<'a>(&'a [u8]);

impl Readable for Bytes<'_> {
    fn read(&self, offset: u64, buffer: &mut [u8]) -> btfparse::Result<()> {
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        let src = at
            .checked_add(buffer.len())
            .and_then(|end| self.0.get(at..end))
            .ok_or_else(|| {
                BtfError::new(ErrorKind::InvalidOffset, "past the end of the BTF data")
            })?;
        buffer.copy_from_slice(src);
        Ok(())
    }
}

/// The offsets in BTF data `btf`.
pub fn task_offsets_in(btf: &[u8]) -> Result<TaskOffsets, String> {
    let types = TypeInformation::new(&Bytes(btf))
        .map_err(|e| format!("the kernel's BTF cannot be read: {e:?}"))?;
    let id = |name: &str| {
        types
            .id_of(name)
            .ok_or_else(|| format!("the kernel's BTF has no struct {name}"))
    };
    let (task, cfs_rq, rq) = (id("task_struct")?, id("cfs_rq")?, id("rq")?);
    let at = |tid: u32, ty: &str, path: &str, missing: &str| -> Result<u32, String> {
        match types.offset_of(tid, path) {
            Ok((_, Offset::ByteOffset(b))) => Ok(b),
            Ok((_, Offset::BitOffsetAndSize(..))) => Err(format!("{ty}.{path} is a bit field")),
            Err(_) => Err(format!("{ty} has no {path} ({missing})")),
        }
    };
    let sched = "an unknown scheduler";
    Ok(TaskOffsets {
        sum_exec_runtime: at(task, "task_struct", "se.sum_exec_runtime", sched)?,
        exec_start: at(task, "task_struct", "se.exec_start", sched)?,
        run_delay: at(
            task,
            "task_struct",
            "sched_info.run_delay",
            "a kernel built without CONFIG_SCHED_INFO",
        )?,
        cfs_rq: at(
            task,
            "task_struct",
            "se.cfs_rq",
            "a kernel built without CONFIG_FAIR_GROUP_SCHED",
        )?,
        cfs_rq_rq: at(
            cfs_rq,
            "cfs_rq",
            "rq",
            "a kernel built without CONFIG_FAIR_GROUP_SCHED",
        )?,
        rq_clock: at(rq, "rq", "clock", sched)?,
        rq_clock_task: at(rq, "rq", "clock_task", sched)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kernel has BTF and the accounting (the eBPF tests
    /// need both); its offsets are inside a task_struct and distinct.
    #[test]
    fn this_kernels_offsets_are_found_in_its_btf() {
        let p = Path::new(VMLINUX_BTF);
        if !p.exists() {
            eprintln!("SKIP: {VMLINUX_BTF} missing: a kernel without BTF");
            return;
        }
        let o = task_offsets(p).expect("offsets");
        assert!(
            o.sum_exec_runtime > 0 && o.sum_exec_runtime < 16384,
            "{o:?}"
        );
        assert_ne!(o.sum_exec_runtime, o.exec_start);
        assert_ne!(o.run_delay, o.exec_start);
        assert_eq!(o.sum_exec_runtime % 8, 0, "{o:?}");
    }

    #[test]
    fn data_that_is_not_btf_is_said_to_be_unreadable() {
        let e = task_offsets_in(b"not btf at all").unwrap_err();
        assert!(e.contains("cannot be read"), "{e}");
    }

    #[test]
    fn a_missing_file_names_the_kernel_option() {
        let e = task_offsets(Path::new("/nonexistent/vmlinux")).unwrap_err();
        assert!(e.contains("CONFIG_DEBUG_INFO_BTF"), "{e}");
        assert_eq!(SplitState::for_run(false), SplitState::Off);
    }
}
