//! Functions only DWARF knows: a C++ fixture built like a distribution's
//! server (`-O2 -g`, debug part split off by build-id) whose redo flush
//! function is inlined at three call sites and whose `log_write_up_to`
//! symbol is stripped from the debug file's `.symtab`, with one more
//! inlined copy whose `durable` argument is a folded constant.
mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use common::*;
use object::Object;
use readers::probes::dwarf;

const WRITE: &str = "_Z15log_write_up_tombPK19completion_callback";
const FLUSH: &str = "_ZN5log_t5flushEm";

/// Builds the fixture into `dir/inlined`, its debug part (write symbol
/// stripped) at `dir/debug/.build-id/xx/rest.debug`; returns that file.
fn build(dir: &Path) -> PathBuf {
    let bin = dir.join("inlined");
    let src = testkit::workspace_root().join("tracer/tests/fixture/inlined_server.cc");
    run(Command::new("g++")
        .args(["-O2", "-g", "-Wl,--build-id=sha1"])
        .arg(&src)
        .arg("-o")
        .arg(&bin));
    let id = build_id_hex(&bin);
    let at = dir.join("debug/.build-id").join(&id[..2]);
    std::fs::create_dir_all(&at).unwrap();
    let debug = at.join(format!("{}.debug", &id[2..]));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(format!("--strip-symbol={WRITE}"))
        .arg(&bin)
        .arg(&debug));
    run(Command::new("strip").arg("--strip-all").arg(&bin));
    debug
}

fn has_gxx() -> bool {
    if has_tool("g++") {
        return true;
    }
    testkit::skip("no g++: run `cargo xtask setup`");
    false
}

/// What DWARF says, read without root: the write function's out-of-line
/// copy and its inlined copy (argument not readable), the flush function's
/// three inlined copies and the functions they sit in.
#[test]
fn dwarf_finds_stripped_and_inlined_functions() {
    if !has_gxx() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let debug = build(d.path());
    let data = std::fs::read(&debug).unwrap();
    let file = object::File::parse(&*data).unwrap();
    assert!(
        !file
            .symbols()
            .any(|s| object::ObjectSymbol::name(&s) == Ok(WRITE)),
        "the write symbol is still in .symtab"
    );
    let found = dwarf::find(&file, &[WRITE, FLUSH, "no_such_function"]).expect("DWARF");
    let (write, flush) = (&found[0], &found[1]);
    assert!(write.entry.is_some(), "{write:?}");
    assert_eq!(write.inlined.len(), 1, "{write:?}");
    // `durable` (argument 1, RSI) is a folded constant there.
    assert!(!write.inlined[0].arg_readable(1), "{write:?}");
    assert_eq!(write.inlined[0].caller, "commit_inline", "{write:?}");
    assert!(flush.entry.is_none(), "{flush:?}");
    let mut callers: Vec<&str> = flush.inlined.iter().map(|s| s.caller.as_str()).collect();
    callers.sort();
    assert_eq!(
        callers,
        [
            "flush_after_commit",
            "flush_at_checkpoint",
            "flush_in_background"
        ],
        "{flush:?}"
    );
    assert!(found[2].is_empty());
    // A file without DWARF says so.
    let stripped = std::fs::read(d.path().join("inlined")).unwrap();
    assert!(dwarf::find(&object::File::parse(&*stripped).unwrap(), &[WRITE]).is_none());
}

/// Traced: exact counts from the split debug file — n_write counts every
/// call, durable only those it can read, the rest apart; n_flush counts
/// the three inlined copies; `-v` lists every site.
#[test]
fn inlined_and_dwarf_only_functions_are_traced_exactly() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_gxx() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    build(d.path());
    let work = tempfile::tempdir().unwrap();
    let root = d.path().join("debug");
    let (truth, lines, err) = run_traced_fixture(
        Command::new(d.path().join("inlined"))
            .arg("3000")
            .arg(work.path()),
        &[
            "--debug-dir",
            root.to_str().unwrap(),
            "--no-debuginfod",
            "-v",
        ],
    );
    let s = summary(&lines);
    let t = &s["totals"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{v} in {s}"));
    let ctx = format!("truth {truth}\nsummary {s}\nstderr {err:#?}");
    assert_eq!(
        n(&t["n_write"]),
        n(&truth["out_of_line_calls"]) + n(&truth["inlined_calls"]),
        "{ctx}"
    );
    assert_eq!(t["durable"], truth["out_of_line_durable"], "{ctx}");
    assert_eq!(t["durable_unknown"], truth["inlined_calls"], "{ctx}");
    assert_eq!(t["n_flush"], truth["flushes"], "{ctx}");
    assert_eq!(t["flush_calls"], truth["flushes"], "{ctx}");
    assert_eq!(t["redo_fsync"], truth["flushes"], "{ctx}");
    // No return probe on an inlined copy: fsyncs inside it are not told apart.
    assert!(t["redo_fsync_in_flush"].is_null(), "{ctx}");
    assert_eq!(
        s["legend"]["symbol_source"],
        "dwarf + dwarf-inlined (1 site); flush: dwarf-inlined (3 sites)",
        "{ctx}"
    );
    let start = lines.iter().find(|l| l["type"] == "start").expect("start");
    assert_eq!(
        start["legend"]["symbol_source"],
        s["legend"]["symbol_source"]
    );
    for caller in [
        "commit_inline",
        "flush_after_commit",
        "flush_in_background",
        "flush_at_checkpoint",
    ] {
        assert!(
            err.iter()
                .any(|l| l.contains(&format!("inlined into {caller}"))),
            "{caller}: {err:#?}"
        );
    }
    assert!(
        err.iter()
            .any(|l| l.contains("write uprobe (inlined, durable unknown)")),
        "{err:#?}"
    );
}

/// `commitscope probes` (no root): the same plan, printed — the
/// out-of-line entry, every inlined copy with its caller, the source.
#[test]
fn probes_prints_the_plan_with_every_site() {
    if !has_gxx() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    build(d.path());
    let root = d.path().join("debug");
    let out = commitscope()
        .args(["probes", "--json", "--no-debuginfod", "--mysqld"])
        .arg(d.path().join("inlined"))
        .arg("--debug-dir")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exact"], true, "{v}");
    assert_eq!(v["profile"], "mariadb-10.8+", "{v}");
    let points = v["points"].as_array().unwrap();
    let write = &points[0];
    assert_eq!(write["function"], "log_write_up_to", "{v}");
    assert!(write["offset"].as_u64().is_some(), "{v}");
    assert_eq!(write["inlined"].as_array().unwrap().len(), 1, "{v}");
    let flush = &points[1];
    assert_eq!(flush["function"], "log_t::flush", "{v}");
    assert!(flush["offset"].is_null(), "{v}");
    let mut callers: Vec<&str> = flush["inlined"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_str().unwrap())
        .collect();
    callers.sort();
    assert_eq!(
        callers,
        [
            "flush_after_commit",
            "flush_at_checkpoint",
            "flush_in_background"
        ],
        "{v}"
    );
    // Without the debug files: no probe point, one line, exit 2.
    let out = commitscope()
        .args([
            "probes",
            "--no-debuginfod",
            "--debug-dir",
            "/nonexistent",
            "--mysqld",
        ])
        .arg(d.path().join("inlined"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
