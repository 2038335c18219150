//! Faults during a run: the server killed under the tool, and the
//! workload's connections killed from another session.
mod common;

use std::{process::Stdio, time::Duration};

use common::*;
use serde_json::Value;

/// A traced main-command run on a managed server, two ticks into its
/// measurement, with its pipes read on threads and its server's pid.
struct Running {
    wd: tempfile::TempDir,
    child: std::process::Child,
    err: std::sync::mpsc::Receiver<String>,
    out: std::sync::mpsc::Receiver<String>,
    /// The stdout lines read so far (the start object and two ticks).
    seen: Vec<String>,
    /// The stderr lines read so far (the `-v` startup phases).
    said: Vec<String>,
    server: u32,
}

fn managed_run(duration: &str) -> Running {
    managed_run_in(workdir(), duration)
}

/// The pipes of a started run: stderr, stdout, and the lines read so far.
struct Started {
    child: std::process::Child,
    err: std::sync::mpsc::Receiver<String>,
    out: std::sync::mpsc::Receiver<String>,
    said: Vec<String>,
    seen: Vec<String>,
}

/// `commitscope -v --threads 8 --json` on a managed server in `workdir`,
/// returned at its first tick.
fn start_managed(workdir: &std::path::Path, duration: &str, extra: &[&str]) -> Started {
    let mut child = commitscope()
        .args(["-v", "--threads", "8", "--duration", duration, "--json"])
        .args(["--workdir", workdir.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let out = lines_of(child.stdout.take().unwrap());
    let said = wait_for(&err, "] run ...");
    let seen = wait_for(&out, "\"type\":\"tick\"");
    Started {
        child,
        err,
        out,
        said,
        seen,
    }
}

fn managed_run_in(wd: tempfile::TempDir, duration: &str) -> Running {
    let Started {
        child,
        err,
        out,
        said,
        mut seen,
    } = start_managed(wd.path(), duration, &[]);
    seen.extend(wait_for(&out, "\"type\":\"tick\""));
    // Our own command line names the workdir too.
    let servers: Vec<u32> = servers_under(wd.path())
        .into_iter()
        .filter(|&p| p != child.id())
        .collect();
    assert_eq!(servers.len(), 1, "{servers:?}");
    Running {
        wd,
        child,
        err,
        out,
        seen,
        said,
        server: servers[0],
    }
}

/// The real user id a process runs as.
fn uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The `mysql` account's uid, from `id -u mysql`.
fn mysql_uid() -> Option<u32> {
    let out = std::process::Command::new("id")
        .args(["-u", "mysql"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[test]
fn as_root_the_managed_server_runs_as_the_mysql_user() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mysql) = mysql_uid() else {
        testkit::skip("no mysql system user: run `cargo xtask setup` (mariadb-server creates it)");
        return;
    };
    let r = managed_run("3");
    let ctx = format!("{:?}", r.said);
    assert!(
        r.said
            .iter()
            .any(|l| l.contains("(server runs as user mysql)")),
        "{ctx}"
    );
    assert_eq!(uid_of(r.server), mysql, "{ctx}");
    use std::os::unix::fs::MetadataExt;
    let dirs: Vec<_> = std::fs::read_dir(r.wd.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let m = std::fs::metadata(&dirs[0]).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (mysql, 0o700), "{ctx}");
    assert_eq!(
        std::fs::metadata(dirs[0].join("data")).unwrap().uid(),
        mysql
    );
    let Running { wd, mut child, .. } = r;
    assert!(child.wait().unwrap().success());
    assert_clean(wd.path());

    // A workdir the mysql user cannot enter: the server runs as root, said why.
    let private = tempfile::Builder::new()
        .prefix("cs-private-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(
        private.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let inner = tempfile::Builder::new()
        .prefix("wd-")
        .tempdir_in(private.path())
        .unwrap();
    let r = managed_run_in(inner, "3");
    assert!(
        r.said.iter().any(|l| l
            .contains("(server runs as user root (the mysql user cannot enter the --workdir))")),
        "{:?}",
        r.said
    );
    assert_eq!(uid_of(r.server), 0);
    let Running { wd, mut child, .. } = r;
    assert!(child.wait().unwrap().success());
    assert_clean(wd.path());
}

#[test]
fn a_killed_managed_server_ends_the_run_with_exit_3() {
    // The exit is timed: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Running {
        wd,
        mut child,
        err,
        out,
        server,
        ..
    } = managed_run("60");
    // SAFETY: killing the test's own grandchild, the managed server.
    unsafe { libc::kill(server as i32, libc::SIGKILL) };
    let (status, took) = wait_exit(&mut child, Duration::from_secs(10), "still running");
    let rest = rest_of(&err);
    let stdout = json_of(&rest_of(&out));
    assert_eq!(status.code(), Some(3), "{rest:?}");
    assert!(
        took < Duration::from_secs(2) + Duration::from_millis(500),
        "took {took:?}"
    );
    let s = stdout.last().expect("a summary");
    assert_eq!(s["type"], "summary", "{s}");
    assert_eq!(s["ended"], "the server died (signal 9)", "{s}");
    assert!(s["workload"]["txns"].as_u64().unwrap() > 0, "{s}");
    assert!(
        rest.iter()
            .any(|l| l.contains("the server died (signal 9)")),
        "{rest:?}"
    );
    assert_clean(wd.path());
}

#[test]
fn a_killed_existing_server_ends_the_run_with_exit_3() {
    // The exit is timed: the machine alone.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(srv) = system_server(&[]) else {
        return;
    };
    let mut child = commitscope()
        .args(srv.client_flags())
        .args(["--threads", "4", "--duration", "60", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let out = lines_of(child.stdout.take().unwrap());
    wait_for(&out, "\"type\":\"tick\"");
    // The test harness is the server's parent and reaps it only at the
    // end: commitscope sees the zombie, and how it died.
    // SAFETY: killing the test's own child, the server.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGKILL) };
    let (status, took) = wait_exit(&mut child, Duration::from_secs(10), "still running");
    let said = rest_of(&err);
    let lines = json_of(&rest_of(&out));
    assert_eq!(status.code(), Some(3), "{said:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let s = lines.last().expect("a summary");
    assert_eq!(s["ended"], "the server died (signal 9)", "{s}");
    assert!(
        said.iter()
            .any(|l| l.starts_with("commitscope: the server died (signal 9)")),
        "{said:?}"
    );
}

#[test]
fn killed_client_connections_reconnect_and_are_counted() {
    let _lane = testkit::lane::shared();
    let Some(srv) = system_server(&[]) else {
        return;
    };
    for threads in ["1", "8"] {
        let mut child = commitscope()
            .args([
                "--no-trace",
                "--threads",
                threads,
                "--duration",
                "5",
                "--json",
            ])
            .args(["--database", "cs_kill"])
            .args(srv.client_flags())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = lines_of(child.stdout.take().unwrap());
        wait_for(&out, "\"type\":\"tick\"");
        let ids = srv
            .query("SELECT id FROM information_schema.PROCESSLIST WHERE db = 'cs_kill'")
            .unwrap();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        assert_eq!(ids.len(), threads.parse::<usize>().unwrap(), "{ids:?}");
        for id in &ids {
            let _ = srv.query(&format!("KILL CONNECTION {id}"));
        }
        let st = child.wait().unwrap();
        let lines = json_of(&rest_of(&out));
        assert!(st.success(), "{threads} clients: {st}");
        let s = lines.last().unwrap();
        let w = &s["workload"];
        let lost = w["errors_by_code"]["io"].as_u64().unwrap_or(0);
        assert!(
            lost >= 1,
            "{threads} clients: no lost connection counted: {s}"
        );
        // The run went on: the last full ticks still committed.
        let ticks: Vec<&Value> = lines.iter().filter(|l| l["type"] == "tick").collect();
        let late = &ticks[ticks.len().saturating_sub(2)];
        assert!(late["workload"]["txns"].as_u64().unwrap() > 0, "{late}");
        assert!(
            w["client_commits"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c.as_u64().unwrap() > 0),
            "{s}"
        );
    }
}

#[test]
fn a_stopped_server_is_marked_stalled_and_the_run_goes_on() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Running {
        wd,
        mut child,
        err,
        out,
        mut seen,
        server,
        ..
    } = managed_run("16");
    // SAFETY: signalling the test's own grandchild, the managed server.
    unsafe { libc::kill(server as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(10));
    // SAFETY: as above.
    unsafe { libc::kill(server as i32, libc::SIGCONT) };
    let status = child.wait().unwrap();
    seen.extend(rest_of(&out));
    let lines = json_of(&seen);
    let rest = rest_of(&err);
    assert!(status.success(), "{status}: {rest:?}");
    let ticks: Vec<&Value> = lines.iter().filter(|l| l["type"] == "tick").collect();
    // The view kept ticking through the stall: one line a second.
    assert!(ticks.len() >= 15, "{} ticks", ticks.len());
    let stalled: Vec<f64> = ticks
        .iter()
        .filter_map(|t| t["stalled_s"].as_f64())
        .collect();
    assert!(
        // (A tick lands a hair early: 1.9993 s counts as 2.)
        stalled.len() >= 7 && stalled.iter().all(|&s| s >= 1.99),
        "{stalled:?}"
    );
    let last_stalled = ticks
        .iter()
        .rposition(|t| t["stalled_s"].is_number())
        .unwrap();
    assert!(
        ticks[last_stalled + 1..]
            .iter()
            .any(|t| t["workload"]["txns"].as_u64().unwrap() > 0),
        "no commit after SIGCONT"
    );
    // The probes still agree with the workload over the whole run.
    let s = lines.last().unwrap();
    assert_eq!(s["type"], "summary", "{s}");
    let commits = s["workload"]["commits"].as_u64().unwrap() as f64;
    let n_write = s["trace"]["n_write"].as_u64().unwrap() as f64;
    assert!(
        (n_write - commits).abs() <= (commits * 0.01).max(5.0),
        "n_write {n_write} vs commits {commits}"
    );
    assert_clean(wd.path());
}

/// A small filesystem for a managed server's workdir: a loop-mounted ext4
/// image (a real disk's behaviour: ENOSPC from the block allocator), else a
/// size-limited tmpfs where loop devices are unavailable. Unmounted on drop.
struct SmallFs {
    _dir: tempfile::TempDir,
    mnt: std::path::PathBuf,
    kind: &'static str,
}

impl SmallFs {
    fn new(mib: u64) -> SmallFs {
        let dir = tempfile::Builder::new()
            .prefix("cs-smallfs-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let img = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let ok = |c: &mut std::process::Command| c.output().is_ok_and(|o| o.status.success());
        std::fs::File::create(&img)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let m = mnt.to_str().unwrap();
        let kind = if ok(std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&img))
            && ok(std::process::Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(m))
        {
            "loop-mounted ext4"
        } else {
            let size = format!("size={mib}m");
            assert!(
                ok(std::process::Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &size, "tmpfs", m])),
                "neither a loop device nor tmpfs could be mounted"
            );
            "size-limited tmpfs"
        };
        eprintln!("full-disk test on a {mib} MiB {kind}");
        SmallFs {
            _dir: dir,
            mnt,
            kind,
        }
    }

    /// Takes all but `leave` bytes of the free space.
    fn fill(&self, leave: u64) {
        let c = std::ffi::CString::new(self.mnt.to_str().unwrap()).unwrap();
        // SAFETY: a valid path and a zeroed out-struct.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        let free = st.f_bavail * st.f_frsize;
        let f = std::fs::File::create(self.mnt.join("ballast")).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: an open file we own.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, free.saturating_sub(leave) as i64) };
        assert_eq!(rc, 0, "fallocate: {}", std::io::Error::last_os_error());
    }

    /// What is on it besides the ballast and ext4's lost+found.
    fn left(&self) -> Vec<String> {
        std::fs::read_dir(&self.mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "ballast" && n != "lost+found")
            .collect()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
    }
}

/// The main command on a managed server in `fs`, filled once it runs:
/// (exit code, stderr lines, JSON lines).
fn fill_during_run(fs: &SmallFs, args: &[&str]) -> (Option<i32>, Vec<String>, Vec<Value>) {
    let Started {
        mut child,
        err,
        out,
        mut said,
        mut seen,
    } = start_managed(&fs.mnt, "120", args);
    fs.fill(2 << 20);
    let (status, took) = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "still running 60 s after the disk filled",
    );
    eprintln!("ended {:.1} s after the disk filled", took.as_secs_f64());
    said.extend(rest_of(&err));
    seen.extend(rest_of(&out));
    (status.code(), said, json_of(&seen))
}

