//! Whether a run fits: the server's connection limits, asked before any
//! client connects (200 half-opened connections and a `1040 Too many
//! connections` in the middle of a run help nobody), and the client's own
//! file-descriptor limit, raised to what the clients need.
use mysql_async::{prelude::Queryable, Conn};

use crate::{
    error::{Error, Result},
    schema::sql_err,
};

/// What `SET GLOBAL max_connections` should be raised to, with room for
/// the server's other users: the run's need rounded up to 50.
fn suggested(need: u64) -> u64 {
    need.div_ceil(50) * 50 + 50
}

/// The server's connection limits and its connections in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub max_connections: u64,
    /// The account's limit as this session sees it; 0: none.
    pub max_user_connections: u64,
    /// `Threads_connected`, our own control connection included.
    pub in_use: u64,
}

impl Capacity {
    /// Reads the limits on `c` (one query, no new connection).
    pub async fn read(c: &mut Conn) -> Result<Capacity> {
        let row: Option<(u64, i64)> = c
            .query_first("SELECT @@GLOBAL.max_connections, @@SESSION.max_user_connections")
            .await
            .map_err(sql_err("reading max_connections"))?;
        let in_use: Option<(String, u64)> = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            .await
            .map_err(sql_err("reading Threads_connected"))?;
        let (max_connections, user) = row.unwrap_or((0, 0));
        Ok(Capacity {
            max_connections,
            max_user_connections: user.max(0) as u64,
            in_use: in_use.map_or(1, |r| r.1),
        })
    }

    /// Ok when `opens` more connections fit, else the one-line refusal
    /// naming the fix. `opens` counts every connection the run adds to the
    /// one that asked.
    pub fn check(&self, opens: u64) -> Result<()> {
        let free = self.max_connections.saturating_sub(self.in_use);
        if opens > free {
            return Err(Error::TooFewConnections {
                detail: format!(
                    "the server allows max_connections = {} and {} are in use, but this run opens {opens} more",
                    self.max_connections, self.in_use
                ),
                fix: format!(
                    "SET GLOBAL max_connections = {}",
                    suggested(self.in_use + opens)
                ),
            });
        }
        // The account's own connections: ours (the one asking) plus the run's.
        if self.max_user_connections > 0 && opens + 1 > self.max_user_connections {
            return Err(Error::TooFewConnections {
                detail: format!(
                    "this account may hold max_user_connections = {} connections, but this run opens {}",
                    self.max_user_connections,
                    opens + 1
                ),
                fix: format!(
                    "SET GLOBAL max_user_connections = {} (or ALTER USER ... WITH MAX_USER_CONNECTIONS)",
                    suggested(opens + 1)
                ),
            });
        }
        Ok(())
    }
}

/// Raises this process's open-file limit to at least `want` (the soft
/// limit up to the hard one; as root the hard one too). Every client is a
/// socket: 4,000 clients do not fit in the usual soft limit of 1,024.
/// Returns the soft limit now in force.
pub fn raise_nofile(want: u64) -> Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(Error::Runtime(format!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        )));
    }
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    let mut new = lim;
    new.rlim_cur = want.min(lim.rlim_max);
    // SAFETY: geteuid has no preconditions.
    if new.rlim_cur < want && unsafe { libc::geteuid() } == 0 {
        new.rlim_cur = want;
        new.rlim_max = want;
    }
    // SAFETY: setrlimit reads the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        new.rlim_cur = want.min(lim.rlim_max);
        new.rlim_max = lim.rlim_max;
        // SAFETY: as above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) };
    }
    // SAFETY: as above.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_cur < want {
        return Err(Error::BadInput {
            what: "--threads",
            detail: format!(
                "this run needs {want} open files (one socket per client) but the limit is {} (hard {}): raise it with `ulimit -n {want}` or run as root",
                lim.rlim_cur, lim.rlim_max
            ),
        });
    }
    Ok(lim.rlim_cur)
}

/// Open files a client process needs for `clients` connections.
pub fn client_fds(clients: u64) -> u64 {
    clients + 256
}

/// Peak resident set of this process, in bytes (`getrusage`).
pub fn peak_rss_bytes() -> u64 {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_maxrss.max(0) as u64 * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_with_the_fix() {
        let c = Capacity {
            max_connections: 20,
            max_user_connections: 0,
            in_use: 1,
        };
        assert!(c.check(19).is_ok());
        let e = c.check(51).unwrap_err().to_string();
        assert!(e.contains("max_connections = 20"), "{e}");
        assert!(e.contains("SET GLOBAL max_connections = 150"), "{e}");
        let u = Capacity {
            max_connections: 1000,
            max_user_connections: 10,
            in_use: 1,
        };
        let e = u.check(50).unwrap_err().to_string();
        assert!(e.contains("max_user_connections = 10"), "{e}");
        assert!(u.check(9).is_ok());
    }

    #[test]
    fn nofile_is_raised_and_rss_read() {
        let now = raise_nofile(64).unwrap();
        assert!(now >= 64);
        assert!(peak_rss_bytes() > 1 << 20);
    }
}
