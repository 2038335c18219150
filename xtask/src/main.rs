//! Developer tasks: `cargo xtask setup|build|test|lint|run|bench`.
//! Never shipped to users; the README's two commands go through here.
mod bench;
mod bench_tpcc;
mod setup;
mod util;

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
    /// setup + fmt check + clippy + the whole test suite.
    Test {
        /// Extra arguments for `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// fmt check and clippy -D warnings.
    Lint,
    /// setup + release build + run commitscope with ARGS.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
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
        Cmd::Run { args } => run(&args),
        Cmd::Bench { which } => setup::run().and_then(|_| bench::run(which)),
    };
    if let Err(e) = r {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn lint() -> anyhow::Result<()> {
    util::cargo(&["fmt", "--all", "--", "--check"])?;
    // Host crates (the workspace's default members) ...
    util::cargo(&["clippy", "--all-targets", "--", "-D", "warnings"])?;
    // ... and the eBPF programs, for the target they are built for.
    util::status(
        std::process::Command::new("rustup")
            .args([
                "run",
                "nightly",
                "cargo",
                "clippy",
                "--release",
                "--target",
                "bpfel-unknown-none",
            ])
            .args(["-Z", "build-std=core", "--bins", "--", "-D", "warnings"])
            .current_dir(util::root().join("tracer-ebpf")),
    )
}

fn test(args: &[String]) -> anyhow::Result<()> {
    setup::run()?;
    lint()?;
    // The shared eBPF types' unit tests (the crate is not a default member).
    util::cargo(&["test", "-p", "tracer-ebpf", "--lib"])?;
    // --all-targets: every test target, without empty doc-test runs.
    let mut a = vec!["test", "--all-targets"];
    a.extend(args.iter().map(String::as_str));
    // Tests start real servers: two at a time on a 2-core machine.
    if !args.iter().any(|x| x == "--") {
        a.extend(["--", "--test-threads=2"]);
    }
    util::cargo(&a)
}

fn run(args: &[String]) -> anyhow::Result<()> {
    setup::run()?;
    util::cargo(&["build", "--release", "-p", "commitscope"])?;
    let bin = util::root().join("target/release/commitscope");
    let status = std::process::Command::new(bin).args(args).status()?;
    std::process::exit(status.code().unwrap_or(1));
}
