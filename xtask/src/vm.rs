//! `cargo xtask vm-test [--kernels ...]`: the probes on real distribution
//! kernels. Each Debian kernel package is fetched with `apt-get download`
//! (cached under target/vm), booted under qemu TCG (nested KVM hangs at
//! boot on these machines) with an initramfs holding busybox, the release
//! binary with the libraries `ldd` names, and the C fixture built
//! `-static`; its init runs each scenario and prints one `VMTEST` line per
//! scenario on the serial console, which the host compares with the
//! fixture's own counts.
use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::util::{cargo, output, root, status};

/// Debian 12's default cloud kernel (6.1) and its 6.12 backport line.
pub const DEFAULT_KERNELS: &[&str] = &["linux-image-cloud-amd64", "linux-image-6.12-cloud-amd64"];

/// The scenarios: name, `commitscope trace` flags, fixture binary.
const SCENARIOS: &[(&str, &str, &str)] = &[
    ("auto", "--fsync-probe auto", "/fx/mariadb"),
    ("kprobe", "--fsync-probe kprobe", "/fx/mariadb"),
    ("tracepoint", "--fsync-probe tracepoint", "/fx/mariadb"),
    ("untimed", "--no-write-timing", "/fx/mariadb"),
    ("build-id", "--debug-dir /fx/dbg", "/fx/stripped"),
];

/// Files the fd-overflow scenario syncs: past the kernel's fd map.
const OVERFLOW_FILES: u32 = tracer_ebpf_max_fds() + 300;

/// `tracer_ebpf::MAX_FDS`, restated: xtask does not link the eBPF crate.
const fn tracer_ebpf_max_fds() -> u32 {
    8192
}

/// Fixture calls per scenario: enough for every path, short under TCG.
const CALLS: u32 = 2000;

fn vm_dir() -> PathBuf {
    root().join("target/vm")
}

/// The versioned image package a meta-package stands for.
fn resolve(pkg: &str) -> anyhow::Result<String> {
    if !pkg.ends_with("-amd64") || pkg.chars().filter(|c| *c == '.').count() >= 2 {
        return Ok(pkg.to_string());
    }
    let deps = output(Command::new("apt-cache").args(["depends", pkg]))?;
    deps.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Depends: ")
                .filter(|d| d.starts_with("linux-image-"))
        })
        .map(str::to_string)
        .with_context(|| format!("{pkg} names no linux-image package"))
}

/// vmlinuz of `pkg`, downloaded and unpacked once.
fn kernel(pkg: &str) -> anyhow::Result<(String, PathBuf)> {
    let versioned = resolve(pkg)?;
    let dir = vm_dir().join("kernels").join(&versioned);
    let find = |d: &Path| -> Option<PathBuf> {
        std::fs::read_dir(d.join("boot"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
            })
    };
    if let Some(k) = find(&dir) {
        return Ok((versioned, k));
    }
    let debs = vm_dir().join("debs");
    std::fs::create_dir_all(&debs)?;
    eprintln!("vm-test: apt-get download {versioned}");
    let download = || {
        status(
            Command::new("apt-get")
                .args(["download", "-q", &versioned])
                .current_dir(&debs),
        )
    };
    // A stale package index names a version the mirror dropped: refresh
    // it once and try again.
    if download().is_err() {
        status(Command::new("apt-get").args(["update", "-q"]))?;
        download()?;
    }
    let deb = std::fs::read_dir(&debs)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{versioned}_")))
        })
        .with_context(|| format!("no .deb of {versioned} after apt-get download"))?;
    std::fs::create_dir_all(&dir)?;
    status(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir))?;
    let k = find(&dir).with_context(|| format!("{versioned} has no /boot/vmlinuz-*"))?;
    Ok((versioned, k))
}

/// Copies `src` to `root` + `dest`, creating directories.
fn put(root: &Path, src: &Path, dest: &str) -> anyhow::Result<()> {
    let to = root.join(dest.trim_start_matches('/'));
    std::fs::create_dir_all(to.parent().context("no parent")?)?;
    std::fs::copy(src, &to)
        .with_context(|| format!("copy {} to {}", src.display(), to.display()))?;
    Ok(())
}

