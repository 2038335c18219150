//! The exposition: every server's totals as Prometheus metrics, encoded
//! by the `prometheus-client` crate (OpenMetrics 1.0), and the same text
//! rewritten into the classic text format 0.0.4 for scrapers that do not
//! ask for OpenMetrics.
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::{Registry, Unit},
};
use tracer_ebpf::BATCH_BUCKETS;

use super::totals::{le_seconds, IoUnit, TimeHist, Totals, CLASSES};
use crate::sample::{batch_upper, ClassTotals};

/// What is known of one server at scrape time.
#[derive(Clone, Debug)]
pub struct ServerView {
    pub name: String,
    pub version: String,
    /// `exact` or `server-layer`.
    pub mode: &'static str,
    pub symbol_source: String,
    pub fsync_probe: String,
    pub binary: String,
    /// The flush function's own fsyncs are told apart from other redo syncs.
    pub flush_timed: bool,
    /// The syncs are timed: without (light on the C library) no
    /// duration series.
    pub sync_timed: bool,
    /// Leaders and followers are counted (`--anatomy`).
    pub anatomy: bool,
    /// The binlog's groups are counted (exact tier, where the binary has
    /// their functions).
    pub binlog: bool,
    /// ... and why each group closed (the family's wait for a fuller
    /// group is probed).
    pub binlog_closed_by: bool,
    /// `--io` counts the block requests under the redo syncs.
    pub io: bool,
    pub unknown_sites: bool,
    /// The server's write calls are counted (not by light on the C
    /// library alone): without them no write series.
    pub writes: bool,
    /// Light: per flush only; the write figures come from windows.
    pub tier: crate::probes::tier::Tier,
    /// Light: the server counter commits are read from (None when the
    /// exporter cannot log in).
    pub commit_counter: Option<&'static str>,
    /// Light: the last exact window's figures.
    pub last_window: Option<super::totals::Figures>,
    pub attaches: u64,
    pub attached: bool,
    pub totals: Totals,
}

/// One scrape's worth of data.
#[derive(Debug)]
pub struct Exposition {
    pub servers: Vec<ServerView>,
    pub process: ProcessStats,
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

fn labels(s: &ServerView) -> Labels<'_> {
    vec![("server", s.name.as_str()), ("version", s.version.as_str())]
}

fn with<'a>(base: &Labels<'a>, k: &'static str, v: &'a str) -> Labels<'a> {
    let mut l = base.clone();
    l.push((k, v));
    l
}

/// One row per server with binlog probes and stage that ran: `f` of the
/// stage's (passes, ns).
fn binlog_stages<'a, M: 'a>(
    servers: &'a [ServerView],
    f: impl Fn((u64, u64)) -> M + Copy + 'a,
) -> impl Iterator<Item = (Labels<'a>, M)> + 'a {
    servers.iter().filter(|v| v.binlog).flat_map(move |v| {
        let l = labels(v);
        crate::binlog::STAGES
            .iter()
            .zip(v.totals.binlog_stages)
            .filter(|(_, t)| t.0 > 0)
            .map(move |(def, t)| (with(&l, "stage", def.name), f(t)))
    })
}

/// One row per server whose binlog groups' reasons are probed and
/// reason: `f` of (groups, wait ns). Every reason, 0 included, so a
/// rate over a reason that begins later has its start.
fn binlog_closed<'a, M: 'a>(
    servers: &'a [ServerView],
    f: impl Fn((u64, u64)) -> M + Copy + 'a,
) -> impl Iterator<Item = (Labels<'a>, M)> + 'a {
    servers
        .iter()
        .filter(|v| v.binlog && v.binlog_closed_by)
        .flat_map(move |v| {
            let l = labels(v);
            readers::binlog::Reason::ALL
                .iter()
                .zip(v.totals.binlog_closed)
                .map(move |(r, t)| (with(&l, "reason", r.name()), f(t)))
        })
}

/// One row per server and file class: `f` of that class's totals.
fn per_class<'a, M: 'a>(
    servers: &'a [ServerView],
    f: impl Fn(&ClassTotals) -> M + Copy + 'a,
) -> impl Iterator<Item = (Labels<'a>, M)> + 'a {
    servers.iter().flat_map(move |v| {
        let l = labels(v);
        CLASSES
            .iter()
            .zip(&v.totals.classes)
            .map(move |(cl, sum)| (with(&l, "class", cl.name()), f(sum)))
            .collect::<Vec<_>>()
    })
}

/// [`per_class`] for the servers `keep` selects.
fn per_class_where<'a, M: 'a>(
    servers: &'a [ServerView],
    keep: impl Fn(&ServerView) -> bool + Copy + 'a,
    f: impl Fn(&ClassTotals) -> M + Copy + 'a,
) -> impl Iterator<Item = (Labels<'a>, M)> + 'a {
    servers
        .iter()
        .filter(move |v| keep(v))
        .flat_map(move |v| per_class(std::slice::from_ref(v), f))
}

/// Writes one family: `rows` of (labels, value).
fn family<'a, M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: impl IntoIterator<Item = (Labels<'a>, M)>,
) -> Result<(), std::fmt::Error> {
    let mut rows: Vec<_> = rows.into_iter().collect();
    let Some((_, first)) = rows.first() else {
        return Ok(());
    };
    let kind = first.metric_type();
    let mut m = enc.encode_descriptor(name, help, unit, kind)?;
    // One row without labels: no `{}` after the name.
    if rows.len() == 1 && rows[0].0.is_empty() {
        let (_, v) = rows.remove(0);
        return v.encode(m);
    }
    for (l, v) in rows {
        v.encode(m.encode_family(&l)?)?;
    }
    Ok(())
}

/// A histogram of per-bucket counts (not cumulative) with upper bounds.
struct ConstHistogram {
    sum: f64,
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for ConstHistogram {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let count = self.buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.sum,
            count,
            &self.buckets,
            None,
        )
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn time_hist(h: &TimeHist) -> ConstHistogram {
    ConstHistogram {
        sum: h.sum_ns as f64 / 1e9,
        buckets: h
            .hist
            .0
            .iter()
            .enumerate()
            .map(|(i, n)| (le_seconds(i), *n))
            .collect(),
    }
}

/// An info metric: its labels, value 1.
struct Info<'a>(Labels<'a>);

impl EncodeMetric for Info<'_> {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        encoder.encode_info(&self.0)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Info
    }
}

