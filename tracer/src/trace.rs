//! `commitscope trace`: attach to a running server and print per-interval
//! counts until Ctrl-C, `--duration`, or the server exits.
use std::{
    io::stdout,
    path::Path,
    time::{Duration, Instant, SystemTime},
};

use crate::{
    cli::TraceArgs,
    error::{Error, Result},
    probes::{cost, Plan, Probes, Target},
    records::run::{EndReason, Legend, Restart, Sink, Summary},
    report::{human::Human, json::Json},
    sample::ProbeSampler,
    server::{commits, process},
};

/// Turns the CLI into a target: pid, executable, options.
pub fn target(args: &TraceArgs) -> Result<Target> {
    let pid = match (args.pid, &args.mysqld) {
        (Some(pid), _) => pid,
        (None, Some(path)) => {
            // Reject a non-ELF before looking for processes; the symbols
            // are read once, later, by Plan::new.
            readers::probes::symbols::check_elf(path)?;
            process::pid_of(path)?
        }
        // clap requires one of them; a library caller may not.
        (None, None) => return Err(Error::Runtime("pass --pid or --mysqld".into())),
    };
    let exe = process::exe_of(pid)?;
    let server = args.probes.server()?;
    if !args.interval.is_finite() || args.interval < 0.01 {
        return Err(Error::BadInterval {
            given: args.interval,
        });
    }
    let tier = args.probes.tier_or(crate::probes::tier::Tier::Exact);
    let commit_path = args.probes.commit_path_in(tier)?;
    Ok(Target {
        pid,
        exe,
        debug_root: args.probes.debug_dir.clone(),
        debuginfod: args.probes.debuginfod_choice(),
        server,
        fsync_probe: args.probes.fsync_probe,
        // The commit path's redo stages are timed by the return probe.
        write_timing: !args.no_write_timing || args.probes.commit_path,
        // Free where the return probe is attached anyway.
        anatomy: !args.no_write_timing || args.probes.commit_path,
        tier,
        io: args.probes.io,
        commit_path,
        wakeups: args.probes.wakeups,
        sched_split: !args.probes.no_sched_split,
        semi_sync_wait: None,
    })
}

/// Whether `pid` is gone (exited, or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    !process::alive(pid)
}

