//! Which server binary a managed run starts, and where its support files
//! are (error messages, install scripts) when it lives outside /usr.
use std::path::{Path, PathBuf};

use readers::{
    family::{self, ServerId},
    probes::profiles,
};

use crate::error::{Error, Result};

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
    /// Its own character sets (`charsets/Index.xml`), for
    /// `--character-sets-dir`: another version's may not match.
    pub charsets: Option<PathBuf>,
    /// Its own system-table SQL, to bootstrap a datadir with when no
    /// install script of its version is at hand.
    pub system_tables: Option<SystemTables>,
}

/// The SQL that makes the `mysql` schema, in the order a bootstrap runs
/// it. MariaDB 11 renamed the files `mariadb_*.sql`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemTables(pub Vec<PathBuf>);

impl SystemTables {
    /// In `dir`: the tables and their data are required, the performance
    /// tables and the GIS procedures are taken when present.
    pub fn find(dir: &Path) -> Option<SystemTables> {
        let pick = |stem: &str| {
            ["mysql", "mariadb"]
                .iter()
                .map(|p| dir.join(format!("{p}_{stem}.sql")))
                .find(|f| f.is_file())
        };
        let tables = pick("system_tables")?;
        let data = pick("system_tables_data")?;
        let mut files = vec![tables];
        files.extend(pick("performance_tables"));
        files.push(data);
        let gis = dir.join("maria_add_gis_sp_bootstrap.sql");
        if gis.is_file() {
            files.push(gis);
        }
        Some(SystemTables(files))
    }
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
    readers::probes::symbols::check_elf(path)?;
    let path = path.canonicalize().map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let id = match declared {
        Some(id) => id,
        None => profiles::detect_or_why(&path).map_err(|why| match why {
            profiles::NoVersion::CannotRun(detail) => Error::ServerCannotRun {
                path: path.clone(),
                detail,
            },
            profiles::NoVersion::NotAServer(detail) => Error::NotAServer {
                path: path.clone(),
                detail,
            },
        })?,
    };
    let bindir = path.parent().unwrap_or(Path::new("/"));
    let basedir = bindir.parent().unwrap_or(bindir).to_path_buf();
    if let Some(oldest) = id.family().oldest() {
        if id.version < oldest {
            return Err(Error::ServerTooOld {
                path,
                found: id.to_string(),
                supported: family::supported_range(),
            });
        }
    }
    let shares = [
        basedir.join("share"),
        basedir.join("share/mysql"),
        basedir.join("share/mariadb"),
    ];
    let messages = shares
        .iter()
        .find(|d| d.join("english/errmsg.sys").is_file())
        .cloned();
    let charsets = shares
        .iter()
        .map(|d| d.join("charsets"))
        .find(|d| d.join("Index.xml").is_file());
    let system_tables = shares.iter().find_map(|d| SystemTables::find(d));
    Ok(ServerBinary {
        path,
        id,
        basedir,
        messages,
        charsets,
        system_tables,
    })
}

/// The server an install script in `dir` would set up (`../sbin/mariadbd`
/// beside `bin/`, or one in `dir` itself): its version, when it says.
fn server_of_script(dir: &Path) -> Option<ServerId> {
    let up = dir.parent()?;
    [up.join("sbin"), up.join("libexec"), dir.to_path_buf()]
        .iter()
        .flat_map(|d| NAMES.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
        .and_then(|p| profiles::detect(&p))
}

impl ServerBinary {
    /// The directory holding this installation's plugins (`file` among
    /// them), where the layouts put it: Debian's `lib/mysql/plugin`, a
    /// tarball's `lib/plugin`. None: the server's compiled-in default.
    pub fn plugin_dir(&self, file: &str) -> Option<PathBuf> {
        ["lib/mysql/plugin", "lib/plugin", "lib64/mysql/plugin"]
            .iter()
            .map(|d| self.basedir.join(d))
            .find(|d| d.join(file).is_file())
    }

    /// How a fresh datadir is made for this server, always by its own
    /// version: a datadir made by another one may not open (10.5 refuses
    /// 10.11's redo log, and 10.11's errmsg.sys). In order: an install
    /// script shipped beside the binary; the system's script when the
    /// server it installs is of the same series (the 10.11.18 fixture and
    /// Debian's 10.11.19); the binary's own system-table SQL through
    /// `--bootstrap`; else a one-line error naming what is missing.
    pub fn init_method(&self) -> Result<InitMethod> {
        let v = self.id.version;
        let datadir = &self.id.family().datadir;
        if datadir
            .initializes_itself_from
            .is_some_and(|from| v.series() >= from)
        {
            return Ok(InitMethod::InitializeInsecure);
        }
        let names = datadir.install_scripts;
        let bindir = self.path.parent().unwrap_or(Path::new("/"));
        let local = [bindir.to_path_buf(), self.basedir.join("scripts")];
        let script_in = |dir: &Path| names.iter().map(|n| dir.join(n)).find(|p| p.is_file());
        for dir in &local {
            if let Some(script) = script_in(dir) {
                return Ok(InitMethod::InstallScript { script, own: true });
            }
        }
        let mut other = None;
        for dir in path_dirs() {
            if let Some(script) = script_in(&dir) {
                match server_of_script(&dir) {
                    Some(s) if s.flavor == self.id.flavor && s.version.series() == v.series() => {
                        return Ok(InitMethod::InstallScript { script, own: false });
                    }
                    found => {
                        other.get_or_insert((script, found));
                    }
                }
            }
        }
        if let Some(sql) = &self.system_tables {
            return Ok(InitMethod::Bootstrap(sql.clone()));
        }
        Err(match other {
            Some((script, found)) => Error::NoInstallScript {
                server: self.path.clone(),
                wanted: format!(
                    "install script or system-table SQL of {} ({} installs {})",
                    self.id,
                    script.display(),
                    found.map_or("an unknown version".into(), |f| f.to_string())
                ),
            },
            None => Error::NoInstallScript {
                server: self.path.clone(),
                wanted: format!("{} or system-table SQL", names.join(" or ")),
            },
        })
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
    /// `mariadbd --bootstrap` fed the binary's own system-table SQL.
    Bootstrap(SystemTables),
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
            charsets: None,
            system_tables: None,
        };
        assert_eq!(b.init_method().unwrap(), InitMethod::InitializeInsecure);
    }

    #[test]
    fn system_tables_are_found_under_either_prefix() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(SystemTables::find(d.path()), None);
        for f in [
            "mariadb_system_tables.sql",
            "mariadb_system_tables_data.sql",
            "maria_add_gis_sp_bootstrap.sql",
        ] {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        let names: Vec<String> = SystemTables::find(d.path())
            .unwrap()
            .0
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "mariadb_system_tables.sql",
                "mariadb_system_tables_data.sql",
                "maria_add_gis_sp_bootstrap.sql"
            ]
        );
    }
}
