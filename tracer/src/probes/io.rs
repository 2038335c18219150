//! `--io`: where the redo log lives — the block device and filesystem
//! under it — and how the block tracepoints lay out their records, so the
//! kernel side can time the requests a redo sync causes. All of it read
//! from `/proc` and `/sys` before the programs load (the device and the
//! offsets are constants the verifier prunes on).
use std::{
    fmt,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use tracer_ebpf::JournalThreads;

use crate::fds::{classify, FileClass};

/// The block device under the redo log.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Device {
    /// The whole disk's name (`loop0`, `vda`, `nvme0n1`): the block layer
    /// reports a partition's requests on its disk.
    pub disk: String,
    /// The whole disk's major and minor numbers.
    pub major: u32,
    pub minor: u32,
    /// The partition the filesystem is on, when it is one (`vda1`).
    pub partition: Option<String>,
    /// Filesystem type and its journal mode where it has one
    /// (`ext4`, `data=ordered`).
    pub fs: String,
    pub fs_mode: Option<String>,
    pub mount: PathBuf,
    /// `queue/nr_requests` and `queue/write_cache` from sysfs.
    pub queue_depth: Option<u32>,
    pub write_cache: Option<String>,
    /// Who writes the journal on a redo sync's behalf, and how it is told.
    #[serde(skip)]
    pub journal: JournalThreads,
}

impl Device {
    /// The device as the block tracepoints spell it (`MKDEV` with a
    /// 20-bit minor).
    pub fn trace_dev(&self) -> u32 {
        (self.major << 20) | self.minor
    }

    /// How the journal's requests are attributed, in a few words.
    pub fn attribution(&self) -> &'static str {
        match self.journal {
            JournalThreads::Jbd2 => "the syncing thread's requests and jbd2's journal commits",
            JournalThreads::Kworker => {
                "the syncing thread's requests and XFS's log writes by its workers (kworker, metadata requests) while it waits"
            }
            JournalThreads::None => {
                "the syncing thread's own requests only (this filesystem's journal threads are not known)"
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/dev/{}",
            self.partition.as_deref().unwrap_or(&self.disk)
        )?;
        write!(f, " {}", self.fs)?;
        if let Some(m) = &self.fs_mode {
            write!(f, " ({m})")?;
        }
        if let Some(q) = self.queue_depth {
            write!(f, ", queue depth {q}")?;
        }
        if let Some(w) = &self.write_cache {
            write!(f, ", write cache {w}")?;
        }
        Ok(())
    }
}

/// Where the redo log is, as far as `--io` cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// On a block device: its requests are attributed.
    Device(Device),
    /// On something with no block device (tmpfs, overlay on tmpfs, NFS):
    /// nothing to attribute; the rest of the trace goes on.
    NoDevice { fs: String, path: PathBuf },
    /// On a device-mapper or md device (LVM, dm-crypt, RAID): its bios
    /// become requests on the disks under it, where they can no longer
    /// be told apart; not attributed, said in one line.
    Stacked { disk: String, fs: String },
}

impl Place {
    /// The start line's words for it.
    pub fn describe(&self) -> String {
        match self {
            Place::Device(d) => format!("io: {d}; attributed: {}", d.attribution()),
            Place::NoDevice { fs, path } => format!(
                "io: {} is on {fs}, no block device: no I/O to attribute",
                path.display()
            ),
            Place::Stacked { disk, fs } => format!(
                "io: /dev/{disk} ({fs}) is a device-mapper or md device, whose requests go to the disks under it: not attributed (put the datadir on a plain disk or partition to see under the fsync)"
            ),
        }
    }
}

/// A file of the server's: where this process can stat it (through
/// `/proc/<pid>`, which reaches into a container's mount namespace too),
/// the path the server knows it by, and the mount table it sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenFile {
    pub stat: PathBuf,
    pub shown: PathBuf,
    pub mountinfo: PathBuf,
}

/// Where the redo log of server `pid` is: the redo file it has open, else
/// one it has mapped (MariaDB maps its log on tmpfs and persistent
/// memory, and closes the fd), else its working directory, which is the
/// datadir (`mysqld` changes into it at start).
pub fn redo_file(pid: u32) -> Option<SeenFile> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let seen = |stat: PathBuf, shown: PathBuf| SeenFile {
        stat,
        shown,
        mountinfo: proc.join("mountinfo"),
    };
    let open = std::fs::read_dir(proc.join("fd"))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|e| {
            let shown = std::fs::read_link(e.path()).ok()?;
            (classify(&shown.to_string_lossy()) == FileClass::Redo).then(|| seen(e.path(), shown))
        });
    let mapped = || {
        let maps = std::fs::read_to_string(proc.join("maps")).ok()?;
        let shown = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| classify(p) == FileClass::Redo)?;
        let inside = proc.join("root").join(shown.trim_start_matches('/'));
        Some(seen(inside, PathBuf::from(shown)))
    };
    let cwd = || {
        let shown = std::fs::read_link(proc.join("cwd")).ok()?;
        Some(seen(proc.join("cwd"), shown))
    };
    open.or_else(mapped).or_else(cwd)
}

