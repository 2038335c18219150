//! Where MariaDB's binlog leader stops waiting for a fuller group, and
//! why. `MYSQL_BIN_LOG::wait_for_sufficient_commits()` has no return value
//! that says it; it adds 1 to one of three adjacent counters of the
//! binlog object at each exit (`group_commit_trigger_count`, `_timeout`,
//! `_lock_wait`, declared in that order: the server's
//! `Binlog_group_commit_trigger_*`). Those adds are found in the
//! function's machine code, and a probe on each says which exit was
//! taken: exact, with no read of the server's memory, on stock stripped
//! builds too (the function is exported).
use std::{io::Read, path::Path};

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use object::{Object, ObjectSymbol};
use readers::probes::symbols::Resolved;

/// The file offsets of each exit's add, per reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Triggers {
    pub count: Vec<u64>,
    pub timeout: Vec<u64>,
    pub lock_wait: Vec<u64>,
}

/// The adds in the function `at` of `exe`, or why they were not found
/// (one line, said once by the caller).
pub fn find(exe: &Path, at: &Resolved) -> Result<Triggers, String> {
    let size = symbol_size(&at.found_in, &at.symbol)
        .ok_or_else(|| format!("the size of {} is not in its symbol table", at.symbol))?;
    let mut code = vec![0u8; size as usize];
    let mut f = std::fs::File::open(exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(at.file_offset))
        .and_then(|_| f.read_exact(&mut code))
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let ips = in_code(&code, at.vaddr).ok_or_else(|| {
        "its three trigger counters' adds are not in its code (a build this version does not know)"
            .to_string()
    })?;
    let off = |v: Vec<u64>| {
        v.into_iter()
            .map(|ip| at.file_offset + (ip - at.vaddr))
            .collect()
    };
    let [count, timeout, lock_wait] = ips;
    Ok(Triggers {
        count: off(count),
        timeout: off(timeout),
        lock_wait: off(lock_wait),
    })
}

/// A function's size from the symbol tables of `file`.
fn symbol_size(file: &Path, name: &str) -> Option<u64> {
    let data = std::fs::read(file).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    obj.dynamic_symbols()
        .chain(obj.symbols())
        .find(|s| s.name() == Ok(name) && s.size() > 0)
        .map(|s| s.size())
}

/// The addresses of the adds of 1 to three 8-byte fields at
/// displacements d, d + 8, d + 16 off one base register (count, timeout,
/// lock wait), in `code` placed at `ip`. None unless exactly one such
/// triple is there.
pub fn in_code(code: &[u8], ip: u64) -> Option<[Vec<u64>; 3]> {
    let mut adds: Vec<(u64, u64)> = Vec::new();
    let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    while d.can_decode() {
        d.decode_out(&mut ins);
        if let Some(disp) = add_one_to_field(&ins) {
            adds.push((disp, ins.ip()));
        }
    }
    let at = |disp: u64| -> Vec<u64> {
        adds.iter()
            .filter(|(d, _)| *d == disp)
            .map(|(_, ip)| *ip)
            .collect()
    };
    let mut triples = adds
        .iter()
        .map(|(d, _)| *d)
        .filter(|d| !at(d + 8).is_empty() && !at(d + 16).is_empty());
    let first = triples.next()?;
    if triples.any(|d| d != first) {
        return None;
    }
    Some([at(first), at(first + 8), at(first + 16)])
}

/// `add qword [reg + disp], 1` or `inc qword [reg + disp]`: the
/// displacement.
fn add_one_to_field(i: &Instruction) -> Option<u64> {
    let one = match i.mnemonic() {
        Mnemonic::Add => i.op_count() == 2 && immediate(i.op1_kind()) && i.immediate(1) == 1,
        Mnemonic::Inc => i.op_count() == 1,
        _ => false,
    };
    let field = i.op0_kind() == OpKind::Memory
        && i.memory_size() == iced_x86::MemorySize::UInt64
        && !matches!(i.memory_base(), Register::None | Register::RIP)
        && i.memory_index() == Register::None;
    (one && field).then(|| i.memory_displacement64())
}

/// An immediate operand, of any width.
fn immediate(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::Immediate8
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `addq $0x1, D(%r12)`, as MariaDB 10.11's build has it.
    fn add(d: u16) -> Vec<u8> {
        let [lo, hi] = d.to_le_bytes();
        vec![0x49, 0x83, 0x84, 0x24, lo, hi, 0x00, 0x00, 0x01]
    }

    #[test]
    fn the_three_adds_are_found_by_their_adjacent_fields() {
        // lock wait, count, timeout, lock wait, count, with a ret and a
        // nop between, placed at 0x1000.
        let mut code = Vec::new();
        for (i, d) in [0xbf8, 0xbe8, 0xbf0, 0xbf8, 0xbe8].into_iter().enumerate() {
            code.extend(add(d));
            code.push(if i % 2 == 0 { 0xc3 } else { 0x90 });
        }
        let [count, timeout, lock_wait] = in_code(&code, 0x1000).unwrap();
        assert_eq!(count, [0x100a, 0x1028]);
        assert_eq!(timeout, [0x1014]);
        assert_eq!(lock_wait, [0x1000, 0x101e]);
    }

    #[test]
    fn no_triple_or_two_of_them_is_none() {
        let two: Vec<u8> = [0xbe8, 0xbf0].into_iter().flat_map(add).collect();
        assert_eq!(in_code(&two, 0), None);
        let six: Vec<u8> = [0xbe8, 0xbf0, 0xbf8, 0x10, 0x18, 0x20]
            .into_iter()
            .flat_map(add)
            .collect();
        assert_eq!(in_code(&six, 0), None);
    }
}
