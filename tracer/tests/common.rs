//! Helpers shared by the tracer's integration tests: running `commitscope
//! trace` against a process and reading its JSON lines.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::Value;

/// The binary under test, in an environment of the test's own making:
/// none of the caller's [`testkit::LEAKY_ENV`], no debuginfod server
/// (`DEBUGINFOD_URLS` set and empty: not even the machine's `*.urls`
/// files) and a debuginfod cache that cannot exist (`/proc` takes no new
/// directories), so whatever another test or the machine's user cached
/// is never found. A test that wants a server or a cache sets its own.
pub fn commitscope() -> Command {
    let mut c = testkit::command(env!("CARGO_BIN_EXE_commitscope"));
    c.env("DEBUGINFOD_URLS", "")
        .env("DEBUGINFOD_CACHE_PATH", NO_DEBUGINFOD_CACHE)
        .env(DATADIR_CACHE_VAR, DATADIR_CACHE);
    c
}

/// Managed servers' datadirs are initialised once per binary and init
/// options in a checkout, then copied (`server::template`): the suite
/// ran some 45 stock MySQL initialisations of 3.3 s each. A test of the
/// init itself (interrupted in it) removes the variable.
pub const DATADIR_CACHE_VAR: &str = commitscope::server::template::VAR;
pub const DATADIR_CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/datadir-templates");

/// See [`commitscope`].
pub const NO_DEBUGINFOD_CACHE: &str = "/proc/commitscope-tests-have-no-debuginfod-cache";

/// Skips (returns true) unless root: eBPF needs it.
pub fn needs_root() -> bool {
    !testkit::is_root() && testkit::skip("needs root to load eBPF programs (CI runs as root)")
}

/// A running `commitscope trace --json`, with its stdout lines collected.
pub struct Tracer {
    pub child: Child,
    stderr: mpsc::Receiver<String>,
    stdout: mpsc::Receiver<String>,
    /// stdout lines read before `finish` (by `wait_interval`).
    stdout_lines: Vec<String>,
    pub stderr_lines: Vec<String>,
}

impl Tracer {
    /// Starts tracing `pid` and waits until the probes are attached.
    pub fn start(pid: u32, extra: &[&str]) -> Tracer {
        let pid = pid.to_string();
        let mut args = vec!["--pid", pid.as_str()];
        args.extend_from_slice(extra);
        Self::start_with(&args)
    }

    /// Starts `commitscope trace --json --interval 0.2 ARGS` and waits
    /// until the probes are attached.
    pub fn start_with(args: &[&str]) -> Tracer {
        Self::start_env(args, &[])
    }

    /// [`Tracer::start_with`] with `envs` set on commitscope's command
    /// alone (never on the test process: tests share its environment).
    pub fn start_env(args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> Tracer {
        let mut cmd = commitscope();
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(["trace", "--json", "--interval", "0.2"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn commitscope");
        let (etx, erx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = etx.send(l);
            }
        });
        let (otx, orx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = otx.send(l);
            }
        });
        let mut t = Tracer {
            child,
            stderr: erx,
            stdout: orx,
            stdout_lines: Vec::new(),
            stderr_lines: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match t.stderr.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    let done = l.contains("commitscope: tracing pid");
                    t.stderr_lines.push(l);
                    if done {
                        return t;
                    }
                }
                Err(_) => {
                    if let Ok(Some(st)) = t.child.try_wait() {
                        panic!("commitscope exited early ({st}): {:?}", t.stderr_lines);
                    }
                    assert!(
                        Instant::now() < deadline,
                        "commitscope did not attach: {:?}",
                        t.stderr_lines
                    );
                }
            }
        }
    }

    /// Waits for the first interval line: the sampling loop runs, its
    /// signal handlers are in place.
    pub fn wait_interval(&mut self) {
        loop {
            let l = self
                .stdout
                .recv_timeout(Duration::from_secs(30))
                .expect("no interval line within 30 s");
            let first = l.contains(r#""type":"interval""#);
            self.stdout_lines.push(l);
            if first {
                return;
            }
        }
    }

    /// Waits (at most `limit`) for a stderr line containing `marker`.
    pub fn wait_stderr(&mut self, marker: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        while let Ok(l) = self
            .stderr
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.stderr_lines.push(l.clone());
            if l.contains(marker) {
                return Some(l);
            }
        }
        None
    }

    /// Stops with SIGINT (if still running) and returns all JSON lines.
    pub fn finish(self, interrupt: bool) -> Vec<Value> {
        self.finish_all(interrupt).0
    }

    /// Like `finish`, also returning every stderr line.
    pub fn finish_all(mut self, interrupt: bool) -> (Vec<Value>, Vec<String>) {
        if interrupt {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        }
        let (status, _) = wait_exit(
            &mut self.child,
            Duration::from_secs(30),
            "commitscope did not stop",
        );
        // The reader threads may still hold the last lines: read both
        // pipes to their EOF.
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_secs(10)) {
            self.stderr_lines.push(l);
        }
        assert!(
            status.success(),
            "commitscope failed ({status}): {:?}",
            self.stderr_lines
        );
        let mut lines = Vec::new();
        let mut read = std::mem::take(&mut self.stdout_lines);
        while let Ok(l) = self.stdout.recv_timeout(Duration::from_secs(10)) {
            read.push(l);
        }
        for l in read {
            lines.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")));
        }
        (lines, self.stderr_lines)
    }
}

