//! The `commitscope` binary: parse, dispatch, and turn every error into one
//! line on stderr with a non-zero exit (never a panic or a backtrace).
use std::process::ExitCode;

use clap::Parser;
use commitscope::{
    cli::{Cli, Command},
    error::Error,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => commitscope::session::run(cli.run),
        Some(Command::Trace(args)) => commitscope::trace::run(args),
        Some(Command::Study(args)) => commitscope::study::run(args),
        Some(Command::Workload(args)) => workload::run::run(&args).map(|_| ()).map_err(Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Ctrl-C before the run: cleaned up, and said so; 130 as a shell would.
        Err(e @ Error::Interrupted { .. }) => {
            eprintln!("commitscope: {e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("commitscope: error: {e}");
            ExitCode::from(2)
        }
    }
}