impl Collector for Exposition {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.servers;
        let c = ConstCounter::new;
        family(
            &mut enc,
            "commitscope_log_write_requests",
            "Redo write requests (log_write_up_to calls; exact mode), by whether they asked for durability (n_write is durable=\"true\")",
            None,
            s.iter().filter(|v| v.mode == "exact" && v.tier.per_commit()).flat_map(|v| {
                let l = labels(v);
                let t = &v.totals;
                let mut rows = vec![
                    (with(&l, "durable", "true"), c(t.durable)),
                    (
                        with(&l, "durable", "false"),
                        c(t.requests.saturating_sub(t.durable + t.unknown)),
                    ),
                ];
                if v.unknown_sites {
                    rows.push((with(&l, "durable", "unknown"), c(t.unknown)));
                }
                rows
            }),
        )?;
        family(
            &mut enc,
            "commitscope_server_commits",
            "Commits counted at the server layer (server-layer mode, where InnoDB's functions are not found)",
            None,
            s.iter()
                .filter(|v| v.mode != "exact" && v.tier.per_commit())
                .map(|v| (labels(v), c(v.totals.requests))),
        )?;
        family(
            &mut enc,
            "commitscope_status_commits",
            "Commits by the server's own counter (light tier: SHOW GLOBAL STATUS, read once a second; the counter is labelled)",
            None,
            s.iter().filter_map(|v| {
                let counter = v.commit_counter?;
                Some((with(&labels(v), "counter", counter), c(v.totals.commits)))
            }),
        )?;
        family(
            &mut enc,
            "commitscope_redo_flushes",
            "Redo log flushes (n_flush): calls of the redo flush function, else fsync/fdatasync of a redo file",
            None,
            s.iter().map(|v| (labels(v), c(v.totals.flushes))),
        )?;
        family(
            &mut enc,
            "commitscope_fsyncs",
            "fsync/fdatasync calls of the server, by file class",
            None,
            per_class(s, |x| c(x.syncs)),
        )?;
        family(
            &mut enc,
            "commitscope_fsync_duration",
            "Time inside fsync/fdatasync, by file class (the kernel's log2 buckets; absent where the light tier counts syncs in the C library untimed)",
            Some(&Unit::Seconds),
            per_class_where(
                s,
                |v| v.sync_timed,
                |sum| {
                    time_hist(&TimeHist {
                        hist: sum.hist,
                        sum_ns: sum.sync_ns,
                    })
                },
            ),
        )?;
        family(
            &mut enc,
            "commitscope_redo_flush_syncs",
            "Redo fsync/fdatasync calls made inside the redo flush function (inside=\"true\") or elsewhere, e.g. checkpoint writes",
            None,
            s.iter().filter(|v| v.flush_timed).flat_map(|v| {
                let l = labels(v);
                let redo = v.totals.class(crate::fds::FileClass::Redo);
                [
                    (with(&l, "inside", "true"), c(redo.syncs_in_flush)),
                    (
                        with(&l, "inside", "false"),
                        c(redo.syncs.saturating_sub(redo.syncs_in_flush)),
                    ),
                ]
            }),
        )?;
        family(
            &mut enc,
            "commitscope_writes",
            "write/pwrite calls of the server, by file class",
            None,
            per_class_where(s, |v| v.writes, |x| c(x.writes)),
        )?;
        family(
            &mut enc,
            "commitscope_written",
            "Bytes written by the server, by file class",
            Some(&Unit::Bytes),
            per_class_where(s, |v| v.writes, |x| c(x.write_bytes)),
        )?;
        family(
            &mut enc,
            "commitscope_flush_batch_size",
            "Requests per redo flush: durable write requests (exact mode) or commits (server-layer mode) that arrived since the previous flush began",
            None,
            s.iter()
                .filter(|v| v.tier.per_commit())
                .map(|v| (labels(v), batch_hist(&v.totals))),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_groups",
            "Binlog group commits (MySQL: sync-stage groups, one binlog fsync each with sync_binlog=1; MariaDB: group-commit leaders), where their functions are probed and the binlog is open (both tiers: one probe per group)",
            None,
            s.iter()
                .filter(|v| v.binlog)
                .map(|v| (labels(v), c(v.totals.binlog_groups))),
        )?;
        for (i, (_, name, help, unit)) in super::totals::IO_COUNTERS.iter().enumerate() {
            let value = move |v: &ServerView| match unit {
                IoUnit::Seconds => ConstCounter::new(v.totals.io[i] as f64 / 1e9),
                IoUnit::Count | IoUnit::Bytes => ConstCounter::new(v.totals.io[i] as f64),
            };
            family(
                &mut enc,
                name,
                help,
                match unit {
                    IoUnit::Count => None,
                    IoUnit::Bytes => Some(&Unit::Bytes),
                    IoUnit::Seconds => Some(&Unit::Seconds),
                },
                s.iter().filter(|v| v.io).map(|v| (labels(v), value(v))),
            )?;
        }
        family(
            &mut enc,
            "commitscope_binlog_groups_closed",
            "Binlog groups by why they closed: count (the no-delay count was reached), timeout (the delay ran out), lock_wait (MariaDB: a queued transaction has a lock waiter), no_wait (no delay set); both tiers, one probe per group",
            None,
            binlog_closed(s, |(n, _)| c(n)),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_group_fill_wait",
            "Time the binlog groups' leaders waited for more commits (binlog_group_commit_sync_delay, binlog_commit_wait_usec), summed, by why the group closed",
            Some(&Unit::Seconds),
            binlog_closed(s, |(_, ns)| ConstCounter::new(ns as f64 / 1e9)),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_stage_passes",
            "Passes through each binlog group-commit stage (one per group that went through it; both tiers)",
            None,
            binlog_stages(s, |(n, _)| c(n)),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_stage",
            "Time spent in each binlog group-commit stage, summed over the groups (both tiers; the queue wait is the flush leader's, exact tier only)",
            Some(&Unit::Seconds),
            binlog_stages(s, |(_, ns)| ConstCounter::new(ns as f64 / 1e9)),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_group_commits",
            "Commits carried by those binlog groups (their sizes summed; exact tier, the light tier has them in its exact windows)",
            None,
            s.iter()
                .filter(|v| v.binlog && v.tier.per_commit())
                .map(|v| (labels(v), c(v.totals.binlog_commits))),
        )?;
        family(
            &mut enc,
            "commitscope_binlog_group_size",
            "Commits per binlog group (counted per exact size in the kernel, bucketed here as the flush batch sizes are; exact tier)",
            None,
            s.iter().filter(|v| v.binlog && v.tier.per_commit()).map(|v| {
                (
                    labels(v),
                    size_hist(&v.totals.binlog_sizes, v.totals.binlog_commits),
                )
            }),
        )?;
        family(
            &mut enc,
            "commitscope_durable_writes",
            "Durable write requests by group-commit role (--anatomy): leader = ran the redo flush itself, follower = rode on another's",
            None,
            s.iter().filter(|v| v.anatomy).flat_map(|v| {
                let l = labels(v);
                [
                    (with(&l, "role", "leader"), c(v.totals.leaders.hist.count())),
                    (
                        with(&l, "role", "follower"),
                        c(v.totals.followers.hist.count()),
                    ),
                ]
            }),
        )?;
        family(
            &mut enc,
            "commitscope_durable_write_wait",
            "Time from a durable write request's entry to its return, by group-commit role (--anatomy)",
            Some(&Unit::Seconds),
            s.iter().filter(|v| v.anatomy).flat_map(|v| {
                let l = labels(v);
                [
                    (with(&l, "role", "leader"), time_hist(&v.totals.leaders)),
                    (with(&l, "role", "follower"), time_hist(&v.totals.followers)),
                ]
            }),
        )?;
        self.windows(&mut enc)?;
        family(
            &mut enc,
            "commitscope_lost_events",
            "Events the kernel side could not record (fd or thread map full)",
            None,
            s.iter().map(|v| (labels(v), c(v.totals.lost))),
        )?;
        family(
            &mut enc,
            "commitscope_attaches",
            "Times the probes were attached to this server (a restart re-attaches)",
            None,
            s.iter().map(|v| (labels(v), c(v.attaches))),
        )?;
        family(
            &mut enc,
            "commitscope_up",
            "1 while the server's process runs and is probed, 0 after it went away (until --forget-after)",
            None,
            s.iter()
                .map(|v| (labels(v), ConstGauge::new(i64::from(v.attached)))),
        )?;
        family(
            &mut enc,
            "commitscope_probe",
            "How the server is probed",
            None,
            s.iter().map(|v| {
                let mut l = labels(v);
                l.extend([
                    ("mode", v.mode),
                    (
                        "tier",
                        if v.tier.per_commit() {
                            "exact"
                        } else {
                            "light"
                        },
                    ),
                    ("symbol_source", v.symbol_source.as_str()),
                    ("fsync_probe", v.fsync_probe.as_str()),
                    ("binary", v.binary.as_str()),
                ]);
                (Vec::new(), Info(l))
            }),
        )?;
        self.process.encode(&mut enc)
    }
}

