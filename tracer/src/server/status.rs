//! The server's own counters (`SHOW GLOBAL STATUS`) over the measured
//! window, set beside the kernel's and the workload's counts: a check a
//! reader can trust more than either number alone (docs/the-study.md).
use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;

use crate::error::{Error, Result};

/// Numeric status counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status(pub BTreeMap<String, u64>);

/// A status read and when it was taken: the middle of its round trip up
/// to the answer's first packet (the server's snapshot is somewhere
/// inside it; under load the round trip took tens of ms, hundreds of
/// commits at 100 clients).
#[derive(Clone, Debug)]
pub struct Timed {
    pub status: Status,
    pub at: std::time::Instant,
}

/// [`read`], timed.
pub async fn read_timed(conn: &mut mysql_async::Conn) -> Result<Timed> {
    let sent = std::time::Instant::now();
    let (status, answered) = read_stamped(conn).await?;
    Ok(Timed {
        status,
        at: sent + (answered - sent) / 2,
    })
}

impl Status {
    /// What counter `name` [`moved`] from `before` to this read (none
    /// where either read lacks it).
    pub fn since(&self, before: &Status, name: &str) -> Option<u64> {
        Some(moved(*self.0.get(name)?, *before.0.get(name)?))
    }

    /// The counters at `at`, between two timed reads: each moved
    /// linearly from `pre`'s value to `post`'s. The window's start is
    /// read by the workload and the probes at one instant while commits
    /// go on; the server answers one round trip away, on either side.
    /// Reading it just before and just after, and taking its values at
    /// our instant, leaves only the round trips' asymmetry (the server's
    /// read taken late or early put 2-6 % of a 2 s window outside it
    /// under load, with a read on one side only).
    pub fn at(pre: &Timed, post: &Timed, at: std::time::Instant) -> Status {
        let span = post.at.saturating_duration_since(pre.at).as_secs_f64();
        let f = if span > 0.0 {
            (at.saturating_duration_since(pre.at).as_secs_f64() / span).clamp(0.0, 1.0)
        } else {
            1.0
        };
        Status(
            post.status
                .0
                .iter()
                .map(|(k, &b)| {
                    let v = match pre.status.0.get(k) {
                        Some(&a) if b >= a => a + ((b - a) as f64 * f).round() as u64,
                        _ => b,
                    };
                    (k.clone(), v)
                })
                .collect(),
        )
    }
}

/// `SHOW GLOBAL STATUS`, and where the server is a member of a running
/// replication group, the member's own transaction counters (by their
/// column names): status has no count of the transactions a member
/// proposed to its group.
pub async fn read(conn: &mut mysql_async::Conn) -> Result<Status> {
    read_stamped(conn).await.map(|(st, _)| st)
}

/// [`read`], and when the server's answer began to arrive. The server
/// takes its snapshot before it sends the first packet; the rows' transfer
/// and parsing come after it (some 500 rows, in a debug build on a
/// loaded host: the middle of the whole round trip fell after the
/// snapshot, and a 2 s window's server counters read 7 % above ours in
/// run 21; from the first packet, 0.0-0.5 % beside six busy loops).
async fn read_stamped(conn: &mut mysql_async::Conn) -> Result<(Status, std::time::Instant)> {
    let failed = |e: mysql_async::Error| Error::Runtime(format!("SHOW GLOBAL STATUS failed: {e}"));
    let answer = conn
        .query_iter("SHOW GLOBAL STATUS")
        .await
        .map_err(failed)?;
    let answered = std::time::Instant::now();
    let rows: Vec<(String, String)> = answer.collect_and_drop().await.map_err(failed)?;
    let mut st = Status(
        rows.into_iter()
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect(),
    );
    for row in readers::family::FAMILIES
        .iter()
        .filter_map(|f| f.group.as_ref())
    {
        if !st.0.keys().any(|k| k.starts_with(row.status_prefix)) {
            continue;
        }
        let local: Option<mysql_async::Row> =
            conn.query_first(row.local_stats).await.ok().flatten();
        if let Some(r) = local {
            for (i, name) in row.local_columns.iter().enumerate() {
                if let Some(Ok(v)) = r.get_opt::<u64, _>(i) {
                    st.0.insert(name.to_string(), v);
                }
            }
        }
    }
    Ok((st, answered))
}

