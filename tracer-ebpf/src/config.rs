//! The configuration user space writes into `.rodata` before the load
//! (so the verifier prunes what is off), and how programs read it:
//! `read_volatile` keeps the compiler from folding the zero initialisers.
#[no_mangle]
pub(crate) static TARGET_TGID: u32 = 0;

/// Non-zero when the write return probe is attached: only then is the
/// entry timestamp worth a hash-map insert (else entries would pile up).
#[no_mangle]
pub(crate) static WRITE_TIMING: u32 = 0;

/// Predicates A and B: which write calls are requests, which are
/// durable ([`crate::redo`]); F: which flush calls are redo flushes; G:
/// which queue fetch is the binlog sync stage's. Each an argument
/// register, an operation ([`tracer_ebpf::PredOp`]), a mask and a value.
#[no_mangle]
pub(crate) static PRED_A_ARG: u32 = 0;
#[no_mangle]
pub(crate) static PRED_A_OP: u32 = 0;
#[no_mangle]
pub(crate) static PRED_A_MASK: u64 = 0;
#[no_mangle]
pub(crate) static PRED_A_VALUE: u64 = 0;
#[no_mangle]
pub(crate) static PRED_B_ARG: u32 = 0;
#[no_mangle]
pub(crate) static PRED_B_OP: u32 = 0;
#[no_mangle]
pub(crate) static PRED_B_MASK: u64 = 0;
#[no_mangle]
pub(crate) static PRED_B_VALUE: u64 = 0;
#[no_mangle]
pub(crate) static PRED_F_ARG: u32 = 0;
#[no_mangle]
pub(crate) static PRED_F_OP: u32 = 0;
#[no_mangle]
pub(crate) static PRED_F_MASK: u64 = 0;
#[no_mangle]
pub(crate) static PRED_F_VALUE: u64 = 0;

/// Which write-probe hits are batch members ([`tracer_ebpf::BatchMember`]).
#[no_mangle]
pub(crate) static DURABLE_PRED: u32 = 0;

/// Non-zero without a flush function: a batch then begins at each fsync
/// of a redo fd (`REDO_FDS`, kept by user space).
#[no_mangle]
pub(crate) static BATCH_ON_SYNC: u32 = 0;

/// Non-zero for leaders/followers (needs the write return probe).
#[no_mangle]
pub(crate) static ANATOMY: u32 = 0;

/// Non-zero with `--commit-path`: stage probes add to the committing
/// thread's open commit (`CP_SPANS`).
#[no_mangle]
pub(crate) static COMMIT_PATH: u32 = 0;

/// `--io`: the block device under the redo log, as the block tracepoints
/// spell it (`major << 20 | minor`, the whole disk); 0 leaves I/O alone.
#[no_mangle]
pub(crate) static IO_DEV: u32 = 0;

/// Which threads write the journal for a redo sync ([`tracer_ebpf::JournalThreads`]).
#[no_mangle]
pub(crate) static IO_JOURNAL_THREADS: u32 = 0;

/// Offsets in the block tracepoints' records, from their `format` files
/// (`dev` at 8 and `sector` at 16 are checked there too).
#[no_mangle]
pub(crate) static ISSUE_BYTES_OFF: u32 = 28;
#[no_mangle]
pub(crate) static ISSUE_RWBS_OFF: u32 = 34;
#[no_mangle]
pub(crate) static COMPLETE_RWBS_OFF: u32 = 34;
#[no_mangle]
pub(crate) static BIO_RWBS_OFF: u32 = 28;

/// Non-zero: a binlog group closes when its flush leader's function
/// returns (MariaDB's `trx_group_commit_leader`); zero: at the sync
/// stage's queue fetch, which predicate G selects (MySQL).
#[no_mangle]
pub(crate) static BINLOG_CLOSE_AT_FLUSH: u32 = 0;
#[no_mangle]
pub(crate) static PRED_G_ARG: u32 = 0;
#[no_mangle]
pub(crate) static PRED_G_OP: u32 = 0;
#[no_mangle]
pub(crate) static PRED_G_MASK: u64 = 0;
#[no_mangle]
pub(crate) static PRED_G_VALUE: u64 = 0;

/// Non-zero: `--commit-path` splits each stage by the thread's own
/// scheduler accounting ([`crate::sched`]), read in `task_struct` at these
/// byte offsets, which user space finds in the kernel's BTF.
#[no_mangle]
pub(crate) static SCHED_SPLIT: u32 = 0;
#[no_mangle]
pub(crate) static TASK_SUM_EXEC_OFF: u32 = 0;
#[no_mangle]
pub(crate) static TASK_EXEC_START_OFF: u32 = 0;
#[no_mangle]
pub(crate) static TASK_RUN_DELAY_OFF: u32 = 0;
/// The way to the CPU's run queue clocks: `task_struct.se.cfs_rq`,
/// `cfs_rq.rq`, `rq.clock` and `rq.clock_task` (see [`crate::sched`]).
#[no_mangle]
pub(crate) static TASK_CFS_RQ_OFF: u32 = 0;
#[no_mangle]
pub(crate) static CFS_RQ_RQ_OFF: u32 = 0;
#[no_mangle]
pub(crate) static RQ_CLOCK_OFF: u32 = 0;
#[no_mangle]
pub(crate) static RQ_CLOCK_TASK_OFF: u32 = 0;

/// Non-zero with `--wakeups` ([`crate::wakeups`]), and where the
/// scheduler tracepoints' records hold what they read (their `format`
/// files).
#[no_mangle]
pub(crate) static WAKEUPS: u32 = 0;
#[no_mangle]
pub(crate) static SWITCH_PREV_STATE_OFF: u32 = 32;
#[no_mangle]
pub(crate) static SWITCH_NEXT_PID_OFF: u32 = 56;
#[no_mangle]
pub(crate) static WAKEUP_PID_OFF: u32 = 24;

/// Non-zero where the group's hook also runs on its appliers (Galera): a
/// hook counts as a commit only once its consensus step ran. The
/// consensus step's return codes for a conflict, an abort and a commit
/// never sent (0: none).
#[no_mangle]
pub(crate) static GROUP_NEEDS_STEP: u32 = 0;
#[no_mangle]
pub(crate) static GROUP_CONFLICT_RET: u32 = 0;
#[no_mangle]
pub(crate) static GROUP_ABORT_RET: u32 = 0;
#[no_mangle]
pub(crate) static GROUP_UNSENT_RET: u32 = 0;

#[inline(always)]
pub(crate) fn cfg_u32(v: &u32) -> u32 {
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub(crate) fn cfg_u64(v: &u64) -> u64 {
    unsafe { core::ptr::read_volatile(v) }
}
