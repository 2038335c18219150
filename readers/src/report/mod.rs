//! A sweep's report rebuilt from its records: the table and summaries
//! (`sweep`), the charts (`charts`), the grid both lay out (`grid`).
pub mod charts;
pub mod grid;
pub mod sweep;
