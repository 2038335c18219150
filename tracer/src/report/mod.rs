//! Output sinks: one file per format. None of them imports aya. A
//! sweep's report (table, summaries, charts) is rebuilt from its records
//! alone, in the readers' crate (`readers::report`).
//! `trace` prints [`Interval`](crate::sample::Interval)s through a
//! `Sink`; the main command prints [`Joined`](crate::sample::Joined)
//! ticks (workload + probes) through a `RunSink` (both in
//! `crate::records::run`, with what they print).
pub mod binlog_block;
mod commit_path_block;
pub mod csv;
pub mod fmt;
mod group_block;
pub mod human;
pub mod json;
pub mod live;
mod replication_block;

use std::path::Path;

use crate::{
    error::Result,
    records::run::{RunSink, Tee},
};

/// stdout as a table (or JSON lines), plus `--csv FILE` when given.
pub fn run_sinks(json: bool, csv: Option<&Path>) -> Result<Box<dyn RunSink>> {
    let mut v: Vec<Box<dyn RunSink>> = vec![if json {
        Box::new(json::Json::new(std::io::stdout()))
    } else {
        Box::new(live::Live::new(std::io::stdout()))
    }];
    if let Some(p) = csv {
        let f = readers::outfile::create(p)?;
        v.push(Box::new(csv::Csv::new(std::io::BufWriter::new(f))));
    }
    Ok(Box::new(Tee(v)))
}
