//! A sweep's results as the seeds printed them: a Markdown table (rows =
//! threads, columns = settings), plus `summary.csv` and `summary.json`.
//! Built from `cells.jsonl` alone, so `commitscope report` can redo it.
use std::{fmt::Write as _, path::Path};

use super::{charts, grid::Grid};
use crate::{
    error::{Error, Result},
    records::cells::{CellRecord, Meta},
};

/// The Markdown table: `tps (commits/flush)` per cell, as seeds/000 has
/// tpmC per connections x innodb_flush_log_at_trx_commit.
pub fn markdown(meta: &Meta, g: &Grid) -> String {
    let mut s = String::new();
    match meta.total_rows {
        Some(n) => {
            let _ = write!(s, "{} workload, {n} rows per cell", meta.workload);
        }
        None => {
            let _ = write!(
                s,
                "{} workload, {} s measured after {} s warmup per cell",
                meta.workload, meta.duration_s, meta.warmup_s,
            );
        }
    }
    if !g.constant.is_empty() {
        let _ = write!(s, ", {} in every cell", g.constant);
    }
    let _ = writeln!(
        s,
        "; each cell: {} (commits per redo flush){}\n",
        g.unit(),
        if meta.total_rows.is_some() {
            " and the seconds its rows took"
        } else {
            ""
        }
    );
    let lead = if g.many_warehouses {
        "| warehouses | threads |"
    } else {
        "| threads |"
    };
    let _ = write!(s, "{lead}");
    for c in &g.columns {
        let _ = write!(s, " {c} |");
    }
    let _ = write!(
        s,
        "\n|{}",
        if g.many_warehouses {
            "---:|---:|"
        } else {
            "---:|"
        }
    );
    for _ in &g.columns {
        let _ = write!(s, "---:|");
    }
    s.push('\n');
    for &row in &g.rows {
        if g.many_warehouses {
            let _ = write!(s, "| {} ", row.0.unwrap_or(0));
        }
        let _ = write!(s, "| {} |", row.1);
        for ci in 0..g.columns.len() {
            let text = match g.get(row, ci) {
                Some(r) => format!(
                    "{:.1} ({}){}",
                    g.throughput(r),
                    r.commits_per_flush
                        .map_or_else(|| "-".into(), |c| format!("{c:.2}")),
                    r.rows_elapsed_s
                        .map_or_else(String::new, |e| format!(" {e:.2} s"))
                ),
                None => "-".into(),
            };
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }
    io_table(&mut s, g);
    closed_table(&mut s, g);
    s
}

/// Where the binlog's groups were probed with their reasons: a table of
/// what each cell's groups closed on, beside its throughput, commit p99
/// and group size (the tuning of the delay and the count).
fn closed_table(s: &mut String, g: &Grid) {
    use crate::binlog::Reason;
    let caption = format!(
        "Why the binlog groups closed; each cell: {} · commit p99 ms · commits per group · shares of the groups closed on the count / the delay / a lock wait / with no wait",
        g.unit()
    );
    cell_table(s, g, &caption, |r| {
        let b = r.binlog.as_ref().filter(|b| !b.closed_by.is_empty())?;
        let share = |reason| {
            b.closed_share(reason)
                .map_or_else(|| "-".into(), |v| format!("{:.0} %", v * 100.0))
        };
        Some(format!(
            "{:.1} · {:.1} · {} · {} / {} / {} / {}",
            g.throughput(r),
            r.latency_p99_us as f64 / 1000.0,
            b.mean.map_or_else(|| "-".into(), |m| format!("{m:.1}")),
            share(Reason::Count),
            share(Reason::Timeout),
            share(Reason::LockWait),
            share(Reason::NoWait)
        ))
    });
}

/// With `--io`: a second table, each cell's mean redo fsync split into
/// device / journal / other µs and the requests and KiB per sync.
fn io_table(s: &mut String, g: &Grid) {
    let f = |v: Option<f64>, p: usize| v.map_or_else(|| "-".into(), |v| format!("{v:.p$}"));
    cell_table(
        s,
        g,
        "redo fsync under the hood (--io), each cell: device / journal / other µs per redo sync [requests, KiB per sync]",
        |r| {
            let io = r.io.as_ref()?;
            Some(format!(
                "{} / {} / {} [{}, {}]",
                f(io.device_us, 0),
                f(io.journal_us, 0),
                f(io.other_us, 0),
                f(io.requests_per_sync, 2),
                f(io.kib_per_sync, 1)
            ))
        },
    );
}

/// One more table under the main one, the same rows and columns, each cell
/// `text(cell)` ("-" where it has none); nothing when no cell has any.
fn cell_table(
    s: &mut String,
    g: &Grid,
    caption: &str,
    text: impl Fn(&CellRecord) -> Option<String>,
) {
    let cell = |row, ci| g.get(row, ci).and_then(&text);
    let cells = || {
        g.rows
            .iter()
            .flat_map(|&row| (0..g.columns.len()).map(move |ci| (row, ci)))
    };
    if !cells().any(|(row, ci)| cell(row, ci).is_some()) {
        return;
    }
    let _ = writeln!(s, "\n{caption}\n");
    let _ = write!(s, "| threads |");
    for c in &g.columns {
        let _ = write!(s, " {c} |");
    }
    let _ = write!(s, "\n|---:|");
    for _ in &g.columns {
        let _ = write!(s, "---:|");
    }
    s.push('\n');
    for &row in &g.rows {
        let _ = write!(s, "| {} |", row.1);
        for ci in 0..g.columns.len() {
            let t = cell(row, ci).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {t} |");
        }
        s.push('\n');
    }
}

const CSV_HEADER: &str = "workload,warehouses,threads,settings,tps,tpmc,commits,commits_per_flush,n_write,n_flush,write_per_flush,redo_fsync,redo_fsync_p99_us,batch_p50,batch_p99,latency_p50_us,latency_p99_us,errors,measured_s,rows,rows_elapsed_s,io_requests_per_sync,io_kib_per_sync,io_cache_flushes_per_sync,fsync_device_us,fsync_journal_us,fsync_other_us,binlog_groups,binlog_mean,binlog_p50,binlog_p99,cp_mean_us,cp_p99_us,cp_top_stage,cp_top_share,cp_unattributed_share,binlog_closed_count,binlog_closed_timeout,binlog_closed_lock_wait,binlog_closed_no_wait,key";

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// `summary.csv` (one row per cell, in table order) and `summary.json`.
pub fn write_summaries(dir: &Path, meta: &Meta, g: &Grid) -> Result<()> {
    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    let mut cells = Vec::new();
    for &row in &g.rows {
        for (ci, col) in g.columns.iter().enumerate() {
            let Some(r) = g.get(row, ci) else { continue };
            let cp = r.commit_path.as_ref();
            let top = cp.and_then(|c| c.top());
            let closed = |reason| {
                opt(r
                    .binlog
                    .as_ref()
                    .and_then(|b| b.closed_share(reason))
                    .map(|v| format!("{v:.4}")))
            };
            let io = |f: fn(&crate::records::cells::CellIo) -> Option<f64>| {
                opt(r.io.as_ref().and_then(f).map(|v| format!("{v:.2}")))
            };
            let _ = writeln!(
                csv,
                "{},{},{},\"{}\",{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\",{},{},{},{},{},{},\"{}\"",
                meta.workload,
                opt(r.warehouses),
                r.threads,
                col,
                r.tps,
                opt(r.tpmc.map(|t| format!("{t:.3}"))),
                r.commits,
                opt(r.commits_per_flush.map(|c| format!("{c:.4}"))),
                opt(r.n_write),
                opt(r.n_flush),
                opt(r.write_per_flush.map(|c| format!("{c:.4}"))),
                opt(r.redo_fsync),
                opt(r.redo_fsync_p99_us.map(|c| format!("{c:.1}"))),
                opt(r.batch_p50),
                opt(r.batch_p99),
                r.latency_p50_us,
                r.latency_p99_us,
                r.errors,
                r.measured_s,
                opt(r.rows),
                opt(r.rows_elapsed_s.map(|e| format!("{e:.3}"))),
                io(|i| i.requests_per_sync),
                io(|i| i.kib_per_sync),
                io(|i| i.cache_flushes_per_sync),
                io(|i| i.device_us),
                io(|i| i.journal_us),
                io(|i| i.other_us),
                opt(r.binlog.as_ref().map(|b| b.groups)),
                opt(r.binlog.as_ref().and_then(|b| b.mean).map(|m| format!("{m:.3}"))),
                opt(r.binlog.as_ref().and_then(|b| b.p50)),
                opt(r.binlog.as_ref().and_then(|b| b.p99)),
                opt(cp.and_then(|c| c.mean_us).map(|v| format!("{v:.1}"))),
                opt(cp.and_then(|c| c.p99_us).map(|v| format!("{v:.1}"))),
                top.map_or("", |s| s.stage.as_str()),
                opt(top.map(|s| format!("{:.4}", s.share))),
                opt(cp.map(|c| format!("{:.4}", c.share(crate::commit_path::UNATTRIBUTED)))),
                closed(crate::binlog::Reason::Count),
                closed(crate::binlog::Reason::Timeout),
                closed(crate::binlog::Reason::LockWait),
                closed(crate::binlog::Reason::NoWait),
                r.key
            );
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("run");
                o.insert("column".into(), col.clone().into());
            }
            cells.push(v);
        }
    }
    let json = serde_json::json!({
        "meta": meta,
        "metric": g.unit(),
        "columns": g.columns,
        "cells": cells,
    });
    for (name, text) in [
        ("summary.csv", csv),
        (
            "summary.json",
            serde_json::to_string_pretty(&json).unwrap_or_default() + "\n",
        ),
    ] {
        let p = dir.join(name);
        crate::outfile::write(&p, text.as_bytes())?;
    }
    Ok(())
}

