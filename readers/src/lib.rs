//! What commitscope reads and writes with no server and no kernel: a
//! server binary's symbols and DWARF (`probes`), the families' rows
//! (`family`), option text and option files (`server::options`,
//! `mycnf`), a sweep's records and the report rebuilt from them
//! (`records`, `report`), and the files written for the user
//! (`outfile`).
//!
//! Every reader of hostile input is here, and only what they need: the
//! fuzz targets (`fuzz/`) build this crate alone, not the tool's async
//! runtime, MySQL clients, TLS, HTTP and eBPF loader, which were most of
//! their build's CPU. The modules keep the paths they have in the tool
//! (`commitscope::probes::symbols` is `readers::probes::symbols`),
//! which re-exports them.
pub mod binlog;
pub mod commit_path;
pub mod error;
pub mod family;
pub mod mycnf;
pub mod outfile;
pub mod probes;
pub mod records;
pub mod report;
pub mod server;

pub use error::{Error, Result};
