//! The dry validation pass, before the first cell: every dynamic value set
//! and put back, every combination of restart values started once on the
//! datadir before any load — so a value the server rejects is found in
//! seconds, not an hour in, and the error names the cell.
use std::time::Duration;

use readers::records::cells::CellRecord;

use crate::{
    error::{Error, Result},
    sweep::{
        cell::Live,
        ctx::Ctx,
        plan::{self, Cell, Change},
        progress::human,
        settings::{self, Classified},
        spec::Namer,
    },
};

/// The sweep, validated: its cells in run order and those still to run.
pub struct Ready {
    pub cells: Vec<Cell>,
    pub pending: Vec<usize>,
    pub namer: Namer,
    /// Expected wall time of a cell.
    pub per_cell: Duration,
}

fn rejected(namer: &Namer, i: usize, cell: &Cell, what: String) -> Error {
    Error::SweepCell {
        cell: namer.name(i, cell),
        detail: format!("{what}; fix or drop that value (nothing was measured)"),
    }
}

/// Validates, prints the plan line; None when Ctrl-C came first.
pub async fn ready(
    ctx: &Ctx<'_>,
    live: &mut Live<'_>,
    classified: &Classified,
    done: &[CellRecord],
) -> Result<Option<Ready>> {
    let axes = &ctx.spec.axes;
    let change = live.change.clone();
    let cells = plan::cells(&ctx.spec.threads, &ctx.spec.warehouses, axes, &change);
    let namer = ctx.spec.namer();
    if let Some((ai, vi, msg)) =
        settings::validate_dynamic(live.stage.control()?, axes, classified).await?
    {
        let value = &axes[ai].values[vi];
        let i = cells
            .iter()
            .position(|c| c.settings[ai].value == *value)
            .unwrap_or(0);
        let what = format!("the server rejects {}: {msg}", axes[ai].option(vi));
        return Err(rejected(&namer, i, &cells[i], what));
    }
    let adjusted = |live: &Live, from: u64| -> Option<String> {
        let w = live.stage.managed.as_ref()?.option_warnings_since(from);
        (!w.is_empty()).then(|| {
            format!(
                "the server adjusted an option at startup: {}",
                w.join(" | ")
            )
        })
    };
    if let Some(what) = adjusted(live, 0) {
        return Err(rejected(&namer, 0, &cells[0], what));
    }
    let pending: Vec<usize> = (0..cells.len())
        .filter(|&i| !done.iter().any(|d| d.key == cells[i].key()))
        .collect();
    // The first pending cell of each combination of restart values.
    let mut groups: Vec<usize> = Vec::new();
    for &i in &pending {
        let ro = cells[i].restart_options(&change);
        if !groups
            .iter()
            .any(|&g| cells[g].restart_options(&change) == ro)
        {
            groups.push(i);
        }
    }
    for g in groups {
        if !live.needs_restart(&cells[g]) {
            continue;
        }
        let from = live.stage.managed.as_ref().map_or(0, |m| m.log_len());
        match live.restart_for(&cells[g], ctx).await {
            Ok(()) => {}
            Err(e @ Error::ServerStart { .. }) => {
                return Err(rejected(&namer, g, &cells[g], e.to_string()))
            }
            Err(Error::Interrupted { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        if let Some(what) = adjusted(live, from) {
            return Err(rejected(&namer, g, &cells[g], what));
        }
    }
    let restarts = pending
        .windows(2)
        .filter(|p| cells[p[0]].restart_options(&change) != cells[p[1]].restart_options(&change))
        .count();
    let per_cell = Duration::from_secs_f64(ctx.args.duration + ctx.args.warmup_s() + 1.0);
    let how: Vec<String> = axes
        .iter()
        .zip(&change)
        .map(|(a, c)| {
            let by = match c {
                Change::Dynamic => "SET GLOBAL",
                Change::Restart => "restart",
                Change::Replica => "the replica's proxy",
            };
            format!(
                "{} x{} by {by}",
                readers::records::cells::short_name(&a.key),
                a.values.len()
            )
        })
        .collect();
    eprintln!(
        "commitscope: sweep of {} cells ({} to run, {} done earlier): every value accepted ({}); {} restarts; about {}; results in {}",
        cells.len(),
        pending.len(),
        cells.len() - pending.len(),
        if how.is_empty() { "no server options".into() } else { how.join(", ") },
        restarts,
        human(per_cell * pending.len() as u32),
        ctx.store.dir.display()
    );
    Ok(Some(Ready {
        cells,
        pending,
        namer,
        per_cell,
    }))
}
