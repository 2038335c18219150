//! The man pages, the completions and `--version` come from the CLI
//! definitions: the terminal and the manual must list the same options.
mod common;

use std::{collections::BTreeSet, path::Path};

use common::*;

/// Long options at the start of `--help`'s option lines.
fn help_options(args: &[&str]) -> BTreeSet<String> {
    let out = commitscope().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix('-')
                .filter(|r| !r.starts_with('-'))
                .map_or(l, |r| r.split_once(", ").map_or(l, |(_, long)| long));
            let name = l.strip_prefix("--")?;
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(name.len());
            Some(name[..end].to_string())
        })
        .collect()
}

/// Long options in the tag lines (after `.TP`) of a roff page.
fn man_options(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut opts = BTreeSet::new();
    for w in lines.windows(2) {
        if w[0] != ".TP" {
            continue;
        }
        let tag = w[1].replace("\\-", "-");
        for part in tag.split("\\fB--").skip(1) {
            let end = part
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(part.len());
            opts.insert(part[..end].to_string());
        }
    }
    opts
}

#[test]
fn help_and_man_pages_list_the_same_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = commitscope()
        .arg("manpages")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages = [
        ("commitscope", vec![]),
        ("commitscope-trace", vec!["trace"]),
        ("commitscope-sweep", vec!["sweep"]),
        ("commitscope-study", vec!["study"]),
        ("commitscope-workload", vec!["workload"]),
        ("commitscope-exporter", vec!["exporter"]),
        ("commitscope-probes", vec!["probes"]),
    ];
    for (page, args) in pages {
        let path = dir.path().join(format!("{page}.1"));
        let man = man_options(&path);
        let help = help_options(&args);
        assert!(help.len() >= 2, "{page}: {help:?}");
        assert_eq!(man, help, "{page}: man page vs --help");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(".SH \"EXIT STATUS\""), "{page}");
    }
    // The columns are in both the trace page and trace --help.
    let trace = std::fs::read_to_string(dir.path().join("commitscope-trace.1")).unwrap();
    let help = commitscope().args(["trace", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for col in [
        "n_write",
        "durable",
        "write/flush",
        "binlog_fsync, data_fsync",
    ] {
        assert!(trace.contains(col) && help.contains(col), "column {col}");
    }
}

#[test]
fn completions_and_version() {
    for (shell, marker) in [
        ("bash", "complete -F _commitscope"),
        ("zsh", "#compdef commitscope"),
        ("fish", "complete -c commitscope"),
    ] {
        let out = commitscope().args(["completions", shell]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(marker),
            "{shell}: {text:.200}"
        );
        assert!(text.contains("fsync-probe"), "{shell}: options completed");
    }
    let out = commitscope()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v = commitscope()
        .args(["--version", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{v}");
    assert_eq!(v["ebpf_sha256"].as_str().map(str::len), Some(64), "{v}");
    assert!(
        v["target"].as_str().is_some_and(|t| t.contains("linux")),
        "{v}"
    );
    assert!(
        v["build_date"].as_str().is_some_and(|d| d.len() == 10),
        "{v}"
    );
    let text = commitscope().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with(&format!("commitscope {}\n", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}
