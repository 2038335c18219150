//! `cargo xtask samples`: the sample outputs in README.md and docs/ are
//! the tool's real output. Each is a fenced block after a marker
//! `<!-- sample: ARGS -->`; this reruns `commitscope ARGS` (the release
//! build, as root) and writes its output into the block in the block's
//! own shape: its `$` line, legend lines, header, as many rows as it had,
//! a `...` where it had one, and each other line replaced by the output's
//! line with the same label (its first words before a figure); a
//! summary's block, the output's lines from its first line's label to its
//! last's. In ARGS, `PID` is a throwaway server of the MariaDB build with
//! symbols under a load of 16 clients, `FIXTURE` that build's binary. The docs test checks every block's
//! header and row widths against the binary's, so a sample that drifts
//! fails the suite until this is rerun.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context};

use crate::util::root;

const MARK: &str = "<!-- sample: ";

const FIXTURE_MISSING: &str =
    "the MariaDB build with symbols (../shared/fixtures) is absent: the samples are of it";

/// One sample: where its block's lines are, and the arguments.
struct Sample {
    page: PathBuf,
    args: Vec<String>,
    /// Line indices of the block's body (between the fences).
    body: std::ops::Range<usize>,
}

/// Every marked block of the README and docs/.
fn samples() -> anyhow::Result<Vec<Sample>> {
    let mut out = Vec::new();
    for page in testkit::docs::pages(&root()) {
        let text = std::fs::read_to_string(&page)?;
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(args) = l.strip_prefix(MARK).and_then(|r| r.strip_suffix(" -->")) else {
                continue;
            };
            let open = i + 1;
            if !lines.get(open).is_some_and(|f| f.starts_with("```")) {
                bail!(
                    "{}:{}: a sample marker must sit right above its ``` block",
                    page.display(),
                    i + 1
                );
            }
            let close = (open + 1..lines.len())
                .find(|&k| lines[k].starts_with("```"))
                .with_context(|| format!("{}:{}: unclosed block", page.display(), open + 1))?;
            out.push(Sample {
                page: page.clone(),
                args: args.split_whitespace().map(String::from).collect(),
                body: open + 1..close,
            });
        }
    }
    Ok(out)
}

