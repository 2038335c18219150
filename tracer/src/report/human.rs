//! The terminal table: one line per interval, like the systemtap study's
//! `n_write N n_flush M`, with the header repeated every 20 lines.
use std::{
    io::Write,
    time::{SystemTime, UNIX_EPOCH},
};

pub(crate) use super::fmt::{opt_f, opt_u};
use crate::records::run::{Legend, Restart, Sink, Summary};
use crate::sample::Interval;

pub struct Human<W: Write> {
    out: W,
    lines: u64,
    fallback: bool,
    /// Leaders and followers columns.
    anatomy: bool,
    /// `--io` columns.
    io: bool,
    /// Binlog group columns.
    binlog: bool,
    /// Commit-path columns.
    commit_path: bool,
}

impl<W: Write> Human<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            lines: 0,
            fallback: false,
            anatomy: false,
            io: false,
            binlog: false,
            commit_path: false,
        }
    }
}

/// Local wall-clock time as HH:MM:SS.
// The libc crate marks musl's `time_t` deprecated (a 32-bit type on some
// musl targets); on x86-64 it is 64-bit on both libcs.
#[allow(deprecated)]
pub fn clock(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as libc::time_t;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is re-entrant.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return "??:??:??".into();
    }
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// The header of [`anatomy_cells`], or nothing without `--anatomy`.
pub(crate) fn anatomy_header(on: bool) -> String {
    if on {
        format!(
            "  {:>8}  {:>9}  {:>11}",
            "leaders", "followers", "wait_p99_us"
        )
    } else {
        String::new()
    }
}

/// The leaders, followers and wait_p99_us cells (the followers' wait,
/// what most commits see), or nothing without `--anatomy`.
pub(crate) fn anatomy_cells(a: Option<&crate::sample::Anatomy>) -> String {
    a.map_or_else(String::new, |a| {
        format!(
            "  {:>8}  {:>9}  {:>11}",
            a.leaders,
            a.followers,
            opt_f(a.follower_wait_p99_us.or(a.leader_wait_p99_us), 0)
        )
    })
}

/// The header of [`commit_path_cells`], or nothing without `--commit-path`.
pub(crate) fn commit_path_header(on: bool) -> String {
    if on {
        format!(
            "  {:>8}  {:>16}  {:>4}  {:>5}",
            "cp_us", "cp_top", "cpu%", "runq%"
        )
    } else {
        String::new()
    }
}

/// The commits' mean time in the server and the stage with the largest
/// share of it (its short name and share).
pub(crate) fn commit_path_cells(on: bool, c: Option<&crate::commit_path::CommitPath>) -> String {
    if !on {
        return String::new();
    }
    let top = c.and_then(|c| c.top()).map_or_else(
        || "-".into(),
        |s| format!("{} {:.0}%", s.short, s.share.unwrap_or(0.0) * 100.0),
    );
    // Of the commit's time, on a CPU and waiting for one ("-" without
    // the scheduler split).
    let shares = c.and_then(|c| c.sched).map(|x| x.shares());
    let pct = |k: usize| shares.map_or_else(|| "-".into(), |s| format!("{:.0}", s[k] * 100.0));
    format!(
        "  {:>8}  {:>16}  {:>4}  {:>5}",
        opt_f(c.and_then(|c| c.mean_us), 0),
        top,
        pct(0),
        pct(1)
    )
}

/// The header of [`binlog_cells`], or nothing without the binlog probes.
pub(crate) fn binlog_header(on: bool) -> String {
    if on {
        format!("  {:>9}  {:>7}  {:>7}", "bl_groups", "bl_p50", "bl_p99")
    } else {
        String::new()
    }
}

/// Binlog groups and the exact p50/p99 of their sizes in commits.
pub(crate) fn binlog_cells(on: bool, b: Option<&crate::binlog::BinlogGroups>) -> String {
    if !on {
        return String::new();
    }
    format!(
        "  {:>9}  {:>7}  {:>7}",
        b.map_or_else(|| "-".into(), |b| b.groups.to_string()),
        opt_u(b.and_then(|b| b.p50)),
        opt_u(b.and_then(|b| b.p99))
    )
}

