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

/// `commitscope load`: TPC-C's data only, so none of a run's flags
/// (clients, duration, think times) are offered.
#[derive(Clone, Debug, Args)]
pub struct LoadArgs {
    /// Print help (`-h` is --host, as in the mysql client).
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Kept for the command lines that name it: TPC-C is all it loads.
    #[arg(long, value_enum, default_value_t = Scenario::Tpcc, hide = true)]
    pub workload: Scenario,
    /// Warehouses to load (tpcc-mysql's -w).
    #[arg(long, short = 'w', default_value_t = 1, value_name = "W")]
    pub warehouses: u32,
    /// Add tpcc-mysql's 10 foreign keys after the load.
    #[arg(long)]
    pub foreign_keys: bool,
    /// Connections loading at once (default: 2 x cores, at most 2 per warehouse + 1).
    #[arg(long, value_name = "N")]
    pub load_parallel: Option<usize>,
    /// How the load sends rows: LOAD DATA LOCAL INFILE streamed from memory, or multi-row INSERTs.
    #[arg(long, value_enum, default_value_t = crate::tpcc::spec::LoadMethod::Auto)]
    pub load_method: crate::tpcc::spec::LoadMethod,
    /// Keep the load's rows in the binlog (default: sql_log_bin=0 for the loader's sessions).
    #[arg(long)]
    pub load_binlog: bool,
    /// The tool's own database (created and marked by commitscope).
    #[arg(long, default_value = "commitscope")]
    pub database: String,
    /// Drop and recreate the (marked) database first.
    #[arg(long)]
    pub reset: bool,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `commitscope check`: the consistency conditions of loaded TPC-C data.
#[derive(Clone, Debug, Args)]
pub struct CheckArgs {
    /// Print help (`-h` is --host, as in the mysql client).
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Kept for the command lines that name it: TPC-C is all it checks.
    #[arg(long, value_enum, default_value_t = Scenario::Tpcc, hide = true)]
    pub workload: Scenario,
    /// The warehouses the data must hold (default: as many as were loaded).
    #[arg(long, short = 'w', value_name = "W")]
    pub warehouses: Option<u32>,
    /// The database holding the data (created by `commitscope load`).
    #[arg(long, default_value = "commitscope")]
    pub database: String,
    /// JSON (the conditions) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// A run's flags at their defaults: what `load` and `check` leave unsaid.
fn run_defaults() -> WorkloadArgs {
    #[derive(clap::Parser)]
    #[command(disable_help_flag = true)]
    struct Defaults {
        #[command(flatten)]
        run: WorkloadArgs,
    }
    <Defaults as clap::Parser>::parse_from(["defaults"]).run
}

impl LoadArgs {
    /// The same as the run's flags that the loader reads.
    pub fn workload_args(&self) -> WorkloadArgs {
        let mut w = run_defaults();
        w.workload = self.workload;
        w.tpcc.warehouses = self.warehouses;
        w.tpcc.flags.foreign_keys = self.foreign_keys;
        w.tpcc.flags.load_parallel = self.load_parallel;
        w.tpcc.flags.load_method = self.load_method;
        w.tpcc.flags.load_binlog = self.load_binlog;
        w.database = self.database.clone();
        w.reset = self.reset;
        w.json = self.json;
        w.conn = self.conn.clone();
        w
    }
}

impl CheckArgs {
    /// The same as the run's flags that the check reads.
    pub fn workload_args(&self) -> WorkloadArgs {
        let mut w = run_defaults();
        w.workload = self.workload;
        w.database = self.database.clone();
        w.json = self.json;
        w.conn = self.conn.clone();
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `load` and `check` hand the loader and the checker a run's flags
    /// at their defaults, with their own on top.
    #[test]
    fn load_and_check_fill_a_runs_flags() {
        #[derive(clap::Parser)]
        #[command(disable_help_flag = true)]
        struct L {
            #[command(flatten)]
            load: LoadArgs,
        }
        let l = <L as clap::Parser>::parse_from(["load", "-w", "3", "--database", "d"]).load;
        let w = l.workload_args();
        assert_eq!((w.tpcc.warehouses, w.database.as_str()), (3, "d"));
        assert_eq!(w.workload, Scenario::Tpcc);
        assert_eq!(w.threads, 1);
    }
}
