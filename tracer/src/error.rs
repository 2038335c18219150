//! Every way commitscope can fail, each with the context a user needs to
//! act on it. `main` prints the Display form as one line: no backtraces.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("commitscope{what} needs root to load eBPF programs: run it with sudo{hint}")]
    NotRoot {
        what: &'static str,
        hint: &'static str,
    },

    #[error(
        "no process with pid {pid}: check the pid of the running mysqld/mariadbd (pidof mariadbd)"
    )]
    NoSuchProcess { pid: u32 },

    #[error("no running process of {}: start the server first, or pass --pid", path.display())]
    NotRunning { path: PathBuf },

    #[error("{count} processes run {}: pass --pid to pick one ({pids})", path.display())]
    ManyRunning {
        path: PathBuf,
        count: usize,
        pids: String,
    },

    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{} has neither {wanted} nor a server-layer commit function ({fallbacks}), even in debug files under {}: it does not look like mysqld/mariadbd; pass the server binary, or --debug-dir where its debug symbols are", path.display(), debug_root.display())]
    NoProbeSymbol {
        path: PathBuf,
        wanted: String,
        fallbacks: String,
        debug_root: PathBuf,
    },

    #[error("invalid --interval {given}: expected a positive number of seconds, at least 0.01")]
    BadInterval { given: f64 },

    #[error(
        "the eBPF object is empty (built with AYA_BUILD_SKIP=1?): rebuild with `cargo xtask build`"
    )]
    EmptyObject,

    #[error("loading the eBPF programs failed: {0}")]
    Load(String),

    #[error("pid {pid} exited while its probes were being attached: trace the server's current process (pidof mariadbd), or pass --mysqld to follow it through restarts")]
    ExitedDuringAttach { pid: u32 },

    #[error("attaching {what} failed: {detail}")]
    Attach { what: String, detail: String },

    #[error("--fsync-probe {kind}: the kernel refused the {kind} on {functions} ({detail}); use --fsync-probe auto or tracepoint")]
    KernelProbeUnavailable {
        kind: crate::probes::fsync_choice::FsyncProbe,
        functions: String,
        detail: String,
    },

    #[error("--fsync-probe libc: no uprobes on the C library of pid {pid} ({detail}); use --fsync-probe auto or tracepoint")]
    LibcProbeUnavailable { pid: u32, detail: String },

    #[error("tracefs is not available at /sys/kernel/tracing and mounting it failed ({detail}): mount it with `mount -t tracefs nodev /sys/kernel/tracing`")]
    NoTracefs { detail: String },

    #[error("reading eBPF map {map} failed: {detail}")]
    MapRead { map: &'static str, detail: String },

    #[error("{detail}: install mariadb-server (apt install mariadb-server) or pass --mysqld PATH, or connect to a running server with --socket/--host")]
    NoServerBinary { detail: String },

    #[error("{} is not a MySQL/MariaDB server ({detail}): pass the server binary with --mysqld, or --server-version if it is one", path.display())]
    NotAServer { path: PathBuf, detail: String },

    /// Older than every row of the probe table: its functions are unknown.
    #[error("{} is {found}, older than any server commitscope knows (supported: {supported}): pass a newer --mysqld", path.display())]
    ServerTooOld {
        path: PathBuf,
        found: String,
        supported: String,
    },

    /// The binary cannot start on this machine (the loader's line).
    #[error("{} cannot run here: {detail}; install the libraries it needs (`ldd {}` lists them) or pass another --mysqld", path.display(), path.display())]
    ServerCannotRun { path: PathBuf, detail: String },

    #[error("no {wanted} found next to {} or on PATH to initialise a datadir: install the server's client/scripts package (apt install mariadb-server)", server.display())]
    NoInstallScript { server: PathBuf, wanted: String },

    #[error("cannot create the server's temp dir under {}: {source}; pass --workdir with a writable directory", path.display())]
    Workdir {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("initialising the datadir failed: {detail}; check --server-option values (--keep keeps the temp dir and its init.log)")]
    ServerInit { detail: String },

    #[error("the server did not start: {detail}; check --server-option values (--keep keeps the temp dir and its error.log)")]
    ServerStart { detail: String },

    /// The managed server's init or start ran out of space in --workdir.
    #[error("{phase}: the --workdir filesystem {workdir} is full: {line}; pass --workdir on a filesystem with more room")]
    WorkdirFull {
        phase: &'static str,
        workdir: PathBuf,
        line: String,
    },

    /// The managed replica could not be made to replicate: its own error,
    /// and what to do.
    #[error("--replica: {detail}; check the server's plugin dir and --server-option values (--keep keeps both temp dirs and their error.log)")]
    Replica { detail: String },

    /// `--replica group` (`galera`): a member that did not start or
    /// join, with its own error.
    #[error(
        "--replica {mode}: {detail} (--keep keeps the members' temp dirs and their error.log)"
    )]
    Group { mode: &'static str, detail: String },

    #[error("invalid --server-option {0}")]
    BadServerOption(String),

    #[error("cannot find the server's pid (no socket peer, no readable @@pid_file): pass --pid, or --no-trace to run untraced")]
    NoServerPid,

    #[error("{0}")]
    Usage(String),

    #[error("cannot write {}: {source}; pass a writable path", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("interrupted during {phase}: probes detached, server stopped, temp files removed")]
    Interrupted { phase: &'static str },

    /// Exit code 4: the summary above is of a run that was not what was
    /// asked for (semi-sync became async part way).
    #[error("{detail}: the summary above is partly of an async replica; pass --allow-async-fallback to accept that")]
    AsyncFallback { detail: String },

    /// Exit code 3: the summary above covers the run up to the loss.
    #[error("{detail}: the summary above covers the run up to then")]
    ServerLost { detail: String },

    /// A sweep cell the server refuses (found by the dry validation pass,
    /// or at a restart).
    #[error("cell {cell}: {detail}")]
    SweepCell { cell: String, detail: String },

    #[error("{0}")]
    Runtime(String),

    #[error(transparent)]
    Workload(#[from] workload::Error),

    /// A file read or written for the user (a server binary, a debug
    /// file, a sweep's records, a chart): the readers' own error.
    #[error(transparent)]
    Readers(#[from] readers::Error),
}

pub type Result<T> = std::result::Result<T, Error>;
