//! `commitscope workload` flags (also flattened into the main command).
use clap::Args;

use crate::{conn::ConnArgs, scenario::Scenario};

#[derive(Clone, Debug, Args)]
pub struct WorkloadArgs {
    /// Print help (`-h` is --host, as in the mysql client).
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Which workload to run.
    #[arg(long, value_enum, default_value_t = Scenario::Update)]
    pub workload: Scenario,
    /// Concurrent clients (one connection each).
    #[arg(long, short = 't', default_value_t = 1)]
    pub threads: u32,
    /// Seconds measured after the warmup (default: until Ctrl-C, or --total-rows).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Seconds at the start excluded from the summary.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub warmup: f64,
    /// Seconds per report line.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// update: each worker cycles over its own R rows.
    #[arg(long, default_value_t = 1, value_name = "R")]
    pub rows_per_thread: u32,
    /// insert: stop after N rows and report the elapsed time.
    #[arg(long, value_name = "N")]
    pub total_rows: Option<u64>,
    /// The tool's own database (created and marked by commitscope).
    #[arg(long, default_value = "commitscope")]
    pub database: String,
    /// Drop and recreate the (marked) database first.
    #[arg(long)]
    pub reset: bool,
    /// JSON lines instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}
