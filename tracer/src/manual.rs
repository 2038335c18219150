//! The texts `--help` and the man pages share — the live view's columns and
//! the exit codes — and the man page generator (`cargo xtask dist` runs
//! `commitscope manpages DIR`): one source, so the terminal and the manual
//! never disagree.
use std::{
    io::Write,
    path::{Path, PathBuf},
};

use clap::CommandFactory;
use roff::{bold, roman, Roff};

use crate::{
    cli::{Cli, Shell},
    error::Error,
};

/// `commitscope completions SHELL`: clap_complete's script for the CLI.
pub fn completions(shell: Shell, out: &mut dyn Write) {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "commitscope", out);
}

/// Exit codes of every command.
pub const EXIT_CODES: &[(&str, &str)] = &[
    ("0", "the run finished (also after Ctrl-C during the run, or the traced server exiting)"),
    ("2", "bad input or a failed setup (one line on stderr says what and what to do)"),
    ("3", "the server was lost or could not write during the run (the summary covers the run up to then)"),
    ("130", "interrupted before the run started (everything started was stopped and removed)"),
];

/// The main command's live columns.
pub const MAIN_COLUMNS: &[(&str, &str)] = &[
    ("tps, p99_ms", "the workload's transactions per second and commit latency p99"),
    ("n_write (srv_commits)", "durable log_write_up_to calls; srv_commits when the binary hides InnoDB's symbols and commits are counted at the server layer"),
    ("n_flush", "redo flushes: calls of the redo flush function, else redo fsyncs counted in the kernel"),
    ("write/flush", "n_write per n_flush: the group-commit batching factor"),
    ("commits/flush", "the workload's commits per n_flush: exact whatever the probes can see"),
    ("redo_p99_us", "p99 latency of the redo log's fsync/fdatasync"),
    ("binlog_fsync", "fsync/fdatasync calls on binlog files"),
];

/// `commitscope trace`'s columns.
pub const TRACE_COLUMNS: &[(&str, &str)] = &[
    ("n_write", "calls of log_write_up_to (MySQL 5.6: wait == LOG_WAIT_ONE_GROUP); named commits in server-layer fallback mode"),
    ("durable", "the calls that asked for a flush to disk; - in fallback mode"),
    ("n_flush", "calls of the redo flush function; where it is inlined or absent, redo fsyncs from the kernel"),
    ("write/flush", "durable (or commits) per n_flush: the group-commit batching factor"),
    ("redo_fsync, redo_p50_us, redo_p99_us", "fsync/fdatasync calls on the redo log and their latency"),
    ("binlog_fsync, data_fsync", "the same for binlog files and data files"),
];

/// Plain-text form for clap's `after_long_help`.
fn text(title: &str, rows: &[(&str, &str)]) -> String {
    let mut s = format!("{title}:\n");
    for (k, v) in rows {
        s.push_str(&format!("  {k:<14} {v}\n"));
    }
    s
}

/// `commitscope --help`'s closing block.
pub fn main_after_help() -> String {
    format!(
        "{}\n{}",
        text("Columns", MAIN_COLUMNS),
        text("Exit codes", EXIT_CODES)
    )
}

/// `commitscope trace --help`'s closing block.
pub fn trace_after_help() -> String {
    format!(
        "{}\n{}",
        text("Columns", TRACE_COLUMNS),
        text("Exit codes", EXIT_CODES)
    )
}

/// A roff section of tagged paragraphs.
fn section(roff: &mut Roff, title: &str, rows: &[(&str, &str)]) {
    roff.control("SH", [title]);
    for (k, v) in rows {
        roff.control("TP", []).text([bold(*k)]).text([roman(*v)]);
    }
}

/// One page: clap_mangen's sections, then the columns and exit codes
/// (instead of its EXTRA section, which would run the tables together).
fn page(
    cmd: clap::Command,
    name: &str,
    columns: Option<&[(&str, &str)]>,
) -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .source(format!("commitscope {}", env!("CARGO_PKG_VERSION")))
        .date(env!("COMMITSCOPE_BUILD_DATE"))
        .manual("commitscope manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    let mut roff = Roff::default();
    if let Some(columns) = columns {
        section(&mut roff, "COLUMNS", columns);
    }
    section(&mut roff, "EXIT STATUS", EXIT_CODES);
    roff.control("SH", ["SEE ALSO"]).text([roman(
        "commitscope(1); the README (/usr/share/doc/commitscope) for the study, the probes and the benchmarks",
    )]);
    roff.to_writer(&mut out)?;
    Ok(out)
}

/// Writes commitscope.1 and commitscope-SUB.1 for every visible
/// subcommand into `dir`; returns the files.
pub fn write_pages(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let io = |path: &Path, source: std::io::Error| Error::Output {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut pages = vec![("commitscope".to_string(), cmd.clone(), Some(MAIN_COLUMNS))];
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("commitscope-{}", sub.get_name());
        let columns = (sub.get_name() == "trace").then_some(TRACE_COLUMNS);
        pages.push((name, sub.clone(), columns));
    }
    let mut written = Vec::new();
    for (name, cmd, columns) in pages {
        let path = dir.join(format!("{name}.1"));
        let bytes = page(cmd, &name, columns).map_err(|e| io(&path, e))?;
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(&bytes))
            .map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}
