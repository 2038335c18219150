//! Symbol lookup in a large debug file (issue 13's bar; the first line
//! with a debug file from the debuginfod cache is `bench_first_line`).
//!
//! No distribution's 300 MB MariaDB debug file can be downloaded here,
//! so the big file is the symbolized fixture's debug part
//! (`objcopy --only-keep-debug`: its real .symtab) padded with a
//! non-loaded section to the size asked: what must stay cheap is that
//! the rest of the file is never read.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{bail, Context};

use crate::util::{median, status};

/// Wall seconds and peak RSS (MiB) of one child, from its own rusage.
fn timed(cmd: &mut Command) -> anyhow::Result<(f64, f64, String)> {
    let t0 = Instant::now();
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pid = child.id() as libc::pid_t;
    let out = child.wait_with_output_rusage(pid)?;
    Ok((t0.elapsed().as_secs_f64(), out.1, out.0))
}

trait WaitRusage {
    fn wait_with_output_rusage(self, pid: libc::pid_t) -> anyhow::Result<(String, f64)>;
}

impl WaitRusage for std::process::Child {
    /// Reads stdout to its end, then reaps the child with wait4 for its
    /// own ru_maxrss (RUSAGE_CHILDREN would give the largest child yet).
    fn wait_with_output_rusage(mut self, pid: libc::pid_t) -> anyhow::Result<(String, f64)> {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut o) = self.stdout.take() {
            o.read_to_string(&mut text)?;
        }
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            e.read_to_string(&mut err)?;
        }
        let mut st = 0;
        // SAFETY: wait4 on our own child, into zeroed structs we own.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut st, 0, &mut ru) };
        if r != pid || !libc::WIFEXITED(st) || libc::WEXITSTATUS(st) != 0 {
            bail!("child {pid} failed (status {st}): {err}");
        }
        Ok((text, ru.ru_maxrss as f64 / 1024.0))
    }
}

/// The fixture's debug part padded to `mib` MiB, under a build-id tree in
/// `dir`, and the stripped binary it belongs to: (binary, debug root).
fn big_debug_file(dir: &Path, mib: u64) -> anyhow::Result<(PathBuf, PathBuf)> {
    let fix = testkit::symbols_fixture()
        .context("../shared/fixtures/mariadb-10.11.18-symbols is absent")?;
    let orig = fix.join("bin/mariadbd");
    let bin = dir.join("mariadbd");
    status(
        Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&bin)
            .arg(&orig),
    )?;
    let dbg = dir.join("part.debug");
    status(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&orig)
            .arg(&dbg),
    )?;
    let have = std::fs::metadata(&dbg)?.len();
    let pad = dir.join("pad");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&pad)?);
        let want = (mib << 20).saturating_sub(have);
        let chunk: Vec<u8> = (0..1 << 20)
            .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut left = want;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
    }
    let data = std::fs::read(&bin)?;
    let id = build_id_hex(&data).context("the fixture has no build-id")?;
    let root = dir.join("debug");
    let at = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&at)?;
    let big = at.join(format!("{}.debug", &id[2..]));
    status(
        Command::new("objcopy")
            .arg("--add-section")
            .arg(format!(".commitscope_pad={}", pad.display()))
            .args(["--set-section-flags", ".commitscope_pad=noload,readonly"])
            .arg(&dbg)
            .arg(&big),
    )?;
    std::fs::remove_file(&pad)?;
    std::fs::remove_file(&dbg)?;
    println!(
        "debug file: {} ({:.0} MiB: the fixture's .symtab and DWARF-less debug part, padded)",
        big.display(),
        std::fs::metadata(&big)?.len() as f64 / (1 << 20) as f64
    );
    Ok((bin, root))
}

pub fn build_id_hex(elf: &[u8]) -> Option<String> {
    // The GNU build-id note: namesz 4, type 3, name "GNU\0", then the id.
    let pat = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00";
    let at = elf.windows(pat.len()).position(|w| w == pat)? + pat.len();
    Some(
        elf.get(at..at + 20)?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// `cargo xtask bench symbols`: `commitscope probes` (the attach plan,
/// nothing attached) on the stripped binary whose symbols are in the big
/// debug file, against `nm` finding the same symbol in the same file.
pub fn symbols(cs: &Path, mib: u64, runs: u32) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("cs-bench-sym-")
        .tempdir_in("/var/tmp")?;
    let (bin, root) = big_debug_file(dir.path(), mib)?;
    let big = std::fs::read_dir(root.join(".build-id"))?
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .next()
        .context("no debug file")?;
    let (mut ours, mut peer, mut ours_rss, mut peer_rss) = (vec![], vec![], vec![], vec![]);
    for i in 1..=runs {
        let (s, rss, text) = timed(
            Command::new(cs)
                .args(["probes", "--json", "--no-debuginfod", "--mysqld"])
                .arg(&bin)
                .arg("--debug-dir")
                .arg(&root),
        )?;
        let v: serde_json::Value = serde_json::from_str(text.trim())?;
        if v["exact"] != true
            || !v["symbol_source"]
                .as_str()
                .unwrap_or("")
                .contains("build-id")
        {
            bail!("not resolved from the debug file: {text}");
        }
        let (ps, prss, ptext) = timed(Command::new("nm").arg("--defined-only").arg(&big))?;
        if !ptext.contains("_Z15log_write_up_tombPK19completion_callback") {
            bail!("nm did not find log_write_up_to");
        }
        println!(
            "run {i}: commitscope probes {s:.2} s, {rss:.0} MiB peak RSS   nm {ps:.2} s, {prss:.0} MiB"
        );
        ours.push(s);
        peer.push(ps);
        ours_rss.push(rss);
        peer_rss.push(prss);
    }
    let (o, p) = (median(ours), median(peer));
    let (or, pr) = (
        ours_rss.iter().cloned().fold(0.0, f64::max),
        peer_rss.iter().cloned().fold(0.0, f64::max),
    );
    println!(
        "median lookup: {o:.2} s (bar: <= 3 s), nm {p:.2} s, ratio {:.2}; peak RSS {or:.0} MiB (bar: <= 200 MiB), nm {pr:.0} MiB",
        o / p
    );
    Ok(())
}
