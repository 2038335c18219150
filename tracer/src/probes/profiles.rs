//! Which functions to probe in which server, and how to read their
//! arguments: the table of docs/the-study.md as data.
//!
//! The durable flag moved between registers over the years (x86-64 SysV:
//! RDI, RSI, RDX, RCX, R8, R9 = args 0..5), so each row carries the
//! predicate the eBPF program evaluates. A C++ `bool` lives in the low 8
//! bits of its register, hence the 0xff masks.
use std::{fmt, path::Path, process::Command, str::FromStr, time::Duration};

use tracer_ebpf::{CommitStage, PredOp};

use crate::error::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    MySql,
    MariaDb,
}

/// A server version as far as the probe table cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// The release series, `(major, minor)`: servers of one series share a
    /// datadir format and system tables.
    pub fn series(&self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A detected or user-given server identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerId {
    pub flavor: Flavor,
    pub version: Version,
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.flavor {
            Flavor::MySql => "MySQL",
            Flavor::MariaDb => "MariaDB",
        };
        write!(f, "{name} {}", self.version)
    }
}

fn parse_version(s: &str) -> Option<Version> {
    let mut it = s.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = it.next()??;
    let minor = it.next()??;
    let patch = it.next().flatten().unwrap_or(0);
    Some(Version {
        major,
        minor,
        patch,
    })
}

impl FromStr for ServerId {
    type Err = Error;

    /// Accepts `mariadb-10.11`, `mysql-8.0.36`, `10.6.18-MariaDB`, `8.0.36`
    /// (a bare 5.x/8.x/9.x is MySQL, 10.x/11.x MariaDB).
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::BadServerVersion { given: s.into() };
        let lower = s.to_ascii_lowercase();
        let (flavor, rest) = if let Some(r) = lower.strip_prefix("mariadb-") {
            (Some(Flavor::MariaDb), r.to_string())
        } else if let Some(r) = lower.strip_prefix("mysql-") {
            (Some(Flavor::MySql), r.to_string())
        } else if let Some(r) = lower.strip_prefix("percona-") {
            (Some(Flavor::MySql), r.to_string())
        } else if lower.contains("mariadb") {
            (Some(Flavor::MariaDb), lower.clone())
        } else {
            (None, lower.clone())
        };
        let version = parse_version(&rest).ok_or_else(bad)?;
        let flavor = match flavor {
            Some(f) => f,
            None if (10..=11).contains(&version.major) => Flavor::MariaDb,
            None if matches!(version.major, 5 | 8 | 9) => Flavor::MySql,
            None => return Err(bad()),
        };
        Ok(ServerId { flavor, version })
    }
}

/// Asks the binary itself (`mysqld --version`), only for files named like a
/// server: never run an arbitrary program to learn its version.
pub fn detect(exe: &Path) -> Option<ServerId> {
    detect_or_why(exe).ok()
}

/// Why [`detect_or_why`] found no version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoVersion {
    /// The binary could not start here: the loader's own line (a library
    /// missing) or the exec error.
    CannotRun(String),
    /// It ran and said something else, or nothing.
    NotAServer(String),
}

