//! The driver: one connection and one server-side prepared statement per
//! worker. Workers record into their own slot (an uncontended mutex);
//! [`Engine::sample`] drains every slot at the caller's tick, so whoever
//! owns the clock (the CLI here, the tracer later) gets samples on exactly
//! its ticks.
//!
//! Two I/O models, picked by client count, because each loses where the
//! other wins (`cargo xtask bench workload`, this 2-core machine):
//! - up to one client per core, a thread per client with a blocking
//!   connection (`mysql`): send + recv per statement and nothing else;
//! - beyond that, one tokio event loop with every connection
//!   (`mysql_async`): one epoll wake-up serves many replies, where 100
//!   blocking threads would pay a context switch each. At one client the
//!   event loop cost twice the CPU: over a unix socket every reply also
//!   brings a write-space (EPOLLOUT) wake-up.
use std::{
    collections::{BTreeMap, HashSet},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc, Mutex,
    },
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;

use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
    scenario::{self, Scenario},
    stats::{new_hist, Clock, IntervalSample, IoModel, Latency, Summary, Window},
    workers::Workers,
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
    /// Set for `--workload tpcc`.
    pub tpcc: Option<crate::tpcc::Settings>,
    /// More servers the clients write on (a multi-primary cluster's other
    /// nodes): client `w` connects to the `w % (1 + spread.len())`th of
    /// `endpoint` and these. Empty: all on `endpoint`.
    pub spread: Vec<Endpoint>,
}

impl Config {
    /// Where client `w` connects.
    pub fn endpoint_for(&self, w: usize) -> &Endpoint {
        match w % (1 + self.spread.len()) {
            0 => &self.endpoint,
            k => &self.spread[k - 1],
        }
    }

    /// Connections the run opens at its peak besides the one that asks:
    /// the clients (or the TPC-C loaders, when more) and one for schema
    /// work beside them.
    pub fn peak_connections(&self) -> u64 {
        let load = self
            .tpcc
            .as_ref()
            .map_or(0, |s| s.load_parallel() as u64 + 1);
        u64::from(self.threads).max(load) + 1
    }
}

/// One lane's counters for the current interval. A latency histogram is
/// ~190 KB (µs to an hour at 3 significant figures): one per client made
/// 1,000 clients cost 190 MB. Clients share lanes instead ([`crate::workers::lanes_for`]):
/// the event loop's clients all run on one thread, and a lane's mutex is
/// held only to bump a counter and record one value.
struct Slot {
    hist: Histogram<u64>,
    txns: u64,
    errors: u64,
    retries: u64,
}

struct Shared {
    slots: Vec<Mutex<Slot>>,
    /// Commits per client over the whole run: a client that never got a
    /// turn shows up as a 0 here.
    client_commits: Vec<AtomicU64>,
    stop: AtomicBool,
    /// Rows claimed so far (`--total-rows`).
    claimed: AtomicU64,
    start: Instant,
    /// Microseconds from start to the latest commit (`--total-rows`'s
    /// elapsed time, like the seed's "500000 rows in 25.08 s").
    last_commit_us: AtomicU64,
    errors_by_code: Mutex<BTreeMap<String, u64>>,
    reported: Mutex<HashSet<String>>,
    /// Set by the first error the run must stop on (a full disk).
    fatal: crate::fatal::Fatal,
}

/// What one attempt of a transaction came to, whichever client ran it.
enum Attempt {
    Done,
    /// Deadlock or lock-wait timeout: run it again.
    Retry,
    /// Any other server error: counted, next transaction.
    Failed {
        code: u16,
        msg: String,
    },
    /// The connection is gone: counted, reconnect.
    Lost {
        msg: String,
    },
}

impl From<std::result::Result<(), mysql::Error>> for Attempt {
    fn from(r: std::result::Result<(), mysql::Error>) -> Self {
        match r {
            Ok(()) => Attempt::Done,
            Err(mysql::Error::MySqlError(e)) if matches!(e.code, DEADLOCK | LOCK_WAIT_TIMEOUT) => {
                Attempt::Retry
            }
            Err(mysql::Error::MySqlError(e)) => Attempt::Failed {
                code: e.code,
                msg: e.to_string(),
            },
            Err(e) => Attempt::Lost { msg: e.to_string() },
        }
    }
}

