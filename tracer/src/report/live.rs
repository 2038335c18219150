//! The main command's terminal view: the workload's and the probes' halves
//! of each tick on one line, header repeated every 20 lines, then one
//! summary block with the server's own counters beside ours.
use std::{io::Write, time::SystemTime};

use super::human::{
    anatomy_cells, anatomy_header, binlog_cells, binlog_header, clock, commit_path_cells,
    commit_path_header, io_cells, io_header, opt_f, opt_u, probe_totals,
};
use crate::{
    records::run::{RunHeader, RunSink, RunSummary},
    sample::Joined,
};

pub struct Live<W: Write> {
    out: W,
    lines: u64,
    fallback: bool,
    /// Leaders and followers columns (`--anatomy`).
    anatomy: bool,
    /// `--io` columns.
    io: bool,
    /// Binlog group columns.
    binlog: bool,
    /// Commit-path columns.
    commit_path: bool,
    /// TPC-C ticks print tpcc-mysql's interval lines instead of the table.
    tpcc: workload::report::IntervalLines,
}

impl<W: Write> Live<W> {
    pub fn new(out: W) -> Self {
        Live {
            out,
            lines: 0,
            fallback: false,
            anatomy: false,
            io: false,
            binlog: false,
            commit_path: false,
            tpcc: Default::default(),
        }
    }

    fn header(&mut self) {
        let _ = writeln!(
            self.out,
            "{:<8}  {:>9}  {:>8}  {:>11}  {:>8}  {:>11}  {:>13}  {:>11}  {:>12}  {:>9}  {:>9}{}{}{}{}",
            "time",
            "tps",
            "p99_ms",
            if self.fallback {
                "srv_commits"
            } else {
                "n_write"
            },
            "n_flush",
            "write/flush",
            "commits/flush",
            "redo_p99_us",
            "binlog_fsync",
            "p50_batch",
            "p99_batch",
            anatomy_header(self.anatomy),
            binlog_header(self.binlog),
            commit_path_header(self.commit_path),
            io_header(self.io)
        );
    }
}

/// Every header line the main command's live view can print (each
/// combination of its optional columns): what the docs' samples are
/// checked against.
pub fn headers() -> Vec<String> {
    super::fmt::every_header(|[fallback, anatomy, io, binlog, commit_path]| {
        let mut buf = Vec::new();
        let mut l = Live::new(&mut buf);
        (l.fallback, l.anatomy, l.io, l.binlog, l.commit_path) =
            (fallback, anatomy, io, binlog, commit_path);
        l.header();
        String::from_utf8_lossy(&buf).trim_end().to_string()
    })
}

