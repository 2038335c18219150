//! `commitscope study`: the systemtap study's four scenarios (docs/the-study.md)
//! on one server with one set of probes, and its table with our measured
//! ratios beside the published ones.
use std::io::Write;

use readers::server::options::ServerOption;
use workload::{engine::Config, scenario::Scenario};

use crate::{
    cli::{StudyArgs, StudyBinlog},
    error::{Error, Result},
    records::run::{RunSink, RunSummary},
    report::{
        human::{opt_f, opt_u},
        json::Json,
        live::Live,
    },
    session::{setup, Measure, Phases, StagePlan, Stop},
};

/// One row of the study.
pub struct Row {
    pub key: char,
    pub what: &'static str,
    pub scenario: Scenario,
    pub threads: u32,
    /// The study's reported n_write:n_flush.
    pub published: &'static str,
}

pub const ROWS: &[Row] = &[
    Row {
        key: 'a',
        what: "single thread",
        scenario: Scenario::Update,
        threads: 1,
        published: "1:1",
    },
    Row {
        key: 'b',
        what: "50 threads, hot row",
        scenario: Scenario::HotRow,
        threads: 50,
        published: "1:1",
    },
    Row {
        key: 'c',
        what: "50 threads, own rows",
        scenario: Scenario::Update,
        threads: 50,
        published: "~3:1",
    },
    Row {
        key: 'd',
        what: "100 threads, own rows",
        scenario: Scenario::Update,
        threads: 100,
        published: "~5:1",
    },
];

/// Where a row's ratio comes from: where the commits group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioSource {
    /// Commits per binlog group: with the binlog on, the flush-stage
    /// leader asks InnoDB for one redo flush per group, so the group
    /// forms in the binlog's stages.
    BinlogGroups,
    /// The study's own n_write:n_flush (durable log_write_up_to calls per
    /// redo flush).
    NWriteNFlush,
    /// Server-layer commits per redo flush (InnoDB's symbols hidden).
    CommitsNFlush,
}

impl RatioSource {
    /// The table's label for it.
    pub fn label(self) -> &'static str {
        match self {
            RatioSource::BinlogGroups => "binlog group",
            RatioSource::NWriteNFlush => "n_write:n_flush",
            RatioSource::CommitsNFlush => "commits:n_flush",
        }
    }
}

/// A row's batching ratio, from where the group forms: the binlog's
/// groups where commits group there (MySQL with its binlog on) and any
/// closed, else the InnoDB side's n_write:n_flush.
pub fn ratio(s: &RunSummary, fallback: bool) -> (Option<f64>, RatioSource) {
    let t = s.trace.as_ref();
    if let Some(b) = t
        .and_then(|t| t.binlog.as_ref())
        .filter(|b| b.groups > 0 && b.forms_group)
    {
        return (b.mean, RatioSource::BinlogGroups);
    }
    let src = if fallback {
        RatioSource::CommitsNFlush
    } else {
        RatioSource::NWriteNFlush
    };
    (t.and_then(|t| t.write_per_flush), src)
}

/// The study table, as text.
pub fn table(out: &mut impl Write, done: &[(&Row, RunSummary)], fallback: bool, secs: f64) {
    let _ = writeln!(
        out,
        "\n== the group-commit study (docs/the-study.md): {secs:.0} s per scenario =="
    );
    let _ = writeln!(
        out,
        "{:<26} {:>7} {:>10} {:>8} {:>16} {:>14} {:>17} {:>9} {:>9} {:>18}",
        "scenario",
        "threads",
        "tps",
        "ratio",
        "ratio_source",
        "commits/flush",
        "study (published)",
        "p50_batch",
        "p99_batch",
        "redo_fsync_p99_us"
    );
    let mut sources = Vec::new();
    for (row, s) in done {
        let t = s.trace.as_ref();
        let (r, src) = ratio(s, fallback);
        if !sources.contains(&src) {
            sources.push(src);
        }
        let _ = writeln!(
            out,
            "{:<26} {:>7} {:>10.1} {:>8} {:>16} {:>14} {:>17} {:>9} {:>9} {:>18}",
            format!("{}. {}", row.key, row.what),
            row.threads,
            s.workload.mean_tps,
            r.map_or_else(|| "-".into(), |r| format!("{r:.2}:1")),
            src.label(),
            opt_f(s.commits_per_flush, 2),
            row.published,
            opt_u(t.and_then(|t| t.batch.p50)),
            opt_u(t.and_then(|t| t.batch.p99)),
            opt_f(t.and_then(|t| t.redo_p99_us), 0)
        );
    }
    for src in sources {
        let why = match src {
            RatioSource::BinlogGroups => "ratio is commits per binlog group: with the binlog on, the group forms in the binlog's flush/sync/commit stages and the flush leader makes one redo flush per group, so InnoDB's n_write:n_flush stays near 1:1 (p50/p99_batch are per redo flush)",
            RatioSource::NWriteNFlush => "ratio is the study's n_write:n_flush: durable log_write_up_to calls per redo flush",
            RatioSource::CommitsNFlush => "the server hides log_write_up_to: ratio counts commits at the server layer per redo flush",
        };
        let _ = writeln!(
            out,
            "({why}; commits/flush is the workload's own count either way)"
        );
    }
    let _ = out.flush();
}

/// The binlog setting of one pass of `--binlog both`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BinlogPass {
    On,
    Off,
}

impl BinlogPass {
    fn option(self) -> ServerOption {
        ServerOption {
            key: "log_bin".into(),
            value: match self {
                BinlogPass::On => "ON",
                BinlogPass::Off => "OFF",
            }
            .into(),
        }
    }
}

