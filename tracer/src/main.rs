//! The `commitscope` binary: parse, dispatch, and turn every error into one
//! line on stderr with a non-zero exit (never a panic or a backtrace).
use std::process::ExitCode;

use clap::Parser;
use commitscope::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(args) => commitscope::trace::run(args),
        Command::Workload(args) => workload::run::run(&args)
            .map(|_| ())
            .map_err(commitscope::error::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("commitscope: error: {e}");
            ExitCode::from(2)
        }
    }
}
