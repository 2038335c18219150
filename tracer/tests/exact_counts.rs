//! `commitscope trace --json` against a C program that calls functions with
//! the servers' exact mangled names a known number of times: the reported
//! counts must equal the program's own, however its symbols are shipped.
mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use common::*;
use object::Object;
use serde_json::Value;

#[derive(Clone, Copy, Debug)]
enum Variant {
    Unstripped,
    /// Stripped, but the functions are exported in .dynsym (-rdynamic).
    StrippedExported,
    /// Stripped; symbols in <debug-root>/.build-id/xx/rest.debug.
    BuildIdDebug,
    /// Stripped; symbols in a file named by .gnu_debuglink, in `.debug/`.
    DebugLink,
}

const FLAVORS: &[(&str, &str)] = &[
    ("FLAVOR_MYSQL56", "mysql-5.6"),
    ("FLAVOR_MYSQL80", "mysql-8.0.30+"),
    ("FLAVOR_MARIADB1011", "mariadb-10.8+"),
];

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture/fake_server.c")
}

/// Builds the fixture for one flavor and variant; returns (binary, debug root).
fn build(dir: &Path, flavor: &str, v: Variant) -> (PathBuf, PathBuf) {
    let bin = dir.join(format!("fake_{flavor}_{v:?}"));
    let debug_root = dir.join(format!("debugroot_{flavor}_{v:?}"));
    std::fs::create_dir_all(&debug_root).unwrap();
    let mut gcc = Command::new("gcc");
    gcc.args([
        "-O2",
        "-Wall",
        "-Wl,--build-id=sha1",
        &format!("-D{flavor}"),
    ]);
    if matches!(v, Variant::StrippedExported) {
        gcc.arg("-rdynamic");
    }
    run(gcc.arg(source()).arg("-o").arg(&bin));
    let debug = dir.join(format!("{}.debug", file_name(&bin)));
    match v {
        Variant::Unstripped => {}
        Variant::StrippedExported => run(Command::new("strip").arg("--strip-all").arg(&bin)),
        Variant::BuildIdDebug => {
            run(Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&bin)
                .arg(&debug));
            run(Command::new("strip").arg("--strip-all").arg(&bin));
            let hex = build_id_hex(&bin);
            let target = debug_root.join(".build-id").join(&hex[..2]);
            std::fs::create_dir_all(&target).unwrap();
            std::fs::rename(&debug, target.join(format!("{}.debug", &hex[2..]))).unwrap();
        }
        Variant::DebugLink => {
            run(Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&bin)
                .arg(&debug));
            run(Command::new("strip").arg("--strip-all").arg(&bin));
            run(Command::new("objcopy")
                .arg(format!("--add-gnu-debuglink={}", debug.display()))
                .arg(&bin));
            let sub = dir.join(".debug");
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::rename(&debug, sub.join(file_name(&debug))).unwrap();
        }
    }
    if !matches!(v, Variant::Unstripped) {
        let data = std::fs::read(&bin).unwrap();
        let f = object::File::parse(&*data).unwrap();
        assert!(f.symbol_table().is_none(), "{v:?}: .symtab survived strip");
    }
    (bin, debug_root)
}

/// Runs the fixture under `commitscope trace`; returns (truth, trace lines).
fn traced_run(bin: &Path, debug_root: &Path, calls: u32) -> (Value, Vec<Value>) {
    let work = tempfile::tempdir().unwrap();
    let (truth, lines, _) = run_traced_fixture(
        Command::new(bin).arg(calls.to_string()).arg(work.path()),
        &["--debug-dir", debug_root.to_str().unwrap()],
    );
    (truth, lines)
}

