//! The parallel TPC-C loader: per-warehouse units of work on a few
//! connections, each table's rows streamed to the server as they are
//! generated (`LOAD DATA LOCAL INFILE` from memory, or multi-row
//! `INSERT`s), secondary indexes (and foreign keys) after the data, row
//! counts checked, and only then the load marked complete.
//!
//! Resumable: each warehouse is recorded as it completes, so an
//! interrupted load continues at the first unfinished warehouse, after
//! removing that warehouse's partial rows. Memory stays bounded whatever
//! W is: no table is ever held, only one batch (or one 64 KiB buffer).
use std::{
    collections::{BTreeMap, VecDeque},
    io::{self, Write},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use fastrand::Rng;
use mysql::{prelude::Queryable, Conn, LocalInfileHandler};

use super::{
    gen::{Part, Sender, SqlRows, TsvRows},
    rand::NuConstants,
    schema::{self, sql, LoadRecord},
    spec::{LoadMethod, ITEMS},
};
use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
};

/// One unit of work, small enough to spread W warehouses over a few
/// connections. A warehouse is loaded when its three units are.
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

impl Unit {
    fn parts(self) -> Vec<Part> {
        match self {
            Unit::Items => vec![Part::Items],
            Unit::Stock(w) => vec![Part::Warehouse(w), Part::District(w), Part::Stock(w)],
            Unit::Customers(w) => vec![Part::Customer(w), Part::History(w)],
            Unit::Orders(w) => vec![Part::Orders(w), Part::OrderLine(w), Part::NewOrders(w)],
        }
    }

    /// The warehouse it belongs to; 0 for the items.
    fn warehouse(self) -> u32 {
        match self {
            Unit::Items => 0,
            Unit::Stock(w) | Unit::Customers(w) | Unit::Orders(w) => w,
        }
    }
}

/// What a load did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    pub warehouses: u32,
    /// Rows in the tables after the load (resumed or not).
    pub rows: u64,
    /// Rows this run sent (less than `rows` when it resumed).
    pub loaded_rows: u64,
    pub seconds: f64,
    /// `loaded_rows` per second.
    pub rows_per_s: f64,
    pub method: LoadMethod,
    /// Warehouses an earlier, interrupted load had finished.
    pub resumed_warehouses: u32,
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
    pub method: LoadMethod,
    /// Keep the loader's writes in the binlog (`--load-binlog`): off by
    /// default, a replica of a throwaway load is rarely wanted.
    pub binlog: bool,
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
    stop: Arc<AtomicBool>,
    failed: Mutex<Option<Error>>,
    /// Units done per warehouse (0: the items).
    units_done: Mutex<BTreeMap<u32, u8>>,
    /// The NOW() of LOAD DATA rows.
    now: String,
    constants: NuConstants,
    method: LoadMethod,
    binlog: bool,
    /// Each warehouse's seed: the orders and order-line parts must agree.
    seed: u64,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A part's seed: the same on a retry, so the rows sent are the same.
    fn seed(&self, p: Part) -> u64 {
        let (tag, w) = match p {
            Part::Items => (1, 0),
            Part::Warehouse(w) => (2, w),
            Part::District(w) => (3, w),
            Part::Stock(w) => (4, w),
            Part::Customer(w) => (5, w),
            Part::History(w) => (6, w),
            // One seed for both: their line counts must agree.
            Part::Orders(w) | Part::OrderLine(w) => (7, w),
            Part::NewOrders(w) => (8, w),
        };
        self.seed ^ (tag << 56) ^ u64::from(w).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// The counter a stop or failure inside a LOAD DATA stream travels in.
fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "the load was stopped")
}

/// An earlier load of the same shape that did not finish, with the
/// warehouses it recorded: it is continued, never used as it is.
fn resumable(c: &mut Conn, opts: &LoadOptions) -> Result<Option<(LoadRecord, Vec<u32>)>> {
    let Some(rec) = schema::read_record(c)? else {
        return Ok(None);
    };
    if rec.complete || rec.warehouses != opts.warehouses || rec.foreign_keys != opts.foreign_keys {
        return Ok(None);
    }
    Ok(schema::loaded_warehouses(c)?.map(|done| (rec, done)))
}

