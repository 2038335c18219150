//! Benchmarks. Each prints its figures next to a peer measured in the same
//! run, alternating A/B so drift hits both sides alike.
use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context};
use clap::Subcommand;

use crate::bench_arms::Arm;
use crate::cpustat::CpuTimes;
use crate::util::{build_fixture, cargo, median, root, start_trace, status};

#[derive(Subcommand)]
pub enum Which {
    /// Cost of one write-probe hit (uprobe + uretprobe): the C fixture's
    /// calls timed untraced vs traced.
    Uprobe {
        #[arg(long, default_value_t = 2_000_000)]
        calls: u64,
        #[arg(long, default_value_t = 5)]
        pairs: u32,
    },
    /// The `update` workload vs sysbench oltp_update_non_index: tps and
    /// client CPU per 1,000 transactions, alternating A/B pairs.
    Workload {
        #[arg(long, value_delimiter = ',', default_value = "1,8,50,100")]
        threads: Vec<u32>,
        #[arg(long, default_value_t = 3)]
        pairs: u32,
        #[arg(long, default_value_t = 20)]
        seconds: u32,
        #[arg(long, default_value_t = 10_000)]
        rows: u32,
    },
    /// Tracing overhead: the `update` workload on one throwaway server,
    /// probes attached in every other window, alternating.
    Overhead {
        #[arg(long, default_value_t = 100)]
        threads: u32,
        /// Traced windows (each between two untraced ones). Many short
        /// windows: the tps of adjacent 10 s windows differs by up to 20 %
        /// on these VMs, untraced alike.
        #[arg(long, default_value_t = 30)]
        pairs: u32,
        /// Seconds per window (the first is left out).
        #[arg(long, default_value_t = 4)]
        seconds: u32,
        /// Server binary (default: Debian's stripped mariadbd; with
        /// --anatomy the symbolized fixture, whose exact probes it needs).
        #[arg(long)]
        mysqld: Option<PathBuf>,
        /// Trace with the write return probe and leaders/followers (the
        /// main command's --anatomy) instead of entry-only counting.
        #[arg(long)]
        anatomy: bool,
        /// Attach `commitscope exporter` as it runs by default (scraped
        /// every second) instead of `commitscope trace`: `--arms exporter`.
        #[arg(long, conflicts_with_all = ["anatomy", "arms"])]
        exporter: bool,
        /// The probe sets to alternate with untraced windows, each in its
        /// turn in every round: trace, trace-io, light, trace-commit-path,
        /// exporter,
        /// exporter-no-windows, exporter-window (with exporter-no-windows:
        /// the default schedule composed), exporter-exact, bpftrace (our
        /// exact set as a bpftrace script, the peer).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "trace")]
        arms: Vec<crate::bench_arms::Arm>,
        /// Also count the BPF programs' own run time per commit (the
        /// kernel's `bpf_stats_enabled`, on for the run: two clock reads
        /// per program run, in every traced arm alike), set against a
        /// commit's CPU; with trace-commit-path and
        /// trace-commit-path-no-split, the scheduler split's cost from it.
        #[arg(long)]
        bpf_time: bool,
    },
    /// `--io`'s device time against a bpftrace peer on the same block
    /// tracepoints (biolatency's accounting), on a loop-mounted ext4
    /// holding the managed server: mean device time per request,
    /// attributed to redo fsyncs and whole-device, ours over the peer's.
    Io {
        #[arg(long, default_value_t = 8)]
        threads: u32,
        #[arg(long, default_value_t = 15)]
        seconds: u32,
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// Debian's 10.11 (the system's), 10.5 and 11.8 (stock, `cargo xtask
    /// servers`) under the main command, rotated round by round: each
    /// one's tps over 10.11's in the same round, and its cross-check.
    Releases {
        #[arg(long, default_value_t = 100)]
        threads: u32,
        #[arg(long, default_value_t = 20)]
        seconds: u32,
        #[arg(long, default_value_t = 10)]
        rounds: u32,
    },
    /// The exporter's scrape cost with `--servers` servers attached (p50,
    /// p99 of `--scrapes` back-to-back scrapes, beside `curl` of a static
    /// file of the same size), then its RSS over `--minutes` of 1 s scrapes.
    Scrape {
        #[arg(long, default_value_t = 4)]
        servers: u32,
        #[arg(long, default_value_t = 1000)]
        scrapes: u32,
        #[arg(long, default_value_t = 10)]
        minutes: u32,
    },
    /// The static musl binary (`cargo xtask dist`) against the glibc
    /// release build: the main command (workload + probes) at `--threads`
    /// clients on one server, alternating windows, median of per-pair
    /// tps ratios.
    Musl {
        #[arg(long, default_value_t = 100)]
        threads: u32,
        #[arg(long, default_value_t = 8)]
        pairs: u32,
        #[arg(long, default_value_t = 8)]
        seconds: u32,
    },
    /// Time from `commitscope` to its first per-second line, with the
    /// managed server (fresh datadir each time).
    FirstLine {
        #[arg(long, default_value_t = 5)]
        runs: u32,
    },
    /// Symbol lookup (`commitscope probes`) in a debug file of `--mib`
    /// MiB, against `nm` on the same file: time and peak RSS.
    Symbols {
        #[arg(long, default_value_t = 300)]
        mib: u64,
        #[arg(long, default_value_t = 5)]
        runs: u32,
    },
    /// TPC-C: load time (managed server; ours vs a dump replayed by the
    /// mariadb client), then tpmC, CPU per New-Order and commits per flush
    /// at each client count.
    Tpcc {
        #[arg(long, default_value_t = 2)]
        warehouses: u32,
        #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
        threads: Vec<u32>,
        #[arg(long, default_value_t = 30)]
        seconds: u32,
        #[arg(long, default_value_t = 5)]
        warmup: u32,
        /// Load pairs (ours, then the dump replay).
        #[arg(long, default_value_t = 3)]
        pairs: u32,
        /// Only the load: LOAD DATA vs multi-row INSERT vs the dump
        /// replay, alternating on one server.
        #[arg(long)]
        load_only: bool,
    },
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Overhead {
            threads,
            pairs,
            seconds,
            mysqld,
            anatomy,
            exporter,
            arms,
            bpf_time,
        } => {
            let arms = if exporter {
                vec![crate::bench_arms::Arm::Exporter]
            } else {
                arms
            };
            overhead(
                Overhead {
                    threads,
                    pairs,
                    seconds,
                    anatomy,
                    bpf_time,
                },
                mysqld,
                &arms,
            )
        }
        Which::Io {
            threads,
            seconds,
            runs,
        } => crate::bench_io::io(&commitscope_release()?, threads, seconds, runs),
        Which::Scrape {
            servers,
            scrapes,
            minutes,
        } => crate::bench_exporter::scrape_cost(&commitscope_release()?, servers, scrapes, minutes),
        Which::FirstLine { runs } => crate::bench_first_line::run(&commitscope_release()?, runs),
        Which::Releases {
            threads,
            seconds,
            rounds,
        } => crate::bench_releases::releases(&commitscope_release()?, threads, seconds, rounds),
        Which::Musl {
            threads,
            pairs,
            seconds,
        } => musl(threads, pairs, seconds),
        Which::Symbols { mib, runs } => {
            crate::bench_symbols::symbols(&commitscope_release()?, mib, runs)
        }
        Which::Tpcc {
            warehouses,
            pairs,
            load_only: true,
            ..
        } => crate::bench_tpcc::load_only(&commitscope_release()?, warehouses, pairs),
        Which::Tpcc {
            warehouses,
            threads,
            seconds,
            warmup,
            pairs,
            load_only: false,
        } => crate::bench_tpcc::tpcc(
            &commitscope_release()?,
            warehouses,
            &threads,
            seconds,
            warmup,
            pairs,
        ),
        Which::Uprobe { calls, pairs } => uprobe(calls, pairs),
        Which::Workload {
            threads,
            pairs,
            seconds,
            rows,
        } => workload(&threads, pairs, seconds, rows),
    }
}

