//! How reading a file can fail: what the readers return, each one line
//! that says what to do. The tool's own error wraps these unchanged
//! (`commitscope::error::Error::Readers`), so a message reads the same
//! whichever side it came from.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{} is not an ELF executable ({reason}): pass the server binary (mysqld or mariadbd)", path.display())]
    NotElf { path: PathBuf, reason: String },

    #[error("invalid --server-version {given:?}: expected e.g. mariadb-10.11, mysql-8.0.36, 5.7.44 or 10.6.18-MariaDB")]
    BadServerVersion { given: String },

    /// An option file (`~/.my.cnf`, `--defaults-file`) that cannot be
    /// read or that includes too much.
    #[error("cannot read {path}: {detail}")]
    Config { path: String, detail: String },

    #[error("{0}")]
    Usage(String),

    #[error("{} is a symbolic link: refusing to write through it (commitscope did not create it); remove it or pass another path", path.display())]
    Symlink { path: PathBuf },

    #[error("cannot write {}: {source}; pass a writable path", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;
