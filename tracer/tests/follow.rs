//! `trace` beside a server's life: following it through a restart, and
//! two tracers on one server at once. Exact probes (the symbolized
//! fixture), one client, so every commit is one durable write request.
mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// Commits per phase; one client.
const COMMITS: u32 = 300;

/// A single client's commits each call log_write_up_to durably; the
/// master thread adds about one call a second.
fn assert_durable_near(t: &Value, commits: u64, ctx: &str) {
    let durable = t["durable"].as_u64().unwrap();
    assert!(
        durable >= commits && durable <= commits + 100,
        "durable {durable} for {commits} commits: {ctx}"
    );
}

#[test]
fn trace_follows_a_restarted_server_and_its_counts_continue() {
    // The follow is timed (under 1 s): the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    // `--mysqld` finds the one process of its binary: a copy of our own.
    let Some((mut server, _copy)) = own_symbols_server() else {
        return;
    };
    let exe = server.binary.to_str().unwrap().to_string();
    let first = server.pid();
    let mut tracer = Tracer::start_with(&["--mysqld", &exe, "-v"]);
    let mut commits = server.drive_updates("cs_test", 1, COMMITS);
    // fds are named while the process lives: give the 100 ms poll a turn.
    std::thread::sleep(Duration::from_millis(300));
    server.restart().expect("restart the server");
    let second = server.pid();
    assert_ne!(first, second);
    // The server takes a while to recover and answer; the tracer says
    // how long after the new process started it attached: under 1 s.
    let line = tracer
        .wait_stderr("commitscope: following pid", Duration::from_secs(1))
        .unwrap_or_else(|| {
            let late = tracer.wait_stderr("commitscope: following pid", Duration::from_secs(10));
            panic!(
                "not followed within 1 s (later: {late:?}): {:?}",
                tracer.stderr_lines
            )
        });
    assert!(line.contains(&format!("following pid {second} ")), "{line}");
    let ms: u64 = line
        .split("attached ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no attach time in {line}"));
    assert!(ms < 1000, "{line}");
    eprintln!("{line}");
    commits += server.drive_updates("cs_test", 1, COMMITS);
    std::thread::sleep(Duration::from_millis(300));
    let (lines, stderr) = tracer.finish_all(true);
    let s = summary(&lines);
    let t = &s["totals"];
    let ctx = format!("stderr {stderr:?} summary {s}");
    assert!(
        stderr
            .iter()
            .any(|l| l
                == &format!("commitscope: pid {first} exited; waiting for {exe} to start again")),
        "{ctx}"
    );
    assert_eq!(s["pids"], serde_json::json!([first, second]), "{ctx}");
    assert_eq!(s["end"], "interrupted", "{ctx}");
    // The output says where the restart fell; the second server's
    // commits were counted on its own probes, exactly.
    let at = lines
        .iter()
        .position(|l| l["type"] == "restart")
        .unwrap_or_else(|| panic!("no restart line: {ctx}"));
    assert_eq!(lines[at]["previous_pid"], first, "{ctx}");
    assert_eq!(lines[at]["pid"], second, "{ctx}");
    let after = &lines[at..];
    assert_durable_near(&sum_of(after), u64::from(COMMITS), &ctx);
    // The totals span both servers and equal the printed lines. A clean
    // shutdown flushes the buffer pool, each page batch a durable
    // log_write_up_to: some hundred more before the restart.
    let durable = t["durable"].as_u64().unwrap();
    assert!(durable >= commits && durable <= commits + 400, "{ctx}");
    for field in ["n_write", "n_flush", "redo_fsync"] {
        assert_eq!(
            interval_sum(&lines, field),
            t[field].as_u64().unwrap(),
            "{field}: {ctx}"
        );
    }
    // Each log_t::flush is one redo fdatasync, before and after: the old
    // server's files kept their class across the new server's fd numbers.
    assert_eq!(t["n_flush"], t["redo_fsync_in_flush"], "{ctx}");
    assert!(t["n_flush"].as_u64().unwrap() >= commits / 2, "{ctx}");
}

/// The interval lines' durable writes, as a totals-shaped object.
fn sum_of(lines: &[Value]) -> Value {
    serde_json::json!({ "durable": interval_sum(lines, "durable") })
}

#[test]
fn two_tracers_on_one_server_are_both_exact_and_independent() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let whole = Tracer::start(server.pid(), &[]);
    let half = Tracer::start(server.pid(), &[]);
    let first = server.drive_updates("cs_test", 1, COMMITS);
    std::thread::sleep(Duration::from_millis(300));
    let half_lines = half.finish(true);
    // The other tracer's probes detached: this one's must still count.
    let second = server.drive_updates("cs_test", 1, COMMITS);
    std::thread::sleep(Duration::from_millis(300));
    let whole_lines = whole.finish(true);
    let h = summary(&half_lines);
    let w = summary(&whole_lines);
    let ctx = format!("first tracer {w}\nsecond tracer {h}");
    assert_durable_near(&h["totals"], first, &ctx);
    assert_durable_near(&w["totals"], first + second, &ctx);
    assert!(
        h["totals"]["durable"].as_u64() < Some(first + second),
        "{ctx}"
    );
    for s in [h, w] {
        assert_eq!(s["legend"]["n_write_source"], "log_write_up_to", "{ctx}");
        // Each log_t::flush is one redo fdatasync, except a flush that
        // straddles a window edge (the server's idle-time background flush
        // can run as a tracer attaches or detaches): its entry is counted
        // and its fdatasync is not, or the reverse. One per edge.
        let (flushes, syncs) = (
            s["totals"]["n_flush"].as_u64().unwrap(),
            s["totals"]["redo_fsync_in_flush"].as_u64().unwrap(),
        );
        assert!(flushes.abs_diff(syncs) <= 2, "{ctx}");
        assert_eq!(s["totals"]["lost_events"], 0, "{ctx}");
    }
}
