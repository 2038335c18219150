//! Builds that need no quiet machine (the fuzz targets, the static
//! binary), run while the tests wait on their servers. They take only
//! what the tests leave: the lowest CPU priority (`SCHED_IDLE`), a target
//! dir on tmpfs (no write-back under the tests' fsyncs), and they are
//! stopped outright (`SIGSTOP` to their process group) while a test holds
//! the machine alone (`testkit::lane`): a test that compares times runs
//! as it would on an idle machine.
use std::{
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::Context;

/// A build running in the background, its output in a file.
pub struct Job {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
    started: Instant,
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
        })
    }

    fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for the job to end (running at full speed from here: it is
    /// what the run waits for now); its log is printed either way.
    pub fn wait(mut self) -> anyhow::Result<()> {
        // SAFETY: our own child's group; resumed if it was stopped.
        unsafe { libc::killpg(self.pgid(), libc::SIGCONT) };
        let st = self.child.wait()?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
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

/// Stops the jobs' process groups while a test holds the machine alone,
/// and resumes them after; polls every 100 ms.
pub struct Pauser {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Duration>>,
}

impl Pauser {
    pub fn start(jobs: &[&Job]) -> Pauser {
        let groups: Vec<i32> = jobs.iter().map(|j| j.pgid()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut paused_since: Option<Instant> = None;
            let mut paused = Duration::ZERO;
            let signal = |sig| {
                for &pg in &groups {
                    // SAFETY: our own children's groups.
                    unsafe { libc::killpg(pg, sig) };
                }
            };
            while !s.load(Ordering::Relaxed) {
                let alone = testkit::lane::alone_running();
                match (alone, paused_since) {
                    (true, None) => {
                        signal(libc::SIGSTOP);
                        paused_since = Some(Instant::now());
                    }
                    (false, Some(t)) => {
                        signal(libc::SIGCONT);
                        paused += t.elapsed();
                        paused_since = None;
                    }
                    _ => {}
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if let Some(t) = paused_since {
                signal(libc::SIGCONT);
                paused += t.elapsed();
            }
            paused
        });
        Pauser {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops pausing (the jobs run on); how long they were held stopped.
    pub fn finish(mut self) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}