/// Locates the device and filesystem holding `file`.
pub fn locate(file: &SeenFile) -> Result<Place, String> {
    let path = file.shown.as_path();
    let meta =
        std::fs::metadata(&file.stat).map_err(|e| format!("{}: {e}", file.stat.display()))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mountinfo = std::fs::read_to_string(&file.mountinfo)
        .map_err(|e| format!("{}: {e}", file.mountinfo.display()))?;
    let mount = mount_of(&mountinfo, major, minor, path);
    let fs = mount
        .as_ref()
        .map_or("unknown", |m| m.fs.as_str())
        .to_string();
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if major == 0 || !sys.exists() {
        return Ok(Place::NoDevice {
            fs,
            path: path.to_owned(),
        });
    }
    let node = std::fs::canonicalize(&sys).map_err(|e| format!("{}: {e}", sys.display()))?;
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    // A partition's directory sits inside its disk's and has `partition`.
    let (disk_dir, partition) = if node.join("partition").exists() {
        let parent = node
            .parent()
            .ok_or("a partition without a disk")?
            .to_owned();
        (parent, name(&node))
    } else {
        (node.clone(), None)
    };
    let disk = name(&disk_dir).ok_or("a disk without a name")?;
    if disk_dir.join("dm").exists() || disk_dir.join("md").exists() {
        return Ok(Place::Stacked { disk, fs });
    }
    let (dmaj, dmin) = read_dev(&disk_dir.join("dev")).unwrap_or((major, minor));
    let read = |f: &str| {
        std::fs::read_to_string(disk_dir.join("queue").join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let options = mount
        .as_ref()
        .map(|m| m.super_options.as_str())
        .unwrap_or("");
    Ok(Place::Device(Device {
        disk,
        major: dmaj,
        minor: dmin,
        partition,
        fs_mode: fs_mode(&fs, options),
        journal: journal_threads(&fs),
        fs,
        mount: mount.map(|m| m.point).unwrap_or_default(),
        queue_depth: read("nr_requests").and_then(|s| s.parse().ok()),
        write_cache: read("write_cache"),
    }))
}

/// Who writes the journal when a file of this filesystem is synced.
fn journal_threads(fs: &str) -> JournalThreads {
    match fs {
        "ext4" | "ext3" => JournalThreads::Jbd2,
        "xfs" => JournalThreads::Kworker,
        _ => JournalThreads::None,
    }
}

/// The journal mode worth naming: ext4's `data=` (ordered unless the
/// options say otherwise), XFS's log device.
fn fs_mode(fs: &str, options: &str) -> Option<String> {
    let opt = |key: &str| {
        options
            .split(',')
            .find_map(|o| o.strip_prefix(key))
            .map(str::to_string)
    };
    match fs {
        "ext4" | "ext3" => Some(format!(
            "data={}",
            opt("data=").unwrap_or_else(|| "ordered".into())
        )),
        "xfs" => Some(match opt("logdev=") {
            Some(d) => format!("log on {d}"),
            None => "internal log".into(),
        }),
        _ => None,
    }
}

/// `MAJOR:MINOR` in a sysfs `dev` file.
fn read_dev(p: &Path) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(p).ok()?;
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// One line of `/proc/<pid>/mountinfo`, the parts used here.
#[derive(Debug, PartialEq)]
struct Mount {
    point: PathBuf,
    fs: String,
    super_options: String,
}

/// The mount of device `major:minor` whose mount point is the longest
/// prefix of `path` (a device can be mounted at several places).
fn mount_of(mountinfo: &str, major: u32, minor: u32, path: &Path) -> Option<Mount> {
    let want = format!("{major}:{minor}");
    mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let f: Vec<&str> = pre.split(' ').collect();
            let p: Vec<&str> = post.split(' ').collect();
            if f.get(2) != Some(&want.as_str()) {
                return None;
            }
            let point = PathBuf::from(unescape(f.get(4)?));
            let fs = p.first()?.to_string();
            path.starts_with(&point).then(|| Mount {
                point,
                fs,
                super_options: p.get(2).unwrap_or(&"").to_string(),
            })
        })
        .max_by_key(|m| m.point.as_os_str().len())
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|c| u8::from_str_radix(c, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The block tracepoints' record offsets the programs read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub bio_rwbs: u32,
    pub issue_bytes: u32,
    pub issue_rwbs: u32,
    pub complete_rwbs: u32,
}

/// Reads the offsets from the tracepoints' `format` files under `tracefs`;
/// `dev` must be at 8 and `sector` at 16 in all three (the programs read
/// them there).
pub fn layout(tracefs: &Path) -> Result<Layout, String> {
    let fields = |event: &str| -> Result<Vec<(String, u32)>, String> {
        let p = tracefs.join("events/block").join(event).join("format");
        let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(format_fields(&s))
    };
    let find = |fs: &[(String, u32)], event: &str, name: &str| {
        fs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, o)| *o)
            .ok_or_else(|| format!("block/{event} has no field {name}"))
    };
    let mut out = Layout {
        bio_rwbs: 0,
        issue_bytes: 0,
        issue_rwbs: 0,
        complete_rwbs: 0,
    };
    for event in ["block_bio_queue", "block_rq_issue", "block_rq_complete"] {
        let fs = fields(event)?;
        if find(&fs, event, "dev")? != 8 || find(&fs, event, "sector")? != 16 {
            return Err(format!(
                "block/{event} keeps dev and sector elsewhere than this tool reads them"
            ));
        }
        match event {
            "block_rq_issue" => {
                out.issue_bytes = find(&fs, event, "bytes")?;
                out.issue_rwbs = find(&fs, event, "rwbs")?;
            }
            "block_rq_complete" => out.complete_rwbs = find(&fs, event, "rwbs")?,
            _ => out.bio_rwbs = find(&fs, event, "rwbs")?,
        }
    }
    Ok(out)
}

