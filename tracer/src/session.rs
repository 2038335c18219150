//! One session of the main command (and of `study`): the server (managed
//! or existing), the probes on its pid, then measured runs of the built-in
//! workload with both halves read on the same ticks. Teardown order is the
//! field order of [`Stage`]: probes detached, control connection closed,
//! managed server stopped, its temp dir removed — on success, on error and
//! on Ctrl-C in any phase.
use std::{
    future::Future,
    time::{Duration, Instant, SystemTime},
};

use tokio::sync::watch;
use workload::{
    conn::{ConnArgs, Endpoint},
    driver::Driver,
    engine::Config,
};

use crate::{
    cli::{ProbeArgs, ServerArgs},
    error::{Error, Result},
    probes::{cost, Plan, Probes, Target},
    report::{EndReason, RunHeader, RunSink, RunSummary},
    sample::{Joined, ProbeSampler},
    server::{
        commits, existing, locate,
        managed::{Managed, ManagedConfig},
        options::ServerOption,
        process,
        sizing::{Shape, Sizing},
        status,
    },
    trace,
};

/// Ctrl-C and SIGTERM, installed once before anything starts so that no
/// phase can miss them (a signal then never kills us half-way).
#[derive(Clone)]
pub struct Stop {
    rx: watch::Receiver<bool>,
}

impl Stop {
    /// Must be called inside the runtime.
    pub fn install() -> Result<Stop> {
        use tokio::signal::unix::{signal, SignalKind};
        let err =
            |e: std::io::Error| Error::Runtime(format!("cannot install a signal handler: {e}"));
        let mut int = signal(SignalKind::interrupt()).map_err(err)?;
        let mut term = signal(SignalKind::terminate()).map_err(err)?;
        // The terminal went away: clean up all the same.
        let mut hup = signal(SignalKind::hangup()).map_err(err)?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                let _ = tx.send(true);
            }
        });
        Ok(Stop { rx })
    }

    pub fn fired(&self) -> bool {
        *self.rx.borrow() || crate::interrupt::fired()
    }

    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// Startup phases: each can be interrupted, and `-v` prints its duration.
pub struct Phases {
    verbose: bool,
    t0: Instant,
}

impl Phases {
    pub fn new(verbose: bool) -> Self {
        Phases {
            verbose,
            t0: Instant::now(),
        }
    }

    pub fn note(&self, msg: impl std::fmt::Display) {
        if self.verbose {
            eprintln!(
                "commitscope: [{:6.2} s] {msg}",
                self.t0.elapsed().as_secs_f64()
            );
        }
    }

    /// Runs `fut` unless Ctrl-C comes first (then `fut` is dropped, which
    /// kills whatever it started).
    pub async fn run<T>(
        &self,
        stop: &Stop,
        name: &'static str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if stop.fired() {
            return Err(Error::Interrupted { phase: name });
        }
        self.note(format_args!("{name} ..."));
        let t = Instant::now();
        let r = tokio::select! {
            r = fut => r,
            _ = stop.wait() => Err(Error::Interrupted { phase: name }),
        };
        if r.is_ok() {
            self.note(format_args!(
                "{name} done in {:.2} s",
                t.elapsed().as_secs_f64()
            ));
        }
        r
    }
}

