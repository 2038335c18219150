//! Making sure a complete load of the asked warehouses is there before a
//! run: reuse it, or (re)load and say why in one line.
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use mysql::Conn;

use super::{
    load::{self, LoadOptions, LoadReport},
    schema::{self, LoadRecord},
    spec::{LoadMethod, Settings},
};
use crate::{
    conn::{self, Endpoint},
    error::{Error, Result},
};

fn open(ep: &Endpoint, database: &str) -> Result<Conn> {
    Conn::new(conn::blocking_opts(ep, Some(database))).map_err(|e| conn::classify_blocking(ep, e))
}

/// The record of a complete load in `database`, if there is one.
pub fn loaded_record(ep: &Endpoint, database: &str) -> Result<Option<LoadRecord>> {
    let mut c = open(ep, database)?;
    Ok(schema::read_record(&mut c)?.filter(|r| r.complete))
}

/// Why the data must be (re)loaded for `s`, or None when it can be used.
pub fn reload_reason(rec: Option<&LoadRecord>, s: &Settings) -> Option<String> {
    match rec {
        None => Some("no TPC-C data yet".into()),
        Some(r) if !r.complete => Some("an earlier load did not finish".into()),
        Some(r) if r.warehouses != s.warehouses => Some(format!(
            "the data holds {} warehouses, not {}",
            r.warehouses, s.warehouses
        )),
        Some(r) if r.foreign_keys != s.foreign_keys => Some(format!(
            "the data was loaded {} foreign keys",
            if r.foreign_keys { "with" } else { "without" }
        )),
        Some(_) => None,
    }
}

/// Loads `database` unless a matching complete load is there. The
/// database must already be commitscope's (marked) one.
pub async fn ensure_loaded(
    ep: &Endpoint,
    database: &str,
    s: &Settings,
    force: bool,
) -> Result<Option<LoadReport>> {
    let rec = {
        let mut c = open(ep, database)?;
        schema::read_record(&mut c)?
    };
    let reason = if force {
        Some("asked to load".to_string())
    } else {
        reload_reason(rec.as_ref(), s)
    };
    let Some(reason) = reason else {
        return Ok(None);
    };
    eprintln!(
        "tpcc: loading {} warehouse(s) into `{}` ({reason})",
        s.warehouses, database
    );
    let r = load_in_background(LoadOptions {
        endpoint: ep.clone(),
        database: database.to_string(),
        warehouses: s.warehouses,
        foreign_keys: s.foreign_keys,
        parallel: s.load_parallel(),
        progress: true,
        method: s.load_method,
        binlog: s.load_binlog,
    })
    .await?;
    eprintln!(
        "tpcc: loaded {} rows in {:.1} s ({:.0} rows/s, {}), counts checked",
        r.loaded_rows,
        r.seconds,
        r.rows_per_s,
        match r.method {
            LoadMethod::Infile => "LOAD DATA LOCAL INFILE",
            _ => "multi-row INSERT",
        }
    );
    Ok(Some(r))
}

/// The loader's threads, stopped and joined if this is dropped early
/// (Ctrl-C cancels the future that owns it).
struct Loading {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Result<LoadReport>>>,
}

impl Drop for Loading {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs the blocking loader off the async clock and waits for it.
pub async fn load_in_background(opts: LoadOptions) -> Result<LoadReport> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name("tpcc-load".into())
        .spawn(move || load::load(&opts, s2))
        .map_err(|e| Error::Runtime(format!("cannot start the loader: {e}")))?;
    let mut g = Loading {
        stop,
        handle: Some(handle),
    };
    while g.handle.as_ref().is_some_and(|h| !h.is_finished()) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    match g.handle.take().map(std::thread::JoinHandle::join) {
        Some(Ok(r)) => r,
        _ => Err(Error::Runtime("the loader panicked".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::rand::NuConstants;

    #[test]
    fn reloads_only_when_the_data_does_not_match() {
        let s = Settings {
            warehouses: 2,
            foreign_keys: false,
            delivery_single_commit: false,
            think: false,
            load_parallel: None,
            load_method: LoadMethod::Auto,
            load_binlog: false,
        };
        let rec = LoadRecord {
            warehouses: 2,
            complete: true,
            constants: NuConstants {
                c_last: 1,
                c_id: 2,
                ol_i_id: 3,
            },
            foreign_keys: false,
        };
        assert_eq!(reload_reason(Some(&rec), &s), None);
        assert!(reload_reason(None, &s).is_some());
        let incomplete = LoadRecord {
            complete: false,
            ..rec.clone()
        };
        assert!(reload_reason(Some(&incomplete), &s)
            .unwrap()
            .contains("did not finish"));
        let other_w = LoadRecord {
            warehouses: 1,
            ..rec.clone()
        };
        assert!(reload_reason(Some(&other_w), &s)
            .unwrap()
            .contains("1 warehouses"));
    }
}
