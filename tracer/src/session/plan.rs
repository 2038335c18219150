//! The server and probe flags of a session (the main command's, study's,
//! sweep's), checked once before anything starts, into the plan that
//! [`super::setup`] runs: a bad combination, and a flag that would do
//! nothing in the chosen mode, is refused here in one line, as a bad
//! value is. The main command's [`RunPlan`] adds its workload, checked
//! the same once.
use std::time::Duration;

use readers::family::ServerId;
use workload::{conn::ConnArgs, engine::Config};

use crate::{
    cli::{ProbeArgs, RunArgs, ServerArgs},
    error::{Error, Result},
    probes::tier::Tier,
    server::{
        group::{GroupPlan, DEFAULT_MEMBERS, MAX_MEMBERS},
        replica::{Mode, ReplicaPlan},
        sizing::Shape,
    },
};

/// What a session's stage is to be: the server (managed or the user's),
/// its replica, and how it is probed.
#[derive(Clone, Debug)]
pub struct StagePlan {
    pub server: ServerArgs,
    pub probes: ProbeArgs,
    pub conn: ConnArgs,
    /// The managed replica `--replica async|semi-sync` asks for.
    pub replica: Option<ReplicaPlan>,
    /// The managed group `--replica group` asks for.
    pub group: Option<GroupPlan>,
    /// `--server-version`, parsed.
    pub declared: Option<ServerId>,
    /// The probe tier: exact unless `--probes light`.
    pub tier: Tier,
    /// Probes attached (no `--no-trace`).
    pub trace: bool,
}

