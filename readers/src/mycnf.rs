//! The `[client]` section of `~/.my.cnf` / `--defaults-file`, as the mysql
//! client reads it: `key = value` lines, `#`/`;` comments, optional quotes,
//! and `!include FILE` / `!includedir DIR` (every `*.cnf` in it, in name
//! order). Hostile files are bounded: include depth, number of files read,
//! bytes per file; a cycle is an error, not a loop.
use std::{
    collections::HashMap,
    io::Read,
    path::{Path, PathBuf},
};

use crate::error::{Error, Result};

/// Include nesting allowed (a file that includes one that includes ...).
const MAX_DEPTH: usize = 10;
/// Option files read in all, counting a file each time it is included.
const MAX_FILES: usize = 256;
/// Bytes read of one option file; a larger one is refused.
const MAX_BYTES: u64 = 1 << 20;

/// One line of an option file, classified.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Group(&'a str),
    Include(&'a str),
    IncludeDir(&'a str),
    Option(&'a str, &'a str),
}

fn classify(raw: &str) -> Option<Line<'_>> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return None;
    }
    if let Some(group) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
        return Some(Line::Group(group.trim()));
    }
    if let Some(d) = line.strip_prefix("!includedir") {
        return Some(Line::IncludeDir(d.trim()));
    }
    if let Some(f) = line.strip_prefix("!include") {
        return Some(Line::Include(f.trim()));
    }
    let (k, v) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim()),
        None => (line, ""),
    };
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v);
    Some(Line::Option(k, v))
}

/// Keys of the `[client]` group of one file's text (dashes and
/// underscores are the same); includes are not followed.
pub fn client_section(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut in_client = false;
    for line in text.lines().filter_map(classify) {
        match line {
            Line::Group(g) => in_client = g.eq_ignore_ascii_case("client"),
            Line::Option(k, v) if in_client => {
                out.insert(k.replace('_', "-").to_ascii_lowercase(), v.to_string());
            }
            _ => {}
        }
    }
    out
}

/// Reads a defaults file and what it includes; `required` makes a missing
/// top-level file an error.
pub fn read(path: &Path, required: bool) -> Result<HashMap<String, String>> {
    if !required && std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(HashMap::new());
    }
    let mut r = Reader::default();
    r.file(path, 0)?;
    Ok(r.out)
}

#[derive(Default)]
struct Reader {
    out: HashMap<String, String>,
    /// The files being read, outermost first: an include of one of them
    /// is a cycle.
    stack: Vec<PathBuf>,
    files: usize,
}

fn config_err(path: &Path, detail: impl Into<String>) -> Error {
    Error::Config {
        path: path.display().to_string(),
        detail: detail.into(),
    }
}

/// At most [`MAX_BYTES`] of a file, as text.
fn read_capped(path: &Path) -> Result<String> {
    let f = std::fs::File::open(path).map_err(|e| config_err(path, e.to_string()))?;
    let mut buf = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| config_err(path, e.to_string()))?;
    if buf.len() as u64 > MAX_BYTES {
        return Err(config_err(path, "larger than 1 MiB: not an option file"));
    }
    String::from_utf8(buf).map_err(|_| config_err(path, "not UTF-8 text"))
}

