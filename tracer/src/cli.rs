//! Command-line definitions only; each command is described in docs/ (one page each).
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use readers::server::options::ServerOption;

use crate::probes::fsync_choice::FsyncProbe;

/// `commitscope [OPTIONS]` is the main command (managed server, workload,
/// probes, joined view); the subcommands are its parts and presets.
#[derive(Debug, Parser)]
#[command(
    name = "commitscope",
    version,
    about = "How InnoDB batches commits into redo flushes, counted with eBPF",
    args_conflicts_with_subcommands = true,
    disable_help_flag = true,
    disable_version_flag = true,
    after_long_help = crate::help_text::main_after_help()
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Print the version, the git commit, the build date, the target and the embedded eBPF object's hash (with --json: one JSON object).
    #[arg(short = 'V', long)]
    pub version: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Trace a running mysqld/mariadbd: n_write, n_flush and fsyncs per interval.
    #[command(
        after_long_help = crate::help_text::trace_after_help(),
        mut_arg("anatomy", |a| a.hide(true))
    )]
    Trace(TraceArgs),
    /// Drive a server with a built-in workload (no tracing).
    #[command(disable_help_flag = true, after_long_help = crate::help_text::codes_after_help("workload"))]
    Workload(workload::cli::WorkloadArgs),
    /// The group-commit study's four scenarios, with its published ratios beside ours.
    #[command(disable_help_flag = true, after_long_help = crate::help_text::codes_after_help("study"))]
    Study(StudyArgs),
    /// Load the TPC-C data (--warehouses W) into a running server.
    #[command(disable_help_flag = true, after_long_help = crate::help_text::codes_after_help("load"))]
    Load(workload::cli::LoadArgs),
    /// Check TPC-C consistency conditions 1-4 on the loaded data.
    #[command(disable_help_flag = true, after_long_help = crate::help_text::codes_after_help("check"))]
    Check(workload::cli::CheckArgs),
    /// Run the main command over threads x settings (x warehouses): one
    /// table, CSV/JSON summaries and SVG charts.
    #[command(disable_help_flag = true, after_long_help = crate::help_text::codes_after_help("sweep"))]
    Sweep(SweepArgs),
    /// Rebuild a sweep's table, summaries and charts from DIR/cells.jsonl.
    #[command(after_long_help = crate::help_text::codes_after_help("report"))]
    Report(ReportArgs),
    /// Show where the probes would go in a server binary and which symbol
    /// source placed them (no root, nothing attached).
    #[command(after_long_help = crate::help_text::codes_after_help("probes"))]
    Probes(ProbesArgs),
    /// Serve every server's group-commit figures to Prometheus (GET /metrics) until SIGTERM.
    #[command(after_long_help = crate::help_text::codes_after_help("exporter"))]
    Exporter(ExporterArgs),
    /// Print the shell completion script for bash, zsh or fish.
    #[command(after_long_help = crate::help_text::codes_after_help("completions"))]
    Completions(CompletionsArgs),
    /// Write the man pages into DIR (used by `cargo xtask dist`).
    #[command(hide = true)]
    Manpages(ManpagesArgs),
}

/// `commitscope completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells whose completions the .deb installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `commitscope manpages DIR`.
#[derive(Debug, Args)]
pub struct ManpagesArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Directory to write commitscope.1 and commitscope-SUBCOMMAND.1 into.
    pub dir: PathBuf,
}

