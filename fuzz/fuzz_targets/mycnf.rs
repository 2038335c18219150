//! The option-file reader: the input is a `my.cnf` that may `!include`
//! itself (as `my.cnf`, `again.cnf` or anything in `conf.d/`), so cycles,
//! deep and wide include trees are reached from the seeds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(d) = tempfile::tempdir() else {
        return;
    };
    let conf_d = d.path().join("conf.d");
    let _ = std::fs::create_dir(&conf_d);
    for p in [
        d.path().join("my.cnf"),
        d.path().join("again.cnf"),
        conf_d.join("a.cnf"),
    ] {
        if std::fs::write(&p, data).is_err() {
            return;
        }
    }
    let _ = readers::mycnf::read(&d.path().join("my.cnf"), true);
    let _ = readers::mycnf::client_section(&String::from_utf8_lossy(data));
});
