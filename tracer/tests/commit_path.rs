//! `--commit-path`: each commit's time inside the server, stage by stage,
//! on real servers. The stages and the unattributed rest add up to the
//! commits' time by construction, so these hold what can fail: the
//! commits counted are the workload's, the named stages carry the time,
//! the server's time is below the clients', and a known delay lands in
//! the stage it belongs to.
mod common;
mod exporter_kit;

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use common::*;
use exporter_kit::*;
use serde_json::Value;
use testkit::bpf_links::perf_probes;

/// The main command with `--commit-path`, managed on `mysqld`, 32
/// clients for 6 s, with `extra`: its summary, after the checks every
/// run must pass (the bar).
fn managed(mysqld: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["--threads", "32", "--duration", "6", "--commit-path"];
    args.extend_from_slice(extra);
    let (s, err, wd) = managed_summary(mysqld, &args);
    let ctx = format!("{extra:?}: {s}\n{err}");
    // Its cost is said as it starts, with the stages' scheduler split.
    assert!(err.contains("--commit-path traps on every commit"), "{ctx}");
    assert!(
        err.contains("split into on-CPU, run-queue and blocked"),
        "{ctx}"
    );
    assert_sched_split(&s["trace"]);
    let c = &s["trace"]["commit_path"];
    // Every commit the clients made, each once.
    let commits = u(&s["workload"]["commits"]);
    let ours = u(&c["commits"]);
    assert!(
        ours.abs_diff(commits) as f64 <= 0.01 * commits as f64,
        "{ours} vs {commits}: {ctx}"
    );
    assert_eq!(u(&c["lost"]), 0, "{ctx}");
    let stages = c["stages"].as_array().unwrap();
    let named = stages
        .iter()
        .filter(|x| x["stage"] != "unattributed")
        .count();
    assert!(named >= 3, "{named} named stages: {ctx}");
    let shares: f64 = stages.iter().map(|x| f(&x["share"])).sum();
    assert!(
        (shares - 1.0).abs() <= 0.01,
        "shares sum to {shares}: {ctx}"
    );
    let rest = stages
        .iter()
        .find(|x| x["stage"] == "unattributed")
        .unwrap_or_else(|| panic!("no unattributed: {ctx}"));
    assert!(f(&rest["share"]) <= 0.2, "{ctx}");
    // The server's part of a commit is inside what the client waited.
    let p50 = f(&c["p50_us"]);
    assert!(
        p50 <= s["workload"]["latency"]["p50_us"].as_f64().unwrap(),
        "{ctx}"
    );
    assert_eq!(
        f(&c["client_p50_us"]),
        f(&s["workload"]["latency"]["p50_us"]),
        "{ctx}"
    );
    assert_clean(wd.path());
    s
}

/// The mean of the stage named `name`, or 0 where no commit went through it.
fn stage_mean(s: &Value, name: &str) -> f64 {
    s["trace"]["commit_path"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["stage"] == name)
        .map_or(0.0, |x| f(&x["mean_us"]))
}

/// MariaDB 10.11 with symbols, binlog off (its default): the redo flush
/// as leader (write, fsync) and the followers' wait.
#[test]
fn symbolized_mariadb_commits_split_at_the_redo_flush() {
    // The stages' shares of the commits' time held: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let s = managed(&bin, &[]);
    for want in [
        "redo write (leader)",
        "redo fsync (leader)",
        "redo wait (follower)",
    ] {
        assert!(stage_mean(&s, want) > 0.0, "{want}: {s}");
    }
}

