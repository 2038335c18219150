//! What differs between MySQL and MariaDB, one row per family
//! ([`Family`]): how a server names itself, where each version's redo
//! and binlog functions are, what its commit path's stages are called and
//! where a semi-sync source waits, how a fresh datadir is made and what a
//! throwaway server needs, how replication is spelled. Everything else
//! asks a server's row and never which family it is; a new family is a
//! new row. Data only: the rooms that use a field do the work.
//!
//! This file only names the rooms: identity (family, version), rows (the
//! rows, and reading a server's name by them), redo (the probe table's
//! version rows), binlog, commit (stages, semi-sync hooks), datadir,
//! replication, group (a replication group's plugin and steps).
pub mod binlog;
pub mod commit;
pub mod datadir;
pub mod group;
pub mod identity;
pub mod redo;
pub mod replication;
pub mod rows;

pub use identity::{Flavor, ServerId, Version};
pub use rows::{
    binlog_candidates, parse_version_output, redo_candidates, supported_range, Family, FAMILIES,
    MARIADB, MYSQL,
};
