//! One measured run on a stage: the schema loaded, the workload driven,
//! both halves read on the same ticks, the summary with the server's own
//! counters beside ours.
use std::time::{Duration, SystemTime};

use workload::{driver::Driver, engine::Config};

use super::{phases::Phases, stage::Stage, stop::Stop};
use crate::{
    error::Result,
    probes::cost,
    records::run::{EndReason, RunSink, RunSummary},
    sample::{Joined, ProbeSampler},
    sched_time::{SchedTime, ThreadTimes},
    server::{commits, managed::Managed, process, status},
};

/// One measured run on a stage.
#[derive(Clone, Debug)]
pub struct Measure {
    pub cfg: Config,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub reset: bool,
}

impl Stage {
    /// Loads the schema, runs the workload, prints joined ticks, returns
    /// the summary. Ctrl-C during the run ends it with a summary; during
    /// the load it is an interruption.
    pub async fn measure(
        &mut self,
        m: &Measure,
        sink: &mut dyn RunSink,
        stop: &Stop,
        ph: &Phases,
    ) -> Result<RunSummary> {
        ph.run(stop, "load", async {
            Ok(workload::run::prepare(&m.cfg, m.reset).await?)
        })
        .await?;
        ph.note("run ...");
        // Both baselines before the workers start: no commit falls
        // between them and the first tick.
        let mut sampler = match (&self.probes, self.pid) {
            (Some(p), Some(pid)) => Some(ProbeSampler::new(p, pid)?),
            _ => None,
        };
        // Light probes: n_write is the server's commit counter, read on
        // the control connection at each tick.
        let light = self.probes.as_ref().is_some_and(|p| !p.tier.per_commit());
        if let (true, Some(s)) = (light, sampler.as_mut()) {
            if let Ok(n) = commits::read_on(self.control()?).await {
                s.set_commit_base(n);
            }
        }
        let mut before = status::read(self.control()?).await?;
        let mut writers_before = self.writers_at().await;
        // The source's semi-sync counters at the last tick (the
        // first: before the workers start, as the probes' baseline).
        let mut acks_before = match (self.replica.as_ref(), self.control.as_mut()) {
            (Some(_), Some(c)) => status::semi_sync(c).await.ok().flatten(),
            _ => None,
        };
        // This process's threads (the workload's clients, the collector),
        // as the scheduler saw them: at the last tick, and summed over the
        // measured ticks (tick by tick: the clients' threads are gone by
        // the time the run's totals are made, and their time with them).
        let own = || ThreadTimes::read(std::process::id());
        let mut own_prev = own();
        let mut own_total = SchedTime::default();
        let mut engine = Driver::start(m.cfg.clone())?;
        let warmup = m.cfg.warmup.as_secs_f64();
        let mut base_marked = warmup <= 0.0;
        sink.start(&self.header, &m.cfg);
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + m.interval, m.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut fd_poll = tokio::time::interval(Duration::from_millis(100));
        let mut stall = crate::sample::StallClock::default();
        // `-v`: what the probes cost at this rate, after the first tick.
        let mut cost_said = false;
        // The source's semi-sync was seen OFF at a tick.
        let mut seen_off = false;
        // What stopped the run when the server could not write.
        let mut fatal: Option<String> = None;
        // How a server that is not our child ended, if it could be seen.
        let mut died: Option<String> = None;
        // `--replica group`: how the group lost its majority.
        let mut group_lost: Option<String> = None;
        let mut done_poll = tokio::time::interval(Duration::from_millis(20));
        let deadline = async {
            match m.duration {
                // The measured time, after the warmup. A hair late, so
                // that when it falls on a tick the tick ends the run
                // (below) instead of leaving an empty last interval.
                Some(d) => tokio::time::sleep(d + m.cfg.warmup + Duration::from_millis(20)).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let end = loop {
            tokio::select! {
                _ = tick.tick() => {
                    let n = match light {
                        true => commits::read_on(self.control()?).await.ok(),
                        false => None,
                    };
                    // The window's start is read three ways while commits
                    // go on: the workload's count and the probes' at one
                    // instant (in this process, microseconds apart), and
                    // the server's counters at that instant, from a read
                    // just before and one just after (`Status::at`): a
                    // SQL round trip on one side only put 2-6 % of a 2 s
                    // window outside the server's (58 of 3,207 once), and
                    // a status read between the first two 63 of 2,885
                    // outside the probes'. The run's end has no such edge:
                    // the clients have stopped when it is read.
                    let marking = !base_marked && engine.warmup_over_now();
                    let pre = match marking {
                        true => Some(status::read_timed(self.control()?).await?),
                        false => None,
                    };
                    let edge = std::time::Instant::now();
                    let w = engine.sample()?;
                    let mut t = match (&mut sampler, &self.probes) {
                        (Some(s), Some(p)) => Some(s.tick_with(p, n)?),
                        _ => None,
                    };
                    if let Some(pre) = pre {
                        let post = status::read_timed(self.control()?).await?;
                        before = status::Status::at(&pre, &post, edge);
                        writers_before = self.writers_at().await;
                    }
                    let own_now = own();
                    let own_tick = own_now.since(&own_prev);
                    if let Some(t) = t.as_mut() {
                        t.set_workload_threads(own_tick);
                    }
                    own_total += own_tick;
                    own_prev = own_now;
                    let elapsed = w.elapsed_s;
                    if let (Some(t), Some(p), false) = (&t, &self.probes, cost_said) {
                        cost_said = true;
                        let write_timing = self.attach.as_ref().is_some_and(|a| a.probe_args.anatomy);
                        if let Ok(snap) = p.read() {
                            let h = cost::hits(
                                &snap,
                                t.elapsed_s,
                                p.tier,
                                write_timing,
                                t.n_write,
                                p.light_syncs_timed(),
                            );
                            ph.note(cost::line(&h, p.tier));
                        }
                    }
                    let mut j = Joined::new(w, t);
                    j.stalled_s = stall.tick(&j.workload);
                    // A semi-sync source that fell back to async: said
                    // at once and on every tick it lasts.
                    if let (Some(r), Some(c)) = (self.replica.as_ref(), self.control.as_mut()) {
                        let on = r.semi_sync_on(c).await;
                        // The server's own count beside ours, tick by tick.
                        if on.is_some() {
                            let now = status::semi_sync(c).await.ok().flatten();
                            j.server_acks = now.zip(acks_before).map(|(n, b)| n.since(&b));
                            acks_before = now;
                        }
                        if on == Some(false) {
                            j.semi_sync_off = true;
                            if !seen_off {
                                seen_off = true;
                                eprintln!(
                                    "commitscope: semi-sync fell back to async at {:.1} s ({} OFF): the replica stopped acknowledging (gone, or slower than the source's semi-sync timeout)",
                                    j.workload.elapsed_s,
                                    r.dialect.source_status("status")
                                );
                            }
                        }
                    }
                    // A group member that left is said at once, the group's
                    // size on every tick; a group without a majority
                    // commits nothing more: the run ends there.
                    if let (Some(g), Some(c)) = (self.group.as_mut(), self.control.as_mut()) {
                        if let Ok(look) = g.look(c).await {
                            let words = g.words();
                            let tally = words.tally(look.online, look.size);
                            for line in &look.said {
                                eprintln!(
                                    "commitscope: {line} at {:.1} s: {tally}",
                                    j.workload.elapsed_s
                                );
                            }
                            j.group_online = Some(crate::server::group_end::Online {
                                online: look.online as u32,
                                size: look.size as u32,
                                words,
                            });
                            if !look.majority {
                                let quorum = g.row.quorum_word;
                                group_lost = Some(format!(
                                    "the {} lost {quorum} at {:.1} s: {tally} (lost: {}); its commits block until {quorum} is back",
                                    words.group,
                                    j.workload.elapsed_s,
                                    g.lost.join(", ")
                                ));
                            }
                        }
                    }
                    sink.tick(SystemTime::now(), &j);
                    if group_lost.is_some() {
                        break EndReason::GroupLostMajority;
                    }
                    // A stall may be the server waiting for disk space
                    // (a binlog write): its process list says so.
                    if j.stalled_s.is_some() {
                        if let Some(why) = status::waiting_for_space(&self.endpoint).await {
                            fatal = Some(format!("the server's disk is full: {why}"));
                            break EndReason::ServerCannotWrite;
                        }
                    }
                    if let Some(f) = engine.fatal() {
                        fatal = Some(f);
                        break EndReason::ServerCannotWrite;
                    }
                    if marking {
                        // Later ticks are measured: both halves start their
                        // window here (the server's counters did above).
                        if let Some(s) = sampler.as_mut() {
                            s.mark_base();
                        }
                        own_total = SchedTime::default();
                        base_marked = true;
                    }
                    if engine.finished() {
                        break EndReason::WorkloadDone;
                    }
                    if m.duration.is_some_and(|d| elapsed + 0.001 >= (d + m.cfg.warmup).as_secs_f64()) {
                        break EndReason::Duration;
                    }
                    if let Some(p) = self.pid.filter(|&p| !process::alive(p)) {
                        // Now, before its parent reaps it: how it ended.
                        died = process::zombie_status(p);
                        break EndReason::TargetExited;
                    }
                }
                _ = fd_poll.tick(), if sampler.is_some() => {
                    if let (Some(s), Some(p)) = (sampler.as_mut(), self.probes.as_mut()) {
                        s.poll_fds(p);
                    }
                }
                _ = done_poll.tick(), if m.cfg.total_rows.is_some() => {
                    // Workers that stopped on a full disk are not done.
                    if let Some(f) = engine.fatal() {
                        fatal = Some(f);
                        break EndReason::ServerCannotWrite;
                    }
                    if engine.finished() { break EndReason::WorkloadDone; }
                }
                _ = &mut deadline => break EndReason::Duration,
                _ = stop.wait() => break EndReason::Interrupted,
            }
        };
        // The clients' last part, while their threads are still there.
        let own_end = own();
        let own_last = own_end.since(&own_prev);
        own_total += own_last;
        let (last, wsum) = engine.stop()?;
        let n = match light {
            true => commits::read_on(self.control()?).await.ok(),
            false => None,
        };
        let mut t = match (&mut sampler, &self.probes) {
            (Some(s), Some(p)) => Some(s.tick_with(p, n)?),
            _ => None,
        };
        if let Some(t) = t.as_mut() {
            t.set_workload_threads(own_last);
        }
        // The residual after the last tick (the workers finishing their
        // statements while they stop) is in the totals; it gets a line of
        // its own only when it is a real fraction of an interval.
        if (last.txns > 0 || last.errors > 0) && last.interval_s >= 0.1 * m.interval.as_secs_f64() {
            sink.tick(SystemTime::now(), &Joined::new(last, t));
        }
        let after = if end == EndReason::TargetExited {
            before.clone()
        } else {
            status::read(self.control()?).await?
        };
        let writers_after = self.writers_at().await;
        let mut totals = sampler.as_ref().map(ProbeSampler::totals);
        if let Some(t) = totals.as_mut() {
            t.set_workload_threads(own_total);
        }
        if let Some(b) = totals.as_mut().and_then(|t| t.binlog.as_mut()) {
            b.check_commits(wsum.commits);
        }
        if let Some(c) = totals.as_mut().and_then(|t| t.commit_path.as_mut()) {
            c.client_p50_us = Some(wsum.latency.p50_us as f64);
            c.client_p99_us = Some(wsum.latency.p99_us as f64);
        }
        let checks = totals
            .as_ref()
            .map(|t| {
                status::compare(
                    &before,
                    &after,
                    &status::OurCounts {
                        redo_fsyncs: t.redo_fsync,
                        redo_writes: t.redo_writes,
                        data_fsyncs: t.data_fsync,
                        commits: wsum.commits,
                        binlog_fsyncs: t.binlog_fsync,
                        binlog_groups: t.binlog.as_ref().map(|b| b.groups),
                        binlog_group_commits: t
                            .binlog
                            .as_ref()
                            .filter(|b| b.commits > 0)
                            .map(|b| b.commits),
                        closed_by: t.binlog.as_ref().and_then(|b| {
                            use crate::binlog::ClosedBy;
                            use readers::binlog::Reason;
                            let by = b.closed_by.as_deref()?;
                            Some(
                                [Reason::Count, Reason::Timeout, Reason::LockWait]
                                    .map(|r| ClosedBy::groups_of(by, r)),
                            )
                        }),
                        ack_waits: t.replication.as_ref().map(|a| a.waits),
                        ack_wait_us: t.replication.as_ref().map(|a| a.total_us),
                        group_commits: t.group.as_ref().map(|g| g.commits),
                        group_consensus_us: t.group.as_ref().map(|g| g.consensus_total_us),
                        group_flow_us: t.group.as_ref().map(|g| g.flow_control_total_us),
                        group_calls: t.group.as_ref().map(|g| g.sent()),
                        group_failed: t.group.as_ref().map(|g| g.refused()),
                    },
                )
            })
            .unwrap_or_default();
        if let Some(p) = self.probes.as_mut() {
            p.drain_logs();
        }
        let mut s = RunSummary::new(end, wsum, totals, checks);
        if let (Some(r), Some(c)) = (self.replica.as_mut(), self.control.as_mut()) {
            let name = r.not_acknowledged_counter();
            let grew = |st: &status::Status| st.0.get(&name).copied().unwrap_or(0);
            let not_acked = grew(&after).saturating_sub(grew(&before));
            s.replica = Some(r.end(c, seen_off, not_acked).await);
        }
        if let Some(g) = self.group.as_mut() {
            s.group = Some(g.end(
                &before,
                &after,
                (&writers_before, &writers_after),
                s.workload.measured_s,
            ));
        }
        if let Some(why) = group_lost {
            // Members that cannot reach their group wait for it at
            // shutdown: stopped quickly instead.
            if let Some(g) = self.group.as_mut() {
                g.doomed();
            }
            if let Some(m) = self.managed.as_mut() {
                m.cannot_write();
            }
            s.ended = why;
        }
        if let Some(f) = fatal {
            if let Some(m) = self.managed.as_mut() {
                m.cannot_write();
            }
            // The managed server's own account of it, when it gave one.
            s.ended = match self.managed.as_ref().and_then(Managed::disk_full_line) {
                Some(line) if !f.contains(&line) => format!("{f} (error log: {line})"),
                _ => f,
            };
        }
        if end == EndReason::TargetExited {
            s.ended = format!(
                "the server died ({})",
                self.managed
                    .as_mut()
                    .and_then(Managed::exited)
                    .or(died)
                    .unwrap_or_else(|| "exit status unknown: its parent reaped it first".into())
            );
        }
        sink.summary(&self.header, &s);
        ph.note(format_args!(
            "commitscope's own peak RSS {:.1} MiB ({} clients)",
            s.workload.peak_rss_bytes as f64 / (1 << 20) as f64,
            m.cfg.threads
        ));
        Ok(s)
    }
}
