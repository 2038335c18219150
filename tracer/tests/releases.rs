//! The servers users run today, met for real: Debian 11's MariaDB 10.5 and
//! Debian 13's 11.8, stock and stripped, each running with its own
//! libraries from the cache that `cargo xtask servers` fills (a test fills
//! it when empty), and the symbolized 10.5 build from ../shared/fixtures
//! in exact mode. Debian 12's 10.11 has its own tests (servers.rs).
mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use testkit::{stock, Server};

/// The stock server of `series` ("10.5", "11.8"), fetched when the cache
/// is empty. A fetch that fails fails the test: the suite needs it.
fn stock_server(series: &str) -> stock::StockServer {
    let r = stock::Release::of_series(series).expect("a known series");
    stock::ensure(r, &mut |l| eprintln!("stock servers: {l}"))
        .unwrap_or_else(|e| panic!("MariaDB {series} from Debian {}: {e}", r.debian))
}

/// The share directory holding a stock server's messages and SQL.
fn stock_share(s: &stock::StockServer) -> PathBuf {
    s.share().expect("the package's share directory")
}

/// `cs_test.tb` with ids 1..=100, made without the sequence engine (the
/// 10.5 fixture is built without it).
fn prepare(s: &Server) {
    s.query(
        "CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
         INSERT INTO cs_test.tb WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i, 0 FROM n",
    )
    .expect("prepare schema");
}

