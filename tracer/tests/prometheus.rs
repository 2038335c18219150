//! The exporter in a real Prometheus (Debian's `prometheus`, started here
//! on loopback with a 1 s scrape interval and the shipped recording
//! rules) beside Debian's `prometheus-mysqld-exporter`, on one Debian
//! server under the main command's `update` workload.
mod common;

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use common::*;
use serde_json::Value;

mod exporter_kit;
use exporter_kit::{free_port, http_get, sample, Exporter};

/// A child killed when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query at `at` (seconds since the epoch): the result vector.
fn query(port: u16, q: &str, at: f64) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}&time={at:.3}", encode(q));
    let (status, rest) = http_get(port, &path, "application/json", None);
    let body = rest.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(status.contains("200"), "{q}: {status} {body}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// The single value of `q` at `at`.
fn scalar(port: u16, q: &str, at: f64) -> f64 {
    let r = query(port, q, at);
    assert_eq!(r.len(), 1, "{q} at {at}: {r:?}");
    r[0]["value"][1].as_str().unwrap().parse().unwrap()
}

/// The last value `q` had in the 5 s up to `at`: one scrape that a
/// loaded host let time out (1 s) marks every series of its target
/// stale at that instant (run 36 found none at the run's end), where the
/// samples a second before and after stand.
fn settled(port: u16, q: &str, at: f64) -> f64 {
    scalar(port, &format!("last_over_time(({q})[5s:1s])"), at)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn wait_http(port: u16, path: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && http_get(port, path, "*/*", None).0.contains("200")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what} did not answer on port {port} within 60 s");
}

/// Debian's Prometheus on a loopback port, scraping `commitscope` targets
/// (and a mysqld_exporter) every second with the shipped rules; killed
/// and its data removed when dropped.
struct Prometheus {
    port: u16,
    _child: Reaped,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(rules: &std::path::Path, commitscope: &[u16], mysqld: Option<u16>) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let targets: Vec<String> = commitscope
            .iter()
            .map(|p| format!("'127.0.0.1:{p}'"))
            .collect();
        let mut yml = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: commitscope\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        );
        if let Some(myport) = mysqld {
            yml.push_str(&format!(
                "  - job_name: mysqld\n    static_configs:\n      - targets: ['127.0.0.1:{myport}']\n"
            ));
        }
        std::fs::write(&config, yml).unwrap();
        let port = free_port();
        let child = Reaped(
            testkit::command("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start prometheus"),
        );
        wait_http(port, "/-/ready", "prometheus");
        Prometheus {
            port,
            _child: child,
            _dir: dir,
        }
    }
}

/// The dashboard's queries (`$server` as every server), each with the
/// title of the row its panel is in.
fn dashboard_queries() -> Vec<(String, String)> {
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            testkit::workspace_root().join("contrib/grafana/commitscope.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut row = String::new();
    let mut out = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            row = p["title"].as_str().unwrap_or_default().to_string();
            continue;
        }
        for t in p["targets"].as_array().cloned().unwrap_or_default() {
            if let Some(e) = t["expr"].as_str() {
                out.push((row.clone(), e.replace("$server", ".*")));
            }
        }
    }
    out
}

/// The first row: the redo log's panels, which every server has.
const REDO_ROW: &str = "Redo log group commit";

