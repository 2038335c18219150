//! A server commitscope did not start: find its pid for the probes —
//! `--pid`, else the unix socket peer's credentials, else `@@pid_file`.
use std::{os::fd::AsRawFd, os::unix::net::UnixStream, path::Path};

use mysql_async::prelude::Queryable;

use super::process;
use crate::error::{Error, Result};

/// How the pid was found (said with `-v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidSource {
    Flag,
    PeerCred,
    PidFile,
}

impl std::fmt::Display for PidSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PidSource::Flag => "--pid",
            PidSource::PeerCred => "the socket peer's credentials (SO_PEERCRED)",
            PidSource::PidFile => "@@pid_file",
        })
    }
}

/// The pid of the process listening on the unix socket `path`.
pub fn peer_pid(path: &Path) -> Option<u32> {
    let s = UnixStream::connect(path).ok()?;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The pid written in the server's `@@pid_file`.
pub async fn pid_file_pid(conn: &mut mysql_async::Conn) -> Option<u32> {
    let path: Option<String> = conn.query_first("SELECT @@pid_file").await.ok()??;
    std::fs::read_to_string(path?).ok()?.trim().parse().ok()
}

/// The server's pid, or an error naming what to pass.
pub async fn find_pid(
    explicit: Option<u32>,
    socket: Option<&str>,
    conn: &mut mysql_async::Conn,
) -> Result<(u32, PidSource)> {
    if let Some(pid) = explicit {
        if !process::alive(pid) {
            return Err(Error::NoSuchProcess { pid });
        }
        return Ok((pid, PidSource::Flag));
    }
    if let Some(pid) = socket.and_then(|s| peer_pid(Path::new(s))) {
        return Ok((pid, PidSource::PeerCred));
    }
    if let Some(pid) = pid_file_pid(conn).await.filter(|p| process::alive(*p)) {
        return Ok((pid, PidSource::PidFile));
    }
    Err(Error::NoServerPid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_of_own_listener_is_us() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert_eq!(peer_pid(&p), Some(std::process::id()));
        assert_eq!(peer_pid(&dir.path().join("none")), None);
    }
}
