//! The servers the exporter knows: each one's probes (while its process
//! runs), the totals it has counted, and what its labels say. Attaching
//! (reading symbols, loading programs) happens outside the lock, so a
//! scrape never waits for it.
use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::{discover::Found, metrics::ServerView, totals::Totals};
use crate::{
    fds::FdTable,
    probes::{Plan, Probes, Snapshot, Target, WriteProbe},
    sample::Columns,
    server::process,
};

/// Probes attached to one process of a server.
pub struct Attached {
    pub pid: u32,
    probes: Probes,
    prev: Snapshot,
    fds: FdTable,
    cols: Columns,
}

impl Attached {
    /// Freshly attached probes: their maps start empty.
    pub fn new(pid: u32, probes: Probes) -> Self {
        Attached {
            pid,
            cols: Columns::of(&probes),
            probes,
            prev: Snapshot::default(),
            fds: FdTable::new(pid),
        }
    }

    pub fn probes(&self) -> &Probes {
        &self.probes
    }
}

/// One server, named by its datadir.
pub struct Server {
    pub name: String,
    pub view: ServerView,
    pub attached: Option<Attached>,
    /// When its process went away (its series stay until --forget-after).
    pub gone_since: Option<Instant>,
}

#[derive(Default)]
pub struct Fleet {
    pub servers: BTreeMap<String, Server>,
}

/// What the probes of `a` look like as labels.
fn describe(name: &str, a: &Attached, symbol_source: String) -> ServerView {
    let plan = &a.probes.plan;
    ServerView {
        name: name.to_string(),
        version: plan
            .server
            .map_or_else(|| "unknown".into(), |s| s.to_string()),
        mode: match plan.write {
            WriteProbe::Exact { .. } => "exact",
            WriteProbe::ServerLayer { .. } => "server-layer",
        },
        symbol_source,
        fsync_probe: a.probes.kernel.used.to_string(),
        binary: plan.exe.display().to_string(),
        flush_timed: a.cols.flush_timed,
        anatomy: a.cols.anatomy,
        unknown_sites: a.cols.unknown_sites,
        attaches: 0,
        attached: true,
        totals: Totals::default(),
    }
}

impl Fleet {
    /// The pids whose probes are attached now.
    pub fn attached_pids(&self) -> Vec<u32> {
        self.servers
            .values()
            .filter_map(|s| s.attached.as_ref().map(|a| a.pid))
            .collect()
    }

    /// Reads every attached server's maps into its totals. A read that
    /// fails (the process is exiting) is said once and tried again later.
    pub fn collect(&mut self) {
        for s in self.servers.values_mut() {
            let Some(a) = s.attached.as_mut() else {
                continue;
            };
            match a.probes.read() {
                Ok(cur) => {
                    a.fds.refresh(cur.fds.keys().copied());
                    s.view.totals.absorb(&a.prev, &cur, &a.fds, &a.cols);
                    a.prev = cur;
                }
                Err(e) => eprintln!("commitscope: reading the counts of {} failed: {e}", s.name),
            }
        }
    }

    /// Names fds opened since the last look (fds get reused, so often),
    /// and keeps the kernel's redo-fd set current.
    pub fn poll_fds(&mut self) {
        for a in self
            .servers
            .values_mut()
            .filter_map(|s| s.attached.as_mut())
        {
            if let Ok(keys) = a.probes.fds() {
                a.fds.refresh(keys);
            }
            a.probes.refresh_redo_fds();
            a.probes.drain_logs();
        }
    }

    /// Detaches the servers whose process exited, after a last read; the
    /// probes are returned to be dropped off the lock (detaching takes
    /// the kernel most of a second).
    pub fn reap(&mut self) -> Vec<Probes> {
        self.collect();
        let mut gone = Vec::new();
        for s in self.servers.values_mut() {
            if let Some(pid) = s
                .attached
                .as_ref()
                .map(|a| a.pid)
                .filter(|p| !process::alive(*p))
            {
                eprintln!(
                    "commitscope: detached pid {pid} ({}): the process exited",
                    s.name
                );
                gone.extend(s.attached.take().map(|a| a.probes));
                s.gone_since = Some(Instant::now());
                s.view.attached = false;
            }
        }
        gone
    }

    /// Forgets servers gone for longer than `after`: their series end.
    pub fn forget(&mut self, after: Duration) {
        self.servers.retain(|name, s| {
            let keep = s.gone_since.is_none_or(|t| t.elapsed() < after);
            if !keep {
                eprintln!("commitscope: forgot {name}: gone for {} s", after.as_secs());
            }
            keep
        });
    }

    /// Adds freshly attached probes: a new server, or a known one whose
    /// process restarted (its totals continue).
    pub fn add(&mut self, found: &Found, a: Attached, symbol_source: String) {
        let pid = a.pid;
        let view = describe(&found.name, &a, symbol_source);
        let s = self
            .servers
            .entry(found.name.clone())
            .or_insert_with(|| Server {
                name: found.name.clone(),
                view: view.clone(),
                attached: None,
                gone_since: None,
            });
        let again = s.view.attaches > 0;
        let totals = std::mem::take(&mut s.view.totals);
        let attaches = s.view.attaches + 1;
        s.view = ServerView {
            totals,
            attaches,
            ..view
        };
        s.attached = Some(a);
        s.gone_since = None;
        eprintln!(
            "commitscope: {} pid {pid} ({}): {}, symbols from {}, fsync {}{}",
            if again { "re-attached" } else { "attached" },
            s.name,
            s.view.mode,
            s.view.symbol_source,
            s.view.fsync_probe,
            if again {
                " (the server restarted; counts continue)"
            } else {
                ""
            }
        );
    }

    /// What a scrape shows.
    pub fn views(&self) -> Vec<ServerView> {
        self.servers.values().map(|s| s.view.clone()).collect()
    }

    /// Takes every probe set off (at exit).
    pub fn detach_all(&mut self) -> Vec<Probes> {
        self.servers
            .values_mut()
            .filter_map(|s| s.attached.take().map(|a| a.probes))
            .collect()
    }
}

/// How the exporter attaches: the probe options every server shares.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    pub debug_root: PathBuf,
    pub debuginfod: crate::probes::debuginfod::Choice,
    pub server: Option<crate::probes::profiles::ServerId>,
    pub fsync_probe: crate::probes::kernel::FsyncProbe,
    pub anatomy: bool,
}

/// Resolves and attaches the probes for `pid` (slow: reads the binary's
/// symbols, loads the programs; called off the fleet's lock). Returns the
/// probes and where the write probe's symbol came from.
pub fn attach(pid: u32, opts: &AttachOptions) -> crate::error::Result<(Attached, String)> {
    let target = Target {
        pid,
        exe: process::exe_of(pid)?,
        debug_root: opts.debug_root.clone(),
        debuginfod: opts.debuginfod.clone(),
        server: opts.server,
        fsync_probe: opts.fsync_probe,
        // The return probe costs throughput: only with --anatomy.
        write_timing: opts.anatomy,
        anatomy: opts.anatomy,
    };
    let plan = Plan::new(&target)?;
    let probes = Probes::attach(&target, plan)?;
    let legend = crate::trace::legend(&probes, &target);
    Ok((Attached::new(pid, probes), legend.symbol_source))
}
