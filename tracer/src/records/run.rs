//! What every report is made of: the start legend, the per-interval and
//! per-tick records' sinks, the summaries and why a run ended. The format
//! files import these; none imports another format.
use std::time::SystemTime;

use crate::{
    sample::{commits_per_flush, Interval, Joined},
    server::status::Check,
};

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
    /// The workload ended by itself (`--total-rows`).
    WorkloadDone,
    /// The server cannot write (its disk is full): the run stopped.
    ServerCannotWrite,
    /// The replication group lost the majority of its members: commits
    /// block until it has one again.
    GroupLostMajority,
}

impl EndReason {
    /// Whether the run ended because of the server (exit code 3).
    pub fn server_failed(&self) -> bool {
        matches!(
            self,
            EndReason::TargetExited | EndReason::ServerCannotWrite | EndReason::GroupLostMajority
        )
    }

    pub fn describe(&self) -> &'static str {
        match self {
            EndReason::Interrupted => "interrupted (Ctrl-C)",
            EndReason::Duration => "--duration reached",
            EndReason::TargetExited => "the traced process exited",
            EndReason::WorkloadDone => "the workload finished (--total-rows)",
            EndReason::ServerCannotWrite => "the server cannot write",
            EndReason::GroupLostMajority => "the group lost its majority",
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
    /// Which source of the cascade won, for the write probe (and the flush
    /// probe when it differs): ".symtab", "debuginfod https://…", "dwarf",
    /// "dwarf-inlined (3 sites)".
    pub symbol_source: String,
    /// What `durable` tests, or None in fallback mode.
    pub durable_source: Option<String>,
    /// Function counted in `n_flush`, or "redo fsync (kernel)".
    pub n_flush_source: String,
    pub fsync_probe: String,
    /// The kernel functions the fsync kprobes sit on (`do_fsync`, or the
    /// syscall wrappers where it is inlined); absent with tracepoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsync_function: Option<String>,
    /// The syncs are timed (their latency columns filled): false where the
    /// light tier counts them at the C library's entry alone.
    pub fsync_timed: bool,
    /// How the writes are counted: "fentry on __x64_sys_write, ...",
    /// "tracepoints sys_enter_write, ...", or the C library's wrappers.
    pub write_probe: String,
    /// Set when n_write is the server-layer fallback.
    pub fallback: Option<String>,
    /// What leaders and followers mean on this server; None when they are
    /// not counted (no `--anatomy`, fallback mode, untimed writes).
    pub anatomy: Option<String>,
    /// The probe tier: light counts n_write by the server's counter.
    pub probes: crate::probes::tier::Tier,
    /// `--io`: the device and filesystem under the redo log and what is
    /// attributed, or why nothing is (None without `--io`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// ... and its requests are counted: the `--io` columns are shown.
    #[serde(skip)]
    pub io_columns: bool,
    /// The binlog group commit's probes are attached: its columns exist.
    #[serde(skip)]
    pub binlog_columns: bool,
    /// `--commit-path`: its columns exist.
    #[serde(skip)]
    pub commit_path_columns: bool,
}

/// The end-of-run record.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub end: EndReason,
    pub totals: Interval,
    pub intervals: u64,
    /// Every pid traced, in order: more than one when `trace --mysqld`
    /// followed the server through restarts.
    pub pids: Vec<u32>,
}

/// A followed server came back as a new process (`trace --mysqld`).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Restart {
    pub previous_pid: u32,
    pub pid: u32,
    /// Seconds between noticing the exit and attaching to the new process.
    pub down_s: f64,
}

pub trait Sink {
    fn start(&mut self, legend: &Legend);
    fn interval(&mut self, at: SystemTime, i: &Interval);
    /// Said in the output stream, between the intervals before and after.
    fn restart(&mut self, at: SystemTime, r: &Restart);
    fn summary(&mut self, legend: &Legend, s: &Summary);
}

/// What a run is about, said once at start and again in the summary.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunHeader {
    /// "10.11.19-MariaDB (managed: /usr/sbin/mariadbd, pid 123)".
    pub server: String,
    /// What the probe columns count (None: untraced).
    pub legend: Option<Legend>,
    /// `--server-option`s of a managed server.
    pub options: Vec<String>,
    /// The limits a managed server was sized to (None: the user's server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizing: Option<crate::server::sizing::Sizing>,
}

/// The end of a main-command run, over the measured window.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunSummary {
    pub end: EndReason,
    /// How it ended, in words: `the server died (signal 9)`.
    pub ended: String,
    pub workload: workload::stats::Summary,
    pub trace: Option<Interval>,
    /// Measured commits per redo flush.
    pub commits_per_flush: Option<f64>,
    /// The server's own counters beside ours.
    pub checks: Vec<Check>,
    /// `--replica`: the managed replica at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<crate::server::replica::ReplicaEnd>,
    /// `--replica group` (`galera`): the group's members at the end
    /// (`group`, or the family's word: `cluster`).
    #[serde(
        flatten,
        serialize_with = "crate::group::under_its_word",
        skip_serializing_if = "Option::is_none"
    )]
    pub group: Option<crate::server::group_end::GroupEnd>,
}

impl RunSummary {
    pub fn new(
        end: EndReason,
        workload: workload::stats::Summary,
        trace: Option<Interval>,
        checks: Vec<Check>,
    ) -> Self {
        let commits_per_flush = commits_per_flush(workload.commits, trace.as_ref());
        RunSummary {
            end,
            ended: end.describe().to_string(),
            workload,
            trace,
            commits_per_flush,
            checks,
            replica: None,
            group: None,
        }
    }
}

pub trait RunSink {
    fn start(&mut self, h: &RunHeader, cfg: &workload::engine::Config);
    fn tick(&mut self, at: SystemTime, j: &Joined);
    fn summary(&mut self, h: &RunHeader, s: &RunSummary);
}

/// Several sinks fed the same records (stdout table or JSON, plus CSV).
pub struct Tee(pub Vec<Box<dyn RunSink>>);

impl RunSink for Tee {
    fn start(&mut self, h: &RunHeader, cfg: &workload::engine::Config) {
        self.0.iter_mut().for_each(|s| s.start(h, cfg));
    }
    fn tick(&mut self, at: SystemTime, j: &Joined) {
        self.0.iter_mut().for_each(|s| s.tick(at, j));
    }
    fn summary(&mut self, h: &RunHeader, s: &RunSummary) {
        self.0.iter_mut().for_each(|k| k.summary(h, s));
    }
}
