//! The server side of a session, set up once: the managed or existing
//! server, the control connection and the probes; restarted and torn down
//! in field order.

use readers::server::options::ServerOption;
use workload::conn::{ConnArgs, Endpoint};

use super::{phases::Phases, plan::StagePlan, stop::Stop};
use crate::{
    cli::ProbeArgs,
    error::{Error, Result},
    probes::{Plan, Probes, Target},
    records::run::{Legend, RunHeader},
    server::{
        existing,
        group::Group,
        group_end::WritersAt,
        group_layout::{self, Layout},
        locate,
        managed::{Managed, ManagedConfig},
        process,
        replica::{self, Replica},
        sizing::{Shape, Sizing},
    },
};

/// The server side of a session, set up once.
pub struct Stage {
    // Field order is teardown order.
    pub probes: Option<Probes>,
    pub(super) control: Option<mysql_async::Conn>,
    pub managed: Option<Managed>,
    /// `--replica`: the managed server's replica, stopped after it: a
    /// semi-sync source whose replica went first would wait out its
    /// timeout on the commits of its own shutdown.
    pub replica: Option<Replica>,
    /// `--replica group`: the group's other members, stopped after the
    /// primary.
    pub group: Option<Group>,
    /// `--write-nodes`: the members the clients write on, the first
    /// included (1 without a group).
    pub write_nodes: u32,
    pub conn: ConnArgs,
    pub endpoint: Endpoint,
    pub pid: Option<u32>,
    pub header: RunHeader,
    /// Set when tracing: how to attach again after a restart.
    pub(super) attach: Option<Attach>,
}

async fn connect(ep: &Endpoint) -> Result<mysql_async::Conn> {
    Ok(workload::conn::connect(ep, None).await?)
}

