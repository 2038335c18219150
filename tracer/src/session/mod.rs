//! One session of the main command (and of `study`): the server (managed
//! or existing), the probes on its pid, then measured runs of the built-in
//! workload with both halves read on the same ticks. Teardown order is the
//! field order of [`Stage`]: probes detached, control connection closed,
//! managed server stopped, its temp dir removed — on success, on error and
//! on Ctrl-C in any phase.
//!
//! This file only names the rooms: stop (the Ctrl-C watch), phases (timed
//! startup), stage (server, connection, probes; restart, teardown),
//! measure (one run), plan (the flags checked once, before anything
//! starts), run (the main command).
pub mod measure;
pub mod phases;
pub mod plan;
pub mod run;
pub mod stage;
pub mod stop;

pub use measure::Measure;
pub use phases::Phases;
pub use plan::{check_workload, group_takes, shape_of, RunPlan, StagePlan};
pub use run::run;
pub use stage::{setup, Stage};
pub use stop::Stop;
