//! Ctrl-C, SIGTERM and SIGHUP as a watch every phase can wait on.

use tokio::sync::watch;

use crate::error::{Error, Result};

/// Ctrl-C and SIGTERM, installed once before anything starts so that no
/// phase can miss them (a signal then never kills us half-way).
#[derive(Clone)]
pub struct Stop {
    rx: watch::Receiver<bool>,
}

impl Stop {
    /// Must be called inside the runtime.
    pub fn install() -> Result<Stop> {
        use tokio::signal::unix::{signal, SignalKind};
        let err =
            |e: std::io::Error| Error::Runtime(format!("cannot install a signal handler: {e}"));
        let mut int = signal(SignalKind::interrupt()).map_err(err)?;
        let mut term = signal(SignalKind::terminate()).map_err(err)?;
        // The terminal went away: clean up all the same.
        let mut hup = signal(SignalKind::hangup()).map_err(err)?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                let _ = tx.send(true);
            }
        });
        Ok(Stop { rx })
    }

    pub fn fired(&self) -> bool {
        *self.rx.borrow() || crate::interrupt::fired()
    }

    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}
