//! Running `commitscope exporter` in a test and reading what it serves
//! (shared by the exporter and Prometheus tests).
#![allow(dead_code)]

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Child, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use crate::common::*;
pub use testkit::free_port;

/// The `server` label the exporter gives a test server: its datadir.
pub fn label(server: &testkit::Server) -> String {
    format!("server=\"{}\"", server.dir.path().join("data").display())
}

/// A running `commitscope exporter`, its stderr lines collected.
pub struct Exporter {
    pub child: Child,
    pub stderr: mpsc::Receiver<String>,
    pub lines: Vec<String>,
    pub port: u16,
}

impl Exporter {
    pub fn start(args: &[&str]) -> Exporter {
        let port = free_port();
        let mut child = commitscope()
            .arg("exporter")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the exporter");
        let stderr = lines_of(child.stderr.take().unwrap());
        Exporter {
            child,
            stderr,
            lines: Vec::new(),
            port,
        }
    }

    /// Waits until a stderr line contains `marker` (panics after `limit`,
    /// showing what it said).
    pub fn wait_for(&mut self, marker: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(l) => {
                    self.lines.push(l.clone());
                    if l.contains(marker) {
                        return l;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "no {marker:?} from the exporter within {limit:?}: {:#?}",
            self.lines
        );
    }

    /// `GET path` with `accept`; (status line, headers+body).
    pub fn get(&self, path: &str, accept: &str) -> (String, String) {
        http_get(self.port, path, accept, None)
    }

    /// The classic-text exposition.
    pub fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics", "text/plain");
        assert!(status.contains("200"), "{status} {body}");
        body
    }

    /// Signals it and returns its exit code and everything it said.
    /// Asks for an exact window while `drive` runs again and again
    /// beside it, and returns the first scrape that carries `marker` (or
    /// a line saying none did within 30 s).
    pub fn window_scrape(&self, marker: &str, drive: impl Fn() + Sync) -> String {
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    drive();
                }
            });
            let (a, _) = http_request(self.port, "POST", "/window", "*/*", None);
            assert!(a.contains("202"), "{a}");
            let asked = std::time::Instant::now();
            let scrape = loop {
                let m = self.metrics();
                if m.contains(marker) {
                    break m;
                }
                if asked.elapsed() > Duration::from_secs(30) {
                    break format!("no window with {marker}: {m}");
                }
                std::thread::sleep(Duration::from_millis(200));
            };
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            scrape
        })
    }

    /// An exporter on `pid` with exact windows of 3 s on demand: the
    /// first window's scrape that carries `marker`, `drive` run beside
    /// it, checked by promtool, after the exporter stopped cleanly.
    pub fn window_on_pid(pid: u32, marker: &str, drive: impl Fn() + Sync) -> String {
        let pid = pid.to_string();
        let mut e = Exporter::start(&["--pid", &pid, "--window", "3", "--window-every", "0"]);
        e.wait_for(&format!("attached pid {pid}"), Duration::from_secs(60));
        let scrape = e.window_scrape(marker, drive);
        let (code, said) = e.stop(libc::SIGTERM);
        assert_eq!(code, Some(0), "{said:#?}");
        promtool_check(&scrape);
        scrape
    }

    pub fn stop(mut self, signal: i32) -> (Option<i32>, Vec<String>) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let code = loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                break st.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the exporter did not exit within 30 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.lines.extend(rest_of(&self.stderr));
        (code, std::mem::take(&mut self.lines))
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.0 GET (no chunked replies to decode): (status line, the rest).
pub fn http_get(port: u16, path: &str, accept: &str, auth: Option<&str>) -> (String, String) {
    http_request(port, "GET", path, accept, auth)
}

/// A minimal HTTP/1.0 request without a body: (status line, the rest).
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    accept: &str,
    auth: Option<&str>,
) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the exporter");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nAccept: {accept}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the response");
    let (status, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
    (status.to_string(), rest.to_string())
}

/// The value of the sample `name{...}` whose labels include all of
/// `labels` (e.g. `server="/x"`), in a classic or OpenMetrics text.
pub fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let (ls, v) = match rest.strip_prefix('{') {
            Some(r) => r.rsplit_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        let ls: Vec<&str> = ls.split(',').collect();
        labels
            .iter()
            .all(|x| ls.contains(x))
            .then(|| v.trim().parse().ok())?
    })
}

/// `promtool check metrics` on a scrape (its HTTP headers cut off):
/// panics with what promtool said when it finds fault.
pub fn promtool_check(scrape: &str) {
    let f = tempfile::NamedTempFile::new().unwrap();
    let body = scrape.split_once("\r\n\r\n").map_or(scrape, |(_, b)| b);
    std::fs::write(f.path(), body).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", f.path().display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
