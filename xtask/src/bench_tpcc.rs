//! `cargo xtask bench tpcc`: the TPC-C load (with the managed server, the
//! issue's bar; then on one throwaway server against its peer, the stock
//! `mariadb` client replaying a `mariadb-dump` of the same rows,
//! alternating) and runs at several client counts: tpmC, NOPM, client CPU
//! per 1,000 New-Orders, commits per redo flush.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::util::{output, status};

const DB: &str = "cs_tpcc";
const PEER_DB: &str = "peer_tpcc";

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The managed-server path a user takes: `commitscope --workload tpcc`
/// loads as its "load" phase; `-v` times it.
fn managed_load(cs: &Path, w: u32) -> anyhow::Result<(f64, String)> {
    let out = Command::new(cs)
        .args(["--workload", "tpcc", "-w", &w.to_string()])
        .args(["--threads", "1", "--duration", "1", "--no-trace", "-v"])
        .stdout(Stdio::null())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("managed run failed: {err}");
    }
    let phase = err
        .lines()
        .find_map(|l| l.split("load done in ").nth(1))
        .and_then(|s| s.trim_end_matches(" s").trim().parse::<f64>().ok())
        .with_context(|| format!("no 'load done' line: {err}"))?;
    let loaded = err
        .lines()
        .find(|l| l.starts_with("tpcc: loaded"))
        .unwrap_or_default()
        .to_string();
    Ok((phase, loaded))
}

fn mariadb(server: &testkit::Server) -> Command {
    let mut c = Command::new("mariadb");
    c.arg("--no-defaults")
        .arg(format!("--socket={}", server.socket.display()))
        .arg("-uroot");
    c
}

pub fn tpcc(
    cs: &Path,
    warehouses: u32,
    threads: &[u32],
    seconds: u32,
    warmup: u32,
    pairs: u32,
) -> anyhow::Result<()> {
    let w = warehouses.to_string();
    eprintln!("bench: W={w} load with the managed server (bar: <= 20 s)");
    let (managed_s, managed_line) = managed_load(cs, warehouses)?;

    let bin = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    // The managed server's buffer pool on this machine (min(1 GiB, RAM/4)).
    let server = testkit::Server::start(&bin, None, &["--innodb-buffer-pool-size=1G"])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let flags = server.client_flags();
    let dump = tempfile::NamedTempFile::new_in("/var/tmp")?;
    let (mut ours, mut peer, mut rows) = (Vec::new(), Vec::new(), 0u64);
    for pair in 0..pairs.max(1) {
        let out = output(
            Command::new(cs)
                .args([
                    "load",
                    "--workload",
                    "tpcc",
                    "-w",
                    &w,
                    "--database",
                    DB,
                    "--json",
                ])
                .args(&flags),
        )?;
        let r = json_lines(&out)
            .pop()
            .context("no JSON from commitscope load")?;
        let secs = r["seconds"].as_f64().context("load seconds")?;
        rows = r["rows"].as_u64().unwrap_or(0);
        ours.push(secs);
        if pair == 0 {
            dump_ours(&server, dump.path())?;
        }
        peer.push(replay(&server, dump.path())?);
        eprintln!(
            "bench: load pair {}: ours {:.2} s, dump replay {:.2} s",
            pair + 1,
            ours[ours.len() - 1],
            peer[peer.len() - 1]
        );
    }
    let (o, p) = (median(&ours), median(&peer));

    println!("TPC-C, W={w}, Debian's mariadbd, {} cores", cores());
    println!(
        "load with the managed server: {managed_s:.2} s (bar: <= 20 s); {}",
        managed_line.trim_start_matches("tpcc: ")
    );
    println!(
        "load on one server, median of {} pairs: ours {o:.2} s ({:.0} rows/s); the mariadb client replaying a mariadb-dump of the same {rows} rows: {p:.2} s; replay/ours {:.2}",
        ours.len(),
        rows as f64 / o,
        p / o
    );
    println!(
        "\nrun: {warmup} s warmup, {seconds} s measured, traced (main command on the same server)"
    );
    println!(
        "{:>8} {:>12} {:>10} {:>22} {:>14} {:>9} {:>9}",
        "clients",
        "tpmC",
        "NOPM",
        "cpu_s/1000_new_orders",
        "commits/flush",
        "p90_NO_ms",
        "failures"
    );
    for &c in threads {
        let out = output(
            Command::new(cs)
                .args(["--workload", "tpcc", "-w", &w, "--database", DB])
                .args(["--threads", &c.to_string()])
                .args(["--warmup", &warmup.to_string()])
                .args(["--duration", &seconds.to_string(), "--json"])
                .args(&flags),
        )?;
        let s = json_lines(&out)
            .into_iter()
            .find(|v| v["type"] == "summary")
            .context("no summary")?;
        let t = &s["workload"]["tpcc"];
        let fl: u64 = t["totals"]
            .as_array()
            .map(|a| a.iter().filter_map(|k| k["fl"].as_u64()).sum())
            .unwrap_or(0);
        println!(
            "{c:>8} {:>12.1} {:>10.1} {:>22.3} {:>14.2} {:>9.1} {:>9}",
            t["tpmc"].as_f64().unwrap_or(0.0),
            t["nopm"].as_f64().unwrap_or(0.0),
            t["cpu_s_per_1000_new_orders"].as_f64().unwrap_or(f64::NAN),
            s["commits_per_flush"].as_f64().unwrap_or(f64::NAN),
            t["latency"][0]["p90_ms"].as_f64().unwrap_or(f64::NAN),
            fl
        );
    }
    drop(server);
    Ok(())
}

