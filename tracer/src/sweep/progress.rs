//! The sweep's progress line, `cell 5/21  threads=64 trx_commit=0  elapsed
//! 5m  ETA 14m`: redrawn every second on a terminal (indicatif), one line
//! per cell start and end otherwise (logs, CI).
use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};

/// "45s", "5m", "1h 03m": a sweep's scale, not a stopwatch's.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", (s + 30) / 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub struct Progress {
    total: usize,
    t0: Instant,
    /// Expected wall time of a cell before one has finished.
    first_guess: Duration,
    /// Wall times of the cells run by this process.
    took: Vec<Duration>,
    bar: Option<ProgressBar>,
    current: Option<(usize, String, Instant, usize)>,
}

impl Progress {
    pub fn new(total: usize, first_guess: Duration) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b
        });
        Progress {
            total,
            t0: Instant::now(),
            first_guess,
            took: Vec::new(),
            bar,
            current: None,
        }
    }

    fn per_cell(&self) -> Duration {
        if self.took.is_empty() {
            self.first_guess
        } else {
            self.took.iter().sum::<Duration>() / self.took.len() as u32
        }
    }

    /// The line for the current cell; `left` counts the cells still to
    /// run, this one included.
    fn line(&self) -> Option<String> {
        let (n, label, started, left) = self.current.as_ref()?;
        let est = self.per_cell() * *left as u32;
        let eta = est.saturating_sub(started.elapsed());
        Some(format!(
            "cell {n}/{}  {label}  elapsed {}  ETA {}",
            self.total,
            human(self.t0.elapsed()),
            human(eta)
        ))
    }

    pub fn start(&mut self, n: usize, label: String, left: usize) {
        self.current = Some((n, label, Instant::now(), left));
        let line = self.line().unwrap_or_default();
        match &self.bar {
            Some(b) => {
                b.set_message(line);
                b.enable_steady_tick(Duration::from_millis(250));
            }
            None => eprintln!("commitscope: {line}"),
        }
    }

    /// Redraws the ETA (called every second while a cell runs).
    pub fn refresh(&self) {
        if let (Some(b), Some(line)) = (&self.bar, self.line()) {
            b.set_message(line);
        }
    }

    /// Ends the current cell with its one-line result.
    pub fn done(&mut self, result: &str) {
        if let Some((n, label, started, _)) = self.current.take() {
            self.took.push(started.elapsed());
            let line = format!("cell {n}/{}  {label}  {result}", self.total);
            match &self.bar {
                Some(b) => b.println(format!("commitscope: {line}")),
                None => eprintln!("commitscope: {line}"),
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_sweep_would() {
        assert_eq!(human(Duration::from_secs(45)), "45s");
        assert_eq!(human(Duration::from_secs(299)), "5m");
        assert_eq!(human(Duration::from_secs(3600 + 180)), "1h 03m");
    }

    #[test]
    fn eta_counts_the_cells_left() {
        let mut p = Progress::new(21, Duration::from_secs(70));
        p.bar = None;
        p.current = Some((5, "threads=64 trx_commit=0".into(), Instant::now(), 17));
        let l = p.line().unwrap();
        assert!(
            l.starts_with("cell 5/21  threads=64 trx_commit=0  elapsed 0s  ETA 20m"),
            "{l}"
        );
    }
}