/// The header of [`io_cells`], or nothing without `--io` on a device.
pub(crate) fn io_header(on: bool) -> String {
    if on {
        format!(
            "  {:>7}  {:>8}  {:>7}  {:>10}  {:>5}  {:>5}",
            "io/sync", "KiB/sync", "fl/sync", "dev_us/syn", "dev%", "jnl%"
        )
    } else {
        String::new()
    }
}

/// Per redo sync: attributed requests, KiB, cache flushes, device time,
/// and the shares of the sync the device and the journal explain.
pub(crate) fn io_cells(io: Option<&crate::sample::IoFigures>) -> String {
    io.map_or_else(String::new, |io| {
        format!(
            "  {:>7}  {:>8}  {:>7}  {:>10}  {:>5}  {:>5}",
            opt_f(io.requests_per_sync, 2),
            opt_f(io.bytes_per_sync.map(|b| b / 1024.0), 1),
            opt_f(io.cache_flushes_per_sync, 2),
            opt_f(io.device_us_per_sync, 0),
            opt_f(io.device_share.map(|s| s * 100.0), 0),
            opt_f(io.journal_share.map(|s| s * 100.0), 0)
        )
    })
}

/// The summary's block for `--io`: per redo sync, what the device did.
fn io_block(out: &mut impl Write, t: &Interval) {
    let Some(io) = &t.io else { return };
    let pct = |s: Option<f64>| opt_f(s.map(|s| s * 100.0), 0);
    let _ = writeln!(
        out,
        "io per redo sync ({} syncs, {} without a write): {} requests ({} by the journal), {} KiB, {} cache flushes, {} FUA writes",
        io.redo_syncs,
        io.syncs_without_write,
        opt_f(io.requests_per_sync, 2),
        io.journal_requests,
        opt_f(io.bytes_per_sync.map(|b| b / 1024.0), 1),
        opt_f(io.cache_flushes_per_sync, 2),
        io.fua_writes
    );
    let _ = writeln!(
        out,
        "  device time {} us per sync (request p50 {} us, p99 {} us); queued before issue {} us",
        opt_f(io.device_us_per_sync, 0),
        opt_f(io.device_p50_us, 0),
        opt_f(io.device_p99_us, 0),
        opt_f(io.queue_us_per_sync, 0)
    );
    let _ = writeln!(
        out,
        "  of the redo sync time: device {} %, journal {} %, other {} % (waiting for the journal, queueing, CPU)",
        pct(io.device_share),
        pct(io.journal_share),
        pct(io.other_share)
    );
    let _ = writeln!(
        out,
        "  the whole device: {} requests, {} KiB, p50 {} us, p99 {} us{}",
        io.all_requests,
        io.all_bytes / 1024,
        opt_f(io.all_p50_us, 0),
        opt_f(io.all_p99_us, 0),
        if io.lost > 0 {
            format!("; {} requests not timed (map full)", io.lost)
        } else {
            String::new()
        }
    );
}

/// The summary's group-commit block: batch sizes per flush, then leaders
/// and followers with their waits.
fn anatomy_block(out: &mut impl Write, l: &Legend, t: &Interval) {
    let b = &t.batch;
    if b.flushes == 0 {
        return;
    }
    let what = if l.fallback.is_some() {
        "server-layer commits since the previous redo fsync began"
    } else {
        "durable writes since the previous flush began"
    };
    let _ = writeln!(out, "batch size per flush ({what})");
    let cells: Vec<String> = b
        .hist
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| format!("{}: {n}", crate::sample::batch_label(i)))
        .collect();
    let _ = writeln!(
        out,
        "  {}      p50 {}  p90 {}  p99 {}  max {}  mean {}",
        cells.join("   "),
        opt_u(b.p50),
        opt_u(b.p90),
        opt_u(b.p99),
        opt_u(b.max),
        opt_f(b.mean, 2)
    );
    if let Some(a) = &t.anatomy {
        let _ = writeln!(
            out,
            "  leaders {} (wait p50 {} us, p99 {} us; {} % of it in fsync)   followers {} (wait p50 {} us, p99 {} us)",
            a.leaders,
            opt_f(a.leader_wait_p50_us, 0),
            opt_f(a.leader_wait_p99_us, 0),
            opt_f(a.leader_sync_share.map(|s| s * 100.0), 0),
            a.followers,
            opt_f(a.follower_wait_p50_us, 0),
            opt_f(a.follower_wait_p99_us, 0)
        );
        if let Some(m) = &l.anatomy {
            let _ = writeln!(out, "  ({m})");
        }
    }
}

