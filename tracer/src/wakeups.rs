//! The followers' wake-ups over an interval (`--wakeups`): how many waits
//! ended, how many wake-ups they took, how many were wasted (the follower
//! blocked again in the same wait: a broadcast meant for another group),
//! the wake-to-run latency, and who woke them. MySQL's binlog followers
//! all sleep on one condition that each group's end broadcasts; MariaDB
//! wakes each follower on its own: the two read differently here.
use tracer_ebpf::WakerRole;

use crate::{deltas::fine_quantile_us, probes::wakeups::WakeTotals};

/// Wake-ups by one kind of waker.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ByWaker {
    pub waker: &'static str,
    pub wakeups: u64,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Wakeups {
    /// Follower waits that ended.
    pub waits: u64,
    pub wakeups: u64,
    /// Wake-ups after which the follower blocked again in the same wait.
    pub wasted: u64,
    pub wake_to_run_p50_us: Option<f64>,
    pub wake_to_run_p99_us: Option<f64>,
    /// Largest first.
    pub by_waker: Vec<ByWaker>,
}

/// The waker names, as they read in the summary and in `--json`.
pub const OWN_LEADER: &str = "its group's leader";
pub const OTHER_LEADER: &str = "another group's leader";
pub const REDO_WRITER: &str = "log_writer/log_flusher or the redo leader";
pub const ACK_RECEIVER: &str = "the semi-sync ack receiver";
pub const OTHER: &str = "other";

impl Wakeups {
    /// The waits between two reads; None without `--wakeups`.
    pub fn between(prev: Option<&WakeTotals>, cur: Option<&WakeTotals>) -> Option<Wakeups> {
        let cur = cur?;
        let zero = WakeTotals::default();
        let prev = prev.unwrap_or(&zero);
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let role = |r: WakerRole| d(cur.by_role[r as usize], prev.by_role[r as usize]);
        let leader_ended = d(cur.leader_ended, prev.leader_ended);
        let leaders = role(WakerRole::BinlogLeader);
        let slots = crate::probes::snapshot::sizes_since(&prev.wake_to_run, &cur.wake_to_run);
        let mut by_waker = vec![
            ByWaker {
                waker: OWN_LEADER,
                wakeups: leader_ended.min(leaders),
            },
            ByWaker {
                waker: OTHER_LEADER,
                wakeups: leaders.saturating_sub(leader_ended),
            },
            ByWaker {
                waker: REDO_WRITER,
                wakeups: role(WakerRole::RedoWriter),
            },
            ByWaker {
                waker: ACK_RECEIVER,
                wakeups: role(WakerRole::AckReceiver),
            },
            ByWaker {
                waker: OTHER,
                wakeups: role(WakerRole::Other),
            },
        ];
        by_waker.retain(|b| b.wakeups > 0);
        by_waker.sort_by_key(|b| std::cmp::Reverse(b.wakeups));
        Some(Wakeups {
            waits: d(cur.waits, prev.waits),
            wakeups: d(cur.wakeups, prev.wakeups),
            wasted: d(cur.wasted, prev.wasted),
            wake_to_run_p50_us: fine_quantile_us(&slots, 0.50),
            wake_to_run_p99_us: fine_quantile_us(&slots, 0.99),
            by_waker,
        })
    }

    /// Wake-ups per wait.
    pub fn per_wait(&self) -> Option<f64> {
        crate::deltas::ratio(self.wakeups, self.waits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_ebpf::fine_slot;

    /// A broadcast herd: 3 waits, 9 wake-ups, all from leaders; each wait's
    /// last leader wake-up was its own group's, the 6 others wasted.
    #[test]
    fn a_herd_reads_as_wasted_wakeups_from_other_groups_leaders() {
        let mut cur = WakeTotals {
            waits: 3,
            wakeups: 9,
            wasted: 6,
            leader_ended: 3,
            ..Default::default()
        };
        cur.by_role[WakerRole::BinlogLeader as usize] = 9;
        cur.wake_to_run[fine_slot(20_000)] = 9;
        let w = Wakeups::between(None, Some(&cur)).unwrap();
        assert_eq!((w.waits, w.wakeups, w.wasted), (3, 9, 6));
        assert_eq!(w.per_wait(), Some(3.0));
        assert_eq!(
            w.by_waker,
            [
                ByWaker {
                    waker: OTHER_LEADER,
                    wakeups: 6
                },
                ByWaker {
                    waker: OWN_LEADER,
                    wakeups: 3
                }
            ]
        );
        let p50 = w.wake_to_run_p50_us.unwrap();
        assert!((18.0..22.0).contains(&p50), "{p50}");
        assert_eq!(Wakeups::between(None, None), None);
    }
}
