//! Where each version's redo log is written and flushed: the table of
//! docs/the-study.md as data, one slice of rows per family.
//!
//! The durable flag moved between registers over the years (x86-64 SysV:
//! RDI, RSI, RDX, RCX, R8, R9 = args 0..5), so each row carries the
//! predicate the eBPF program evaluates. A C++ `bool` lives in the low 8
//! bits of its register, hence the 0xff masks.
use tracer_ebpf::PredOp;

use super::identity::Version;

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

pub(super) const fn v(major: u32, minor: u32, patch: u32) -> Version {
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
const MYSQL_56: Profile = Profile {
    name: "mysql-5.6",
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

/// MySQL's rows.
pub const MYSQL: &[Profile] = &[
    MYSQL_56,
    Profile {
        name: "mysql-5.7",
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
];

/// MariaDB's rows.
pub const MARIADB: &[Profile] = &[
    Profile {
        name: "mariadb-10.8+",
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
