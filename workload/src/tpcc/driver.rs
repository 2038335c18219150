//! The TPC-C driver: one blocking connection and one thread per client
//! (each transaction is a dozen round trips: a thread waits as cheaply as
//! a task here), a shuffled 23-card deck per client, per-type counters in
//! tpcc-mysql's terms (sc, lt, rt, fl) and latency histograms.
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use fastrand::Rng;
use hdrhistogram::Histogram;
use mysql::{prelude::Queryable, Conn};

use super::{
    rand::NuConstants,
    report::{KindInterval, KindTotals, TpccInterval, TpccSummary},
    schema::sql,
    spec::{Kind, Settings},
    txn,
};
use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
    stats::{new_hist, Clock, IntervalSample, IoModel, Latency, Summary, Window},
    workers::Workers,
};

const DEADLOCK: u16 = 1213;
const LOCK_WAIT_TIMEOUT: u16 = 1205;

/// One lane's counters since the last sample (clients share lanes, as in
/// [`crate::workers::lanes_for`]: five histograms per client cost ~1 MB).
struct Slot {
    counts: [KindTotals; 5],
    hists: [Histogram<u64>; 5],
    commits: u64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            counts: Default::default(),
            hists: std::array::from_fn(|_| new_hist()),
            commits: 0,
        }
    }
}

struct Shared {
    slots: Vec<Mutex<Slot>>,
    stop: AtomicBool,
    /// Failures by server error code ("io" for a lost connection); the
    /// first of each code is also printed once.
    errors_by_code: Mutex<BTreeMap<String, u64>>,
    /// Set by the first error the run must stop on (a full disk).
    fatal: crate::fatal::Fatal,
}

/// The shuffled deck of clause 5.2.4.2: 10 New-Order, 10 Payment and one
/// of each other kind per 23 cards.
pub struct Deck {
    cards: Vec<Kind>,
    next: usize,
}

impl Deck {
    pub fn new(rng: &mut Rng) -> Deck {
        let mut cards: Vec<Kind> = Kind::ALL
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, k.cards()))
            .collect();
        rng.shuffle(&mut cards);
        Deck { cards, next: 0 }
    }

    pub fn draw(&mut self, rng: &mut Rng) -> Kind {
        if self.next == self.cards.len() {
            rng.shuffle(&mut self.cards);
            self.next = 0;
        }
        self.next += 1;
        self.cards[self.next - 1]
    }
}

#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub endpoint: Endpoint,
    pub database: String,
    pub threads: u32,
    pub warmup: Duration,
    pub settings: Settings,
    /// The load's NURand constants (the run's are derived from them).
    pub load_constants: NuConstants,
}

pub struct Driver {
    cfg: DriverConfig,
    shared: Arc<Shared>,
    workers: Workers,
    control: Conn,
    clock: Clock,
    samples: Vec<IntervalSample>,
    measured_counts: [KindTotals; 5],
    measured_hists: [Histogram<u64>; 5],
    measured_all: Histogram<u64>,
    measured_commits: u64,
    /// At the start of the measured window: SUM(d_next_o_id) and process CPU.
    base: Option<(u64, f64)>,
}

fn d_next_sum(c: &mut Conn) -> Result<u64> {
    let v: Option<u64> = c
        .query_first("SELECT CAST(SUM(d_next_o_id) AS UNSIGNED) FROM district")
        .map_err(sql("reading d_next_o_id"))?;
    Ok(v.unwrap_or(0))
}

/// CPU seconds (user + system) of this process so far.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we hand it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn open(cfg: &DriverConfig) -> Result<Conn> {
    let ep = &cfg.endpoint;
    let opts = mysql::OptsBuilder::from_opts(conn::blocking_opts(ep, Some(&cfg.database)))
        .stmt_cache_size(Some(64));
    Conn::new(opts).map_err(|e| conn::classify_blocking(ep, e))
}

