//! Syncs and writes counted at the C library's wrappers, in the traced
//! process only (`--fsync-probe libc`). Where neither fentry nor kprobes
//! work, the alternative is the syscall tracepoints, and an enabled syscall
//! tracepoint sends every syscall of every process on the host through the
//! kernel's slow path (about 55 ns each on CI's VMs): on a database host
//! that runs other work, everything pays for the exporter. A uprobe in the
//! server's C library traps only when the server itself syncs or writes,
//! about once per group commit.
//!
//! What it cannot see: syscalls made without the C library (a raw
//! `syscall(2)`, io_uring submissions), and a statically linked server has
//! no C library to probe: asked for there, it fails in one line.
use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
};

use aya::{
    programs::uprobe::{UProbeAttachLocation, UProbeScope},
    Ebpf,
};
use tracer_ebpf::programs as prog;

/// The wrappers and the program each one gets. `pwritev2` is missing from
/// old C libraries: optional.
const SYNCS: &[&str] = &["fsync", "fdatasync"];
const WRITES: &[(&str, &str, bool)] = &[
    ("write", prog::WRITE_LIBC, true),
    ("pwrite64", prog::WRITE_LIBC, true),
    ("pwritev", prog::WRITEV_LIBC, true),
    ("pwritev2", prog::WRITEV_LIBC, false),
];

/// What got attached: the library (its path in the server's mount
/// namespace) and the wrappers probed in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibcAttach {
    pub library: PathBuf,
    pub writes: Vec<&'static str>,
    /// The syncs have their return probe too (their latency is measured).
    pub timed: bool,
}

/// The C library mapped into a process, from its `/proc/<pid>/maps`: the
/// address range of a mapping named `libc.so.<n>` or `libc-<version>.so`,
/// and that name. None for a statically linked program (or a C library
/// under another name).
pub fn find_libc(maps: &str) -> Option<(&str, &str)> {
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        let path = f.nth(4)?;
        let name = path.rsplit('/').next().unwrap_or_default();
        let libc = path.starts_with('/')
            && (name.starts_with("libc.so.")
                || (name.starts_with("libc-") && name.ends_with(".so")));
        libc.then_some((range, path))
    })
}

/// The path to give the kernel for `pid`'s C library: its mapping's
/// `/proc/<pid>/map_files` entry, which names the very file the process
/// has mapped. The path in `maps` may name another one: the host's file
/// for a server in a container, or the new C library after a package
/// upgrade replaced the one a long-running server still uses (`(deleted)`
/// in `maps`), where a probe would never fire.
fn libc_of(pid: NonZeroU32) -> Result<(PathBuf, String), String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("/proc/{pid}/maps: {e}"))?;
    let (range, path) = find_libc(&maps)
        .ok_or_else(|| format!("pid {pid} maps no C library (statically linked?)"))?;
    let file = PathBuf::from(format!("/proc/{pid}/map_files/{range}"));
    std::fs::metadata(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok((file, path.to_string()))
}

/// Attaches the sync programs to `pid`'s C library (with `timed`, entry
/// and return; else one program that counts at entry), and with `writes`
/// the write programs too. The light tier leaves the writes and the
/// return out: each is one more trap on the redo flush's path, which
/// every committing client waits on, and light promises only counts per
/// sync. On an error nothing needs undoing here: the caller fails, and
/// dropping its `Ebpf` detaches whatever was attached.
pub fn attach(
    ebpf: &mut Ebpf,
    pid: NonZeroU32,
    writes: bool,
    timed: bool,
) -> Result<LibcAttach, String> {
    let (file, library) = libc_of(pid)?;
    // By offset where the symbol table gives one, so the probe can sit past
    // the wrappers' single-stepped first instruction (`probes::prologue`);
    // else by name, as the kernel finds it.
    let symbols = readers::probes::symbols::Resolver::open(&file, Path::new("/nonexistent")).ok();
    let mut one = |name: &str, symbol: &str| -> Result<(), String> {
        let at = match symbols.as_ref().and_then(|r| r.resolve(&[symbol])) {
            Some(r) => UProbeAttachLocation::AbsoluteOffset(super::uprobe::probe_offset(
                &file,
                r.file_offset,
            )),
            None => UProbeAttachLocation::Symbol(symbol),
        };
        super::uprobe::loaded_uprobe(ebpf, name)
            .map_err(|e| format!("{name}: {e}"))?
            .attach(at, &file, UProbeScope::OneProcess(pid))
            .map(drop)
            .map_err(|e| format!("{symbol} in the C library ({library}): {e}"))
    };
    for sym in SYNCS {
        if timed {
            one(prog::SYNC_ENTER_LIBC, sym)?;
            one(prog::SYNC_EXIT_LIBC, sym)?;
        } else {
            one(prog::SYNC_COUNT_LIBC, sym)?;
        }
    }
    let mut probed = Vec::new();
    for &(sym, name, required) in WRITES.iter().filter(|_| writes) {
        match one(name, sym) {
            Ok(()) => probed.push(sym),
            Err(e) if required => return Err(e),
            Err(_) => {}
        }
    }
    Ok(LibcAttach {
        library: PathBuf::from(library),
        writes: probed,
        timed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_library_is_found_among_the_mappings() {
        let maps = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234 /usr/sbin/mariadbd
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0
7f1e2d200000-7f1e2d226000 r--p 00000000 fe:01 5678 /usr/lib/x86_64-linux-gnu/libcrypt.so.1.1.0
7f1e2d400000-7f1e2d426000 r--p 00000000 fe:01 5679 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c5e0000-7ffd1c601000 rw-p 00000000 00:00 0 [stack]
";
        assert_eq!(
            find_libc(maps),
            Some((
                "7f1e2d400000-7f1e2d426000",
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            ))
        );
        assert_eq!(
            find_libc("0-1 r-xp 0 fe:01 9 /lib/libc-2.17.so\n"),
            Some(("0-1", "/lib/libc-2.17.so"))
        );
        // Replaced on disk by an upgrade: still found, by its mapping.
        assert_eq!(
            find_libc("a-b r-xp 0 fe:01 9 /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)\n"),
            Some(("a-b", "/usr/lib/x86_64-linux-gnu/libc.so.6"))
        );
    }

    #[test]
    fn a_static_program_has_no_c_library() {
        let maps = "\
00400000-00401000 r--p 00000000 fe:01 1234 /fx/mariadb
7ffd1c5e0000-7ffd1c601000 rw-p 00000000 00:00 0 [stack]
7ffd1c700000-7ffd1c702000 r-xp 00000000 00:00 0 [vdso]
";
        assert_eq!(find_libc(maps), None);
        // Not the C library, though the names begin alike.
        assert_eq!(
            find_libc("0-1 r-xp 0 fe:01 9 /usr/lib/libcrypt.so.1\n0-1 r-xp 0 fe:01 9 /usr/lib/libc++.so.1\n"),
            None
        );
    }
}
