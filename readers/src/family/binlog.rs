//! Where each family's binlog group commit has its boundaries.
use super::{
    identity::Version,
    redo::{v, Pred},
};

/// Where a family's binlog group commit has its boundaries: each field is
/// a function (mangled names, alternatives best first) and the program
/// that goes there. The path is data: a new family or version adds a
/// row, not a branch. See tracer-ebpf's `binlog_*` programs.
#[derive(Clone, Debug)]
pub struct BinlogProfile {
    pub name: &'static str,
    pub from: Version,
    pub to: Version,
    /// A flush-stage leader begins writing its queue (entry).
    pub flush_open: &'static [&'static str],
    /// Called by that leader once per member it writes (entry): one per
    /// commit, the only per-commit probe of the set.
    pub member: &'static [&'static str],
    /// The binlog write, whose return ends the flush stage (entry and
    /// return). MariaDB: `flush_and_sync`, its write-out and sync.
    pub write: &'static [&'static str],
    /// Where a group closes: the sync stage's queue fetch, with the
    /// predicate that picks the sync stage out of the others. None: the
    /// group closes with its flush stage.
    pub group_close: Option<(&'static [&'static str], Pred)>,
    /// The binlog sync (entry and return), where it is a stage of its own.
    pub sync: Option<&'static [&'static str]>,
    /// The commit stage's leader committing its queue (entry and return),
    /// where one thread commits the group.
    pub commit: Option<&'static [&'static str]>,
    /// Where a commit enters the binlog's group commit (entry; per
    /// commit, exact tier): a flush leader's wait from there to its flush
    /// stage is the group's queue wait.
    pub enter: Option<&'static [&'static str]>,
    /// Whether a commit's wait in the group commit ends at `enter`'s
    /// return (a second trap per commit). Not where `enter` is the last
    /// work of the commit function that any stage times (MySQL's
    /// `ordered_commit` inside `ha_commit_trans`): the commit's own return
    /// ends the wait there. MariaDB commits in InnoDB after its
    /// `write_transaction_to_binlog_events` returns, so it needs it.
    pub enter_return: bool,
    /// The redo flush a flush-stage leader runs for its queue (entry and
    /// return), where it runs inside the flush stage.
    pub redo: Option<&'static [&'static str]>,
    /// The flush-stage leader asks InnoDB for one durable redo flush for
    /// its whole group (MySQL 8+), so the commits group here and InnoDB's
    /// n_write:n_flush stays near 1. MariaDB makes the durable redo call
    /// per transaction in prepare: its commits group at the redo flush,
    /// and its binlog groups are a second grouping.
    pub forms_group: bool,
    /// Where a group's leader waits for more commits before the group
    /// closes, and how the wait's end says why it closed.
    pub close_wait: Option<CloseWait>,
}

/// A leader's wait for a fuller group, per family.
#[derive(Clone, Copy, Debug)]
pub enum CloseWait {
    /// MySQL's sync leader polls the queue (`function`, entry and return;
    /// the delay in µs its third argument) in steps of a tenth of the
    /// delay, one call to `step` each, until the queue holds the count or
    /// the delay is spent: the steps taken say which.
    Polled {
        function: &'static [&'static str],
        step: &'static [&'static str],
    },
    /// MariaDB's leader adds 1 to one of the server's three trigger
    /// counters at each exit of `function` (probes/triggers.rs): each add
    /// is probed.
    Triggers { function: &'static [&'static str] },
}

/// `Commit_stage_manager::StageID::SYNC_STAGE` (flush 0, sync 1, commit 2,
/// after-commit 3), the second argument of `fetch_queue_acquire_lock`
/// after `this`.
const MYSQL_SYNC_STAGE: Pred = Pred::equals(1, 0xffff_ffff, 1);

/// MySQL's rows.
pub const MYSQL: &[BinlogProfile] = &[BinlogProfile {
    name: "mysql-8.0.30+ binlog",
    from: v(8, 0, 30),
    to: v(9, 999, 999),
    flush_open: &[
        // 9.x: (total_bytes, out_queue); 8.0: (total_bytes, rotate, out_queue).
        "_ZN13MYSQL_BIN_LOG25process_flush_stage_queueEPyPP3THD",
        "_ZN13MYSQL_BIN_LOG25process_flush_stage_queueEPyPbPP3THD",
    ],
    member: &["_ZN13MYSQL_BIN_LOG19flush_thread_cachesEP3THD"],
    write: &["_ZN13MYSQL_BIN_LOG19flush_cache_to_fileEPy"],
    group_close: Some((
        &["_ZN20Commit_stage_manager24fetch_queue_acquire_lockENS_7StageIDE"],
        MYSQL_SYNC_STAGE,
    )),
    sync: Some(&["_ZN13MYSQL_BIN_LOG16sync_binlog_fileEb"]),
    commit: Some(&["_ZN13MYSQL_BIN_LOG26process_commit_stage_queueEP3THDS1_"]),
    enter: Some(&["_ZN13MYSQL_BIN_LOG14ordered_commitEP3THDbb"]),
    enter_return: false,
    // `ha_flush_logs(bool binlog_group_flush)`, called by the flush
    // leader after it fetched its queue.
    redo: Some(&["_Z13ha_flush_logsb"]),
    forms_group: true,
    // Called before every sync group's fetch when it syncs (and with
    // `sync_binlog=0`), whatever the delay: no delay returns at once.
    close_wait: Some(CloseWait::Polled {
        function: &["_ZN20Commit_stage_manager21wait_count_or_timeoutEmlNS_7StageIDE"],
        step: &["_Z8my_sleepl", "_Z8my_sleepm"],
    }),
}];

/// MariaDB's rows.
pub const MARIADB: &[BinlogProfile] = &[
    // MariaDB: one leader writes its queue (`write_transaction_or_stmt` per
    // member), then writes out and syncs the binlog (`flush_and_sync`); the
    // group is done there (the server's `Binlog_group_commits` and
    // `Binlog_commits` count the same). Exported even by Debian's stripped
    // build.
    BinlogProfile {
        name: "mariadb-10.5+ binlog",
        from: v(10, 5, 0),
        to: v(11, 999, 999),
        flush_open: &["_ZN13MYSQL_BIN_LOG23trx_group_commit_leaderEPNS_18group_commit_entryE"],
        member: &["_ZN13MYSQL_BIN_LOG25write_transaction_or_stmtEPNS_18group_commit_entryEy"],
        write: &["_ZN13MYSQL_BIN_LOG14flush_and_syncEPb"],
        group_close: None,
        sync: None,
        commit: None,
        // It queues the commit (`queue_for_group_commit`) and, where the
        // commit found the queue empty, leads the group from there.
        enter: Some(&[
            "_ZN13MYSQL_BIN_LOG34write_transaction_to_binlog_eventsEPNS_18group_commit_entryE",
        ]),
        enter_return: true,
        // The redo is flushed per transaction in prepare, before the
        // group: no redo flush inside its stages.
        redo: None,
        forms_group: false,
        // Called only with `binlog_commit_wait_count` set: its groups
        // are otherwise closed with no wait.
        close_wait: Some(CloseWait::Triggers {
            function: &["_ZN13MYSQL_BIN_LOG27wait_for_sufficient_commitsEv"],
        }),
    },
];
