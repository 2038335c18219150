//! `commitscope sweep`: the main command over a product of settings, one
//! server for the whole sweep. Dynamic options change with `SET GLOBAL`
//! between cells; options that need a restart restart the managed server
//! on the same datadir (the loaded data stays). Every value is tried
//! before the first cell runs; every finished cell is on disk at once.
pub mod cell;
pub mod ctx;
pub mod plan;
pub mod progress;
pub mod settings;
pub mod spec;
pub mod store;
pub mod validate;

use std::time::Instant;

use readers::{
    records::cells::CellRecord,
    report::sweep::{publish, write_outputs},
    server::options::ServerOption,
};

use crate::{
    cli::{ServerArgs, SweepArgs},
    error::{Error, Result},
    session::{setup, Phases, StagePlan, Stop},
};
use cell::{result_line, run_cell, Live};
use ctx::Ctx;
use plan::Cell;
use progress::Progress;
use spec::Spec;
use store::Store;
use validate::Ready;

/// How the sweep ended.
enum Outcome {
    Finished,
    Interrupted,
}

pub fn run(args: SweepArgs) -> Result<()> {
    use workload::run::seconds;
    seconds("--duration", args.duration, 0.01)?;
    seconds("--warmup", args.warmup_s(), 0.0)?;
    seconds("--interval", args.interval, 0.01)?;
    let mut spec = Spec::new(&args)?;
    let on_users_server = args.stage.conn.any_given();
    // The first start has the first value of every list (a running
    // server of the user's gets them with SET GLOBAL instead).
    let server = ServerArgs {
        server_options: if on_users_server {
            Vec::new()
        } else {
            spec.axes
                .iter()
                .filter(|a| a.key != crate::server::replica::DELAY_AXIS)
                .map(|a| a.option(0))
                .collect()
        },
        ..args.stage.server.clone()
    };
    let plan = StagePlan::check(&server, &args.stage.probes, &args.stage.conn, true)?;
    let (store, earlier) = Store::open(&args.out, args.resume, &spec.meta)?;
    let rt = crate::runtime::runtime()?;
    rt.block_on(async {
        let stop = Stop::install()?;
        let ph = Phases::new(args.stage.probes.verbose);
        let mut stage = match setup(&plan, spec.shape, &stop, &ph).await {
            Ok(s) => s,
            Err(e @ (Error::ServerStart { .. } | Error::ServerInit { .. })) => {
                let first = Cell {
                    threads: spec.threads[0],
                    warehouses: spec.warehouses[0],
                    settings: server.server_options.clone(),
                };
                return Err(Error::SweepCell {
                    cell: spec.namer().name(0, &first),
                    detail: format!("{e} (nothing was measured)"),
                });
            }
            Err(e) => return Err(e),
        };
        spec.meta.server = stage.header.server.clone();
        store.write_meta(&spec.meta)?;
        let ctx = Ctx {
            args: &args,
            spec: &spec,
            store: &store,
            stop: &stop,
            ph: &ph,
        };
        let mut done = earlier;
        let mut originals: Vec<ServerOption> = Vec::new();
        let r = async {
            let classified = ph
                .run(
                    &stop,
                    "classify options",
                    settings::classify(stage.control()?, &spec.axes),
                )
                .await?;
            originals = classified.originals.iter().flatten().cloned().collect();
            let mut live = Live::new(&mut stage, classified.change.clone(), &ctx)?;
            match validate::ready(&ctx, &mut live, &classified, &done).await? {
                None => Ok(Outcome::Interrupted),
                Some(ready) if args.dry_run => {
                    for &i in &ready.pending {
                        println!("cell {}", ready.namer.name(i, &ready.cells[i]));
                    }
                    Ok(Outcome::Finished)
                }
                Some(ready) => drive(&ctx, &mut live, &ready, &mut done).await,
            }
        }
        .await;
        // A server of the user's gets its values back, whatever happened.
        if on_users_server {
            if let Ok(conn) = stage.control() {
                for o in &originals {
                    if let Err(e) = settings::restore(conn, o).await {
                        eprintln!("commitscope: warning: could not restore {o}: {e}");
                    }
                }
            }
        }
        stage.close(&ph).await;
        if !done.is_empty() && !args.dry_run {
            publish(&store.dir, &spec.meta, &done, &mut std::io::stdout())?;
        }
        match r? {
            Outcome::Finished => Ok(()),
            Outcome::Interrupted => {
                eprintln!(
                    "commitscope: {} finished cells kept in {}; the same command with --resume runs the rest",
                    done.len(),
                    store.cells_path().display()
                );
                Err(Error::Interrupted { phase: "the sweep" })
            }
        }
    })
}

/// Runs the cells still to run, each recorded the moment it ends.
async fn drive(
    ctx: &Ctx<'_>,
    live: &mut Live<'_>,
    ready: &Ready,
    done: &mut Vec<CellRecord>,
) -> Result<Outcome> {
    let (cells, namer) = (&ready.cells, &ready.namer);
    let ticks = ctx.store.dir.join("ticks");
    readers::outfile::check_dir(&ticks)?;
    let _ = std::fs::create_dir_all(&ticks);
    let mut progress = Progress::new(cells.len(), ready.per_cell);
    let tpcc = ctx.spec.meta.workload == "tpcc";
    let mut outcome = Outcome::Finished;
    for (k, &i) in ready.pending.iter().enumerate() {
        if ctx.stop.fired() {
            outcome = Outcome::Interrupted;
            break;
        }
        let cell = &cells[i];
        let left = ready.pending.len() - k;
        progress.start(i + 1, cell.label(&namer.varied, namer.many_w), left);
        let t0 = Instant::now();
        match run_cell(ctx, live, cell, &mut progress).await {
            Ok(Some(s)) => {
                let r = store::cell_record(cell, &s, t0.elapsed().as_secs_f64());
                ctx.store.append(&r)?;
                progress.done(&result_line(&r, tpcc));
                done.push(r);
                // Kept current after every cell: a crash leaves the
                // summaries and charts of what is done.
                write_outputs(&ctx.store.dir, &ctx.spec.meta, done)?;
            }
            Ok(None)
            | Err(Error::Interrupted { .. })
            | Err(Error::Workload(workload::Error::LoadInterrupted)) => {
                outcome = Outcome::Interrupted;
                break;
            }
            Err(e) => {
                progress.finish();
                return Err(match e {
                    Error::SweepCell { detail, .. } => Error::SweepCell {
                        cell: namer.name(i, cell),
                        detail,
                    },
                    e => e,
                });
            }
        }
    }
    progress.finish();
    Ok(outcome)
}
