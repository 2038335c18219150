//! The driver: one connection and one server-side prepared statement per
//! worker, an OS thread each with blocking I/O, as sysbench and tpcc-mysql
//! do. Measured here (`cargo xtask bench workload`): a blocking statement
//! costs send + recv, while mysql_async on tokio adds epoll_wait calls and
//! doubled the client CPU per transaction at one thread, above sysbench's.
//! The control connection (schema, status) stays on mysql_async.
//!
//! Workers record into their own slot (an uncontended mutex);
//! [`Engine::sample`] drains every slot at the caller's tick, so whoever
//! owns the clock (the CLI here, the tracer later) gets samples on exactly
//! its ticks.
use std::{
    collections::{BTreeMap, HashSet},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use mysql::{prelude::Queryable, Conn, Statement};

use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
    scenario::{self, Scenario},
    stats::{mean_stddev, new_hist, IntervalSample, Latency, Summary},
};

/// MySQL/MariaDB errors that mean "try the transaction again".
const DEADLOCK: u16 = 1213;
const LOCK_WAIT_TIMEOUT: u16 = 1205;

#[derive(Clone, Debug)]
pub struct Config {
    pub endpoint: Endpoint,
    pub database: String,
    pub scenario: Scenario,
    pub threads: u32,
    pub rows_per_thread: u32,
    pub total_rows: Option<u64>,
    pub warmup: Duration,
}

/// One worker's counters for the current interval.
struct Slot {
    hist: Histogram<u64>,
    txns: u64,
    errors: u64,
    retries: u64,
}

struct Shared {
    slots: Vec<Mutex<Slot>>,
    stop: AtomicBool,
    /// Rows claimed so far (`--total-rows`).
    claimed: AtomicU64,
    start: Instant,
    /// Microseconds from start to the latest commit (`--total-rows`'s
    /// elapsed time, like the seed's "500000 rows in 25.08 s").
    last_commit_us: AtomicU64,
    errors_by_code: Mutex<BTreeMap<String, u64>>,
    reported: Mutex<HashSet<String>>,
}

impl Shared {
    fn error(&self, w: usize, code: String, e: &mysql::Error) {
        if let Ok(mut s) = self.slots[w].lock() {
            s.errors += 1;
        }
        if let Ok(mut m) = self.errors_by_code.lock() {
            *m.entry(code.clone()).or_default() += 1;
        }
        if let Ok(mut r) = self.reported.lock() {
            if r.insert(code.clone()) {
                eprintln!("workload: first error {code}: {e}");
            }
        }
    }
}

pub struct Engine {
    cfg: Config,
    shared: Arc<Shared>,
    workers: Vec<std::thread::JoinHandle<()>>,
    start: Instant,
    last: Instant,
    tick: u64,
    samples: Vec<IntervalSample>,
    measured: Histogram<u64>,
}

fn lock_err<T>(_: T) -> Error {
    Error::Runtime("a workload worker panicked".into())
}

fn open_worker(cfg: &Config) -> Result<(Conn, Statement)> {
    let ep = &cfg.endpoint;
    let mut c = Conn::new(conn::blocking_opts(ep, Some(&cfg.database)))
        .map_err(|e| conn::classify_blocking(ep, e))?;
    let sql = match cfg.scenario {
        Scenario::Update | Scenario::HotRow => scenario::UPDATE_SQL,
        Scenario::Insert => {
            c.query_drop("SET autocommit=0")
                .map_err(|e| conn::classify_blocking(ep, e))?;
            scenario::INSERT_SQL
        }
    };
    let stmt = c.prep(sql).map_err(|e| conn::classify_blocking(ep, e))?;
    Ok((c, stmt))
}

