//! The parallel TPC-C loader: per-warehouse units of work on a few
//! connections, multi-row INSERTs, secondary indexes (and foreign keys)
//! after the data, row counts checked, and only then the load marked
//! complete.
use std::{
    collections::VecDeque,
    fmt::Write as _,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use fastrand::Rng;
use mysql::{prelude::Queryable, Conn};

use super::{
    rand::{self as tr, NuConstants},
    schema::{self, sql, LoadRecord},
    CUSTOMERS_PER_DISTRICT, DISTRICTS, ITEMS, NEW_ORDER_FIRST,
};
use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
};

/// Rows per INSERT statement (the floor is 500).
const BATCH: usize = 1000;
/// Wide rows (customer, stock: ~300-650 bytes each) go in smaller batches.
const WIDE_BATCH: usize = 500;

/// One unit of work, small enough to spread W warehouses over a few
/// connections.
#[derive(Clone, Copy, Debug)]
enum Unit {
    Items,
    /// The warehouse row, its ten districts and its 100,000 stock rows.
    Stock(u32),
    /// 30,000 customers and their 30,000 history rows.
    Customers(u32),
    /// 30,000 orders, their order lines, 9,000 new orders.
    Orders(u32),
}

/// What a load did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    pub warehouses: u32,
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    /// Rows per table, as counted after the load.
    pub counts: Vec<(String, u64)>,
}

pub struct LoadOptions {
    pub endpoint: Endpoint,
    pub database: String,
    pub warehouses: u32,
    pub foreign_keys: bool,
    /// Connections loading at once.
    pub parallel: usize,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
}

/// Rows a load of `w` warehouses makes, order lines estimated at their
/// mean (10 per order).
pub fn expected_rows(w: u32) -> u64 {
    let w = u64::from(w);
    ITEMS as u64 + w * (1 + 10 + 100_000 + 30_000 + 30_000 + 30_000 + 9_000 + 300_000)
}

/// Shared between the loader threads.
struct Shared {
    queue: Mutex<VecDeque<Unit>>,
    rows: AtomicU64,
    order_lines: AtomicU64,
    stop: Arc<AtomicBool>,
    failed: Mutex<Option<Error>>,
}

/// Loads `opts.warehouses` warehouses into the (marked) database the
/// connection is using. `stop` ends the load early: the record stays
/// incomplete and the error says so.
pub fn load(opts: &LoadOptions, stop: Arc<AtomicBool>) -> Result<LoadReport> {
    let t0 = Instant::now();
    let mut c = open(&opts.endpoint, &opts.database)?;
    let constants = NuConstants::for_load(&mut Rng::new());
    schema::recreate(
        &mut c,
        &LoadRecord {
            warehouses: opts.warehouses,
            complete: false,
            constants,
            foreign_keys: opts.foreign_keys,
        },
    )?;
    let mut units = VecDeque::new();
    // The longest units first, so the tail of the load stays parallel.
    for w in 1..=opts.warehouses {
        units.push_back(Unit::Orders(w));
        units.push_back(Unit::Stock(w));
    }
    units.push_back(Unit::Items);
    for w in 1..=opts.warehouses {
        units.push_back(Unit::Customers(w));
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(units),
        rows: AtomicU64::new(0),
        order_lines: AtomicU64::new(0),
        stop,
        failed: Mutex::new(None),
    });
    let bar = progress_bar(opts);
    let workers: Vec<_> = (0..opts.parallel.max(1))
        .map(|i| {
            let (sh, ep, db) = (shared.clone(), opts.endpoint.clone(), opts.database.clone());
            std::thread::Builder::new()
                .name(format!("tpcc-load-{i}"))
                .spawn(move || {
                    if let Err(e) = worker(&sh, &ep, &db, constants) {
                        // The cause first, then the stop: the other loaders
                        // then fail with "interrupted", which must not win.
                        if let Ok(mut f) = sh.failed.lock() {
                            f.get_or_insert(e);
                        }
                        sh.stop.store(true, Ordering::Relaxed);
                    }
                })
                .map_err(|e| Error::Runtime(format!("cannot start a loader thread: {e}")))
        })
        .collect::<Result<_>>()?;
    while workers.iter().any(|w| !w.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(b) = &bar {
            let rows = shared.rows.load(Ordering::Relaxed);
            b.set_position(rows);
            b.set_message(format!("{:.0}", rows as f64 / t0.elapsed().as_secs_f64()));
        }
    }
    for w in workers {
        let _ = w.join();
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = shared.failed.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    if shared.stop.load(Ordering::Relaxed) {
        return Err(Error::LoadInterrupted);
    }
    finish(&mut c, opts, &shared.stop)?;
    let counts = verify(
        &mut c,
        opts.warehouses,
        shared.order_lines.load(Ordering::Relaxed),
    )?;
    schema::mark_complete(&mut c)?;
    let rows: u64 = counts.iter().map(|(_, n)| n).sum();
    let seconds = t0.elapsed().as_secs_f64();
    Ok(LoadReport {
        warehouses: opts.warehouses,
        rows,
        seconds,
        rows_per_s: rows as f64 / seconds.max(1e-9),
        counts,
    })
}

