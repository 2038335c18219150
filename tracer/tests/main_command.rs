//! The main command end to end: a managed throwaway server (Debian's
//! stripped mariadbd and the symbolized fixture), an existing server found
//! by its socket, Ctrl-C in every phase, and bad input — each leaving no
//! server process and no temp dir behind.
mod common;

use std::{
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::*;
use serde_json::Value;

fn run_json(args: &[&str]) -> (Output, Vec<Value>) {
    let out = commitscope().args(args).output().expect("run commitscope");
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    (out, lines)
}

fn check<'a>(summary: &'a Value, counter: &str) -> Option<&'a Value> {
    summary["checks"]
        .as_array()?
        .iter()
        .find(|c| c["counter"] == counter)
}

/// `|ours - server| <= pct %` for one cross-check row.
fn assert_close(summary: &Value, counter: &str, pct: f64) {
    let c = check(summary, counter).unwrap_or_else(|| panic!("no {counter} row: {summary}"));
    let d = c["diff_pct"].as_f64().unwrap_or_else(|| panic!("{c}"));
    assert!(d.abs() <= pct, "{counter}: {c}");
}

#[test]
fn managed_server_with_binlog_agrees_with_its_counters() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = workdir();
    let csv = wd.path().join("../cs-main-run.csv");
    let csv = csv.to_str().unwrap().to_string();
    let (out, lines) = run_json(&[
        "--threads",
        "8",
        "--duration",
        "3",
        "--warmup",
        "1",
        "--json",
        "--csv",
        &csv,
        "--workdir",
        wd.path().to_str().unwrap(),
        "--server-option",
        "log_bin=ON",
        "--server-option",
        "sync_binlog=1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let s = of_type(&lines, "summary")[0];
    let txns = s["workload"]["txns"].as_u64().unwrap();
    assert!(txns > 100, "{s}");
    let t = &s["trace"];
    // Stripped Debian binary: commits counted at the server layer (with
    // the binlog on: its two-phase commit), in the measured window only
    // the workload's. The window edges are read a few microseconds apart
    // on each side, and commits in flight at an edge land on one side
    // only: 1 % + the client count is the slack.
    assert!(s["header"]["legend"]["fallback"].is_string(), "{s}");
    assert!(
        s["header"]["legend"]["n_write_source"]
            .as_str()
            .unwrap()
            .contains("log_and_order"),
        "{s}"
    );
    let srv = t["n_write"].as_u64().unwrap();
    let slack = txns / 100 + 8;
    assert!(srv.abs_diff(txns) <= slack, "srv commits {srv} vs {txns}");
    let n_flush = t["n_flush"].as_u64().unwrap();
    let cpf = s["commits_per_flush"].as_f64().unwrap();
    assert!((cpf - txns as f64 / n_flush as f64).abs() < 1e-9, "{s}");
    // The server's own counters over the same window.
    // Binlog_commits has the same window edges as the commits above:
    // 1 % + the client count (this machine's slower disk put 75 of 7,136
    // and 58 of 9,191 at the edges, over the 0.5 % once asked).
    let c = check(s, "Binlog_commits").unwrap_or_else(|| panic!("no Binlog_commits: {s}"));
    let (ours, server) = (c["ours"].as_u64().unwrap(), c["server"].as_u64().unwrap());
    assert!(
        ours.abs_diff(server) <= server / 100 + 8,
        "Binlog_commits: {c}"
    );
    assert_close(s, "Binlog_group_commits", 2.0);
    assert_close(s, "Innodb_data_fsyncs", 2.0);
    assert!(t["binlog_fsync"].as_u64().unwrap() > 0, "{t}");
    // Ticks: warmup marked; the measured ones add up to the summary.
    let ticks = of_type(&lines, "tick");
    assert!(ticks.len() >= 3, "{}", ticks.len());
    assert_eq!(ticks[0]["workload"]["warmup"], true);
    let measured: u64 = ticks
        .iter()
        .filter(|v| v["workload"]["warmup"] == false)
        .map(|v| v["workload"]["txns"].as_u64().unwrap())
        .sum();
    assert!(
        measured <= txns && measured + 2000 >= txns,
        "{measured} vs {txns}"
    );
    // The CSV: a header and one row per tick, same column count.
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows[0].starts_with("unix_time,elapsed_s"), "{}", rows[0]);
    assert_eq!(rows.len(), ticks.len() + 1, "{text}");
    let width = rows[0].split(',').count();
    assert!(rows.iter().all(|r| r.split(',').count() == width), "{text}");
    let _ = std::fs::remove_file(&csv);
    assert_clean(wd.path());
}

