//! `commitscope exporter` against real servers: exact counts beside
//! `commitscope trace`, restarts, two servers, bad input, SIGTERM.
//! Each test counts its own server's flushes beside other tests (a
//! shared lane); the SIGTERM test counts the machine's BPF programs, and
//! runs alone.
mod common;
mod exporter_kit;

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use common::*;
use exporter_kit::*;

/// Waits until the counts of `server` in the exporter stop moving (the
/// workload is over and the last flush is in), and returns the text.
fn settled(e: &Exporter, names: &[&str], labels: &[&str]) -> String {
    let mut last = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let t = e.metrics();
        let now: Vec<Option<f64>> = names.iter().map(|n| sample(&t, n, labels)).collect();
        if last.as_ref() == Some(&now) {
            return t;
        }
        last = Some(now);
    }
    panic!("the exporter's counts kept moving for 10 s");
}

#[test]
fn exact_counts_equal_the_trace_of_the_same_window() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&["--pid", &pid, "--anatomy", "--probes", "exact"]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let l = label(&server);
    let names = [
        "commitscope_log_write_requests_total",
        "commitscope_redo_flushes_total",
    ];
    let durable = [l.as_str(), "durable=\"true\""];
    // The window's edges with the server frozen: its background threads
    // (the master thread's once-a-second log write, the page cleaner)
    // cannot fall between the exporter's read and the trace's attach or
    // detach, so both see exactly the same calls.
    let freeze = |sig: i32| {
        // SAFETY: signalling the test's own server by pid.
        unsafe { libc::kill(server.pid() as i32, sig) };
        std::thread::sleep(Duration::from_millis(200));
    };
    freeze(libc::SIGSTOP);
    let tracer = Tracer::start(server.pid(), &[]);
    let base = e.metrics();
    freeze(libc::SIGCONT);
    let commits = server.drive_updates("cs_test", 4, 300);
    settled(&e, &names, &[&l]);
    freeze(libc::SIGSTOP);
    let after = e.metrics();
    let lines = tracer.finish(true);
    freeze(libc::SIGCONT);
    let t = &summary(&lines)["totals"];
    let d = |text: &str, n: &str, ls: &[&str]| sample(text, n, ls).expect(n) as u64;
    let ctx = format!("trace totals {t}\nexporter at the start:\n{base}\nat the end:\n{after}");
    let ours = d(&after, names[0], &durable) - d(&base, names[0], &durable);
    let flushes = d(&after, names[1], &[&l]) - d(&base, names[1], &[&l]);
    assert!(
        ours >= commits,
        "{ours} durable requests < {commits} commits: {ctx}"
    );
    assert_eq!(Some(ours), t["durable"].as_u64(), "{ctx}");
    assert_eq!(Some(flushes), t["n_flush"].as_u64(), "{ctx}");
    // The anatomy: every durable call (none in flight: the server is
    // idle, then frozen) is a leader or a follower; every flush one batch.
    let role = |text: &str, r: &str| d(text, "commitscope_durable_writes_total", &[&l, r]);
    let roles = |text: &str| role(text, "role=\"leader\"") + role(text, "role=\"follower\"");
    assert_eq!(roles(&after) - roles(&base), ours, "{ctx}");
    let batches = |text: &str| d(text, "commitscope_flush_batch_size_count", &[&l]);
    assert_eq!(batches(&after) - batches(&base), flushes, "{ctx}");
    let waits = |text: &str| {
        d(
            text,
            "commitscope_durable_write_wait_seconds_count",
            &[&l, "role=\"leader\""],
        )
    };
    assert_eq!(
        waits(&after) - waits(&base),
        role(&after, "role=\"leader\"") - role(&base, "role=\"leader\""),
        "{ctx}"
    );
    assert_eq!(
        sample(&after, "commitscope_probe_info", &[&l, "mode=\"exact\""]),
        Some(1.0),
        "{ctx}"
    );
    assert_eq!(
        sample(&after, "commitscope_lost_events_total", &[&l]),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "commitscope_attaches_total", &[&l]),
        Some(1.0)
    );
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
}

