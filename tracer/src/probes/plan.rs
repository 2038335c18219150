//! The attach plan: what the user asked to trace ([`Target`]) and where
//! each probe goes in that binary ([`Plan`]), found before anything is
//! attached (`commitscope probes` prints it without root).
use std::path::PathBuf;

use readers::{
    family::{
        self,
        binlog::BinlogProfile,
        redo::{Pred, Profile},
        Family, ServerId,
    },
    probes::{
        profiles,
        symbols::{self, Resolved, Resolver},
    },
};

use super::{debuginfod, fsync_choice::FsyncProbe, tier::Tier};
use crate::error::{Error, Result};

/// What the user asked to trace.
#[derive(Clone, Debug)]
pub struct Target {
    pub pid: u32,
    /// The server executable (for symbols and the uprobe path).
    pub exe: PathBuf,
    pub debug_root: PathBuf,
    /// Which debuginfod servers may be asked for a debug file.
    pub debuginfod: debuginfod::Choice,
    pub server: Option<ServerId>,
    pub fsync_probe: FsyncProbe,
    /// Time each write request (entry + return probe). Off, the write probe
    /// only counts: one probe hit per commit instead of two, for callers
    /// that measure commit latency themselves (the main command's workload).
    pub write_timing: bool,
    /// Leaders and followers (exact mode, with `write_timing`).
    pub anatomy: bool,
    /// Light: no per-commit probe until a window opens
    /// ([`Probes::open_window`]); `write_timing` and `anatomy` then say
    /// what a window attaches.
    pub tier: Tier,
    /// `--io`: time the block requests each redo sync causes.
    pub io: bool,
    /// `--commit-path`: each commit's time, stage by stage (needs
    /// `write_timing` and `anatomy` for the redo's stages).
    pub commit_path: bool,
    /// `--wakeups`: the followers' wake-ups, inside the commit path.
    pub wakeups: bool,
    /// The commit path's stages split by the scheduler's accounting
    /// (off: `--no-sched-split`).
    pub sched_split: bool,
    /// A semi-sync source's wait point, where the run knows it (its own
    /// managed pair): MySQL's other hook is then left unprobed.
    pub semi_sync_wait: Option<WaitPoint>,
}

/// Where a semi-sync source waits for the acknowledgement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitPoint {
    /// After the binlog's sync, before the storage engine commits
    /// (lossless: MySQL's default).
    #[default]
    AfterSync,
    /// After the storage engine commits (MariaDB's default).
    AfterCommit,
}

impl WaitPoint {
    /// The server's own name for it (the wait point variable's value).
    pub fn sql(self) -> &'static str {
        match self {
            WaitPoint::AfterSync => "AFTER_SYNC",
            WaitPoint::AfterCommit => "AFTER_COMMIT",
        }
    }
}

/// How the write probe was placed.
#[derive(Clone, Debug)]
pub enum WriteProbe {
    /// The InnoDB function of a profile row.
    Exact {
        profile: &'static Profile,
        at: Resolved,
    },
    /// The server-layer commit function: commits, not redo write requests.
    /// `also`: the binlog's two-phase commit function, probed beside it.
    ServerLayer {
        at: Resolved,
        also: Option<Resolved>,
        missing: String,
    },
}

impl WriteProbe {
    /// Every place the write programs attach to.
    pub fn points(&self) -> Vec<&Resolved> {
        match self {
            WriteProbe::Exact { at, .. } => vec![at],
            WriteProbe::ServerLayer { at, also, .. } => std::iter::once(at).chain(also).collect(),
        }
    }

    /// "log_write_up_to", or "ha_commit_one_phase + MYSQL_BIN_LOG::log_and_order".
    pub fn source_name(&self) -> String {
        self.points()
            .iter()
            .map(|r| profiles::short_name(&r.symbol))
            .collect::<Vec<_>>()
            .join(" + ")
    }

    pub fn resolved(&self) -> &Resolved {
        match self {
            WriteProbe::Exact { at, .. } | WriteProbe::ServerLayer { at, .. } => at,
        }
    }
}

/// Where the binlog group commit's probes go: every boundary of a
/// [`BinlogProfile`] row found out of line in the binary.
#[derive(Clone, Debug)]
pub struct BinlogPlan {
    pub profile: &'static BinlogProfile,
    pub flush_open: Resolved,
    pub member: Resolved,
    pub write: Resolved,
    pub group_close: Option<(Resolved, Pred)>,
    pub sync: Option<Resolved>,
    pub commit: Option<Resolved>,
    /// Optional boundaries: a row's stage that is missing (inlined) is
    /// left out, the rest still counts.
    pub enter: Option<Resolved>,
    pub redo: Option<Resolved>,
    /// Where a leader's wait for a fuller group ends, by reason; or why
    /// the reasons are not probed (said once).
    pub close: std::result::Result<ClosePlan, String>,
}

