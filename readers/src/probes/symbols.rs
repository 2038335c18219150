//! Finds a function's file offset in an executable, even when the
//! executable is stripped and its symbols live in a separate debug file.
//!
//! aya's own resolver only reads the binary (and a debuglink right next to
//! it) and cannot use `objcopy --only-keep-debug` files, whose `.text` is
//! NOBITS. So: take the symbol's *virtual address* from whichever file has
//! it, and turn it into a file offset with the *executable's* PT_LOAD
//! segments; the probe is then attached by absolute offset.
//!
//! Search order: `.symtab`, `.dynsym`, `<debug-root>/.build-id/xx/rest.debug`,
//! then `.gnu_debuglink` (next to the binary, its `.debug/`, and
//! `<debug-root>/<binary dir>/`).
use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::error::{Error, Result};

/// Where a symbol was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SymbolSource {
    Symtab,
    Dynsym,
    BuildIdDebug,
    DebugLink,
    /// A debug file from a debuginfod server or its client cache.
    Debuginfod,
    /// A `DW_TAG_subprogram` of some file's DWARF (its symbol stripped).
    Dwarf,
    /// Only inlined copies (`DW_TAG_inlined_subroutine`), one probe each.
    DwarfInlined,
}

impl fmt::Display for SymbolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SymbolSource::Symtab => ".symtab",
            SymbolSource::Dynsym => ".dynsym",
            SymbolSource::BuildIdDebug => "build-id debug file",
            SymbolSource::DebugLink => ".gnu_debuglink debug file",
            SymbolSource::Debuginfod => "debuginfod debug file",
            SymbolSource::Dwarf => "dwarf",
            SymbolSource::DwarfInlined => "dwarf-inlined",
        })
    }
}

/// A resolved function: what to hand to the uprobe attach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The mangled name as it stands in the symbol table.
    pub symbol: String,
    pub vaddr: u64,
    pub file_offset: u64,
    pub source: SymbolSource,
    /// The file the symbol was read from (the binary or a debug file).
    pub found_in: PathBuf,
    /// False when the function exists only inlined: `vaddr`/`file_offset`
    /// then repeat the first site's, and no entry or return probe goes on
    /// an out-of-line copy.
    pub out_of_line: bool,
    /// Its inlined copies (from DWARF), each probed at its entry.
    pub inlined: Vec<Site>,
}

/// An inlined copy placed in the executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub file_offset: u64,
    pub dwarf: super::dwarf::InlineSite,
}

impl Resolved {
    /// ".symtab", "dwarf", "dwarf-inlined (3 sites)", "dwarf + dwarf-inlined (2 sites)".
    pub fn source_text(&self) -> String {
        let n = self.inlined.len();
        let sites = format!("dwarf-inlined ({n} site{})", if n == 1 { "" } else { "s" });
        match (self.out_of_line, n) {
            (_, 0) => self.source.to_string(),
            (false, _) => sites,
            (true, _) => format!("{} + {sites}", self.source),
        }
    }
}

/// Function symbols of one file: mangled name -> virtual address.
pub struct Table {
    source: SymbolSource,
    path: PathBuf,
    addrs: HashMap<String, u64>,
}

/// Everything needed to resolve names in one executable.
pub struct Resolver {
    exe: PathBuf,
    /// PT_LOAD segments of the executable: (vaddr, memsz, file offset, filesz).
    segments: Vec<(u64, u64, u64, u64)>,
    tables: Vec<Table>,
    /// Debug files looked for (for error messages and -v).
    pub looked_for: Vec<PathBuf>,
    /// The executable's GNU build-id, when it has one.
    pub build_id: Option<Vec<u8>>,
    /// Files whose DWARF may be searched, in cascade order; each is
    /// scanned at most once ([`Resolver::scan_dwarf`]).
    dwarf_files: Vec<(PathBuf, bool)>,
    /// What the DWARF scans found, by wanted name.
    dwarf: HashMap<String, (super::dwarf::Found, PathBuf)>,
    /// The names DWARF is searched for (a fetched file is searched as it
    /// arrives, by the caller: an uncached one is gone afterwards).
    dwarf_names: Vec<String>,
}

