//! Connection options resolved as the mysql client does it: flags, then
//! MYSQL_PWD, then the `[client]` group of `--defaults-file` or
//! `~/.my.cnf`, then defaults (local socket). `--dsn` gives all at once.
use std::path::PathBuf;

use clap::Args;
use mysql_async::{Conn, Opts, OptsBuilder};

use readers::mycnf;

use crate::error::{Error, Result};

/// Debian's and most distributions' default server socket.
pub const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";

#[derive(Clone, Debug, Default, Args)]
pub struct ConnArgs {
    /// Unix socket of the server.
    #[arg(long, short = 'S', value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Server host (TCP unless "localhost").
    #[arg(long, short = 'h')]
    pub host: Option<String>,
    /// Server TCP port.
    #[arg(long, short = 'P')]
    pub port: Option<u16>,
    /// User name.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Password (else MYSQL_PWD, else ~/.my.cnf).
    #[arg(long, short = 'p')]
    pub password: Option<String>,
    /// Read [client] options from this file instead of ~/.my.cnf.
    #[arg(long, value_name = "FILE")]
    pub defaults_file: Option<PathBuf>,
    /// mysql://user:pass@host:port/ (overrides the options above).
    #[arg(long)]
    pub dsn: Option<String>,
}

/// Where we connect, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub socket: Option<String>,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
}

impl Endpoint {
    /// "socket /run/mysqld/mysqld.sock" or "host:port", for messages.
    pub fn describe(&self) -> String {
        match &self.socket {
            Some(s) => format!("socket {s}"),
            None => format!("{}:{}", self.host, self.port),
        }
    }

    /// True when the server is on this machine (tracing is possible).
    pub fn is_local(&self) -> bool {
        self.socket.is_some() || matches!(self.host.as_str(), "localhost" | "127.0.0.1" | "::1")
    }

    pub fn opts(&self, db: Option<&str>) -> Opts {
        let mut b = OptsBuilder::default()
            .user(Some(self.user.clone()))
            .pass(self.password.clone())
            .db_name(db.map(str::to_string))
            .stmt_cache_size(16)
            .prefer_socket(false);
        b = match &self.socket {
            Some(s) => b.socket(Some(s.clone())),
            None => b.ip_or_hostname(self.host.clone()).tcp_port(self.port),
        };
        Opts::from(b)
    }
}

fn login_name() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "root".into())
}

impl ConnArgs {
    /// True when any option names a server (else a managed one may be used).
    pub fn any_given(&self) -> bool {
        self.socket.is_some()
            || self.host.is_some()
            || self.port.is_some()
            || self.dsn.is_some()
            || self.defaults_file.is_some()
    }

    /// Says once per process, as the mysql client does, that a password
    /// on the command line is visible to other users (`ps`, shell history).
    fn warn_password_on_command_line(&self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        let in_dsn = self.dsn.as_deref().and_then(dsn_password).is_some();
        if self.password.is_some() || in_dsn {
            ONCE.call_once(|| {
                eprintln!(
                    "commitscope: [Warning] Using a password on the command line interface can be insecure."
                )
            });
        }
    }