#[test]
fn exact_counts_for_every_flavor_and_symbol_source() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("gcc") && testkit::skip("gcc missing: run `cargo xtask setup`") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (flavor, profile) in FLAVORS {
        for v in [
            Variant::Unstripped,
            Variant::StrippedExported,
            Variant::BuildIdDebug,
            Variant::DebugLink,
        ] {
            let (bin, root) = build(dir.path(), flavor, v);
            let (truth, lines) = traced_run(&bin, &root, 5000);
            let s = summary(&lines);
            let t = &s["totals"];
            let ctx = format!("{flavor} {v:?}: truth {truth} summary {s}");
            assert_eq!(s["end"], "target-exited", "{ctx}");
            assert_eq!(s["legend"]["profile"], *profile, "{ctx}");
            assert_eq!(t["n_write"], truth["requests"], "{ctx}");
            assert_eq!(t["durable"], truth["durable"], "{ctx}");
            assert_eq!(t["n_flush"], truth["flushes"], "{ctx}");
            assert_eq!(t["flush_calls"], truth["flushes"], "{ctx}");
            assert_eq!(t["redo_fsync"], truth["redo_syncs"], "{ctx}");
            assert_eq!(t["redo_fsync_in_flush"], truth["flushes"], "{ctx}");
            let outside =
                t["redo_fsync"].as_u64().unwrap() - t["redo_fsync_in_flush"].as_u64().unwrap();
            assert_eq!(
                Some(outside),
                truth["redo_syncs_outside_flush"].as_u64(),
                "{ctx}"
            );
            assert_eq!(t["binlog_fsync"], truth["binlog_syncs"], "{ctx}");
            assert_eq!(t["data_fsync"], truth["data_syncs"], "{ctx}");
            assert_eq!(t["redo_writes"], truth["redo_writes"], "{ctx}");
            assert_eq!(t["redo_write_bytes"], truth["redo_write_bytes"], "{ctx}");
            assert_eq!(t["lost_events"], 0, "{ctx}");
            // The intervals add up to the summary.
            assert_eq!(
                interval_sum(&lines, "n_write"),
                t["n_write"].as_u64().unwrap(),
                "{ctx}"
            );
            assert_eq!(
                interval_sum(&lines, "redo_fsync"),
                t["redo_fsync"].as_u64().unwrap(),
                "{ctx}"
            );
            let source = match v {
                Variant::Unstripped => ".symtab",
                Variant::StrippedExported => ".dynsym",
                Variant::BuildIdDebug => "build-id debug file",
                Variant::DebugLink => ".gnu_debuglink debug file",
            };
            assert_eq!(s["legend"]["n_write_source"], "log_write_up_to", "{ctx}");
            assert_eq!(s["legend"]["n_write_symbol_from"], source, "{ctx}");
        }
    }
}

/// `commitscope trace --fsync-probe <kind>` for 0.3 s on a running fixture.
fn trace_with_fsync_probe(bin: &Path, work: &Path, kind: &str) -> std::process::Output {
    let mut fx = Command::new(bin)
        .arg("10")
        .arg(work)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = commitscope()
        .args([
            "trace",
            "--json",
            "--duration",
            "0.3",
            "--fsync-probe",
            kind,
        ])
        .args(["--pid", &fx.id().to_string()])
        .output()
        .unwrap();
    drop(fx.stdin.take());
    let _ = fx.wait();
    out
}

