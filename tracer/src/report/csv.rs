//! `--csv FILE`: one row per tick, every number of both halves, for a
//! spreadsheet or a plotting script. Empty cells where a value is absent.
use std::{io::Write, time::SystemTime};

use crate::{
    records::run::{RunHeader, RunSink, RunSummary},
    sample::Joined,
};

/// The binlog stages' columns follow these.
const FIXED: &[&str] = &[
    "unix_time",
    "elapsed_s",
    "interval_s",
    "warmup",
    "txns",
    "commits",
    "tps",
    "p50_us",
    "p95_us",
    "p99_us",
    "max_us",
    "errors",
    "retries",
    "n_write",
    "durable",
    // Calls through inlined copies whose durable flag DWARF cannot place
    // (counted in n_write, in neither durable nor non-durable).
    "durable_unknown",
    "n_flush",
    "write_per_flush",
    "commits_per_flush",
    "redo_fsync",
    "redo_fsync_in_flush",
    "redo_p50_us",
    "redo_p99_us",
    "redo_writes",
    "redo_write_bytes",
    "binlog_fsync",
    "data_fsync",
    "other_fsync",
    "lost_events",
    "batch_p50",
    "batch_p90",
    "batch_p99",
    "batch_max",
    "batch_mean",
    "leaders",
    "followers",
    "leader_wait_p99_us",
    "follower_wait_p99_us",
    "binlog_groups",
    "binlog_commits",
    "binlog_p50",
    "binlog_p99",
    "binlog_max",
    "binlog_mean",
];

/// Every column, in row order.
fn columns() -> Vec<&'static str> {
    let mut c = FIXED.to_vec();
    c.extend(crate::binlog::STAGES.iter().map(|s| s.column));
    c.extend(["cp_commits", "cp_mean_us", "cp_p50_us", "cp_p99_us"]);
    c.extend(crate::commit_path::CSV_SHARES.iter().map(|(_, col)| *col));
    c.extend([
        "ack_waits",
        "ack_mean_us",
        "ack_p50_us",
        "ack_p99_us",
        "ack_total_us",
        "server_ack_waits",
        "server_ack_wait_us",
        "semi_sync_off",
        // The commit's mean split by the scheduler (`--commit-path`),
        // and the server's threads from /proc.
        "cp_on_cpu_us",
        "cp_run_queue_us",
        "cp_blocked_us",
        "server_cpu_ms",
        "server_runq_ms",
    ]);
    c.extend(CLOSED_BY.iter().map(|(_, col)| *col));
    c.extend(GROUP);
    c.extend(
        crate::commit_path::CSV_GROUP_SHARES
            .iter()
            .map(|(_, col)| *col),
    );
    c.extend(GROUP_STEPS);
    c
}

/// A group's consensus steps (Galera's certify calls) that sent their
/// commit, and those refused once sent (failed certifications): what the
/// checks set beside `wsrep_replicated` and `wsrep_local_cert_failures`,
/// per interval. Last, so the columns before keep their places.
const GROUP_STEPS: [&str; 2] = ["group_steps_sent", "group_steps_refused"];

/// `--replica group` (and any traced group member): the commits through
/// the group, their mean time in it and its consensus part, and the
/// members ONLINE (empty elsewhere).
const GROUP: [&str; 5] = [
    "group_commits",
    "group_mean_us",
    "group_consensus_us",
    "group_online",
    "group_size",
];

/// Binlog groups per reason they closed (empty where the reasons are not
/// probed): last, so the columns before keep their places.
const CLOSED_BY: [(readers::binlog::Reason, &str); 4] = {
    use readers::binlog::Reason;
    [
        (Reason::Count, "binlog_closed_count"),
        (Reason::Timeout, "binlog_closed_timeout"),
        (Reason::LockWait, "binlog_closed_lock_wait"),
        (Reason::NoWait, "binlog_closed_no_wait"),
    ]
};

pub struct Csv<W: Write> {
    out: W,
}

impl<W: Write> Csv<W> {
    pub fn new(out: W) -> Self {
        Csv { out }
    }
}

