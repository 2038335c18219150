//! Types shared by commitscope's eBPF programs and its user space.
//!
//! The kernel side only counts and timestamps; everything here is a plain
//! `#[repr(C)]` layout so both sides agree on map contents byte for byte.
#![no_std]

/// Buckets of every latency histogram: bucket `i` holds durations `d` (ns)
/// with `floor(log2(d)) == i` (bucket 0 also holds 0 ns). 2^31 ns is about
/// 2.1 s; longer waits land in the last bucket.
pub const HIST_BUCKETS: usize = 32;

/// Maximum number of distinct file descriptors tracked per run. mysqld keeps
/// its redo and binlog descriptors open for its lifetime, so this only
/// limits how many data files can be attributed individually.
pub const MAX_FDS: u32 = 8192;

/// Maximum number of threads inside a timed function at once.
pub const MAX_THREADS: u32 = 16384;

/// Index into the `COUNTERS` per-CPU array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Every hit of the write probe (`log_write_up_to`, or the server-layer
    /// fallback function).
    WriteCalls = 0,
    /// Write-probe hits where predicate A held (the "durable" request).
    WritePredA = 1,
    /// Write-probe hits where predicate B held (MySQL 5.6's `flush_to_disk`).
    WritePredB = 2,
    /// Hits of the redo flush function (`log_t::flush`, `fil_flush`, ...).
    FlushCalls = 3,
    /// fsync/fdatasync calls by the target whose per-fd slot could not be
    /// created (fd map full): counted so a loss is visible, never silent.
    SyncLost = 4,
    /// Entries/returns whose start timestamp could not be stored or found.
    TimingLost = 5,
    /// write syscalls whose per-fd slot could not be created.
    WriteLost = 6,
    /// Hits of an inlined copy of the write function where DWARF does not
    /// put the predicate's argument in its register: counted in
    /// `WriteCalls`, their durability unknown (never guessed).
    WriteUnknown = 7,
    /// Durable write calls that ran the redo flush themselves before
    /// returning (`ANATOMY` only): group-commit leaders.
    Leaders = 8,
    /// Durable write calls that returned without running it: followers.
    Followers = 9,
    /// Sum of the leaders' waits (entry to return), ns.
    LeaderWaitNs = 10,
    /// The part of it spent inside fsync/fdatasync called from the flush.
    LeaderSyncNs = 11,
    /// Sum of the batch sizes recorded in `BATCH`: their exact mean.
    BatchSum = 12,
    /// Sum of the followers' waits (entry to return), ns: with
    /// `LeaderWaitNs`, the exact sums of the exporter's wait histograms.
    FollowerWaitNs = 13,
    /// `--io`: block requests with data attributed to a redo sync (issued
    /// by the syncing thread during it, or by the journal on its behalf).
    IoReqs = 14,
    /// Their bytes.
    IoBytes = 15,
    /// Cache flush requests issued on the device while a redo sync ran.
    IoFlushes = 16,
    /// Attributed writes with FUA (forced unit access).
    IoFua = 17,
    /// Device time (issue to complete) of every attributed request, ns.
    IoDeviceNs = 18,
    /// Attributed requests the journal thread issued.
    IoJournalReqs = 19,
    /// Their device time, ns (part of `IoDeviceNs`).
    IoJournalDeviceNs = 20,
    /// Time attributed requests spent between submission and issue
    /// (plugged, in the scheduler), ns.
    IoQueueNs = 21,
    /// Every request completed on the device (anyone's): biolatency's view.
    DevReqs = 22,
    DevBytes = 23,
    DevDeviceNs = 24,
    /// Requests whose issue could not be remembered (map full).
    IoLost = 25,
    /// Bytes of the attributed requests the journal thread sent.
    IoJournalBytes = 26,
    /// Redo syncs during which no attributed request with data was
    /// issued (a sync with nothing to write, or writes that went to the
    /// device before it, as with O_DIRECT).
    IoSyncsWithoutWrite = 27,
    /// Binlog groups closed: MySQL's sync-stage groups (one binlog fsync
    /// each with `sync_binlog=1`), each closed when the next one's leader
    /// fetches its queue; MariaDB's group-commit leader done.
    BinlogGroups = 28,
    /// Commits those groups carried (their sizes summed).
    BinlogCommits = 29,
    /// Flush-stage groups: a leader wrote its queue's caches to the
    /// binlog (MySQL merges several into one sync group).
    BinlogFlushGroups = 30,
    /// Sum of the flush stages, leader's entry to the binlog write's
    /// return, ns.
    BinlogFlushNs = 31,
    /// Of it, the binlog write (`flush_cache_to_file`), ns.
    BinlogWriteNs = 32,
    /// Sum of the sync leaders' waits from the end of their flush stage to
    /// the binlog sync (the sync lock, `binlog_group_commit_sync_delay`), ns.
    BinlogSyncWaitNs = 33,
    /// Binlog syncs (`sync_binlog_file` calls) and their time, ns.
    BinlogSyncs = 34,
    BinlogSyncNs = 35,
    /// Commit-stage groups and the time their leaders spent committing them.
    BinlogCommitGroups = 36,
    BinlogCommitNs = 37,
    /// Binlog stage boundaries whose thread state could not be stored.
    BinlogLost = 38,
    /// Flush leaders whose commit's entry into the binlog's group commit
    /// was seen (exact tier), and the sum of their waits from there to the
    /// start of their flush stage (the queue and LOCK_log), ns.
    BinlogQueueWaits = 39,
    BinlogQueueWaitNs = 40,
    /// The redo flush a flush-stage leader runs for its whole queue
    /// (MySQL's `ha_flush_logs`), and its time, ns.
    BinlogRedoFlushes = 41,
    BinlogRedoNs = 42,
    /// A semi-sync source's waits for its replica's acknowledgement at
    /// the binlog's sync (MySQL's `Binlog_storage_delegate::after_sync`,
    /// one per group; MariaDB's `Repl_semi_sync_master::commit_trx`, one
    /// per transaction, whichever its wait point), and their time, ns.
    AckSyncCalls = 43,
    AckSyncNs = 44,
    /// MySQL's after-commit hook (`Trans_delegate::after_commit`): the
    /// waits with `rpl_semi_sync_source_wait_point=AFTER_COMMIT`.
    AckCommitCalls = 45,
    AckCommitNs = 46,
    /// Binlog groups closed per [`CloseReason`] (in its order), where the
    /// family's wait for a fuller group is probed.
    BinlogClosedNoWait = 47,
    BinlogClosedCount = 48,
    BinlogClosedTimeout = 49,
    BinlogClosedLockWait = 50,
    /// The time their leaders spent in that wait, ns, per reason.
    BinlogClosedNoWaitNs = 51,
    BinlogClosedCountNs = 52,
    BinlogClosedTimeoutNs = 53,
    BinlogClosedLockWaitNs = 54,
    /// Leaders' waits for a fuller group that ended (probed), whatever
    /// their reason: one per group that waits, counted where the wait
    /// ends, apart from the groups' count where the group closes.
    BinlogFills = 55,
    /// A replication group's before-commit hook (Group Replication's
    /// `group_replication_trans_before_commit`): the commits that went
    /// through the group, and their time in it, ns.
    GroupCommits = 56,
    GroupNs = 57,
    /// Inside it: flow control's wait, the send to the group, and the
    /// wait for consensus and certification, ns.
    GroupFlowNs = 58,
    GroupSendNs = 59,
    GroupConsensusNs = 60,
    /// Calls of the consensus step inside the hook (Galera's `certify`),
    /// and of those: the ones that returned the family's conflict code
    /// (certification failed), its abort code (brute-force aborted once
    /// sent), its unsent code (interrupted before it was sent), or any
    /// other non-zero code.
    GroupConsensusCalls = 61,
    GroupConsensusFailed = 62,
    GroupConsensusConflicts = 63,
    GroupConsensusAborts = 64,
    GroupConsensusUnsent = 65,
}

