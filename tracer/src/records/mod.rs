//! What the outputs are made of, below every command that makes them and
//! every sink that prints them: a run's records (legend, intervals'
//! summary, the main command's header and summary, why it ended) and the
//! sink traits (`run`); a sweep's cell records and how they are read
//! back (`cells`, in the readers crate), and how a run's figures become
//! a cell's (`from_run`). Sessions hand records to a sink they are
//! given; the formats (`crate::report`) import these, never the commands.
mod from_run;
pub mod run;