/// Starts (or finds) the server of `plan` and attaches its probes.
pub async fn setup(plan: &StagePlan, shape: Shape, stop: &Stop, ph: &Phases) -> Result<Stage> {
    let (server, probe_args, conn) = (&plan.server, &plan.probes, &plan.conn);
    let replica_plan = plan.replica.clone();
    let group_plan = plan.group;
    let opens = u64::from(shape.clients) + 1;
    let sizing = (!conn.any_given()).then(|| Sizing::for_machine(shape, &server.server_options));
    // Our clients' sockets, and the managed server's files: it inherits
    // the limit (as root it raises its own).
    let fds = workload::capacity::client_fds(opens)
        .max(sizing.as_ref().map_or(0, |s| s.open_files_limit));
    workload::capacity::raise_nofile(fds)?;
    let declared = plan.declared;
    let trace_on = plan.trace;
    let mut managed = None;
    // The managed binary's attach plan, made before it starts (to reject a
    // binary without probe points early) and used again at attach.
    let mut planned: Option<Plan> = None;
    // Where a MySQL install keeps its plugins (the semi-sync ones).
    let mut plugin_dir: Option<std::path::PathBuf> = None;
    // `--replica group`: the family's group, where the members listen,
    // and the install's plugin dir.
    let mut group_start: Option<(
        &'static readers::family::group::GroupRow,
        Layout,
        std::path::PathBuf,
    )> = None;
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
                        tier: plan.tier,
                        io: false,
                        commit_path: false,
                        wakeups: false,
                        sched_split: false,
                        semi_sync_wait: None,
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
        // A replica needs the source's binlog, server id, GTIDs and
        // semi-sync at start, and a loopback port to connect to.
        let dialect = &binary.id.family().replication;
        plugin_dir = dialect.source_plugin.and_then(|f| binary.plugin_dir(f));
        let mut m = Managed::new(ManagedConfig {
            binary,
            options: server.server_options.clone(),
            workdir: server.workdir.clone(),
            keep: server.keep,
            sizing,
        })?;
        if let Some(plan) = &replica_plan {
            let own = match (&plugin_dir, dialect.source_plugin) {
                (Some(d), Some(f)) if plan.mode == replica::Mode::SemiSync => {
                    Some(m.private_plugins(d, &[f])?.display().to_string())
                }
                _ => None,
            };
            m.extra_args = crate::server::replica::source_args(dialect, plan, own.as_deref());
            m.listen_port = Some(replica::free_port()?);
        }
        if let Some(gp) = &group_plan {
            let row = group_layout::row_for(m.cfg.binary.id.family(), gp.mode)?;
            group_layout::check_binary(row, &m.cfg.binary)?;
            let dir =
                group_layout::library_home(row, &m.cfg.binary).ok_or_else(|| Error::Group {
                    mode: row.mode,
                    detail: group_layout::no_library(row, &m.cfg.binary),
                })?;
            let layout = Layout::new(gp.members, row.transfer_ports)?;
            let own = group_layout::member_library_dir(row, &m, &dir)?;
            m.extra_args = layout.member_args(row, 0, &own);
            m.listen_port = Some(layout.sql_ports[0]);
            if row.transfer_ports > 0 {
                m.own_defaults_file()?;
            }
            group_start = Some((row, layout, dir));
        }
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
    let replica = match (&replica_plan, &managed) {
        (Some(plan), Some(m)) => {
            let port = m.listen_port.ok_or_else(|| {
                Error::Runtime("the managed server has no port for its replica".into())
            })?;
            let cfg = m.cfg.clone();
            let r = ph
                .run(
                    stop,
                    "start replica",
                    Replica::start(cfg, plan.clone(), &mut control, port, plugin_dir.as_deref()),
                )
                .await?;
            ph.note(format_args!("replica {}", r.describe()));
            Some(r)
        }
        _ => None,
    };
    let group = match (group_start, &managed) {
        (Some((row, layout, dir)), Some(m)) => {
            let g = ph
                .run(
                    stop,
                    "start group",
                    Group::start(
                        m.cfg.clone(),
                        row,
                        layout,
                        &mut control,
                        m,
                        &dir,
                        group_plan.and_then(|g| g.slow_member),
                    ),
                )
                .await?;
            eprintln!(
                "commitscope: {}: {} ({})",
                g.describe(),
                g.words().count(g.last.len()),
                g.last
                    .iter()
                    .map(|s| format!("{} {}", s.address, s.role))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some((_, what)) = &g.slow {
                eprintln!("commitscope: slow member (--slow-member): {what}");
            }
            Some(g)
        }
        _ => None,
    };
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
        semi_sync_wait: replica
            .as_ref()
            .filter(|r| r.plan.mode == replica::Mode::SemiSync)
            .map(|r| r.plan.wait),
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
        ) + &replica
            .as_ref()
            .map(|r| format!("; {}", r.describe()))
            .or_else(|| group.as_ref().map(|g| format!("; {}", g.describe())))
            .unwrap_or_default(),
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
        replica,
        group,
        write_nodes: plan.group.map_or(1, |g| g.write_nodes),
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
pub(super) struct Attach {
    pub(super) probe_args: ProbeArgs,
    declared: Option<readers::family::ServerId>,
    /// The managed binary's plan, made once before it started.
    plan: Option<Plan>,
    /// The managed semi-sync pair's wait point (None: not known).
    semi_sync_wait: Option<crate::probes::plan::WaitPoint>,
}

impl Attach {
    /// `first`: say the fallback line (once per session, not per restart).
    async fn attach(
        &self,
        pid: u32,
        first: bool,
        stop: &Stop,
        ph: &Phases,
    ) -> Result<(Probes, Legend)> {
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
            // return probe only comes with --anatomy (leaders, followers)
            // or --commit-path (the redo's stages).
            write_timing: self.probe_args.anatomy || self.probe_args.commit_path,
            anatomy: self.probe_args.anatomy || self.probe_args.commit_path,
            tier: self.probe_args.tier_or(crate::probes::tier::Tier::Exact),
            io: self.probe_args.io,
            commit_path: self.probe_args.commit_path,
            wakeups: self.probe_args.wakeups,
            sched_split: !self.probe_args.no_sched_split,
            semi_sync_wait: self.semi_sync_wait,
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
            crate::legend::verbose_report(&probes);
        }
        if let Some(line) = probes
            .plan
            .fallback_line()
            .filter(|_| first && probes.tier.per_commit())
        {
            eprintln!("commitscope: {line}");
        }
        if let Some(line) = crate::probes::cost::commit_path_line(
            target.commit_path,
            probes.commit_path,
            &probes.sched_split,
        )
        .filter(|_| first)
        {
            eprintln!("commitscope: {line}");
            if probes.wakeups {
                eprintln!("commitscope: {}", crate::probes::cost::WAKEUPS_COST);
            }
        }
        let legend = crate::legend::legend(&probes, &target);
        Ok((probes, legend))
    }
}

