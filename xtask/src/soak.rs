//! `cargo xtask soak [--minutes 30] [--threads 100]`: the main command on a
//! managed server for a long time, checked every minute: commitscope's RSS
//! and open fds, the probes' lost events, and the probes' redo writes and
//! fsyncs against the server's own `Innodb_log_writes`/`Innodb_data_fsyncs`
//! over the same minute. Bar: RSS and fds grow < 5 % from minute 2 to the
//! end, no lost event, every minute's counters within 0.5 %.
use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use anyhow::{bail, Context};

use crate::util::{cargo, root};
use testkit::rss_kib;

/// What one minute came to.
struct Minute {
    n: u64,
    rss_kib: u64,
    fds: usize,
    lost: u64,
    commits: u64,
    ours_writes: u64,
    server_writes: u64,
    ours_fsyncs: u64,
    server_fsyncs: u64,
}

fn pct(ours: u64, server: u64) -> f64 {
    if server == 0 {
        return if ours == 0 { 0.0 } else { 100.0 };
    }
    (ours as f64 - server as f64) / server as f64 * 100.0
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `Innodb_log_writes` and `Innodb_data_fsyncs` of the server on `socket`.
fn server_counters(socket: &Path) -> anyhow::Result<(u64, u64)> {
    let out = Command::new("mariadb")
        .arg("--no-defaults")
        .arg(format!("--socket={}", socket.display()))
        .args(["-uroot", "-N", "-B", "-e"])
        .arg("SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_log_writes','Innodb_data_fsyncs')")
        .output()
        .context("cannot run the mariadb client")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .with_context(|| format!("no {name} in SHOW GLOBAL STATUS: {text}"))
    };
    Ok((get("Innodb_log_writes")?, get("Innodb_data_fsyncs")?))
}

pub fn run(minutes: u64, threads: u32) -> anyhow::Result<()> {
    if minutes < 3 {
        bail!("--minutes must be at least 3 (growth is measured from minute 2)");
    }
    cargo(&["build", "--release", "-p", "commitscope"])?;
    let bin = root().join("target/release/commitscope");
    let mut child = Command::new(&bin)
        .args(["-v", "--json", "--warmup", "0", "--threads"])
        .arg(threads.to_string())
        .arg("--duration")
        .arg((minutes * 60 + 2).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start commitscope")?;
    let pid = child.id();
    // stderr: find the managed server's temp dir (its socket), echo the rest.
    let (dir_tx, dir_rx) = mpsc::channel();
    let err = child.stderr.take().context("no stderr")?;
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if let Some(rest) = l.split_once("] temp dir ").map(|(_, r)| r) {
                let dir = rest.split(" (").next().unwrap_or(rest).to_string();
                let _ = dir_tx.send(PathBuf::from(dir));
            }
            eprintln!("{l}");
        }
    });
    let dir = dir_rx
        .recv_timeout(Duration::from_secs(120))
        .context("commitscope did not say where its managed server is (-v)")?;
    let socket = dir.join("mysqld.sock");
    let out = child.stdout.take().context("no stdout")?;
    let mut minutes_done = Vec::new();
    let mut base: Option<(u64, u64)> = None;
    let (mut lost, mut commits, mut writes, mut fsyncs) = (0u64, 0u64, 0u64, 0u64);
    println!(
        "| minute | RSS MiB | fds | lost events | commits | redo writes ours / server (diff) | InnoDB fsyncs ours / server (diff) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if v["type"] != "tick" {
            continue;
        }
        let t = &v["trace"];
        let get = |k: &str| t[k].as_u64().unwrap_or(0);
        let elapsed = v["workload"]["elapsed_s"].as_f64().unwrap_or(0.0);
        if base.is_none() {
            // The first tick opens the first minute: counts from here.
            base = Some(server_counters(&socket)?);
            continue;
        }
        lost += get("lost_events");
        commits += v["workload"]["commits"].as_u64().unwrap_or(0);
        writes += get("redo_writes");
        fsyncs += get("redo_fsync") + get("data_fsync");
        let n = minutes_done.len() as u64 + 1;
        if elapsed + 0.5 < (n * 60) as f64 + 1.0 {
            continue;
        }
        let now = server_counters(&socket)?;
        let (w0, f0) = base.replace(now).unwrap_or(now);
        let m = Minute {
            n,
            rss_kib: rss_kib(pid),
            fds: fds(pid),
            lost,
            commits,
            ours_writes: writes,
            server_writes: now.0 - w0,
            ours_fsyncs: fsyncs,
            server_fsyncs: now.1 - f0,
        };
        println!(
            "| {} | {:.1} | {} | {} | {} | {} / {} ({:+.3} %) | {} / {} ({:+.3} %) |",
            m.n,
            m.rss_kib as f64 / 1024.0,
            m.fds,
            m.lost,
            m.commits,
            m.ours_writes,
            m.server_writes,
            pct(m.ours_writes, m.server_writes),
            m.ours_fsyncs,
            m.server_fsyncs,
            pct(m.ours_fsyncs, m.server_fsyncs)
        );
        minutes_done.push(m);
        (lost, commits, writes, fsyncs) = (0, 0, 0, 0);
        if minutes_done.len() as u64 == minutes {
            break;
        }
    }
    // SAFETY: signalling our own child: the run is over.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let _ = child.wait();
    verdict(&minutes_done, minutes)
}

/// The bar, said line by line; an error when any part fails.
fn verdict(ms: &[Minute], minutes: u64) -> anyhow::Result<()> {
    if (ms.len() as u64) < minutes {
        bail!("the run ended after {} of {minutes} minutes", ms.len());
    }
    let from = &ms[1];
    let last = &ms[ms.len() - 1];
    let growth = |a: u64, b: u64| (b as f64 - a as f64) / a.max(1) as f64 * 100.0;
    let rss = growth(from.rss_kib, last.rss_kib);
    let fd = growth(from.fds as u64, last.fds as u64);
    let lost: u64 = ms.iter().map(|m| m.lost).sum();
    let worst = ms
        .iter()
        .flat_map(|m| {
            [
                pct(m.ours_writes, m.server_writes).abs(),
                pct(m.ours_fsyncs, m.server_fsyncs).abs(),
            ]
        })
        .fold(0.0, f64::max);
    println!(
        "RSS growth from minute 2: {rss:+.2} % (bar < 5 %); fds: {fd:+.2} % (bar < 5 %); lost events: {lost} (bar 0); worst minute's counter difference: {worst:.3} % (bar 0.5 %)"
    );
    if rss >= 5.0 || fd >= 5.0 || lost > 0 || worst > 0.5 {
        bail!("the soak missed its bar");
    }
    println!("soak: passed");
    Ok(())
}