/// The shared libraries `bin` loads (with the loader), as absolute paths.
fn libraries(bin: &Path) -> anyhow::Result<BTreeSet<PathBuf>> {
    let text = output(Command::new("ldd").arg(bin))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = l.split("=> ").nth(1).unwrap_or(l);
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

fn init_script() -> String {
    let mut s = String::from(
        "#!/bin/busybox sh\n/bin/busybox --install -s /bin\nexport PATH=/bin\n\
         mount -t proc proc /proc\nmount -t sysfs sys /sys\nmount -t tmpfs tmp /tmp\n\
         mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null\n\
         mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null\n\
         echo \"VMTEST kernel $(uname -r)\"\n",
    );
    for (name, flags, fx) in SCENARIOS {
        s.push_str(&format!(
            "mkdir -p /tmp/{name}; mkfifo /tmp/{name}/go\n\
             {fx} {CALLS} /tmp/{name} < /tmp/{name}/go > /tmp/{name}/truth &\nFX=$!\n\
             exec 3> /tmp/{name}/go\n\
             /commitscope trace --json --interval 1 -v {flags} --pid $FX > /tmp/{name}/out 2> /tmp/{name}/err &\nTR=$!\n\
             i=0; while ! grep -q 'tracing pid' /tmp/{name}/err && kill -0 $TR 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             echo go >&3; exec 3>&-\nwait $FX\nwait $TR; RC=$?\n\
             echo \"VMTEST {name} rc=$RC\"\n\
             echo \"VMTEST {name} truth $(cat /tmp/{name}/truth)\"\n\
             echo \"VMTEST {name} summary $(tail -n 1 /tmp/{name}/out)\"\n\
             grep -E 'fsync|error' /tmp/{name}/err | sed 's/^/VMTEST {name} stderr /'\n"
        ));
    }
    // More fds synced than the kernel's fd map holds: each sync is either
    // attributed or counted lost, never silently dropped.
    let n = OVERFLOW_FILES;
    s.push_str(&format!(
        "mkdir -p /tmp/fdo; mkfifo /tmp/fdo/go; exec 3<> /tmp/fdo/go\n\
         (ulimit -n {limit}; exec /fx/mariadb {n} /tmp/fdo manyfds < /tmp/fdo/go > /tmp/fdo/truth) &\nFX=$!\n\
         while [ \"$(readlink /proc/$FX/exe)\" != /fx/mariadb ]; do sleep 0.05; done\n\
         /commitscope trace --json --interval 1 --pid $FX > /tmp/fdo/out 2> /tmp/fdo/err &\nTR=$!\n\
         i=0; while ! grep -q 'tracing pid' /tmp/fdo/err && kill -0 $TR 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
         echo go >&3; exec 3>&-\nwait $FX\nwait $TR; RC=$?\n\
         echo \"VMTEST fd-overflow rc=$RC\"\n\
         echo \"VMTEST fd-overflow truth $(cat /tmp/fdo/truth)\"\n\
         echo \"VMTEST fd-overflow summary $(tail -n 1 /tmp/fdo/out)\"\n",
        limit = n + 64
    ));
    s.push_str("echo VMTEST done\npoweroff -f\n");
    s
}

/// Builds the initramfs (once per run: the binary may have changed).
fn initramfs(cs: &Path) -> anyhow::Result<PathBuf> {
    let dir = vm_dir();
    let root_dir = dir.join("root");
    let _ = std::fs::remove_dir_all(&root_dir);
    for d in ["bin", "proc", "sys", "tmp", "dev", "fx/dbg"] {
        std::fs::create_dir_all(root_dir.join(d))?;
    }
    let busybox = which::which("busybox")
        .context("busybox missing: cargo xtask setup installs busybox-static")?;
    put(&root_dir, &busybox, "/bin/busybox")?;
    put(&root_dir, cs, "/commitscope")?;
    // A debug build carries ~150 MB of DWARF the VM would unpack for nothing.
    status(
        Command::new("strip")
            .arg("--strip-debug")
            .arg(root_dir.join("commitscope")),
    )?;
    for lib in libraries(cs)? {
        put(&root_dir, &lib, &lib.to_string_lossy())?;
    }
    let src = root().join("tracer/tests/fixture/fake_server.c");
    let mariadb = root_dir.join("fx/mariadb");
    status(
        Command::new("gcc")
            .args([
                "-O2",
                "-static",
                "-Wl,--build-id=sha1",
                "-DFLAVOR_MARIADB1011",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&mariadb),
    )?;
    // Stripped, its symbols in a build-id debug file under /fx/dbg.
    let stripped = root_dir.join("fx/stripped");
    std::fs::copy(&mariadb, &stripped)?;
    let debug = dir.join("stripped.debug");
    status(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&stripped)
            .arg(&debug),
    )?;
    status(Command::new("strip").arg("--strip-all").arg(&stripped))?;
    let id = build_id(&stripped)?;
    put(
        &root_dir,
        &debug,
        &format!("/fx/dbg/.build-id/{}/{}.debug", &id[..2], &id[2..]),
    )?;
    let init = root_dir.join("init");
    std::fs::write(&init, init_script())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))?;
    let cpio = dir.join("initramfs.cpio");
    let list = output(Command::new("find").arg(".").current_dir(&root_dir))?;
    let mut child = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root_dir)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&cpio)?)
        .spawn()?;
    std::io::Write::write_all(&mut child.stdin.take().context("stdin")?, list.as_bytes())?;
    if !child.wait()?.success() {
        bail!("cpio failed");
    }
    Ok(cpio)
}