/// A known load lands where it belongs: one run, whose last ticks have a
/// busy loop on each core beside it, shows those ticks' commits waiting
/// longer for a CPU than its first ticks' did (per commit, not as a share
/// of the commit: the share saturates near 0.6, and background builds
/// raised the first ticks' share to 0.48 in one CI run). One run rather than two:
/// the same server, data and warm-up on both sides, at half the machine
/// time. The loops run at nice -20, each pinned to its core: unpinned at
/// nice -18 they raised the share only 1.3 times in a CI run, where the
/// background builds (idle priority, yet they still delay a woken
/// thread) had put the first ticks' share at 0.31. 8 clients, not 32:
/// measured beside two idle-priority loops standing in for those builds,
/// 32 clients went from 0.31-0.38 to 0.62-0.65 (1.7 to 2.0 times), 8 from
/// 0.20-0.26 to 0.60-0.61 (2.3 to 3.1 times); on a quiet machine 8
/// clients went from 0.16 to 0.70.
#[test]
fn symbolized_mariadb_commits_wait_for_a_cpu_beside_busy_loops() {
    // A comparison of scheduling within one run: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let wd = workdir();
    let mut child = commitscope()
        .arg("--mysqld")
        .arg(&bin)
        .args([
            "--threads",
            "8",
            "--duration",
            "9",
            "--commit-path",
            "--json",
        ])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(child.stdout.take().unwrap());
    // Ticks 1 to 4 alone (the first is warm-up, left out); the loops
    // start after the fourth, and tick 5 is theirs in part, left out too.
    let mut lines = Vec::new();
    for _ in 0..4 {
        lines.extend(wait_for(&rx, "\"type\":\"tick\""));
    }
    let spin = AtomicBool::new(true);
    lines.extend(std::thread::scope(|sc| {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        for cpu in 0..cpus {
            let spin = &spin;
            sc.spawn(move || {
                // SAFETY: this thread's own priority and CPU: one loop on
                // each core, none left to the server by a migration.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as u32, -20);
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                let mut x = 0u64;
                while spin.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            });
        }
        let lines = wait_for(&rx, "\"type\":\"summary\"");
        spin.store(false, Ordering::Relaxed);
        lines
    }));
    assert!(child.wait().unwrap().success());
    let all = json_of(&lines);
    let summary = all.last().unwrap();
    assert_eq!(summary["type"], "summary", "{summary}");
    assert_sched_split(&summary["trace"]);
    let ticks: Vec<&Value> = all.iter().filter(|l| l["type"] == "tick").collect();
    assert!(ticks.len() >= 8, "{} ticks", ticks.len());
    // The run-queue share of the commits' time over some ticks, and the
    // server threads' share of theirs (no probe).
    let shares = |ts: &[&Value]| {
        let (mut runq, mut whole, mut srv_runq, mut srv_all, mut commits) =
            (0.0, 0.0, 0.0, 0.0, 0.0);
        for t in ts {
            // A tick without commits (all of it warm-up, or the residual
            // after the workers stopped) has no means.
            let (t, c) = (&t["trace"], &t["trace"]["commit_path"]);
            let n = c["commits"].as_f64().unwrap_or(0.0);
            if n > 0.0 {
                runq += n * f(&c["run_queue_us"]);
                whole += n * f(&c["mean_us"]);
                commits += n;
            }
            srv_runq += f(&t["server_runq_ms"]);
            srv_all += f(&t["server_runq_ms"]) + f(&t["server_cpu_ms"]);
        }
        (
            runq / whole,
            srv_runq / srv_all,
            runq / commits,
            whole / commits,
        )
    };
    let (alone, srv_alone, a_abs, a_whole) = shares(&ticks[1..4]);
    let (busy, srv_busy, b_abs, b_whole) = shares(&ticks[5..]);
    eprintln!("run-queue share of the commits: {alone:.3} alone, {busy:.3} beside the loops; per commit {a_abs:.0} of {a_whole:.0} us alone, {b_abs:.0} of {b_whole:.0} us beside; server {srv_alone:.3} {srv_busy:.3}");
    // Per commit, the wait for a CPU grows many times over (17-22 µs to
    // 1,011-1,208 µs here, quiet or beside idle-priority loops); its share
    // of the commit only rises, as the starved leader's followers wait
    // blocked on it, not runnable (a CI run saw 0.477 then 0.583).
    assert!(
        b_abs >= 5.0 * a_abs,
        "run queue per commit {a_abs:.0} µs alone, {b_abs:.0} µs beside two busy loops: {ticks:?}"
    );
    assert!(
        busy > alone,
        "run-queue share {alone:.3} alone, {busy:.3} beside two busy loops: {ticks:?}"
    );
    // The server's threads say the same without a probe.
    assert!(srv_busy > srv_alone, "{srv_alone} then {srv_busy}");
    assert_clean(wd.path());
}