/// One transaction: the statement, and COMMIT for `insert`.
fn txn(
    c: &mut Conn,
    stmt: &Statement,
    scenario: Scenario,
    row: u32,
) -> std::result::Result<(), mysql::Error> {
    match scenario {
        Scenario::Update | Scenario::HotRow => c.exec_drop(stmt, (row,)),
        Scenario::Insert => {
            c.exec_drop(stmt, ())?;
            c.query_drop("COMMIT")
        }
    }
}

fn worker(w: usize, cfg: Config, shared: Arc<Shared>, mut c: Conn, mut stmt: Statement) {
    let mut n: u64 = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        if let (Scenario::Insert, Some(total)) = (cfg.scenario, cfg.total_rows) {
            if shared.claimed.fetch_add(1, Ordering::Relaxed) >= total {
                break;
            }
        }
        let row = scenario::row_for(cfg.scenario, w as u32, cfg.rows_per_thread, n);
        let t0 = Instant::now();
        loop {
            match txn(&mut c, &stmt, cfg.scenario, row) {
                Ok(()) => {
                    let us = t0.elapsed().as_micros().max(1) as u64;
                    if let Ok(mut s) = shared.slots[w].lock() {
                        s.txns += 1;
                        let _ = s.hist.record(us);
                    }
                    if cfg.total_rows.is_some() {
                        let at = shared.start.elapsed().as_micros() as u64;
                        shared.last_commit_us.fetch_max(at, Ordering::Relaxed);
                    }
                    break;
                }
                Err(mysql::Error::MySqlError(e))
                    if matches!(e.code, DEADLOCK | LOCK_WAIT_TIMEOUT) =>
                {
                    if let Ok(mut s) = shared.slots[w].lock() {
                        s.retries += 1;
                    }
                    if cfg.scenario == Scenario::Insert {
                        let _ = c.query_drop("ROLLBACK");
                    }
                    if shared.stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(e @ mysql::Error::MySqlError(_)) => {
                    let code = match &e {
                        mysql::Error::MySqlError(se) => se.code.to_string(),
                        _ => unreachable!(),
                    };
                    shared.error(w, code, &e);
                    if cfg.scenario == Scenario::Insert {
                        let _ = c.query_drop("ROLLBACK");
                    }
                    break;
                }
                Err(e) => {
                    // The connection is gone: count it, reconnect until stopped.
                    shared.error(w, "io".into(), &e);
                    loop {
                        if shared.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        if let Ok((nc, ns)) = open_worker(&cfg) {
                            c = nc;
                            stmt = ns;
                            break;
                        }
                    }
                    break;
                }
            }
        }
        n += 1;
    }
}

impl Engine {
    /// Opens every connection first (so a bad password fails before the
    /// run, not in 100 tasks), then starts the workers.
    pub fn start(cfg: Config) -> Result<Engine> {
        if cfg.threads == 0 {
            return Err(Error::BadInput {
                what: "--threads",
                detail: "must be at least 1".into(),
            });
        }
        let mut conns = Vec::with_capacity(cfg.threads as usize);
        for _ in 0..cfg.threads {
            conns.push(open_worker(&cfg)?);
        }
        let shared = Arc::new(Shared {
            slots: (0..cfg.threads)
                .map(|_| {
                    Mutex::new(Slot {
                        hist: new_hist(),
                        txns: 0,
                        errors: 0,
                        retries: 0,
                    })
                })
                .collect(),
            stop: AtomicBool::new(false),
            claimed: AtomicU64::new(0),
            start: Instant::now(),
            last_commit_us: AtomicU64::new(0),
            errors_by_code: Mutex::new(BTreeMap::new()),
            reported: Mutex::new(HashSet::new()),
        });
        let start = shared.start;
        let mut workers = Vec::with_capacity(conns.len());
        for (w, (c, s)) in conns.into_iter().enumerate() {
            let (cfg, shared) = (cfg.clone(), shared.clone());
            let h = std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .stack_size(256 * 1024)
                .spawn(move || worker(w, cfg, shared, c, s))
                .map_err(|e| Error::Runtime(format!("cannot start worker thread: {e}")))?;
            workers.push(h);
        }
        Ok(Engine {
            cfg,
            shared,
            workers,
            start,
            last: start,
            tick: 0,
            samples: Vec::new(),
            measured: new_hist(),
        })
    }

