//! Small process helpers for the tasks.
use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{bail, Context};

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command, inheriting stdio; fails on non-zero exit.
pub fn status(cmd: &mut Command) -> anyhow::Result<()> {
    let st = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

/// Runs a command and returns its stdout (stderr passed through).
pub fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when the command runs and exits 0 (output discarded).
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether mold (installed by setup) links here: the suite's builds
/// link with it, a plain `cargo build` with the system's linker.
pub fn have_mold() -> bool {
    succeeds(Command::new("mold").arg("--version"))
}

pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    status(Command::new(cargo).args(args).current_dir(root()))
}

/// Starts `commitscope trace --pid PID ARGS` and returns once its probes
/// are attached (its "tracing pid" line). Its stderr keeps being echoed
/// to ours from a thread, so `-v` lines and errors stay visible.
pub fn start_trace(
    commitscope: &Path,
    pid: u32,
    args: &[&str],
    stdout: Stdio,
) -> anyhow::Result<Child> {
    let mut child = Command::new(commitscope)
        .args(["trace", "--pid", &pid.to_string()])
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start commitscope trace")?;
    let err = child.stderr.take().context("stderr")?;
    if !until_line(err, true, |l| l.contains("commitscope: tracing pid")) {
        bail!("commitscope trace did not attach");
    }
    Ok(child)
}

/// Reads `out` line by line until `ready` says so (each line echoed to our
/// stderr when `echo`), then drains the rest from a thread, echoed the
/// same way, so the child never blocks on a full pipe. False when the
/// stream ended first.
pub fn until_line(
    out: impl std::io::Read + Send + 'static,
    echo: bool,
    mut ready: impl FnMut(&str) -> bool,
) -> bool {
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) => {
                if echo {
                    eprintln!("{l}");
                }
                if ready(&l) {
                    break;
                }
            }
            _ => return false,
        }
    }
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if echo {
                eprintln!("{l}");
            }
        }
    });
    true
}

/// Starts `commitscope exporter --listen 127.0.0.1:PORT ARGS` and returns
/// once `pids` are all attached. Its stderr keeps being echoed.
pub fn start_exporter(
    commitscope: &Path,
    port: u16,
    args: &[String],
    pids: &[u32],
) -> anyhow::Result<Child> {
    let mut child = Command::new(commitscope)
        .arg("exporter")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start commitscope exporter")?;
    let err = child.stderr.take().context("stderr")?;
    let mut waiting: Vec<u32> = pids.to_vec();
    // Nothing to wait for: the first line (the listening one) will do.
    let attached = until_line(err, true, |l| {
        waiting.retain(|p| !l.contains(&format!("attached pid {p} ")));
        waiting.is_empty()
    });
    if !attached {
        bail!("commitscope exporter did not attach to {pids:?}");
    }
    Ok(child)
}

/// `GET /metrics` on loopback; the body's length (0 on any failure).
pub fn scrape(port: u16) -> usize {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    if s.write_all(
        b"GET /metrics HTTP/1.0\r\nHost: localhost\r\nAccept: application/openmetrics-text\r\n\r\n",
    )
    .is_err()
    {
        return 0;
    }
    let mut body = Vec::new();
    let _ = s.read_to_end(&mut body);
    if body.starts_with(b"HTTP/1.0 200") || body.starts_with(b"HTTP/1.1 200") {
        body.len()
    } else {
        0
    }
}

/// The median of `v` (the upper one of an even count); NaN when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A distribution-free 95 % confidence interval for the median of `v`:
/// the order statistics x(k) and x(n+1-k), k the largest rank with
/// P(Binomial(n, 1/2) < k) <= 2.5 %. No assumption about the noise, which
/// on a small VM is neither normal nor small (per-second tps swings of
/// 10-15 % from the server's own background work). None below 6 samples,
/// where no such interval reaches 95 %.
pub fn median_ci95(mut v: Vec<f64>) -> Option<(f64, f64)> {
    let n = v.len();
    // P(X < k) for X ~ Binomial(n, 1/2), summed until it passes 2.5 %.
    let mut below = 0.0;
    let mut pmf = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut k = 0;
    while k < n {
        if below + pmf > 0.025 {
            break;
        }
        below += pmf;
        pmf *= (n - k) as f64 / (k + 1) as f64;
        k += 1;
    }
    // Ranks are 1-based: x(k) is v[k - 1].
    if k == 0 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((v[k - 1], v[n - k]))
}

/// Compiles the MariaDB 10.11 flavour of the C fixture to `out`, with
/// `extra` gcc flags.
pub fn build_fixture(out: &Path, extra: &[&str]) -> anyhow::Result<()> {
    status(
        Command::new("gcc")
            .args(["-O2", "-DFLAVOR_MARIADB1011"])
            .args(extra)
            .arg(root().join("tracer/tests/fixture/fake_server.c"))
            .arg("-o")
            .arg(out),
    )
}

