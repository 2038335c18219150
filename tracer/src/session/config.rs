//! The workload flags checked before anything starts, and the shape of
//! the server the runs need.

use workload::{conn::ConnArgs, engine::Config};

use crate::{error::Result, server::sizing::Shape};

/// Validates workload flags before anything starts. A managed server's
/// socket is not known yet, so they are checked against a placeholder
/// endpoint (nothing connects to it).
pub fn check_workload(args: &workload::cli::WorkloadArgs) -> Result<Config> {
    if args.conn.any_given() {
        return Ok(workload::run::config(args)?.0);
    }
    let mut wa = args.clone();
    wa.conn = ConnArgs {
        socket: Some("/nonexistent".into()),
        defaults_file: Some("/dev/null".into()),
        user: Some("root".into()),
        ..Default::default()
    };
    Ok(workload::run::config(&wa)?.0)
}

/// What the server must take for runs of these configs.
pub fn shape_of<'a>(cfgs: impl IntoIterator<Item = &'a Config>) -> Shape {
    cfgs.into_iter().fold(Shape::default(), |s, c| Shape {
        clients: s.clients.max(c.peak_connections().saturating_sub(1) as u32),
        warehouses: s.warehouses.max(c.tpcc.as_ref().map(|t| t.warehouses)),
    })
}