/// `(name, offset)` of each field of a tracepoint `format` file.
pub(super) fn format_fields(format: &str) -> Vec<(String, u32)> {
    format
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("field:")?;
            let (decl, rest) = l.split_once(';')?;
            let name = decl.split_whitespace().last()?;
            let name = name.split('[').next()?.to_string();
            let off = rest.trim().strip_prefix("offset:")?.split(';').next()?;
            Some((name, off.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_files_give_each_field_its_offset() {
        let f = "name: block_rq_issue\nID: 1\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
            \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
            \tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n\
            \tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\
            \tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n";
        let fs = format_fields(f);
        assert!(fs.contains(&("dev".into(), 8)));
        assert!(fs.contains(&("rwbs".into(), 34)));
        assert!(fs.contains(&("cmd".into(), 60)));
        assert!(fs.contains(&("bytes".into(), 28)));
    }

    #[test]
    fn the_longest_mount_of_the_device_holding_the_path_wins() {
        let mi = "22 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw,errors=remount-ro\n\
            40 22 7:0 / /var/tmp/x rw,relatime - ext4 /dev/loop0 rw,data=journal\n\
            41 22 7:0 / /mnt/other\\040dir rw - ext4 /dev/loop0 rw\n\
            42 22 0:30 / /tmp rw - tmpfs tmpfs rw\n";
        let m = mount_of(mi, 7, 0, Path::new("/var/tmp/x/data/ib_logfile0")).unwrap();
        assert_eq!(m.point, PathBuf::from("/var/tmp/x"));
        assert_eq!(
            fs_mode(&m.fs, &m.super_options).as_deref(),
            Some("data=journal")
        );
        let m = mount_of(mi, 7, 0, Path::new("/mnt/other dir/f")).unwrap();
        assert_eq!(m.point, PathBuf::from("/mnt/other dir"));
        assert_eq!(fs_mode("ext4", "rw").as_deref(), Some("data=ordered"));
        assert_eq!(
            mount_of(mi, 254, 1, Path::new("/tmp/f")).unwrap().fs,
            "ext4"
        );
        assert_eq!(
            mount_of(mi, 0, 30, Path::new("/tmp/f")).unwrap().fs,
            "tmpfs"
        );
        assert!(mount_of(mi, 7, 1, Path::new("/var/tmp/x")).is_none());
    }

    #[test]
    fn a_tmpfs_file_has_no_device_and_a_disk_file_has_one() {
        // /dev/shm is tmpfs on every Linux this runs on.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let f = dir.path().join("ib_logfile0");
        std::fs::write(&f, b"x").unwrap();
        let seen = |p: &Path| SeenFile {
            stat: p.to_owned(),
            shown: p.to_owned(),
            mountinfo: "/proc/self/mountinfo".into(),
        };
        match locate(&seen(&f)).unwrap() {
            Place::NoDevice { fs, .. } => assert_eq!(fs, "tmpfs"),
            other => panic!("{other:?}"),
        }
        let d = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if let Place::Device(dev) = locate(&seen(d.path())).unwrap() {
            assert!(dev.major > 0, "{dev:?}");
            assert!(std::path::Path::new(&format!("/sys/block/{}", dev.disk)).exists());
        }
    }
}
