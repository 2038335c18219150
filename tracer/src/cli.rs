//! Command-line definitions only; each flag is documented in the README.
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::probes::kernel::FsyncProbe;

#[derive(Debug, Parser)]
#[command(
    name = "commitscope",
    version,
    about = "How InnoDB batches commits into redo flushes, counted with eBPF"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Trace a running mysqld/mariadbd: n_write, n_flush and fsyncs per interval.
    Trace(TraceArgs),
    /// Drive a server with a built-in workload (no tracing).
    #[command(disable_help_flag = true)]
    Workload(workload::cli::WorkloadArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "mysqld"])))]
pub struct TraceArgs {
    /// Pid of the server to trace.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Trace the running process of this server binary.
    #[arg(long, value_name = "PATH")]
    pub mysqld: Option<PathBuf>,
    /// Seconds per output line.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Stop after this many seconds (default: until Ctrl-C or the server exits).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// One JSON object per interval, then a summary object.
    #[arg(long)]
    pub json: bool,
    /// Print which probes were attached where, and which fell back.
    #[arg(short, long)]
    pub verbose: bool,
    /// Root of separate debug files (build-id and debuglink lookups).
    #[arg(long, default_value = "/usr/lib/debug", value_name = "DIR")]
    pub debug_dir: PathBuf,
    /// Server flavor/version when it cannot be detected (e.g. mariadb-10.11, mysql-8.0.36).
    #[arg(long, value_name = "VERSION")]
    pub server_version: Option<String>,
    /// How to count fsync/fdatasync: kprobe on do_fsync, or syscall tracepoints.
    #[arg(long, value_enum, default_value_t = FsyncProbe::Auto)]
    pub fsync_probe: FsyncProbe,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (e.g. `-h` as --host vs help).
    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