fn open(ep: &Endpoint, db: &str) -> Result<Conn> {
    let mut c =
        Conn::new(conn::blocking_opts(ep, Some(db))).map_err(|e| conn::classify_blocking(ep, e))?;
    // Keys are generated unique; the foreign keys come after the data.
    c.query_drop("SET SESSION unique_checks=0, foreign_key_checks=0")
        .map_err(sql("setting up a loader connection"))?;
    Ok(c)
}

fn progress_bar(opts: &LoadOptions) -> Option<indicatif::ProgressBar> {
    if !opts.progress {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(expected_rows(opts.warehouses)),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "loading {wide_bar} {human_pos}/{human_len} rows  {msg} rows/s  ETA {eta}",
    ) {
        bar.set_style(style);
    }
    Some(bar)
}

fn worker(sh: &Shared, ep: &Endpoint, db: &str, k: NuConstants) -> Result<()> {
    let mut c = open(ep, db)?;
    let mut rng = Rng::new();
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some(unit) = sh.queue.lock().ok().and_then(|mut q| q.pop_front()) else {
            return Ok(());
        };
        let mut ins = Inserter {
            c: &mut c,
            sh,
            rows: Vec::new(),
        };
        match unit {
            Unit::Items => items(&mut ins, &mut rng)?,
            Unit::Stock(w) => {
                warehouse(&mut ins, &mut rng, w)?;
                stock(&mut ins, &mut rng, w)?;
            }
            Unit::Customers(w) => customers(&mut ins, &mut rng, w, &k)?,
            Unit::Orders(w) => orders(&mut ins, &mut rng, w)?,
        }
    }
}

/// Collects rows of one table and sends them as multi-row INSERTs.
struct Inserter<'a> {
    c: &'a mut Conn,
    sh: &'a Shared,
    rows: Vec<String>,
}