/// `commitscope exporter`: Prometheus metrics of every server on the host.
#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Address and port to serve on (any address other than loopback only when asked).
    #[arg(long, default_value = "127.0.0.1:9643", value_parser = listen_arg, value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
    /// Prometheus exporter-toolkit web configuration: TLS certificate and key, basic-auth users (bcrypt).
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
    /// Export only this server process (repeatable; default: every mysqld/mariadbd).
    #[arg(long)]
    pub pid: Vec<u32>,
    /// Export only the processes of this server binary (repeatable).
    #[arg(long, value_name = "PATH")]
    pub mysqld: Vec<PathBuf>,
    /// Export only the server listening on this unix socket (repeatable).
    #[arg(short = 'S', long, value_name = "PATH")]
    pub socket: Vec<PathBuf>,
    /// Seconds between looks for new, restarted and exited servers.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub rescan: f64,
    /// Seconds a server that went away keeps its series before they end.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub forget_after: f64,
    /// Light tier: seconds each exact window lasts (per-commit probes
    /// attached, then detached).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub window: f64,
    /// Light tier: seconds from one exact window's start to the next (0:
    /// no scheduled windows; SIGUSR1 or POST /window still open one).
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub window_every: f64,
    /// Light tier: read the login for the commit counter ([client] user,
    /// password) from this file instead of ~/.my.cnf.
    #[arg(long, value_name = "FILE")]
    pub defaults_file: Option<PathBuf>,
    #[command(flatten)]
    pub probes: ProbeArgs,
}

/// `commitscope probes`: the attach plan of a binary, printed.
#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// The server binary (mysqld/mariadbd).
    #[arg(long, value_name = "PATH")]
    pub mysqld: PathBuf,
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The main command: workload + probes on one server, one joined line per tick.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub workload: workload::cli::WorkloadArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Which server: a managed throwaway one unless connection options are given.
#[derive(Clone, Debug, Args)]
pub struct ServerArgs {
    /// Server binary for the managed server (default: mariadbd/mysqld on PATH, /usr/sbin, /usr/local/mysql/bin).
    #[arg(long, value_name = "PATH")]
    pub mysqld: Option<PathBuf>,
    /// Managed server option, passed as --KEY=VALUE (repeatable), e.g. innodb_flush_log_at_trx_commit=2.
    #[arg(long = "server-option", value_name = "KEY=VALUE", value_parser = parse_server_option)]
    pub server_options: Vec<ServerOption>,
    /// Keep the managed server's temp dir (datadir, error log) after the run.
    #[arg(long)]
    pub keep: bool,
    /// Where the managed server's private temp dir is made (on a disk, not tmpfs).
    #[arg(long, default_value = "/var/tmp", value_name = "DIR")]
    pub workdir: PathBuf,
    /// Pid of an existing server (default: the socket's peer, else @@pid_file).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Run the workload without probes (no root needed).
    #[arg(long)]
    pub no_trace: bool,
    /// A managed replica of the managed server, from the same binary: async, semi-sync (each commit group waits for its acknowledgement), group (a single-primary Group Replication group the managed server founds and leads: MySQL), or galera (a Galera cluster the managed server founds, the other nodes joining by state transfer: MariaDB).
    #[arg(long, value_enum, value_name = "MODE")]
    pub replica: Option<crate::server::replica::Mode>,
    /// With --replica group or galera: the group's members, the managed primary included (1 to 5) [default: 3].
    #[arg(long, value_name = "N")]
    pub group_members: Option<u32>,
    /// With --replica group or galera: the last member slowed, to show flow control in the commit path: one applier thread, and its process let run PERCENT % of each 100 ms, as a CPU quota would (1 to 99).
    #[arg(long, value_name = "PERCENT")]
    pub slow_member: Option<u32>,
    /// With --replica galera: the nodes the clients write on, spread evenly, the first included (1 to --group-members) [default: 1]; writers on several nodes conflict in certification.
    #[arg(long, value_name = "N")]
    pub write_nodes: Option<u32>,
    /// With --replica semi-sync: where the source waits for the replica's acknowledgement [default: after-sync].
    #[arg(long, value_enum, value_name = "POINT")]
    pub semi_sync_wait: Option<crate::probes::plan::WaitPoint>,
    /// With --replica: round trip added between replica and source, in ms, by a delaying proxy (sweep: a list, e.g. 0,0.5,1,2,5).
    #[arg(long, value_delimiter = ',', value_name = "MS")]
    pub replica_delay_ms: Vec<f64>,
    /// Go on when semi-sync falls back to async (it is said either way; without this flag the run then exits non-zero).
    #[arg(long)]
    pub allow_async_fallback: bool,
}

