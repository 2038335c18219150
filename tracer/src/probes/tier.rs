//! Probe tiers: what a run pays per commit.
//!
//! One uprobe trap costs a few microseconds, so a probe that fires on every
//! commit costs a busy server a few percent of its throughput: the price
//! of the study's exact figure (`n_write`, the durable flag, the batch
//! histogram). A host that watches all the time cannot pay that, so the
//! light tier keeps only what fires per redo flush (the flush function,
//! the syncs and writes of the server) and takes commits from the server's
//! own counters; exact figures come in short windows (`exporter::window`).
use std::fmt;

/// `--probes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Nothing that fires per commit: the redo flush function, the syncs
    /// and writes (never a host-wide syscall tracepoint when the server's C
    /// library can be probed instead); commits from SHOW GLOBAL STATUS.
    Light,
    /// Every redo write request too (log_write_up_to): n_write, the
    /// durable flag, batch sizes, leaders and followers.
    Exact,
}

impl Tier {
    /// Whether the per-commit write probes are attached.
    pub fn per_commit(self) -> bool {
        self == Tier::Exact
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Light => "light",
            Tier::Exact => "exact",
        })
    }
}
