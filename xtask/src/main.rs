//! Developer tasks: `cargo xtask setup|build|test|lint|servers|run|fuzz|soak|vm-test|dist|dist-test|samples|bench`.
//! Never shipped to users; the README's two commands go through here.
mod background;
mod bench;
mod bench_arms;
mod bench_exporter;
mod bench_first_line;
mod bench_io;
mod bench_releases;
mod bench_symbols;
mod bench_tpcc;
mod bpf_stats;
mod cpustat;
mod dist;
mod ebpf;
mod fuzz;
mod hermetic;
mod modgraph;
mod run_tests;
mod samples;
mod setup;
mod soak;
mod suite;
mod util;
mod vm;

use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what a fresh machine lacks (idempotent; seconds when done).
    Setup,
    /// Build everything (eBPF object included), release mode.
    Build,
    /// setup + lint + the whole test suite: the test binaries side by
    /// side, the kernel matrix, the distribution, the fuzz targets; then
    /// where the time went.
    Test {
        /// Extra arguments for `cargo test` (the build), then after `--`
        /// the test binaries' own (a filter, --nocapture).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// fmt check, clippy -D warnings, the hermetic-tests check, no import circles.
    Lint,
    /// Debian's stock MariaDB 10.5 (bullseye) and 11.8 (trixie) and MySQL
    /// (sid), with their own libraries, into ~/.cache/commitscope/servers
    /// (idempotent; `setup` does it too).
    Servers,
    /// setup + release build + run commitscope with ARGS.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Every cargo-fuzz target (hostile-input readers) for N seconds each.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Targets to run (default: all).
        targets: Vec<String>,
    },
    /// The main command for a long time, checked minute by minute (RSS,
    /// fds, lost events, ours vs the server's counters).
    Soak {
        #[arg(long, default_value_t = 30)]
        minutes: u64,
        #[arg(long, default_value_t = 100)]
        threads: u32,
    },
    /// The probes on real Debian kernels under qemu (TCG): exact counts per
    /// kernel x fsync probe, and which kernel function the kprobes used.
    VmTest {
        /// Kernel packages (meta-packages are resolved).
        #[arg(long, value_delimiter = ',', default_values_t = vm::DEFAULT_KERNELS.iter().map(|s| s.to_string()))]
        kernels: Vec<String>,
        /// The commitscope binary to test (default: a release build).
        #[arg(long)]
        binary: Option<std::path::PathBuf>,
        /// Seconds one guest may take to boot and run every scenario.
        #[arg(long, default_value_t = vm::VM_LIMIT_S)]
        limit_s: u64,
        /// Rounds of the sync-cost scenario (each probe kind's cost is
        /// the median over them).
        #[arg(long, default_value_t = vm::COST_ROUNDS, value_parser = clap::value_parser!(u32).range(1..))]
        cost_rounds: u32,
        /// The fixture's fdatasyncs per sync-cost run.
        #[arg(long, default_value_t = vm::COST_SYNCS, value_parser = clap::value_parser!(u32).range(1000..))]
        cost_syncs: u32,
        /// `cargo xtask test`'s own call: its setup ran at its start, and
        /// its package test may hold dpkg's lock meanwhile.
        #[arg(long, hide = true)]
        no_setup: bool,
    },
    /// The static musl binary, the .deb (lintian-checked) and SHA256SUMS,
    /// into target/dist.
    Dist,
    /// dist, then install the .deb here and use it as a user would
    /// (cargo-test lines; run by `test`).
    DistTest,
    /// Rerun the command of every `<!-- sample: ARGS -->` block in
    /// README.md and docs/ and write its real output there (root).
    Samples,
    /// Benchmarks that print ratios against a peer measured in the same run.
    Bench {
        #[command(subcommand)]
        which: bench::Which,
    },
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Setup => setup::run(),
        Cmd::Build => {
            setup::run().and_then(|_| util::cargo(&["build", "--release", "--workspace"]))
        }
        Cmd::Test { args } => test(&args),
        Cmd::Lint => lint(),
        Cmd::Servers => setup::run(),
        Cmd::Run { args } => run(&args),
        Cmd::Fuzz { seconds, targets } => setup::run().and_then(|_| fuzz::run(seconds, &targets)),
        Cmd::Soak { minutes, threads } => setup::run().and_then(|_| soak::run(minutes, threads)),
        Cmd::VmTest {
            kernels,
            binary,
            limit_s,
            cost_rounds,
            cost_syncs,
            no_setup,
        } => (if no_setup { Ok(()) } else { setup::run() }).and_then(|_| {
            let cost = vm::Cost {
                rounds: cost_rounds,
                syncs: cost_syncs,
            };
            vm::run(&kernels, binary, Duration::from_secs(limit_s), cost)
        }),
        Cmd::Dist => setup::run().and_then(|_| dist::build().map(|_| ())),
        Cmd::DistTest => setup::run().and_then(|_| dist::test()),
        Cmd::Bench { which } => setup::run().and_then(|_| bench::run(which)),
        Cmd::Samples => setup::run().and_then(|_| samples::run()),
    };
    if let Err(e) = r {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn lint() -> anyhow::Result<()> {
    // Host crates (the workspace's default members) ...
    util::cargo(&["clippy", "--all-targets", "--", "-D", "warnings"])?;
    // ... the eBPF programs, for the target they are built for ...
    ebpf::clippy()?;
    lint_but_clippy()
}

/// Every lint but clippy: `cargo xtask test` has clippy lint the host
/// crates while it builds the test binaries (`suite::build`), instead of
/// type-checking the workspace a second time, and the eBPF crate before
/// it builds the object from what clippy built (`ebpf::build_linted`).
fn lint_but_clippy() -> anyhow::Result<()> {
    util::cargo(&["fmt", "--all", "--", "--check"])?;
    // The fuzz targets are a workspace of their own.
    util::status(
        std::process::Command::new("cargo")
            .args(["fmt", "--", "--check"])
            .current_dir(util::root().join("fuzz")),
    )?;
    // Tests are threads of one process: none may change what they share.
    hermetic::check(&util::root())?;
    // Each module imports downward only.
    modgraph::check(&util::root())
}

/// Every stage runs even when one before it failed, so one red test shows
/// the whole picture; the summary at the end names every failure and the
/// exit is non-zero when there is one. Only a failed setup stops at once
/// (nothing after it could run). The work that needs no quiet machine
/// (the static binary's and the fuzz targets' builds, the kernel matrix)
/// runs in the background while the test binaries wait on their servers
/// (`background`); the closing table says where the time went.
///
/// `args`: cargo's (`--test mysql`, `-p workload`), then after `--` the
/// test harness's (a filter, `--nocapture`).
fn test(args: &[String]) -> anyhow::Result<()> {
    let mut clock = run_tests::Timings::default();
    clock.stage("setup", setup::run)?;
    let (cargo_args, harness) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let mut failed = run_tests::Failures::default();
    const LINT: &str = "lint (fmt, eBPF object under clippy, hermetic tests, imports)";
    let mut ebpf_object = None;
    let linted = clock.stage(LINT, || {
        let built = ebpf::build_linted().map(|o| ebpf_object = Some(o));
        let rest = lint_but_clippy();
        built.and(rest)
    });
    failed.stage(LINT, linted);
    // --all-targets: every test target, without empty doc-test runs. The
    // shared eBPF types' unit tests too (the crate is not a default
    // member: its binary only builds for the BPF target).
    let mut build_args = vec!["--all-targets".to_string()];
    build_args.extend(cargo_args.iter().cloned());
    let bins = clock.stage("build the test binaries", || -> anyhow::Result<_> {
        let mut bins = suite::build(&build_args, ebpf_object.as_deref())?;
        bins.extend(suite::build(
            &["-p".into(), "tracer-ebpf".into(), "--lib".into()],
            None,
        )?);
        Ok(bins)
    });
    let bins = match bins {
        Ok(b) => b,
        Err(e) => {
            failed.stage("build the test binaries", Err(e));
            Vec::new()
        }
    };
    // The static binary and the fuzz targets build while the tests run;
    // the kernel matrix (issue 18) boots Debian's kernels under qemu with
    // the debug binary the tests built when the fuzz build is done: at
    // one idle priority the guests would share the CPU the tests leave
    // with the fuzz build, whose last crate is built by one thread and
    // then ends the run.
    let dist_dir = background::scratch("dist-target");
    let fuzz_dir = background::scratch("fuzz-target");
    let debug_bin = util::root().join("target/debug/commitscope");
    let dist_job = background::Job::spawn("static binary build", {
        let mut c = dist::compile_cmd(&dist_dir, dist::Profile::Check);
        if let Some(o) = suite::ebpf_object() {
            c.env("COMMITSCOPE_EBPF_OBJECT", o);
        }
        c
    });
    let fuzz_build = fuzz::Build::suite(&fuzz_dir);
    let fuzz_job = background::Job::spawn("fuzz targets build", fuzz::build_cmd(&fuzz_build));
    let fuzz_promoter = fuzz_job.as_ref().ok().map(background::Job::promoter);
    let fuzz_then_vm = background::after(fuzz_job, move || {
        if debug_bin.exists() {
            background::Job::spawn("kernel matrix", vm_cmd(&debug_bin))
                .map(background::Job::whole_log)
        } else {
            Err(anyhow::anyhow!("no debug binary: the test build failed"))
        }
    });
    let mut harness: Vec<String> = harness.to_vec();
    if !harness.iter().any(|a| a.starts_with("--test-threads")) {
        harness.push(format!("--test-threads={TEST_THREADS}"));
    }
    let ran = clock.stage("test binaries, side by side", || {
        suite::run(bins, &harness, print_binary)
    });
    for r in &ran {
        failed.binary(r);
        clock.binary(r);
    }
    // The tests are over: the builds the next stages wait for go first,
    // the guests (still idle priority) take what they leave.
    let dist_promoter = dist_job.as_ref().ok().map(background::Job::promoter);
    for p in dist_promoter.iter().chain(&fuzz_promoter) {
        p.promote();
    }
    // What is left runs in the order that keeps both cores busy: the
    // builds' rests, the packages' checks and the fuzzing at normal
    // priority, the kernel matrix's guests (idle priority, started when
    // the fuzz build ended) taking whatever they leave (the fifth
    // target's free core); then the guests alone.
    // The distribution (issue 16): the static binary and the .deb,
    // installed, used and removed here.
    let dist = clock.stage("dist-test (the rest of its build, then checks)", || {
        dist_job?.wait()?;
        dist::check(&dist::package(&dist_dir, dist::Profile::Check)?)
    });
    failed.stage("dist-test", dist);
    // Every reader of hostile input under libFuzzer.
    let mut vm_job = Err(anyhow::anyhow!("the fuzz build never ended"));
    let fuzz = clock.stage("fuzz (the rest of its build, targets side by side)", || {
        let (fuzz_job, vm) = fuzz_then_vm.join();
        vm_job = vm;
        fuzz_job?.wait()?;
        fuzz::run_built(
            FUZZ_SECONDS,
            fuzz::TARGETS,
            &fuzz_build,
            fuzz::TARGETS.len(),
        )
    });
    failed.stage("fuzz", fuzz);
    let vm = clock.stage("vm-test (the rest of the kernel matrix)", || vm_job?.wait());
    failed.stage("vm-test", vm);
    let _ = std::fs::remove_dir_all(background::scratch_root());
    clock.print();
    failed.finish()
}

/// `cargo xtask vm-test` on `bin`, each guest allowed as long as the
/// whole suite's budget: at idle priority beside the tests, a guest gets
/// only the CPU they leave. One round of the sync-cost scenario: its
/// exact counts are the check, and two more rounds were 40 s of each of
/// the three guests.
fn vm_cmd(bin: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(
        std::env::current_exe().unwrap_or_else(|_| "cargo-xtask".into()),
    );
    c.arg("vm-test")
        .arg("--binary")
        .arg(bin)
        .args([
            "--limit-s",
            "1800",
            "--cost-rounds",
            "1",
            "--cost-syncs",
            "20000",
        ])
        .arg("--no-setup")
        .current_dir(util::root());
    c
}

/// Threads per test binary: more than any binary has tests, so that each
/// test starts at once and waits for its lane (`testkit::lane`) there:
/// the lanes, not the harness, decide what runs beside what.
const TEST_THREADS: usize = 32;

/// Seconds per fuzz target in the suite: the seeds, every earlier crash
/// among them, and a short search; longer searches are
/// `cargo xtask fuzz --seconds N`'s (30 s each cost the suite a minute).
/// The five run at once, sharing the two cores: 10 s of the run's tail
/// instead of 30 (three rounds of two), for about 40 % of the inputs each
/// (the seeds are replayed whole either way).
const FUZZ_SECONDS: u64 = 10;

/// A test binary's output as cargo prints it: its `Running` line, then
/// everything it wrote.
fn print_binary(r: &suite::Ran) {
    use std::io::Write;
    let exe = r
        .binary
        .exe
        .strip_prefix(util::root())
        .unwrap_or(&r.binary.exe);
    let mut o = std::io::stdout().lock();
    let _ = writeln!(
        o,
        "     Running {} ({}) [{:.1} s]",
        r.binary.name,
        exe.display(),
        r.wall.as_secs_f64()
    );
    // The lanes' reports are the closing table's, not the log's.
    for l in r.output.lines() {
        if !l.starts_with(testkit::lane::REPORT) {
            let _ = writeln!(o, "{l}");
        }
    }
    let _ = o.flush();
}

fn run(args: &[String]) -> anyhow::Result<()> {
    setup::run()?;
    util::cargo(&["build", "--release", "-p", "commitscope"])?;
    let bin = util::root().join("target/release/commitscope");
    let status = std::process::Command::new(bin).args(args).status()?;
    std::process::exit(status.code().unwrap_or(1));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use testkit::docs;

    fn pages() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        docs::read_pages(&root)
            .into_iter()
            .map(|(p, text)| (p.display().to_string(), text))
            .collect()
    }

    /// `cargo xtask ...` in the README's and docs' code blocks: each one
    /// this CLI accepts as written.
    #[test]
    fn every_xtask_example_parses() {
        let mut bad = Vec::new();
        let mut seen = 0;
        for (page, text) in pages() {
            for (line, words) in docs::commands(&text, "cargo") {
                if words.get(1).map(String::as_str) != Some("xtask") {
                    continue;
                }
                seen += 1;
                if let Err(e) = Cli::try_parse_from(&words[1..]) {
                    let e = e.to_string();
                    let first = e.lines().next().unwrap_or_default();
                    bad.push(format!("{page}:{line}: {}: {first}", words.join(" ")));
                }
            }
        }
        assert!(seen >= 2, "only {seen} examples: is the reader broken?");
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    /// `cargo xtask ...` in running text: the subcommands exist and know
    /// every long flag given.
    #[test]
    fn every_xtask_flag_in_running_text_is_known() {
        let mut bad = Vec::new();
        let mut seen = 0;
        for (page, text) in pages() {
            for span in docs::inline_commands(&text, "cargo") {
                let mut words = span.text.split_whitespace().skip(1);
                if words.next() != Some("xtask") {
                    continue;
                }
                seen += 1;
                let mut cmd = Cli::command();
                let mut path = vec!["xtask".to_string()];
                for w in words.by_ref() {
                    if w.starts_with('-') || w.starts_with('[') {
                        break;
                    }
                    match cmd.find_subcommand(w).cloned() {
                        Some(sub) => {
                            path.push(w.to_string());
                            cmd = sub;
                        }
                        None if cmd.has_subcommands() => {
                            bad.push(format!(
                                "{page}:{}: `{}`: no subcommand {w}",
                                span.line, span.text
                            ));
                            break;
                        }
                        None => break,
                    }
                }
                if matches!(path.last().map(String::as_str), Some("run" | "test")) {
                    continue; // its arguments are commitscope's, or cargo test's
                }
                let known: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
                for flag in docs::long_flags(&span.text) {
                    if !known.contains(&flag.as_str()) && flag != "help" {
                        bad.push(format!(
                            "{page}:{}: `{}`: {} has no --{flag}",
                            span.line,
                            span.text,
                            path.join(" ")
                        ));
                    }
                }
            }
        }
        assert!(seen > 10, "only {seen} spans: is the reader broken?");
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
