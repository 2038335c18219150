//! Functions that a debug file knows only from DWARF: an out-of-line copy
//! whose symbol was stripped (a `DW_TAG_subprogram` with a low PC), and
//! the inlined copies of a function (`DW_TAG_inlined_subroutine`), each of
//! which needs its own uprobe because no call ever reaches a symbol.
//!
//! A function is recognised by its linkage (mangled) name, or its plain
//! name for C, followed through `DW_AT_specification` and
//! `DW_AT_abstract_origin` as compilers spread it over declaration,
//! abstract instance and concrete copies. References are followed inside
//! one compilation unit, where GCC and Clang put them without LTO.
//!
//! At an inlined copy the arguments live wherever the optimiser left them.
//! The write probe's durable test reads a calling-convention register, so
//! for each copy the location of every parameter at its entry is read: a
//! site is "readable" only where DWARF puts the argument in that very
//! register. Anything else is reported as unknown, never guessed.
use std::borrow::Cow;

use gimli::{
    AttributeValue, DebuggingInformationEntry, DwarfSections, EndianSlice, LittleEndian, Operation,
    Unit, UnitOffset,
};
use object::{Object, ObjectSection};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// DWARF numbers of the SysV x86-64 argument registers RDI, RSI, RDX,
/// RCX, R8, R9 (DWARF numbers registers differently from the ISA).
const ARG_REGS: [u16; 6] = [5, 4, 1, 2, 8, 9];

/// A decompressed section larger than this is not read: a hostile header
/// could claim any size, and no server's DWARF section comes near it.
const MAX_SECTION: u64 = 4 << 30;

/// Nor one claiming to grow more than this from its compressed size
/// (zlib's own ceiling is about 1032; DWARF compresses 3-10 times).
const MAX_RATIO: u64 = 1100;

/// One inlined copy of a wanted function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineSite {
    /// Virtual address of the copy's entry (`DW_AT_entry_pc`, else the
    /// start of its first range).
    pub vaddr: u64,
    /// The function it was inlined into, for `-v`.
    pub caller: String,
    /// For each of the first six parameters: its DWARF register at the
    /// entry when it sits whole in one register there, else None.
    pub param_regs: [Option<u16>; 6],
}

impl InlineSite {
    /// True when argument `n` is in its calling-convention register at the
    /// entry, so a probe there reads it as it would at a real call.
    pub fn arg_readable(&self, n: u32) -> bool {
        let n = n as usize;
        n < ARG_REGS.len() && self.param_regs[n] == Some(ARG_REGS[n])
    }
}

/// What DWARF says about one wanted function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The out-of-line copy's entry, when there is one.
    pub entry: Option<u64>,
    /// Every inlined copy, in address order.
    pub inlined: Vec<InlineSite>,
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.entry.is_none() && self.inlined.is_empty()
    }
}

/// [`find`] over bytes (the fuzz target's entry); None when they are not
/// an object file or have no DWARF.
pub fn find_in(data: &[u8], wanted: &[&str]) -> Option<Vec<Found>> {
    find(&object::File::parse(data).ok()?, wanted)
}

/// Searches `file`'s DWARF for `wanted` (linkage names, or C names); one
/// [`Found`] per wanted name, empty where DWARF does not have it. None when
/// the file has no DWARF that parses.
pub fn find(file: &object::File, wanted: &[&str]) -> Option<Vec<Found>> {
    // Absent, or NOBITS as in a stripped binary: no DWARF to read.
    file.section_by_name(".debug_info")?.file_range()?;
    let sections = DwarfSections::load(|id| -> Result<Cow<[u8]>, ()> {
        Ok(section(file, id.name()).unwrap_or(Cow::Borrowed(&[])))
    })
    .ok()?;
    let dwarf = sections.borrow(|s| EndianSlice::new(s, LittleEndian));
    let mut found = vec![Found::default(); wanted.len()];
    let mut units = dwarf.units();
    // A unit that does not parse is skipped: the others may still hold it.
    while let Ok(Some(header)) = units.next() {
        if let Ok(unit) = dwarf.unit(header) {
            let _ = scan_unit(&dwarf, &unit, wanted, &mut found);
        }
    }
    for f in &mut found {
        f.inlined.sort_by_key(|s| s.vaddr);
        f.inlined.dedup_by_key(|s| s.vaddr);
    }
    Some(found)
}

/// A section's bytes, decompressed when it is compressed; None when it is
/// absent, NOBITS, or claims an implausible size.
fn section<'d>(file: &object::File<'d>, name: &str) -> Option<Cow<'d, [u8]>> {
    let s = file.section_by_name(name)?;
    let range = s.compressed_file_range().ok()?;
    let ratio_ok = range.format == object::CompressionFormat::None
        || range.uncompressed_size <= range.compressed_size.saturating_mul(MAX_RATIO);
    if range.uncompressed_size > MAX_SECTION || !ratio_ok {
        return None;
    }
    s.uncompressed_data().ok()
}