/// The durable cell: "330", or "330+170?" when 170 requests came from
/// inlined copies whose durability cannot be read.
fn durable_cell(i: &Interval) -> String {
    match (i.durable, i.durable_unknown) {
        (Some(d), Some(u)) if u > 0 => format!("{d}+{u}?"),
        (d, _) => opt_u(d),
    }
}

/// Every header line `trace` can print (each combination of its
/// optional columns): what the docs' samples are checked against.
pub fn headers() -> Vec<String> {
    super::fmt::every_header(|[fallback, anatomy, io, binlog, commit_path]| {
        let mut buf = Vec::new();
        let mut h = Human::new(&mut buf);
        (h.fallback, h.anatomy, h.io, h.binlog, h.commit_path) =
            (fallback, anatomy, io, binlog, commit_path);
        h.header();
        String::from_utf8_lossy(&buf).trim_end().to_string()
    })
}

impl<W: Write> Human<W> {
    fn header(&mut self) {
        let nw = if self.fallback { "commits" } else { "n_write" };
        let _ = writeln!(
            self.out,
            "{:<8}  {:>8}  {:>8}  {:>8}  {:>11}  {:>10}  {:>11}  {:>11}  {:>12}  {:>10}  {:>9}  {:>9}{}{}{}{}",
            "time",
            nw,
            "durable",
            "n_flush",
            "write/flush",
            "redo_fsync",
            "redo_p50_us",
            "redo_p99_us",
            "binlog_fsync",
            "data_fsync",
            "p50_batch",
            "p99_batch",
            anatomy_header(self.anatomy),
            binlog_header(self.binlog),
            commit_path_header(self.commit_path),
            io_header(self.io)
        );
    }
}

impl<W: Write> Sink for Human<W> {
    fn start(&mut self, l: &Legend) {
        let light = !l.probes.per_commit();
        self.fallback = l.fallback.is_some() || light;
        self.anatomy = l.anatomy.is_some();
        self.io = l.io_columns;
        self.binlog = l.binlog_columns;
        self.commit_path = l.commit_path_columns;
        let server = l.server.as_deref().unwrap_or("server version unknown");
        let _ = writeln!(
            self.out,
            "# tracing pid {} ({}, {server}); probes: {}",
            l.pid, l.exe, l.probes
        );
        let _ = writeln!(
            self.out,
            "# {}: {}{}; durable: {}; n_flush: {}; fsync probe: {}; symbols: {}",
            if self.fallback { "commits" } else { "n_write" },
            if light { "" } else { "calls of " },
            l.n_write_source,
            l.durable_source
                .as_deref()
                .unwrap_or("- (not visible at the server layer)"),
            l.n_flush_source,
            l.fsync_probe,
            l.symbol_source
        );
        if let Some(io) = &l.io {
            let _ = writeln!(self.out, "# {io}");
        }
    }

    fn interval(&mut self, at: SystemTime, i: &Interval) {
        if self.lines.is_multiple_of(20) {
            self.header();
        }
        self.lines += 1;
        let _ = writeln!(
            self.out,
            "{:<8}  {:>8}  {:>8}  {:>8}  {:>11}  {:>10}  {:>11}  {:>11}  {:>12}  {:>10}  {:>9}  {:>9}{}{}{}{}",
            clock(at),
            i.n_write,
            durable_cell(i),
            i.n_flush,
            opt_f(i.write_per_flush, 2),
            i.redo_fsync,
            opt_f(i.redo_p50_us, 0),
            opt_f(i.redo_p99_us, 0),
            i.binlog_fsync,
            i.data_fsync,
            opt_u(i.batch.p50),
            opt_u(i.batch.p99),
            anatomy_cells(i.anatomy.as_ref()),
            binlog_cells(self.binlog, i.binlog.as_ref()),
            commit_path_cells(self.commit_path, i.commit_path.as_ref()),
            io_cells(i.io.as_ref())
        );
        let _ = self.out.flush();
    }

    fn restart(&mut self, at: SystemTime, r: &Restart) {
        let _ = writeln!(
            self.out,
            "{:<8}  -- pid {} exited; following pid {} (down {:.1} s) --",
            clock(at),
            r.previous_pid,
            r.pid,
            r.down_s
        );
        let _ = self.out.flush();
    }

