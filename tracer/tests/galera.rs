//! `--replica galera`: a managed Galera cluster of Debian's stock
//! MariaDB 10.11 and its `galera-4` provider on loopback, each commit's
//! replication, certification and commit order as commit-path stages,
//! and nodes that die. What can fail is held: the certify calls against
//! the node's own `wsrep_replicated`, the stages' shares, flow control's
//! paused share reported, a lost node said, a lost Primary component
//! ending the run with nothing left (state-transfer daemons included).
mod common;
mod exporter_kit;

use std::path::Path;

use common::*;

/// Debian's stock server, which has wsrep compiled in (the fixture with
/// symbols has it compiled out); None (the test skips, saying why) where
/// it or the provider is not installed.
fn stock_mariadbd() -> Option<std::path::PathBuf> {
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return None;
    };
    if !Path::new(PROVIDER).is_file() {
        testkit::skip("no Galera provider: run `cargo xtask setup` (installs galera-4)");
        return None;
    }
    Some(bin)
}

/// Debian's `galera-4` provider.
const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// No state-transfer daemon is left behind: rsync started for a node
/// under `workdir` (its config is in the node's datadir).
fn assert_no_transfer_left(workdir: &Path) {
    let needle = workdir.to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            (c.contains("rsync") && c.contains(&needle)).then_some(c)
        })
        .collect();
    assert!(left.is_empty(), "state-transfer processes left: {left:?}");
}

/// The bar on a clean cluster of three: exit 0, the nodes said
/// Synced, the cluster's stages in the commit path, the certify calls
/// within 1 % of the node's own `wsrep_replicated`, the shares summing
/// to 1, flow control's paused share reported, and nothing left.
#[test]
fn stock_mariadb_commits_through_a_managed_cluster_of_three_stage_by_stage() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mariadbd) = stock_mariadbd() else {
        return;
    };
    let (s, err, wd) = managed_summary(
        &mariadbd,
        &[
            "--replica",
            "galera",
            "--commit-path",
            "--threads",
            "16",
            "--duration",
            "6",
        ],
    );
    let ctx = format!("{s}\n{err}");
    assert!(
        err.contains("cluster of 3 (Galera): 3 nodes Synced"),
        "{ctx}"
    );
    let names: Vec<&str> = cp_stages(&s)
        .iter()
        .map(|x| x["stage"].as_str().unwrap())
        .collect();
    for want in [
        "galera: replicate and certify",
        "galera: commit order",
        "galera: rest of before_commit",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}\n{ctx}");
    }
    let sum: f64 = cp_stages(&s).iter().map(|x| f(&x["share"])).sum();
    assert!((sum - 1.0).abs() < 1e-6, "shares sum to {sum}: {ctx}");
    // Certified: ours against the node's own count.
    let replicated = check_of(&s, "wsrep_replicated");
    assert!(u(&replicated["server"]) > 500, "{ctx}");
    assert!(f(&replicated["diff_pct"]).abs() <= 1.0, "{ctx}");
    let failed = check_of(&s, "wsrep_local_cert_failures");
    assert_eq!(failed["ours"], failed["server"], "{ctx}");
    // The cluster block: every commit the path timed went through the
    // cluster's hook, replication and certification the largest part.
    let c = &s["trace"]["cluster"];
    let (through, timed) = (u(&c["commits"]), u(&s["trace"]["commit_path"]["commits"]));
    assert!(
        through.abs_diff(timed) <= timed / 100,
        "{through} vs {timed}: {ctx}"
    );
    assert!(f(&c["consensus_us"]) > f(&c["send_us"]), "{ctx}");
    assert!(f(&c["mean_us"]) >= f(&c["consensus_us"]), "{ctx}");
    let end = &s["cluster"];
    assert_eq!(end["size"], 3, "{ctx}");
    assert_eq!(end["online"], 3, "{ctx}");
    let share = f(&end["paused_share"]);
    assert!((0.0..=1.0).contains(&share), "{ctx}");
    assert_eq!(
        end["pause_inside"], "galera: replicate and certify",
        "{ctx}"
    );
    assert_eq!(s["workload"]["errors"], 0, "{ctx}");
    assert_no_transfer_left(wd.path());
    assert_clean(wd.path());
}

/// A node killed mid-run: the cluster goes on with two, the line and the
/// ticks say so; the second killed: the last node is no longer in a
/// Primary component, said within seconds, a non-zero exit, and nothing
/// left running.
#[test]
fn a_cluster_goes_on_without_one_node_and_stops_without_its_primary_component() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mariadbd) = stock_mariadbd() else {
        return;
    };
    let wd = kill_two_of_three(
        &mariadbd,
        &["--replica", "galera"],
        &Losing {
            ready: "3 nodes Synced",
            said: "cluster node",
            tally: "(cluster: 2 of 3 nodes Synced)",
            lost: "the cluster lost the Primary component",
            left: "left Synced during the run",
        },
    );
    assert_no_transfer_left(wd.path());
}