#[test]
fn openmetrics_when_asked_and_an_index_page() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = system_server(&[]) else {
        return;
    };
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&["--pid", &pid]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let (status, om) = e.get(
        "/metrics",
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    );
    assert!(status.contains("200"), "{status}");
    assert!(
        om.contains("application/openmetrics-text; version=1.0.0"),
        "{om}"
    );
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    assert!(om.contains("# TYPE commitscope_redo_flushes counter"));
    let (_, text) = e.get("/metrics", "text/plain");
    assert!(text.contains("text/plain; version=0.0.4"), "{text}");
    assert!(text.contains("# TYPE commitscope_redo_flushes_total counter"));
    assert!(!text.contains("# EOF"));
    // Debian's stripped server: the server-layer fallback.
    let l = label(&server);
    assert_eq!(
        sample(
            &text,
            "commitscope_probe_info",
            &[&l, "mode=\"server-layer\""]
        ),
        Some(1.0),
        "{text}"
    );
    // Light by default: commits by the server's counter (root logs in by
    // the socket), none per commit.
    assert!(
        sample(
            &text,
            "commitscope_status_commits_total",
            &[&l, "counter=\"Handler_commit\""]
        )
        .is_some(),
        "{text}"
    );
    assert!(
        !text.contains("commitscope_server_commits_total{"),
        "{text}"
    );
    assert!(sample(&text, "process_resident_memory_bytes", &[]).is_some_and(|v| v > 0.0));
    let (status, page) = e.get("/", "text/html");
    assert!(status.contains("200"));
    assert!(
        page.contains(&server.dir.path().join("data").display().to_string()),
        "{page}"
    );
    assert!(page.contains("href=\"/metrics\""));
    let (status, _) = e.get("/nope", "text/html");
    assert!(status.contains("404"), "{status}");
    e.stop(libc::SIGINT);
}

#[test]
fn a_restarted_server_is_reattached_and_its_counters_continue() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mut fixture) = symbols_server() else {
        return;
    };
    let Some(debian) = system_server(&[]) else {
        return;
    };
    let sockets = [
        fixture.socket.display().to_string(),
        debian.socket.display().to_string(),
    ];
    let mut e = Exporter::start(&[
        "-S",
        &sockets[0],
        "-S",
        &sockets[1],
        "--rescan",
        "1",
        "--probes",
        "exact",
    ]);
    // Both, in whichever order the scan found them: the fixture's counts
    // can settle before the stripped server's symbols are read.
    for pid in [fixture.pid(), debian.pid()] {
        let marker = format!("attached pid {pid}");
        if !e.lines.iter().any(|l| l.contains(&marker)) {
            e.wait_for(&marker, Duration::from_secs(60));
        }
    }
    let (lf, ld) = (label(&fixture), label(&debian));
    fixture.drive_updates("cs_test", 2, 200);
    let t1 = settled(&e, &["commitscope_redo_flushes_total"], &[&lf]);
    let w1 = sample(
        &t1,
        "commitscope_log_write_requests_total",
        &[&lf, "durable=\"true\""],
    )
    .unwrap();
    // Two servers, two label values, each its own counts.
    assert!(
        sample(&t1, "commitscope_probe_info", &[&ld]).is_some(),
        "{t1}"
    );
    assert!(w1 >= 400.0, "{t1}");
    let old = fixture.pid();
    fixture.restart().expect("restart the fixture");
    let t0 = Instant::now();
    e.wait_for(
        &format!("re-attached pid {}", fixture.pid()),
        Duration::from_secs(10),
    );
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(10), "re-attached after {took:?}");
    assert!(
        e.lines
            .iter()
            .any(|l| l.contains(&format!("detached pid {old}"))),
        "{:#?}",
        e.lines
    );
    fixture.drive_updates("cs_test", 2, 200);
    let t2 = settled(&e, &["commitscope_redo_flushes_total"], &[&lf]);
    let w2 = sample(
        &t2,
        "commitscope_log_write_requests_total",
        &[&lf, "durable=\"true\""],
    )
    .unwrap();
    assert!(w2 >= w1 + 400.0, "counters went on from {w1}: {w2}\n{t2}");
    assert_eq!(
        sample(&t2, "commitscope_attaches_total", &[&lf]),
        Some(2.0),
        "{t2}"
    );
    assert_eq!(
        sample(&t2, "commitscope_attaches_total", &[&ld]),
        Some(1.0),
        "{t2}"
    );
    for name in ["commitscope_redo_flushes_total", "commitscope_fsyncs_total"] {
        let a = sample(&t1, name, &[&lf]).unwrap();
        let b = sample(&t2, name, &[&lf]).unwrap();
        assert!(b >= a, "{name} went down: {a} -> {b}");
    }
    e.stop(libc::SIGTERM);
}

/// The kernel's loaded BPF programs named like ours.
fn our_programs() -> usize {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter(|p| {
            p.name_as_str().is_some_and(|n| {
                ["write_", "flush_", "sync_"]
                    .iter()
                    .any(|p| n.starts_with(p))
            })
        })
        .count()
}