fn cell<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The row for one tick, in [`columns`] order.
pub fn row(at: SystemTime, j: &Joined) -> Vec<String> {
    let w = &j.workload;
    let t = j.trace.as_ref();
    let a = t.and_then(|t| t.anatomy.as_ref());
    let b = t.and_then(|t| t.binlog.as_ref());
    let unix = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let mut row = vec![
        format!("{unix:.3}"),
        format!("{:.3}", w.elapsed_s),
        format!("{:.3}", w.interval_s),
        u8::from(w.warmup).to_string(),
        w.txns.to_string(),
        w.commits.to_string(),
        format!("{:.1}", w.tps),
        w.latency.p50_us.to_string(),
        w.latency.p95_us.to_string(),
        w.latency.p99_us.to_string(),
        w.latency.max_us.to_string(),
        w.errors.to_string(),
        w.retries.to_string(),
        cell(t.map(|t| t.n_write)),
        cell(t.and_then(|t| t.durable)),
        cell(t.and_then(|t| t.durable_unknown)),
        cell(t.map(|t| t.n_flush)),
        cell(t.and_then(|t| t.write_per_flush).map(|v| format!("{v:.3}"))),
        cell(j.commits_per_flush.map(|v| format!("{v:.3}"))),
        cell(t.map(|t| t.redo_fsync)),
        cell(t.and_then(|t| t.redo_fsync_in_flush)),
        cell(t.and_then(|t| t.redo_p50_us).map(|v| format!("{v:.1}"))),
        cell(t.and_then(|t| t.redo_p99_us).map(|v| format!("{v:.1}"))),
        cell(t.and_then(|t| t.redo_writes)),
        cell(t.and_then(|t| t.redo_write_bytes)),
        cell(t.map(|t| t.binlog_fsync)),
        cell(t.map(|t| t.data_fsync)),
        cell(t.map(|t| t.other_fsync)),
        cell(t.map(|t| t.lost_events)),
        cell(t.and_then(|t| t.batch.p50)),
        cell(t.and_then(|t| t.batch.p90)),
        cell(t.and_then(|t| t.batch.p99)),
        cell(t.and_then(|t| t.batch.max)),
        cell(t.and_then(|t| t.batch.mean).map(|v| format!("{v:.3}"))),
        cell(a.map(|a| a.leaders)),
        cell(a.map(|a| a.followers)),
        cell(
            a.and_then(|a| a.leader_wait_p99_us)
                .map(|v| format!("{v:.1}")),
        ),
        cell(
            a.and_then(|a| a.follower_wait_p99_us)
                .map(|v| format!("{v:.1}")),
        ),
        cell(b.map(|b| b.groups)),
        // Light: groups without sizes.
        cell(b.and_then(|b| (b.commits > 0 || b.groups == 0).then_some(b.commits))),
        cell(b.and_then(|b| b.p50)),
        cell(b.and_then(|b| b.p99)),
        cell(b.and_then(|b| b.max)),
        cell(b.and_then(|b| b.mean).map(|v| format!("{v:.3}"))),
    ];
    for stage in &crate::binlog::STAGES {
        row.push(cell(
            b.and_then(|b| b.stage_mean_us(stage.name))
                .map(|v| format!("{v:.1}")),
        ));
    }
    let c = t.and_then(|t| t.commit_path.as_ref());
    row.push(cell(c.map(|c| c.commits)));
    for v in [
        c.and_then(|c| c.mean_us),
        c.and_then(|c| c.p50_us),
        c.and_then(|c| c.p99_us),
    ] {
        row.push(cell(v.map(|v| format!("{v:.1}"))));
    }
    for (slot, _) in crate::commit_path::CSV_SHARES {
        row.push(cell(
            c.and_then(|c| c.share_of(slot)).map(|v| format!("{v:.4}")),
        ));
    }
    let r = t.and_then(|t| t.replication.as_ref());
    row.push(cell(r.map(|r| r.waits)));
    for v in [
        r.and_then(|r| r.mean_us),
        r.and_then(|r| r.p50_us),
        r.and_then(|r| r.p99_us),
    ] {
        row.push(cell(v.map(|v| format!("{v:.1}"))));
    }
    row.push(cell(r.map(|r| r.total_us)));
    row.push(cell(j.server_acks.map(|a| a.waits)));
    row.push(cell(j.server_acks.map(|a| a.wait_us)));
    row.push(u8::from(j.semi_sync_off).to_string());
    let x = c.and_then(|c| c.sched);
    for v in [
        x.map(|x| x.on_cpu_us),
        x.map(|x| x.run_queue_us),
        x.map(|x| x.blocked_us),
        t.and_then(|t| t.server_cpu_ms),
        t.and_then(|t| t.server_runq_ms),
    ] {
        row.push(cell(v.map(|v| format!("{v:.1}"))));
    }
    let by = b.and_then(|b| b.closed_by.as_deref());
    for (reason, _) in CLOSED_BY {
        row.push(cell(
            by.map(|by| crate::binlog::ClosedBy::groups_of(by, reason)),
        ));
    }
    let g = t.and_then(|t| t.group.as_ref());
    row.push(cell(g.map(|g| g.commits)));
    for v in [g.and_then(|g| g.mean_us), g.and_then(|g| g.consensus_us)] {
        row.push(cell(v.map(|v| format!("{v:.1}"))));
    }
    row.push(cell(j.group_online.map(|o| o.online)));
    row.push(cell(j.group_online.map(|o| o.size)));
    for (slot, _) in crate::commit_path::CSV_GROUP_SHARES {
        row.push(cell(
            c.and_then(|c| c.share_of(slot)).map(|v| format!("{v:.4}")),
        ));
    }
    row.push(cell(g.map(|g| g.sent())));
    row.push(cell(g.map(|g| g.refused())));
    row
}