/// A batch-size histogram of `t`.
fn batch_hist(t: &Totals) -> ConstHistogram {
    size_hist(&t.batch, t.batch_sum)
}

/// A size histogram over the batch buckets, with its exact sum.
fn size_hist(counts: &[u64; BATCH_BUCKETS], sum: u64) -> ConstHistogram {
    let buckets = (0..BATCH_BUCKETS)
        .map(|b| {
            let le = if b + 1 == BATCH_BUCKETS {
                f64::MAX
            } else {
                batch_upper(b) as f64
            };
            (le, counts[b])
        })
        .collect();
    ConstHistogram {
        sum: sum as f64,
        buckets,
    }
}

fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Exposition {
    /// The last exact window of each light server: gauges and histograms
    /// that describe that window alone (they go down as well as up), with
    /// its start and end.
    fn windows(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let w: Vec<(&ServerView, &super::totals::Figures)> = self
            .servers
            .iter()
            .filter_map(|v| Some((v, v.last_window.as_ref()?)))
            .collect();
        let g = |v: u64| ConstGauge::new(v as i64);
        for (name, help, at) in [
            (
                "commitscope_window_start_time",
                "When the last exact window began (Unix time)",
                true,
            ),
            (
                "commitscope_window_end_time",
                "When the last exact window ended (Unix time)",
                false,
            ),
        ] {
            family(
                enc,
                name,
                help,
                Some(&Unit::Seconds),
                w.iter().map(|(v, f)| {
                    let t = if at { f.start } else { f.end };
                    (labels(v), ConstGauge::new(unix_seconds(t)))
                }),
            )?;
        }
        family(
            enc,
            "commitscope_window_n_write",
            "The last exact window's n_write: durable log_write_up_to calls (exact mode) or server-layer commits",
            None,
            w.iter().map(|(v, f)| {
                let t = &f.totals;
                (labels(v), g(if v.mode == "exact" { t.durable } else { t.requests }))
            }),
        )?;
        family(
            enc,
            "commitscope_window_write_requests",
            "The last exact window's redo write requests, durable or not (exact mode)",
            None,
            w.iter()
                .filter(|(v, _)| v.mode == "exact")
                .map(|(v, f)| (labels(v), g(f.totals.requests))),
        )?;
        family(
            enc,
            "commitscope_window_n_flush",
            "The last exact window's redo flushes",
            None,
            w.iter().map(|(v, f)| (labels(v), g(f.totals.flushes))),
        )?;
        family(
            enc,
            "commitscope_window_writes_per_flush",
            "The last exact window's n_write / n_flush (the study's ratio)",
            None,
            w.iter().filter_map(|(v, f)| {
                let t = &f.totals;
                let n = if v.mode == "exact" {
                    t.durable
                } else {
                    t.requests
                };
                let r = crate::sample::ratio(n, t.flushes)?;
                Some((labels(v), ConstGauge::new(r)))
            }),
        )?;
        family(
            enc,
            "commitscope_window_flush_batch_size",
            "The last exact window's requests per redo flush",
            None,
            w.iter().map(|(v, f)| (labels(v), batch_hist(&f.totals))),
        )?;
        family(
            enc,
            "commitscope_window_binlog_groups",
            "The last exact window's binlog groups (where the binlog's functions are probed)",
            None,
            w.iter()
                .filter(|(v, _)| v.binlog)
                .map(|(v, f)| (labels(v), g(f.totals.binlog_groups))),
        )?;
        family(
            enc,
            "commitscope_window_binlog_group_size",
            "The last exact window's commits per binlog group (exact sizes, bucketed; a group cut by the window's start or end is counted in part)",
            None,
            w.iter().filter(|(v, _)| v.binlog).map(|(v, f)| {
                (
                    labels(v),
                    size_hist(&f.totals.binlog_sizes, f.totals.binlog_commits),
                )
            }),
        )?;
        family(
            enc,
            "commitscope_window_durable_write_wait",
            "The last exact window's durable write waits by group-commit role",
            Some(&Unit::Seconds),
            w.iter().flat_map(|(v, f)| {
                let l = labels(v);
                [
                    (with(&l, "role", "leader"), time_hist(&f.totals.leaders)),
                    (with(&l, "role", "follower"), time_hist(&f.totals.followers)),
                ]
            }),
        )?;
        window_commit_path(enc, &w)?;
        window_replication(enc, &w)?;
        window_group(enc, &w)
    }
}