/// Number of `Counter` slots.
pub const COUNTERS: u32 = 66;

/// Why a binlog group closed: what ended its leader's wait for more
/// commits (MySQL's `binlog_group_commit_sync_delay` and
/// `_no_delay_count`, MariaDB's `binlog_commit_wait_usec` and `_count`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// No wait: no delay is set (or, MariaDB, no wait count).
    NoWait = 0,
    /// The queue held the count.
    Count = 1,
    /// The delay ran out.
    Timeout = 2,
    /// MariaDB: a queued transaction has a lock waiter.
    LockWait = 3,
}

/// Number of [`CloseReason`]s.
pub const CLOSE_REASONS: usize = 4;

impl CloseReason {
    /// Every reason, in index order.
    pub const ALL: [CloseReason; CLOSE_REASONS] = [
        CloseReason::NoWait,
        CloseReason::Count,
        CloseReason::Timeout,
        CloseReason::LockWait,
    ];

    /// Its groups' counter.
    pub const fn groups(self) -> Counter {
        match self {
            CloseReason::NoWait => Counter::BinlogClosedNoWait,
            CloseReason::Count => Counter::BinlogClosedCount,
            CloseReason::Timeout => Counter::BinlogClosedTimeout,
            CloseReason::LockWait => Counter::BinlogClosedLockWait,
        }
    }

    /// Its leaders' wait, ns.
    pub const fn wait_ns(self) -> Counter {
        match self {
            CloseReason::NoWait => Counter::BinlogClosedNoWaitNs,
            CloseReason::Count => Counter::BinlogClosedCountNs,
            CloseReason::Timeout => Counter::BinlogClosedTimeoutNs,
            CloseReason::LockWait => Counter::BinlogClosedLockWaitNs,
        }
    }

    /// From a stored `1 + index` (0: none stored, no wait).
    #[inline(always)]
    pub fn from_stored(v: u64) -> CloseReason {
        match v {
            2 => CloseReason::Count,
            3 => CloseReason::Timeout,
            4 => CloseReason::LockWait,
            _ => CloseReason::NoWait,
        }
    }
}

/// Index into the `HISTS` per-CPU array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistKind {
    /// Time inside the write probe's function for calls where predicate A
    /// held: the durability wait a committing thread sees.
    WriteWait = 0,
    /// Time inside the redo flush function.
    Flush = 1,
    /// Leaders' waits (entry to return of the write function).
    LeaderWait = 2,
    /// Followers' waits.
    FollowerWait = 3,
    /// `--io`: device time of each request attributed to a redo sync.
    IoDevice = 4,
    /// Device time of every request on the device.
    DevDevice = 5,
    /// Binlog group commit stages, per group: the flush stage, the sync
    /// leader's wait before the sync, the sync, the commit stage.
    BinlogFlush = 6,
    BinlogSyncWait = 7,
    BinlogSync = 8,
    BinlogCommit = 9,
    /// A flush leader's wait from its commit's entry to its flush stage.
    BinlogQueueWait = 10,
    /// The flush stage's redo flush.
    BinlogRedo = 11,
    /// The semi-sync acknowledgement waits (see `Counter::AckSyncCalls`).
    AckSync = 12,
    AckCommit = 13,
    /// A commit's time in the replication group's before-commit hook.
    GroupWait = 14,
}

/// Number of `HistKind` slots.
pub const HISTS: u32 = 15;

/// Slots of an exact size histogram: slot `n` counts the groups of
/// exactly `n` members; the last also holds every larger group. 4096
/// u64s are the 32 KiB a per-CPU map value may hold.
pub const EXACT_SIZES: usize = 4096;

/// Counts per exact size (see [`EXACT_SIZES`]): batches per redo flush,
/// commits per binlog group. Percentiles read from it are sizes that
/// occurred, never a bucket's bound.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SizeHist {
    pub counts: [u64; EXACT_SIZES],
}

/// The slot of a group of `n`.
#[inline(always)]
pub fn size_slot(n: u64) -> usize {
    if n >= EXACT_SIZES as u64 {
        EXACT_SIZES - 1
    } else {
        n as usize
    }
}

/// One server thread's place in the binlog group commit, while it leads
/// a stage (timestamps in ns, 0 when not set).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinlogThread {
    /// Its flush stage began (0: not leading one).
    pub flush_start: u64,
    /// Commits written so far by that flush stage.
    pub members: u64,
    /// The binlog write began.
    pub write_start: u64,
    /// Its flush stage ended: the queue was handed to the sync stage.
    pub flushed_at: u64,
    pub sync_start: u64,
    pub commit_start: u64,
    /// Its commit entered the binlog's group commit (exact tier).
    pub entered: u64,
    /// Its flush stage's redo flush began.
    pub redo_start: u64,
    /// Time in redo flushes inside its open flush stage, ns (the commit
    /// path times the flush stage without them).
    pub redo_ns: u64,
    /// MySQL: the commits flushed before this thread's last flush group
    /// began (the [`BinlogMarks::flushed`] it found), 1 + that so 0 means
    /// unset.
    pub mark: u64,
    /// The thread's accounting where each of the starts above was taken
    /// (`--commit-path`'s split), and the redo flushes' part of it.
    pub flush_st: Stamp,
    pub write_st: Stamp,
    pub flushed_st: Stamp,
    pub sync_st: Stamp,
    pub commit_st: Stamp,
    pub redo_st: Stamp,
    pub redo_cpu: u64,
    pub redo_runq: u64,
    /// Non-zero from its flush stage's start to its commit's return from
    /// the group commit: it leads a group (a waker of that role).
    pub leading: u64,
    /// Its wait for a fuller group began (0: not waiting), the delay the
    /// server passed to it (MySQL's µs; unused on MariaDB), and the
    /// polling steps taken so far (MySQL's `my_sleep` calls inside it).
    pub fill_start: u64,
    pub fill_delay: u64,
    pub fill_steps: u64,
    /// How that wait ended, `1 + CloseReason` (0: no wait since its last
    /// group closed), and how long it took, ns: taken by its group's
    /// close.
    pub closed_by: u64,
    pub fill_ns: u64,
}

