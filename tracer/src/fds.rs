//! Which file an fd of the traced process is: the kernel side counts syncs
//! and writes per fd; user space names them from `/proc/<pid>/fd/<n>`.
use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
};

/// What a synced file is to InnoDB and the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileClass {
    /// The redo log: `ib_logfile*` (MySQL <8.0.30, MariaDB), `#ib_redo*` (8.0.30+).
    Redo,
    /// The binary log: `<basename>.NNNNNN`.
    Binlog,
    /// Tablespaces, doublewrite, undo.
    Data,
    Other,
}

impl FileClass {
    /// Its name in columns, JSON and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            FileClass::Redo => "redo",
            FileClass::Binlog => "binlog",
            FileClass::Data => "data",
            FileClass::Other => "other",
        }
    }
}

impl fmt::Display for FileClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Classifies a path as readlink shows it (may end in " (deleted)").
pub fn classify(path: &str) -> FileClass {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.starts_with("ib_logfile") || name.starts_with("#ib_redo") {
        return FileClass::Redo;
    }
    if name.ends_with(".ibd")
        || name.starts_with("ibdata")
        || name.ends_with(".dblwr")
        || name.starts_with("undo")
        || name.starts_with("ibtmp")
        || name.starts_with("aria_log")
    {
        return FileClass::Data;
    }
    if let Some((stem, ext)) = name.rsplit_once('.') {
        let numbered = ext.len() >= 6 && ext.bytes().all(|b| b.is_ascii_digit());
        if numbered && !stem.is_empty() && !stem.contains("relay") {
            return FileClass::Binlog;
        }
    }
    FileClass::Other
}

/// Whether process `pid` has a binlog file open now: its binlog is on.
/// Asked at attach: the binlog's probes go only where they can fire.
pub fn has_binlog_open(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|t| classify(&t.to_string_lossy()) == FileClass::Binlog)
        })
    })
}

/// Keys from here up name the files of a server that restarted while it
/// was followed (see `ProbeSampler::reattach`): real fd numbers stay far
/// below (the kernel caps them at `nr_open`, 2^20 by default), so the new
/// server's reused fd numbers never merge with the old server's files.
pub const FIRST_CARRIED_FD: u32 = 1 << 31;

/// fd -> (path, class) of one process, refreshed while the fd is in use so
/// that a reused fd number is re-resolved.
pub struct FdTable {
    dir: PathBuf,
    known: HashMap<u32, (String, FileClass)>,
}

impl FdTable {
    pub fn new(pid: u32) -> Self {
        Self {
            dir: PathBuf::from(format!("/proc/{pid}/fd")),
            known: HashMap::new(),
        }
    }

    /// Re-reads the link of each fd; keeps the last answer when the fd is
    /// gone (closed, or the process exited).
    pub fn refresh(&mut self, fds: impl IntoIterator<Item = u32>) {
        for fd in fds {
            if let Ok(target) = std::fs::read_link(self.dir.join(fd.to_string())) {
                let path = target.to_string_lossy().into_owned();
                let class = classify(&path);
                self.known.insert(fd, (path, class));
            }
        }
    }

    /// Names `key` as `fd` is named now, for good: a followed restart
    /// keeps the old server's counts under keys of their own.
    pub fn pin(&mut self, key: u32, fd: u32) {
        if let Some(v) = self.known.get(&fd).cloned() {
            self.known.insert(key, v);
        }
    }

    /// Reads the fds of `pid` from now on (the restarted server); names
    /// already known stay until their fd is seen again.
    pub fn follow(&mut self, pid: u32) {
        self.dir = PathBuf::from(format!("/proc/{pid}/fd"));
        self.known.retain(|fd, _| *fd >= FIRST_CARRIED_FD);
    }

    pub fn class(&self, fd: u32) -> FileClass {
        self.known.get(&fd).map_or(FileClass::Other, |(_, c)| *c)
    }

    /// The class of `fd` given that some of its syncs ran inside the
    /// redo flush function: an fd never named (closed before it could be
    /// looked at, as MySQL 8.0.30+'s spare `#ib_redoN_tmp` files are once
    /// prepared) is the redo log then, since that function syncs nothing
    /// else.
    pub fn class_synced_in_flush(&self, fd: u32) -> FileClass {
        self.known.get(&fd).map_or(FileClass::Redo, |(_, c)| *c)
    }

    pub fn path(&self, fd: u32) -> Option<&str> {
        self.known.get(&fd).map(|(p, _)| p.as_str())
    }
}

/// The file mapped into `pid` whose name is `name` (a loaded plugin),
/// from its memory map.
pub fn mapped_library(pid: u32, name: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    library_in(&maps, name)
}

/// [`mapped_library`] on a memory map's text.
fn library_in(maps: &str, name: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| p.file_name().is_some_and(|f| f == name))
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_server_files() {
        assert_eq!(classify("/var/lib/mysql/ib_logfile0"), FileClass::Redo);
        assert_eq!(classify("/d/#innodb_redo/#ib_redo12"), FileClass::Redo);
        assert_eq!(classify("/d/mysql-bin.000001"), FileClass::Binlog);
        assert_eq!(classify("/d/binlog.000123 (deleted)"), FileClass::Binlog);
        assert_eq!(classify("/d/relay-bin.000002"), FileClass::Other);
        assert_eq!(classify("/d/db/t.ibd"), FileClass::Data);
        assert_eq!(classify("/d/ibdata1"), FileClass::Data);
        assert_eq!(classify("/d/#ib_16384_0.dblwr"), FileClass::Data);
        assert_eq!(classify("/d/undo001"), FileClass::Data);
        assert_eq!(classify("/d/mysql-bin.index"), FileClass::Other);
        assert_eq!(classify("socket:[1234]"), FileClass::Other);
        // Aria's numbered log is not a binlog.
        assert_eq!(classify("/d/aria_log.00000001"), FileClass::Data);
    }

    #[test]
    fn the_plugin_is_found_by_its_file_name_in_the_memory_map() {
        let maps = "\
7f00-7f10 r--p 00000000 08:01 123 /usr/lib/mysql/plugin/semisync_source.so
7f10-7f20 r-xp 00001000 08:01 124 /tmp/commitscope-x/plugin/group_replication.so
7f20-7f30 rw-p 00000000 00:00 0
7f30-7f40 r--p 00000000 08:01 125 /tmp/not_group_replication.so.bak
";
        assert_eq!(
            library_in(maps, "group_replication.so"),
            Some(PathBuf::from(
                "/tmp/commitscope-x/plugin/group_replication.so"
            ))
        );
        assert_eq!(library_in(maps, "ha_galera.so"), None);
        assert_eq!(library_in("", "group_replication.so"), None);
    }
}
