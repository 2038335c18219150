//! TPC-C against a real mariadbd started by the harness: a W=1 load has
//! the spec's row counts and passes consistency conditions 1-4; so does the
//! database after an 8 s run at 8 connections, whose report parses, whose
//! mix passes the Constraint Check, and whose counts match the rows the
//! server holds.
use clap::Parser;
use testkit::Server;
use workload::{cli::WorkloadArgs, load_check, run, tpcc};

#[derive(Parser)]
#[command(disable_help_flag = true)]
struct T {
    #[command(flatten)]
    a: WorkloadArgs,
}

fn args(s: &Server, extra: &[&str]) -> WorkloadArgs {
    let flags = s.client_flags();
    let mut v = vec!["t", "--workload", "tpcc", "--database", "tpcc_test"];
    v.extend(flags.iter().map(String::as_str));
    v.extend_from_slice(extra);
    T::parse_from(v).a
}

/// A throwaway server, or None (skipped, said in one line) without one.
fn server() -> Option<Server> {
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return None;
    };
    Some(Server::start(&bin, None, &[]).unwrap_or_else(|e| panic!("start server: {e}")))
}

fn one(s: &Server, sql: &str) -> f64 {
    let out = s.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql} gave {out:?}"))
}

/// Every order delivered since the load (2,100 per district were loaded
/// delivered) bumped its customer's c_delivery_cnt exactly once.
fn assert_delivered_once(srv: &Server) {
    assert_eq!(
        one(srv, "SELECT SUM(c_delivery_cnt) FROM tpcc_test.customer"),
        one(
            srv,
            "SELECT COUNT(*) - 21000 FROM tpcc_test.orders WHERE o_carrier_id IS NOT NULL"
        ),
    );
}

