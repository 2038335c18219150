//! `cargo xtask bench releases`: the servers users run today side by side
//! — Debian 12's MariaDB 10.11 (the system's), Debian 11's 10.5, Debian
//! 13's 11.8 and Debian unstable's MySQL (stock, from `cargo xtask
//! servers`) — each run by the main command as its managed server with
//! the server's own defaults (MySQL's binlog on, `sync_binlog=1`), in
//! rotation, so every round measures all of them under the same
//! conditions of this noisy host. The
//! figure is each release's tps over 10.11's in the same round (mean and
//! 95 % interval over the rounds), beside its cross-check against the
//! server's own counters.
use std::{path::Path, process::Command};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::util::{mean_ci95, median};

/// One main-command run's figures.
struct Run {
    tps: f64,
    /// The largest |diff| of the cross-check, in percent.
    worst_check: f64,
    server: String,
}

fn main_command(bin: &Path, mysqld: &Path, threads: u32, seconds: u32) -> anyhow::Result<Run> {
    let wd = tempfile::Builder::new()
        .prefix("cs-bench-releases-")
        .tempdir_in("/var/tmp")?;
    let out = Command::new(bin)
        .arg("--mysqld")
        .arg(mysqld)
        .args(["--threads", &threads.to_string()])
        .args(["--duration", &seconds.to_string(), "--json"])
        .arg("--workdir")
        .arg(wd.path())
        .output()
        .with_context(|| format!("run {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} on {}: {}",
            bin.display(),
            mysqld.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let s: Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .context("no summary line")?;
    let worst_check = s["checks"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["diff_pct"].as_f64())
                .fold(0.0_f64, |m, d| m.max(d.abs()))
        })
        .unwrap_or(f64::NAN);
    Ok(Run {
        tps: s["workload"]["mean_tps"].as_f64().context("no mean_tps")?,
        worst_check,
        server: s["header"]["legend"]["server"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
    })
}

pub fn releases(bin: &Path, threads: u32, seconds: u32, rounds: u32) -> anyhow::Result<()> {
    let system = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (cargo xtask setup)")?;
    let mut servers = vec![("10.11 (Debian 12)".to_string(), system)];
    for r in testkit::stock::RELEASES {
        let s = testkit::stock::ensure(*r, &mut |l| eprintln!("bench: servers: {l}"))
            .map_err(anyhow::Error::msg)?;
        servers.push((r.describe(), s.server));
    }
    let mut tps: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
    let mut checks: Vec<f64> = vec![0.0; servers.len()];
    let mut names: Vec<String> = vec![String::new(); servers.len()];
    for round in 1..=rounds {
        // Rotate the order: no release always runs first (or last).
        for k in 0..servers.len() {
            let i = (k + round as usize) % servers.len();
            let (label, mysqld) = &servers[i];
            let r = main_command(bin, mysqld, threads, seconds)?;
            eprintln!(
                "bench: round {round}/{rounds} {label}: {:.0} tps, cross-check within {:.3} %",
                r.tps, r.worst_check
            );
            tps[i].push(r.tps);
            checks[i] = checks[i].max(r.worst_check);
            names[i] = r.server;
        }
    }
    println!(
        "main command, update workload, {threads} clients, {seconds} s per run, {rounds} rounds (each server once per round, order rotated)"
    );
    println!("| server | median tps | tps / 10.11 in the same round: mean [95 % CI] | worst cross-check |");
    println!("|---|---:|---:|---:|");
    for (i, (label, _)) in servers.iter().enumerate() {
        let ratios: Vec<f64> = tps[i].iter().zip(&tps[0]).map(|(a, b)| a / b).collect();
        let ratio = if i == 0 {
            "1 (the peer)".to_string()
        } else {
            match mean_ci95(&ratios) {
                Some(m) => format!("{:.3} [{:.3}, {:.3}]", m.mean, m.lo, m.hi),
                None => format!(
                    "{:.3} (median of {}; 10 rounds for an interval)",
                    median(ratios.clone()),
                    ratios.len()
                ),
            }
        };
        println!(
            "| {} {label} | {:.0} | {ratio} | {:.3} % |",
            names[i],
            median(tps[i].clone()),
            checks[i]
        );
    }
    Ok(())
}
