//! The rows: each family's, and how a server's name or `--version` line
//! is read into its family and version by what each row says of its
//! spelling.
use std::{fmt, str::FromStr};

use super::{
    binlog::{self, BinlogProfile},
    commit::{self, AckHooks, StageName},
    datadir::{self, Datadir},
    group::{self, GroupRow},
    identity::{parse_version, Flavor, ServerId, Version},
    redo::{self, Profile},
    replication::{self, Dialect},
};
use crate::error::Error;

/// One family's row.
pub struct Family {
    pub flavor: Flavor,
    /// How it is named to users: "MySQL", "MariaDB".
    pub name: &'static str,
    /// How `--server-version` names it before a version (`mysql-8.0.36`,
    /// `percona-8.0`), lower case.
    pub prefixes: &'static [&'static str],
    /// The word its version strings carry (`10.11.6-MariaDB-0+deb12u1`);
    /// None: a version string carrying no family's word is this one's.
    pub marker: Option<&'static str>,
    /// The major versions a bare version (`8.0.36`) of it has.
    pub bare_majors: &'static [u32],
    /// The redo's functions, a row per range of versions.
    pub redo: &'static [Profile],
    /// The binlog group commit's boundaries, a row per range of versions.
    pub binlog: &'static [BinlogProfile],
    /// The commit path's stages as it names them, in path order.
    pub stages: &'static [StageName],
    /// Where a semi-sync source waits for its replica.
    pub ack: AckHooks,
    pub datadir: Datadir,
    pub replication: Dialect,
    /// Its replication group (None: the family has none here).
    pub group: Option<GroupRow>,
}

pub static MYSQL: Family = Family {
    flavor: Flavor::MySql,
    name: "MySQL",
    prefixes: &["mysql", "percona"],
    marker: None,
    bare_majors: &[5, 8, 9],
    redo: redo::MYSQL,
    binlog: binlog::MYSQL,
    stages: commit::MYSQL_STAGES,
    ack: commit::MYSQL_ACK,
    datadir: datadir::MYSQL_DATADIR,
    replication: replication::MYSQL_REPLICATION,
    group: Some(group::GROUP_REPLICATION),
};

pub static MARIADB: Family = Family {
    flavor: Flavor::MariaDb,
    name: "MariaDB",
    prefixes: &["mariadb"],
    marker: Some("MariaDB"),
    bare_majors: &[10, 11],
    redo: redo::MARIADB,
    binlog: binlog::MARIADB,
    stages: commit::MARIADB_STAGES,
    ack: commit::MARIADB_ACK,
    datadir: datadir::MARIADB_DATADIR,
    replication: replication::MARIADB_REPLICATION,
    group: Some(group::GALERA),
};

/// Every family's row.
pub static FAMILIES: [&Family; 2] = [&MYSQL, &MARIADB];

impl Flavor {
    /// Its row.
    pub fn family(self) -> &'static Family {
        match self {
            Flavor::MySql => &MYSQL,
            Flavor::MariaDb => &MARIADB,
        }
    }
}

impl Family {
    /// The row of `server`, when it is known; else MariaDB's, whose names
    /// the commit path's stages and the semi-sync hook then go by (the
    /// binary's symbols decide what is probed either way).
    pub fn of(server: Option<ServerId>) -> &'static Family {
        server.map_or(&MARIADB, |s| s.family())
    }

    /// The oldest version it has a redo row for.
    pub fn oldest(&self) -> Option<Version> {
        self.redo.iter().map(|p| p.from).min()
    }
}