/// [`detect`], or why not in one line.
pub fn detect_or_why(exe: &Path) -> Result<ServerId, NoVersion> {
    use NoVersion::{CannotRun, NotAServer};
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !(name.starts_with("mysqld") || name.starts_with("mariadbd")) {
        return Err(NotAServer(
            "not named mysqld or mariadbd: not run to ask its version".into(),
        ));
    }
    let mut child = Command::new(exe)
        .arg("--no-defaults")
        .arg("--version")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| CannotRun(e.to_string()))?;
    // A server binary answers --version at once; give up after 5 s.
    for _ in 0..50 {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(NotAServer("`--version` did not answer in 5 s".into()));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| NotAServer(format!("cannot read its answer: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(id) = parse_version_output(&text) {
        return Ok(id);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let said = err
        .lines()
        .chain(text.lines())
        .map(str::trim)
        .find(|l| !l.is_empty());
    Err(match said {
        // The dynamic loader's exit when a library is missing.
        Some(l) if out.status.code() == Some(127) => CannotRun(l.to_string()),
        Some(l) => NotAServer(format!("`--version` exited with {}: {l}", out.status)),
        None => NotAServer(format!(
            "`--version` printed no MySQL/MariaDB version ({})",
            out.status
        )),
    })
}

/// Parses `mysqld  Ver 8.0.36 for Linux ...` / `mariadbd  Ver 10.11.6-MariaDB-0+deb12u1 ...`.
pub fn parse_version_output(out: &str) -> Option<ServerId> {
    let ver = out.split_whitespace().skip_while(|w| *w != "Ver").nth(1)?;
    let flavor = if out.contains("MariaDB") {
        Flavor::MariaDb
    } else {
        Flavor::MySql
    };
    Some(ServerId {
        flavor,
        version: parse_version(ver)?,
    })
}

/// One argument test evaluated in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pred {
    pub op: PredOp,
    /// Argument index 0..5 (RDI, RSI, RDX, RCX, R8, R9).
    pub arg: u32,
    pub mask: u64,
    pub value: u64,
}

impl Pred {
    pub const OFF: Pred = Pred {
        op: PredOp::Off,
        arg: 0,
        mask: 0,
        value: 0,
    };
    pub const ALWAYS: Pred = Pred {
        op: PredOp::Always,
        arg: 0,
        mask: 0,
        value: 0,
    };
    /// A C++ bool argument is true.
    pub const fn bool_arg(arg: u32) -> Pred {
        Pred {
            op: PredOp::NonZero,
            arg,
            mask: 0xff,
            value: 0,
        }
    }
    pub const fn equals(arg: u32, mask: u64, value: u64) -> Pred {
        Pred {
            op: PredOp::Equals,
            arg,
            mask,
            value,
        }
    }

    /// True when testing it reads argument `arg` (at an inlined copy the
    /// argument may not be where the probe reads it).
    pub fn reads_arg(&self) -> bool {
        matches!(self.op, PredOp::NonZero | PredOp::Equals)
    }
}

/// Which counter feeds which column: the study's n_write is "requests",
/// the durable ones are those that asked for an fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    AllCalls,
    PredA,
    PredB,
}

/// One row of the probe table.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: &'static str,
    pub flavor: Flavor,
    /// Versions this row covers, inclusive.
    pub from: Version,
    pub to: Version,
    pub write_symbol: &'static str,
    pub pred_a: Pred,
    pub pred_b: Pred,
    /// What the `n_write` column counts.
    pub requests: Source,
    /// What the `durable` column counts.
    pub durable: Source,
    /// Once-per-redo-flush functions, best first (may be inlined: then the
    /// kernel's fsync count on the redo file stands in).
    pub flush_symbols: &'static [&'static str],
    pub flush_filter: Pred,
}

const fn v(major: u32, minor: u32, patch: u32) -> Version {
    Version {
        major,
        minor,
        patch,
    }
}

/// In 5.6/5.7 `fil_flush(space_id)` serves every tablespace; the redo log
/// is space SRV_LOG_SPACE_FIRST_ID = 0xFFFFFFF0.
const REDO_SPACE: Pred = Pred::equals(0, 0xffff_ffff, 0xFFFF_FFF0);

/// MySQL 5.6: `log_write_up_to(lsn, wait, flush_to_disk)`. The commit path
/// passes wait = LOG_WAIT_ONE_GROUP (92) for trx_commit 1 and 2; whether it
/// fsyncs is the third argument. Both are counted (docs/the-study.md, the correction).
pub const MYSQL_56: Profile = Profile {
    name: "mysql-5.6",
    flavor: Flavor::MySql,
    from: v(5, 6, 0),
    to: v(5, 6, 999),
    write_symbol: "_Z15log_write_up_tommm",
    pred_a: Pred::equals(1, u64::MAX, 92),
    pred_b: Pred {
        op: PredOp::NonZero,
        arg: 2,
        mask: u64::MAX,
        value: 0,
    },
    requests: Source::PredA,
    durable: Source::PredB,
    flush_symbols: &["_Z9fil_flushm"],
    flush_filter: REDO_SPACE,
};