fn commitscope_release() -> anyhow::Result<PathBuf> {
    cargo(&["build", "--release", "-p", "commitscope"])?;
    Ok(root().join("target/release/commitscope"))
}

/// Runs the fixture in bench mode; with `tracer`, under `commitscope trace`.
fn fixture_ns_per_call(bin: &Path, calls: u64, tracer: Option<&Path>) -> anyhow::Result<f64> {
    let work = std::env::temp_dir();
    let mut fx = Command::new(bin)
        .arg(calls.to_string())
        .arg(&work)
        .arg("bench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let tr = match tracer {
        Some(cs) => Some(start_trace(cs, fx.id(), &["--json"], Stdio::null())?),
        None => None,
    };
    writeln!(fx.stdin.take().context("stdin")?, "go")?;
    let mut line = String::new();
    BufReader::new(fx.stdout.take().context("stdout")?).read_line(&mut line)?;
    fx.wait()?;
    if let Some(mut t) = tr {
        t.wait()?;
    }
    let v = line
        .split("\"ns_per_call\":")
        .nth(1)
        .and_then(|s| s.trim().trim_end_matches('}').parse::<f64>().ok())
        .with_context(|| format!("unexpected fixture output {line:?}"))?;
    Ok(v)
}

/// `bench musl`: see [`Which::Musl`].
fn musl(threads: u32, pairs: u32, seconds: u32) -> anyhow::Result<()> {
    let glibc = commitscope_release()?;
    let musl = crate::dist::build()?.join(crate::dist::static_name());
    let bin = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    let max_conn = format!("--max-connections={}", (threads + 20).max(151));
    let server = testkit::Server::start(&bin, None, &[max_conn.as_str()])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let main_cmd = |cs: &Path, secs: u32| {
        let mut c = Command::new(cs);
        c.args(["--json", "--no-debuginfod", "--database", "cs_musl"])
            .args(server.client_flags())
            .args(["--threads", &threads.to_string()])
            .args(["--duration", &secs.to_string()]);
        c
    };
    let summary_tps = |text: &str| {
        let last = text.lines().last()?;
        json_field(last, "mean_tps").zip(json_field(last, "total_txns"))
    };
    // One untimed run of each first: table load, buffer pool warmup.
    for cs in [&glibc, &musl] {
        status(main_cmd(cs, 3).stdout(Stdio::null()))?;
    }
    let (mut ratios, mut g, mut m) = (Vec::new(), Vec::new(), Vec::new());
    for p in 1..=pairs {
        // Alternate which goes first: a drift in the server favours neither.
        let order: [&Path; 2] = if p % 2 == 1 {
            [&glibc, &musl]
        } else {
            [&musl, &glibc]
        };
        let mut tps = [0.0; 2];
        for cs in order {
            let run = measured(&mut main_cmd(cs, seconds), summary_tps)?;
            tps[usize::from(cs == musl.as_path())] = run.tps;
        }
        eprintln!(
            "bench: pair {p}: glibc {:.0} tps, musl {:.0} tps, musl/glibc {:.3}",
            tps[0],
            tps[1],
            tps[1] / tps[0]
        );
        g.push(tps[0]);
        m.push(tps[1]);
        ratios.push(tps[1] / tps[0]);
    }
    let size = std::fs::metadata(&musl)?.len();
    println!(
        "musl static binary ({size} bytes) vs glibc build, main command at {threads} clients, {pairs} alternating pairs of {seconds} s:\n  \
         median tps glibc {:.0}, musl {:.0}; median musl/glibc ratio {:.3}",
        median(g),
        median(m),
        median(ratios)
    );
    Ok(())
}