/// "MySQL 5.6.0 and later, MariaDB 10.5.0 and later", for messages.
pub fn supported_range() -> String {
    FAMILIES
        .iter()
        .filter_map(|f| f.oldest().map(|v| format!("{} {v} and later", f.name)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The redo rows worth trying for `id`, best first. Unknown server: every
/// row (mangled names differ between versions, so the symbols decide).
pub fn redo_candidates(id: Option<ServerId>) -> Vec<&'static Profile> {
    let (mut hit, mut rest) = (Vec::new(), Vec::new());
    for f in FAMILIES {
        for p in f.redo {
            let covers = id.is_some_and(|id| {
                id.flavor == f.flavor && p.from <= id.version && id.version <= p.to
            });
            if covers {
                hit.push(p);
            } else {
                rest.push(p);
            }
        }
    }
    hit.extend(rest);
    hit
}

/// The binlog rows worth trying for `id`, best first: its family's, the
/// row of its version first (every row for an unknown server: the symbols
/// decide).
pub fn binlog_candidates(id: Option<ServerId>) -> Vec<&'static BinlogProfile> {
    match id {
        Some(id) => {
            let mut rows: Vec<&BinlogProfile> = id.family().binlog.iter().collect();
            rows.sort_by_key(|p| !(p.from <= id.version && id.version <= p.to));
            rows
        }
        None => FAMILIES.iter().flat_map(|f| f.binlog.iter()).collect(),
    }
}

impl ServerId {
    /// Its family's row.
    pub fn family(&self) -> &'static Family {
        self.flavor.family()
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family().name, self.version)
    }
}

impl FromStr for ServerId {
    type Err = Error;

    /// Accepts `mariadb-10.11`, `mysql-8.0.36`, `percona-8.0`,
    /// `10.6.18-MariaDB`, `8.0.36`: a family's prefix, else its marker
    /// anywhere, else the family whose majors a bare version is in
    /// ([`Family::bare_majors`]).
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::BadServerVersion { given: s.into() };
        let lower = s.to_ascii_lowercase();
        let prefixed = FAMILIES.iter().find_map(|f| {
            f.prefixes
                .iter()
                .find_map(|p| lower.strip_prefix(&format!("{p}-")))
                .map(|rest| (f.flavor, rest))
        });
        let (flavor, rest) = match prefixed {
            Some((f, rest)) => (Some(f), rest),
            None => (marked(&lower).map(|f| f.flavor), lower.as_str()),
        };
        let version = parse_version(rest).ok_or_else(bad)?;
        let flavor = match flavor {
            Some(f) => f,
            None => {
                FAMILIES
                    .iter()
                    .find(|f| f.bare_majors.contains(&version.major))
                    .ok_or_else(bad)?
                    .flavor
            }
        };
        Ok(ServerId { flavor, version })
    }
}

/// The family whose marker `text` carries (case aside).
fn marked(text: &str) -> Option<&'static Family> {
    let lower = text.to_ascii_lowercase();
    FAMILIES.iter().copied().find(|f| {
        f.marker
            .is_some_and(|m| lower.contains(&m.to_ascii_lowercase()))
    })
}

/// Parses `mysqld  Ver 8.0.36 for Linux ...` / `mariadbd  Ver
/// 10.11.6-MariaDB-0+deb12u1 ...`: the family whose marker it carries,
/// else the one without a marker.
pub fn parse_version_output(out: &str) -> Option<ServerId> {
    let ver = out.split_whitespace().skip_while(|w| *w != "Ver").nth(1)?;
    let family = marked(out).or_else(|| FAMILIES.iter().copied().find(|f| f.marker.is_none()))?;
    Some(ServerId {
        flavor: family.flavor,
        version: parse_version(ver)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::redo::v;

    #[test]
    fn the_oldest_rows_bound_what_is_supported() {
        assert_eq!(MARIADB.oldest(), Some(v(10, 5, 0)));
        assert_eq!(MYSQL.oldest(), Some(v(5, 6, 0)));
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
        let m: ServerId = "percona-8.0.36".parse().unwrap();
        assert_eq!((m.flavor, m.version), (Flavor::MySql, v(8, 0, 36)));
        assert!("banana".parse::<ServerId>().is_err());
        assert!("3.2".parse::<ServerId>().is_err());
        assert_eq!(m.to_string(), "MySQL 8.0.36");
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
        let pick = |s: &str| redo_candidates(Some(s.parse().unwrap()))[0].name;
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
    }

    #[test]
    fn each_row_is_its_flavors() {
        for f in FAMILIES {
            assert!(std::ptr::eq(f.flavor.family(), f), "{}", f.name);
        }
    }
}