/// How long a stalled server gets to answer [`waiting_for_space`].
const STALL_PROBE_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// During a stall: whether the server says a session waits for disk space
/// (MariaDB "Waiting for someone to free space", MySQL "Waiting for disk
/// space" — a binlog or temp-file write that hit ENOSPC and now sleeps).
/// Asked on a connection of its own, given up after half a second: a
/// frozen server answers nothing, and the control connection must not be
/// left mid-query.
pub async fn waiting_for_space(ep: &workload::conn::Endpoint) -> Option<String> {
    let ask = async {
        let mut c = workload::conn::connect(ep, None).await.ok()?;
        // Not information_schema: its temporary table needs the very disk
        // space that is missing (error 1021).
        let rows: Vec<mysql_async::Row> = c.query("SHOW FULL PROCESSLIST").await.ok()?;
        let _ = c.disconnect().await;
        rows.into_iter().find_map(|r| {
            let state: String = r.get_opt("State")?.ok()?;
            let info: Option<String> = r.get_opt("Info").and_then(|v| v.ok()).flatten();
            is_space_wait(&state).then_some((state, info))
        })
    };
    let (state, info) = tokio::time::timeout(STALL_PROBE_LIMIT, ask).await.ok()??;
    Some(match info {
        Some(q) => format!("a session is \"{state}\" (SHOW PROCESSLIST) in: {q}"),
        None => format!("a session is \"{state}\" (SHOW PROCESSLIST)"),
    })
}

/// MariaDB's and MySQL's process-list states for a write that waits for
/// disk space.
fn is_space_wait(state: &str) -> bool {
    state.starts_with("Waiting for someone to free space")
        || state.starts_with("Waiting for disk space")
}

/// What of ours a server counter is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ours {
    /// fsync/fdatasync on redo files, counted in the kernel.
    RedoFsyncs,
    /// write/pwrite calls on redo files, counted in the kernel.
    RedoWrites,
    /// fsync/fdatasync on redo + InnoDB data files.
    InnodbFsyncs,
    /// Transactions the workload committed.
    Commits,
    /// fsync/fdatasync on binlog files.
    BinlogFsyncs,
    /// Binlog groups counted by the binlog's probes.
    BinlogGroups,
    /// Commits those groups carried.
    BinlogGroupCommits,
    /// Binlog groups our probes saw close on the count, the delay, or a
    /// lock waiter (the leader's wait for a fuller group).
    ClosedByCount,
    ClosedByTimeout,
    ClosedByLockWait,
    /// A semi-sync source's waits for its replica, at the probed hook.
    AckWaits,
    /// Their time summed, µs.
    AckWaitUs,
    /// Commits through a replication group's hook.
    GroupCommits,
    /// The same, beside the server's count of data messages sent.
    GroupMessages,
    /// Their time waiting for consensus and certification, µs: beside
    /// the server's round trips of its data messages, and beside all its
    /// consensus rounds.
    GroupConsensusUs,
    GroupRoundsUs,
    /// Their time in flow control's check and wait, µs.
    GroupFlowUs,
    /// Calls of the group's consensus step that sent their commit
    /// (Galera's `certify`, but those interrupted before the write set
    /// was replicated), and those refused once sent (a failed
    /// certification, a brute-force abort).
    GroupCertifies,
    GroupCertFailures,
}

