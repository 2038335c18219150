//! Workload failures, each rendered as one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot connect to the server at {target}: {detail}; is the server running? (check --socket, --host/--port or --dsn)")]
    Unreachable { target: String, detail: String },

    #[error("unknown host {host:?}: {detail}; check --host or --dsn")]
    UnknownHost { host: String, detail: String },

    #[error("access denied for user {user:?} ({detail}): check --user/--password, MYSQL_PWD or ~/.my.cnf")]
    AccessDenied { user: String, detail: String },

    #[error("missing privileges: {detail}; grant CREATE, DROP, INSERT, UPDATE, SELECT on the workload database")]
    Privileges { detail: String },

    #[error("database `{database}` exists but was not created by commitscope (no `_commitscope` marker table): refusing to touch it; pick another name with --database")]
    Unmarked { database: String },

    #[error("invalid {what}: {detail}")]
    BadInput { what: &'static str, detail: String },

    /// An option file (`~/.my.cnf`, `--defaults-file`) that cannot be
    /// read: the reader's own error.
    #[error(transparent)]
    OptionFile(#[from] readers::Error),

    #[error("{context}: {source}")]
    Sql {
        context: String,
        source: mysql_async::Error,
    },

    #[error("TPC-C, {context}: {detail}")]
    Tpcc {
        context: &'static str,
        detail: String,
    },

    #[error("the TPC-C load was interrupted; the database is marked incomplete and the next load or run resumes it at the first unfinished warehouse")]
    LoadInterrupted,

    #[error("too few connections: {detail}; raise it first, e.g. `{fix}`, or run fewer --threads")]
    TooFewConnections { detail: String, fix: String },

    /// The run stopped because the server cannot write (its disk is
    /// full): exit code 3, as for a server lost mid-run.
    #[error("{detail}: the summary above covers the run up to then")]
    ServerCannotWrite { detail: String },

    #[error("{0}")]
    Runtime(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The server error code of a mysql_async error, if it is one.
pub fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}