/// `--fsync-probe`: `auto` uses fentry where the kernel allows it, else a
/// kprobe, else tracepoints (like CI's kernel); `libc` (the traced
/// process's C library) and `tracepoint` count exactly; an explicit `fentry` or
/// `kprobe` either works or fails in one line, exit 2 — and works exactly
/// when `auto` could have used it.
#[test]
fn fsync_probe_choice_and_fallback() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("gcc") && testkit::skip("gcc missing: run `cargo xtask setup`") {
        return;
    }
    let kprobes = Path::new("/sys/bus/event_source/devices/kprobe/type").exists();
    let dir = tempfile::tempdir().unwrap();
    let (bin, root) = build(dir.path(), "FLAVOR_MARIADB1011", Variant::Unstripped);

    let (truth, lines) = traced_run(&bin, &root, 1000);
    let s = summary(&lines);
    let auto = s["legend"]["fsync_probe"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if kprobes {
        assert!(auto == "fentry" || auto == "kprobe", "{s}");
    } else {
        assert!(auto == "fentry" || auto == "tracepoint", "{s}");
    }
    assert_eq!(s["totals"]["redo_fsync"], truth["redo_syncs"], "{s}");
    assert_eq!(s["totals"]["redo_writes"], truth["redo_writes"], "{s}");
    // The writes go by the syncs' mechanism, tracepoints only as the last
    // resort (they slow every syscall on the host).
    let writes = s["legend"]["write_probe"].as_str().unwrap_or_default();
    let want = match auto.as_str() {
        "tracepoint" => "tracepoints sys_enter_write".to_string(),
        other => format!("{other} on __x64_sys_write"),
    };
    assert!(writes.starts_with(&want), "{writes:?}: {s}");

    // The C library's wrappers and the syscall tracepoints, asked for by
    // name, count the same syncs and writes exactly.
    for kind in ["libc", "tracepoint"] {
        let work = tempfile::tempdir().unwrap();
        let (truth, lines, _) = run_traced_fixture(
            Command::new(&bin).arg("1000").arg(work.path()),
            &["--debug-dir", root.to_str().unwrap(), "--fsync-probe", kind],
        );
        let s = summary(&lines);
        let t = &s["totals"];
        assert_eq!(s["legend"]["fsync_probe"], kind, "{s}");
        assert_eq!(t["redo_fsync"], truth["redo_syncs"], "{kind}: {s}");
        assert_eq!(t["redo_writes"], truth["redo_writes"], "{kind}: {s}");
        assert_eq!(t["n_flush"], truth["flushes"], "{kind}: {s}");
        let writes = s["legend"]["write_probe"].as_str().unwrap_or_default();
        let want = if kind == "libc" {
            "uprobes on write"
        } else {
            "tracepoints sys_enter_write"
        };
        assert!(writes.starts_with(want), "{kind}: {writes:?}");
    }

    // A C library replaced on disk while the server runs (a package
    // upgrade leaves `(deleted)` in its maps): probed in the file the
    // process still maps, not in the new one at the same path.
    let old = dir.path().join("oldlibc");
    std::fs::create_dir_all(&old).unwrap();
    let system_libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    std::fs::copy(system_libc, old.join("libc.so.6")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let fx = Command::new(&bin)
        .arg("1000")
        .arg(work.path())
        .env("LD_LIBRARY_PATH", &old)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let maps = format!("/proc/{}/maps", fx.id());
    let ours = old.join("libc.so.6").display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&maps)
        .unwrap_or_default()
        .contains(&ours)
    {
        assert!(std::time::Instant::now() < deadline, "{ours} never mapped");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::remove_file(&ours).unwrap();
    std::fs::copy(system_libc, &ours).unwrap();
    let m = std::fs::read_to_string(&maps).unwrap();
    assert!(m.contains(&format!("{ours} (deleted)")), "{m}");
    let tracer = Tracer::start(
        fx.id(),
        &[
            "--debug-dir",
            root.to_str().unwrap(),
            "--fsync-probe",
            "libc",
        ],
    );
    let (truth, lines, _) = go_and_finish(fx, tracer);
    let s = summary(&lines);
    assert_eq!(
        s["totals"]["redo_fsync"], truth["redo_syncs"],
        "replaced libc: {s}"
    );
    assert_eq!(
        s["totals"]["redo_writes"], truth["redo_writes"],
        "replaced libc: {s}"
    );

    // Linked statically there is no C library to probe: `libc` refuses in
    // one line; `auto` does not need one.
    let fixed = dir.path().join("fake_static");
    run(Command::new("gcc")
        .args(["-O2", "-static", "-DFLAVOR_MARIADB1011"])
        .arg(source())
        .arg("-o")
        .arg(&fixed));
    let out = trace_with_fsync_probe(&fixed, dir.path(), "libc");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("--fsync-probe libc: no uprobes on the C library of pid")
            && err.contains("maps no C library"),
        "{err}"
    );
    let work = tempfile::tempdir().unwrap();
    let (truth, lines, _) = run_traced_fixture(
        Command::new(&fixed).arg("1000").arg(work.path()),
        &["--debug-dir", root.to_str().unwrap()],
    );
    let s = summary(&lines);
    assert_eq!(s["legend"]["fsync_probe"], auto.as_str(), "{s}");
    assert_eq!(s["totals"]["redo_fsync"], truth["redo_syncs"], "{s}");

    for kind in ["fentry", "kprobe"] {
        // Whether the kernel takes it: `auto` tries fentry first; a kernel
        // with the kprobe PMU takes kprobes unless `auto` took fentry
        // before trying them.
        let available = match kind {
            "fentry" => Some(auto == "fentry"),
            _ if auto == "fentry" && kprobes => None,
            _ => Some(kprobes),
        };
        let out = trace_with_fsync_probe(&bin, dir.path(), kind);
        let err = String::from_utf8_lossy(&out.stderr);
        if available.unwrap_or(out.status.success()) {
            assert!(out.status.success(), "{kind}: {err}");
            let last = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap_or_default()
                .to_string();
            assert!(
                last.contains(&format!("\"fsync_probe\":\"{kind}\"")),
                "{kind}: {last}"
            );
        } else {
            assert_eq!(out.status.code(), Some(2), "{kind}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{kind}: {err}");
            assert!(
                err.contains(&format!(
                    "--fsync-probe {kind}: the kernel refused the {kind} on do_fsync"
                )),
                "{err}"
            );
            assert!(
                err.contains("use --fsync-probe auto or tracepoint"),
                "{err}"
            );
        }
    }
}