pub const PROFILES: &[Profile] = &[
    MYSQL_56,
    Profile {
        name: "mysql-5.7",
        flavor: Flavor::MySql,
        from: v(5, 7, 0),
        to: v(5, 7, 999),
        write_symbol: "_Z15log_write_up_tomb",
        pred_a: Pred::bool_arg(1),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_Z9fil_flushm"],
        flush_filter: REDO_SPACE,
    },
    Profile {
        name: "mysql-8.0.30+",
        flavor: Flavor::MySql,
        from: v(8, 0, 30),
        to: v(9, 999, 999),
        write_symbol: "_Z15log_write_up_toR5log_tmb",
        pred_a: Pred::bool_arg(2),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_ZN15Log_file_handle5fsyncEv"],
        flush_filter: Pred::ALWAYS,
    },
    Profile {
        name: "mysql-8.0.11-8.0.29",
        flavor: Flavor::MySql,
        from: v(8, 0, 0),
        to: v(8, 0, 29),
        write_symbol: "_Z15log_write_up_toR5log_tmb",
        pred_a: Pred::bool_arg(2),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_Z19fil_flush_file_redov"],
        flush_filter: Pred::ALWAYS,
    },
    Profile {
        name: "mariadb-10.8+",
        flavor: Flavor::MariaDb,
        from: v(10, 8, 0),
        to: v(11, 999, 999),
        write_symbol: "_Z15log_write_up_tombPK19completion_callback",
        pred_a: Pred::bool_arg(1),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_ZN5log_t5flushEm"],
        flush_filter: Pred::ALWAYS,
    },
    Profile {
        name: "mariadb-10.6",
        flavor: Flavor::MariaDb,
        from: v(10, 6, 0),
        to: v(10, 7, 999),
        write_symbol: "_Z15log_write_up_tombbPK19completion_callback",
        pred_a: Pred::bool_arg(1),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_ZN5log_t4file5flushEv"],
        flush_filter: Pred::ALWAYS,
    },
    Profile {
        name: "mariadb-10.5",
        flavor: Flavor::MariaDb,
        from: v(10, 5, 0),
        to: v(10, 5, 999),
        write_symbol: "_Z15log_write_up_tombb",
        pred_a: Pred::bool_arg(1),
        pred_b: Pred::OFF,
        requests: Source::AllCalls,
        durable: Source::PredA,
        flush_symbols: &["_ZN5log_t4file5flushEv"],
        flush_filter: Pred::ALWAYS,
    },
];

/// Where a family's binlog group commit has its boundaries: each field is
/// a function (mangled names, alternatives best first) and the program
/// that goes there. The path is data: a new family or version adds a
/// row, not a branch. See tracer-ebpf's `binlog_*` programs.
#[derive(Clone, Debug)]
pub struct BinlogProfile {
    pub name: &'static str,
    pub flavor: Flavor,
    pub from: Version,
    pub to: Version,
    /// A flush-stage leader begins writing its queue (entry).
    pub flush_open: &'static [&'static str],
    /// Called by that leader once per member it writes (entry): one per
    /// commit, the only per-commit probe of the set.
    pub member: &'static [&'static str],
    /// The binlog write, whose return ends the flush stage (entry and
    /// return). MariaDB: `flush_and_sync`, its write-out and sync.
    pub write: &'static [&'static str],
    /// Where a group closes: the sync stage's queue fetch, with the
    /// predicate that picks the sync stage out of the others. None: the
    /// group closes with its flush stage.
    pub group_close: Option<(&'static [&'static str], Pred)>,
    /// The binlog sync (entry and return), where it is a stage of its own.
    pub sync: Option<&'static [&'static str]>,
    /// The commit stage's leader committing its queue (entry and return),
    /// where one thread commits the group.
    pub commit: Option<&'static [&'static str]>,
    /// Where a commit enters the binlog's group commit (entry; per
    /// commit, exact tier): a flush leader's wait from there to its flush
    /// stage is the group's queue wait.
    pub enter: Option<&'static [&'static str]>,
    /// The redo flush a flush-stage leader runs for its queue (entry and
    /// return), where it runs inside the flush stage.
    pub redo: Option<&'static [&'static str]>,
    /// The flush-stage leader asks InnoDB for one durable redo flush for
    /// its whole group (MySQL 8+), so the commits group here and InnoDB's
    /// n_write:n_flush stays near 1. MariaDB makes the durable redo call
    /// per transaction in prepare: its commits group at the redo flush,
    /// and its binlog groups are a second grouping.
    pub forms_group: bool,
}

/// `Commit_stage_manager::StageID::SYNC_STAGE` (flush 0, sync 1, commit 2,
/// after-commit 3), the second argument of `fetch_queue_acquire_lock`
/// after `this`.
const MYSQL_SYNC_STAGE: Pred = Pred::equals(1, 0xffff_ffff, 1);