#[test]
fn sigterm_detaches_every_probe_and_exits_0() {
    // The machine's programs are counted: no other test may load any.
    let Some(_lane) = root_alone() else {
        return;
    };
    let Some(server) = symbols_server() else {
        return;
    };
    let before = our_programs();
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&["--pid", &pid]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let during = our_programs();
    assert!(during > before, "no program loaded: {before} -> {during}");
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
    assert!(
        said.iter().any(|l| l.contains("detached from 1 server")),
        "{said:#?}"
    );
    assert_eq!(our_programs(), before, "programs left loaded: {said:#?}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "tls_server_config: [").unwrap();
    let web = web.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--listen", "localhost"], "is not an address and port"),
        (vec!["--listen", &busy], "cannot listen on"),
        (vec!["--web-config", &web], "--web-config"),
        (vec!["--pid", "999999999"], "no process with pid 999999999"),
        (vec!["--rescan", "0"], "invalid --rescan"),
    ];
    for (args, want) in cases {
        // --listen given first wins over the default chosen below.
        let mut cmd = commitscope();
        cmd.arg("exporter").args(&args);
        if !args.contains(&"--listen") {
            cmd.args(["--listen", &format!("127.0.0.1:{}", free_port())]);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let line = one_error_line(&err);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    drop(taken);
}

/// The capabilities the shipped systemd unit grants, as setpriv spells
/// them (`+bpf,+perfmon,...`), read from the unit so the test and the
/// documentation cannot drift apart.
fn unit_caps() -> Vec<String> {
    let unit = std::fs::read_to_string(
        testkit::workspace_root().join("contrib/systemd/commitscope-exporter.service"),
    )
    .expect("the systemd unit");
    unit.lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("AmbientCapabilities= in the unit")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_lowercase())
        .collect()
}

/// `commitscope exporter ARGS` as uid/gid 65534 holding only `caps`.
fn unprivileged(caps: &[String], args: &[&str]) -> std::process::Command {
    let list: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
    let list = if list.is_empty() {
        "-all".to_string()
    } else {
        list.join(",")
    };
    let mut cmd = testkit::command("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={list}"))
        .arg(format!("--ambient-caps={list}"))
        .arg(env!("CARGO_BIN_EXE_commitscope"))
        .arg("exporter")
        .args(args);
    cmd
}

/// [`unprivileged`] started on `port`, once it has attached to the
/// `--pid` among `args`.
fn attached_unprivileged(caps: &[String], args: &[&str], port: u16) -> Exporter {
    let mut child = unprivileged(caps, args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut e = Exporter {
        stderr: lines_of(child.stderr.take().unwrap()),
        child,
        lines: Vec::new(),
        port,
    };
    let pid = args[args.iter().position(|a| *a == "--pid").unwrap() + 1];
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    e
}

#[test]
fn without_root_the_units_capabilities_suffice_and_a_missing_one_is_named() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("setpriv") {
        testkit::skip("no setpriv: run `cargo xtask setup` (installs util-linux)");
        return;
    }
    let Some(server) = symbols_server() else {
        return;
    };
    let caps = unit_caps();
    assert_eq!(caps.len(), 3, "{caps:?}");
    let pid = server.pid().to_string();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    for (i, cap) in caps.iter().enumerate() {
        let fewer: Vec<String> = caps
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, c)| c.clone())
            .collect();
        let out = unprivileged(&fewer, &["--pid", &pid, "--listen", &listen])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "without {cap}: {err}");
        let line = one_error_line(&err);
        assert!(
            line.contains(&format!("CAP_{}", cap.to_uppercase())),
            "without {cap}: {line}"
        );
    }
    let e = attached_unprivileged(
        &caps,
        &["--pid", &pid, "--listen", &listen, "--probes", "exact"],
        port,
    );
    let l = label(&server);
    let commits = server.drive_updates("cs_test", 2, 200);
    let t = settled(&e, &["commitscope_log_write_requests_total"], &[&l]);
    let durable = sample(
        &t,
        "commitscope_log_write_requests_total",
        &[&l, "durable=\"true\""],
    )
    .unwrap();
    assert!(durable >= commits as f64, "{durable} < {commits}: {t}");
    // The redo file was named through /proc/<pid>/fd of a root process.
    assert!(
        sample(&t, "commitscope_fsyncs_total", &[&l, "class=\"redo\""]).unwrap() > 0.0,
        "{t}"
    );
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");

    // The light tier's login, as docs/exporter.md tells an operator to
    // make it for the unit's user: an account of the same name that the
    // server's unix socket authenticates (here the test's uid, nobody).
    server
        .query("CREATE USER IF NOT EXISTS 'nobody'@'localhost' IDENTIFIED VIA unix_socket")
        .unwrap();
    // A distribution's socket directory is open to every user; the
    // harness's private temp dir is not.
    use std::os::unix::fs::PermissionsExt;
    let sock_dir = server.socket.parent().unwrap();
    std::fs::set_permissions(sock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = attached_unprivileged(
        &caps,
        &["--pid", &pid, "--listen", &listen, "--window-every", "0"],
        port,
    );
    // The counter counts from the login's first read, a moment after
    // the attach: commit until it moves.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut t = e.metrics();
    while sample(&t, "commitscope_status_commits_total", &[&l]).unwrap_or(0.0) == 0.0
        && std::time::Instant::now() < deadline
    {
        server.drive_updates("cs_test", 2, 50);
        std::thread::sleep(Duration::from_millis(1200));
        t = e.metrics();
    }
    let counted = sample(&t, "commitscope_status_commits_total", &[&l]);
    let (code, said) = e.stop(libc::SIGTERM);
    assert!(counted > Some(0.0), "{counted:?}: {said:#?}\n{t}");
    assert_eq!(code, Some(0), "{said:#?}");
}