/// `bench tpcc --load-only`: on one throwaway server (the managed
/// server's buffer pool), alternating: ours with LOAD DATA LOCAL INFILE,
/// ours with multi-row INSERTs (the loader before LOAD DATA), and the stock
/// `mariadb` client replaying a `mariadb-dump` of the same rows. Medians.
pub fn load_only(cs: &Path, warehouses: u32, pairs: u32) -> anyhow::Result<()> {
    let w = warehouses.to_string();
    let bin = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    let server = testkit::Server::start(&bin, None, &["--innodb-buffer-pool-size=1G"])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let flags = server.client_flags();
    let dump = tempfile::NamedTempFile::new_in("/var/tmp")?;
    let load = |method: &str| -> anyhow::Result<(f64, u64)> {
        let out = output(
            Command::new(cs)
                .args(["load", "--workload", "tpcc", "-w", &w, "--database", DB])
                .args(["--load-method", method, "--json"])
                .args(&flags),
        )?;
        let r = json_lines(&out)
            .pop()
            .context("no JSON from commitscope load")?;
        Ok((
            r["seconds"].as_f64().context("load seconds")?,
            r["rows"].as_u64().unwrap_or(0),
        ))
    };
    let (mut infile, mut insert, mut peer, mut rows) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
    for pair in 0..pairs.max(1) {
        let (a, n) = load("infile")?;
        let (b, _) = load("insert")?;
        rows = n;
        if pair == 0 {
            dump_ours(&server, dump.path())?;
        }
        let c = replay(&server, dump.path())?;
        eprintln!(
            "bench: load pair {}: LOAD DATA {a:.2} s, INSERT {b:.2} s, dump replay {c:.2} s",
            pair + 1
        );
        infile.push(a);
        insert.push(b);
        peer.push(c);
    }
    drop(server);
    let (a, b, c) = (median(&infile), median(&insert), median(&peer));
    let r = rows as f64;
    println!(
        "TPC-C load, W={w} ({rows} rows), Debian's mariadbd, {} cores, median of {} alternating runs",
        cores(),
        infile.len()
    );
    println!("| loader | seconds | rows/s | vs INSERT |");
    println!("|---|---:|---:|---:|");
    println!(
        "| ours, LOAD DATA LOCAL INFILE (chosen) | {a:.2} | {:.0} | {:.2} |",
        r / a,
        b / a
    );
    println!("| ours, multi-row INSERT | {b:.2} | {:.0} | 1.00 |", r / b);
    println!(
        "| mariadb client replaying a mariadb-dump (peer) | {c:.2} | {:.0} | {:.2} |",
        r / c,
        b / c
    );
    Ok(())
}

/// The peer's input: a `mariadb-dump` of our loaded tables (TPC-C's nine;
/// not the loader's own record, whose name begins with `_`).
fn dump_ours(server: &testkit::Server, path: &Path) -> anyhow::Result<()> {
    let tables = server
        .query(&format!(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = '{DB}' AND table_name NOT LIKE '\\_%'"
        ))
        .map_err(anyhow::Error::msg)?;
    let tables: Vec<&str> = tables.split_whitespace().collect();
    anyhow::ensure!(tables.len() == 9, "TPC-C has 9 tables, {DB} has {tables:?}");
    let f = std::fs::File::create(path)?;
    status(
        Command::new("mariadb-dump")
            .arg("--no-defaults")
            .arg(format!("--socket={}", server.socket.display()))
            .args(["-uroot", DB])
            .args(tables)
            .stdout(f),
    )
}

/// The peer: the stock client replaying the dump into a fresh database;
/// its seconds.
fn replay(server: &testkit::Server, path: &Path) -> anyhow::Result<f64> {
    status(mariadb(server).args([
        "-e",
        &format!("DROP DATABASE IF EXISTS {PEER_DB}; CREATE DATABASE {PEER_DB}"),
    ]))?;
    let t0 = Instant::now();
    status(
        mariadb(server)
            .arg(PEER_DB)
            .stdin(std::fs::File::open(path)?),
    )?;
    Ok(t0.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
