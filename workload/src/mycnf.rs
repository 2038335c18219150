//! The `[client]` section of `~/.my.cnf` / `--defaults-file`, as the mysql
//! client reads it: `key = value` lines, `#`/`;` comments, optional quotes.
use std::{collections::HashMap, path::Path};

use crate::error::{Error, Result};

/// Keys of the `[client]` group (dashes and underscores are the same).
pub fn client_section(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut in_client = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(group) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_client = group.trim().eq_ignore_ascii_case("client");
            continue;
        }
        if !in_client {
            continue;
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
        out.insert(k.replace('_', "-").to_ascii_lowercase(), v.to_string());
    }
    out
}

/// Reads a defaults file; `required` makes a missing file an error.
pub fn read(path: &Path, required: bool) -> Result<HashMap<String, String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(client_section(&t)),
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
        Err(e) => Err(Error::Config {
            path: path.display().to_string(),
            detail: e.to_string(),
        }),
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
}
