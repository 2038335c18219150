//! `cargo xtask test`'s bookkeeping: run each stage to the end and name
//! every failure in one summary, instead of stopping at the first red
//! test binary (which hid every test after it on a fresh machine).
use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

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

    /// Runs `cargo ARGS` (a `cargo test`), echoing its output as it comes,
    /// and records each failed test as `<test binary>::<test>`, and each
    /// binary that failed without naming a test (a crash, a build error).
    pub fn cargo_tests(&mut self, args: &[&str]) {
        match run_and_read(args) {
            Ok((ok, failures)) => {
                if !ok && failures.is_empty() {
                    self.0.push(format!("cargo {}: failed", args.join(" ")));
                }
                self.0.extend(failures);
            }
            Err(e) => self.0.push(format!("cargo {}: {e:#}", args.join(" "))),
        }
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

/// Runs cargo with stderr merged into stdout (one ordered stream, so each
/// failed test is attributed to the binary whose `Running` line came
/// before it): (exit status ok, the failures read).
fn run_and_read(args: &[&str]) -> anyhow::Result<(bool, Vec<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(&cargo)
        .args(args)
        .current_dir(crate::util::root())
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().expect("piped");
    let mut reader = FailureReader::default();
    let stdout = std::io::stdout();
    for line in BufReader::new(out).lines() {
        let line = line?;
        {
            let mut o = stdout.lock();
            let _ = writeln!(o, "{line}");
        }
        reader.line(&line);
    }
    let st = child.wait()?;
    Ok((st.success(), reader.failures))
}

/// Reads `cargo test` output line by line.
#[derive(Default)]
struct FailureReader {
    /// The test binary running now (`tests/debuginfod.rs`, `src/lib.rs`).
    binary: String,
    failures: Vec<String>,
}

impl FailureReader {
    fn line(&mut self, line: &str) {
        let l = line.trim();
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
}