impl<W: Write> RunSink for Csv<W> {
    fn start(&mut self, _: &RunHeader, _: &workload::engine::Config) {
        let _ = writeln!(self.out, "{}", columns().join(","));
    }

    fn tick(&mut self, at: SystemTime, j: &Joined) {
        let _ = writeln!(self.out, "{}", row(at, j).join(","));
        let _ = self.out.flush();
    }

    fn summary(&mut self, _: &RunHeader, _: &RunSummary) {
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> workload::stats::IntervalSample {
        workload::stats::IntervalSample {
            tick: 1,
            elapsed_s: 1.0,
            interval_s: 1.0,
            warmup: false,
            txns: 10,
            commits: 10,
            tps: 10.0,
            latency: Default::default(),
            errors: 0,
            retries: 0,
            tpcc: None,
        }
    }

    #[test]
    fn untraced_row_has_every_column() {
        let j = Joined::new(sample(), None);
        let r = row(SystemTime::now(), &j);
        assert_eq!(r.len(), columns().len());
        assert_eq!(r[4], "10");
        assert_eq!(r[5], "10");
        assert_eq!(r[13], "");
    }

    /// Inlined copies' calls of unknown durability get their own column,
    /// empty where there are none.
    #[test]
    fn durable_unknown_has_its_column() {
        let cols = columns();
        let col = |name| cols.iter().position(|c| *c == name).unwrap();
        let mut t = crate::sample::test_interval(Some(130), Some(100));
        t.durable_unknown = Some(170);
        let r = row(SystemTime::now(), &Joined::new(sample(), Some(t)));
        assert_eq!(r.len(), cols.len());
        assert_eq!(r[col("n_write")], "300");
        assert_eq!(r[col("durable")], "130");
        assert_eq!(r[col("durable_unknown")], "170");
        let t = crate::sample::test_interval(Some(300), Some(100));
        let r = row(SystemTime::now(), &Joined::new(sample(), Some(t)));
        assert_eq!(r[col("durable_unknown")], "");
    }

    /// Binlog groups: a stage's mean per group in its column; light
    /// (groups without sizes) leaves the commits empty, never 0.
    #[test]
    fn binlog_stages_have_their_columns() {
        let cols = columns();
        let col = |name| cols.iter().position(|c| *c == name).unwrap();
        let mut t = crate::sample::test_interval(Some(100), Some(100));
        t.binlog = Some(crate::binlog::BinlogGroups {
            groups: 4,
            stages: vec![crate::binlog::Stage {
                stage: "sync",
                count: 4,
                mean_us: Some(812.25),
                p50_us: None,
                p99_us: None,
            }],
            ..Default::default()
        });
        let r = row(SystemTime::now(), &Joined::new(sample(), Some(t)));
        assert_eq!(r.len(), cols.len());
        assert_eq!(r[col("binlog_groups")], "4");
        assert_eq!(r[col("binlog_commits")], "");
        assert_eq!(r[col("binlog_sync_us")], "812.2");
        assert_eq!(r[col("binlog_queue_wait_us")], "");
    }
}
