//! Initialised datadirs kept for reuse, when `COMMITSCOPE_DATADIR_CACHE`
//! names a directory. A server's own initialisation (`--initialize`, an
//! install script) takes 2-4 s and makes the same datadir every time for
//! one binary and one set of init options: with the variable set, the
//! first run keeps a copy of its fresh datadir there and the next ones
//! copy it instead (0.2 s). The suite sets it to a directory of its
//! checkout, where some 45 stock MySQL initialisations took 3.3 s each.
//! Off by default: a user's runs leave no 190 MB copies behind.
//!
//! A template is published by a rename, so a reader never sees a half
//! copy, and never written again. The files that make one server differ
//! from another (MySQL's `auto.cnf`, its server UUID) are left out: each
//! copy's server makes its own at its first start.
use std::{
    ffi::OsString,
    fs,
    hash::{Hash, Hasher},
    io,
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Path, PathBuf},
};

/// The environment variable that turns the cache on.
pub const VAR: &str = "COMMITSCOPE_DATADIR_CACHE";

/// Where the templates are.
pub struct Templates {
    root: PathBuf,
}

/// What makes two initialisations the same: the binary (path, size and
/// modification time) and everything the init is given but the run's
/// own paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// A key over the server `binary` and the init's `parts` (its options,
    /// its method, the SQL it reads).
    pub fn of(binary: &Path, parts: &[&[u8]]) -> Key {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        binary.hash(&mut h);
        if let Ok(m) = fs::metadata(binary) {
            (m.len(), m.mtime(), m.mtime_nsec(), m.ino()).hash(&mut h);
        }
        for p in parts {
            p.hash(&mut h);
        }
        Key(format!("{:016x}", h.finish()))
    }
}

/// Who the copied files belong to (the server's account), when not the
/// caller.
pub type Owner = Option<(u32, u32)>;

impl Templates {
    /// The cache the environment names, if any.
    pub fn from_env() -> Option<Templates> {
        let root = std::env::var_os(VAR).filter(|v| !v.is_empty())?;
        Some(Templates {
            root: PathBuf::from(root),
        })
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.root.join(&key.0)
    }

    /// Copies template `key` into `to` (which must not exist), owned by
    /// `owner`. False when there is none, or when the copy failed (a
    /// full disk): the partial copy is removed and the caller initialises
    /// as it would have, with the server's own errors.
    pub fn restore(&self, key: &Key, to: &Path, owner: Owner) -> bool {
        let from = self.path(key);
        if !from.is_dir() {
            return false;
        }
        match copy_tree(&from, to, owner, &[]) {
            Ok(()) => true,
            Err(_) => {
                let _ = fs::remove_dir_all(to);
                false
            }
        }
    }

    /// Keeps a copy of the fresh datadir `from` as template `key`, unless
    /// one is there, without the `identity` files. Best effort: a failed
    /// copy only costs the next run an initialisation.
    pub fn keep(&self, key: &Key, from: &Path, identity: &[&str]) {
        let to = self.path(key);
        if to.exists() || fs::create_dir_all(&self.root).is_err() {
            return;
        }
        let Ok(staging) = tempfile::Builder::new()
            .prefix(".partial-")
            .tempdir_in(&self.root)
        else {
            return;
        };
        let copy = staging.path().join("data");
        let skip: Vec<OsString> = identity.iter().map(OsString::from).collect();
        if copy_tree(from, &copy, None, &skip).is_ok() {
            // Another run may have published the same key first: its
            // copy is as good, and the rename then fails.
            let _ = fs::rename(&copy, &to);
        }
    }
}

/// Copies the directory `from` to `to` (created), files and directories
/// with their modes, owned by `owner`; top-level names in `skip` are left
/// out. A datadir holds nothing else.
fn copy_tree(from: &Path, to: &Path, owner: Owner, skip: &[OsString]) -> io::Result<()> {
    let mode = fs::metadata(from)?.mode();
    fs::DirBuilder::new().mode(mode & 0o7777).create(to)?;
    chown(to, owner)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        if skip.contains(&entry.file_name()) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst, owner, &[])?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
            chown(&dst, owner)?;
        } else {
            return Err(io::Error::other(format!(
                "{}: neither a file nor a directory",
                src.display()
            )));
        }
    }
    Ok(())
}

fn chown(p: &Path, owner: Owner) -> io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::chown(p, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_datadir_comes_back_without_its_identity() {
        let d = tempfile::tempdir().unwrap();
        let t = Templates {
            root: d.path().join("cache"),
        };
        let data = d.path().join("data");
        fs::create_dir_all(data.join("mysql")).unwrap();
        fs::write(data.join("ibdata1"), b"pages").unwrap();
        fs::write(data.join("mysql/user.ibd"), b"users").unwrap();
        fs::write(data.join("auto.cnf"), b"server_uuid=1").unwrap();
        let key = Key::of(Path::new("/bin/sh"), &[b"--innodb-page-size=4k"]);
        let to = d.path().join("copy");
        assert!(!t.restore(&key, &to, None), "nothing kept yet");
        assert!(!to.exists());
        t.keep(&key, &data, &["auto.cnf"]);
        assert!(t.restore(&key, &to, None));
        assert_eq!(fs::read(to.join("mysql/user.ibd")).unwrap(), b"users");
        assert_eq!(fs::read(to.join("ibdata1")).unwrap(), b"pages");
        assert!(!to.join("auto.cnf").exists());
        // Other options, another datadir.
        let other = Key::of(Path::new("/bin/sh"), &[b"--innodb-page-size=8k"]);
        assert_ne!(key, other);
        assert!(!t.restore(&other, &d.path().join("copy2"), None));
        // No staging left behind.
        let names: Vec<_> = fs::read_dir(&t.root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from(&key.0)]);
    }
}