/// A cluster of one the test harness founds itself on the stock server
/// (the same hooks, replication and certification as a larger cluster),
/// with the binlog on, so that each commit has two phases and certifies
/// in wsrep's `before_prepare`, and the update table `cs_test.tb` (ids
/// 1..=100).
fn cluster_of_one(mariadbd: &Path) -> testkit::Server {
    let gcomm = testkit::free_port();
    let opts: Vec<String> = vec![
        "--server-id=7".into(),
        "--log-bin".into(),
        "--wsrep-on=ON".into(),
        format!("--wsrep-provider={PROVIDER}"),
        format!("--wsrep-cluster-address=gcomm://127.0.0.1:{gcomm}"),
        format!("--wsrep-node-address=127.0.0.1:{gcomm}"),
        format!(
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm};gcache.size=16M"
        ),
        "--wsrep-new-cluster".into(),
        "--binlog-format=ROW".into(),
        "--innodb-autoinc-lock-mode=2".into(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let server = testkit::Server::start(mariadbd, None, &opts)
        .unwrap_or_else(|e| panic!("start a Galera node: {e}"));
    server
        .query(
            "CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
             INSERT INTO cs_test.tb WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i, 0 FROM n",
        )
        .expect("prepare the schema");
    server
}

/// `trace --pid` on a node the test harness started itself: the
/// cluster's stages in its commit path, one certify per commit the
/// clients made, against the node's own count.
#[test]
fn trace_by_pid_times_a_cluster_node_the_tool_did_not_start() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mariadbd) = stock_mariadbd() else {
        return;
    };
    let server = cluster_of_one(&mariadbd);
    let before = server.status("wsrep_replicated");
    let tracer = Tracer::start(server.pid(), &["--commit-path"]);
    let commits = server.drive_updates("cs_test", 8, 200);
    let lines = tracer.finish(true);
    let replicated = server.status("wsrep_replicated") - before;
    let s = summary(&lines);
    let t = &s["totals"];
    let c = &t["cluster"];
    assert_eq!(u(&c["commits"]), commits, "{s}");
    assert_eq!(u(&c["consensus_calls"]), replicated, "{s}");
    assert!(t["group"].is_null(), "{s}");
    let path = &t["commit_path"];
    assert_eq!(u(&path["commits"]), commits, "{s}");
    let stages = path["stages"].as_array().unwrap();
    for want in ["galera: replicate and certify", "galera: commit order"] {
        let st = stages
            .iter()
            .find(|x| x["stage"] == want)
            .unwrap_or_else(|| panic!("{want}: {s}"));
        assert_eq!(u(&st["commits"]), commits, "{want}: {s}");
    }
    let shares: f64 = stages.iter().map(|x| f(&x["share"])).sum();
    assert!((shares - 1.0).abs() <= 0.01, "{s}");
}

/// Bad input: a cluster of a family that has none, and flags a cluster
/// has no use for, each one line and exit 2 before anything starts.
#[test]
fn galera_flags_that_cannot_apply_are_refused_in_one_line() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let mysql = stock_mysqld();
    let mysql = mysql.to_str().unwrap();
    for (args, want) in [
        (
            &["--replica", "galera", "--replica-delay-ms", "2"][..],
            "drop it with --replica galera",
        ),
        (
            &["--replica", "galera", "--group-members", "9"][..],
            "give 1 to 5",
        ),
        (
            &["--mysqld", mysql, "--replica", "galera"][..],
            "it is MariaDB's Galera",
        ),
        (
            &["--replica", "group"][..],
            "it is MySQL's Group Replication",
        ),
        (
            &["--replica", "galera", "--write-nodes", "4"][..],
            "give 1 to 3",
        ),
        (&["--write-nodes", "2"][..], "add --replica galera"),
        (
            &["--replica", "galera", "--slow-member", "100"][..],
            "1 to 99",
        ),
        (&["--slow-member", "20"][..], "add --replica group"),
    ] {
        let line = fails(args);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    // A MariaDB built without wsrep (the symbols fixture) cannot be a
    // node: said before any server starts.
    if let Some(fixture) = testkit::symbols_fixture() {
        let bin = fixture.join("bin/mariadbd");
        let line = fails(&["--mysqld", bin.to_str().unwrap(), "--replica", "galera"]);
        assert!(line.contains("has no Galera support"), "{line}");
    }
}

