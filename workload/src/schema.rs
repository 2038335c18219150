//! The workload's own database. It is created with a marker table; a
//! database without the marker is never touched (no DDL, no DML), and only
//! a marked one is ever reset.
use mysql_async::{prelude::*, Conn};

use crate::{
    error::{Error, Result},
    scenario::{self, Scenario},
};

pub const MARKER: &str = "_commitscope";
pub const TOOL: &str = "commitscope";

pub(crate) fn sql_err(context: impl Into<String>) -> impl FnOnce(mysql_async::Error) -> Error {
    let context = context.into();
    move |source| match crate::error::server_code(&source) {
        Some(1044 | 1142 | 1227) => Error::Privileges {
            detail: source.to_string(),
        },
        _ => Error::Sql { context, source },
    }
}

/// A database name we will put in backquotes: keep it boring.
pub fn check_name(db: &str) -> Result<()> {
    let ok = !db.is_empty()
        && db.len() <= 64
        && db
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
    if ok {
        Ok(())
    } else {
        Err(Error::BadInput {
            what: "--database",
            detail: format!("{db:?}: use letters, digits, _ or $ (at most 64)"),
        })
    }
}

/// What we found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Absent,
    Marked,
    Unmarked,
}

pub async fn state(conn: &mut Conn, db: &str) -> Result<State> {
    let exists: Option<u64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (db,),
        )
        .await
        .map_err(sql_err("checking the workload database"))?;
    if exists.unwrap_or(0) == 0 {
        return Ok(State::Absent);
    }
    let marked: Option<u64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db, MARKER),
        )
        .await
        .map_err(sql_err("checking the marker table"))?;
    Ok(if marked.unwrap_or(0) > 0 {
        State::Marked
    } else {
        State::Unmarked
    })
}

/// Makes the database ready for `scenario`: creates (or, with `reset`,
/// recreates) a marked database and the scenario's table. `empty`: the
/// insert table starts empty (`--total-rows`: the table then holds exactly
/// the run's rows, and every run inserts into the same empty table).
pub async fn prepare(
    conn: &mut Conn,
    db: &str,
    scenario: Scenario,
    table_rows: u32,
    reset: bool,
    empty: bool,
) -> Result<()> {
    check_name(db)?;
    match state(conn, db).await? {
        State::Unmarked => {
            return Err(Error::Unmarked {
                database: db.into(),
            });
        }
        State::Marked if reset => {
            conn.query_drop(format!("DROP DATABASE `{db}`"))
                .await
                .map_err(sql_err("dropping the marked workload database"))?;
            create(conn, db).await?;
        }
        State::Marked => {}
        State::Absent => create(conn, db).await?,
    }
    conn.query_drop(format!("USE `{db}`"))
        .await
        .map_err(sql_err("selecting the workload database"))?;
    conn.exec_drop(
        format!("INSERT INTO `{MARKER}` (tool, version, scenario) VALUES (?, ?, ?)"),
        (TOOL, env!("CARGO_PKG_VERSION"), scenario.to_string()),
    )
    .await
    .map_err(sql_err("writing the marker row"))?;
    match scenario {
        Scenario::Update | Scenario::HotRow => {
            conn.query_drop("CREATE TABLE IF NOT EXISTS tb (id INT PRIMARY KEY, c INT NOT NULL DEFAULT 0) ENGINE=InnoDB")
                .await
                .map_err(sql_err("creating table tb"))?;
            // Make sure ids 1..=table_rows exist, in batches.
            let mut start = 1u32;
            while start <= table_rows {
                let end = (start + 999).min(table_rows);
                let values: Vec<String> = (start..=end).map(|i| format!("({i},0)")).collect();
                conn.query_drop(format!(
                    "INSERT IGNORE INTO tb (id, c) VALUES {}",
                    values.join(",")
                ))
                .await
                .map_err(sql_err("filling table tb"))?;
                start = end + 1;
            }
        }
        // The TPC-C tables are the loader's (tpcc::load).
        Scenario::Tpcc => {}
        Scenario::Insert => {
            conn.query_drop(
                "CREATE TABLE IF NOT EXISTS test_load (a INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, b CHAR(80)) ENGINE=InnoDB",
            )
            .await
            .map_err(sql_err("creating table test_load"))?;
            if empty {
                conn.query_drop("TRUNCATE TABLE test_load")
                    .await
                    .map_err(sql_err("emptying table test_load"))?;
            }
        }
    }
    Ok(())
}

async fn create(conn: &mut Conn, db: &str) -> Result<()> {
    conn.query_drop(format!("CREATE DATABASE `{db}`"))
        .await
        .map_err(sql_err("creating the workload database"))?;
    // A primary key: a replication group refuses writes to a table
    // without one.
    conn.query_drop(format!(
        "CREATE TABLE `{db}`.`{MARKER}` (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         tool VARCHAR(64) NOT NULL, version VARCHAR(32) NOT NULL, \
         scenario VARCHAR(32) NOT NULL, created TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB"
    ))
    .await
    .map_err(sql_err("creating the marker table"))?;
    Ok(())
}

/// Rows `tb` must have for these settings.
pub fn rows_needed(threads: u32, rows_per_thread: u32) -> u32 {
    scenario::table_rows(threads, rows_per_thread)
}
