//! Files written for the user (`--csv FILE`, the sweep's `--out DIR`):
//! never through a symbolic link commitscope did not create. Run as root,
//! a link planted at a predictable path would make it overwrite any file
//! on the machine; `O_NOFOLLOW` refuses the link itself, atomically.
use std::{
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::Path,
};

use crate::error::{Error, Result};

fn open(path: &Path, append: bool) -> Result<File> {
    let mut o = OpenOptions::new();
    o.create(true).custom_flags(libc::O_NOFOLLOW);
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(true);
    }
    o.open(path).map_err(|source| {
        if source.raw_os_error() == Some(libc::ELOOP) {
            Error::Symlink {
                path: path.to_owned(),
            }
        } else {
            Error::Output {
                path: path.to_owned(),
                source,
            }
        }
    })
}

/// Creates (or truncates) `path`, refusing a symbolic link.
pub fn create(path: &Path) -> Result<File> {
    open(path, false)
}

/// Opens `path` for appending, refusing a symbolic link.
pub fn append(path: &Path) -> Result<File> {
    open(path, true)
}

/// Writes `bytes` to `path` whole, refusing a symbolic link.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    create(path)?
        .write_all(bytes)
        .map_err(|source| Error::Output {
            path: path.to_owned(),
            source,
        })
}

/// Refuses a results directory that is a symbolic link.
pub fn check_dir(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Symlink {
            path: path.to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let link = d.path().join("out.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for r in [
            create(&link).map(|_| ()),
            append(&link).map(|_| ()),
            write(&link, b"x"),
        ] {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        let dir_link = d.path().join("results");
        std::os::unix::fs::symlink(d.path(), &dir_link).unwrap();
        assert!(check_dir(&dir_link).is_err());
        assert!(check_dir(d.path()).is_ok());
        let plain = d.path().join("plain.csv");
        write(&plain, b"a,b\n").unwrap();
        write(&plain, b"c\n").unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "c\n");
    }
}
