//! Work that needs no quiet machine (the fuzz targets' and the static
//! binary's builds, the kernel matrix under qemu), run while the tests
//! wait on their servers. It takes only what the tests leave: the lowest
//! CPU priority (`SCHED_IDLE`, inherited by every process it starts, so
//! the scheduler preempts it the moment a test's thread wakes) and a
//! target dir on tmpfs (no write-back under the tests' fsyncs).
use std::{
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    time::Instant,
};

use anyhow::Context;

/// A build running in the background, its output in a file.
pub struct Job {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
    started: Instant,
    /// The log's last lines printed at its end (a build's errors), or all
    /// of it (a test run's lines and table).
    shown: usize,
    /// How it ended, once waited for.
    status: Option<ExitStatus>,
    /// When it ended (its own time, printed with its log).
    took_s: f64,
}

/// Raises one job's processes to normal priority ([`Promoter::promote`]),
/// from any thread, while another owns the job.
#[derive(Clone, Copy)]
pub struct Promoter {
    name: &'static str,
    pgid: i32,
}

/// A job started when another one ends ([`after`]): the first job, ended,
/// and the second, started (or why not), once joined.
pub struct Sequel {
    handle: std::thread::JoinHandle<(anyhow::Result<Job>, anyhow::Result<Job>)>,
}

/// Starts `next` in the background when `first` ends: work that must not
/// take CPU from `first` while both would wait at idle priority (the
/// kernel matrix's guests beside the fuzz build, whose one-crate tail
/// would otherwise end last).
pub fn after(
    first: anyhow::Result<Job>,
    next: impl FnOnce() -> anyhow::Result<Job> + Send + 'static,
) -> Sequel {
    let handle = std::thread::spawn(move || {
        let mut first = first;
        if let Ok(j) = first.as_mut() {
            j.finish();
        }
        (first, next())
    });
    Sequel { handle }
}

impl Sequel {
    /// Both jobs: the first ended, the second running or ended.
    pub fn join(self) -> (anyhow::Result<Job>, anyhow::Result<Job>) {
        self.handle.join().unwrap_or_else(|_| {
            (
                Err(anyhow::anyhow!("the background sequence panicked")),
                Err(anyhow::anyhow!("the background sequence panicked")),
            )
        })
    }
}

/// Where background builds put their output: tmpfs when the machine has
/// one (`/dev/shm`), else the workspace's target dir.
pub fn scratch(name: &str) -> PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.join(format!("commitscope-xtask-{}", std::process::id()))
    } else {
        crate::util::root().join("target/xtask-scratch")
    };
    base.join(name)
}

/// The scratch dirs' parent, removed at the end of the run.
pub fn scratch_root() -> PathBuf {
    scratch("x").parent().map(PathBuf::from).unwrap_or_default()
}

impl Job {
    /// Starts `cmd` in a process group of its own, at idle priority, its
    /// stdout and stderr into a log file.
    pub fn spawn(name: &'static str, mut cmd: Command) -> anyhow::Result<Job> {
        let log = scratch(&format!("{name}.log"));
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d)?;
        }
        let out = std::fs::File::create(&log)?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        // SAFETY: sched_setscheduler is async-signal-safe; it only
        // changes the policy of the child about to exec (inherited by
        // everything it starts).
        unsafe {
            cmd.pre_exec(|| {
                let p = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start the background {name}"))?;
        eprintln!("xtask: {name}: started in the background (idle priority)");
        Ok(Job {
            name,
            child,
            log,
            started: Instant::now(),
            shown: 40,
            status: None,
            took_s: 0.0,
        })
    }

    /// Prints its whole log when it ends, not only the tail.
    pub fn whole_log(mut self) -> Job {
        self.shown = usize::MAX;
        self
    }

    fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What raises this job to normal priority, from another thread.
    pub fn promoter(&self) -> Promoter {
        Promoter {
            name: self.name,
            pgid: self.pgid(),
        }
    }

    /// Waits for the job to end, quietly (its log is printed by
    /// [`Job::wait`]).
    pub fn finish(&mut self) {
        if self.status.is_none() {
            self.status = Some(self.child.wait().unwrap_or_else(|e| {
                eprintln!("xtask: {}: cannot wait for it: {e}", self.name);
                std::os::unix::process::ExitStatusExt::from_raw(1 << 8)
            }));
            self.took_s = self.started.elapsed().as_secs_f64();
        }
    }

    /// Waits for the job to end (at whatever priority it has: see
    /// [`Promoter::promote`]); its log is printed either way.
    pub fn wait(mut self) -> anyhow::Result<()> {
        self.finish();
        let st = self.status.unwrap_or_default();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(self.shown).collect();
        for l in tail.iter().rev() {
            println!("{l}");
        }
        eprintln!(
            "xtask: {}: ended after {:.0} s ({st})",
            self.name, self.took_s
        );
        anyhow::ensure!(st.success(), "{} failed ({st})", self.name);
        Ok(())
    }
}

impl Promoter {
    /// Raises the job to normal priority once the tests are over, so
    /// that a build the next stage waits for goes before the jobs still
    /// at idle priority. Best effort: a task that ends or cannot be
    /// changed meanwhile only stays at idle priority.
    pub fn promote(&self) {
        let normal = libc::sched_param { sched_priority: 0 };
        // The group's leader first: what it starts from now on inherits
        // the normal policy. Then every task already in the group; twice,
        // for the threads started while the first pass ran.
        // SAFETY: plain syscalls on our own children's tasks.
        unsafe { libc::sched_setscheduler(self.pgid, libc::SCHED_OTHER, &normal) };
        for _ in 0..2 {
            for tid in tasks_in_group(self.pgid) {
                unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &normal) };
            }
        }
        eprintln!("xtask: {}: now at normal priority", self.name);
    }
}

/// Every thread of every process in process group `pgid`
/// (`/proc/<pid>/stat`'s fifth field).
fn tasks_in_group(pgid: i32) -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut tids = Vec::new();
    for pid in procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if group_of(&stat) != Some(pgid) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        tids.extend(
            tasks
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()),
        );
    }
    tids
}

/// The process group in a `/proc/<pid>/stat` line: the third field after
/// the command, which is in parentheses and may hold spaces.
fn group_of(stat: &str) -> Option<i32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: our own child's group.
            unsafe {
                libc::killpg(self.pgid(), libc::SIGKILL);
            }
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_read_past_a_command_with_spaces_and_parentheses() {
        let stat = "4242 (rustc (x) y) R 4100 4001 4001 0 -1 4194560";
        assert_eq!(group_of(stat), Some(4001));
        assert_eq!(group_of("garbage"), None);
    }

    #[test]
    fn our_own_group_holds_this_thread() {
        let pgid = unsafe { libc::getpgrp() };
        let me = unsafe { libc::gettid() };
        assert!(tasks_in_group(pgid).contains(&me));
    }
}
