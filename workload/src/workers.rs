//! The client threads of a driver (the simple engine's and TPC-C's): named,
//! on small stacks, and joined so that a crashed one fails the run instead
//! of leaving it quietly slower.
use std::thread::JoinHandle;

use crate::{Error, Result};

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
    /// when any of them panicked.
    pub fn join(&mut self) -> Result<()> {
        let crashed = std::mem::take(&mut self.threads)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_thread_fails_the_join() {
        let mut w = Workers::new("test");
        w.spawn("ok".into(), || {}).unwrap();
        w.spawn("boom".into(), || panic!("expected by the test"))
            .unwrap();
        let e = w.join().unwrap_err().to_string();
        assert!(e.contains("1 test thread(s) crashed"), "{e}");
        assert!(w.finished());
        let mut fine = Workers::new("test");
        fine.spawn("ok".into(), || {}).unwrap();
        assert!(fine.join().is_ok());
    }
}
