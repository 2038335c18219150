//! Reading the maps: every counter, fd and histogram once, as a
//! [`Snapshot`]; the fd keys alone, for naming them; the programs' log.
use aya::maps::{HashMap, PerCpuArray, PerCpuHashMap};
use tracer_ebpf::{maps, CommitStats, FdStats, SizeHist};

use super::{
    attach::Probes,
    snapshot::{CommitTotals, Snapshot},
};
use crate::error::{Error, Result};

impl Probes {
    /// Prints what the eBPF programs logged since the last call.
    pub fn drain_logs(&mut self) {
        if let Some(l) = self.logs.as_mut() {
            l.flush();
        }
    }

    /// The fds that have synced or written so far (cheap: keys only), so
    /// they can be named while still open.
    pub fn fds(&self) -> Result<Vec<u32>> {
        let map = self.ebpf.map(maps::FD_STATS).ok_or(Error::MapRead {
            map: maps::FD_STATS,
            detail: "missing from the object".into(),
        })?;
        let fds: PerCpuHashMap<_, u32, FdStats> =
            PerCpuHashMap::try_from(map).map_err(|e| Error::MapRead {
                map: maps::FD_STATS,
                detail: e.to_string(),
            })?;
        Ok(fds.keys().filter_map(std::result::Result::ok).collect())
    }

    /// An exact size histogram ([`SizeHist`]) summed over CPUs, cut after
    /// its last non-zero slot (one read of the whole per-CPU value).
    fn sizes(&self, map: &'static str) -> Result<Vec<u64>> {
        self.sizes_at(map, 0)
    }

    /// The exact sizes of entry `at` of `map`, summed over CPUs.
    fn sizes_at(&self, map: &'static str, at: u32) -> Result<Vec<u64>> {
        let err = |detail: String| Error::MapRead { map, detail };
        let m: PerCpuArray<_, SizeHist> = PerCpuArray::try_from(
            self.ebpf
                .map(map)
                .ok_or_else(|| err("missing from the object".into()))?,
        )
        .map_err(|e| err(e.to_string()))?;
        let mut out = vec![0u64; tracer_ebpf::EXACT_SIZES];
        for h in m.get(&at, 0).map_err(|e| err(e.to_string()))?.iter() {
            for (acc, n) in out.iter_mut().zip(h.counts) {
                *acc += n;
            }
        }
        let used = out.iter().rposition(|n| *n > 0).map_or(0, |i| i + 1);
        out.truncate(used);
        Ok(out)
    }

    /// The commit path's totals, summed over CPUs.
    fn commit_totals(&self) -> Result<CommitTotals> {
        let map = maps::CP_STATS;
        let err = |detail: String| Error::MapRead { map, detail };
        let m: PerCpuArray<_, CommitStats> = PerCpuArray::try_from(
            self.ebpf
                .map(map)
                .ok_or_else(|| err("missing from the object".into()))?,
        )
        .map_err(|e| err(e.to_string()))?;
        let mut out = CommitTotals::default();
        for c in m.get(&0, 0).map_err(|e| err(e.to_string()))?.iter() {
            out.add(&CommitTotals {
                commits: c.commits,
                total_ns: c.total_ns,
                total: c.total.slots.to_vec(),
                stage_commits: c.stage_commits,
                stage_ns: c.stage_ns,
                stage_hist: c.stage_hist.map(|h| h.buckets),
                lost: c.lost,
                total_cpu_ns: c.total_cpu_ns,
                total_runq_ns: c.total_runq_ns,
                stage_cpu_ns: c.stage_cpu_ns,
                stage_runq_ns: c.stage_runq_ns,
            });
        }
        Ok(out)
    }

    /// Reads every map once: cumulative totals since attach.
    pub fn read(&self) -> Result<Snapshot> {
        let map_err = |map: &'static str| {
            move |e: aya::maps::MapError| Error::MapRead {
                map,
                detail: e.to_string(),
            }
        };
        let missing = |map: &'static str| Error::MapRead {
            map,
            detail: "missing from the object".into(),
        };
        let mut snap = Snapshot::default();

        let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::COUNTERS)
                .ok_or_else(|| missing(maps::COUNTERS))?,
        )
        .map_err(map_err(maps::COUNTERS))?;
        for (i, slot) in snap.counters.iter_mut().enumerate() {
            let v = counters
                .get(&(i as u32), 0)
                .map_err(map_err(maps::COUNTERS))?;
            *slot = v.iter().sum();
        }

        // The fd stats right after the counters: a flush that completes
        // between the two reads is seen in one and not the other, so the
        // gap is kept as short as it can be.
        let fds: PerCpuHashMap<_, u32, FdStats> = PerCpuHashMap::try_from(
            self.ebpf
                .map(maps::FD_STATS)
                .ok_or_else(|| missing(maps::FD_STATS))?,
        )
        .map_err(map_err(maps::FD_STATS))?;
        for item in fds.iter() {
            let (fd, per_cpu) = item.map_err(map_err(maps::FD_STATS))?;
            let t = snap.fds.entry(fd).or_default();
            for s in per_cpu.iter() {
                t.syncs += s.syncs;
                t.sync_ns += s.sync_ns;
                t.syncs_in_flush += s.syncs_in_flush;
                t.writes += s.writes;
                t.write_bytes += s.write_bytes;
                for (acc, b) in t.hist.iter_mut().zip(s.hist.buckets) {
                    *acc += b;
                }
            }
        }
        snap.batch = self.sizes(maps::BATCH)?;
        snap.binlog_sizes = self.sizes(maps::BINLOG_SIZES)?;
        if self.binlog {
            for (i, out) in snap.binlog_closed_sizes.iter_mut().enumerate() {
                *out = self.sizes_at(maps::BINLOG_CLOSED_SIZES, i as u32)?;
            }
        }
        if self.commit_path {
            snap.commit_path = Some(self.commit_totals()?);
        }
        snap.threads = crate::sched_time::ThreadTimes::read(self.pid);
        if self.wakeups {
            snap.wakeups = Some(super::wakeups::read(&self.ebpf)?);
        }
        if self.binlog {
            let leaders: HashMap<_, u64, u64> = HashMap::try_from(
                self.ebpf
                    .map(maps::BINLOG_LEADERS)
                    .ok_or_else(|| missing(maps::BINLOG_LEADERS))?,
            )
            .map_err(map_err(maps::BINLOG_LEADERS))?;
            for item in leaders.iter() {
                let (tid, n) = item.map_err(map_err(maps::BINLOG_LEADERS))?;
                snap.binlog_leaders.insert(tid, n);
            }
        }

        let hists: PerCpuArray<_, tracer_ebpf::Hist> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::HISTS)
                .ok_or_else(|| missing(maps::HISTS))?,
        )
        .map_err(map_err(maps::HISTS))?;
        for (kind, out) in snap.hists.iter_mut().enumerate() {
            let v = hists.get(&(kind as u32), 0).map_err(map_err(maps::HISTS))?;
            for h in v.iter() {
                for (acc, b) in out.iter_mut().zip(h.buckets) {
                    *acc += b;
                }
            }
        }

        Ok(snap)
    }
}