/// The process of `exe` that replaced the followed one, if exactly one
/// did: started after it (`after`, its start time), so other servers of
/// the same binary that ran beside it are not taken for it.
fn restarted(exe: &Path, old: u32, after: u64) -> Option<u32> {
    let new: Vec<u32> = process::pids_of(exe)
        .ok()?
        .into_iter()
        .filter(|&pid| pid != old && process::start_ticks(pid).is_some_and(|t| t >= after))
        .collect();
    match new.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The tick loop: one line per interval, then the summary. With
/// `--mysqld`, a server that exits is waited for and followed: the new
/// process of the same binary is attached to within one poll (100 ms)
/// and the counts continue from where they were.
async fn run_loop(
    mut probes: Probes,
    mut target: Target,
    args: &TraceArgs,
    sink: &mut dyn Sink,
    legend: &Legend,
) -> Result<()> {
    // The maps were created empty at attach: counting starts there, so
    // the baseline is zero, not a first read that could miss early events.
    let mut sampler = ProbeSampler::since_attach(&probes, target.pid);
    // Light probes: commits from the server's counter, read each tick and
    // summed across restarts (a new server's counter starts again).
    let light = !probes.tier.per_commit();
    let mut commits = match light {
        true => commits::login_or_say(target.pid, args.defaults_file.as_deref()).await,
        false => None,
    };
    let mut counted = commits::Running::default();
    if let Some(c) = commits.as_mut() {
        if let Ok(n) = c.read().await {
            counted.add(n);
        }
    }
    let mut intervals = 0u64;
    let mut pids = vec![target.pid];
    let period = Duration::from_secs_f64(args.interval);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // fds are named while they are open: poll the fd map faster than the
    // output so short-lived descriptors are still attributed. The same
    // poll notices an exit (and, when following, the new process) fast.
    let mut poll = tokio::time::interval(FOLLOW_POLL);
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
    // When the followed process started (read while it lives), and, while
    // it is down, since when and which pid left.
    let mut started = process::start_ticks(target.pid).unwrap_or(0);
    let mut down: Option<(Instant, u32)> = None;

    let end = loop {
        tokio::select! {
            _ = tick.tick(), if down.is_none() => {
                // A signal heard by the flag (installed when the trace
                // began) before the handlers above existed.
                if crate::interrupt::fired() {
                    break EndReason::Interrupted;
                }
                let n = read_commits(&mut commits, &mut counted).await;
                let i = sampler.tick_with(&probes, n)?;
                sink.interval(SystemTime::now(), &i);
                intervals += 1;
                if intervals == 1 && args.probes.verbose {
                    if let Ok(snap) = probes.read() {
                        let h = cost::hits(
                            &snap,
                            i.elapsed_s,
                            probes.tier,
                            target.write_timing,
                            i.n_write,
                            probes.light_syncs_timed(),
                        );
                        eprintln!("commitscope: {}", cost::line(&h, probes.tier));
                    }
                }
                if gone(target.pid) && args.mysqld.is_none() {
                    break EndReason::TargetExited;
                }
            }
            _ = poll.tick() => {
                if let Some(exe) = args.mysqld.as_deref().filter(|_| down.is_none() && gone(target.pid)) {
                    // What the server did between the last tick and its exit.
                    let i = sampler.tick(&probes)?;
                    if sampler.changed() {
                        sink.interval(SystemTime::now(), &i);
                        intervals += 1;
                    }
                    eprintln!(
                        "commitscope: pid {} exited; waiting for {} to start again",
                        target.pid,
                        exe.display()
                    );
                    // Looked for at once below: a restart may be quick.
                    down = Some((Instant::now(), target.pid));
                }
                let Some((since, old)) = down else {
                    sampler.poll_fds(&mut probes);
                    continue;
                };
                let Some(pid) = args.mysqld.as_deref().and_then(|exe| restarted(exe, old, started)) else {
                    continue;
                };
                let new_start = process::start_ticks(pid).unwrap_or(started);
                probes.drain_logs();
                let t0 = Instant::now();
                let (p, t) = match attach_restarted(&probes, &target, pid) {
                    Ok(next) => next,
                    Err(e) => {
                        // It may have died at once (a crash loop):
                        // wait for the next one, counts kept.
                        eprintln!("commitscope: cannot trace pid {pid} ({e}); waiting for the next start");
                        started = new_start + 1;
                        down = Some((since, pid));
                        continue;
                    }
                };
                started = new_start;
                detach_in_background(std::mem::replace(&mut probes, p));
                target = t;
                sampler.reattach(&probes, pid);
                if light {
                    // The old login went with the old server.
                    commits = commits::login_or_say(pid, args.defaults_file.as_deref()).await;
                }
                pids.push(pid);
                let down_s = since.elapsed().as_secs_f64();
                let age = process::age(pid)
                    .map_or_else(|| "?".into(), |a| a.as_millis().to_string());
                eprintln!(
                    "commitscope: following pid {pid} (down {down_s:.1} s; attached {age} ms after it started, the attach itself {} ms)",
                    t0.elapsed().as_millis()
                );
                sink.restart(SystemTime::now(), &Restart { previous_pid: old, pid, down_s });
                down = None;
                tick.reset();
            }
            _ = &mut sleep_until_deadline => break EndReason::Duration,
            _ = sigint.recv() => break EndReason::Interrupted,
            _ = sigterm.recv() => break EndReason::Interrupted,
            _ = sighup.recv() => break EndReason::Interrupted,
        }
    };
    // Calls open at the end close before the last read: every counted
    // flush then has its fdatasync, every durable call its role.
    if down.is_none() {
        let open = probes.settle(SETTLE_LIMIT);
        if !open.is_empty() {
            eprintln!(
                "commitscope: {open} still open {} ms after the trace ended: the last totals count them without what they had not done yet (their fsync, their leader/follower role)",
                SETTLE_LIMIT.as_millis()
            );
        }
    }
    // The partial last interval (also what a dying target did after the
    // last tick), so the totals equal the sum of the printed lines.
    let n = read_commits(&mut commits, &mut counted).await;
    let i = sampler.tick_with(&probes, n)?;
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
            pids,
        },
    );
    probes.drain_logs();
    Ok(())
}

