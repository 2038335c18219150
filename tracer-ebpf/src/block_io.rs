//! `--io`: the block requests each redo sync causes (its own thread's,
//! the journal's) and every request on the device, from the block
//! tracepoints.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{Array, LruHashMap},
    programs::TracePointContext,
};
use tracer_ebpf::{
    rwbs_kind, Counter, HistKind, IoIssued, IoState, IoTag, JournalThreads, IO_ATTRIBUTED,
    IO_FLUSH, IO_FUA, IO_JOURNAL,
};

use crate::{
    config::{
        cfg_u32, BIO_RWBS_OFF, COMPLETE_RWBS_OFF, IO_DEV, IO_JOURNAL_THREADS, ISSUE_BYTES_OFF,
        ISSUE_RWBS_OFF,
    },
    helpers::{add, bump, record_kind, xadd},
    maps::{REDO_FDS, SYNC_START},
};

/// `--io`: the redo syncs in flight.
#[map]
static IO_STATE: Array<IoState> = Array::with_max_entries(1, 0);

/// Bios sent for a redo sync, by sector, until their request is issued.
/// LRU: a bio merged into another's request is never issued under its own
/// sector, and simply ages out.
#[map]
static IO_TAGS: LruHashMap<u64, IoTag> = LruHashMap::with_max_entries(8192, 0);

/// Requests issued on the device, by sector (cache flushes, which carry
/// none, under `u64::MAX`: one flush at a time per queue), until complete.
#[map]
static IO_ISSUED: LruHashMap<u64, IoIssued> = LruHashMap::with_max_entries(16384, 0);

/// `--io`: a sync of a redo fd begins on thread `id`: block requests its
/// thread or the journal sends until it ends are the sync's. (1, the
/// attributed data requests issued so far) when counted in flight, (0, 0)
/// when not; its end takes it off.
#[inline(always)]
pub(crate) fn io_sync_begins(fd: u32) -> (u32, i64) {
    // Both halves defined on every path: an `Option`'s payload left
    // undefined on `None` became a read of unwritten stack, which Linux
    // 5.10's verifier refuses.
    if cfg_u32(&IO_DEV) == 0 || REDO_FDS.get_ptr(fd).is_none() {
        return (0, 0);
    }
    let Some(st) = IO_STATE.get_ptr_mut(0) else {
        return (0, 0);
    };
    xadd(unsafe { &raw mut (*st).inflight }, 1);
    (1, unsafe {
        core::ptr::read_volatile(&raw const (*st).data_issued)
    })
}

/// The end of a redo sync [`io_sync_begins`] counted in flight: off the
/// count, and said when no attributed data request was issued during it
/// (`issued`: the count when it began).
#[inline(always)]
pub(crate) fn io_sync_ends(issued: i64) {
    if let Some(st) = IO_STATE.get_ptr_mut(0) {
        xadd(unsafe { &raw mut (*st).inflight }, -1);
        // SAFETY: a plain read of the shared slot.
        let now = unsafe { core::ptr::read_volatile(&raw const (*st).data_issued) };
        if now == issued {
            bump(Counter::IoSyncsWithoutWrite);
        }
    }
}

/// The device of a block tracepoint's record, when it is the one watched.
#[inline(always)]
pub(crate) fn io_dev_matches(ctx: &TracePointContext) -> bool {
    let dev = cfg_u32(&IO_DEV);
    dev != 0 && unsafe { ctx.read_at::<u32>(8) }.unwrap_or(0) == dev
}

/// Whether any redo sync is in flight now.
#[inline(always)]
pub(crate) fn io_inflight() -> bool {
    let Some(st) = IO_STATE.get_ptr(0) else {
        return false;
    };
    // SAFETY: a plain read of the shared slot.
    unsafe { core::ptr::read_volatile(&raw const (*st).inflight) > 0 }
}

/// Whether the current thread is inside a redo sync itself.
#[inline(always)]
pub(crate) fn in_redo_sync() -> bool {
    let id = bpf_get_current_pid_tgid();
    SYNC_START
        .get_ptr(id)
        .is_some_and(|s| unsafe { (*s).io } != 0)
}

/// Whether the current task is the filesystem's journal writer. XFS
/// writes its log from kernel workers, as the page-cache flusher does
/// other files' data: there only metadata requests (`meta`: an `M` in
/// rwbs, as XFS marks its log writes) count as the journal's.
#[inline(always)]
pub(crate) fn is_journal_thread(meta: bool) -> bool {
    let Ok(comm) = bpf_get_current_comm() else {
        return false;
    };
    // The first 8 bytes as one word: no memcmp to link on this target.
    let head = u64::from_le_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    match cfg_u32(&IO_JOURNAL_THREADS) {
        x if x == JournalThreads::Jbd2 as u32 => head & 0xff_ffff_ffff == JBD2,
        x if x == JournalThreads::Kworker as u32 => meta && head == KWORKER,
        _ => false,
    }
}

