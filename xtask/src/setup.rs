//! `cargo xtask setup`: makes a fresh Debian machine ready, idempotently.
//! Each step checks first, so a ready machine returns in about a second.
use std::{path::Path, process::Command};

use anyhow::{bail, Context};

use crate::util::{output, status, succeeds};

/// Debian packages: the servers the tests start, the client they query
/// with, gcc/binutils for the C fixture, setpriv for the not-root test,
/// sysbench as the benchmark peer, rsvg-convert (and a font for its text)
/// to render the sweep's SVG charts in their test.
const APT: &[&str] = &[
    "mariadb-server",
    "mariadb-client",
    "gcc",
    // The C++ fixture of the DWARF tests (inlined member functions).
    "g++",
    "libc6-dev",
    "binutils",
    "util-linux",
    "sysbench",
    "librsvg2-bin",
    "fonts-dejavu-core",
    // The debuginfod server the client tests fetch from (issue 13), and
    // bsdtar, with which it unpacks the -dbgsym packages it indexes.
    "debuginfod",
    "libarchive-tools",
    // The exporter's tests (issue 12): a real Prometheus (and promtool)
    // scraping it beside Debian's mysqld exporter; openssl makes the TLS
    // test's certificate, curl speaks HTTPS to it.
    "prometheus",
    "prometheus-mysqld-exporter",
    "openssl",
    "curl",
    // The system CA store the debuginfod client's HTTPS trusts.
    "ca-certificates",
    // `cargo xtask vm-test` (issue 18): Debian's kernels booted under
    // qemu TCG with a busybox initramfs.
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    // `cargo xtask dist` (issue 16): the static musl binary, the .deb's
    // checks (lintian; man and file in its install test).
    "musl-tools",
    "lintian",
    "man-db",
    "file",
    "bash-completion",
    // Debian's other releases' servers (issue 31, `cargo xtask servers`)
    // run here with their own libraries: patchelf points them there.
    "patchelf",
    // The peer that the 10.5 fixture's exact counts are checked against
    // (the same uprobes, written as a bpftrace script).
    "bpftrace",
    // `--io` (issue 34): the loop-mounted filesystems its tests put the
    // datadir on (ext4's mkfs is in every Debian; XFS's is not).
    "e2fsprogs",
    "xfsprogs",
    // The kill -9 test: every BPF program and its owner, to find one left
    // behind by a tool that died without detaching.
    "bpftool",
    // The suite's linker: the ~30 test binaries (80 MB each) link in a
    // quarter of ld.bfd's CPU time (`suite::build`).
    "mold",
    // `--replica galera` (issue 57): Galera's provider for Debian's
    // mariadbd, and rsync, its nodes' state transfer.
    "galera-4",
    "rsync",
];

/// The static binary's target (`cargo xtask dist`).
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// cargo-fuzz release used by `cargo xtask fuzz` (and CI).
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// bpf-linker release known to build against nightly's LLVM here.
const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn run() -> anyhow::Result<()> {
    apt()?;
    nightly()?;
    musl_target()?;
    bpf_linker()?;
    cargo_fuzz()?;
    tracefs()?;
    servers()
}

/// Every stock server of [`testkit::stock::RELEASES`] (the other Debian
/// releases' MariaDB, unstable's MySQL) into the cache, one line per step
/// when something is fetched; a second or so when all are there.
pub fn servers() -> anyhow::Result<()> {
    for r in testkit::stock::RELEASES {
        let s = testkit::stock::ensure(*r, &mut |l| eprintln!("xtask: servers: {l}"))
            .map_err(|e| anyhow::anyhow!("{}: {e}", r.describe()))?;
        eprintln!(
            "xtask: servers: {} {}: {}",
            r.describe(),
            s.version,
            s.server.display()
        );
    }
    Ok(())
}

/// cargo-fuzz from crates.io (libFuzzer comes with its libfuzzer-sys crate).
fn cargo_fuzz() -> anyhow::Result<()> {
    if succeeds(Command::new("cargo").args(["fuzz", "--version"])) {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-fuzz {CARGO_FUZZ_VERSION} (about a minute, once)");
    status(Command::new("cargo").args([
        "install",
        "cargo-fuzz",
        "--locked",
        "--version",
        CARGO_FUZZ_VERSION,
    ]))
}

/// Whether `pkg` is installed: `installed`, or installed with triggers
/// still to run (`triggers-pending`/`-awaited`: while another dpkg, such
/// as the suite's own package test, installs something that triggers it;
/// a suite run once took man-db for missing then and failed on dpkg's
/// lock).
fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .is_ok_and(|o| is_installed_status(&String::from_utf8_lossy(&o.stdout)))
}

