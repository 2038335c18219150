//! MariaDB's binlog group commit where its binlog is on: the groups and
//! their commits, probed at the group-commit leader, against the server's
//! own `Binlog_group_commits` and `Binlog_commits` and the kernel's binlog
//! fsyncs. (MySQL's are in mysql.rs.)
mod common;

use common::*;
use serde_json::Value;

/// The main command on `mysqld` with the binlog on and synced per group.
fn binlog_run(mysqld: &std::path::Path) -> Value {
    let (s, err, wd) = managed_summary(
        mysqld,
        &[
            "--threads",
            "16",
            "--duration",
            "4",
            "--server-option",
            "log_bin=ON",
            "--server-option",
            "sync_binlog=1",
        ],
    );
    let ctx = format!("{s}\n{err}");
    // Our groups and their commits are the server's, exactly; every
    // other counter within 0.5 %.
    let checks = s["checks"].as_array().unwrap();
    let of = |is: &str| {
        checks
            .iter()
            .find(|c| c["ours_is"] == is)
            .unwrap_or_else(|| panic!("no {is} check: {ctx}"))
    };
    for is in ["binlog_groups", "binlog_group_commits"] {
        let c = of(is);
        assert_eq!(c["server"], c["ours"], "{is}: {ctx}");
    }
    for c in checks {
        assert!(
            c["diff_pct"].as_f64().unwrap_or(0.0).abs() <= 0.5,
            "{c}: {ctx}"
        );
    }
    let t = &s["trace"];
    let b = &t["binlog"];
    // sync_binlog=1: one fsync per group (bar one under way at the end).
    assert!(
        u(&b["groups"]).abs_diff(u(&t["binlog_fsync"])) <= 2,
        "{ctx}"
    );
    assert_eq!(u(&b["commits"]), u(&s["workload"]["commits"]), "{ctx}");
    assert!(u(&b["max"]) <= 16 && u(&b["p50"]) >= 1, "{ctx}");
    // The leader's queue wait, once per group it led; no redo flush in
    // the group (MariaDB's is in prepare).
    let stages = b["stages"].as_array().unwrap();
    let stage = |name: &str| stages.iter().find(|x| x["stage"] == name);
    let queue = stage("flush: queue wait").unwrap_or_else(|| panic!("no queue wait: {ctx}"));
    assert!(u(&queue["count"]).abs_diff(u(&b["groups"])) <= 2, "{ctx}");
    assert!(queue["mean_us"].as_f64().is_some_and(|m| m > 0.0), "{ctx}");
    assert!(stage("flush: redo flush").is_none(), "{ctx}");
    let leaders = u(&b["leaders"]["threads"]);
    assert!((1..=16).contains(&leaders), "{ctx}");
    assert_clean(wd.path());
    s
}

#[test]
fn symbolized_mariadb_counts_its_binlog_groups() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let s = binlog_run(&fix.join("bin/mariadbd"));
    // Exact InnoDB probes: the redo side groups too (MariaDB asks for
    // the durable redo write in prepare, per transaction).
    assert!(s["header"]["legend"]["fallback"].is_null(), "{s}");
}

#[test]
fn stock_mariadb_counts_its_binlog_groups_at_the_server_layer() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return;
    };
    // Stripped, InnoDB hidden: the binlog's functions are exported.
    let s = binlog_run(&bin);
    assert!(s["header"]["legend"]["fallback"].is_string(), "{s}");
}
