//! commitscope's built-in workloads: the group-commit study's scenarios on
//! mysql_async, with per-interval statistics. Knows nothing of eBPF: the
//! tracer lines its probe counts up with [`engine::Sampler::sample`] ticks.
pub mod capacity;
pub mod cli;
pub mod conn;
pub mod driver;
pub mod engine;
pub mod error;
pub mod fatal;
pub mod load_check;
pub mod report;
pub mod run;
pub mod scenario;
pub mod schema;
pub mod stats;
pub mod tpcc;
pub mod wire;
pub mod workers;

pub use error::{Error, Result};