/// The server side of a session, set up once.
pub struct Stage {
    // Field order is teardown order.
    pub probes: Option<Probes>,
    control: Option<mysql_async::Conn>,
    pub managed: Option<Managed>,
    pub conn: ConnArgs,
    pub endpoint: Endpoint,
    pub pid: Option<u32>,
    pub header: RunHeader,
    /// Set when tracing: how to attach again after a restart.
    attach: Option<Attach>,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Bad combinations, found before anything starts.
pub fn check_args(server: &ServerArgs, conn: &ConnArgs) -> Result<()> {
    if conn.any_given() {
        let managed_only = [
            (server.mysqld.is_some(), "--mysqld"),
            (!server.server_options.is_empty(), "--server-option"),
            (server.keep, "--keep"),
        ];
        if let Some((_, flag)) = managed_only.iter().find(|(set, _)| *set) {
            return Err(Error::Usage(format!(
                "{flag} applies to the managed server, but connection options (--socket/--host/--port/--dsn/--defaults-file) select an existing one: drop one or the other"
            )));
        }
    } else if server.pid.is_some() {
        return Err(Error::Usage(
            "--pid names an existing server: pass its --socket (or --host/--port) too, or drop --pid for a managed server".into(),
        ));
    }
    if !server.no_trace && !is_root() {
        return Err(Error::NotRoot {
            what: "",
            hint: " (or pass --no-trace for the workload alone)",
        });
    }
    Ok(())
}

async fn connect(ep: &Endpoint) -> Result<mysql_async::Conn> {
    Ok(workload::conn::connect(ep, None).await?)
}

/// Starts (or finds) the server and attaches the probes.
pub async fn setup(
    server: &ServerArgs,
    probe_args: &ProbeArgs,
    conn: &ConnArgs,
    shape: Shape,
    stop: &Stop,
    ph: &Phases,
) -> Result<Stage> {
    check_args(server, conn)?;
    let opens = u64::from(shape.clients) + 1;
    let sizing = (!conn.any_given()).then(|| Sizing::for_machine(shape, &server.server_options));
    // Our clients' sockets, and the managed server's files: it inherits
    // the limit (as root it raises its own).
    let fds = workload::capacity::client_fds(opens)
        .max(sizing.as_ref().map_or(0, |s| s.open_files_limit));
    workload::capacity::raise_nofile(fds)?;
    let declared = probe_args
        .server_version
        .as_deref()
        .map(str::parse)
        .transpose()?;
    let trace_on = !server.no_trace;
    let mut managed = None;
    // The managed binary's attach plan, made before it starts (to reject a
    // binary without probe points early) and used again at attach.
    let mut planned: Option<Plan> = None;
    let conn = if conn.any_given() {
        conn.clone()
    } else {
        let (binary, plan) = ph
            .run(stop, "find server", async {
                let path = locate::find(server.mysqld.as_deref())?;
                let b = locate::inspect(&path, declared)?;
                let plan = if trace_on {
                    Some(Plan::new(&Target {
                        pid: 0,
                        exe: b.path.clone(),
                        debug_root: probe_args.debug_dir.clone(),
                        debuginfod: probe_args.debuginfod_choice(),
                        server: Some(b.id),
                        fsync_probe: probe_args.fsync_probe,
                        write_timing: false,
                        anatomy: false,
                        tier: probe_args.tier_or(crate::probes::tier::Tier::Exact),
                    })?)
                } else {
                    None
                };
                Ok((b, plan))
            })
            .await?;
        planned = plan;
        ph.note(format_args!(
            "server binary {} ({})",
            binary.path.display(),
            binary.id
        ));
        let sizing = sizing
            .clone()
            .unwrap_or_else(|| Sizing::for_machine(shape, &[]));
        if let Some(w) = &sizing.warning {
            eprintln!("commitscope: warning: {w}");
        }
        ph.note(format_args!(
            "managed server sized to the run: {}",
            sizing.describe()
        ));
        let m = Managed::new(ManagedConfig {
            binary,
            options: server.server_options.clone(),
            workdir: server.workdir.clone(),
            keep: server.keep,
            sizing,
        })?;
        ph.note(format_args!(
            "temp dir {} (server runs as {})",
            m.dir().display(),
            m.run_as.describe()
        ));
        // The server is owned by `managed` from here on: whatever happens
        // next, dropping it stops the server and removes the dir.
        let m = managed.insert(m);
        ph.run(stop, "init datadir", m.init()).await?;
        ph.run(stop, "start server", m.start()).await?;
        m.conn_args()
    };
    let endpoint = conn.resolve()?;
    let mut control = ph.run(stop, "connect", connect(&endpoint)).await?;
    // Before any other connection: a run that cannot fit is refused here,
    // not with 1040 after hundreds of clients connected.
    workload::capacity::Capacity::read(&mut control)
        .await?
        .check(opens)?;
    let version: Option<String> = {
        use mysql_async::prelude::Queryable;
        control.query_first("SELECT VERSION()").await.ok().flatten()
    };
    let pid = match &managed {
        Some(m) => m.pid(),
        None if !endpoint.is_local() => {
            if trace_on {
                eprintln!(
                    "commitscope: {} is remote: the workload runs untraced (probes need the server on this machine)",
                    endpoint.describe()
                );
            }
            None
        }
        None => {
            let (pid, how) =
                existing::find_pid(server.pid, endpoint.socket.as_deref(), &mut control).await?;
            ph.note(format_args!("server pid {pid} (from {how})"));
            Some(pid)
        }
    };
    let attach = Attach {
        probe_args: probe_args.clone(),
        declared: planned.as_ref().and_then(|p| p.server).or(declared),
        plan: planned,
    };
    let (probes, legend) = match pid {
        Some(pid) if trace_on => {
            let (p, l) = attach.attach(pid, true, stop, ph).await?;
            (Some(p), Some(l))
        }
        _ => (None, None),
    };
    let header = RunHeader {
        server: format!(
            "{} ({}{})",
            version.as_deref().unwrap_or("version unknown"),
            match &managed {
                Some(m) => format!("managed: {}", m.cfg.binary.path.display()),
                None => endpoint.describe(),
            },
            pid.map(|p| format!(", pid {p}")).unwrap_or_default()
        ),
        legend,
        options: server
            .server_options
            .iter()
            .map(|o| o.to_string())
            .collect(),
        sizing: managed.as_ref().map(|m| m.cfg.sizing.clone()),
    };
    Ok(Stage {
        probes,
        control: Some(control),
        managed,
        conn,
        endpoint,
        pid,
        header,
        attach: trace_on.then_some(attach),
    })
}

/// What attaching the probes to a server pid needs; kept by the stage so
/// that a restarted managed server (new pid) is traced the same way.
#[derive(Clone)]
struct Attach {
    probe_args: ProbeArgs,
    declared: Option<crate::probes::profiles::ServerId>,
    /// The managed binary's plan, made once before it started.
    plan: Option<Plan>,
}

impl Attach {
    /// `first`: say the fallback line (once per session, not per restart).
    async fn attach(
        &self,
        pid: u32,
        first: bool,
        stop: &Stop,
        ph: &Phases,
    ) -> Result<(Probes, crate::report::Legend)> {
        let target = Target {
            pid,
            exe: match &self.plan {
                Some(p) => p.exe.clone(),
                None => process::exe_of(pid)?,
            },
            debug_root: self.probe_args.debug_dir.clone(),
            debuginfod: self.probe_args.debuginfod_choice(),
            server: self.declared,
            fsync_probe: self.probe_args.fsync_probe,
            // The workload times every commit from the client side; the
            // return probe only comes with --anatomy (leaders, followers).
            write_timing: self.probe_args.anatomy,
            anatomy: self.probe_args.anatomy,
            tier: self.probe_args.tier_or(crate::probes::tier::Tier::Exact),
        };
        let probes = ph
            .run(stop, "attach probes", async {
                let plan = match &self.plan {
                    Some(p) => p.clone(),
                    None => Plan::new(&target)?,
                };
                Probes::attach(&target, plan)
            })
            .await?;
        if self.probe_args.verbose {
            trace::verbose_report(&probes);
        }
        if let Some(line) = probes
            .plan
            .fallback_line()
            .filter(|_| first && probes.tier.per_commit())
        {
            eprintln!("commitscope: {line}");
        }
        let legend = trace::legend(&probes, &target);
        Ok((probes, legend))
    }
}

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
        // What stopped the run when the server could not write.
        let mut fatal: Option<String> = None;
        // How a server that is not our child ended, if it could be seen.
        let mut died: Option<String> = None;
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
                    let w = engine.sample()?;
                    let t = match (&mut sampler, &self.probes) {
                        (Some(s), Some(p)) => Some(s.tick_with(p, n)?),
                        _ => None,
                    };
                    let elapsed = w.elapsed_s;
                    if let (Some(t), Some(p), false) = (&t, &self.probes, cost_said) {
                        cost_said = true;
                        let write_timing = self.attach.as_ref().is_some_and(|a| a.probe_args.anatomy);
                        if let Ok(snap) = p.read() {
                            let h = cost::hits(&snap, t.elapsed_s, p.tier, write_timing, t.n_write);
                            ph.note(cost::line(&h, p.tier));
                        }
                    }
                    let mut j = Joined::new(w, t);
                    j.stalled_s = stall.tick(&j.workload);
                    sink.tick(SystemTime::now(), &j);
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
                    if !base_marked && elapsed + 0.001 >= warmup {
                        // Later ticks are measured: both halves and the
                        // server's counters start their window here.
                        if let Some(s) = sampler.as_mut() {
                            s.mark_base();
                        }
                        before = status::read(self.control()?).await?;
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
        let (last, wsum) = engine.stop()?;
        let n = match light {
            true => commits::read_on(self.control()?).await.ok(),
            false => None,
        };
        let t = match (&mut sampler, &self.probes) {
            (Some(s), Some(p)) => Some(s.tick_with(p, n)?),
            _ => None,
        };
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
        let totals = sampler.as_ref().map(ProbeSampler::totals);
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
                    },
                )
            })
            .unwrap_or_default();
        if let Some(p) = self.probes.as_mut() {
            p.drain_logs();
        }
        let mut s = RunSummary::new(end, wsum, totals, checks);
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

    /// The control connection (session variables, SET GLOBAL, status).
    pub fn control(&mut self) -> Result<&mut mysql_async::Conn> {
        self.control
            .as_mut()
            .ok_or_else(|| Error::Runtime("the control connection is closed".into()))
    }

    /// Restarts the managed server with `options` — same datadir, so the
    /// loaded data stays — and attaches the probes to its new pid.
    pub async fn restart(
        &mut self,
        options: Vec<ServerOption>,
        stop: &Stop,
        ph: &Phases,
    ) -> Result<()> {
        drop(self.probes.take());
        if let Some(c) = self.control.take() {
            let _ = c.disconnect().await;
        }
        let m = self.managed.as_mut().ok_or_else(|| {
            Error::Usage("server options that need a restart apply to the managed server only: drop --socket/--host/--port".into())
        })?;
        ph.note("stop server ...");
        m.stop();
        m.cfg.options = options;
        ph.run(stop, "restart server", m.start()).await?;
        self.pid = m.pid();
        self.header.options = m.cfg.options.iter().map(|o| o.to_string()).collect();
        self.control = Some(ph.run(stop, "connect", connect(&self.endpoint)).await?);
        if let (Some(a), Some(pid)) = (&self.attach, self.pid) {
            let (p, legend) = a.attach(pid, false, stop, ph).await?;
            self.probes = Some(p);
            self.header.legend = Some(legend);
        }
        Ok(())
    }

    /// Orderly teardown (also what dropping does, minus the timing line).
    pub async fn close(mut self, ph: &Phases) {
        drop(self.probes.take());
        if let Some(c) = self.control.take() {
            let _ = c.disconnect().await;
        }
        if let Some(mut m) = self.managed.take() {
            ph.note("stop server ...");
            if let Some(d) = m.stop() {
                ph.note(format_args!("stop server done in {:.2} s", d.as_secs_f64()));
            }
        }
    }
}

