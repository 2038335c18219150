//! Hundreds to thousands of clients: the managed server sized to the run,
//! an existing server that cannot take the run refused before any client
//! connects, and insert sweeps that run until their rows are in.
mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `commitscope --threads N --duration S --json -v` on a managed server:
/// every client committed, and the server was sized as documented.
fn managed_clients(threads: u32, seconds: &str) {
    let wd = workdir();
    let n = threads.to_string();
    let (text, err) = run_ok(commitscope().args([
        "--threads",
        &n,
        "--duration",
        seconds,
        "--json",
        "-v",
        "--workdir",
        wd.path().to_str().unwrap(),
    ]));
    let lines = json_lines(&text);
    let start = lines.iter().find(|l| l["type"] == "start").expect("start");
    // docs/main-command.md: max_connections = clients + 20 (at least 151).
    let want = u64::from(threads) + 20;
    assert_eq!(
        start["header"]["sizing"]["max_connections"].as_u64(),
        Some(want.max(151)),
        "{start}"
    );
    assert!(
        err.contains(&format!("max_connections={}", want.max(151))),
        "{err}"
    );
    let s = lines.last().unwrap();
    assert_eq!(s["type"], "summary", "{s}");
    let per: Vec<u64> = s["workload"]["client_commits"]
        .as_array()
        .unwrap_or_else(|| panic!("no client_commits: {s}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), threads as usize);
    assert!(
        per.iter().all(|&c| c > 0),
        "a client never committed: {per:?}"
    );
    assert_eq!(s["workload"]["errors"], 0, "{s}");
    assert!(err.contains("commitscope's own peak RSS"), "{err}");
    assert!(s["workload"]["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert_clean(wd.path());
}

#[test]
fn four_hundred_clients_on_a_managed_server() {
    let Some(_lane) = root_shared() else {
        return;
    };
    managed_clients(400, "3");
}

/// Marked long by its name: 2,000 clients for 5 s take ~10 s here, so CI
/// runs it with the rest.
#[test]
fn long_two_thousand_clients_on_a_managed_server() {
    let Some(_lane) = root_shared() else {
        return;
    };
    managed_clients(2000, "5");
}

#[test]
fn an_existing_server_without_room_is_refused_before_any_client() {
    let _lane = testkit::lane::shared();
    let Some(srv) = system_server(&["--max-connections=20"]) else {
        return;
    };
    let before = srv.status("Connections");
    let out = commitscope()
        .args(["--threads", "50", "--duration", "2", "--no-trace"])
        .args(srv.client_flags())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = one_error_line(&err);
    assert!(
        line.contains("max_connections = 20") && line.contains("SET GLOBAL max_connections = "),
        "{line}"
    );
    // The control connection, and this test's own status query.
    let moved = srv.status("Connections") - before;
    assert!(moved <= 2, "{moved} connections were opened");
    // No database was created either: nothing ran past the check.
    let dbs = srv.query("SHOW DATABASES LIKE 'commitscope'").unwrap();
    assert!(dbs.trim().is_empty(), "{dbs}");
}

#[test]
fn insert_sweep_runs_each_cell_until_its_rows_are_in() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(srv) = system_server(&[]) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("r");
    let (table, _) = run_ok(
        Command::new(env!("CARGO_BIN_EXE_commitscope"))
            .args([
                "sweep",
                "--workload",
                "insert",
                "--total-rows",
                "2000",
                "--threads",
                "1",
                "--server-option",
                "innodb_flush_log_at_trx_commit=0,1",
                "--database",
                "cs_sweep_rows",
                "--out",
                dir.to_str().unwrap(),
            ])
            .args(srv.client_flags()),
    );
    let cells = sweep_cells(&dir);
    assert_eq!(cells.len(), 2, "{table}");
    for c in &cells {
        assert_eq!(c["rows"], 2000, "{c}");
        assert!(c["rows_elapsed_s"].as_f64().unwrap() > 0.0, "{c}");
    }
    // The table is emptied at each cell's start: it holds the last cell's rows.
    assert_eq!(
        srv.query("SELECT COUNT(*) FROM cs_sweep_rows.test_load")
            .unwrap()
            .trim(),
        "2000"
    );
    assert!(
        table.contains("insert workload, 2000 rows per cell"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("| 1 |"))
        .unwrap_or_else(|| panic!("{table}"));
    // `tps (commits/flush) seconds` in both columns.
    let secs: Vec<&str> = row
        .split('|')
        .filter(|c| c.trim().ends_with(" s"))
        .collect();
    assert_eq!(secs.len(), 2, "{row}");
}
