//! The man page generator (`cargo xtask dist` runs `commitscope manpages
//! DIR`) and the completions, both from the CLI definitions; the texts the
//! pages share with `--help` and `docs/` are `help_text`'s: one source, so
//! the terminal, the manual and the docs never disagree.
use std::{
    io::Write,
    path::{Path, PathBuf},
};

use clap::CommandFactory;
use roff::{bold, roman, Roff};

use crate::{
    cli::{Cli, Shell},
    error::Error,
    help_text::{exit_codes, MAIN_COLUMNS, TRACE_COLUMNS},
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
    let command = name.strip_prefix("commitscope-").unwrap_or(name);
    section(&mut roff, "EXIT STATUS", exit_codes(command));
    roff.control("SH", ["SEE ALSO"]).text([roman(
        "commitscope(1); /usr/share/doc/commitscope: the README and docs/ (each command, where the probes go, what they cost)",
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
