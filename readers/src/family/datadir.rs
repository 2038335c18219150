//! How each family makes a fresh datadir, and what a throwaway server of
//! it needs that the other does not.

/// How a fresh datadir is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datadir {
    /// From this release series on, the server makes its own datadir
    /// (`--initialize-insecure`: root without a password); before it (or
    /// never: None), an install script.
    pub initializes_itself_from: Option<(u32, u32)>,
    /// The install scripts, best first.
    pub install_scripts: &'static [&'static str],
    /// What a throwaway server needs beyond the options every family
    /// gets, each left to the user when `--server-option` sets it.
    pub throwaway: &'static [Throwaway],
    /// The files of a fresh datadir that make its server one of a kind,
    /// left out of a kept copy (`server::template`): each copy's server
    /// makes its own at its first start.
    pub identity_files: &'static [&'static str],
}

/// One option a throwaway server of the family gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throwaway {
    /// The variable, as `--server-option` names it.
    pub variable: &'static str,
    pub value: ThrowawayValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrowawayValue {
    /// This value.
    Fixed(&'static str),
    /// A directory of this name in the server's private temp dir, made
    /// for it (mode 0700, owned by the server's account).
    PrivateDir(&'static str),
}

/// MySQL: `secure_file_priv` defaults to a directory under /var/lib that
/// a stock build refuses to start without (it goes inside the temp dir);
/// the X plugin would listen on its own port and socket (off);
/// `local_infile` is off by default and TPC-C loads with `LOAD DATA
/// LOCAL` (on).
pub const MYSQL_DATADIR: Datadir = Datadir {
    initializes_itself_from: Some((5, 7)),
    install_scripts: &["mysql_install_db"],
    throwaway: &[
        Throwaway {
            variable: "secure_file_priv",
            value: ThrowawayValue::PrivateDir("files"),
        },
        Throwaway {
            variable: "mysqlx",
            value: ThrowawayValue::Fixed("OFF"),
        },
        Throwaway {
            variable: "local_infile",
            value: ThrowawayValue::Fixed("ON"),
        },
    ],
    // The server UUID: replicas and group members must differ in it.
    identity_files: &["auto.cnf"],
};

/// MariaDB needs none of MySQL's.
pub const MARIADB_DATADIR: Datadir = Datadir {
    initializes_itself_from: None,
    install_scripts: &["mariadb-install-db", "mysql_install_db"],
    throwaway: &[],
    identity_files: &[],
};