/// The 10.5 symbolized build: None (having said why) without the
/// fixture.
fn fixture_10_5() -> Option<PathBuf> {
    let fix = testkit::symbols_fixture_10_5();
    if fix.is_none() {
        testkit::skip("../shared/fixtures/mariadb-10.5.23-symbols is absent");
    }
    fix
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The main command's managed server under `--mysqld`: every client
/// committed, the cross-check close, the version named. Returns the
/// summary.
fn managed(mysqld: &Path, threads: u32, version_prefix: &str) -> Value {
    let wd = workdir();
    let out = commitscope()
        .args(["--mysqld", mysqld.to_str().unwrap()])
        .args(["--threads", &threads.to_string(), "--duration", "5"])
        .args(["--json", "--workdir", wd.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{threads} clients: {err}");
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    let s = lines.last().unwrap().clone();
    let ctx = format!("{} {threads} clients: {s} {err}", mysqld.display());
    assert_eq!(s["type"], "summary", "{ctx}");
    let server = s["header"]["legend"]["server"].as_str().unwrap_or("");
    assert!(server.starts_with(version_prefix), "{ctx}");
    let per: Vec<u64> = s["workload"]["client_commits"]
        .as_array()
        .unwrap_or_else(|| panic!("no client_commits: {ctx}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), threads as usize, "{ctx}");
    assert!(
        per.iter().all(|&c| c > 0),
        "a client never committed: {ctx}"
    );
    assert_eq!(s["workload"]["errors"], 0, "{ctx}");
    // The server's own counters over the same window.
    let checks = s["checks"].as_array().unwrap();
    assert!(!checks.is_empty(), "no cross-check: {ctx}");
    for c in checks {
        let d = c["diff_pct"].as_f64().unwrap_or(0.0);
        // The server's counters also count its background writes and
        // flushes that fall inside the window's two reads: a few at the
        // edges (2 fsyncs on 1,645 in CI's stop 64, 1 write on 746 on a
        // busy host), as in the symbolized 10.5 test below.
        let edge = (c["ours"].as_i64().unwrap_or(0) - c["server"].as_i64().unwrap_or(0)).abs();
        assert!(d.abs() <= 0.1 || edge <= 5, "{}: {c}: {ctx}", c["counter"]);
    }
    assert_clean(wd.path());
    s
}

#[test]
fn stock_10_5_and_11_8_run_managed_under_the_main_command() {
    let Some(_lane) = root_shared() else {
        return;
    };
    for (series, version) in [("10.5", "MariaDB 10.5."), ("11.8", "MariaDB 11.8.")] {
        let st = stock_server(series);
        for threads in [8, 64] {
            let s = managed(&st.server, threads, version);
            // Stripped: commits at the server layer.
            assert!(s["header"]["legend"]["fallback"].is_string(), "{s}");
        }
    }
}

/// `trace --pid` on each stock server: server-layer counts equal to the
/// commits the clients made.
#[test]
fn stock_10_5_and_11_8_are_traced_by_pid() {
    let Some(_lane) = root_shared() else {
        return;
    };
    for series in ["10.5", "11.8"] {
        let st = stock_server(series);
        let server = Server::start(&st.server, Some(&stock_share(&st)), &[])
            .unwrap_or_else(|e| panic!("start MariaDB {series}: {e}"));
        prepare(&server);
        let tracer = Tracer::start(server.pid(), &[]);
        let commits = server.drive_updates("cs_test", 8, 300);
        let lines = tracer.finish(true);
        let s = summary(&lines);
        let ctx = format!("MariaDB {series}: {s}");
        assert!(
            s["legend"]["server"]
                .as_str()
                .is_some_and(|v| v.starts_with(&format!("MariaDB {series}."))),
            "{ctx}"
        );
        assert!(s["legend"]["fallback"].is_string(), "{ctx}");
        assert_eq!(s["totals"]["n_write"].as_u64(), Some(commits), "{ctx}");
        assert_eq!(s["totals"]["n_flush"], s["totals"]["redo_fsync"], "{ctx}");
    }
}

/// A server the table does not know, a binary whose libraries are
/// missing: one line each, exit 2, no hang.
#[test]
fn old_servers_and_missing_libraries_are_one_line() {
    if needs_root() {
        return;
    }
    let st = stock_server("10.5");
    let d = tempfile::tempdir().unwrap();
    // The stock binary without its libraries: its loader path points
    // at a root that is not there.
    let bin = d.path().join("mariadbd");
    std::fs::copy(&st.server, &bin).unwrap();
    run(std::process::Command::new("patchelf")
        .args(["--set-rpath", "/nonexistent", "--set-interpreter"])
        .arg("/lib64/ld-linux-x86-64.so.2")
        .arg(&bin));
    let t0 = std::time::Instant::now();
    let e = fails(&["--mysqld", bin.to_str().unwrap()]);
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        e.contains("cannot run here")
            && e.contains("error while loading shared libraries: libsnappy.so.1"),
        "the loader's message: {e}"
    );

    // 10.3: older than any row of the profile table (an ELF that answers
    // `--version` as Debian 10's server does).
    std::fs::create_dir(d.path().join("old")).unwrap();
    let src = d.path().join("old.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void) { puts(\"mariadbd  Ver 10.3.39-MariaDB-0+deb10u2 for debian-linux-gnu on x86_64 (Debian 10)\"); return 0; }\n",
    )
    .unwrap();
    let old = d.path().join("old/mariadbd");
    run(std::process::Command::new("gcc")
        .arg(&src)
        .arg("-o")
        .arg(&old));
    let e = fails(&["--mysqld", old.to_str().unwrap()]);
    assert!(
        e.contains("is MariaDB 10.3.39, older than any server commitscope knows")
            && e.contains("MariaDB 10.5.0 and later"),
        "{e}"
    );
}

/// The 10.5 fixture: `n_write`, `durable` and `n_flush` exact at
/// `log_write_up_to` and `log_t::file::flush`, against the server's own
/// counters.
#[test]
fn symbolized_10_5_counts_exact_writes_and_flushes() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = fixture_10_5() else {
        return;
    };
    let exe = fix.join("bin/mariadbd");
    let server = Server::start(&exe, Some(&fix.join("share")), &[])
        .unwrap_or_else(|e| panic!("start the 10.5 fixture: {e}"));
    prepare(&server);
    for (clients, per) in [(1, 1000), (8, 400)] {
        let tracer = Tracer::start(server.pid(), &["-v"]);
        let fsyncs_before = server.status("Innodb_data_fsyncs");
        let commits = server.drive_updates("cs_test", clients, per);
        // Idle, so no flush straddles the end.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let fsyncs_after = server.status("Innodb_data_fsyncs");
        let stderr = tracer.stderr_lines.clone();
        let lines = tracer.finish(true);
        let s = summary(&lines);
        let t = &s["totals"];
        let ctx = format!("{clients} clients: {s} {stderr:?}");
        assert_eq!(s["legend"]["profile"], "mariadb-10.5", "{ctx}");
        assert_eq!(s["legend"]["server"], "MariaDB 10.5.23", "{ctx}");
        assert_eq!(s["legend"]["n_write_source"], "log_write_up_to", "{ctx}");
        assert_eq!(s["legend"]["n_flush_source"], "log_t::file::flush", "{ctx}");
        assert!(s["legend"]["fallback"].is_null(), "{ctx}");
        let durable = t["durable"].as_u64().unwrap();
        let n_flush = t["n_flush"].as_u64().unwrap();
        // 10.5 calls log_write_up_to durably for every commit (plus the
        // master thread's background calls).
        assert!(
            durable >= commits && durable <= commits + 50,
            "durable {durable}, commits {commits}: {ctx}"
        );
        // Every flush but the checkpoint's answers a durable write
        // request: 10.5's `log_write_checkpoint_info` calls
        // `log_t::file::flush` itself, without `log_write_up_to`, and
        // the page cleaner may checkpoint inside the window (at most
        // about once a second: 5 over these 1-2 s windows). At one
        // client each commit flushes, so one checkpoint puts n_flush
        // above durable.
        assert!(n_flush > 0 && n_flush <= durable + 5, "{ctx}");
        if clients > 1 {
            assert!(t["write_per_flush"].as_f64().unwrap() > 1.0, "{ctx}");
        }
        // Every InnoDB fsync the server counts, the kernel saw (the
        // window opens a little before the first read and closes a
        // little after the second: allow 5 background flushes, as for
        // the checkpoints above; a slow host once put 3 there).
        let server_delta = fsyncs_after - fsyncs_before;
        let ours = t["redo_fsync"].as_u64().unwrap() + t["data_fsync"].as_u64().unwrap();
        assert!(
            ours >= server_delta && ours <= server_delta + 5,
            "ours {ours} vs Innodb_data_fsyncs delta {server_delta}: {ctx}"
        );
    }
}

/// `study` on the 10.5 fixture: the four scenarios in order, one client
/// about 1:1, fifty batching.
#[test]
fn study_orders_its_scenarios_on_10_5() {
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(fix) = fixture_10_5() else {
        return;
    };
    let wd = workdir();
    study_in_order(&fix.join("bin/mariadbd"), wd.path());
    assert_clean(wd.path());
}

/// The 10.5 fixture against a peer: bpftrace's uprobes on the same two
/// functions, attached before commitscope and detached after it, over
/// an update load that starts after both attached and ends before either
/// detaches. Outside the load the server is idle but for its master
/// thread's once-a-second `log_write_up_to` (and a flush when there is
/// something to flush): bpftrace's extra calls are bounded by those.
#[test]
fn symbolized_10_5_agrees_with_bpftrace() {
    use std::{
        process::Stdio,
        time::{Duration, Instant},
    };
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = fixture_10_5() else {
        return;
    };
    if !has_tool("bpftrace") {
        testkit::skip("no bpftrace: run `cargo xtask setup` (installs it)");
        return;
    }
    let exe = fix.join("bin/mariadbd");
    let server = Server::start(&exe, Some(&fix.join("share")), &[])
        .unwrap_or_else(|e| panic!("start the 10.5 fixture: {e}"));
    prepare(&server);
    let pid = server.pid();
    let e = exe.display();
    let script = format!(
        "uprobe:{e}:_Z15log_write_up_tombb /pid == {pid}/ {{ @w = count(); if (arg1 & 0xff) {{ @d = count(); }} }}\n\
         uprobe:{e}:_ZN5log_t4file5flushEv /pid == {pid}/ {{ @f = count(); }}\n"
    );
    /// Killed on drop: a failed assertion leaves no bpftrace behind.
    struct Peer(std::process::Child);
    impl Drop for Peer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Line-buffered: its "Attaching" line must arrive while it runs.
    let mut bpf = Peer(
        testkit::command("bpftrace")
            .args(["-B", "line", "-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lines_of(bpf.0.stdout.take().unwrap());
    let err = lines_of(bpf.0.stderr.take().unwrap());
    wait_for(&out, "Attaching 2 probes");
    let t_bpf = Instant::now();
    let tracer = Tracer::start(pid, &[]);
    let gap_in = t_bpf.elapsed();
    let commits = server.drive_updates("cs_test", 8, 400);
    std::thread::sleep(Duration::from_millis(300));
    let t_end = Instant::now();
    let lines = tracer.finish(true);
    let gap_out = t_end.elapsed();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(bpf.0.id() as i32, libc::SIGINT) };
    let _ = bpf.0.wait();
    let said: Vec<String> = rest_of(&out).into_iter().chain(rest_of(&err)).collect();
    let map = |name: &str| -> u64 {
        said.iter()
            .find_map(|l| l.strip_prefix(&format!("@{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let (w, d, f) = (map("w"), map("d"), map("f"));
    let t = &summary(&lines)["totals"];
    let ours = |k: &str| t[k].as_u64().unwrap();
    // Background calls in the gaps: one a second, plus one at each edge.
    let slack = (gap_in + gap_out).as_secs() + 2;
    let ctx = format!(
        "bpftrace n_write {w} durable {d} n_flush {f}; ours {t}; commits {commits}; gaps {gap_in:?} + {gap_out:?}; {said:?}"
    );
    assert!(w >= commits, "{ctx}");
    for (peer, k) in [(w, "n_write"), (d, "durable"), (f, "n_flush")] {
        let o = ours(k);
        assert!(o <= peer && peer - o <= slack, "{k}: {ctx}");
    }
    // The figures, for whoever runs it with --nocapture.
    eprintln!(
        "10.5 fixture vs bpftrace: n_write {}/{w} durable {}/{d} n_flush {}/{f} (ours/bpftrace), commits {commits}, gaps {:.2} s",
        ours("n_write"),
        ours("durable"),
        ours("n_flush"),
        (gap_in + gap_out).as_secs_f64()
    );
}