/// Waits for `child` to exit, failing with `what` after `limit`:
/// (its status, how long it took).
pub fn wait_exit(
    child: &mut Child,
    limit: Duration,
    what: &str,
) -> (std::process::ExitStatus, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return (st, t0.elapsed());
        }
        assert!(t0.elapsed() < limit, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The summary object (the last line).
pub fn summary(lines: &[Value]) -> &Value {
    let s = lines.last().expect("no output");
    assert_eq!(s["type"], "summary", "last line is not the summary: {s}");
    s
}

/// The cells a sweep wrote to `dir/cells.jsonl` so far (none: empty).
pub fn sweep_cells(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("cells.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Sum of a field over the interval lines.
pub fn interval_sum(lines: &[Value], field: &str) -> u64 {
    lines
        .iter()
        .filter(|l| l["type"] == "interval")
        .map(|l| l[field].as_u64().unwrap_or(0))
        .sum()
}

/// Runs a command, asserts it succeeded, returns (stdout, stderr).
pub fn run_ok(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?} failed: {err}\n{text}");
    (text, err)
}

/// The JSON objects among a command's output lines (`--json`).
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The objects of one `"type"` (`start`, `tick`, `summary`, ...).
pub fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| v["type"] == t).collect()
}

/// Runs a command and panics with its stderr on failure.
pub fn run(cmd: &mut Command) {
    run_ok(cmd);
}

pub fn has_tool(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Reads a child's pipe on a thread, line by line.
pub fn lines_of(r: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// A live-view line's tps, when it is a tick (its second field a number).
pub fn tick_tps(l: &str) -> Option<f64> {
    l.split_whitespace().nth(1)?.parse().ok()
}

/// Reads `rx` until `n` ticks have come (at most 120 s: a panic naming
/// `ctx`); the lines read.
pub fn until_ticks(rx: &std::sync::mpsc::Receiver<String>, n: usize, ctx: &str) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while out
        .iter()
        .filter(|l: &&String| tick_tps(l).is_some())
        .count()
        < n
    {
        assert!(Instant::now() < deadline, "{ctx}: no {n} ticks: {out:?}");
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            out.push(l);
        }
    }
    out
}

/// The rest of a child's pipe, once it has exited (to the reader's EOF).
pub fn rest_of(rx: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(10)).ok()).collect()
}

/// The JSON objects among `lines`.
pub fn json_of(lines: &[String]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits for a line containing `marker`; returns the lines seen.
pub fn wait_for(rx: &std::sync::mpsc::Receiver<String>, marker: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let l = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no {marker:?} line: {seen:?}"));
        let hit = l.contains(marker);
        seen.push(l);
        if hit {
            return seen;
        }
    }
}

/// Server processes whose command line mentions `dir`.
pub fn servers_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Nothing of a run survives: no server process, no temp dir.
pub fn assert_clean(workdir: &Path) {
    let left: Vec<_> = std::fs::read_dir(workdir).unwrap().collect();
    assert!(
        left.is_empty(),
        "temp files left in {}: {left:?}",
        workdir.display()
    );
    let procs = servers_under(workdir);
    assert!(procs.is_empty(), "server processes left: {procs:?}");
}

