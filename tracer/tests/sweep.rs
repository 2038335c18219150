//! `commitscope sweep` and `commitscope report` end to end: a managed
//! Debian mariadbd swept over a dynamic and a restart-needing option, the
//! charts rendered to PNG, Ctrl-C and `--resume`, the dry validation pass,
//! a TPC-C sweep, an existing server, and bad input.
mod common;

use std::{
    io::BufReader,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// The chart size the code promises (report::charts::SIZE).
const CHART: (u32, u32) = (1024, 640);
/// Palette99's first colour: the first series' line.
const FIRST_SERIES: [u8; 3] = [230, 25, 75];

fn cell<'a>(all: &'a [Value], key: &str) -> &'a Value {
    all.iter()
        .find(|c| c["key"] == key)
        .unwrap_or_else(|| panic!("no cell {key}"))
}

/// Renders each chart with rsvg-convert and checks the PNG: the promised
/// size, a drawing on it (not blank, not a filled rectangle), and the
/// first series' colour in it. The SVG names its axes and each setting.
fn charts_render(dir: &Path, legends: &[&str]) {
    assert!(
        has_tool("rsvg-convert"),
        "rsvg-convert is missing: `cargo xtask setup` installs librsvg2-bin"
    );
    for name in [
        "throughput",
        "commits_per_flush",
        "redo_fsync_p99",
        "batch_size",
    ] {
        let svg = dir.join(format!("{name}.svg"));
        let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{svg:?}: {e}"));
        assert!(
            text.contains("client threads (connections)"),
            "{name}: no x label"
        );
        let y_label = match name {
            "throughput" => "per second",
            "commits_per_flush" => "commits per redo flush",
            "batch_size" => "requests per redo flush",
            _ => "(µs)",
        };
        assert!(text.contains(y_label), "{name}: no y label {y_label:?}");
        for l in legends {
            assert!(text.contains(l), "{name}: no legend {l:?}");
        }
        assert_chart_fits(&text, legends, None);
        let png = dir.join(format!("{name}.png"));
        run(Command::new("rsvg-convert")
            .args(["-b", "white", "-o"])
            .arg(&png)
            .arg(&svg));
        let decoder = png::Decoder::new(BufReader::new(std::fs::File::open(&png).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), CHART, "{name}");
        let px = info.color_type.samples();
        assert!(px >= 3, "{name}: {:?}", info.color_type);
        let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
        let inked = pixels.iter().filter(|p| p[..3] != [255, 255, 255]).count();
        let share = inked as f64 / pixels.len() as f64;
        assert!(
            (0.01..0.6).contains(&share),
            "{name}: {share:.3} of the image inked"
        );
        let series = pixels
            .iter()
            .filter(|p| {
                p[..3]
                    .iter()
                    .zip(FIRST_SERIES)
                    .all(|(a, b)| a.abs_diff(b) <= 12)
            })
            .count();
        assert!(series > 200, "{name}: {series} pixels of the first series");
    }
}

