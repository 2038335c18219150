//! `commitscope trace` on real servers started by the test harness: Debian's
//! stripped mariadbd (server-layer fallback) and the symbolized 10.11 build
//! from ../shared/fixtures (exact probes).
mod common;

use std::path::Path;

use common::*;
use testkit::Server;

const CLIENTS: u32 = 8;
const PER_CLIENT: u32 = 400;

fn prepare(s: &Server) {
    s.query(
        "CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
         INSERT INTO cs_test.tb SELECT seq, 0 FROM cs_test.seq_1_to_100",
    )
    .expect("prepare schema");
}

fn start(binary: &Path, share: Option<&Path>) -> Option<Server> {
    match Server::start(binary, share, &[]) {
        Ok(s) => Some(s),
        Err(e) => panic!("cannot start {}: {e}", binary.display()),
    }
}

#[test]
fn debian_stripped_mariadbd_falls_back_to_server_layer() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return;
    };
    let Some(server) = start(&bin, None) else {
        return;
    };
    prepare(&server);
    // The syscall tracepoints (auto, on this kernel) and the C library's
    // wrappers (`--fsync-probe libc`) must both agree with the server.
    for args in [&["-v"][..], &["-v", "--fsync-probe", "libc"][..]] {
        let tracer = Tracer::start(server.pid(), args);
        let attached = std::time::Instant::now();
        let fsyncs_before = server.status("Innodb_data_fsyncs");
        let lead = attached.elapsed();
        let commits = server.drive_updates("cs_test", CLIENTS, PER_CLIENT);
        let fsyncs_after = server.status("Innodb_data_fsyncs");
        let read = std::time::Instant::now();
        let stderr = tracer.stderr_lines.clone();
        let lines = tracer.finish(true);
        // The probes' time outside the status window (reads and stops
        // take longer on a busy machine).
        let outside = lead + read.elapsed();
        let s = summary(&lines);
        let t = &s["totals"];
        let ctx = format!("{args:?}: stderr {stderr:?} summary {s}");
        if args.contains(&"libc") {
            assert_eq!(s["legend"]["fsync_probe"], "libc", "{ctx}");
            assert!(t["redo_writes"].as_u64() > Some(0), "{ctx}");
        }

        let fallback = format!(
            "commitscope: log_write_up_to not found in {} (stripped, no debug file): counting commits at ha_commit_one_phase + MYSQL_BIN_LOG::log_and_order; install the -dbgsym package for exact n_write",
            bin.display()
        );
        assert!(stderr.contains(&fallback), "{ctx}");
        assert_eq!(
            s["legend"]["n_write_source"], "ha_commit_one_phase + MYSQL_BIN_LOG::log_and_order",
            "{ctx}"
        );
        assert!(s["legend"]["fallback"].is_string(), "{ctx}");
        assert!(
            t["durable"].is_null(),
            "durable must not be claimed in fallback: {ctx}"
        );
        assert_eq!(s["end"], "interrupted", "{ctx}");
        // Every autocommit UPDATE commits once through ha_commit_one_phase.
        assert_eq!(t["n_write"].as_u64(), Some(commits), "{ctx}");
        // n_flush falls back to the kernel's redo fdatasyncs.
        assert_eq!(t["n_flush"], t["redo_fsync"], "{ctx}");
        let redo = t["redo_fsync"].as_u64().unwrap();
        let data = t["data_fsync"].as_u64().unwrap();
        assert!(redo > 0 && redo <= commits, "{ctx}");
        // Innodb_data_fsyncs counts every InnoDB fsync (redo and data files).
        // Our window opens before the first status read and closes after
        // the second, so an idle-time background log flush (about one per
        // second in 10.11) may fall in ours only: allow 2, and one more
        // per second of that margin.
        let server_delta = fsyncs_after - fsyncs_before;
        let ours = redo + data;
        let margin = 2 + outside.as_secs();
        assert!(
            ours >= server_delta && ours <= server_delta + margin,
            "ours {ours} (redo {redo} + data {data}) vs Innodb_data_fsyncs delta {server_delta} (+{margin} allowed, {outside:?} outside its window): {ctx}"
        );
        // The verbose lines say what was attached and that fsync fell back or not.
        assert!(
            stderr
                .iter()
                .any(|l| l.contains("write uprobe") && l.contains("ha_commit_one_phase")),
            "{ctx}"
        );
        assert!(
            stderr.iter().any(|l| l.contains("commitscope: fsync:")),
            "{ctx}"
        );
    }
}

