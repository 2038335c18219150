//! The sweep's command line, checked before anything starts: the option
//! lists, the threads and warehouses, what every cell shares, and how a
//! cell is named in messages.
use readers::{records::cells::Meta, server::options::OptionAxis};
use workload::{
    cli::{TpccArgs, WorkloadArgs},
    conn::ConnArgs,
    scenario::Scenario,
};

use crate::{
    cli::SweepArgs,
    error::{Error, Result},
    sweep::plan::Cell,
};

/// The command line, checked: the lists and what every cell shares.
pub struct Spec {
    /// What the server must take: the largest cell's clients and warehouses.
    pub shape: crate::server::sizing::Shape,
    pub axes: Vec<OptionAxis>,
    pub threads: Vec<u32>,
    pub warehouses: Vec<Option<u32>>,
    pub meta: Meta,
}

impl Spec {
    pub fn new(args: &SweepArgs) -> Result<Spec> {
        let axes = args
            .stage
            .server
            .server_options
            .iter()
            .map(|o| OptionAxis::from_option(o).map_err(Error::BadServerOption))
            .collect::<Result<Vec<_>>>()?;
        let mut axes = axes;
        // The replica's distance sweeps like an option (its cells are
        // named by it), set on the proxy between cells.
        let delays = &args.stage.server.replica_delay_ms;
        if !delays.is_empty() {
            let mut values: Vec<String> = Vec::new();
            for d in delays {
                let v = d.to_string();
                if values.contains(&v) {
                    return Err(Error::Usage(format!(
                        "--replica-delay-ms: {v} is listed twice"
                    )));
                }
                values.push(v);
            }
            axes.push(OptionAxis {
                key: crate::server::replica::DELAY_AXIS.into(),
                values,
            });
        }
        for (i, a) in axes.iter().enumerate() {
            let v = a.option(0).variable();
            if axes[..i].iter().any(|b| b.option(0).variable() == v) {
                return Err(Error::BadServerOption(format!(
                    "{v} is given twice: put all its values in one list, e.g. {v}=1,0"
                )));
            }
        }
        let tpcc = args.workload == Scenario::Tpcc;
        if !tpcc && !args.warehouses.is_empty() {
            return Err(Error::Usage(
                "--warehouses applies to --workload tpcc only".into(),
            ));
        }
        let warehouses: Vec<Option<u32>> = match (tpcc, args.warehouses.is_empty()) {
            (false, _) => vec![None],
            (true, true) => vec![Some(1)],
            (true, false) => args.warehouses.iter().copied().map(Some).collect(),
        };
        for (what, list) in [
            ("--threads", &args.threads),
            ("--warehouses", &args.warehouses),
        ] {
            if let Some(i) = (1..list.len()).find(|&i| list[..i].contains(&list[i])) {
                return Err(Error::Usage(format!("{what}: {} is listed twice", list[i])));
            }
        }
        if args.threads.is_empty() {
            return Err(Error::Usage("--threads: give at least one count".into()));
        }
        let mut flags = Vec::new();
        if !tpcc && args.rows_per_thread > 1 {
            flags.push(format!("--rows-per-thread {}", args.rows_per_thread));
        }
        if tpcc {
            let f = &args.tpcc;
            for (on, name) in [
                (f.foreign_keys, "--foreign-keys"),
                (f.delivery_single_commit, "--delivery-single-commit"),
                (f.think, "--think"),
            ] {
                if on {
                    flags.push(name.to_string());
                }
            }
        }
        if args.total_rows.is_some() && args.workload != Scenario::Insert {
            return Err(Error::Usage(
                "--total-rows applies to --workload insert only".into(),
            ));
        }
        let mut spec = Spec {
            shape: Default::default(),
            axes,
            threads: args.threads.clone(),
            warehouses,
            meta: Meta {
                workload: args.workload.to_string(),
                duration_s: args.duration,
                warmup_s: args.warmup_s(),
                total_rows: args.total_rows,
                workload_flags: flags.join(" "),
                server: String::new(),
            },
        };
        // Every cell's workload flags, checked before anything starts.
        let mut cfgs = Vec::new();
        for &t in &spec.threads {
            for &w in &spec.warehouses {
                let wa = workload_args(args, t, w, args.stage.conn.clone());
                let cfg = crate::session::check_workload(&wa)?.0;
                crate::session::group_takes(&args.stage.server, &cfg)?;
                cfgs.push(cfg);
            }
        }
        spec.shape = crate::session::shape_of(&cfgs);
        Ok(spec)
    }

    pub fn namer(&self) -> Namer {
        Namer {
            varied: self.axes.iter().map(|a| a.values.len() > 1).collect(),
            many_w: self.warehouses.len() > 1,
            total: self.threads.len()
                * self.warehouses.len()
                * self.axes.iter().map(|a| a.values.len()).product::<usize>(),
        }
    }
}

/// The main command's workload flags for one cell.
pub fn workload_args(
    args: &SweepArgs,
    threads: u32,
    w: Option<u32>,
    conn: ConnArgs,
) -> WorkloadArgs {
    WorkloadArgs {
        help: None,
        workload: args.workload,
        threads,
        // A --total-rows cell runs until its rows are in.
        duration: args.total_rows.is_none().then_some(args.duration),
        warmup: args.warmup_s(),
        interval: args.interval,
        rows_per_thread: args.rows_per_thread,
        total_rows: args.total_rows,
        database: args.database.clone(),
        reset: false,
        json: false,
        tpcc: TpccArgs {
            warehouses: w.unwrap_or(1),
            flags: args.tpcc.clone(),
        },
        conn,
    }
}

/// Names a cell in messages: `3/21 threads=1 trx_commit=9`.
pub struct Namer {
    pub varied: Vec<bool>,
    pub many_w: bool,
    pub total: usize,
}

impl Namer {
    pub fn name(&self, i: usize, c: &Cell) -> String {
        format!(
            "{}/{} {}",
            i + 1,
            self.total,
            c.label(&self.varied, self.many_w)
        )
    }
}
