//! SIGINT, SIGTERM and SIGHUP as a flag, for the synchronous phases
//! where no async signal handler is polled: a debuginfod download of
//! hundreds of MB must stop on Ctrl-C, remove its temp file and exit 130,
//! not die with a half file in the cache.
//!
//! Installed once and kept: signal-hook's registry cannot restore the
//! default action, so the flag stays the process's way to hear a signal
//! until the async handlers (which coexist with it) take over.
use std::sync::{
    atomic::{AtomicBool, Ordering},
    OnceLock,
};

static FLAG: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<()> = OnceLock::new();

/// Starts hearing the signals (idempotent).
pub fn install() {
    INSTALLED.get_or_init(|| {
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            // Only fails for the forbidden signals (SIGKILL, SIGSTOP...).
            let _ = signal_hook::flag::register(sig, &FLAG);
        }
    });
}

/// True once one of the signals arrived since [`install`].
pub fn fired() -> bool {
    FLAG.load(Ordering::SeqCst)
}
