//! A lint: no test changes what every thread of its process shares.
//!
//! `cargo test` runs a binary's tests as threads of one process, so a
//! test that calls `std::env::set_var` changes the environment of every
//! test running beside it — and of every program those spawn (issue 30:
//! one test's `DEBUGINFOD_URLS` reached another test's debuginfod, which
//! then answered 503 instead of 404). The same holds for `remove_var` and
//! `set_current_dir`. Tests give each spawned program its own settings
//! (`Command::env`, `current_dir`) instead; this check fails on any of
//! those calls in test code: the integration tests (`*/tests/`), the
//! shared test kit, and every `#[cfg(test)]` part of a source file.
use std::path::{Path, PathBuf};

/// The calls that change process-wide state.
const FORBIDDEN: &[&str] = &["set_var(", "remove_var(", "set_current_dir("];

/// One forbidden call: where, and which line.
#[derive(Debug, PartialEq, Eq)]
pub struct Finding {
    pub file: PathBuf,
    pub line: usize,
    pub text: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}",
            self.file.display(),
            self.line,
            self.text.trim()
        )
    }
}

/// The forbidden calls in the test code of `text`: all of it when
/// `whole_file` (an integration test, the test kit), else what follows
/// the first `#[cfg(test)]` (by the crate's convention the test module
/// closes a file). Comment lines do not count.
pub fn findings_in(file: &Path, text: &str, whole_file: bool) -> Vec<Finding> {
    let mut in_tests = whole_file;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            in_tests = true;
        }
        if !in_tests || code.starts_with("//") {
            continue;
        }
        if FORBIDDEN.iter().any(|f| code.contains(f)) {
            out.push(Finding {
                file: file.to_owned(),
                line: i + 1,
                text: line.to_string(),
            });
        }
    }
    out
}

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target" && name != ".git" {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every forbidden call in the workspace's test code.
pub fn check(root: &Path) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for top in [
        "readers",
        "tracer",
        "workload",
        "testkit",
        "xtask",
        "tracer-ebpf",
        "fuzz",
    ] {
        rust_files(&root.join(top), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        let whole =
            rel.starts_with("testkit") || rel.components().any(|c| c.as_os_str() == "tests");
        let text = std::fs::read_to_string(f)?;
        found.extend(findings_in(rel, &text, whole));
    }
    if found.is_empty() {
        return Ok(());
    }
    for f in &found {
        eprintln!("xtask: lint: {f}");
    }
    anyhow::bail!(
        "{} call(s) in test code change the environment or working directory every test thread shares: give the spawned program its own (Command::env, Command::current_dir) or pass the setting as an argument",
        found.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_calls_in_test_code_only() {
        // Spelled at run time: this file's own tests hold no such call.
        let call = |name: &str, arg: &str| format!("std::env::{name}({arg})");
        let src = format!(
            "fn f() {{ {}; }}\n#[cfg(test)]\nmod tests {{\n// {} in a comment\nfn t() {{ {}; }}\nfn u() {{ {}.unwrap(); }}\n}}\n",
            call("set_var", "\"A\", \"1\""),
            call("remove_var", "\"A\""),
            call("remove_var", "\"A\""),
            call("set_current_dir", "\"/\""),
        );
        let got = findings_in(Path::new("x.rs"), &src, false);
        assert_eq!(
            got.iter().map(|f| f.line).collect::<Vec<_>>(),
            [5, 6],
            "{got:?}"
        );
        let whole = findings_in(Path::new("tests/x.rs"), &src, true);
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert!(whole[0].to_string().starts_with("tests/x.rs:1: fn f()"));
    }

    #[test]
    fn the_workspace_is_clean() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        check(root).unwrap();
    }
}