/// Everything `commitscope report DIR` makes: the table on `out`, the
/// summaries and the charts in DIR.
pub fn rebuild(dir: &Path, out: &mut impl std::io::Write) -> Result<()> {
    if !dir.join(crate::records::cells::CELLS).exists() {
        return Err(Error::Usage(format!(
            "{} has no {}: point at the --out directory of a `commitscope sweep`",
            dir.display(),
            crate::records::cells::CELLS
        )));
    }
    let meta = crate::records::cells::read_meta(dir)?;
    let records = crate::records::cells::read_cells(dir)?;
    publish(dir, &meta, &records, out)
}

/// The end of a sweep and all of `report`: summaries and charts in `dir`,
/// the table on `out`, one line on stderr naming the files.
pub fn publish(
    dir: &Path,
    meta: &Meta,
    records: &[CellRecord],
    out: &mut impl std::io::Write,
) -> Result<()> {
    let g = Grid::new(meta, records);
    let files = write_files(dir, meta, &g)?;
    let _ = writeln!(out, "{}", markdown(meta, &g));
    eprintln!(
        "commitscope: {} cells in {}; wrote {}",
        records.len(),
        dir.join(crate::records::cells::CELLS).display(),
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The summaries and charts of these records, in `dir` (after every cell).
pub fn write_outputs(dir: &Path, meta: &Meta, records: &[CellRecord]) -> Result<()> {
    write_files(dir, meta, &Grid::new(meta, records)).map(|_| ())
}

fn write_files(dir: &Path, meta: &Meta, g: &Grid) -> Result<Vec<std::path::PathBuf>> {
    write_summaries(dir, meta, g)?;
    let mut files = vec![dir.join("summary.csv"), dir.join("summary.json")];
    files.extend(charts::write_all(dir, g, &meta.workload)?);
    Ok(files)
}