    /// Drains every worker's counters into one sample for the interval
    /// since the previous call.
    pub fn sample(&mut self) -> Result<IntervalSample> {
        let now = Instant::now();
        let mut hist = new_hist();
        let (mut txns, mut errors, mut retries) = (0, 0, 0);
        for slot in &self.shared.slots {
            let mut s = slot.lock().map_err(lock_err)?;
            hist.add(&s.hist)
                .map_err(|e| Error::Runtime(format!("histogram: {e}")))?;
            s.hist.reset();
            txns += std::mem::take(&mut s.txns);
            errors += std::mem::take(&mut s.errors);
            retries += std::mem::take(&mut s.retries);
        }
        let interval_s = (now - self.last).as_secs_f64();
        let elapsed = now - self.start;
        self.last = now;
        self.tick += 1;
        // An interval that began inside the warmup is warmup.
        let began = elapsed.saturating_sub(Duration::from_secs_f64(interval_s));
        let warmup = began + Duration::from_millis(1) < self.cfg.warmup;
        if !warmup {
            self.measured
                .add(&hist)
                .map_err(|e| Error::Runtime(format!("histogram: {e}")))?;
        }
        let s = IntervalSample {
            tick: self.tick,
            elapsed_s: elapsed.as_secs_f64(),
            interval_s,
            warmup,
            txns,
            tps: if interval_s > 0.0 {
                txns as f64 / interval_s
            } else {
                0.0
            },
            latency: Latency::of(&hist),
            errors,
            retries,
        };
        self.samples.push(s.clone());
        Ok(s)
    }

    /// True when every worker has ended by itself (`--total-rows` reached).
    pub fn finished(&self) -> bool {
        self.workers
            .iter()
            .all(std::thread::JoinHandle::is_finished)
    }

    /// Stops the workers, takes the last partial sample, and summarises.
    /// Returns the last sample too, so a printer can show it.
    pub fn stop(mut self) -> Result<(IntervalSample, Summary)> {
        self.shared.stop.store(true, Ordering::Relaxed);
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
        let last = self.sample()?;
        let measured: Vec<&IntervalSample> = self.samples.iter().filter(|s| !s.warmup).collect();
        let tps: Vec<f64> = measured
            .iter()
            .filter(|s| s.interval_s >= 0.5)
            .map(|s| s.tps)
            .collect();
        let (_, stddev) = mean_stddev(&tps);
        let measured_s: f64 = measured.iter().map(|s| s.interval_s).sum();
        let txns: u64 = measured.iter().map(|s| s.txns).sum();
        let total_txns: u64 = self.samples.iter().map(|s| s.txns).sum();
        let rows_elapsed_s = self
            .cfg
            .total_rows
            .map(|_| self.shared.last_commit_us.load(Ordering::Relaxed) as f64 / 1e6);
        let summary = Summary {
            scenario: self.cfg.scenario.to_string(),
            threads: self.cfg.threads,
            measured_s,
            warmup_s: self.cfg.warmup.as_secs_f64(),
            total_txns,
            txns,
            mean_tps: if measured_s > 0.0 {
                txns as f64 / measured_s
            } else {
                0.0
            },
            tps_stddev: stddev,
            intervals: measured.len() as u64,
            latency: Latency::of(&self.measured),
            errors: self.samples.iter().map(|s| s.errors).sum(),
            retries: self.samples.iter().map(|s| s.retries).sum(),
            errors_by_code: self.shared.errors_by_code.lock().map_err(lock_err)?.clone(),
            rows_done: self.cfg.total_rows.map(|_| total_txns),
            rows_elapsed_s,
        };
        Ok((last, summary))
    }
}
