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

/// The fields of `/proc/<pid>/stat` after the parenthesised comm (which
/// may hold spaces): state, ppid, pgrp, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Every pid in /proc now (empty when /proc cannot be read).
pub fn all_pids() -> Vec<u32> {
    pids().map(Iterator::collect).unwrap_or_default()
}

/// A zombie waiting to be reaped, or a process already dead.
fn exited_state(state: Option<&str>) -> bool {
    matches!(state, Some("Z") | Some("X"))
}

/// The numeric entries of /proc: every pid.
fn pids() -> std::io::Result<impl Iterator<Item = u32>> {
    Ok(std::fs::read_dir("/proc")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()))
}

/// How a process that is a zombie ended ("signal 9", "exit code 1"), from
/// `/proc/<pid>/stat` field 52 (a waitpid status): readable by anyone
/// until its parent reaps it, so also for a server that is not our child.
pub fn zombie_status(pid: u32) -> Option<String> {
    let f = stat_fields(pid)?;
    if f.first().map(String::as_str) != Some("Z") {
        return None;
    }
    let status: i32 = f.get(49)?.parse().ok()?;
    Some(describe_wait_status(status))
}

/// A waitpid status in words.
pub fn describe_wait_status(status: i32) -> String {
    match status & 0x7f {
        0 => format!("exit code {}", (status >> 8) & 0xff),
        sig => format!("signal {sig}"),
    }
}

/// True while `pid` runs (a zombie waiting to be reaped counts as exited).
pub fn alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| !exited_state(f.first().map(String::as_str)))
}

/// The live (not zombie) processes of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(all) = pids() else {
        return Vec::new();
    };
    all.filter(|&pid| {
        stat_fields(pid).is_some_and(|f| {
            f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
                && !exited_state(f.first().map(String::as_str))
        })
    })
    .collect()
}

/// Waits (at most `limit`) until no live process of group `pgid` is left.
/// Killing a group only sends the signal: a large server may take a while
/// to exit, and a grandchild (the bootstrap server of
/// `mariadb-install-db`) is not reaped by our `wait`. Returning before they
/// are gone would leave a process behind and race the temp dir's removal.
/// Returns the pids still there when the limit ran out.
pub fn wait_group_gone(pgid: u32, limit: std::time::Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = group_members(pgid);
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat`
/// field 22): orders processes without trusting pid order, which wraps.
pub fn start_ticks(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// How long ago `pid` started (to the kernel's clock tick, 10 ms).
pub fn age(pid: u32) -> Option<std::time::Duration> {
    let start = start_ticks(pid)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let since_boot = start as f64 / hz.max(1) as f64;
    Some(std::time::Duration::from_secs_f64(
        (uptime - since_boot).max(0.0),
    ))
}

/// The live processes whose executable is `exe`, in pid order.
pub fn pids_of(exe: &Path) -> Result<Vec<u32>> {
    let want = std::fs::canonicalize(exe).map_err(|source| Error::Read {
        path: exe.to_owned(),
        source,
    })?;
    let me = std::process::id();
    let mut pids: Vec<u32> = pids()
        .map_err(|source| Error::Read {
            path: "/proc".into(),
            source,
        })?
        .filter(|pid| *pid != me && alive(*pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == want))
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// The single running process whose executable is `exe`.
pub fn pid_of(exe: &Path) -> Result<u32> {
    let pids = pids_of(exe)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_zombie_says_how_it_ended() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // SAFETY: killing our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        // Not reaped yet: a zombie until `wait`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while alive(c.id()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(zombie_status(c.id()).as_deref(), Some("signal 9"));
        c.wait().unwrap();
        assert_eq!(zombie_status(c.id()), None);
        assert_eq!(describe_wait_status(3 << 8), "exit code 3");
    }

    #[test]
    fn a_killed_group_is_waited_for_to_the_last_grandchild() {
        // A shell whose grandchild outlives it unless the group is killed.
        let mut c = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = c.id();
        let t0 = std::time::Instant::now();
        while group_members(pgid).len() < 3 {
            assert!(t0.elapsed().as_secs() < 10, "the group never formed");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // SAFETY: signalling the group we created.
        unsafe { libc::killpg(pgid as i32, libc::SIGKILL) };
        let _ = c.wait();
        let left = wait_group_gone(pgid, std::time::Duration::from_secs(10));
        assert!(left.is_empty(), "still there: {left:?}");
        assert!(group_members(pgid).is_empty());
    }
}
