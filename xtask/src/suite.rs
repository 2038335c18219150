//! The test binaries of `cargo xtask test`, built once by cargo and run
//! side by side by us: `cargo test` runs one binary after the other, so
//! a binary whose tests wait on servers left the second core idle. How
//! many heavy tests run at once is not decided here but by the tests
//! themselves (`testkit::lane`): a test that starts servers takes a
//! shared lane or, when it compares times, the machine alone. Each
//! binary's output is printed whole when it ends, after the `Running`
//! line cargo would print, so a log reads as cargo's.
use std::{
    io::{BufRead, BufReader, Read},
    path::PathBuf,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::Context;
use serde_json::Value;

use crate::util::root;

/// One test binary, as cargo built it.
#[derive(Clone, Debug)]
pub struct TestBinary {
    /// How cargo names it when it runs it: `tests/replication.rs`,
    /// `unittests src/lib.rs`.
    pub name: String,
    pub package: String,
    pub exe: PathBuf,
    /// The package's directory: cargo runs a test binary there.
    pub dir: PathBuf,
    /// What `cargo test` takes to run it alone.
    pub rerun: String,
}

impl TestBinary {
    /// `commitscope tests/replication.rs`: unique across the workspace.
    pub fn label(&self) -> String {
        format!("{} {}", self.package, self.name)
    }
}

/// Reads one `compiler-artifact` message of a test build: the binary it
/// made, if it made a test binary.
pub fn test_binary(msg: &Value) -> Option<TestBinary> {
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
        return None;
    }
    let exe = PathBuf::from(msg["executable"].as_str()?);
    let target = &msg["target"];
    let manifest = PathBuf::from(msg["manifest_path"].as_str()?);
    let dir = manifest.parent()?.to_path_buf();
    let src = PathBuf::from(target["src_path"].as_str()?);
    let rel = src.strip_prefix(&dir).unwrap_or(&src).display().to_string();
    let kinds: Vec<&str> = target["kind"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let package = msg["package_id"]
        .as_str()
        .and_then(package_name)
        .unwrap_or_else(|| target["name"].as_str().unwrap_or("?").to_string());
    let tname = target["name"].as_str()?;
    let (name, rerun) = if kinds.contains(&"test") {
        (rel, format!("-p {package} --test {tname}"))
    } else if kinds.contains(&"bin") {
        (
            format!("unittests {rel}"),
            format!("-p {package} --bin {tname}"),
        )
    } else {
        (format!("unittests {rel}"), format!("-p {package} --lib"))
    };
    Some(TestBinary {
        name,
        package,
        exe,
        dir,
        rerun,
    })
}

/// The package's name in a cargo package id: `path+file:///w/tracer#commitscope@0.1.0`
/// or the older `commitscope 0.1.0 (path+file:///w/tracer)`.
fn package_name(id: &str) -> Option<String> {
    if let Some((_, rest)) = id.rsplit_once('#') {
        let name = rest.split('@').next()?;
        // `#0.1.0` alone: the name is the path's last part.
        if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            return id.split('#').next()?.rsplit('/').next().map(str::to_string);
        }
        return Some(name.to_string());
    }
    id.split_whitespace().next().map(str::to_string)
}

/// Builds every test binary (`cargo test --no-run ARGS`, the build's own
/// messages on stderr) and lists them. `clippy-driver` compiles the
/// workspace's own crates (its lints as errors, as `cargo clippy -- -D
/// warnings` would), rustc the rest: one pass instead of a `cargo clippy`
/// check and a build. `ebpf_object`: an eBPF object already built from
/// this tree (`ebpf::build_linted`), which `tracer/build.rs` then copies
/// instead of building its own.
pub fn build(
    cargo_args: &[String],
    ebpf_object: Option<&std::path::Path>,
) -> anyhow::Result<Vec<TestBinary>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ])
    .args(cargo_args)
    .current_dir(root())
    .stdout(Stdio::piped());
    // What `cargo clippy` sets for the driver (its arguments joined by
    // the driver's own separator).
    cmd.env("RUSTC_WORKSPACE_WRAPPER", "clippy-driver").env(
        "CLIPPY_ARGS",
        "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
    );
    if let Some(o) = ebpf_object {
        cmd.env("COMMITSCOPE_EBPF_OBJECT", o);
    }
    // mold, where setup installed it: each test binary linked in 1.1 s
    // of CPU against ld.bfd's 3.9, and the suite links about thirty.
    // Only here: a plain `cargo build` needs no linker but the system's.
    if crate::util::have_mold() {
        cmd.env(
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
            "-Clink-arg=-fuse-ld=mold",
        );
    }
    let mut child = cmd.spawn().context("cannot run cargo test --no-run")?;
    let out = child.stdout.take().context("stdout")?;
    let mut bins = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line?;
        if let Some(b) = serde_json::from_str(&line)
            .ok()
            .as_ref()
            .and_then(test_binary)
        {
            bins.push(b);
        }
    }
    let st = child.wait()?;
    anyhow::ensure!(
        st.success(),
        "the test build failed ({st}): a compile error or a clippy warning, above"
    );
    Ok(bins)
}