/// What one subprogram DIE of a unit says about its identity.
#[derive(Default)]
struct Sub<'a> {
    linkage: Option<R<'a>>,
    name: Option<R<'a>>,
    /// `DW_AT_specification` or `DW_AT_abstract_origin`, inside the unit.
    origin: Option<UnitOffset>,
    /// Its formal parameters, in order (the abstract ones define indexes).
    params: Vec<UnitOffset>,
}

/// A concrete copy seen in the unit, resolved once the whole unit is read.
enum Copy {
    OutOfLine {
        origin: UnitOffset,
        entry: u64,
    },
    Inlined {
        origin: UnitOffset,
        entry: u64,
        caller: Option<UnitOffset>,
        /// (abstract parameter, its register at the entry).
        params: Vec<(Option<UnitOffset>, Option<u16>)>,
    },
}

fn scan_unit<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &Unit<R<'a>>,
    wanted: &[&str],
    found: &mut [Found],
) -> gimli::Result<()> {
    use std::collections::HashMap;
    let mut subs: HashMap<UnitOffset, Sub<'a>> = HashMap::new();
    let mut copies: Vec<Copy> = Vec::new();
    // The DIE path from the unit root: (depth, offset, tag).
    let mut path: Vec<(isize, UnitOffset, gimli::DwTag)> = Vec::new();
    let mut cursor = unit.entries();
    while let Some(e) = cursor.next_dfs()? {
        let depth = e.depth();
        while path.last().is_some_and(|(d, _, _)| *d >= depth) {
            path.pop();
        }
        let tag = e.tag();
        let parent = path.last().map(|(_, o, t)| (*o, *t));
        match tag {
            gimli::DW_TAG_subprogram => {
                let sub = Sub {
                    linkage: string(dwarf, unit, e, gimli::DW_AT_linkage_name)
                        .or_else(|| string(dwarf, unit, e, gimli::DW_AT_MIPS_linkage_name)),
                    name: string(dwarf, unit, e, gimli::DW_AT_name),
                    origin: origin(e),
                    params: Vec::new(),
                };
                if let (Some(o), Some(entry)) =
                    (sub.origin.or(Some(e.offset())), low_pc(dwarf, unit, e))
                {
                    copies.push(Copy::OutOfLine { origin: o, entry });
                }
                subs.insert(e.offset(), sub);
            }
            gimli::DW_TAG_inlined_subroutine => {
                if let (Some(o), Some(entry)) = (origin(e), entry_pc(dwarf, unit, e)) {
                    // The concrete subprogram it sits in (nested inlines
                    // report the outermost real function).
                    let caller = path
                        .iter()
                        .find(|(_, _, t)| *t == gimli::DW_TAG_subprogram)
                        .map(|(_, off, _)| *off);
                    copies.push(Copy::Inlined {
                        origin: o,
                        entry,
                        caller,
                        params: Vec::new(),
                    });
                }
            }
            gimli::DW_TAG_formal_parameter => match parent {
                Some((p, gimli::DW_TAG_subprogram)) => {
                    if let Some(s) = subs.get_mut(&p) {
                        s.params.push(e.offset());
                    }
                }
                Some((_, gimli::DW_TAG_inlined_subroutine)) => {
                    // Parameters follow their inlined copy at once.
                    if let Some(Copy::Inlined { params, entry, .. }) = copies.last_mut() {
                        let reg = register_at(dwarf, unit, e, *entry);
                        params.push((origin(e), reg));
                    }
                }
                _ => {}
            },
            _ => {}
        }
        path.push((depth, e.offset(), tag));
    }
    for c in copies {
        let (origin, entry) = match &c {
            Copy::OutOfLine { origin, entry } | Copy::Inlined { origin, entry, .. } => {
                (*origin, *entry)
            }
        };
        let Some(i) = matches(&subs, origin, wanted) else {
            continue;
        };
        match c {
            Copy::OutOfLine { .. } => {
                found[i].entry.get_or_insert(entry);
            }
            Copy::Inlined { caller, params, .. } => {
                let abstract_params = chain(&subs, origin)
                    .find(|s| !s.params.is_empty())
                    .map(|s| s.params.clone())
                    .unwrap_or_default();
                let mut param_regs = [None; 6];
                for (abs, reg) in params {
                    let idx = abs.and_then(|a| abstract_params.iter().position(|p| *p == a));
                    if let Some(slot) = idx.and_then(|i| param_regs.get_mut(i)) {
                        *slot = reg;
                    }
                }
                let caller = caller
                    .and_then(|c| display_name(&subs, c))
                    .unwrap_or_else(|| "?".into());
                found[i].inlined.push(InlineSite {
                    vaddr: entry,
                    caller,
                    param_regs,
                });
            }
        }
    }
    Ok(())
}