/// A regular file, mapped read-only; None otherwise: a debug-file
/// candidate that is a FIFO or a device (which could block or never end)
/// is not read.
fn map_regular(path: &Path) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(path).ok()?;
    f.metadata().ok().filter(|m| m.is_file())?;
    // SAFETY: read-only map of a file we do not write; a file truncated
    // under us by another process could fault, as with any mmap reader
    // (elfutils, gdb); debug files are not rewritten in place.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}

/// A `.gnu_debuglink` name as the GDB convention has it: a plain file
/// name. A name with a `/`, `..` or a NUL could point the lookup (run as
/// root) at any file on the machine: such a link is ignored.
pub fn debuglink_name(raw: &[u8]) -> Option<String> {
    let name = std::str::from_utf8(raw).ok()?;
    let plain = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0']);
    plain.then(|| name.to_string())
}

fn function_table<'a>(
    syms: impl Iterator<Item = object::Symbol<'a, 'a>>,
    source: SymbolSource,
    path: &Path,
) -> Table {
    let mut addrs = HashMap::new();
    for s in syms {
        if s.kind() != SymbolKind::Text || !s.is_definition() || s.address() == 0 {
            continue;
        }
        if let Ok(name) = s.name() {
            addrs.entry(name.to_owned()).or_insert(s.address());
        }
    }
    Table {
        source,
        path: path.to_owned(),
        addrs,
    }
}

/// Reads a separate debug file's `.symtab`, if it exists and parses.
fn debug_table(path: &Path, source: SymbolSource, expect_build_id: Option<&[u8]>) -> Option<Table> {
    // Mapped: of a debug file of hundreds of MB only the headers, the
    // notes and the symbol table are touched.
    let data = map_regular(path)?;
    debug_table_of(&data, path, source, expect_build_id)
}

/// [`debug_table`] over bytes already read (the fuzz target's entry).
pub fn debug_table_of(
    data: &[u8],
    path: &Path,
    source: SymbolSource,
    expect_build_id: Option<&[u8]>,
) -> Option<Table> {
    let file = object::File::parse(data).ok()?;
    if let (Some(want), Ok(Some(have))) = (expect_build_id, file.build_id()) {
        if want != have {
            return None;
        }
    }
    let t = function_table(file.symbols(), source, path);
    (!t.addrs.is_empty()).then_some(t)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Cheap check that `path` is an ELF file: its magic number only, so a
/// wrong `--mysqld` is refused without parsing a 30 MB binary twice.
pub fn check_elf(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::UnexpectedEof => Error::NotElf {
                path: path.to_owned(),
                reason: "file too short".into(),
            },
            _ => Error::Read {
                path: path.to_owned(),
                source,
            },
        })?;
    if magic != *b"\x7fELF" {
        return Err(Error::NotElf {
            path: path.to_owned(),
            reason: "no ELF magic number".into(),
        });
    }
    Ok(())
}

