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
    /// Seconds per report line (tpcc-mysql's -i).
    #[arg(
        long,
        short = 'i',
        alias = "report-interval",
        default_value_t = 1.0,
        value_name = "SECONDS"
    )]
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
    pub tpcc: TpccArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `--workload tpcc` settings.
#[derive(Clone, Debug, Args)]
pub struct TpccArgs {
    /// tpcc: warehouses to load and drive (tpcc-mysql's -w).
    #[arg(long, short = 'w', default_value_t = 1, value_name = "W")]
    pub warehouses: u32,
    #[command(flatten)]
    pub flags: TpccFlags,
}

/// The TPC-C flags other than the warehouse count (which `sweep` takes as
/// a list).
#[derive(Clone, Debug, Default, Args)]
pub struct TpccFlags {
    /// tpcc: add tpcc-mysql's 10 foreign keys after a load.
    #[arg(long)]
    pub foreign_keys: bool,
    /// tpcc: one transaction for all ten districts of a Delivery (the spec's
    /// shape) instead of tpcc-mysql's commit per district.
    #[arg(long)]
    pub delivery_single_commit: bool,
    /// tpcc: the spec's keying and think times (tpcc-mysql has none).
    #[arg(long)]
    pub think: bool,
    /// tpcc: connections loading at once (default: 2 x cores, at most 2 per warehouse + 1).
    #[arg(long, value_name = "N")]
    pub load_parallel: Option<usize>,
    /// tpcc: how the load sends rows: LOAD DATA LOCAL INFILE streamed from memory, or multi-row INSERTs.
    #[arg(long, value_enum, default_value_t = crate::tpcc::spec::LoadMethod::Auto)]
    pub load_method: crate::tpcc::spec::LoadMethod,
    /// tpcc: keep the load's rows in the binlog (default: sql_log_bin=0 for the loader's sessions).
    #[arg(long)]
    pub load_binlog: bool,
}

impl TpccArgs {
    pub fn settings(&self) -> crate::tpcc::Settings {
        crate::tpcc::Settings {
            warehouses: self.warehouses,
            foreign_keys: self.flags.foreign_keys,
            delivery_single_commit: self.flags.delivery_single_commit,
            think: self.flags.think,
            load_parallel: self.flags.load_parallel,
            load_method: self.flags.load_method,
            load_binlog: self.flags.load_binlog,
        }
    }
}
