//! TPC-C through the `commitscope` binary: the traced main command prints
//! tpcc-mysql's interval lines with the probes' figures under them and a
//! report that parses; Ctrl-C during a load leaves it marked incomplete,
//! `check` refuses it, and the next run reloads it.
mod common;

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use common::*;
use testkit::Server;

fn tpmc(stdout: &str) -> f64 {
    workload::tpcc::report::parse_tpmc(stdout).unwrap_or_else(|| panic!("no <TpmC>: {stdout}"))
}

#[test]
fn traced_tpcc_run_prints_tpcc_mysql_lines_and_trace_lines() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = tempfile::Builder::new()
        .prefix("cs-tpcc-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (text, err) = run_ok(commitscope().args([
        "--workload",
        "tpcc",
        "-w",
        "1",
        "--threads",
        "4",
        "--warmup",
        "1",
        "--duration",
        "4",
        "--report-interval",
        "1",
        "--workdir",
        wd.path().to_str().unwrap(),
    ]));
    assert!(err.contains("tpcc: loaded"), "{err}");
    let lines: Vec<&str> = text.lines().collect();
    let intervals: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            l.split(", ").count() == 6
                && l.split(',')
                    .next()
                    .is_some_and(|n| n.parse::<u64>().is_ok())
        })
        .map(|(i, _)| i)
        .collect();
    assert!(intervals.len() >= 3, "{text}");
    for &i in &intervals {
        let next = lines.get(i + 1).copied().unwrap_or_default();
        assert!(
            next.starts_with("  trace: srv_commits "),
            "{next:?}\n{text}"
        );
        let n_flush: u64 = next
            .split("n_flush ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{next}"));
        assert!(n_flush > 0, "{next}");
    }
    assert!(tpmc(&text) > 0.0);
    assert!(text.contains("MEASURING START."), "{text}");
    assert!(
        text.contains("<Constraint Check> (all must be [OK])"),
        "{text}"
    );
    assert!(
        std::fs::read_dir(wd.path()).unwrap().next().is_none(),
        "temp dir left"
    );
}

fn one(s: &Server, sql: &str) -> String {
    s.query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .trim()
        .to_string()
}

/// Starts `commitscope load`, sends SIGINT once `count` (a query) is
/// above 0, and returns how it ended. A load that ends first, or that
/// never gets there in 300 s, fails the test with its stderr (and, for
/// the latter, what the server was doing).
fn interrupt_load(srv: &Server, db: &[&str], conn: &[&str], count: &str) -> std::process::Output {
    let mut child = commitscope()
        .arg("load")
        .args(db)
        .args(conn)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let n = srv.query(count).unwrap_or_default();
        if n.trim().parse::<u64>().unwrap_or(0) > 0 {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the load ended before {count} was above 0: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if t0.elapsed() > Duration::from_secs(300) {
            // What the server was doing, for the failure message.
            let busy = srv
                .query("SELECT ID, TIME, STATE, LEFT(INFO, 80) FROM information_schema.PROCESSLIST")
                .unwrap_or_else(|e| e);
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            let out = child.wait_with_output().unwrap();
            panic!(
                "{count} still 0 after 300 s of loading\nprocesslist:\n{busy}\nload's stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait_with_output().unwrap()
}

#[test]
fn interrupted_load_is_marked_incomplete_and_reloaded() {
    let _lane = testkit::lane::shared();
    let Some(srv) = system_server(&[]) else {
        return;
    };
    let flags = srv.client_flags();
    let conn: Vec<&str> = flags.iter().map(String::as_str).collect();
    // One warehouse: the reload below loads it all again.
    let db = ["--workload", "tpcc", "--database", "tpcc_int", "-w", "1"];
    // Interrupt once order lines are going in (a LOAD DATA shows no row
    // until its commit: the statement itself is the earlier sign).
    let out = interrupt_load(
        &srv,
        &db,
        &conn,
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE ID <> CONNECTION_ID() AND DB = 'tpcc_int' AND INFO LIKE '%INTO%order_line%'",
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("load was interrupted") && last.contains("marked incomplete"),
        "{err}"
    );
    assert_eq!(
        one(&srv, "SELECT complete FROM tpcc_int._commitscope_tpcc"),
        "0"
    );

    // check refuses it, in one line.
    let out = commitscope()
        .arg("check")
        .args(db)
        .args(&conn)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("did not finish"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // The next run reloads it, says why, and runs.
    let (text, err) = run_ok(
        commitscope()
            .args(["workload", "--threads", "2", "--duration", "2"])
            .args(db)
            .args(&conn),
    );
    assert!(err.contains("an earlier load did not finish"), "{err}");
    assert_eq!(
        one(&srv, "SELECT complete FROM tpcc_int._commitscope_tpcc"),
        "1"
    );
    assert!(tpmc(&text) > 0.0);
    run_ok(commitscope().arg("check").args(db).args(&conn));
}

#[test]
fn interrupted_load_resumes_at_the_first_unfinished_warehouse() {
    let _lane = testkit::lane::shared();
    let Some(srv) = system_server(&["--innodb-buffer-pool-size=512M"]) else {
        return;
    };
    let flags = srv.client_flags();
    let conn: Vec<&str> = flags.iter().map(String::as_str).collect();
    // Two warehouses loaded one unit at a time: the second's customers,
    // the last unit, are still loading when the first is recorded (four
    // at a time finish both at once). Three warehouses four at a time
    // held a busy suite's lane for 126 s.
    let db = ["--workload", "tpcc", "--database", "tpcc_res", "-w", "2"];
    let one_at_a_time = [&db[..], &["--load-parallel", "1"]].concat();
    // Interrupt as soon as the first warehouse is recorded as loaded.
    let out = interrupt_load(
        &srv,
        &one_at_a_time,
        &conn,
        "SELECT COUNT(*) FROM tpcc_res._commitscope_tpcc_done WHERE w > 0",
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{err}");
    let kept: u32 = one(
        &srv,
        "SELECT COUNT(*) FROM tpcc_res._commitscope_tpcc_done WHERE w > 0",
    )
    .parse()
    .unwrap();
    assert_eq!(kept, 1, "{kept} warehouses recorded: {err}");

    // The next load continues: says how many it keeps, and ends exact.
    let (text, err) = run_ok(commitscope().arg("load").args(db).args(&conn));
    assert!(
        err.contains(&format!("resuming: {kept} of 2 warehouses already loaded")),
        "{err}"
    );
    let ol = one(&srv, "SELECT SUM(o_ol_cnt) FROM tpcc_res.orders");
    for (table, rows) in [
        ("warehouse", "2"),
        ("district", "20"),
        ("customer", "60000"),
        ("history", "60000"),
        ("orders", "60000"),
        ("new_orders", "18000"),
        ("item", "100000"),
        ("stock", "200000"),
        ("order_line", ol.as_str()),
    ] {
        assert_eq!(
            one(&srv, &format!("SELECT COUNT(*) FROM tpcc_res.{table}")),
            rows,
            "{table}: {text}"
        );
    }
    assert_eq!(
        one(&srv, "SELECT complete FROM tpcc_res._commitscope_tpcc"),
        "1"
    );
    run_ok(commitscope().arg("check").args(db).args(&conn));
}
