//! The servers the exporter knows: each one's probes (while its process
//! runs), the totals it has counted, and what its labels say. Attaching
//! (reading symbols, loading programs) happens outside the lock, so a
//! scrape never waits for it.
use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use super::{
    discover::Found,
    metrics::ServerView,
    totals::{Figures, Totals},
};
use crate::{
    fds::FdTable,
    probes::{tier::Tier, Plan, Probes, Snapshot, Target, WindowLinks, WriteProbe},
    sample::{Columns, Delta, Interval},
    server::{
        commits::{self, CommitCounter, Running},
        process,
        status::WindowCounters,
    },
};

/// Probes attached to one process of a server.
pub struct Attached {
    pub pid: u32,
    probes: Probes,
    prev: Snapshot,
    fds: FdTable,
    cols: Columns,
    /// Light tier: the login that reads the server's commit counter (None
    /// when it could not log in). Shared: the commit reader's thread and
    /// the windows' edges query on it in turn.
    commits: Option<Login>,
    commit_sum: Running,
    /// The open exact window: when it began, and the maps then.
    window: Option<(SystemTime, Snapshot)>,
    /// The server's own replication counters as the window opened, and
    /// the window's maps just after that read.
    window_acks: Option<(WindowCounters, Option<Stamped>)>,
}

/// A light server's login, locked by whichever thread queries on it.
type Login = Arc<Mutex<CommitCounter>>;

/// The window's maps, and when they were read.
type Stamped = (SystemTime, Snapshot);

/// A server's replication counters read beside its open window, with the
/// window's maps read just before and just after the query: the figures
/// set beside the server's are taken between its two reads (from the
/// first's after to the second's before), so a slow read on a busy host
/// adds no commits to ours that the server's counters never saw.
pub struct ServerRead {
    pid: u32,
    counters: WindowCounters,
    before: Option<Stamped>,
    after: Option<Stamped>,
}

