//! `cargo xtask bench io`: `--io`'s device time checked against a peer in
//! the same run. An ext4 image is loop-mounted and holds the main
//! command's managed server (buffered redo log, so each redo fsync writes
//! its pages); while it runs with `--io`, a bpftrace script on the same
//! block tracepoints does biolatency's accounting (issue to complete, per
//! request) for the device, and for the requests of the same redo syncs:
//! the syncing thread's own while in a redo fdatasync, jbd2's and the
//! cache flushes while one is in flight. The two tools' windows differ by
//! their attach times, so what is compared is the mean device time per
//! request, attributed and whole-device: each within 5 % (the bar).
use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::util::status;

/// A loop-mounted ext4 image, unmounted when dropped.
struct Mounted {
    _dir: tempfile::TempDir,
    point: PathBuf,
}

impl Mounted {
    fn ext4(mib: u64) -> anyhow::Result<Mounted> {
        let dir = tempfile::Builder::new()
            .prefix("cs-bench-io-")
            .tempdir_in("/var/tmp")?;
        let img = dir.path().join("fs.img");
        std::fs::File::create(&img)?.set_len(mib << 20)?;
        status(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img))?;
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point)?;
        status(
            Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&point),
        )?;
        Ok(Mounted { _dir: dir, point })
    }

    /// The loop device's number as the block tracepoints give it.
    fn trace_dev(&self) -> anyhow::Result<u64> {
        let out = crate::util::output(
            Command::new("findmnt")
                .args(["-no", "MAJ:MIN"])
                .arg(&self.point),
        )?;
        let (a, b) = out.trim().split_once(':').context("findmnt MAJ:MIN")?;
        Ok((a.parse::<u64>()? << 20) | b.parse::<u64>()?)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.point).status();
    }
}

/// The managed server under `dir`: its pid and redo log fd, once both are
/// there.
fn server_under(dir: &Path, limit: Duration) -> anyhow::Result<(u32, u32)> {
    let start = Instant::now();
    while start.elapsed() < limit {
        for e in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) else {
                continue;
            };
            if !cwd.starts_with(dir) {
                continue;
            }
            for fd in std::fs::read_dir(e.path().join("fd"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let target = std::fs::read_link(fd.path()).unwrap_or_default();
                if target
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("ib_logfile"))
                {
                    let n = fd.file_name().to_string_lossy().parse()?;
                    return Ok((pid, n));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("no server with a redo log appeared under {}", dir.display())
}

/// biolatency's accounting on device `dev`, all requests and the ones of
/// the redo syncs of `pid` on fd `fd`.
fn peer_script(pid: u32, fd: u32, dev: u64) -> String {
    format!(
        r#"tracepoint:syscalls:sys_enter_fdatasync, tracepoint:syscalls:sys_enter_fsync /pid == {pid} && args->fd == {fd}/ {{ @insync[tid] = 1; @inflight = @inflight + 1; }}
tracepoint:syscalls:sys_exit_fdatasync, tracepoint:syscalls:sys_exit_fsync /@insync[tid]/ {{ delete(@insync[tid]); @inflight = @inflight - 1; }}
tracepoint:block:block_bio_queue /args->dev == {dev} && @inflight > 0 && (@insync[tid] || strncmp(comm, "jbd2/", 5) == 0)/ {{ @tag[args->sector] = 1; }}
tracepoint:block:block_rq_issue /args->dev == {dev}/ {{
  if (args->bytes == 0) {{ @allf = nsecs; if (@inflight > 0) {{ @fl = nsecs; }} }}
  else {{ @all[args->sector] = nsecs; if (@tag[args->sector]) {{ @st[args->sector] = nsecs; delete(@tag[args->sector]); }} }}
}}
tracepoint:block:block_rq_complete /args->dev == {dev}/ {{
  if (args->nr_sector == 0) {{
    if (@allf) {{ @dev_ns = sum(nsecs - @allf); @dev_n = count(); @allf = 0; }}
    if (@fl) {{ @attr_ns = sum(nsecs - @fl); @attr_n = count(); @fl = 0; }}
  }} else {{
    if (@all[args->sector]) {{ @dev_ns = sum(nsecs - @all[args->sector]); @dev_n = count(); delete(@all[args->sector]); }}
    if (@st[args->sector]) {{ @attr_ns = sum(nsecs - @st[args->sector]); @attr_n = count(); delete(@st[args->sector]); }}
  }}
}}
END {{ clear(@insync); clear(@tag); clear(@all); clear(@st); delete(@allf); delete(@fl); delete(@inflight); }}
"#
    )
}

/// `@name: N` lines of bpftrace's exit output.
fn peer_totals(text: &str) -> impl Fn(&str) -> Option<f64> + '_ {
    move |name| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(": ")?;
            (k.trim() == format!("@{name}")).then(|| v.trim().parse().ok())?
        })
    }
}