impl From<std::result::Result<(), mysql_async::Error>> for Attempt {
    fn from(r: std::result::Result<(), mysql_async::Error>) -> Self {
        match r {
            Ok(()) => Attempt::Done,
            Err(mysql_async::Error::Server(e))
                if matches!(e.code, DEADLOCK | LOCK_WAIT_TIMEOUT) =>
            {
                Attempt::Retry
            }
            Err(mysql_async::Error::Server(e)) => Attempt::Failed {
                code: e.code,
                msg: e.to_string(),
            },
            Err(e) => Attempt::Lost { msg: e.to_string() },
        }
    }
}

/// What a worker does after an attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    /// On to the next transaction (after a rollback, for `insert`, if it failed).
    Advance {
        rollback: bool,
    },
    /// The same transaction again (after a rollback, for `insert`).
    Again {
        rollback: bool,
    },
    Reconnect,
    Stop,
}

impl Shared {
    fn slot(&self, w: usize) -> &Mutex<Slot> {
        &self.slots[w % self.slots.len()]
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Claims the next row of `--total-rows`; false when all are taken.
    fn claim(&self, cfg: &Config) -> bool {
        match (cfg.scenario, cfg.total_rows) {
            (Scenario::Insert, Some(total)) => self.claimed.fetch_add(1, Ordering::Relaxed) < total,
            _ => true,
        }
    }

    /// Records an attempt's outcome; the one place both I/O models share.
    fn settle(&self, w: usize, a: Attempt, t0: Instant, cfg: &Config) -> Next {
        let insert = cfg.scenario == Scenario::Insert;
        match a {
            Attempt::Done => {
                let us = t0.elapsed().as_micros().max(1) as u64;
                self.client_commits[w].fetch_add(1, Ordering::Relaxed);
                if let Ok(mut s) = self.slot(w).lock() {
                    s.txns += 1;
                    let _ = s.hist.record(us);
                }
                if cfg.total_rows.is_some() {
                    let at = self.start.elapsed().as_micros() as u64;
                    self.last_commit_us.fetch_max(at, Ordering::Relaxed);
                }
                Next::Advance { rollback: false }
            }
            Attempt::Retry => {
                if let Ok(mut s) = self.slot(w).lock() {
                    s.retries += 1;
                }
                if self.stopped() {
                    Next::Stop
                } else {
                    Next::Again { rollback: insert }
                }
            }
            Attempt::Failed { code, msg } => {
                self.error(w, code.to_string(), &msg);
                if self.fatal.note(code, &msg) {
                    // Idle until the run ends: the session stops it.
                    self.stop.store(true, Ordering::Relaxed);
                    return Next::Stop;
                }
                Next::Advance { rollback: insert }
            }
            Attempt::Lost { msg } => {
                self.error(w, "io".into(), &msg);
                Next::Reconnect
            }
        }
    }

    fn error(&self, w: usize, code: String, msg: &str) {
        if let Ok(mut s) = self.slot(w).lock() {
            s.errors += 1;
        }
        if let Ok(mut m) = self.errors_by_code.lock() {
            *m.entry(code.clone()).or_default() += 1;
        }
        // After the stop, a worker left behind on a frozen server reports
        // only the server's going away: not worth a line.
        if self.stopped() {
            return;
        }
        if let Ok(mut r) = self.reported.lock() {
            if r.insert(code.clone()) {
                eprintln!("workload: first error {code}: {msg}");
            }
        }
    }
}

/// The statement a scenario runs.
fn statement(s: Scenario) -> &'static str {
    match s {
        // Tpcc never gets here: Engine::start hands it to tpcc::driver.
        Scenario::Update | Scenario::HotRow | Scenario::Tpcc => scenario::UPDATE_SQL,
        Scenario::Insert => scenario::INSERT_SQL,
    }
}

