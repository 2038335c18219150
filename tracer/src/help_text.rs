//! The texts `--help`, the man pages and `docs/` share: the live view's
//! columns and the exit codes. Plain data, imported by the CLI
//! definitions and the page generators alike.

/// One exit code and what it means.
pub type Code = (&'static str, &'static str);

const OK_RUN: Code = (
    "0",
    "the run finished (also after Ctrl-C during the run, or the traced server exiting)",
);
const BAD: Code = (
    "2",
    "bad input or a failed setup (one line on stderr says what and what to do)",
);
const LOST: Code = (
    "3",
    "the server was lost or could not write, or its group lost its majority, during the run (the summary covers the run up to then)",
);
const BEFORE: Code = (
    "130",
    "interrupted before the run started (everything started was stopped and removed)",
);

/// The main command's exit codes (the table docs/main-command.md copies).
pub const EXIT_CODES: &[Code] = &[
    OK_RUN,
    BAD,
    LOST,
    ("4", "--replica semi-sync fell back to async during the run (the summary says so; --allow-async-fallback accepts it)"),
    BEFORE,
];

/// Each command's exit codes, by its name (`commitscope` for the main
/// command): only the codes that command can end with.
pub fn exit_codes(command: &str) -> &'static [Code] {
    match command {
        "trace" => &[
            ("0", "traced until Ctrl-C, SIGTERM, --duration or the server's exit (the summary covers it)"),
            BAD,
            ("130", "interrupted while reading symbols or attaching (nothing is left attached)"),
        ],
        "study" => &[
            ("0", "the scenarios ran (Ctrl-C during one ends the study; the table covers those done)"),
            BAD,
            BEFORE,
        ],
        "sweep" => &[
            ("0", "every cell ran"),
            BAD,
            ("3", "a cell's server was lost (the table covers the cells done)"),
            ("130", "interrupted at any point (the cells done are kept: the same command with --resume runs the rest)"),
        ],
        "workload" => &[
            ("0", "the run finished (also after Ctrl-C during the run)"),
            BAD,
            ("3", "the server could not write during the run (the summary covers the run up to then)"),
        ],
        "load" => &[
            ("0", "the data is loaded"),
            BAD,
            ("130", "interrupted (the load is marked incomplete: load again to go on)"),
        ],
        "check" => &[
            ("0", "TPC-C's consistency conditions 1-4 hold"),
            ("2", "bad input, no complete load, or a condition that does not hold (one line on stderr says which)"),
        ],
        "exporter" => &[
            ("0", "stopped by SIGTERM, SIGINT or SIGHUP (every probe detached)"),
            BAD,
        ],
        "probes" => &[
            ("0", "the plan is printed"),
            BAD,
            ("130", "interrupted during a debuginfod download (its temp file removed)"),
        ],
        "report" => &[("0", "the table, summaries and charts are rebuilt"), BAD],
        "completions" | "manpages" => &[("0", "written"), BAD],
        _ => EXIT_CODES,
    }
}

/// The main command's live columns.
pub const MAIN_COLUMNS: &[(&str, &str)] = &[
    ("time", "the tick's local wall-clock time"),
    ("tps, p99_ms", "the workload's transactions per second and commit latency p99"),
    ("n_write (srv_commits)", "durable log_write_up_to calls; srv_commits when the binary hides InnoDB's symbols and commits are counted at the server layer"),
    ("n_flush", "redo flushes: calls of the redo flush function, else redo fsyncs counted in the kernel"),
    ("write/flush", "n_write per n_flush: the group-commit batching factor"),
    ("commits/flush", "the workload's commits per n_flush: exact whatever the probes can see"),
    ("redo_p99_us", "p99 latency of the redo log's fsync/fdatasync (- where --probes light counts them at the C library's entry, untimed)"),
    ("binlog_fsync", "fsync/fdatasync calls on binlog files"),
    ("p50_batch, p99_batch", "the p50 and p99 of the tick's batch sizes: the durable write requests since the previous redo flush began, per flush (where commits are counted at the server layer: commits per redo fsync; - with --probes light)"),
    ("leaders, followers, wait_p99_us", "with --anatomy: durable writes whose own thread ran the redo flush before returning, those that returned without running it, and the p99 of the followers' wait (the leaders' where none followed); MySQL 8+: its log_flusher thread flushes, so every user thread is a follower"),
    ("bl_groups, bl_p50, bl_p99", "where the binlog's group commit is probed (MySQL 8.0.30+ with the binlog on): binlog groups (one binlog fsync each with sync_binlog=1) and the p50/p99 of their sizes in commits, exact; with the binlog on, commits group there, not at the redo flush"),
    ("cp_us, cp_top", "with --commit-path: the commits' mean time inside the server (the commit function's entry to its return), and the stage with the largest share of it with that share (redo_write/redo_sync: the redo flush as leader; redo_wait: as follower; bl_*: the binlog's stages; ack: the replica's acknowledgement; gr_*: a replication group's stages; sync_dev/sync_jnl/sync_oth: with --io, the leader's redo fsync in the device, the journal, the rest; rest: unattributed; every name in docs/commit-path.md)"),
    ("cpu%, runq%", "with --commit-path: of the commits' time inside the server, the share their threads spent on a CPU and runnable waiting for one (the rest they were blocked: I/O, a lock, a condition), from the kernel's own scheduler accounting read at the commit's ends"),
    ("io/sync, KiB/sync, fl/sync, dev_us/syn, dev%, jnl%", "with --io: per redo sync, the block requests with data it caused and their KiB, the cache flushes, the device time, and the shares of the sync the device and the journal explain"),
];