impl Inserter<'_> {
    fn row(&mut self, table: &'static str, batch: usize, row: String) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() >= batch {
            self.flush(table)?;
        }
        Ok(())
    }

    fn flush(&mut self, table: &'static str) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        if self.sh.stop.load(Ordering::Relaxed) {
            return Err(Error::LoadInterrupted);
        }
        let n = self.rows.len() as u64;
        let stmt = format!("INSERT INTO {table} VALUES {}", self.rows.join(","));
        self.rows.clear();
        // Two loaders' first rows into the same empty table can deadlock
        // (MariaDB's bulk insert into an empty table locks the table): the
        // statement was rolled back whole, so it is simply sent again.
        let mut attempt = 0;
        loop {
            match self.c.query_drop(&stmt) {
                Ok(()) => break,
                Err(mysql::Error::MySqlError(e))
                    if matches!(e.code, 1213 | 1205) && attempt < 20 =>
                {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(10 * attempt));
                }
                Err(e) => {
                    return Err(Error::Tpcc {
                        context: "loading",
                        detail: format!("{table}: {e}"),
                    })
                }
            }
        }
        self.sh.rows.fetch_add(n, Ordering::Relaxed);
        if table == "order_line" {
            self.sh.order_lines.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// `'text'`, for strings that are letters and digits only.
fn q(s: &str) -> String {
    format!("'{s}'")
}

fn a(rng: &mut Rng, min: usize, max: usize) -> String {
    let mut s = String::new();
    tr::astring(rng, min, max, &mut s);
    q(&s)
}

fn address(rng: &mut Rng, out: &mut String) {
    for (min, max) in [(10, 20), (10, 20), (10, 20)] {
        let _ = write!(out, "{},", a(rng, min, max));
    }
    let mut st = String::new();
    tr::state(rng, &mut st);
    let mut z = String::new();
    tr::zip(rng, &mut z);
    let _ = write!(out, "{},{}", q(&st), q(&z));
}

fn items(ins: &mut Inserter, rng: &mut Rng) -> Result<()> {
    for i in 1..=ITEMS {
        let mut data = String::new();
        tr::data_with_original(rng, &mut data);
        let row = format!(
            "({i},{},{},{},{})",
            rng.u32(1..=10_000),
            a(rng, 14, 24),
            tr::fixed(rng, 100, 10_000, 2),
            q(&data)
        );
        ins.row("item", BATCH, row)?;
    }
    ins.flush("item")
}

fn warehouse(ins: &mut Inserter, rng: &mut Rng, w: u32) -> Result<()> {
    let mut row = format!("({w},{},", a(rng, 6, 10));
    address(rng, &mut row);
    let _ = write!(row, ",{},300000.00)", tr::fixed(rng, 0, 20, 2));
    ins.row("warehouse", 1, row)?;
    for d in 1..=DISTRICTS {
        let mut row = format!("({d},{w},{},", a(rng, 6, 10));
        address(rng, &mut row);
        let _ = write!(
            row,
            ",{},30000.00,{})",
            tr::fixed(rng, 0, 20, 2),
            NEW_ORDER_FIRST + 900
        );
        ins.row("district", BATCH, row)?;
    }
    ins.flush("district")
}

fn stock(ins: &mut Inserter, rng: &mut Rng, w: u32) -> Result<()> {
    for i in 1..=ITEMS {
        let mut row = format!("({i},{w},{}", rng.u32(10..=100));
        for _ in 0..10 {
            let _ = write!(row, ",{}", a(rng, 24, 24));
        }
        let mut data = String::new();
        tr::data_with_original(rng, &mut data);
        let _ = write!(row, ",0,0,0,{})", q(&data));
        ins.row("stock", WIDE_BATCH, row)?;
    }
    ins.flush("stock")
}

fn customers(ins: &mut Inserter, rng: &mut Rng, w: u32, k: &NuConstants) -> Result<()> {
    for d in 1..=DISTRICTS {
        for c in 1..=CUSTOMERS_PER_DISTRICT {
            let last = if c <= 1000 {
                tr::last_name(c - 1)
            } else {
                tr::last_name(tr::nurand(rng, 255, k.c_last, 0, 999))
            };
            let mut row = format!("({c},{d},{w},{},'OE',{},", a(rng, 8, 16), q(&last));
            address(rng, &mut row);
            let mut phone = String::new();
            tr::nstring(rng, 16, 16, &mut phone);
            let credit = if rng.u32(1..=100) <= 10 { "BC" } else { "GC" };
            let _ = write!(
                row,
                ",{},NOW(),'{credit}',50000,{},-10.00,10.00,1,0,{})",
                q(&phone),
                tr::fixed(rng, 0, 50, 2),
                a(rng, 300, 500)
            );
            ins.row("customer", WIDE_BATCH, row)?;
        }
        ins.flush("customer")?;
        for c in 1..=CUSTOMERS_PER_DISTRICT {
            let row = format!("({c},{d},{w},{d},{w},NOW(),10.00,{})", a(rng, 12, 24));
            ins.row("history", BATCH, row)?;
        }
        ins.flush("history")?;
    }
    Ok(())
}

fn orders(ins: &mut Inserter, rng: &mut Rng, w: u32) -> Result<()> {
    for d in 1..=DISTRICTS {
        // o_c_id: a random permutation of the customer ids.
        let mut perm: Vec<u32> = (1..=CUSTOMERS_PER_DISTRICT).collect();
        rng.shuffle(&mut perm);
        let mut lines = Vec::with_capacity(3000);
        for (o, c) in (1..=CUSTOMERS_PER_DISTRICT).zip(perm) {
            let delivered = o < NEW_ORDER_FIRST;
            let ol_cnt = rng.u32(5..=15);
            let carrier = if delivered {
                rng.u32(1..=10).to_string()
            } else {
                "NULL".into()
            };
            ins.row(
                "orders",
                BATCH,
                format!("({o},{d},{w},{c},NOW(),{carrier},{ol_cnt},1)"),
            )?;
            lines.push((o, ol_cnt, delivered));
        }
        ins.flush("orders")?;
        for (o, ol_cnt, delivered) in lines {
            for n in 1..=ol_cnt {
                let (when, amount) = if delivered {
                    ("NOW()".to_string(), "0.00".to_string())
                } else {
                    ("NULL".to_string(), tr::fixed(rng, 1, 999_999, 2))
                };
                let row = format!(
                    "({o},{d},{w},{n},{},{w},{when},5,{amount},{})",
                    rng.u32(1..=ITEMS),
                    a(rng, 24, 24)
                );
                ins.row("order_line", BATCH, row)?;
            }
        }
        ins.flush("order_line")?;
        for o in NEW_ORDER_FIRST..=CUSTOMERS_PER_DISTRICT {
            ins.row("new_orders", BATCH, format!("({o},{d},{w})"))?;
        }
        ins.flush("new_orders")?;
    }
    Ok(())
}

/// Secondary indexes, then (if asked) foreign keys: after the data, as
/// tpcc-mysql's add_fkey_idx.sql does.
fn finish(c: &mut Conn, opts: &LoadOptions, stop: &AtomicBool) -> Result<()> {
    let ddl: Vec<&str> = schema::INDEXES
        .iter()
        .chain(if opts.foreign_keys {
            &schema::FOREIGN_KEYS[..]
        } else {
            &[]
        })
        .copied()
        .collect();
    for stmt in ddl {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::LoadInterrupted);
        }
        c.query_drop(stmt).map_err(sql("adding indexes and keys"))?;
    }
    Ok(())
}

/// Counts every table and compares with what a load of `w` must hold.
fn verify(c: &mut Conn, w: u32, order_lines: u64) -> Result<Vec<(String, u64)>> {
    let w64 = u64::from(w);
    let want = |t: &str| -> u64 {
        match t {
            "warehouse" => w64,
            "district" => w64 * 10,
            "customer" | "history" | "orders" => w64 * 30_000,
            "new_orders" => w64 * 9_000,
            "order_line" => order_lines,
            "item" => ITEMS as u64,
            "stock" => w64 * 100_000,
            _ => 0,
        }
    };
    let mut counts = Vec::new();
    for t in schema::TABLES {
        let n: Option<u64> = c
            .query_first(format!("SELECT COUNT(*) FROM {t}"))
            .map_err(sql("counting rows"))?;
        let n = n.unwrap_or(0);
        if n != want(t) {
            return Err(Error::Tpcc {
                context: "load check",
                detail: format!("{t} holds {n} rows, expected {}", want(t)),
            });
        }
        counts.push((t.to_string(), n));
    }
    Ok(counts)
}