/// More synced fds than the fd map holds: the overflow is counted
/// (`lost_events`) and reported by the eBPF side through aya-log, never
/// silently dropped.
#[test]
fn fd_map_overflow_is_counted_and_logged() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("gcc") && testkit::skip("gcc missing: run `cargo xtask setup`") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (bin, _) = build(dir.path(), "FLAVOR_MARIADB1011", Variant::Unstripped);
    let work = tempfile::tempdir().unwrap();
    let files = tracer_ebpf::MAX_FDS + 100;
    // Raise the fd limit for the fixture only (root may).
    let fx = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {} && exec \"$0\" \"$@\"", files + 64))
        .arg(&bin)
        .arg(files.to_string())
        .arg(work.path())
        .arg("manyfds")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Attach only once the shell has exec'd the fixture: before that the
    // pid is /bin/sh, which has no probe points.
    let want = bin.canonicalize().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_link(format!("/proc/{}/exe", fx.id())).ok() != Some(want.clone()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the fixture never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let tracer = Tracer::start(fx.id(), &[]);
    let (_, lines, stderr) = go_and_finish(fx, tracer);
    let t = &summary(&lines)["totals"];
    let synced = t["data_fsync"].as_u64().unwrap() + t["other_fsync"].as_u64().unwrap();
    let lost = t["lost_syncs"].as_u64().unwrap();
    // Every sync is either attributed to an fd or counted as lost.
    assert_eq!(synced + lost, u64::from(files), "{t} {stderr:?}");
    assert!(lost >= 100, "{t}");
    assert!(t["lost_events"].as_u64().unwrap() >= lost, "{t}");
    // ... and the eBPF side said so through aya-log.
    assert!(
        stderr
            .iter()
            .any(|l| l.starts_with("commitscope: ebpf: warn: fd map full")),
        "{stderr:?}"
    );
}

