//! `--replica async|semi-sync`: a second throwaway server from the same
//! binary, replicating from the managed one over loopback (GTID
//! auto-positioning), optionally behind a delaying proxy. What the two
//! families spell differently (options, statements, status names) is
//! their row's [`Dialect`] (`readers::family`); the rest is the same steps
//! on both.
use std::{net::SocketAddr, time::Duration};

use mysql_async::prelude::Queryable;
use readers::family::replication::{quote, Dialect, Wire};

use super::{
    delay_proxy::DelayProxy,
    managed::{Managed, ManagedConfig},
    sizing::{Shape, Sizing},
};
use crate::{
    error::{Error, Result},
    probes::plan::WaitPoint,
};

/// How long the replica may take to connect and, with semi-sync, for the
/// source to count it as a semi-sync client.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);

/// A sweep's axis for `--replica-delay-ms`: cells name it like a server
/// option, but it is the proxy's, never the server's.
pub const DELAY_AXIS: &str = "replica_delay_ms";

/// The replication user commitscope creates on its own source.
const REPL_USER: &str = "commitscope_repl";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The source does not wait for the replica.
    Async,
    /// Each commit group waits for the replica's acknowledgement.
    SemiSync,
    /// A single-primary replication group (MySQL's Group Replication)
    /// the managed server founds and leads: `server::group`.
    Group,
    /// A Galera cluster (MariaDB's) the managed server founds, the other
    /// nodes joining by state transfer; the workload runs on the first:
    /// `server::group` with the family's row.
    Galera,
}

impl Mode {
    /// A replication group of several members (its family's row says
    /// how), not a source and its replica.
    pub fn is_group(self) -> bool {
        matches!(self, Mode::Group | Mode::Galera)
    }

    /// Its `--replica` value, as a family's group row names it.
    pub fn value(self) -> &'static str {
        match self {
            Mode::Async => "async",
            Mode::SemiSync => "semi-sync",
            Mode::Group => "group",
            Mode::Galera => "galera",
        }
    }
}

/// What a run asks of its replica.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaPlan {
    pub mode: Mode,
    pub wait: WaitPoint,
    /// Added round trip between replica and source, through a proxy
    /// (None: connected direct).
    pub delay: Option<Duration>,
}

/// The source's start options for `plan`, as `dialect` spells them.
pub fn source_args(dialect: &Dialect, plan: &ReplicaPlan, plugin_dir: Option<&str>) -> Vec<String> {
    let mut a = vec!["--server-id=1".to_string(), "--log-bin".to_string()];
    a.extend(dialect.gtid_args.iter().map(|s| s.to_string()));
    if plan.mode == Mode::SemiSync {
        a.extend(semi_sync_args(
            dialect.source_plugin,
            dialect.source_vars,
            plugin_dir,
        ));
        a.push(format!(
            "--{}-wait-point={}",
            dialect.source_vars.replace('_', "-"),
            plan.wait.sql()
        ));
    }
    a
}

/// The replica's start options.
pub fn replica_args(
    dialect: &Dialect,
    plan: &ReplicaPlan,
    plugin_dir: Option<&str>,
) -> Vec<String> {
    let mut a = vec!["--server-id=2".to_string(), dialect.skip_start.to_string()];
    a.extend(dialect.gtid_args.iter().map(|s| s.to_string()));
    if plan.mode == Mode::SemiSync {
        a.extend(semi_sync_args(
            dialect.replica_plugin,
            dialect.replica_vars,
            plugin_dir,
        ));
    }
    a
}

fn semi_sync_args(plugin: Option<&str>, vars: &str, plugin_dir: Option<&str>) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(p) = plugin {
        if let Some(d) = plugin_dir {
            a.push(format!("--plugin-dir={d}"));
        }
        a.push(format!("--plugin-load-add={p}"));
    }
    a.push(format!("--{}-enabled=ON", vars.replace('_', "-")));
    a
}