/// The last exact window's commits through a replication group, their
/// time in it, and the member's own count over the same window.
fn window_group(
    enc: &mut DescriptorEncoder,
    w: &[(&ServerView, &super::totals::Figures)],
) -> Result<(), std::fmt::Error> {
    let g: Vec<(&ServerView, &crate::group::GroupWaits)> = w
        .iter()
        .filter_map(|(v, f)| Some((*v, f.group.as_ref()?)))
        .collect();
    family(
        enc,
        "commitscope_window_group_commits",
        "The last exact window's commits through a replication group's hook (Group Replication's before_commit, Galera's wsrep before_commit), counted between the member's two reads of its own count when it has a login",
        None,
        g.iter()
            .map(|(v, x)| (labels(v), ConstGauge::new(x.commits as i64))),
    )?;
    family(
        enc,
        "commitscope_window_group_time",
        "The last exact window's commits' time in the group: mean, p50 and p99 (log2 buckets) per commit, and the sum",
        Some(&Unit::Seconds),
        g.iter().flat_map(|(v, x)| {
            [
                ("mean", x.mean_us),
                ("p50", x.p50_us),
                ("p99", x.p99_us),
                ("sum", Some(x.total_us as f64)),
            ]
            .into_iter()
            .filter_map(move |(k, us)| {
                Some((with(&labels(v), "stat", k), ConstGauge::new(us? / 1e6)))
            })
        }),
    )?;
    family(
        enc,
        "commitscope_window_group_part",
        "The last exact window's mean time per commit in each part of the group's hook: flow control, the send (Galera: the commit order), consensus and certification (Galera: replication and certification), the rest",
        Some(&Unit::Seconds),
        g.iter().flat_map(|(v, x)| {
            [
                ("flow_control", x.flow_control_us),
                ("send", x.send_us),
                ("consensus", x.consensus_us),
                ("rest", x.rest_us),
            ]
            .into_iter()
            .filter_map(move |(k, us)| {
                Some((with(&labels(v), "part", k), ConstGauge::new(us? / 1e6)))
            })
        }),
    )?;
    family(
        enc,
        "commitscope_window_group_consensus_calls",
        "The last exact window's calls of the group's consensus step (Galera's certify), all of them and by what ended them other than a commit: a conflict (certification failed), aborted once sent (brute force), never sent (interrupted before), another error",
        None,
        g.iter().flat_map(|(v, x)| {
            [
                ("all", x.consensus_calls),
                ("conflict", x.consensus_conflicts),
                ("aborted", x.consensus_aborted),
                ("unsent", x.consensus_unsent),
                ("failed", x.consensus_failed),
            ]
                .into_iter()
                .map(move |(k, n)| (with(&labels(v), "outcome", k), ConstGauge::new(n as i64)))
        }),
    )?;
    family(
        enc,
        "commitscope_window_group_server_commits",
        "The member's own count of the transactions it proposed to its group over the last exact window (COUNT_TRANSACTIONS_LOCAL_PROPOSED; Galera: wsrep_replicated), beside commitscope_window_group_commits",
        None,
        w.iter().filter_map(|(v, f)| {
            let (counter, n) = f.server_group_proposed?;
            Some((with(&labels(v), "counter", counter), ConstGauge::new(n as i64)))
        }),
    )?;
    family(
        enc,
        "commitscope_window_group_server_failures",
        "The member's own count of its failed certifications over the last exact window (Galera: wsrep_local_cert_failures), beside commitscope_window_group_consensus_calls{outcome=\"conflict\"} and {outcome=\"aborted\"} together",
        None,
        w.iter().filter_map(|(v, f)| {
            let (counter, n) = f.server_group_failed?;
            Some((with(&labels(v), "counter", counter), ConstGauge::new(n as i64)))
        }),
    )
}

