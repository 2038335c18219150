//! Builds the eBPF object (tracer-ebpf's binary) for bpfel-unknown-none with
//! the nightly toolchain, the aya template's way. With `AYA_BUILD_SKIP=1`
//! aya-build does nothing, so we write an empty stub: the crate then still
//! compiles (for docs or clippy on a machine without bpf-linker) and loading
//! fails at run time with a clear error instead.
use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
    time::{SystemTime, UNIX_EPOCH},
};

/// `--version`'s commit, build date and target, as compile-time env vars.
fn build_info(manifest: &Path) -> anyhow::Result<()> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuilt when HEAD moves (a commit rewrites the index too).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={dir}/{f}");
        }
    }
    // SOURCE_DATE_EPOCH makes the date reproducible; else today (UTC).
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let secs = match env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse::<i64>()?,
        Err(_) => SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64,
    };
    println!("cargo:rustc-env=COMMITSCOPE_COMMIT={commit}");
    println!(
        "cargo:rustc-env=COMMITSCOPE_BUILD_DATE={}",
        civil_date(secs)
    );
    println!("cargo:rustc-env=COMMITSCOPE_TARGET={}", env::var("TARGET")?);
    Ok(())
}

/// YYYY-MM-DD of a Unix time (Howard Hinnant's days-to-civil).
fn civil_date(secs: i64) -> String {
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn main() -> anyhow::Result<()> {
    build_info(Path::new(&env::var("CARGO_MANIFEST_DIR")?))?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    // An object another build of this same tree made (`cargo xtask test`
    // builds it once, after its clippy and in clippy's target dir,
    // `xtask/src/ebpf.rs`, for the test build and the static binary): the
    // same source, toolchain and flags give the same bytes, without a
    // second nightly build of `core` for the BPF target.
    println!("cargo:rerun-if-env-changed=COMMITSCOPE_EBPF_OBJECT");
    if let Some(built) = env::var_os("COMMITSCOPE_EBPF_OBJECT") {
        println!("cargo:rerun-if-changed={}", Path::new(&built).display());
        fs::copy(&built, out.join("tracer-ebpf")).map_err(|e| {
            anyhow::anyhow!(
                "COMMITSCOPE_EBPF_OBJECT={}: {e}",
                Path::new(&built).display()
            )
        })?;
        return Ok(());
    }
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        let stub = out.join("tracer-ebpf");
        if !stub.exists() {
            fs::write(stub, [])?;
        }
    }
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?)
        .parent()
        .map(|p| p.join("tracer-ebpf"))
        .ok_or_else(|| anyhow::anyhow!("tracer/ has no parent directory"))?;
    let root = root
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path"))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