/// Writers on two nodes updating one row: their transactions conflict
/// in certification, the losers are retried (error 1213), and the traced
/// node's own count of failed certifications is ours.
#[test]
fn writers_on_two_nodes_conflict_and_are_retried() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mariadbd) = stock_mariadbd() else {
        return;
    };
    let csv_dir = tempfile::tempdir().unwrap();
    let csv = csv_dir.path().join("ticks.csv");
    let (s, err, wd) = managed_summary(
        &mariadbd,
        &[
            "--csv",
            csv.to_str().unwrap(),
            "--replica",
            "galera",
            // Two nodes, both written on: a third would only add its
            // start to the suite.
            "--group-members",
            "2",
            "--write-nodes",
            "2",
            "--workload",
            "hot-row",
            "--threads",
            "8",
            "--duration",
            "3",
        ],
    );
    let ctx = format!("{s}\n{err}");
    assert!(u(&s["workload"]["retries"]) > 0, "{ctx}");
    assert!(u(&s["workload"]["commits"]) > 50, "{ctx}");
    // Ours and the node's own counts over the same window, within the 8
    // clients' transactions in flight at its edges. Which node's writers
    // lose is the machine's: idle, the second node's starve and the
    // first (traced) node certifies cleanly (426 and 0 beside 426 and
    // 0); loaded, the first node's starve (32 and 24 beside 32 and 24).
    for counter in ["wsrep_replicated", "wsrep_local_cert_failures"] {
        let c = check_of(&s, counter);
        assert!(
            u(&c["ours"]).abs_diff(u(&c["server"])) <= 8,
            "{counter}: {ctx}"
        );
    }
    // Each written node counts the conflicts of its own clients'
    // transactions: the second node's are read from it. Every retry is a
    // brute-force abort on the node its client wrote on (a failed
    // certification is counted as one too): summed over both nodes they
    // matched the retries within 6 in five runs (2,978 beside 2,979
    // idle, 888 beside 890 loaded), whichever node's clients lost.
    let cluster = &s["cluster"];
    let others = cluster["other_writers"].as_array().expect("other_writers");
    assert_eq!(others.len(), 1, "{ctx}");
    let second = others[0]["address"].as_str().unwrap();
    assert!(
        cluster["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["address"] == second),
        "{second} is no member: {ctx}"
    );
    let aborts = u(&cluster["rollbacks"]) + u(&others[0]["rollbacks"]);
    let retries = u(&s["workload"]["retries"]);
    assert!(
        aborts.abs_diff(retries) <= 16 + retries / 20,
        "the written nodes aborted {aborts}, the clients retried {retries}: {ctx}"
    );
    // Tick by tick in --csv: the write sets the traced node sent and
    // those refused. Summed, the ticks hold the measured window's but
    // for its residual after the last tick, which gets no row of its own
    // when under a tenth of an interval (run 41: 346 of 356).
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows = text.lines().map(|l| l.split(',').collect::<Vec<_>>());
    let head = rows.next().unwrap();
    let col = |name: &str| {
        head.iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name} column: {head:?}"))
    };
    let (sent, refused) = (col("group_steps_sent"), col("group_steps_refused"));
    let (mut a, mut b) = (0, 0);
    for r in rows {
        a += r[sent].parse::<u64>().unwrap_or(0);
        b += r[refused].parse::<u64>().unwrap_or(0);
    }
    let c = |counter| u(&check_of(&s, counter)["ours"]);
    for (sum, counter) in [(a, "wsrep_replicated"), (b, "wsrep_local_cert_failures")] {
        let ours = c(counter);
        assert!(
            sum <= ours + 8 && sum + 8 >= ours * 8 / 10,
            "{sum} in the ticks, {ours} {counter}: {ctx}\n{text}"
        );
    }
    assert_no_transfer_left(wd.path());
    assert_clean(wd.path());
}

/// The exporter's exact window on a node it did not start (the light
/// tier between windows): the certify calls and the node's own
/// `wsrep_replicated` and `wsrep_local_cert_failures` over the same
/// window. Ours are counted between the node's two reads, so they match
/// its count within the 8 commits in flight at either end (as the
/// Group Replication window's are).
#[test]
fn the_exporter_sets_the_nodes_own_counts_beside_its_window() {
    use exporter_kit::{sample, Exporter};
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mariadbd) = stock_mariadbd() else {
        return;
    };
    let server = cluster_of_one(&mariadbd);
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
    let replicated = get(
        "commitscope_window_group_server_commits",
        &["counter=\"wsrep_replicated\""],
    );
    let calls = get(
        "commitscope_window_group_consensus_calls",
        &["outcome=\"all\""],
    );
    assert!(replicated > 100.0, "{replicated}: {scrape}");
    assert!(
        calls <= replicated + 8.0 && calls >= replicated * 0.95 - 8.0,
        "{calls} vs {replicated}: {scrape}"
    );
    let failed = get(
        "commitscope_window_group_consensus_calls",
        &["outcome=\"conflict\""],
    );
    let server_failed = get(
        "commitscope_window_group_server_failures",
        &["counter=\"wsrep_local_cert_failures\""],
    );
    // One node certifies against no other writer: nothing fails.
    assert_eq!((failed, server_failed), (0.0, 0.0), "{scrape}");
}
