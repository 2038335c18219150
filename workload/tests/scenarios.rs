//! The workload engine against a real mariadbd started by the harness:
//! what it reports committed is what the server holds.
use clap::Parser;
use testkit::Server;
use workload::{cli::WorkloadArgs, run, stats::IoModel, stats::Summary};

#[derive(Parser)]
#[command(disable_help_flag = true)]
struct T {
    #[command(flatten)]
    a: WorkloadArgs,
}

fn server() -> Option<Server> {
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return None;
    };
    Some(Server::start(&bin, None, &[]).unwrap_or_else(|e| panic!("start server: {e}")))
}

fn args(s: &Server, extra: &[&str]) -> WorkloadArgs {
    let flags = s.client_flags();
    let mut v = vec!["t"];
    v.extend(flags.iter().map(String::as_str));
    v.extend_from_slice(extra);
    T::parse_from(v).a
}

fn one(s: &Server, sql: &str) -> u64 {
    s.query(sql)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}"))
}

fn check_summary(s: &Summary) {
    let l = s.latency;
    assert!(
        l.p50_us <= l.p95_us && l.p95_us <= l.p99_us && l.p99_us <= l.max_us,
        "{s:?}"
    );
    assert_eq!(s.errors, 0, "{s:?}");
}

#[test]
fn update_commits_match_the_table() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    let mut out = Vec::new();
    let a = args(
        &srv,
        &[
            "--threads",
            "6",
            "--duration",
            "2",
            "--interval",
            "0.25",
            "--json",
        ],
    );
    let sum = run::run_to(&a, &mut out).unwrap();
    check_summary(&sum);
    assert!(sum.total_txns > 100, "{sum:?}");
    // The printed intervals add up to the summary, each with monotone
    // percentiles, and the summary is the last line.
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let intervals: Vec<_> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(intervals.len() >= 7, "{} intervals", intervals.len());
    let summed: u64 = intervals.iter().map(|l| l["txns"].as_u64().unwrap()).sum();
    assert_eq!(summed, sum.total_txns);
    for l in &intervals {
        let p = |k: &str| l["latency"][k].as_u64().unwrap();
        assert!(
            p("p50_us") <= p("p95_us") && p("p95_us") <= p("p99_us") && p("p99_us") <= p("max_us"),
            "{l}"
        );
    }
    assert_eq!(lines.last().unwrap()["type"], "summary");
    assert_eq!(
        one(&srv, "SELECT SUM(c) FROM commitscope.tb"),
        sum.total_txns
    );
    // Each worker touched only its own row: rows 1..=6 hold everything.
    assert_eq!(
        one(
            &srv,
            "SELECT COUNT(*) FROM commitscope.tb WHERE c > 0 AND id > 6"
        ),
        0
    );
    assert_eq!(one(&srv, "SELECT COUNT(*) FROM commitscope.tb"), 100);

    // A rerun reuses the marked database; --rows-per-thread spreads rows.
    let before = one(&srv, "SELECT SUM(c) FROM commitscope.tb");
    let sum2 = run::run(&args(
        &srv,
        &[
            "--threads",
            "60",
            "--rows-per-thread",
            "2",
            "--duration",
            "1",
        ],
    ))
    .unwrap();
    assert_eq!(one(&srv, "SELECT COUNT(*) FROM commitscope.tb"), 120);
    assert_eq!(
        one(&srv, "SELECT SUM(c) FROM commitscope.tb") - before,
        sum2.total_txns
    );

    // --reset recreates it: the sum starts from zero.
    let sum3 = run::run(&args(
        &srv,
        &["--threads", "2", "--duration", "1", "--reset"],
    ))
    .unwrap();
    assert_eq!(
        one(&srv, "SELECT SUM(c) FROM commitscope.tb"),
        sum3.total_txns
    );
}

#[test]
fn hot_row_and_insert() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    let sum = run::run(&args(
        &srv,
        &[
            "--workload",
            "hot-row",
            "--threads",
            "8",
            "--duration",
            "1.5",
            "--warmup",
            "0.5",
        ],
    ))
    .unwrap();
    check_summary(&sum);
    assert_eq!(
        one(&srv, "SELECT c FROM commitscope.tb WHERE id = 1"),
        sum.total_txns
    );
    assert!(
        sum.txns <= sum.total_txns && sum.measured_s < 1.5,
        "{sum:?}"
    );

    let sum = run::run(&args(
        &srv,
        &[
            "--workload",
            "insert",
            "--threads",
            "4",
            "--total-rows",
            "1500",
        ],
    ))
    .unwrap();
    check_summary(&sum);
    assert_eq!(sum.rows_done, Some(1500));
    assert_eq!(
        one(&srv, "SELECT COUNT(*) FROM commitscope.test_load"),
        1500
    );
    assert_eq!(
        sum.io_model,
        IoModel::EventLoop,
        "4 clients on a 2-core machine"
    );
    let secs = sum.rows_elapsed_s.unwrap();
    assert!(secs > 0.0 && secs < 60.0, "{sum:?}");

    // One client: the thread-per-client model, same contract.
    let sum = run::run(&args(
        &srv,
        &[
            "--workload",
            "insert",
            "--threads",
            "1",
            "--total-rows",
            "300",
        ],
    ))
    .unwrap();
    check_summary(&sum);
    assert_eq!(sum.io_model, IoModel::Threads);
    assert_eq!(sum.rows_done, Some(300));
    // A --total-rows run starts on an empty table: exactly its own rows.
    assert_eq!(one(&srv, "SELECT COUNT(*) FROM commitscope.test_load"), 300);
}

