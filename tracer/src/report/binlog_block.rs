//! The summary's binlog block: groups and their exact sizes, the stages'
//! times per group, and the checks against the kernel and the workload.
use std::io::Write;

use super::fmt::{opt_f, opt_u};
use crate::binlog::BinlogGroups;

/// No block when no binlog group closed; one line saying why when the
/// kernel saw no binlog sync either (the binlog is off, or not synced),
/// so that a missing block is not read as a missing probe.
pub fn write(out: &mut impl Write, b: Option<&BinlogGroups>, binlog_fsyncs: u64) {
    let Some(b) = b.filter(|b| b.groups > 0) else {
        if binlog_fsyncs == 0 {
            let _ = writeln!(
                out,
                "binlog groups  none: the server synced no binlog (log_bin off, or sync_binlog=0); --server-option log_bin=ON turns a managed server's on"
            );
        }
        return;
    };
    if b.commits > 0 {
        let _ = writeln!(
            out,
            "binlog groups  {:>12}  carrying {} commits: {} per group  p50 {}  p90 {}  p99 {}  max {}",
            b.groups,
            b.commits,
            opt_f(b.mean, 2),
            opt_u(b.p50),
            opt_u(b.p90),
            opt_u(b.p99),
            opt_u(b.max)
        );
    } else {
        let _ = writeln!(
            out,
            "binlog groups  {:>12}  (sizes: exact tier, or the exporter's exact windows)",
            b.groups
        );
    }
    if let Some(l) = &b.leaders {
        let _ = writeln!(
            out,
            "  led by {} threads; the busiest led {} ({:.1} %)",
            l.threads,
            l.busiest_groups,
            l.busiest_share * 100.0
        );
    }
    // MySQL's sync stage merges flush-stage groups; MariaDB's leader
    // does both, one group each.
    if b.flush_groups != b.groups {
        let _ = writeln!(
            out,
            "  ({} flush-stage groups went into these; each asked InnoDB for one redo flush, so write/flush counts flush-stage groups, not commits)",
            b.flush_groups
        );
    }
    if let Some(by) = b.closed_by.as_deref().filter(|v| !v.is_empty()) {
        let parts: Vec<String> = by
            .iter()
            .map(|c| {
                format!(
                    "{} {} ({:.1} %; {} per group, p99 {}; waited {} us)",
                    c.reason.name(),
                    c.groups,
                    c.groups as f64 / b.groups.max(1) as f64 * 100.0,
                    opt_f(c.mean_size, 1),
                    opt_u(c.p99_size),
                    opt_f(c.mean_wait_us, 0)
                )
            })
            .collect();
        let _ = writeln!(out, "  closed by: {}", parts.join(" | "));
    }
    let stages: Vec<String> = b
        .stages
        .iter()
        .map(|s| {
            format!(
                "{} {} us (p99 {})",
                s.stage,
                opt_f(s.mean_us, 0),
                opt_f(s.p99_us, 0)
            )
        })
        .collect();
    if !stages.is_empty() {
        let _ = writeln!(out, "  per group: {}", stages.join(" | "));
    }
    for c in &b.checks {
        let _ = writeln!(
            out,
            "  check: {} {} vs {} {}  {}",
            c.ours,
            c.value,
            c.against,
            c.reference,
            c.diff_pct
                .map_or_else(|| "-".into(), |d| format!("{d:+.1} %"))
        );
    }
    if b.lost > 0 {
        let _ = writeln!(
            out,
            "  {} stage boundaries not recorded (thread map full): sizes are lower bounds",
            b.lost
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Option<&BinlogGroups>, fsyncs: u64) -> String {
        let mut out = Vec::new();
        write(&mut out, b, fsyncs);
        String::from_utf8(out).unwrap()
    }

    /// No group and no binlog sync: one line says why there is no block.
    /// No group but binlog syncs (probes not attached): nothing claimed.
    #[test]
    fn a_server_without_a_binlog_is_said_once() {
        let t = text(None, 0);
        assert_eq!(t.lines().count(), 1, "{t}");
        assert!(t.contains("log_bin"), "{t}");
        assert_eq!(text(None, 7), "");
    }
}
