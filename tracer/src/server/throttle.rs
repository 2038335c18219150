//! A server slowed the way a CPU quota slows it: let run a share of each
//! 100 ms period and stopped (SIGSTOP) for the rest, from a thread of
//! its own. `--slow-member`: the group member whose applier falls behind,
//! so that flow control shows in the others' commit path. No cgroup: the
//! same on cgroup v1 and v2 hosts, and nothing to remove but the thread.
use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use crate::error::{Error, Result};

/// The period the share is of (a CFS quota's default period).
const PERIOD: Duration = Duration::from_millis(100);

/// A running throttle; dropping it lets the process run freely again.
pub struct Throttle {
    pid: i32,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Throttle {
    /// Lets `pid` run `percent` % (1 to 99) of each period.
    pub fn start(pid: u32, percent: u32) -> Result<Throttle> {
        let pid = pid as i32;
        let on = PERIOD * percent.clamp(1, 99) / 100;
        let off = PERIOD - on;
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name("slow-member".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(on);
                    // SAFETY: signalling a server this run started.
                    if unsafe { libc::kill(pid, libc::SIGSTOP) } != 0 {
                        return;
                    }
                    std::thread::sleep(off);
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                }
            })
            .map_err(|e| Error::Runtime(format!("cannot start the slow member's throttle: {e}")))?;
        Ok(Throttle {
            pid,
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Never left stopped: a stopped server hears no SIGTERM.
        // SAFETY: signalling a server this run started.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child under a 30 % throttle gets about that share of a busy
    /// loop's CPU, and runs freely once the throttle is dropped.
    #[test]
    fn a_throttled_process_runs_its_share_and_is_never_left_stopped() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.chars().next()))
                .flatten()
        };
        let t = Throttle::start(pid, 30).unwrap();
        let mut stopped = 0;
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(7));
            if state() == Some('T') {
                stopped += 1;
            }
        }
        drop(t);
        std::thread::sleep(Duration::from_millis(20));
        let after = state();
        let _ = child.kill();
        let _ = child.wait();
        // About 70 of the samples stopped; wide bounds, for a loaded
        // host's scheduling of the throttle's thread: never stopped, or
        // stopped for good, is what fails.
        assert!((20..=97).contains(&stopped), "{stopped} of 100 stopped");
        assert_ne!(after, Some('T'), "left stopped");
    }
}
