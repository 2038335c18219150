//! Output sinks for `trace`: one file per format. None of them imports aya.
pub mod human;
pub mod json;

use std::time::SystemTime;

use crate::sample::Interval;

/// Why a run ended: said in the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// Ctrl-C / SIGTERM.
    Interrupted,
    /// `--duration` elapsed.
    Duration,
    /// The traced process exited.
    TargetExited,
}

impl EndReason {
    pub fn describe(&self) -> &'static str {
        match self {
            EndReason::Interrupted => "interrupted (Ctrl-C)",
            EndReason::Duration => "--duration reached",
            EndReason::TargetExited => "the traced process exited",
        }
    }
}

/// What the columns are made of, said once at start.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Legend {
    pub pid: u32,
    pub exe: String,
    pub server: Option<String>,
    pub profile: Option<String>,
    /// Function counted in `n_write` (demangled).
    pub n_write_source: String,
    /// Where its symbol was found (.symtab, .dynsym, a debug file).
    pub n_write_symbol_from: String,
    /// What `durable` tests, or None in fallback mode.
    pub durable_source: Option<String>,
    /// Function counted in `n_flush`, or "redo fsync (kernel)".
    pub n_flush_source: String,
    pub fsync_probe: String,
    /// Set when n_write is the server-layer fallback.
    pub fallback: Option<String>,
}

/// The end-of-run record.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub end: EndReason,
    pub totals: Interval,
    pub intervals: u64,
}

pub trait Sink {
    fn start(&mut self, legend: &Legend);
    fn interval(&mut self, at: SystemTime, i: &Interval);
    fn summary(&mut self, legend: &Legend, s: &Summary);
}