/// Thread-per-client workers on blocking connections.
mod blocking {
    use mysql::{prelude::Queryable, Conn, Statement};

    use super::*;

    pub fn open(cfg: &Config, w: usize) -> Result<(Conn, Statement)> {
        let ep = cfg.endpoint_for(w);
        let err = |e| conn::classify_blocking(ep, e);
        let mut c = Conn::new(conn::blocking_opts(ep, Some(&cfg.database))).map_err(err)?;
        if cfg.scenario == Scenario::Insert {
            c.query_drop("SET autocommit=0").map_err(err)?;
        }
        let stmt = c.prep(statement(cfg.scenario)).map_err(err)?;
        Ok((c, stmt))
    }

    fn txn(
        c: &mut Conn,
        stmt: &Statement,
        scenario: Scenario,
        row: u32,
    ) -> std::result::Result<(), mysql::Error> {
        match scenario {
            // The hot path, waiting with poll (see `wire`).
            Scenario::Update | Scenario::HotRow | Scenario::Tpcc => {
                use std::os::fd::AsRawFd;
                crate::wire::exec_u32(c.as_raw_fd(), stmt.id(), row).map_err(|e| match e {
                    crate::wire::WireError::Server { code, message } => {
                        mysql::Error::MySqlError(mysql::MySqlError {
                            state: String::new(),
                            message,
                            code,
                        })
                    }
                    crate::wire::WireError::Io(e) => mysql::Error::IoError(e),
                })
            }
            Scenario::Insert => {
                c.exec_drop(stmt, ())?;
                c.query_drop("COMMIT")
            }
        }
    }

    pub fn worker(
        w: usize,
        cfg: Config,
        shared: Arc<Shared>,
        (mut c, mut stmt): (Conn, Statement),
    ) {
        let mut n: u64 = 0;
        'txns: while !shared.stopped() && shared.claim(&cfg) {
            let row = scenario::row_for(cfg.scenario, w as u32, cfg.rows_per_thread, n);
            let t0 = Instant::now();
            loop {
                let a = Attempt::from(txn(&mut c, &stmt, cfg.scenario, row));
                match shared.settle(w, a, t0, &cfg) {
                    Next::Advance { rollback } => {
                        if rollback {
                            let _ = c.query_drop("ROLLBACK");
                        }
                        break;
                    }
                    Next::Again { rollback } => {
                        if rollback {
                            let _ = c.query_drop("ROLLBACK");
                        }
                    }
                    Next::Stop => break 'txns,
                    Next::Reconnect => loop {
                        if shared.stopped() {
                            break 'txns;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        if let Ok((nc, ns)) = open(&cfg, w) {
                            (c, stmt) = (nc, ns);
                            break;
                        }
                    },
                }
            }
            n += 1;
        }
    }
}

/// Every client on one tokio event loop (its own OS thread).
mod evloop {
    use mysql_async::{prelude::*, Conn, Statement};

    use super::*;

    pub async fn open(cfg: &Config, w: usize) -> Result<(Conn, Statement)> {
        let ep = cfg.endpoint_for(w);
        let mut c = conn::connect(ep, Some(&cfg.database)).await?;
        if cfg.scenario == Scenario::Insert {
            c.query_drop("SET autocommit=0")
                .await
                .map_err(|e| conn::classify(ep, e))?;
        }
        let stmt = c
            .prep(statement(cfg.scenario))
            .await
            .map_err(|e| conn::classify(ep, e))?;
        Ok((c, stmt))
    }

    async fn txn(
        c: &mut Conn,
        stmt: &Statement,
        scenario: Scenario,
        row: u32,
    ) -> std::result::Result<(), mysql_async::Error> {
        match scenario {
            Scenario::Update | Scenario::HotRow | Scenario::Tpcc => c.exec_drop(stmt, (row,)).await,
            Scenario::Insert => {
                c.exec_drop(stmt, ()).await?;
                c.query_drop("COMMIT").await
            }
        }
    }