fn is_installed_status(status: &str) -> bool {
    matches!(
        status.trim(),
        "install ok installed" | "install ok triggers-pending" | "install ok triggers-awaited"
    )
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|s| s.trim() == "0")
}

fn apt() -> anyhow::Result<()> {
    let missing: Vec<&str> = APT.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "missing Debian packages {}: run `sudo cargo xtask setup`",
            missing.join(" ")
        );
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    status(Command::new("apt-get").args(["update", "-q"]))?;
    status(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing),
    )
}

/// The musl target of the stable toolchain, for the static binary.
fn musl_target() -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !installed.lines().any(|l| l.trim() == MUSL_TARGET) {
        eprintln!("xtask: adding the {MUSL_TARGET} target (cargo xtask dist)");
        status(Command::new("rustup").args(["target", "add", MUSL_TARGET]))?;
    }
    Ok(())
}

fn nightly() -> anyhow::Result<()> {
    let toolchains = output(Command::new("rustup").args(["toolchain", "list"]))?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        eprintln!("xtask: installing the nightly toolchain (eBPF builds need -Z build-std)");
        status(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
        ]))?;
    }
    let comps = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))?;
    if !comps.lines().any(|l| l.starts_with("rust-src")) {
        eprintln!("xtask: adding rust-src to nightly");
        status(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    Ok(())
}

/// The LLVM major version of the nightly compiler (bpf-linker must match).
fn nightly_llvm_major() -> anyhow::Result<String> {
    let v =
        output(Command::new("rustup").args(["run", "nightly", "rustc", "--version", "--verbose"]))?;
    let line = v
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .context("nightly rustc does not report its LLVM version")?;
    Ok(line.split('.').next().unwrap_or(line).trim().to_string())
}

fn bpf_linker() -> anyhow::Result<()> {
    if succeeds(Command::new("bpf-linker").arg("--version")) {
        return Ok(());
    }
    // A plain `cargo install bpf-linker` finds Debian's LLVM 14 and fails:
    // link it against the libLLVM shipped inside the nightly toolchain.
    let major = nightly_llvm_major()?;
    let sysroot =
        output(Command::new("rustup").args(["run", "nightly", "rustc", "--print", "sysroot"]))?;
    let lib = Path::new(sysroot.trim()).join("lib");
    let home = std::env::var("HOME").context("HOME is not set")?;
    let prefix = Path::new(&home).join(".cache/commitscope/llvm");
    let plib = prefix.join("lib");
    std::fs::create_dir_all(&plib)?;
    let mut first = None;
    for e in std::fs::read_dir(&lib)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("libLLVM.so.") || name.starts_with("libLLVM-") {
            let link = plib.join(&name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(e.path(), &link)?;
            if name.starts_with("libLLVM.so.") {
                first.get_or_insert(e.path());
            }
        }
    }
    let Some(target) = first else {
        bail!(
            "no libLLVM.so.* in {}: reinstall the nightly toolchain",
            lib.display()
        );
    };
    let so = plib.join("libLLVM.so");
    let _ = std::fs::remove_file(&so);
    std::os::unix::fs::symlink(target, &so)?;
    eprintln!("xtask: building bpf-linker {BPF_LINKER_VERSION} against nightly's LLVM {major} (2-3 minutes, once)");
    status(
        Command::new("cargo")
            .env("LLVM_PREFIX", &prefix)
            .args([
                "install",
                "bpf-linker",
                "--locked",
                "--version",
                BPF_LINKER_VERSION,
            ])
            .args([
                "--no-default-features",
                "--features",
                &format!("llvm-{major}"),
            ]),
    )?;
    if !succeeds(Command::new("bpf-linker").arg("--version")) {
        bail!("bpf-linker installed but does not run: is ~/.cargo/bin on PATH?");
    }
    Ok(())
}

fn tracefs() -> anyhow::Result<()> {
    if Path::new("/sys/kernel/tracing/events").is_dir() || !is_root() {
        return Ok(());
    }
    status(Command::new("mount").args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_with_triggers_to_run_is_installed() {
        assert!(is_installed_status("install ok installed"));
        assert!(is_installed_status("install ok triggers-pending"));
        assert!(is_installed_status("install ok triggers-awaited\n"));
        assert!(!is_installed_status("deinstall ok config-files"));
        assert!(!is_installed_status("install ok half-configured"));
        assert!(!is_installed_status(""));
    }
}