/// One binary's run.
pub struct Ran {
    pub binary: TestBinary,
    pub ok: bool,
    pub wall: Duration,
    /// Its stdout and stderr, merged in the order written.
    pub output: String,
}

/// Runs `bins` with `args` after each (the harness's: filters,
/// `--test-threads`), all at once: the lanes their tests take decide
/// what runs beside what. `done` hears of each as it ends.
pub fn run(bins: Vec<TestBinary>, args: &[String], mut done: impl FnMut(&Ran)) -> Vec<Ran> {
    let (tx, rx) = mpsc::channel();
    let workers: Vec<_> = bins
        .into_iter()
        .map(|b| {
            let (tx, args) = (tx.clone(), args.to_vec());
            std::thread::spawn(move || {
                let _ = tx.send(run_one(b, &args));
            })
        })
        .collect();
    drop(tx);
    let mut ran = Vec::new();
    for r in rx {
        done(&r);
        ran.push(r);
    }
    for w in workers {
        let _ = w.join();
    }
    ran
}

/// Runs one binary in its package's directory, as cargo would.
fn run_one(binary: TestBinary, args: &[String]) -> Ran {
    let t0 = Instant::now();
    // One pipe for both streams, so the order holds.
    let spawned = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(&binary.exe)
        .args(args)
        .current_dir(&binary.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn();
    let (ok, output) = match spawned {
        Ok(mut child) => {
            let mut text = Vec::new();
            if let Some(mut out) = child.stdout.take() {
                let _ = out.read_to_end(&mut text);
            }
            let st = child.wait();
            let text = String::from_utf8_lossy(&text).into_owned();
            match st {
                Ok(st) => (st.success(), text),
                Err(e) => (false, format!("{text}\nwait: {e}")),
            }
        }
        Err(e) => (false, format!("cannot run {}: {e}", binary.exe.display())),
    };
    Ran {
        binary,
        ok,
        wall: t0.elapsed(),
        output,
    }
}

/// The eBPF object the test build made (`tracer/build.rs` writes it into
/// its out dir; the newest when earlier builds left others), for a second
/// build of the same tree to reuse.
pub fn ebpf_object() -> Option<PathBuf> {
    std::fs::read_dir(root().join("target/debug/build"))
        .ok()?
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with("commitscope-"))
        .map(|d| d.path().join("out/tracer-ebpf"))
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok()?;
            (m.len() > 0).then_some((m.modified().ok()?, p))
        })
        .max()
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_artifacts_are_named_as_cargo_runs_them() {
        let msg = |kind: &str, name: &str, src: &str| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "package_id": "path+file:///w/tracer#commitscope@0.1.0",
                "manifest_path": "/w/tracer/Cargo.toml",
                "target": {"kind": [kind], "name": name, "src_path": src},
                "profile": {"test": true},
                "executable": format!("/w/target/debug/deps/{name}-abc"),
            })
        };
        let t = test_binary(&msg(
            "test",
            "replication",
            "/w/tracer/tests/replication.rs",
        ))
        .unwrap();
        assert_eq!(t.name, "tests/replication.rs");
        assert_eq!(t.label(), "commitscope tests/replication.rs");
        assert_eq!(t.rerun, "-p commitscope --test replication");
        assert_eq!(t.dir, std::path::Path::new("/w/tracer"));
        let l = test_binary(&msg("lib", "commitscope", "/w/tracer/src/lib.rs")).unwrap();
        assert_eq!(l.name, "unittests src/lib.rs");
        assert_eq!(l.rerun, "-p commitscope --lib");
        let mut not_test = msg("lib", "commitscope", "/w/tracer/src/lib.rs");
        not_test["profile"]["test"] = false.into();
        assert!(test_binary(&not_test).is_none());
        assert_eq!(
            package_name("path+file:///w/workload#0.1.0").as_deref(),
            Some("workload")
        );
        assert_eq!(
            package_name("xtask 0.1.0 (path+file:///w/xtask)").as_deref(),
            Some("xtask")
        );
    }
}
