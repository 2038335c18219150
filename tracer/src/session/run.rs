//! The main command: its flags checked once into a plan, then setup, one
//! measured run, teardown.

use super::{measure::Measure, phases::Phases, plan::RunPlan, stage::setup, stop::Stop};
use crate::{
    error::{Error, Result},
    records::run::RunSink,
};

/// The main command as `plan` has it, its ticks and summary into `sink`
/// (the caller's output, made once the plan is checked).
pub fn run(plan: RunPlan, sink: &mut dyn RunSink) -> Result<()> {
    let rt = crate::runtime::runtime()?;
    rt.block_on(async {
        let stop = Stop::install()?;
        let ph = Phases::new(plan.stage.probes.verbose);
        let mut stage = setup(&plan.stage, plan.shape, &stop, &ph).await?;
        let mut cfg = plan.workload_on(&stage.endpoint);
        cfg.spread = stage.spread()?;
        let m = Measure {
            cfg,
            interval: plan.interval,
            duration: plan.duration,
            reset: plan.reset,
        };
        let r = stage.measure(&m, sink, &stop, &ph).await;
        stage.close(&ph).await;
        match r? {
            s if s.end.server_failed() => Err(Error::ServerLost { detail: s.ended }),
            s if s.replica.as_ref().is_some_and(|r| r.fell_back)
                && !plan.stage.server.allow_async_fallback =>
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
