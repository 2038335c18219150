//! `commitscope exporter`: the group-commit figures of every server on the
//! host as Prometheus metrics, for as long as it runs.
//!
//! One background thread discovers servers (every `--rescan` seconds),
//! attaches to new ones off the lock, re-attaches to restarted ones (same
//! datadir, new pid: totals continue), reaps exited ones and forgets them
//! after `--forget-after`; between rescans it names new fds every 250 ms.
//! The HTTP side runs on tokio and only reads what the fleet holds.
pub mod discover;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod totals;
pub mod webconfig;
pub mod window;

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use crate::{
    cli::ExporterArgs,
    error::{Error, Result},
};
use discover::Selection;
use fleet::{AttachOptions, Fleet};

/// How often fds are named between rescans.
const FD_POLL: Duration = Duration::from_millis(250);

/// Capabilities the exporter needs without root, and why each is there.
/// CAP_BPF and CAP_PERFMON are not enough: the kernel has required
/// CAP_SYS_ADMIN for uprobe perf events since 2025 (a uprobe placed inside
/// an instruction could corrupt the traced process; backported to the
/// stable kernels), and CAP_SYS_ADMIN passes the BPF and perf checks too.
const CAPS: &[(u32, &str, &str)] = &[
    (
        21,
        "CAP_SYS_ADMIN",
        "create uprobes (the kernel asks for it since 2025), load the eBPF programs, attach the kernel probes",
    ),
    (
        19,
        "CAP_SYS_PTRACE",
        "read /proc/<pid>/exe, cwd and fd of a server run by another user",
    ),
    (
        2,
        "CAP_DAC_READ_SEARCH",
        "read the tracepoint ids under /sys/kernel/tracing (root-only)",
    ),
];

/// The capabilities of `CAPS` this process lacks (none for root).
fn missing_caps() -> Vec<&'static (u32, &'static str, &'static str)> {
    let eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0);
    CAPS.iter()
        .filter(|(bit, ..)| eff & (1 << bit) == 0)
        .collect()
}

/// How often the light tier's commit counters are read.
const COMMIT_POLL: Duration = Duration::from_secs(1);

/// What the discovery thread runs on besides the fleet.
struct Worker {
    sel: Selection,
    opts: AttachOptions,
    rescan: Duration,
    forget_after: Duration,
    schedule: window::Schedule,
    asks: Arc<window::Asks>,
    stop: Arc<AtomicBool>,
}

/// The discovery thread: rescans, attaches, reaps, forgets, names fds
/// and opens and closes the exact windows; the commit counters are read
/// beside it, on a scoped thread of their own ([`commit_reader`]).
fn discovery(fleet: Arc<Mutex<Fleet>>, mut w: Worker) {
    // The logins' queries run on this runtime, off the HTTP side's: a
    // multi-thread one, so that the connections a login made on one of
    // its two threads answer on the other.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("commitscope: cannot start the discovery thread's runtime: {e}");
            return;
        }
    };
    let (sel, opts, rescan, forget_after, stop) =
        (&w.sel, &w.opts, w.rescan, w.forget_after, &w.stop);
    // Pids that could not be attached: said once, not retried.
    let mut refused: HashSet<u32> = HashSet::new();
    let mut last_scan: Option<Instant> = None;
    std::thread::scope(|threads| {
        threads.spawn(|| commit_reader(&fleet, &rt, stop));
        while !stop.load(Ordering::Relaxed) {
            if last_scan.is_none_or(|t| t.elapsed() >= rescan) {
                last_scan = Some(Instant::now());
                let gone = fleet.lock().map(|mut f| f.reap()).unwrap_or_default();
                if !gone.is_empty() {
                    std::thread::spawn(move || drop(gone));
                }
                let attached = fleet.lock().map(|f| f.attached_pids()).unwrap_or_default();
                for found in discover::scan(sel) {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if attached.contains(&found.pid) || refused.contains(&found.pid) {
                        continue;
                    }
                    match fleet::attach(found.pid, opts, &rt) {
                        Ok((a, source)) => {
                            if let Ok(mut f) = fleet.lock() {
                                f.add(&found, a, source);
                            }
                        }
                        Err(e) => {
                            eprintln!(
                                "commitscope: cannot attach to pid {} ({}): {e}",
                                found.pid, found.name
                            );
                            refused.insert(found.pid);
                        }
                    }
                }
                refused.retain(|pid| crate::server::process::alive(*pid));
                if let Ok(mut f) = fleet.lock() {
                    f.forget(forget_after);
                }
            }
            if let Ok(mut f) = fleet.lock() {
                f.poll_fds();
            }
            w.schedule.step(&fleet, &w.asks, &rt);
            std::thread::sleep(w.schedule.sleep_at_most(FD_POLL));
        }
    });
}

/// The light tier's commit counters, read once per [`COMMIT_POLL`] on a
/// thread of their own: the discovery thread stops for seconds while a
/// busy host attaches or detaches a window's probes, and a count read
/// that late would lag the flushes the scrapes read fresh, so a ratio of
/// the two taken near the end of a burst would come out short.
fn commit_reader(fleet: &Mutex<Fleet>, rt: &tokio::runtime::Runtime, stop: &AtomicBool) {
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            next = now + COMMIT_POLL;
            fleet::read_commits(fleet, rt);
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()).min(FD_POLL));
    }
}

