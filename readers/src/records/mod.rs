//! A sweep's cell records and how they are read back (`cells`).
pub mod cells;