impl Ours {
    pub fn label(&self) -> &'static str {
        match self {
            Ours::RedoFsyncs => "redo fsyncs (kernel)",
            Ours::RedoWrites => "redo writes (kernel)",
            Ours::InnodbFsyncs => "redo+data fsyncs (kernel)",
            Ours::Commits => "commits (workload)",
            Ours::BinlogFsyncs => "binlog fsyncs (kernel)",
            Ours::BinlogGroups => "binlog groups (probes)",
            Ours::BinlogGroupCommits => "their commits (probes)",
            Ours::ClosedByCount => "groups closed by the count (probes)",
            Ours::ClosedByTimeout => "groups closed by the delay (probes)",
            Ours::ClosedByLockWait => "groups closed by a lock wait (probes)",
            Ours::AckWaits => "semi-sync waits (probes)",
            Ours::AckWaitUs => "their µs (probes)",
            Ours::GroupCommits => "commits through the group (probes)",
            Ours::GroupMessages => "commits through the group (probes; server: data messages)",
            Ours::GroupConsensusUs => {
                "their µs in consensus+certification (probes; server: to delivery only)"
            }
            Ours::GroupRoundsUs => {
                "their µs in consensus+certification (probes; server: per round, all messages)"
            }
            Ours::GroupFlowUs => {
                "their µs in flow control (probes: every check; server: throttled only)"
            }
            Ours::GroupCertifies => {
                "write sets replicated (probes: certify calls, less those never sent)"
            }
            Ours::GroupCertFailures => {
                "failed certifications (probes: certify's conflicts and aborts once sent)"
            }
        }
    }
}

/// Server counter -> what it is compared with. MySQL has
/// `Innodb_os_log_fsyncs`; MariaDB 10.11 does not, and has the binlog
/// group-commit counters instead. Only counters the server has are shown.
pub const PAIRS: &[(&str, Ours)] = &[
    ("Innodb_os_log_fsyncs", Ours::RedoFsyncs),
    ("Innodb_log_writes", Ours::RedoWrites),
    ("Innodb_data_fsyncs", Ours::InnodbFsyncs),
    ("Binlog_commits", Ours::Commits),
    ("Binlog_group_commits", Ours::BinlogFsyncs),
    // MariaDB's own count of what its binlog probes count.
    ("Binlog_group_commits", Ours::BinlogGroups),
    ("Binlog_commits", Ours::BinlogGroupCommits),
    // MariaDB's counts of why its groups closed, added to at the exits
    // the probes sit on.
    ("Binlog_group_commit_trigger_count", Ours::ClosedByCount),
    ("Binlog_group_commit_trigger_timeout", Ours::ClosedByTimeout),
    (
        "Binlog_group_commit_trigger_lock_wait",
        Ours::ClosedByLockWait,
    ),
    // A semi-sync source's acknowledged transactions (MySQL at
    // AFTER_SYNC: groups) and the time they waited, µs.
    ("Rpl_semi_sync_source_yes_tx", Ours::AckWaits),
    ("Rpl_semi_sync_source_tx_wait_time", Ours::AckWaitUs),
    ("Rpl_semi_sync_master_yes_tx", Ours::AckWaits),
    ("Rpl_semi_sync_master_tx_wait_time", Ours::AckWaitUs),
    // A replication group's member: the transactions it proposed (its
    // member stats), its data messages, their round trips and its
    // consensus rounds, µs, and flow control's throttling (with its
    // component loaded), µs.
    ("COUNT_TRANSACTIONS_LOCAL_PROPOSED", Ours::GroupCommits),
    ("Gr_data_messages_sent_count", Ours::GroupMessages),
    (
        "Gr_data_messages_sent_roundtrip_time_sum",
        Ours::GroupConsensusUs,
    ),
    ("Gr_all_consensus_time_sum", Ours::GroupRoundsUs),
    ("Gr_flow_control_throttle_time_sum", Ours::GroupFlowUs),
    // A Galera node: the write sets it replicated, and those that failed
    // their certification.
    ("wsrep_replicated", Ours::GroupCertifies),
    ("wsrep_local_cert_failures", Ours::GroupCertFailures),
];

