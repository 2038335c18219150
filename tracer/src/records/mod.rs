//! What the outputs are made of, below every command that makes them and
//! every sink that prints them: a run's records (legend, intervals'
//! summary, the main command's header and summary, why it ended) and the
//! sink traits (`run`); a sweep's cell records and how they are read
//! back (`cells`). Sessions hand records to a sink they are given; the
//! formats (`crate::report`) import these, never the commands.
pub mod cells;
pub mod run;
