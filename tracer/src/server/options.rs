//! `--server-option KEY=VALUE`: validated before anything starts, passed to
//! the managed server as `--KEY=VALUE`.
use std::{fmt, str::FromStr};

/// Options commitscope sets itself on a managed server: overriding them
/// would move the datadir or socket out of its private temp dir.
const OWNED: &[&str] = &[
    "datadir",
    "socket",
    "pid_file",
    "log_error",
    "tmpdir",
    "basedir",
    "user",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOption {
    pub key: String,
    pub value: String,
}

impl ServerOption {
    /// The server's command-line form.
    pub fn arg(&self) -> String {
        format!("--{}={}", self.key, self.value)
    }

    /// The variable name as `SHOW VARIABLES` spells it.
    pub fn variable(&self) -> String {
        self.key.replace('-', "_")
    }
}

impl fmt::Display for ServerOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

impl FromStr for ServerOption {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let Some((key, value)) = s.split_once('=') else {
            return Err(format!(
                "{s:?}: expected KEY=VALUE, e.g. innodb_flush_log_at_trx_commit=2"
            ));
        };
        let key = key.trim().trim_start_matches("--");
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err(format!(
                "{s:?}: the name must be letters, digits, '_', '-' or '.' (a server variable such as sync_binlog)"
            ));
        }
        if value.is_empty() || value.contains(['\n', '\0']) {
            return Err(format!("{s:?}: the value is empty or holds a newline"));
        }
        let norm = key.replace('-', "_");
        if OWNED.contains(&norm.as_str()) {
            return Err(format!(
                "{s:?}: commitscope sets {key} itself for the managed server (use --keep to keep its temp dir, or connect to your own server with --socket)"
            ));
        }
        Ok(ServerOption {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let o: ServerOption = "innodb_flush_log_at_trx_commit=2".parse().unwrap();
        assert_eq!(o.arg(), "--innodb_flush_log_at_trx_commit=2");
        let o: ServerOption = "log-bin=ON".parse().unwrap();
        assert_eq!(o.variable(), "log_bin");
        assert!("sync_binlog".parse::<ServerOption>().is_err());
        assert!("=1".parse::<ServerOption>().is_err());
        assert!("a b=1".parse::<ServerOption>().is_err());
        assert!("sync_binlog=".parse::<ServerOption>().is_err());
        assert!("datadir=/x".parse::<ServerOption>().is_err());
        assert!("pid-file=/x".parse::<ServerOption>().is_err());
    }
}
