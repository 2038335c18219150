//! `cargo xtask test`'s bookkeeping: run each stage to the end and name
//! every failure in one summary, instead of stopping at the first red
//! test binary (which hid every test after it on a fresh machine); and
//! where the time went, stage by stage and binary by binary, so anyone
//! can see what to cut next.
use std::time::{Duration, Instant};

use crate::{cpustat::CpuTimes, suite::Ran};

/// What failed so far, in the order it happened.
#[derive(Default)]
pub struct Failures(Vec<String>);

impl Failures {
    /// Records a stage that failed (its error, in one line).
    pub fn stage(&mut self, name: &str, r: anyhow::Result<()>) {
        if let Err(e) = r {
            eprintln!("xtask: {name} failed: {e:#}");
            self.0.push(format!("{name}: {e:#}"));
        }
    }

    /// Records the failed tests of a test binary's run (its output read
    /// as cargo's), or the binary itself when it failed without naming
    /// one (a crash, an abort).
    pub fn binary(&mut self, ran: &Ran) {
        let mut r = FailureReader {
            binary: ran.binary.name.clone(),
            ..Default::default()
        };
        for l in ran.output.lines() {
            r.line(l);
        }
        if !ran.ok && r.failures.is_empty() {
            r.failures.push(format!(
                "{} ({}): died before its summary",
                ran.binary.name, ran.binary.rerun
            ));
        }
        // Each failed test with the first line of its panic: a CI log
        // shown by its ends still says why.
        self.0.extend(r.failures.iter().map(|f| {
            let test = f.rsplit("::").next().unwrap_or(f);
            match r.reasons.iter().find(|(t, _)| t == test) {
                Some((_, why)) => format!("{f}: {why}"),
                None => f.clone(),
            }
        }));
    }

    /// The summary: nothing when all passed, else every failure and an
    /// error (so the exit is non-zero).
    pub fn finish(self) -> anyhow::Result<()> {
        if self.0.is_empty() {
            eprintln!("xtask: test: every stage passed");
            return Ok(());
        }
        eprintln!("xtask: test: {} failure(s):", self.0.len());
        for f in &self.0 {
            eprintln!("  {f}");
        }
        anyhow::bail!("{} failure(s), listed above", self.0.len())
    }
}

/// Each stage's wall time (and how busy the CPUs were meanwhile) and
/// each test binary's, printed slowest first at the end of the run.
pub struct Timings {
    started: Instant,
    stages: Vec<(String, Duration, Option<f64>)>,
    binaries: Vec<(String, Duration, u64)>,
    /// Each test that took a lane: (binary, lane, test, waited, held).
    lanes: Vec<LaneUse>,
}

/// One test's lane, as its binary reported it (`testkit::lane`).
#[derive(Clone, Debug, PartialEq)]
pub struct LaneUse {
    pub binary: String,
    pub kind: String,
    pub test: String,
    pub waited_s: f64,
    pub held_s: f64,
}

/// The lane report lines of a binary's output: `testkit-lane: shared
/// name waited 1.0 s, held 12.3 s`.
pub fn lane_uses(binary: &str, output: &str) -> Vec<LaneUse> {
    output
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(testkit::lane::REPORT)?;
            let w: Vec<&str> = rest.split_whitespace().collect();
            let [kind, test, "waited", waited, "s,", "held", held, "s"] = w[..] else {
                return None;
            };
            Some(LaneUse {
                binary: binary.to_string(),
                kind: kind.to_string(),
                test: test.to_string(),
                waited_s: waited.parse().ok()?,
                held_s: held.parse().ok()?,
            })
        })
        .collect()
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            started: Instant::now(),
            stages: Vec::new(),
            binaries: Vec::new(),
            lanes: Vec::new(),
        }
    }
}

