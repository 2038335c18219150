//! The `commitscope` binary: parse, dispatch, and turn every error into one
//! line on stderr with a non-zero exit (never a panic or a backtrace).
use std::process::ExitCode;

use clap::Parser;
use commitscope::{
    cli::{Cli, Command},
    error::Error,
};

/// The main command: its flags checked once, its output opened (a
/// `--csv` file only for a run that passed the checks), the run.
fn main_command(args: commitscope::cli::RunArgs) -> Result<(), Error> {
    let plan = commitscope::session::RunPlan::check(&args)?;
    let mut sink = commitscope::report::run_sinks(args.workload.json, args.output.csv.as_deref())?;
    commitscope::session::run(plan, sink.as_mut())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    // Parsed: the options are copies now; `ps` need not show a password.
    commitscope::argv::hide_passwords();
    if cli.version {
        return version(cli.run.workload.json);
    }
    let result = match cli.command {
        None => main_command(cli.run),
        Some(Command::Completions(args)) => {
            commitscope::manual::completions(args.shell, &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Manpages(args)) => commitscope::manual::write_pages(&args.dir).map(|pages| {
            for p in pages {
                println!("{}", p.display());
            }
        }),
        Some(Command::Trace(args)) => commitscope::trace::run(args),
        Some(Command::Probes(args)) => commitscope::where_cmd::run(&args),
        Some(Command::Exporter(args)) => commitscope::exporter::run(args),
        Some(Command::Study(args)) => commitscope::study::run(args),
        Some(Command::Workload(args)) => workload::run::run(&args).map(|_| ()).map_err(Error::from),
        Some(Command::Load(args)) => {
            workload::load_check::load(&args.workload_args(), &mut std::io::stdout())
                .map_err(Error::from)
        }
        Some(Command::Check(args)) => workload::load_check::check_loaded(
            &args.workload_args(),
            args.warehouses,
            &mut std::io::stdout(),
        )
        .map_err(Error::from),
        Some(Command::Sweep(args)) => commitscope::sweep::run(args),
        Some(Command::Report(args)) => {
            readers::report::sweep::rebuild(&args.dir, &mut std::io::stdout()).map_err(Error::from)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Ctrl-C before the run: cleaned up, and said so; 130 as a shell would.
        Err(
            e @ (Error::Interrupted { .. } | Error::Workload(workload::Error::LoadInterrupted)),
        ) => {
            eprintln!("commitscope: {e}");
            ExitCode::from(130)
        }
        // The server went away mid-run: the summary is out, the code says so.
        Err(
            e @ (Error::ServerLost { .. }
            | Error::Workload(workload::Error::ServerCannotWrite { .. })),
        ) => {
            eprintln!("commitscope: {e}");
            ExitCode::from(3)
        }
        // Semi-sync fell back to async mid-run: the summary is out.
        Err(e @ Error::AsyncFallback { .. }) => {
            eprintln!("commitscope: {e}");
            ExitCode::from(4)
        }
        Err(e) => {
            eprintln!("commitscope: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--version` (`--json`: one object).
fn version(json: bool) -> ExitCode {
    let info = commitscope::version::BuildInfo::get();
    if json {
        println!("{}", serde_json::to_string(&info).unwrap_or_default());
    } else {
        print!("{}", info.text());
    }
    ExitCode::SUCCESS
}

/// clap's help and version as clap prints them; its errors as one line
/// that keeps everything the parser said above its usage: the missing
/// argument's name, the allowed values, a similar argument's tip.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        _ => {
            let text = e.to_string();
            let line = one_line(&text);
            eprintln!("commitscope: error: {line} (see --help)");
            ExitCode::from(2)
        }
    }
}

/// A parser's message folded into one line: its lines above `Usage:`,
/// trimmed, joined by spaces, a `tip:` after a `;`.
fn one_line(text: &str) -> String {
    let mut out = String::new();
    for l in text
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
    {
        let l = l.strip_prefix("error: ").unwrap_or(l);
        if out.is_empty() {
            out.push_str(l);
        } else if let Some(tip) = l.strip_prefix("tip: ") {
            out.push_str("; ");
            out.push_str(tip);
        } else {
            out.push(' ');
            out.push_str(l);
        }
    }
    if out.is_empty() {
        out.push_str("invalid arguments");
    }
    out
}