fn uprobe(calls: u64, pairs: u32) -> anyhow::Result<()> {
    let cs = commitscope_release()?;
    let dir = tempfile_dir()?;
    // Two builds of the fixture: at -O2 its functions start with a
    // rip-relative load the kernel must single-step out of line; at -O0
    // with `push %rbp`, which x86 uprobes emulate, as in mariadbd's and
    // mysqld's prologues. The difference is the single-step's price.
    for (label, flag) in [
        ("first instruction single-stepped (-O2)", "-O2"),
        ("first instruction emulated, push %rbp (-O0)", "-O0"),
    ] {
        let bin = dir.join(format!("fake_server_mariadb{flag}"));
        build_fixture(&bin, &[flag])?;
        let (mut plain, mut traced) = (Vec::new(), Vec::new());
        println!("{label}\npair  untraced_ns/call  traced_ns/call");
        for p in 1..=pairs {
            let a = fixture_ns_per_call(&bin, calls, None)?;
            let b = fixture_ns_per_call(&bin, calls, Some(&cs))?;
            println!("{p:>4}  {a:>16.1}  {b:>14.1}");
            plain.push(a);
            traced.push(b);
        }
        let (a, b) = (median(plain), median(traced));
        println!(
            "median: untraced {a:.1} ns/call ({:.1} M calls/s), traced {b:.1} ns/call ({:.2} M calls/s)",
            1e3 / a,
            1e3 / b
        );
        println!(
            "cost of one write-probe hit (uprobe + uretprobe), {label}: {:.0} ns\n",
            b - a
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("commitscope-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Client CPU seconds (user + system) of reaped children so far.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One measured run: (tps, client CPU seconds, transactions).
struct Run {
    tps: f64,
    cpu_s: f64,
    txns: f64,
    /// Peak RSS of the client, where it says (ours does, in its summary).
    rss_mib: f64,
}

impl Run {
    fn cpu_ms_per_1k(&self) -> f64 {
        if self.txns > 0.0 {
            self.cpu_s * 1e6 / self.txns
        } else {
            f64::NAN
        }
    }
}

fn measured(cmd: &mut Command, parse: impl Fn(&str) -> Option<(f64, f64)>) -> anyhow::Result<Run> {
    let cpu0 = children_cpu_s();
    let out = cmd.stderr(Stdio::inherit()).output()?;
    let cpu_s = children_cpu_s() - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {text}", out.status);
    }
    let (tps, txns) =
        parse(&text).with_context(|| format!("cannot parse the output of {cmd:?}: {text}"))?;
    let rss_mib = json_field(&text, "peak_rss_bytes").map_or(f64::NAN, |b| b / (1 << 20) as f64);
    Ok(Run {
        tps,
        cpu_s,
        txns,
        rss_mib,
    })
}

/// sysbench: "    transactions:  123456 (6172.80 per sec.)"
fn parse_sysbench(text: &str) -> Option<(f64, f64)> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("transactions:"))?;
    let mut it = line.split_whitespace();
    let txns: f64 = it.nth(1)?.parse().ok()?;
    let tps: f64 = it.next()?.trim_start_matches('(').parse().ok()?;
    Some((tps, txns))
}

/// commitscope workload --json: the last line is the summary.
/// A number field of our JSON summary line.
fn json_field(text: &str, name: &str) -> Option<f64> {
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))?;
    let rest = last.split(&format!("\"{name}\":")).nth(1)?;
    rest.split([',', '}']).next()?.parse().ok()
}