/// The tests a binary ran, from its `test result:` line.
pub fn tests_in(output: &str) -> u64 {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("test result: "))
        .flat_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.windows(2)
                .filter(|p| p[1].starts_with("passed") || p[1].starts_with("failed"))
                .filter_map(|p| p[0].parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

impl Timings {
    /// Runs `f` as the stage `name`, timed.
    pub fn stage<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let (t0, c0) = (Instant::now(), CpuTimes::now());
        let r = f();
        let busy = c0.zip(CpuTimes::now()).and_then(|(a, b)| {
            let (busy, idle) = (b.busy - a.busy, b.idle - a.idle);
            (busy + idle > 0).then(|| busy as f64 / (busy + idle) as f64)
        });
        self.stages.push((name.to_string(), t0.elapsed(), busy));
        r
    }

    pub fn binary(&mut self, ran: &Ran) {
        self.binaries
            .push((ran.binary.label(), ran.wall, tests_in(&ran.output)));
        self.lanes.extend(lane_uses(&ran.binary.name, &ran.output));
    }

    /// The table: the binaries slowest first, the lanes' longest tests,
    /// then the stages in order (last: what a log's tail shows first).
    pub fn print(&self) {
        let mut o = String::from("xtask: where the time went (wall)\n");
        let total = self.started.elapsed().as_secs_f64();
        let mut bins = self.binaries.clone();
        bins.sort_by_key(|b| std::cmp::Reverse(b.1));
        o.push_str(&format!(
            "  {:<48} {:>8} {:>6}\n",
            "test binary (side by side)", "seconds", "tests"
        ));
        for (name, d, n) in &bins {
            o.push_str(&format!("  {name:<48} {:>8.1} {n:>6}\n", d.as_secs_f64()));
        }
        let mut lanes = self.lanes.clone();
        lanes.sort_by(|a, b| b.held_s.total_cmp(&a.held_s));
        for kind in ["alone", "shared"] {
            let of: Vec<&LaneUse> = lanes.iter().filter(|l| l.kind == kind).collect();
            let sum: f64 = of.iter().map(|l| l.held_s).sum();
            o.push_str(&format!(
                "  tests in the {kind} lane: {}, {sum:.0} s held in all; the longest:\n",
                of.len()
            ));
            for l in of.iter().take(12) {
                o.push_str(&format!(
                    "    {:<62} {:>6.1} s (waited {:.0} s)\n",
                    format!("{}::{}", l.binary, l.test),
                    l.held_s,
                    l.waited_s
                ));
            }
        }
        o.push_str(&format!(
            "  {:<48} {:>8} {:>6}\n",
            "stage", "seconds", "cpu"
        ));
        for (name, d, busy) in &self.stages {
            let busy = busy.map_or("-".to_string(), |b| format!("{:.0} %", b * 100.0));
            o.push_str(&format!(
                "  {name:<48} {:>8.1} {busy:>6}\n",
                d.as_secs_f64()
            ));
        }
        o.push_str(&format!("  {:<48} {total:>8.1}\n", "whole run"));
        print!("{o}");
        self.write_lanes();
    }

    /// Every test's lane, longest first, tab-separated in
    /// `target/test-lanes.tsv`: the table shows twelve per lane, and
    /// cutting the suite's time needs them all.
    fn write_lanes(&self) {
        let mut lanes = self.lanes.clone();
        lanes.sort_by(|a, b| b.held_s.total_cmp(&a.held_s));
        let mut t = String::from("kind\theld_s\twaited_s\ttest\n");
        for l in &lanes {
            t.push_str(&format!(
                "{}\t{:.1}\t{:.1}\t{}::{}\n",
                l.kind, l.held_s, l.waited_s, l.binary, l.test
            ));
        }
        let path = crate::util::root().join("target/test-lanes.tsv");
        match std::fs::write(&path, t) {
            Ok(()) => println!("  every test's lane: {}", path.display()),
            Err(e) => eprintln!("xtask: cannot write {}: {e}", path.display()),
        }
    }
}