/// Whether a `block_bio_queue` record's rwbs has the metadata flag.
#[inline(always)]
pub(crate) fn bio_is_meta(ctx: &TracePointContext) -> bool {
    let r = unsafe { ctx.read_at::<[u8; 8]>(cfg_u32(&BIO_RWBS_OFF) as usize) }.unwrap_or([0; 8]);
    r[1] == b'M' || r[2] == b'M' || r[3] == b'M' || r[4] == b'M' || r[5] == b'M' || r[6] == b'M'
}

/// `jbd2/` and `kworker/` as little-endian words.
pub(crate) const JBD2: u64 = u64::from_le_bytes(*b"jbd2/\0\0\0");

pub(crate) const KWORKER: u64 = u64::from_le_bytes(*b"kworker/");

/// `block:block_bio_queue`, in the submitter's context: a bio for the
/// redo sync in flight (its own thread's, or the journal's) is tagged by
/// sector until its request is issued.
#[tracepoint]
pub fn io_bio_queue(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    if !io_inflight() {
        return 0;
    }
    let flags = if in_redo_sync() {
        IO_ATTRIBUTED
    } else if is_journal_thread(bio_is_meta(&ctx)) {
        IO_ATTRIBUTED | IO_JOURNAL
    } else {
        return 0;
    };
    let sector: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let tag = IoTag {
        ts: unsafe { bpf_ktime_get_ns() },
        flags,
        _pad: 0,
    };
    let _ = IO_TAGS.insert(sector, tag, 0);
    0
}

/// The `rwbs` bytes of a block tracepoint record at `off`.
#[inline(always)]
pub(crate) fn rwbs_at(ctx: &TracePointContext, off: &u32) -> (bool, bool, bool) {
    rwbs_kind(unsafe { ctx.read_at::<[u8; 4]>(cfg_u32(off) as usize) }.unwrap_or([0; 4]))
}

/// `block:block_rq_issue`: the request goes to the device. Every request
/// on it is timed (the device's totals); one whose bio was tagged, or a
/// cache flush while a redo sync is in flight, is the sync's.
#[tracepoint]
pub fn io_rq_issue(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let sector: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let bytes: u32 = unsafe { ctx.read_at(cfg_u32(&ISSUE_BYTES_OFF) as usize) }.unwrap_or(0);
    let (flush, _, fua) = rwbs_at(&ctx, &ISSUE_RWBS_OFF);
    let mut flags = 0;
    let key = if flush {
        flags |= IO_FLUSH;
        if io_inflight() {
            flags |= IO_ATTRIBUTED;
            if !in_redo_sync() && is_journal_thread(false) {
                flags |= IO_JOURNAL;
            }
        }
        u64::MAX
    } else {
        if let Some(tag) = unsafe { IO_TAGS.get(sector) } {
            flags |= tag.flags;
            add(Counter::IoQueueNs, now.saturating_sub(tag.ts));
            let _ = IO_TAGS.remove(sector);
            if let Some(st) = IO_STATE.get_ptr_mut(0) {
                xadd(unsafe { &raw mut (*st).data_issued }, 1);
            }
        }
        sector
    };
    if fua {
        flags |= IO_FUA;
    }
    let is = IoIssued {
        ts: now,
        bytes,
        flags,
    };
    if IO_ISSUED.insert(key, is, 0).is_err() {
        bump(Counter::IoLost);
    }
    0
}

/// `block:block_rq_complete`: the device is done with a request.
#[tracepoint]
pub fn io_rq_complete(ctx: TracePointContext) -> u32 {
    if !io_dev_matches(&ctx) {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let (flush, _, _) = rwbs_at(&ctx, &COMPLETE_RWBS_OFF);
    let key = if flush {
        u64::MAX
    } else {
        unsafe { ctx.read_at::<u64>(16) }.unwrap_or(u64::MAX)
    };
    let Some(is) = (unsafe { IO_ISSUED.get(key) }).copied() else {
        return 0;
    };
    let _ = IO_ISSUED.remove(key);
    let ns = now.saturating_sub(is.ts);
    bump(Counter::DevReqs);
    add(Counter::DevBytes, is.bytes as u64);
    add(Counter::DevDeviceNs, ns);
    record_kind(HistKind::DevDevice, ns);
    if is.flags & IO_ATTRIBUTED == 0 {
        return 0;
    }
    if is.flags & IO_FLUSH != 0 {
        bump(Counter::IoFlushes);
    } else {
        bump(Counter::IoReqs);
        add(Counter::IoBytes, is.bytes as u64);
    }
    if is.flags & IO_FUA != 0 {
        bump(Counter::IoFua);
    }
    if is.flags & IO_JOURNAL != 0 {
        bump(Counter::IoJournalReqs);
        add(Counter::IoJournalDeviceNs, ns);
        add(Counter::IoJournalBytes, is.bytes as u64);
    }
    add(Counter::IoDeviceNs, ns);
    record_kind(HistKind::IoDevice, ns);
    0
}
