//! The debuginfod client against Debian's real `debuginfod` server on a
//! loopback port, and against test responders for what a real server
//! does not do on demand (another build's file, silence, a stalled or
//! slow body).
mod common;

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use commitscope::probes::debuginfod::{fetch, FetchError};
use common::*;

/// A debuginfod serving one directory; killed on drop.
struct Debuginfod(Child);

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The fixture built with -g and stripped: (build-id, debug file); the
/// binary is `dir/fake`.
fn split_fixture(dir: &Path) -> (String, std::path::PathBuf) {
    split_fixture_with(dir, "-O2")
}

fn split_fixture_with(dir: &Path, opt: &str) -> (String, std::path::PathBuf) {
    let bin = dir.join("fake");
    let src = testkit::workspace_root().join("tracer/tests/fixture/fake_server.c");
    run(Command::new("gcc")
        .args([opt, "-g", "-Wl,--build-id=sha1", "-DFLAVOR_MARIADB1011"])
        .arg(&src)
        .arg("-o")
        .arg(&bin));
    let srv = dir.join("srv");
    std::fs::create_dir(&srv).unwrap();
    let debug = srv.join("fake.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug));
    run(Command::new("strip").arg("--strip-all").arg(&bin));
    (build_id_hex(&bin), debug)
}

/// Starts debuginfod over `dir/srv` and waits until it serves `id`:
/// (the server, its URL, the bytes it served).
fn serve(dir: &Path, id: &str) -> Option<(Debuginfod, String, Vec<u8>)> {
    serve_with(dir, id, "-F")
}

/// [`serve`] with `-F` (plain files) or `-U` (Debian packages).
fn serve_with(dir: &Path, id: &str, mode: &str) -> Option<(Debuginfod, String, Vec<u8>)> {
    if !has_tool("debuginfod") {
        testkit::skip("no debuginfod: run `cargo xtask setup` (installs debuginfod)");
        return None;
    }
    let port = testkit::free_port();
    let server = Debuginfod(
        testkit::command("debuginfod")
            .args([mode, "-p", &port.to_string(), "-d"])
            .arg(dir.join("db.sqlite"))
            .arg(dir.join("srv"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    // Its first scan takes a moment: ask until it knows the build.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match fetch(&url, id, Duration::from_secs(5), 1 << 30) {
            Ok(b) => return Some((server, url, b)),
            Err(e) => assert!(Instant::now() < deadline, "not served in 30 s: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn fetches_by_build_id_from_a_real_debuginfod() {
    let d = tempfile::tempdir().unwrap();
    let (id, debug) = split_fixture(d.path());
    let Some((_server, url, got)) = serve(d.path(), &id) else {
        return;
    };
    assert_eq!(got, std::fs::read(&debug).unwrap());
    let unknown = "00".repeat(20);
    assert!(matches!(
        fetch(&url, &unknown, Duration::from_secs(5), 1 << 30),
        Err(FetchError::NotFound)
    ));
    assert!(matches!(
        fetch(&url, &id, Duration::from_secs(5), 100),
        Err(FetchError::TooLarge(100))
    ));
}

/// The stripped fixture traced in exact mode from the debug file that
/// only the debuginfod server has; a second run from the cache alone.
#[test]
fn a_stripped_binary_is_traced_exactly_with_a_fetched_debug_file() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (id, _) = split_fixture(d.path());
    let Some((server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let cache = d.path().join("cache");
    // The environment a user would set, on commitscope's command alone.
    let envs = [
        ("DEBUGINFOD_URLS", std::ffi::OsStr::new(&url)),
        ("DEBUGINFOD_CACHE_PATH", cache.as_os_str()),
    ];
    let run_fixture = || {
        let work = tempfile::tempdir().unwrap();
        let (truth, lines, _) = run_traced_fixture_env(
            Command::new(d.path().join("fake"))
                .arg("2000")
                .arg(work.path()),
            &["--debug-dir", "/nonexistent"],
            &envs,
        );
        (truth, lines)
    };
    let (truth, lines) = run_fixture();
    let s = summary(&lines);
    let ctx = format!("truth {truth} summary {s}");
    assert_eq!(s["legend"]["n_write_source"], "log_write_up_to", "{ctx}");
    assert_eq!(
        s["legend"]["n_write_symbol_from"],
        format!("debuginfod {url}"),
        "{ctx}"
    );
    assert_eq!(s["totals"]["n_write"], truth["requests"], "{ctx}");
    assert_eq!(s["totals"]["durable"], truth["durable"], "{ctx}");
    assert_eq!(s["totals"]["n_flush"], truth["flushes"], "{ctx}");
    assert!(cache.join(&id).join("debuginfo").is_file(), "not cached");
    // The server gone: exact again, from the cache.
    drop(server);
    let (truth, lines) = run_fixture();
    let s = summary(&lines);
    assert_eq!(
        s["totals"]["n_write"], truth["requests"],
        "from the cache: {s}"
    );
}

#[test]
fn a_silent_server_times_out() {
    // Accepts, then never answers.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let t0 = Instant::now();
    let r = fetch(&url, &"ab".repeat(20), Duration::from_secs(1), 1 << 20);
    assert!(matches!(r, Err(FetchError::Transport(_))), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    drop(l);
}

/// Answers every request with `body` (HTTP/1.0, 200), as a server that
/// holds the wrong file would.
fn wrong_server(body: Vec<u8>) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    url
}

/// A debug file of another build is refused in one line and not cached.
#[test]
fn a_debug_file_of_another_build_is_refused_and_not_cached() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (_, _) = split_fixture(d.path());
    // Another build: the same source, another build-id (different flags).
    let other = tempfile::tempdir().unwrap();
    let (_, other_debug) = split_fixture_with(other.path(), "-O1");
    let url = wrong_server(std::fs::read(&other_debug).unwrap());
    let cache = d.path().join("cache");
    let mut fx = Command::new(d.path().join("fake"))
        .arg("10")
        .arg(d.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = commitscope()
        .args([
            "trace",
            "--pid",
            &fx.id().to_string(),
            "--debug-dir",
            "/nonexistent",
        ])
        .env("DEBUGINFOD_URLS", &url)
        .env("DEBUGINFOD_CACHE_PATH", &cache)
        .output()
        .unwrap();
    let _ = fx.kill();
    let _ = fx.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "commitscope: debuginfod: {url} sent a file of another build (or without symbols): refused, not cached"
        )),
        "{err}"
    );
    assert!(
        !cache.exists() || std::fs::read_dir(&cache).unwrap().next().is_none(),
        "cached"
    );
    // No probe point without it: one line, exit 2.
    assert_eq!(out.status.code(), Some(2), "{err}");
}

/// `commitscope trace --json ARGS` on the fixture `dir/fake` with exactly
/// `envs` for debuginfod: (exit code, the fixture's truth, JSON lines,
/// stderr lines).
fn trace_fixture(
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (
    Option<i32>,
    serde_json::Value,
    Vec<serde_json::Value>,
    Vec<String>,
) {
    use std::io::{BufRead, Write};
    let work = tempfile::tempdir().unwrap();
    let mut fx = Command::new(dir.join("fake"))
        .arg("500")
        .arg(work.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cmd = commitscope();
    cmd.args([
        "trace",
        "--json",
        "--pid",
        &fx.id().to_string(),
        "--debug-dir",
        "/nonexistent",
    ])
    .args(args)
    .env_remove("DEBUGINFOD_URLS")
    .env_remove("DEBUGINFOD_CACHE_PATH")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let out = lines_of(child.stdout.take().unwrap());
    let mut said = Vec::new();
    // Attached (or failed) before the fixture starts its calls.
    while let Ok(l) = err.recv_timeout(Duration::from_secs(60)) {
        let done = l.contains("tracing pid") || l.contains("error:");
        said.push(l);
        if done {
            break;
        }
    }
    writeln!(fx.stdin.take().unwrap(), "go").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(fx.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = fx.wait();
    let truth = serde_json::from_str(&line).unwrap_or_default();
    let status = child.wait().unwrap();
    said.extend(rest_of(&err));
    (status.code(), truth, json_of(&rest_of(&out)), said)
}

/// `--debuginfod URL` replaces the environment's servers;
/// `--no-debuginfod` asks none (and skips the cache); a bad URL is one line.
#[test]
fn the_command_line_chooses_the_servers() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (id, _) = split_fixture(d.path());
    let Some((_server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let cache = d.path().join("cache");
    let cache_s = cache.to_str().unwrap();
    // The environment names a server that never answers; the flag wins.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let envs = [
        ("DEBUGINFOD_URLS", silent_url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", cache_s),
        ("DEBUGINFOD_TIMEOUT", "1"),
    ];
    let (code, truth, lines, said) = trace_fixture(d.path(), &["--debuginfod", &url], &envs);
    assert_eq!(code, Some(0), "{said:?}");
    let s = summary(&lines);
    assert_eq!(
        s["legend"]["n_write_symbol_from"],
        format!("debuginfod {url}"),
        "{said:?}"
    );
    assert_eq!(s["totals"]["n_write"], truth["requests"], "{s}");
    assert!(!said.iter().any(|l| l.contains(&silent_url)), "{said:?}");

    // --no-debuginfod: not even the cache filled above.
    let (code, _, _, said) = trace_fixture(d.path(), &["--no-debuginfod"], &envs);
    assert_eq!(code, Some(2), "{said:?}");
    let e = one_error_line(&said.join("\n"));
    assert!(e.contains("has neither log_write_up_to"), "{e}");
    assert!(!said.iter().any(|l| l.contains("debuginfod:")), "{said:?}");

    // Not a URL: refused before anything runs.
    let out = commitscope()
        .args(["trace", "--pid", "1", "--debuginfod", "ftp://x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let e = one_error_line(&err);
    assert!(
        e.contains("--debuginfod") && e.contains("is not an http:// or https:// URL"),
        "{e}"
    );
}

/// The user story: a stripped MariaDB (the symbolized 10.11
/// fixture, stripped here; its debug part only on the debuginfod server)
/// run as the managed server by the main command, in exact mode.
#[test]
fn a_stripped_mariadb_gets_exact_probes_from_debuginfod() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(fix) = testkit::symbols_fixture() else {
        testkit::skip("../shared/fixtures/mariadb-10.11.18-symbols is absent");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    for sub in ["bin", "srv"] {
        std::fs::create_dir(d.path().join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(fix.join("share"), d.path().join("share")).unwrap();
    let orig = fix.join("bin/mariadbd");
    let bin = d.path().join("bin/mariadbd");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&orig)
        .arg(d.path().join("srv/mariadbd.debug")));
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&bin)
        .arg(&orig));
    let id = build_id_hex(&bin);
    let Some((_server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let wd = workdir();
    let out = commitscope()
        .args(["--mysqld", bin.to_str().unwrap(), "--debuginfod", &url])
        .args(["--threads", "4", "--duration", "3", "--json"])
        .args(["--workdir", wd.path().to_str().unwrap()])
        .env("DEBUGINFOD_CACHE_PATH", d.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines = json_of(
        &String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>(),
    );
    let s = lines.last().unwrap();
    let legend = &s["header"]["legend"];
    assert_eq!(legend["n_write_source"], "log_write_up_to", "{s}");
    assert_eq!(
        legend["n_write_symbol_from"],
        format!("debuginfod {url}"),
        "{s}"
    );
    assert_eq!(legend["n_flush_source"], "log_t::flush", "{s}");
    assert!(legend["fallback"].is_null(), "{s}");
    // The exact probes agree with the server's own counter.
    let check = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["counter"] == "Innodb_log_writes")
        .unwrap();
    assert!(check["diff_pct"].as_f64().unwrap().abs() < 2.0, "{check}");
    assert_clean(wd.path());
}

/// `sudo` drops `DEBUGINFOD_URLS`: the distributions' `*.urls` files are
/// read instead, and `-v` says so; a silent server is given up after
/// `DEBUGINFOD_TIMEOUT` with one line naming it.
#[test]
fn urls_files_are_read_and_a_silent_server_is_given_up() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (id, _) = split_fixture(d.path());
    let Some((_server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let etc = d.path().join("etc-debuginfod");
    std::fs::create_dir(&etc).unwrap();
    std::fs::write(etc.join("test.urls"), format!("# ours\n{url}\n")).unwrap();
    let cache = d.path().join("cache");
    let envs = [("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())];
    let dir_flag = ["-v", "--debuginfod-urls-dir", etc.to_str().unwrap()];
    let (code, truth, lines, said) = trace_fixture(d.path(), &dir_flag, &envs);
    assert_eq!(code, Some(0), "{said:?}");
    assert_eq!(summary(&lines)["totals"]["n_write"], truth["requests"]);
    let v = format!(
        "commitscope: debuginfod servers: {url} from {}/*.urls; used: debuginfod {url}",
        etc.display()
    );
    assert!(said.contains(&v), "{said:?}");

    // A server that accepts and never answers, with a 1 s timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let other_cache = d.path().join("cache2");
    let envs = [
        ("DEBUGINFOD_URLS", silent_url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", other_cache.to_str().unwrap()),
        ("DEBUGINFOD_TIMEOUT", "1"),
    ];
    let t0 = Instant::now();
    let (code, _, _, said) = trace_fixture(d.path(), &[], &envs);
    assert!(
        t0.elapsed() < Duration::from_secs(1 + 2 + 5),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(code, Some(2), "{said:?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with(&format!("commitscope: debuginfod: {silent_url}: "))),
        "{said:?}"
    );
    drop(silent);
}

/// A truncated file in the cache is removed (one line) and fetched
/// again; a cache that cannot be written is used without caching.
#[test]
fn a_bad_cache_is_mended_or_bypassed() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (id, debug) = split_fixture(d.path());
    let Some((_server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let cache = d.path().join("cache");
    let cached = cache.join(&id).join("debuginfo");
    std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
    let full = std::fs::read(&debug).unwrap();
    std::fs::write(&cached, &full[..full.len() / 3]).unwrap();
    let envs = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap()),
    ];
    let (code, truth, lines, said) = trace_fixture(d.path(), &[], &envs);
    assert_eq!(code, Some(0), "{said:?}");
    assert_eq!(summary(&lines)["totals"]["n_write"], truth["requests"]);
    let removed = format!(
        "commitscope: debuginfod: {} is not a debug file of this build: removed",
        cached.display()
    );
    assert!(said.contains(&removed), "{said:?}");
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        full,
        "refetched into the cache"
    );

    // A cache path under a regular file cannot be created.
    let blocker = d.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let bad = blocker.join("cache");
    let envs = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", bad.to_str().unwrap()),
    ];
    let (code, truth, lines, said) = trace_fixture(d.path(), &[], &envs);
    assert_eq!(code, Some(0), "{said:?}");
    assert_eq!(summary(&lines)["totals"]["n_write"], truth["requests"]);
    assert!(
        said.iter().any(|l| l.starts_with(&format!(
            "commitscope: debuginfod: cannot cache in {}",
            bad.display()
        )) && l.ends_with(": used without caching")),
        "{said:?}"
    );
}

/// The distributions' way: the debug file inside a `-dbgsym` package,
/// which `debuginfod -U` indexes (it unpacks with bsdtar).
#[test]
fn a_dbgsym_package_is_served_and_used() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("bsdtar") || !has_tool("dpkg-deb") {
        testkit::skip("no bsdtar/dpkg-deb: run `cargo xtask setup` (installs libarchive-tools)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (id, debug) = split_fixture(d.path());
    // usr/lib/debug/.build-id/xx/rest.debug in a package, as Debian ships it.
    let pkg = d.path().join("pkg");
    let at = pkg.join("usr/lib/debug/.build-id").join(&id[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::rename(&debug, at.join(format!("{}.debug", &id[2..]))).unwrap();
    std::fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
    std::fs::write(
        pkg.join("DEBIAN/control"),
        "Package: fake-dbgsym\nVersion: 1.0\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: debug symbols for fake\nSection: debug\nPriority: optional\n",
    )
    .unwrap();
    run(Command::new("dpkg-deb")
        .arg("-b")
        .arg(&pkg)
        .arg(d.path().join("srv/fake-dbgsym_1.0_amd64.deb"))
        .stdout(Stdio::null()));
    let Some((_server, url, _)) = serve_with(d.path(), &id, "-U") else {
        return;
    };
    let cache = d.path().join("cache");
    let envs = [("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())];
    let (code, truth, lines, said) = trace_fixture(d.path(), &["--debuginfod", &url], &envs);
    assert_eq!(code, Some(0), "{said:?}");
    let s = summary(&lines);
    assert_eq!(
        s["legend"]["n_write_symbol_from"],
        format!("debuginfod {url}"),
        "{s}"
    );
    assert_eq!(s["totals"]["n_write"], truth["requests"], "{s}");
    assert_eq!(s["totals"]["n_flush"], truth["flushes"], "{s}");
}

/// Announces `len` bytes, sends `first` of them, then `chunk` bytes every
/// 100 ms while `trickle` (else nothing more): a slow or stalled server.
fn slow_server(len: usize, first: usize, trickle: bool) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let head = format!(
                    "HTTP/1.0 200 OK\r\nContent-Length: {len}\r\nContent-Type: application/octet-stream\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&vec![0x7f; first]);
                if !trickle {
                    // Hold the connection open, silent.
                    std::thread::sleep(Duration::from_secs(60));
                    return;
                }
                for _ in 0..600 {
                    if s.write_all(&[0u8; 64 << 10]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    url
}

/// Starts `commitscope trace` on the stripped fixture, asking only `url`,
/// with `cache` as the debuginfod cache; returns it and the fixture.
fn trace_from(dir: &Path, url: &str, cache: &Path, timeout: &str) -> (Child, Child) {
    let fx = Command::new(dir.join("fake"))
        .arg("10")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t = commitscope()
        .args([
            "trace",
            "--pid",
            &fx.id().to_string(),
            "--debug-dir",
            "/nonexistent",
            "--debuginfod",
            url,
        ])
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .env("DEBUGINFOD_TIMEOUT", timeout)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (t, fx)
}

/// Ctrl-C in the middle of a download: exit 130 at once, the temp file
/// removed, nothing in the cache.
#[test]
fn ctrl_c_during_a_download_keeps_nothing() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    split_fixture(d.path());
    let url = slow_server(200 << 20, 1 << 20, true);
    let cache = d.path().join("cache");
    let (mut t, mut fx) = trace_from(d.path(), &url, &cache, "30");
    let err = lines_of(t.stderr.take().unwrap());
    wait_for(&err, "debuginfod: fetching");
    // Bytes are arriving: a temp file exists in the cache.
    let deadline = Instant::now() + Duration::from_secs(10);
    let temp_files = || -> Vec<std::path::PathBuf> {
        walk(&cache)
            .into_iter()
            .filter(|p| file_name(p).starts_with(".debuginfo."))
            .collect()
    };
    while temp_files().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no temp file in {}",
            cache.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(t.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let (status, _) = wait_exit(&mut t, Duration::from_secs(5), "no exit after Ctrl-C");
    let _ = fx.kill();
    let _ = fx.wait();
    let said = rest_of(&err).join("\n");
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(
        said.contains("interrupted during debuginfod download"),
        "{said}"
    );
    assert_eq!(walk(&cache), Vec::<std::path::PathBuf>::new(), "{said}");
}

/// A server that stops sending mid-body is given up after
/// DEBUGINFOD_TIMEOUT without a byte, in one line; nothing is kept.
#[test]
fn a_download_that_stalls_is_given_up() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    split_fixture(d.path());
    let url = slow_server(50 << 20, 1 << 20, false);
    let cache = d.path().join("cache");
    let t0 = Instant::now();
    let (t, mut fx) = trace_from(d.path(), &url, &cache, "2");
    let out = t.wait_with_output().unwrap();
    let _ = fx.kill();
    let _ = fx.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        t0.elapsed() < Duration::from_secs(2 + 2 + 2),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        err.contains(&format!(
            "commitscope: debuginfod: {url}: no data for 2 s after 1048576 bytes"
        )),
        "{err}"
    );
    // Then the next source, and no probe point without one: exit 2.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(walk(&cache), Vec::<std::path::PathBuf>::new(), "{err}");
}

/// Every file under `dir` (none when it does not exist).
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// On a terminal the download shows a bar with bytes, rate and ETA (run
/// under `script`, which gives it a pseudo-terminal).
#[test]
fn a_terminal_gets_a_progress_bar() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("script") {
        testkit::skip("no script(1): run `cargo xtask setup` (util-linux)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    split_fixture(d.path());
    // 1 MiB at once, then 64 KiB every 100 ms: about 1.5 s of bar.
    let url = slow_server((1 << 20) + (15 << 16), 1 << 20, true);
    let mut fx = Command::new(d.path().join("fake"))
        .arg("10")
        .arg(d.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let cmd = format!(
        "{} trace --pid {} --debug-dir /nonexistent --debuginfod {url}",
        env!("CARGO_BIN_EXE_commitscope"),
        fx.id()
    );
    let out = testkit::command("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env("DEBUGINFOD_CACHE_PATH", d.path().join("cache"))
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    let _ = fx.kill();
    let _ = fx.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("debuginfod ") && text.contains("ETA") && text.contains("iB/s"),
        "{text}"
    );
}

/// A debuginfod behind TLS signed by a private CA, as a fleet's own
/// server often is: trusted through SSL_CERT_FILE (as curl and elfutils'
/// client trust it); without it, refused in one line that says why and
/// how to trust it. No root needed: `commitscope probes` only reads.
#[test]
fn an_https_debuginfod_signed_by_a_private_ca() {
    if !has_tool("openssl") {
        testkit::skip("no openssl: run `cargo xtask setup`");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (id, _) = split_fixture(d.path());
    let Some((_server, url, _)) = serve(d.path(), &id) else {
        return;
    };
    let ca = private_ca_and_cert(d.path());
    let https = tls_front(&d.path().join("srv.pem"), &d.path().join("srv.key"), &url);
    let probes = |cache: &str, ca: Option<&Path>| {
        let mut cmd = commitscope();
        cmd.args(["probes", "--mysqld"])
            .arg(d.path().join("fake"))
            .args(["--debuginfod", &https])
            .env("DEBUGINFOD_CACHE_PATH", d.path().join(cache))
            .env_remove("SSL_CERT_DIR")
            .env_remove("DEBUGINFOD_URLS");
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = probes("cache-trusted", Some(&ca));
    assert_eq!(code, Some(0), "{out}{err}");
    // `symbols  debuginfod https://127.0.0.1:PORT`: fetched over TLS.
    let from = format!("debuginfod {https}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("symbols") && l.ends_with(&from)),
        "{out}{err}"
    );

    let (code, out, err) = probes("cache-untrusted", None);
    assert_ne!(code, Some(0), "{out}{err}");
    let said: Vec<_> = err.lines().filter(|l| l.contains(&https)).collect();
    assert!(
        said.iter()
            .any(|l| l.contains("certificate is not trusted here") && l.contains("SSL_CERT_FILE")),
        "{err}"
    );
    assert!(!d.path().join("cache-untrusted").join(&id).exists());
}

/// A CA (`ca.pem`) and a certificate for 127.0.0.1 it signed
/// (`srv.pem`, `srv.key`), made by the openssl CLI in `dir`.
fn private_ca_and_cert(dir: &Path) -> std::path::PathBuf {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-days",
            "1",
            "-subj",
            "/CN=commitscope test CA",
        ])
        .args(ec)
        .current_dir(dir)
        .args(["-keyout", "ca.key", "-out", "ca.pem"])
        .stderr(Stdio::null()));
    run(Command::new("openssl")
        .args(["req", "-subj", "/CN=127.0.0.1"])
        .args(ec)
        .current_dir(dir)
        .args(["-keyout", "srv.key", "-out", "srv.csr"])
        .stderr(Stdio::null()));
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "1", "-in", "srv.csr"])
        .args(["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"])
        .args(["-extfile", "san.ext", "-out", "srv.pem"])
        .current_dir(dir)
        .stderr(Stdio::null()));
    dir.join("ca.pem")
}

/// A TLS front for the plain-HTTP server at `backend` (rustls, one thread
/// per connection): its https:// URL. A GET has no body: the request
/// head goes on with `Connection: close`, so the backend's EOF ends the
/// response.
fn tls_front(cert: &Path, key: &Path, backend: &str) -> String {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};
    let certs = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    );
    let backend = backend.trim_start_matches("http://").to_string();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for tcp in l.incoming().map_while(Result::ok) {
            let (config, backend) = (config.clone(), backend.clone());
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => return,
                    }
                }
                head.truncate(head.len() - 2);
                head.extend_from_slice(b"Connection: close\r\n\r\n");
                let Ok(mut up) = std::net::TcpStream::connect(&backend) else {
                    return;
                };
                if up.write_all(&head).is_ok() {
                    let _ = std::io::copy(&mut up, &mut tls);
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
        }
    });
    url
}
