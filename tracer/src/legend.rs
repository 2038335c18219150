//! How every command says what it attached: the legend (the start line
//! and the JSON `start` object) and the `-v` listing of each probe. Shared
//! by `trace`, the main command and the exporter.
use std::io::{stderr, Write};

use readers::probes::{profiles, symbols::SymbolSource};

use crate::{
    probes::{debuginfod::Looked, Probes, Target, WriteProbe},
    records::run::Legend,
};

/// What each column counts, said once at start.
pub fn legend(probes: &Probes, target: &Target) -> Legend {
    let plan = &probes.plan;
    let (profile, durable) = match &plan.write {
        WriteProbe::Exact { profile, .. } => {
            let durable = match profile.durable {
                readers::family::redo::Source::PredB => {
                    "flush_to_disk argument != 0 (n_write: wait == LOG_WAIT_ONE_GROUP)"
                }
                _ => "durable/flush argument true",
            };
            (Some(profile.name.to_string()), Some(durable.to_string()))
        }
        WriteProbe::ServerLayer { .. } => (None, None),
    };
    let write_from = match (plan.write.resolved().source, &plan.debuginfod) {
        // Which server (or the cache) it came from: "debuginfod https://…".
        (SymbolSource::Debuginfod, Some(Looked { used: Some(u), .. })) => u.clone(),
        (s, _) => s.to_string(),
    };
    let light = !probes.tier.per_commit();
    Legend {
        probes: probes.tier,
        pid: target.pid,
        exe: target.exe.display().to_string(),
        server: plan.server.map(|s| s.to_string()),
        profile,
        n_write_source: if light {
            format!(
                "{} (SHOW GLOBAL STATUS: light probes, none per commit)",
                crate::server::commits::COUNTER
            )
        } else {
            plan.write.source_name()
        },
        n_write_symbol_from: write_from.clone(),
        symbol_source: plan.symbol_source(&write_from),
        durable_source: durable.filter(|_| !light),
        n_flush_source: plan
            .flush
            .as_ref()
            .map(|f| profiles::short_name(&f.symbol))
            .unwrap_or_else(|| "redo fsync/fdatasync (kernel)".into()),
        fsync_probe: probes.kernel.used.to_string(),
        fsync_function: probes.kernel.kernel_functions.clone(),
        fsync_timed: probes.kernel.sync_timed(),
        write_probe: probes
            .kernel
            .write_probes
            .clone()
            .unwrap_or_else(|| crate::probes::kernel::NO_WRITE_PROBES.into()),
        fallback: plan.fallback_line().filter(|_| !light),
        anatomy: (probes.anatomy && !light).then(|| anatomy_meaning(plan)),
        io: probes.io.as_ref().map(crate::probes::io::Place::describe),
        io_columns: probes.io_counted(),
        binlog_columns: probes.binlog_counted(),
        commit_path_columns: probes.commit_path,
    }
}

/// What "leader" means on this server. MySQL 8.0.11+ flushes the redo
/// log from its dedicated log_flusher thread: user threads only wait, so
/// they are all followers and the flusher's batches are the flush sizes.
fn anatomy_meaning(plan: &crate::probes::Plan) -> String {
    let flush = plan
        .flush
        .as_ref()
        .map(|f| profiles::short_name(&f.symbol))
        .unwrap_or_else(|| "the redo fsync".into());
    match &plan.write {
        WriteProbe::Exact { profile, .. } if profile.name.starts_with("mysql-8") => format!(
            "MySQL 8: {flush} runs in the log_flusher thread, so user threads are followers that wait for it; batch = durable requests per flusher flush"
        ),
        _ => format!(
            "leader: a durable {} call whose own thread runs {flush} before it returns; follower: one that returns without",
            plan.write.source_name()
        ),
    }
}

pub fn verbose_report(probes: &Probes) {
    let mut e = stderr().lock();
    for a in &probes.attached {
        let _ = writeln!(
            e,
            "commitscope: {} {:<9} {} at {}+{:#x}{} (symbol from {})",
            a.role,
            a.kind,
            profiles::short_name(&a.symbol),
            a.file.display(),
            a.offset,
            a.inlined_into
                .as_deref()
                .map(|c| format!(", inlined into {c}"))
                .unwrap_or_default(),
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
    let at = k
        .kernel_functions
        .as_deref()
        .map(|f| format!(" on {f}"))
        .unwrap_or_default();
    let refused = k
        .fallback_reason
        .as_deref()
        .map(|why| format!(" (refused first: {why})"))
        .unwrap_or_default();
    let _ = writeln!(e, "commitscope: fsync: {} probes{at}{refused}", k.used);
    let writes = k
        .write_probes
        .as_deref()
        .unwrap_or(crate::probes::kernel::NO_WRITE_PROBES);
    let _ = writeln!(e, "commitscope: writes: {writes}");
    for p in &probes.plan.debug_looked_for {
        let _ = writeln!(e, "commitscope: debug file looked for: {}", p.display());
    }
    if let Some(l) = &probes.plan.debuginfod {
        let _ = writeln!(
            e,
            "commitscope: debuginfod servers: {}; used: {}",
            l.servers,
            l.used.as_deref().unwrap_or("none")
        );
    }
}
