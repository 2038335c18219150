//! Work that needs no quiet machine (the fuzz targets' and the static
//! binary's builds, the kernel matrix under qemu), run while the tests
//! wait on their servers. It takes only what the tests leave: the lowest
//! CPU priority (`SCHED_IDLE`, inherited by every process it starts, so
//! the scheduler preempts it the moment a test's thread wakes) and a
//! target dir on tmpfs (no write-back under the tests' fsyncs).
use std::{
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
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

    /// Waits for the job to end (still at idle priority: nothing else
    /// runs now but the other jobs); its log is printed either way.
    pub fn wait(mut self) -> anyhow::Result<()> {
        let st = self.child.wait()?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(self.shown).collect();
        for l in tail.iter().rev() {
            println!("{l}");
        }
        eprintln!(
            "xtask: {}: ended after {:.0} s ({st})",
            self.name,
            self.started.elapsed().as_secs_f64()
        );
        anyhow::ensure!(st.success(), "{} failed ({st})", self.name);
        Ok(())
    }
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