/// The single-threaded runtime every command's clock runs on (the
/// workload's workers have threads of their own).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the async runtime: {e}")))
}

/// Validates workload flags before anything starts. A managed server's
/// socket is not known yet, so they are checked against a placeholder
/// endpoint (nothing connects to it).
pub fn check_workload(args: &workload::cli::WorkloadArgs) -> Result<Config> {
    if args.conn.any_given() {
        return Ok(workload::run::config(args)?.0);
    }
    let mut wa = args.clone();
    wa.conn = ConnArgs {
        socket: Some("/nonexistent".into()),
        defaults_file: Some("/dev/null".into()),
        user: Some("root".into()),
        ..Default::default()
    };
    Ok(workload::run::config(&wa)?.0)
}

/// What the server must take for runs of these configs.
pub fn shape_of<'a>(cfgs: impl IntoIterator<Item = &'a Config>) -> Shape {
    cfgs.into_iter().fold(Shape::default(), |s, c| Shape {
        clients: s.clients.max(c.peak_connections().saturating_sub(1) as u32),
        warehouses: s.warehouses.max(c.tpcc.as_ref().map(|t| t.warehouses)),
    })
}

/// The main command.
pub fn run(args: crate::cli::RunArgs) -> Result<()> {
    let rt = crate::session::runtime()?;
    rt.block_on(async {
        let stop = Stop::install()?;
        let ph = Phases::new(args.probes.verbose);
        let shape = shape_of([&check_workload(&args.workload)?]);
        let mut wa = args.workload.clone();
        let mut sink = crate::report::run_sinks(args.workload.json, args.output.csv.as_deref())?;
        let mut stage = setup(
            &args.server,
            &args.probes,
            &args.workload.conn,
            shape,
            &stop,
            &ph,
        )
        .await?;
        wa.conn = stage.conn.clone();
        let (cfg, interval, duration) = workload::run::config(&wa)?;
        let m = Measure {
            cfg,
            interval,
            duration,
            reset: args.workload.reset,
        };
        let r = stage.measure(&m, sink.as_mut(), &stop, &ph).await;
        stage.close(&ph).await;
        match r? {
            s if s.end.server_failed() => Err(Error::ServerLost { detail: s.ended }),
            _ => Ok(()),
        }
    })
}