/// What a server counter moved from `was` to `now`: a drop means the
/// server restarted, so the new value is all new.
pub fn moved(now: u64, was: u64) -> u64 {
    if now >= was {
        now - was
    } else {
        now
    }
}

/// A semi-sync source's own count of its waits for the replica and
/// their time, under its family's names (the [`PAIRS`] rows of
/// [`Ours::AckWaits`] and [`Ours::AckWaitUs`]): what the exporter's
/// windows set beside the probes' count, as the main command's checks do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ServerAcks {
    pub waits_counter: &'static str,
    pub waits: u64,
    pub time_counter: &'static str,
    /// µs.
    pub wait_us: u64,
}

impl ServerAcks {
    /// From a status read; None when the server is no semi-sync source
    /// (MySQL's plugin not loaded: no such counters).
    pub fn of(s: &Status) -> Option<Self> {
        let find = |o: Ours| {
            PAIRS
                .iter()
                .filter(|(_, x)| *x == o)
                .find_map(|&(n, _)| Some((n, *s.0.get(n)?)))
        };
        let (waits_counter, waits) = find(Ours::AckWaits)?;
        let (time_counter, wait_us) = find(Ours::AckWaitUs)?;
        Some(ServerAcks {
            waits_counter,
            waits,
            time_counter,
            wait_us,
        })
    }

    /// What [`moved`] since `before` (a restarted server's counters are
    /// all new).
    pub fn since(&self, before: &ServerAcks) -> ServerAcks {
        ServerAcks {
            waits: moved(self.waits, before.waits),
            wait_us: moved(self.wait_us, before.wait_us),
            ..*self
        }
    }
}

/// The server's semi-sync counters now (one narrow `SHOW GLOBAL STATUS`).
pub async fn semi_sync(conn: &mut mysql_async::Conn) -> Result<Option<ServerAcks>> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_%'")
        .await
        .map_err(|e| Error::Runtime(format!("SHOW GLOBAL STATUS failed: {e}")))?;
    let st = Status(
        rows.into_iter()
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect(),
    );
    Ok(ServerAcks::of(&st))
}

/// What an exact window sets beside its probes' counts, read at its two
/// edges: a semi-sync source's acknowledged waits, and a replication
/// group member's transactions proposed to its group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounters {
    pub acks: Option<ServerAcks>,
    /// (the member stats' column, its value).
    pub group_proposed: Option<(&'static str, u64)>,
    /// The member's own count of failed consensus steps, where it keeps
    /// one (Galera's `wsrep_local_cert_failures`).
    pub group_failed: Option<(&'static str, u64)>,
}

impl WindowCounters {
    /// What moved since `before` (a restarted server's counters are all
    /// new); a counter missing at either edge is None.
    pub fn since(&self, before: &WindowCounters) -> WindowCounters {
        WindowCounters {
            acks: self.acks.zip(before.acks).map(|(n, b)| n.since(&b)),
            group_proposed: self
                .group_proposed
                .zip(before.group_proposed)
                .map(|((k, n), (_, b))| (k, moved(n, b))),
            group_failed: self
                .group_failed
                .zip(before.group_failed)
                .map(|((k, n), (_, b))| (k, moved(n, b))),
        }
    }
}

/// The window's server counters now: the semi-sync ones, and a group
/// member's proposed transactions where the server is one (its member
/// stats table has its row).
pub async fn window_counters(conn: &mut mysql_async::Conn) -> Result<WindowCounters> {
    let acks = semi_sync(conn).await?;
    let (mut group_proposed, mut group_failed) = (None, None);
    for row in readers::family::FAMILIES
        .iter()
        .filter_map(|f| f.group.as_ref())
    {
        let Some(r) = conn
            .query_first::<mysql_async::Row, _>(row.local_stats)
            .await
            .ok()
            .flatten()
        else {
            continue;
        };
        let col = |i: usize| r.get_opt::<u64, _>(i).and_then(|v| v.ok());
        if let Some(v) = col(0) {
            group_proposed = Some((row.local_columns[0], v));
            group_failed = row.step_failures.and_then(|name| {
                let i = row.local_columns.iter().position(|c| *c == name)?;
                Some((name, col(i)?))
            });
        }
    }
    Ok(WindowCounters {
        acks,
        group_proposed,
        group_failed,
    })
}

/// Our side of the comparison, over the same window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OurCounts {
    pub redo_fsyncs: u64,
    /// None where the writes are not probed: no row then.
    pub redo_writes: Option<u64>,
    pub data_fsyncs: u64,
    pub commits: u64,
    pub binlog_fsyncs: u64,
    /// None where the binlog's groups are not probed: no row then.
    pub binlog_groups: Option<u64>,
    pub binlog_group_commits: Option<u64>,
    /// Groups per reason (count, timeout, lock wait); None where the
    /// reasons are not probed.
    pub closed_by: Option<[u64; 3]>,
    /// None where the semi-sync hooks are not probed or never waited.
    pub ack_waits: Option<u64>,
    pub ack_wait_us: Option<u64>,
    /// None where no replication group's hook is probed.
    pub group_commits: Option<u64>,
    pub group_consensus_us: Option<u64>,
    pub group_flow_us: Option<u64>,
    /// None where no consensus step is probed: the steps that sent their
    /// commit, and those whose certification failed.
    pub group_calls: Option<u64>,
    pub group_failed: Option<u64>,
}

