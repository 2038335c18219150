//! A server binary read for its probes: ELF symbols and debug files
//! (`symbols`), DWARF's inlined copies and parameter locations (`dwarf`),
//! the version a binary reports and readable C++ names (`profiles`).
pub mod dwarf;
pub mod profiles;
pub mod symbols;
