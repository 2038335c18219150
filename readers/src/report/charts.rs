//! The sweep's charts as SVG (plotters): throughput, commits per redo
//! flush, redo fsync p99 and batch size (p50 and p99), each against
//! threads, one line per setting (two for the batch sizes); where binlog
//! groups were counted, their size (mean and p99); with `--io`, each
//! cell's redo fsync split into device, journal and other; where the
//! binlog groups' reasons were probed, why each cell's groups closed.
//! SVG keeps the text as text: any viewer's fonts render it.
use std::path::{Path, PathBuf};

use plotters::{
    coord::ranged1d::{AsRangedCoord, ValueFormatter},
    prelude::*,
};

use super::grid::Grid;
use crate::{
    error::{Error, Result},
    records::cells::CellRecord,
};

/// Pixel size of every chart (the PNG a renderer makes of it, too).
pub const SIZE: (u32, u32) = (1024, 640);

/// The figure a chart draws for a cell.
type Figure = fn(&Grid, &CellRecord) -> Option<f64>;

/// One chart: file name, title, y axis label and the figure of a cell.
struct Spec {
    file: &'static str,
    title: String,
    y_desc: String,
    y: Figure,
    /// A second figure drawn beside the first for each setting, and the
    /// suffixes telling the two lines apart.
    also: Option<(Figure, &'static str, &'static str)>,
    /// Drawn only when some cell has the figure (the binlog's groups).
    optional: bool,
}

fn specs(g: &Grid, workload: &str) -> Vec<Spec> {
    vec![
        Spec {
            file: "throughput.svg",
            title: format!("{workload}: throughput vs threads"),
            y_desc: if g.tpcc {
                "tpmC (New-Order transactions per minute)".into()
            } else {
                "throughput (transactions per second)".into()
            },
            y: |g, r| Some(g.throughput(r)),
            also: None,
            optional: false,
        },
        Spec {
            file: "commits_per_flush.svg",
            title: format!("{workload}: group commit (commits per redo flush) vs threads"),
            y_desc: "commits per redo flush".into(),
            y: |_, r| r.commits_per_flush,
            also: None,
            optional: false,
        },
        Spec {
            file: "redo_fsync_p99.svg",
            title: format!("{workload}: redo fsync p99 vs threads"),
            y_desc: "redo fsync p99 latency (µs)".into(),
            y: |_, r| r.redo_fsync_p99_us,
            also: None,
            optional: false,
        },
        Spec {
            file: "batch_size.svg",
            title: format!("{workload}: batch size per redo flush (p50, p99) vs threads"),
            y_desc: "requests per redo flush".into(),
            y: |_, r| r.batch_p50.map(|v| v as f64),
            also: Some((|_, r| r.batch_p99.map(|v| v as f64), " p50", " p99")),
            optional: false,
        },
        Spec {
            file: "binlog_group_size.svg",
            title: format!("{workload}: commits per binlog group (mean, p99) vs threads"),
            y_desc: "commits per binlog group".into(),
            y: |_, r| r.binlog.as_ref().and_then(|b| b.mean),
            also: Some((
                |_, r| r.binlog.as_ref().and_then(|b| b.p99).map(|v| v as f64),
                " mean",
                " p99",
            )),
            optional: true,
        },
    ]
}

fn draw_err(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |e| Error::Output {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    }
}

