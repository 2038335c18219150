//! `--io`: the block requests under each redo fsync, on a real filesystem
//! on a real (loop) block device holding the managed server's datadir, and
//! on tmpfs, where there is no device to look under.
mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use common::*;
use serde_json::Value;

/// A filesystem image loop-mounted for the length of a test; unmounted
/// (which frees the loop device) when dropped, even after a failed assert.
struct LoopMount {
    /// Holds the image and the mount point; removed after the unmount.
    _dir: tempfile::TempDir,
    point: PathBuf,
}

impl LoopMount {
    /// A sparse `mib` MiB image made with `mkfs` (`mkfs.ext4 -q`,
    /// `mkfs.xfs -q`), mounted with `options`. None (with the reason on
    /// stderr) when the tool is missing.
    fn new(mkfs: &[&str], mib: u64, options: &str) -> Option<LoopMount> {
        if !has_tool(mkfs[0]) {
            testkit::skip(&format!("{} is not installed (cargo xtask setup)", mkfs[0]));
            return None;
        }
        let dir = workdir();
        let img = dir.path().join("fs.img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(mib << 20))
            .unwrap();
        run(Command::new(mkfs[0]).args(&mkfs[1..]).arg(&img));
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point).unwrap();
        run(Command::new("mount")
            .args(["-o", &format!("loop,{options}")])
            .arg(&img)
            .arg(&point));
        Some(LoopMount { _dir: dir, point })
    }

    fn path(&self) -> &str {
        self.point.to_str().unwrap()
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.point).status();
    }
}

/// The main command with `--io` at 8 clients on a managed server whose
/// temp dir is `workdir`: the start legend and the summary's trace.
fn run_io(workdir: &str, options: &[&str]) -> (Value, Value) {
    run_io_with(workdir, &[], options)
}

/// [`run_io`] with `extra` arguments.
fn run_io_with(workdir: &str, extra: &[&str], options: &[&str]) -> (Value, Value) {
    let mut args = vec![
        "--threads",
        "8",
        "--duration",
        "4",
        "--warmup",
        "1",
        "--json",
        "--io",
        "--workdir",
        workdir,
    ];
    args.extend_from_slice(extra);
    for o in options {
        args.extend(["--server-option", o]);
    }
    // The server's own init on the filesystem under test: how its files
    // were made (written or allocated) is part of what each sync sends
    // to the device; a copied datadir's fully written redo log left one
    // xfs run at 0.99 write requests per sync.
    let out = commitscope()
        .env_remove(DATADIR_CACHE_VAR)
        .args(&args)
        .output()
        .expect("run commitscope");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    let s = of_type(&lines, "summary")[0].clone();
    (s["header"]["legend"].clone(), s["trace"].clone())
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no {k}: {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k}: {v}"))
}

