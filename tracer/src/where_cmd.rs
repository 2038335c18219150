//! `commitscope probes --mysqld PATH`: where the probes would go in a
//! server binary, and which source of the symbol cascade placed them —
//! without root and without attaching anything. What a user runs first
//! on a stock server ("will I get exact counts here?"), and what the
//! symbol-lookup benchmark times.
use std::{io::Write, time::Instant};

use readers::probes::{profiles, symbols::Resolved};

use crate::{
    cli::ProbesArgs,
    error::Result,
    probes::{Plan, Target, WriteProbe},
};

/// One probe point, as printed.
#[derive(serde::Serialize)]
struct Point {
    role: &'static str,
    function: String,
    symbol: String,
    /// Offset in the binary of the out-of-line entry (None when the
    /// function exists only inlined).
    offset: Option<u64>,
    source: String,
    found_in: String,
    /// Inlined copies: (offset, the function it sits in).
    inlined: Vec<(u64, String)>,
}

fn point(role: &'static str, r: &Resolved) -> Point {
    Point {
        role,
        function: profiles::short_name(&r.symbol),
        symbol: r.symbol.clone(),
        offset: r.out_of_line.then_some(r.file_offset),
        source: r.source_text(),
        found_in: r.found_in.display().to_string(),
        inlined: r
            .inlined
            .iter()
            .map(|s| (s.file_offset, s.dwarf.caller.clone()))
            .collect(),
    }
}

#[derive(serde::Serialize)]
struct Report {
    binary: String,
    server: Option<String>,
    /// The profile row whose functions were found; None in fallback mode.
    profile: Option<&'static str>,
    exact: bool,
    points: Vec<Point>,
    symbol_source: String,
    fallback: Option<String>,
    /// `--server-version` said one thing, the binary's own `--version`
    /// another: the probes follow the flag, and the user is told.
    #[serde(skip_serializing_if = "Option::is_none")]
    contradiction: Option<String>,
    /// MariaDB: the adds at the group wait's exits, by the reason each
    /// stands for (MySQL's reasons need no such point).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    close_exits: Vec<(&'static str, Vec<u64>)>,
    /// Why a binlog group's reason cannot be told on this binary.
    #[serde(skip_serializing_if = "Option::is_none")]
    close_missing: Option<String>,
    seconds: f64,
}

/// `--server-version` against the binary's own version: a line when their
/// flavors differ (a MariaDB binary called MySQL 5.6 gets the wrong rows).
fn contradiction(
    given: Option<readers::family::ServerId>,
    exe: &std::path::Path,
) -> Option<String> {
    let given = given?;
    let own = profiles::detect(exe)?;
    (given.flavor != own.flavor).then(|| {
        format!(
            "--server-version says {given}, but the binary says it is {own}: the probes follow --server-version; drop it to use the binary's own"
        )
    })
}