fn parse_ours(text: &str) -> Option<(f64, f64)> {
    Some((
        json_field(text, "mean_tps")?,
        json_field(text, "total_txns")?,
    ))
}

pub fn workload(threads: &[u32], pairs: u32, seconds: u32, rows: u32) -> anyhow::Result<()> {
    let cs = commitscope_release()?;
    let bin = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    eprintln!("bench: starting a throwaway {}", bin.display());
    // Room for the largest client count (the managed server's rule).
    let most = threads.iter().copied().max().unwrap_or(1);
    let max_conn = format!("--max-connections={}", (most + 20).max(151));
    let files = format!("--open-files-limit={}", most + 5000);
    let server = testkit::Server::start(&bin, None, &[max_conn.as_str(), files.as_str()])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let sock = server.socket.display().to_string();
    server
        .query("CREATE DATABASE sbtest")
        .map_err(|e| anyhow::anyhow!(e))?;
    let sb = |t: u32, mode: &str, secs: u32| {
        let mut c = Command::new("sysbench");
        c.arg("oltp_update_non_index")
            .arg(format!("--mysql-socket={sock}"))
            .args(["--mysql-user=root", "--mysql-db=sbtest", "--tables=1"])
            .arg(format!("--table-size={rows}"))
            .arg(format!("--threads={t}"))
            .arg(format!("--time={secs}"))
            .arg("--report-interval=0")
            .arg(mode);
        c
    };
    status(sb(1, "prepare", 0).stdout(Stdio::null()))?;
    let ours = |t: u32, secs: u32| {
        let mut c = Command::new(&cs);
        c.args(["workload", "--json"])
            .args(server.client_flags())
            .args(["--database", "cs_bench", "--threads", &t.to_string()])
            .args(["--rows-per-thread", &(rows / t).max(1).to_string()])
            .args(["--duration", &secs.to_string()]);
        c
    };
    let mut table = Vec::new();
    for &t in threads {
        // An untimed run of each side first: the server's state after the
        // previous thread count (dirty pages, purge) must not land on
        // whichever side happens to go first.
        eprintln!("bench: threads {t:>3} warmup (5 s each, untimed)");
        status(ours(t, 5).stdout(Stdio::null()))?;
        status(sb(t, "run", 5).stdout(Stdio::null()))?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for p in 1..=pairs {
            let x = measured(&mut ours(t, seconds), parse_ours)?;
            let y = measured(&mut sb(t, "run", seconds), parse_sysbench)?;
            eprintln!(
                "bench: threads {t:>3} pair {p}: ours {:.0} tps {:.1} ms CPU/1k | sysbench {:.0} tps {:.1} ms CPU/1k",
                x.tps,
                x.cpu_ms_per_1k(),
                y.tps,
                y.cpu_ms_per_1k()
            );
            a.push(x);
            b.push(y);
        }
        let med = |v: &[Run], f: fn(&Run) -> f64| median(v.iter().map(f).collect());
        table.push((
            t,
            med(&a, |r| r.tps),
            med(&b, |r| r.tps),
            med(&a, Run::cpu_ms_per_1k),
            med(&b, Run::cpu_ms_per_1k),
            med(&a, |r| r.rss_mib),
        ));
    }
    drop(server);
    println!("\nupdate workload vs sysbench oltp_update_non_index, {rows} rows, {pairs} alternating pairs x {seconds} s (medians)");
    println!("| threads | ours tps | sysbench tps | ratio | ours CPU ms/1k txn | sysbench CPU ms/1k txn | CPU ratio | ours RSS MiB |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (t, a, b, ca, cb, rss) in table {
        println!(
            "| {t} | {a:.0} | {b:.0} | {:.3} | {ca:.1} | {cb:.1} | {:.2} | {rss:.1} |",
            a / b,
            ca / cb
        );
    }
    Ok(())
}

