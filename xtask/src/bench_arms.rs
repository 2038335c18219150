//! The probe sets `bench overhead` alternates with untraced windows: ours
//! at each tier, the exporter as it runs by default, and a peer — the same
//! probes as our exact set written as a bpftrace script, so that what
//! trapping per commit costs anyone is measured beside what it costs us.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
};

use anyhow::{bail, Context};

use crate::{
    bench_exporter::Scraped,
    util::{start_trace, until_line},
};

/// One probe set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arm {
    /// `trace`, the main command's exact set: the write probe counts, the
    /// workload times the commits (with --anatomy: the return probe too).
    Trace,
    /// `trace --io`: the exact set plus the block tracepoints under the
    /// redo fsyncs (its bar: against `trace` in the same rounds).
    TraceIo,
    /// `trace --probes light`: per flush only, commits by the counter.
    Light,
    /// `trace --commit-path`: the exact set plus the commit function's
    /// entry and return and the redo write's return (opt-in: its cost is
    /// measured and said, not held to a bar).
    TraceCommitPath,
    /// `trace --commit-path --no-sched-split`: the commit path without the
    /// stages' scheduler split (what the split costs is the difference
    /// from `trace-commit-path` in the same run).
    TraceCommitPathNoSplit,
    /// `trace --commit-path --wakeups`: with the scheduler's wake-up and
    /// switch tracepoints.
    TraceCommitPathWakeups,
    /// The exporter as it runs by default: light probes, and exact
    /// windows for 1/30 of the time (10 s every 300 s there; 0.1 s every
    /// 3 s here, so each measured window holds one), scraped every second.
    Exporter,
    /// The exporter's light probes, scrapes and commit counter with no
    /// scheduled window (`--window-every 0`): what the windows add is the
    /// difference from `exporter` in the same run.
    ExporterNoWindows,
    /// The exporter inside one exact window, asked for by SIGUSR1 and open
    /// before the measured window begins. With `exporter-no-windows` in
    /// the same run it gives the default schedule's cost as it is spent:
    /// light for all but window/interval of the time, this for the rest
    /// (see [`composed`]).
    ExporterWindow,
    /// The exporter with `--probes exact`.
    ExporterExact,
    /// bpftrace with the probes of our exact set.
    Bpftrace,
}

/// The always-on tier's bar: its mean ratio at least this, over enough
/// pairs that the 95 % interval's half-width is at most
/// [`ALWAYS_ON_HALF_WIDTH`] (the light arms, and the exporter's default
/// schedule composed from its arms).
pub const ALWAYS_ON: f64 = 0.99;
pub const ALWAYS_ON_HALF_WIDTH: f64 = 0.015;

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::Trace => "trace (exact)",
            Arm::TraceIo => "trace --io",
            Arm::Light => "trace --probes light",
            Arm::TraceCommitPath => "trace --commit-path",
            Arm::TraceCommitPathNoSplit => "trace --commit-path --no-sched-split",
            Arm::TraceCommitPathWakeups => "trace --commit-path --wakeups",
            Arm::Exporter => "exporter (light + windows)",
            Arm::ExporterNoWindows => "exporter --window-every 0",
            Arm::ExporterWindow => "exporter in an exact window",
            Arm::ExporterExact => "exporter --probes exact",
            Arm::Bpftrace => "bpftrace (our exact set)",
        }
    }

    /// The bar its mean ratio is held to (None: [`Arm::why_no_bar`]).
    pub fn bar(self, anatomy: bool) -> Option<f64> {
        match self {
            Arm::Trace if anatomy => Some(0.95),
            Arm::Trace | Arm::ExporterExact => Some(0.98),
            Arm::Light | Arm::Exporter | Arm::ExporterNoWindows => Some(ALWAYS_ON),
            Arm::Bpftrace
            | Arm::TraceIo
            | Arm::ExporterWindow
            | Arm::TraceCommitPath
            | Arm::TraceCommitPathNoSplit
            | Arm::TraceCommitPathWakeups => None,
        }
    }

    /// Said in place of a bar where [`Arm::bar`] has none.
    pub fn why_no_bar(self) -> &'static str {
        match self {
            Arm::Bpftrace => "the peer: no bar",
            Arm::TraceIo => "its bar is on its ratio over trace's, below",
            Arm::TraceCommitPath | Arm::TraceCommitPathNoSplit | Arm::TraceCommitPathWakeups => {
                "opt-in: its cost is said, not held to a bar"
            }
            Arm::ExporterWindow => {
                "a part of the default schedule: its bar is on the composition, below"
            }
            _ => "no bar",
        }
    }
}