/// A thread's open before-commit hook of a replication group: where it
/// began, and the time of the steps timed inside it so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupOpen {
    pub ts: u64,
    pub st: Stamp,
    pub inner: Split,
    /// The time of the hook's earlier segments (Galera's
    /// `before_prepare`, returned before `before_commit` began, where
    /// the commit has two phases), carried to its final return.
    pub carry: Split,
    /// 1 while a hook is open on the thread, 2 while an earlier segment
    /// runs nested inside the final hook (a commit of one phase), 0
    /// between an earlier segment's return and the final hook's entry.
    pub depth: u32,
    /// Non-zero once the consensus step returned inside it (a local
    /// commit: the threads that apply the others' transactions pass the
    /// hook without one).
    pub stepped: u32,
}

/// An open wait for a replica's acknowledgement, keyed by thread in
/// `ACK_START`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AckStart {
    pub ts: u64,
    pub st: Stamp,
}

/// MySQL's sync groups, found without a probe inside the queue lock.
/// Flush leaders hold the binlog's LOCK_log from their flush to their
/// enrolment in the sync queue, so flush groups enter that queue in the
/// order they flush; a sync group is a run of them that starts with its
/// leader's own (its leader found the queue empty). When the next leader
/// fetches, the previous group is everything flushed from the previous
/// leader's flush group up to this one's. Counted at each member's flush
/// (under LOCK_log), so a flush group that writes no binlog bytes still
/// counts.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinlogMarks {
    /// Commits flushed by every flush group so far (written by flush
    /// leaders only, one at a time under LOCK_log).
    pub flushed: u64,
    /// The mark of the last sync leader, 1 + its value (0: none yet).
    pub last: u64,
    /// That leader's thread (pid_tgid): the group it opened is credited
    /// to it when the group closes.
    pub leader: u64,
    /// How that leader's wait for a fuller group ended (its
    /// `BinlogThread::closed_by`) and its time, ns: its group's reason.
    pub closed_by: u64,
    pub fill_ns: u64,
}

/// Buckets of the batch-size histogram as the exporter and the summary's
/// cells show it: 0 (a flush that carried no new request), 1 to 16 each
/// on its own, then 17-32, 33-64, ... 2049-4096, and > 4096. The kernel
/// counts exact sizes ([`SizeHist`]); these group them for display.
pub const BATCH_BUCKETS: usize = 26;

/// The bucket of a batch of `n` requests: `n` itself up to 16, then one
/// bucket per power of two (17-32 is 17, 33-64 is 18, ...), the last
/// holding everything above 4096.
#[inline(always)]
pub fn batch_bucket(n: u64) -> usize {
    if n <= 16 {
        return n as usize;
    }
    // n - 1 in [16, ...): floor(log2) is 4 for 17..=32.
    let b = 13 + log2_bucket(n - 1);
    if b >= BATCH_BUCKETS {
        BATCH_BUCKETS - 1
    } else {
        b
    }
}

/// The group-commit state shared by every CPU (an Array map, not per-CPU:
/// arrivals on one CPU are flushed by a thread on another).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Group {
    /// Durable write requests since the previous flush began (signed: a
    /// flush subtracts what it read, so arrivals in between are kept).
    pub arrived: i64,
}

/// An open call of the write function, in its thread's `WRITE_START` slot.
/// User space reads `owner` and `ts` only, to let open calls finish
/// before the last read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WriteStart {
    /// The thread (pid_tgid) whose call this is; 0 when the slot is free.
    pub owner: u64,
    /// `bpf_ktime_get_ns` at entry (CLOCK_MONOTONIC).
    pub ts: u64,
    pub pred_a: u64,
    /// A batch member (durable request).
    pub durable: u64,
    /// This call ran the flush function itself: a leader.
    pub led: u64,
    /// Time in fsync/fdatasync inside that flush, ns.
    pub sync_ns: u64,
    /// The thread's accounting at entry, and the fsyncs' part of it.
    pub st: Stamp,
    pub sync_cpu: u64,
    pub sync_runq: u64,
}

/// An open fsync/fdatasync, keyed by thread in `SYNC_START`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SyncStart {
    /// `bpf_ktime_get_ns` at entry (CLOCK_MONOTONIC).
    pub ts: u64,
    pub fd: u32,
    /// Non-zero when the thread was inside the redo flush function.
    pub in_flush: u32,
    /// Non-zero when `--io` counts this sync as a redo sync in flight.
    pub io: u32,
    pub _pad: u32,
    /// `IoState::data_issued` when it began.
    pub io_issued: i64,
    /// The thread's accounting at entry.
    pub st: Stamp,
}

/// `--io`: the redo syncs in flight, shared by every CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoState {
    /// Redo syncs in flight (signed, atomically added).
    pub inflight: i64,
    /// Attributed requests with data issued so far.
    pub data_issued: i64,
}

/// A block request submitted on behalf of a redo sync, not yet issued.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoTag {
    /// When its bio was submitted.
    pub ts: u64,
    /// One of the `IO_*` flags: [`IO_JOURNAL`] when the journal sent it.
    pub flags: u32,
    pub _pad: u32,
}

/// A block request issued to the device, until it completes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoIssued {
    pub ts: u64,
    pub bytes: u32,
    /// `IO_*` flags.
    pub flags: u32,
}

/// The request is attributed to a redo sync.
pub const IO_ATTRIBUTED: u32 = 1;
/// ... sent by the filesystem's journal thread.
pub const IO_JOURNAL: u32 = 2;
/// A cache flush (no data).
pub const IO_FLUSH: u32 = 4;
/// A write with FUA.
pub const IO_FUA: u32 = 8;

/// Which threads write the journal for a redo sync (`IO_JOURNAL_THREADS`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalThreads {
    /// None known: only the syncing thread's own requests are attributed.
    None = 0,
    /// ext4: `jbd2/<dev>`.
    Jbd2 = 1,
    /// XFS: log and CIL work in kernel workers (`kworker/...`), told
    /// from the page-cache flusher's by the metadata flag.
    Kworker = 2,
}

