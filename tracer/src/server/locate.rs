//! Which server binary a managed run starts, and where its support files
//! are (error messages, install scripts) when it lives outside /usr.
use std::path::{Path, PathBuf};

use crate::{
    error::{Error, Result},
    probes::profiles::{self, Flavor, ServerId},
};

/// Searched after `$PATH`, in this order.
const EXTRA_DIRS: &[&str] = &["/usr/sbin", "/usr/local/mysql/bin"];
const NAMES: &[&str] = &["mariadbd", "mysqld"];

/// A server binary and what it is.
#[derive(Clone, Debug)]
pub struct ServerBinary {
    pub path: PathBuf,
    pub id: ServerId,
    /// `<bin>/..`: the installation root the server is told with --basedir.
    pub basedir: PathBuf,
    /// A directory holding `english/errmsg.sys` next to the binary, for
    /// `--lc-messages-dir` (None: the server's compiled-in default).
    pub messages: Option<PathBuf>,
}

/// The directories of `$PATH`, in order.
fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default()
}

/// `--mysqld PATH`, else `mariadbd`/`mysqld` on PATH, then the usual dirs.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.exists() {
            return Err(Error::NoServerBinary {
                detail: format!("--mysqld {} does not exist", p.display()),
            });
        }
        return Ok(p.to_owned());
    }
    let dirs = path_dirs()
        .into_iter()
        .chain(EXTRA_DIRS.iter().map(PathBuf::from));
    for dir in dirs {
        for name in NAMES {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(Error::NoServerBinary {
        detail: "no mariadbd or mysqld on PATH, in /usr/sbin or /usr/local/mysql/bin".into(),
    })
}

/// Identifies `path` (`--version`, or `--server-version`) and finds its
/// support files. Rejects what is not an ELF server binary.
pub fn inspect(path: &Path, declared: Option<ServerId>) -> Result<ServerBinary> {
    crate::probes::symbols::check_elf(path)?;
    let path = path.canonicalize().map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let id = match declared.or_else(|| profiles::detect(&path)) {
        Some(id) => id,
        None => {
            return Err(Error::NotAServer {
                path,
                detail: "`--version` did not print a MySQL/MariaDB version".into(),
            })
        }
    };
    let bindir = path.parent().unwrap_or(Path::new("/"));
    let basedir = bindir.parent().unwrap_or(bindir).to_path_buf();
    let messages = [
        basedir.join("share"),
        basedir.join("share/mysql"),
        basedir.join("share/mariadb"),
    ]
    .into_iter()
    .find(|d| d.join("english/errmsg.sys").is_file());
    Ok(ServerBinary {
        path,
        id,
        basedir,
        messages,
    })
}

impl ServerBinary {
    /// How a fresh datadir is made for this server.
    pub fn init_method(&self) -> Result<InitMethod> {
        let v = self.id.version;
        match self.id.flavor {
            Flavor::MySql if (v.major, v.minor) >= (5, 7) => Ok(InitMethod::InitializeInsecure),
            flavor => {
                let names: &[&str] = match flavor {
                    Flavor::MariaDb => &["mariadb-install-db", "mysql_install_db"],
                    Flavor::MySql => &["mysql_install_db"],
                };
                let bindir = self.path.parent().unwrap_or(Path::new("/"));
                let local = [bindir.to_path_buf(), self.basedir.join("scripts")];
                let path_dirs = path_dirs();
                // The script shipped with this binary first, then the
                // system's (the symbolized fixture has none of its own; a
                // 10.11.19 script makes a datadir 10.11.18 opens).
                for dir in local.iter().chain(path_dirs.iter()) {
                    for n in names {
                        let p = dir.join(n);
                        if p.is_file() {
                            return Ok(InitMethod::InstallScript {
                                script: p,
                                own: local.contains(&dir.clone()),
                            });
                        }
                    }
                }
                Err(Error::NoInstallScript {
                    server: self.path.clone(),
                    wanted: names.join(" or "),
                })
            }
        }
    }
}

/// How to initialise a datadir.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitMethod {
    /// MySQL 5.7+: `mysqld --initialize-insecure`.
    InitializeInsecure,
    /// MariaDB / MySQL 5.6: `mariadb-install-db` (or `mysql_install_db`);
    /// `own` when it ships next to the binary (then it gets --basedir).
    InstallScript { script: PathBuf, own: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_missing_binary_is_named() {
        let e = find(Some(Path::new("/nonexistent/mysqld"))).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/mysqld"), "{e}");
    }

    #[test]
    fn mysql8_initialises_itself() {
        let b = ServerBinary {
            path: "/opt/mysql/bin/mysqld".into(),
            id: "mysql-8.0.36".parse().unwrap(),
            basedir: "/opt/mysql".into(),
            messages: None,
        };
        assert_eq!(b.init_method().unwrap(), InitMethod::InitializeInsecure);
    }
}