/// A throwaway Debian mariadbd started with `extra` options; None (the
/// test skips, saying why) where it is not installed.
pub fn system_server(extra: &[&str]) -> Option<testkit::Server> {
    let Some(bin) = testkit::system_mariadbd() else {
        testkit::skip("no /usr/sbin/mariadbd: run `cargo xtask setup` (installs mariadb-server)");
        return None;
    };
    Some(testkit::Server::start(&bin, None, extra).unwrap_or_else(|e| panic!("start server: {e}")))
}

/// A throwaway server of the symbolized fixture (exact probes) with the
/// update table `cs_test.tb` (ids 1-100); None (the test skips, saying
/// why) where the fixture is absent.
pub fn symbols_server() -> Option<testkit::Server> {
    let fix = symbols_fixture_or_skip()?;
    Some(symbols_server_of(&fix.join("bin/mariadbd"), &fix))
}

/// [`symbols_server`] from the test's [`own_copy`] of the fixture's
/// binary, for tests that find the server by its binary's path (the
/// copy's dir: keep it while the server runs).
pub fn own_symbols_server() -> Option<(testkit::Server, tempfile::TempDir)> {
    let fix = symbols_fixture_or_skip()?;
    let (dir, bin) = own_copy(&fix.join("bin/mariadbd"));
    Some((symbols_server_of(&bin, &fix), dir))
}

fn symbols_fixture_or_skip() -> Option<std::path::PathBuf> {
    let fix = testkit::symbols_fixture();
    if fix.is_none() {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
    }
    fix
}

fn symbols_server_of(bin: &Path, fix: &Path) -> testkit::Server {
    let s = testkit::Server::start(bin, Some(&fix.join("share")), &[])
        .unwrap_or_else(|e| panic!("start the symbolized server: {e}"));
    s.query(
        "CREATE DATABASE cs_test; CREATE TABLE cs_test.tb (id INT PRIMARY KEY, c INT) ENGINE=InnoDB; \
         INSERT INTO cs_test.tb SELECT seq, 0 FROM cs_test.seq_1_to_100",
    )
    .expect("prepare schema");
    s
}