/// The op and flags of a block tracepoint's `rwbs` string (its first 4
/// bytes): `(flush op, write op, FUA)`. A leading `F` before the op
/// letter is a preflush; an `F` after it is FUA.
#[inline(always)]
pub fn rwbs_kind(rwbs: [u8; 4]) -> (bool, bool, bool) {
    let is_op = |c: u8| matches!(c, b'W' | b'R' | b'D' | b'F' | b'E' | b'N');
    let (op, rest) = if rwbs[0] == b'F' && is_op(rwbs[1]) {
        (rwbs[1], rwbs[2])
    } else {
        (rwbs[0], rwbs[1])
    };
    (op == b'F', op == b'W', op == b'W' && rest == b'F')
}

/// What counts as a batch member (`DURABLE_PRED`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchMember {
    /// Every write-probe hit (fallback: server-layer commits).
    AllCalls = 0,
    /// Hits where predicate A held.
    PredA = 1,
    /// Hits where predicate B held (MySQL 5.6's flush_to_disk).
    PredB = 2,
}

/// A log2 latency histogram in nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Hist {
    pub buckets: [u64; HIST_BUCKETS],
}

/// Slots of a commit's stage times ([`CommitStage`]).
pub const CP_STAGES: usize = 14;

/// Where a commit's time goes, as the kernel side attributes it: each
/// stage is a span on the committing thread, timed by a probe that
/// already exists for its own figure. Stages never overlap on one thread
/// (the binlog's flush stage is timed apart from the redo flush inside
/// it), so they add up to at most the commit's own span; user space names
/// them per server family and calls the rest `unattributed`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitStage {
    /// Inside the durable redo write, as the leader that ran the flush:
    /// everything but the fsyncs it made.
    RedoLeaderWrite = 0,
    /// The leader's fsyncs inside that flush.
    RedoLeaderSync = 1,
    /// Inside the durable redo write without flushing: waiting for
    /// another thread's flush.
    RedoFollowerWait = 2,
    /// A binlog group's leader, from its commit's entry into the group
    /// commit to the start of its flush stage.
    BinlogQueueWait = 3,
    /// The leader's flush stage (MySQL: without the redo flush inside it;
    /// MariaDB: the binlog write and sync).
    BinlogFlush = 4,
    /// The sync leader's wait before the binlog sync (the sync delay).
    BinlogSyncWait = 5,
    BinlogSync = 6,
    /// The commit stage's leader committing the group.
    BinlogCommit = 7,
    /// A binlog group's member that did not lead: waiting for its leader
    /// to do it all (but for the replica's acknowledgement).
    BinlogFollowerWait = 8,
    /// A semi-sync source waiting for its replica's acknowledgement: the
    /// thread's own wait, and a follower's wait while its group's leader
    /// waited for it (see `AckSpan`).
    ReplicaAck = 9,
    /// A replication group's flow control holding the commit back
    /// (Group Replication's `Flow_control_module::do_wait`).
    GroupFlowControl = 10,
    /// Sending the commit's write set to the group.
    GroupSend = 11,
    /// Waiting for the group's consensus on its order and for its
    /// certification (`Wait_ticket::waitTicket`).
    GroupConsensus = 12,
    /// The rest of the group's before-commit hook.
    GroupRest = 13,
}

/// One wait for a replica's acknowledgement inside the binlog's group
/// commit, by the thread that led it (`ACK_RING`): a follower's group
/// wait that overlaps it waited for the acknowledgement too. A leader's
/// back-to-back waits for its members (MariaDB) make one span.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AckSpan {
    pub owner: u64,
    pub start: u64,
    pub end: u64,
}

/// Spans kept in `ACK_RING`: a follower waits through a group or two.
pub const ACK_RING_LEN: u32 = 8;

/// Sub-buckets per power of two of a [`FineHist`].
pub const FINE_SUB: usize = 16;
/// Slots of a [`FineHist`]: 16 per power of two up to 2^32 ns.
pub const FINE_SLOTS: usize = HIST_BUCKETS * FINE_SUB;

/// A log-linear latency histogram: each power of two of ns cut in 16, so
/// a percentile read from it is within 1/16 of an octave (about 4 %) of
/// the true one, where a log2 bucket could be off by half. The commit
/// path's whole-commit time, whose p50 is set beside the clients'.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FineHist {
    pub slots: [u64; FINE_SLOTS],
}

/// The slot of `ns`: its power of two times 16 plus the next four bits.
#[inline(always)]
pub fn fine_slot(ns: u64) -> usize {
    let b = log2_bucket(ns);
    let sub = if b >= 4 {
        ((ns >> (b - 4)) & (FINE_SUB as u64 - 1)) as usize
    } else {
        0
    };
    let i = b * FINE_SUB + sub;
    if i >= FINE_SLOTS {
        FINE_SLOTS - 1
    } else {
        i
    }
}

/// The lowest ns of slot `i` (the inverse of [`fine_slot`] at its start).
pub fn fine_slot_low(i: usize) -> u64 {
    let (b, sub) = (i / FINE_SUB, (i % FINE_SUB) as u64);
    if b < 4 {
        if b == 0 {
            0
        } else {
            1u64 << b
        }
    } else {
        (1u64 << b) + (sub << (b - 4))
    }
}

/// A thread's scheduler accounting at one instant (`--commit-path`'s
/// split): its CPU time so far, counting the slice it is running, and
/// its time spent runnable on a run queue. Both are the kernel's own
/// counters (`task_struct`'s `se.sum_exec_runtime` and
/// `sched_info.run_delay`), so a stage's split costs no event of its own:
/// only reads at the boundaries the commit path already probes. All
/// zeros where the split is off. Differences wrap: the running slice is
/// measured against the probe's clock, whose offset from the scheduler's
/// cancels in a difference.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub cpu: u64,
    pub runq: u64,
}

/// An interval on one thread, split: its wall time, and how much of it
/// the thread ran and waited for a CPU (the rest it was blocked).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub ns: u64,
    pub cpu: u64,
    pub runq: u64,
}

impl Split {
    /// From `(ts0, s0)` to `(ts1, s1)`: a CPU or run-queue figure past
    /// the wall time (the clocks' skew on a nanosecond interval) is held
    /// to it.
    #[inline(always)]
    pub fn between(ts0: u64, s0: Stamp, ts1: u64, s1: Stamp) -> Split {
        let ns = ts1.saturating_sub(ts0);
        let cpu = s1.cpu.wrapping_sub(s0.cpu);
        let runq = s1.runq.wrapping_sub(s0.runq);
        Split {
            ns,
            cpu: if cpu > ns { ns } else { cpu },
            runq: if runq > ns { ns } else { runq },
        }
    }