/// The last exact window's waits of a semi-sync source for its replica.
fn window_replication(
    enc: &mut DescriptorEncoder,
    w: &[(&ServerView, &super::totals::Figures)],
) -> Result<(), std::fmt::Error> {
    let r: Vec<(&ServerView, &crate::replication::AckWaits)> = w
        .iter()
        .filter_map(|(v, f)| Some((*v, f.replication.as_ref()?)))
        .collect();
    family(
        enc,
        "commitscope_window_replica_ack_waits",
        "The last exact window's waits of a semi-sync source for its replica's acknowledgement (MySQL at AFTER_SYNC: one per binlog group; else one per transaction), counted between the server's two reads of its own count when it has a login",
        None,
        r.iter()
            .map(|(v, a)| (with(&labels(v), "hook", a.hook), ConstGauge::new(a.waits as i64))),
    )?;
    family(
        enc,
        "commitscope_window_replica_ack_time",
        "The last exact window's acknowledgement waits: their mean, p50 and p99 (log2 buckets), and their sum",
        Some(&Unit::Seconds),
        r.iter().flat_map(|(v, a)| {
            [
                ("mean", a.mean_us),
                ("p50", a.p50_us),
                ("p99", a.p99_us),
                ("sum", Some(a.total_us as f64)),
            ]
            .into_iter()
            .filter_map(move |(k, us)| {
                Some((with(&labels(v), "stat", k), ConstGauge::new(us? / 1e6)))
            })
        }),
    )?;
    // The server's own count over the same window, under its counter's
    // name: the check beside ours.
    let srv: Vec<(&ServerView, &crate::server::status::ServerAcks)> = w
        .iter()
        .filter_map(|(v, f)| Some((*v, f.server_acks.as_ref()?)))
        .collect();
    family(
        enc,
        "commitscope_window_replica_ack_server_waits",
        "The server's own count of its acknowledged waits over the last exact window (Rpl_semi_sync_source_yes_tx, MariaDB Rpl_semi_sync_master_yes_tx), beside commitscope_window_replica_ack_waits",
        None,
        srv.iter().map(|(v, a)| {
            (
                with(&labels(v), "counter", a.waits_counter),
                ConstGauge::new(a.waits as i64),
            )
        }),
    )?;
    family(
        enc,
        "commitscope_window_replica_ack_server_time",
        "The server's own sum of those waits over the last exact window (Rpl_semi_sync_*_tx_wait_time), beside commitscope_window_replica_ack_time_seconds{stat=\"sum\"}",
        Some(&Unit::Seconds),
        srv.iter().map(|(v, a)| {
            (
                with(&labels(v), "counter", a.time_counter),
                ConstGauge::new(a.wait_us as f64 / 1e6),
            )
        }),
    )
}