/// Writes the three charts into `dir`; returns their paths.
pub fn write_all(dir: &Path, g: &Grid, workload: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for spec in specs(g, workload) {
        let path = dir.join(spec.file);
        let mut series = g.series(|r| (spec.y)(g, r));
        if spec.optional && series.iter().all(|(_, p)| p.is_empty()) {
            continue;
        }
        if let Some((also, first, second)) = spec.also {
            for (name, _) in &mut series {
                name.push_str(first);
            }
            series.extend(g.series(|r| also(g, r)).into_iter().map(|(mut n, p)| {
                n.push_str(second);
                (n, p)
            }));
        }
        // Drawn in memory, then written without following a symlink.
        let mut svg = String::new();
        draw(&mut svg, &spec, &series).map_err(draw_err(&path))?;
        crate::outfile::write(&path, svg.as_bytes())?;
        out.push(path);
    }
    let stacked = [
        (
            "fsync_split.svg",
            Stack {
                title: format!("{workload}: what a redo fsync waits for, per cell"),
                y_desc: "mean redo fsync (µs)",
                parts: [
                    "device (its own requests, cache flushes)",
                    "journal",
                    "other (journal wait, queueing, CPU)",
                ]
                .map(String::from)
                .to_vec(),
                keys: column_keys(g),
                fixed_top: None,
            },
            split_bars(g),
        ),
        {
            let (parts, bars) = path_bars(g);
            (
                "commit_path.svg",
                Stack {
                    title: format!(
                        "{workload}: where a commit's time goes in the server, per cell"
                    ),
                    y_desc: "share of the commits' time in the server (%)",
                    parts,
                    keys: column_keys(g),
                    fixed_top: Some(100.0),
                },
                bars,
            )
        },
        {
            let (keys, bars) = closed_bars(g);
            (
                "binlog_closed_by.svg",
                Stack {
                    title: format!("{workload}: why the binlog groups closed, per cell"),
                    y_desc: "share of the cell's binlog groups (%)",
                    parts: crate::binlog::Reason::ALL
                        .map(|r| closed_part(r).to_string())
                        .to_vec(),
                    keys,
                    fixed_top: Some(100.0),
                },
                bars,
            )
        },
        (
            "commit_sched.svg",
            Stack {
                title: format!(
                    "{workload}: a commit's time in the server by the scheduler, per cell"
                ),
                y_desc: "mean commit in the server (µs)",
                parts: [
                    "on a CPU",
                    "run queue (waiting for a CPU)",
                    "blocked (I/O, locks, wake-ups)",
                ]
                .map(String::from)
                .to_vec(),
                keys: column_keys(g),
                fixed_top: None,
            },
            sched_bars(g),
        ),
    ];
    for (file, stack, bars) in stacked {
        if bars.is_empty() {
            continue;
        }
        let path = dir.join(file);
        let mut svg = String::new();
        draw_stacked(&mut svg, &stack, &bars).map_err(draw_err(&path))?;
        crate::outfile::write(&path, svg.as_bytes())?;
        out.push(path);
    }
    Ok(out)
}

/// `--commit-path` cells with the scheduler split, in table order: the
/// commits' mean on a CPU, on a run queue and blocked.
fn sched_bars(g: &Grid) -> Vec<Bar> {
    let mut out = Vec::new();
    for &row in &g.rows {
        for (ci, col) in g.columns.iter().enumerate() {
            let Some(x) = g
                .get(row, ci)
                .and_then(|r| r.commit_path.as_ref())
                .and_then(|c| c.sched)
            else {
                continue;
            };
            out.push((
                bar_label(g, row.1, ci, col),
                vec![x.on_cpu_us, x.run_queue_us, x.blocked_us],
            ));
        }
    }
    out
}

/// A reason's part in `binlog_closed_by.svg`.
fn closed_part(r: crate::binlog::Reason) -> &'static str {
    use crate::binlog::Reason;
    match r {
        Reason::Count => "the count reached",
        Reason::Timeout => "the delay ran out",
        Reason::LockWait => "a lock waiter queued",
        Reason::NoWait => "no wait (no delay set)",
    }
}

/// Cells whose binlog groups have their reasons, in table order: each
/// reason's share of the groups, in percent; and the legend's lines, the
/// column letters then each cell's throughput, commit p99 and mean group
/// size (what the delay and the count trade).
fn closed_bars(g: &Grid) -> (Vec<String>, Vec<Bar>) {
    let mut keys = column_keys(g);
    let mut bars = Vec::new();
    for &row in &g.rows {
        for (ci, col) in g.columns.iter().enumerate() {
            let Some((r, b)) = g
                .get(row, ci)
                .and_then(|r| Some((r, r.binlog.as_ref()?)))
                .filter(|(_, b)| !b.closed_by.is_empty())
            else {
                continue;
            };
            let label = bar_label(g, row.1, ci, col);
            keys.push(format!(
                "{label}: {:.0} {}, p99 {:.1} ms, {} per group",
                g.throughput(r),
                if g.tpcc { "tpmC" } else { "tps" },
                r.latency_p99_us as f64 / 1000.0,
                b.mean.map_or_else(|| "-".into(), |m| format!("{m:.1}"))
            ));
            let shares = crate::binlog::Reason::ALL
                .map(|reason| 100.0 * b.closed_share(reason).unwrap_or(0.0))
                .to_vec();
            bars.push((label, shares));
        }
    }
    (keys, bars)
}