    /// The wall time alone (a split left out: off, or not measurable).
    #[inline(always)]
    pub fn wall(ns: u64) -> Split {
        Split {
            ns,
            cpu: 0,
            runq: 0,
        }
    }

    /// `self` without `other`, a part of it, each figure at least 0.
    #[inline(always)]
    pub fn minus(self, other: Split) -> Split {
        Split {
            ns: self.ns.saturating_sub(other.ns),
            cpu: self.cpu.saturating_sub(other.cpu),
            runq: self.runq.saturating_sub(other.runq),
        }
    }

    #[inline(always)]
    pub fn plus(self, other: Split) -> Split {
        Split {
            ns: self.ns + other.ns,
            cpu: self.cpu + other.cpu,
            runq: self.runq + other.runq,
        }
    }

    /// The part `ns` of it, its CPU and run-queue time in proportion: a
    /// sub-interval whose boundaries the thread never probed (a
    /// follower's wait while its leader waited for the replica).
    #[inline(always)]
    pub fn part(self, ns: u64) -> Split {
        if self.ns == 0 || ns >= self.ns {
            return self;
        }
        // In 1/1024ths: no 128-bit division in eBPF, and a wait's
        // figures fit 54 bits.
        let f = (ns << 10) / self.ns;
        Split {
            ns,
            cpu: (self.cpu * f) >> 10,
            runq: (self.runq * f) >> 10,
        }
    }
}

/// Who woke a follower, by the waker's role at the wake-up.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakerRole {
    /// A thread leading its binlog group commit (a flush stage): the
    /// follower's own group's leader for the last such wake-up of a wait,
    /// other groups' for any before it (told apart at the wait's end: see
    /// [`WakeStats::leader_ended`]).
    BinlogLeader = 0,
    /// The redo log's writer or flusher (MySQL's `ib_log_*` threads), or
    /// a thread inside a redo write that flushed (a redo leader).
    RedoWriter = 1,
    /// The semi-sync source's acknowledgement receiver.
    AckReceiver = 2,
    Other = 3,
}

pub const WAKER_ROLES: usize = 4;

/// What a follower waited in.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// The binlog's group commit, for its group's leader.
    Binlog = 1,
    /// A durable redo write, for another thread's flush.
    Redo = 2,
}

/// A thread's open wait that may be a follower's (`FOLLOWER_WAITS`),
/// with the wake-ups it received so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FollowerWait {
    /// [`WaitKind`]; 0 when the wait turned out a leader's (discarded).
    pub kind: u32,
    /// Woken since it last blocked: a block now wastes that wake-up.
    pub woken: u32,
    pub wakeups: u32,
    pub wasted: u32,
    /// When the last wake-up came, until the thread ran (0: none pending).
    pub woken_at: u64,
    pub by_role: [u32; WAKER_ROLES],
}

/// Follower waits ended, and their wake-ups (`--wakeups`), per CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WakeStats {
    pub waits: u64,
    pub wakeups: u64,
    /// Wake-ups after which the follower blocked again inside the same
    /// wait.
    pub wasted: u64,
    pub by_role: [u64; WAKER_ROLES],
    /// Waits woken by a binlog leader at least once: the last such
    /// wake-up was their own group's leader's, any before it other
    /// groups' leaders'.
    pub leader_ended: u64,
    /// Wake-up to running on a CPU, ns.
    pub wake_to_run: FineHist,
}

/// One thread's open commit, in its `CP_SPANS` slot (tid modulo the size,
/// owner checked, as `WriteStart`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CommitSpan {
    /// The thread (pid_tgid) whose commit this is; 0 when free.
    pub owner: u64,
    pub start: u64,
    /// Nested commit calls on the thread (only the outer one is timed).
    pub depth: u64,
    /// Non-zero once the commit wrote: a redo write request (or the
    /// server-layer commit function) ran inside it. Statement ends and
    /// read-only commits are left out.
    pub wrote: u64,
    /// The binlog group: when this commit entered it (0: not in it).
    pub binlog_entered: u64,
    /// Non-zero between the commit's entry into the binlog's group
    /// commit and its return: an acknowledgement it waits for there is
    /// its group's.
    pub in_binlog: u64,
    /// The span probes' attachment this span was opened under (`CP_GEN`):
    /// a span left open when a light tier's window detached its return is
    /// stale in the next window, not a commit of it.
    pub generation: u64,
    /// Time per [`CommitStage`], ns.
    pub stage_ns: [u64; CP_STAGES],
    /// The thread's accounting at the span's start, and at its entry into
    /// the binlog's group commit.
    pub start_st: Stamp,
    pub binlog_entered_st: Stamp,
    /// Of each stage's time, the thread's CPU and run-queue time, ns.
    pub stage_cpu: [u64; CP_STAGES],
    pub stage_runq: [u64; CP_STAGES],
}

/// The commits' figures, per CPU: counts, sums and log2 histograms of the
/// whole commit and of each stage (per commit that spent time in it).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CommitStats {
    pub commits: u64,
    pub total_ns: u64,
    pub total: FineHist,
    /// Commits that spent time in each stage, and that time.
    pub stage_commits: [u64; CP_STAGES],
    pub stage_ns: [u64; CP_STAGES],
    pub stage_hist: [Hist; CP_STAGES],
    /// Commits whose slot another thread's open commit held (counted,
    /// never timed).
    pub lost: u64,
    /// Of the commits' and each stage's time, the CPU and run-queue time
    /// (zeros where the split is off).
    pub total_cpu_ns: u64,
    pub total_runq_ns: u64,
    pub stage_cpu_ns: [u64; CP_STAGES],
    pub stage_runq_ns: [u64; CP_STAGES],
}

/// Per file descriptor activity of the target process.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FdStats {
    /// Completed fsync/fdatasync calls.
    pub syncs: u64,
    /// Sum of their durations in ns.
    pub sync_ns: u64,
    /// Syncs issued while the same thread was inside the redo flush
    /// function: separates the flush function's own fdatasyncs from others
    /// on the same file (MariaDB's checkpoint header writes, for one).
    pub syncs_in_flush: u64,
    /// write/pwrite64/pwritev calls.
    pub writes: u64,
    /// Bytes requested by write/pwrite64 (pwritev is counted in `writes` only).
    pub write_bytes: u64,
    /// Latency histogram of the syncs.
    pub hist: Hist,
}

/// How a write-probe argument is tested. Set from user space per server
/// version, because the durable flag moved between registers over the years.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredOp {
    /// The predicate is not used; it never holds.
    Off = 0,
    /// Holds when `(arg & mask) != 0`.
    NonZero = 1,
    /// Holds when `(arg & mask) == value`.
    Equals = 2,
    /// Always holds (count every call).
    Always = 3,
}