/// The main command managing `mysqld` with `args` and `--json` in a temp
/// workdir: its summary (the last JSON line), its stderr, and the workdir
/// (to check nothing stays behind). A non-zero exit, or a last line that
/// is not the summary, fails the test.
pub fn managed_summary(mysqld: &Path, args: &[&str]) -> (Value, String, tempfile::TempDir) {
    let wd = workdir();
    let out = commitscope()
        .arg("--mysqld")
        .arg(mysqld)
        .args(args)
        .args(["--json", "--workdir", wd.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    let s = json_lines(&String::from_utf8_lossy(&out.stdout))
        .pop()
        .unwrap_or_else(|| panic!("{args:?}: no JSON line: {err}"));
    assert_eq!(s["type"], "summary", "{args:?}: {s}\n{err}");
    (s, err, wd)
}

pub fn workdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cs-main-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// The one `commitscope: error: ...` line of a failed run's stderr (and
/// no panic or backtrace).
pub fn one_error_line(err: &str) -> String {
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "not one error line: {err}");
    assert!(errors[0].starts_with("commitscope: error: "), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    errors[0].to_string()
}

/// The GNU build-id of an ELF file, in hex (the name debuginfod and the
/// `.build-id/xx/rest.debug` tree use).
pub fn build_id_hex(elf: &Path) -> String {
    use object::Object;
    let data = std::fs::read(elf).unwrap();
    object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .unwrap_or_else(|| panic!("{} has no build-id", elf.display()))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs a C fixture (`fake_server.c`, `group_commit.c`: they wait for "go"
/// on stdin, then print their own counts as one JSON line) under
/// `commitscope trace --pid <fixture> TRACER_ARGS`: (the fixture's truth,
/// the tracer's JSON lines, its stderr). Attaching before "go" is what makes
/// the counts comparable exactly.
pub fn run_traced_fixture(
    fixture: &mut Command,
    tracer_args: &[&str],
) -> (Value, Vec<Value>, Vec<String>) {
    run_traced_fixture_env(fixture, tracer_args, &[])
}

/// [`run_traced_fixture`] with `envs` set on the tracer's command.
pub fn run_traced_fixture_env(
    fixture: &mut Command,
    tracer_args: &[&str],
    envs: &[(&str, &std::ffi::OsStr)],
) -> (Value, Vec<Value>, Vec<String>) {
    let fx = fixture
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the fixture");
    let pid = fx.id().to_string();
    let mut args = vec!["--pid", pid.as_str()];
    args.extend_from_slice(tracer_args);
    let tracer = Tracer::start_env(&args, envs);
    go_and_finish(fx, tracer)
}

/// The second half of [`run_traced_fixture`], for a fixture spawned (with
/// piped stdin and stdout) and traced by the caller: "go", its truth line,
/// its exit, then the tracer's lines and stderr.
pub fn go_and_finish(mut fx: Child, tracer: Tracer) -> (Value, Vec<Value>, Vec<String>) {
    use std::io::Write;
    writeln!(fx.stdin.take().unwrap(), "go").unwrap();
    let mut line = String::new();
    BufReader::new(fx.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(fx.wait().unwrap().success(), "the fixture failed: {line}");
    let truth: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("fixture output not JSON ({e}): {line}"));
    // The tracer ends by itself when the traced process exits.
    let (lines, err) = tracer.finish_all(false);
    (truth, lines, err)
}

/// `commitscope study` (1.5 s per scenario) on a managed server of `bin`
/// in `workdir`, checked as the study reads: exact probes (no fallback),
/// scenarios a-d with 1, 50, 50, 100 threads in order, one client about
/// 1:1, fifty on their own rows batching. Returns the `study` object.
pub fn study_in_order(bin: &Path, workdir: &Path) -> Value {
    let out = commitscope()
        .args(["study", "--json", "--duration", "1.5", "--warmup", "0.5"])
        .arg("--mysqld")
        .arg(bin)
        .arg("--workdir")
        .arg(workdir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let study: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "study")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(study["fallback"], false, "{study}");
    let rows = study["rows"].as_array().unwrap();
    let keys: Vec<&str> = rows
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["a", "b", "c", "d"], "{study}");
    let threads: Vec<u64> = rows
        .iter()
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, [1, 50, 50, 100], "{study}");
    // One client cannot share a flush with anyone: about 1:1.
    let a = rows[0]["write_per_flush"].as_f64().unwrap();
    assert!((0.8..=1.2).contains(&a), "{study}");
    // 50 clients on their own rows batch commits.
    assert!(
        rows[2]["commits_per_flush"].as_f64().unwrap() > 2.0,
        "{study}"
    );
    study
}

/// The main command with `args` on a managed server in a fresh workdir,
/// expected to refuse: exit 2, one error line (returned), nothing left.
pub fn fails(args: &[&str]) -> String {
    let wd = workdir();
    let out = commitscope()
        .args(["--workdir", wd.path().to_str().unwrap(), "--duration", "1"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = one_error_line(&err);
    assert_clean(wd.path());
    line
}

/// Where `commitscope probes --json` puts `role`'s probe in `bin`: the
/// binary's real path and the function's offset. The kernel's uprobe may
/// sit a few bytes in (past an `endbr64`): see [`ProbePoint::holds`].
pub struct ProbePoint {
    pub file: String,
    pub offset: u64,
}

impl ProbePoint {
    pub fn of(bin: &Path, role: &str) -> ProbePoint {
        let (out, _) = run_ok(
            commitscope()
                .args(["probes", "--json", "--mysqld"])
                .arg(bin),
        );
        let v: Value = serde_json::from_str(&out).expect("probes --json");
        let p = v["points"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["role"] == role))
            .unwrap_or_else(|| panic!("no {role} point: {v}"));
        ProbePoint {
            file: bin
                .canonicalize()
                .expect("the binary")
                .display()
                .to_string(),
            offset: p["offset"].as_u64().expect("an out-of-line offset"),
        }
    }

    /// Whether the kernel's probe `p` is this point's (at its entry, or
    /// past a prologue instruction of at most 8 bytes).
    pub fn holds(&self, p: &testkit::bpf_links::PerfProbe) -> bool {
        p.at.rsplit_once('+').is_some_and(|(file, off)| {
            let off = u64::from_str_radix(off.trim_start_matches("0x"), 16);
            file == self.file && off.is_ok_and(|o| (self.offset..=self.offset + 8).contains(&o))
        })
    }
}

/// Waits until `f` holds (polling every 50 ms); panics with `what` after `limit`.
pub fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A JSON number, or the test fails saying what it was.
pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A JSON count, or the test fails saying what it was.
pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Debian unstable's stock MySQL, fetched when the cache is empty. A
/// fetch that fails fails the test: the suite needs it.
pub fn stock_mysqld() -> std::path::PathBuf {
    let m = testkit::stock::MYSQL;
    testkit::stock::ensure(m, &mut |l| eprintln!("stock servers: {l}"))
        .unwrap_or_else(|e| panic!("{}: {e}", m.describe()))
        .server
}

/// The symbolized MariaDB 10.11 fixture's server binary; None (the test
/// skips, saying why) where the fixture is absent.
pub fn symbolized_mariadbd() -> Option<std::path::PathBuf> {
    match testkit::symbols_fixture() {
        Some(f) => Some(f.join("bin/mariadbd")),
        None => {
            testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
            None
        }
    }
}

/// A shared lane (`testkit::lane`) for a test that needs root: its figures
/// are counts that hold beside other tests' load. None (the test skips,
/// saying why) without root.
pub fn root_shared() -> Option<testkit::lane::Lane> {
    (!needs_root()).then(testkit::lane::shared)
}

/// The machine alone (`testkit::lane`) for a test that needs root and
/// compares times or throughput. None (the test skips, saying why)
/// without root.
pub fn root_alone() -> Option<testkit::lane::Lane> {
    (!needs_root()).then(testkit::lane::alone)
}

/// A copy of the server binary `bin` in a temp dir of the test's own:
/// `trace --mysqld <copy>` then finds this test's server alone, whatever
/// other tests run from `bin` beside it. (The dir, kept while the copy is
/// used; the copy's path.)
pub fn own_copy(bin: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("cs-bin-")
        .tempdir()
        .unwrap();
    let to = d.path().join(bin.file_name().expect("a file name"));
    std::fs::copy(bin, &to).unwrap_or_else(|e| panic!("copy {}: {e}", bin.display()));
    (d, to)
}

/// `--commit-path`'s scheduler split in a summary's `trace`: for the
/// commit as a whole and every stage with a mean of at least 20 µs, on
/// CPU + run queue + blocked is the stage's mean within 2 % (blocked is
/// the rest of the wall time: this holds the CPU and run-queue time read
/// at the stage's ends inside its wall time), each part at least 0; and
/// the server's threads' time from /proc is there.
pub fn assert_sched_split(trace: &Value) {
    let c = &trace["commit_path"];
    let parts = |x: &Value| {
        let (cpu, runq, blk) = (
            f(&x["on_cpu_us"]),
            f(&x["run_queue_us"]),
            f(&x["blocked_us"]),
        );
        assert!(cpu >= 0.0 && runq >= 0.0 && blk >= 0.0, "{x}");
        cpu + runq + blk
    };
    let whole = f(&c["mean_us"]);
    let sum = parts(c);
    assert!(
        (sum - whole).abs() <= 0.02 * whole,
        "the commit: {sum} of {whole}: {c}"
    );
    assert!(f(&c["on_cpu_us"]) > 0.0, "a commit runs on a CPU: {c}");
    for s in c["stages"].as_array().unwrap() {
        let mean = f(&s["mean_us"]);
        if mean < 20.0 {
            continue;
        }
        // A short stage's parts may be off by the few µs of the probes'
        // own traps at its ends (2.6 µs on a 69 µs `unattributed` rest,
        // on a host busy with two builds beside four tests).
        let sum = parts(s);
        assert!(
            (sum - mean).abs() <= 0.02 * mean + 5.0,
            "{}: {sum} of {mean}: {c}",
            s["stage"]
        );
    }
    assert!(
        trace["server_cpu_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{trace}"
    );
    assert!(trace["server_runq_ms"].as_f64().is_some(), "{trace}");
    // Every caller runs the main command: its own clients beside them.
    assert!(
        trace["workload_cpu_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{trace}"
    );
    assert!(trace["workload_runq_ms"].as_f64().is_some(), "{trace}");
}

/// The attributes of every `<tag ...>` element of an SVG, and the text
/// inside it (plotters writes one element per line).
fn svg_elements(svg: &str, tag: &str) -> Vec<(std::collections::HashMap<String, String>, String)> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(a) = rest.find(&open) {
        rest = &rest[a + open.len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        let mut attrs = std::collections::HashMap::new();
        let mut head = &rest[..end];
        while let Some(eq) = head.find("=\"") {
            let name = head[..eq].trim().to_string();
            let after = &head[eq + 2..];
            let close = after.find('"').unwrap_or(after.len());
            attrs.insert(name, after[..close].to_string());
            head = &after[(close + 1).min(after.len())..];
        }
        let inner = rest[end + 1..]
            .split(&format!("</{tag}>"))
            .next()
            .unwrap_or_default();
        out.push((attrs, inner.trim().to_string()));
    }
    out
}

/// A chart fits its data: no legend entry (`labels`, each a series or a
/// stacked part) lies over a bar, a line or a point, and with `top` the
/// y axis's labels end there (a share chart: 100).
pub fn assert_chart_fits(svg: &str, labels: &[&str], top: Option<f64>) {
    let num = |a: &std::collections::HashMap<String, String>, k: &str| -> f64 {
        a.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    let texts = svg_elements(svg, "text");
    let legend_x = texts
        .iter()
        .filter(|(_, t)| {
            !t.is_empty()
                && labels
                    .iter()
                    .any(|l| l.starts_with(t.as_str()) || t.starts_with(l))
        })
        .map(|(a, _)| num(a, "x"))
        .fold(f64::MAX, f64::min);
    assert!(
        legend_x < f64::MAX,
        "no legend text of {labels:?} in the chart"
    );
    // Bars: filled rectangles left of the legend (its swatches end before
    // their text, so they pass too).
    for (a, _) in svg_elements(svg, "rect") {
        let fill = a.get("fill").map(String::as_str).unwrap_or("none");
        if ["none", "#FFFFFF", "#000000"].contains(&fill) || num(&a, "x") >= legend_x {
            continue;
        }
        let right = num(&a, "x") + num(&a, "width");
        assert!(
            right <= legend_x,
            "a bar ends at x {right}, under the legend at {legend_x}"
        );
    }
    for (a, _) in svg_elements(svg, "circle") {
        assert!(
            num(&a, "cx") < legend_x,
            "a point at x {} under the legend",
            num(&a, "cx")
        );
    }
    for (a, _) in svg_elements(svg, "polyline") {
        let xs = a.get("points").map(String::as_str).unwrap_or_default();
        for p in xs.split_whitespace() {
            let x: f64 = p.split(',').next().unwrap().parse().unwrap();
            assert!(
                x < legend_x,
                "a line at x {x} under the legend at {legend_x}"
            );
        }
    }
    if let Some(top) = top {
        let ticks: Vec<f64> = texts
            .iter()
            .filter(|(a, _)| num(a, "x") < legend_x)
            .filter_map(|(_, t)| t.trim().parse::<f64>().ok())
            .collect();
        let max = ticks.iter().copied().fold(f64::MIN, f64::max);
        assert!(
            !ticks.is_empty() && max <= top,
            "the y axis runs to {max}, past {top}"
        );
    }
}

/// The pid of the managed server under `wd` started with `--server-id=N`
/// (1: the source, 2: the replica; commitscope's own command line names
/// the workdir too).
pub fn server_with_id(wd: &Path, id: u32) -> Option<u32> {
    let flag = format!("--server-id={id}");
    servers_under(wd).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&flag))
            .unwrap_or(false)
    })
}

/// Waits (at most 2 min) until both managed servers under `wd` run:
/// (source, replica).
pub fn both_servers(wd: &Path) -> (u32, u32) {
    let started = Instant::now();
    loop {
        if let (Some(s), Some(r)) = (server_with_id(wd, 1), server_with_id(wd, 2)) {
            return (s, r);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no pair under {}",
            wd.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A run the test started, interrupted (as a user's Ctrl-C would: it
/// stops every server it started) if the test fails while it still runs.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
            let _ = wait_exit(
                &mut self.0,
                Duration::from_secs(120),
                "the run did not stop",
            );
        }
    }
}

/// The stages of a summary's commit path.
pub fn cp_stages(s: &Value) -> &Vec<Value> {
    s["trace"]["commit_path"]["stages"]
        .as_array()
        .unwrap_or_else(|| panic!("no commit path: {s}"))
}

/// The summary's check row of `counter`.
pub fn check_of<'a>(s: &'a Value, counter: &str) -> &'a Value {
    s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["counter"] == counter)
        .unwrap_or_else(|| panic!("no {counter} check: {s}"))
}

