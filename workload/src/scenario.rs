//! The study's scenarios (../shared/STUDY.md §1) and seed 004's insert loop.
use std::fmt;

/// `--workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Worker k updates its own row(s): scenarios a, c and d.
    Update,
    /// Every worker updates id=1: scenario b (the row lock serialises commits).
    HotRow,
    /// One INSERT + COMMIT per row into `test_load` (seed 004).
    Insert,
    /// TPC-C, compatible with tpcc-mysql (`--warehouses`).
    Tpcc,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Update => "update",
            Scenario::HotRow => "hot-row",
            Scenario::Insert => "insert",
            Scenario::Tpcc => "tpcc",
        })
    }
}

pub const UPDATE_SQL: &str = "UPDATE tb SET c=c+1 WHERE id=?";
pub const INSERT_SQL: &str = "INSERT INTO test_load (b) VALUES (REPEAT('a',80))";

/// The row worker `k` (0-based) updates on its `n`-th transaction.
pub fn row_for(scenario: Scenario, worker: u32, rows_per_thread: u32, n: u64) -> u32 {
    match scenario {
        Scenario::HotRow => 1,
        _ => {
            let r = rows_per_thread.max(1);
            worker * r + (n % u64::from(r)) as u32 + 1
        }
    }
}

/// Rows `tb` needs: max(100, threads x rows_per_thread).
pub fn table_rows(threads: u32, rows_per_thread: u32) -> u32 {
    (threads.saturating_mul(rows_per_thread.max(1))).max(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_private_per_worker() {
        assert_eq!(row_for(Scenario::Update, 0, 1, 7), 1);
        assert_eq!(row_for(Scenario::Update, 4, 1, 7), 5);
        let rows: Vec<u32> = (0..6).map(|n| row_for(Scenario::Update, 2, 3, n)).collect();
        assert_eq!(rows, vec![7, 8, 9, 7, 8, 9]);
        assert_eq!(row_for(Scenario::HotRow, 9, 3, 5), 1);
        assert_eq!(table_rows(8, 1), 100);
        assert_eq!(table_rows(150, 2), 300);
    }
}