#[test]
fn sweep_sets_dynamic_options_restarts_for_others_and_charts_them() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let (table, err) = run_ok(commitscope().args([
        "sweep",
        "--threads",
        "1,4",
        "--server-option",
        "innodb_flush_log_at_trx_commit=1,2",
        "--server-option",
        "log_bin=OFF,ON",
        "--server-option",
        "sync_binlog=1",
        "--duration",
        "1.5",
        "--warmup",
        "0.5",
        "--workdir",
        wd.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]));
    eprintln!("sweep took {:.1} s", t0.elapsed().as_secs_f64());
    assert!(err.contains("trx_commit x2 by SET GLOBAL"), "{err}");
    assert!(err.contains("log_bin x2 by restart"), "{err}");
    assert!(
        err.contains("cell 8/8  threads=4 trx_commit=2 log_bin=ON"),
        "{err}"
    );
    let all = sweep_cells(out.path());
    assert_eq!(all.len(), 8, "{all:?}");
    for t in [1, 4] {
        for bin in ["OFF", "ON"] {
            let k = |c: u32| {
                format!(
                    "threads={t} innodb_flush_log_at_trx_commit={c} log_bin={bin} sync_binlog=1"
                )
            };
            let (durable, lazy) = (cell(&all, &k(1)), cell(&all, &k(2)));
            for c in [durable, lazy] {
                assert!(c["commits"].as_u64().unwrap() > 100, "{c}");
                assert_eq!(c["errors"], 0, "{c}");
                // The restart took: binlog fsyncs (sync_binlog=1) only with the binlog on.
                let bf = c["run"]["trace"]["binlog_fsync"].as_u64().unwrap();
                assert_eq!(bf > 0, bin == "ON", "binlog fsyncs {bf}: {c}");
                // The binlog's groups, one per fsync, in the cell.
                if bin == "ON" {
                    let groups = c["binlog"]["groups"].as_u64().unwrap();
                    // A group whose sync is under way at the window's end
                    // is in one count and not yet the other; and the two
                    // counts are read one after the other, so a reader
                    // preempted between them on a busy machine sees a
                    // few more groups end (at ~4,000 a second here).
                    assert!(
                        groups.abs_diff(bf) <= 2 + groups / 200,
                        "{groups} groups, {bf} fsyncs: {c}"
                    );
                } else {
                    assert!(c["binlog"].is_null(), "{c}");
                }
            }
            // SET GLOBAL took: =1 flushes at commit, =2 about once a second.
            let cpf = durable["commits_per_flush"].as_f64().unwrap();
            let ceiling = if t == 1 { 1.1 } else { 4.5 };
            assert!((0.9..=ceiling).contains(&cpf), "trx_commit=1: {durable}");
            let commits = lazy["commits"].as_u64().unwrap();
            let fsyncs = lazy["redo_fsync"].as_u64().unwrap();
            assert!(fsyncs * 20 < commits, "trx_commit=2: {lazy}");
        }
    }
    // The table: rows = threads, one column per setting, tps (commits/flush);
    // what all cells share is said once above it.
    assert!(table.contains("sync_binlog=1 in every cell"), "{table}");
    let header = table
        .lines()
        .find(|l| l.starts_with("| threads |"))
        .unwrap();
    assert_eq!(
        header,
        "| threads | trx_commit=1 log_bin=OFF | trx_commit=2 log_bin=OFF | trx_commit=1 log_bin=ON | trx_commit=2 log_bin=ON |"
    );
    for t in ["| 1 |", "| 4 |"] {
        let row = table.lines().find(|l| l.starts_with(t)).unwrap();
        assert_eq!(row.matches(" (").count(), 4, "{row}");
        assert!(!row.contains(" - "), "{row}");
    }
    let csv = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9, "{csv}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(json["cells"].as_array().unwrap().len(), 8);
    assert_eq!(json["metric"], "tps");
    assert_eq!(
        std::fs::read_dir(out.path().join("ticks")).unwrap().count(),
        8
    );
    charts_render(
        out.path(),
        &["trx_commit=1 log_bin=OFF", "trx_commit=2 log_bin=ON"],
    );
    assert!(out.path().join("binlog_group_size.svg").is_file());
    assert_clean(wd.path());

    // `report` rebuilds the same table and the charts from cells.jsonl.
    for f in [
        "throughput.svg",
        "commits_per_flush.svg",
        "redo_fsync_p99.svg",
        "batch_size.svg",
        "summary.csv",
    ] {
        std::fs::remove_file(out.path().join(f)).unwrap();
    }
    let (again, _) = run_ok(commitscope().arg("report").arg(out.path()));
    assert_eq!(again, table);
    assert_eq!(
        std::fs::read_to_string(out.path().join("summary.csv")).unwrap(),
        csv
    );
    charts_render(out.path(), &["trx_commit=1 log_bin=OFF"]);
}

