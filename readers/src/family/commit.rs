//! The commit path as each family names it: its stages (the kernel's
//! slots, in path order) and where a semi-sync source waits for its
//! replica's acknowledgement.
use tracer_ebpf::CommitStage;

/// Where a semi-sync source waits for its replica's acknowledgement, per
/// wait point. MySQL calls the semisync plugin through the server's
/// hook delegates, exported by the stock binary and called only while
/// an observer (the plugin) is installed: `after_sync` once per binlog
/// group (AFTER_SYNC), `after_commit` once per transaction (AFTER_COMMIT,
/// and for nothing with AFTER_SYNC). MariaDB's semi-sync is built in:
/// both wait points end in `commit_trx`, once per transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckHooks {
    pub at_sync: &'static [&'static str],
    /// What the summary calls the sync point's hook.
    pub at_sync_name: &'static str,
    /// None where `at_sync` serves both wait points.
    pub at_commit: Option<&'static [&'static str]>,
    /// The plugin that makes the hooks a semi-sync wait, where they serve
    /// every observer (MySQL's delegates call Group Replication's too):
    /// the hooks are probed only where the server has it loaded. None:
    /// built in.
    pub library: Option<&'static str>,
}

/// What the summary calls MySQL's after-commit hook.
pub const AT_COMMIT_NAME: &str = "after_commit";

pub const MYSQL_ACK: AckHooks = AckHooks {
    at_sync: &["_ZN23Binlog_storage_delegate10after_syncEP3THDPKcy"],
    at_sync_name: "after_sync",
    at_commit: Some(&["_ZN14Trans_delegate12after_commitEP3THDb"]),
    library: Some("semisync_source.so"),
};

pub const MARIADB_ACK: AckHooks = AckHooks {
    at_sync: &["_ZN21Repl_semi_sync_master10commit_trxEPKcy"],
    at_sync_name: "commit_trx",
    at_commit: None,
    library: None,
};

/// A commit-path stage as a family names it: the kernel's slot, the
/// name the summary and JSON use, and the tick line's short form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageName {
    pub slot: CommitStage,
    pub name: &'static str,
    pub short: &'static str,
}

const fn st(slot: CommitStage, name: &'static str, short: &'static str) -> StageName {
    StageName { slot, name, short }
}

/// MySQL's stages, in path order: a group member's commit passes the
/// group's hook (`before_commit`, in `MYSQL_BIN_LOG::commit`) before the
/// binlog's group commit; its flush-stage leader asks InnoDB for the redo
/// flush inside the binlog's flush stage, and its committing threads
/// never flush the redo themselves (log_writer and log_flusher do).
pub const MYSQL_STAGES: &[StageName] = {
    use CommitStage as S;
    &[
        st(S::GroupFlowControl, "group: flow control", "gr_flow"),
        st(S::GroupSend, "group: send", "gr_send"),
        st(
            S::GroupConsensus,
            "group: consensus and certification",
            "gr_cert",
        ),
        st(S::GroupRest, "group: rest of before_commit", "gr_rest"),
        st(S::BinlogQueueWait, "binlog flush: queue wait", "bl_queue"),
        st(S::BinlogFlush, "binlog flush", "bl_flush"),
        st(S::RedoLeaderWrite, "redo write (leader)", "redo_write"),
        st(S::RedoLeaderSync, "redo fsync (leader)", "redo_sync"),
        st(
            S::RedoFollowerWait,
            "redo wait (log_writer, log_flusher)",
            "redo_wait",
        ),
        st(S::BinlogSyncWait, "binlog sync wait", "bl_syncwait"),
        st(S::BinlogSync, "binlog sync", "bl_sync"),
        st(S::BinlogCommit, "binlog commit stage", "bl_commit"),
        st(
            S::BinlogFollowerWait,
            "binlog group wait (follower)",
            "bl_follower",
        ),
        st(S::ReplicaAck, "replica ack", "ack"),
    ]
};

/// The Galera stage that holds a flow-control pause (the provider's
/// replication waits there while the cluster is paused).
pub const GALERA_CERTIFY: &str = "galera: replicate and certify";

/// MariaDB's stages, in path order: a Galera node's commit replicates
/// and certifies its write set (in wsrep's `before_prepare` where the
/// commit has two phases, else in its `before_commit`) and waits for its
/// turn in the cluster's commit order before it commits; it flushes the
/// redo in prepare, before the binlog's group.
pub const MARIADB_STAGES: &[StageName] = {
    use CommitStage as S;
    &[
        st(S::GroupConsensus, GALERA_CERTIFY, "gl_cert"),
        st(S::GroupSend, "galera: commit order", "gl_order"),
        st(S::GroupRest, "galera: rest of before_commit", "gl_rest"),
        st(S::RedoLeaderWrite, "redo write (leader)", "redo_write"),
        st(S::RedoLeaderSync, "redo fsync (leader)", "redo_sync"),
        st(S::RedoFollowerWait, "redo wait (follower)", "redo_wait"),
        st(S::BinlogQueueWait, "binlog queue wait (leader)", "bl_queue"),
        st(
            S::BinlogFlush,
            "binlog group: wait, write caches (leader)",
            "bl_group",
        ),
        st(
            S::BinlogSync,
            "binlog write-out and sync (leader)",
            "bl_sync",
        ),
        st(
            S::BinlogFollowerWait,
            "binlog group wait (follower)",
            "bl_follower",
        ),
        st(S::ReplicaAck, "replica ack", "ack"),
    ]
};