fn assert_disk_full_end(
    code: Option<i32>,
    said: &[String],
    lines: &[Value],
    servers_words: &str,
    fs: &SmallFs,
) {
    let ctx = format!("{} {said:?}", fs.kind);
    assert_eq!(code, Some(3), "{ctx}");
    let s = lines.last().expect("a summary");
    assert_eq!(s["type"], "summary", "{s}");
    assert_eq!(s["end"], "server-cannot-write", "{s}");
    let ended = s["ended"].as_str().unwrap();
    assert!(ended.starts_with("the server's disk is full: "), "{ended}");
    assert!(ended.contains(servers_words), "{ended}");
    assert!(s["workload"]["txns"].as_u64().unwrap() > 0, "{s}");
    // One line says it, after the summary; no error line besides.
    let line = format!("commitscope: {ended}: the summary above covers the run up to then");
    assert!(said.contains(&line), "{ctx}");
    assert!(
        !said.iter().any(|l| l.contains("commitscope: error")),
        "{ctx}"
    );
    assert_eq!(fs.left(), Vec::<String>::new(), "{ctx}");
    assert!(servers_under(&fs.mnt).is_empty(), "{ctx}");
}

#[test]
fn a_full_disk_ends_the_run_with_the_servers_error() {
    let Some(_lane) = root_shared() else {
        return;
    };
    // Inserts: the tablespace cannot grow, every client gets 1114. With
    // --total-rows the workers' stopping must not read as "finished".
    let fs = SmallFs::new(300);
    let (code, said, lines) =
        fill_during_run(&fs, &["--workload", "insert", "--total-rows", "100000000"]);
    assert_disk_full_end(code, &said, &lines, "The table 'test_load' is full", &fs);
    drop(fs);

    // Updates with the binlog on: the binlog write waits for space and
    // every commit behind it stalls; the server's process list says why.
    let fs = SmallFs::new(300);
    let (code, said, lines) = fill_during_run(
        &fs,
        &[
            "--server-option",
            "log_bin=ON",
            "--server-option",
            "sync_binlog=1",
        ],
    );
    assert_disk_full_end(
        code,
        &said,
        &lines,
        "Waiting for someone to free space",
        &fs,
    );
}