/// TPC-C's commits counted once each on both families, binlog on (as
/// MySQL has it by default), within 0.5 % of the workload's own count:
/// its read-only transactions (Order-Status, Stock-Level) and rollbacks
/// are not commits, and neither are MySQL's own bookkeeping commits
/// (`ib_clone_gtid` commits `mysql.gtid_executed` about ten times a
/// second, each with a durable redo write: 1.2 to 1.9 % of a TPC-C run's
/// count before they were left out). MariaDB without its binlog is not
/// held to it: a commit whose redo another commit's flush already made
/// durable asks for no redo write there, so nothing marks it a commit
/// (measured: -0.05 % at 2 warehouses, -0.58 % at 1 with 8 clients).
/// At least 100 commits, where MySQL's bookkeeping (about 50 in the 5 s)
/// would be a third more: stock MySQL made 463 in its 5 s once, beside
/// three other tests, and 151 on a host also busy with two builds (all
/// 151 traced, none more).
#[test]
fn tpcc_commits_are_the_workloads_on_both_families() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(maria) = symbolized_mariadbd() else {
        return;
    };
    // MySQL's binlog is on unless told otherwise.
    let binlog: &[&str] = &["--server-option", "log_bin=ON"];
    for (bin, binlog) in [(maria, binlog), (stock_mysqld(), &[][..])] {
        let mut args = binlog.to_vec();
        args.extend([
            "--workload",
            "tpcc",
            "-w",
            "1",
            "--threads",
            "8",
            "--duration",
            "5",
            "--commit-path",
        ]);
        let (s, err, _wd) = managed_summary(&bin, &args);
        let ours = u(&s["trace"]["commit_path"]["commits"]);
        let theirs = u(&s["workload"]["commits"]);
        eprintln!(
            "{}: {ours} commits traced, {theirs} by the workload",
            bin.display()
        );
        assert!(
            theirs >= 100 && ours.abs_diff(theirs) as f64 <= 0.005 * theirs as f64,
            "{}: {ours} commits traced, {theirs} by the workload: {err}",
            bin.display()
        );
    }
}

/// MariaDB with its binlog on: a group-commit wait of 3 ms
/// (`binlog_commit_wait_usec`, up to 20 commits) lands in the leader's
/// group stage and in its followers' wait, not elsewhere.
#[test]
fn mariadb_binlog_commit_wait_lands_in_the_binlog_group_stage() {
    // A wait compared with and without a delay: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let binlog = [
        "--server-option",
        "log_bin=ON",
        "--server-option",
        "sync_binlog=1",
    ];
    let plain = managed(&bin, &binlog);
    let mut delayed = binlog.to_vec();
    delayed.extend([
        "--server-option",
        "binlog_commit_wait_count=20",
        "--server-option",
        "binlog_commit_wait_usec=3000",
    ]);
    let delayed = managed(&bin, &delayed);
    let group = "binlog group: wait, write caches (leader)";
    let (before, after) = (stage_mean(&plain, group), stage_mean(&delayed, group));
    assert!(
        after >= 1000.0 && after >= 3.0 * before,
        "{group}: {before} us, then {after} us with the wait"
    );
    let follower = "binlog group wait (follower)";
    assert!(
        stage_mean(&delayed, follower) > stage_mean(&plain, follower),
        "{delayed}"
    );
    // The redo's stages do not take it.
    let redo = "redo fsync (leader)";
    assert!(stage_mean(&delayed, redo) < 1000.0, "{delayed}");
}

/// `--wakeups` on MariaDB with its binlog on: its followers (the binlog
/// group's, the redo's) are woken each on its own, so their waits take
/// wake-ups, and the leaders are named among the wakers.
#[test]
fn symbolized_mariadb_followers_wakeups_are_counted() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let s = managed(
        &bin,
        &[
            "--wakeups",
            "--server-option",
            "log_bin=ON",
            "--server-option",
            "sync_binlog=1",
        ],
    );
    let w = &s["trace"]["commit_path"]["wakeups"];
    let (waits, wakeups, wasted) = (u(&w["waits"]), u(&w["wakeups"]), u(&w["wasted"]));
    assert!(waits > 0 && wakeups > 0 && wasted <= wakeups, "{w}");
    let by = w["by_waker"].as_array().unwrap();
    let total: u64 = by.iter().map(|b| u(&b["wakeups"])).sum();
    assert_eq!(total, wakeups, "{w}");
    assert!(
        by.iter()
            .any(|b| b["waker"].as_str().unwrap().contains("leader")),
        "{w}"
    );
}

