//! The probe tiers on real servers: light (per redo flush, commits from
//! the server's counter) against exact on the same window, what light
//! leaves attached in the kernel, exact windows that come and go, and
//! the light tier in `trace` and the main command.
//! Each test lists the perf-event probes of its own exporter or tracer
//! (`/proc/<pid>/fdinfo`) and counts its own server's flushes: nothing
//! another test does moves them (a shared lane).
mod common;
mod exporter_kit;

use std::time::{Duration, Instant};

use common::*;
use exporter_kit::*;
use testkit::bpf_links::perf_probes;

/// Waits until the named series of `labels` stop moving for 1.5 s.
fn settled(e: &Exporter, names: &[&str], labels: &[&str]) -> String {
    let mut last = None;
    let mut still = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        let t = e.metrics();
        let now: Vec<Option<f64>> = names.iter().map(|n| sample(&t, n, labels)).collect();
        if last.as_ref() != Some(&now) {
            last = Some(now);
            still = Instant::now();
        } else if still.elapsed() >= Duration::from_millis(1500) {
            return t;
        }
    }
    panic!("the exporter's counts kept moving for 20 s");
}

/// The light tier's commits, by the server's own counter.
const COMMITS: &str = "commitscope_status_commits_total";

/// An exporter on `server` in its default tier (light; no scheduled
/// window; the root login over the socket), once it is attached and its
/// commit counter's series is there (a busy machine may take a while to
/// log in), with the server's label.
fn light_exporter(server: &testkit::Server) -> (Exporter, String) {
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&[
        "--pid",
        &pid,
        "--window-every",
        "0",
        "--defaults-file",
        "/dev/null",
    ]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let l = label(server);
    until(
        Duration::from_secs(60),
        "the commit counter's series",
        || sample(&e.metrics(), COMMITS, &[&l]).is_some(),
    );
    (e, l)
}

