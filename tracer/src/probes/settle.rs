//! The end of a trace as a consistent cut. A flush counted at its entry
//! whose fdatasync is still running when the maps are read last would
//! leave `n_flush` one above the redo syncs inside it; a durable call
//! counted at entry and still waiting would be neither leader nor
//! follower. So the programs that open calls detach first, the calls
//! already open are given a moment to close (their return and exit
//! programs still run), and only then are the totals read.
use std::time::{Duration, Instant};

use aya::{
    maps::{Array, HashMap, MapData},
    programs::Program,
};
use tracer_ebpf::{maps, programs as prog, SyncStart, WriteStart};

use super::attach::Probes;

/// Calls still open when `Probes::settle` gave up waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unsettled {
    pub writes: usize,
    pub flushes: usize,
    pub syncs: usize,
}

impl Unsettled {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// "1 redo flush, 2 write calls": the non-zero parts, for the one-line
/// warning of a trace whose end could not wait for them.
impl std::fmt::Display for Unsettled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            (self.flushes, "redo flush", "redo flushes"),
            (self.syncs, "fsync", "fsyncs"),
            (self.writes, "write call", "write calls"),
        ];
        let mut first = true;
        for (n, one, many) in parts.into_iter().filter(|p| p.0 > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{n} {}", if n == 1 { one } else { many })?;
        }
        Ok(())
    }
}

/// How often the open calls are looked at while they close.
const POLL: Duration = Duration::from_millis(2);

/// How long a detached program's runs already under way are given to
/// finish before the open calls are looked at. Detaching does not wait
/// for them, and a uprobe program runs preemptibly: on a loaded 2-CPU
/// host a flush entry was seen to record its open call after the first
/// look had found none, so its fdatasync went uncounted (n_flush one
/// above the syncs inside flushes, in one CI run of servers.rs).
const IN_FLIGHT_GRACE: Duration = Duration::from_millis(50);

/// Detaches `programs` each on a thread of its own. Each perf event's
/// close waits for the kernel's grace period (0.07-0.13 s here), and one
/// after the other a stock MySQL's 25 took 2.4 s at every run's end; side
/// by side the waits overlap.
fn detach_side_by_side<'a>(programs: impl Iterator<Item = &'a mut Program>) {
    std::thread::scope(|s| {
        for p in programs {
            s.spawn(move || detach(p));
        }
    });
}

/// Detaches one program from everything it is attached to. Not loaded
/// (not part of this plan, or another fsync mechanism won) is fine.
fn detach(p: &mut Program) {
    let _ = match p {
        Program::UProbe(p) => p.unload(),
        Program::TracePoint(p) => p.unload(),
        Program::KProbe(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        _ => Ok(()),
    };
}

/// Every program detached side by side before the object goes: dropped
/// one by one, a stock MySQL's probes held every run's end for 2.4 s.
impl Drop for Probes {
    fn drop(&mut self) {
        detach_side_by_side(self.ebpf.programs_mut().map(|(_, p)| p));
    }
}

impl Probes {
    /// Stops counting new calls and waits up to `limit` for the open ones
    /// to close, so the next read is a consistent cut. For the last read
    /// only: the openers stay detached. Two stages: the write and flush
    /// functions stop first and the flushes in flight close, their own
    /// fdatasyncs still counted; then the fsync entries stop and the
    /// open syncs and write calls close. Entries older than the attach
    /// itself never close (their return probe was not there yet when they
    /// began) and are not waited for.
    pub fn settle(&mut self, limit: Duration) -> Unsettled {
        let deadline = Instant::now() + limit;
        let grace = |deadline: Instant| {
            std::thread::sleep(
                IN_FLIGHT_GRACE.min(deadline.saturating_duration_since(Instant::now())),
            );
        };
        self.detach_all(prog::CALL_OPENERS);
        grace(deadline);
        while self.open_flushes() > 0 && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        self.detach_all(prog::SYNC_OPENERS);
        grace(deadline);
        // The write slots are an array of one slot per thread: scanned
        // once, then only the open ones are looked at again.
        let mut slots = self.open_write_slots(None);
        loop {
            let left = Unsettled {
                writes: slots.len(),
                flushes: self.open_flushes(),
                syncs: self.open_calls::<SyncStart>(maps::SYNC_START, |s| s.ts),
            };
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(POLL);
            slots = self.open_write_slots(Some(&slots));
        }
    }

    fn detach_all(&mut self, names: &[&str]) {
        detach_side_by_side(
            self.ebpf
                .programs_mut()
                .filter(|(n, _)| names.contains(n))
                .map(|(_, p)| p),
        );
    }

    fn open_flushes(&self) -> usize {
        self.open_calls::<u64>(maps::FLUSH_START, |ts| *ts)
    }

    /// Indices of the write slots holding a call begun since the attach
    /// (of `only`, when given).
    fn open_write_slots(&self, only: Option<&[u32]>) -> Vec<u32> {
        let Some(map) = self.ebpf.map(maps::WRITE_START) else {
            return Vec::new();
        };
        let Ok(slots) = Array::<&MapData, WriteStart>::try_from(map) else {
            return Vec::new();
        };
        let open = |i: &u32| {
            slots
                .get(i, 0)
                .is_ok_and(|w| w.owner != 0 && w.ts >= self.attached_at_ns)
        };
        match only {
            Some(idx) => idx.iter().copied().filter(|i| open(i)).collect(),
            None => (0..slots.len()).filter(|i| open(i)).collect(),
        }
    }

    /// How many entries of the per-thread hash map `name` began since the
    /// attach (their entry time by `ts`).
    fn open_calls<V: aya::Pod>(&self, name: &'static str, ts: impl Fn(&V) -> u64) -> usize {
        let Some(map) = self.ebpf.map(name) else {
            return 0;
        };
        let Ok(calls) = HashMap::<&MapData, u64, V>::try_from(map) else {
            return 0;
        };
        calls
            .iter()
            .filter_map(std::result::Result::ok)
            .filter(|(_, v)| ts(v) >= self.attached_at_ns)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::Unsettled;

    #[test]
    fn names_only_what_stayed_open() {
        let u = Unsettled {
            writes: 2,
            flushes: 1,
            syncs: 0,
        };
        assert_eq!(u.to_string(), "1 redo flush, 2 write calls");
        let u = Unsettled {
            writes: 0,
            flushes: 0,
            syncs: 3,
        };
        assert_eq!(u.to_string(), "3 fsyncs");
        assert!(Unsettled::default().is_empty());
    }
}