pub const BINLOG_PROFILES: &[BinlogProfile] = &[
    BinlogProfile {
        name: "mysql-8.0.30+ binlog",
        flavor: Flavor::MySql,
        from: v(8, 0, 30),
        to: v(9, 999, 999),
        flush_open: &[
            // 9.x: (total_bytes, out_queue); 8.0: (total_bytes, rotate, out_queue).
            "_ZN13MYSQL_BIN_LOG25process_flush_stage_queueEPyPP3THD",
            "_ZN13MYSQL_BIN_LOG25process_flush_stage_queueEPyPbPP3THD",
        ],
        member: &["_ZN13MYSQL_BIN_LOG19flush_thread_cachesEP3THD"],
        write: &["_ZN13MYSQL_BIN_LOG19flush_cache_to_fileEPy"],
        group_close: Some((
            &["_ZN20Commit_stage_manager24fetch_queue_acquire_lockENS_7StageIDE"],
            MYSQL_SYNC_STAGE,
        )),
        sync: Some(&["_ZN13MYSQL_BIN_LOG16sync_binlog_fileEb"]),
        commit: Some(&["_ZN13MYSQL_BIN_LOG26process_commit_stage_queueEP3THDS1_"]),
        enter: Some(&["_ZN13MYSQL_BIN_LOG14ordered_commitEP3THDbb"]),
        // `ha_flush_logs(bool binlog_group_flush)`, called by the flush
        // leader after it fetched its queue.
        redo: Some(&["_Z13ha_flush_logsb"]),
        forms_group: true,
    },
    // MariaDB: one leader writes its queue (`write_transaction_or_stmt` per
    // member), then writes out and syncs the binlog (`flush_and_sync`); the
    // group is done there (the server's `Binlog_group_commits` and
    // `Binlog_commits` count the same). Exported even by Debian's stripped
    // build.
    BinlogProfile {
        name: "mariadb-10.5+ binlog",
        flavor: Flavor::MariaDb,
        from: v(10, 5, 0),
        to: v(11, 999, 999),
        flush_open: &["_ZN13MYSQL_BIN_LOG23trx_group_commit_leaderEPNS_18group_commit_entryE"],
        member: &["_ZN13MYSQL_BIN_LOG25write_transaction_or_stmtEPNS_18group_commit_entryEy"],
        write: &["_ZN13MYSQL_BIN_LOG14flush_and_syncEPb"],
        group_close: None,
        sync: None,
        commit: None,
        // It queues the commit (`queue_for_group_commit`) and, where the
        // commit found the queue empty, leads the group from there.
        enter: Some(&[
            "_ZN13MYSQL_BIN_LOG34write_transaction_to_binlog_eventsEPNS_18group_commit_entryE",
        ]),
        // The redo is flushed per transaction in prepare, before the
        // group: no redo flush inside its stages.
        redo: None,
        forms_group: false,
    },
];

/// The binlog rows worth trying for `id`, best first (every row for an
/// unknown server: the symbols decide).
pub fn binlog_candidates(id: Option<ServerId>) -> Vec<&'static BinlogProfile> {
    let mut rows: Vec<&BinlogProfile> = BINLOG_PROFILES.iter().collect();
    if let Some(id) = id {
        rows.retain(|p| p.flavor == id.flavor);
        rows.sort_by_key(|p| !(p.from <= id.version && id.version <= p.to));
    }
    rows
}

/// Exported server-layer commit functions, present even in stripped
/// MariaDB whose InnoDB symbols are hidden. One call per commit.
pub const FALLBACKS: &[&str] = &["_Z19ha_commit_one_phaseP3THDb", "_Z12trans_commitP3THD"];

/// Where the commits that skip `ha_commit_one_phase` go: with the binlog
/// on, a transaction commits in two phases through the binlog's
/// `log_and_order` (MariaDB) / `commit` (MySQL) instead. Probed beside
/// `ha_commit_one_phase`, so every commit is seen exactly once.
pub const FALLBACK_TWO_PHASE: &[&str] = &[
    "_ZN13MYSQL_BIN_LOG13log_and_orderEP3THDybbb",
    "_ZN13MYSQL_BIN_LOG6commitEP3THDb",
];

/// The server layer's commit function: a commit's span for
/// `--commit-path`, from the commit's entry to its return, autocommit
/// statements included. It also ends statements inside a transaction;
/// the kernel side keeps only the calls that wrote (see `CommitSpan`).
/// MySQL 8+: (THD*, bool all, bool ignore_global_read_lock); MariaDB:
/// (THD*, bool all).
pub const COMMIT_SPAN: &[&str] = &["_Z15ha_commit_transP3THDbb", "_Z15ha_commit_transP3THDb"];

