//! Where a function-entry uprobe goes so that the kernel emulates the
//! instruction under it instead of single-stepping it out of line. x86
//! uprobes emulate branches, `push` and `nop`s; anything else costs a
//! second trap on every hit (about 12 µs here against 1 µs emulated:
//! `cargo xtask bench uprobe`). Two prologues are common on the paths
//! commitscope probes, and both can be stepped over without changing
//! anything a probe reads (argument registers, the return address on top
//! of the stack):
//! - `endbr64`, first in every function of a CET build (`-fcf-protection`:
//!   Debian 13's server);
//! - glibc's syscall wrappers (`fsync`, `write`, `pwrite64` ...): a
//!   RIP-relative `cmpb $0, __libc_single_threaded(%rip)`, sometimes a
//!   `mov %rcx,%r10`, then a conditional jump — the jump is emulated, and
//!   the two before it only set flags and `r10`.

/// `endbr64`.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// `mov %rcx,%r10`: the syscall ABI's fourth argument register.
const MOV_RCX_R10: [u8; 3] = [0x49, 0x89, 0xca];

/// How many bytes at a function's entry (`code`, its first bytes) the
/// probe skips: 0 when the first instruction is not one of the above.
pub fn entry_skip(code: &[u8]) -> u64 {
    let mut at = 0;
    if code.starts_with(&ENDBR64) {
        at = 4;
    }
    // cmpb $imm8, disp32(%rip): 80 3d <disp32> <imm8>.
    let rest = &code[at..];
    if rest.len() >= 7 && rest[0] == 0x80 && rest[1] == 0x3d {
        let mut next = at + 7;
        if code[next..].starts_with(&MOV_RCX_R10) {
            next += 3;
        }
        if is_jcc(&code[next..]) {
            at = next;
        }
    }
    at as u64
}

/// A conditional jump: 70-7f rel8, or 0f 80-8f rel32.
fn is_jcc(code: &[u8]) -> bool {
    match code {
        [b, ..] if (0x70..=0x7f).contains(b) => true,
        [0x0f, b, ..] => (0x80..=0x8f).contains(b),
        _ => false,
    }
}

/// The bytes at file offset `offset` of `path` (16 of them, or fewer at
/// its end; none when it cannot be read).
pub fn code_at(path: &std::path::Path, offset: u64) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 16];
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let n = f.read_at(&mut buf, offset).unwrap_or(0);
    buf[..n].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_wrappers_are_probed_at_their_conditional_jump() {
        // Debian 12's fsync: cmpb $0x0,0xdc9c1(%rip); je; mov $0x4a,%eax.
        let fsync = [
            0x80, 0x3d, 0xc1, 0xc9, 0x0d, 0x00, 0x00, 0x74, 0x17, 0xb8, 0x4a, 0, 0, 0,
        ];
        assert_eq!(entry_skip(&fsync), 7);
        // pwrite64: cmpb; mov %rcx,%r10; je.
        let pwrite = [
            0x80, 0x3d, 0x61, 0x51, 0x0e, 0x00, 0x00, 0x49, 0x89, 0xca, 0x74, 0x14,
        ];
        assert_eq!(entry_skip(&pwrite), 10);
        // A cmpb followed by anything but a jump: left alone.
        let other = [0x80, 0x3d, 0, 0, 0, 0, 0, 0xb8, 0x4a, 0, 0, 0];
        assert_eq!(entry_skip(&other), 0);
    }

    #[test]
    fn cet_builds_are_probed_past_endbr64_and_others_where_they_begin() {
        assert_eq!(entry_skip(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48]), 4);
        assert_eq!(entry_skip(&[0x55, 0x48, 0x89, 0xe5]), 0);
        assert_eq!(entry_skip(&[0x41, 0x57]), 0);
        assert_eq!(entry_skip(&[]), 0);
        // Both: endbr64 then glibc's wrapper prologue.
        let both = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x80, 0x3d, 1, 2, 3, 4, 0, 0x0f, 0x84, 0, 0, 0, 0,
        ];
        assert_eq!(entry_skip(&both), 11);
    }
}
