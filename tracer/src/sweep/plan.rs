//! The sweep's cells: the cartesian product of `--threads`, `--warehouses`
//! and every `--server-option` list, ordered so that the data is loaded
//! once per warehouse count and the server restarts once per combination
//! of the options that need a restart.
use readers::server::options::{OptionAxis, ServerOption};

/// How a server option moves from one cell to the next: decided by asking
/// the server (`SET GLOBAL v = @@GLOBAL.v`), not by a list that would age
/// with every server version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `SET GLOBAL` between cells.
    Dynamic,
    /// Read-only at runtime (or not a variable at all): restart the
    /// managed server with it.
    Restart,
    /// The managed replica's distance (`--replica-delay-ms`): the delay
    /// proxy's, set between cells; the server never sees it.
    Replica,
}

/// One measured run of the sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub threads: u32,
    /// TPC-C only.
    pub warehouses: Option<u32>,
    /// One value per axis, in the order the axes were given.
    pub settings: Vec<ServerOption>,
}

impl Cell {
    /// Its identity in `cells.jsonl`: independent of the run order, so
    /// `--resume` finds it whatever else the new command line sweeps.
    pub fn key(&self) -> String {
        let mut parts = vec![format!("threads={}", self.threads)];
        if let Some(w) = self.warehouses {
            parts.push(format!("warehouses={w}"));
        }
        parts.extend(self.settings.iter().map(|o| {
            ServerOption {
                key: o.variable(),
                value: o.value.clone(),
            }
            .to_string()
        }));
        parts.join(" ")
    }

    /// What the progress line says: the threads, and the warehouses and
    /// settings that the sweep varies.
    pub fn label(&self, varied: &[bool], many_warehouses: bool) -> String {
        let mut s = format!("threads={}", self.threads);
        if let (Some(w), true) = (self.warehouses, many_warehouses) {
            s.push_str(&format!(" warehouses={w}"));
        }
        let set = readers::records::cells::settings_label(
            self.settings
                .iter()
                .zip(varied)
                .filter(|(_, v)| **v)
                .map(|(o, _)| (o.key.as_str(), o.value.as_str())),
        );
        if !set.is_empty() {
            s.push(' ');
            s.push_str(&set);
        }
        s
    }

    /// The options of this cell that need a restart.
    pub fn restart_options(&self, change: &[Change]) -> Vec<ServerOption> {
        restart_part(self.settings.iter().map(Some), change)
    }
}

/// The settings (one per axis; None: unknown) whose axis needs a restart:
/// what a cell asks for, or what a server runs with, compared.
pub fn restart_part<'a>(
    settings: impl IntoIterator<Item = Option<&'a ServerOption>>,
    change: &[Change],
) -> Vec<ServerOption> {
    settings
        .into_iter()
        .zip(change)
        .filter(|(_, c)| **c == Change::Restart)
        .filter_map(|(o, _)| o.cloned())
        .collect()
}

/// Every index combination of lists of these lengths, the first list
/// varying slowest.
fn product(lens: &[usize]) -> Vec<Vec<usize>> {
    lens.iter().fold(vec![vec![]], |acc, &n| {
        acc.iter()
            .flat_map(|prefix| {
                (0..n).map(move |i| {
                    let mut v = prefix.clone();
                    v.push(i);
                    v
                })
            })
            .collect()
    })
}

/// All cells in run order: warehouses (a load each), then the restart
/// options (a restart each), then the dynamic options (`SET GLOBAL`), then
/// threads.
pub fn cells(
    threads: &[u32],
    warehouses: &[Option<u32>],
    axes: &[OptionAxis],
    change: &[Change],
) -> Vec<Cell> {
    let pick = |c: &[Change]| -> Vec<usize> {
        (0..axes.len())
            .filter(|&i| c.contains(&change[i]))
            .collect()
    };
    // The replica's distance changes between cells as a dynamic option
    // does: no restart.
    let (restart, dynamic) = (
        pick(&[Change::Restart]),
        pick(&[Change::Dynamic, Change::Replica]),
    );
    let lens = |ix: &[usize]| ix.iter().map(|&i| axes[i].values.len()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for &w in warehouses {
        for r in product(&lens(&restart)) {
            for d in product(&lens(&dynamic)) {
                let mut chosen = vec![0; axes.len()];
                for (slot, v) in restart.iter().zip(&r).chain(dynamic.iter().zip(&d)) {
                    chosen[*slot] = *v;
                }
                for &t in threads {
                    out.push(Cell {
                        threads: t,
                        warehouses: w,
                        settings: axes
                            .iter()
                            .zip(&chosen)
                            .map(|(a, &i)| a.option(i))
                            .collect(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(s: &str) -> OptionAxis {
        OptionAxis::from_option(&s.parse().unwrap()).unwrap()
    }

    #[test]
    fn product_orders_restarts_outside_dynamic_outside_threads() {
        let axes = [
            axis("innodb_flush_log_at_trx_commit=1,0"),
            axis("log_bin=ON,OFF"),
        ];
        let change = [Change::Dynamic, Change::Restart];
        let c = cells(&[1, 8], &[None], &axes, &change);
        assert_eq!(c.len(), 8);
        let keys: Vec<String> = c.iter().map(Cell::key).collect();
        assert_eq!(
            keys[..3],
            [
                "threads=1 innodb_flush_log_at_trx_commit=1 log_bin=ON",
                "threads=8 innodb_flush_log_at_trx_commit=1 log_bin=ON",
                "threads=1 innodb_flush_log_at_trx_commit=0 log_bin=ON",
            ]
        );
        // One restart: log_bin changes once along the run order.
        let flips = c
            .windows(2)
            .filter(|w| w[0].restart_options(&change) != w[1].restart_options(&change))
            .count();
        assert_eq!(flips, 1);
        assert_eq!(
            c[2].label(&[true, true], false),
            "threads=1 trx_commit=0 log_bin=ON"
        );
        assert_eq!(c[2].label(&[true, false], false), "threads=1 trx_commit=0");
    }

    #[test]
    fn warehouses_are_outermost_and_in_the_key() {
        let c = cells(&[4], &[Some(1), Some(2)], &[], &[]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].key(), "threads=4 warehouses=2");
        assert_eq!(c[1].label(&[], true), "threads=4 warehouses=2");
        assert_eq!(
            readers::records::cells::short_name("innodb_log_file_size"),
            "log_file_size"
        );
        assert_eq!(
            readers::records::cells::short_name("sync-binlog"),
            "sync_binlog"
        );
    }
}