#[test]
fn prometheus_scrapes_figures_that_agree_with_the_server_and_the_main_command() {
    let Some(_lane) = root_shared() else {
        return;
    };
    for tool in ["prometheus", "promtool", "prometheus-mysqld-exporter"] {
        if !has_tool(tool) {
            testkit::skip(&format!("no {tool}: run `cargo xtask setup` (installs prometheus, prometheus-mysqld-exporter)"));
            return;
        }
    }
    let rules = testkit::workspace_root().join("contrib/prometheus/commitscope.rules.yml");
    let (out, _) = run_ok(
        Command::new("promtool")
            .arg("check")
            .arg("rules")
            .arg(&rules),
    );
    assert!(out.contains("SUCCESS"), "{out}");

    let Some(server) = system_server(&[]) else {
        return;
    };
    let sock = server.socket.display().to_string();
    // The exporter's default (light probes: commits by the server's
    // counter; exact windows, here of 2 s every 5 s so that the
    // dashboard's window panel has data) and the exact tier, side by side
    // on the same server.
    let mut e = Exporter::start(&[
        "-S",
        &sock,
        "--rescan",
        "1",
        "--window",
        "2",
        "--window-every",
        "5",
    ]);
    let mut ex = Exporter::start(&["-S", &sock, "--rescan", "1", "--probes", "exact"]);
    for x in [&mut e, &mut ex] {
        x.wait_for(
            &format!("attached pid {}", server.pid()),
            Duration::from_secs(60),
        );
    }
    let light = format!("instance=\"127.0.0.1:{}\"", e.port);
    let exact = format!("instance=\"127.0.0.1:{}\"", ex.port);

    let myport = free_port();
    let _mysqld_exporter = Reaped(
        testkit::command("prometheus-mysqld-exporter")
            .env("DATA_SOURCE_NAME", format!("root@unix({sock})/"))
            .arg(format!("--web.listen-address=127.0.0.1:{myport}"))
            .arg("--config.my-cnf=/dev/null")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-mysqld-exporter"),
    );
    wait_http(myport, "/metrics", "prometheus-mysqld-exporter");

    let prom = Prometheus::start(&rules, &[e.port, ex.port], Some(myport));
    let pport = prom.port;
    // Two scrapes of each target before the workload: the baseline.
    let deadline = Instant::now() + Duration::from_secs(30);
    while query(
        pport,
        "count_over_time(commitscope_redo_flushes_total[1m]) >= 2",
        now(),
    )
    .is_empty()
        || query(
            pport,
            "count_over_time(mysql_global_status_innodb_data_fsyncs[1m]) >= 2",
            now(),
        )
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "Prometheus has no two scrapes of both targets after 30 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let started = now();
    let out = commitscope()
        .args(server.client_flags())
        .args([
            "--threads",
            "8",
            "--duration",
            "25",
            "--warmup",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    let ended = now();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary = lines
        .iter()
        .find(|v| v["type"] == "summary")
        .expect("a summary");
    let main_cpf = summary["commits_per_flush"]
        .as_f64()
        .expect("commits_per_flush");
    // Let the last reads, scrapes and rule evaluations in: the light
    // tier reads the server's commit counter once a second, Prometheus
    // scrapes that a second later and evaluates the rules a second after
    // that, so a ratio taken sooner than 3 s after the workload's last
    // commit sets flushes counted to the end beside commits counted a
    // moment short of it (7 % short in one CI run).
    const SETTLE: f64 = 4.0;
    std::thread::sleep(Duration::from_secs_f64(SETTLE + 1.0));

    // fsyncs: redo + data from the probes vs the server's own counter,
    // over the whole run: each counter's last sample before the workload
    // and after it, while the server is idle. Not `increase()` over a
    // window inside the run: the two targets are scraped at different
    // instants, so their windows are offset by up to a scrape interval,
    // and with the tps swinging ±20 % from second to second that alone
    // moved the two by 3 % in one CI run.
    let ours_q = format!("sum(commitscope_fsyncs_total{{class=~\"redo|data\",{light}}})");
    let ours_q = ours_q.as_str();
    let theirs_q = "sum(mysql_global_status_innodb_data_fsyncs)";
    let (t1, t2) = (started, ended + SETTLE);
    // Inside the workload: where the dashboard's rates have data.
    let mid = started + 20.0;
    let ours = settled(pport, ours_q, t2) - settled(pport, ours_q, t1);
    let theirs = settled(pport, theirs_q, t2) - settled(pport, theirs_q, t1);
    let ctx = format!("window {started:.1}..{ended:.1}, main command summary {summary}");
    assert!(theirs > 100.0, "{theirs}: {ctx}");
    let off = (ours - theirs).abs() / theirs;
    eprintln!(
        "fsyncs over the run: ours {ours:.0}, Innodb_data_fsyncs {theirs:.0} ({:+.3} %)",
        (ours - theirs) / theirs * 100.0
    );
    assert!(
        off <= 0.02,
        "fsyncs: ours {ours} vs Innodb_data_fsyncs {theirs} ({:.2} %): {ctx}",
        off * 100.0
    );

    // Commits per flush from the recording rules (their 1 m window holds
    // the whole run) vs the main command's own figure.
    let at = ended + SETTLE;
    // Commits from the light tier's reads of Handler_commit vs the same
    // counter as mysqld_exporter scraped it, over the run.
    let reads = format!("sum(commitscope_status_commits_total{{{light}}})");
    let scraped = "sum(mysql_global_status_handlers_total{handler=\"commit\"})";
    let reads = settled(pport, &reads, at) - settled(pport, &reads, t1);
    let scraped = settled(pport, scraped, at) - settled(pport, scraped, t1);
    eprintln!("commits over the run: the light tier's {reads:.0}, mysqld_exporter's Handler_commit {scraped:.0}");
    assert!(
        (reads - scraped).abs() <= scraped * 0.01,
        "commits: the light tier's {reads} vs mysqld_exporter's Handler_commit {scraped}: {ctx}"
    );
    for (rule, tier) in [
        ("commitscope:group_commit_ratio:rate1m", &light),
        ("commitscope:group_commit_ratio:rate1m", &exact),
        // The in-kernel batch histogram: exact probes only.
        ("commitscope:commits_per_flush:rate1m", &exact),
    ] {
        let v = settled(pport, &format!("{rule}{{{tier}}}"), at);
        let off = (v - main_cpf).abs() / main_cpf;
        eprintln!(
            "{rule}{{{tier}}}: {v:.3}, the main command's commits per flush {main_cpf:.3} ({:+.2} %)",
            (v - main_cpf) / main_cpf * 100.0
        );
        assert!(
            off <= 0.02,
            "{rule} {v} vs the main command's {main_cpf} ({:.2} %): {ctx}",
            off * 100.0
        );
    }

    // Every expression of the dashboard's redo row has data (the other
    // rows need a binlog, a replica and --io: the MySQL test's).
    let exprs: Vec<String> = dashboard_queries()
        .into_iter()
        .filter(|(row, _)| row == REDO_ROW)
        .map(|(_, q)| q)
        .collect();
    assert!(exprs.len() >= 6, "{exprs:?}");
    for q in exprs {
        assert!(
            !query(pport, &q, mid).is_empty(),
            "dashboard query {q} is empty"
        );
    }
    for x in [e, ex] {
        let (code, said) = x.stop(libc::SIGTERM);
        assert_eq!(code, Some(0), "{said:#?}");
    }
}

/// Every panel of the dashboard has data from a real Prometheus scraping
/// two real exporters (light with exact windows, `--commit-path` and
/// `--io`; exact with `--io`) on a stock MySQL semi-sync source the main
/// command manages, with a sync delay and a no-delay count so that its
/// binlog groups close for both reasons.
#[test]
fn every_dashboard_panel_has_data_on_a_semi_sync_mysql() {
    let Some(_lane) = root_shared() else {
        return;
    };
    for tool in ["prometheus", "promtool"] {
        if !has_tool(tool) {
            testkit::skip(&format!(
                "no {tool}: run `cargo xtask setup` (installs prometheus)"
            ));
            return;
        }
    }
    let rules = testkit::workspace_root().join("contrib/prometheus/commitscope.rules.yml");
    let wd = workdir();
    let mut pair = commitscope()
        .arg("--mysqld")
        .arg(stock_mysqld())
        .args(["--replica", "semi-sync", "--no-trace", "--threads", "16"])
        .args([
            "--server-option",
            "binlog_group_commit_sync_delay=1000",
            "--server-option",
            "binlog_group_commit_sync_no_delay_count=6",
        ])
        .args([
            "--duration",
            "240",
            "--workdir",
            wd.path().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (source, _) = both_servers(wd.path());
    let pid = source.to_string();
    let mut light = Exporter::start(&[
        "--pid",
        &pid,
        "--window",
        "2",
        "--window-every",
        "4",
        "--commit-path",
        "--wakeups",
        "--io",
    ]);
    let mut exact = Exporter::start(&["--pid", &pid, "--probes", "exact", "--io"]);
    for x in [&mut light, &mut exact] {
        x.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    }
    let prom = Prometheus::start(&rules, &[light.port, exact.port], None);
    // Every query has data once the workload runs and a minute's rates
    // and a window or two are in: asked until each has (at most 3 min).
    let mut waiting = dashboard_queries();
    let rows: Vec<String> = waiting.iter().map(|(r, _)| r.clone()).collect();
    for want in [
        REDO_ROW,
        "Binlog group commit",
        "Why the binlog groups closed",
        "Commit path",
        "Replica acknowledgement",
        "Block I/O",
    ] {
        assert!(
            rows.iter().any(|r| r.starts_with(want)),
            "no row {want}: {rows:?}"
        );
    }
    let started = Instant::now();
    while !waiting.is_empty() {
        waiting.retain(|(_, q)| query(prom.port, q, now()).is_empty());
        if waiting.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "dashboard queries without data after 3 min: {waiting:#?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "every dashboard query had data {:.0} s after Prometheus started",
        started.elapsed().as_secs_f64()
    );
    // Both reasons closed groups (the delay and the count are set).
    for reason in ["count", "timeout"] {
        let q = format!("commitscope:binlog_groups_closed:share1m{{reason=\"{reason}\"}} > 0");
        assert!(!query(prom.port, &q, now()).is_empty(), "{q}");
    }
    // The binlog's followers in the last window: every wait that ended
    // took a wake-up at least, some were wasted (MySQL broadcasts each
    // group's end to all), and the leaders woke them.
    let t = light.metrics();
    let g = |name: &str, extra: &[&str]| sample(&t, name, extra).unwrap_or(0.0);
    let (waits, wakeups) = (
        g("commitscope_window_follower_waits", &[]),
        g("commitscope_window_follower_wakeups", &[]),
    );
    assert!(
        waits > 0.0 && wakeups >= waits,
        "{waits} waits, {wakeups} wake-ups:\n{t}"
    );
    assert!(
        sample(&t, "commitscope_window_follower_wakeups_wasted", &[]).is_some(),
        "{t}"
    );
    assert!(
        g(
            "commitscope_window_follower_wakeups_by_waker",
            &["waker=\"its group's leader\""]
        ) > 0.0,
        "{t}"
    );
    for x in [light, exact] {
        let (code, said) = x.stop(libc::SIGTERM);
        assert_eq!(code, Some(0), "{said:#?}");
    }
    // SAFETY: interrupting our own child, as a user's Ctrl-C would.
    unsafe { libc::kill(pair.id() as i32, libc::SIGINT) };
    let _ = pair.wait();
    assert_clean(wd.path());
}
