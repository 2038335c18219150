//! The probes: where they go (plan, debuginfod; a binary's symbols, DWARF
//! and version are read by the readers' crate, `readers::probes`),
//! attaching them (attach, uprobe, kernel, libc), reading them
//! (read, snapshot, settle) and what they cost (tier, cost). This file only
//! names the rooms; each imports its siblings, never this one.
pub mod attach;
pub mod binlog;
pub mod clock;
pub mod cost;
pub mod debuginfod;
pub mod ebpf_log;
pub mod fsync_choice;
pub mod group;
pub mod io;
pub mod kernel;
pub mod libc;
pub mod plan;
pub mod prologue;
pub mod read;
pub mod sched_split;
pub mod settle;
pub mod snapshot;
pub mod tier;
pub mod triggers;
pub mod uprobe;
pub mod wakeups;

pub use attach::{ebpf_object, AttachedProbe, Probes, WindowLinks};
pub use plan::{Plan, Target, WriteProbe};
pub use snapshot::{FdTotals, Snapshot};
