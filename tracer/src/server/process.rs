//! Finding the server process and its executable through /proc.
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The executable of `pid`, as the kernel sees it.
pub fn exe_of(pid: u32) -> Result<PathBuf> {
    let link = PathBuf::from(format!("/proc/{pid}/exe"));
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(Error::NoSuchProcess { pid });
    }
    let target = std::fs::read_link(&link).map_err(|source| Error::Read {
        path: link.clone(),
        source,
    })?;
    // A replaced binary reads "path (deleted)": the magic link still opens
    // the running inode, so use it for symbols and the uprobe.
    if target.to_string_lossy().ends_with(" (deleted)") {
        return Ok(link);
    }
    Ok(target)
}

/// True while `pid` runs (a zombie waiting to be reaped counts as exited).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised comm, which may hold spaces.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

/// The single running process whose executable is `exe`.
pub fn pid_of(exe: &Path) -> Result<u32> {
    let want = std::fs::canonicalize(exe).map_err(|source| Error::Read {
        path: exe.to_owned(),
        source,
    })?;
    let me = std::process::id();
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map_err(|source| Error::Read {
            path: "/proc".into(),
            source,
        })?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && alive(*pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == want))
        .collect();
    pids.sort_unstable();
    match pids.as_slice() {
        [] => Err(Error::NotRunning {
            path: exe.to_owned(),
        }),
        [one] => Ok(*one),
        many => Err(Error::ManyRunning {
            path: exe.to_owned(),
            count: many.len(),
            pids: many
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}
