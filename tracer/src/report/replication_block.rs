//! The summary's replication block: a semi-sync source's waits for its
//! replica's acknowledgement (any traced server where the hooks fired),
//! and the managed replica's state at the end (main command, study).
use std::io::Write;

use super::fmt::opt_f;
use crate::{replication::AckWaits, server::replica::ReplicaEnd};

/// The waits: nothing where none happened (no semi-sync, or async now).
pub fn write_waits(out: &mut impl Write, a: Option<&AckWaits>) {
    let Some(a) = a.filter(|a| a.waits > 0) else {
        return;
    };
    let per = match a.hook {
        "after_sync" => "one per binlog group",
        _ => "one per transaction",
    };
    let _ = writeln!(
        out,
        "replica ack    {:>12}  waits at {} ({per}): mean {} us  p50 {}  p99 {}  ({} ms in all)",
        a.waits,
        a.hook,
        opt_f(a.mean_us, 0),
        opt_f(a.p50_us, 0),
        opt_f(a.p99_us, 0),
        a.total_us / 1000
    );
}

/// The managed replica at the end of the run.
pub fn write_replica(out: &mut impl Write, r: Option<&ReplicaEnd>) {
    let Some(r) = r else {
        return;
    };
    let _ = writeln!(
        out,
        "replica        {}; at the end: {}, lag {}{}",
        r.describe,
        if r.io_running && r.sql_running {
            "replicating"
        } else {
            "NOT replicating"
        },
        r.lag_seconds
            .map_or_else(|| "unknown".to_string(), |s| format!("{s} s")),
        match (&r.semi_sync, r.fell_back) {
            (Some(on), false) => format!("; semi-sync {on}"),
            (Some(on), true) => format!(
                "; semi-sync {on}, FELL BACK to async during the run ({} transactions not acknowledged)",
                r.not_acknowledged
            ),
            (None, _) => String::new(),
        }
    );
}
