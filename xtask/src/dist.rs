//! `cargo xtask dist`: the static musl binary, a .deb and SHA256SUMS in
//! target/dist; `cargo xtask dist-test`: installs that .deb on this
//! machine and checks it as a user would (run by `cargo xtask test`).
//!
//! The .deb is built with `dpkg-deb` from a staged tree rather than with
//! cargo-deb: the tree needs files the binary generates (man pages,
//! completions), dpkg-deb is on every Debian machine already, and the
//! control file is ten lines we can read in one place.
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::{
    setup::MUSL_TARGET,
    util::{build_fixture, fixture_mismatches, output, root, start_trace, status, succeeds},
};

const PACKAGE: &str = "commitscope";
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn dist_dir() -> PathBuf {
    root().join("target/dist")
}

/// The static binary's file name.
pub fn static_name() -> String {
    format!("{PACKAGE}-{VERSION}-x86_64-linux-musl")
}

fn deb_name() -> String {
    format!("{PACKAGE}_{VERSION}_amd64.deb")
}

/// Where each shell looks for completions, as Debian's packages install
/// them.
const COMPLETIONS: &[(&str, &str)] = &[
    ("bash", "usr/share/bash-completion/completions/commitscope"),
    ("zsh", "usr/share/zsh/vendor-completions/_commitscope"),
    (
        "fish",
        "usr/share/fish/vendor_completions.d/commitscope.fish",
    ),
];

/// How the static binary is built: what ships (`release`), or the
/// suite's check of its packaging (`dist-check`: unoptimised, see the
/// workspace's Cargo.toml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    Release,
    Check,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Check => "dist-check",
        }
    }

    /// dpkg-deb's xz level: what ships is packed as Debian's tools pack it
    /// (6); the suite's check, whose .deb is installed once and removed,
    /// at 1 (the unoptimised binary took xz 20 CPU-s and 18 s of the run's
    /// tail at 6, 3 CPU-s and 2 s at 1).
    fn xz_level(self) -> &'static str {
        match self {
            Profile::Release => "-z6",
            Profile::Check => "-z1",
        }
    }
}

/// `cargo build` of the static binary into `target_dir`.
pub fn compile_cmd(target_dir: &Path, profile: Profile) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut c = Command::new(cargo);
    c.args([
        "build",
        "--profile",
        profile.name(),
        "--target",
        MUSL_TARGET,
    ])
    .args(["-p", "commitscope", "--target-dir"])
    .arg(target_dir)
    .current_dir(root());
    c
}

/// The static binary [`compile_cmd`] leaves in `target_dir`.
fn compiled(target_dir: &Path, profile: Profile) -> PathBuf {
    target_dir.join(format!("{MUSL_TARGET}/{}/commitscope", profile.name()))
}

/// Builds target/dist: the static binary, the .deb, SHA256SUMS; runs
/// lintian on the .deb and fails on an error tag.
pub fn build() -> anyhow::Result<PathBuf> {
    let target = root().join("target");
    status(&mut compile_cmd(&target, Profile::Release))?;
    package(&target, Profile::Release)
}

/// target/dist from the static binary [`compile_cmd`] built into
/// `target_dir` with `profile`: stripped, staged into a .deb packed as
/// `profile` says, summed, the .deb checked by lintian.
pub fn package(target_dir: &Path, profile: Profile) -> anyhow::Result<PathBuf> {
    let built = compiled(target_dir, profile);
    let dist = dist_dir();
    let _ = std::fs::remove_dir_all(&dist);
    std::fs::create_dir_all(&dist)?;
    let bin = dist.join(static_name());
    std::fs::copy(&built, &bin)?;
    status(
        Command::new("strip")
            .args(["--strip-all", "--remove-section=.comment"])
            .arg(&bin),
    )?;

    let stage = root().join("target/dist-stage");
    let _ = std::fs::remove_dir_all(&stage);
    stage_tree(&stage, &bin)?;
    let deb = dist.join(deb_name());
    status(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", profile.xz_level(), "--build"])
            .arg(&stage)
            .arg(&deb)
            .stdout(Stdio::null()),
    )?;
    let sums = output(
        Command::new("sha256sum")
            .arg(static_name())
            .arg(deb_name())
            .current_dir(&dist),
    )?;
    std::fs::write(dist.join("SHA256SUMS"), sums)?;
    lintian(&deb)?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "dist: {} ({} bytes), {} ({} bytes), SHA256SUMS in {}",
        static_name(),
        size(&bin),
        deb_name(),
        size(&deb),
        dist.display()
    );
    Ok(dist)
}

