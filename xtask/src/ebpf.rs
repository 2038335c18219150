//! The eBPF crate linted, and its object built once per suite.
//!
//! `tracer/build.rs` builds the object with aya-build: a nightly `cargo
//! build` with a target dir of its own, so its host crates (syn, serde,
//! the macros, aya-build's own) are built there again after the lint's
//! clippy built them for its check. `cargo xtask test` instead lints and
//! builds here, both with aya-build's flags in one target dir: the build
//! reuses what clippy built for the host (7 crates left, 5 s), and the
//! object, byte for byte aya-build's, goes to the test build
//! (`COMMITSCOPE_EBPF_OBJECT`, which `tracer/build.rs` copies).
//!
//! Not clippy as the build's compiler, as the host crates have it: the
//! driver turns MIR optimizations off, and the programs it built differed
//! from what ships (the `uprobe` section 32 bytes shorter) before the
//! kernel's verifier ever saw them.
use std::{path::PathBuf, process::Command};

use crate::util;

/// `cargo clippy -- -D warnings` on the eBPF crate, for the target it is
/// built for.
pub fn clippy() -> anyhow::Result<()> {
    util::status(
        nightly_cargo("clippy")
            .args(["--", "-D", "warnings"])
            .current_dir(util::root().join("tracer-ebpf")),
    )
}

/// [`clippy`], then the object built from the same target dir: its path.
pub fn build_linted() -> anyhow::Result<PathBuf> {
    clippy()?;
    util::status(nightly_cargo("build").current_dir(util::root().join("tracer-ebpf")))?;
    let object = target_dir().join("bpfel-unknown-none/release/tracer-ebpf");
    anyhow::ensure!(
        std::fs::metadata(&object).is_ok_and(|m| m.len() > 0),
        "the eBPF build left no object at {}",
        object.display()
    );
    Ok(object)
}

fn target_dir() -> PathBuf {
    util::root().join("target/ebpf")
}

/// `cargo +nightly SUBCOMMAND` of the eBPF binary as aya-build 0.2.0
/// (`build_ebpf`) runs it: release, `core` built for the target, the
/// host's architecture as the programs' `bpf_target_arch`, BTF for
/// CO-RE.
fn nightly_cargo(subcommand: &str) -> Command {
    let rustflags = [
        format!("--cfg=bpf_target_arch=\"{}\"", std::env::consts::ARCH),
        "-Cdebuginfo=2".into(),
        "-Clink-arg=--btf".into(),
    ]
    .join("\x1f");
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo", subcommand])
        .args(["--package", "tracer-ebpf", "--bins", "--release"])
        .args(["--target", "bpfel-unknown-none", "-Z", "build-std=core"])
        .arg("--target-dir")
        .arg(target_dir())
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    c
}