/// One cell's bar: its label and its parts, stacked in order.
type Bar = (String, Vec<f64>);

/// A cell's label in a bar chart. Settings are long: with several
/// columns, a bar is labelled by its threads and the column's letter,
/// and the legend spells the letters.
fn bar_label(g: &Grid, threads: u32, ci: usize, col: &str) -> String {
    if g.columns.len() > 1 {
        format!("{threads} thr · {}", column_key(ci))
    } else {
        format!("{threads} thr {col}")
    }
}

/// The legend's lines for the column letters (none with one column).
fn column_keys(g: &Grid) -> Vec<String> {
    if g.columns.len() > 1 {
        let c = g.columns.iter().enumerate();
        c.map(|(i, c)| format!("{}: {c}", column_key(i))).collect()
    } else {
        Vec::new()
    }
}

/// `--commit-path` cells in table order: each stage's share of the
/// commits' time in the server, in percent; the stages in path order as
/// they first appear (the unattributed rest last).
fn path_bars(g: &Grid) -> (Vec<String>, Vec<Bar>) {
    let mut names: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    for &row in &g.rows {
        for (ci, col) in g.columns.iter().enumerate() {
            let Some(c) = g.get(row, ci).and_then(|r| r.commit_path.as_ref()) else {
                continue;
            };
            for s in &c.shares {
                if !names.contains(&s.stage) {
                    names.push(s.stage.clone());
                }
            }
            cells.push((bar_label(g, row.1, ci, col), c));
        }
    }
    // The rest on top of every bar.
    let rest = crate::commit_path::UNATTRIBUTED;
    names.retain(|n| n != rest);
    if !cells.is_empty() {
        names.push(rest.to_string());
    }
    let bars = cells
        .into_iter()
        .map(|(label, c)| (label, names.iter().map(|n| 100.0 * c.share(n)).collect()))
        .collect();
    (names, bars)
}

/// The `--io` cells in table order (none without `--io`).
/// Settings are long: with several columns, each bar is labelled by its
/// threads and the column's letter, and the legend spells the letters.
fn split_bars(g: &Grid) -> Vec<Bar> {
    let mut out = Vec::new();
    for &row in &g.rows {
        for (ci, col) in g.columns.iter().enumerate() {
            let Some(io) = g.get(row, ci).and_then(|r| r.io.as_ref()) else {
                continue;
            };
            let v = |x: Option<f64>| x.unwrap_or(0.0);
            out.push((
                bar_label(g, row.1, ci, col),
                vec![v(io.device_us), v(io.journal_us), v(io.other_us)],
            ));
        }
    }
    out
}

/// A column's letter in the split chart: A, B, ... Z, then AA, AB ...
fn column_key(i: usize) -> String {
    let letter = |n: usize| char::from(b'A' + (n % 26) as u8);
    if i < 26 {
        letter(i).to_string()
    } else {
        format!("{}{}", letter(i / 26 - 1), letter(i))
    }
}

/// A stacked bar chart: its title, y axis, the parts each bar stacks
/// (bottom first), the column letters' legend, and the y axis's top when
/// fixed (shares: 100 %).
struct Stack {
    title: String,
    y_desc: &'static str,
    parts: Vec<String>,
    keys: Vec<String>,
    fixed_top: Option<f64>,
}