    pub fn resolve(&self) -> Result<Endpoint> {
        self.warn_password_on_command_line();
        if let Some(dsn) = &self.dsn {
            // The parser's message may quote the URL: say what is wrong
            // without it (it may hold a password).
            let o = Opts::from_url(dsn).map_err(|e| Error::BadInput {
                what: "--dsn",
                detail: format!(
                    "{} (expected mysql://user:pass@host:port/)",
                    redact(&e.to_string(), dsn)
                ),
            })?;
            return Ok(Endpoint {
                socket: o.socket().map(str::to_string),
                host: o.ip_or_hostname().to_string(),
                port: o.tcp_port(),
                user: o.user().map(str::to_string).unwrap_or_else(login_name),
                password: o.pass().map(str::to_string),
            });
        }
        let cnf = match &self.defaults_file {
            Some(p) => mycnf::read(p, true)?,
            None => match std::env::var_os("HOME") {
                Some(h) => mycnf::read(&PathBuf::from(h).join(".my.cnf"), false)?,
                None => Default::default(),
            },
        };
        let get = |k: &str| cnf.get(k).cloned();
        let host = self.host.clone().or_else(|| get("host"));
        let port = match self.port {
            Some(p) => Some(p),
            None => get("port")
                .map(|p| {
                    p.parse::<u16>().map_err(|_| Error::BadInput {
                        what: "port in the defaults file",
                        detail: p.clone(),
                    })
                })
                .transpose()?,
        };
        let socket = self
            .socket
            .as_ref()
            .map(|s| s.display().to_string())
            .or_else(|| get("socket"));
        let password = self
            .password
            .clone()
            .or_else(|| std::env::var("MYSQL_PWD").ok())
            .or_else(|| get("password"));
        let user = self
            .user
            .clone()
            .or_else(|| get("user"))
            .unwrap_or_else(login_name);
        // As the mysql client: "localhost" (or no host) means the socket.
        let local = host.as_deref().is_none_or(|h| h == "localhost");
        let socket = if local && (socket.is_some() || port.is_none()) {
            Some(socket.unwrap_or_else(|| DEFAULT_SOCKET.to_string()))
        } else {
            None
        };
        Ok(Endpoint {
            socket,
            host: host.unwrap_or_else(|| "localhost".into()),
            port: port.unwrap_or(3306),
            user,
            password,
        })
    }
}

/// The password of a `mysql://user:pass@host/` URL, also of a malformed
/// one (`mysql//user:pass@host`): what must never be printed back.
fn dsn_password(dsn: &str) -> Option<&str> {
    let head = match dsn.split_once("://") {
        Some((_, rest)) => rest.split(['/', '?']).next().unwrap_or(""),
        None => dsn,
    };
    let (userinfo, _) = head.rsplit_once('@')?;
    let user = userinfo.rsplit('/').next().unwrap_or(userinfo);
    let (_, pass) = user.split_once(':')?;
    (!pass.is_empty()).then_some(pass)
}

/// Where [`dsn_password`] stands in `dsn`, as byte offsets: for hiding
/// it in place (the process's own argv).
pub fn dsn_password_span(dsn: &str) -> Option<std::ops::Range<usize>> {
    let pass = dsn_password(dsn)?;
    // A subslice of `dsn`: its offset is the distance of the pointers.
    let start = pass.as_ptr() as usize - dsn.as_ptr() as usize;
    Some(start..start + pass.len())
}

/// `text` with the DSN, and any password in it, replaced.
fn redact(text: &str, dsn: &str) -> String {
    let out = text.replace(dsn, "<dsn>");
    match dsn_password(dsn) {
        Some(pass) => out.replace(pass, "<password>"),
        None => out,
    }
}

/// The same endpoint for the blocking client the workers use.
pub fn blocking_opts(ep: &Endpoint, db: Option<&str>) -> mysql::Opts {
    let mut b = mysql::OptsBuilder::new()
        .user(Some(ep.user.clone()))
        .pass(ep.password.clone())
        .db_name(db.map(str::to_string))
        .stmt_cache_size(Some(16))
        .prefer_socket(false);
    b = match &ep.socket {
        Some(s) => b.socket(Some(s.clone())),
        None => b.ip_or_hostname(Some(ep.host.clone())).tcp_port(ep.port),
    };
    mysql::Opts::from(b)
}

/// What a failure says, whichever client library raised it.
enum Failure {
    Server(u16, String),
    Io(String),
    Other(String),
}

fn explain(ep: &Endpoint, f: Failure) -> Error {
    match f {
        Failure::Server(code @ (1045 | 1698), msg) => Error::AccessDenied {
            user: ep.user.clone(),
            detail: format!("{code} {msg}"),
        },
        Failure::Server(code @ (1044 | 1142 | 1227), msg) => Error::Privileges {
            detail: format!("{code} {msg}"),
        },
        Failure::Io(detail)
            if ep.socket.is_none()
                && (detail.contains("failed to lookup")
                    || detail.contains("Name or service not known")) =>
        {
            Error::UnknownHost {
                host: ep.host.clone(),
                detail,
            }
        }
        Failure::Server(code, msg) => Error::Unreachable {
            target: ep.describe(),
            detail: format!("{code} {msg}"),
        },
        Failure::Io(detail) | Failure::Other(detail) => Error::Unreachable {
            target: ep.describe(),
            detail,
        },
    }
}

