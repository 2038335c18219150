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

/// `binlog_commit_wait_count=10` and `_usec=3000` at 32 clients: why
/// each group closed, probed at the server's own adds to its trigger
/// counters, and those counters over the same window (`checks`).
fn closed_by(mysqld: &std::path::Path, workload: &str) -> (Value, Value) {
    let (s, err, wd) = managed_summary(
        mysqld,
        &[
            "--threads",
            "32",
            "--duration",
            "6",
            "--workload",
            workload,
            "--server-option",
            "log_bin=ON",
            "--server-option",
            "binlog_commit_wait_count=10",
            "--server-option",
            "binlog_commit_wait_usec=3000",
        ],
    );
    assert_clean(wd.path());
    let ctx = format!("{s}\n{err}");
    let by = s["trace"]["binlog"]["closed_by"].clone();
    let groups = |reason: &str| {
        by.as_array()
            .unwrap_or_else(|| panic!("no closed_by: {ctx}"))
            .iter()
            .find(|c| c["reason"] == reason)
            .map_or(0, |c| u(&c["groups"]))
    };
    let server = |counter: &str| {
        s["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["counter"] == counter)
            .map(|c| (u(&c["server"]), u(&c["ours"])))
    };
    // Every reason against the server's counter: within one group (one
    // may close on either side of the window's edge).
    for (reason, counter) in [
        ("count", "Binlog_group_commit_trigger_count"),
        ("timeout", "Binlog_group_commit_trigger_timeout"),
        ("lock_wait", "Binlog_group_commit_trigger_lock_wait"),
    ] {
        let ours = groups(reason);
        match server(counter) {
            Some((theirs, shown)) => {
                assert_eq!(shown, ours, "{reason}: {ctx}");
                assert!(
                    ours.abs_diff(theirs) <= 1,
                    "{reason} {ours} vs {counter} {theirs}: {ctx}"
                );
            }
            // The server's counter stood still: no row, and none of ours.
            None => assert!(ours <= 1, "{reason} {ours}, no {counter} row: {ctx}"),
        }
    }
    // The reasons' groups are all the groups, and none closed with no
    // wait (the count is set: every leader waits).
    let b = &s["trace"]["binlog"];
    let sum: u64 = by.as_array().unwrap().iter().map(|c| u(&c["groups"])).sum();
    assert_eq!(sum, u(&b["groups"]), "{ctx}");
    assert_eq!(groups("no_wait"), 0, "{ctx}");
    (s, by)
}

#[test]
fn symbolized_mariadb_says_why_each_binlog_group_closed() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    // The update workload: most groups fill to the count, some wait out
    // the delay, each with its size and wait.
    let (_, by) = closed_by(&bin, "update");
    let (count, timeout) = (of_in(&by, "count"), of_in(&by, "timeout"));
    assert!(u(&count["groups"]) > 0 && u(&timeout["groups"]) > 0, "{by}");
    // Closed on the count: at least the count (the leader takes everyone
    // queued by then); waited less than the delay.
    assert!(f(&count["mean_size"]) >= 10.0, "{by}");
    assert!(f(&count["mean_wait_us"]) < 3000.0, "{by}");
    // Closed on the delay: waited all of it.
    assert!(f(&timeout["mean_wait_us"]) >= 3000.0, "{by}");
    // Hot-row: every transaction waits on the one row's lock, so each
    // group closes on its lock waiter.
    let (_, by) = closed_by(&bin, "hot-row");
    let lock = of_in(&by, "lock_wait");
    assert!(u(&lock["groups"]) > 100, "{by}");
}

/// The reason `r`'s entry of a `closed_by`.
fn of_in(by: &Value, r: &str) -> Value {
    by.as_array()
        .unwrap()
        .iter()
        .find(|c| c["reason"] == r)
        .cloned()
        .unwrap_or_else(|| panic!("no {r}: {by}"))
}

/// `probes` shows where a MariaDB group closes: the wait for a fuller
/// group, and the add at each of its three exits (found by decoding the
/// function, so a build that moved them would show it here first).
#[test]
fn probes_shows_where_a_mariadb_group_closes_and_its_three_exits() {
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let (out, _) = run_ok(
        commitscope()
            .args(["probes", "--json", "--no-debuginfod", "--mysqld"])
            .arg(&bin),
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let close: Vec<&Value> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "close")
        .collect();
    assert_eq!(close.len(), 1, "{v}");
    assert!(
        close[0]["function"]
            .as_str()
            .unwrap()
            .contains("wait_for_sufficient_commits"),
        "{v}"
    );
    let exits = v["close_exits"].as_array().expect("close_exits");
    let names: Vec<&str> = exits.iter().map(|e| e[0].as_str().unwrap()).collect();
    assert_eq!(names, ["count", "timeout", "lock_wait"], "{v}");
    // Each exit has its add, inside the function's code after its entry.
    let entry = close[0]["offset"].as_u64().unwrap();
    for e in exits {
        let at = e[1].as_array().unwrap();
        assert!(!at.is_empty(), "{v}");
        assert!(at.iter().all(|o| o.as_u64().unwrap() > entry), "{v}");
    }
}
