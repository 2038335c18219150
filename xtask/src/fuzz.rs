//! `cargo xtask fuzz [--seconds N] [TARGET ...]`: every cargo-fuzz target
//! in `fuzz/` (the readers of hostile input) for N seconds each, from the
//! seed corpora in `fuzz/seeds/<target>` plus what earlier runs found
//! (`fuzz/corpus/<target>`, not in git). A crash fails the task, naming
//! the input and the command that replays it; the input then belongs in
//! `fuzz/seeds/<target>` and its fix gets a regression test.
use std::{path::Path, process::Command};

use anyhow::{bail, Context};

use crate::util;

/// Every target, as `fuzz/Cargo.toml` lists them.
pub const TARGETS: &[&str] = &["elf", "dwarf", "mycnf", "server_option", "sweep_results"];

/// libFuzzer's options: a run over `seconds`; a slow input (a loop) fails
/// after 10 s; an allocation past 2 GiB fails (unbounded allocation);
/// the targets' own stdout/stderr (warnings they print) are closed.
fn libfuzzer_args(seconds: u64) -> Vec<String> {
    vec![
        format!("-max_total_time={seconds}"),
        "-timeout=10".into(),
        "-rss_limit_mb=2048".into(),
        "-malloc_limit_mb=2048".into(),
        "-close_fd_mask=3".into(),
    ]
}

/// One target's result, for the closing table.
struct Outcome {
    target: String,
    runs: u64,
    corpus: usize,
}

pub fn run(seconds: u64, only: &[String]) -> anyhow::Result<()> {
    let targets = pick(only)?;
    let build = Build::alone();
    util::status(&mut build_cmd(&build))?;
    run_built(seconds, &targets, &build, 1)
}

/// How the targets are built: where, under which sanitizer, optimized or
/// not.
pub struct Build<'a> {
    target_dir: Option<&'a Path>,
    /// AddressSanitizer (`cargo xtask fuzz`), or none (`cargo xtask
    /// test`): the readers are safe Rust, where it finds little, and it
    /// cost the suite's build 77 of its 505 CPU-s (428 without; figures
    /// from when the targets linked the whole tool).
    address_sanitizer: bool,
    /// Unoptimized, with debug assertions and overflow checks (`cargo
    /// xtask test`), or optimized as cargo-fuzz builds by default (`cargo
    /// xtask fuzz`). The suite's 10 s per target replay the seeds and
    /// search a little; the optimized build cost it 470 CPU-s of its
    /// about 2,600 (2 vCPUs, 22 min), the unoptimized one 320 (both when
    /// the targets linked the whole tool; 100 now), and it
    /// panics on an integer overflow where the optimized one wraps. The
    /// deep search (35k inputs a second on `elf` against 3-4k) is
    /// `cargo xtask fuzz`'s.
    dev: bool,
}

impl<'a> Build<'a> {
    /// `cargo xtask fuzz`: the fuzz directory's own target dir, ASan,
    /// optimized.
    pub fn alone() -> Build<'static> {
        Build {
            target_dir: None,
            address_sanitizer: true,
            dev: false,
        }
    }

    /// `cargo xtask test`'s: into `dir`, no sanitizer, unoptimized.
    pub fn suite(dir: &'a Path) -> Build<'a> {
        Build {
            target_dir: Some(dir),
            address_sanitizer: false,
            dev: true,
        }
    }

    /// cargo-fuzz's flags for this build, the same for `build` and `run`
    /// (or `run` would build again).
    fn flags(&self) -> Vec<&'static str> {
        let mut f = if self.dev {
            vec!["--dev"]
        } else {
            vec!["--codegen-units", "16"]
        };
        if !self.address_sanitizer {
            f.extend(["--sanitizer", "none"]);
        }
        f
    }
}

/// The targets named (all when none is), checked against [`TARGETS`].
pub fn pick(only: &[String]) -> anyhow::Result<Vec<&'static str>> {
    if only.is_empty() {
        return Ok(TARGETS.to_vec());
    }
    only.iter()
        .map(|t| {
            TARGETS
                .iter()
                .copied()
                .find(|x| x == t)
                .with_context(|| format!("no fuzz target {t:?}: pick from {}", TARGETS.join(", ")))
        })
        .collect()
}