/// The family's wait for a fuller group, found in the binary (see
/// [`family::binlog::CloseWait`]).
#[derive(Clone, Debug)]
pub enum ClosePlan {
    /// MySQL: the wait (entry and return) and its step.
    Polled { wait: Resolved, step: Resolved },
    /// MariaDB: the wait's entry and its exits' adds.
    Triggers {
        wait: Resolved,
        exits: super::triggers::Triggers,
    },
}

impl ClosePlan {
    fn find(
        r: &Resolver,
        exe: &std::path::Path,
        w: Option<family::binlog::CloseWait>,
    ) -> std::result::Result<ClosePlan, String> {
        use family::binlog::CloseWait;
        let at = |names: &[&str]| {
            r.resolve(names).filter(|x| x.out_of_line).ok_or_else(|| {
                format!(
                    "{} is not in the binary out of line",
                    profiles::short_name(names[0])
                )
            })
        };
        match w.ok_or("this server's binlog row has no wait for a fuller group")? {
            CloseWait::Polled { function, step } => Ok(ClosePlan::Polled {
                wait: at(function)?,
                step: at(step)?,
            }),
            CloseWait::Triggers { function } => {
                let wait = at(function)?;
                let exits = super::triggers::find(exe, &wait)
                    .map_err(|e| format!("{}: {e}", profiles::short_name(&wait.symbol)))?;
                Ok(ClosePlan::Triggers { wait, exits })
            }
        }
    }
}

impl BinlogPlan {
    /// The first row whose every boundary is in `r` out of line (an
    /// inlined stage boundary has no return to probe).
    fn find(r: &Resolver, server: Option<ServerId>, exe: &std::path::Path) -> Option<BinlogPlan> {
        let at = |names: &[&str]| r.resolve(names).filter(|x| x.out_of_line);
        // A boundary the row names must be found; one it leaves out is not
        // probed.
        let opt = |names: Option<&[&str]>| match names {
            Some(n) => at(n).map(Some),
            None => Some(None),
        };
        family::binlog_candidates(server).into_iter().find_map(|p| {
            let group_close = match p.group_close {
                Some((names, pred)) => Some((at(names)?, pred)),
                None => None,
            };
            Some(BinlogPlan {
                profile: p,
                flush_open: at(p.flush_open)?,
                member: at(p.member)?,
                write: at(p.write)?,
                group_close,
                sync: opt(p.sync)?,
                commit: opt(p.commit)?,
                enter: p.enter.and_then(at),
                redo: p.redo.and_then(at),
                close: ClosePlan::find(r, exe, p.close_wait),
            })
        })
    }
}

/// The attach plan, before anything touches the kernel: pure ELF work, so
/// bad input is rejected without root.
#[derive(Clone, Debug)]
pub struct Plan {
    pub write: WriteProbe,
    pub flush: Option<Resolved>,
    /// Flush symbols tried and not found (likely inlined).
    pub flush_missing: Vec<&'static str>,
    pub server: Option<ServerId>,
    pub exe: PathBuf,
    /// Debug files looked for while resolving (for `-v`).
    pub debug_looked_for: Vec<PathBuf>,
    /// What debuginfod was asked, when the other sources fell short.
    pub debuginfod: Option<debuginfod::Looked>,
    /// The binlog group commit's boundaries, where the binary has them.
    pub binlog: Option<BinlogPlan>,
    /// The server layer's commit function (`--commit-path`), out of line.
    pub commit: Option<Resolved>,
    /// Where a semi-sync source waits for its replica, where the binary
    /// has it out of line (the function's return ends the wait).
    pub ack: Option<AckPlan>,
}

/// Which of the semi-sync hooks are probed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckAt {
    /// The sync-point hook (MariaDB: the one function of both points).
    pub sync: bool,
    /// MySQL's after-commit hook.
    pub commit: bool,
}

/// The semi-sync wait's functions found in the binary.
#[derive(Clone, Debug)]
pub struct AckPlan {
    pub at_sync: Resolved,
    pub at_commit: Option<Resolved>,
}

impl AckPlan {
    fn find(r: &Resolver, server: Option<ServerId>) -> Option<AckPlan> {
        let p = Family::of(server).ack;
        let at = |names: &[&str]| r.resolve(names).filter(|x| x.out_of_line);
        Some(AckPlan {
            at_sync: at(p.at_sync)?,
            at_commit: p.at_commit.and_then(at),
        })
    }
}