impl<W: Write> Live<W> {
    /// A TPC-C tick: tpcc-mysql's line, then the probes' figures on a line
    /// of their own that tpcc-mysql's parsers skip (it does not start with
    /// a number).
    fn tpcc_tick(&mut self, j: &Joined) {
        let lines = self.tpcc.lines(&j.workload);
        if lines.is_empty() {
            return;
        }
        for l in &lines {
            let _ = writeln!(self.out, "{l}");
        }
        if let Some(t) = &j.trace {
            let _ = writeln!(
                self.out,
                "  trace: {} {}  n_flush {}  write/flush {}  commits/flush {}  redo_p99_us {}  binlog_fsync {}",
                if self.fallback { "srv_commits" } else { "n_write" },
                t.n_write,
                t.n_flush,
                opt_f(t.write_per_flush, 2),
                opt_f(j.commits_per_flush, 2),
                opt_f(t.redo_p99_us, 0),
                t.binlog_fsync
            );
        }
        let _ = self.out.flush();
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

impl<W: Write> RunSink for Live<W> {
    fn start(&mut self, h: &RunHeader, cfg: &workload::engine::Config) {
        self.fallback = h
            .legend
            .as_ref()
            .is_some_and(|l| l.fallback.is_some() || !l.probes.per_commit());
        self.anatomy = h.legend.as_ref().is_some_and(|l| l.anatomy.is_some());
        self.io = h.legend.as_ref().is_some_and(|l| l.io_columns);
        self.binlog = h.legend.as_ref().is_some_and(|l| l.binlog_columns);
        self.commit_path = h.legend.as_ref().is_some_and(|l| l.commit_path_columns);
        let _ = writeln!(
            self.out,
            "# server: {}{}",
            h.server,
            if h.options.is_empty() {
                String::new()
            } else {
                format!("; options: {}", h.options.join(" "))
            }
        );
        let _ = writeln!(
            self.out,
            "# workload: {}, {} clients{}",
            cfg.scenario,
            cfg.threads,
            if cfg.warmup.is_zero() {
                String::new()
            } else {
                format!(
                    ", warmup {:.1} s (marked, left out of the summary)",
                    cfg.warmup.as_secs_f64()
                )
            }
        );
        match &h.legend {
            Some(l) => {
                let light = !l.probes.per_commit();
                let _ = writeln!(
                    self.out,
                    "# {}: {}{}; n_flush: {}; commits/flush: the workload's commits per n_flush; fsync probe: {}; probes: {}",
                    if self.fallback { "srv_commits" } else { "n_write" },
                    if light { "" } else { "calls of " },
                    l.n_write_source,
                    l.n_flush_source,
                    l.fsync_probe,
                    l.probes
                );
                if let Some(io) = &l.io {
                    let _ = writeln!(self.out, "# {io}");
                }
            }
            None => {
                let _ = writeln!(self.out, "# untraced: probe columns are '-'");
            }
        }
        if cfg.tpcc.is_some() {
            let _ = writeln!(
                self.out,
                "# tpcc-mysql interval lines: time, done(late):p90_ms|max_ms for New-Order, Payment, Order-Status, Delivery, Stock-Level"
            );
            if !cfg.warmup.is_zero() {
                let _ = writeln!(
                    self.out,
                    "\nRAMP-UP TIME.({} sec.)",
                    cfg.warmup.as_secs_f64().round()
                );
            }
        }
        let _ = self.out.flush();
    }

    fn tick(&mut self, at: SystemTime, j: &Joined) {
        if j.workload.tpcc.is_some() {
            self.tpcc_tick(j);
            return;
        }
        if self.lines.is_multiple_of(20) {
            self.header();
        }
        self.lines += 1;
        let w = &j.workload;
        let t = j.trace.as_ref();
        let u = |f: &dyn Fn(&crate::sample::Interval) -> u64| {
            t.map_or_else(|| "-".to_string(), |t| f(t).to_string())
        };
        let _ = writeln!(
            self.out,
            "{:<8}  {:>9.1}  {:>8}  {:>11}  {:>8}  {:>11}  {:>13}  {:>11}  {:>12}  {:>9}  {:>9}{}{}{}{}{}{}{}",
            clock(at),
            w.tps,
            ms(w.latency.p99_us),
            u(&|t| t.n_write),
            u(&|t| t.n_flush),
            opt_f(t.and_then(|t| t.write_per_flush), 2),
            opt_f(j.commits_per_flush, 2),
            opt_f(t.and_then(|t| t.redo_p99_us), 0),
            u(&|t| t.binlog_fsync),
            opt_u(t.and_then(|t| t.batch.p50)),
            opt_u(t.and_then(|t| t.batch.p99)),
            anatomy_cells(t.and_then(|t| t.anatomy.as_ref())),
            binlog_cells(self.binlog, t.and_then(|t| t.binlog.as_ref())),
            commit_path_cells(self.commit_path, t.and_then(|t| t.commit_path.as_ref())),
            io_cells(t.and_then(|t| t.io.as_ref())),
            match (j.stalled_s, w.warmup) {
                (Some(s), _) => format!("  (stalled: no commit for {s:.0} s)"),
                (None, true) => "  (warmup)".to_string(),
                (None, false) => String::new(),
            },
            if j.semi_sync_off {
                "  (semi-sync OFF: async)"
            } else {
                ""
            },
            match j.group_online {
                Some(g) if g.online < g.size => format!(
                    "  ({}: {})",
                    g.words.group,
                    g.words.tally(g.online as usize, g.size as usize)
                ),
                _ => String::new(),
            }
        );
        let _ = self.out.flush();
    }

    fn summary(&mut self, h: &RunHeader, s: &RunSummary) {
        let w = &s.workload;
        let o = &mut self.out;
        let _ = writeln!(
            o,
            "\n== summary: {}, {} clients, {:.1} s measured{}, ended: {} ==",
            w.scenario,
            w.threads,
            w.measured_s,
            if w.warmup_s > 0.0 {
                format!(" (warmup {:.1} s left out)", w.warmup_s)
            } else {
                String::new()
            },
            s.ended
        );
        let _ = writeln!(o, "{:<14} {}", "server", h.server);
        let _ = writeln!(
            o,
            "{:<14} {:>12}  ({:.1} tps)  latency ms: p50 {}  p95 {}  p99 {}  max {}",
            "transactions",
            w.txns,
            w.mean_tps,
            ms(w.latency.p50_us),
            ms(w.latency.p95_us),
            ms(w.latency.p99_us),
            ms(w.latency.max_us)
        );
        if w.errors > 0 || w.retries > 0 {
            let _ = writeln!(
                o,
                "{:<14} {:>12}  ({})  retries {}",
                "errors",
                w.errors,
                w.error_codes(),
                w.retries
            );
        }
        if let Some(t) = &w.tpcc {
            let _ = write!(o, "{}", workload::tpcc::report::final_report(t));
            let _ = writeln!(o);
        }
        if let (Some(t), Some(l)) = (&s.trace, &h.legend) {
            probe_totals(o, l, t);
            let _ = writeln!(
                o,
                "{:<14} {:>12}  (the workload's commits per n_flush)",
                "commits/flush",
                opt_f(s.commits_per_flush, 2)
            );
        }
        super::replication_block::write_replica(o, s.replica.as_ref());
        super::group_block::write_group(o, s.group.as_ref());
        if !s.checks.is_empty() {
            let _ = writeln!(
                o,
                "server counters over the same window (SHOW GLOBAL STATUS):"
            );
            // Widths from the rows themselves: MariaDB's trigger counters
            // and their labels run longer than the rest.
            let (wn, wl) = s.checks.iter().fold((22, 26), |(n, l), c| {
                (n.max(c.counter.len()), l.max(c.ours_is.label().len()))
            });
            for c in &s.checks {
                let _ = writeln!(
                    o,
                    "  {:<wn$} {:>10}   ours {:>10}  {:<wl$} {}",
                    c.counter,
                    c.server,
                    c.ours,
                    c.ours_is.label(),
                    c.diff_pct
                        .map_or_else(|| "-".into(), |d| format!("{d:+.1} %"))
                );
            }
        }
        let _ = o.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column the main command can print, under each combination
    /// of its optional columns, is defined in `--help`'s Columns (and so
    /// in the man page and the docs' copies).
    #[test]
    fn every_column_is_defined_in_help() {
        for header in headers() {
            crate::help_text::assert_defined(&header, crate::help_text::MAIN_COLUMNS);
        }
    }
}