/// Copies `src` to `stage` + `dest` with `mode`.
fn put(stage: &Path, src: &Path, dest: &str, mode: u32) -> anyhow::Result<()> {
    let to = stage.join(dest);
    std::fs::create_dir_all(to.parent().context("no parent")?)?;
    std::fs::copy(src, &to)
        .with_context(|| format!("copy {} to {}", src.display(), to.display()))?;
    set_mode(&to, mode)
}

fn write(stage: &Path, dest: &str, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let to = stage.join(dest);
    std::fs::create_dir_all(to.parent().context("no parent")?)?;
    std::fs::write(&to, bytes)?;
    set_mode(&to, mode)
}

fn set_mode(p: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// `gzip -9n` of `bytes` (no name or time in the header: reproducible, as
/// Debian policy asks of man pages and changelogs).
fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut child = Command::new("gzip")
        .arg("-9n")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let input = bytes.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output()?;
    feeder
        .join()
        .map_err(|_| anyhow::anyhow!("gzip feeder"))??;
    if !out.status.success() {
        bail!("gzip failed");
    }
    Ok(out.stdout)
}

/// The .deb's file tree under `stage`, with DEBIAN/control and md5sums.
fn stage_tree(stage: &Path, bin: &Path) -> anyhow::Result<()> {
    put(stage, bin, "usr/bin/commitscope", 0o755)?;
    // The man pages and completions come from the binary itself.
    let man = root().join("target/dist-man");
    let _ = std::fs::remove_dir_all(&man);
    output(Command::new(bin).arg("manpages").arg(&man))?;
    for page in std::fs::read_dir(&man)?.flatten() {
        let name = page.file_name().to_string_lossy().into_owned();
        let bytes = gzip(&std::fs::read(page.path())?)?;
        write(
            stage,
            &format!("usr/share/man/man1/{name}.gz"),
            &bytes,
            0o644,
        )?;
    }
    for (shell, dest) in COMPLETIONS {
        let script = output(Command::new(bin).args(["completions", shell]))?;
        write(stage, dest, script.as_bytes(), 0o644)?;
    }
    for f in [
        "contrib/prometheus/commitscope.rules.yml",
        "contrib/grafana/commitscope.json",
        "contrib/systemd/commitscope-exporter.service",
    ] {
        let dest = f.replacen("contrib/", "usr/share/commitscope/", 1);
        put(stage, &root().join(f), &dest, 0o644)?;
    }
    write(
        stage,
        "usr/share/lintian/overrides/commitscope",
        LINTIAN_OVERRIDES.as_bytes(),
        0o644,
    )?;
    let doc = "usr/share/doc/commitscope";
    write(
        stage,
        &format!("{doc}/copyright"),
        copyright().as_bytes(),
        0o644,
    )?;
    write(
        stage,
        &format!("{doc}/changelog.gz"),
        &gzip(changelog().as_bytes())?,
        0o644,
    )?;
    write(
        stage,
        &format!("{doc}/README.md.gz"),
        &gzip(&std::fs::read(root().join("README.md"))?)?,
        0o644,
    )?;
    // The manual behind the README, where its links expect it.
    for page in std::fs::read_dir(root().join("docs"))? {
        let page = page?.path();
        if let Some(name) = page.file_name().and_then(|n| n.to_str()) {
            if name.ends_with(".md") {
                write(
                    stage,
                    &format!("{doc}/docs/{name}.gz"),
                    &gzip(&std::fs::read(&page)?)?,
                    0o644,
                )?;
            }
        }
    }
    // Installed-Size is in KiB.
    let kib = output(
        Command::new("du")
            .args(["-sk", "--exclude=DEBIAN"])
            .arg(stage),
    )?
    .split_whitespace()
    .next()
    .unwrap_or("0")
    .to_string();
    write(stage, "DEBIAN/control", control(&kib).as_bytes(), 0o644)?;
    let files = output(
        Command::new("find")
            .args([".", "-type", "f", "!", "-path", "./DEBIAN/*"])
            .current_dir(stage),
    )?;
    let mut list: Vec<&str> = files.lines().map(|l| l.trim_start_matches("./")).collect();
    list.sort_unstable();
    let sums = output(Command::new("md5sum").args(&list).current_dir(stage))?;
    write(stage, "DEBIAN/md5sums", sums.as_bytes(), 0o644)?;
    // dpkg-deb wants every directory 0755.
    status(
        Command::new("find")
            .arg(stage)
            .args(["-type", "d", "-exec", "chmod", "0755", "{}", "+"]),
    )
}