/// A stacked bar per cell: `fsync_split.svg` (device, journal, other, so
/// that flush methods, filesystems or disks compare side by side),
/// `commit_path.svg` (each stage's share of a commit, as clients grow) and
/// `commit_sched.svg` (a commit on a CPU, on a run queue, blocked).
fn draw_stacked(svg: &mut String, s: &Stack, bars: &[Bar]) -> std::result::Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    // The parts top of the stack first, as the bars read; then the keys.
    let mut entries: Vec<(String, Swatch)> = s
        .parts
        .iter()
        .enumerate()
        .rev()
        .map(|(k, name)| (name.clone(), Swatch::Box(Palette99::pick(k).to_rgba())))
        .collect();
    entries.extend(s.keys.iter().map(|k| (k.clone(), Swatch::None)));
    // Tall enough for the whole legend: a sweep with many cells has a
    // line of figures per cell, and a cut legend hides the last ones.
    let size = (SIZE.0, SIZE.1.max(legend_height(&entries) + 60));
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root
        .titled(&s.title, ("sans-serif", 26))
        .map_err(|x| e(&x))?;
    // The legend in a panel of its own, right of the plot: it never lies
    // over a bar, and the y axis needs no headroom for it.
    let (plot, side) = root.split_horizontally(size.0 - LEGEND_W);
    // Shares end at 100 %; times at the tallest bar and a little.
    let top = s.fixed_top.unwrap_or_else(|| {
        bars.iter()
            .map(|(_, p)| p.iter().sum::<f64>())
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.05
    });
    let n = bars.len() as f64;
    let mut c = ChartBuilder::on(&plot)
        .margin(24)
        .x_label_area_size(90)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..n - 0.5, 0f64..top)
        .map_err(|x| e(&x))?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            bars.get(i as usize)
                .map(|b| b.0.clone())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len())
        .x_label_formatter(&label)
        .x_desc("cell (threads, settings)")
        .y_desc(s.y_desc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .axis_desc_style(("sans-serif", 20))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|x| e(&x))?;
    for k in 0..s.parts.len() {
        let color = Palette99::pick(k).to_rgba();
        c.draw_series(bars.iter().enumerate().map(|(i, (_, p))| {
            let base: f64 = p.iter().take(k).sum::<f64>().min(top);
            let h = p.get(k).copied().unwrap_or(0.0);
            let x = i as f64;
            Rectangle::new(
                [(x - 0.35, base), (x + 0.35, (base + h).min(top))],
                color.filled(),
            )
        }))
        .map_err(|x| e(&x))?;
    }
    legend_panel(&side, &entries).map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// Width of a stacked chart's legend panel (pixels).
const LEGEND_W: u32 = 300;

/// What marks a legend entry: a stacked part's box, a series' line, or
/// nothing (the column letters' keys).
#[derive(Clone, Copy)]
enum Swatch {
    Box(RGBAColor),
    Line(RGBAColor),
    None,
}

/// A chart's legend in its own panel right of the plot, so that it never
/// lies over a bar or a line: each entry's swatch and text, names longer
/// than a line wrapped.
fn legend_panel<DB: DrawingBackend>(
    side: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, Swatch)],
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 15).into_font();
    let mut y = LEGEND_TOP as i32;
    for (text, swatch) in entries {
        let x = match *swatch {
            Swatch::Box(c) => {
                side.draw(&Rectangle::new([(8, y + 1), (26, y + 13)], c.filled()))?;
                34
            }
            Swatch::Line(c) => {
                side.draw(&PathElement::new(
                    vec![(4, y + 7), (28, y + 7)],
                    c.stroke_width(3),
                ))?;
                34
            }
            Swatch::None => 8,
        };
        for line in wrap(text, LEGEND_CHARS) {
            side.draw(&Text::new(line, (x, y), font.clone()))?;
            y += LEGEND_LINE as i32;
        }
        y += LEGEND_GAP as i32;
    }
    Ok(())
}

/// The pixels [`legend_panel`] takes for `entries`, from its top.
fn legend_height(entries: &[(String, Swatch)]) -> u32 {
    let lines: usize = entries
        .iter()
        .map(|(t, _)| wrap(t, LEGEND_CHARS).len())
        .sum();
    LEGEND_TOP + (lines as u32) * LEGEND_LINE + (entries.len() as u32) * LEGEND_GAP
}

/// The legend panel's layout: first line's top, line height, the gap
/// after an entry (pixels), and a line's characters.
const LEGEND_TOP: u32 = 40;
const LEGEND_LINE: u32 = 18;
const LEGEND_GAP: u32 = 6;
const LEGEND_CHARS: usize = 30;

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match out.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => out.push(word.to_string()),
        }
    }
    out
}

