//! The summary's commit-path block: the commits' time inside the server,
//! stage by stage in path order with the unattributed rest, beside the
//! clients' own latency.
use std::io::Write;

use readers::commit_path::SchedSplit;

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
    if let Some(x) = &c.sched {
        let _ = writeln!(
            out,
            "  {:<42} of its mean: {}",
            "(the commit: on CPU / run queue / blocked)",
            split(x)
        );
    }
    for s in &c.stages {
        let _ = writeln!(
            out,
            "  {:<42} {:>5.1} %  {:>9} commits  mean {:>7} us  p50 {:>7}  p99 {:>7}{}",
            s.stage,
            s.share.unwrap_or(0.0) * 100.0,
            s.commits,
            opt_f(s.mean_us, 0),
            opt_f(s.p50_us, 0),
            opt_f(s.p99_us, 0),
            s.sched
                .as_ref()
                .map(|x| format!("  {}", split(x)))
                .unwrap_or_default(),
        );
    }
    if let Some(w) = &c.wakeups {
        let by: Vec<String> = w
            .by_waker
            .iter()
            .map(|b| format!("{} {}", b.waker, b.wakeups))
            .collect();
        let _ = writeln!(
            out,
            "  wake-ups: {} follower waits took {} wake-ups ({} per wait), {} wasted; wake to run p50 {} us  p99 {} us; from {}",
            w.waits,
            w.wakeups,
            opt_f(w.per_wait(), 1),
            w.wasted,
            opt_f(w.wake_to_run_p50_us, 0),
            opt_f(w.wake_to_run_p99_us, 0),
            if by.is_empty() { "-".to_string() } else { by.join(", ") },
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

/// `cpu 12 runq 480 blk 40 us`: a mean's split by the scheduler.
fn split(x: &SchedSplit) -> String {
    format!(
        "cpu {} runq {} blk {} us",
        opt_f(Some(x.on_cpu_us), 0),
        opt_f(Some(x.run_queue_us), 0),
        opt_f(Some(x.blocked_us), 0)
    )
}