/// Syscall numbers (x86-64) of the vectored writes, whose third argument is
/// an iovec count, not bytes.
pub const NR_PWRITEV: i32 = 296;
pub const NR_PWRITEV2: i32 = 328;

/// Names of the global variables user space sets before loading.
pub mod globals {
    pub const TARGET_TGID: &str = "TARGET_TGID";
    pub const WRITE_TIMING: &str = "WRITE_TIMING";
    pub const PRED_A_ARG: &str = "PRED_A_ARG";
    pub const PRED_A_OP: &str = "PRED_A_OP";
    pub const PRED_A_MASK: &str = "PRED_A_MASK";
    pub const PRED_A_VALUE: &str = "PRED_A_VALUE";
    pub const PRED_B_ARG: &str = "PRED_B_ARG";
    pub const PRED_B_OP: &str = "PRED_B_OP";
    pub const PRED_B_MASK: &str = "PRED_B_MASK";
    pub const PRED_B_VALUE: &str = "PRED_B_VALUE";
    pub const PRED_F_ARG: &str = "PRED_F_ARG";
    pub const PRED_F_OP: &str = "PRED_F_OP";
    pub const PRED_F_MASK: &str = "PRED_F_MASK";
    pub const PRED_F_VALUE: &str = "PRED_F_VALUE";
    pub const DURABLE_PRED: &str = "DURABLE_PRED";
    pub const BATCH_ON_SYNC: &str = "BATCH_ON_SYNC";
    pub const ANATOMY: &str = "ANATOMY";
    /// Non-zero with `--commit-path`: the stage probes add to the
    /// committing thread's span.
    pub const COMMIT_PATH: &str = "COMMIT_PATH";
    pub const IO_DEV: &str = "IO_DEV";
    pub const IO_JOURNAL_THREADS: &str = "IO_JOURNAL_THREADS";
    pub const ISSUE_BYTES_OFF: &str = "ISSUE_BYTES_OFF";
    pub const ISSUE_RWBS_OFF: &str = "ISSUE_RWBS_OFF";
    pub const COMPLETE_RWBS_OFF: &str = "COMPLETE_RWBS_OFF";
    pub const BIO_RWBS_OFF: &str = "BIO_RWBS_OFF";
    /// Non-zero where a binlog group closes with its flush leader's
    /// return (MariaDB), not at a separate sync-stage fetch (MySQL).
    pub const BINLOG_CLOSE_AT_FLUSH: &str = "BINLOG_CLOSE_AT_FLUSH";
    /// The predicate on the group-close function's arguments (MySQL:
    /// the stage id is the sync stage).
    pub const PRED_G_ARG: &str = "PRED_G_ARG";
    pub const PRED_G_OP: &str = "PRED_G_OP";
    pub const PRED_G_MASK: &str = "PRED_G_MASK";
    pub const PRED_G_VALUE: &str = "PRED_G_VALUE";
    /// Non-zero: the commit path's stages are split by the thread's
    /// scheduler accounting, read at these byte offsets in `task_struct`
    /// (from the kernel's BTF).
    pub const SCHED_SPLIT: &str = "SCHED_SPLIT";
    pub const TASK_SUM_EXEC_OFF: &str = "TASK_SUM_EXEC_OFF";
    pub const TASK_EXEC_START_OFF: &str = "TASK_EXEC_START_OFF";
    pub const TASK_RUN_DELAY_OFF: &str = "TASK_RUN_DELAY_OFF";
    pub const TASK_CFS_RQ_OFF: &str = "TASK_CFS_RQ_OFF";
    pub const CFS_RQ_RQ_OFF: &str = "CFS_RQ_RQ_OFF";
    pub const RQ_CLOCK_OFF: &str = "RQ_CLOCK_OFF";
    pub const RQ_CLOCK_TASK_OFF: &str = "RQ_CLOCK_TASK_OFF";
    /// Non-zero with `--wakeups`: follower waits are opened and the
    /// scheduler's wake-up and switch tracepoints count inside them;
    /// `prev_state` and `next_pid`'s offsets in `sched_switch`'s record.
    pub const WAKEUPS: &str = "WAKEUPS";
    /// Non-zero where the group's hook also runs on the threads that
    /// apply the others' transactions (Galera): a hook counts as a
    /// commit only once its consensus step ran. The consensus step's
    /// return codes for a conflict, an abort and a commit never sent (0:
    /// none).
    pub const GROUP_NEEDS_STEP: &str = "GROUP_NEEDS_STEP";
    pub const GROUP_CONFLICT_RET: &str = "GROUP_CONFLICT_RET";
    pub const GROUP_ABORT_RET: &str = "GROUP_ABORT_RET";
    pub const GROUP_UNSENT_RET: &str = "GROUP_UNSENT_RET";
    pub const SWITCH_PREV_STATE_OFF: &str = "SWITCH_PREV_STATE_OFF";
    pub const SWITCH_NEXT_PID_OFF: &str = "SWITCH_NEXT_PID_OFF";
    pub const WAKEUP_PID_OFF: &str = "WAKEUP_PID_OFF";
}

/// Names of the maps.
pub mod maps {
    pub const COUNTERS: &str = "COUNTERS";
    pub const HISTS: &str = "HISTS";
    pub const FD_STATS: &str = "FD_STATS";
    pub const BATCH: &str = "BATCH";
    pub const GROUP: &str = "GROUP";
    pub const REDO_FDS: &str = "REDO_FDS";
    /// Open calls, read by user space only to let them finish at the end.
    pub const WRITE_START: &str = "WRITE_START";
    pub const FLUSH_START: &str = "FLUSH_START";
    pub const SYNC_START: &str = "SYNC_START";
    pub const IO_STATE: &str = "IO_STATE";
    pub const BINLOG_SIZES: &str = "BINLOG_SIZES";
    /// Binlog group sizes per [`super::CloseReason`] (its index).
    pub const BINLOG_CLOSED_SIZES: &str = "BINLOG_CLOSED_SIZES";
    pub const BINLOG_MARKS: &str = "BINLOG_MARKS";
    pub const BINLOG_THREADS: &str = "BINLOG_THREADS";
    pub const BINLOG_LEADERS: &str = "BINLOG_LEADERS";
    pub const CP_SPANS: &str = "CP_SPANS";
    pub const CP_STATS: &str = "CP_STATS";
    /// The span probes' current attachment, written by user space: 0
    /// while they are off (a light tier between its windows), then 1, 2,
    /// ... per attachment.
    pub const CP_GEN: &str = "CP_GEN";
    pub const ACK_START: &str = "ACK_START";
    pub const WAKE_STATS: &str = "WAKE_STATS";
    pub const ACK_RING: &str = "ACK_RING";
    pub const ACK_HEAD: &str = "ACK_HEAD";
}