/// Buffered redo writes (`innodb_log_file_buffering=ON`, fsync method):
/// the log's bytes reach the device inside each fdatasync, so every redo
/// sync has its own write request, and the bytes match the redo bytes
/// written up to page rounding. With the redo log written O_DIRECT, the
/// bytes go to the device in the write call, before the sync, and the
/// sync has only the cache flush left; with `flush_log_at_trx_commit=2`
/// the syncs come once a second, not per commit.
fn check_buffered_then_direct(m: &LoopMount, fs: &str) {
    let (legend, t) = run_io(
        m.path(),
        &["innodb_flush_method=fsync", "innodb_log_file_buffering=ON"],
    );
    let io_line = legend["io"].as_str().unwrap();
    assert!(
        io_line.contains("/dev/loop") && io_line.contains(fs),
        "{io_line}"
    );
    let io = &t["io"];
    let syncs = u(io, "redo_syncs");
    assert!(syncs >= 20, "{io}");
    assert_eq!(syncs, u(&t, "redo_fsync"), "{t}");
    // Every redo sync had a write request of its own, but for the syncs
    // the server made with no redo write before them (fewer writes than
    // syncs: MariaDB's background flush of an idle log), and 1 % for the
    // window's edges (a write before the first tick, its sync after).
    let (written, writes) = (u(&t, "redo_write_bytes"), u(&t, "redo_writes"));
    assert!(
        u(io, "syncs_without_write") <= syncs.saturating_sub(writes) + syncs / 100,
        "{writes} redo writes: {io}"
    );
    assert!(f(io, "requests_per_sync") >= 1.0, "{io}");
    // The bytes the syncing thread sent are the redo bytes written, each
    // write's pages rounded out to the 4 KiB page (at most one more page
    // per write on either side).
    let own = u(io, "bytes") - u(io, "journal_bytes");
    assert!(
        own >= written * 9 / 10 && own <= written + 8192 * writes,
        "attributed {own} B against {written} B in {writes} redo writes: {t}"
    );
    let dev = f(io, "device_share") + f(io, "journal_share");
    assert!(dev > 0.0 && dev <= 1.0, "{io}");
    assert!(u(io, "all_requests") >= u(io, "requests"), "{io}");

    let (_, t) = run_io(
        m.path(),
        &[
            "innodb_flush_method=O_DIRECT",
            "innodb_log_file_buffering=OFF",
        ],
    );
    let io = &t["io"];
    assert!(u(io, "redo_syncs") >= 20, "{io}");
    assert!(
        f(io, "requests_per_sync") < 0.5,
        "O_DIRECT redo: its writes reach the device before the sync: {io}"
    );
    assert!(
        u(io, "syncs_without_write") * 2 > u(io, "redo_syncs"),
        "{io}"
    );

    let (_, t) = run_io(
        m.path(),
        &[
            "innodb_flush_method=fsync",
            "innodb_log_file_buffering=ON",
            "innodb_flush_log_at_trx_commit=2",
        ],
    );
    let io = &t["io"];
    let per_s = u(io, "redo_syncs") as f64 / f(&t, "interval_s");
    assert!(
        per_s <= 3.0,
        "a redo sync a second at =2: {per_s:.1}/s: {io}"
    );
    assert!(u(&t, "n_write") > 20 * u(io, "redo_syncs").max(1), "{t}");
}

#[test]
fn on_ext4_every_redo_fsync_has_its_writes_and_the_bytes_match() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(m) = LoopMount::new(&["mkfs.ext4", "-q", "-F"], 1024, "rw") else {
        return;
    };
    check_buffered_then_direct(&m, "ext4 (data=ordered)");
}

#[test]
fn on_xfs_every_redo_fsync_has_its_writes_and_the_bytes_match() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(m) = LoopMount::new(&["mkfs.xfs", "-q", "-f"], 1024, "rw") else {
        return;
    };
    check_buffered_then_direct(&m, "xfs (internal log)");
}

#[test]
fn on_tmpfs_there_is_no_device_said_in_one_line_and_the_rest_goes_on() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("cs-io-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let (legend, t) = run_io(dir.path().to_str().unwrap(), &[]);
    let io_line = legend["io"].as_str().unwrap();
    assert!(
        io_line.contains("tmpfs") && io_line.contains("no block device"),
        "{io_line}"
    );
    assert!(t.get("io").is_none(), "{t}");
    // The rest as without --io (MariaDB maps its log on tmpfs: no syncs).
    assert!(u(&t, "n_write") > 100, "{t}");
    assert!(Path::new(dir.path()).read_dir().unwrap().next().is_none());
}

/// `--commit-path --io` on the symbolized server (its exact probes time
/// the leaders' fsync): that stage comes in three parts, device, journal
/// and other, in the interval's proportions, and the shares still add up.
#[test]
fn with_the_commit_path_the_leaders_fsync_is_split_under_the_sync() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let Some(m) = LoopMount::new(&["mkfs.ext4", "-q", "-F"], 1024, "rw") else {
        return;
    };
    let bin = fix.join("bin/mariadbd");
    let (_, t) = run_io_with(
        m.path(),
        &["--mysqld", bin.to_str().unwrap(), "--commit-path"],
        &[],
    );
    let stages = t["commit_path"]["stages"].as_array().unwrap();
    let name = |s: &Value| s["stage"].as_str().unwrap().to_string();
    let parts: Vec<String> = stages
        .iter()
        .map(name)
        .filter(|n| n.starts_with("redo fsync (leader): "))
        .collect();
    assert_eq!(
        parts,
        [
            "redo fsync (leader): device",
            "redo fsync (leader): journal",
            "redo fsync (leader): other"
        ],
        "{t}"
    );
    let shares: f64 = stages.iter().map(|s| f(s, "share")).sum();
    assert!((shares - 1.0).abs() <= 0.01, "{t}");
}