#[test]
fn ctrl_c_keeps_finished_cells_and_resume_runs_the_rest() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let args = |duration: &str, extra: &[&str]| {
        let mut c = commitscope();
        c.args([
            "sweep",
            "--threads",
            "1,2,3",
            "--duration",
            duration,
            "--warmup",
            "0",
            "--workdir",
            wd.path().to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ])
        .args(extra);
        c
    };
    let mut child = args("2", &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while sweep_cells(out.path()).is_empty() {
        assert!(Instant::now() < deadline, "no cell finished in 90 s");
        assert!(child.try_wait().unwrap().is_none(), "sweep ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Half-way into the next cell.
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("with --resume runs the rest"), "{err}");
    let kept = sweep_cells(out.path());
    assert!((1..=2).contains(&kept.len()), "{kept:?}");
    // The unfinished cell left no interval file.
    assert_eq!(
        std::fs::read_dir(out.path().join("ticks")).unwrap().count(),
        kept.len()
    );
    assert_clean(wd.path());
    let before = std::fs::read_to_string(out.path().join("cells.jsonl")).unwrap();

    // Without --resume the finished cells are never overwritten.
    let o = args("2", &[]).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("pass --resume"), "{e}");
    // Other times would mix incomparable cells.
    let o = args("3", &["--resume"]).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--duration"), "{e}");

    let (table, err) = run_ok(&mut args("2", &["--resume"]));
    let want = format!("({} to run, {} done earlier)", 3 - kept.len(), kept.len());
    assert!(err.contains(&want), "{err}");
    let after = std::fs::read_to_string(out.path().join("cells.jsonl")).unwrap();
    assert!(after.starts_with(&before), "earlier cells changed");
    let keys: Vec<String> = sweep_cells(out.path())
        .iter()
        .map(|c| c["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for t in 1..=3 {
        assert!(keys.contains(&format!("threads={t}")), "{keys:?}");
        assert!(table.contains(&format!("\n| {t} | ")), "{table}");
    }
    assert_clean(wd.path());
}

/// A sweep that must fail before measuring anything: one error line
/// naming the cell, exit 2, no cell recorded, nothing left running.
fn rejected(options: &[&str]) -> String {
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let mut cmd = commitscope();
    cmd.args([
        "sweep",
        "--threads",
        "1,4",
        "--duration",
        "30",
        "--warmup",
        "0",
    ])
    .args(["--workdir", wd.path().to_str().unwrap()])
    .args(["--out", out.path().to_str().unwrap()]);
    for o in options {
        cmd.args(["--server-option", o]);
    }
    let t0 = Instant::now();
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    // Found by the dry pass, long before a 30 s cell could have ended.
    assert!(t0.elapsed() < Duration::from_secs(25), "{err}");
    let line = one_error_line(&err);
    assert!(!out.path().join("cells.jsonl").exists());
    assert_clean(wd.path());
    line
}

#[test]
fn bad_values_are_found_before_the_first_cell() {
    let Some(_lane) = root_shared() else {
        return;
    };
    // Dynamic, out of range: the server clamps it with a warning.
    let e = rejected(&["innodb_flush_log_at_trx_commit=1,7"]);
    assert!(e.contains("cell 3/4 threads=1 trx_commit=7"), "{e}");
    assert!(
        e.contains("Truncated incorrect innodb_flush_log_at_trx_commit value: '7'"),
        "{e}"
    );
    // Needs a restart, not a value the server knows: it does not start.
    let e = rejected(&["innodb_flush_method=fsync,bogus"]);
    assert!(e.contains("cell 3/4 threads=1 flush_method=bogus"), "{e}");
    assert!(e.contains("the server did not start"), "{e}");
    // Needs a restart, out of range: started, but "adjusted".
    let e = rejected(&["innodb_log_buffer_size=16M,1"]);
    assert!(e.contains("cell 3/4 threads=1 log_buffer_size=1"), "{e}");
    assert!(e.contains("adjusted"), "{e}");
    // Unknown to the server: the very first start says so.
    let e = rejected(&["no_such_variable=1,2"]);
    assert!(e.contains("cell 1/4 threads=1 no_such_variable=1"), "{e}");
    assert!(e.contains("no_such_variable"), "{e}");
}

#[test]
fn tpcc_sweep_loads_once_across_restarts_and_reports_tpmc() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let (table, err) = run_ok(commitscope().args([
        "sweep",
        "--workload",
        "tpcc",
        "--warehouses",
        "1",
        "--threads",
        "4",
        "--server-option",
        "innodb_flush_log_at_trx_commit=1,0",
        "--server-option",
        "log_bin=OFF,ON",
        "--duration",
        "3",
        "--warmup",
        "1",
        "--workdir",
        wd.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]));
    // One load: the restart for log_bin=ON keeps the datadir.
    assert_eq!(err.matches("tpcc: loading").count(), 1, "{err}");
    assert!(err.contains("log_bin x2 by restart"), "{err}");
    assert!(
        table.contains("each cell: tpmC (commits per redo flush)"),
        "{table}"
    );
    let all = sweep_cells(out.path());
    assert_eq!(all.len(), 4);
    for c in &all {
        assert!(c["tpmc"].as_f64().unwrap() > 100.0, "{c}");
        assert_eq!(c["warehouses"], 1, "{c}");
        assert_eq!(c["errors"], 0, "{c}");
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(json["metric"], "tpmC");
    let svg = std::fs::read_to_string(out.path().join("throughput.svg")).unwrap();
    assert!(svg.contains("tpmC (New-Order transactions per minute)"));
    assert_clean(wd.path());
}

/// One line, exit 2, no panic (these fail before any server or probe).
fn usage(args: &[&str]) -> String {
    let out = tempfile::tempdir().unwrap();
    let o = commitscope()
        .arg("sweep")
        .args(["--no-trace", "--out", out.path().to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("commitscope: error: "), "{err}");
    err
}

#[test]
fn bad_sweep_input_is_one_line() {
    let e = usage(&["--warehouses", "2"]);
    assert!(e.contains("--warehouses applies to --workload tpcc"), "{e}");
    let e = usage(&["--threads", "0"]);
    assert!(e.contains("--threads"), "{e}");
    let e = usage(&["--threads", "1,8,1"]);
    assert!(e.contains("1 is listed twice"), "{e}");
    let e = usage(&["--server-option", "sync_binlog=0,,1"]);
    assert!(e.contains("empty value"), "{e}");
    let e = usage(&[
        "--server-option",
        "sync_binlog=1",
        "--server-option",
        "sync-binlog=0",
    ]);
    assert!(e.contains("given twice"), "{e}");
    let e = usage(&["--duration", "0"]);
    assert!(e.contains("--duration"), "{e}");
    // `report` on a directory that holds no sweep.
    let dir = tempfile::tempdir().unwrap();
    let o = commitscope()
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("has no cells.jsonl"), "{err}");
}

/// `report` alone (no server, no root): a results dir as a sweep leaves
/// it, rebuilt into the seeds' table, the summaries and the charts.
#[test]
fn report_rebuilds_table_summaries_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sweep.json"),
        r#"{"workload":"update","duration_s":60.0,"warmup_s":10.0,"workload_flags":"","server":"test"}"#,
    )
    .unwrap();
    let mut lines = String::new();
    for (t, tc, tps, cpf, p99, b50, b99) in [
        (1, "1", 900.0, 1.0, 250.0, 1, 1),
        (8, "1", 4100.0, 3.3, 410.0, 3, 8),
        (64, "1", 9000.0, 18.5, 700.0, 16, 64),
        (1, "2", 2500.0, 2500.0, 300.0, 64, 256),
        (8, "2", 9800.0, 9800.0, 310.0, 512, 1024),
        (64, "2", 12000.0, 12000.0, 320.0, 2048, 4096),
    ] {
        let v = serde_json::json!({
            "key": format!("threads={t} innodb_flush_log_at_trx_commit={tc}"),
            "threads": t,
            "settings": [{"name": "innodb_flush_log_at_trx_commit", "value": tc}],
            "finished_at": 0, "wall_s": 70.0, "measured_s": 60.0,
            "tps": tps, "commits": (tps * 60.0) as u64, "commits_per_flush": cpf,
            "n_write": null, "n_flush": null, "write_per_flush": null,
            "redo_fsync": null, "redo_fsync_p99_us": p99,
            "batch_p50": b50, "batch_p99": b99,
            "latency_p50_us": 100, "latency_p99_us": 900, "errors": 0
        });
        lines.push_str(&format!("{v}\n"));
    }
    // A last line cut short by a crash mid-write is skipped, not fatal.
    lines.push_str("{\"key\": \"threads=128");
    std::fs::write(dir.path().join("cells.jsonl"), lines).unwrap();
    let (table, err) = run_ok(commitscope().arg("report").arg(dir.path()));
    assert!(err.contains("line 7 is not a cell record"), "{err}");
    let want = "\
| threads | trx_commit=1 | trx_commit=2 |
|---:|---:|---:|
| 1 | 900.0 (1.00) | 2500.0 (2500.00) |
| 8 | 4100.0 (3.30) | 9800.0 (9800.00) |
| 64 | 9000.0 (18.50) | 12000.0 (12000.00) |
";
    assert!(table.contains(want), "{table}");
    let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7);
    assert!(
        csv.contains("update,,64,\"trx_commit=2\",12000.000,"),
        "{csv}"
    );
    charts_render(dir.path(), &["trx_commit=1", "trx_commit=2"]);
}