/// Mean tps of the workload ticks that ended inside `(from, to]` (unix s).
fn window_tps(ticks: &[(f64, f64)], from: f64, to: f64) -> Option<f64> {
    let v: Vec<f64> = ticks
        .iter()
        .filter(|(at, _)| *at > from && *at <= to)
        .map(|(_, tps)| *tps)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One untraced workload runs throughout; the probes are attached in
/// every other window, each arm in its turn: U0 A1 U1 A2 U2 ... (a round
/// is one window of every arm). Each traced window is compared with the
/// mean of the untraced windows on either side, so a drift of the server
/// over the run cancels out. The first second of each window (attach,
/// detach) is left out. With several arms, their ratios in the same round
/// are compared pair by pair (our exact set against bpftrace's).
/// How `bench overhead` runs.
struct Overhead {
    threads: u32,
    pairs: u32,
    seconds: u32,
    anatomy: bool,
    /// Count the BPF programs' run time ([`crate::bpf_stats`]).
    bpf_time: bool,
}

fn overhead(o: Overhead, mysqld: Option<PathBuf>, arms: &[Arm]) -> anyhow::Result<()> {
    let Overhead {
        threads,
        pairs,
        seconds,
        anatomy,
        bpf_time,
    } = o;
    if arms.is_empty() {
        bail!("--arms is empty: name at least one of trace, trace-io, light, exporter, exporter-no-windows, exporter-window, exporter-exact, bpftrace");
    }
    let cs = commitscope_release()?;
    let bin = match mysqld {
        Some(b) => b,
        None if anatomy => testkit::symbols_fixture()
            .map(|f| f.join("bin/mariadbd"))
            .context(
                "--anatomy needs exact probes: the symbolized fixture is absent, pass --mysqld",
            )?,
        None => testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?,
    };
    eprintln!("bench: starting a throwaway {}", bin.display());
    let share = bin
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("share"))
        .filter(|d| d.join("english/errmsg.sys").exists());
    // A redo log that does not force a checkpoint every few seconds: those
    // stalls are most of the second-to-second noise at this rate.
    let server = if is_mariadb(&bin) {
        testkit::Server::start(&bin, share.as_deref(), &["--innodb-log-file-size=1G"])
    } else {
        // MySQL 8.0.30 and later size the redo log by its capacity.
        testkit::Server::start_mysql(&bin, &["--innodb-redo-log-capacity=1G"])
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let warmup = 10.0;
    let window = f64::from(seconds);
    let mut wl = Command::new(&cs)
        .arg("--json")
        .args(server.client_flags())
        .args([
            "--database",
            "cs_overhead",
            "--threads",
            &threads.to_string(),
        ])
        // Until the last window is over: attaching takes a varying time.
        .arg("--no-trace")
        .stdout(Stdio::piped())
        .spawn()?;
    let out = wl.stdout.take().context("stdout")?;
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
            .filter(|v| v["type"] == "tick")
            .filter_map(|v| Some((v["unix_time"].as_f64()?, v["workload"]["tps"].as_f64()?)))
            .collect::<Vec<_>>()
    });
    let sleep = |s: f64| std::thread::sleep(std::time::Duration::from_secs_f64(s));
    let rounds = pairs as usize;
    eprintln!(
        "bench: {threads} clients, warmup {warmup} s, then {} windows of {window} s ({rounds} rounds of {})",
        2 * rounds * arms.len() + 1,
        arms.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
    );
    sleep(warmup);
    let stats = bpf_time.then(crate::bpf_stats::Enabled::on).transpose()?;
    let (mut untraced, mut traced, mut bpf) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for &arm in arms {
            untraced.push(Window::measure(window));
            let probe = crate::bench_arms::attach(arm, &cs, &bin, server.pid(), anatomy)?;
            let run_time = || {
                bpf_time
                    .then(|| crate::bpf_stats::of_pid(probe.pid()))
                    .transpose()
            };
            let before = run_time()?;
            traced.push((arm, Window::measure(window)));
            let after = run_time()?;
            bpf.push(before.zip(after).map(|(a, b)| b.since(a)));
            probe.stop()?;
        }
    }
    drop(stats);
    untraced.push(Window::measure(window));
    // SAFETY: signalling our own child; it prints its summary and exits 0.
    unsafe { libc::kill(wl.id() as i32, libc::SIGINT) };
    let st = wl.wait()?;
    let ticks = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader thread"))?;
    if !st.success() {
        bail!("the workload failed ({st})");
    }
    drop(server);
    let tps = |w: &Window| window_tps(&ticks, w.from, w.to).context("a window without ticks");
    println!("window  arm                         untraced_before  traced  untraced_after  ratio  steal%  idle%  tx/cpu-s ratio");
    // Per arm: the ratios in round order, and the per-CPU ratios.
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); arms.len()];
    let mut per_cpu: Vec<Vec<f64>> = vec![Vec::new(); arms.len()];
    // Per arm, per round: the BPF time per commit in the traced window
    // and the busy CPU per commit of its untraced neighbours (ns).
    let mut bpf_per_commit: Vec<Vec<(f64, f64)>> = vec![Vec::new(); arms.len()];
    for (k, (arm, w)) in traced.iter().enumerate() {
        let (u0, u1) = (&untraced[k], &untraced[k + 1]);
        let (a, t, b) = (tps(u0)?, tps(w)?, tps(u1)?);
        let r = t / ((a + b) / 2.0);
        let i = k % arms.len();
        ratios[i].push(r);
        if let (Some(rt), Some(c0), Some(c1)) = (bpf[k], u0.cpu_ns_per_tx(a), u1.cpu_ns_per_tx(b)) {
            let txns = t * (w.to - w.from);
            if txns > 0.0 {
                bpf_per_commit[i].push((rt.ns as f64 / txns, (c0 + c1) / 2.0));
            }
        }
        let cpu = match (
            w.per_busy_second(t),
            u0.per_busy_second(a),
            u1.per_busy_second(b),
        ) {
            (Some(et), Some(ea), Some(eb)) => {
                let e = et / ((ea + eb) / 2.0);
                per_cpu[i].push(e);
                let c = w.cpu.unwrap_or_default();
                format!("{:>6.1}  {:>5.1}  {e:>14.3}", c.steal_pct(), c.idle_pct())
            }
            _ => "     -      -               -".to_string(),
        };
        println!(
            "{:>6}  {:<26}  {a:>15.0}  {t:>6.0}  {b:>14.0}  {r:.3}  {cpu}",
            k + 1,
            arm.name()
        );
    }
    println!(
        "update workload, {threads} clients, {rounds} rounds of {} traced windows of {seconds} s between untraced ones, on {}",
        arms.len(),
        bin.display()
    );
    for (i, arm) in arms.iter().enumerate() {
        report_arm(*arm, anatomy, &ratios[i], &per_cpu[i]);
        let pc = &bpf_per_commit[i];
        if !pc.is_empty() {
            println!(
                "{}: BPF programs' own run time per commit: median {:.0} ns, against {:.1} µs of busy CPU per untraced commit (median, {} windows)",
                arm.name(),
                median(pc.iter().map(|x| x.0).collect()),
                median(pc.iter().map(|x| x.1).collect()) / 1e3,
                pc.len()
            );
        }
    }
    // The scheduler split adds no trap, only reads inside programs the
    // commit path runs anyway: its whole cost is the BPF time it adds per
    // commit, as a share of a commit's CPU (issue 53's bar: 2 %).
    let at = |a: Arm| arms.iter().position(|x| *x == a);
    if let (Some(s), Some(n)) = (at(Arm::TraceCommitPath), at(Arm::TraceCommitPathNoSplit)) {
        let added: Vec<f64> = bpf_per_commit[s]
            .iter()
            .zip(&bpf_per_commit[n])
            .map(|((with, cpu), (without, _))| (with - without) / cpu)
            .collect();
        if let Some(c) = crate::util::mean_ci95(&added) {
            let call = if c.hi <= 0.02 {
                "bar met (the split adds at most 2 % of a commit's CPU)"
            } else if c.lo > 0.02 {
                "bar missed (the split adds more than 2 % of a commit's CPU)"
            } else {
                "not resolved at this noise: rerun with more --pairs"
            };
            println!(
                "the scheduler split's BPF time per commit over a commit's CPU, per round: mean {:.2} %, 95 % CI [{:.2} %, {:.2} %]: {call}",
                c.mean * 100.0,
                c.lo * 100.0,
                c.hi * 100.0
            );
        }
    }
    // Ours against the peer, round by round: the same probes, trapped by
    // two tools, in neighbouring windows.
    if let (Some(o), Some(p)) = (at(Arm::Trace), at(Arm::Bpftrace)) {
        let diffs: Vec<f64> = ratios[o]
            .iter()
            .zip(&ratios[p])
            .map(|(a, b)| a - b)
            .collect();
        if let Some(c) = crate::util::mean_ci95(&diffs) {
            let call = if c.lo >= -0.01 {
                "bar met (ours within 0.01 of bpftrace's, or better)"
            } else if c.hi < -0.01 {
                "bar missed (ours more than 0.01 below bpftrace's)"
            } else {
                "not resolved at this noise: rerun with more --pairs"
            };
            println!(
                "ours (trace) minus bpftrace, ratio per round: mean {:+.4}, 95 % CI [{:+.4}, {:+.4}]: {call}",
                c.mean, c.lo, c.hi
            );
        }
    }
    // The exporter's default schedule as it is spent: light, and exact for
    // window/interval of the time.
    if let (Some(l), Some(w)) = (at(Arm::ExporterNoWindows), at(Arm::ExporterWindow)) {
        let (window, every) = crate::bench_arms::default_schedule(&cs)?;
        let duty = window / every;
        let rounds: Vec<f64> = ratios[l]
            .iter()
            .zip(&ratios[w])
            .map(|(a, b)| crate::bench_arms::composed(*a, *b, duty))
            .collect();
        if let Some(c) = crate::util::mean_ci95(&rounds) {
            let half = (c.hi - c.lo) / 2.0;
            let (bar, max_half) = (
                crate::bench_arms::ALWAYS_ON,
                crate::bench_arms::ALWAYS_ON_HALF_WIDTH,
            );
            let call = match (c.mean >= bar, half <= max_half) {
                (_, false) => format!(
                    "not resolved: the half-width is over {max_half}, rerun with more --pairs"
                ),
                (true, true) => format!("bar met (mean >= {bar}, half-width <= {max_half})"),
                (false, true) => format!("bar missed (mean < {bar})"),
            };
            println!(
                "exporter as by default ({window} s windows every {every} s), composed per round as {:.4} x light + {duty:.4} x in-window: mean {:.4}, 95 % CI [{:.4}, {:.4}], half-width {half:.4}: {call}; {}",
                1.0 - duty,
                c.mean,
                c.lo,
                c.hi,
                verdict("mean", Some((c.lo, c.hi)), bar)
            );
        }
    }
    // An arm against another (the exact set, or the arm it adds to),
    // round by round.
    let over = |arm: Arm, base: Arm| {
        let (o, p) = (at(arm)?, at(base)?);
        let rel: Vec<f64> = ratios[o]
            .iter()
            .zip(&ratios[p])
            .map(|(a, b)| a / b)
            .collect();
        crate::util::mean_ci95(&rel)
    };
    let over_trace = |arm: Arm| over(arm, Arm::Trace);
    if let Some(c) = over_trace(Arm::TraceIo) {
        let call = if c.lo >= 0.98 {
            "bar met (>= 0.98)"
        } else if c.hi < 0.98 {
            "bar missed (< 0.98)"
        } else {
            "not resolved at this noise: rerun with more --pairs"
        };
        println!(
            "trace --io over trace, ratio per round: mean {:.4}, 95 % CI [{:.4}, {:.4}]: {call}",
            c.mean, c.lo, c.hi
        );
    }
    // What `--commit-path` costs beyond the exact set (said, not barred:
    // it is opt-in).
    if let Some(c) = over_trace(Arm::TraceCommitPath) {
        println!(
            "trace --commit-path over trace, ratio per round: mean {:.4}, 95 % CI [{:.4}, {:.4}]",
            c.mean, c.lo, c.hi
        );
    }
    // The scheduler split's cost: the commit path with it over the commit
    // path without it, round by round (issue 53's bar: at most 2 % more).
    if let Some(c) = over(Arm::TraceCommitPath, Arm::TraceCommitPathNoSplit) {
        let call = if c.lo >= 0.98 {
            "bar met (the split costs at most 2 %)"
        } else if c.hi < 0.98 {
            "bar missed (the split costs more than 2 %)"
        } else {
            "not resolved at this noise: rerun with more --pairs"
        };
        println!(
            "trace --commit-path over --no-sched-split, ratio per round: mean {:.4}, 95 % CI [{:.4}, {:.4}]: {call}",
            c.mean, c.lo, c.hi
        );
    }
    if let Some(c) = over(Arm::TraceCommitPathWakeups, Arm::TraceCommitPath) {
        println!(
            "trace --commit-path --wakeups over --commit-path, ratio per round: mean {:.4}, 95 % CI [{:.4}, {:.4}]",
            c.mean, c.lo, c.hi
        );
    }
    Ok(())
}