impl Attached {
    /// Freshly attached probes: their maps start empty.
    pub fn new(pid: u32, probes: Probes, commits: Option<CommitCounter>) -> Self {
        Attached {
            pid,
            cols: Columns::of(&probes),
            probes,
            prev: Snapshot::default(),
            fds: FdTable::new(pid),
            commits: commits.map(|c| Arc::new(Mutex::new(c))),
            commit_sum: Running::default(),
            window: None,
            window_acks: None,
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
        sync_timed: a.cols.sync_timed,
        anatomy: a.cols.anatomy,
        binlog: a.cols.binlog,
        binlog_closed_by: a.cols.binlog_closed_by,
        io: a.cols.io,
        tier: a.probes.tier,
        commit_counter: a.commits.is_some().then_some(commits::COUNTER),
        last_window: None,
        unknown_sites: a.cols.unknown_sites,
        writes: a.cols.writes,
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

    /// Opens an exact window on every attached light server; returns how
    /// many opened. A server whose window cannot attach says so and goes
    /// on light.
    pub fn open_windows(&mut self) -> usize {
        let mut opened = 0;
        for s in self.servers.values_mut() {
            let Some(a) = s.attached.as_mut() else {
                continue;
            };
            if a.probes.tier.per_commit() || a.window.is_some() {
                continue;
            }
            let start = SystemTime::now();
            // The base before the window's probes: a commit that ends
            // between their attach and a later read would be left out of
            // the window it was timed in.
            let base = a
                .probes
                .read()
                .and_then(|b| a.probes.open_window().map(|()| b));
            match base {
                Ok(b) => {
                    a.window = Some((start, b));
                    opened += 1;
                }
                Err(e) => {
                    drop(a.probes.close_window());
                    eprintln!("commitscope: no exact window on {}: {e}", s.name);
                }
            }
        }
        opened
    }

    /// Keeps each open window's server counters at its start (`acks`:
    /// read just after the windows opened, by server name).
    pub fn set_window_acks(&mut self, acks: BTreeMap<String, ServerRead>) {
        for (name, r) in acks {
            if let Some(a) = self
                .attached_as(&name, r.pid)
                .filter(|a| a.window.is_some())
            {
                a.window_acks = Some((r.counters, r.after));
            }
        }
    }

    /// The open window's maps of `name` now, if it still runs `pid`.
    fn window_maps(&mut self, name: &str, pid: u32) -> Option<Stamped> {
        let a = self.attached_as(name, pid).filter(|a| a.window.is_some())?;
        let s = a.probes.read().ok()?;
        Some((SystemTime::now(), s))
    }

    /// The attachment of `name` if it is still to process `pid`.
    fn attached_as(&mut self, name: &str, pid: u32) -> Option<&mut Attached> {
        self.servers
            .get_mut(name)?
            .attached
            .as_mut()
            .filter(|a| a.pid == pid)
    }

    /// Ends every open window: reads the maps, takes the window's probes
    /// off, and keeps the figures as the server's last window (with the
    /// server's own replication counts over it, from `acks`: read just
    /// before). The figures set beside those counts (the group's and the
    /// semi-sync waits) are taken between the server's two reads where
    /// both had the window's maps read beside them. The probes are
    /// returned to be dropped off the lock.
    pub fn close_windows(&mut self, mut acks: BTreeMap<String, ServerRead>) -> Vec<WindowLinks> {
        let mut out = Vec::new();
        for (name, s) in self.servers.iter_mut() {
            let Some(a) = s.attached.as_mut() else {
                continue;
            };
            let Some((start, base)) = a.window.take() else {
                continue;
            };
            let (server, inner) = match a.window_acks.take() {
                Some((was, after_first)) => match acks.remove(name).filter(|r| r.pid == a.pid) {
                    Some(r) => (Some(r.counters.since(&was)), after_first.zip(r.before)),
                    None => (None, None),
                },
                None => (None, None),
            };
            let end = a.probes.read();
            let end_at = SystemTime::now();
            out.push(a.probes.close_window());
            match end {
                Ok(cur) => {
                    a.fds.refresh(cur.fds.keys().copied());
                    let cols = Columns::window_of(&a.probes);
                    let d = Delta {
                        prev: &base,
                        cur: &cur,
                        fds: &a.fds,
                        cols: &cols,
                    };
                    let mut totals = Totals::default();
                    totals.add(&d);
                    let secs = end_at
                        .duration_since(start)
                        .unwrap_or_default()
                        .as_secs_f64();
                    let i = Interval::of(&d, secs, secs);
                    let (group, replication) = match &inner {
                        Some(((from, prev), (to, cur))) => {
                            let d = Delta {
                                prev,
                                cur,
                                fds: &a.fds,
                                cols: &cols,
                            };
                            let secs = to.duration_since(*from).unwrap_or_default().as_secs_f64();
                            let j = Interval::of(&d, secs, secs);
                            (j.group, j.replication)
                        }
                        None => (i.group, i.replication),
                    };
                    s.view.last_window = Some(Figures {
                        start,
                        end: end_at,
                        totals,
                        commit_path: i.commit_path,
                        replication,
                        server_acks: server.and_then(|c| c.acks),
                        group,
                        server_group_proposed: server.and_then(|c| c.group_proposed),
                        server_group_failed: server.and_then(|c| c.group_failed),
                    });
                }
                Err(e) => eprintln!("commitscope: the exact window on {} is lost: {e}", s.name),
            }
        }
        out
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
    pub server: Option<readers::family::ServerId>,
    pub fsync_probe: crate::probes::fsync_choice::FsyncProbe,
    pub anatomy: bool,
    pub tier: Tier,
    /// Light tier: where the commit counter's login comes from.
    pub defaults_file: Option<PathBuf>,
    /// `--commit-path`: each exact window times its commits' path too.
    pub commit_path: bool,
    /// `--io`: the block requests under each redo sync (two block
    /// tracepoints and one on completion, per request on the device).
    pub io: bool,
    /// `--wakeups` (with `--commit-path`): each exact window counts the
    /// followers' wake-ups too, its scheduler tracepoints on only while
    /// the window is open.
    pub wakeups: bool,
}

/// The light servers' logins, by server name and pid: cloned out of the
/// fleet so that their queries run off its lock (a slow server never
/// holds a scrape).
fn logins(fleet: &Mutex<Fleet>) -> Vec<(String, u32, Login)> {
    match fleet.lock() {
        Ok(f) => f
            .servers
            .iter()
            .filter_map(|(name, s)| {
                let a = s.attached.as_ref()?;
                Some((name.clone(), a.pid, a.commits.clone()?))
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads the commit counter of every light server that has a login, and
/// adds what each moved to its totals. A failed read is said once; the
/// login logs in again at its next read.
pub fn read_commits(fleet: &Mutex<Fleet>, rt: &tokio::runtime::Runtime) {
    for (name, pid, login) in logins(fleet) {
        let Ok(mut c) = login.lock() else {
            continue;
        };
        let n = rt.block_on(c.read());
        let say = n.is_err() && c.first_failure();
        drop(c);
        match n {
            Ok(n) => {
                let Ok(mut f) = fleet.lock() else {
                    return;
                };
                let Some(s) = f.servers.get_mut(&name) else {
                    continue;
                };
                let Some(a) = s.attached.as_mut().filter(|a| a.pid == pid) else {
                    continue;
                };
                let before = a.commit_sum.total;
                a.commit_sum.add(n);
                s.view.totals.commits += a.commit_sum.total - before;
            }
            Err(e) if say => eprintln!(
                "commitscope: commits of {name} not read ({e}); logging in again at each read"
            ),
            Err(_) => {}
        }
    }
}

/// The replication counters of every light server with a login that is a
/// semi-sync source or a group member, by server name, with the pid they
/// were read from.
/// A failed read is said; the login drops its connection and logs in
/// again at its next read.
pub fn read_server_acks(
    fleet: &Mutex<Fleet>,
    rt: &tokio::runtime::Runtime,
) -> BTreeMap<String, ServerRead> {
    let maps = |name: &str, pid| fleet.lock().ok().and_then(|mut f| f.window_maps(name, pid));
    logins(fleet)
        .into_iter()
        .filter_map(|(name, pid, login)| {
            let mut c = login.lock().ok()?;
            let before = maps(&name, pid);
            let r = rt.block_on(c.window_counters());
            let after = maps(&name, pid);
            match r {
                Ok(counters) if counters.acks.is_some() || counters.group_proposed.is_some() => {
                    let read = ServerRead {
                        pid,
                        counters,
                        before,
                        after,
                    };
                    Some((name, read))
                }
                Ok(_) => None,
                Err(e) => {
                    eprintln!("commitscope: the replication counters of {name} not read: {e}");
                    None
                }
            }
        })
        .collect()
}

/// Resolves and attaches the probes for `pid` (slow: reads the binary's
/// symbols, loads the programs; called off the fleet's lock). Returns the
/// probes and where the write probe's symbol came from.
pub fn attach(
    pid: u32,
    opts: &AttachOptions,
    rt: &tokio::runtime::Runtime,
) -> crate::error::Result<(Attached, String)> {
    let target = Target {
        pid,
        exe: process::exe_of(pid)?,
        debug_root: opts.debug_root.clone(),
        debuginfod: opts.debuginfod.clone(),
        server: opts.server,
        fsync_probe: opts.fsync_probe,
        // The return probe costs throughput: only with --anatomy, or in
        // a light tier's windows, which are short.
        write_timing: opts.anatomy || !opts.tier.per_commit(),
        anatomy: opts.anatomy || !opts.tier.per_commit(),
        tier: opts.tier,
        io: opts.io,
        commit_path: opts.commit_path,
        wakeups: opts.wakeups && opts.commit_path,
        sched_split: true,
        semi_sync_wait: None,
    };
    let plan = Plan::new(&target)?;
    let probes = Probes::attach(&target, plan)?;
    if opts.commit_path && !probes.commit_path {
        if let Some(why) = crate::probes::cost::commit_path_line(true, false, &probes.sched_split) {
            eprintln!("commitscope: pid {pid}: {why}");
        }
    }
    // A kernel that cannot split the stages: said once per server.
    if let crate::probes::sched_split::SplitState::Unavailable(_) = &probes.sched_split {
        if let Some(why) = probes.sched_split.describe() {
            eprintln!("commitscope: pid {pid}: --commit-path: {why}");
        }
    }
    let legend = crate::legend::legend(&probes, &target);
    let commits = match opts.tier.per_commit() {
        true => None,
        false => rt.block_on(commits::login_or_say(pid, opts.defaults_file.as_deref())),
    };
    Ok((Attached::new(pid, probes, commits), legend.symbol_source))
}
