//! What the probes ask of a server binary beyond its family's row
//! (`crate::family`): its version, by running it; the server-layer
//! functions every version exports; C++ names made readable.
use std::{path::Path, process::Command, time::Duration};

use crate::family::{parse_version_output, ServerId};

/// Asks the binary itself (`mysqld --version`), only for files named like a
/// server: never run an arbitrary program to learn its version.
pub fn detect(exe: &Path) -> Option<ServerId> {
    detect_or_why(exe).ok()
}

/// Why [`detect_or_why`] found no version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoVersion {
    /// The binary could not start here: the loader's own line (a library
    /// missing) or the exec error.
    CannotRun(String),
    /// It ran and said something else, or nothing.
    NotAServer(String),
}

/// [`detect`], or why not in one line.
pub fn detect_or_why(exe: &Path) -> Result<ServerId, NoVersion> {
    use NoVersion::{CannotRun, NotAServer};
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !(name.starts_with("mysqld") || name.starts_with("mariadbd")) {
        return Err(NotAServer(
            "not named mysqld or mariadbd: not run to ask its version".into(),
        ));
    }
    let mut child = Command::new(exe)
        .arg("--no-defaults")
        .arg("--version")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| CannotRun(e.to_string()))?;
    // A server binary answers --version at once; give up after 5 s.
    for _ in 0..50 {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(NotAServer("`--version` did not answer in 5 s".into()));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| NotAServer(format!("cannot read its answer: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(id) = parse_version_output(&text) {
        return Ok(id);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let said = err
        .lines()
        .chain(text.lines())
        .map(str::trim)
        .find(|l| !l.is_empty());
    Err(match said {
        // The dynamic loader's exit when a library is missing.
        Some(l) if out.status.code() == Some(127) => CannotRun(l.to_string()),
        Some(l) => NotAServer(format!("`--version` exited with {}: {l}", out.status)),
        None => NotAServer(format!(
            "`--version` printed no MySQL/MariaDB version ({})",
            out.status
        )),
    })
}

/// Exported server-layer commit functions, present even in stripped
/// MariaDB whose InnoDB symbols are hidden. One call per commit.
pub const FALLBACKS: &[&str] = &["_Z19ha_commit_one_phaseP3THDb", "_Z12trans_commitP3THD"];

/// Where the commits that skip `ha_commit_one_phase` go: with the binlog
/// on, a transaction commits in two phases through the binlog's
/// `log_and_order` (MariaDB) / `commit` (MySQL) instead. Probed beside
/// `ha_commit_one_phase`, so every commit is seen exactly once.
pub const FALLBACK_TWO_PHASE: &[&str] = &[
    "_ZN13MYSQL_BIN_LOG13log_and_orderEP3THDybbb",
    "_ZN13MYSQL_BIN_LOG6commitEP3THDb",
];

/// The server layer's commit function: a commit's span for
/// `--commit-path`, from the commit's entry to its return, autocommit
/// statements included. It also ends statements inside a transaction;
/// the kernel side keeps only the calls that wrote (see `CommitSpan`).
/// MySQL 8+: (THD*, bool all, bool ignore_global_read_lock); MariaDB:
/// (THD*, bool all).
pub const COMMIT_SPAN: &[&str] = &["_Z15ha_commit_transP3THDbb", "_Z15ha_commit_transP3THDb"];

/// A mangled C++ name demangled, or None. Not `to_string()`: the
/// demangler's `Display` fails on some names that parse, and `to_string`
/// turns that into a panic (found by the server_option fuzz target).
pub fn demangle(mangled: &str) -> Option<String> {
    cpp_demangle::Symbol::new(mangled.as_bytes())
        .ok()?
        .demangle(&cpp_demangle::DemangleOptions::default())
        .ok()
}

/// Human name of a fallback symbol.
pub fn short_name(mangled: &str) -> String {
    demangle(mangled)
        .map(|d| d.split('(').next().unwrap_or(&d).to_string())
        .unwrap_or_else(|| mangled.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_parse_but_do_not_print_are_left_mangled() {
        // Fuzz regression (fuzz/seeds/server_option/crash-992b8432...).
        let odd = "_Z15l_Z15logT_writritremzsynssogT_writritremzsynssct";
        assert_eq!(short_name(odd), odd);
        assert_eq!(short_name("_ZN5log_t5flushEm"), "log_t::flush");
        assert_eq!(short_name(FALLBACKS[0]), "ha_commit_one_phase");
    }
}
