//! The README and `docs/` as a reader meets them: every link leads
//! somewhere, every `commitscope` example is one the CLI accepts, and the
//! tables that `--help` and the man pages also print are the same copy.
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use commitscope::{cli::Cli, help_text as manual};
use testkit::docs;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn pages() -> Vec<(PathBuf, String)> {
    let pages = docs::read_pages(&root());
    assert!(pages.len() > 5, "README.md and docs/*.md: {pages:?}");
    pages
}

fn name(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn the_readme_is_a_front_page() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the rest goes to docs/"
    );
    // Its two commands, as .ci/run and a newcomer run them.
    assert!(text.contains("cargo xtask run -- --threads 100"));
    assert!(text.contains("cargo xtask test "));
}

#[test]
fn every_link_points_somewhere() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        for link in docs::links(&text) {
            let target = link.text.as_str();
            if target.starts_with("https://") || target.starts_with("http://") {
                continue;
            }
            seen += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let what = format!("{}:{}: ({target})", name(&page), link.line);
            let Ok(body) = std::fs::read_to_string(&file).or_else(|e| {
                if file.is_dir() {
                    Ok(String::new())
                } else {
                    Err(e)
                }
            }) else {
                bad.push(format!("{what}: no such file"));
                continue;
            };
            if !anchor.is_empty() && !docs::anchors(&body).iter().any(|a| a == anchor) {
                bad.push(format!("{what}: no heading with that anchor"));
            }
        }
    }
    assert!(seen > 20, "only {seen} links found: is the reader broken?");
    assert!(
        bad.is_empty(),
        "links that point nowhere:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_commitscope_example_parses() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        for (line, words) in docs::commands(&text, "commitscope") {
            seen += 1;
            if let Err(e) = Cli::try_parse_from(&words) {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                bad.push(format!(
                    "{}:{line}: {}: {first}",
                    name(&page),
                    words.join(" ")
                ));
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} examples found: is the reader broken?"
    );
    assert!(
        bad.is_empty(),
        "examples the CLI refuses:\n{}",
        bad.join("\n")
    );
}

/// The long options a command line's subcommand knows (the main
/// command's when it names none).
fn known_flags(words: &str) -> (String, Vec<String>) {
    let root = Cli::command();
    let sub = words
        .split_whitespace()
        .nth(1)
        .and_then(|w| root.find_subcommand(w).cloned());
    let cmd = sub.unwrap_or(root);
    let mut flags: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    flags.extend(["help", "version"].map(String::from));
    (cmd.get_name().to_string(), flags)
}

#[test]
fn every_flag_in_running_text_is_known() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        for span in docs::inline_commands(&text, "commitscope") {
            let (cmd, known) = known_flags(&span.text);
            for flag in docs::long_flags(&span.text) {
                seen += 1;
                if !known.contains(&flag) {
                    bad.push(format!(
                        "{}:{}: `{}`: {cmd} has no --{flag}",
                        name(&page),
                        span.line,
                        span.text
                    ));
                }
            }
        }
    }
    assert!(seen > 10, "only {seen} flags found: is the reader broken?");
    assert!(
        bad.is_empty(),
        "flags --help does not know:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_tables_help_prints_are_the_pages_copies() {
    let own = |rows: &[(&str, &str)]| -> Vec<(String, String)> {
        rows.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    // Every command's exit codes, one table: (command, code, meaning).
    let codes: Vec<(String, String)> = commitscope::cli::Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_string())
        .flat_map(|name| {
            manual::exit_codes(&name)
                .iter()
                .map(move |(code, what)| (format!("{name} {code}"), what.to_string()))
        })
        .collect();
    type Table<'a> = (&'a str, (&'a str, &'a str), Vec<(String, String)>);
    let tables: [Table; 6] = [
        (
            "TRACE_COLUMNS",
            ("column", "meaning"),
            own(manual::TRACE_COLUMNS),
        ),
        (
            "MAIN_COLUMNS",
            ("column", "meaning"),
            own(manual::MAIN_COLUMNS),
        ),
        ("EXIT_CODES", ("code", "meaning"), own(manual::EXIT_CODES)),
        ("COMMAND_EXIT_CODES", ("command and code", "meaning"), codes),
        (
            "CP_SHORT_NAMES",
            ("cp_top", "stage"),
            commitscope::commit_path::short_names(),
        ),
        (
            "CP_CSV_SHARES",
            ("CSV column", "meaning"),
            commitscope::commit_path::csv_share_columns(),
        ),
    ];
    let pages = pages();
    for (id, head, rows) in tables {
        let start = format!("<!-- generated: {id} ");
        let copies: Vec<_> = pages
            .iter()
            .filter_map(|(p, text)| {
                let a = text.find(&start)?;
                let body = &text[a..];
                let body = &body[body.find('\n')? + 1..];
                let end = body.find("<!-- end generated -->")?;
                Some((p, &body[..end]))
            })
            .collect();
        assert!(!copies.is_empty(), "no page carries {id}");
        let rows: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let want = manual::markdown(head, &rows);
        for (p, got) in copies {
            assert_eq!(
                got,
                want,
                "{}: the copy of {id} differs from tracer/src/help_text.rs; paste this:\n{want}",
                name(p)
            );
        }
    }
}