#[test]
fn web_config_tls_and_basic_auth() {
    let Some(_lane) = root_shared() else {
        return;
    };
    if !has_tool("openssl") || !has_tool("curl") {
        testkit::skip("no openssl or curl: run `cargo xtask setup`");
        return;
    }
    let Some(server) = system_server(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    run(std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null()));
    let hash = bcrypt::hash("s3cret", 6).unwrap();
    let web = dir.path().join("web.yml");
    // Relative paths: relative to the web config, as in exporter-toolkit.
    std::fs::write(
        &web,
        format!("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: '{hash}'\n"),
    )
    .unwrap();
    let pid = server.pid().to_string();
    let mut e = Exporter::start(&["--pid", &pid, "--web-config", web.to_str().unwrap()]);
    e.wait_for("listening on https://", Duration::from_secs(30));
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let url = format!("https://127.0.0.1:{}/metrics", e.port);
    let curl = |user: Option<&str>, url: &str| {
        let mut c = testkit::command("curl");
        c.args([
            "-s",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--max-time",
            "10",
            "--cacert",
        ])
        .arg(&cert);
        if let Some(u) = user {
            c.args(["-u", u]);
        }
        let out = c.arg(url).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (out.status.code(), code.to_string(), body.to_string())
    };
    let (_, code, body) = curl(Some("prometheus:s3cret"), &url);
    assert_eq!(code, "200", "{body}");
    assert!(body.contains("commitscope_redo_flushes_total"), "{body}");
    let (_, code, body) = curl(Some("prometheus:wrong"), &url);
    assert_eq!(code, "401");
    assert!(body.is_empty(), "a 401 has no body: {body}");
    let (_, code, _) = curl(None, &url);
    assert_eq!(code, "401");
    // Plain HTTP to the TLS port: no HTTP answer at all.
    let (_, code, body) = curl(
        Some("prometheus:s3cret"),
        &format!("http://127.0.0.1:{}/metrics", e.port),
    );
    assert_eq!(code, "000", "plain HTTP was answered: {body}");
    let (status, said) = e.stop(libc::SIGTERM);
    assert_eq!(status, Some(0), "{said:#?}");
    // No password, no hash in what it said.
    let all = said.join("\n");
    assert!(!all.contains("s3cret") && !all.contains(&hash), "{all}");
}

#[test]
fn a_dying_server_and_a_vanishing_scraper_leave_it_serving_then_the_series_end() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(mut server) = system_server(&[]) else {
        return;
    };
    let pid = server.pid();
    let sock = server.socket.display().to_string();
    let mut e = Exporter::start(&["-S", &sock, "--rescan", "0.5", "--forget-after", "5"]);
    e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
    let l = label(&server);
    // Scrapers that hang up mid-request and mid-response.
    for _ in 0..20 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        let _ = std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        drop(s);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        let _ = std::io::Write::write_all(&mut s, b"GET /met");
        drop(s);
    }
    // The server killed while scrapes run back to back.
    let scraper = {
        let port = e.port;
        std::thread::spawn(move || {
            let mut ok = 0;
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if http_get(port, "/metrics", "text/plain", None)
                    .0
                    .contains("200")
                {
                    ok += 1;
                }
            }
            ok
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: killing the test's own server by pid.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    server.stop();
    let scrapes = scraper.join().unwrap();
    assert!(scrapes > 10, "only {scrapes} scrapes answered");
    e.wait_for(&format!("detached pid {pid}"), Duration::from_secs(5));
    // Still there, marked down, until --forget-after.
    let t = e.metrics();
    assert_eq!(sample(&t, "commitscope_up", &[&l]), Some(0.0), "{t}");
    e.wait_for("forgot", Duration::from_secs(10));
    let t = e.metrics();
    assert!(sample(&t, "commitscope_up", &[&l]).is_none(), "{t}");
    assert!(t.contains("process_cpu_seconds_total"), "{t}");
    let (code, said) = e.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{said:#?}");
    assert!(!said.iter().any(|l| l.contains("panicked")), "{said:#?}");
}
