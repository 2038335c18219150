//! commitscope: eBPF probes in mysqld and the kernel that count how InnoDB
//! batches commits into redo flushes. The binary is a thin shell over this.
pub mod argv;
pub mod binlog;
pub mod cli;
pub mod commit_path;
pub mod deltas;
pub mod error;
pub mod exporter;
pub mod family;
pub mod fds;
pub mod help_text;
pub mod interrupt;
pub mod legend;
pub mod manual;
pub mod outfile;
pub mod probes;
pub mod replication;
pub mod report;
pub mod runtime;
pub mod sample;
pub mod server;
pub mod session;
pub mod study;
pub mod sweep;
pub mod trace;
pub mod version;
pub mod where_cmd;
