//! Timed startup phases: each can be interrupted, and `-v` prints how
//! long it took.
use std::{future::Future, time::Instant};

use super::stop::Stop;
use crate::error::{Error, Result};

/// Startup phases: each can be interrupted, and `-v` prints its duration.
pub struct Phases {
    verbose: bool,
    t0: Instant,
}

impl Phases {
    pub fn new(verbose: bool) -> Self {
        Phases {
            verbose,
            t0: Instant::now(),
        }
    }

    pub fn note(&self, msg: impl std::fmt::Display) {
        if self.verbose {
            eprintln!(
                "commitscope: [{:6.2} s] {msg}",
                self.t0.elapsed().as_secs_f64()
            );
        }
    }

    /// Runs `fut` unless Ctrl-C comes first (then `fut` is dropped, which
    /// kills whatever it started).
    pub async fn run<T>(
        &self,
        stop: &Stop,
        name: &'static str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if stop.fired() {
            return Err(Error::Interrupted { phase: name });
        }
        self.note(format_args!("{name} ..."));
        let t = Instant::now();
        let r = tokio::select! {
            r = fut => r,
            _ = stop.wait() => Err(Error::Interrupted { phase: name }),
        };
        if r.is_ok() {
            self.note(format_args!(
                "{name} done in {:.2} s",
                t.elapsed().as_secs_f64()
            ));
        }
        r
    }
}
