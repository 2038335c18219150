//! How an optional figure prints in a table cell: "-" when absent.

pub(crate) fn opt_f(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

pub(crate) fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// Each header line a live view prints, one per combination of its five
/// optional column sets (`header(fallback, anatomy, io, binlog,
/// commit_path)`): what the docs' samples are checked against.
pub(crate) fn every_header(header: impl Fn([bool; 5]) -> String) -> Vec<String> {
    (0..32u8)
        .map(|bits| header(std::array::from_fn(|k| bits & (1 << k) != 0)))
        .collect()
}