/// An arm's probes while attached.
pub enum Attached {
    Ours(Scraped),
    Peer(Child),
}

impl Attached {
    /// The process holding the probes (its BPF programs).
    pub fn pid(&self) -> u32 {
        match self {
            Attached::Ours(s) => s.pid(),
            Attached::Peer(c) => c.id(),
        }
    }

    /// Detaches and waits.
    pub fn stop(self) -> anyhow::Result<()> {
        match self {
            Attached::Ours(s) => s.stop(),
            Attached::Peer(mut c) => {
                // SAFETY: signalling our own child; it prints its maps.
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                c.wait()?;
                Ok(())
            }
        }
    }
}

/// Attaches `arm` to the server `pid` running `bin`.
pub fn attach(
    arm: Arm,
    cs: &Path,
    bin: &Path,
    pid: u32,
    anatomy: bool,
) -> anyhow::Result<Attached> {
    let trace = |args: &[&str]| -> anyhow::Result<Attached> {
        Ok(Attached::Ours(Scraped::trace(start_trace(
            cs,
            pid,
            args,
            Stdio::null(),
        )?)))
    };
    match arm {
        Arm::Trace if anatomy => trace(&["--json"]),
        Arm::Trace => trace(&["--json", "--no-write-timing"]),
        Arm::TraceIo => trace(&["--json", "--no-write-timing", "--io"]),
        Arm::Light => trace(&["--json", "--probes", "light"]),
        Arm::TraceCommitPath => trace(&["--json", "--commit-path"]),
        Arm::TraceCommitPathNoSplit => trace(&["--json", "--commit-path", "--no-sched-split"]),
        Arm::TraceCommitPathWakeups => trace(&["--json", "--commit-path", "--wakeups"]),
        Arm::Exporter => Ok(Attached::Ours(Scraped::start(
            cs,
            pid,
            &["--window", "0.1", "--window-every", "3"],
        )?)),
        Arm::ExporterNoWindows => Ok(Attached::Ours(Scraped::start(
            cs,
            pid,
            &["--window-every", "0"],
        )?)),
        Arm::ExporterWindow => {
            // Longer than any measured window: it is open throughout.
            let s = Scraped::start(cs, pid, &["--window", "600", "--window-every", "0"])?;
            s.open_window_now()?;
            Ok(Attached::Ours(s))
        }
        Arm::ExporterExact => Ok(Attached::Ours(Scraped::start(
            cs,
            pid,
            &["--probes", "exact"],
        )?)),
        Arm::Bpftrace => peer(&bpftrace_script(cs, bin, pid, anatomy)?),
    }
}

/// The exporter's default schedule: (window, interval) in seconds, as its
/// `--help` says (so the composition follows the defaults if they move).
pub fn default_schedule(cs: &Path) -> anyhow::Result<(f64, f64)> {
    schedule_in_help(&crate::util::output(
        Command::new(cs).args(["exporter", "--help"]),
    )?)
}

/// (window, interval) from the `[default: N]` under each flag in `help`.
fn schedule_in_help(help: &str) -> anyhow::Result<(f64, f64)> {
    let default_of = |flag: &str| -> anyhow::Result<f64> {
        let mut lines = help.lines().skip_while(|l| l.trim_start() != flag).skip(1);
        lines
            .find_map(|l| l.trim().strip_prefix("[default: ")?.strip_suffix(']'))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no default for {flag} in `commitscope exporter --help`"))
    };
    Ok((
        default_of("--window <SECONDS>")?,
        default_of("--window-every <SECONDS>")?,
    ))
}

/// The default schedule's ratio in one round, from the same round's light
/// ratio (`no_windows`) and in-window ratio (`in_window`): the exporter
/// spends `duty` = window / interval of its time in windows. The attach
/// and detach lie outside both measured windows; at the default's one of
/// each per interval they are left out (the `exporter` arm, with 0.1-s
/// windows every 3 s, puts one of each in every measured window: its
/// ratio bounds them from above).
pub fn composed(no_windows: f64, in_window: f64, duty: f64) -> f64 {
    (1.0 - duty) * no_windows + duty * in_window
}

