//! How each family spells replication: semi-sync's variables and
//! plugins, the statements that start, stop and point a replica, and the
//! names its status uses. Spelling only: `server::replica` does the steps.

/// One family's spelling of replication.
pub struct Dialect {
    /// Semi-sync's variables on the source and the replica, and (with a
    /// capital) their status counters' prefix.
    pub source_vars: &'static str,
    pub replica_vars: &'static str,
    /// The plugins to load (MySQL); None where semi-sync is built in.
    pub source_plugin: Option<&'static str>,
    pub replica_plugin: Option<&'static str>,
    /// Both ends need these at start (MySQL's GTIDs are off by default).
    pub gtid_args: &'static [&'static str],
    pub skip_start: &'static str,
    pub start: &'static str,
    pub stop: &'static str,
    pub status: &'static str,
    pub io_running: &'static str,
    pub sql_running: &'static str,
    pub lag: &'static str,
    /// The statement that points the replica at its source.
    pub change_source: fn(&Wire) -> String,
}

impl Dialect {
    /// A semi-sync status counter's name on the source, e.g.
    /// `Rpl_semi_sync_source_yes_tx`.
    pub fn source_status(&self, what: &str) -> String {
        let mut s = format!("{}_{what}", self.source_vars);
        s[..1].make_ascii_uppercase();
        s
    }
}

/// Where the replica connects, and as whom.
pub struct Wire {
    pub host: String,
    pub port: u16,
    pub user: &'static str,
    pub password: String,
}

/// A string as an SQL literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

pub const MYSQL_REPLICATION: Dialect = Dialect {
    source_vars: "rpl_semi_sync_source",
    replica_vars: "rpl_semi_sync_replica",
    source_plugin: Some("semisync_source.so"),
    replica_plugin: Some("semisync_replica.so"),
    gtid_args: &["--gtid-mode=ON", "--enforce-gtid-consistency=ON"],
    skip_start: "--skip-replica-start",
    start: "START REPLICA",
    stop: "STOP REPLICA",
    status: "SHOW REPLICA STATUS",
    io_running: "Replica_IO_Running",
    sql_running: "Replica_SQL_Running",
    lag: "Seconds_Behind_Source",
    change_source: |w| {
        format!(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST={}, SOURCE_PORT={}, SOURCE_USER={}, SOURCE_PASSWORD={}, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1",
            quote(&w.host),
            w.port,
            quote(w.user),
            quote(&w.password)
        )
    },
};

pub const MARIADB_REPLICATION: Dialect = Dialect {
    source_vars: "rpl_semi_sync_master",
    replica_vars: "rpl_semi_sync_slave",
    source_plugin: None,
    replica_plugin: None,
    gtid_args: &[],
    skip_start: "--skip-slave-start",
    start: "START SLAVE",
    stop: "STOP SLAVE",
    status: "SHOW SLAVE STATUS",
    io_running: "Slave_IO_Running",
    sql_running: "Slave_SQL_Running",
    lag: "Seconds_Behind_Master",
    change_source: |w| {
        format!(
            "CHANGE MASTER TO MASTER_HOST={}, MASTER_PORT={}, MASTER_USER={}, MASTER_PASSWORD={}, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            quote(&w.host),
            w.port,
            quote(w.user),
            quote(&w.password)
        )
    },
};
