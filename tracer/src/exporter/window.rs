//! Exact windows on light probes: every `--window-every` seconds (or when
//! asked: SIGUSR1, `POST /window`) the per-commit probes are attached to
//! every light server for `--window` seconds, then detached. Each window's
//! figures are published as the last window's, with its start and end:
//! the light counters go on untouched, so they stay monotonic and exact.
//! The cost: the exact tier's, times window / interval.
use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
    time::{Duration, Instant, SystemTime},
};

use super::{fleet::Fleet, totals::Totals};

/// One window's figures on one server.
#[derive(Clone, Debug)]
pub struct Figures {
    pub start: SystemTime,
    pub end: SystemTime,
    /// Counted as the exact tier counts (requests, durable, flushes,
    /// batches, leaders and followers), over the window only.
    pub totals: Totals,
}

/// A request for a window now, shared by the signal handler, the HTTP
/// side and the schedule.
#[derive(Debug, Default)]
pub struct Asks {
    asked: AtomicBool,
    /// When the open window began (None between windows).
    open_since: Mutex<Option<SystemTime>>,
}

impl Asks {
    /// Asks for a window at the schedule's next look (within 250 ms). A
    /// window already open is not doubled: the error says since when.
    pub fn ask(&self) -> Result<(), String> {
        let since = self.open_since.lock().map(|g| *g).unwrap_or(None);
        if let Some(t) = since {
            let ago = t.elapsed().map(|d| d.as_secs_f64()).unwrap_or(0.0);
            return Err(format!(
                "an exact window is open (for {ago:.1} s): not opening another"
            ));
        }
        self.asked.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn set_open(&self, since: Option<SystemTime>) {
        if let Ok(mut g) = self.open_since.lock() {
            *g = since;
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
    /// probes to be dropped off the fleet's lock (detaching is slow).
    pub fn step(&mut self, fleet: &Mutex<Fleet>, asks: &Asks) {
        let now = Instant::now();
        match self.closes_at {
            Some(end) if now >= end => {
                let links = fleet
                    .lock()
                    .map(|mut f| f.close_windows())
                    .unwrap_or_default();
                self.closes_at = None;
                asks.set_open(None);
                drop(links);
            }
            None => {
                let asked = asks.asked.swap(false, Ordering::Relaxed);
                let scheduled = self.every.is_some_and(|_| now >= self.next);
                if asked || scheduled {
                    if let Some(every) = self.every.filter(|_| scheduled) {
                        self.next = now + every;
                    }
                    let opened = fleet.lock().map(|mut f| f.open_windows()).unwrap_or(0);
                    if opened > 0 {
                        self.closes_at = Some(Instant::now() + self.length);
                        asks.set_open(Some(SystemTime::now()));
                    } else if asked {
                        eprintln!("commitscope: no light server to open an exact window on");
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
    fn a_second_ask_while_open_is_refused_with_the_age() {
        let a = Asks::default();
        assert!(a.ask().is_ok());
        a.set_open(Some(SystemTime::now()));
        let e = a.ask().unwrap_err();
        assert!(e.contains("not opening another"), "{e}");
        a.set_open(None);
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