pub fn run(args: StudyArgs) -> Result<()> {
    use workload::run::seconds;
    let duration = seconds("--duration", args.duration, 0.01)?;
    let warmup = seconds("--warmup", args.warmup, 0.0)?;
    let interval = seconds("--interval", args.interval, 0.01)?;
    workload::schema::check_name(&args.database)?;
    if args.stage.server.replica.is_some()
        && matches!(args.binlog, StudyBinlog::Off | StudyBinlog::Both)
    {
        return Err(Error::Usage(
            "--replica replicates the source's binlog: it cannot run with --binlog off (use --binlog server or on)".into(),
        ));
    }
    let passes: Vec<Option<BinlogPass>> = match args.binlog {
        StudyBinlog::Server => vec![None],
        StudyBinlog::On => vec![Some(BinlogPass::On)],
        StudyBinlog::Off => vec![Some(BinlogPass::Off)],
        StudyBinlog::Both => vec![Some(BinlogPass::On), Some(BinlogPass::Off)],
    };
    if args.binlog != StudyBinlog::Server {
        // Both ways needs a server this run starts with each setting.
        if args.stage.conn.any_given() || args.stage.server.pid.is_some() {
            return Err(Error::Usage(
                "--binlog on|off|both sets the managed server's log_bin: drop the connection options (or --pid), or leave --binlog at server".into(),
            ));
        }
        if let Some(o) = args
            .stage
            .server
            .server_options
            .iter()
            .find(|o| o.variable() == "log_bin")
        {
            return Err(Error::Usage(format!(
                "--server-option {o} and --binlog both set log_bin: keep one"
            )));
        }
    }
    let plan = StagePlan::check(
        &args.stage.server,
        &args.stage.probes,
        &args.stage.conn,
        false,
    )?;
    let times = Times {
        duration,
        warmup,
        interval,
    };
    let rt = crate::runtime::runtime()?;
    rt.block_on(async {
        let stop = Stop::install()?;
        let ph = Phases::new(args.stage.probes.verbose);
        for pass in passes {
            if stop.fired() {
                break;
            }
            one_pass(&args, &plan, pass, times, &stop, &ph).await?;
        }
        Ok(())
    })
}

#[derive(Clone, Copy)]
struct Times {
    duration: std::time::Duration,
    warmup: std::time::Duration,
    interval: std::time::Duration,
}

/// The four scenarios on one server (started with `pass`'s log_bin when
/// it is managed), then its table or JSON line.
async fn one_pass(
    args: &StudyArgs,
    plan: &StagePlan,
    pass: Option<BinlogPass>,
    times: Times,
    stop: &Stop,
    ph: &Phases,
) -> Result<()> {
    let Times {
        duration,
        warmup,
        interval,
    } = times;
    let mut options = plan.server.server_options.clone();
    options.extend(pass.map(BinlogPass::option));
    let plan = plan.with_server_options(options);
    if let (Some(p), false) = (pass, args.json) {
        println!(
            "\n==== binlog {} ====",
            if p == BinlogPass::On { "on" } else { "off" }
        );
    }
    {
        let mut stage = setup(
            &plan,
            crate::server::sizing::Shape {
                // Each scenario's clients, plus the schema connection.
                clients: ROWS.iter().map(|r| r.threads).max().unwrap_or(1) + 1,
                warehouses: None,
            },
            stop,
            ph,
        )
        .await?;
        let endpoint = stage.endpoint.clone();
        let spread = stage.spread()?;
        let fallback = stage
            .header
            .legend
            .as_ref()
            .is_some_and(|l| l.fallback.is_some());
        let mut done = Vec::new();
        let mut result = Ok(());
        for row in ROWS {
            if stop.fired() {
                break;
            }
            let mut sink: Box<dyn RunSink> = if args.json {
                Box::new(Json::new(std::io::stdout()))
            } else {
                println!("\n== scenario {}: {} ==", row.key, row.what);
                Box::new(Live::new(std::io::stdout()))
            };
            let m = Measure {
                cfg: Config {
                    endpoint: endpoint.clone(),
                    database: args.database.clone(),
                    scenario: row.scenario,
                    threads: row.threads,
                    rows_per_thread: 1,
                    total_rows: None,
                    warmup,
                    tpcc: None,
                    spread: spread.clone(),
                },
                interval,
                duration: Some(duration),
                reset: false,
            };
            match stage.measure(&m, sink.as_mut(), stop, ph).await {
                Ok(s) => done.push((row, s)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        stage.close(ph).await;
        if args.json {
            let rows: Vec<serde_json::Value> = done
                .iter()
                .map(|(r, s)| {
                    let (ratio, source) = ratio(s, fallback);
                    serde_json::json!({
                        "ratio": ratio,
                        "ratio_source": source,
                        "binlog": s.trace.as_ref().and_then(|t| t.binlog.as_ref()),
                        "commit_path": s.trace.as_ref().and_then(|t| t.commit_path.as_ref()),
                        "scenario": r.key.to_string(),
                        "what": r.what,
                        "threads": r.threads,
                        "tps": s.workload.mean_tps,
                        "write_per_flush": s.trace.as_ref().and_then(|t| t.write_per_flush),
                        "commits_per_flush": s.commits_per_flush,
                        "published": r.published,
                        "redo_p99_us": s.trace.as_ref().and_then(|t| t.redo_p99_us),
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::json!({"type": "study", "binlog": pass, "fallback": fallback, "rows": rows})
            );
        } else if !done.is_empty() {
            table(
                &mut std::io::stdout(),
                &done,
                fallback,
                duration.as_secs_f64(),
            );
        }
        result
    }
}