/// Reads `cargo test` output line by line.
#[derive(Default)]
struct FailureReader {
    /// The test binary running now (`tests/debuginfod.rs`, `src/lib.rs`).
    binary: String,
    failures: Vec<String>,
    /// The test whose captured output is being read (`---- t stdout ----`),
    /// and whether its panic's message comes next.
    reading: Option<String>,
    message_next: bool,
    /// (test, its panic's first line, cut to 300 characters).
    reasons: Vec<(String, String)>,
}

impl FailureReader {
    fn line(&mut self, line: &str) {
        if self.message_next {
            self.message_next = false;
            if let Some(t) = self.reading.take() {
                let why: String = line.trim().chars().take(300).collect();
                self.reasons.push((t, why));
            }
        }
        let l = line.trim();
        if let Some(t) = l
            .strip_prefix("---- ")
            .and_then(|r| r.strip_suffix(" stdout ----"))
        {
            self.reading = Some(t.to_string());
        } else if self.reading.is_some() && l.starts_with("thread '") && l.contains(" panicked at ")
        {
            self.message_next = true;
        }
        // "Running tests/debuginfod.rs (target/debug/deps/debuginfod-…)"
        if let Some(rest) = l.strip_prefix("Running ") {
            self.binary = rest.split(" (").next().unwrap_or(rest).to_string();
        } else if let Some(name) = l
            .strip_prefix("test ")
            .and_then(|r| r.strip_suffix(" ... FAILED"))
        {
            self.failures.push(format!("{}::{name}", self.binary));
        } else if let Some(target) = l
            .strip_prefix("error: test failed, to rerun pass `")
            .and_then(|r| r.strip_suffix('`'))
        {
            // A binary that died without a FAILED line (a crash or abort).
            let named = self
                .failures
                .iter()
                .any(|f| f.starts_with(&format!("{}::", self.binary)));
            if !named {
                self.failures.push(format!(
                    "{} ({target}): died before its summary",
                    self.binary
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_reports_are_read() {
        let out =
            "test a ... ok\ntestkit-lane: alone study_runs waited 3.5 s, held 21.0 s\nnoise\n";
        assert_eq!(
            lane_uses("tests/m.rs", out),
            [LaneUse {
                binary: "tests/m.rs".into(),
                kind: "alone".into(),
                test: "study_runs".into(),
                waited_s: 3.5,
                held_s: 21.0,
            }]
        );
    }

    #[test]
    fn failures_are_named_with_their_binary() {
        let mut r = FailureReader::default();
        for l in [
            "     Running tests/anatomy.rs (target/debug/deps/anatomy-1)",
            "test ok_one ... ok",
            "     Running tests/debuginfod.rs (target/debug/deps/debuginfod-2)",
            "test fetches_by_build_id_from_a_real_debuginfod ... FAILED",
            "test other ... ok",
            "error: test failed, to rerun pass `-p commitscope --test debuginfod`",
            "     Running tests/faults.rs (target/debug/deps/faults-3)",
            "error: test failed, to rerun pass `-p commitscope --test faults`",
        ] {
            r.line(l);
        }
        assert_eq!(
            r.failures,
            [
                "tests/debuginfod.rs::fetches_by_build_id_from_a_real_debuginfod",
                "tests/faults.rs (-p commitscope --test faults): died before its summary",
            ]
        );
    }

    #[test]
    fn a_failures_reason_is_its_panics_first_line() {
        let mut r = FailureReader::default();
        for l in [
            "test light_counts ... FAILED",
            "failures:",
            "---- light_counts stdout ----",
            "",
            "thread 'light_counts' (15659) panicked at tracer/tests/tiers.rs:83:49:",
            "commitscope_status_commits_total: content-type: text/plain",
            "more of the message",
        ] {
            r.line(l);
        }
        assert_eq!(
            r.reasons,
            [(
                "light_counts".to_string(),
                "commitscope_status_commits_total: content-type: text/plain".to_string()
            )]
        );
    }
}
