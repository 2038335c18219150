//! `--wakeups`: the scheduler's wake-up and switch tracepoints, counting
//! inside the followers' waits (see the eBPF side's `wakeups`): where the
//! records keep what they read, attaching them, and the totals they give.
use std::path::Path;

use aya::{
    maps::PerCpuArray,
    programs::{
        trace_point::{TracePointLink, TracePointLinkId},
        TracePoint,
    },
    Ebpf,
};
use tracer_ebpf::{maps, programs as prog, WakeStats, WAKER_ROLES};

use super::{io::format_fields, kernel};
use crate::error::{Error, Result};

/// Byte offsets in the tracepoints' records (their `format` files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedLayout {
    pub wakeup_pid: u32,
    pub switch_prev_state: u32,
    pub switch_next_pid: u32,
}

/// The layout this kernel's tracefs describes.
pub fn layout(tracefs: &Path) -> std::result::Result<SchedLayout, String> {
    let field = |event: &str, name: &str| -> std::result::Result<u32, String> {
        let p = tracefs.join("events/sched").join(event).join("format");
        let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        format_fields(&s)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, o)| o)
            .ok_or_else(|| format!("sched/{event} has no field {name}"))
    };
    Ok(SchedLayout {
        wakeup_pid: field("sched_wakeup", "pid")?,
        switch_prev_state: field("sched_switch", "prev_state")?,
        switch_next_pid: field("sched_switch", "next_pid")?,
    })
}

/// Attaches both tracepoints; their links, for a window to take off.
pub fn attach(ebpf: &mut Ebpf) -> Result<Vec<(&'static str, TracePointLinkId)>> {
    kernel::ensure_tracefs()?;
    let mut links = Vec::new();
    for (name, event) in [
        (prog::WAKE_SCHED_WAKEUP, "sched_wakeup"),
        (prog::WAKE_SCHED_SWITCH, "sched_switch"),
    ] {
        let attached = kernel::tracepoint(ebpf, name).and_then(|p| {
            p.attach("sched", event).map_err(|e| Error::Attach {
                what: format!("tracepoint sched/{event}"),
                detail: e.to_string(),
            })
        });
        match attached {
            Ok(id) => links.push((name, id)),
            Err(e) => {
                // None left on: a window that failed to open costs nothing.
                drop(take_links(ebpf, links));
                return Err(e);
            }
        }
    }
    Ok(links)
}

/// Takes the `links` [`attach`] made off their programs: dropping what
/// it returns detaches them.
pub fn take_links(
    ebpf: &mut Ebpf,
    links: Vec<(&'static str, TracePointLinkId)>,
) -> Vec<TracePointLink> {
    links
        .into_iter()
        .filter_map(|(name, id)| {
            let p: &mut TracePoint = ebpf.program_mut(name)?.try_into().ok()?;
            p.take_link(id).ok()
        })
        .collect()
}

/// The kernel's `WakeStats` summed over CPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct WakeTotals {
    pub waits: u64,
    pub wakeups: u64,
    pub wasted: u64,
    pub by_role: [u64; WAKER_ROLES],
    pub leader_ended: u64,
    /// Wake-up to running ([`tracer_ebpf::FineHist`] slots).
    pub wake_to_run: Vec<u64>,
}

impl Default for WakeTotals {
    fn default() -> Self {
        WakeTotals {
            waits: 0,
            wakeups: 0,
            wasted: 0,
            by_role: [0; WAKER_ROLES],
            leader_ended: 0,
            wake_to_run: vec![0; tracer_ebpf::FINE_SLOTS],
        }
    }
}

impl WakeTotals {
    pub fn add(&mut self, o: &WakeTotals) {
        self.waits += o.waits;
        self.wakeups += o.wakeups;
        self.wasted += o.wasted;
        for (a, b) in self.by_role.iter_mut().zip(o.by_role) {
            *a += b;
        }
        self.leader_ended += o.leader_ended;
        for (a, b) in self.wake_to_run.iter_mut().zip(&o.wake_to_run) {
            *a += b;
        }
    }

    fn of(s: &WakeStats) -> WakeTotals {
        WakeTotals {
            waits: s.waits,
            wakeups: s.wakeups,
            wasted: s.wasted,
            by_role: s.by_role,
            leader_ended: s.leader_ended,
            wake_to_run: s.wake_to_run.slots.to_vec(),
        }
    }
}

/// The totals in the object's map.
pub fn read(ebpf: &Ebpf) -> Result<WakeTotals> {
    let map = maps::WAKE_STATS;
    let err = |detail: String| Error::MapRead { map, detail };
    let m: PerCpuArray<_, WakeStats> = PerCpuArray::try_from(
        ebpf.map(map)
            .ok_or_else(|| err("missing from the object".into()))?,
    )
    .map_err(|e| err(e.to_string()))?;
    let mut out = WakeTotals::default();
    for s in m.get(&0, 0).map_err(|e| err(e.to_string()))?.iter() {
        out.add(&WakeTotals::of(s));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This kernel's tracefs (mounted by the eBPF tests' runs) gives the
    /// offsets the eBPF side defaults to on x86-64.
    #[test]
    fn this_kernels_sched_records_are_laid_out_as_expected() {
        let t = Path::new(kernel::TRACEFS);
        if !t.join("events/sched").is_dir() {
            eprintln!(
                "SKIP: no {} (not root, or tracefs not mounted)",
                t.display()
            );
            return;
        }
        let l = layout(t).expect("layout");
        assert_eq!(
            l,
            SchedLayout {
                wakeup_pid: 24,
                switch_prev_state: 32,
                switch_next_pid: 56,
            }
        );
    }

    #[test]
    fn a_missing_tracefs_is_named() {
        let e = layout(Path::new("/nonexistent")).unwrap_err();
        assert!(
            e.contains("/nonexistent/events/sched/sched_wakeup/format"),
            "{e}"
        );
    }
}