/// The exporter's default port: in Prometheus's exporter range, clear of
/// the exporters that run on database hosts (node 9100, mysqld 9104,
/// process 9256, ebpf_exporter 9435, smartctl 9633). The `--listen`
/// default below spells it out, as clap needs a literal.
pub const DEFAULT_PORT: u16 = 9643;

/// `--listen`, checked by clap.
fn listen_arg(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("{s:?} is not an address and port: use e.g. 127.0.0.1:{DEFAULT_PORT} or [::1]:{DEFAULT_PORT}")
    })
}

fn parse_url(s: &str) -> Result<String, String> {
    crate::probes::debuginfod::check_url(s)
}

impl ProbeArgs {
    /// The tier asked for, else the command's default.
    pub fn tier_or(&self, default: crate::probes::tier::Tier) -> crate::probes::tier::Tier {
        self.tier.unwrap_or(default)
    }

    /// `--commit-path`, refused with the light tier: it times every commit.
    pub fn commit_path_in(&self, tier: crate::probes::tier::Tier) -> crate::error::Result<bool> {
        if self.commit_path && !tier.per_commit() {
            return Err(crate::error::Error::Usage(
                "--commit-path times every commit: it needs --probes exact (the default here), not light".into(),
            ));
        }
        Ok(self.commit_path)
    }

    /// `--server-version`, parsed (None when not given).
    pub fn server(&self) -> crate::error::Result<Option<readers::family::ServerId>> {
        Ok(self.server_version.as_deref().map(str::parse).transpose()?)
    }

    /// The debuginfod servers these flags choose.
    pub fn debuginfod_choice(&self) -> crate::probes::debuginfod::Choice {
        use crate::probes::debuginfod::Choice;
        match (self.no_debuginfod, self.debuginfod.is_empty()) {
            (true, _) => Choice::Off,
            (false, false) => Choice::Urls(self.debuginfod.clone()),
            (false, true) => Choice::Auto(self.debuginfod_urls_dir.clone()),
        }
    }
}

fn parse_server_option(s: &str) -> Result<ServerOption, String> {
    s.parse()
}

/// The server a multi-run command works on and how it is probed: what
/// `study` and `sweep` share.
#[derive(Clone, Debug, Args)]
pub struct StageArgs {
    #[command(flatten)]
    pub conn: workload::conn::ConnArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub probes: ProbeArgs,
}

