//! Printing samples and the summary: a sysbench-like table or JSON lines.
use std::io::Write;

use crate::{
    stats::{IntervalSample, Summary},
    tpcc::report::interval_line,
};

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// Turns samples into tpcc-mysql's interval lines: nothing during the
/// ramp-up, then "MEASURING START." and one line per interval, the time
/// counted from the start of the measurement.
#[derive(Debug, Default)]
pub struct IntervalLines {
    measuring: bool,
    time_s: f64,
}

impl IntervalLines {
    pub fn lines(&mut self, s: &IntervalSample) -> Vec<String> {
        let Some(iv) = &s.tpcc else {
            return Vec::new();
        };
        if s.warmup {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.measuring {
            self.measuring = true;
            out.extend([String::new(), "MEASURING START.".into(), String::new()]);
        }
        self.time_s += s.interval_s;
        out.push(interval_line(self.time_s.round() as u64, iv));
        out
    }
}

pub struct Printer<W: Write> {
    out: W,
    json: bool,
    lines: u64,
    tpcc: IntervalLines,
}

impl<W: Write> Printer<W> {
    pub fn new(out: W, json: bool) -> Self {
        Self {
            out,
            json,
            lines: 0,
            tpcc: Default::default(),
        }
    }

    pub fn sample(&mut self, s: &IntervalSample) {
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), "interval".into());
            }
            let _ = writeln!(self.out, "{v}");
        } else if s.tpcc.is_some() {
            for l in self.tpcc.lines(s) {
                let _ = writeln!(self.out, "{l}");
            }
        } else {
            if self.lines.is_multiple_of(20) {
                let _ = writeln!(
                    self.out,
                    "{:>8}  {:>8}  {:>10}  {:>8}  {:>8}  {:>8}  {:>9}  {:>6}  {:>7}",
                    "time_s",
                    "txns",
                    "tps",
                    "p50_ms",
                    "p95_ms",
                    "p99_ms",
                    "max_ms",
                    "errors",
                    "retries"
                );
            }
            self.lines += 1;
            let _ = writeln!(
                self.out,
                "{:>8.1}  {:>8}  {:>10.1}  {:>8}  {:>8}  {:>8}  {:>9}  {:>6}  {:>7}{}",
                s.elapsed_s,
                s.txns,
                s.tps,
                ms(s.latency.p50_us),
                ms(s.latency.p95_us),
                ms(s.latency.p99_us),
                ms(s.latency.max_us),
                s.errors,
                s.retries,
                if s.warmup { "  (warmup)" } else { "" }
            );
        }
        let _ = self.out.flush();
    }

    pub fn summary(&mut self, s: &Summary) {
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), "summary".into());
            }
            let _ = writeln!(self.out, "{v}");
        } else {
            let o = &mut self.out;
            let _ = writeln!(
                o,
                "\n== workload {}: {} clients ({}), {:.1} s measured (warmup {:.1} s excluded) ==",
                s.scenario,
                s.threads,
                match s.io_model {
                    crate::stats::IoModel::Threads => "a thread each",
                    crate::stats::IoModel::EventLoop => "one event loop",
                },
                s.measured_s,
                s.warmup_s
            );
            let _ = writeln!(
                o,
                "transactions   {} measured ({} total)  {:.1} tps  stddev {:.1} tps over {} intervals",
                s.txns, s.total_txns, s.mean_tps, s.tps_stddev, s.intervals
            );
            let _ = writeln!(
                o,
                "latency (ms)   p50 {}  p95 {}  p99 {}  max {}",
                ms(s.latency.p50_us),
                ms(s.latency.p95_us),
                ms(s.latency.p99_us),
                ms(s.latency.max_us)
            );
            let codes = s.error_codes();
            let _ = writeln!(
                o,
                "errors         {}{}  retries {}",
                s.errors,
                if codes.is_empty() {
                    String::new()
                } else {
                    format!(" ({codes})")
                },
                s.retries
            );
            if let (Some(rows), Some(secs)) = (s.rows_done, s.rows_elapsed_s) {
                let _ = writeln!(o, "{rows} rows in {secs:.2} s");
            }
            if let Some(t) = &s.tpcc {
                let _ = write!(o, "{}", crate::tpcc::report::final_report(t));
            }
        }
        let _ = self.out.flush();
    }
}