/// `commitscope trace`'s columns.
pub const TRACE_COLUMNS: &[(&str, &str)] = &[
    ("time", "the tick's local wall-clock time"),
    ("n_write (commits)", "calls of the server's log_write_up_to (MySQL 5.6: calls with wait == LOG_WAIT_ONE_GROUP, the study's figure); named commits where they are counted instead: at the server layer (ha_commit_one_phase + the binlog's log_and_order) when the binary hides InnoDB's symbols, or by the server's Handler_commit with --probes light"),
    ("durable", "the calls that asked for a flush to disk (the version's durable argument; 5.6: flush_to_disk != 0); - where commits are counted instead"),
    ("n_flush", "calls of the redo flush function (log_t::flush, Log_file_handle::fsync, fil_flush of the redo space ...); where it is inlined or absent, the redo files' fsyncs counted in the kernel"),
    ("write/flush", "durable (or commits) per n_flush: the group-commit batching factor"),
    ("redo_fsync, redo_p50_us, redo_p99_us", "fsync/fdatasync calls on the redo log (ib_logfile*, #ib_redo*) by the server, and their latency (a log2 histogram in the kernel, interpolated; - where --probes light counts them at the C library's entry, untimed)"),
    ("binlog_fsync, data_fsync", "the same for binlog files (name.NNNNNN) and data files (*.ibd, ibdata*, *.dblwr, undo*)"),
    ("p50_batch, p99_batch", "the p50 and p99 of the tick's batch sizes: the durable write requests since the previous redo flush began, per flush (where commits are counted at the server layer: commits per redo fsync; - with --probes light)"),
    ("leaders, followers, wait_p99_us", "unless --no-write-timing: durable writes whose own thread ran the redo flush before returning, those that returned without running it, and the p99 of the followers' wait (the leaders' where none followed); MySQL 8+: its log_flusher thread flushes, so every user thread is a follower"),
    ("bl_groups, bl_p50, bl_p99", "where the binlog's group commit is probed (MySQL 8.0.30+ with the binlog on): binlog groups (one binlog fsync each with sync_binlog=1) and the p50/p99 of their sizes in commits, exact; with the binlog on, commits group there, not at the redo flush"),
    ("cp_us, cp_top", "with --commit-path: the commits' mean time inside the server (the commit function's entry to its return), and the stage with the largest share of it with that share (redo_write/redo_sync: the redo flush as leader; redo_wait: as follower; bl_*: the binlog's stages; ack: the replica's acknowledgement; gr_*: a replication group's stages; sync_dev/sync_jnl/sync_oth: with --io, the leader's redo fsync in the device, the journal, the rest; rest: unattributed; every name in docs/commit-path.md)"),
    ("cpu%, runq%", "with --commit-path: of the commits' time inside the server, the share their threads spent on a CPU and runnable waiting for one (the rest they were blocked: I/O, a lock, a condition), from the kernel's own scheduler accounting read at the commit's ends"),
    ("io/sync, KiB/sync, fl/sync, dev_us/syn, dev%, jnl%", "with --io: per redo sync, the block requests with data it caused and their KiB, the cache flushes, the device time, and the shares of the sync the device and the journal explain"),
];

/// Plain-text form for clap's `after_long_help`.
/// Each name on its line, its meaning indented on the next: names as
/// long as `n_write (srv_commits)` would run into a padded column.
fn text(title: &str, rows: &[(&str, &str)]) -> String {
    let mut s = format!("{title}:\n");
    for (k, v) in rows {
        s.push_str(&format!("  {k}\n          {v}\n"));
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
        text("Exit codes", exit_codes("trace"))
    )
}

/// Another command's closing block: its exit codes.
pub fn codes_after_help(command: &str) -> String {
    text("Exit codes", exit_codes(command))
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

/// Panics naming each column of `header` (a live view's header line)
/// that no key of `rows` defines. A key defines the names it lists
/// (`a, b`) and any in parentheses (`n_write (srv_commits)`).
#[cfg(test)]
pub fn assert_defined(header: &str, rows: &[(&str, &str)]) {
    let defined: Vec<&str> = rows
        .iter()
        .flat_map(|(k, _)| k.split([',', ' ', '(', ')']))
        .filter(|w| !w.is_empty())
        .collect();
    let missing: Vec<&str> = header
        .split_whitespace()
        .filter(|c| !defined.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "columns not in --help: {missing:?} (header: {header})"
    );
}