/// The lines of the pages' fenced code blocks, with their line numbers.
fn block_lines(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            inside = !inside;
        } else if inside {
            out.push((i + 1, l));
        }
    }
    out
}

/// Every untagged fenced block is a sample of the tool's output, marked
/// with the command `cargo xtask samples` reruns to regenerate it (one
/// the CLI takes); any other block names its language (`sh`, `text` ...).
#[test]
fn every_output_block_names_the_command_that_regenerates_it() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        let lines: Vec<&str> = text.lines().collect();
        let mut inside = false;
        for (i, l) in lines.iter().enumerate() {
            if !l.starts_with("```") {
                continue;
            }
            inside = !inside;
            if !inside || *l != "```" {
                continue;
            }
            seen += 1;
            let above = if i > 0 { lines[i - 1] } else { "" };
            let Some(args) = above
                .strip_prefix("<!-- sample: ")
                .and_then(|r| r.strip_suffix(" -->"))
            else {
                bad.push(format!(
                    "{}:{}: an untagged block without `<!-- sample: ARGS -->` above it (tag it ```text if it is no output)",
                    name(&page),
                    i + 1
                ));
                continue;
            };
            let words =
                std::iter::once("commitscope").chain(args.split_whitespace().map(|w| match w {
                    "PID" => "1",
                    "FIXTURE" => "/usr/sbin/mariadbd",
                    w => w,
                }));
            if let Err(e) = Cli::try_parse_from(words) {
                let e = e.to_string();
                bad.push(format!(
                    "{}:{}: sample command: {}",
                    name(&page),
                    i + 1,
                    e.lines().next().unwrap_or_default()
                ));
            }
        }
    }
    assert!(
        seen >= 10,
        "only {seen} output blocks found: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every sample of the live views in the docs has a header the binary
/// prints (with some combination of its optional columns), and the rows
/// under it as many cells: a column renamed, added or dropped in the code
/// fails here until the samples are regenerated.
#[test]
fn every_sample_header_is_one_the_binary_prints() {
    let norm = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let known: Vec<String> = commitscope::report::live::headers()
        .into_iter()
        .chain(commitscope::report::human::headers())
        .map(|h| norm(&h))
        .collect();
    let mut bad = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        let lines = block_lines(&text);
        for (k, &(n, l)) in lines.iter().enumerate() {
            if !l.starts_with("time ") {
                continue;
            }
            seen += 1;
            let header = norm(l);
            if !known.contains(&header) {
                bad.push(format!("{}:{n}: no such header: {header}", name(&page)));
                continue;
            }
            let width = header.split(' ').count();
            // The rows under it: lines that begin with a clock.
            for &(m, row) in lines[k + 1..]
                .iter()
                .take_while(|(m, r)| *m > n && r.as_bytes().get(2) == Some(&b':'))
            {
                let cells = row.split_whitespace().count();
                if cells != width {
                    bad.push(format!(
                        "{}:{m}: {cells} cells under a header of {width}",
                        name(&page)
                    ));
                }
            }
        }
    }
    assert!(
        seen >= 4,
        "only {seen} sample headers found: is the reader broken?"
    );
    assert!(bad.is_empty(), "samples that differ from the binary's output (rerun the command above each and paste it):\n{}", bad.join("\n"));
}