/// lintian's one error tag that is not one: the binary is static, so
/// every Rust dependency is in it; the YAML parser of `--web-config`
/// (serde_norway) is unsafe-libyaml, a Rust translation of libyaml, and
/// Debian's C libyaml cannot be linked into a static Rust binary.
const LINTIAN_OVERRIDES: &str = "\
# --web-config is parsed by serde_norway with unsafe-libyaml-norway, a Rust
# translation of libyaml built into this static binary; the C libyaml of
# Debian cannot be linked into it.
commitscope: embedded-library libyaml [usr/bin/commitscope]
";

fn control(installed_kib: &str) -> String {
    format!(
        "Package: {PACKAGE}\n\
         Version: {VERSION}\n\
         Architecture: amd64\n\
         Maintainer: commitscope developers <commitscope@localhost.invalid>\n\
         Installed-Size: {installed_kib}\n\
         Section: database\n\
         Priority: optional\n\
         Suggests: mariadb-server | default-mysql-server\n\
         Homepage: https://commitscope.invalid/\n\
         Description: how InnoDB batches commits into redo flushes, counted with eBPF\n \
         commitscope drives a MySQL/MariaDB server with a built-in workload while\n \
         eBPF probes in the server and the kernel count durable redo write\n \
         requests, redo flushes and fsyncs per second: the group-commit ratio,\n \
         batch sizes, leaders and followers, and fsync latency per file class.\n \
         It also traces a running server, sweeps settings, and exports the\n \
         figures to Prometheus. The binary is static; the server it drives is\n \
         found on the host, not required by the package.\n"
    )
}