/// Starts bpftrace on `script` and waits until its probes are attached.
fn peer(script: &str) -> anyhow::Result<Attached> {
    let mut child = Command::new("bpftrace")
        .args(["-B", "line", "-e", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start bpftrace (cargo xtask setup installs it)")?;
    let out = child.stdout.take().context("stdout")?;
    // Its maps at exit are of no interest here: drained, not shown.
    if !until_line(out, false, |l| l.starts_with("Attaching")) {
        bail!("bpftrace did not attach its probes:\n{script}");
    }
    Ok(Attached::Peer(child))
}

/// Our exact set on this kernel, as bpftrace: the write function (entry;
/// with `anatomy` its return too), the redo flush function (entry and
/// return, timed), fsync/fdatasync entry and exit per fd and timed, and
/// the write syscalls per fd — syscall tracepoints, as ours on a kernel
/// without fentry or kprobes. The places come from `commitscope probes`.
pub fn bpftrace_script(cs: &Path, bin: &Path, pid: u32, anatomy: bool) -> anyhow::Result<String> {
    let out = Command::new(cs)
        .args(["probes", "--json", "--mysqld"])
        .arg(bin)
        .output()?;
    if !out.status.success() {
        bail!(
            "commitscope probes: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut s = String::new();
    let e = bin.display();
    for p in v["points"].as_array().into_iter().flatten() {
        let sym = p["symbol"].as_str().context("a point without a symbol")?;
        if p["offset"].is_null() {
            bail!("{sym} exists only inlined here: bpftrace cannot probe it by name");
        }
        match p["role"].as_str() {
            Some("write") => {
                s.push_str(&format!(
                    "uprobe:{e}:{sym} /pid == {pid}/ {{ @w = count(); @ws[tid] = nsecs; }}\n"
                ));
                if anatomy {
                    s.push_str(&format!(
                        "uretprobe:{e}:{sym} /pid == {pid} && @ws[tid]/ {{ @wait = hist(nsecs - @ws[tid]); delete(@ws[tid]); }}\n"
                    ));
                }
            }
            Some("flush") => s.push_str(&format!(
                "uprobe:{e}:{sym} /pid == {pid}/ {{ @f = count(); @fs[tid] = nsecs; }}\n\
                 uretprobe:{e}:{sym} /pid == {pid} && @fs[tid]/ {{ @flush = hist(nsecs - @fs[tid]); delete(@fs[tid]); }}\n"
            )),
            _ => {}
        }
    }
    if !anatomy {
        // Entry only: the timestamp is never read.
        s = s.replace(" @ws[tid] = nsecs;", "");
    }
    s.push_str(&format!(
        "tracepoint:syscalls:sys_enter_fsync, tracepoint:syscalls:sys_enter_fdatasync /pid == {pid}/ {{ @ss[tid] = nsecs; @sfd[tid] = args->fd; }}\n\
         tracepoint:syscalls:sys_exit_fsync, tracepoint:syscalls:sys_exit_fdatasync /pid == {pid} && @ss[tid]/ {{ @syncs[@sfd[tid]] = count(); @sync[@sfd[tid]] = hist(nsecs - @ss[tid]); delete(@ss[tid]); delete(@sfd[tid]); }}\n\
         tracepoint:syscalls:sys_enter_write, tracepoint:syscalls:sys_enter_pwrite64 /pid == {pid}/ {{ @writes[args->fd] = count(); @bytes[args->fd] = sum(args->count); }}\n\
         tracepoint:syscalls:sys_enter_pwritev, tracepoint:syscalls:sys_enter_pwritev2 /pid == {pid}/ {{ @writes[args->fd] = count(); }}\n"
    ));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_read_under_each_flag() {
        let help = "      --window <SECONDS>\n          Light tier: seconds each window lasts\n\n          [default: 10]\n\n      --window-every <SECONDS>\n          Light tier: from one window to the next\n\n          [default: 300]\n";
        assert_eq!(schedule_in_help(help).unwrap(), (10.0, 300.0));
        let e = schedule_in_help("      --window <SECONDS>\n          [default: 10]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--window-every"), "{e}");
    }

    #[test]
    fn the_composition_weighs_the_window_by_its_duty() {
        assert!((composed(1.0, 0.9, 1.0 / 30.0) - (1.0 - 0.1 / 30.0)).abs() < 1e-12);
        assert_eq!(composed(0.99, 0.5, 0.0), 0.99);
    }
}