impl OurCounts {
    fn get(&self, o: Ours) -> Option<u64> {
        match o {
            Ours::RedoFsyncs => Some(self.redo_fsyncs),
            Ours::RedoWrites => self.redo_writes,
            Ours::InnodbFsyncs => Some(self.redo_fsyncs + self.data_fsyncs),
            Ours::Commits => Some(self.commits),
            // One fsync per group only with sync_binlog=1: where the
            // groups themselves are probed, they are compared instead.
            Ours::BinlogFsyncs => self.binlog_groups.is_none().then_some(self.binlog_fsyncs),
            Ours::BinlogGroups => self.binlog_groups,
            Ours::BinlogGroupCommits => self.binlog_group_commits,
            Ours::ClosedByCount => self.closed_by.map(|c| c[0]),
            Ours::ClosedByTimeout => self.closed_by.map(|c| c[1]),
            Ours::ClosedByLockWait => self.closed_by.map(|c| c[2]),
            Ours::AckWaits => self.ack_waits,
            Ours::AckWaitUs => self.ack_wait_us,
            Ours::GroupCommits | Ours::GroupMessages => self.group_commits,
            Ours::GroupConsensusUs | Ours::GroupRoundsUs => self.group_consensus_us,
            Ours::GroupFlowUs => self.group_flow_us,
            Ours::GroupCertifies => self.group_calls,
            Ours::GroupCertFailures => self.group_failed,
        }
    }
}

/// One row of the summary's cross-check.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub counter: &'static str,
    pub server: u64,
    pub ours: u64,
    pub ours_is: Ours,
    /// (ours - server) / server, in percent; None when the server says 0.
    pub diff_pct: Option<f64>,
}