impl Reader {
    fn file(&mut self, path: &Path, depth: usize) -> Result<()> {
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(config_err(
                path,
                format!("more than {MAX_FILES} option files read (!include)"),
            ));
        }
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if self.stack.contains(&canon) {
            let chain: Vec<String> = self
                .stack
                .iter()
                .chain([&canon])
                .map(|p| p.display().to_string())
                .collect();
            return Err(config_err(
                path,
                format!("!include cycle: {}", chain.join(" -> ")),
            ));
        }
        let text = read_capped(path)?;
        self.stack.push(canon);
        let dir = path.parent().unwrap_or(Path::new("/")).to_owned();
        let mut in_client = false;
        for line in text.lines().filter_map(classify) {
            match line {
                Line::Group(g) => in_client = g.eq_ignore_ascii_case("client"),
                Line::Option(k, v) if in_client => {
                    self.out
                        .insert(k.replace('_', "-").to_ascii_lowercase(), v.to_string());
                }
                Line::Option(..) => {}
                Line::Include(f) => self.include(&dir.join(f), path, depth)?,
                Line::IncludeDir(d) => {
                    let d = dir.join(d);
                    let Ok(entries) = std::fs::read_dir(&d) else {
                        continue;
                    };
                    let mut files: Vec<PathBuf> = entries
                        .filter_map(|e| Some(e.ok()?.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "cnf"))
                        .collect();
                    files.sort();
                    for f in files {
                        self.include(&f, path, depth)?;
                    }
                }
            }
        }
        self.stack.pop();
        Ok(())
    }

    /// Follows one include of `from`: regular files only (a FIFO or a
    /// device could block or never end), nothing under /proc, /sys, /dev.
    fn include(&mut self, target: &Path, from: &Path, depth: usize) -> Result<()> {
        if depth + 1 > MAX_DEPTH {
            return Err(config_err(
                from,
                format!("!include nested deeper than {MAX_DEPTH}"),
            ));
        }
        let special = ["/proc", "/sys", "/dev"]
            .iter()
            .any(|d| target.starts_with(d));
        let regular = std::fs::metadata(target).is_ok_and(|m| m.is_file());
        if special || !regular {
            return Ok(());
        }
        self.file(target, depth + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_client_group() {
        let m = client_section(
            "[mysqld]\nuser=mysql\n[client]\n# c\nuser = app\npassword=\"s3 cret\"\nsocket=/tmp/s\n[mysql]\nuser=x\n",
        );
        assert_eq!(m.get("user").map(String::as_str), Some("app"));
        assert_eq!(m.get("password").map(String::as_str), Some("s3 cret"));
        assert_eq!(m.get("socket").map(String::as_str), Some("/tmp/s"));
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn includes_are_followed_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(d.path().join(name), text).unwrap();
        std::fs::create_dir(d.path().join("conf.d")).unwrap();
        w(
            "my.cnf",
            "[client]\nuser=a\n!include extra.cnf\n!includedir conf.d\n",
        );
        w("extra.cnf", "[client]\nsocket=/s\n");
        w("conf.d/b.cnf", "[client]\nuser=b\n");
        w("conf.d/ignored.txt", "[client]\nuser=c\n");
        let m = read(&d.path().join("my.cnf"), true).unwrap();
        assert_eq!(m.get("user").map(String::as_str), Some("b"));
        assert_eq!(m.get("socket").map(String::as_str), Some("/s"));

        // A cycle is one error naming it, not a loop.
        w("x.cnf", "!include y.cnf\n");
        w("y.cnf", "!include x.cnf\n");
        let e = read(&d.path().join("x.cnf"), true).unwrap_err().to_string();
        assert!(
            e.contains("!include cycle: ") && e.contains("x.cnf -> "),
            "{e}"
        );
        // A file including itself twice per level is bounded too.
        w("self.cnf", "!include self.cnf\n");
        assert!(read(&d.path().join("self.cnf"), true).is_err());
        // Devices are not read; /dev/null as the file itself is empty.
        w("dev.cnf", "!include /dev/zero\n[client]\nuser=z\n");
        let m = read(&d.path().join("dev.cnf"), true).unwrap();
        assert_eq!(m.get("user").map(String::as_str), Some("z"));
        assert!(read(Path::new("/dev/null"), true).unwrap().is_empty());
        let e = read(Path::new("/dev/zero"), true).unwrap_err().to_string();
        assert!(e.contains("larger than 1 MiB"), "{e}");
        assert!(read(&d.path().join("missing.cnf"), false)
            .unwrap()
            .is_empty());
        assert!(read(&d.path().join("missing.cnf"), true).is_err());
    }

    #[test]
    fn a_wide_include_tree_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        // Each level includes the next one 8 times: 8^9 reads unbounded.
        for i in 0..9 {
            let next = format!("!include l{}.cnf\n", i + 1).repeat(8);
            std::fs::write(d.path().join(format!("l{i}.cnf")), next).unwrap();
        }
        std::fs::write(d.path().join("l9.cnf"), "[client]\nuser=x\n").unwrap();
        let e = read(&d.path().join("l0.cnf"), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 256 option files"), "{e}");
    }
}
