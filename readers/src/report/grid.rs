//! A sweep's records arranged as a table (rows = threads and warehouses,
//! columns = the settings that vary), read by the Markdown table, the
//! summaries and the charts alike.
use std::collections::BTreeMap;

use crate::records::cells::{settings_label, CellRecord, Meta};

/// The records arranged as a table: which settings vary make the columns.
pub struct Grid<'a> {
    pub tpcc: bool,
    /// More than one warehouse count: rows and series name it.
    pub many_warehouses: bool,
    /// Column labels in run order, e.g. `trx_commit=1`.
    pub columns: Vec<String>,
    /// The settings every cell shares, e.g. `sync_binlog=1`.
    pub constant: String,
    /// (warehouses, threads), ascending.
    pub rows: Vec<(Option<u32>, u32)>,
    cells: BTreeMap<(Option<u32>, u32, usize), &'a CellRecord>,
}

impl<'a> Grid<'a> {
    pub fn new(meta: &Meta, records: &'a [CellRecord]) -> Grid<'a> {
        // A setting is a column dimension when its value differs between
        // cells; the others are the same everywhere and go in the caption.
        let varies = |name: &str| {
            let mut vals = records.iter().map(|r| {
                r.settings
                    .iter()
                    .find(|s| s.name == name)
                    .map(|s| s.value.as_str())
            });
            let first = vals.next();
            vals.any(|v| Some(v) != first)
        };
        // Every setting any cell has (a resumed sweep may add a list).
        let mut names: Vec<&str> = Vec::new();
        for s in records.iter().flat_map(|r| &r.settings) {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
        let (varied, same): (Vec<&str>, Vec<&str>) = names.into_iter().partition(|n| varies(n));
        let constant = settings_label(records.first().into_iter().flat_map(|r| {
            r.settings
                .iter()
                .filter(|s| same.contains(&s.name.as_str()))
                .map(|s| (s.name.as_str(), s.value.as_str()))
        }));
        let mut columns: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        let mut cells = BTreeMap::new();
        let ws: std::collections::BTreeSet<Option<u32>> =
            records.iter().map(|r| r.warehouses).collect();
        for r in records {
            let label = settings_label(
                r.settings
                    .iter()
                    .filter(|s| varied.contains(&s.name.as_str()))
                    .map(|s| (s.name.as_str(), s.value.as_str())),
            );
            let label = if label.is_empty() {
                "as configured".to_string()
            } else {
                label
            };
            let col = match columns.iter().position(|c| *c == label) {
                Some(i) => i,
                None => {
                    columns.push(label);
                    columns.len() - 1
                }
            };
            let row = (r.warehouses, r.threads);
            if !rows.contains(&row) {
                rows.push(row);
            }
            cells.insert((r.warehouses, r.threads, col), r);
        }
        rows.sort();
        Grid {
            tpcc: meta.workload == "tpcc",
            many_warehouses: ws.len() > 1,
            columns,
            constant,
            rows,
            cells,
        }
    }

    pub fn get(&self, row: (Option<u32>, u32), col: usize) -> Option<&'a CellRecord> {
        self.cells.get(&(row.0, row.1, col)).copied()
    }

    /// tpmC for TPC-C, else tps.
    pub fn throughput(&self, r: &CellRecord) -> f64 {
        if self.tpcc {
            r.tpmc.unwrap_or(0.0)
        } else {
            r.tps
        }
    }

    pub fn unit(&self) -> &'static str {
        if self.tpcc {
            "tpmC"
        } else {
            "tps"
        }
    }

    /// One line of a chart: a column (and warehouse count), points by threads.
    pub fn series(&self, y: impl Fn(&CellRecord) -> Option<f64>) -> Vec<(String, Vec<(f64, f64)>)> {
        let ws: Vec<Option<u32>> = {
            let mut v: Vec<Option<u32>> = self.rows.iter().map(|r| r.0).collect();
            v.dedup();
            v
        };
        let mut out = Vec::new();
        for w in ws {
            for (ci, c) in self.columns.iter().enumerate() {
                let pts: Vec<(f64, f64)> = self
                    .rows
                    .iter()
                    .filter(|r| r.0 == w)
                    .filter_map(|&row| self.get(row, ci))
                    .filter_map(|r| y(r).map(|v| (f64::from(r.threads), v)))
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let name = match (w, self.many_warehouses) {
                    (Some(w), true) => format!("W={w} {c}"),
                    _ => c.clone(),
                };
                out.push((name, pts));
            }
        }
        out
    }
}
