//! Commits from the server's own counters, for the light probe tier: one
//! `SHOW GLOBAL STATUS` per tick or scrape instead of one uprobe trap per
//! commit. The login is found as `mysqld_exporter` finds it: the server's
//! unix socket, then `--defaults-file` or `~/.my.cnf` ([client] user and
//! password), else the caller's own name (a root caller gets in by
//! MariaDB's unix_socket authentication).
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use mysql_async::prelude::Queryable;
use workload::conn::{ConnArgs, Endpoint};

/// The counter read. `Handler_commit` counts each engine's commit of a
/// transaction in MariaDB and MySQL alike (the server-layer count the
/// study's n_write stands in for); `Com_commit` would miss every
/// autocommit statement.
pub const COUNTER: &str = "Handler_commit";

/// How long one read may take: a frozen server must not stall a scrape.
const READ_LIMIT: Duration = Duration::from_millis(500);

/// The unix socket `pid` listens on: its `--socket=` if the command line
/// has one, else the first listening socket with a path among its fds.
pub fn socket_of_pid(pid: u32) -> Option<PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if let Some(s) = cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--socket="))
    {
        return Some(PathBuf::from(s));
    }
    let inodes = socket_inodes(&format!("/proc/{pid}/fd"))?;
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    listening_path(&table, &inodes)
}

/// The inodes of the sockets among a process's fds (`fd_dir`:
/// `/proc/<pid>/fd`), as `/proc/net/*` tables spell them.
pub(crate) fn socket_inodes(fd_dir: &str) -> Option<Vec<String>> {
    let inodes = std::fs::read_dir(fd_dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let l = std::fs::read_link(e.path()).ok()?;
            let l = l.to_str()?;
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    Some(inodes)
}

/// In `/proc/net/unix`'s text, the path of a listening socket (state 01)
/// whose inode is one of `inodes`; abstract names (`@...`) are skipped.
fn listening_path(table: &str, inodes: &[String]) -> Option<PathBuf> {
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (state, inode, path) = (f.get(5)?, f.get(6)?, f.get(7)?);
        (*state == "01" && inodes.iter().any(|i| i == inode) && path.starts_with('/'))
            .then(|| PathBuf::from(path))
    })
}

/// Where and as whom to log in to the server of `pid`.
pub fn endpoint_for(pid: u32, defaults_file: Option<&Path>) -> Result<Endpoint, String> {
    let socket = socket_of_pid(pid)
        .ok_or_else(|| format!("pid {pid} listens on no unix socket with a path"))?;
    ConnArgs {
        socket: Some(socket),
        defaults_file: defaults_file.map(Path::to_path_buf),
        ..Default::default()
    }
    .resolve()
    .map_err(|e| e.to_string())
}

/// A login that reads the commit counter. A read that fails (a frozen
/// or restarting server past [`READ_LIMIT`]) leaves its connection in an
/// unknown state, so it is dropped and the next read logs in again: the
/// counter is cumulative, so nothing is lost across the gap.
pub struct CommitCounter {
    ep: Endpoint,
    conn: Option<mysql_async::Conn>,
    /// Whether the failure going on has been said.
    said: bool,
}

impl CommitCounter {
    /// Logs in; the error is one line without the password.
    pub async fn connect(ep: &Endpoint) -> Result<Self, String> {
        let mut me = CommitCounter {
            ep: ep.clone(),
            conn: None,
            said: false,
        };
        me.read().await?;
        Ok(me)
    }

    /// The login's connection, made again if the last read dropped it.
    async fn conn(&mut self) -> Result<&mut mysql_async::Conn, String> {
        let c = match self.conn.take() {
            Some(c) => c,
            None => tokio::time::timeout(READ_LIMIT * 4, workload::conn::connect(&self.ep, None))
                .await
                .map_err(|_| format!("{} did not answer in 2 s", self.ep.describe()))?
                .map_err(|e| e.to_string())?,
        };
        Ok(self.conn.insert(c))
    }

