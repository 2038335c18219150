//! The summary's commit-path block: the commits' time inside the server,
//! stage by stage in path order with the unattributed rest, beside the
//! clients' own latency.
use std::io::Write;

use super::fmt::opt_f;
use crate::commit_path::CommitPath;

/// Nothing without `--commit-path` or without a commit.
pub fn write(out: &mut impl Write, c: Option<&CommitPath>) {
    let Some(c) = c.filter(|c| c.commits > 0) else {
        return;
    };
    let client = match (c.client_p50_us, c.client_p99_us) {
        (Some(p50), Some(p99)) => format!(
            "; clients saw p50 {} us  p99 {} us",
            opt_f(Some(p50), 0),
            opt_f(Some(p99), 0)
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "commit path    {:>12}  commits in the server: mean {} us  p50 {} us  p99 {} us{client}",
        c.commits,
        opt_f(c.mean_us, 0),
        opt_f(c.p50_us, 0),
        opt_f(c.p99_us, 0),
    );
    for s in &c.stages {
        let _ = writeln!(
            out,
            "  {:<42} {:>5.1} %  {:>9} commits  mean {:>7} us  p50 {:>7}  p99 {:>7}",
            s.stage,
            s.share.unwrap_or(0.0) * 100.0,
            s.commits,
            opt_f(s.mean_us, 0),
            opt_f(s.p50_us, 0),
            opt_f(s.p99_us, 0),
        );
    }
    if c.lost > 0 {
        let _ = writeln!(
            out,
            "  {} commits not timed (another thread's open commit held their slot)",
            c.lost
        );
    }
}
