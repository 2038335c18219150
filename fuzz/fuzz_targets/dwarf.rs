//! The DWARF reader: any bytes as a debug file searched for the write and
//! flush functions (subprograms, inlined copies, parameter locations,
//! references between entries, compressed sections).
#![no_main]
use libfuzzer_sys::fuzz_target;
use readers::probes::dwarf::find_in;

fuzz_target!(|data: &[u8]| {
    if let Some(found) = find_in(
        data,
        &[
            "_Z15log_write_up_tombPK19completion_callback",
            "_ZN5log_t5flushEm",
            "log_write_up_to",
        ],
    ) {
        for f in &found {
            for s in &f.inlined {
                for n in 0..8 {
                    let _ = s.arg_readable(n);
                }
            }
        }
    }
});