#[test]
fn symbolized_fixture_counts_exactly() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let wd = workdir();
    let bin = fix.join("bin/mariadbd");
    let (out, lines) = run_json(&[
        "--mysqld",
        bin.to_str().unwrap(),
        "--threads",
        "8",
        "--duration",
        "3",
        "--json",
        "--workdir",
        wd.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = of_type(&lines, "summary")[0];
    assert!(s["header"]["legend"]["fallback"].is_null(), "{s}");
    assert!(
        s["header"]["server"].as_str().unwrap().contains("10.11.18"),
        "{s}"
    );
    let t = &s["trace"];
    let txns = s["workload"]["txns"].as_u64().unwrap();
    let durable = t["durable"].as_u64().unwrap();
    // 10.11 skips log_write_up_to when another commit's flush covered it.
    assert!(
        durable > txns / 2 && durable <= txns + 20,
        "{durable} vs {txns}"
    );
    // One redo fsync per flush-function call. The window's end falls
    // between two map reads (counters, then fd stats): the one flush in
    // flight then (flushes are serialized) may be in one and not the other.
    let (n_flush, inside) = (
        t["n_flush"].as_u64().unwrap(),
        t["redo_fsync_in_flush"].as_u64().unwrap(),
    );
    assert!(n_flush.abs_diff(inside) <= 1, "{t}");
    assert_close(s, "Innodb_data_fsyncs", 2.0);
    assert_close(s, "Innodb_log_writes", 2.0);
    assert_clean(wd.path());
}

#[test]
fn existing_server_is_found_by_its_socket() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = system_server(&[]) else {
        return;
    };
    let flags = server.client_flags();
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend(["--threads", "4", "--duration", "2", "--json", "-v"]);
    let (out, lines) = run_json(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("SO_PEERCRED"), "{err}");
    let s = of_type(&lines, "summary")[0];
    assert_eq!(s["header"]["legend"]["pid"], server.pid(), "{s}");
    let txns = s["workload"]["txns"].as_u64().unwrap();
    assert!(s["trace"]["n_write"].as_u64().unwrap() >= txns, "{s}");
    // The server is the user's: still running afterwards.
    assert!(server.query("SELECT 1").is_ok());
}

/// Ctrl-C as soon as `-v` says the phase began; then nothing survives.
fn interrupt_during(phase: &str, extra: &[&str], want_code: i32) {
    signal_during(phase, extra, want_code, libc::SIGINT);
}

/// `sig` as soon as `-v` says the phase began; then nothing survives.
fn signal_during(phase: &str, extra: &[&str], want_code: i32, sig: i32) {
    let wd = workdir();
    let mut cmd = commitscope();
    if phase == "init datadir" {
        // The server's own init, not a copy of a kept datadir (0.2 s).
        cmd.env_remove(DATADIR_CACHE_VAR);
    }
    let mut child = cmd
        .args([
            "-v",
            "--threads",
            "50",
            "--workdir",
            wd.path().to_str().unwrap(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(child.stderr.take().unwrap());
    let seen = wait_for(&rx, &format!("] {phase} ..."));
    if phase == "run" {
        // Let a tick or two pass: Ctrl-C then ends the run with a summary.
        std::thread::sleep(Duration::from_millis(1500));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let out = child.wait_with_output().unwrap();
    // The reader thread may still hold the last lines: read to its EOF.
    let rest = rest_of(&rx);
    assert_eq!(
        out.status.code(),
        Some(want_code),
        "{phase}: {seen:?} {rest:?}"
    );
    if phase == "run" {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("ended: interrupted (Ctrl-C)"), "{text}");
    } else {
        assert!(
            rest.iter()
                .any(|l| l.contains(&format!("interrupted during {phase}"))),
            "{rest:?}"
        );
    }
    assert_clean(wd.path());
}

#[test]
fn ctrl_c_during_init_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    interrupt_during("init datadir", &[], 130);
}

#[test]
fn ctrl_c_during_load_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    // 50 x 20,000 rows: a load of several seconds.
    interrupt_during("load", &["--rows-per-thread", "20000"], 130);
}

#[test]
fn ctrl_c_during_run_prints_the_summary_and_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    interrupt_during("run", &[], 0);
}