pub fn run(args: &ProbesArgs) -> Result<()> {
    readers::probes::symbols::check_elf(&args.mysqld)?;
    let server = args.probes.server()?;
    let t0 = Instant::now();
    let plan = Plan::new(&Target {
        pid: 0,
        exe: args.mysqld.clone(),
        debug_root: args.probes.debug_dir.clone(),
        debuginfod: args.probes.debuginfod_choice(),
        server,
        fsync_probe: args.probes.fsync_probe,
        write_timing: true,
        anatomy: args.probes.anatomy,
        tier: args.probes.tier_or(crate::probes::tier::Tier::Exact),
        io: args.probes.io,
        commit_path: args.probes.commit_path,
        wakeups: args.probes.wakeups,
        sched_split: args.probes.commit_path && !args.probes.no_sched_split,
        semi_sync_wait: None,
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    let mut points: Vec<Point> = plan
        .write
        .points()
        .into_iter()
        .map(|r| point("write", r))
        .collect();
    if let Some(f) = &plan.flush {
        points.push(point("flush", f));
    }
    // Where `--commit-path` opens and closes each commit's span.
    if let Some(c) = &plan.commit {
        points.push(point("commit", c));
    }
    // The binlog's group commit: its groups and members are counted
    // wherever the binary has these; `--commit-path` times its stages.
    let mut close_exits = Vec::new();
    let mut close_missing = None;
    if let Some(b) = &plan.binlog {
        let stages = [
            Some(&b.flush_open),
            Some(&b.member),
            Some(&b.write),
            b.group_close.as_ref().map(|(r, _)| r),
            b.sync.as_ref(),
            b.commit.as_ref(),
            b.enter.as_ref(),
            b.redo.as_ref(),
        ];
        points.extend(stages.into_iter().flatten().map(|r| point("binlog", r)));
        // Where a group closes and why: the family's wait for a fuller
        // group, and (MariaDB) the three adds at its exits.
        match &b.close {
            Ok(crate::probes::plan::ClosePlan::Polled { wait, step }) => {
                points.push(point("close", wait));
                points.push(point("close", step));
            }
            Ok(crate::probes::plan::ClosePlan::Triggers { wait, exits }) => {
                points.push(point("close", wait));
                close_exits = vec![
                    ("count", exits.count.clone()),
                    ("timeout", exits.timeout.clone()),
                    ("lock_wait", exits.lock_wait.clone()),
                ];
            }
            Err(why) => close_missing = Some(why.clone()),
        }
    }
    // Where a semi-sync source waits for its replica (`--replica
    // semi-sync` in the main command, a semi-sync source under `trace`).
    if let Some(a) = &plan.ack {
        points.push(point("ack", &a.at_sync));
        if let Some(c) = &a.at_commit {
            points.push(point("ack", c));
        }
    }
    let used = plan.debuginfod.as_ref().and_then(|l| l.used.clone());
    let write_from = match (&plan.write.resolved().source, used) {
        (readers::probes::symbols::SymbolSource::Debuginfod, Some(u)) => u,
        (s, _) => s.to_string(),
    };
    let report = Report {
        binary: args.mysqld.display().to_string(),
        server: plan.server.map(|s| s.to_string()),
        profile: match &plan.write {
            WriteProbe::Exact { profile, .. } => Some(profile.name),
            WriteProbe::ServerLayer { .. } => None,
        },
        exact: matches!(plan.write, WriteProbe::Exact { .. }),
        points,
        symbol_source: plan.symbol_source(&write_from),
        fallback: plan.fallback_line(),
        contradiction: contradiction(server, &args.mysqld),
        close_exits,
        close_missing,
        seconds,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&report).unwrap_or_default()
        );
        return Ok(());
    }
    let _ = writeln!(out, "binary   {}", report.binary);
    let _ = writeln!(
        out,
        "server   {}",
        report.server.as_deref().unwrap_or("version unknown")
    );
    let _ = writeln!(
        out,
        "mode     {}",
        match report.profile {
            Some(p) => format!("exact (profile {p})"),
            None => "fallback: server-layer commits".into(),
        }
    );
    for p in &report.points {
        let at = p
            .offset
            .map(|o| format!("+{o:#x}"))
            .unwrap_or_else(|| "inlined only".into());
        let _ = writeln!(
            out,
            "{:<8} {} at {at}  [{} in {}]",
            p.role, p.function, p.source, p.found_in
        );
        for (o, caller) in &p.inlined {
            let _ = writeln!(out, "           inlined copy at +{o:#x} in {caller}");
        }
        // MariaDB's one close point: the adds that say which exit it took.
        if p.role == "close" {
            for (reason, at) in &report.close_exits {
                let at: Vec<String> = at.iter().map(|o| format!("+{o:#x}")).collect();
                let _ = writeln!(out, "           {reason} exit at {}", at.join(", "));
            }
        }
    }
    if let Some(why) = &report.close_missing {
        let _ = writeln!(out, "close    - (why each binlog group closed: {why})");
    }
    if plan.flush.is_none() {
        let _ = writeln!(
            out,
            "flush    - (n_flush = redo fsyncs counted in the kernel)"
        );
    }
    if let Some(c) = &report.contradiction {
        let _ = writeln!(out, "warning  {c}");
    }
    if let Some(f) = &report.fallback {
        let _ = writeln!(out, "note     {f}");
    }
    let _ = writeln!(out, "symbols  {}", report.symbol_source);
    let _ = writeln!(out, "resolved in {:.2} s", report.seconds);
    Ok(())
}