impl Driver {
    /// Opens every connection first, then starts the clients.
    pub fn start(cfg: DriverConfig) -> Result<Driver> {
        let mut control = open(&cfg)?;
        let conns = (0..cfg.threads)
            .map(|_| open(&cfg))
            .collect::<Result<Vec<_>>>()?;
        let shared = Arc::new(Shared {
            slots: (0..crate::workers::lanes_for(cfg.threads))
                .map(|_| Mutex::new(Slot::new()))
                .collect(),
            stop: AtomicBool::new(false),
            errors_by_code: Mutex::new(BTreeMap::new()),
            fatal: Default::default(),
        });
        let base = if cfg.warmup.is_zero() {
            Some((d_next_sum(&mut control)?, process_cpu_s()))
        } else {
            None
        };
        let mut rng = Rng::new();
        let run_constants = NuConstants::for_run(&cfg.load_constants, &mut rng);
        let mut workers = Workers::new("TPC-C client");
        for (w, c) in conns.into_iter().enumerate() {
            let (cfg2, sh) = (cfg.clone(), shared.clone());
            let seed = rng.u64(..);
            workers.spawn(format!("tpcc-{w}"), move || {
                client(w, cfg2, sh, c, run_constants, seed)
            })?;
        }
        Ok(Driver {
            clock: Clock::new(cfg.warmup),
            cfg,
            shared,
            workers,
            control,
            samples: Vec::new(),
            measured_counts: Default::default(),
            measured_hists: std::array::from_fn(|_| new_hist()),
            measured_all: new_hist(),
            measured_commits: 0,
            base,
        })
    }

    /// Whether a sample taken now ends the warmup.
    pub fn warmup_over_now(&self) -> bool {
        self.clock.warmup_over_now()
    }

    /// Drains every client's counters into one interval.
    pub fn sample(&mut self) -> Result<IntervalSample> {
        // The tpmC's base is read before the drain, not after it: the
        // caller reads the probes as soon as this returns, and a SQL round
        // trip between the drain and that read put the commits it lasted
        // on the workload's side only (14 of 331 on a loaded host).
        let base = match self.base.is_none() && self.clock.warmup_over_now() {
            true => Some((d_next_sum(&mut self.control)?, process_cpu_s())),
            false => None,
        };
        let mut counts: [KindTotals; 5] = Default::default();
        let mut hists: [Histogram<u64>; 5] = std::array::from_fn(|_| new_hist());
        let mut commits = 0;
        for slot in &self.shared.slots {
            let mut s = slot
                .lock()
                .map_err(|_| Error::Runtime("a TPC-C client panicked".into()))?;
            for k in 0..5 {
                counts[k].add(&s.counts[k]);
                let _ = hists[k].add(&s.hists[k]);
                s.hists[k].reset();
            }
            s.counts = Default::default();
            commits += std::mem::take(&mut s.commits);
        }
        let t = self.clock.end_interval();
        let mut all = new_hist();
        for h in &hists {
            let _ = all.add(h);
        }
        if !t.warmup {
            for k in 0..5 {
                self.measured_counts[k].add(&counts[k]);
                let _ = self.measured_hists[k].add(&hists[k]);
            }
            let _ = self.measured_all.add(&all);
            self.measured_commits += commits;
        }
        if self.base.is_none() && t.warmup_over(self.cfg.warmup) {
            // The measured window starts now.
            self.base = match base {
                Some(b) => Some(b),
                None => Some((d_next_sum(&mut self.control)?, process_cpu_s())),
            };
        }
        let txns: u64 = counts.iter().map(|c| c.sc + c.lt).sum();
        let s = IntervalSample {
            tick: t.tick,
            elapsed_s: t.elapsed.as_secs_f64(),
            interval_s: t.interval_s,
            warmup: t.warmup,
            txns,
            commits,
            tps: t.rate(txns),
            latency: Latency::of(&all),
            errors: counts.iter().map(|c| c.fl).sum(),
            retries: counts.iter().map(|c| c.rt).sum(),
            tpcc: Some(TpccInterval {
                kinds: std::array::from_fn(|k| KindInterval::of(&counts[k], &hists[k])),
            }),
        };
        self.samples.push(s.clone());
        Ok(s)
    }

    pub fn finished(&self) -> bool {
        self.workers.finished()
    }

    /// The error the run stopped on (a full disk), once one came.
    pub fn fatal(&self) -> Option<String> {
        self.shared.fatal.get()
    }

    pub fn stop(mut self) -> Result<(IntervalSample, Summary)> {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.workers.join(crate::workers::STOP_GRACE)?;
        let last = self.sample()?;
        let w = Window::of(&self.samples);
        let (d_next_before, cpu_before) = self.base.unwrap_or((0, process_cpu_s()));
        let d_next_after = d_next_sum(&mut self.control)?;
        let cpu_s = process_cpu_s() - cpu_before;
        let tpcc = TpccSummary::new(
            &self.measured_counts,
            &self.measured_hists,
            w.measured_s,
            self.cfg.settings.warehouses,
            d_next_after.saturating_sub(d_next_before),
            cpu_s,
        );
        let errors_by_code = self
            .shared
            .errors_by_code
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let summary = Summary {
            scenario: "tpcc".into(),
            threads: self.cfg.threads,
            io_model: IoModel::Threads,
            measured_s: w.measured_s,
            warmup_s: self.cfg.warmup.as_secs_f64(),
            total_txns: w.total_txns,
            txns: w.txns,
            commits: self.measured_commits,
            mean_tps: w.mean_tps,
            tps_stddev: w.tps_stddev,
            intervals: w.intervals,
            latency: Latency::of(&self.measured_all),
            errors: w.errors,
            retries: w.retries,
            errors_by_code,
            rows_done: None,
            rows_elapsed_s: None,
            client_commits: Vec::new(),
            peak_rss_bytes: crate::capacity::peak_rss_bytes(),
            tpcc: Some(tpcc),
        };
        let _ = self.control.query_drop("DO 0");
        Ok((last, summary))
    }
}