fn usage<T>(m: impl Into<String>) -> Result<T> {
    Err(Error::Usage(m.into()))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The connection options that select an existing server, for messages.
const CONN_FLAGS: &str = "connection options (--socket/--host/--port/--dsn/--defaults-file)";

impl StagePlan {
    /// Checks the flags; `lists`: a sweep, whose `--replica-delay-ms` may
    /// be a list of delays (its cells').
    pub fn check(
        server: &ServerArgs,
        probes: &ProbeArgs,
        conn: &ConnArgs,
        lists: bool,
    ) -> Result<StagePlan> {
        check_replica(server, lists)?;
        let existing = conn.any_given();
        if existing {
            let managed_only = [
                (server.mysqld.is_some(), "--mysqld"),
                (!server.server_options.is_empty(), "--server-option"),
                (server.keep, "--keep"),
            ];
            if let Some((_, flag)) = managed_only.iter().find(|(set, _)| *set) {
                return usage(format!(
                    "{flag} applies to the managed server, but {CONN_FLAGS} select an existing one: drop one or the other"
                ));
            }
            if server.replica.is_some() {
                return usage(format!(
                    "--replica starts a replica of the managed server, but {CONN_FLAGS} select an existing one: drop one or the other (an existing semi-sync primary is traced as it is)"
                ));
            }
        } else if server.pid.is_some() {
            return usage(
                "--pid names an existing server: pass its --socket (or --host/--port) too, or drop --pid for a managed server",
            );
        }
        let trace = !server.no_trace;
        if !trace {
            let probe_only = [
                (probes.commit_path, "--commit-path"),
                (probes.wakeups, "--wakeups"),
                (probes.no_sched_split, "--no-sched-split"),
                (probes.io, "--io"),
                (probes.anatomy, "--anatomy"),
                (probes.tier.is_some(), "--probes"),
            ];
            if let Some((_, flag)) = probe_only.iter().find(|(set, _)| *set) {
                return usage(format!(
                    "{flag} is a probe's, and --no-trace attaches none: drop one or the other"
                ));
            }
        }
        let tier = probes.tier_or(Tier::Exact);
        probes.commit_path_in(tier)?;
        let declared = probes.server()?;
        if trace && !is_root() {
            return Err(Error::NotRoot {
                what: "",
                hint: " (or pass --no-trace for the workload alone)",
            });
        }
        Ok(StagePlan {
            server: server.clone(),
            probes: probes.clone(),
            conn: conn.clone(),
            replica: replica_plan(server),
            group: server
                .replica
                .filter(|m| m.is_group())
                .map(|mode| GroupPlan {
                    mode,
                    members: server.group_members.unwrap_or(DEFAULT_MEMBERS),
                    write_nodes: server.write_nodes.unwrap_or(1),
                    slow_member: server.slow_member,
                }),
            declared,
            tier,
            trace,
        })
    }

    /// The plan with these managed server options instead (a study's
    /// pass, a sweep's first cell): they were checked with the rest.
    pub fn with_server_options(
        &self,
        options: Vec<readers::server::options::ServerOption>,
    ) -> Self {
        let mut p = self.clone();
        p.server.server_options = options;
        p
    }
}

/// The replica `--replica` asks for, with one delay (the first of
/// `--replica-delay-ms`; a sweep's cells set theirs); None without it.
fn replica_plan(server: &ServerArgs) -> Option<ReplicaPlan> {
    let mode = server.replica.filter(|m| !m.is_group())?;
    Some(ReplicaPlan {
        mode,
        wait: server.semi_sync_wait.unwrap_or_default(),
        delay: server
            .replica_delay_ms
            .first()
            .map(|ms| Duration::from_secs_f64(ms / 1000.0)),
    })
}

/// The replica flags: each only with the replica it applies to; a delay
/// is a number of ms from 0 to a minute; only a sweep takes a list.
fn check_replica(s: &ServerArgs, lists: bool) -> Result<()> {
    if s.write_nodes.is_some() && s.replica != Some(Mode::Galera) {
        return usage("--write-nodes spreads the clients over a multi-primary cluster's nodes: add --replica galera (a Group Replication group takes writes on its primary only)");
    }
    if !s.replica.is_some_and(Mode::is_group) && s.slow_member.is_some() {
        return usage("--slow-member slows a managed group's last member: add --replica group (MySQL) or --replica galera (MariaDB)");
    }
    if !s.replica.is_some_and(Mode::is_group) && s.group_members.is_some() {
        return usage(
            "--group-members sizes a managed group: add --replica group (MySQL) or --replica galera (MariaDB)",
        );
    }
    match s.replica {
        None => {
            if !s.replica_delay_ms.is_empty() {
                return usage("--replica-delay-ms delays a managed replica: add --replica semi-sync (or async)");
            }
            if s.semi_sync_wait.is_some() {
                return usage("--semi-sync-wait applies to a managed semi-sync replica: add --replica semi-sync");
            }
            if s.allow_async_fallback {
                return usage("--allow-async-fallback accepts a semi-sync replica falling back to async: add --replica semi-sync, or drop it");
            }
        }
        Some(Mode::Async) => {
            if s.semi_sync_wait.is_some() {
                return usage("--semi-sync-wait is where a semi-sync source waits, and --replica async never waits: use --replica semi-sync, or drop --semi-sync-wait");
            }
            if s.allow_async_fallback {
                return usage("--allow-async-fallback accepts a semi-sync replica falling back to async, and --replica async is async from the start: use --replica semi-sync, or drop it");
            }
        }
        Some(Mode::SemiSync) => {}
        Some(m @ (Mode::Group | Mode::Galera)) => {
            let v = m.value();
            if s.semi_sync_wait.is_some() || s.allow_async_fallback {
                return usage(format!("--semi-sync-wait and --allow-async-fallback are a semi-sync replica's, and a group waits for its consensus instead: drop them with --replica {v}, or use --replica semi-sync"));
            }
            if !s.replica_delay_ms.is_empty() {
                return usage(format!("--replica-delay-ms delays a replica's link through a proxy, and a group's members connect to the addresses they advertise, where no proxy fits (docs/replication.md): drop it with --replica {v}"));
            }
            if let Some(n) = s.group_members.filter(|n| !(1..=MAX_MEMBERS).contains(n)) {
                return usage(format!(
                    "--group-members {n}: give 1 to {MAX_MEMBERS} (each member is a server on this machine)"
                ));
            }
            let members = s.group_members.unwrap_or(DEFAULT_MEMBERS);
            if let Some(p) = s.slow_member {
                if !(1..=99).contains(&p) {
                    return usage(format!(
                        "--slow-member {p}: give the share of each 100 ms the member runs, 1 to 99 (%)"
                    ));
                }
                if members < 2 {
                    return usage("--slow-member slows a member besides the first (the workload's): give --group-members 2 or more");
                }
            }
            if let Some(n) = s.write_nodes.filter(|n| !(1..=members).contains(n)) {
                return usage(format!(
                    "--write-nodes {n}: give 1 to {members} (the cluster's nodes, --group-members)"
                ));
            }
        }
    }
    if let Some(bad) = s
        .replica_delay_ms
        .iter()
        .find(|d| !(0.0..=60_000.0).contains(*d))
    {
        return usage(format!(
            "--replica-delay-ms {bad}: give milliseconds from 0 to 60000"
        ));
    }
    if !lists && s.replica_delay_ms.len() > 1 {
        return usage(format!(
            "--replica-delay-ms takes one value here ({} given): a list of delays is a sweep's (commitscope sweep --replica-delay-ms 0,1,2)",
            s.replica_delay_ms.len()
        ));
    }
    Ok(())
}

/// The main command's plan: its stage, and its workload checked once (a
/// managed server's socket is not known yet: the endpoint is set when
/// the stage is up, see [`RunPlan::workload_on`]).
pub struct RunPlan {
    pub stage: StagePlan,
    pub workload: Config,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub reset: bool,
    /// What the managed server must take.
    pub shape: Shape,
}

impl RunPlan {
    pub fn check(args: &RunArgs) -> Result<RunPlan> {
        let stage = StagePlan::check(&args.server, &args.probes, &args.workload.conn, false)?;
        let (workload, interval, duration) = check_workload(&args.workload)?;
        group_takes(&args.server, &workload)?;
        Ok(RunPlan {
            shape: shape_of([&workload]),
            stage,
            workload,
            interval,
            duration,
            reset: args.workload.reset,
        })
    }

    /// The workload, on the stage's server.
    pub fn workload_on(&self, endpoint: &workload::conn::Endpoint) -> Config {
        Config {
            endpoint: endpoint.clone(),
            ..self.workload.clone()
        }
    }
}

/// A replication group refuses writes to a table without a primary key,
/// and TPC-C's `history` has none (as tpcc-mysql made it).
pub fn group_takes(server: &ServerArgs, w: &Config) -> Result<()> {
    if server.write_nodes.is_some_and(|n| n > 1) && w.tpcc.is_some() {
        return usage("--write-nodes spreads the update, hot-row and insert clients; TPC-C runs on the first node: drop --write-nodes with --workload tpcc");
    }
    if server.replica == Some(Mode::Group) && w.tpcc.is_some() {
        // Galera certifies a table without one by its whole row.
        return usage("--replica group refuses writes to tables without a primary key, and TPC-C's history table has none: use --workload update, hot-row or insert with a group");
    }
    Ok(())
}

/// Validates workload flags before anything starts: (the config, its
/// interval, its duration). A managed server's socket is not known yet,
/// so they are checked against a placeholder endpoint (nothing connects
/// to it).
pub fn check_workload(
    args: &workload::cli::WorkloadArgs,
) -> Result<(Config, Duration, Option<Duration>)> {
    if args.conn.any_given() {
        return Ok(workload::run::config(args)?);
    }
    let mut wa = args.clone();
    wa.conn = ConnArgs {
        socket: Some("/nonexistent".into()),
        defaults_file: Some("/dev/null".into()),
        user: Some("root".into()),
        ..Default::default()
    };
    Ok(workload::run::config(&wa)?)
}

/// What the server must take for runs of these configs.
pub fn shape_of<'a>(cfgs: impl IntoIterator<Item = &'a Config>) -> Shape {
    cfgs.into_iter().fold(Shape::default(), |s, c| Shape {
        clients: s.clients.max(c.peak_connections().saturating_sub(1) as u32),
        warehouses: s.warehouses.max(c.tpcc.as_ref().map(|t| t.warehouses)),
    })
}
