//! One handle over both drivers, so the clock owner (the `workload`
//! command, the tracer's session) ticks any workload the same way.
use crate::{
    engine::{Config, Engine},
    error::{Error, Result},
    stats::{IntervalSample, Summary},
    tpcc::{self, driver::DriverConfig},
};

pub enum Driver {
    /// Both boxed: the drivers are large and moved once.
    Simple(Box<Engine>),
    Tpcc(Box<tpcc::driver::Driver>),
}

impl Driver {
    /// Starts the workload `cfg` names. For TPC-C, `prepare` must have run
    /// (it loads the data and returns the load's constants).
    pub fn start(cfg: Config) -> Result<Driver> {
        match &cfg.tpcc {
            None => Ok(Driver::Simple(Box::new(Engine::start(cfg)?))),
            Some(settings) => {
                let record = tpcc::prepare::loaded_record(&cfg.endpoint, &cfg.database)?
                    .ok_or_else(|| {
                        Error::Runtime(
                            "the TPC-C data is not loaded (run `commitscope load --workload tpcc`)"
                                .into(),
                        )
                    })?;
                Ok(Driver::Tpcc(Box::new(tpcc::driver::Driver::start(
                    DriverConfig {
                        endpoint: cfg.endpoint.clone(),
                        database: cfg.database.clone(),
                        threads: cfg.threads,
                        warmup: cfg.warmup,
                        settings: settings.clone(),
                        load_constants: record.constants,
                    },
                )?)))
            }
        }
    }

    pub fn sample(&mut self) -> Result<IntervalSample> {
        match self {
            Driver::Simple(e) => e.sample(),
            Driver::Tpcc(d) => d.sample(),
        }
    }

    /// Whether a sample taken now ends the warmup: the caller reads what
    /// it sets beside the window's start first.
    pub fn warmup_over_now(&self) -> bool {
        match self {
            Driver::Simple(e) => e.warmup_over_now(),
            Driver::Tpcc(d) => d.warmup_over_now(),
        }
    }

    pub fn finished(&self) -> bool {
        match self {
            Driver::Simple(e) => e.finished(),
            Driver::Tpcc(d) => d.finished(),
        }
    }

    /// The error the run stopped on (a full disk), once one came.
    pub fn fatal(&self) -> Option<String> {
        match self {
            Driver::Simple(e) => e.fatal(),
            Driver::Tpcc(d) => d.fatal(),
        }
    }

    pub fn stop(self) -> Result<(IntervalSample, Summary)> {
        match self {
            Driver::Simple(e) => (*e).stop(),
            Driver::Tpcc(d) => (*d).stop(),
        }
    }
}