/// The last exact window's commit path (`--commit-path`): the commits
/// timed in it, their time, and each stage's count, time and share.
fn window_commit_path(
    enc: &mut DescriptorEncoder,
    w: &[(&ServerView, &super::totals::Figures)],
) -> Result<(), std::fmt::Error> {
    let cp: Vec<(&ServerView, &crate::commit_path::CommitPath)> = w
        .iter()
        .filter_map(|(v, f)| Some((*v, f.commit_path.as_ref()?)))
        .collect();
    let secs = |us: Option<f64>| us.map(|v| ConstGauge::new(v / 1e6));
    // Gauges, not a summary: the `stat` label (promtool keeps `quantile`
    // for summaries).
    let stats = |mean: Option<f64>, p50: Option<f64>, p99: Option<f64>| {
        [("mean", mean), ("p50", p50), ("p99", p99)]
    };
    family(
        enc,
        "commitscope_window_commits_timed",
        "Commits that began and ended inside the last exact window, timed from the server's commit function to its return (--commit-path)",
        None,
        cp.iter()
            .map(|(v, c)| (labels(v), ConstGauge::new(c.commits as i64))),
    )?;
    family(
        enc,
        "commitscope_window_commits_lost",
        "Commits of the last exact window the kernel could not time (their thread slot was taken)",
        None,
        cp.iter()
            .map(|(v, c)| (labels(v), ConstGauge::new(c.lost as i64))),
    )?;
    family(
        enc,
        "commitscope_window_commit_time",
        "The last exact window's time per commit inside the server: its mean, p50 and p99 (the quantiles within about 4 %)",
        Some(&Unit::Seconds),
        cp.iter().flat_map(|(v, c)| {
            stats(c.mean_us, c.p50_us, c.p99_us)
                .into_iter()
                .filter_map(move |(k, us)| Some((with(&labels(v), "stat", k), secs(us)?)))
        }),
    )?;
    let stages = || {
        cp.iter().flat_map(|(v, c)| {
            c.stages
                .iter()
                .map(move |s| (with(&labels(v), "stage", s.stage), s))
        })
    };
    family(
        enc,
        "commitscope_window_commit_stage_commits",
        "The last exact window's commits that spent time in each stage of the commit path",
        None,
        stages().map(|(l, s)| (l, ConstGauge::new(s.commits as i64))),
    )?;
    family(
        enc,
        "commitscope_window_commit_stage_share",
        "Each stage's part of the last exact window's commit time (the stages and `unattributed` sum to 1)",
        None,
        stages().filter_map(|(l, s)| Some((l, ConstGauge::new(s.share?)))),
    )?;
    family(
        enc,
        "commitscope_window_commit_stage_time",
        "The last exact window's time in each stage, per commit that spent time in it: its mean, p50 and p99 (log2 buckets)",
        Some(&Unit::Seconds),
        stages().flat_map(|(l, s)| {
            stats(s.mean_us, s.p50_us, s.p99_us)
                .into_iter()
                .filter_map(move |(k, us)| Some((with(&l, "stat", k), secs(us)?)))
        }),
    )?;
    family(
        enc,
        "commitscope_window_commit_sched_time",
        "The last exact window's mean time per commit inside the server by the scheduler's accounting: on a CPU, runnable on a run queue, blocked (the three sum to the mean)",
        Some(&Unit::Seconds),
        cp.iter().flat_map(|(v, c)| {
            sched_states(c.sched)
                .into_iter()
                .map(move |(k, us)| (with(&labels(v), "state", k), ConstGauge::new(us / 1e6)))
        }),
    )?;
    family(
        enc,
        "commitscope_window_commit_stage_sched_time",
        "The same per stage, per commit that spent time in it (the three sum to the stage's mean)",
        Some(&Unit::Seconds),
        stages().flat_map(|(l, s)| {
            sched_states(s.sched)
                .into_iter()
                .map(move |(k, us)| (with(&l, "state", k), ConstGauge::new(us / 1e6)))
        }),
    )?;
    window_wakeups(enc, &cp)
}

/// The last exact window's follower wake-ups (`--wakeups`): the waits
/// that ended, the wake-ups they took and the wasted ones, the
/// wake-to-run latency, and who woke them.
fn window_wakeups(
    enc: &mut DescriptorEncoder,
    cp: &[(&ServerView, &crate::commit_path::CommitPath)],
) -> Result<(), std::fmt::Error> {
    let w: Vec<(&ServerView, &crate::wakeups::Wakeups)> = cp
        .iter()
        .filter_map(|(v, c)| Some((*v, c.wakeups.as_ref()?)))
        .collect();
    for (name, help, get) in [
        (
            "commitscope_window_follower_waits",
            "Followers' waits (the binlog's group commit, the redo write) that ended in the last exact window (--wakeups)",
            (|x: &crate::wakeups::Wakeups| x.waits) as fn(&crate::wakeups::Wakeups) -> u64,
        ),
        (
            "commitscope_window_follower_wakeups",
            "The wake-ups those waits received in the last exact window",
            |x| x.wakeups,
        ),
        (
            "commitscope_window_follower_wakeups_wasted",
            "Of those, the wake-ups after which the follower blocked again in the same wait (a broadcast meant for another group)",
            |x| x.wasted,
        ),
    ] {
        family(
            enc,
            name,
            help,
            None,
            w.iter()
                .map(|(v, x)| (labels(v), ConstGauge::new(get(x) as i64))),
        )?;
    }
    family(
        enc,
        "commitscope_window_follower_wake_to_run",
        "The last exact window's time from a follower's wake-up to its running: p50 and p99",
        Some(&Unit::Seconds),
        w.iter().flat_map(|(v, x)| {
            [("p50", x.wake_to_run_p50_us), ("p99", x.wake_to_run_p99_us)]
                .into_iter()
                .filter_map(move |(k, us)| {
                    Some((with(&labels(v), "stat", k), ConstGauge::new(us? / 1e6)))
                })
        }),
    )?;
    family(
        enc,
        "commitscope_window_follower_wakeups_by_waker",
        "The last exact window's follower wake-ups by who woke them (its group's leader, another group's leader, the redo writer, the semi-sync ack receiver, other)",
        None,
        w.iter().flat_map(|(v, x)| {
            x.by_waker.iter().map(move |b| {
                (
                    with(&labels(v), "waker", b.waker),
                    ConstGauge::new(b.wakeups as i64),
                )
            })
        }),
    )
}

