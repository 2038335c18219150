//! The debuginfod client against Debian's real `debuginfod` server on a
//! loopback port (WORK IN PROGRESS, issue 13: fetch only, not yet wired
//! into the symbol cascade).
mod common;

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use commitscope::probes::debuginfod::{fetch, FetchError};
use common::*;
use object::Object;

/// A debuginfod serving one directory; killed on drop.
struct Debuginfod(Child);

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The fixture built with -g: (stripped binary's build-id, debug file).
fn split_fixture(dir: &Path) -> (String, std::path::PathBuf) {
    let bin = dir.join("fake");
    let src = testkit::workspace_root().join("tracer/tests/fixture/fake_server.c");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-Wl,--build-id=sha1", "-DFLAVOR_MARIADB1011"])
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
    let data = std::fs::read(&bin).unwrap();
    let id = object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .unwrap()
        .to_vec();
    (id.iter().map(|b| format!("{b:02x}")).collect(), debug)
}

#[test]
fn fetches_by_build_id_from_a_real_debuginfod() {
    if !has_tool("debuginfod") {
        testkit::skip("no debuginfod: run `cargo xtask setup` (installs debuginfod)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (id, debug) = split_fixture(d.path());
    let port = free_port();
    let _server = Debuginfod(
        Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-d"])
            .arg(d.path().join("db.sqlite"))
            .arg(d.path().join("srv"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    // Its first scan takes a moment: ask until it knows the build.
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        match fetch(&url, &id, Duration::from_secs(5), 1 << 30) {
            Ok(b) => break b,
            Err(e) => assert!(Instant::now() < deadline, "not served in 30 s: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
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
