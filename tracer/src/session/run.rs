//! The main command: setup, one measured run, teardown.

use super::{
    config::{check_workload, shape_of},
    measure::Measure,
    phases::Phases,
    stage::setup,
    stop::Stop,
};
use crate::error::{Error, Result};

/// The main command.
pub fn run(args: crate::cli::RunArgs) -> Result<()> {
    let rt = crate::runtime::runtime()?;
    rt.block_on(async {
        args.server.check_replica(false)?;
        let stop = Stop::install()?;
        let ph = Phases::new(args.probes.verbose);
        let shape = shape_of([&check_workload(&args.workload)?]);
        let mut wa = args.workload.clone();
        let mut sink = crate::report::run_sinks(args.workload.json, args.output.csv.as_deref())?;
        let mut stage = setup(
            &args.server,
            &args.probes,
            &args.workload.conn,
            shape,
            &stop,
            &ph,
        )
        .await?;
        wa.conn = stage.conn.clone();
        let (cfg, interval, duration) = workload::run::config(&wa)?;
        let m = Measure {
            cfg,
            interval,
            duration,
            reset: args.workload.reset,
        };
        let r = stage.measure(&m, sink.as_mut(), &stop, &ph).await;
        stage.close(&ph).await;
        match r? {
            s if s.end.server_failed() => Err(Error::ServerLost { detail: s.ended }),
            s if s.replica.as_ref().is_some_and(|r| r.fell_back)
                && !args.server.allow_async_fallback =>
            {
                let n = s.replica.as_ref().map_or(0, |r| r.not_acknowledged);
                Err(Error::AsyncFallback {
                    detail: format!(
                        "semi-sync fell back to async during the run ({n} transactions committed without the replica's acknowledgement)"
                    ),
                })
            }
            _ => Ok(()),
        }
    })
}
