//! The texts `--help`, the man pages and `docs/` share: the live view's
//! columns and the exit codes. Plain data, imported by the CLI
//! definitions and the page generators alike.

/// Exit codes of every command.
pub const EXIT_CODES: &[(&str, &str)] = &[
    ("0", "the run finished (also after Ctrl-C during the run, or the traced server exiting)"),
    ("2", "bad input or a failed setup (one line on stderr says what and what to do)"),
    ("3", "the server was lost or could not write during the run (the summary covers the run up to then)"),
    ("4", "--replica semi-sync fell back to async during the run (the summary says so; --allow-async-fallback accepts it)"),
    ("130", "interrupted before the run started (everything started was stopped and removed)"),
];

/// The main command's live columns.
pub const MAIN_COLUMNS: &[(&str, &str)] = &[
    ("tps, p99_ms", "the workload's transactions per second and commit latency p99"),
    ("n_write (srv_commits)", "durable log_write_up_to calls; srv_commits when the binary hides InnoDB's symbols and commits are counted at the server layer"),
    ("n_flush", "redo flushes: calls of the redo flush function, else redo fsyncs counted in the kernel"),
    ("write/flush", "n_write per n_flush: the group-commit batching factor"),
    ("commits/flush", "the workload's commits per n_flush: exact whatever the probes can see"),
    ("redo_p99_us", "p99 latency of the redo log's fsync/fdatasync (- where --probes light counts them at the C library's entry, untimed)"),
    ("binlog_fsync", "fsync/fdatasync calls on binlog files"),
    ("bl_groups, bl_p50, bl_p99", "where the binlog's group commit is probed (MySQL 8.0.30+ with the binlog on): binlog groups (one binlog fsync each with sync_binlog=1) and the p50/p99 of their sizes in commits, exact; with the binlog on, commits group there, not at the redo flush"),
    ("cp_us, cp_top", "with --commit-path: the commits' mean time inside the server (the commit function's entry to its return), and the stage with the largest share of it with that share (redo_write/redo_sync: the redo flush as leader; redo_wait: as follower; bl_*: the binlog's stages)"),
    ("cpu%, runq%", "with --commit-path: of the commits' time inside the server, the share their threads spent on a CPU and runnable waiting for one (the rest they were blocked: I/O, a lock, a condition), from the kernel's own scheduler accounting read at the commit's ends"),
    ("io/sync, KiB/sync, fl/sync, dev_us/syn, dev%, jnl%", "with --io: per redo sync, the block requests with data it caused and their KiB, the cache flushes, the device time, and the shares of the sync the device and the journal explain"),
];

/// `commitscope trace`'s columns.
pub const TRACE_COLUMNS: &[(&str, &str)] = &[
    ("n_write", "calls of the server's log_write_up_to (MySQL 5.6: calls with wait == LOG_WAIT_ONE_GROUP, the study's figure); named commits where they are counted instead: at the server layer (ha_commit_one_phase + the binlog's log_and_order) when the binary hides InnoDB's symbols, or by the server's Handler_commit with --probes light"),
    ("durable", "the calls that asked for a flush to disk (the version's durable argument; 5.6: flush_to_disk != 0); - where commits are counted instead"),
    ("n_flush", "calls of the redo flush function (log_t::flush, Log_file_handle::fsync, fil_flush of the redo space ...); where it is inlined or absent, the redo files' fsyncs counted in the kernel"),
    ("write/flush", "durable (or commits) per n_flush: the group-commit batching factor"),
    ("redo_fsync, redo_p50_us, redo_p99_us", "fsync/fdatasync calls on the redo log (ib_logfile*, #ib_redo*) by the server, and their latency (a log2 histogram in the kernel, interpolated; - where --probes light counts them at the C library's entry, untimed)"),
    ("binlog_fsync, data_fsync", "the same for binlog files (name.NNNNNN) and data files (*.ibd, ibdata*, *.dblwr, undo*)"),
    ("bl_groups, bl_p50, bl_p99", "where the binlog's group commit is probed (MySQL 8.0.30+ with the binlog on): binlog groups (one binlog fsync each with sync_binlog=1) and the p50/p99 of their sizes in commits, exact; with the binlog on, commits group there, not at the redo flush"),
    ("cp_us, cp_top", "with --commit-path: the commits' mean time inside the server (the commit function's entry to its return), and the stage with the largest share of it with that share (redo_write/redo_sync: the redo flush as leader; redo_wait: as follower; bl_*: the binlog's stages)"),
    ("cpu%, runq%", "with --commit-path: of the commits' time inside the server, the share their threads spent on a CPU and runnable waiting for one (the rest they were blocked: I/O, a lock, a condition), from the kernel's own scheduler accounting read at the commit's ends"),
    ("io/sync, KiB/sync, fl/sync, dev_us/syn, dev%, jnl%", "with --io: per redo sync, the block requests with data it caused and their KiB, the cache flushes, the device time, and the shares of the sync the device and the journal explain"),
];

/// Plain-text form for clap's `after_long_help`.
fn text(title: &str, rows: &[(&str, &str)]) -> String {
    let mut s = format!("{title}:\n");
    for (k, v) in rows {
        s.push_str(&format!("  {k:<14} {v}\n"));
    }
    s
}

/// `commitscope --help`'s closing block.
pub fn main_after_help() -> String {
    format!(
        "{}\n{}",
        text("Columns", MAIN_COLUMNS),
        text("Exit codes", EXIT_CODES)
    )
}

/// `commitscope trace --help`'s closing block.
pub fn trace_after_help() -> String {
    format!(
        "{}\n{}",
        text("Columns", TRACE_COLUMNS),
        text("Exit codes", EXIT_CODES)
    )
}

/// The same rows as a Markdown table, for the pages under `docs/` that
/// show them: the suite checks that each page's copy is this one.
pub fn markdown(head: (&str, &str), rows: &[(&str, &str)]) -> String {
    let mut s = format!("| {} | {} |\n|---|---|\n", head.0, head.1);
    let cell = |x: &str| x.replace('*', "\\*").replace('|', "\\|");
    for (k, v) in rows {
        s.push_str(&format!("| {} | {} |\n", cell(k), cell(v)));
    }
    s
}
