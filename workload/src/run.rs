//! The standalone `commitscope workload` command: prepare, drive, print
//! one line per interval, summarise. Owns its clock; the tracer will own
//! the clock instead when it joins probe counts to these samples.
use std::time::Duration;

use crate::{
    cli::WorkloadArgs,
    conn,
    driver::Driver,
    engine::Config,
    error::{Error, Result},
    report::Printer,
    scenario::Scenario,
    schema,
    stats::Summary,
};

/// A flag's seconds as a Duration, or the one-line error naming the flag.
pub fn seconds(what: &'static str, v: f64, min: f64) -> Result<Duration> {
    if !v.is_finite() || v < min {
        return Err(Error::BadInput {
            what,
            detail: format!("{v}: expected a number of seconds >= {min}"),
        });
    }
    Ok(Duration::from_secs_f64(v))
}

/// Validates the flags and resolves the connection: no I/O yet.
pub fn config(args: &WorkloadArgs) -> Result<(Config, Duration, Option<Duration>)> {
    schema::check_name(&args.database)?;
    if args.threads == 0 || args.threads > 10_000 {
        return Err(Error::BadInput {
            what: "--threads",
            detail: format!("{}: expected 1..=10000", args.threads),
        });
    }
    if args.total_rows.is_some() && args.workload != Scenario::Insert {
        return Err(Error::BadInput {
            what: "--total-rows",
            detail: "only applies to --workload insert".into(),
        });
    }
    if args.workload == Scenario::Tpcc && !(1..=10_000).contains(&args.tpcc.warehouses) {
        return Err(Error::BadInput {
            what: "--warehouses",
            detail: format!("{}: expected 1..=10000", args.tpcc.warehouses),
        });
    }
    let interval = seconds("--interval", args.interval, 0.01)?;
    let warmup = seconds("--warmup", args.warmup, 0.0)?;
    let duration = args
        .duration
        .map(|d| seconds("--duration", d, 0.01))
        .transpose()?;
    let cfg = Config {
        endpoint: args.conn.resolve()?,
        database: args.database.clone(),
        scenario: args.workload,
        threads: args.threads,
        rows_per_thread: args.rows_per_thread.max(1),
        total_rows: args.total_rows,
        warmup,
        tpcc: (args.workload == Scenario::Tpcc).then(|| args.tpcc.settings()),
        spread: Vec::new(),
    };
    Ok((cfg, interval, duration))
}

/// Creates/reuses the marked database and the scenario's table.
pub async fn prepare(cfg: &Config, reset: bool) -> Result<()> {
    let c = conn::connect(&cfg.endpoint, None).await?;
    prepare_on(c, cfg, reset).await
}

/// [`prepare`] on a connection already open (closed when done).
async fn prepare_on(mut c: mysql_async::Conn, cfg: &Config, reset: bool) -> Result<()> {
    let rows = schema::rows_needed(cfg.threads, cfg.rows_per_thread);
    schema::prepare(
        &mut c,
        &cfg.database,
        cfg.scenario,
        rows,
        reset,
        cfg.total_rows.is_some(),
    )
    .await?;
    let _ = c.disconnect().await;
    if let Some(s) = &cfg.tpcc {
        crate::tpcc::prepare::ensure_loaded(&cfg.endpoint, &cfg.database, s, false).await?;
    }
    Ok(())
}

async fn drive(args: &WorkloadArgs, out: impl std::io::Write) -> Result<Summary> {
    let (cfg, interval, duration) = config(args)?;
    // Whether the run fits, once, before any client connects (the tracer
    // asks the same on its control connection, in `session::setup`).
    crate::capacity::raise_nofile(crate::capacity::client_fds(cfg.peak_connections()))?;
    let mut c = conn::connect(&cfg.endpoint, None).await?;
    // The connection asking is counted in use.
    crate::capacity::Capacity::read(&mut c)
        .await?
        .check(cfg.peak_connections().saturating_sub(1))?;
    prepare_on(c, &cfg, args.reset).await?;
    let mut out = Printer::new(out, args.json);
    let warmup = cfg.warmup;
    let mut engine = Driver::start(cfg)?;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // --duration is the measured time, after the warmup (as tpcc-mysql's -l after -r).
    let deadline = async {
        match duration {
            Some(d) => tokio::time::sleep(d + warmup).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    // --total-rows ends the workers by themselves: notice within 20 ms.
    let mut done_poll = tokio::time::interval(Duration::from_millis(20));
    // Installed once, before the loop, so no signal falls between two
    // iterations unseen.
    let mut stops = Stops::install()?;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                out.sample(&engine.sample()?);
                if engine.finished() || engine.fatal().is_some() { break; }
            }
            _ = done_poll.tick(), if args.total_rows.is_some() => {
                if engine.finished() || engine.fatal().is_some() { break; }
            }
            _ = &mut deadline => break,
            _ = stops.recv() => break,
        }
    }
    let fatal = engine.fatal();
    let (last, summary) = engine.stop()?;
    if last.txns > 0 || last.errors > 0 {
        out.sample(&last);
    }
    out.summary(&summary);
    match fatal {
        Some(detail) => Err(Error::ServerCannotWrite { detail }),
        None => Ok(summary),
    }
}

/// Ctrl-C, SIGTERM and SIGHUP, each installed once: what ends a run or a
/// load (a signal that comes between two waits is kept for the next).
pub struct Stops([tokio::signal::unix::Signal; 3]);

impl Stops {
    pub fn install() -> Result<Stops> {
        use tokio::signal::unix::{signal, SignalKind};
        let one = |kind| {
            signal(kind)
                .map_err(|e| Error::Runtime(format!("cannot install a signal handler: {e}")))
        };
        Ok(Stops([
            one(SignalKind::interrupt())?,
            one(SignalKind::terminate())?,
            one(SignalKind::hangup())?,
        ]))
    }

    /// Waits for the next of the three.
    pub async fn recv(&mut self) {
        let [int, term, hup] = &mut self.0;
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Entry point: the clock and the control connection run on a
/// single-threaded runtime; the workers are threads of their own.
pub fn run(args: &WorkloadArgs) -> Result<Summary> {
    run_to(args, std::io::stdout())
}

/// [`run`], printing to `out` instead of stdout.
pub fn run_to(args: &WorkloadArgs, out: impl std::io::Write) -> Result<Summary> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(drive(args, out))
}