/// A line's label: its words before the first figure, at most two.
fn label(l: &str) -> String {
    l.split_whitespace()
        .take_while(|w| !w.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-'))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A live view's row: it begins with a clock.
fn is_row(l: &str) -> bool {
    l.as_bytes().get(2) == Some(&b':') && l.as_bytes().get(5) == Some(&b':')
}

/// The output's lines for a block (see the module's doc). A live view's
/// block keeps its shape: its `$` line, header, as many rows (from the
/// middle of the run), `...`, and each other line replaced by the
/// output's line of the same label. Any other block (a summary's) is the
/// output's lines from the one labelled as the block's first to the one
/// labelled as its last, so lines the tool has added since come too.
fn reshape(old: &[&str], new: &str) -> Vec<String> {
    let new: Vec<&str> = new.lines().map(str::trim_end).collect();
    let mut out: Vec<String> = old
        .iter()
        .take_while(|l| l.starts_with('$'))
        .map(|l| l.to_string())
        .collect();
    let old = &old[out.len()..];
    if !old.iter().any(|l| l.starts_with("time ")) {
        let (Some(first), Some(last)) = (old.first(), old.last()) else {
            return out;
        };
        let Some(a) = new.iter().position(|n| label(n) == label(first)) else {
            return old.iter().map(|l| l.to_string()).collect();
        };
        let b = new[a..]
            .iter()
            .position(|n| label(n) == label(last))
            .map_or(a, |k| a + k);
        out.extend(new[a..=b].iter().map(|l| l.to_string()));
        return out;
    }
    let rows: Vec<&str> = new.iter().copied().filter(|l| is_row(l)).collect();
    let mut next_row = rows.len() / 2;
    for l in old {
        if l.trim() == "..." {
            out.push(l.to_string());
        } else if l.starts_with("time ") {
            if let Some(h) = new.iter().find(|n| n.starts_with("time ")) {
                out.push(h.to_string());
            }
        } else if is_row(l) {
            if let Some(r) = rows.get(next_row) {
                out.push(r.to_string());
                next_row += 1;
            }
        } else if let Some(n) = new.iter().find(|n| !is_row(n) && label(n) == label(l)) {
            out.push(n.to_string());
        } else {
            out.push(l.to_string());
        }
    }
    out
}

/// A throwaway server with 16 clients of `update` on it until dropped.
struct Loaded {
    server: testkit::Server,
    load: std::process::Child,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = self.load.kill();
        let _ = self.load.wait();
        self.server.stop();
    }
}

fn loaded(cs: &Path) -> anyhow::Result<Loaded> {
    let fixture = testkit::symbols_fixture().context(FIXTURE_MISSING)?;
    let server = testkit::Server::start(
        &fixture.join("bin/mariadbd"),
        Some(&fixture.join("share")),
        &[],
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let load = Command::new(cs)
        .args(server.client_flags())
        .args(["--no-trace", "--threads", "16", "--database", "cs_samples"])
        .stdout(Stdio::null())
        .spawn()?;
    std::thread::sleep(std::time::Duration::from_secs(3));
    Ok(Loaded { server, load })
}

pub fn run() -> anyhow::Result<()> {
    crate::util::cargo(&["build", "--release", "-p", "commitscope"])?;
    let cs = root().join("target/release/commitscope");
    let all = samples()?;
    if all.is_empty() {
        bail!("no `{MARK}ARGS -->` markers in README.md or docs/");
    }
    // Last block first: a block that grows or shrinks moves the lines
    // below it, and the blocks above keep the lines they were found at.
    for s in all.iter().rev() {
        let load = match s.args.iter().any(|a| a == "PID") {
            true => Some(loaded(&cs)?),
            false => None,
        };
        let args: Vec<String> = s
            .args
            .iter()
            .map(|a| match (&load, a.as_str()) {
                (Some(l), "PID") => Ok(l.server.pid().to_string()),
                (_, "FIXTURE") => testkit::symbols_fixture()
                    .map(|f| f.join("bin/mariadbd").display().to_string())
                    .context(FIXTURE_MISSING),
                _ => Ok(a.clone()),
            })
            .collect::<anyhow::Result<_>>()?;
        eprintln!(
            "samples: {}: commitscope {}",
            s.page.display(),
            args.join(" ")
        );
        let out = Command::new(&cs)
            .args(&args)
            .stderr(Stdio::inherit())
            .output()?;
        drop(load);
        if !out.status.success() {
            bail!("commitscope {} exited {}", args.join(" "), out.status);
        }
        let text = std::fs::read_to_string(&s.page)?;
        let lines: Vec<&str> = text.lines().collect();
        let fresh = reshape(
            &lines[s.body.clone()],
            &String::from_utf8_lossy(&out.stdout),
        );
        let mut page: Vec<String> = lines[..s.body.start]
            .iter()
            .map(|l| l.to_string())
            .collect();
        page.extend(fresh);
        page.extend(lines[s.body.end..].iter().map(|l| l.to_string()));
        std::fs::write(&s.page, page.join("\n") + "\n")?;
    }
    eprintln!("samples: {} blocks regenerated", all.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_block_takes_the_lines_added_since() {
        let old = [
            "commit path  10 commits",
            "  redo write (leader)  5.0 %",
            "  unattributed  1.0 %",
        ];
        let new = "ticks\ncommit path  20 commits\n  (the commit: on CPU) 3\n  redo write (leader)  6.0 %\n  unattributed  2.0 %\nafter\n";
        assert_eq!(
            reshape(&old, new),
            [
                "commit path  20 commits",
                "  (the commit: on CPU) 3",
                "  redo write (leader)  6.0 %",
                "  unattributed  2.0 %",
            ]
        );
    }

    #[test]
    fn a_block_keeps_its_shape_with_the_new_lines() {
        let old = [
            "$ sudo commitscope --threads 100",
            "time  tps  n_write",
            "06:03:54  100.0  90",
            "...",
            "server counters over the same window:",
            "  Innodb_log_writes  1  ours  2",
        ];
        let new = "time  tps  n_write  p50_batch\n10:00:01  1.0  1  1\n10:00:02  2.0  2  2\n10:00:03  3.0  3  3\nserver counters over the same window:\n  Innodb_log_writes  7  ours  8\n";
        assert_eq!(
            reshape(&old, new),
            [
                "$ sudo commitscope --threads 100",
                "time  tps  n_write  p50_batch",
                "10:00:02  2.0  2  2",
                "...",
                "server counters over the same window:",
                "  Innodb_log_writes  7  ours  8",
            ]
        );
    }
}
