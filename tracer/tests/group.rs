//! `--replica group`: a managed single-primary Group Replication group of
//! Debian unstable's stock MySQL on loopback, its commits' time in the
//! group as commit-path stages, and members that die. What can fail is
//! held: the commits through the group against the primary's own count
//! (`COUNT_TRANSACTIONS_LOCAL_PROPOSED`), the stages' shares, a lost
//! member said, a lost majority ending the run with nothing left.
mod common;
mod exporter_kit;

use common::*;

/// The bar on a clean group of three: exit 0, the members said
/// ONLINE, the group's stages in the commit path, the commits through
/// the group within 1 % of the primary's own count, the shares summing
/// to 1 with at most 0.2 unattributed, and nothing left.
#[test]
fn stock_mysql_commits_through_a_managed_group_of_three_stage_by_stage() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let (s, err, wd) = managed_summary(
        &stock_mysqld(),
        &[
            "--replica",
            "group",
            "--commit-path",
            "--threads",
            "16",
            "--duration",
            "6",
        ],
    );
    let ctx = format!("{s}\n{err}");
    assert!(err.contains("3 members ONLINE"), "{ctx}");
    let names: Vec<&str> = cp_stages(&s)
        .iter()
        .map(|x| x["stage"].as_str().unwrap())
        .collect();
    for want in [
        "group: send",
        "group: consensus and certification",
        "group: rest of before_commit",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}\n{ctx}");
    }
    let sum: f64 = cp_stages(&s).iter().map(|x| f(&x["share"])).sum();
    assert!((sum - 1.0).abs() < 1e-6, "shares sum to {sum}: {ctx}");
    let rest = cp_stages(&s)
        .iter()
        .find(|x| x["stage"] == "unattributed")
        .unwrap();
    assert!(f(&rest["share"]) <= 0.2, "unattributed: {ctx}");
    // Through the group: ours against the primary's member stats.
    let proposed = check_of(&s, "COUNT_TRANSACTIONS_LOCAL_PROPOSED");
    assert!(u(&proposed["server"]) > 500, "{ctx}");
    assert!(f(&proposed["diff_pct"]).abs() <= 1.0, "{ctx}");
    // The group block: commits, their wait, consensus the largest part.
    let g = &s["trace"]["group"];
    // Every commit the path timed went through the group's hook.
    let (through, timed) = (u(&g["commits"]), u(&s["trace"]["commit_path"]["commits"]));
    assert!(
        through.abs_diff(timed) <= timed / 100,
        "{through} vs {timed}: {ctx}"
    );
    assert!(f(&g["consensus_us"]) > f(&g["send_us"]), "{ctx}");
    assert!(f(&g["mean_us"]) >= f(&g["consensus_us"]), "{ctx}");
    let end = &s["group"];
    assert_eq!(end["size"], 3, "{ctx}");
    assert_eq!(end["online"], 3, "{ctx}");
    assert_eq!(end["lost"].as_array().unwrap().len(), 0, "{ctx}");
    assert_eq!(s["workload"]["errors"], 0, "{ctx}");
    assert_clean(wd.path());
}

/// A secondary killed mid-run: the group goes on with two, the line and
/// the ticks say so; the second killed: the group lost its majority,
/// said within seconds, a non-zero exit, and nothing left running.
#[test]
fn a_group_goes_on_without_one_secondary_and_stops_without_its_majority() {
    let Some(_lane) = root_shared() else {
        return;
    };
    kill_two_of_three(
        &stock_mysqld(),
        &["--replica", "group"],
        &Losing {
            ready: "3 members ONLINE",
            said: "group member",
            tally: "(group: 2 of 3 members ONLINE)",
            lost: "the group lost its majority",
            left: "left ONLINE during the run",
        },
    );
}

/// Bad input: a group from a MariaDB binary, and flags a group has no
/// use for, each one line and exit 2 before anything starts.
#[test]
fn group_flags_that_cannot_apply_are_refused_in_one_line() {
    for (args, want) in [
        (
            &["--replica", "group", "--replica-delay-ms", "2"][..],
            "no proxy fits",
        ),
        (
            &["--replica", "group", "--group-members", "6"][..],
            "give 1 to 5",
        ),
        (&["--group-members", "3"][..], "add --replica group"),
        (
            &["--replica", "group", "--no-trace", "--workload", "tpcc"][..],
            "history table has none",
        ),
    ] {
        let line = fails(args);
        assert!(line.contains(want), "{args:?}: {line}");
    }
}