/// A port free on loopback now (the server binds it a moment later).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))
}

/// The running replica: its server, and the proxy in front of the source.
/// Dropping it stops both.
pub struct Replica {
    // Field order is teardown order: the proxy, then the server.
    pub proxy: Option<DelayProxy>,
    pub server: Managed,
    pub plan: ReplicaPlan,
    pub dialect: &'static Dialect,
    conn: Option<mysql_async::Conn>,
}

/// What the replica reports at a moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReplicaState {
    pub io_running: bool,
    pub sql_running: bool,
    /// Seconds behind the source (None while it cannot tell).
    pub lag_seconds: Option<u64>,
    pub last_error: Option<String>,
}

/// The replica at the end of a run, for the summary.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReplicaEnd {
    pub mode: Mode,
    /// Semi-sync's wait point (None: async).
    pub wait_point: Option<WaitPoint>,
    /// The round trip the proxy added, ms (None: connected direct).
    pub delay_ms: Option<f64>,
    #[serde(skip)]
    pub describe: String,
    pub io_running: bool,
    pub sql_running: bool,
    pub lag_seconds: Option<u64>,
    /// Semi-sync's status on the source at the end, "ON" or "OFF" (None:
    /// async).
    pub semi_sync: Option<String>,
    /// Semi-sync was seen OFF at a tick, or transactions went
    /// unacknowledged: the source fell back to async during the run.
    pub fell_back: bool,
    /// Transactions committed without the acknowledgement over the
    /// measured window (`Rpl_semi_sync_*_no_tx`).
    pub not_acknowledged: u64,
}

impl Replica {
    /// Whether the source's semi-sync is ON now (None: async, or the
    /// status could not be read).
    pub async fn semi_sync_on(&self, source: &mut mysql_async::Conn) -> Option<bool> {
        if self.plan.mode != Mode::SemiSync {
            return None;
        }
        self.source_value(source, "status")
            .await
            .map(|v| v.eq_ignore_ascii_case("ON"))
    }

    /// The status counter that grows with each transaction committed
    /// without the acknowledgement.
    pub fn not_acknowledged_counter(&self) -> String {
        self.dialect.source_status("no_tx")
    }

    /// Its state at the end of a run: `seen_off` from the ticks,
    /// `not_acknowledged` from the status counters over the window.
    pub async fn end(
        &mut self,
        source: &mut mysql_async::Conn,
        seen_off: bool,
        not_acknowledged: u64,
    ) -> ReplicaEnd {
        let st = self.state().await.unwrap_or_default();
        let semi_sync = match self.plan.mode {
            Mode::SemiSync => self.source_value(source, "status").await,
            Mode::Async | Mode::Group | Mode::Galera => None,
        };
        let semi = self.plan.mode == Mode::SemiSync;
        ReplicaEnd {
            mode: self.plan.mode,
            wait_point: semi.then_some(self.plan.wait),
            delay_ms: self
                .proxy
                .as_ref()
                .map(|p| p.round_trip().as_secs_f64() * 1000.0),
            describe: self.describe(),
            io_running: st.io_running,
            sql_running: st.sql_running,
            lag_seconds: st.lag_seconds,
            fell_back: semi
                && (seen_off
                    || not_acknowledged > 0
                    || semi_sync
                        .as_deref()
                        .is_some_and(|v| !v.eq_ignore_ascii_case("ON"))),
            semi_sync,
            not_acknowledged,
        }
    }

