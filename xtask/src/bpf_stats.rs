//! The kernel's own count of the time BPF programs ran
//! (`kernel.bpf_stats_enabled`), per process that holds them, for `bench
//! overhead --bpf-time`. A tps ratio on a 2-vCPU VM moves by several
//! percent from one window to the next; what a probe set adds *inside*
//! its programs (the scheduler split's reads of the thread's accounting,
//! which adds no trap) is measured exactly here, per commit, and set
//! against a commit's CPU time.
use std::process::Command;

use anyhow::Context;
use serde_json::Value;

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

/// The programs of `pid`, from `bpftool prog show --json`.
pub fn of_pid(pid: u32) -> anyhow::Result<RunTime> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .context("bpftool (cargo xtask setup installs it)")?;
    anyhow::ensure!(out.status.success(), "bpftool prog show failed");
    let v: Value = serde_json::from_slice(&out.stdout).context("bpftool's JSON")?;
    Ok(sum_for(&v, pid))
}

fn sum_for(v: &Value, pid: u32) -> RunTime {
    let mut t = RunTime::default();
    for p in v.as_array().into_iter().flatten() {
        let held = p["pids"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["pid"].as_u64() == Some(u64::from(pid)));
        if held {
            t.ns += p["run_time_ns"].as_u64().unwrap_or(0);
            t.runs += p["run_cnt"].as_u64().unwrap_or(0);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_programs_the_process_holds_are_summed() {
        let v: Value = serde_json::from_str(
            r#"[{"id":1,"run_time_ns":100,"run_cnt":4,"pids":[{"pid":7,"comm":"commitscope"}]},
                {"id":2,"run_time_ns":50,"run_cnt":1,"pids":[{"pid":7,"comm":"commitscope"},{"pid":9,"comm":"x"}]},
                {"id":3,"run_time_ns":999,"run_cnt":9,"pids":[{"pid":9,"comm":"systemd"}]},
                {"id":4,"pids":[{"pid":7,"comm":"commitscope"}]}]"#,
        )
        .unwrap();
        assert_eq!(sum_for(&v, 7), RunTime { ns: 150, runs: 5 });
        assert_eq!(sum_for(&v, 8), RunTime::default());
    }
}
