//! Benchmarks of `commitscope exporter`: what attaching it costs a busy
//! server (through `bench overhead --exporter`), and what a scrape costs,
//! beside Debian's prometheus-mysqld-exporter scraped in the same run.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};

use crate::util::{scrape, start_exporter};
use testkit::{free_port, rss_kib};

/// The probes of one traced window: `commitscope trace`, or the exporter
/// with a scraper hitting it every second (as Prometheus would).
pub enum Scraped {
    Trace(Child),
    Exporter {
        child: Child,
        stop: Arc<AtomicBool>,
        scraper: JoinHandle<u32>,
    },
}

impl Scraped {
    pub fn trace(child: Child) -> Self {
        Scraped::Trace(child)
    }

    /// The process holding the probes.
    pub fn pid(&self) -> u32 {
        match self {
            Scraped::Trace(c) | Scraped::Exporter { child: c, .. } => c.id(),
        }
    }

    /// The exporter attached to `pid` with `extra` flags, scraped every
    /// second.
    pub fn start(cs: &Path, pid: u32, extra: &[&str]) -> anyhow::Result<Self> {
        let port = free_port();
        let mut args = vec!["--pid".to_string(), pid.to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        let child = start_exporter(cs, port, &args, &[pid])?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let scraper = std::thread::spawn(move || {
            let mut ok = 0;
            while !flag.load(Ordering::Relaxed) {
                if scrape(port) > 0 {
                    ok += 1;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            ok
        });
        Ok(Scraped::Exporter {
            child,
            stop,
            scraper,
        })
    }

    /// Asks the exporter for an exact window (SIGUSR1) and returns once its
    /// per-commit probes are attached: its BPF perf links have grown and
    /// held still for 100 ms.
    pub fn open_window_now(&self) -> anyhow::Result<()> {
        let Scraped::Exporter { child, .. } = self else {
            bail!("only the exporter opens windows");
        };
        let pid = child.id();
        let light = testkit::bpf_links::perf_probes(pid).len();
        // SAFETY: signalling our own child, whose handler is installed
        // before it attaches (start_exporter waited for that).
        unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = light;
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = testkit::bpf_links::perf_probes(pid).len();
            if now > light && now == last {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the exporter opened no exact window in 10 s (perf links {light} -> {now})");
            }
            last = now;
        }
    }

    /// Detaches (SIGINT) and waits.
    pub fn stop(self) -> anyhow::Result<()> {
        let mut child = match self {
            Scraped::Trace(c) => c,
            Scraped::Exporter {
                child,
                stop,
                scraper,
            } => {
                stop.store(true, Ordering::Relaxed);
                let ok = scraper
                    .join()
                    .map_err(|_| anyhow::anyhow!("scraper thread"))?;
                if ok == 0 {
                    bail!("no scrape of the exporter succeeded");
                }
                child
            }
        };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait()?;
        Ok(())
    }
}

/// p50 and p99 (ms) of `n` back-to-back scrapes of `port`.
fn latencies(port: u16, n: u32) -> anyhow::Result<(f64, f64, usize)> {
    let mut v = Vec::with_capacity(n as usize);
    let mut size = 0;
    for _ in 0..n {
        let t = Instant::now();
        size = scrape(port);
        if size == 0 {
            bail!("a scrape of port {port} failed");
        }
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Ok((at(0.50), at(0.99), size))
}

pub fn scrape_cost(cs: &Path, servers: u32, scrapes: u32, minutes: u32) -> anyhow::Result<()> {
    if !crate::util::succeeds(Command::new("prometheus-mysqld-exporter").arg("--version")) {
        bail!("prometheus-mysqld-exporter is missing: run `cargo xtask setup`");
    }
    // Half the servers the symbolized fixture (exact probes), half Debian's.
    let fixture = testkit::symbols_fixture();
    let debian = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    let mut started = Vec::new();
    for k in 0..servers {
        let s = match (&fixture, k % 2) {
            (Some(f), 1) => {
                testkit::Server::start(&f.join("bin/mariadbd"), Some(&f.join("share")), &[])
            }
            _ => testkit::Server::start(&debian, None, &[]),
        }
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        // Some activity, so every map and fd table has entries.
        s.query("CREATE DATABASE b; CREATE TABLE b.t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO b.t SELECT seq FROM b.seq_1_to_1000")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        started.push(s);
    }
    let pids: Vec<u32> = started.iter().map(testkit::Server::pid).collect();
    let port = free_port();
    let args: Vec<String> = pids
        .iter()
        .flat_map(|p| ["--pid".to_string(), p.to_string()])
        .collect();
    let mut exporter = start_exporter(cs, port, &args, &pids)?;
    let peer_port = free_port();
    let mut peer = Command::new("prometheus-mysqld-exporter")
        .env(
            "DATA_SOURCE_NAME",
            format!("root@unix({})/", started[0].socket.display()),
        )
        .arg(format!("--web.listen-address=127.0.0.1:{peer_port}"))
        .arg("--config.my-cnf=/dev/null")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while scrape(peer_port) == 0 {
        if Instant::now() > deadline {
            bail!("prometheus-mysqld-exporter did not answer");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Alternating blocks of 100, so drift hits both alike.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut sizes = (0, 0);
    for _ in 0..scrapes.div_ceil(100) {
        let (p50, p99, n) = latencies(port, 100)?;
        ours.push((p50, p99));
        sizes.0 = n;
        let (p50, p99, n) = latencies(peer_port, 100)?;
        theirs.push((p50, p99));
        sizes.1 = n;
    }
    let med = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let (o50, o99) = (med(&ours, |x| x.0), med(&ours, |x| x.1));
    let (t50, t99) = (med(&theirs, |x| x.0), med(&theirs, |x| x.1));
    println!("scrapes in blocks of 100, alternating; median of the blocks' percentiles");
    println!("exporter                          servers  bytes   p50 ms  p99 ms");
    println!(
        "commitscope exporter              {servers:>7}  {:>5}  {o50:>7.2}  {o99:>6.2}",
        sizes.0
    );
    println!(
        "prometheus-mysqld-exporter (peer) {:>7}  {:>5}  {t50:>7.2}  {t99:>6.2}",
        1, sizes.1
    );
    println!(
        "p99 ratio ours/peer: {:.3}; bar: p99 <= 5 ms with {servers} servers: {}",
        o99 / t99,
        if o99 <= 5.0 { "met" } else { "missed" }
    );
    let _ = peer.kill();
    let _ = peer.wait();
    // RSS under 1 s scrapes.
    let t0 = Instant::now();
    let mut at_1 = None;
    let mut last_print = 0;
    while t0.elapsed() < Duration::from_secs(u64::from(minutes) * 60) {
        if scrape(port) == 0 {
            bail!("a scrape failed during the RSS run");
        }
        std::thread::sleep(Duration::from_secs(1));
        let m = t0.elapsed().as_secs() / 60;
        if m > last_print {
            last_print = m;
            let rss = rss_kib(exporter.id());
            println!("minute {m:>2}: exporter RSS {:.1} MiB", rss as f64 / 1024.0);
            if m == 1 {
                at_1 = Some(rss);
            }
        }
    }
    let end = rss_kib(exporter.id());
    if let Some(first) = at_1 {
        println!(
            "RSS minute 1 -> {minutes}: {:.1} -> {:.1} MiB ({:+.1} %); bar: <= 32 MiB and flat",
            first as f64 / 1024.0,
            end as f64 / 1024.0,
            (end as f64 - first as f64) / first as f64 * 100.0
        );
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(exporter.id() as i32, libc::SIGTERM) };
    exporter.wait()?;
    Ok(())
}