/// On a server of the user's: dynamic options only, and every value put
/// back as it was; one that needs a restart is refused in one line.
#[test]
fn existing_server_gets_its_settings_back() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = system_server(&["--innodb-flush-log-at-trx-commit=2"]) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let flags = server.client_flags();
    let (table, _) = run_ok(
        commitscope()
            .arg("sweep")
            .args(&flags)
            .args(["--threads", "2", "--duration", "1", "--warmup", "0"])
            .args(["--server-option", "innodb_flush_log_at_trx_commit=1,0"])
            .args(["--server-option", "sync_binlog=1"])
            .arg("--out")
            .arg(out.path()),
    );
    assert!(
        table.contains("| threads | trx_commit=1 | trx_commit=0 |"),
        "{table}"
    );
    let all = sweep_cells(out.path());
    let durable = cell(
        &all,
        "threads=2 innodb_flush_log_at_trx_commit=1 sync_binlog=1",
    );
    let none = cell(
        &all,
        "threads=2 innodb_flush_log_at_trx_commit=0 sync_binlog=1",
    );
    assert!(
        durable["commits_per_flush"].as_f64().unwrap() <= 2.5,
        "{durable}"
    );
    assert!(
        none["redo_fsync"].as_u64().unwrap() * 20 < none["commits"].as_u64().unwrap(),
        "{none}"
    );
    let now = server
        .query("SELECT CONCAT(@@GLOBAL.innodb_flush_log_at_trx_commit, ',', @@GLOBAL.sync_binlog)")
        .unwrap();
    assert_eq!(now.trim(), "2,0", "settings not restored");
    let o = commitscope()
        .arg("sweep")
        .args(&flags)
        .args(["--threads", "2", "--duration", "1"])
        .args(["--server-option", "log_bin=ON,OFF"])
        .arg("--out")
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("log_bin cannot change on a running server"),
        "{err}"
    );
    assert!(server.query("SELECT 1").is_ok());
}