/// One traced window over `clients` x `per_client` updates.
fn traced_window(
    server: &Server,
    exe: &Path,
    clients: u32,
    per_client: u32,
) -> (u64, serde_json::Value) {
    // By binary path: the one running process of that executable.
    let tracer = Tracer::start_with(&["--mysqld", exe.to_str().unwrap()]);
    let commits = server.drive_updates("cs_test", clients, per_client);
    // Let the server go idle so no flush straddles the final read.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stderr = tracer.stderr_lines.clone();
    let lines = tracer.finish(true);
    assert!(
        !stderr.iter().any(|l| l.contains("not found")),
        "{stderr:?}"
    );
    (commits, summary(&lines).clone())
}

#[test]
fn symbolized_mariadbd_counts_exact_writes_and_flushes() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    // Its own copy: the windows find the server by its binary's path.
    let (_copy, exe) = own_copy(&fix.join("bin/mariadbd"));
    let Some(server) = start(&exe, Some(&fix.join("share"))) else {
        return;
    };
    prepare(&server);

    // Study scenario a: one client. Every commit must call log_write_up_to
    // durably (plus the master thread's once-a-second calls): >=.
    let (commits, s) = traced_window(&server, &exe, 1, 1000);
    let t = &s["totals"];
    let ctx = format!("single client: summary {s}");
    assert_eq!(s["legend"]["pid"], server.pid(), "{ctx}");
    assert_eq!(s["legend"]["profile"], "mariadb-10.8+", "{ctx}");
    assert_eq!(s["legend"]["server"], "MariaDB 10.11.18", "{ctx}");
    assert_eq!(s["legend"]["n_write_source"], "log_write_up_to", "{ctx}");
    assert_eq!(s["legend"]["n_flush_source"], "log_t::flush", "{ctx}");
    let durable = t["durable"].as_u64().unwrap();
    assert!(
        durable >= commits,
        "durable {durable} < commits {commits}: {ctx}"
    );
    assert_eq!(t["n_flush"], t["redo_fsync_in_flush"], "{ctx}");

    // Eight clients: group commit. 10.11's trx_flush_log_if_needed returns
    // without calling log_write_up_to when another commit's flush already
    // covered its LSN (STUDY.md §3), so durable may fall below commits here;
    // the flush count is exact either way.
    let (commits, s) = traced_window(&server, &exe, CLIENTS, PER_CLIENT);
    let t = &s["totals"];
    let ctx = format!("{CLIENTS} clients: summary {s}");
    let durable = t["durable"].as_u64().unwrap();
    let n_flush = t["n_flush"].as_u64().unwrap();
    assert!(
        durable > 0 && durable <= commits + 50,
        "durable {durable}, commits {commits}: {ctx}"
    );
    assert!(n_flush > 0 && n_flush < durable, "{ctx}");
    // Every log_t::flush issues exactly one redo fdatasync; the kernel
    // sees them all. Other redo syncs (checkpoint header writes call
    // log_t::file::flush directly) are counted apart.
    assert_eq!(
        t["n_flush"], t["redo_fsync_in_flush"],
        "log_t::flush calls vs kernel redo fdatasyncs inside it: {ctx}"
    );
    let outside = t["redo_fsync"].as_u64().unwrap() - n_flush;
    assert!(
        outside <= 3,
        "redo syncs outside log_t::flush in a few seconds: {ctx}"
    );
    // Group commit happened: more than one commit per flush with 8 clients.
    assert!(t["write_per_flush"].as_f64().unwrap() > 1.0, "{ctx}");
}

/// `commitscope workload` on SIGINT: stops its workers, prints the
/// summary, exits 0, and leaves the server with exactly what it reported.
#[test]
fn workload_stops_cleanly_on_sigint() {
    let _lane = testkit::lane::shared();
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return;
    };
    let Some(server) = start(&bin, None) else {
        return;
    };
    let child = commitscope()
        .args(["workload", "--json", "--threads", "4"])
        .args(server.client_flags())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "summary", "{text}");
    let total = last["total_txns"].as_u64().unwrap();
    assert!(total > 0, "{last}");
    let sum: u64 = server
        .query("SELECT SUM(c) FROM commitscope.tb")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(sum, total, "{last}");
}