/// The GNU build-id of an ELF file, in hex (readelf -n).
fn build_id(elf: &Path) -> anyhow::Result<String> {
    let notes = output(Command::new("readelf").arg("-n").arg(elf))?;
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .map(str::to_string)
        .context("no build-id")
}

/// Boots `vmlinuz` with `initrd`; the VMTEST lines it printed.
fn boot(vmlinuz: &Path, initrd: &Path, limit: Duration) -> anyhow::Result<Vec<String>> {
    let mut child = Command::new("qemu-system-x86_64")
        .args([
            "-machine", "q35", "-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1",
        ])
        .args([
            "-nographic",
            "-no-reboot",
            "-serial",
            "stdio",
            "-monitor",
            "none",
        ])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 panic=-1 quiet loglevel=3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start qemu-system-x86_64 (cargo xtask setup installs qemu-system-x86)")?;
    let out = child.stdout.take().context("stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let deadline = Instant::now() + limit;
    let mut lines = Vec::new();
    let mut tail = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let l = l.trim_end_matches('\r').to_string();
                if let Some(v) = l.strip_prefix("VMTEST ") {
                    let done = v == "done";
                    lines.push(v.to_string());
                    if done {
                        break;
                    }
                } else {
                    tail.push(l);
                    if tail.len() > 30 {
                        tail.remove(0);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                bail!(
                    "the VM did not finish within {limit:?}; its console ended with:\n{}",
                    tail.join("\n")
                );
            }
        }
    }
    let _ = child.wait();
    if lines.last().map(String::as_str) != Some("done") {
        bail!(
            "the VM stopped before its last scenario; its console ended with:\n{}",
            tail.join("\n")
        );
    }
    Ok(lines)
}