/// How the probes find and read the server.
#[derive(Clone, Debug, Args)]
pub struct ProbeArgs {
    /// Print each startup phase with its duration, and where each probe went.
    #[arg(short, long)]
    pub verbose: bool,
    /// Root of separate debug files (build-id and debuglink lookups).
    #[arg(long, default_value = "/usr/lib/debug", value_name = "DIR")]
    pub debug_dir: PathBuf,
    /// debuginfod servers to ask for a missing debug file, instead of
    /// DEBUGINFOD_URLS / /etc/debuginfod/*.urls (repeatable).
    #[arg(long, value_name = "URL", value_parser = parse_url)]
    pub debuginfod: Vec<String>,
    /// Ask no debuginfod server and skip its cache.
    #[arg(long, conflicts_with = "debuginfod")]
    pub no_debuginfod: bool,
    /// Where the distributions' `*.urls` server lists are (tests).
    #[arg(long, hide = true, default_value = crate::probes::debuginfod::URLS_DIR, value_name = "DIR")]
    pub debuginfod_urls_dir: PathBuf,
    /// Server flavor/version when it cannot be detected (e.g. mariadb-10.11, mysql-8.0.36).
    #[arg(long, value_name = "VERSION")]
    pub server_version: Option<String>,
    /// How to count fsync/fdatasync and writes: fentry or kprobe on do_fsync,
    /// the server's C library, or syscall tracepoints.
    #[arg(long, value_enum, default_value_t = FsyncProbe::Auto)]
    pub fsync_probe: FsyncProbe,
    /// Group-commit leaders and followers and their waits (adds the write
    /// function's return probe; always on in `trace`).
    #[arg(long)]
    pub anatomy: bool,
    /// Probe tier: light (per redo flush only, commits from the server's
    /// counters; the exporter's default) or exact (every commit: n_write,
    /// durable, batches; the default of trace and the main command).
    #[arg(long = "probes", value_enum, value_name = "TIER")]
    pub tier: Option<crate::probes::tier::Tier>,
    /// Under the fsync: the block requests each redo sync causes (its own
    /// writes, the journal's, cache flushes), counted and timed on the
    /// device under the redo log (block tracepoints).
    #[arg(long)]
    pub io: bool,
    /// Each commit's time inside the server, stage by stage (the redo
    /// flush as leader, waiting as follower, the binlog's stages), with
    /// the unattributed rest: return probes on the commit path, exact
    /// tier only (the exporter: inside its exact windows).
    #[arg(long)]
    pub commit_path: bool,
    /// With --commit-path: how the followers' waits end (the binlog's
    /// group commit, the redo write): the wake-ups each received, the
    /// wasted ones (woken, then blocked again in the same wait), the
    /// wake-to-run latency and who woke them. Two machine-wide scheduler
    /// tracepoints (sched_wakeup, sched_switch): their cost is said when
    /// it starts.
    #[arg(long, requires = "commit_path")]
    pub wakeups: bool,
    /// With --commit-path: leave out each stage's split into on-CPU,
    /// run-queue and blocked time (three reads of the thread's scheduler
    /// accounting at each stage's ends; its cost is in docs/overhead.md).
    #[arg(long, requires = "commit_path")]
    pub no_sched_split: bool,
}

#[derive(Clone, Debug, Args)]
pub struct OutputArgs {
    /// Also write one CSV row per interval (and nothing else) to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StudyArgs {
    /// Print help (`-h` is --host, as in the mysql client).
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Seconds measured per scenario.
    #[arg(long, default_value_t = 20.0, value_name = "SECONDS")]
    pub duration: f64,
    /// Seconds at the start of each scenario excluded from its figures.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub warmup: f64,
    /// Seconds per report line.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// The tool's own database (created and marked by commitscope).
    #[arg(long, default_value = "commitscope")]
    pub database: String,
    /// JSON lines instead of tables (each scenario's intervals and summary, then the study table).
    #[arg(long)]
    pub json: bool,
    /// The managed server's binlog: as the server defaults (server), on, off, or both (the four scenarios with it on, then off: where the group forms either way).
    #[arg(long, value_enum, default_value_t = StudyBinlog::Server)]
    pub binlog: StudyBinlog,
    #[command(flatten)]
    pub stage: StageArgs,
}

/// `study --binlog`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StudyBinlog {
    Server,
    On,
    Off,
    Both,
}

