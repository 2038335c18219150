//! Group-commit anatomy: batch sizes per flush (kept in the kernel),
//! leaders and followers, against fixtures that know their own answers
//! and against real servers' own ratios.
mod common;

use std::{path::Path, process::Command};

use common::*;
use serde_json::Value;

fn build(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("group_commit");
    let src = testkit::workspace_root().join("tracer/tests/fixture/group_commit.c");
    run(Command::new("gcc")
        .args(["-O2", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&bin));
    bin
}

/// Runs the fixture with `args` under `commitscope trace`: (its truth,
/// the summary's totals).
fn traced(args: &[&str]) -> (Value, Value) {
    let d = tempfile::tempdir().unwrap();
    let bin = build(d.path());
    let (truth, lines, _) = run_traced_fixture(Command::new(&bin).args(args).arg(d.path()), &[]);
    (truth, summary(&lines)["totals"].clone())
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One thread, groups of 1, 2, 4, 8, 16 and 64 durable requests (and one
/// non-durable) between flushes: every bucket exact.
#[test]
fn known_groups_fill_exact_buckets() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let (truth, t) = traced(&["groups", "40"]);
    let k = n(&truth["rounds"]);
    let b = &t["batch"];
    let ctx = format!("truth {truth}\ntotals {t}");
    let mut want = vec![0u64; 26];
    for bucket in [1, 2, 4, 8, 16, 18] {
        want[bucket] = k;
    }
    let hist: Vec<u64> = b["hist"].as_array().unwrap().iter().map(n).collect();
    assert_eq!(hist, want, "{ctx}");
    assert_eq!(b["flushes"], truth["flushes"], "{ctx}");
    assert_eq!(b["p50"], 4, "{ctx}");
    assert_eq!(b["max"], 64, "{ctx}");
    // The exact mean: durable requests per flush.
    let mean = n(&truth["durable"]) as f64 / n(&truth["flushes"]) as f64;
    assert!((b["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{ctx}");
    // No flush inside a write call: every durable request is a follower.
    assert_eq!(t["anatomy"]["leaders"], 0, "{ctx}");
    assert_eq!(t["anatomy"]["followers"], truth["durable"], "{ctx}");
}

/// Eight threads doing real group commit: leaders, followers and flushes
/// equal the fixture's own counts; every request is in exactly one batch.
#[test]
fn leaders_and_followers_match_a_real_group_commit() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let (truth, t) = traced(&["threads", "8", "300"]);
    let ctx = format!("truth {truth}\ntotals {t}");
    let a = &t["anatomy"];
    assert_eq!(a["leaders"], truth["leaders"], "{ctx}");
    assert_eq!(a["followers"], truth["followers"], "{ctx}");
    assert_eq!(t["n_flush"], truth["flushes"], "{ctx}");
    let b = &t["batch"];
    assert_eq!(b["flushes"], truth["flushes"], "{ctx}");
    let mean = n(&truth["requests"]) as f64 / n(&truth["flushes"]) as f64;
    assert!((b["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{ctx}");
    assert!(n(&a["leaders"]) > 0 && n(&a["followers"]) > 0, "{ctx}");
    assert!(a["leader_sync_share"].as_f64().unwrap() > 0.0, "{ctx}");
}

/// The main command's summary of a managed server, as JSON.
fn main_summary(mysqld: &Path, threads: &str, extra: &[&str]) -> Value {
    let wd = workdir();
    let mut cmd = commitscope();
    cmd.args(["--mysqld", mysqld.to_str().unwrap()])
        .args([
            "--threads",
            threads,
            "--warmup",
            "1",
            "--duration",
            "4",
            "--json",
        ])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .args(extra);
    let (out, _) = run_ok(&mut cmd);
    assert_clean(wd.path());
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// The symbolized MariaDB: at 1 client every batch is 1 and every durable
/// call leads; at 50 the batch mean is durable / n_flush and leaders +
/// followers are the durable calls.
#[test]
fn mariadb_batches_and_leaders() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let bin = fix.join("bin/mariadbd");
    for threads in ["1", "50"] {
        let s = main_summary(&bin, threads, &["--anatomy"]);
        let t = &s["trace"];
        let ctx = format!("{threads} clients: {t}");
        let (b, a) = (&t["batch"], &t["anatomy"]);
        let durable = n(&t["durable"]);
        // Counted at return, durable at entry: they differ only by the
        // calls in flight at the window's two edges (one per client).
        let led_or_followed = n(&a["leaders"]) + n(&a["followers"]);
        let in_flight: u64 = threads.parse::<u64>().unwrap() + 2;
        assert!(led_or_followed.abs_diff(durable) <= in_flight, "{ctx}");
        let mean = b["mean"].as_f64().unwrap();
        let ratio = durable as f64 / n(&t["n_flush"]) as f64;
        if threads == "1" {
            // Batches of 1, bar the server's own background writes: at
            // most 1 % of the flushes carry another request.
            let hist: Vec<u64> = b["hist"].as_array().unwrap().iter().map(n).collect();
            assert!(hist[2..].iter().sum::<u64>() * 100 <= hist[1], "{ctx}");
            assert!(hist[1] * 100 >= durable * 99, "{ctx}");
            assert!(n(&a["leaders"]) * 100 >= durable * 99, "{ctx}");
        } else {
            assert!(
                (mean / ratio - 1.0).abs() < 0.01,
                "mean {mean} vs {ratio}: {ctx}"
            );
            assert!(n(&b["p99"]) > 1, "{ctx}");
        }
    }
}

/// Debian's stripped server: batches are server-layer commits per redo
/// fsync; their mean is commits / n_flush.
#[test]
fn fallback_batches_are_commits_per_redo_fsync() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup`");
        return;
    };
    let s = main_summary(&bin, "20", &["--no-debuginfod"]);
    let t = &s["trace"];
    let ctx = t.to_string();
    let ratio = n(&t["n_write"]) as f64 / n(&t["n_flush"]) as f64;
    let mean = t["batch"]["mean"].as_f64().unwrap();
    assert!(
        (mean / ratio - 1.0).abs() < 0.01,
        "mean {mean} vs {ratio}: {ctx}"
    );
    assert!(t.get("anatomy").is_none(), "{ctx}");
}