    /// Keeps the connection after a good read; drops it after a failed
    /// one.
    fn kept<T>(&mut self, r: Result<T, String>) -> Result<T, String> {
        match &r {
            Ok(_) => self.said = false,
            Err(_) => self.conn = None,
        }
        r
    }

    /// True the first time a failure is met since the last good read:
    /// what a caller says once.
    pub fn first_failure(&mut self) -> bool {
        !std::mem::replace(&mut self.said, true)
    }

    /// The counter now.
    pub async fn read(&mut self) -> Result<u64, String> {
        let r = match self.conn().await {
            Ok(c) => read_on(c).await,
            Err(e) => Err(e),
        };
        self.kept(r)
    }

    /// The server's semi-sync counters now, on the same login (None:
    /// not a semi-sync source).
    pub async fn window_counters(&mut self) -> Result<super::status::WindowCounters, String> {
        let r = match self.conn().await {
            Ok(c) => tokio::time::timeout(READ_LIMIT, super::status::window_counters(c))
                .await
                .map_err(|_| format!("SHOW GLOBAL STATUS took over {} ms", READ_LIMIT.as_millis()))
                .and_then(|r| r.map_err(|e| e.to_string())),
            Err(e) => Err(e),
        };
        self.kept(r)
    }
}

/// The counter now, on a connection of the caller's (the main command's
/// control connection).
pub async fn read_on(conn: &mut mysql_async::Conn) -> Result<u64, String> {
    let q = format!("SHOW GLOBAL STATUS LIKE '{COUNTER}'");
    let row: Option<(String, String)> = tokio::time::timeout(READ_LIMIT, conn.query_first(q))
        .await
        .map_err(|_| format!("SHOW GLOBAL STATUS took over {} ms", READ_LIMIT.as_millis()))?
        .map_err(|e| format!("SHOW GLOBAL STATUS failed: {e}"))?;
    row.and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| format!("the server has no {COUNTER} counter"))
}

/// What to do instead when the counter cannot be read: said once.
pub const HOW_TO_LOG_IN: &str = "give a login with --defaults-file FILE ([client] user=..., password=...) or in ~/.my.cnf, or join mysqld_exporter's mysql_global_status_handlers_total{handler=\"commit\"} (contrib/prometheus/commitscope.rules.yml)";

/// Logs in to the server of `pid` for its commit counter, or says once
/// why commits go uncounted (the password never appears).
pub async fn login_or_say(pid: u32, defaults_file: Option<&Path>) -> Option<CommitCounter> {
    let r = match endpoint_for(pid, defaults_file) {
        Ok(ep) => CommitCounter::connect(&ep).await,
        Err(e) => Err(e),
    };
    match r {
        Ok(c) => Some(c),
        Err(why) => {
            eprintln!("commitscope: light probes: commits of pid {pid} not counted: {why}; {HOW_TO_LOG_IN}");
            None
        }
    }
}

/// Summed reads of a counter that restarts with its server: each read adds
/// what it [`moved`](super::status::moved) since the last one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Running {
    last: Option<u64>,
    pub total: u64,
}

impl Running {
    /// Adds a read; the first one is the baseline.
    pub fn add(&mut self, now: u64) {
        if let Some(last) = self.last {
            self.total += super::status::moved(now, last);
        }
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_with_a_path_is_found_by_inode() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 111 @abstract\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 222 /run/mysqld/mysqld.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 222 /run/mysqld/mysqld.sock\n";
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            listening_path(table, &ids(&["111", "222"])),
            Some(PathBuf::from("/run/mysqld/mysqld.sock"))
        );
        assert_eq!(listening_path(table, &ids(&["111"])), None);
    }

    #[test]
    fn a_running_sum_starts_at_the_first_read_and_survives_a_restart() {
        let mut r = Running::default();
        r.add(1000);
        assert_eq!(r.total, 0);
        r.add(1500);
        r.add(40);
        r.add(100);
        assert_eq!(r.total, 500 + 40 + 60);
    }
}
