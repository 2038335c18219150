//! The async runtime every command's clock runs on.
use crate::error::{Error, Result};

/// The single-threaded runtime every command's clock runs on (the
/// workload's workers have threads of their own).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the async runtime: {e}")))
}
