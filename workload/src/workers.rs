//! The client threads of a driver (the simple engine's and TPC-C's): named,
//! on small stacks, and joined so that a crashed one fails the run instead
//! of leaving it quietly slower.
use std::{
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::{Error, Result};

/// How long stopping workers may take to finish their statement in flight.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

pub struct Workers {
    threads: Vec<JoinHandle<()>>,
    /// What a thread is, for messages ("workload worker", "TPC-C client").
    what: &'static str,
}

impl Workers {
    pub fn new(what: &'static str) -> Workers {
        Workers {
            threads: Vec::new(),
            what,
        }
    }

    pub fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> Result<()> {
        let t = std::thread::Builder::new()
            .name(name)
            .stack_size(256 * 1024)
            .spawn(f)
            .map_err(|e| Error::Runtime(format!("cannot start a {} thread: {e}", self.what)))?;
        self.threads.push(t);
        Ok(())
    }

    /// True when every thread has ended by itself.
    pub fn finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    /// Waits for every thread (the caller has told them to stop); an error
    /// when any of them panicked. A thread still inside a server call after
    /// `grace` (the server is frozen, or waits for disk space) is left
    /// behind, said once: the run must end all the same, and the thread
    /// ends with the process or when the server lets go of it.
    pub fn join(&mut self, grace: Duration) -> Result<()> {
        let deadline = Instant::now() + grace;
        while !self.finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (done, stuck): (Vec<_>, Vec<_>) = std::mem::take(&mut self.threads)
            .into_iter()
            .partition(JoinHandle::is_finished);
        if !stuck.is_empty() {
            eprintln!(
                "workload: {} {} thread(s) still waiting on the server {:.0} s after the stop: left behind",
                stuck.len(),
                self.what,
                grace.as_secs_f64()
            );
        }
        let crashed = done
            .into_iter()
            .map(JoinHandle::join)
            .filter(std::result::Result::is_err)
            .count();
        if crashed > 0 {
            return Err(Error::Runtime(format!(
                "{crashed} {} thread(s) crashed (a bug: the message is above)",
                self.what
            )));
        }
        Ok(())
    }
}

/// Lanes for `clients`: one per client up to twice the cores (the
/// thread-per-client model never waits on a lane), shared beyond.
pub fn lanes_for(clients: u32) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (clients as usize).clamp(1, 2 * cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_thread_fails_the_join() {
        let mut w = Workers::new("test");
        w.spawn("ok".into(), || {}).unwrap();
        w.spawn("boom".into(), || panic!("expected by the test"))
            .unwrap();
        let e = w.join(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(e.contains("1 test thread(s) crashed"), "{e}");
        assert!(w.finished());
        let mut fine = Workers::new("test");
        fine.spawn("ok".into(), || {}).unwrap();
        assert!(fine.join(Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn a_thread_stuck_past_the_grace_is_left_behind() {
        let mut w = Workers::new("test");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Blocked until the test lets go, as a worker on a frozen server.
        w.spawn("stuck".into(), move || {
            let _ = rx.recv();
        })
        .unwrap();
        w.spawn("ok".into(), || {}).unwrap();
        let t0 = Instant::now();
        assert!(w.join(Duration::from_millis(200)).is_ok());
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert!(w.finished(), "nothing left to join");
        drop(tx);
    }
}