fn draw(
    svg: &mut String,
    spec: &Spec,
    series: &[(String, Vec<(f64, f64)>)],
) -> std::result::Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, 0f64);
    for &(x, y) in pts {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        if y > 0.0 {
            y_lo = y_lo.min(y);
        }
        y_hi = y_hi.max(y);
    }
    if x_lo > x_hi {
        // No data for this chart (e.g. untraced cells have no p99):
        // still a chart, with its axes.
        (x_lo, x_hi) = (1.0, 2.0);
    }
    let root = root
        .titled(&spec.title, ("sans-serif", 26))
        .map_err(|x| e(&x))?;
    let (area, side) = root.split_horizontally(SIZE.0 - LEGEND_W);
    let mut b = ChartBuilder::on(&area);
    b.margin(24).x_label_area_size(60).y_label_area_size(90);
    // Threads grow geometrically in a sweep (1, 8, 16 ... 256): a log
    // axis spaces them evenly, with the swept counts as its ticks (so a
    // narrow range such as 1, 4 is labelled exactly too). Commits per
    // flush spans 1 to thousands once a setting stops flushing per
    // commit: then a log y axis keeps both ends readable.
    let mut ticks: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    if ticks.is_empty() {
        ticks.push(1.0);
    }
    let x = (x_lo * 0.8..x_hi * 1.25).log_scale().with_key_points(ticks);
    let log_y = y_lo <= y_hi && y_hi / y_lo >= 50.0;
    let y_desc = if log_y {
        format!("{}, log scale", spec.y_desc)
    } else {
        spec.y_desc.clone()
    };
    let axes = Axes {
        x_desc: "client threads (connections), log scale",
        y_desc: &y_desc,
        y_decimals: if y_hi >= 100.0 {
            0
        } else if y_hi >= 10.0 {
            1
        } else {
            2
        },
    };
    if log_y {
        plot(b, x, (y_lo * 0.7..y_hi * 1.5).log_scale(), &axes, series)
    } else {
        let y_top = if y_hi > 0.0 { y_hi * 1.15 } else { 1.0 };
        plot(b, x, 0f64..y_top, &axes, series)
    }?;
    let entries: Vec<(String, Swatch)> = series
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), Swatch::Line(Palette99::pick(i).to_rgba())))
        .collect();
    legend_panel(&side, &entries).map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// The axis texts of one chart.
struct Axes<'a> {
    x_desc: &'a str,
    y_desc: &'a str,
    y_decimals: usize,
}

/// Builds the chart on these axis ranges (linear or log), draws the mesh,
/// one line with dots per series (the legend is the caller's panel).
fn plot<X, Y>(
    mut b: ChartBuilder<'_, '_, SVGBackend<'_>>,
    x: X,
    y: Y,
    axes: &Axes,
    series: &[(String, Vec<(f64, f64)>)],
) -> std::result::Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut c = b.build_cartesian_2d(x, y).map_err(|x| e(&x))?;
    c.configure_mesh()
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.*}", axes.y_decimals))
        .axis_desc_style(("sans-serif", 20))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (_, p)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(3)))
            .map_err(|x| e(&x))?;
        c.draw_series(p.iter().map(|&pt| Circle::new(pt, 5, color.filled())))
            .map_err(|x| e(&x))?;
    }
    // The first series again, on top: where lines coincide (a batch
    // chart's p50 and p99 at one client), it stays visible.
    if let Some((_, p)) = series.first() {
        let color = Palette99::pick(0).to_rgba();
        c.draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(3)))
            .map_err(|x| e(&x))?;
        c.draw_series(p.iter().map(|&pt| Circle::new(pt, 5, color.filled())))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stacked chart whose legend is taller than the default size grows
    /// to hold it: its last line is inside the picture.
    #[test]
    fn a_stacked_chart_is_as_tall_as_its_legend() {
        let bars: Vec<Bar> = (0..12)
            .map(|i| (format!("32 thr · {}", column_key(i)), vec![50.0, 50.0]))
            .collect();
        let keys: Vec<String> = (0..12)
            .map(|i| {
                format!(
                    "32 thr · {}: binlog_group_commit_sync_delay=3000 binlog_group_commit_sync_no_delay_count=10, 5873 tps",
                    column_key(i)
                )
            })
            .collect();
        let s = Stack {
            title: "t".into(),
            y_desc: "share (%)",
            parts: vec!["a".into(), "b".into()],
            keys,
            fixed_top: Some(100.0),
        };
        let mut svg = String::new();
        draw_stacked(&mut svg, &s, &bars).unwrap();
        let height: u32 = svg
            .split("height=\"")
            .nth(1)
            .and_then(|h| h.split('"').next())
            .and_then(|h| h.parse().ok())
            .expect("an svg height");
        let mut entries: Vec<(String, Swatch)> =
            s.parts.iter().map(|p| (p.clone(), Swatch::None)).collect();
        entries.extend(s.keys.iter().map(|k| (k.clone(), Swatch::None)));
        let needed = legend_height(&entries);
        assert!(needed > SIZE.1, "the case is not a tall legend: {needed}");
        assert!(height >= needed, "{height} < {needed}");
    }
}