/// The exporter's own `process_*` metrics, as every Prometheus client
/// library exports them, read from `/proc/self`.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: i64,
    pub virtual_bytes: i64,
    pub open_fds: i64,
    pub max_fds: i64,
    pub start_time_seconds: f64,
}

impl ProcessStats {
    pub fn read() -> Self {
        // SAFETY: sysconf has no preconditions.
        let (hz, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK).max(1) as f64,
                libc::sysconf(libc::_SC_PAGESIZE).max(1) as i64,
            )
        };
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("btime "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .unwrap_or(0.0);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into `lim`.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        // Fields after the comm: utime 11, stime 12, starttime 19,
        // vsize 20, rss 21 (in pages).
        ProcessStats {
            cpu_seconds: (num(11) + num(12)) / hz,
            resident_bytes: num(21) as i64 * page,
            virtual_bytes: num(20) as i64,
            open_fds: std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as i64),
            max_fds: lim.rlim_cur as i64,
            start_time_seconds: boot + num(19) / hz,
        }
    }

    fn encode(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let none = Vec::new;
        family(
            enc,
            "process_cpu",
            "Total user and system CPU time spent",
            Some(&Unit::Seconds),
            [(none(), ConstCounter::new(self.cpu_seconds))],
        )?;
        for (name, help, v) in [
            (
                "process_resident_memory",
                "Resident memory size",
                self.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size",
                self.virtual_bytes,
            ),
        ] {
            family(
                enc,
                name,
                help,
                Some(&Unit::Bytes),
                [(none(), ConstGauge::new(v))],
            )?;
        }
        family(
            enc,
            "process_open_fds",
            "Number of open file descriptors",
            None,
            [(none(), ConstGauge::new(self.open_fds))],
        )?;
        family(
            enc,
            "process_max_fds",
            "Maximum number of open file descriptors",
            None,
            [(none(), ConstGauge::new(self.max_fds))],
        )?;
        family(
            enc,
            "process_start_time",
            "Start time of the process since the epoch",
            Some(&Unit::Seconds),
            [(none(), ConstGauge::new(self.start_time_seconds))],
        )
    }
}

/// The OpenMetrics 1.0 text of `e`.
pub fn openmetrics(e: Exposition) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(e));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// OpenMetrics text rewritten as text format 0.0.4: counters' metadata
/// names carry `_total`, info metrics become gauges named `..._info`,
/// `# UNIT` and `# EOF` are dropped (0.0.4 has neither).
pub fn classic(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    let mut out = String::with_capacity(openmetrics.len());
    // The type of the family whose HELP line is being read (its TYPE line
    // follows it).
    let type_of = |i: usize, name: &str| -> Option<String> {
        lines[i..]
            .iter()
            .find_map(|l| {
                l.strip_prefix("# TYPE ")?
                    .strip_prefix(name)?
                    .strip_prefix(' ')
            })
            .map(str::to_string)
    };
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("# UNIT ") || *line == "# EOF" {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("HELP", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("TYPE", r)));
        let Some((kind, rest)) = meta else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let (name, tail) = match (kind, type_of(i, name).as_deref()) {
            ("TYPE", Some("counter")) => (format!("{name}_total"), "counter".to_string()),
            ("TYPE", Some("info")) => (format!("{name}_info"), "gauge".to_string()),
            ("TYPE", Some("unknown")) => (name.to_string(), "untyped".to_string()),
            ("HELP", Some("counter")) => (format!("{name}_total"), tail.to_string()),
            ("HELP", Some("info")) => (format!("{name}_info"), tail.to_string()),
            _ => (name.to_string(), tail.to_string()),
        };
        out.push_str(&format!("# {kind} {name} {tail}\n"));
    }
    out
}