#[test]
fn light_counts_flushes_and_syncs_as_exact_does_and_commits_by_the_counter() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let bin = testkit::symbols_fixture().unwrap().join("bin/mariadbd");
    let (e, l) = light_exporter(&server);
    let names = ["commitscope_redo_flushes_total", COMMITS];
    // The window's edges with the server frozen, as in exporter.rs: its
    // background threads cannot fall between a read and an attach.
    let freeze = |sig: i32| {
        // SAFETY: signalling the test's own server by pid.
        unsafe { libc::kill(server.pid() as i32, sig) };
        std::thread::sleep(Duration::from_millis(200));
    };
    settled(&e, &names, &[&l]);
    freeze(libc::SIGSTOP);
    let tracer = Tracer::start(server.pid(), &[]);
    let base = e.metrics();
    freeze(libc::SIGCONT);
    let commits = server.drive_updates("cs_test", 4, 300);
    settled(&e, &names, &[&l]);
    let light_probes = perf_probes(e.child.id());
    freeze(libc::SIGSTOP);
    let after = e.metrics();
    let lines = tracer.finish(true);
    freeze(libc::SIGCONT);
    let t = &summary(&lines)["totals"];
    let d = |n: &str, ls: &[&str]| {
        sample(&after, n, ls).unwrap_or_else(|| panic!("{n} {ls:?}: {after}")) as u64
            - sample(&base, n, ls).unwrap_or(0.0) as u64
    };
    let ctx = format!("trace totals {t}\nexporter at the start:\n{base}\nat the end:\n{after}");
    assert_eq!(Some(d(names[0], &[&l])), t["n_flush"].as_u64(), "{ctx}");
    for (class, field) in [
        ("redo", "redo_fsync"),
        ("binlog", "binlog_fsync"),
        ("data", "data_fsync"),
        ("other", "other_fsync"),
    ] {
        let c = format!("class=\"{class}\"");
        assert_eq!(
            Some(d("commitscope_fsyncs_total", &[&l, &c])),
            t[field].as_u64(),
            "{class} fsyncs: {ctx}"
        );
    }
    let info_line = after
        .lines()
        .find(|x| x.starts_with("commitscope_probe_info{") && x.contains(&l))
        .unwrap_or_default()
        .to_string();
    let on_libc = info_line.contains("fsync_probe=\"libc\"");
    if on_libc {
        // On the C library light probes the syncs alone (a write probe
        // would be one more trap on the flush's path): no write series.
        assert!(!after.contains("commitscope_writes_total{"), "{ctx}");
    } else {
        assert_eq!(
            Some(d("commitscope_writes_total", &[&l, "class=\"redo\""])),
            t["redo_writes"].as_u64(),
            "{ctx}"
        );
    }
    // Commits by Handler_commit within 0.5 % of what the clients sent.
    let counted = d(names[1], &[&l, "counter=\"Handler_commit\""]);
    let off = (counted as f64 - commits as f64).abs() / commits as f64;
    assert!(
        off <= 0.005,
        "{counted} commits counted, {commits} sent: {ctx}"
    );
    // Nothing per commit: no write series, and no probe at the write
    // function in the kernel's list.
    assert!(
        !after.contains("commitscope_log_write_requests_total{"),
        "{after}"
    );
    assert_eq!(
        sample(&after, "commitscope_probe_info", &[&l, "tier=\"light\""]),
        Some(1.0),
        "{after}"
    );
    let write_at = ProbePoint::of(&bin, "write");
    assert!(
        !light_probes.iter().any(|p| write_at.holds(p)),
        "a probe at the write function {}: {light_probes:#?}",
        write_at.file
    );
    // This host has neither fentry nor kprobes: light counts the syncs
    // in the server's C library, never by a syscall tracepoint
    // (which would slow every syscall on the host).
    assert!(
        !light_probes.iter().any(|p| p.kind == "tracepoint"),
        "a tracepoint in the light set: {light_probes:#?}"
    );
    // One trap per flush and per sync: no return probe anywhere in the
    // light set (the flush function and the syncs counted at entry).
    assert!(
        !light_probes.iter().any(|p| p.kind.starts_with("uretprobe")),
        "a return probe in the light set: {light_probes:#?}"
    );
    if on_libc {
        // fsync and fdatasync, at entry, in the C library the server
        // maps; nothing else there.
        let in_libc = light_probes
            .iter()
            .filter(|p| p.kind.starts_with('u') && p.at.contains("/map_files/"))
            .count();
        assert_eq!(in_libc, 2, "{light_probes:#?}");
        // Counted, not timed: no duration series.
        assert!(
            !after.contains("commitscope_fsync_duration_seconds_bucket{"),
            "{ctx}"
        );
    }
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
}

#[test]
fn windows_come_and_go_exact_and_the_light_counters_never_decrease() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("promtool") && testkit::skip("no promtool: run `cargo xtask setup`") {
        return;
    }
    let Some(server) = symbols_server() else {
        return;
    };
    let bin = testkit::symbols_fixture().unwrap().join("bin/mariadbd");
    let write_at = ProbePoint::of(&bin, "write");
    let pid = server.pid().to_string();
    let started = Instant::now();
    let mut e = Exporter::start(&[
        "--pid",
        &pid,
        "--window",
        "3",
        "--window-every",
        "6",
        "--defaults-file",
        "/dev/null",
    ]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let me = e.child.id();
    let l = label(&server);
    let light_set = perf_probes(me).len();
    let in_window = || perf_probes(me).iter().any(|p| write_at.holds(p));
    let monotonic = [
        "commitscope_redo_flushes_total",
        "commitscope_status_commits_total",
        "commitscope_fsyncs_total",
        "commitscope_writes_total",
    ];
    let mut last: Vec<f64> = vec![0.0; monotonic.len()];
    let mut check_monotonic = |text: &str| {
        for (i, n) in monotonic.iter().enumerate() {
            let v = sample(text, n, &[&l]).unwrap_or(0.0);
            assert!(v >= last[i], "{n} went down: {} -> {v}", last[i]);
            last[i] = v;
        }
    };
    let mut windows = 0;
    while started.elapsed() < Duration::from_secs(20) || windows < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{windows} windows in 60 s"
        );
        until(Duration::from_secs(10), "a window opens", &in_window);
        // A known number of commits inside the window.
        let sent = server.drive_updates("cs_test", 2, 50);
        check_monotonic(&e.metrics());
        until(Duration::from_secs(10), "the window closes", || {
            !in_window()
        });
        // Detached: back to the light set.
        until(Duration::from_secs(5), "the light set alone", || {
            perf_probes(me).len() == light_set
        });
        let t = e.metrics();
        check_monotonic(&t);
        windows += 1;
        let n_write =
            sample(&t, "commitscope_window_n_write", &[&l]).expect("window n_write") as u64;
        // The server's own durable log writes (the master thread's
        // once-a-second flush) ride along: at most one per second.
        assert!(
            (sent..=sent + 4).contains(&n_write),
            "window {windows}: n_write {n_write}, {sent} commits sent:\n{t}"
        );
        let flushes = sample(&t, "commitscope_window_n_flush", &[&l]).unwrap_or(0.0);
        assert!(flushes >= 1.0, "{t}");
        let (start, end) = (
            sample(&t, "commitscope_window_start_time_seconds", &[&l]).expect("start"),
            sample(&t, "commitscope_window_end_time_seconds", &[&l]).expect("end"),
        );
        assert!((2.5..4.0).contains(&(end - start)), "{start} -> {end}");
        assert!(
            sample(
                &t,
                "commitscope_window_durable_write_wait_seconds_count",
                &[&l, "role=\"leader\""]
            )
            .is_some(),
            "no anatomy in the window: {t}"
        );
        if windows == 1 {
            promtool_check(&t);
        }
    }
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
}