/// A loopback port free now.
fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A group of one the test harness founds itself on stock MySQL (the
/// same hook, the same consensus and certification as a larger group),
/// with the update table `cs_test.tb` (ids 1..=100).
fn group_of_one() -> testkit::Server {
    let mysqld = stock_mysqld();
    let plugins = mysqld
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("lib/mysql/plugin");
    let (port, gcs) = (free_port(), free_port());
    let opts: Vec<String> = vec![
        "--server-id=7".into(),
        "--log-bin".into(),
        "--gtid-mode=ON".into(),
        "--enforce-gtid-consistency=ON".into(),
        format!("--plugin-dir={}", plugins.display()),
        "--plugin-load-add=group_replication.so".into(),
        "--group-replication-group-name=6d1c0b4e-3c1f-4a8e-9d2b-5f7e8a9b0c1d".into(),
        "--group-replication-start-on-boot=OFF".into(),
        format!("--group-replication-local-address=127.0.0.1:{gcs}"),
        format!("--group-replication-group-seeds=127.0.0.1:{gcs}"),
        "--group-replication-ip-allowlist=127.0.0.1".into(),
        "--skip-networking=OFF".into(),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--report-host=127.0.0.1".into(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let server =
        testkit::Server::start_mysql(&mysqld, &opts).unwrap_or_else(|e| panic!("start MySQL: {e}"));
    server
        .query(
            "SET GLOBAL group_replication_bootstrap_group = ON; START GROUP_REPLICATION; \
             SET GLOBAL group_replication_bootstrap_group = OFF; \
             CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
             INSERT INTO cs_test.tb WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i, 0 FROM n",
        )
        .expect("found the group and prepare the schema");
    server
}

/// `trace --pid` on a group's primary the test harness started itself:
/// the group's stages in its commit path, one commit through the group
/// per commit the clients made.
#[test]
fn trace_by_pid_times_a_group_the_tool_did_not_start() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let server = group_of_one();
    let tracer = Tracer::start(server.pid(), &["--commit-path"]);
    let commits = server.drive_updates("cs_test", 8, 200);
    let lines = tracer.finish(true);
    let s = summary(&lines);
    let t = &s["totals"];
    assert_eq!(u(&t["group"]["commits"]), commits, "{s}");
    let c = &t["commit_path"];
    assert_eq!(u(&c["commits"]), commits, "{s}");
    let stages = c["stages"].as_array().unwrap();
    for want in ["group: send", "group: consensus and certification"] {
        assert!(stages.iter().any(|x| x["stage"] == want), "{want}: {s}");
    }
    let shares: f64 = stages.iter().map(|x| f(&x["share"])).sum();
    assert!((shares - 1.0).abs() <= 0.01, "{s}");
    // A group's hooks are not a semi-sync wait.
    assert!(t["replication"].is_null(), "{s}");
}

/// The exporter's exact window on a group member it did not start (the
/// light tier between windows): the commits through the group and their
/// parts, and the member's own count of proposed transactions over the
/// same window. Ours are counted between the member's two reads (the
/// window's maps read just after the first and just before the second),
/// so the member's window holds ours: ours exceed its count by at most
/// the 8 commits in flight at the start, and fall short by those that
/// end during the reads' round trips (11 of 3,543 alone, 27 of 1,487
/// beside six busy loops on the two cores: under 5 %). Counted from the
/// probes' attach instead, a loaded CI host once put 1,105 of ours
/// beside the member's 944.
#[test]
fn the_exporter_sets_the_members_own_count_beside_its_window() {
    use exporter_kit::{sample, Exporter};
    let Some(_lane) = root_shared() else {
        return;
    };
    let server = group_of_one();
    let scrape = Exporter::window_on_pid(
        server.pid(),
        "commitscope_window_group_server_commits{",
        || {
            server.drive_updates("cs_test", 8, 100);
        },
    );
    let get = |n: &str, l: &[&str]| {
        sample(&scrape, n, l).unwrap_or_else(|| panic!("no {n} {l:?}: {scrape}"))
    };
    let server_n = get(
        "commitscope_window_group_server_commits",
        &["counter=\"COUNT_TRANSACTIONS_LOCAL_PROPOSED\""],
    );
    let ours = get("commitscope_window_group_commits", &[]);
    assert!(server_n > 100.0, "{server_n}: {scrape}");
    assert!(
        ours <= server_n + 8.0 && ours >= server_n * 0.95 - 8.0,
        "{ours} vs {server_n}: {scrape}"
    );
    let consensus = get(
        "commitscope_window_group_part_seconds",
        &["part=\"consensus\""],
    );
    let mean = get("commitscope_window_group_time_seconds", &["stat=\"mean\""]);
    assert!(consensus > 0.0 && consensus <= mean, "{scrape}");
}
