//! Benchmarks. Each prints its figures next to a peer measured in the same
//! run, alternating A/B so drift hits both sides alike.
use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context};
use clap::Subcommand;

use crate::util::{cargo, root, status};

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
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Uprobe { calls, pairs } => uprobe(calls, pairs),
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
    let mut tr = None;
    if let Some(cs) = tracer {
        let mut child = Command::new(cs)
            .args(["trace", "--json", "--pid", &fx.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let err = child.stderr.take().context("stderr")?;
        let mut lines = BufReader::new(err).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.contains("tracing pid") => break,
                Some(Ok(_)) => continue,
                _ => bail!("commitscope trace did not attach"),
            }
        }
        tr = Some(child);
    }
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn uprobe(calls: u64, pairs: u32) -> anyhow::Result<()> {
    let cs = commitscope_release()?;
    let dir = tempfile_dir()?;
    let bin = dir.join("fake_server_mariadb");
    status(
        Command::new("gcc")
            .args(["-O2", "-DFLAVOR_MARIADB1011"])
            .arg(root().join("tracer/tests/fixture/fake_server.c"))
            .arg("-o")
            .arg(&bin),
    )?;
    let (mut plain, mut traced) = (Vec::new(), Vec::new());
    println!("pair  untraced_ns/call  traced_ns/call");
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
    println!("cost of one write-probe hit (uprobe + uretprobe): {:.0} ns; traced/untraced time ratio {:.1}", b - a, b / a);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("commitscope-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