/// Loads `opts.warehouses` warehouses into the (marked) database the
/// connection is using, or continues an unfinished load of the same
/// shape. `stop` ends the load early: the record stays incomplete, every
/// finished warehouse stays recorded, and the error says so.
pub fn load(opts: &LoadOptions, stop: Arc<AtomicBool>) -> Result<LoadReport> {
    let t0 = Instant::now();
    let mut c = open(&opts.endpoint, &opts.database, opts.binlog)?;
    let method = choose_method(&mut c, opts.method)?;
    let (constants, done) = match resumable(&mut c, opts)? {
        Some((rec, done)) => {
            let full = done.iter().filter(|&&w| w > 0).count();
            eprintln!(
                "tpcc: resuming: {full} of {} warehouses already loaded{}",
                opts.warehouses,
                if done.contains(&0) {
                    ", items kept"
                } else {
                    ""
                }
            );
            schema::remove_partial(&mut c, opts.warehouses, &done)?;
            (rec.constants, done)
        }
        None => {
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
            (constants, Vec::new())
        }
    };
    let resumed = done.iter().filter(|&&w| w > 0).count() as u32;
    let mut units = VecDeque::new();
    // The longest units first, so the tail of the load stays parallel.
    let todo: Vec<u32> = (1..=opts.warehouses)
        .filter(|w| !done.contains(w))
        .collect();
    for &w in &todo {
        units.push_back(Unit::Orders(w));
        units.push_back(Unit::Stock(w));
    }
    if !done.contains(&0) {
        units.push_back(Unit::Items);
    }
    for &w in &todo {
        units.push_back(Unit::Customers(w));
    }
    let now: Option<String> = c
        .query_first("SELECT DATE_FORMAT(NOW(), '%Y-%m-%d %H:%i:%s')")
        .map_err(sql("reading the server's clock"))?;
    let shared = Arc::new(Shared {
        queue: Mutex::new(units),
        rows: AtomicU64::new(0),
        stop,
        failed: Mutex::new(None),
        units_done: Mutex::new(BTreeMap::new()),
        now: now.unwrap_or_default(),
        constants,
        method,
        binlog: opts.binlog,
        seed: Rng::new().u64(..),
    });
    // Rows still to send: the unfinished warehouses, and the items unless kept.
    let left = expected_rows(todo.len() as u32) - if done.contains(&0) { ITEMS as u64 } else { 0 };
    let bar = progress_bar(opts, left);
    let workers: Vec<_> = (0..opts.parallel.max(1))
        .map(|i| {
            let (sh, ep, db) = (shared.clone(), opts.endpoint.clone(), opts.database.clone());
            std::thread::Builder::new()
                .name(format!("tpcc-load-{i}"))
                .spawn(move || {
                    if let Err(e) = worker(&sh, &ep, &db) {
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
    if shared.stopped() {
        return Err(Error::LoadInterrupted);
    }
    finish(&mut c, opts, &shared.stop)?;
    let counts = verify(&mut c, opts.warehouses)?;
    schema::mark_complete(&mut c)?;
    let rows: u64 = counts.iter().map(|(_, n)| n).sum();
    let loaded_rows = shared.rows.load(Ordering::Relaxed);
    let seconds = t0.elapsed().as_secs_f64();
    Ok(LoadReport {
        warehouses: opts.warehouses,
        rows,
        loaded_rows,
        seconds,
        rows_per_s: loaded_rows as f64 / seconds.max(1e-9),
        method,
        resumed_warehouses: resumed,
        counts,
    })
}

/// `auto`: LOAD DATA when the server takes it (`local_infile`), else
/// INSERTs, said in one line.
fn choose_method(c: &mut Conn, asked: LoadMethod) -> Result<LoadMethod> {
    let on: Option<u8> = c
        .query_first("SELECT @@GLOBAL.local_infile")
        .map_err(sql("reading local_infile"))?;
    let on = on.unwrap_or(0) != 0;
    Ok(match (asked, on) {
        (LoadMethod::Insert, _) => LoadMethod::Insert,
        (_, true) => LoadMethod::Infile,
        (LoadMethod::Infile, false) => {
            return Err(Error::BadInput {
                what: "--load-method infile",
                detail: "the server has local_infile=OFF: `SET GLOBAL local_infile = 1`, or use --load-method insert".into(),
            })
        }
        (LoadMethod::Auto, false) => {
            eprintln!("tpcc: the server has local_infile=OFF: loading with multi-row INSERTs (SET GLOBAL local_infile = 1 loads faster)");
            LoadMethod::Insert
        }
    })
}

/// A loader connection with the session settings that speed a bulk load
/// up and that a generated load can afford.
fn open(ep: &Endpoint, db: &str, binlog: bool) -> Result<Conn> {
    let mut c =
        Conn::new(conn::blocking_opts(ep, Some(db))).map_err(|e| conn::classify_blocking(ep, e))?;
    // Keys are generated unique; the foreign keys come after the data.
    c.query_drop("SET SESSION unique_checks=0, foreign_key_checks=0")
        .map_err(sql("setting up a loader connection"))?;
    if !binlog {
        let log_bin: Option<u8> = c
            .query_first("SELECT @@GLOBAL.log_bin")
            .map_err(sql("reading log_bin"))?;
        // Needs a privilege the account may lack: then the binlog stays on.
        if log_bin.unwrap_or(0) != 0 {
            let _ = c.query_drop("SET SESSION sql_log_bin=0");
        }
    }
    Ok(c)
}

fn progress_bar(opts: &LoadOptions, left: u64) -> Option<indicatif::ProgressBar> {
    if !opts.progress {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(left),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "loading {wide_bar} {human_pos}/{human_len} rows  {msg} rows/s  ETA {eta}",
    ) {
        bar.set_style(style);
    }
    Some(bar)
}

/// The generator the connection's LOAD DATA handler runs next.
type Feed = Option<(Part, u64)>;

fn worker(sh: &Arc<Shared>, ep: &Endpoint, db: &str) -> Result<()> {
    let mut c = open(ep, db, sh.binlog)?;
    let feed: Arc<Mutex<Feed>> = Arc::new(Mutex::new(None));
    if sh.method == LoadMethod::Infile {
        let (f, s) = (feed.clone(), sh.clone());
        c.set_local_infile_handler(Some(LocalInfileHandler::new(move |_, stream| {
            let next = f.lock().ok().and_then(|mut g| g.take());
            let Some((part, seed)) = next else {
                return Err(io::Error::other("no rows were queued for this LOAD DATA"));
            };
            let mut out = Stream {
                rows: TsvRows::new(&s.now),
                w: stream,
                sh: &s,
                counted: 0,
            };
            part.write(&mut out, seed, &s.constants)?;
            out.flush()
        })));
    }
    loop {
        if sh.stopped() {
            return Ok(());
        }
        let Some(unit) = sh.queue.lock().ok().and_then(|mut q| q.pop_front()) else {
            return Ok(());
        };
        for part in unit.parts() {
            send(&mut c, sh, &feed, part)?;
        }
        unit_done(&mut c, sh, unit)?;
    }
}

/// Records a finished unit; a warehouse with all three is recorded in the
/// progress table (autocommit: after its rows are committed).
fn unit_done(c: &mut Conn, sh: &Shared, unit: Unit) -> Result<()> {
    let w = unit.warehouse();
    let complete = {
        let mut m = sh
            .units_done
            .lock()
            .map_err(|_| Error::Runtime("a loader thread panicked".into()))?;
        let n = m.entry(w).or_default();
        *n += 1;
        w == 0 || *n == 3
    };
    if complete {
        schema::record_warehouse(c, w)?;
    }
    Ok(())
}

/// Deadlocks between two loaders' first rows into the same empty table
/// (MariaDB's bulk insert into an empty table locks the table): the
/// statement was rolled back whole, so the same rows are sent again.
const RETRIES: u64 = 20;

fn retryable(e: &mysql::Error) -> bool {
    matches!(e, mysql::Error::MySqlError(e) if matches!(e.code, 1213 | 1205))
}

/// Sends one part by the chosen method.
fn send(c: &mut Conn, sh: &Shared, feed: &Mutex<Feed>, part: Part) -> Result<()> {
    let table = part.table();
    let seed = sh.seed(part);
    let fail = |e: mysql::Error| {
        if sh.stopped() {
            Error::LoadInterrupted
        } else {
            Error::Tpcc {
                context: "loading",
                detail: format!("{table}: {e}"),
            }
        }
    };
    match sh.method {
        LoadMethod::Infile => {
            let stmt =
                format!("LOAD DATA LOCAL INFILE '{table}' INTO TABLE {table} CHARACTER SET latin1");
            let mut attempt = 0;
            loop {
                if let Ok(mut f) = feed.lock() {
                    *f = Some((part, seed));
                }
                match c.query_drop(&stmt) {
                    Ok(()) => return Ok(()),
                    Err(e) if retryable(&e) && attempt < RETRIES && !sh.stopped() => {
                        attempt += 1;
                        std::thread::sleep(Duration::from_millis(10 * attempt));
                    }
                    Err(e) => return Err(fail(e)),
                }
            }
        }
        LoadMethod::Insert | LoadMethod::Auto => {
            let mut out = Inserter {
                c,
                sh,
                table,
                batch: part.batch(),
                rows: SqlRows::default(),
                err: None,
            };
            let r = part.write(&mut out, seed, &sh.constants);
            if let Some(e) = out.err.take() {
                return Err(e);
            }
            r.map_err(|e| Error::Tpcc {
                context: "loading",
                detail: format!("{table}: {e}"),
            })?;
            out.flush()
        }
    }
}

/// LOAD DATA's side: rows into a 64 KiB buffer, written to the server's
/// stream when full; the shared row count moves every 1,000 rows.
struct Stream<'a, 'b, 'c> {
    rows: TsvRows<'a>,
    w: &'b mut mysql::LocalInfile<'c>,
    sh: &'a Shared,
    counted: u64,
}

impl Stream<'_, '_, '_> {
    fn flush(&mut self) -> io::Result<()> {
        self.w.write_all(&self.rows.buf)?;
        self.rows.buf.clear();
        self.sh
            .rows
            .fetch_add(self.rows.rows - self.counted, Ordering::Relaxed);
        self.counted = self.rows.rows;
        Ok(())
    }
}

impl<'a> Sender for Stream<'a, '_, '_> {
    type Rows = TsvRows<'a>;
    fn rows(&mut self) -> &mut TsvRows<'a> {
        &mut self.rows
    }
    fn row_done(&mut self) -> io::Result<()> {
        if self.rows.buf.len() >= 60 << 10 {
            if self.sh.stopped() {
                return Err(interrupted());
            }
            self.flush()?;
        }
        Ok(())
    }
}

/// The INSERT side: a batch of rows, sent as one statement when full.
struct Inserter<'a> {
    c: &'a mut Conn,
    sh: &'a Shared,
    table: &'static str,
    batch: usize,
    rows: SqlRows,
    /// The error that stopped the rows (the generator only sees io errors).
    err: Option<Error>,
}

impl Inserter<'_> {
    fn flush(&mut self) -> Result<()> {
        if self.rows.rows == 0 {
            return Ok(());
        }
        if self.sh.stopped() {
            return Err(Error::LoadInterrupted);
        }
        let n = self.rows.rows as u64;
        let stmt = format!("INSERT INTO {} VALUES {}", self.table, self.rows.text);
        self.rows.clear();
        let mut attempt = 0;
        loop {
            match self.c.query_drop(&stmt) {
                Ok(()) => break,
                Err(e) if retryable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(10 * attempt));
                }
                Err(e) => {
                    return Err(Error::Tpcc {
                        context: "loading",
                        detail: format!("{}: {e}", self.table),
                    })
                }
            }
        }
        self.sh.rows.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
}