/// A trace stopped while a redo flush is between its entry and its sync
/// still counts that flush's sync: the end of a trace is a consistent cut
/// (flushes begun are followed to their sync), or `n_flush` and
/// `redo_fsync_in_flush` disagree by the flushes in flight.
#[test]
fn a_trace_stopped_mid_flush_counts_that_flush_sync() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("gcc") && testkit::skip("gcc missing: run `cargo xtask setup`") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (flavor, _) in FLAVORS {
        let (bin, _) = build(dir.path(), flavor, Variant::Unstripped);
        let (t, truth, _) = stop_mid_flush(&bin, Stall::Ms(150));
        let ctx = format!("{flavor}: truth {truth} totals {t}");
        assert_eq!(t["durable"], truth["durable"], "{ctx}");
        assert_eq!(t["n_flush"], truth["flushes"], "{ctx}");
        assert_eq!(t["redo_fsync"], truth["redo_syncs"], "{ctx}");
        assert_eq!(t["redo_fsync_in_flush"], truth["flushes"], "{ctx}");
    }
}

/// A flush that outlasts the end's wait (a stalled disk): the trace does
/// not wait for it, and says in one line what it left open.
#[test]
fn a_trace_whose_flush_outlasts_the_end_says_what_stayed_open() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("gcc") && testkit::skip("gcc missing: run `cargo xtask setup`") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (bin, _) = build(dir.path(), "FLAVOR_MARIADB1011", Variant::Unstripped);
    let (t, truth, stderr) = stop_mid_flush(&bin, Stall::UntilTraceEnds);
    let ctx = format!("truth {truth} totals {t} stderr {stderr:?}");
    let open: Vec<_> = stderr.iter().filter(|l| l.contains("still open")).collect();
    assert_eq!(open.len(), 1, "{ctx}");
    assert!(
        open[0].starts_with("commitscope: 1 redo flush still open 250 ms"),
        "{ctx}"
    );
    // Counted at its entry; its fdatasync came after the probes were gone.
    assert_eq!(t["n_flush"], truth["flushes"], "{ctx}");
    assert_eq!(t["redo_fsync_in_flush"], 0, "{ctx}");
}

/// How long the fixture's flush waits before its fdatasync.
#[derive(Clone, Copy, PartialEq)]
enum Stall {
    /// A fixed time, usually within the trace's end.
    Ms(u32),
    /// Until the trace has ended: a fixed time cannot promise that on a
    /// loaded machine (2 s once passed before the trace was stopped).
    UntilTraceEnds,
}

/// Runs the fixture's `cut` mode (its flush stalls as `stall` says before
/// its fdatasync), interrupts a trace of it from inside the flush, and
/// returns the trace's totals, the fixture's own counts and the trace's
/// stderr.
fn stop_mid_flush(bin: &std::path::Path, stall: Stall) -> (Value, Value, Vec<String>) {
    use std::io::{BufRead, BufReader, Write};
    let work = tempfile::tempdir().unwrap();
    let stall_arg = match stall {
        Stall::Ms(ms) => ms.to_string(),
        Stall::UntilTraceEnds => "hold".to_string(),
    };
    let mut fx = Command::new(bin)
        .args(["1", work.path().to_str().unwrap(), "cut", &stall_arg])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut tracer = Tracer::start(fx.id(), &[]);
    // Interrupt the loop, not the setup before it.
    tracer.wait_interval();
    let mut stdin = fx.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut out = BufReader::new(fx.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), r#"{"in_flush":true}"#);
    // Stop the trace now: the fixture is inside the flush function and
    // syncs `ms` later, or once the trace has ended.
    let (lines, stderr) = tracer.finish_all(true);
    if stall == Stall::UntilTraceEnds {
        writeln!(stdin, "sync").unwrap();
    }
    line.clear();
    out.read_line(&mut line).unwrap();
    let truth: Value = serde_json::from_str(&line).unwrap();
    drop(stdin);
    assert!(fx.wait().unwrap().success());
    (summary(&lines)["totals"].clone(), truth, stderr)
}