/// Maps a blocking-client connection error like [`classify`].
pub fn classify_blocking(ep: &Endpoint, e: mysql::Error) -> Error {
    explain(
        ep,
        match e {
            mysql::Error::MySqlError(s) => Failure::Server(s.code, s.message),
            mysql::Error::IoError(io) => Failure::Io(io.to_string()),
            other => Failure::Other(other.to_string()),
        },
    )
}

/// Connects, turning failures into one-line, actionable errors.
pub async fn connect(ep: &Endpoint, db: Option<&str>) -> Result<Conn> {
    Conn::new(ep.opts(db)).await.map_err(|e| classify(ep, e))
}

/// Maps a connection error to what the user should check.
pub fn classify(ep: &Endpoint, e: mysql_async::Error) -> Error {
    explain(
        ep,
        match e {
            mysql_async::Error::Server(s) => Failure::Server(s.code, s.message),
            mysql_async::Error::Io(io) => Failure::Io(io.to_string()),
            other => Failure::Other(other.to_string()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_by_default_tcp_with_a_host() {
        let a = ConnArgs {
            defaults_file: Some("/dev/null".into()),
            user: Some("u".into()),
            ..Default::default()
        };
        let ep = a.resolve().unwrap();
        assert_eq!(ep.socket.as_deref(), Some(DEFAULT_SOCKET));
        let a = ConnArgs {
            defaults_file: Some("/dev/null".into()),
            host: Some("db1".into()),
            port: Some(3307),
            ..Default::default()
        };
        let ep = a.resolve().unwrap();
        assert_eq!((ep.socket, ep.host.as_str(), ep.port), (None, "db1", 3307));
    }

    #[test]
    fn a_dsn_password_is_found_to_be_redacted() {
        assert_eq!(dsn_password("mysql://bob:pw@db2:3310/"), Some("pw"));
        assert_eq!(dsn_password("mysql://bob@db2/?socket=/a@b"), None);
        assert_eq!(dsn_password("mysql//bob:pw@db2:x/"), Some("pw"));
        assert_eq!(dsn_password("mysql://bob:@db2/"), None);
        assert_eq!(dsn_password_span("mysql://bob:pw@db2/"), Some(12..14));
        assert_eq!(
            redact("bad url mysql://bob:pw9@h/ (pw9)", "mysql://bob:pw9@h/"),
            "bad url <dsn> (<password>)"
        );
    }

    #[test]
    fn dsn_overrides() {
        let a = ConnArgs {
            dsn: Some("mysql://bob:pw@db2:3310/".into()),
            ..Default::default()
        };
        let ep = a.resolve().unwrap();
        assert_eq!(
            (
                ep.user.as_str(),
                ep.password.as_deref(),
                ep.host.as_str(),
                ep.port
            ),
            ("bob", Some("pw"), "db2", 3310)
        );
        let bad = ConnArgs {
            dsn: Some("postgres://x".into()),
            ..Default::default()
        };
        assert!(bad.resolve().is_err());
    }

    #[test]
    fn defaults_file_feeds_missing_flags() {
        let dir = std::env::temp_dir().join(format!("cs-mycnf-{}", std::process::id()));
        std::fs::write(
            &dir,
            "[client]\nuser=carol\npassword=pw\nsocket=/tmp/x.sock\n",
        )
        .unwrap();
        let a = ConnArgs {
            defaults_file: Some(dir.clone()),
            ..Default::default()
        };
        let ep = a.resolve().unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(ep.user, "carol");
        assert_eq!(ep.socket.as_deref(), Some("/tmp/x.sock"));
        let missing = ConnArgs {
            defaults_file: Some("/nonexistent/my.cnf".into()),
            ..Default::default()
        };
        assert!(missing
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/my.cnf"));
    }
}