    /// Makes, starts and wires the replica of `source` (listening on
    /// `source_port`), and waits until it replicates (with semi-sync:
    /// until the source counts it). Cancel-safe: what it started is
    /// owned by the returned value or dropped with the future.
    pub async fn start(
        cfg: ManagedConfig,
        plan: ReplicaPlan,
        source: &mut mysql_async::Conn,
        source_port: u16,
        plugin_dir: Option<&std::path::Path>,
    ) -> Result<Replica> {
        let dialect = &cfg.binary.id.family().replication;
        let mut cfg = cfg;
        cfg.sizing = Sizing::for_machine(
            Shape {
                clients: 8,
                warehouses: None,
            },
            &[],
        );
        cfg.options.clear();
        let mut server = Managed::new(cfg)?;
        let own = match (plugin_dir, dialect.replica_plugin) {
            (Some(d), Some(f)) if plan.mode == Mode::SemiSync => {
                Some(server.private_plugins(d, &[f])?.display().to_string())
            }
            _ => None,
        };
        server.extra_args = replica_args(dialect, &plan, own.as_deref());
        server.listen_port = Some(free_port()?);
        server.init().await?;
        server.start().await.map_err(|e| Error::Replica {
            detail: format!("the replica's server did not start: {e}"),
        })?;
        let upstream = SocketAddr::from(([127, 0, 0, 1], source_port));
        let proxy = match plan.delay {
            None => None,
            Some(d) => Some(
                DelayProxy::start(upstream, d)
                    .map_err(|e| Error::Runtime(format!("the delay proxy: {e}")))?,
            ),
        };
        let wire = Wire {
            host: "127.0.0.1".into(),
            port: proxy.as_ref().map_or(source_port, |p| p.listen.port()),
            user: REPL_USER,
            password: password("cs"),
        };
        let q = |e: mysql_async::Error, what: &str| Error::Replica {
            detail: format!("{what}: {e}"),
        };
        // Not binlogged: a semi-sync source would wait out its timeout
        // for a replica that is not there yet, and the replica needs no
        // copy of the user.
        replication_account(source, wire.user, &wire.password, |step, e| {
            q(
                e,
                match step {
                    AccountStep::Session => "setting up the source",
                    AccountStep::Create => "creating the replication user on the source",
                    AccountStep::Grant => "granting replication to its user on the source",
                },
            )
        })
        .await?;
        let ep = workload::conn::ConnArgs::resolve(&server.conn_args())?;
        let mut conn = workload::conn::connect(&ep, None).await?;
        conn.query_drop((dialect.change_source)(&wire))
            .await
            .map_err(|e| q(e, "pointing the replica at its source"))?;
        conn.query_drop(dialect.start)
            .await
            .map_err(|e| q(e, "starting replication"))?;
        let mut r = Replica {
            proxy,
            server,
            plan,
            dialect,
            conn: Some(conn),
        };
        r.wait_connected(source).await?;
        Ok(r)
    }