    /// `blocking::worker` with `.await`s: the decisions both share live
    /// in [`Shared::settle`]; only the client calls differ.
    pub async fn worker(
        w: usize,
        cfg: Config,
        shared: Arc<Shared>,
        (mut c, mut stmt): (Conn, Statement),
    ) {
        let mut n: u64 = 0;
        'txns: while !shared.stopped() && shared.claim(&cfg) {
            let row = scenario::row_for(cfg.scenario, w as u32, cfg.rows_per_thread, n);
            let t0 = Instant::now();
            loop {
                let a = Attempt::from(txn(&mut c, &stmt, cfg.scenario, row).await);
                match shared.settle(w, a, t0, &cfg) {
                    Next::Advance { rollback } => {
                        if rollback {
                            let _ = c.query_drop("ROLLBACK").await;
                        }
                        break;
                    }
                    Next::Again { rollback } => {
                        if rollback {
                            let _ = c.query_drop("ROLLBACK").await;
                        }
                    }
                    Next::Stop => break 'txns,
                    Next::Reconnect => loop {
                        if shared.stopped() {
                            break 'txns;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if let Ok((nc, ns)) = open(&cfg, w).await {
                            (c, stmt) = (nc, ns);
                            break;
                        }
                    },
                }
            }
            n += 1;
        }
        let _ = c.disconnect().await;
    }

    /// Opens `cfg.threads` connections, [`CONNECTING`] at a time: one by
    /// one, 4,000 handshakes take seconds; all at once, they overflow the
    /// server's listen backlog (`back_log`), and a unix socket refuses
    /// with EAGAIN instead of queueing.
    async fn open_all(cfg: &Config) -> Result<Vec<(Conn, Statement)>> {
        let mut conns: Vec<Option<(Conn, Statement)>> = Vec::new();
        conns.resize_with(cfg.threads as usize, || None);
        let mut set = tokio::task::JoinSet::new();
        let mut next = 0usize;
        loop {
            while next < conns.len() && set.len() < CONNECTING {
                let (c, i) = (cfg.clone(), next);
                set.spawn(async move { (i, open(&c, i).await) });
                next += 1;
            }
            let Some(done) = set.join_next().await else {
                break;
            };
            let (i, r) = done.map_err(|e| Error::Runtime(format!("a connect task failed: {e}")))?;
            // The first error wins; dropping the set aborts the others.
            conns[i] = Some(r?);
        }
        Ok(conns.into_iter().flatten().collect())
    }

    /// Connections being opened at once.
    const CONNECTING: usize = 32;

    /// Runs every worker on a current-thread runtime in this thread. The
    /// connections are opened first and the outcome sent on `ready`.
    pub fn run(cfg: Config, shared: Arc<Shared>, ready: mpsc::Sender<Result<()>>) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(Error::Runtime(format!(
                    "cannot start the event loop: {e}"
                ))));
                return;
            }
        };
        rt.block_on(async {
            let conns = match open_all(&cfg).await {
                Ok(c) => c,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            let tasks: Vec<_> = conns
                .into_iter()
                .enumerate()
                .map(|(w, c)| tokio::spawn(worker(w, cfg.clone(), shared.clone(), c)))
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        });
    }
}

pub struct Engine {
    cfg: Config,
    pub io: IoModel,
    shared: Arc<Shared>,
    workers: Workers,
    clock: Clock,
    samples: Vec<IntervalSample>,
    measured: Histogram<u64>,
}