/// Names of the programs in the object file.
pub mod programs {
    pub const WRITE_ENTRY: &str = "write_entry";
    pub const WRITE_RETURN: &str = "write_return";
    pub const WRITE_SITE: &str = "write_site";
    pub const WRITE_SITE_UNKNOWN: &str = "write_site_unknown";
    pub const FLUSH_SITE: &str = "flush_site";
    pub const FLUSH_ENTRY: &str = "flush_entry";
    pub const FLUSH_RETURN: &str = "flush_return";
    pub const SYNC_ENTER_TP: &str = "sync_enter_tp";
    pub const SYNC_EXIT_TP: &str = "sync_exit_tp";
    pub const SYNC_ENTER_KPROBE: &str = "sync_enter_kprobe";
    pub const SYNC_EXIT_KPROBE: &str = "sync_exit_kprobe";
    pub const SYNC_ENTER_SYS_KPROBE: &str = "sync_enter_sys_kprobe";
    pub const SYNC_ENTER_FENTRY: &str = "sync_enter_fentry";
    pub const SYNC_ENTER_FENTRY_FSYNC: &str = "sync_enter_fentry_fsync";
    pub const SYNC_ENTER_FENTRY_FDATASYNC: &str = "sync_enter_fentry_fdatasync";
    pub const SYNC_EXIT_FEXIT: &str = "sync_exit_fexit";
    pub const SYNC_EXIT_FEXIT_FSYNC: &str = "sync_exit_fexit_fsync";
    pub const SYNC_EXIT_FEXIT_FDATASYNC: &str = "sync_exit_fexit_fdatasync";
    pub const WRITE_SYSCALL_TP: &str = "write_syscall_tp";
    pub const WRITE_SYS_KPROBE: &str = "write_sys_kprobe";
    pub const WRITEV_SYS_KPROBE: &str = "writev_sys_kprobe";
    pub const WRITE_FENTRY_WRITE: &str = "write_fentry_write";
    pub const WRITE_FENTRY_PWRITE64: &str = "write_fentry_pwrite64";
    pub const WRITE_FENTRY_PWRITEV: &str = "write_fentry_pwritev";
    pub const WRITE_FENTRY_PWRITEV2: &str = "write_fentry_pwritev2";
    pub const SYNC_ENTER_LIBC: &str = "sync_enter_libc";
    pub const SYNC_EXIT_LIBC: &str = "sync_exit_libc";
    pub const SYNC_COUNT_LIBC: &str = "sync_count_libc";
    pub const WRITE_LIBC: &str = "write_libc";
    pub const WRITEV_LIBC: &str = "writev_libc";
    pub const IO_BIO_QUEUE: &str = "io_bio_queue";
    pub const IO_RQ_ISSUE: &str = "io_rq_issue";
    pub const IO_RQ_COMPLETE: &str = "io_rq_complete";
    pub const BINLOG_FLUSH_OPEN: &str = "binlog_flush_open";
    pub const BINLOG_MEMBER: &str = "binlog_member";
    pub const BINLOG_WRITE_ENTRY: &str = "binlog_write_entry";
    pub const BINLOG_FLUSH_CLOSE: &str = "binlog_flush_close";
    pub const BINLOG_GROUP_CLOSE: &str = "binlog_group_close";
    pub const BINLOG_SYNC_ENTRY: &str = "binlog_sync_entry";
    pub const BINLOG_SYNC_RETURN: &str = "binlog_sync_return";
    pub const BINLOG_COMMIT_ENTRY: &str = "binlog_commit_entry";
    pub const BINLOG_COMMIT_RETURN: &str = "binlog_commit_return";
    pub const BINLOG_ENTER: &str = "binlog_enter";
    pub const BINLOG_REDO_ENTRY: &str = "binlog_redo_entry";
    pub const BINLOG_REDO_RETURN: &str = "binlog_redo_return";
    pub const BINLOG_ENTER_RETURN: &str = "binlog_enter_return";
    /// The commit's entry into the binlog's group commit for its span
    /// alone (a light tier's exact window: the binlog's own queue wait
    /// stays with the exact tier).
    pub const BINLOG_ENTER_SPAN: &str = "binlog_enter_span";
    /// A group's leader waits for more commits (MySQL's
    /// `wait_count_or_timeout`, MariaDB's `wait_for_sufficient_commits`);
    /// MySQL's polling steps in it (`my_sleep`) and its return.
    pub const BINLOG_FILL_ENTRY: &str = "binlog_fill_entry";
    pub const BINLOG_FILL_STEP: &str = "binlog_fill_step";
    pub const BINLOG_FILL_RETURN: &str = "binlog_fill_return";
    /// MariaDB: the wait's exits, at the server's own adds to its trigger
    /// counters (instruction probes).
    pub const BINLOG_FILLED_COUNT: &str = "binlog_filled_count";
    pub const BINLOG_FILLED_TIMEOUT: &str = "binlog_filled_timeout";
    pub const BINLOG_FILLED_LOCK_WAIT: &str = "binlog_filled_lock_wait";
    /// A semi-sync source's wait for its replica (see
    /// `Counter::AckSyncCalls`, `Counter::AckCommitCalls`).
    pub const ACK_SYNC_ENTRY: &str = "ack_sync_entry";
    pub const ACK_SYNC_RETURN: &str = "ack_sync_return";
    pub const ACK_COMMIT_ENTRY: &str = "ack_commit_entry";
    pub const ACK_COMMIT_RETURN: &str = "ack_commit_return";
    pub const COMMIT_ENTRY: &str = "commit_entry";
    pub const COMMIT_RETURN: &str = "commit_return";
    /// A replication group's before-commit hook, and its steps (one
    /// entry program for the three, a return each).
    pub const GROUP_ENTRY: &str = "group_entry";
    pub const GROUP_RETURN: &str = "group_return";
    pub const GROUP_PART_ENTRY: &str = "group_part_entry";
    /// A hook's earlier segment (Galera's `before_prepare`): its entry
    /// starts a commit's hook afresh, its return carries its time on.
    pub const GROUP_FIRST_ENTRY: &str = "group_first_entry";
    pub const GROUP_SEGMENT_RETURN: &str = "group_segment_return";
    pub const GROUP_FLOW_RETURN: &str = "group_flow_return";
    pub const GROUP_SEND_RETURN: &str = "group_send_return";
    pub const GROUP_CONSENSUS_RETURN: &str = "group_consensus_return";
    /// `--wakeups`: the scheduler's tracepoints, counting inside follower
    /// waits.
    pub const WAKE_SCHED_WAKEUP: &str = "wake_sched_wakeup";
    pub const WAKE_SCHED_SWITCH: &str = "wake_sched_switch";

