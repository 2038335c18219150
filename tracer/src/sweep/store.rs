//! The results directory as a sweep writes it: `sweep.json` (what was
//! swept, for `--resume` and `report`) and `cells.jsonl`, one finished
//! cell per line (`readers::records::cells`), appended and synced the
//! moment the cell ends — so Ctrl-C, a crash or a power cut loses at most
//! the cell that was running.
use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use readers::records::cells::{
    read_cells, read_meta, CellBinlog, CellClosedBy, CellCommitPath, CellIo, CellRecord, Meta,
    Setting, CELLS, META,
};

use crate::{
    error::{Error, Result},
    records::run::RunSummary,
    sweep::plan::Cell,
};

/// The record of `cell`, its run summarised by `s`.
pub fn cell_record(cell: &Cell, s: &RunSummary, wall_s: f64) -> CellRecord {
    let t = s.trace.as_ref();
    CellRecord {
        key: cell.key(),
        threads: cell.threads,
        warehouses: cell.warehouses,
        settings: cell
            .settings
            .iter()
            .map(|o| Setting {
                name: o.variable(),
                value: o.value.clone(),
            })
            .collect(),
        finished_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        wall_s,
        measured_s: s.workload.measured_s,
        tps: s.workload.mean_tps,
        tpmc: s.workload.tpcc.as_ref().map(|t| t.tpmc),
        commits: s.workload.commits,
        commits_per_flush: s.commits_per_flush,
        n_write: t.map(|t| t.n_write),
        n_flush: t.map(|t| t.n_flush),
        write_per_flush: t.and_then(|t| t.write_per_flush),
        redo_fsync: t.map(|t| t.redo_fsync),
        redo_fsync_p99_us: t.and_then(|t| t.redo_p99_us),
        batch_p50: t.and_then(|t| t.batch.p50),
        batch_p99: t.and_then(|t| t.batch.p99),
        binlog: t
            .and_then(|t| t.binlog.as_ref())
            .filter(|b| b.groups > 0)
            .map(|b| CellBinlog {
                groups: b.groups,
                mean: b.mean,
                p50: b.p50,
                p99: b.p99,
                closed_by: b
                    .closed_by
                    .iter()
                    .flatten()
                    .map(|c| CellClosedBy {
                        reason: c.reason,
                        groups: c.groups,
                    })
                    .collect(),
            }),
        latency_p50_us: s.workload.latency.p50_us,
        latency_p99_us: s.workload.latency.p99_us,
        errors: s.workload.errors,
        rows: s.workload.rows_done,
        rows_elapsed_s: s.workload.rows_elapsed_s,
        io: t.and_then(|t| t.io.as_ref()).map(CellIo::from),
        commit_path: t
            .and_then(|t| t.commit_path.as_ref())
            .filter(|c| c.commits > 0)
            .map(CellCommitPath::from),
        run: serde_json::to_value(s).unwrap_or_default(),
    }
}

pub struct Store {
    pub dir: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.to_owned(),
        source,
    }
}

impl Store {
    /// Opens (creating) the results dir. An earlier sweep's cells are
    /// never overwritten: continuing them takes `--resume`, and only with
    /// the same workload and times.
    pub fn open(dir: &Path, resume: bool, meta: &Meta) -> Result<(Store, Vec<CellRecord>)> {
        readers::outfile::check_dir(dir)?;
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let store = Store {
            dir: dir.to_owned(),
        };
        let done = if store.cells_path().exists() {
            read_cells(dir)?
        } else {
            Vec::new()
        };
        if !done.is_empty() && !resume {
            return Err(Error::Usage(format!(
                "{} holds {} finished cells of an earlier sweep: pass --resume to continue it, or another --out",
                store.cells_path().display(),
                done.len()
            )));
        }
        if resume && store.dir.join(META).exists() {
            let old = read_meta(dir)?;
            let differs = [
                (old.workload != meta.workload, "--workload"),
                (old.duration_s != meta.duration_s, "--duration"),
                (old.warmup_s != meta.warmup_s, "--warmup"),
                (old.total_rows != meta.total_rows, "--total-rows"),
                (old.workload_flags != meta.workload_flags, "workload flags"),
            ];
            if let Some((_, what)) = differs.iter().find(|(d, _)| *d) {
                return Err(Error::Usage(format!(
                    "--resume: {} was swept with other {what} ({} {} s + {} s warmup, {}): rerun with those, or use another --out",
                    dir.display(),
                    old.workload,
                    old.duration_s,
                    old.warmup_s,
                    if old.workload_flags.is_empty() { "no other flags" } else { &old.workload_flags }
                )));
            }
        }
        store.write_meta(meta)?;
        Ok((store, done))
    }

    pub fn cells_path(&self) -> PathBuf {
        self.dir.join(CELLS)
    }

    pub fn write_meta(&self, meta: &Meta) -> Result<()> {
        let p = self.dir.join(META);
        let text = serde_json::to_string_pretty(meta).unwrap_or_default() + "\n";
        Ok(readers::outfile::write(&p, text.as_bytes())?)
    }

    /// Appends one cell as one line, synced before returning.
    pub fn append(&self, r: &CellRecord) -> Result<()> {
        let p = self.cells_path();
        let line = serde_json::to_string(r).unwrap_or_default() + "\n";
        let mut f = readers::outfile::append(&p)?;
        f.write_all(line.as_bytes()).map_err(io_err(&p))?;
        f.sync_data().map_err(io_err(&p))
    }
}