/// The terminal went away (SIGHUP): cleaned up as for Ctrl-C, in every phase.
#[test]
fn sighup_in_every_phase_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    signal_in_every_phase(libc::SIGHUP);
}

/// `kill`, a service manager, a container runtime stopping us: SIGTERM
/// cleans up as Ctrl-C does, in every phase.
#[test]
fn sigterm_in_every_phase_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    signal_in_every_phase(libc::SIGTERM);
}

/// `sig` during init, load (a load of several seconds) and the run:
/// 130, 130, then the summary and 0; nothing left each time.
fn signal_in_every_phase(sig: i32) {
    signal_during("init datadir", &[], 130, sig);
    signal_during("load", &["--rows-per-thread", "20000"], 130, sig);
    signal_during("run", &[], 0, sig);
}

/// One line, exit 2, no panic, nothing left behind.
#[test]
fn bad_input_is_one_line_and_leaves_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let e = fails(&["--mysqld", "/nonexistent/mariadbd"]);
    assert!(
        e.contains("/nonexistent/mariadbd does not exist") && e.contains("--mysqld"),
        "{e}"
    );
    let e = fails(&["--mysqld", "/etc/passwd"]);
    assert!(e.contains("not an ELF executable"), "{e}");
    let e = fails(&["--mysqld", "/usr/bin/objdump"]);
    assert!(e.contains("is not a MySQL/MariaDB server"), "{e}");
    let e = fails(&["--server-option", "sync_binlog"]);
    assert!(e.contains("expected KEY=VALUE"), "{e}");
    let e = fails(&["--server-option", "datadir=/tmp/x"]);
    assert!(e.contains("sets datadir itself"), "{e}");
    // Unknown variable: the server's own words, at datadir creation.
    let e = fails(&["--server-option", "no_such_variable=1"]);
    assert!(
        e.contains("initialising the datadir failed") && e.contains("no_such_variable"),
        "{e}"
    );
    // Out of range where only the running server checks it.
    let e = fails(&["--server-option", "innodb_buffer_pool_size=1"]);
    assert!(
        e.contains("the server did not start") || e.contains("initialising"),
        "{e}"
    );
    let e = fails(&["--workdir", "/nonexistent/dir"]);
    assert!(e.contains("--workdir"), "{e}");
    let e = fails(&["--threads", "0"]);
    assert!(e.contains("--threads"), "{e}");
    let e = fails(&["--socket", "/tmp/x.sock", "--mysqld", "/usr/sbin/mariadbd"]);
    assert!(e.contains("--mysqld applies to the managed server"), "{e}");
}

#[test]
fn port_in_use_is_reported() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let e = fails(&[
        "--server-option",
        "skip-networking=0",
        "--server-option",
        "bind-address=127.0.0.1",
        "--server-option",
        &format!("port={port}"),
    ]);
    assert!(e.contains("the server did not start"), "{e}");
    assert!(e.to_lowercase().contains("in use"), "{e}");
}

#[test]
fn not_root_is_told_to_use_sudo_or_no_trace() {
    if !testkit::is_root() {
        testkit::skip("needs root to drop to nobody with setpriv");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_commitscope"))
        .args(["--threads", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("needs root") && err.contains("--no-trace"),
        "{err}"
    );
}

#[test]
fn study_runs_its_four_scenarios_on_the_fixture() {
    // The study's ordering compares batching: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let wd = workdir();
    study_in_order(&fix.join("bin/mariadbd"), wd.path());
    assert_clean(wd.path());
}
