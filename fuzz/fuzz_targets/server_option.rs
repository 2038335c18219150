//! Command-line values parsed from text: `--server-option KEY=VALUE`
//! (and a sweep's `KEY=V1,V2` lists), `--server-version`, the server's
//! `--version` output, and symbol names shortened for display.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readers::{
    family::{parse_version_output, ServerId},
    probes::profiles::short_name,
    server::options::{OptionAxis, ServerOption},
};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(o) = s.parse::<ServerOption>() {
        let _ = (o.arg(), o.sql_value(), o.variable(), o.to_string());
        if let Ok(axis) = OptionAxis::from_option(&o) {
            for i in 0..axis.values.len().min(64) {
                let _ = axis.option(i).sql_value();
            }
        }
    }
    let _ = s.parse::<ServerId>().map(|id| id.to_string());
    let _ = parse_version_output(s);
    let _ = short_name(s);
});