fn copyright() -> String {
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
     Upstream-Name: commitscope\n\n\
     Files: *\n\
     Copyright: 2026 commitscope developers\n\
     License: MIT or Apache-2.0\n \
     On Debian systems, the full text of the Apache License 2.0 is in\n \
     /usr/share/common-licenses/Apache-2.0. The MIT license:\n \
     .\n \
     Permission is hereby granted, free of charge, to any person obtaining a\n \
     copy of this software and associated documentation files (the\n \
     \"Software\"), to deal in the Software without restriction, including\n \
     without limitation the rights to use, copy, modify, merge, publish,\n \
     distribute, sublicense, and/or sell copies of the Software, and to\n \
     permit persons to whom the Software is furnished to do so, subject to\n \
     the following conditions:\n \
     .\n \
     The above copyright notice and this permission notice shall be included\n \
     in all copies or substantial portions of the Software.\n \
     .\n \
     THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS\n \
     OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF\n \
     MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.\n"
        .to_string()
}

/// A native package's changelog: one entry for this version, dated by the
/// commit (reproducible).
fn changelog() -> String {
    let date = output(
        Command::new("git")
            .args(["log", "-1", "--format=%cD"])
            .current_dir(root()),
    )
    .map(|d| d.trim().to_string())
    .unwrap_or_else(|_| "Tue, 01 Dec 2026 00:00:00 +0000".into());
    format!(
        "{PACKAGE} ({VERSION}) unstable; urgency=medium\n\n  \
         * Release {VERSION}: static binary, man pages, completions.\n\n \
         -- commitscope developers <commitscope@localhost.invalid>  {date}\n"
    )
}

/// lintian's tags on the .deb, printed; an error (E:) fails the build.
fn lintian(deb: &Path) -> anyhow::Result<()> {
    let out = Command::new("lintian")
        .args(["--no-tag-display-limit", "--display-info"])
        .arg(deb)
        .output()
        .context("cannot run lintian (cargo xtask setup installs it)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tags: BTreeMap<String, usize> = BTreeMap::new();
    for l in text.lines() {
        *tags.entry(l.to_string()).or_default() += 1;
        eprintln!("lintian: {l}");
    }
    let errors: Vec<&String> = tags.keys().filter(|l| l.starts_with("E:")).collect();
    if !errors.is_empty() {
        bail!("lintian reports errors on {}: {errors:?}", deb.display());
    }
    eprintln!("dist: lintian: no errors ({} tag lines)", tags.len());
    Ok(())
}

/// One check's verdict, printed as a cargo-test line.
struct Results {
    passed: usize,
    failed: usize,
}

impl Results {
    fn check(&mut self, name: &str, r: anyhow::Result<String>) {
        match r {
            Ok(detail) => {
                self.passed += 1;
                println!("test dist::{name} ... ok ({detail})");
            }
            Err(e) => {
                self.failed += 1;
                println!("test dist::{name} ... FAILED: {e:#}");
            }
        }
    }
}

/// Builds target/dist, then checks the static binary and the .deb on this
/// machine: installs it, uses it, removes it.
pub fn test() -> anyhow::Result<()> {
    let dist = build()?;
    check(&dist)
}

/// The checks of [`test`] on a built target/dist: installed, used as a
/// user would, removed.
pub fn check(dist: &Path) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let bin = dist.join(static_name());
    let deb = dist.join(deb_name());
    let mut r = Results {
        passed: 0,
        failed: 0,
    };
    r.check("static_binary_is_static", is_static(&bin));
    r.check("static_binary_runs_the_main_command", main_command(&bin));
    // A package of ours left by an interrupted run goes first.
    let _ = succeeds(Command::new("dpkg").args(["-r", PACKAGE]));
    let installed = status(
        Command::new("dpkg")
            .arg("-i")
            .arg(&deb)
            .stdout(Stdio::null()),
    );
    r.check("deb_installs", installed.map(|_| deb_name()));
    let files = output(Command::new("dpkg").args(["-L", PACKAGE])).unwrap_or_default();
    r.check("installed_version", installed_version());
    r.check("man_pages_found", man_pages());
    r.check("bash_completion_loads", bash_completion());
    r.check(
        "installed_binary_traces_exactly",
        traces_fixture(Path::new("/usr/bin/commitscope")),
    );
    r.check("deb_removes_cleanly", remove(&files));
    println!(
        "test result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in {:.2}s",
        if r.failed == 0 { "ok" } else { "FAILED" },
        r.passed,
        r.failed,
        t0.elapsed().as_secs_f64()
    );
    if r.failed > 0 {
        bail!("{} dist check(s) failed", r.failed);
    }
    Ok(())
}

fn is_static(bin: &Path) -> anyhow::Result<String> {
    let f = output(Command::new("file").arg("-b").arg(bin))?;
    let ldd = Command::new("ldd").arg(bin).output()?;
    let ldd = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    if !f.contains("static")
        || !(ldd.contains("not a dynamic") || ldd.contains("statically linked"))
    {
        bail!("file: {f}; ldd: {ldd}");
    }
    let size = std::fs::metadata(bin)?.len();
    Ok(format!(
        "{}, {size} bytes",
        f.split(',').take(2).collect::<Vec<_>>().join(",").trim()
    ))
}

/// The main command with a managed server for 3 s: a summary with commits.
fn main_command(bin: &Path) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .args([
            "--threads",
            "4",
            "--duration",
            "3",
            "--json",
            "--no-debuginfod",
        ])
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let s: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    let commits = s["workload"]["commits"].as_u64().unwrap_or(0);
    if !out.status.success() || s["type"] != "summary" || commits == 0 {
        bail!(
            "exit {}, last line {last:.300}, stderr {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(format!(
        "{commits} commits, {:.2} commits/flush",
        s["commits_per_flush"].as_f64().unwrap_or(f64::NAN)
    ))
}