#[test]
fn refuses_an_unmarked_database_and_leaves_it_untouched() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    srv.query("CREATE DATABASE precious; CREATE TABLE precious.tb (id INT PRIMARY KEY, c INT); INSERT INTO precious.tb VALUES (1, 41), (2, 42)")
        .unwrap();
    let before = srv
        .query("CHECKSUM TABLE precious.tb EXTENDED; SHOW TABLES FROM precious")
        .unwrap();
    let err = run::run(&args(
        &srv,
        &[
            "--database",
            "precious",
            "--threads",
            "2",
            "--duration",
            "1",
        ],
    ))
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("database `precious` exists but was not created by commitscope"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    let err = run::run(&args(
        &srv,
        &["--database", "precious", "--reset", "--duration", "1"],
    ))
    .unwrap_err();
    assert!(err.to_string().contains("refusing to touch it"), "{err}");
    let after = srv
        .query("CHECKSUM TABLE precious.tb EXTENDED; SHOW TABLES FROM precious")
        .unwrap();
    assert_eq!(before, after);
}

/// Workload flags for a 1 s run, no defaults file, plus `extra`.
fn cli(extra: &[&str]) -> WorkloadArgs {
    let mut v = vec!["t", "--defaults-file", "/dev/null", "--duration", "1"];
    v.extend_from_slice(extra);
    T::parse_from(v).a
}

#[test]
fn connection_errors_are_one_line() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    srv.query("CREATE USER 'app'@'localhost' IDENTIFIED BY 'right'")
        .unwrap();
    let sock = srv.socket.display().to_string();
    let a = cli(&["--socket", &sock, "--user", "app", "--password", "wrong"]);
    let msg = run::run(&a).unwrap_err().to_string();
    assert!(msg.starts_with("access denied for user \"app\""), "{msg}");
    assert!(msg.contains("--password"), "{msg}");

    let a = cli(&["--socket", "/nonexistent/sock", "--user", "root"]);
    let msg = run::run(&a).unwrap_err().to_string();
    assert!(
        msg.starts_with("cannot connect to the server at socket /nonexistent/sock"),
        "{msg}"
    );
    assert!(msg.contains("is the server running"), "{msg}");

    // No CREATE privilege: named as such.
    srv.query("CREATE USER 'ro'@'localhost' IDENTIFIED BY 'pw'")
        .unwrap();
    let a = cli(&["--socket", &sock, "--user", "ro", "--password", "pw"]);
    let msg = run::run(&a).unwrap_err().to_string();
    assert!(msg.starts_with("missing privileges"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

/// The hot path's own wire exchange (`workload::wire`) against the real
/// server: success, a server error with its code, the connection still
/// usable by the `mysql` crate afterwards, and a killed connection.
#[test]
fn wire_exec_reports_codes_and_lost_connections() {
    use mysql::prelude::Queryable;
    use std::os::fd::AsRawFd;
    use workload::wire::{exec_u32, WireError};
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    srv.query("CREATE DATABASE w; CREATE TABLE w.t (id INT UNSIGNED PRIMARY KEY)")
        .unwrap();
    let ep = args(&srv, &[]).conn.resolve().unwrap();
    let mut c = mysql::Conn::new(workload::conn::blocking_opts(&ep, Some("w"))).unwrap();
    let ins = c.prep("INSERT INTO t (id) VALUES (?)").unwrap();
    exec_u32(c.as_raw_fd(), ins.id(), 7).unwrap();
    match exec_u32(c.as_raw_fd(), ins.id(), 7) {
        Err(WireError::Server { code, message }) => {
            assert_eq!(code, 1062, "{message}");
            assert!(message.contains("Duplicate entry"), "{message}");
        }
        other => panic!("expected ER_DUP_ENTRY, got {other:?}"),
    }
    // The crate's own calls go on over the same connection.
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM t").unwrap();
    assert_eq!(n, Some(1));
    let id: Option<u64> = c.query_first("SELECT CONNECTION_ID()").unwrap();
    srv.query(&format!("KILL CONNECTION {}", id.unwrap()))
        .unwrap();
    assert!(matches!(
        exec_u32(c.as_raw_fd(), ins.id(), 8),
        Err(WireError::Io(_))
    ));
}
