//! `commitscope trace`: attach to a running server and print per-interval
//! counts until Ctrl-C, `--duration`, or the server exits.
use std::{
    io::{stderr, stdout, Write},
    time::{Duration, SystemTime},
};

use crate::{
    cli::TraceArgs,
    error::{Error, Result},
    probes::{profiles, Plan, Probes, Target, WriteProbe},
    report::{human::Human, json::Json, EndReason, Legend, Sink, Summary},
    sample::ProbeSampler,
    server::process,
};

/// Turns the CLI into a target: pid, executable, options.
pub fn target(args: &TraceArgs) -> Result<Target> {
    let pid = match (args.pid, &args.mysqld) {
        (Some(pid), _) => pid,
        (None, Some(path)) => {
            // Reject a non-ELF before looking for processes; the symbols
            // are read once, later, by Plan::new.
            crate::probes::symbols::check_elf(path)?;
            process::pid_of(path)?
        }
        // clap requires one of them; a library caller may not.
        (None, None) => return Err(Error::Runtime("pass --pid or --mysqld".into())),
    };
    let exe = process::exe_of(pid)?;
    let server = args
        .probes
        .server_version
        .as_deref()
        .map(str::parse)
        .transpose()?;
    if !args.interval.is_finite() || args.interval < 0.01 {
        return Err(Error::BadInterval {
            given: args.interval,
        });
    }
    Ok(Target {
        pid,
        exe,
        debug_root: args.probes.debug_dir.clone(),
        server,
        fsync_probe: args.probes.fsync_probe,
        write_timing: !args.no_write_timing,
    })
}

/// What each column counts, said once at start.
pub fn legend(probes: &Probes, target: &Target) -> Legend {
    let plan = &probes.plan;
    let (profile, durable) = match &plan.write {
        WriteProbe::Exact { profile, .. } => {
            let durable = match profile.durable {
                profiles::Source::PredB => {
                    "flush_to_disk argument != 0 (n_write: wait == LOG_WAIT_ONE_GROUP)"
                }
                _ => "durable/flush argument true",
            };
            (Some(profile.name.to_string()), Some(durable.to_string()))
        }
        WriteProbe::ServerLayer { .. } => (None, None),
    };
    Legend {
        pid: target.pid,
        exe: target.exe.display().to_string(),
        server: plan.server.map(|s| s.to_string()),
        profile,
        n_write_source: plan.write.source_name(),
        n_write_symbol_from: plan.write.resolved().source.to_string(),
        durable_source: durable,
        n_flush_source: plan
            .flush
            .as_ref()
            .map(|f| profiles::short_name(&f.symbol))
            .unwrap_or_else(|| "redo fsync/fdatasync (kernel)".into()),
        fsync_probe: probes.kernel.used.to_string(),
        fallback: plan.fallback_line(),
    }
}

pub fn verbose_report(probes: &Probes) {
    let mut e = stderr().lock();
    for a in &probes.attached {
        let _ = writeln!(
            e,
            "commitscope: {} {:<9} {} at {}+{:#x} (symbol from {})",
            a.role,
            a.kind,
            profiles::short_name(&a.symbol),
            a.file.display(),
            a.offset,
            a.found_in
        );
    }
    if !probes.plan.flush_missing.is_empty() {
        let _ = writeln!(
            e,
            "commitscope: flush function {} not found (inlined?): n_flush = redo fsyncs counted in the kernel",
            probes.plan.flush_missing.join(", ")
        );
    }
    let k = &probes.kernel;
    match &k.fallback_reason {
        Some(why) => {
            let _ = writeln!(
                e,
                "commitscope: fsync: kprobe unavailable ({why}); fell back to syscall tracepoints"
            );
        }
        None => {
            let _ = writeln!(e, "commitscope: fsync: {} probes", k.used);
        }
    }
    let _ = writeln!(
        e,
        "commitscope: writes: tracepoints {}",
        k.write_tracepoints.join(", ")
    );
    for p in &probes.plan.debug_looked_for {
        let _ = writeln!(e, "commitscope: debug file looked for: {}", p.display());
    }
}

/// The tick loop: one line per interval, then the summary.
async fn run_loop(
    probes: &mut Probes,
    target: &Target,
    args: &TraceArgs,
    sink: &mut dyn Sink,
    legend: &Legend,
) -> Result<()> {
    // The maps were created empty at attach: counting starts there, so
    // the baseline is zero, not a first read that could miss early events.
    let mut sampler = ProbeSampler::since_attach(probes, target.pid);
    let mut intervals = 0u64;
    let period = Duration::from_secs_f64(args.interval);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // fds are named while they are open: poll the fd map faster than the
    // output so short-lived descriptors are still attributed.
    let mut fd_poll = tokio::time::interval(Duration::from_millis(100));
    let deadline = args
        .duration
        .map(|d| tokio::time::Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let sleep_until_deadline = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep_until_deadline);
    // Installed once, before the loop, so no signal falls between two
    // iterations unseen.
    let signal = |kind| {
        tokio::signal::unix::signal(kind)
            .map_err(|e| Error::Runtime(format!("cannot install a signal handler: {e}")))
    };
    let mut sigint = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = signal(tokio::signal::unix::SignalKind::terminate())?;
    // The terminal went away: detach and summarise all the same.
    let mut sighup = signal(tokio::signal::unix::SignalKind::hangup())?;

    let end = loop {
        tokio::select! {
            _ = tick.tick() => {
                let i = sampler.tick(probes)?;
                sink.interval(SystemTime::now(), &i);
                intervals += 1;
                if !process::alive(target.pid) {
                    break EndReason::TargetExited;
                }
            }
            _ = fd_poll.tick() => sampler.poll_fds(probes),
            _ = &mut sleep_until_deadline => break EndReason::Duration,
            _ = sigint.recv() => break EndReason::Interrupted,
            _ = sigterm.recv() => break EndReason::Interrupted,
            _ = sighup.recv() => break EndReason::Interrupted,
        }
    };
    // The partial last interval (also what a dying target did after the
    // last tick), so the totals equal the sum of the printed lines.
    let i = sampler.tick(probes)?;
    if sampler.changed() {
        sink.interval(SystemTime::now(), &i);
        intervals += 1;
    }
    let totals = sampler.totals();
    sink.summary(
        legend,
        &Summary {
            end,
            totals,
            intervals,
        },
    );
    Ok(())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Entry point of `commitscope trace`.
pub fn run(args: TraceArgs) -> Result<()> {
    // First: without root even /proc/<pid>/exe of the server is unreadable.
    if !is_root() {
        return Err(Error::NotRoot {
            what: " trace",
            hint: "",
        });
    }
    let target = target(&args)?;
    let plan = Plan::new(&target)?;
    let mut probes = Probes::attach(&target, plan)?;
    if args.probes.verbose {
        verbose_report(&probes);
    }
    if let Some(line) = probes.plan.fallback_line() {
        eprintln!("commitscope: {line}");
    }
    eprintln!(
        "commitscope: tracing pid {} ({})",
        target.pid,
        target.exe.display()
    );
    let legend = legend(&probes, &target);
    let mut sink: Box<dyn Sink> = if args.json {
        Box::new(Json::new(stdout()))
    } else {
        Box::new(Human::new(stdout()))
    };
    sink.start(&legend);
    let rt = crate::session::runtime()?;
    let r = rt.block_on(run_loop(
        &mut probes,
        &target,
        &args,
        sink.as_mut(),
        &legend,
    ));
    probes.drain_logs();
    r
}
