//! One cell: bring the server to the cell's settings (restart and/or
//! `SET GLOBAL`), run the measured workload with its interval rows going
//! to `DIR/ticks/`, and say the result in one line.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use readers::{records::cells::CellRecord, server::options::ServerOption};

use crate::{
    error::{Error, Result},
    records::run::{EndReason, RunSummary},
    report::csv::Csv,
    session::{Measure, Stage},
    sweep::{
        ctx::Ctx,
        plan::{restart_part, Cell, Change},
        progress::Progress,
        settings,
        spec::workload_args,
    },
};

/// The server as the sweep drives it: the stage, how each option changes,
/// and the values it runs with now.
pub struct Live<'a> {
    pub stage: &'a mut Stage,
    pub change: Vec<Change>,
    /// Per axis; None: not set by the sweep yet (a user's server).
    pub current: Vec<Option<ServerOption>>,
}

impl<'a> Live<'a> {
    /// A managed server started with the first value of every list; a
    /// user's server, whose values are its own until the first cell.
    pub fn new(stage: &'a mut Stage, change: Vec<Change>, ctx: &Ctx) -> Result<Live<'a>> {
        let managed = stage.managed.is_some();
        let axes = &ctx.spec.axes;
        if let (false, Some(i)) = (managed, change.iter().position(|c| *c == Change::Restart)) {
            return Err(Error::Usage(format!(
                "{} cannot change on a running server (read-only, or not a variable): sweep it on the managed server (drop --socket/--host/--port/--dsn/--defaults-file)",
                axes[i].key
            )));
        }
        // A group's primary that restarts would rejoin as a secondary:
        // said before the first cell, naming the setting.
        let restarts = |i: &usize| change[*i] == Change::Restart && axes[*i].values.len() > 1;
        if let (true, Some(i)) = (stage.group.is_some(), (0..change.len()).find(restarts)) {
            return Err(Error::Usage(format!(
                "{} needs a restart, and a group's primary that restarts rejoins its group as a secondary: sweep settings SET GLOBAL can change with --replica group, or drop it",
                axes[i].key
            )));
        }
        Ok(Live {
            stage,
            change,
            current: axes.iter().map(|a| managed.then(|| a.option(0))).collect(),
        })
    }

    /// True when the managed server must restart for `cell`.
    pub fn needs_restart(&self, cell: &Cell) -> bool {
        self.stage.managed.is_some()
            && cell.restart_options(&self.change)
                != restart_part(self.current.iter().map(Option::as_ref), &self.change)
    }

    /// Restarts the managed server with all of `cell`'s server settings
    /// (the replica's distance is the proxy's, not the server's).
    pub async fn restart_for(&mut self, cell: &Cell, ctx: &Ctx<'_>) -> Result<()> {
        let options = cell
            .settings
            .iter()
            .zip(&self.change)
            .filter(|(_, c)| **c != Change::Replica)
            .map(|(o, _)| o.clone())
            .collect();
        self.stage.restart(options, ctx.stop, ctx.ph).await?;
        self.current = cell.settings.iter().cloned().map(Some).collect();
        Ok(())
    }

    /// Restart if needed, then `SET GLOBAL` what differs.
    async fn switch_to(&mut self, cell: &Cell, ctx: &Ctx<'_>) -> Result<()> {
        if self.needs_restart(cell) {
            self.restart_for(cell, ctx).await?;
        }
        for (ai, o) in cell.settings.iter().enumerate() {
            if self.change[ai] == Change::Replica && self.current[ai].as_ref() != Some(o) {
                let ms: f64 = o.value.parse().map_err(|_| {
                    Error::Usage(format!("--replica-delay-ms {}: not a number", o.value))
                })?;
                let r = self
                    .stage
                    .replica
                    .as_mut()
                    .ok_or_else(|| Error::Usage("--replica-delay-ms needs --replica".into()))?;
                r.set_delay(Duration::from_secs_f64(ms / 1000.0))?;
                self.current[ai] = Some(o.clone());
                continue;
            }
            if self.change[ai] == Change::Dynamic && self.current[ai].as_ref() != Some(o) {
                if let Err(msg) = settings::apply(self.stage.control()?, o).await? {
                    return Err(Error::SweepCell {
                        cell: String::new(),
                        detail: format!("the server rejects {o}: {msg}"),
                    });
                }
                self.current[ai] = Some(o.clone());
            }
        }
        Ok(())
    }
}

/// `DIR/ticks/<cell key>.csv`: the interval rows of one cell.
fn ticks_path(dir: &Path, cell: &Cell) -> PathBuf {
    let slug: String = cell
        .key()
        .chars()
        .map(|c| match c {
            ' ' => '_',
            c if c.is_ascii_alphanumeric() || "=-_.".contains(c) => c,
            _ => '-',
        })
        .collect();
    dir.join("ticks").join(format!("{slug}.csv"))
}

/// One cell. `None`: interrupted before it finished (nothing recorded,
/// its tick file removed).
pub async fn run_cell(
    ctx: &Ctx<'_>,
    live: &mut Live<'_>,
    cell: &Cell,
    progress: &mut Progress,
) -> Result<Option<RunSummary>> {
    live.switch_to(cell, ctx).await?;
    let wa = workload_args(
        ctx.args,
        cell.threads,
        cell.warehouses,
        live.stage.conn.clone(),
    );
    let (mut cfg, interval, duration) = workload::run::config(&wa)?;
    cfg.spread = live.stage.spread()?;
    let m = Measure {
        cfg,
        interval,
        duration,
        reset: false,
    };
    let path = ticks_path(&ctx.store.dir, cell);
    let f = readers::outfile::create(&path)?;
    let mut sink = Csv::new(std::io::BufWriter::new(f));
    let r = {
        let fut = live.stage.measure(&m, &mut sink, ctx.stop, ctx.ph);
        tokio::pin!(fut);
        let mut redraw = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                r = &mut fut => break r,
                _ = redraw.tick() => progress.refresh(),
            }
        }
    };
    drop(sink);
    match r {
        Ok(s) if s.end == EndReason::Interrupted => {
            let _ = std::fs::remove_file(&path);
            Ok(None)
        }
        Ok(s) if s.end.server_failed() => Err(Error::ServerLost {
            detail: format!(
                "{} during the cell (see its error log; --keep keeps it)",
                s.ended
            ),
        }),
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// The progress line's end: what the cell measured.
pub fn result_line(r: &CellRecord, tpcc: bool) -> String {
    let mut s = if tpcc {
        format!("{:.1} tpmC", r.tpmc.unwrap_or(0.0))
    } else {
        format!("{:.1} tps", r.tps)
    };
    if let Some(c) = r.commits_per_flush {
        s.push_str(&format!("  {c:.2} commits/flush"));
    }
    if let Some(p) = r.redo_fsync_p99_us {
        s.push_str(&format!("  redo fsync p99 {p:.0} us"));
    }
    if r.errors > 0 {
        s.push_str(&format!("  {} errors", r.errors));
    }
    s
}