/// The subprogram at `start` and those it refers to, at most 8 deep (a
/// cycle in hostile DWARF ends there).
fn chain<'s, 'a>(
    subs: &'s std::collections::HashMap<UnitOffset, Sub<'a>>,
    start: UnitOffset,
) -> impl Iterator<Item = &'s Sub<'a>> {
    let mut next = Some(start);
    std::iter::from_fn(move || {
        let s = subs.get(&next?)?;
        next = s.origin;
        Some(s)
    })
    .take(8)
}

/// Which wanted name the subprogram at `start` is.
fn matches(
    subs: &std::collections::HashMap<UnitOffset, Sub<'_>>,
    start: UnitOffset,
    wanted: &[&str],
) -> Option<usize> {
    for s in chain(subs, start) {
        for (i, w) in wanted.iter().enumerate() {
            let hit = |r: Option<R>| r.is_some_and(|r| r.slice() == w.as_bytes());
            // A mangled name only matches a linkage name; a C name its name.
            if hit(s.linkage) || (!w.starts_with("_Z") && hit(s.name)) {
                return Some(i);
            }
        }
    }
    None
}

/// A readable name for `-v`: demangled linkage name, else the plain name.
fn display_name(
    subs: &std::collections::HashMap<UnitOffset, Sub<'_>>,
    at: UnitOffset,
) -> Option<String> {
    let text = |r: R| String::from_utf8_lossy(r.slice()).into_owned();
    let linkage = chain(subs, at).find_map(|s| s.linkage).map(text);
    if let Some(l) = linkage {
        return Some(super::profiles::short_name(&l));
    }
    chain(subs, at).find_map(|s| s.name).map(text)
}

fn string<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &Unit<R<'a>>,
    e: &DebuggingInformationEntry<R<'a>>,
    at: gimli::DwAt,
) -> Option<R<'a>> {
    dwarf.attr_string(unit, e.attr_value(at)?).ok()
}

fn origin(e: &DebuggingInformationEntry<R<'_>>) -> Option<UnitOffset> {
    for at in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
        if let Some(AttributeValue::UnitRef(o)) = e.attr_value(at) {
            return Some(o);
        }
    }
    None
}

fn low_pc<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &Unit<R<'a>>,
    e: &DebuggingInformationEntry<R<'a>>,
) -> Option<u64> {
    let v = dwarf
        .attr_address(unit, e.attr_value(gimli::DW_AT_low_pc)?)
        .ok()??;
    (v != 0).then_some(v)
}

/// Where an inlined copy is entered: `DW_AT_entry_pc`, else `DW_AT_low_pc`,
/// else the lowest start of its ranges.
fn entry_pc<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &Unit<R<'a>>,
    e: &DebuggingInformationEntry<R<'a>>,
) -> Option<u64> {
    if let Some(v) = e.attr_value(gimli::DW_AT_entry_pc) {
        let addr = match v {
            // DWARF 5 allows an offset from the low PC.
            AttributeValue::Udata(off) => low_pc(dwarf, unit, e).map(|l| l + off),
            v => dwarf.attr_address(unit, v).ok().flatten(),
        };
        if let Some(a) = addr.filter(|a| *a != 0) {
            return Some(a);
        }
    }
    if let Some(l) = low_pc(dwarf, unit, e) {
        return Some(l);
    }
    let mut ranges = dwarf.die_ranges(unit, e).ok()?;
    let mut lowest: Option<u64> = None;
    while let Ok(Some(r)) = ranges.next() {
        if r.begin != 0 && r.begin < r.end {
            lowest = Some(lowest.map_or(r.begin, |l| l.min(r.begin)));
        }
    }
    lowest
}

/// The register holding a parameter at `pc`, when its location there is
/// exactly one register (`DW_OP_regN`/`DW_OP_regx`, nothing else).
fn register_at<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &Unit<R<'a>>,
    e: &DebuggingInformationEntry<R<'a>>,
    pc: u64,
) -> Option<u16> {
    let loc = e.attr_value(gimli::DW_AT_location)?;
    if let AttributeValue::Exprloc(expr) = loc {
        return single_register(expr, unit.encoding());
    }
    let mut list = dwarf.attr_locations(unit, loc).ok()??;
    while let Ok(Some(entry)) = list.next() {
        if entry.range.begin <= pc && pc < entry.range.end {
            return single_register(entry.data, unit.encoding());
        }
    }
    None
}

fn single_register(expr: gimli::Expression<R<'_>>, enc: gimli::Encoding) -> Option<u16> {
    let mut ops = expr.operations(enc);
    let first = ops.next().ok()??;
    if ops.next().ok()?.is_some() {
        return None;
    }
    match first {
        Operation::Register { register } => Some(register.0),
        _ => None,
    }
}