impl Resolver {
    /// Parses `exe` and locates its debug files under `debug_root`.
    pub fn open(exe: &Path, debug_root: &Path) -> Result<Self> {
        // Mapped, as the debug files are: a server binary is tens of MB.
        let f = std::fs::File::open(exe).map_err(|source| Error::Read {
            path: exe.to_owned(),
            source,
        })?;
        // SAFETY: a read-only map of a file we never write (see map_regular).
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|source| Error::Read {
            path: exe.to_owned(),
            source,
        })?;
        Self::from_bytes(exe, &map, debug_root)
    }

    /// [`Resolver::open`] over the executable's bytes, read by the caller
    /// (`exe` names it in messages and anchors the debuglink lookup).
    /// Hostile bytes give an error or fewer symbols, never a panic.
    pub fn from_bytes(exe: &Path, data: &[u8], debug_root: &Path) -> Result<Self> {
        let not_elf = |reason: String| Error::NotElf {
            path: exe.to_owned(),
            reason,
        };
        let file = object::File::parse(data).map_err(|e| not_elf(e.to_string()))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(not_elf(format!("{:?} file", file.format())));
        }
        let segments: Vec<_> = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (s.address(), s.size(), off, size)
            })
            .collect();
        if segments.is_empty() {
            return Err(not_elf("no loadable segments".into()));
        }
        let mut tables = vec![
            function_table(file.symbols(), SymbolSource::Symtab, exe),
            function_table(file.dynamic_symbols(), SymbolSource::Dynsym, exe),
        ];
        let mut looked_for = Vec::new();
        // The binary's own DWARF first (an unstripped -g build).
        let mut dwarf_files = vec![(exe.to_owned(), false)];

        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        if let Some(id) = build_id.as_deref().filter(|id| id.len() > 1) {
            let h = hex(id);
            let p = debug_root
                .join(".build-id")
                .join(&h[..2])
                .join(format!("{}.debug", &h[2..]));
            if let Some(t) = debug_table(&p, SymbolSource::BuildIdDebug, Some(id)) {
                tables.push(t);
                dwarf_files.push((p.clone(), false));
            }
            looked_for.push(p);
        }

        let link = file.gnu_debuglink().ok().flatten();
        if let Some((name, crc)) = link.and_then(|(n, crc)| Some((debuglink_name(n)?, crc))) {
            let dir = exe.parent().unwrap_or(Path::new("/"));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            for p in [
                dir.join(&name),
                dir.join(".debug").join(&name),
                debug_root.join(rel).join(&name),
            ] {
                let crc_ok = map_regular(&p).is_some_and(|d| crc32fast::hash(&d) == crc);
                if crc_ok {
                    if let Some(t) = debug_table(&p, SymbolSource::DebugLink, build_id.as_deref()) {
                        tables.push(t);
                        dwarf_files.push((p.clone(), false));
                        looked_for.push(p);
                        break;
                    }
                }
                looked_for.push(p);
            }
        }
        Ok(Self {
            exe: exe.to_owned(),
            segments,
            tables,
            looked_for,
            build_id,
            dwarf_files,
            dwarf: HashMap::new(),
            dwarf_names: Vec::new(),
        })
    }

    /// Adds a debug file fetched by build-id (debuginfod): its build-id
    /// must equal the executable's — a file of another build would place
    /// probes at wrong offsets. False when it is refused or has no symbols.
    pub fn add_fetched(&mut self, path: &Path, data: &[u8]) -> bool {
        let Some(want) = self.build_id.as_deref() else {
            return false;
        };
        let Ok(file) = object::File::parse(data) else {
            return false;
        };
        if file.build_id().ok().flatten() != Some(want) {
            return false;
        }
        match debug_table_of(data, path, SymbolSource::Debuginfod, Some(want)) {
            Some(t) => {
                self.tables.push(t);
                // Its DWARF is searched by the caller, if still needed
                // ([`Resolver::scan_dwarf_of`]), while the bytes are here.
                self.dwarf_files.push((path.to_owned(), true));
                self.looked_for.push(path.to_owned());
                true
            }
            None => false,
        }
    }

    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Converts a virtual address to an offset in the executable file.
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(va, memsz, _, filesz)| vaddr >= *va && vaddr - va < (*memsz).min(*filesz))
            .and_then(|(va, _, off, _)| (vaddr - va).checked_add(*off))
    }

    /// Resolves the first of `names` found, searching every name in one
    /// source before moving to the next source. A name not starting with
    /// `_Z` may be demangled (`log_write_up_to`, `log_t::flush`).
    pub fn resolve(&self, names: &[&str]) -> Option<Resolved> {
        for t in &self.tables {
            for name in names {
                let hit = if let Some(a) = t.addrs.get(*name) {
                    Some((name.to_string(), *a))
                } else if !name.starts_with("_Z") {
                    demangled_match(t, name)
                } else {
                    None
                };
                if let Some((symbol, vaddr)) = hit {
                    if let Some(file_offset) = self.file_offset(vaddr) {
                        return Some(Resolved {
                            symbol,
                            vaddr,
                            file_offset,
                            source: t.source,
                            found_in: t.path.clone(),
                            out_of_line: true,
                            inlined: Vec::new(),
                        });
                    }
                }
            }
        }
        names.iter().find_map(|n| self.resolve_in_dwarf(n))
    }

    /// Searches the DWARF of every file not searched yet for `names` (all
    /// at once: a server's DWARF is hundreds of MB). What is found there
    /// answers [`Resolver::resolve`] after the symbol tables. The files are
    /// mapped, not read: only the DWARF sections' pages are touched.
    pub fn scan_dwarf(&mut self, names: &[&str]) {
        self.dwarf_names = names.iter().map(|n| n.to_string()).collect();
        let todo: Vec<PathBuf> = self
            .dwarf_files
            .iter_mut()
            .filter(|(_, scanned)| !*scanned)
            .map(|(p, scanned)| {
                *scanned = true;
                p.clone()
            })
            .collect();
        for path in todo {
            if let Some(map) = map_regular(&path) {
                self.scan_dwarf_of(&path, &map);
            }
        }
    }

    /// Scans one file's DWARF for the names of the last
    /// [`Resolver::scan_dwarf`]; a file of another build is skipped.
    pub fn scan_dwarf_of(&mut self, path: &Path, data: &[u8]) {
        let Ok(file) = object::File::parse(data) else {
            return;
        };
        if let (Some(want), Ok(Some(have))) = (self.build_id.as_deref(), file.build_id()) {
            if want != have {
                return;
            }
        }
        let names: Vec<&str> = self.dwarf_names.iter().map(String::as_str).collect();
        let Some(found) = super::dwarf::find(&file, &names) else {
            return;
        };
        for (name, f) in self.dwarf_names.iter().zip(found) {
            if !f.is_empty() && !self.dwarf.contains_key(name) {
                self.dwarf.insert(name.clone(), (f, path.to_owned()));
            }
        }
    }

    fn resolve_in_dwarf(&self, name: &str) -> Option<Resolved> {
        let (found, path) = self.dwarf.get(name)?;
        let inlined: Vec<Site> = found
            .inlined
            .iter()
            .filter_map(|d| {
                Some(Site {
                    file_offset: self.file_offset(d.vaddr)?,
                    dwarf: d.clone(),
                })
            })
            .collect();
        let entry = found.entry.and_then(|v| Some((v, self.file_offset(v)?)));
        let (vaddr, file_offset) = match (entry, inlined.first()) {
            (Some(e), _) => e,
            (None, Some(s)) => (s.dwarf.vaddr, s.file_offset),
            (None, None) => return None,
        };
        Some(Resolved {
            symbol: name.to_string(),
            vaddr,
            file_offset,
            source: if entry.is_some() {
                SymbolSource::Dwarf
            } else {
                SymbolSource::DwarfInlined
            },
            found_in: path.clone(),
            out_of_line: entry.is_some(),
            inlined,
        })
    }

    /// True when any source holds a symbol table with functions: used to
    /// word the "stripped" message.
    pub fn has_debug_file(&self) -> bool {
        self.tables.iter().any(|t| {
            matches!(
                t.source,
                SymbolSource::BuildIdDebug | SymbolSource::DebugLink
            )
        })
    }
}

/// Finds a mangled symbol whose demangled form is `name`, either whole
/// (`log_t::flush(unsigned long)`) or without its parameter list.
fn demangled_match(t: &Table, name: &str) -> Option<(String, u64)> {
    let mut found: Vec<(&String, u64)> = t
        .addrs
        .iter()
        .filter(|(m, _)| m.starts_with("_Z"))
        .filter_map(|(m, a)| {
            let d = super::profiles::demangle(m)?;
            let base = d.split('(').next().unwrap_or(&d);
            (d == name || base == name).then_some((m, *a))
        })
        .collect();
    found.sort();
    found.first().map(|(m, a)| ((*m).clone(), *a))
}
