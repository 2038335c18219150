//! `cargo xtask bench first-line`: seconds from the main command's start
//! to its first per-second line with a fresh managed server, and the same
//! for a stripped server whose debug file comes from the debuginfod cache.
use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{bail, Context};

use crate::{
    bench_symbols::build_id_hex,
    util::{median, status},
};

/// `cargo xtask bench first-line`: the main command's first line with
/// Debian's server, then the debuginfod-cache comparison.
pub fn run(cs: &Path, runs: u32) -> anyhow::Result<()> {
    let mysqld = testkit::system_mariadbd().context("no /usr/sbin/mariadbd (mariadb-server)")?;
    let mut times = Vec::new();
    for i in 1..=runs {
        let (first, _) = first_line_of(cs, &mysqld, &[])?;
        println!("run {i}: first line after {first:.2} s");
        times.push(first);
    }
    println!(
        "median time to the first per-second line: {:.2} s (bar: <= 15 s)",
        median(times)
    );
    first_line_cached(cs, runs)
}

/// Seconds from starting the main command (managed server of `mysqld`,
/// fresh datadir) to its first per-second line, and its stderr; `-v`'s
/// phase durations are printed on the way.
pub fn first_line_of(
    cs: &Path,
    mysqld: &Path,
    envs: &[(&str, &std::ffi::OsStr)],
) -> anyhow::Result<(f64, String)> {
    let t0 = std::time::Instant::now();
    let mut cmd = Command::new(cs);
    cmd.args(["--threads", "100", "--duration", "1", "-v", "--mysqld"])
        .arg(mysqld)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut first = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        // The first tick: a clock time, then numbers.
        if first.is_none()
            && line.len() > 8
            && line.as_bytes()[2] == b':'
            && line.as_bytes()[5] == b':'
        {
            first = Some(t0.elapsed().as_secs_f64());
        }
    }
    let out = child.wait_with_output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let first = first.with_context(|| format!("no per-second line: {err}"))?;
    let phases: Vec<String> = err
        .lines()
        .filter(|l| l.contains(" done in "))
        .map(|l| l.split("] ").nth(1).unwrap_or(l).to_string())
        .collect();
    println!("  {} ({})", mysqld.display(), phases.join(", "));
    Ok((first, err.into_owned()))
}

/// `cargo xtask bench first-line`, second half: the symbolized fixture
/// as the managed server (symbols in its .symtab: today's exact path)
/// against its stripped copy whose debug part is in the debuginfod cache,
/// alternating; bar: the cached path within 2 s of the other.
pub fn first_line_cached(cs: &Path, runs: u32) -> anyhow::Result<()> {
    let Some(fix) = testkit::symbols_fixture() else {
        println!("(the symbolized fixture is absent: no debuginfod-cache comparison)");
        return Ok(());
    };
    let dir = tempfile::Builder::new()
        .prefix("cs-bench-fl-")
        .tempdir_in("/var/tmp")?;
    let d = dir.path();
    std::fs::create_dir(d.join("bin"))?;
    std::os::unix::fs::symlink(fix.join("share"), d.join("share"))?;
    let orig = fix.join("bin/mariadbd");
    let stripped = d.join("bin/mariadbd");
    status(
        Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&stripped)
            .arg(&orig),
    )?;
    let id = build_id_hex(&std::fs::read(&stripped)?).context("no build-id")?;
    let cache = d.join("cache");
    std::fs::create_dir_all(cache.join(&id))?;
    status(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&orig)
            .arg(cache.join(&id).join("debuginfo")),
    )?;
    let (mut sym, mut cached) = (vec![], vec![]);
    for i in 1..=runs {
        let (a, _) = first_line_of(cs, &orig, &[])?;
        // A server that is never asked: the cache must answer.
        let (b, err) = first_line_of(
            cs,
            &stripped,
            &[
                ("DEBUGINFOD_CACHE_PATH", cache.as_os_str()),
                ("DEBUGINFOD_URLS", "http://127.0.0.1:9".as_ref()),
            ],
        )?;
        if !err.contains("debuginfod servers: not asked (in the cache)") {
            bail!("the stripped server was not probed from the cache: {err}");
        }
        println!(
            "pair {i}: symbols in .symtab {a:.2} s   debug file from the debuginfod cache {b:.2} s"
        );
        sym.push(a);
        cached.push(b);
    }
    let (a, b) = (median(sym), median(cached));
    println!(
        "median first line: .symtab {a:.2} s, debuginfod cache {b:.2} s: {:+.2} s (bar: <= +2 s)",
        b - a
    );
    Ok(())
}