/// `--dry-run`: the validation pass and the plan, nothing measured.
#[test]
fn dry_run_validates_and_lists_the_cells() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let wd = workdir();
    let out = tempfile::tempdir().unwrap();
    let (plan, err) = run_ok(
        commitscope()
            .args(["sweep", "--dry-run", "--threads", "1,2"])
            .args(["--server-option", "innodb_flush_log_at_trx_commit=1,2"])
            .args(["--server-option", "innodb_flush_method=fsync,O_DIRECT"])
            .arg("--workdir")
            .arg(wd.path())
            .arg("--out")
            .arg(out.path()),
    );
    assert!(
        err.contains("sweep of 8 cells (8 to run, 0 done earlier): every value accepted"),
        "{err}"
    );
    assert!(err.contains("flush_method x2 by restart"), "{err}");
    assert_eq!(
        plan.lines().collect::<Vec<_>>(),
        [
            "cell 1/8 threads=1 trx_commit=1 flush_method=fsync",
            "cell 2/8 threads=2 trx_commit=1 flush_method=fsync",
            "cell 3/8 threads=1 trx_commit=2 flush_method=fsync",
            "cell 4/8 threads=2 trx_commit=2 flush_method=fsync",
            "cell 5/8 threads=1 trx_commit=1 flush_method=O_DIRECT",
            "cell 6/8 threads=2 trx_commit=1 flush_method=O_DIRECT",
            "cell 7/8 threads=1 trx_commit=2 flush_method=O_DIRECT",
            "cell 8/8 threads=2 trx_commit=2 flush_method=O_DIRECT",
        ]
    );
    assert!(!out.path().join("cells.jsonl").exists());
    assert_clean(wd.path());
}