/// A mean's split by the scheduler as `state` label values and µs (none
/// without the split).
fn sched_states(x: Option<readers::commit_path::SchedSplit>) -> Vec<(&'static str, f64)> {
    x.map_or_else(Vec::new, |x| {
        vec![
            ("cpu", x.on_cpu_us),
            ("runq", x.run_queue_us),
            ("blocked", x.blocked_us),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, mode: &'static str) -> ServerView {
        let mut totals = Totals {
            requests: 12,
            durable: 10,
            flushes: 4,
            ..Default::default()
        };
        totals.classes[0].syncs = 4;
        totals.classes[0].sync_ns = 4_000_000;
        totals.classes[0].hist.0[19] = 4;
        totals.batch[2] = 3;
        totals.batch[4] = 1;
        totals.batch_sum = 10;
        // Two binlog groups of 3 and one of 20 (bucket 17-32).
        totals.binlog_groups = 3;
        totals.binlog_commits = 26;
        totals.binlog_sizes[3] = 2;
        totals.binlog_sizes[17] = 1;
        ServerView {
            name: name.into(),
            version: "MariaDB 10.11.18".into(),
            mode,
            symbol_source: "symtab".into(),
            fsync_probe: "tracepoint".into(),
            binary: "/usr/sbin/mariadbd".into(),
            flush_timed: true,
            sync_timed: true,
            anatomy: false,
            binlog: true,
            binlog_closed_by: true,
            io: false,
            unknown_sites: false,
            writes: true,
            tier: crate::probes::tier::Tier::Exact,
            commit_counter: None,
            last_window: None,
            attaches: 1,
            attached: true,
            totals,
        }
    }

    fn text() -> String {
        openmetrics(Exposition {
            servers: vec![view("/var/lib/mysql", "exact"), view("/d2", "server-layer")],
            process: ProcessStats::read(),
        })
    }

    /// Whether `t` has a sample of `name` carrying every label of `labels`
    /// (in any order) with the value `value`.
    fn has(t: &str, name: &str, labels: &[&str], value: &str) -> bool {
        t.lines().any(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix('{'))
                .and_then(|r| r.rsplit_once("} "))
                .is_some_and(|(ls, v)| {
                    let ls: Vec<&str> = ls.split(',').collect();
                    v == value && labels.iter().all(|x| ls.contains(x))
                })
        })
    }

    #[test]
    fn openmetrics_has_the_counts_under_their_labels() {
        let t = text();
        let srv = r#"server="/var/lib/mysql""#;
        let ver = r#"version="MariaDB 10.11.18""#;
        let w = "commitscope_log_write_requests_total";
        assert!(has(&t, w, &[srv, ver, r#"durable="true""#], "10"), "{t}");
        assert!(has(&t, w, &[srv, r#"durable="false""#], "2"));
        assert!(has(&t, "commitscope_redo_flushes_total", &[srv, ver], "4"));
        assert!(has(&t, "commitscope_binlog_groups_total", &[srv, ver], "3"));
        assert!(has(
            &t,
            "commitscope_binlog_group_commits_total",
            &[srv],
            "26"
        ));
        let g = "commitscope_binlog_group_size";
        assert!(
            has(&t, &format!("{g}_bucket"), &[srv, r#"le="3.0""#], "2"),
            "{t}"
        );
        assert!(
            has(&t, &format!("{g}_bucket"), &[srv, r#"le="32.0""#], "3"),
            "{t}"
        );
        assert!(has(&t, &format!("{g}_sum"), &[srv], "26.0"), "{t}");
        assert!(has(
            &t,
            "commitscope_fsyncs_total",
            &[srv, r#"class="redo""#],
            "4"
        ));
        // 2^20 ns = 0.001048576 s: the four 2^19..2^20 ns syncs.
        let d = "commitscope_fsync_duration_seconds";
        let redo = r#"class="redo""#;
        assert!(has(
            &t,
            &format!("{d}_bucket"),
            &[srv, redo, r#"le="0.000524288""#],
            "0"
        ));
        assert!(has(
            &t,
            &format!("{d}_bucket"),
            &[srv, redo, r#"le="0.001048576""#],
            "4"
        ));
        assert!(has(
            &t,
            &format!("{d}_bucket"),
            &[srv, redo, r#"le="+Inf""#],
            "4"
        ));
        assert!(has(&t, &format!("{d}_sum"), &[srv, redo], "0.004"));
        let b = "commitscope_flush_batch_size";
        assert!(
            has(&t, &format!("{b}_bucket"), &[srv, r#"le="1.0""#], "0"),
            "{t}"
        );
        assert!(has(&t, &format!("{b}_bucket"), &[srv, r#"le="2.0""#], "3"));
        assert!(has(&t, &format!("{b}_bucket"), &[srv, r#"le="+Inf""#], "4"));
        assert!(has(&t, &format!("{b}_sum"), &[srv], "10.0"));
        let d2 = r#"server="/d2""#;
        assert!(has(&t, "commitscope_server_commits_total", &[d2], "12"));
        // Only exact mode has write requests; only fallback has commits.
        assert!(!has(&t, w, &[d2, r#"durable="true""#], "10"));
        assert!(!has(&t, "commitscope_server_commits_total", &[srv], "12"));
        assert!(has(
            &t,
            "commitscope_probe_info",
            &[d2, r#"mode="server-layer""#],
            "1"
        ));
        assert!(t.contains("# TYPE process_cpu_seconds counter\n"));
        assert!(t.lines().any(|l| l.starts_with("process_open_fds ")));
        assert!(t.ends_with("# EOF\n"));
    }

    #[test]
    fn the_classic_format_names_counters_and_drops_openmetrics_only_lines() {
        let t = classic(&text());
        assert!(
            t.contains("# TYPE commitscope_redo_flushes_total counter\n"),
            "{t}"
        );
        assert!(t.contains("# HELP commitscope_redo_flushes_total Redo log flushes"));
        assert!(t.contains("# TYPE commitscope_probe_info gauge\n"));
        assert!(t.contains("# TYPE commitscope_fsync_duration_seconds histogram\n"));
        assert!(t.contains("# TYPE process_cpu_seconds_total counter\n"));
        assert!(!t.contains("# UNIT"));
        assert!(!t.contains("# EOF"));
    }
}
