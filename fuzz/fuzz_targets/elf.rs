//! The executable and debug-file reader: any bytes as a server binary
//! (segments, .symtab/.dynsym, build-id, debuglink) and as a debug file.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use readers::probes::symbols::{debug_table_of, debuglink_name, Resolver, SymbolSource};

fuzz_target!(|data: &[u8]| {
    // Debug files are looked for under a root that does not exist: the
    // target reads nothing but its input.
    let exe = Path::new("/nonexistent/commitscope-fuzz/mariadbd");
    if let Ok(r) = Resolver::from_bytes(exe, data, Path::new("/nonexistent/debug")) {
        let _ = r.resolve(&["log_write_up_to", "log_t::flush", "_ZN5log_t5flushEm"]);
        for vaddr in [0, 1, u64::MAX / 2, u64::MAX] {
            let _ = r.file_offset(vaddr);
        }
    }
    let _ = debug_table_of(data, exe, SymbolSource::BuildIdDebug, Some(b"\x01\x02"));
    let _ = debuglink_name(data);
});
