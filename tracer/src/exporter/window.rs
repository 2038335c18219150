//! Exact windows on light probes: every `--window-every` seconds (or when
//! asked: SIGUSR1, `POST /window`) the per-commit probes are attached to
//! every light server for `--window` seconds, then detached. Each window's
//! figures are published as the last window's, with its start and end:
//! the light counters go on untouched, so they stay monotonic and exact.
//! The cost: the exact tier's, times window / interval.
use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use super::fleet::{self, Fleet};

/// A request for a window now, shared by the signal handler, the HTTP
/// side and the schedule. One lock over both fields: an ask is refused
/// from the moment the schedule takes one up until that window closes, so
/// two asks never give two windows.
#[derive(Debug, Default)]
pub struct Asks {
    state: Mutex<AskState>,
}

#[derive(Debug, Default)]
struct AskState {
    /// Asked for, not yet taken up.
    asked: bool,
    /// When the open (or opening) window began.
    open_since: Option<SystemTime>,
}

impl Asks {
    /// Asks for a window at the schedule's next look (within 250 ms). A
    /// window already open or asked for is not doubled: the error says so.
    pub fn ask(&self) -> Result<(), String> {
        let Ok(mut st) = self.state.lock() else {
            return Err("the window state is unavailable".into());
        };
        if let Some(t) = st.open_since {
            let ago = t.elapsed().map(|d| d.as_secs_f64()).unwrap_or(0.0);
            return Err(format!(
                "an exact window is open (for {ago:.1} s): not opening another"
            ));
        }
        if st.asked {
            return Err("an exact window is already asked for: not opening another".into());
        }
        st.asked = true;
        Ok(())
    }

    /// Takes up an ask (or a scheduled window): from here on asks are
    /// refused. Returns whether one was asked for.
    fn take(&self, now: SystemTime) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        st.open_since = Some(now);
        std::mem::take(&mut st.asked)
    }

    fn asked(&self) -> bool {
        self.state.lock().map(|st| st.asked).unwrap_or(false)
    }

    fn set_closed(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.open_since = None;
        }
    }
}

/// When windows open and close.
pub struct Schedule {
    length: Duration,
    /// None: only when asked.
    every: Option<Duration>,
    next: Instant,
    /// The open window's end.
    closes_at: Option<Instant>,
}

impl Schedule {
    /// The first scheduled window opens one `every` after start: the
    /// exporter's first minutes cost the light tier only.
    pub fn new(length: Duration, every: Option<Duration>) -> Self {
        Schedule {
            length,
            every,
            next: Instant::now() + every.unwrap_or_default(),
            closes_at: None,
        }
    }

    /// How long the caller may sleep before the next step is due.
    pub fn sleep_at_most(&self, poll: Duration) -> Duration {
        let due = self.closes_at.or(self.every.map(|_| self.next));
        due.map_or(poll, |d| {
            d.saturating_duration_since(Instant::now())
                .min(poll)
                .max(Duration::from_millis(1))
        })
    }

    /// Opens or closes the window when due. Closing returns the window's
    /// probes to be dropped off the fleet's lock (detaching is slow). The
    /// servers' own replication counters are read on their logins (on
    /// `rt`) just inside the window's ends, after the probes are in and
    /// before they go, each read with the maps beside it: the figures set
    /// beside the server's counts lie between its reads.
    pub fn step(&mut self, fleet: &Mutex<Fleet>, asks: &Asks, rt: &tokio::runtime::Runtime) {
        let now = Instant::now();
        match self.closes_at {
            Some(end) if now >= end => {
                let acks = fleet::read_server_acks(fleet, rt);
                let links = fleet
                    .lock()
                    .map(|mut f| f.close_windows(acks))
                    .unwrap_or_default();
                self.closes_at = None;
                asks.set_closed();
                drop(links);
            }
            None => {
                let scheduled = self.every.is_some_and(|_| now >= self.next);
                if asks.asked() || scheduled {
                    let asked = asks.take(SystemTime::now());
                    if let Some(every) = self.every.filter(|_| scheduled) {
                        self.next = now + every;
                    }
                    // The window's length runs from its start (the base
                    // read before the attach), not from the end of an
                    // attach that a busy host makes slow: a 3 s window
                    // reads as 3 s, however long its probes took to go in.
                    let opening = Instant::now();
                    let opened = fleet.lock().map(|mut f| f.open_windows()).unwrap_or(0);
                    if opened > 0 {
                        self.closes_at = Some(opening + self.length);
                        let acks = fleet::read_server_acks(fleet, rt);
                        if let Ok(mut f) = fleet.lock() {
                            f.set_window_acks(acks);
                        }
                    } else {
                        asks.set_closed();
                        if asked {
                            eprintln!("commitscope: no light server to open an exact window on");
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_ask_is_refused_until_the_window_closes() {
        let a = Asks::default();
        assert!(a.ask().is_ok());
        // Asked, not yet taken up: refused.
        assert!(a.ask().unwrap_err().contains("already asked for"));
        assert!(a.take(SystemTime::now()));
        // Open: refused, with its age.
        let e = a.ask().unwrap_err();
        assert!(
            e.contains("is open") && e.contains("not opening another"),
            "{e}"
        );
        a.set_closed();
        assert!(a.ask().is_ok());
    }

    #[test]
    fn the_sleep_ends_at_the_next_due_step() {
        let s = Schedule::new(Duration::from_secs(3), Some(Duration::from_millis(50)));
        assert!(s.sleep_at_most(Duration::from_millis(250)) <= Duration::from_millis(50));
        let s = Schedule::new(Duration::from_secs(3), None);
        assert_eq!(
            s.sleep_at_most(Duration::from_millis(250)),
            Duration::from_millis(250)
        );
    }
}
