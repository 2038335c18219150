//! `--server-option KEY=VALUE` and a sweep's value lists (`options`).
pub mod options;