    /// Waits until the replica's threads run and, with semi-sync, the
    /// source counts a semi-sync client with its status ON.
    pub async fn wait_connected(&mut self, source: &mut mysql_async::Conn) -> Result<()> {
        let deadline = tokio::time::Instant::now() + CONNECT_LIMIT;
        loop {
            let st = self.state().await?;
            let semi = match self.plan.mode {
                Mode::Async | Mode::Group | Mode::Galera => true,
                Mode::SemiSync => {
                    let on = self.source_value(source, "status").await;
                    let clients = self.source_value(source, "clients").await;
                    on.as_deref() == Some("ON") && clients.is_some_and(|c| c != "0")
                }
            };
            if st.io_running && st.sql_running && semi {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let why = st
                    .last_error
                    .unwrap_or_else(|| match (st.io_running, semi) {
                        (false, _) => "its I/O thread never connected".into(),
                        (true, false) => "the source never counted it as a semi-sync client".into(),
                        _ => "its SQL thread is not running".into(),
                    });
                return Err(Error::Replica {
                    detail: format!(
                        "the replica did not replicate in {} s: {why}",
                        CONNECT_LIMIT.as_secs()
                    ),
                });
            }
            // A connection error that stays (auth, plugin) is said at once.
            if let (Some(e), false) = (&st.last_error, st.io_running) {
                if !e.is_empty() {
                    return Err(Error::Replica {
                        detail: format!("the replica cannot connect: {e}"),
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// For the header: "semi-sync replica (AFTER_SYNC), 4 ms added".
    pub fn describe(&self) -> String {
        let mode = match self.plan.mode {
            Mode::Async | Mode::Group | Mode::Galera => "async replica".to_string(),
            Mode::SemiSync => format!("semi-sync replica ({})", self.plan.wait.sql()),
        };
        match &self.proxy {
            Some(p) => format!(
                "{mode}, {} ms round trip added",
                p.round_trip().as_secs_f64() * 1000.0
            ),
            None => mode,
        }
    }

    /// Sets the round trip the proxy adds (a sweep's cell); an error
    /// without a proxy (`--replica-delay-ms` not given).
    pub fn set_delay(&mut self, d: Duration) -> Result<()> {
        let p = self.proxy.as_ref().ok_or_else(|| {
            Error::Usage("the replica's delay needs --replica-delay-ms at start".into())
        })?;
        p.set_round_trip(d);
        self.plan.delay = Some(d);
        Ok(())
    }

    /// One of the source's semi-sync status values, e.g. `status`.
    async fn source_value(&self, source: &mut mysql_async::Conn, what: &str) -> Option<String> {
        let name = self.dialect.source_status(what);
        let row: Option<(String, String)> = source
            .query_first(format!("SHOW GLOBAL STATUS LIKE {}", quote(&name)))
            .await
            .ok()
            .flatten();
        row.map(|(_, v)| v)
    }

    /// The replica's threads, lag and last error.
    pub async fn state(&mut self) -> Result<ReplicaState> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::Runtime("the replica's connection is closed".into()))?;
        let row: Option<mysql_async::Row> =
            conn.query_first(self.dialect.status)
                .await
                .map_err(|e| Error::Replica {
                    detail: format!("{}: {e}", self.dialect.status),
                })?;
        let Some(row) = row else {
            return Ok(ReplicaState::default());
        };
        let text = |k: &str| -> Option<String> {
            row.get_opt::<Option<String>, _>(k)
                .and_then(|v| v.ok())
                .flatten()
        };
        let last_error = ["Last_IO_Error", "Last_SQL_Error"]
            .iter()
            .filter_map(|k| text(k))
            .find(|e| !e.is_empty());
        Ok(ReplicaState {
            io_running: text(self.dialect.io_running).as_deref() == Some("Yes"),
            sql_running: text(self.dialect.sql_running).as_deref() == Some("Yes"),
            lag_seconds: text(self.dialect.lag).and_then(|v| v.parse().ok()),
            last_error,
        })
    }
}

impl Replica {
    /// Stops replicating and ends the source's dump threads, before the
    /// source stops: a source with a dump thread left waits 8 s for its
    /// other sessions before it kills it at shutdown (MySQL's
    /// `close_connections`). Best effort: a replica already gone is
    /// fine.
    pub async fn pause(&mut self, source: &mut mysql_async::Conn) {
        if let Some(c) = self.conn.as_mut() {
            let _ = c.query_drop(self.dialect.stop).await;
        }
        let dumps: Vec<u64> = source
            .query(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'",
            )
            .await
            .unwrap_or_default();
        for id in dumps {
            let _ = source.query_drop(format!("KILL {id}")).await;
        }
    }

    /// Replicates again after [`Replica::pause`] (the source restarted).
    pub async fn resume(&mut self, source: &mut mysql_async::Conn) -> Result<()> {
        if let Some(c) = self.conn.as_mut() {
            c.query_drop(self.dialect.start)
                .await
                .map_err(|e| Error::Replica {
                    detail: format!("starting replication again: {e}"),
                })?;
        }
        self.wait_connected(source).await
    }

    /// Closes its connection (the server stops when it is dropped).
    pub async fn disconnect(&mut self) {
        if let Some(c) = self.conn.take() {
            let _ = c.disconnect().await;
        }
    }
}

/// Which statement of [`replication_account`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AccountStep {
    /// Turning the session's binlog off or on again.
    Session,
    Create,
    Grant,
}

/// A throwaway replication account on loopback (`REPLICATION SLAVE`),
/// made with the session's binlog off: a replica's source and every
/// group member make their own, never replicated. `err` says which
/// statement failed, as its caller names it.
pub(super) async fn replication_account(
    c: &mut mysql_async::Conn,
    user: &str,
    password: &str,
    err: impl Fn(AccountStep, mysql_async::Error) -> Error,
) -> Result<()> {
    for (sql, step) in [
        (
            "SET SESSION sql_log_bin = 0".to_string(),
            AccountStep::Session,
        ),
        (
            format!(
                "CREATE USER IF NOT EXISTS {}@'127.0.0.1' IDENTIFIED BY {}",
                quote(user),
                quote(password)
            ),
            AccountStep::Create,
        ),
        (
            format!(
                "GRANT REPLICATION SLAVE ON *.* TO {}@'127.0.0.1'",
                quote(user)
            ),
            AccountStep::Grant,
        ),
        (
            "SET SESSION sql_log_bin = 1".to_string(),
            AccountStep::Session,
        ),
    ] {
        c.query_drop(sql).await.map_err(|e| err(step, e))?;
    }
    Ok(())
}

/// A password for a throwaway replication account (loopback only, gone
/// with the servers), after `prefix`.
pub(super) fn password(prefix: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}{:x}", t, std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use readers::family::{MARIADB, MYSQL};

    fn plan(mode: Mode) -> ReplicaPlan {
        ReplicaPlan {
            mode,
            wait: WaitPoint::AfterSync,
            delay: None,
        }
    }

    #[test]
    fn each_family_spells_semi_sync_its_own_way() {
        let m = source_args(&MYSQL.replication, &plan(Mode::SemiSync), Some("/p"));
        assert!(m.contains(&"--plugin-dir=/p".to_string()), "{m:?}");
        assert!(m.contains(&"--plugin-load-add=semisync_source.so".to_string()));
        assert!(m.contains(&"--rpl-semi-sync-source-enabled=ON".to_string()));
        assert!(m.contains(&"--rpl-semi-sync-source-wait-point=AFTER_SYNC".to_string()));
        assert!(m.contains(&"--gtid-mode=ON".to_string()));
        let r = replica_args(&MARIADB.replication, &plan(Mode::SemiSync), Some("/p"));
        assert!(
            r.contains(&"--rpl-semi-sync-slave-enabled=ON".to_string()),
            "{r:?}"
        );
        assert!(!r.iter().any(|a| a.starts_with("--plugin")), "{r:?}");
        assert!(r.contains(&"--skip-slave-start".to_string()));
        // Async: no semi-sync anywhere.
        let a = source_args(&MARIADB.replication, &plan(Mode::Async), None);
        assert!(!a.iter().any(|a| a.contains("semi")), "{a:?}");
        assert_eq!(
            MYSQL.replication.source_status("yes_tx"),
            "Rpl_semi_sync_source_yes_tx"
        );
        assert_eq!(
            MARIADB.replication.source_status("tx_wait_time"),
            "Rpl_semi_sync_master_tx_wait_time"
        );
    }

    #[test]
    fn the_source_statement_quotes_what_it_is_given() {
        let w = Wire {
            host: "127.0.0.1".into(),
            port: 3307,
            user: REPL_USER,
            password: "a'b\\c".into(),
        };
        let s = (MYSQL.replication.change_source)(&w);
        assert!(s.contains("SOURCE_PASSWORD='a''b\\\\c'"), "{s}");
        assert!(s.contains("SOURCE_PORT=3307"), "{s}");
        assert!((MARIADB.replication.change_source)(&w).contains("MASTER_USE_GTID=slave_pos"));
    }
}