#[test]
fn a_workdir_too_small_to_initialise_is_one_line() {
    let Some(_lane) = root_shared() else {
        return;
    };
    // The redo log alone (96 MiB) does not fit.
    let fs = SmallFs::new(48);
    let out = commitscope()
        .args(["--duration", "5", "--workdir", fs.mnt.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = one_error_line(&err);
    assert!(
        line.contains("No space left on device")
            || line.contains("error 28")
            || line.contains("full"),
        "{line}"
    );
    assert_eq!(fs.left(), Vec::<String>::new(), "{err}");
    assert!(servers_under(&fs.mnt).is_empty());
}

/// The ids of the BPF programs process `pid` holds (its fds' `prog_id`).
fn programs_held(pid: u32) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The ids of every BPF program loaded on the host (bpftool's JSON).
fn programs_loaded() -> Vec<u64> {
    let out = std::process::Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "bpftool: {out:?}");
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    all.iter().filter_map(|p| p["id"].as_u64()).collect()
}

/// `kill -9` of the tool leaves nothing behind in the kernel: every probe
/// is a file descriptor's (a perf event or a BPF link, never a tracefs
/// entry or a pinned object), so the kernel drops them with the process.
/// Checked where one could outlive it: the loaded programs (one still
/// loaded is held by an attachment nobody owns) and tracefs's uprobes.
#[test]
fn kill_9_of_trace_leaves_no_probe_behind() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("bpftool") {
        testkit::skip("no bpftool: run `cargo xtask setup` (installs it)");
        return;
    }
    let Some(srv) = symbols_server() else {
        return;
    };
    let mut child = commitscope()
        .args(["trace", "--commit-path", "--json", "--pid"])
        .arg(srv.pid().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let _err = lines_of(child.stderr.take().unwrap());
    srv.drive_updates("cs_test", 2, 50);
    wait_for(&out, "\"type\":\"interval\"");
    let ours = programs_held(child.id());
    assert!(ours.len() >= 5, "trace holds {} programs", ours.len());
    // SAFETY: killing the test's own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    // Freed once the last reference goes (after an RCU grace period).
    let t0 = std::time::Instant::now();
    let left = loop {
        let all = programs_loaded();
        let left: Vec<u64> = ours.iter().copied().filter(|i| all.contains(i)).collect();
        if left.is_empty() || t0.elapsed() > Duration::from_secs(10) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        left.is_empty(),
        "programs still loaded 10 s after kill -9: {left:?}"
    );
    let exe = std::fs::read_link(format!("/proc/{}/exe", srv.pid())).unwrap();
    let events = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default();
    assert!(
        !events.contains(exe.to_str().unwrap()),
        "tracefs uprobes left on the server: {events}"
    );
}