    fn summary(&mut self, l: &Legend, s: &Summary) {
        let _ = writeln!(
            self.out,
            "\n== summary: {:.1} s, ended: {} ==",
            s.totals.interval_s,
            s.end.describe()
        );
        if s.pids.len() > 1 {
            let pids: Vec<String> = s.pids.iter().map(u32::to_string).collect();
            let _ = writeln!(self.out, "followed restarts: pids {}", pids.join(" -> "));
        }
        probe_totals(&mut self.out, l, &s.totals);
        let _ = self.out.flush();
    }
}

/// The probe half of a summary: counts, rates, ratios, latencies. Shared
/// by `trace` and the main command.
pub fn probe_totals(out: &mut impl Write, l: &Legend, t: &Interval) {
    let fallback = l.fallback.is_some();
    let secs = t.interval_s.max(1e-9);
    let nw = if fallback { "commits" } else { "n_write" };
    let _ = writeln!(
        out,
        "{nw:<14} {:>12}  ({:.1}/s)  [{}]",
        t.n_write,
        t.n_write as f64 / secs,
        l.n_write_source
    );
    if let Some(d) = t.durable {
        let _ = writeln!(out, "{:<14} {d:>12}  ({:.1}/s)", "durable", d as f64 / secs);
    }
    if let Some(u) = t.durable_unknown {
        let _ = writeln!(
            out,
            "{:<14} {u:>12}  ({:.1}/s)  [inlined copies where the durable argument cannot be read: in n_write, not in durable]",
            "durable?",
            u as f64 / secs
        );
    }
    let _ = writeln!(
        out,
        "{:<14} {:>12}  ({:.1}/s)  [{}]",
        "n_flush",
        t.n_flush,
        t.n_flush as f64 / secs,
        l.n_flush_source
    );
    let _ = writeln!(
        out,
        "{:<14} {:>12}",
        "write/flush",
        opt_f(t.write_per_flush, 2)
    );
    if l.fsync_timed {
        let _ = writeln!(
            out,
            "{:<14} {:>12}  p50 {} us  p99 {} us",
            "redo_fsync",
            t.redo_fsync,
            opt_f(t.redo_p50_us, 0),
            opt_f(t.redo_p99_us, 0)
        );
    } else {
        let _ = writeln!(
            out,
            "{:<14} {:>12}  (not timed: light counts syncs at the C library's entry; --probes exact times them)",
            "redo_fsync", t.redo_fsync
        );
    }
    if let Some(inside) = t.redo_fsync_in_flush {
        let _ = writeln!(
            out,
            "{:<14} {:>12}  (+{} outside it, e.g. checkpoint writes)",
            "  in flush fn",
            inside,
            t.redo_fsync.saturating_sub(inside)
        );
    }
    if let (Some(n), Some(bytes)) = (t.redo_writes, t.redo_write_bytes) {
        let _ = writeln!(out, "{:<14} {:>12}  ({bytes} bytes)", "redo_writes", n);
    }
    let _ = writeln!(out, "{:<14} {:>12}", "binlog_fsync", t.binlog_fsync);
    let _ = writeln!(out, "{:<14} {:>12}", "data_fsync", t.data_fsync);
    let _ = writeln!(out, "{:<14} {:>12}", "other_fsync", t.other_fsync);
    // In fallback mode the timed function is the server-layer commit.
    // Untimed (--no-write-timing) there is nothing to print.
    if t.write_wait_p99_us.is_some() {
        let _ = writeln!(
            out,
            "{:<14} p50 {} us  p99 {} us",
            if fallback {
                "commit_time"
            } else {
                "write_wait"
            },
            opt_f(t.write_wait_p50_us, 0),
            opt_f(t.write_wait_p99_us, 0)
        );
    }
    if t.lost_events > 0 {
        let _ = writeln!(
            out,
            "{:<14} {:>12}  (map full: counts are lower bounds)",
            "lost_events", t.lost_events
        );
    }
    anatomy_block(out, l, t);
    super::binlog_block::write(out, t.binlog.as_ref(), t.binlog_fsync);
    super::commit_path_block::write(out, t.commit_path.as_ref());
    server_threads(out, t);
    super::replication_block::write_waits(out, t.replication.as_ref());
    super::group_block::write_waits(out, t.group.as_ref());
    io_block(out, t);
}

