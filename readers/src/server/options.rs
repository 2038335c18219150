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
    /// The server's command-line form. `log_bin` takes a file name, so
    /// `--log-bin=OFF` would turn the binlog *on* into a file named OFF:
    /// its on/off spellings become `--log-bin` / `--skip-log-bin`.
    pub fn arg(&self) -> String {
        if self.variable() == "log_bin" {
            match self.value.to_ascii_uppercase().as_str() {
                "ON" | "1" | "TRUE" => return "--log-bin".into(),
                "OFF" | "0" | "FALSE" => return "--skip-log-bin".into(),
                _ => {}
            }
        }
        format!("--{}={}", self.key, self.value)
    }

    /// The value as an SQL literal for `SET GLOBAL`: numbers bare (a quoted
    /// number is "Incorrect argument type" to an integer variable), sizes
    /// with a K/M/G/T suffix — which only the command line understands —
    /// as bytes, anything else quoted.
    pub fn sql_value(&self) -> String {
        let v = self.value.trim();
        if v.parse::<i64>().is_ok() || v.parse::<f64>().is_ok_and(f64::is_finite) {
            return v.to_string();
        }
        // At the last character, not byte: a value may end in any UTF-8
        // (found by the server_option fuzz target).
        let (digits, unit) = v.split_at(v.char_indices().last().map_or(0, |(i, _)| i));
        let shift = match unit.to_ascii_uppercase().as_str() {
            "K" => Some(10),
            "M" => Some(20),
            "G" => Some(30),
            "T" => Some(40),
            _ => None,
        };
        if let (Some(shift), Ok(n)) = (shift, digits.parse::<u64>()) {
            if let Some(b) = n.checked_mul(1u64 << shift) {
                return b.to_string();
            }
        }
        format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''"))
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
        // An empty value is a value: MySQL's `secure_file_priv=` lifts
        // the restriction, `init_connect=` clears a string.
        if value.contains(['\n', '\0']) {
            return Err(format!("{s:?}: the value holds a newline or a NUL"));
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

/// `--server-option KEY=V1,V2,...` of `sweep`: one axis of the product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionAxis {
    pub key: String,
    pub values: Vec<String>,
}

impl OptionAxis {
    /// Splits the value at commas (a value that itself holds a comma, such
    /// as an sql_mode list, cannot be swept).
    pub fn from_option(o: &ServerOption) -> Result<OptionAxis, String> {
        let values: Vec<String> = o.value.split(',').map(|v| v.trim().to_string()).collect();
        // `KEY=` alone is the one empty value, not an empty list item.
        if values.len() > 1 && values.iter().any(String::is_empty) {
            return Err(format!(
                "{o}: an empty value in the list; expected KEY=V1,V2,... e.g. innodb_flush_log_at_trx_commit=1,0,2"
            ));
        }
        if let Some(d) = values
            .iter()
            .enumerate()
            .find(|(i, v)| values[..*i].contains(v))
        {
            return Err(format!("{o}: {} is listed twice", d.1));
        }
        Ok(OptionAxis {
            key: o.key.clone(),
            values,
        })
    }

    pub fn option(&self, i: usize) -> ServerOption {
        ServerOption {
            key: self.key.clone(),
            value: self.values[i].clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bin_switches_and_sql_literals() {
        let o = |s: &str| s.parse::<ServerOption>().unwrap();
        assert_eq!(o("log_bin=OFF").arg(), "--skip-log-bin");
        assert_eq!(o("log-bin=on").arg(), "--log-bin");
        assert_eq!(o("log_bin=mysql-bin").arg(), "--log_bin=mysql-bin");
        assert_eq!(o("sync_binlog=1").sql_value(), "1");
        assert_eq!(o("innodb_buffer_pool_size=1G").sql_value(), "1073741824");
        assert_eq!(o("long_query_time=0.5").sql_value(), "0.5");
        assert_eq!(o("binlog_format=ROW").sql_value(), "'ROW'");
        assert_eq!(o("x=it's").sql_value(), "'it''s'");
        // Fuzz regression (fuzz/seeds/server_option/crash-3fdad196...):
        // a value ending in a multi-byte character panicked.
        assert_eq!(
            o("innodb_flush_method=Onsh_\u{651}\u{326}").sql_value(),
            "'Onsh_\u{651}\u{326}'"
        );
        assert_eq!(o("x=1\u{e9}").sql_value(), "'1\u{e9}'");
    }

    #[test]
    fn axes_split_at_commas() {
        let o: ServerOption = "innodb_flush_log_at_trx_commit=1, 0,2".parse().unwrap();
        let a = OptionAxis::from_option(&o).unwrap();
        assert_eq!(a.values, ["1", "0", "2"]);
        assert_eq!(a.option(1).to_string(), "innodb_flush_log_at_trx_commit=0");
        let bad = |s: &str| OptionAxis::from_option(&s.parse().unwrap()).unwrap_err();
        assert!(bad("sync_binlog=0,,1").contains("empty"));
        assert!(bad("sync_binlog=0,1,0").contains("twice"));
    }

    #[test]
    fn parses_and_rejects() {
        let o: ServerOption = "innodb_flush_log_at_trx_commit=2".parse().unwrap();
        assert_eq!(o.arg(), "--innodb_flush_log_at_trx_commit=2");
        let o: ServerOption = "log-bin=ON".parse().unwrap();
        assert_eq!(o.variable(), "log_bin");
        assert!("sync_binlog".parse::<ServerOption>().is_err());
        assert!("=1".parse::<ServerOption>().is_err());
        assert!("a b=1".parse::<ServerOption>().is_err());
        let empty: ServerOption = "secure-file-priv=".parse().unwrap();
        assert_eq!(empty.arg(), "--secure-file-priv=");
        assert_eq!(empty.sql_value(), "''");
        assert_eq!(OptionAxis::from_option(&empty).unwrap().values, [""]);
        assert!("x=a\nb".parse::<ServerOption>().is_err());
        assert!("datadir=/x".parse::<ServerOption>().is_err());
        assert!("pid-file=/x".parse::<ServerOption>().is_err());
    }
}