/// One arm's figures: median and mean ratios against its bar, the mean's
/// interval half-width, and the per-CPU context.
fn report_arm(arm: Arm, anatomy: bool, ratios: &[f64], per_cpu: &[f64]) {
    let name = arm.name();
    let bar = arm.bar(anatomy);
    let bar_text = bar.map_or_else(|| arm.why_no_bar().to_string(), |b| format!("bar: >= {b}"));
    println!(
        "{name}: median traced/untraced tps ratio{}: {:.3} ({bar_text})",
        if anatomy && arm == Arm::Trace {
            " with --anatomy"
        } else {
            ""
        },
        median(ratios.to_vec()),
    );
    if let Some(b) = bar {
        println!(
            "{name}: {}",
            verdict("median", crate::util::median_ci95(ratios.to_vec()), b)
        );
    }
    if let Some(c) = crate::util::mean_ci95(ratios) {
        // The signs-only median interval narrows slowly on a host whose
        // capacity swings second to second; the mean's uses the sizes.
        println!(
            "{name}: mean traced/untraced tps ratio: {:.3}, half-width {:.4} (lag-1 autocorrelation {:.2}, allowed for){}",
            c.mean,
            (c.hi - c.lo) / 2.0,
            c.rho1,
            bar.map_or_else(String::new, |b| format!(
                "; {}",
                verdict("mean", Some((c.lo, c.hi)), b)
            ))
        );
    }
    if let Some((lo, hi)) = crate::util::median_ci95(per_cpu.to_vec()) {
        // Context, not the bar: the bar is on tps. Where the host's steal
        // moves tps, this says what the probes themselves cost.
        println!(
            "{name}: transactions per busy CPU-second, traced/untraced: median {:.3}, 95 % CI [{lo:.3}, {hi:.3}] (context; the bar is on tps)",
            median(per_cpu.to_vec())
        );
    }
}