impl Plan {
    pub fn new(target: &Target) -> Result<Self> {
        let mut r = Resolver::open(&target.exe, &target.debug_root)?;
        let server = target.server.or_else(|| profiles::detect(&target.exe));
        // DWARF and debuginfod come last, only when the symbol tables fall
        // short: a server's DWARF or debug file is hundreds of MB.
        let complete = |r: &Resolver| {
            family::redo_candidates(server)
                .iter()
                .find(|p| r.resolve(&[p.write_symbol]).is_some())
                .is_some_and(|p| r.resolve(p.flush_symbols).is_some())
        };
        let exact = |r: &Resolver| {
            family::redo_candidates(server)
                .iter()
                .any(|p| r.resolve(&[p.write_symbol]).is_some())
        };
        if !complete(&r) {
            let names: Vec<&str> = family::redo_candidates(server)
                .iter()
                .flat_map(|p| {
                    std::iter::once(p.write_symbol).chain(p.flush_symbols.iter().copied())
                })
                .collect();
            r.scan_dwarf(&names);
        }
        let mut debuginfod_looked = None;
        if !exact(&r) {
            if let Some(id) = r.build_id.clone().filter(|id| id.len() > 1) {
                let env = debuginfod::Env::from_process();
                let looked = debuginfod::lookup(&target.debuginfod, &env, &id, |path, data| {
                    let ok = r.add_fetched(path, data);
                    if ok && !complete(&r) {
                        r.scan_dwarf_of(path, data);
                    }
                    ok
                });
                if looked.interrupted {
                    return Err(Error::Interrupted {
                        phase: "debuginfod download",
                    });
                }
                debuginfod_looked = Some(looked);
            }
        }
        for p in family::redo_candidates(server) {
            let Some(at) = r.resolve(&[p.write_symbol]) else {
                continue;
            };
            let mut flush = r.resolve(p.flush_symbols);
            // Inlined copies of a filtered flush function (MySQL 5.x's
            // fil_flush(space)) count only where the filter's argument
            // can be read; else the kernel's redo fsyncs stand in.
            if let Some(f) = &mut flush {
                if p.flush_filter.reads_arg() {
                    f.inlined
                        .retain(|s| s.dwarf.arg_readable(p.flush_filter.arg));
                }
                if !f.out_of_line && f.inlined.is_empty() {
                    flush = None;
                }
            }
            let flush_missing = if flush.is_none() {
                p.flush_symbols.to_vec()
            } else {
                Vec::new()
            };
            return Ok(Plan {
                write: WriteProbe::Exact { profile: p, at },
                flush,
                flush_missing,
                server,
                exe: target.exe.clone(),
                binlog: BinlogPlan::find(&r, server, &target.exe),
                commit: r.resolve(profiles::COMMIT_SPAN).filter(|x| x.out_of_line),
                ack: AckPlan::find(&r, server),
                debug_looked_for: r.looked_for,
                debuginfod: debuginfod_looked,
            });
        }
        let wanted = "log_write_up_to".to_string();
        if let Some(at) = r.resolve(profiles::FALLBACKS) {
            let also = (at.symbol == profiles::FALLBACKS[0])
                .then(|| r.resolve(profiles::FALLBACK_TWO_PHASE))
                .flatten();
            return Ok(Plan {
                write: WriteProbe::ServerLayer {
                    at,
                    also,
                    missing: wanted,
                },
                flush: None,
                flush_missing: Vec::new(),
                server,
                exe: target.exe.clone(),
                binlog: BinlogPlan::find(&r, server, &target.exe),
                commit: r.resolve(profiles::COMMIT_SPAN).filter(|x| x.out_of_line),
                ack: AckPlan::find(&r, server),
                debug_looked_for: r.looked_for,
                debuginfod: debuginfod_looked,
            });
        }
        Err(Error::NoProbeSymbol {
            path: target.exe.clone(),
            wanted,
            fallbacks: profiles::FALLBACKS
                .iter()
                .map(|s| profiles::short_name(s))
                .collect::<Vec<_>>()
                .join(", "),
            debug_root: target.debug_root.clone(),
        })
    }

    /// Inlined copies of the write function whose durability cannot be
    /// read (see [`Probes::attach`]).
    pub fn unknown_sites(&self) -> usize {
        let WriteProbe::Exact { profile, at } = &self.write else {
            return 0;
        };
        at.inlined
            .iter()
            .filter(|s| !site_readable(&[profile.pred_a, profile.pred_b], s))
            .count()
    }

    /// ".symtab", "debuginfod https://…", "dwarf-inlined (3 sites)", with
    /// the flush function's when it is not the write's.
    pub fn symbol_source(&self, write_from: &str) -> String {
        let mut s = match self.write.resolved().source {
            symbols::SymbolSource::Dwarf | symbols::SymbolSource::DwarfInlined => {
                self.write.resolved().source_text()
            }
            _ => write_from.to_string(),
        };
        if let Some(f) = &self.flush {
            let from = f.source_text();
            if f.source != self.write.resolved().source || !f.inlined.is_empty() {
                s.push_str(&format!("; flush: {from}"));
            }
        }
        s
    }

    /// The one line said at start when n_write cannot be exact.
    pub fn fallback_line(&self) -> Option<String> {
        let WriteProbe::ServerLayer { missing, .. } = &self.write else {
            return None;
        };
        Some(format!(
            "{missing} not found in {} (stripped, no debug file): counting commits at {}; install the -dbgsym package for exact n_write",
            self.exe.display(),
            self.write.source_name()
        ))
    }
}

/// True when every predicate that reads an argument finds it in its
/// register at this inlined copy's entry.
pub(super) fn site_readable(preds: &[Pred], site: &symbols::Site) -> bool {
    preds
        .iter()
        .all(|p| !p.reads_arg() || site.dwarf.arg_readable(p.arg))
}
