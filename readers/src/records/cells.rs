//! The records a sweep leaves in its results directory (`sweep.json`,
//! what was swept; `cells.jsonl`, one finished cell per line) and how
//! they are read back: what `sweep` writes and `report` reads, below both.
use std::{fs, path::Path};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const CELLS: &str = "cells.jsonl";
pub const META: &str = "sweep.json";

/// What makes two sweeps comparable: cells of different settings here
/// must not share a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `update`, `tpcc`, ...
    pub workload: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// insert's `--total-rows`: each cell ran until that many rows were in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_rows: Option<u64>,
    /// The workload flags beyond threads/warehouses (rows per thread, TPC-C flags).
    pub workload_flags: String,
    /// The server, as the first cell saw it (version and binary).
    #[serde(default)]
    pub server: String,
}

/// One server setting of a cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

/// One finished cell: the figures the table and charts are made of, plus
/// the whole run summary for anyone who wants more.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellRecord {
    pub key: String,
    pub threads: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouses: Option<u32>,
    pub settings: Vec<Setting>,
    /// Unix seconds when the cell ended.
    pub finished_at: u64,
    /// Wall time of the cell: restart, load, warmup and measured time.
    pub wall_s: f64,
    pub measured_s: f64,
    pub tps: f64,
    #[serde(default)]
    pub tpmc: Option<f64>,
    pub commits: u64,
    pub commits_per_flush: Option<f64>,
    pub n_write: Option<u64>,
    pub n_flush: Option<u64>,
    pub write_per_flush: Option<f64>,
    pub redo_fsync: Option<u64>,
    pub redo_fsync_p99_us: Option<f64>,
    /// Requests per redo flush, median and 99th percentile (absent in
    /// cells recorded before batch sizes were kept).
    #[serde(default)]
    pub batch_p50: Option<u64>,
    #[serde(default)]
    pub batch_p99: Option<u64>,
    /// Binlog groups where they were probed and any closed: how many, and
    /// their sizes in commits (mean; p50 and p99, sizes that occurred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlog: Option<CellBinlog>,
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub errors: u64,
    /// `--total-rows`: the rows inserted and the seconds they took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_elapsed_s: Option<f64>,
    /// `--io` on a block device: what the disk did per redo sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<CellIo>,
    /// `--commit-path`: the commits' time in the server and its stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_path: Option<CellCommitPath>,
    /// The full summary of the run (`RunSummary` as JSON); not read back.
    #[serde(default)]
    pub run: serde_json::Value,
}

/// A cell's binlog groups.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellBinlog {
    pub groups: u64,
    pub mean: Option<f64>,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    /// Groups per reason they closed, where the reasons were probed
    /// (absent in cells recorded before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_by: Vec<CellClosedBy>,
}

impl CellBinlog {
    /// The share of the groups that closed for `reason` (0 to 1; None
    /// where the reasons were not probed).
    pub fn closed_share(&self, reason: crate::binlog::Reason) -> Option<f64> {
        let all: u64 = self.closed_by.iter().map(|c| c.groups).sum();
        (all > 0).then(|| {
            let n = self
                .closed_by
                .iter()
                .filter(|c| c.reason == reason)
                .map(|c| c.groups)
                .sum::<u64>();
            n as f64 / all as f64
        })
    }
}

/// A cell's groups that closed for one reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellClosedBy {
    pub reason: crate::binlog::Reason,
    pub groups: u64,
}

/// A cell's commit path: the commits' mean time in the server, and each
/// stage's share of it in path order (the unattributed rest last).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellCommitPath {
    pub commits: u64,
    pub mean_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub shares: Vec<StageShare>,
    /// The commits' mean split by the scheduler (on a CPU, on a run
    /// queue, blocked), µs; absent without the split (and in cells
    /// recorded before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<crate::commit_path::SchedSplit>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageShare {
    pub stage: String,
    pub share: f64,
}

impl CellCommitPath {
    /// The named stage with the largest share (not the unattributed rest).
    pub fn top(&self) -> Option<&StageShare> {
        self.shares
            .iter()
            .filter(|s| s.stage != crate::commit_path::UNATTRIBUTED)
            .max_by(|a, b| a.share.total_cmp(&b.share))
    }

    /// The share of the stage named `name` (0 where it did not run).
    pub fn share(&self, name: &str) -> f64 {
        self.shares
            .iter()
            .find(|s| s.stage == name)
            .map_or(0.0, |s| s.share)
    }
}

/// A cell's `--io` figures, per redo sync: the requests it caused, and
/// its mean time split into the device's part (its own requests and the
/// cache flushes), the journal's, and the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellIo {
    pub requests_per_sync: Option<f64>,
    pub kib_per_sync: Option<f64>,
    pub cache_flushes_per_sync: Option<f64>,
    pub device_us: Option<f64>,
    pub journal_us: Option<f64>,
    pub other_us: Option<f64>,
}

/// The short form of a variable in labels: `trx_commit` for
/// `innodb_flush_log_at_trx_commit`, else the name without `innodb_`.
pub fn short_name(key: &str) -> String {
    let k = key.replace('-', "_");
    match k.as_str() {
        "innodb_flush_log_at_trx_commit" => "trx_commit".into(),
        _ => k.strip_prefix("innodb_").unwrap_or(&k).to_string(),
    }
}

/// The settings part of a label, e.g. `trx_commit=0 sync_binlog=1`.
pub fn settings_label<'a>(settings: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    settings
        .into_iter()
        .map(|(k, v)| format!("{}={v}", short_name(k)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn read_meta(dir: &Path) -> Result<Meta> {
    let p = dir.join(META);
    let text = fs::read_to_string(&p).map_err(|source| Error::Read {
        path: p.clone(),
        source,
    })?;
    parse_meta(&text, &p)
}

/// A `sweep.json`'s text (`path` names it in the error).
pub fn parse_meta(text: &str, path: &Path) -> Result<Meta> {
    serde_json::from_str(text).map_err(|e| {
        Error::Usage(format!(
            "{} is not a commitscope sweep description ({e}): point at a results dir written by `commitscope sweep`",
            path.display()
        ))
    })
}

/// The finished cells. A line that does not parse — the last one, cut
/// short by a crash mid-write — is skipped with a warning; a later run of
/// the same cell replaces an earlier one.
pub fn read_cells(dir: &Path) -> Result<Vec<CellRecord>> {
    let p = dir.join(CELLS);
    let text = fs::read_to_string(&p).map_err(|source| Error::Read {
        path: p.clone(),
        source,
    })?;
    Ok(parse_cells(&text, &p))
}

/// A `cells.jsonl`'s text (`path` names it in warnings): the records in
/// file order, a later record of a key replacing the earlier one.
pub fn parse_cells(text: &str, path: &Path) -> Vec<CellRecord> {
    let mut slots: Vec<Option<CellRecord>> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = Default::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<CellRecord>(line) {
            Ok(r) => {
                if let Some(i) = at.insert(r.key.clone(), slots.len()) {
                    slots[i] = None;
                }
                slots.push(Some(r));
            }
            Err(e) => eprintln!(
                "commitscope: warning: {} line {} is not a cell record ({e}): skipped",
                path.display(),
                n + 1
            ),
        }
    }
    slots.into_iter().flatten().collect()
}