fn lock_err<T>(_: T) -> Error {
    Error::Runtime("a workload worker panicked".into())
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
        if cfg.scenario == Scenario::Tpcc {
            return Err(Error::Runtime(
                "the TPC-C workload runs on its own driver (workload::driver)".into(),
            ));
        }
        let io = IoModel::for_clients(cfg.threads);
        let shared = Arc::new(Shared {
            client_commits: (0..cfg.threads).map(|_| AtomicU64::new(0)).collect(),
            slots: (0..crate::workers::lanes_for(cfg.threads))
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
            fatal: Default::default(),
            reported: Mutex::new(HashSet::new()),
        });
        // Every connection is opened before the clock starts, so a bad
        // password fails here, once, not in 100 workers.
        let mut workers = Workers::new("workload worker");
        match io {
            IoModel::Threads => {
                let conns = (0..cfg.threads)
                    .map(|w| blocking::open(&cfg, w as usize))
                    .collect::<Result<Vec<_>>>()?;
                for (w, c) in conns.into_iter().enumerate() {
                    let (cfg, shared) = (cfg.clone(), shared.clone());
                    workers.spawn(format!("worker-{w}"), move || {
                        blocking::worker(w, cfg, shared, c)
                    })?;
                }
            }
            IoModel::EventLoop => {
                let (tx, rx) = mpsc::channel();
                let (c, sh) = (cfg.clone(), shared.clone());
                workers.spawn("event-loop".into(), move || evloop::run(c, sh, tx))?;
                rx.recv().map_err(|_| {
                    Error::Runtime("the event loop ended before connecting".into())
                })??;
            }
        }
        // The clock starts once every connection is open.
        let clock = Clock::new(cfg.warmup);
        Ok(Engine {
            cfg,
            io,
            shared,
            workers,
            clock,
            samples: Vec::new(),
            measured: new_hist(),
        })
    }

    /// Whether a sample taken now ends the warmup ([`Clock::warmup_over_now`]).
    pub fn warmup_over_now(&self) -> bool {
        self.clock.warmup_over_now()
    }

    /// Drains every worker's counters into one sample for the interval
    /// since the previous call.
    pub fn sample(&mut self) -> Result<IntervalSample> {
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
        let t = self.clock.end_interval();
        if !t.warmup {
            self.measured
                .add(&hist)
                .map_err(|e| Error::Runtime(format!("histogram: {e}")))?;
        }
        let s = IntervalSample {
            tick: t.tick,
            elapsed_s: t.elapsed.as_secs_f64(),
            interval_s: t.interval_s,
            warmup: t.warmup,
            txns,
            commits: txns,
            tps: t.rate(txns),
            latency: Latency::of(&hist),
            errors,
            retries,
            tpcc: None,
        };
        self.samples.push(s.clone());
        Ok(s)
    }

    /// True when every worker has ended by itself (`--total-rows` reached).
    pub fn finished(&self) -> bool {
        self.workers.finished()
    }

    /// The error the run stopped on (a full disk), once one came.
    pub fn fatal(&self) -> Option<String> {
        self.shared.fatal.get()
    }

    /// Stops the workers, takes the last partial sample, and summarises.
    /// Returns the last sample too, so a printer can show it.
    pub fn stop(mut self) -> Result<(IntervalSample, Summary)> {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.workers.join(crate::workers::STOP_GRACE)?;
        let last = self.sample()?;
        let w = Window::of(&self.samples);
        // From the end of connecting (the engine's clock) to the last commit.
        let offset = (self.clock.start - self.shared.start).as_secs_f64();
        let rows_elapsed_s = self.cfg.total_rows.map(|_| {
            (self.shared.last_commit_us.load(Ordering::Relaxed) as f64 / 1e6 - offset).max(0.0)
        });
        let summary = Summary {
            scenario: self.cfg.scenario.to_string(),
            threads: self.cfg.threads,
            io_model: self.io,
            measured_s: w.measured_s,
            warmup_s: self.cfg.warmup.as_secs_f64(),
            total_txns: w.total_txns,
            txns: w.txns,
            commits: w.txns,
            mean_tps: w.mean_tps,
            tps_stddev: w.tps_stddev,
            intervals: w.intervals,
            latency: Latency::of(&self.measured),
            errors: w.errors,
            retries: w.retries,
            errors_by_code: self.shared.errors_by_code.lock().map_err(lock_err)?.clone(),
            rows_done: self.cfg.total_rows.map(|_| w.total_txns),
            rows_elapsed_s,
            client_commits: self
                .shared
                .client_commits
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            peak_rss_bytes: crate::capacity::peak_rss_bytes(),
            tpcc: None,
        };
        Ok((last, summary))
    }
}