/// The light tier's commits so far (summed over the server's restarts),
/// or None when the counter cannot be read now.
async fn read_commits(
    login: &mut Option<commits::CommitCounter>,
    counted: &mut commits::Running,
) -> Option<u64> {
    let n = login.as_mut()?.read().await.ok()?;
    counted.add(n);
    Some(counted.total)
}

/// How long the calls open when a trace ends may take to close: a
/// redo fdatasync's p99 is a few ms, a stalled disk's can be far longer,
/// and then the cut is a little inconsistent rather than Ctrl-C slow.
const SETTLE_LIMIT: Duration = Duration::from_millis(250);

/// How often a followed server's exit and return are looked for.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// Attaches to `pid`, the same binary restarted. The old probes stay
/// attached meanwhile (their programs filter on the old pid, so nothing
/// is counted twice). The attach plan is reused when the executable is
/// the same file; an upgraded binary is resolved again.
fn attach_restarted(old: &Probes, target: &Target, pid: u32) -> Result<(Probes, Target)> {
    let exe = process::exe_of(pid)?;
    let next = Target {
        pid,
        exe,
        ..target.clone()
    };
    let plan = if same_file(&next.exe, &old.plan.exe) {
        old.plan.clone()
    } else {
        Plan::new(&next)?
    };
    let probes = Probes::attach(&next, plan)?;
    Ok((probes, next))
}

/// Detaching takes the kernel most of a second (each perf event's close
/// waits for an RCU grace period): done on a thread of its own, so the
/// new server is counted at once.
fn detach_in_background(old: Probes) {
    std::thread::spawn(move || drop(old));
}

/// Same device and inode: the file the plan's offsets were read from.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
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
    // From here a Ctrl-C is a flag, never the default death: attaching
    // and the moments before the async handlers exist are covered too
    // (checked after attach and at every tick).
    crate::interrupt::install();
    let target = target(&args)?;
    let plan = Plan::new(&target)?;
    if crate::interrupt::fired() {
        return Err(Error::Interrupted {
            phase: "read symbols",
        });
    }
    let probes = Probes::attach(&target, plan)?;
    if crate::interrupt::fired() {
        return Err(Error::Interrupted {
            phase: "attach probes",
        });
    }
    if let Some(line) = crate::probes::cost::commit_path_line(
        target.commit_path,
        probes.commit_path,
        &probes.sched_split,
    ) {
        eprintln!("commitscope: {line}");
        if probes.wakeups {
            eprintln!("commitscope: {}", crate::probes::cost::WAKEUPS_COST);
        }
    }
    if args.probes.verbose {
        crate::legend::verbose_report(&probes);
    }
    if let Some(line) = probes
        .plan
        .fallback_line()
        .filter(|_| probes.tier.per_commit())
    {
        eprintln!("commitscope: {line}");
    }
    eprintln!(
        "commitscope: tracing pid {} ({})",
        target.pid,
        target.exe.display()
    );
    let legend = crate::legend::legend(&probes, &target);
    let mut sink: Box<dyn Sink> = if args.json {
        Box::new(Json::new(stdout()))
    } else {
        Box::new(Human::new(stdout()))
    };
    sink.start(&legend);
    let rt = crate::runtime::runtime()?;
    rt.block_on(run_loop(probes, target, &args, sink.as_mut(), &legend))
}