    /// The programs that count a call when it begins or open a call that
    /// another program closes, in the order they detach when a trace ends
    /// (so the calls in flight can close and the last totals are a
    /// consistent cut): the write and flush functions first, the fsync
    /// entries only once the flushes in flight have closed, since a
    /// flush's own fdatasync may not have begun yet.
    pub const CALL_OPENERS: &[&str] = &[
        COMMIT_ENTRY,
        GROUP_FIRST_ENTRY,
        GROUP_ENTRY,
        GROUP_PART_ENTRY,
        ACK_SYNC_ENTRY,
        ACK_COMMIT_ENTRY,
        BINLOG_ENTER,
        BINLOG_ENTER_SPAN,
        BINLOG_FLUSH_OPEN,
        BINLOG_FILL_ENTRY,
        BINLOG_REDO_ENTRY,
        BINLOG_SYNC_ENTRY,
        BINLOG_COMMIT_ENTRY,
        WRITE_ENTRY,
        WRITE_SITE,
        WRITE_SITE_UNKNOWN,
        FLUSH_SITE,
        FLUSH_ENTRY,
    ];
    pub const SYNC_OPENERS: &[&str] = &[
        SYNC_ENTER_TP,
        SYNC_ENTER_KPROBE,
        SYNC_ENTER_SYS_KPROBE,
        SYNC_ENTER_FENTRY,
        SYNC_ENTER_FENTRY_FSYNC,
        SYNC_ENTER_FENTRY_FDATASYNC,
        SYNC_ENTER_LIBC,
        SYNC_COUNT_LIBC,
    ];
}

/// Bucket index of a duration: floor(log2(ns)), clamped to the last bucket.
/// Branch-free so the verifier sees no loop.
#[inline(always)]
pub fn log2_bucket(ns: u64) -> usize {
    let mut v = ns;
    let mut r: u64 = ((v > 0xFFFF_FFFF) as u64) << 5;
    v >>= r;
    let mut shift = ((v > 0xFFFF) as u64) << 4;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xFF) as u64) << 3;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xF) as u64) << 2;
    v >>= shift;
    r |= shift;
    shift = ((v > 0x3) as u64) << 1;
    v >>= shift;
    r |= shift;
    r |= v >> 1;
    let r = r as usize;
    if r >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        r
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain-old-data, `#[repr(C)]`, no padding, every bit pattern valid.
    unsafe impl aya::Pod for super::Hist {}
    unsafe impl aya::Pod for super::FdStats {}
    unsafe impl aya::Pod for super::SizeHist {}
    unsafe impl aya::Pod for super::BinlogThread {}
    unsafe impl aya::Pod for super::BinlogMarks {}
    unsafe impl aya::Pod for super::Group {}
    unsafe impl aya::Pod for super::WriteStart {}
    unsafe impl aya::Pod for super::SyncStart {}
    unsafe impl aya::Pod for super::IoState {}
    unsafe impl aya::Pod for super::CommitSpan {}
    unsafe impl aya::Pod for super::CommitStats {}
    unsafe impl aya::Pod for super::FineHist {}
    unsafe impl aya::Pod for super::AckStart {}
    unsafe impl aya::Pod for super::WakeStats {}
    unsafe impl aya::Pod for super::FollowerWait {}
    unsafe impl aya::Pod for super::Stamp {}
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn fine_slots_are_ordered_and_invert() {
        let mut last = 0;
        for ns in (0u64..200_000)
            .step_by(7)
            .chain([1 << 20, (1 << 20) + 65_537, u64::MAX])
        {
            let i = fine_slot(ns);
            assert!(i >= last, "{ns}");
            last = i;
            assert!(
                fine_slot_low(i) <= ns,
                "{ns}: slot {i} starts at {}",
                fine_slot_low(i)
            );
            // Below 16 ns a power of two has one slot (the rest unused).
            if (4 * FINE_SUB..FINE_SLOTS - 1).contains(&i) {
                assert!(ns < fine_slot_low(i + 1), "{ns}");
            }
        }
        // 1/16 of an octave: 4096 ns and 4352 ns are neighbours.
        assert_eq!(fine_slot(4352), fine_slot(4096) + 1);
    }

    #[test]
    fn log2_bucket_matches_ilog2() {
        assert_eq!(log2_bucket(0), 0);
        for ns in [
            1u64,
            2,
            3,
            4,
            7,
            8,
            1000,
            65_535,
            65_536,
            1 << 30,
            (1 << 31) - 1,
        ] {
            assert_eq!(log2_bucket(ns), ns.ilog2() as usize, "ns={ns}");
        }
        assert_eq!(log2_bucket(1 << 40), HIST_BUCKETS - 1);
        assert_eq!(log2_bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    #[test]
    fn rwbs_tells_flushes_writes_and_fua_apart() {
        let k = |s: &[u8]| {
            let mut b = [0u8; 4];
            b[..s.len()].copy_from_slice(s);
            rwbs_kind(b)
        };
        assert_eq!(k(b"FF"), (true, false, false)); // the flush machinery's
        assert_eq!(k(b"F"), (true, false, false));
        assert_eq!(k(b"FS"), (true, false, false));
        assert_eq!(k(b"WS"), (false, true, false));
        assert_eq!(k(b"WFS"), (false, true, true));
        assert_eq!(k(b"FWFS"), (false, true, true));
        assert_eq!(k(b"FWS"), (false, true, false));
        assert_eq!(k(b"RA"), (false, false, false));
    }

    #[test]
    fn sizes_are_their_own_slot_up_to_the_last() {
        assert_eq!(size_slot(0), 0);
        assert_eq!(size_slot(37), 37);
        assert_eq!(size_slot(EXACT_SIZES as u64 - 2), EXACT_SIZES - 2);
        assert_eq!(size_slot(EXACT_SIZES as u64), EXACT_SIZES - 1);
        assert_eq!(size_slot(u64::MAX), EXACT_SIZES - 1);
        assert_eq!(core::mem::size_of::<SizeHist>(), 32 * 1024);
    }

    #[test]
    fn batch_buckets_are_exact_to_16_then_powers_of_two() {
        for n in 0..=16 {
            assert_eq!(batch_bucket(n), n as usize);
        }
        for (n, b) in [
            (17, 17),
            (32, 17),
            (33, 18),
            (64, 18),
            (65, 19),
            (2048, 23),
            (2049, 24),
            (4096, 24),
            (4097, 25),
            (u64::MAX, 25),
        ] {
            assert_eq!(batch_bucket(n), b, "n={n}");
        }
    }
}