impl Stage {
    /// Where the clients besides the first member's write
    /// (`--write-nodes`): every run's workload gets them as its spread.
    pub fn spread(&self) -> Result<Vec<Endpoint>> {
        self.group
            .as_ref()
            .map_or(Ok(Vec::new()), |g| g.writers(self.write_nodes))
    }

    /// Those members' own counters now, at an edge of the window (none
    /// without them).
    pub async fn writers_at(&self) -> WritersAt {
        match &self.group {
            Some(g) => g.writers_at(self.write_nodes).await,
            None => Vec::new(),
        }
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
        if self.group.is_some() {
            return Err(Error::Usage(
                "--replica group: a setting that needs a restart would make the primary rejoin its group as a secondary: sweep settings SET GLOBAL can change, or drop --replica group".into(),
            ));
        }
        let detaching = detach_beside(self.probes.take());
        if let (Some(r), Some(c)) = (self.replica.as_mut(), self.control.as_mut()) {
            r.pause(c).await;
        }
        if let Some(c) = self.control.take() {
            let _ = c.disconnect().await;
        }
        let m = self.managed.as_mut().ok_or_else(|| {
            Error::Usage("server options that need a restart apply to the managed server only: drop --socket/--host/--port".into())
        })?;
        ph.note("stop server ...");
        m.stop();
        joined(detaching);
        m.cfg.options = options;
        ph.run(stop, "restart server", m.start()).await?;
        self.pid = m.pid();
        self.header.options = m.cfg.options.iter().map(|o| o.to_string()).collect();
        self.control = Some(ph.run(stop, "connect", connect(&self.endpoint)).await?);
        // The replica replicates from the new process: measured only
        // once it is back.
        if let (Some(r), Some(c)) = (self.replica.as_mut(), self.control.as_mut()) {
            ph.run(stop, "replica reconnect", r.resume(c)).await?;
        }
        if let (Some(a), Some(pid)) = (&self.attach, self.pid) {
            let (p, legend) = a.attach(pid, false, stop, ph).await?;
            self.probes = Some(p);
            self.header.legend = Some(legend);
        }
        Ok(())
    }

    /// Orderly teardown (also what dropping does, minus the timing line).
    pub async fn close(mut self, ph: &Phases) {
        let detaching = detach_beside(self.probes.take());
        if let (Some(r), Some(c)) = (self.replica.as_mut(), self.control.as_mut()) {
            r.pause(c).await;
        }
        if let Some(c) = self.control.take() {
            let _ = c.disconnect().await;
        }
        // The replica, disconnected, shuts down beside its source, not
        // after it.
        if let Some(r) = self.replica.as_mut() {
            r.disconnect().await;
            r.server.ask_stop();
        }
        if let Some(mut m) = self.managed.take() {
            ph.note("stop server ...");
            if let Some(d) = m.stop() {
                ph.note(format_args!("stop server done in {:.2} s", d.as_secs_f64()));
            }
        }
        if let Some(r) = self.replica.take() {
            ph.note("stop replica ...");
            drop(r);
        }
        if let Some(g) = self.group.take() {
            ph.note("stop the group's other members ...");
            drop(g);
        }
        joined(detaching);
    }
}

/// Detaches `probes` on a thread of its own, for the caller to join once
/// it has stopped the server ([`joined`]): the kernel's wait per probe
/// (a grace period each, 1.7 s for a stock MySQL's 25) and the server's
/// shutdown (1.4 s) overlap instead of adding up.
fn detach_beside(probes: Option<Probes>) -> Option<std::thread::JoinHandle<()>> {
    probes.map(|p| std::thread::spawn(move || drop(p)))
}

/// Waits until [`detach_beside`]'s probes are off.
fn joined(detaching: Option<std::thread::JoinHandle<()>>) {
    if let Some(t) = detaching {
        let _ = t.join();
    }
}