/// Where a semi-sync source waits for its replica's acknowledgement, per
/// wait point. MySQL calls the semisync plugin through the server's
/// hook delegates, exported by the stock binary and called only while
/// an observer (the plugin) is installed: `after_sync` once per binlog
/// group (AFTER_SYNC), `after_commit` once per transaction (AFTER_COMMIT,
/// and for nothing with AFTER_SYNC). MariaDB's semi-sync is built in:
/// both wait points end in `commit_trx`, once per transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckProfile {
    pub at_sync: &'static [&'static str],
    /// None where `at_sync` serves both wait points.
    pub at_commit: Option<&'static [&'static str]>,
}

pub const ACK_MYSQL: AckProfile = AckProfile {
    at_sync: &["_ZN23Binlog_storage_delegate10after_syncEP3THDPKcy"],
    at_commit: Some(&["_ZN14Trans_delegate12after_commitEP3THDb"]),
};

pub const ACK_MARIADB: AckProfile = AckProfile {
    at_sync: &["_ZN21Repl_semi_sync_master10commit_trxEPKcy"],
    at_commit: None,
};

/// The family's [`AckProfile`].
pub fn ack_profile(flavor: Option<Flavor>) -> AckProfile {
    match flavor {
        Some(Flavor::MySql) => ACK_MYSQL,
        _ => ACK_MARIADB,
    }
}

/// A commit-path stage as a family names it: the kernel's slot, the
/// name the summary and JSON use, and the tick line's short form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageName {
    pub slot: CommitStage,
    pub name: &'static str,
    pub short: &'static str,
}

const fn st(slot: CommitStage, name: &'static str, short: &'static str) -> StageName {
    StageName { slot, name, short }
}

/// The commit path's stages as `flavor` names them, in path order: where
/// a commit's time goes on that family. MariaDB flushes the redo in
/// prepare, before the binlog's group; MySQL 8+ has its flush-stage
/// leader ask InnoDB for it inside the binlog's flush stage, and its
/// committing threads never flush the redo themselves (log_writer and
/// log_flusher do).
pub fn commit_stages(flavor: Option<Flavor>) -> &'static [StageName] {
    match flavor {
        Some(Flavor::MySql) => MYSQL_STAGES,
        _ => MARIADB_STAGES,
    }
}

const MYSQL_STAGES: &[StageName] = {
    use CommitStage as S;
    &[
        st(S::BinlogQueueWait, "binlog flush: queue wait", "bl_queue"),
        st(S::BinlogFlush, "binlog flush", "bl_flush"),
        st(S::RedoLeaderWrite, "redo write (leader)", "redo_write"),
        st(S::RedoLeaderSync, "redo fsync (leader)", "redo_sync"),
        st(
            S::RedoFollowerWait,
            "redo wait (log_writer, log_flusher)",
            "redo_wait",
        ),
        st(S::BinlogSyncWait, "binlog sync wait", "bl_syncwait"),
        st(S::BinlogSync, "binlog sync", "bl_sync"),
        st(S::BinlogCommit, "binlog commit stage", "bl_commit"),
        st(
            S::BinlogFollowerWait,
            "binlog group wait (follower)",
            "bl_follower",
        ),
        st(S::ReplicaAck, "replica ack", "ack"),
    ]
};

const MARIADB_STAGES: &[StageName] = {
    use CommitStage as S;
    &[
        st(S::RedoLeaderWrite, "redo write (leader)", "redo_write"),
        st(S::RedoLeaderSync, "redo fsync (leader)", "redo_sync"),
        st(S::RedoFollowerWait, "redo wait (follower)", "redo_wait"),
        st(S::BinlogQueueWait, "binlog queue wait (leader)", "bl_queue"),
        st(
            S::BinlogFlush,
            "binlog group: wait, write caches (leader)",
            "bl_group",
        ),
        st(
            S::BinlogSync,
            "binlog write-out and sync (leader)",
            "bl_sync",
        ),
        st(
            S::BinlogFollowerWait,
            "binlog group wait (follower)",
            "bl_follower",
        ),
        st(S::ReplicaAck, "replica ack", "ack"),
    ]
};

/// A mangled C++ name demangled, or None. Not `to_string()`: the
/// demangler's `Display` fails on some names that parse, and `to_string`
/// turns that into a panic (found by the server_option fuzz target).
pub fn demangle(mangled: &str) -> Option<String> {
    cpp_demangle::Symbol::new(mangled.as_bytes())
        .ok()?
        .demangle(&cpp_demangle::DemangleOptions::default())
        .ok()
}