/// One scenario's verdict: the probe used, or what differed.
fn check(name: &str, lines: &[String]) -> Result<String, String> {
    let get = |what: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{name} {what}")))
            .map(str::trim)
            .unwrap_or("")
    };
    let stderr: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix(&format!("{name} stderr ")))
        .collect();
    let rc = get("rc=");
    let truth: Value = serde_json::from_str(get("truth"))
        .map_err(|e| format!("no truth line ({e}); stderr: {stderr:?}"))?;
    let s: Value = serde_json::from_str(get("summary"))
        .map_err(|e| format!("rc={rc}, no summary ({e}); stderr: {stderr:?}"))?;
    let t = &s["totals"];
    let mut bad = Vec::new();
    for (ours, theirs) in [
        ("n_write", "requests"),
        ("durable", "durable"),
        ("n_flush", "flushes"),
        ("redo_fsync", "redo_syncs"),
    ] {
        if t[ours] != truth[theirs] {
            bad.push(format!("{ours} {} != {theirs} {}", t[ours], truth[theirs]));
        }
    }
    if t["lost_events"] != 0 {
        bad.push(format!("lost_events {}", t["lost_events"]));
    }
    if rc != "0" {
        bad.push(format!("exit {rc}"));
    }
    let probe = s["legend"]["fsync_probe"].as_str().unwrap_or("?");
    let function = s["legend"]["fsync_function"].as_str().unwrap_or("");
    if name == "kprobe" && probe != "kprobe" {
        bad.push(format!("--fsync-probe kprobe ran on {probe}"));
    }
    if bad.is_empty() {
        Ok(if function.is_empty() {
            format!("exact, fsync via {probe}")
        } else {
            format!("exact, fsync via {probe} ({function})")
        })
    } else {
        Err(format!("{}; stderr: {stderr:?}", bad.join(", ")))
    }
}

/// Runs the matrix with `bin` (default: a release build). Results are
/// printed as cargo-test lines (`test vm::<kernel>::<scenario> ... ok`,
/// then a `test result:` line) so CI counts them with the rest.
/// The fd-overflow scenario: every sync attributed or counted lost.
fn check_overflow(lines: &[String]) -> Result<String, String> {
    let get = |what: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("fd-overflow {what}")))
            .map(str::trim)
            .unwrap_or("")
    };
    let s: Value = serde_json::from_str(get("summary"))
        .map_err(|e| format!("rc={}, no summary ({e})", get("rc=")))?;
    let t = &s["totals"];
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    let (synced, lost) = (n("data_fsync") + n("other_fsync"), n("lost_syncs"));
    if get("rc=") == "0" && synced + lost == u64::from(OVERFLOW_FILES) && lost >= 100 {
        Ok(format!(
            "{synced} syncs attributed + {lost} counted lost = {OVERFLOW_FILES}"
        ))
    } else {
        Err(format!(
            "rc={}, attributed {synced} + lost {lost} != {OVERFLOW_FILES}: {t}",
            get("rc=")
        ))
    }
}

pub fn run(kernels: &[String], bin: Option<PathBuf>) -> anyhow::Result<()> {
    let cs = match bin {
        Some(b) => b,
        None => {
            cargo(&["build", "--release", "-p", "commitscope"])?;
            root().join("target/release/commitscope")
        }
    };
    let initrd = initramfs(&cs)?;
    let (mut passed, mut failed) = (0, 0);
    let mut table = vec![
        "| kernel | scenario | result |".to_string(),
        "|---|---|---|".into(),
    ];
    let t_all = Instant::now();
    for pkg in kernels {
        let (versioned, vmlinuz) = kernel(pkg)?;
        let t0 = Instant::now();
        let lines = boot(&vmlinuz, &initrd, Duration::from_secs(240))?;
        let release = lines
            .iter()
            .find_map(|l| l.strip_prefix("kernel "))
            .unwrap_or(&versioned)
            .to_string();
        eprintln!(
            "vm-test: {release} booted and ran in {:.0} s",
            t0.elapsed().as_secs_f64()
        );
        let names = SCENARIOS.iter().map(|(n, ..)| *n).chain(["fd-overflow"]);
        for name in names {
            let verdict = if name == "fd-overflow" {
                check_overflow(&lines)
            } else {
                check(name, &lines)
            };
            match verdict {
                Ok(probe) => {
                    passed += 1;
                    println!("test vm::{release}::{name} ... ok");
                    table.push(format!("| {release} | {name} | {probe} |"));
                }
                Err(why) => {
                    failed += 1;
                    println!("test vm::{release}::{name} ... FAILED: {why}");
                    table.push(format!("| {release} | {name} | FAILED: {why} |"));
                }
            }
        }
    }
    println!("{}", table.join("\n"));
    println!(
        "test result: {}. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out; finished in {:.2}s",
        if failed == 0 { "ok" } else { "FAILED" },
        t_all.elapsed().as_secs_f64()
    );
    if failed > 0 {
        bail!("{failed} scenario(s) failed");
    }
    Ok(())
}
