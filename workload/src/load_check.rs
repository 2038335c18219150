//! `commitscope load --workload tpcc` and `commitscope check --workload tpcc`:
//! the commands above the TPC-C room (they take the workload's flags and
//! config, as `run` does), so that the room itself imports neither.
use std::io::Write;

use mysql::Conn;

use crate::tpcc::{check, prepare, schema};
use crate::{
    cli::WorkloadArgs,
    conn,
    engine::Config,
    error::{Error, Result},
    run,
    scenario::Scenario,
};

fn tpcc_config(args: &WorkloadArgs, command: &'static str) -> Result<Config> {
    if args.workload != Scenario::Tpcc {
        return Err(Error::BadInput {
            what: "--workload",
            detail: format!(
                "`{command}` is for --workload tpcc (the other workloads make their table when they run)"
            ),
        });
    }
    Ok(run::config(args)?.0)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the async runtime: {e}")))
}

/// Loads (always: an explicit load replaces any earlier one). Ctrl-C or
/// SIGTERM stops the loader threads and leaves the load marked incomplete.
pub fn load(args: &WorkloadArgs, out: &mut impl Write) -> Result<()> {
    let cfg = tpcc_config(args, "load")?;
    let settings = cfg.tpcc.clone().unwrap_or_else(|| args.tpcc.settings());
    let report = runtime()?.block_on(async {
        let mut c = conn::connect(&cfg.endpoint, None).await?;
        crate::schema::prepare(&mut c, &cfg.database, Scenario::Tpcc, 0, args.reset, false).await?;
        let _ = c.disconnect().await;
        let mut stops = run::Stops::install()?;
        // Dropping the loading future (on a signal) stops and joins the
        // loader threads before this returns.
        tokio::select! {
            r = prepare::ensure_loaded(&cfg.endpoint, &cfg.database, &settings, true) => r,
            _ = stops.recv() => Err(Error::LoadInterrupted),
        }
    })?;
    if let Some(r) = report {
        if args.json {
            let v = serde_json::to_value(&r).unwrap_or_default();
            let _ = writeln!(out, "{v}");
        } else {
            let _ = writeln!(
                out,
                "loaded {} warehouse(s) into `{}`: {} rows in {:.2} s ({:.0} rows/s)",
                r.warehouses, cfg.database, r.rows, r.seconds, r.rows_per_s
            );
            for (t, n) in &r.counts {
                let _ = writeln!(out, "  {t:<12} {n:>10}");
            }
        }
    }
    Ok(())
}

/// Runs consistency conditions 1-4; an error (non-zero exit) when one fails.
pub fn check(args: &WorkloadArgs, out: &mut impl Write) -> Result<()> {
    check_loaded(args, None, out)
}

/// [`check`], and when `warehouses` is given, that the data holds that
/// many (`commitscope check -w W`: the load meant is the load there).
pub fn check_loaded(
    args: &WorkloadArgs,
    warehouses: Option<u32>,
    out: &mut impl Write,
) -> Result<()> {
    let cfg = tpcc_config(args, "check")?;
    let ep = &cfg.endpoint;
    let mut c =
        Conn::new(conn::blocking_opts(ep, None)).map_err(|e| conn::classify_blocking(ep, e))?;
    let rec = {
        use mysql::prelude::Queryable;
        let marked: Option<u64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (&cfg.database, schema::LOAD_RECORD),
            )
            .map_err(schema::sql("looking for the TPC-C data"))?;
        if marked.unwrap_or(0) == 0 {
            return Err(Error::Tpcc {
                context: "check",
                detail: format!(
                    "no TPC-C data in `{}`: load it first (commitscope load --workload tpcc --warehouses W)",
                    cfg.database
                ),
            });
        }
        c.query_drop(format!("USE `{}`", cfg.database))
            .map_err(schema::sql("selecting the database"))?;
        schema::read_record(&mut c)?
    };
    if let (Some(want), Some(r)) = (warehouses, &rec) {
        if r.warehouses != want {
            return Err(Error::Tpcc {
                context: "check",
                detail: format!(
                    "`{}` holds {} warehouse(s), not {want}: drop -w, or load {want} (commitscope load -w {want} --reset)",
                    cfg.database, r.warehouses
                ),
            });
        }
    }
    if let Some(r) = &rec {
        if !r.complete {
            return Err(Error::Tpcc {
                context: "check",
                detail: format!(
                    "the load in `{}` did not finish: load it again",
                    cfg.database
                ),
            });
        }
    }
    let conds = check::run(&mut c)?;
    if args.json {
        let v = serde_json::to_value(&conds).unwrap_or_default();
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(
            out,
            "TPC-C consistency conditions in `{}` ({} warehouse(s)):",
            cfg.database,
            rec.map_or(0, |r| r.warehouses)
        );
        let _ = write!(out, "{}", check::render(&conds));
    }
    let failed: Vec<String> = conds
        .iter()
        .filter(|c| !c.holds())
        .map(|c| c.number.to_string())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Tpcc {
            context: "check",
            detail: format!("consistency condition(s) {} do not hold", failed.join(", ")),
        })
    }
}