/// The server's threads by the scheduler (/proc, no probe): after the
/// commit path, the measured reason a client waits longer than its
/// commit does inside the server.
fn server_threads(out: &mut impl Write, t: &Interval) {
    threads_line(out, "server_threads", t.server_cpu_ms, t.server_runq_ms);
    // The main command's clients beside them, on the same CPUs.
    threads_line(out, "client_threads", t.workload_cpu_ms, t.workload_runq_ms);
}

/// One process's threads: on-CPU and run-queue time, and the share of
/// their runnable time spent waiting for a CPU.
fn threads_line(out: &mut impl Write, name: &str, cpu: Option<f64>, runq: Option<f64>) {
    let (Some(cpu), Some(runq)) = (cpu, runq) else {
        return;
    };
    let waiting = crate::sched_time::SchedTime::from_ms(cpu, runq)
        .runq_share()
        .map(|s| {
            format!(
                " ({:.0} % of their runnable time waiting for a CPU)",
                s * 100.0
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{name:<14} on CPU {cpu:.0} ms  run queue {runq:.0} ms{waiting}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::run::EndReason;

    use crate::sample::test_interval as interval;

    fn legend(fallback: bool) -> Legend {
        Legend {
            pid: 42,
            exe: "/usr/sbin/mariadbd".into(),
            server: Some("MariaDB 10.11.19".into()),
            profile: None,
            n_write_source: if fallback {
                "ha_commit_one_phase"
            } else {
                "log_write_up_to"
            }
            .into(),
            n_write_symbol_from: ".dynsym".into(),
            symbol_source: ".dynsym".into(),
            durable_source: None,
            n_flush_source: "redo fsync/fdatasync (kernel)".into(),
            fsync_probe: "tracepoint".into(),
            fsync_function: None,
            fsync_timed: true,
            write_probe: "tracepoints sys_enter_write".into(),
            fallback: fallback.then(|| "log_write_up_to not found".into()),
            anatomy: None,
            probes: crate::probes::tier::Tier::Exact,
            io: None,
            io_columns: false,
            binlog_columns: false,
            commit_path_columns: false,
        }
    }

    fn render(fallback: bool, i: Interval) -> String {
        let mut out = Vec::new();
        let mut h = Human::new(&mut out);
        let l = legend(fallback);
        h.start(&l);
        h.interval(SystemTime::now(), &i);
        h.summary(
            &l,
            &Summary {
                end: EndReason::Duration,
                totals: i.clone(),
                intervals: 1,
                pids: vec![1],
            },
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn exact_mode_shows_every_column() {
        let text = render(false, interval(Some(300), Some(100)));
        let header = text.lines().find(|l| l.starts_with("time")).unwrap();
        for col in [
            "n_write",
            "durable",
            "n_flush",
            "write/flush",
            "redo_fsync",
            "redo_p99_us",
            "binlog_fsync",
            "data_fsync",
        ] {
            assert!(header.contains(col), "{col} missing: {header}");
        }
        assert!(text.contains("ended: --duration reached"), "{text}");
        assert!(
            text.contains("(+2 outside it, e.g. checkpoint writes)"),
            "{text}"
        );
        assert!(text.contains("write_wait"), "{text}");
    }

    /// Every column trace can print, under each combination of its
    /// optional columns, is defined in its `--help`'s Columns.
    #[test]
    fn every_column_is_defined_in_help() {
        for header in headers() {
            crate::help_text::assert_defined(&header, crate::help_text::TRACE_COLUMNS);
        }
    }

    #[test]
    fn fallback_mode_is_labelled_honestly() {
        let text = render(true, interval(None, None));
        let header = text.lines().find(|l| l.starts_with("time")).unwrap();
        assert!(
            header.contains("commits") && !header.contains("n_write"),
            "{header}"
        );
        let row = text.lines().nth(3).unwrap();
        assert!(
            row.split_whitespace().nth(2) == Some("-"),
            "durable must be '-': {row}"
        );
        assert!(
            text.contains("commit_time") && !text.contains("write_wait"),
            "{text}"
        );
        assert!(!text.contains("in flush fn"), "{text}");
    }
}
