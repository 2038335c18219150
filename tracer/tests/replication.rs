//! `--replica`: a managed replica beside the managed server, its
//! acknowledgement as a commit-path stage, the network distance as a
//! setting, and a replica that dies, on both families' real servers
//! (Debian unstable's stock MySQL, the symbolized MariaDB 10.11). What
//! can fail is held: the server's own semi-sync counters against ours,
//! a delay landing in the ack stage, the fallback said and nothing left.
mod common;

use std::{
    io::Read,
    path::Path,
    process::Stdio,
    sync::Mutex,
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// One pair at a time: each test runs two servers and compares waits a
/// third server on the same two cores would move.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `replica ack` stage's mean, µs.
fn ack_mean(s: &Value) -> f64 {
    let stages = s["trace"]["commit_path"]["stages"]
        .as_array()
        .unwrap_or_else(|| panic!("no commit path: {s}"));
    let ack = stages
        .iter()
        .find(|x| x["stage"].as_str().is_some_and(|n| n.contains("ack")))
        .unwrap_or_else(|| panic!("no ack stage: {stages:?}"));
    f(&ack["mean_us"])
}

/// The main command on `mysqld` with a managed semi-sync replica, the
/// commit path, 32 clients for 6 s, and `extra`: its summary, after what
/// every such run must show (the bar): exit 0, an ack stage,
/// the semi-sync counters in the checks, each within 5 %, the replica
/// replicating at the end and semi-sync never off.
fn semi_sync_run(mysqld: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--replica",
        "semi-sync",
        "--commit-path",
        "--threads",
        "32",
        "--duration",
        "6",
    ];
    args.extend_from_slice(extra);
    let (s, err, wd) = managed_summary(mysqld, &args);
    let ctx = format!("{extra:?}: {s}\n{err}");
    ack_mean(&s);
    let checks = s["checks"].as_array().unwrap();
    for what in ["yes_tx", "tx_wait_time"] {
        let c = checks
            .iter()
            .find(|c| c["counter"].as_str().is_some_and(|n| n.ends_with(what)))
            .unwrap_or_else(|| panic!("no {what} check: {ctx}"));
        let d = f(&c["diff_pct"]);
        assert!(d.abs() <= 5.0, "{what} {d:+.2} %: {ctx}");
        assert!(c["server"].as_u64().unwrap() > 0, "{what}: {ctx}");
    }
    let r = &s["replica"];
    assert_eq!(r["mode"], "semi-sync", "{ctx}");
    assert_eq!(r["io_running"], true, "{ctx}");
    assert_eq!(r["sql_running"], true, "{ctx}");
    assert_eq!(r["fell_back"], false, "{ctx}");
    assert_eq!(r["semi_sync"], "ON", "{ctx}");
    assert_clean(wd.path());
    s
}

/// Both ends: undelayed, then 4 ms away; the ack stage takes the delay.
fn delay_lands_in_the_ack_stage(mysqld: &Path) {
    let near = semi_sync_run(mysqld, &[]);
    let far = semi_sync_run(mysqld, &["--replica-delay-ms", "4"]);
    let (a, b) = (ack_mean(&near), ack_mean(&far));
    assert!(
        b >= 2_500.0 && b >= 2.0 * a,
        "ack mean {a:.0} us near, {b:.0} us 4 ms away:\n{near}\n{far}"
    );
    assert_eq!(far["replica"]["delay_ms"], 4.0, "{far}");
}

#[test]
fn stock_mysql_waits_for_its_semi_sync_replica_in_the_ack_stage() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    delay_lands_in_the_ack_stage(&stock_mysqld());
}

#[test]
fn symbolized_mariadb_waits_for_its_semi_sync_replica_in_the_ack_stage() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    delay_lands_in_the_ack_stage(&bin);
}

/// The pid of the managed server under `wd` started with `--server-id=N`
/// (1: the source, 2: the replica; commitscope's own command line names
/// the workdir too).
fn server_with_id(wd: &Path, id: u32) -> Option<u32> {
    let flag = format!("--server-id={id}");
    servers_under(wd).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&flag))
            .unwrap_or(false)
    })
}