/// `cargo +nightly fuzz SUB` in `fuzz/`, into `target_dir` when given.
/// The targets link the readers' crate alone (`readers/`): no eBPF
/// object, no async runtime, no MySQL client to build.
///
/// Sixteen codegen units, not cargo-fuzz's one: with one, the crate under
/// fuzz (then the whole tool) was the build's serial tail (337 s of wall
/// for 536 CPU-s here, against 261 s for 505 with sixteen), and a CI run
/// waited on it. The targets
/// then run 40 to 90 % as many inputs in the same seconds and reach more
/// edges (less inlined), measured on elf, dwarf and sweep_results. `run`
/// takes the same flag, or it would rebuild everything with one unit.
fn fuzz_cmd(sub: &str, build: &Build) -> Command {
    let mut c = Command::new("cargo");
    c.args(["+nightly", "fuzz", sub])
        .args(build.flags())
        .current_dir(util::root().join("fuzz"));
    if let Some(d) = build.target_dir {
        c.arg("--target-dir").arg(d);
    }
    // cargo-fuzz appends RUSTFLAGS to its own: the targets and build
    // scripts link with mold where setup installed it (see
    // `suite::build`), the same for `build` and `run`.
    if util::have_mold() {
        let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
        flags.push_str(" -Clink-arg=-fuse-ld=mold");
        c.env("RUSTFLAGS", flags.trim_start());
    }
    c
}

/// Builds every target (`cargo fuzz build`).
pub fn build_cmd(build: &Build) -> Command {
    fuzz_cmd("build", build)
}

/// Runs each of `targets`, built by [`build_cmd`] with `build`, for
/// `seconds`, `parallel` at a time (libFuzzer runs on one core), and
/// prints the closing table; the first failing input fails the task.
pub fn run_built(
    seconds: u64,
    targets: &[&'static str],
    build: &Build,
    parallel: usize,
) -> anyhow::Result<()> {
    let dir = util::root().join("fuzz");
    let mut outcomes = Vec::new();
    for chunk in targets.chunks(parallel.max(1)) {
        let running: Vec<_> = chunk
            .iter()
            .map(|&t| {
                let corpus = dir.join("corpus").join(t);
                std::fs::create_dir_all(&corpus)
                    .with_context(|| format!("{}", corpus.display()))?;
                let seeds = dir.join("seeds").join(t);
                eprintln!("xtask: fuzzing {t} for {seconds} s");
                let child = fuzz_cmd("run", build)
                    .arg(t)
                    .arg(&corpus)
                    .arg(&seeds)
                    .arg("--")
                    .args(libfuzzer_args(seconds))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .with_context(|| format!("cannot run cargo fuzz run {t}"))?;
                Ok((t, corpus, seeds, child))
            })
            .collect::<anyhow::Result<_>>()?;
        for (t, corpus, seeds, child) in running {
            let out = child.wait_with_output()?;
            let log = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                eprintln!("{}", tail.join("\n"));
                let artifact = artifact_of(&log).unwrap_or_else(|| "(see the log above)".into());
                bail!(
                    "fuzz target {t} found a failing input: {artifact}; replay it with `cd fuzz && cargo +nightly fuzz run {} {t} {artifact}`, fix it, add a regression test, and copy the input into fuzz/seeds/{t}/",
                    build.flags().join(" ")
                );
            }
            outcomes.push(Outcome {
                target: t.to_string(),
                runs: runs_of(&log).context("libFuzzer printed no `Done N runs` line")?,
                corpus: count(&corpus) + count(&seeds),
            });
        }
    }
    println!(
        "{:<14} {:>12} {:>8} {:>8}",
        "target", "executions", "seconds", "corpus"
    );
    for o in &outcomes {
        println!(
            "{:<14} {:>12} {:>8} {:>8}",
            o.target, o.runs, seconds, o.corpus
        );
    }
    let total: u64 = outcomes.iter().map(|o| o.runs).sum();
    println!("{} targets, {total} executions, 0 crashes", outcomes.len());
    Ok(())
}

/// libFuzzer's closing `Done 179785 runs in 21 second(s)`.
fn runs_of(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        l.strip_prefix("Done ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The input a failing run wrote: `Test unit written to PATH`.
fn artifact_of(log: &str) -> Option<String> {
    log.lines()
        .find_map(|l| Some(l.split_once("Test unit written to ")?.1.trim().to_string()))
}

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libfuzzer_output_is_read() {
        let log = "#1 INITED\nDone 179785 runs in 21 second(s)\n";
        assert_eq!(runs_of(log), Some(179785));
        let crash = "==1== ERROR: libFuzzer: deadly signal\nartifact_prefix='a/'; Test unit written to a/crash-3fd\nBase64: aW4=\n";
        assert_eq!(artifact_of(crash).as_deref(), Some("a/crash-3fd"));
        assert_eq!(runs_of(crash), None);
    }
}