/// Debian's stock MariaDB (InnoDB hidden): commits at the server layer,
/// the committing thread's own fsyncs as a stage; traced by pid.
#[test]
fn stock_mariadb_is_traced_by_pid_at_the_server_layer() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = system_server(&[]) else {
        return;
    };
    server
        .query(
            "CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
             INSERT INTO cs_test.tb SELECT seq, 0 FROM cs_test.seq_1_to_100",
        )
        .expect("prepare schema");
    let tracer = Tracer::start(server.pid(), &["--commit-path"]);
    let commits = server.drive_updates("cs_test", 8, 200);
    let lines = tracer.finish(true);
    let s = summary(&lines);
    let c = &s["totals"]["commit_path"];
    assert_eq!(u(&c["commits"]), commits, "{s}");
    let stages = c["stages"].as_array().unwrap();
    assert!(
        stages.iter().any(|x| x["stage"] == "redo fsync (leader)"),
        "{s}"
    );
    let shares: f64 = stages.iter().map(|x| f(&x["share"])).sum();
    assert!((shares - 1.0).abs() <= 0.01, "{s}");
}

/// A sweep with `--commit-path` on the symbolized MariaDB: each cell's
/// stage shares in `summary.json` and `summary.csv`, and
/// `commit_path.svg`, a stacked bar per cell.
#[test]
fn a_sweep_charts_where_the_time_goes_per_cell() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(bin) = symbolized_mariadbd() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    run_ok(
        commitscope()
            .arg("sweep")
            .arg("--mysqld")
            .arg(&bin)
            .args(["--threads", "1,8", "--duration", "2", "--commit-path"])
            .arg("--workdir")
            .arg(wd.path())
            .arg("--out")
            .arg(out.path()),
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{json}");
    for c in cells {
        let cp = &c["commit_path"];
        assert!(u(&cp["commits"]) > 0, "{c}");
        let shares: f64 = cp["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| f(&s["share"]))
            .sum();
        assert!((shares - 1.0).abs() <= 0.01, "{c}");
        // Each cell's commit by the scheduler: its three parts make its
        // mean.
        let x = &cp["sched"];
        let parts = f(&x["on_cpu_us"]) + f(&x["run_queue_us"]) + f(&x["blocked_us"]);
        assert!(f(&x["on_cpu_us"]) > 0.0, "{c}");
        assert!(
            (parts - f(&cp["mean_us"])).abs() <= 0.02 * f(&cp["mean_us"]),
            "{c}"
        );
    }
    let csv = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert!(header.contains(&"cp_top_stage"), "{csv}");
    let svg = std::fs::read_to_string(out.path().join("commit_path.svg")).unwrap();
    for text in [
        "share of the commits",
        "redo fsync (leader)",
        "unattributed",
        "8 thr",
    ] {
        assert!(svg.contains(text), "no {text:?} in the chart");
    }
    // Shares end at 100 %, and the legend stays off the bars.
    assert_chart_fits(&svg, &["redo fsync (leader)", "unattributed"], Some(100.0));
    // The same cells by the scheduler: on a CPU, waiting for one, blocked.
    let sched = std::fs::read_to_string(out.path().join("commit_sched.svg")).unwrap();
    for text in [
        "by the scheduler",
        "on a CPU",
        "run queue",
        "blocked",
        "8 thr",
    ] {
        assert!(sched.contains(text), "no {text:?} in commit_sched.svg");
    }
    assert_chart_fits(
        &sched,
        &["on a CPU", "blocked (I/O, locks, wake-ups)"],
        None,
    );
    assert_clean(wd.path());
}

#[test]
fn the_exporter_times_the_commit_path_inside_its_exact_windows_only() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let bin = testkit::symbols_fixture().unwrap().join("bin/mariadbd");
    let commit_at = ProbePoint::of(&bin, "commit");
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&[
        "--pid",
        &pid,
        "--commit-path",
        "--window",
        "4",
        "--window-every",
        "0",
        "--defaults-file",
        "/dev/null",
    ]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    assert!(
        e.lines
            .iter()
            .any(|x| x.contains("each exact window also traps")),
        "its cost unsaid: {:#?}",
        e.lines
    );
    let me = e.child.id();
    let light_set = perf_probes(me).len();
    let spans_on = || {
        perf_probes(me)
            .iter()
            .filter(|p| commit_at.holds(p))
            .count()
    };
    assert_eq!(spans_on(), 0, "span probes outside a window");
    let l = label(&server);
    let started = |t: &str| sample(t, "commitscope_window_start_time_seconds", &[&l]);
    let open = |e: &Exporter| {
        let (a, _) = http_request(e.port, "POST", "/window", "*/*", None);
        assert!(a.contains("202"), "{a}");
        // Both span probes, the return and the entry, are the window's last.
        until(Duration::from_secs(10), "the window's spans", || {
            spans_on() == 2
        });
    };
    let closed = |e: &Exporter, before: Option<f64>| -> String {
        let mut t = String::new();
        until(Duration::from_secs(15), "the window's figures", || {
            t = e.metrics();
            started(&t).is_some() && started(&t) != before
        });
        until(Duration::from_secs(5), "the light set alone", || {
            perf_probes(me).len() == light_set
        });
        t
    };

    // Window 1 closes on commits in flight: clients commit all through
    // it and past its end, so spans are open when their return probe
    // goes.
    let stop = AtomicBool::new(false);
    let first = std::thread::scope(|sc| {
        let driver = sc.spawn(|| {
            let mut sent = 0;
            while !stop.load(Ordering::Relaxed) {
                sent += server.drive_updates("cs_test", 8, 40);
            }
            sent
        });
        open(&e);
        let t = closed(&e, None);
        // Past the close, then stop.
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        assert!(driver.join().expect("the driver") > 0);
        t
    });
    let ctx = format!("window 1:\n{first}");
    let timed = sample(&first, "commitscope_window_commits_timed", &[&l]).expect("commits timed");
    assert!(timed >= 100.0, "{timed} commits timed: {ctx}");
    let shares: Vec<(String, f64)> = first
        .lines()
        .filter(|x| x.starts_with("commitscope_window_commit_stage_share{") && x.contains(&l))
        .map(|x| {
            let stage = x.split("stage=\"").nth(1).and_then(|r| r.split('"').next());
            let v = x.rsplit(' ').next().and_then(|v| v.parse().ok());
            (stage.unwrap_or_default().to_string(), v.unwrap_or(f64::NAN))
        })
        .collect();
    let sum: f64 = shares.iter().map(|(_, v)| v).sum();
    assert!((sum - 1.0).abs() <= 0.01, "shares sum to {sum}: {ctx}");
    let named = shares.iter().filter(|(s, _)| s != "unattributed").count();
    assert!(named >= 2, "{shares:?}: {ctx}");
    assert!(
        sample(
            &first,
            "commitscope_window_commit_time_seconds",
            &[&l, "stat=\"p99\""]
        )
        .is_some_and(|v| v > 0.0),
        "{ctx}"
    );
    // Prometheus takes the new families as they are named.
    if has_tool("promtool") {
        promtool_check(&first);
    }
    // Between windows the light set alone: no span probe, and the last
    // window's figures stay as they were.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(spans_on(), 0, "span probes after the window");

    // Window 2: a known number of commits, all inside it. A span left
    // open by window 1's close must not swallow a thread's commits here
    // (the server reuses its threads for new connections).
    let before = started(&first);
    open(&e);
    let sent = server.drive_updates("cs_test", 8, 50);
    let second = closed(&e, before);
    let ctx = format!("window 2, {sent} commits sent:\n{second}");
    let timed =
        sample(&second, "commitscope_window_commits_timed", &[&l]).expect("commits timed") as u64;
    // Two short at most: this server has no binlog, and a commit whose
    // redo another commit's flush already made durable asks for no redo
    // write, so nothing marks it a commit (docs/commit-path.md; seen here
    // once in CI as 398 of 400). A swallowed thread would miss 50.
    assert!(
        (sent - 2..=sent + 2).contains(&timed),
        "{timed} timed: {ctx}"
    );
    assert_eq!(
        sample(&second, "commitscope_window_commits_lost", &[&l]),
        Some(0.0),
        "{ctx}"
    );
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
}