#[test]
fn load_run_check() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };

    // Load W=1.
    let mut out = Vec::new();
    load_check::load(&args(&srv, &["--warehouses", "1"]), &mut out).expect("load");
    let text = String::from_utf8_lossy(&out).to_string();
    assert!(text.contains("loaded 1 warehouse(s)"), "{text}");
    let count = |t: &str| one(&srv, &format!("SELECT COUNT(*) FROM tpcc_test.{t}")) as u64;
    for (t, n) in [
        ("warehouse", 1),
        ("district", 10),
        ("customer", 30_000),
        ("history", 30_000),
        ("orders", 30_000),
        ("new_orders", 9_000),
        ("item", 100_000),
        ("stock", 100_000),
    ] {
        assert_eq!(count(t), n, "{t}");
    }
    let lines = count("order_line");
    assert_eq!(
        lines as f64,
        one(&srv, "SELECT SUM(o_ol_cnt) FROM tpcc_test.orders"),
        "order lines = sum(o_ol_cnt)"
    );
    assert!((270_000..=330_000).contains(&lines), "{lines} order lines");
    // tpcc-mysql's secondary indexes, no foreign keys by default.
    let idx = srv
        .query("SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA='tpcc_test' AND INDEX_NAME <> 'PRIMARY' ORDER BY 1")
        .unwrap();
    assert_eq!(
        idx.split_whitespace().collect::<Vec<_>>(),
        [
            "fkey_order_line_2",
            "fkey_stock_2",
            "idx_customer",
            "idx_orders"
        ]
    );
    assert_eq!(
        one(&srv, "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA='tpcc_test'"),
        0.0
    );
    // The spec's data rules.
    assert_eq!(
        srv.query("SELECT c_last FROM tpcc_test.customer WHERE c_w_id=1 AND c_d_id=3 AND c_id=372")
            .unwrap()
            .trim(),
        "PRICALLYOUGHT"
    );
    let bc = one(&srv, "SELECT AVG(c_credit='BC') FROM tpcc_test.customer");
    assert!((0.08..=0.12).contains(&bc), "BC share {bc}");
    let orig = one(
        &srv,
        "SELECT AVG(i_data LIKE '%ORIGINAL%') FROM tpcc_test.item",
    );
    assert!((0.08..=0.12).contains(&orig), "ORIGINAL share {orig}");
    assert_eq!(
        one(&srv, "SELECT COUNT(*) FROM tpcc_test.orders WHERE (o_id < 2101) <> (o_carrier_id IS NOT NULL)"),
        0.0,
        "carrier set exactly for o_id <= 2100"
    );
    assert_eq!(
        one(&srv, "SELECT complete FROM tpcc_test._commitscope_tpcc"),
        1.0
    );
    let mut out = Vec::new();
    load_check::check(&args(&srv, &[]), &mut out).expect("conditions hold after the load");
    assert_eq!(String::from_utf8_lossy(&out).matches(" OK ").count(), 4);

    // 8 s at 8 connections, an interval line every 2 s (30 s and 10 held
    // a busy suite's lane three times as long for the same checks).
    let before_history = count("history");
    let before_next = one(&srv, "SELECT SUM(d_next_o_id) FROM tpcc_test.district");
    let mut out = Vec::new();
    let summary = run::run_to(
        &args(
            &srv,
            &[
                "-w",
                "1",
                "--threads",
                "8",
                "--duration",
                "8",
                "--report-interval",
                "2",
            ],
        ),
        &mut out,
    )
    .expect("tpcc run");
    let text = String::from_utf8_lossy(&out).to_string();
    let t = summary.tpcc.as_ref().expect("a TPC-C summary");
    let tpmc = tpcc::report::parse_tpmc(&text).expect("a <TpmC> line");
    assert!(
        tpmc > 0.0 && (tpmc - t.tpmc).abs() < 0.001,
        "{tpmc} vs {}",
        t.tpmc
    );
    let intervals = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.split(',').count() == 6
                && l.split(',')
                    .next()
                    .is_some_and(|n| n.parse::<u64>().is_ok())
        })
        .count();
    assert!(intervals >= 3, "tpcc-mysql interval lines:\n{text}");
    assert_eq!(t.failures(), 0, "{text}");
    use tpcc::Kind;
    // The mix is the deck's (clause 5.2.4.2). Each client deals from its
    // own shuffled 23-card deck, so its whole decks hold every kind at
    // exactly its share, and the deck still open at the end (with the
    // card in hand, not yet done) moves a kind's count by at most
    // cards * (23 - cards) / 23 + 1. Not tpcc-mysql's floors: 8 s is too
    // short for them to hold every time (Payment read 42.63 % against its
    // 43 % at 685 transactions in one CI run; a simulation of the deck at
    // that length misses it about one run in eight). Its verdict is held
    // to the shares it prints instead.
    let clients = 8.0;
    let n: u64 = t.totals.iter().map(|k| k.done()).sum();
    for k in Kind::ALL {
        let cards = k.cards() as f64;
        let share = n as f64 * cards / 23.0;
        let spread = clients * (cards * (23.0 - cards) / 23.0 + 1.0);
        let got = t.totals[k.index()].done() as f64;
        assert!(
            (got - share).abs() <= spread,
            "{k:?}: {got} of {n}, the deck's share {share:.1} ± {spread:.1}\n{text}"
        );
    }
    for c in t.constraint_check().mix {
        let tag = if c.ok { "[OK]" } else { "[NG] *" };
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("{:.2}% (", c.pct)) && l.ends_with(tag)),
            "{c:?}: no line with {:.2}% and {tag}\n{text}",
            c.pct
        );
    }
    // What the report counts is what the server holds.
    assert_eq!(
        count("history") - before_history,
        t.totals[Kind::Payment.index()].done(),
        "one history row per Payment"
    );
    let no = &t.totals[Kind::NewOrder.index()];
    assert_eq!(
        one(&srv, "SELECT SUM(d_next_o_id) FROM tpcc_test.district") - before_next,
        (no.done() - no.rolled_back) as f64,
        "d_next_o_id advances once per committed New-Order"
    );
    assert!(no.rolled_back <= no.done() / 20 + 5, "{no:?}");
    // No order was delivered twice by concurrent Deliveries.
    assert_delivered_once(&srv);
    assert!(t.totals[Kind::Delivery.index()].done() > 0);
    let mut out = Vec::new();
    load_check::check(&args(&srv, &[]), &mut out).unwrap_or_else(|e| {
        panic!(
            "conditions after the run: {e}\n{}",
            String::from_utf8_lossy(&out)
        )
    });
}

/// `--foreign-keys` adds tpcc-mysql's ten; `--delivery-single-commit` runs
/// Delivery as one transaction and keeps the data consistent.
#[test]
fn foreign_keys_and_single_commit_delivery() {
    let _lane = testkit::lane::shared();
    let Some(srv) = server() else { return };
    let mut out = Vec::new();
    let summary = run::run_to(
        &args(
            &srv,
            &[
                "-w",
                "1",
                "--foreign-keys",
                "--delivery-single-commit",
                "--threads",
                "4",
                "--duration",
                "5",
            ],
        ),
        &mut out,
    )
    .expect("tpcc run (loads first)");
    assert_eq!(
        one(&srv, "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA='tpcc_test'"),
        10.0
    );
    let t = summary.tpcc.expect("a TPC-C summary");
    assert!(t.totals[tpcc::Kind::Delivery.index()].done() > 0);
    assert_eq!(t.failures(), 0);
    assert_delivered_once(&srv);
    let mut out = Vec::new();
    load_check::check(&args(&srv, &[]), &mut out).expect("conditions hold");
}