fn installed_version() -> anyhow::Result<String> {
    let v = output(Command::new("/usr/bin/commitscope").arg("--version"))?;
    let first = v.lines().next().unwrap_or_default();
    if first != format!("commitscope {VERSION}") {
        bail!("--version says {v:?}, the workspace is {VERSION}");
    }
    let json: Value = serde_json::from_str(&output(
        Command::new("/usr/bin/commitscope").args(["--version", "--json"]),
    )?)?;
    if json["version"] != VERSION || json["target"] != MUSL_TARGET {
        bail!("--version --json says {json}");
    }
    Ok(v.lines().collect::<Vec<_>>().join("; "))
}

fn man_pages() -> anyhow::Result<String> {
    let mut found = Vec::new();
    for page in ["commitscope", "commitscope-trace"] {
        found.push(
            output(Command::new("man").args(["-w", page]))?
                .trim()
                .to_string(),
        );
    }
    Ok(found.join(", "))
}

/// bash-completion loads our script on demand, as on a Tab press.
fn bash_completion() -> anyhow::Result<String> {
    let out = output(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/bash_completion && \
         _completion_loader commitscope; complete -p commitscope",
    ]))?;
    if !out.contains("commitscope") {
        bail!("complete -p printed {out:?}");
    }
    Ok(out.trim().to_string())
}

/// The installed binary traces the C fixture: counts equal the fixture's.
fn traces_fixture(cs: &Path) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let fx = dir.path().join("fake_mariadbd");
    build_fixture(&fx, &[])?;
    let mut child = Command::new(&fx)
        .arg("3000")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let trace = start_trace(cs, child.id(), &["--json"], Stdio::piped());
    let mut stdin = child.stdin.take().context("stdin")?;
    let trace = match trace {
        Ok(t) => t,
        Err(e) => {
            let _ = child.kill();
            return Err(e);
        }
    };
    writeln!(stdin, "go")?;
    drop(stdin);
    let truth_out = child.wait_with_output()?;
    let truth: Value = serde_json::from_slice(&truth_out.stdout)?;
    let out = trace.wait_with_output()?;
    let last = BufReader::new(&out.stdout[..])
        .lines()
        .map_while(Result::ok)
        .last()
        .unwrap_or_default();
    let s: Value = serde_json::from_str(&last)?;
    let t = &s["totals"];
    let bad = fixture_mismatches(t, &truth);
    if !bad.is_empty() {
        bail!("{}", bad.join(", "));
    }
    Ok(format!(
        "n_write {}, durable {}, n_flush {}, redo_fsync {}: equal to the fixture's",
        t["n_write"], t["durable"], t["n_flush"], t["redo_fsync"]
    ))
}

/// `dpkg -r` leaves none of the package's files behind.
fn remove(files: &str) -> anyhow::Result<String> {
    status(
        Command::new("dpkg")
            .args(["-r", PACKAGE])
            .stdout(Stdio::null()),
    )?;
    let left: Vec<&str> = files.lines().filter(|f| Path::new(f).is_file()).collect();
    let n = files.lines().filter(|f| f.starts_with('/')).count();
    if files.is_empty() || !left.is_empty() {
        bail!("left behind after dpkg -r: {left:?} (dpkg -L listed {n} paths)");
    }
    Ok(format!("{n} paths listed by dpkg -L, no file left"))
}