/// `report` on cells recorded with `--io`: the second table splits each
/// cell's redo fsync into device / journal / other, the CSV carries the
/// same, and `fsync_split.svg` draws one stacked bar per cell. Cells
/// without `--io` (an older sweep) get neither table nor chart.
#[test]
fn report_splits_the_fsync_of_io_cells_in_a_table_and_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sweep.json"),
        r#"{"workload":"update","duration_s":10.0,"warmup_s":2.0,"workload_flags":"","server":"test"}"#,
    )
    .unwrap();
    let mut lines = String::new();
    for (method, dev, jnl, other) in [
        ("fsync", 300.0, 120.0, 80.0),
        ("O_DIRECT", 150.0, 0.0, 40.0),
    ] {
        let v = serde_json::json!({
            "key": format!("threads=8 innodb_flush_method={method}"),
            "threads": 8,
            "settings": [{"name": "innodb_flush_method", "value": method}],
            "finished_at": 0, "wall_s": 12.0, "measured_s": 10.0,
            "tps": 1000.0, "commits": 10000, "commits_per_flush": 1.5,
            "n_write": null, "n_flush": null, "write_per_flush": null,
            "redo_fsync": null, "redo_fsync_p99_us": 900.0,
            "latency_p50_us": 100, "latency_p99_us": 900, "errors": 0,
            "io": {"requests_per_sync": 1.25, "kib_per_sync": 6.5,
                   "cache_flushes_per_sync": 1.0, "device_us": dev,
                   "journal_us": jnl, "other_us": other}
        });
        lines.push_str(&format!("{v}\n"));
    }
    std::fs::write(dir.path().join("cells.jsonl"), lines).unwrap();
    let (table, _) = run_ok(commitscope().arg("report").arg(dir.path()));
    assert!(
        table.contains("redo fsync under the hood (--io)"),
        "{table}"
    );
    assert!(
        table.contains("| 8 | 300 / 120 / 80 [1.25, 6.5] | 150 / 0 / 40 [1.25, 6.5] |"),
        "{table}"
    );
    let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let at = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(at("fsync_device_us"), "300.00", "{csv}");
    assert_eq!(at("fsync_journal_us"), "120.00", "{csv}");
    assert_eq!(at("io_requests_per_sync"), "1.25", "{csv}");
    let svg = std::fs::read_to_string(dir.path().join("fsync_split.svg")).unwrap();
    for text in [
        "mean redo fsync (µs)",
        "journal",
        "device",
        "8 thr · B",
        "B: flush_method=O_DIRECT",
    ] {
        assert!(svg.contains(text), "no {text:?} in the chart");
    }
    // Three parts per cell: six filled bars (and three legend swatches).
    assert!(svg.matches("<rect").count() >= 9, "{svg}");

    // The same cells without --io: no split table, no split chart.
    let plain = std::fs::read_to_string(dir.path().join("cells.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("io");
            format!("{v}\n")
        })
        .collect::<String>();
    let dir2 = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("sweep.json"),
        dir2.path().join("sweep.json"),
    )
    .unwrap();
    std::fs::write(dir2.path().join("cells.jsonl"), plain).unwrap();
    let (table, _) = run_ok(commitscope().arg("report").arg(dir2.path()));
    assert!(!table.contains("under the hood"), "{table}");
    assert!(!dir2.path().join("fsync_split.svg").exists());
}
