//! `cargo xtask demo`: the whole picture on a fresh machine in one command
//! until the managed-server main command lands — a throwaway server, the
//! built-in workload, and `commitscope trace` on the same seconds.
use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{bail, Context};
use clap::Args;

use crate::util::{cargo, root, start_trace};

#[derive(Args)]
pub struct DemoArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 100)]
    threads: u32,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    duration: u32,
    /// Server binary (default: Debian's mariadbd).
    #[arg(long)]
    mysqld: Option<PathBuf>,
    /// Use the symbolized MariaDB in ../shared/fixtures (exact n_write).
    #[arg(long)]
    fixture: bool,
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    cargo(&["build", "--release", "-p", "commitscope"])?;
    let cs = root().join("target/release/commitscope");
    let (bin, share) = if a.fixture {
        let f = testkit::symbols_fixture()
            .context("../shared/fixtures/mariadb-10.11.18-symbols is absent")?;
        (f.join("bin/mariadbd"), Some(f.join("share")))
    } else {
        let b = a
            .mysqld
            .or_else(testkit::system_mariadbd)
            .context("no server binary: install mariadb-server or pass --mysqld")?;
        (b, None)
    };
    eprintln!("demo: starting a throwaway {} ...", bin.display());
    let server =
        testkit::Server::start(&bin, share.as_deref(), &[]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let sock = server.socket.display().to_string();
    let mut tracer = start_trace(&cs, server.pid(), &[], Stdio::inherit())?;
    let wl = Command::new(&cs)
        .args([
            "workload",
            "--socket",
            &sock,
            "--user",
            "root",
            "--defaults-file",
            "/dev/null",
        ])
        .args([
            "--threads",
            &a.threads.to_string(),
            "--duration",
            &a.duration.to_string(),
        ])
        .stdout(Stdio::piped())
        .output()?;
    // SIGINT, so the tracer prints its summary. SAFETY: our own child.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    tracer.wait()?;
    println!(
        "\n-- workload (commitscope workload) --\n{}",
        String::from_utf8_lossy(&wl.stdout)
    );
    drop(server);
    if !wl.status.success() {
        bail!("workload failed ({})", wl.status);
    }
    Ok(())
}