#[test]
fn a_window_on_request_once_and_no_credentials_ever_shown() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let secret = "s3cret-Pa55word";
    let cnf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        cnf.path(),
        format!("[client]\nuser=nobody_here\npassword={secret}\n"),
    )
    .unwrap();
    let pid = server.pid().to_string();
    let cnf_path = cnf.path().display().to_string();
    let bin = testkit::symbols_fixture().unwrap().join("bin/mariadbd");
    let write_at = ProbePoint::of(&bin, "write");
    let mut e = Exporter::start(&[
        "--pid",
        &pid,
        "--window",
        "4",
        "--window-every",
        "0",
        "--defaults-file",
        &cnf_path,
    ]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    // No login: said once (before the attach line), and it runs on.
    let said = e.lines.iter().find(|x| x.contains("not counted"));
    assert!(
        said.is_some_and(|x| x.contains("--defaults-file")),
        "{:#?}",
        e.lines
    );
    let me = e.child.id();
    let in_window = || perf_probes(me).iter().any(|p| write_at.holds(p));
    assert!(!in_window(), "a window before any was asked for");
    let (a, _) = http_request(e.port, "POST", "/window", "*/*", None);
    assert!(a.contains("202"), "{a}");
    // Asked again at once, or once it is open: refused either way.
    let (b, body) = http_request(e.port, "POST", "/window", "*/*", None);
    assert!(b.contains("409"), "{b} {body}");
    until(Duration::from_secs(5), "the window opens", &in_window);
    let (b, body) = http_request(e.port, "POST", "/window", "*/*", None);
    assert!(b.contains("409"), "{b} {body}");
    assert!(body.contains("not opening another"), "{body}");
    let (g, _) = http_request(e.port, "GET", "/window", "*/*", None);
    assert!(g.contains("405"), "{g}");
    // SIGUSR1 during the same window: one line, no second window.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(e.child.id() as i32, libc::SIGUSR1) };
    e.wait_for("not opening another", Duration::from_secs(5));
    let l = label(&server);
    until(Duration::from_secs(10), "the window's figures", || {
        sample(&e.metrics(), "commitscope_window_n_flush", &[&l]).is_some()
    });
    let t = e.metrics();
    assert!(!t.contains("commitscope_status_commits_total{"), "{t}");
    // One window only: closed, and no second one opens after it.
    let start = |t: &str| sample(t, "commitscope_window_start_time_seconds", &[&l]);
    until(
        Duration::from_secs(5),
        "the window's probes detached",
        || !in_window(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!in_window(), "a second window opened");
    assert_eq!(start(&e.metrics()), start(&t), "a second window ran");
    let (code, lines) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{lines:#?}");
    let all = format!("{lines:?}{t}");
    assert!(!all.contains(secret), "the password shown: {all}");
    assert_eq!(
        lines.iter().filter(|x| x.contains("not counted")).count(),
        1,
        "{lines:#?}"
    );
}

#[test]
fn windows_that_overlap_their_schedule_are_refused_in_one_line() {
    let out = commitscope()
        .args([
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--window",
            "5",
            "--window-every",
            "3",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = one_error_line(&err);
    assert!(
        line.contains("--window-every 3") && line.contains("--window 5"),
        "{line}"
    );
}

#[test]
fn trace_and_the_main_command_take_the_light_tier() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let mut tracer = Tracer::start(server.pid(), &["--probes", "light"]);
    tracer.wait_interval();
    let commits = server.drive_updates("cs_test", 4, 200);
    std::thread::sleep(Duration::from_millis(600));
    let (lines, said) = tracer.finish_all(true);
    let legend = lines
        .iter()
        .find(|v| v["type"] == "start")
        .map(|v| v["legend"].clone())
        .unwrap_or_else(|| panic!("no legend: {lines:#?}"));
    assert_eq!(legend["probes"], "light", "{legend}");
    let t = &summary(&lines)["totals"];
    let n = t["n_write"].as_u64().unwrap();
    let off = (n as f64 - commits as f64).abs() / commits as f64;
    assert!(
        off <= 0.005,
        "{n} commits counted, {commits} sent: {t} {said:#?}"
    );
    assert!(t["n_flush"].as_u64().unwrap() > 0, "{t}");
    assert!(t["durable"].is_null(), "{t}");
    if legend["fsync_probe"] == "libc" {
        // Syncs alone in the C library: writes not counted, and said so.
        assert!(t["redo_writes"].is_null(), "{t}");
        let said = legend["write_probe"].as_str().unwrap_or_default();
        assert!(said.starts_with("none: "), "{legend}");
    }
    drop(server);

    // The main command, managed server: n_write is the server's counter,
    // set beside the workload's own commits.
    let wd = workdir();
    let (out, _) = run_ok(
        commitscope()
            .args([
                "--probes",
                "light",
                "--threads",
                "8",
                "--duration",
                "3",
                "--json",
                "--workdir",
            ])
            .arg(wd.path()),
    );
    let v = json_lines(&out);
    let s = *of_type(&v, "summary")
        .first()
        .unwrap_or_else(|| panic!("no summary: {out}"));
    assert_eq!(s["header"]["legend"]["probes"], "light", "{s}");
    let txns = s["workload"]["txns"].as_u64().unwrap();
    let n = s["trace"]["n_write"].as_u64().unwrap();
    // The counter is read a query before the workload's tick: commits in
    // flight at each edge (at most one per client) land on one side.
    let slack = 0.005 * txns as f64 + 8.0;
    assert!(
        (n as f64 - txns as f64).abs() <= slack,
        "{n} by the counter, {txns} committed: {s}"
    );
    assert_clean(wd.path());
}

/// A frozen server's commit-counter reads give up (0.5 s each); once it
/// answers again, the next read logs in again and the counter takes up
/// every commit, the series never gone.
#[test]
fn a_frozen_servers_commit_counter_is_read_again_when_it_answers() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let (mut e, l) = light_exporter(&server);
    let name = COMMITS;
    let count = |t: &str| sample(t, name, &[&l]).unwrap_or_else(|| panic!("no {name}: {t}"));
    let before = count(&settled(&e, &[name], &[&l]));
    // Frozen past at least two reads.
    // SAFETY: signalling the test's own server by pid.
    unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: as above.
    unsafe { libc::kill(server.pid() as i32, libc::SIGCONT) };
    e.wait_for("logging in again at each read", Duration::from_secs(30));
    let commits = server.drive_updates("cs_test", 4, 300);
    let after = count(&settled(&e, &[name], &[&l]));
    assert!(
        after - before >= commits as f64,
        "{name} moved {before} -> {after}, the clients committed {commits}"
    );
}
