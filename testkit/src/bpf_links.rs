//! The BPF probes a process holds, read from its `/proc/<pid>/fdinfo`: how
//! tests and benchmarks see what the tracer attached and detached, from the
//! kernel's side rather than the tracer's own word.

/// One perf-event probe a process holds, as its BPF link's fdinfo says:
/// its kind (uprobe, uretprobe, tracepoint, kprobe, ...) and where
/// (file+offset, or the tracepoint's or function's name).
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct PerfProbe {
    pub kind: String,
    pub at: String,
}

/// The perf-event BPF links process `pid` holds (kernel 6.6+ names their
/// event in `/proc/<pid>/fdinfo`).
pub fn perf_probes(pid: u32) -> Vec<PerfProbe> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let info = std::fs::read_to_string(e.path()).ok()?;
            let field = |k: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(k)?.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            };
            (field("link_type")? == "perf").then_some(())?;
            let kind = field("event_type").unwrap_or_else(|| "?".into());
            let name = field("name")
                .or_else(|| field("tp_name"))
                .or_else(|| field("func_name"))
                .unwrap_or_default();
            let at = match field("offset") {
                Some(off) if kind.starts_with("uprobe") || kind.starts_with("uretprobe") => {
                    format!("{name}+{off}")
                }
                _ => name,
            };
            Some(PerfProbe { kind, at })
        })
        .collect()
}