/// Runs the comparison `runs` times.
pub fn io(bin: &Path, threads: u32, seconds: u32, runs: u32) -> anyhow::Result<()> {
    println!("run  attributed: ours_us  peer_us  ratio   (requests ours/peer)   whole device: ours_us  peer_us  ratio");
    let mut worst: f64 = 0.0;
    for run in 1..=runs {
        let m = Mounted::ext4(1024)?;
        let dev = m.trace_dev()?;
        let mut main = Command::new(bin)
            .args([
                "--threads",
                &threads.to_string(),
                "--duration",
                &seconds.to_string(),
            ])
            .args(["--warmup", "0", "--json", "--io", "--workdir"])
            .arg(&m.point)
            .args(["--server-option", "innodb_flush_method=fsync"])
            .args(["--server-option", "innodb_log_file_buffering=ON"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("start the main command")?;
        // The peer runs inside our measured window: from the first
        // interval line to 3 s before the end (the server's shutdown
        // writes are in neither).
        let stdout = main.stdout.take().context("main command stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if l.contains("\"type\":\"tick\"") {
                    let _ = tx.send(());
                }
                all.push_str(&l);
                all.push('\n');
            }
            all
        });
        rx.recv_timeout(Duration::from_secs(120))
            .context("the main command printed no interval")?;
        // Only now: the datadir's bootstrap server has come and gone.
        let (pid, fd) = server_under(&m.point, Duration::from_secs(10))?;
        let mut peer = Command::new("bpftrace")
            .args(["-e", &peer_script(pid, fd, dev)])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("start bpftrace (cargo xtask setup installs it)")?;
        let started = Instant::now();
        let mut out = BufReader::new(peer.stdout.take().context("bpftrace stdout")?);
        let mut line = String::new();
        while out.read_line(&mut line)? > 0 && !line.starts_with("Attaching") {
            line.clear();
        }
        let window = Duration::from_secs(u64::from(seconds).saturating_sub(3).max(1));
        std::thread::sleep(window.saturating_sub(started.elapsed()));
        // SAFETY: signalling our own child; it prints its maps and exits.
        unsafe { libc::kill(peer.id() as i32, libc::SIGINT) };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest)?;
        peer.wait()?;
        let done = main.wait_with_output()?;
        let stdout = reader
            .join()
            .map_err(|_| anyhow::anyhow!("reader thread"))?;
        if !done.status.success() {
            bail!(
                "the main command: {}",
                String::from_utf8_lossy(&done.stderr).trim()
            );
        }
        let s: Value = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .context("no summary line")?;
        let io = &s["trace"]["io"];
        let f = |k: &str| io[k].as_f64().with_context(|| format!("no io.{k}: {io}"));
        let ours_n = f("requests")? + f("cache_flushes")?;
        let ours = f("device_us_per_sync")? * f("redo_syncs")? / ours_n;
        let ours_all = f("all_device_ns")? / 1000.0 / f("all_requests")?;
        let p = peer_totals(&rest);
        let need = |k: &str| p(k).with_context(|| format!("bpftrace printed no @{k}:\n{rest}"));
        let (peer_n, peer_all_n) = (need("attr_n")?, need("dev_n")?);
        let peer = need("attr_ns")? / 1000.0 / peer_n;
        let peer_all = need("dev_ns")? / 1000.0 / peer_all_n;
        let (r, r_all) = (ours / peer, ours_all / peer_all);
        worst = worst.max((r - 1.0).abs()).max((r_all - 1.0).abs());
        println!(
            "{run:>3}  {ours:>19.1}  {peer:>7.1}  {r:.3}   ({ours_n:.0}/{peer_n:.0}){:>14.1}  {peer_all:>7.1}  {r_all:.3}   ({:.0}/{peer_all_n:.0}; per s {:.0}/{:.0})",
            ours_all,
            f("all_requests")?,
            f("all_requests")? / s["trace"]["interval_s"].as_f64().unwrap_or(1.0),
            peer_all_n / started.elapsed().as_secs_f64()
        );
    }
    println!(
        "update workload, {threads} clients, {seconds} s per run, redo log buffered on ext4 on a loop device; mean device time per request, ours over bpftrace's: worst |ratio - 1| {:.3}: {}",
        worst,
        if worst <= 0.05 {
            "bar met (within 5 %)"
        } else {
            "bar missed (more than 5 % apart)"
        }
    );
    Ok(())
}
