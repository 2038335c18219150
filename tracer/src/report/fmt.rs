//! How an optional figure prints in a table cell: "-" when absent.

pub(crate) fn opt_f(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

pub(crate) fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}