/// `commitscope sweep`: the product of the lists, one measured run each.
#[derive(Debug, Args)]
#[command(mut_arg("server_options", |a| a.help(
    "Server option values to sweep, KEY=V1,V2,... (repeatable: the lists form a product), e.g. innodb_flush_log_at_trx_commit=1,0,2"
).value_name("KEY=V1,V2")))]
pub struct SweepArgs {
    /// Print help (`-h` is --host, as in the mysql client).
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Which workload each cell runs.
    #[arg(long, value_enum, default_value_t = workload::scenario::Scenario::Update)]
    pub workload: workload::scenario::Scenario,
    /// Client counts to sweep, comma-separated.
    #[arg(
        long,
        short = 't',
        value_delimiter = ',',
        default_value = "1,8,16,32,64,128,256",
        value_name = "N,..."
    )]
    pub threads: Vec<u32>,
    /// tpcc: warehouse counts to sweep, comma-separated (each loaded once; default 1).
    #[arg(long, short = 'w', value_delimiter = ',', value_name = "W,...")]
    pub warehouses: Vec<u32>,
    /// Seconds measured per cell, after its warmup.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub duration: f64,
    /// Seconds at the start of each cell excluded from its figures [default: 10; 0 with --total-rows].
    #[arg(long, value_name = "SECONDS")]
    pub warmup: Option<f64>,
    /// insert: each cell runs until N rows are in (seed 004), its elapsed seconds in the table.
    #[arg(long, value_name = "N")]
    pub total_rows: Option<u64>,
    /// Seconds per interval row in DIR/ticks/*.csv.
    #[arg(long, short = 'i', default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// update: each worker cycles over its own R rows.
    #[arg(long, default_value_t = 1, value_name = "R")]
    pub rows_per_thread: u32,
    /// The tool's own database (created and marked by commitscope).
    #[arg(long, default_value = "commitscope")]
    pub database: String,
    #[command(flatten)]
    pub tpcc: workload::cli::TpccFlags,
    /// Results directory: cells.jsonl, sweep.json, summary.csv/json, charts.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub out: PathBuf,
    /// Continue the sweep in --out: cells already in cells.jsonl are skipped.
    #[arg(long)]
    pub resume: bool,
    /// Start the server, validate every option value, print the plan, and stop.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub stage: StageArgs,
}

impl SweepArgs {
    /// The warmup per cell: a `--total-rows` cell counts every row, so
    /// none by default there.
    pub fn warmup_s(&self) -> f64 {
        self.warmup
            .unwrap_or(if self.total_rows.is_some() { 0.0 } else { 10.0 })
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// A sweep's results directory (its --out).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "mysqld"])))]
pub struct TraceArgs {
    /// Print help.
    #[arg(long, short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Pid of the server to trace.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Trace the running process of this server binary, and follow it
    /// through restarts: a new process of it is attached within 0.1 s and
    /// the counts continue.
    #[arg(long, value_name = "PATH")]
    pub mysqld: Option<PathBuf>,
    /// Seconds per output line.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Stop after this many seconds (default: until Ctrl-C, or until the --pid process exits).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// One JSON object per interval, then a summary object.
    #[arg(long)]
    pub json: bool,
    /// Count write requests without timing them: one probe hit per call
    /// instead of two (no write_wait / commit_time line).
    #[arg(long)]
    pub no_write_timing: bool,
    /// With --probes light: read the login for the commit counter
    /// ([client] user, password) from this file instead of ~/.my.cnf.
    #[arg(long, value_name = "FILE")]
    pub defaults_file: Option<PathBuf>,
    #[command(flatten)]
    pub probes: ProbeArgs,
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

    #[test]
    fn main_command_parses_without_subcommand() {
        let c = Cli::try_parse_from([
            "commitscope",
            "--threads",
            "100",
            "--server-option",
            "sync_binlog=1",
        ])
        .unwrap();
        assert!(c.command.is_none());
        assert_eq!(c.run.workload.threads, 100);
        assert_eq!(c.run.server.server_options[0].to_string(), "sync_binlog=1");
        let e = Cli::try_parse_from(["commitscope", "--server-option", "sync_binlog"]).unwrap_err();
        assert!(e.to_string().contains("KEY=VALUE"), "{e}");
    }

    #[test]
    fn sweep_takes_lists() {
        let c = Cli::try_parse_from([
            "commitscope",
            "sweep",
            "--threads",
            "1,8,64",
            "--server-option",
            "innodb_flush_log_at_trx_commit=1,0,2",
            "--workload",
            "tpcc",
            "-w",
            "1,2",
        ])
        .unwrap();
        let Some(Command::Sweep(s)) = c.command else {
            panic!("not a sweep")
        };
        assert_eq!(s.threads, [1, 8, 64]);
        assert_eq!(s.warehouses, [1, 2]);
        assert_eq!(s.stage.server.server_options[0].value, "1,0,2");
        assert_eq!(s.duration, 60.0);
    }
}
