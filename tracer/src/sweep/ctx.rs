//! What every step of a sweep reads: its arguments, the checked spec, the
//! results store, the Ctrl-C watch and the timed phases.
use super::{spec::Spec, store::Store};
use crate::{
    cli::SweepArgs,
    session::{Phases, Stop},
};

/// What every step of a sweep reads.
pub struct Ctx<'a> {
    pub args: &'a SweepArgs,
    pub spec: &'a Spec,
    pub store: &'a Store,
    pub stop: &'a Stop,
    pub ph: &'a Phases,
}
