//! `commitscope report DIR` over a hostile results directory: the input up
//! to its first 0xff byte is `sweep.json`, the rest `cells.jsonl`; the
//! table, summaries and charts are all rebuilt from them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (meta, cells) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(d) = tempfile::tempdir() else {
        return;
    };
    if std::fs::write(d.path().join("sweep.json"), meta).is_err()
        || std::fs::write(d.path().join("cells.jsonl"), cells).is_err()
    {
        return;
    }
    let _ = readers::report::sweep::rebuild(d.path(), &mut std::io::sink());
});