impl Sender for Inserter<'_> {
    type Rows = SqlRows;
    fn rows(&mut self) -> &mut SqlRows {
        &mut self.rows
    }
    fn row_done(&mut self) -> io::Result<()> {
        if self.rows.rows >= self.batch {
            if let Err(e) = self.flush() {
                self.err = Some(e);
                return Err(interrupted());
            }
        }
        Ok(())
    }
}

/// Secondary indexes, then (if asked) foreign keys: after the data, as
/// tpcc-mysql's add_fkey_idx.sql does. Those already there (a resumed load
/// that was stopped while adding them) are skipped. The four indexes are
/// on four tables: built at once on their own connections, each sort
/// runs on a core of its own (W=8 here: 7.0 s one after another, 5.7 s
/// at once); the foreign keys follow, one by one.
fn finish(c: &mut Conn, opts: &LoadOptions, stop: &AtomicBool) -> Result<()> {
    let (indexes, fks) = schema::existing_keys(c)?;
    let missing = |list: &'static [&'static str], have: &[String]| -> Vec<&'static str> {
        list.iter()
            .copied()
            .filter(|stmt| !have.iter().any(|k| schema::ddl_names(stmt, k)))
            .collect()
    };
    let ddl = missing(&schema::INDEXES, &indexes);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = ddl
            .iter()
            .map(|stmt| {
                s.spawn(move || -> Result<()> {
                    if stop.load(Ordering::Relaxed) {
                        return Err(Error::LoadInterrupted);
                    }
                    let mut c = open(&opts.endpoint, &opts.database, opts.binlog)?;
                    c.query_drop(stmt).map_err(sql("adding indexes"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Runtime("an index thread panicked".into())))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    if opts.foreign_keys {
        for stmt in missing(&schema::FOREIGN_KEYS, &fks) {
            if stop.load(Ordering::Relaxed) {
                return Err(Error::LoadInterrupted);
            }
            c.query_drop(stmt).map_err(sql("adding foreign keys"))?;
        }
    }
    Ok(())
}

/// Counts every table and compares with what a load of `w` must hold
/// (order lines: the orders' own line counts).
fn verify(c: &mut Conn, w: u32) -> Result<Vec<(String, u64)>> {
    let w64 = u64::from(w);
    let order_lines: Option<u64> = c
        .query_first("SELECT CAST(COALESCE(SUM(o_ol_cnt), 0) AS UNSIGNED) FROM orders")
        .map_err(sql("counting order lines"))?;
    let want = |t: &str| -> u64 {
        match t {
            "warehouse" => w64,
            "district" => w64 * 10,
            "customer" | "history" | "orders" => w64 * 30_000,
            "new_orders" => w64 * 9_000,
            "order_line" => order_lines.unwrap_or(0),
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