/// The cross-check rows for the window `before..after`.
pub fn compare(before: &Status, after: &Status, ours: &OurCounts) -> Vec<Check> {
    PAIRS
        .iter()
        .filter_map(|&(name, o)| {
            let server = after.0.get(name)?.saturating_sub(*before.0.get(name)?);
            let mine = ours.get(o)?;
            // Binlog counters stand still when the binlog is off: nothing
            // to compare then.
            if server == 0 && name.starts_with("Binlog_") {
                return None;
            }
            Some(Check {
                counter: name,
                server,
                ours: mine,
                ours_is: o,
                diff_pct: (server > 0)
                    .then(|| (mine as f64 - server as f64) / server as f64 * 100.0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_between_two_reads_is_taken_at_our_instant() {
        let t0 = std::time::Instant::now();
        let timed = |at_ms: u64, v: &[(&str, u64)]| Timed {
            status: Status(v.iter().map(|(k, n)| (k.to_string(), *n)).collect()),
            at: t0 + std::time::Duration::from_millis(at_ms),
        };
        let pre = timed(0, &[("Com_commit", 1000), ("Threads_running", 9)]);
        let post = timed(
            40,
            &[("Com_commit", 1400), ("Threads_running", 3), ("New", 7)],
        );
        let mid = Status::at(&pre, &post, t0 + std::time::Duration::from_millis(10));
        assert_eq!(mid.0["Com_commit"], 1100);
        // A value that went down (a gauge) and one only the later read has
        // are taken from the later read.
        assert_eq!(mid.0["Threads_running"], 3);
        assert_eq!(mid.0["New"], 7);
        // Outside the two reads: the nearer one.
        let late = Status::at(&pre, &post, t0 + std::time::Duration::from_millis(90));
        assert_eq!(late.0["Com_commit"], 1400);
        assert_eq!(Status::at(&pre, &pre, t0).0["Com_commit"], 1000);
    }

    fn st(kv: &[(&str, u64)]) -> Status {
        Status(kv.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn the_servers_acks_are_read_under_either_familys_names() {
        let before = st(&[
            ("Rpl_semi_sync_master_yes_tx", 100),
            ("Rpl_semi_sync_master_tx_wait_time", 5_000),
            ("Rpl_semi_sync_master_no_tx", 0),
        ]);
        let after = st(&[
            ("Rpl_semi_sync_master_yes_tx", 160),
            ("Rpl_semi_sync_master_tx_wait_time", 8_000),
        ]);
        let a = ServerAcks::of(&after).unwrap();
        let d = a.since(&ServerAcks::of(&before).unwrap());
        assert_eq!(
            (d.waits_counter, d.waits, d.time_counter, d.wait_us),
            (
                "Rpl_semi_sync_master_yes_tx",
                60,
                "Rpl_semi_sync_master_tx_wait_time",
                3_000
            )
        );
        // MySQL's names; a restarted server's counters are all new.
        let mysql = st(&[
            ("Rpl_semi_sync_source_yes_tx", 7),
            ("Rpl_semi_sync_source_tx_wait_time", 70),
        ]);
        let m = ServerAcks::of(&mysql).unwrap();
        assert_eq!(m.waits_counter, "Rpl_semi_sync_source_yes_tx");
        assert_eq!((m.since(&a).waits, m.since(&a).wait_us), (7, 70));
        // No semi-sync plugin: nothing to compare.
        assert_eq!(ServerAcks::of(&st(&[("Innodb_log_writes", 5)])), None);
    }

    #[test]
    fn compares_what_the_server_has() {
        let before = st(&[
            ("Innodb_data_fsyncs", 10),
            ("Binlog_commits", 0),
            ("Innodb_log_writes", 5),
        ]);
        let after = st(&[
            ("Innodb_data_fsyncs", 110),
            ("Binlog_commits", 0),
            ("Innodb_log_writes", 5),
        ]);
        let mut ours = OurCounts {
            redo_fsyncs: 99,
            redo_writes: Some(0),
            data_fsyncs: 2,
            ..Default::default()
        };
        let c = compare(&before, &after, &ours);
        assert_eq!(c.len(), 2);
        // Innodb_log_writes (no change: shown, no %), Innodb_data_fsyncs;
        // Binlog_commits left out (binlog off).
        assert_eq!((c[0].counter, c[0].diff_pct), ("Innodb_log_writes", None));
        assert_eq!(
            (c[1].counter, c[1].server, c[1].ours),
            ("Innodb_data_fsyncs", 100, 101)
        );
        assert!((c[1].diff_pct.unwrap() - 1.0).abs() < 1e-9);
        // Writes not probed (light on the C library): no writes row.
        ours.redo_writes = None;
        let c = compare(&before, &after, &ours);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].counter, "Innodb_data_fsyncs");
    }
}
