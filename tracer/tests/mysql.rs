//! MySQL, the study's own server, met for real: Debian unstable's stock
//! `mysqld` (stripped, its functions exported in `.dynsym`), unpacked with
//! its own libraries into the cache `cargo xtask setup` fills (a test
//! fills it when empty). Its binlog is on by default (`log_bin`,
//! `sync_binlog=1`), so commits group in the binlog's stages: the tests
//! hold the binlog groups to the kernel's binlog fsyncs and the workload's
//! commits.
mod common;

use common::*;
use serde_json::Value;
use testkit::stock;

/// The stock MySQL, fetched when the cache is empty. A fetch that fails
/// fails the test: the suite needs it.
fn mysqld() -> std::path::PathBuf {
    stock::ensure(stock::MYSQL, &mut |l| eprintln!("stock servers: {l}"))
        .unwrap_or_else(|e| panic!("{}: {e}", stock::MYSQL.describe()))
        .server
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `a` within `pct` % of `b`.
fn within(a: u64, b: u64, pct: f64) -> bool {
    b > 0 && (a as f64 - b as f64).abs() / b as f64 * 100.0 <= pct
}

/// The main command, managed, 32 clients for 6 s with `extra`: its
/// summary, after the checks every MySQL run must pass.
fn managed(extra: &[&str]) -> Value {
    let wd = workdir();
    let out = commitscope()
        .arg("--mysqld")
        .arg(mysqld())
        .args(["--threads", "32", "--duration", "6", "--json"])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{extra:?}: {err}");
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    let s = lines.last().unwrap().clone();
    let ctx = format!("{extra:?}: {s}\n{err}");
    assert_eq!(s["type"], "summary", "{ctx}");
    assert!(
        s["header"]["legend"]["server"]
            .as_str()
            .is_some_and(|v| v.starts_with("MySQL ")),
        "{ctx}"
    );
    // Exact mode from .dynsym: no fallback.
    assert!(s["header"]["legend"]["fallback"].is_null(), "{ctx}");
    assert_eq!(s["workload"]["errors"], 0, "{ctx}");
    // The server's own counters over the same window, each within 0.5 %.
    let checks = s["checks"].as_array().unwrap();
    let names: Vec<&str> = checks
        .iter()
        .map(|c| c["counter"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Innodb_os_log_fsyncs"), "{ctx}");
    for c in checks {
        assert!(f(&c["diff_pct"]).abs() <= 0.5, "{c}: {ctx}");
    }
    // The binlog groups: one per binlog fsync (sync_binlog=1), carrying
    // every commit the workload made.
    let t = &s["trace"];
    let b = &t["binlog"];
    let commits = u(&s["workload"]["commits"]);
    assert!(commits > 1000, "{ctx}");
    assert!(within(u(&b["groups"]), u(&t["binlog_fsync"]), 1.0), "{ctx}");
    assert!(within(u(&b["commits"]), commits, 1.0), "{ctx}");
    // Sizes that occurred, in order; the mean between them.
    let (p50, p99, max) = (u(&b["p50"]), u(&b["p99"]), u(&b["max"]));
    assert!(1 <= p50 && p50 <= p99 && p99 <= max && max <= 32, "{ctx}");
    let mean = f(&b["mean"]);
    assert!(
        (mean - u(&b["commits"]) as f64 / u(&b["groups"]) as f64).abs() < 1e-9,
        "{ctx}"
    );
    let stages: Vec<&str> = b["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    for want in ["flush", "sync wait", "sync", "commit"] {
        assert!(stages.contains(&want), "{want}: {ctx}");
    }
    // The redo side sees one durable write per flush-stage group, not
    // per commit: the group is not there.
    assert!(f(&t["write_per_flush"]) < 1.3, "{ctx}");
    s
}

#[test]
fn stock_mysql_runs_managed_and_counts_binlog_groups_where_they_form() {
    if needs_root() {
        return;
    }
    let plain = managed(&[]);
    // A sync delay holds each sync leader back: more commits per group.
    // An empty value is a value (`secure_file_priv=` lifts the limit).
    let delayed = managed(&[
        "--server-option",
        "binlog_group_commit_sync_delay=3000",
        "--server-option",
        "secure_file_priv=",
    ]);
    let mean = |s: &Value| f(&s["trace"]["binlog"]["mean"]);
    assert!(
        mean(&delayed) >= 1.5 * mean(&plain),
        "delay {} vs none {}",
        mean(&delayed),
        mean(&plain)
    );
    let wait = |s: &Value| {
        s["trace"]["binlog"]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["stage"] == "sync wait")
            .map(|x| f(&x["mean_us"]))
            .unwrap()
    };
    // The 3 ms land in the sync leader's wait before the sync.
    assert!(wait(&delayed) >= 2000.0, "{}", wait(&delayed));
}

#[test]
fn the_study_on_stock_mysql_takes_its_ratio_from_the_binlog() {
    if needs_root() {
        return;
    }
    let wd = workdir();
    let out = commitscope()
        .args(["study", "--json", "--duration", "3"])
        .arg("--mysqld")
        .arg(mysqld())
        .args(["--workdir", wd.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let study = json_lines(&text)
        .into_iter()
        .find(|v| v["type"] == "study")
        .unwrap_or_else(|| panic!("{text}"));
    let rows = study["rows"].as_array().unwrap();
    let r: Vec<f64> = rows.iter().map(|r| f(&r["ratio"])).collect();
    for row in rows {
        assert_eq!(row["ratio_source"], "binlog_groups", "{study}");
    }
    assert!(r[0] < 1.3 && r[1] < 1.3, "{study}");
    assert!(r[2] > 2.0 && r[3] > r[2], "{study}");
    assert_clean(wd.path());
}