/// One measured window of the overhead benchmark: its span (the first
/// second, attach or detach, left out) and the machine's CPU time in it.
struct Window {
    from: f64,
    to: f64,
    cpu: Option<CpuTimes>,
}

impl Window {
    /// Sleeps through a window of `seconds`, measuring all but its first.
    fn measure(seconds: f64) -> Self {
        let sleep = |s: f64| std::thread::sleep(std::time::Duration::from_secs_f64(s.max(0.0)));
        sleep(1.0);
        let (from, c0) = (unix_now(), CpuTimes::now());
        sleep(seconds - 1.0);
        let (to, c1) = (unix_now(), CpuTimes::now());
        let cpu = c0.zip(c1).map(|(a, b)| b.since(a));
        Self { from, to, cpu }
    }

    /// Busy CPU (all of the machine's) per transaction at `tps` over this
    /// window, in ns.
    fn cpu_ns_per_tx(&self, tps: f64) -> Option<f64> {
        let txns = tps * (self.to - self.from);
        (txns > 0.0).then(|| self.cpu.map(|c| c.busy_seconds() * 1e9 / txns))?
    }

    /// Transactions per busy CPU-second at `tps` over this window.
    fn per_busy_second(&self, tps: f64) -> Option<f64> {
        let busy = self.cpu?.busy_seconds();
        (busy > 0.0).then(|| tps * (self.to - self.from) / busy)
    }
}