/// Waits until the ticks say the group is down to `tally` (`(group: 2
/// of 3 members ONLINE)`) on a tick that still committed, within a
/// minute; the lines read go into `out`.
pub fn until_a_tick_with(
    orx: &std::sync::mpsc::Receiver<String>,
    tally: &str,
    out: &mut Vec<String>,
    err: &[String],
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no tick went on: {out:?}\n{err:?}"
        );
        let Ok(l) = orx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let on = l.contains(tally) && tick_tps(&l).is_some_and(|t| t > 0.0);
        out.push(l);
        if on {
            return;
        }
    }
}

/// What a group's run says as it loses members, in its family's words.
pub struct Losing<'a> {
    /// The line that says every member takes part: "3 members ONLINE".
    pub ready: &'a str,
    /// The start of the line that says one left: "group member".
    pub said: &'a str,
    /// The ticks' tally once one is gone: "(group: 2 of 3 members ONLINE)".
    pub tally: &'a str,
    /// The line that ends the run without a quorum.
    pub lost: &'a str,
    /// The summary's line of the members that left.
    pub left: &'a str,
}

/// A managed group of three (`mode_args` on `mysqld`): its third member
/// killed mid-run, said within 30 s and the group committing on with
/// two; then its second killed: the run says the group lost its quorum
/// within a minute, exits non-zero, names the members that left, and
/// leaves nothing. Returns the workdir (gone) for more checks.
pub fn kill_two_of_three(mysqld: &Path, mode_args: &[&str], w: &Losing) -> tempfile::TempDir {
    let wd = workdir();
    let mut child = commitscope()
        .arg("--mysqld")
        .arg(mysqld)
        .args(mode_args)
        .args(["--threads", "4", "--duration", "120"])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let erx = lines_of(child.stderr.take().unwrap());
    let orx = lines_of(child.stdout.take().unwrap());
    let mut run = Running(child);
    let mut err = wait_for(&erx, w.ready);
    // Ticks first: the run is measuring.
    let mut out = until_ticks(&orx, 2, &format!("{err:?}"));
    let third = server_with_id(wd.path(), 3).expect("member 3's server");
    // SAFETY: killing a member server found by its command line.
    unsafe { libc::kill(third as i32, libc::SIGKILL) };
    let killed_at = Instant::now();
    err.extend(wait_for(&erx, w.said));
    let said = killed_at.elapsed();
    assert!(
        said < Duration::from_secs(30),
        "said after {said:?}: {err:?}"
    );
    // The group commits on with two: a tick that says so and has
    // transactions (the lines queued before it are older ticks).
    until_a_tick_with(&orx, w.tally, &mut out, &err);
    let second = server_with_id(wd.path(), 2).expect("member 2's server");
    // SAFETY: as above.
    unsafe { libc::kill(second as i32, libc::SIGKILL) };
    let t0 = Instant::now();
    let (status, _) = wait_exit(
        &mut run.0,
        Duration::from_secs(90),
        "commitscope did not end",
    );
    let ended = t0.elapsed();
    err.extend(rest_of(&erx));
    out.extend(rest_of(&orx));
    let ctx = format!(
        "{status} after {ended:?}\n{}\n{}",
        out.join("\n"),
        err.join("\n")
    );
    assert!(!status.success(), "{ctx}");
    assert!(err.iter().any(|l| l.contains(w.lost)), "{ctx}");
    assert!(ended < Duration::from_secs(60), "{ctx}");
    assert!(out.iter().any(|l| l.contains(w.left)), "{ctx}");
    assert_clean(wd.path());
    wd
}