fn seconds(flag: &str, v: f64, min: f64) -> Result<Duration> {
    if !v.is_finite() || v < min {
        return Err(Error::Usage(format!(
            "invalid {flag} {v}: expected a number of seconds, at least {min}"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Entry point of `commitscope exporter`.
pub fn run(args: ExporterArgs) -> Result<()> {
    let rescan = seconds("--rescan", args.rescan, 0.1)?;
    let forget_after = seconds("--forget-after", args.forget_after, 0.0)?;
    let web = match &args.web_config {
        Some(p) => webconfig::WebConfig::load(p).map_err(|e| Error::Usage(e.to_string()))?,
        None => webconfig::WebConfig::open(),
    };
    for pid in &args.pid {
        if !crate::server::process::alive(*pid) {
            return Err(Error::NoSuchProcess { pid: *pid });
        }
    }
    for exe in &args.mysqld {
        readers::probes::symbols::check_elf(exe)?;
    }
    let window = seconds("--window", args.window, 0.1)?;
    let every = seconds("--window-every", args.window_every, 0.0)?;
    if !every.is_zero() && every <= window {
        return Err(Error::Usage(format!(
            "--window-every {} is not longer than --window {}: give windows a gap (or --window-every 0 for windows on request only)",
            args.window_every, args.window
        )));
    }
    let tier = args.probes.tier_or(crate::probes::tier::Tier::Light);
    if args.probes.commit_path && tier.per_commit() {
        return Err(Error::Usage(
            "the exporter measures --commit-path inside its exact windows, on the light tier: drop --probes exact (or run `commitscope trace --commit-path --pid PID` beside it)".into(),
        ));
    }
    let opts = AttachOptions {
        debug_root: args.probes.debug_dir.clone(),
        debuginfod: args.probes.debuginfod_choice(),
        server: args.probes.server()?,
        fsync_probe: args.probes.fsync_probe,
        anatomy: args.probes.anatomy,
        tier,
        defaults_file: args.defaults_file.clone(),
        commit_path: args.probes.commit_path,
        io: args.probes.io,
        wakeups: args.probes.wakeups,
    };
    if opts.wakeups {
        // Only inside the exact windows: the rest of the time costs
        // nothing more.
        eprintln!(
            "commitscope: {} (only while an exact window is open)",
            crate::probes::cost::WAKEUPS_COST
        );
    }
    let asks = Arc::new(window::Asks::default());
    let schedule = window::Schedule::new(window, (!every.is_zero()).then_some(every));
    let sel = Selection {
        pids: args.pid.clone(),
        binaries: args.mysqld.clone(),
        sockets: args.socket.clone(),
    };
    let listener = std::net::TcpListener::bind(args.listen).map_err(|e| {
        Error::Usage(format!(
            "cannot listen on {}: {e}; pass --listen with a free address and port",
            args.listen
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let missing = missing_caps();
    if !missing.is_empty() {
        let names: Vec<String> = missing
            .iter()
            .map(|(_, name, why)| format!("{name} ({why})"))
            .collect();
        return Err(Error::Usage(format!(
            "the exporter lacks {}: run it as root, or grant them (see contrib/systemd/commitscope-exporter.service)",
            names.join(", ")
        )));
    }
    crate::probes::kernel::ensure_tracefs()?;

    let fleet = Arc::new(Mutex::new(Fleet::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut worker = None;
    let rt = crate::runtime::runtime()?;
    let served = rt.block_on(async {
        // The handlers first: a signal from here on detaches cleanly.
        let signal = |kind| {
            tokio::signal::unix::signal(kind)
                .map_err(|e| Error::Runtime(format!("cannot install a signal handler: {e}")))
        };
        use tokio::signal::unix::SignalKind;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sighup = signal(SignalKind::hangup())?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| Error::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
        let scheme = if web.tls.is_some() { "https" } else { "http" };
        let shared = Arc::new(http::Shared {
            fleet: fleet.clone(),
            web,
            asks: asks.clone(),
        });
        let (tx, rx) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(http::serve(listener, shared, rx));
        let mut sigusr1 = signal(SignalKind::user_defined1())?;
        worker = Some({
            let w = Worker {
                sel,
                opts,
                rescan,
                forget_after,
                schedule,
                asks: asks.clone(),
                stop: stop.clone(),
            };
            let fleet = fleet.clone();
            std::thread::spawn(move || discovery(fleet, w))
        });
        eprintln!(
            "commitscope: exporter listening on {scheme}://{}/metrics; probes: {tier}{}",
            args.listen,
            match (tier.per_commit(), every.is_zero()) {
                (true, _) => String::new(),
                (false, true) => format!(
                    " (exact windows of {} s on SIGUSR1 or POST /window)",
                    window.as_secs_f64()
                ),
                (false, false) => format!(
                    " (exact windows of {} s every {} s, and on SIGUSR1 or POST /window)",
                    window.as_secs_f64(),
                    every.as_secs_f64()
                ),
            }
        );
        if args.probes.commit_path {
            eprintln!(
                "commitscope: {}",
                crate::probes::cost::COMMIT_PATH_WINDOW_COST
            );
        }
        let why = loop {
            tokio::select! {
                _ = sigint.recv() => break "SIGINT",
                _ = sigterm.recv() => break "SIGTERM",
                _ = sighup.recv() => break "SIGHUP",
                _ = sigusr1.recv() => match asks.ask() {
                    Ok(()) => eprintln!("commitscope: SIGUSR1: opening an exact window"),
                    Err(e) => eprintln!("commitscope: SIGUSR1: {e}"),
                },
            }
        };
        eprintln!("commitscope: {why}: stopping");
        let _ = tx.send(true);
        let _ = server.await;
        Ok::<(), Error>(())
    });
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = worker {
        let _ = w.join();
    }
    let all = fleet.lock().map(|mut f| f.detach_all()).unwrap_or_default();
    let n = all.len();
    drop(all);
    eprintln!("commitscope: detached from {n} server(s); exiting");
    served
}