/// Whether the pairs settle the bar: only when the whole 95 % confidence
/// interval of `statistic` (the median, the mean) lies on one side of it.
/// On a noisy machine a point estimate alone reads as a pass or a fail
/// that the data do not support. `None` comes from the median's interval,
/// which needs at least 6 pairs (the mean's line is printed only when it
/// has one).
fn verdict(statistic: &str, ci: Option<(f64, f64)>, bar: f64) -> String {
    match ci {
        None => format!("95 % CI of the {statistic}: too few pairs (at least 6)"),
        Some((lo, hi)) => {
            let call = if lo >= bar {
                "bar met"
            } else if hi < bar {
                "bar missed"
            } else {
                "not resolved at this noise: the bar lies inside the interval, rerun with more --pairs or longer --seconds"
            };
            format!("95 % CI of the {statistic}: [{lo:.3}, {hi:.3}]: {call}")
        }
    }
}

/// Whether `bin` is a MariaDB server (its `--version` says so); otherwise
/// it is taken for MySQL, started the way MySQL needs.
fn is_mariadb(bin: &Path) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("MariaDB"))
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn a_bar_is_settled_only_outside_the_interval() {
        assert!(verdict("median", Some((0.981, 0.99)), 0.98).ends_with("bar met"));
        assert!(verdict("median", Some((0.95, 0.979)), 0.98).ends_with("bar missed"));
        assert!(verdict("median", Some((0.95, 0.99)), 0.98).contains("not resolved"));
        assert!(verdict("median", None, 0.98).contains("too few pairs"));
    }
}
