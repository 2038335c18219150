//! Drains the eBPF side's rare diagnostics (aya-log) to stderr. The kernel
//! programs only log on error paths (a full map), so polling the ring at
//! the fd-poll rate (10 Hz) keeps it from ever filling.
use log::{Level, Log, Metadata, Record};

/// Prints each record as `commitscope: ebpf: LEVEL: message`.
pub struct StderrLog;

impl Log for StderrLog {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= Level::Warn
    }

    fn log(&self, r: &Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!(
                "commitscope: ebpf: {}: {}",
                r.level().as_str().to_lowercase(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}