/// Sleeps `s` seconds in slices, returning early on stop.
fn nap(shared: &Shared, s: f64) {
    let end = Instant::now() + Duration::from_secs_f64(s);
    while !shared.stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

fn client(
    w: usize,
    cfg: DriverConfig,
    shared: Arc<Shared>,
    mut c: Conn,
    k: NuConstants,
    seed: u64,
) {
    let mut rng = Rng::with_seed(seed);
    let mut deck = Deck::new(&mut rng);
    let s = &cfg.settings;
    while !shared.stop.load(Ordering::Relaxed) {
        let kind = deck.draw(&mut rng);
        let (keying, think) = kind.keying_think_s();
        if s.think {
            nap(&shared, keying);
        }
        let input = txn::draw(kind, &mut rng, s.warehouses, &k);
        let t0 = Instant::now();
        let mut retries = 0;
        let outcome = loop {
            // A Delivery's districts committed on their own count as
            // they commit, whatever its end (the server has them).
            let mut committed = || {
                if let Ok(mut slot) = shared.slots[w % shared.slots.len()].lock() {
                    slot.commits += 1;
                }
            };
            match txn::run(&mut c, &input, s.delivery_single_commit, &mut committed) {
                Ok(o) => break Some(o),
                Err(mysql::Error::MySqlError(e))
                    if matches!(e.code, DEADLOCK | LOCK_WAIT_TIMEOUT) =>
                {
                    retries += 1;
                    if shared.stop.load(Ordering::Relaxed) {
                        break None;
                    }
                }
                Err(e) => {
                    let code = match &e {
                        mysql::Error::MySqlError(m) => m.code.to_string(),
                        _ => "io".into(),
                    };
                    if let Ok(mut m) = shared.errors_by_code.lock() {
                        let n = m.entry(code).or_default();
                        if *n == 0 {
                            eprintln!("tpcc: first error of its kind, in {}: {e}", kind.name());
                        }
                        *n += 1;
                    }
                    if let mysql::Error::MySqlError(m) = &e {
                        if shared.fatal.note(m.code, &m.to_string()) {
                            shared.stop.store(true, Ordering::Relaxed);
                        }
                    }
                    if !matches!(e, mysql::Error::MySqlError(_)) {
                        // The connection is gone: reconnect before the next card.
                        while !shared.stop.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(100));
                            if let Ok(nc) = open(&cfg) {
                                c = nc;
                                break;
                            }
                        }
                    }
                    break None;
                }
            }
        };
        let us = t0.elapsed().as_micros().max(1) as u64;
        if let Ok(mut slot) = shared.slots[w % shared.slots.len()].lock() {
            let t = &mut slot.counts[kind.index()];
            t.rt += retries;
            match outcome {
                Some(o) => {
                    if us as f64 / 1e6 <= kind.limit_s() {
                        t.sc += 1;
                    } else {
                        t.lt += 1;
                    }
                    t.rolled_back += o.rolled_back as u64;
                    slot.commits += u64::from(o.write_commits);
                    let _ = slot.hists[kind.index()].record(us);
                }
                None if retries > 0 && shared.stop.load(Ordering::Relaxed) => {}
                None => slot.counts[kind.index()].fl += 1,
            }
        }
        if s.think {
            // Negative exponential, capped at ten times the mean.
            let r = rng.f64().max(1e-12);
            nap(&shared, (-r.ln() * think).min(10.0 * think));
        }
    }
    let _ = c.query_drop("DO 0");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deck_deals_ten_ten_one_one_one() {
        let mut rng = Rng::with_seed(5);
        let mut deck = Deck::new(&mut rng);
        let mut n = [0u32; 5];
        for _ in 0..23 * 100 {
            n[deck.draw(&mut rng).index()] += 1;
        }
        assert_eq!(n, [1000, 1000, 100, 100, 100]);
    }
}