/// Where a trace summary's `totals` differ from the fixture's own counts
/// (its JSON line): one message per differing count.
pub fn fixture_mismatches(totals: &serde_json::Value, truth: &serde_json::Value) -> Vec<String> {
    [
        ("n_write", "requests"),
        ("durable", "durable"),
        ("n_flush", "flushes"),
        ("redo_fsync", "redo_syncs"),
        ("redo_writes", "redo_writes"),
        ("redo_write_bytes", "redo_write_bytes"),
    ]
    .iter()
    .filter(|(ours, theirs)| totals[ours] != truth[theirs])
    .map(|(ours, theirs)| {
        format!(
            "{ours} {} != fixture {theirs} {}",
            totals[ours], truth[theirs]
        )
    })
    .collect()
}

/// The mean of `v` and a 95 % confidence interval for it, widened for the
/// lag-1 autocorrelation of the series. Why beside the median's interval:
/// the binomial ranks use only the signs around the median, so on a host
/// whose per-window capacity swings by 10 % or more they need several
/// hundred pairs to narrow to a few percent; the mean uses the sizes too.
/// Adjacent overhead pairs share an untraced window, and slow host noise
/// makes neighbours alike, so the variance of the mean is taken as
/// `s² (1 + 2 ρ1) / n` (ρ1 ≥ 0), the first-order correction for a series
/// that is not independent. None below 10 samples.
pub fn mean_ci95(v: &[f64]) -> Option<MeanCi> {
    let n = v.len();
    if n < 10 {
        return None;
    }
    let nf = n as f64;
    let mean = v.iter().sum::<f64>() / nf;
    let ss: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
    if ss == 0.0 {
        return Some(MeanCi {
            mean,
            lo: mean,
            hi: mean,
            rho1: 0.0,
        });
    }
    let rho1 = v
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / ss;
    let var = ss / (nf - 1.0);
    let se = (var * (1.0 + 2.0 * rho1.max(0.0)) / nf).sqrt();
    // Student's t at 97.5 %, df = n - 1: within 0.005 of the table from
    // df = 9 up (Cornish-Fisher terms).
    let df = nf - 1.0;
    let t = 1.96 + 2.37 / df + 2.8 / (df * df);
    Some(MeanCi {
        mean,
        lo: mean - t * se,
        hi: mean + t * se,
        rho1,
    })
}

/// See [`mean_ci95`].
#[derive(Debug, Clone, Copy)]
pub struct MeanCi {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    /// Lag-1 autocorrelation of the samples (what widened the interval).
    pub rho1: f64,
}

#[cfg(test)]
mod tests {
    use super::{mean_ci95, median_ci95};

    #[test]
    fn median_ci_uses_the_binomial_ranks() {
        // n = 30: P(Bin(30, .5) <= 9) = 2.14 %, <= 10 adds 2.8 %: ranks 10 and 21.
        let v: Vec<f64> = (1..=30).rev().map(f64::from).collect();
        assert_eq!(median_ci95(v), Some((10.0, 21.0)));
        // n = 6: only the extremes (P(X = 0) = 1.6 %).
        let v: Vec<f64> = vec![3.0, 1.0, 6.0, 2.0, 5.0, 4.0];
        assert_eq!(median_ci95(v), Some((1.0, 6.0)));
        // n = 5: even the extremes miss 95 % (P(X = 0) = 3.1 %).
        assert_eq!(median_ci95(vec![1.0; 5]), None);
        assert_eq!(median_ci95(Vec::new()), None);
    }

    #[test]
    fn mean_ci_matches_the_t_table_and_widens_for_autocorrelation() {
        // 0, 1, ..., 9 alternating around 4.5: s = 3.028, negative rho1
        // (not used to narrow), t(9) = 2.262 -> half-width 2.166.
        let v: Vec<f64> = [0.0, 9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0].to_vec();
        let c = mean_ci95(&v).unwrap();
        assert!((c.mean - 4.5).abs() < 1e-12);
        assert!(c.rho1 < 0.0);
        assert!((c.hi - c.mean - 2.166).abs() < 0.01, "{c:?}");
        // The same values in order: strongly autocorrelated, wider.
        let sorted: Vec<f64> = (0..10).map(f64::from).collect();
        let d = mean_ci95(&sorted).unwrap();
        assert!(
            d.rho1 > 0.5 && d.hi - d.mean > 1.5 * (c.hi - c.mean),
            "{d:?}"
        );
        assert!(mean_ci95(&v[..9]).is_none());
    }
}