/// Waits (at most 2 min) until both managed servers under `wd` run:
/// (source, replica).
fn both_servers(wd: &Path) -> (u32, u32) {
    let started = Instant::now();
    loop {
        if let (Some(s), Some(r)) = (server_with_id(wd, 1), server_with_id(wd, 2)) {
            return (s, r);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no pair under {}",
            wd.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A replica killed mid-run: the source falls back to async after its
/// timeout, the ticks and the summary say so, the exit is 4, and nothing
/// is left running; with --allow-async-fallback the same run exits 0.
fn killed_replica(mysqld: &Path, timeout_var: &str) {
    for allow in [false, true] {
        let wd = workdir();
        let mut cmd = commitscope();
        cmd.arg("--mysqld")
            .arg(mysqld)
            .args([
                "--replica",
                "semi-sync",
                "--threads",
                "4",
                "--duration",
                "6",
            ])
            .args(["--server-option", &format!("{timeout_var}=300")])
            .args(["--workdir", wd.path().to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if allow {
            cmd.arg("--allow-async-fallback");
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let mut stderr = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let (_, pid) = both_servers(wd.path());
        // Into the measured run, then the replica goes.
        std::thread::sleep(Duration::from_secs(4));
        // SAFETY: killing the replica server we found by its command line.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let status = child.wait().unwrap();
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        let ctx = format!("allow {allow}: {status}\n{out}\n{err}");
        assert!(err.contains("semi-sync fell back to async"), "{ctx}");
        assert!(out.contains("(semi-sync OFF: async)"), "{ctx}");
        assert!(out.contains("FELL BACK to async"), "{ctx}");
        if allow {
            assert_eq!(status.code(), Some(0), "{ctx}");
        } else {
            assert_eq!(status.code(), Some(4), "{ctx}");
            assert!(err.contains("--allow-async-fallback"), "{ctx}");
        }
        assert_clean(wd.path());
    }
}

#[test]
fn a_killed_mysql_replica_is_said_and_nothing_is_left() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    killed_replica(&stock_mysqld(), "rpl_semi_sync_source_timeout");
}

#[test]
fn a_killed_mariadb_replica_is_said_and_nothing_is_left() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    killed_replica(&bin, "rpl_semi_sync_master_timeout");
}

/// A replica that cannot connect (here: the source takes no TCP) gets
/// one line with the replica's own error, exit 2, nothing left.
#[test]
fn a_replica_that_cannot_connect_is_one_line_and_nothing_is_left() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let wd = workdir();
    let out = commitscope()
        .arg("--mysqld")
        .arg(&bin)
        .args(["--replica", "async", "--threads", "2", "--duration", "2"])
        .args(["--server-option", "skip_networking=ON"])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = one_error_line(&err);
    assert!(
        line.contains("--replica:") && line.contains("cannot connect"),
        "{line}"
    );
    assert_clean(wd.path());
}

/// Bad combinations, refused in one line before anything starts.
#[test]
fn replica_flags_that_do_not_fit_are_refused() {
    for (args, says) in [
        (
            vec!["--replica-delay-ms", "4", "--threads", "1"],
            "add --replica semi-sync",
        ),
        (
            vec!["--replica", "semi-sync", "--replica-delay-ms", "1,2"],
            "a list of delays is a sweep's",
        ),
        (
            vec!["--replica", "semi-sync", "--replica-delay-ms=-3"],
            "from 0 to 60000",
        ),
        (
            vec!["--replica", "async", "--socket", "/nonexistent.sock"],
            "drop one or the other",
        ),
    ] {
        let err = fails(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `trace --pid` on a semi-sync primary it did not start (the main
/// command runs the pair untraced): the waits and the `replica ack`
/// stage are there, counted at the server's hook.
#[test]
fn trace_by_pid_sees_any_semi_sync_primary() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let wd = workdir();
    let mut pair = commitscope()
        .arg("--mysqld")
        .arg(&bin)
        .args(["--replica", "semi-sync", "--no-trace", "--threads", "8"])
        .args(["--duration", "30", "--workdir", wd.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (source, _) = both_servers(wd.path());
    // The workload is running once the replica is up; give it a second.
    std::thread::sleep(Duration::from_secs(2));
    let tracer = Tracer::start(source, &["--commit-path"]);
    std::thread::sleep(Duration::from_secs(3));
    let lines = tracer.finish(true);
    // SAFETY: interrupting our own child, as a user's Ctrl-C would.
    unsafe { libc::kill(pair.id() as i32, libc::SIGINT) };
    let _ = pair.wait();
    let t = &summary(&lines)["totals"];
    let r = &t["replication"];
    assert_eq!(r["hook"], "commit_trx", "{t}");
    assert!(r["waits"].as_u64().is_some_and(|w| w > 50), "{t}");
    let stages = t["commit_path"]["stages"].as_array().unwrap();
    assert!(
        stages.iter().any(|s| s["stage"] == "replica ack"),
        "{stages:?}"
    );
    assert_clean(wd.path());
}

/// A sweep over the replica's distance: each cell named by it, set on
/// the proxy between cells without a restart, the ack stage growing with
/// it.
#[test]
fn a_sweep_over_the_replicas_distance() {
    if needs_root() {
        return;
    }
    let _one = one_at_a_time();
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let o = commitscope()
        .arg("sweep")
        .arg("--mysqld")
        .arg(&bin)
        .args(["--replica", "semi-sync", "--replica-delay-ms", "0,4"])
        .args(["--commit-path", "--threads", "8", "--duration", "3"])
        .args(["--warmup", "1", "--workdir", wd.path().to_str().unwrap()])
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("0 restarts"),
        "no restart between cells: {err}"
    );
    let cells: Vec<Value> = std::fs::read_to_string(out.path().join("cells.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cells.len(), 2, "{cells:?}");
    let ack = |c: &Value| ack_mean(&c["run"]);
    let text = format!("{cells:?}");
    assert!(text.contains("replica_delay_ms=4"), "{text}");
    assert!(
        ack(&cells[1]) >= 2_500.0 && ack(&cells[1]) >= 2.0 * ack(&cells[0]),
        "{} vs {}: {text}",
        ack(&cells[0]),
        ack(&cells[1])
    );
    assert_clean(wd.path());
}
