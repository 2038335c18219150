//! Which processes are MySQL/MariaDB servers, and what to call each one.
//!
//! A server is named by its datadir, not its pid: a restart gets a new pid
//! but keeps the datadir, so its series continue under the same labels.
//! mysqld changes its working directory to the datadir at start, so
//! `/proc/<pid>/cwd` gives it without parsing options or config files.
use std::path::{Path, PathBuf};

use crate::server::{existing::peer_pid, process};

/// The executable names of MySQL and MariaDB servers.
const SERVER_NAMES: &[&str] = &["mysqld", "mariadbd", "mysqld-debug", "mariadbd-debug"];

/// What the user asked to export: every server, or some.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub pids: Vec<u32>,
    /// Server binaries: every process running one of them.
    pub binaries: Vec<PathBuf>,
    /// Unix sockets: the process listening on each.
    pub sockets: Vec<PathBuf>,
}

impl Selection {
    fn everything(&self) -> bool {
        self.pids.is_empty() && self.binaries.is_empty() && self.sockets.is_empty()
    }
}

/// A server process found by a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    /// The `server` label: the datadir, else the socket, else the pid.
    pub name: String,
}

/// Whether `exe` is a server binary by its name.
fn is_server_exe(exe: &Path) -> bool {
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    SERVER_NAMES.contains(&name)
}

/// The `--socket=` of a server's command line, if it was given there.
fn socket_of(pid: u32) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--socket="))
        .map(str::to_string)
}

/// The `server` label of `pid`.
pub fn name_of(pid: u32, socket: Option<&Path>) -> String {
    if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
        if cwd != Path::new("/") {
            return cwd.to_string_lossy().trim_end_matches('/').to_string();
        }
    }
    socket
        .map(|s| s.display().to_string())
        .or_else(|| socket_of(pid))
        .unwrap_or_else(|| format!("pid {pid}"))
}

/// The live servers the selection names. Processes that vanish while
/// being looked at are skipped: `/proc` changes under a scan.
pub fn scan(sel: &Selection) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    let mut add = |pid: u32, socket: Option<&Path>| {
        if process::alive(pid) && !found.iter().any(|f| f.pid == pid) {
            found.push(Found {
                pid,
                name: name_of(pid, socket),
            });
        }
    };
    if sel.everything() {
        let me = std::process::id();
        for pid in process::all_pids().into_iter().filter(|p| *p != me) {
            if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| is_server_exe(&e)) {
                add(pid, None);
            }
        }
        return found;
    }
    for pid in &sel.pids {
        add(*pid, None);
    }
    for exe in &sel.binaries {
        for pid in process::pids_of(exe).unwrap_or_default() {
            add(pid, None);
        }
    }
    for socket in &sel.sockets {
        if let Some(pid) = peer_pid(socket) {
            add(pid, Some(socket));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_binaries_are_known_by_name() {
        assert!(is_server_exe(Path::new("/usr/sbin/mariadbd")));
        assert!(is_server_exe(Path::new("/usr/sbin/mysqld (deleted)")));
        assert!(!is_server_exe(Path::new("/usr/bin/mysql")));
        assert!(!is_server_exe(Path::new("/usr/bin/mysqld_safe")));
    }

    #[test]
    fn this_process_is_named_by_its_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(name_of(std::process::id(), None), cwd.display().to_string());
    }
}
