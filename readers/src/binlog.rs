//! Why a binlog group closed, as the records and the report name it.
use tracer_ebpf::CloseReason;

/// Why a binlog group closed: what ended its leader's wait for more
/// commits (`CloseReason` by its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The no-delay count was reached (MySQL's
    /// `binlog_group_commit_sync_no_delay_count`, MariaDB's
    /// `binlog_commit_wait_count`).
    Count,
    /// The delay ran out (`binlog_group_commit_sync_delay`,
    /// `binlog_commit_wait_usec`).
    Timeout,
    /// MariaDB: a queued transaction has a lock waiter.
    LockWait,
    /// No delay configured: the group closed at once.
    NoWait,
}

impl Reason {
    /// In the order they are shown.
    pub const ALL: [Reason; 4] = [
        Reason::Count,
        Reason::Timeout,
        Reason::LockWait,
        Reason::NoWait,
    ];

    /// The name in JSON, CSV and the exporter's `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Count => "count",
            Reason::Timeout => "timeout",
            Reason::LockWait => "lock_wait",
            Reason::NoWait => "no_wait",
        }
    }

    /// The kernel side's reason.
    pub fn kernel(self) -> CloseReason {
        match self {
            Reason::Count => CloseReason::Count,
            Reason::Timeout => CloseReason::Timeout,
            Reason::LockWait => CloseReason::LockWait,
            Reason::NoWait => CloseReason::NoWait,
        }
    }
}
