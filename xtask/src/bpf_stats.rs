//! The kernel's own count of the time BPF programs ran
//! (`kernel.bpf_stats_enabled`), per process that holds them, for `bench
//! overhead --bpf-time`. A tps ratio on a 2-vCPU VM moves by several
//! percent from one window to the next; what a probe set adds *inside*
//! its programs (the scheduler split's reads of the thread's accounting,
//! which adds no trap) is measured exactly here, per commit, and set
//! against a commit's CPU time.
use anyhow::Context;

const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// The kernel's BPF run-time accounting on while this lives; as it was
/// after (it costs two clock reads per program run).
pub struct Enabled {
    was: String,
}

impl Enabled {
    pub fn on() -> anyhow::Result<Enabled> {
        let was = std::fs::read_to_string(SYSCTL).with_context(|| format!("read {SYSCTL}"))?;
        std::fs::write(SYSCTL, "1").with_context(|| format!("write {SYSCTL} (root?)"))?;
        Ok(Enabled {
            was: was.trim().to_string(),
        })
    }
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.was);
    }
}

/// Run time and runs of every BPF program process `pid` holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunTime {
    pub ns: u64,
    pub runs: u64,
}

impl RunTime {
    pub fn since(self, earlier: RunTime) -> RunTime {
        RunTime {
            ns: self.ns.saturating_sub(earlier.ns),
            runs: self.runs.saturating_sub(earlier.runs),
        }
    }
}

/// The programs process `pid` holds, from its BPF program fds' `fdinfo`
/// (`run_time_ns`, `run_cnt`; Debian's bpftool cannot say which process
/// holds a program). An error when it holds none: a run time of 0 would
/// read as a free probe set.
pub fn of_pid(pid: u32) -> anyhow::Result<RunTime> {
    let dir = format!("/proc/{pid}/fd");
    let mut seen = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(&dir)
        .with_context(|| dir.clone())?
        .flatten()
    {
        let is_prog =
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("bpf-prog"));
        if !is_prog {
            continue;
        }
        let info = format!("/proc/{pid}/fdinfo/{}", e.file_name().to_string_lossy());
        if let Ok(text) = std::fs::read_to_string(&info) {
            if let Some((id, t)) = parse_fdinfo(&text) {
                seen.insert(id, t);
            }
        }
    }
    anyhow::ensure!(!seen.is_empty(), "process {pid} holds no BPF program");
    Ok(seen.values().fold(RunTime::default(), |a, t| RunTime {
        ns: a.ns + t.ns,
        runs: a.runs + t.runs,
    }))
}

/// A program fd's `fdinfo`: its id, run time and runs.
fn parse_fdinfo(text: &str) -> Option<(u64, RunTime)> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().parse::<u64>().ok())?
        })
    };
    Some((
        field("prog_id")?,
        RunTime {
            ns: field("run_time_ns").unwrap_or(0),
            runs: field("run_cnt").unwrap_or(0),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_fds_fdinfo_gives_its_id_and_run_time() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t2\nprog_id:\t45529\nrun_time_ns:\t27027634\nrun_cnt:\t13806\n";
        assert_eq!(
            parse_fdinfo(text),
            Some((
                45529,
                RunTime {
                    ns: 27027634,
                    runs: 13806
                }
            ))
        );
        // Without the kernel's accounting: no run time, not a failure.
        assert_eq!(parse_fdinfo("prog_id:\t7\n"), Some((7, RunTime::default())));
        assert_eq!(parse_fdinfo("pos:\t0\n"), None);
    }
}