/// Human name of a fallback symbol.
pub fn short_name(mangled: &str) -> String {
    demangle(mangled)
        .map(|d| d.split('(').next().unwrap_or(&d).to_string())
        .unwrap_or_else(|| mangled.to_string())
}

/// The oldest version of `flavor` the table has a row for.
pub fn oldest(flavor: Flavor) -> Option<Version> {
    PROFILES
        .iter()
        .filter(|p| p.flavor == flavor)
        .map(|p| p.from)
        .min()
}

/// "MySQL 5.6.0 and later, MariaDB 10.5.0 and later", for messages.
pub fn supported_range() -> String {
    [(Flavor::MySql, "MySQL"), (Flavor::MariaDb, "MariaDB")]
        .iter()
        .filter_map(|(f, name)| oldest(*f).map(|v| format!("{name} {v} and later")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows worth trying for `id`, best first. Unknown server: every row
/// (mangled names differ between versions, so the symbols decide).
pub fn candidates(id: Option<ServerId>) -> Vec<&'static Profile> {
    match id {
        Some(id) => {
            let (hit, rest): (Vec<_>, Vec<_>) = PROFILES
                .iter()
                .partition(|p| p.flavor == id.flavor && p.from <= id.version && id.version <= p.to);
            hit.into_iter().chain(rest).collect()
        }
        None => PROFILES.iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_parse_but_do_not_print_are_left_mangled() {
        // Fuzz regression (fuzz/seeds/server_option/crash-992b8432...).
        let odd = "_Z15l_Z15logT_writritremzsynssogT_writritremzsynssct";
        assert_eq!(short_name(odd), odd);
        assert_eq!(short_name("_ZN5log_t5flushEm"), "log_t::flush");
    }

    #[test]
    fn the_oldest_rows_bound_what_is_supported() {
        assert_eq!(oldest(Flavor::MariaDb), Some(v(10, 5, 0)));
        assert_eq!(oldest(Flavor::MySql), Some(v(5, 6, 0)));
        assert_eq!(
            supported_range(),
            "MySQL 5.6.0 and later, MariaDB 10.5.0 and later"
        );
    }

    #[test]
    fn parses_server_versions() {
        let m: ServerId = "mariadb-10.11".parse().unwrap();
        assert_eq!((m.flavor, m.version), (Flavor::MariaDb, v(10, 11, 0)));
        let m: ServerId = "10.6.18-MariaDB-log".parse().unwrap();
        assert_eq!((m.flavor, m.version), (Flavor::MariaDb, v(10, 6, 18)));
        let m: ServerId = "8.0.36".parse().unwrap();
        assert_eq!((m.flavor, m.version), (Flavor::MySql, v(8, 0, 36)));
        assert!("banana".parse::<ServerId>().is_err());
        assert!("3.2".parse::<ServerId>().is_err());
    }

    #[test]
    fn parses_version_output() {
        let id = parse_version_output(
            "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n",
        )
        .unwrap();
        assert_eq!((id.flavor, id.version), (Flavor::MariaDb, v(10, 11, 19)));
        let id = parse_version_output(
            "mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)",
        )
        .unwrap();
        assert_eq!((id.flavor, id.version), (Flavor::MySql, v(8, 0, 36)));
    }

    #[test]
    fn every_version_maps_to_its_row() {
        let pick = |s: &str| candidates(Some(s.parse().unwrap()))[0].name;
        assert_eq!(pick("5.6.51"), "mysql-5.6");
        assert_eq!(pick("5.7.44"), "mysql-5.7");
        assert_eq!(pick("8.0.20"), "mysql-8.0.11-8.0.29");
        assert_eq!(pick("8.0.36"), "mysql-8.0.30+");
        assert_eq!(pick("8.4.3"), "mysql-8.0.30+");
        assert_eq!(pick("9.1.0"), "mysql-8.0.30+");
        assert_eq!(pick("10.5.20"), "mariadb-10.5");
        assert_eq!(pick("10.6.18"), "mariadb-10.6");
        assert_eq!(pick("10.11.18-MariaDB"), "mariadb-10.8+");
        assert_eq!(pick("11.4.2-MariaDB"), "mariadb-10.8+");
        assert_eq!(short_name(FALLBACKS[0]), "ha_commit_one_phase");
    }
}
