//! JSON lines: one object per interval, then one summary object. Each line
//! carries a `type` so a consumer can dispatch without guessing.
use std::{
    io::Write,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::json;

use crate::records::run::{Legend, Restart, RunHeader, RunSink, RunSummary, Sink, Summary};
use crate::sample::{Interval, Joined};

pub struct Json<W: Write> {
    out: W,
}

impl<W: Write> Json<W> {
    pub fn new(out: W) -> Self {
        Self { out }
    }

    fn line(&mut self, v: serde_json::Value) {
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
    }
}

fn unix_time(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl<W: Write> Sink for Json<W> {
    fn start(&mut self, l: &Legend) {
        self.line(json!({ "type": "start", "legend": l }));
    }

    fn interval(&mut self, at: SystemTime, i: &Interval) {
        let mut v = serde_json::to_value(i).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("interval"));
            o.insert("unix_time".into(), json!(unix_time(at)));
        }
        self.line(v);
    }

    fn restart(&mut self, at: SystemTime, r: &Restart) {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("restart"));
            o.insert("unix_time".into(), json!(unix_time(at)));
        }
        self.line(v);
    }

    fn summary(&mut self, l: &Legend, s: &Summary) {
        self.line(json!({
            "type": "summary",
            "end": s.end,
            "intervals": s.intervals,
            "pids": s.pids,
            "legend": l,
            "totals": s.totals,
        }));
    }
}

/// The main command: a start object, one `tick` object per interval
/// (`workload` and `trace` halves), then a `summary` object.
impl<W: Write> RunSink for Json<W> {
    fn start(&mut self, h: &RunHeader, cfg: &workload::engine::Config) {
        self.line(json!({
            "type": "start",
            "header": h,
            "scenario": cfg.scenario,
            "threads": cfg.threads,
            "warmup_s": cfg.warmup.as_secs_f64(),
        }));
    }

    fn tick(&mut self, at: SystemTime, j: &Joined) {
        let ts = at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let mut v = serde_json::to_value(j).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("tick"));
            o.insert("unix_time".into(), json!(ts));
        }
        self.line(v);
    }

    fn summary(&mut self, h: &RunHeader, s: &RunSummary) {
        let mut v = serde_json::to_value(s).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("summary"));
            o.insert("header".into(), json!(h));
        }
        self.line(v);
    }
}
