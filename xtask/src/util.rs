//! Small process helpers for the tasks.
use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{bail, Context};

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command, inheriting stdio; fails on non-zero exit.
pub fn status(cmd: &mut Command) -> anyhow::Result<()> {
    let st = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

/// Runs a command and returns its stdout (stderr passed through).
pub fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when the command runs and exits 0 (output discarded).
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    status(Command::new(cargo).args(args).current_dir(root()))
}

/// Starts `commitscope trace --pid PID ARGS` and returns once its probes
/// are attached (its "tracing pid" line). Its stderr keeps being echoed
/// to ours from a thread, so `-v` lines and errors stay visible.
pub fn start_trace(
    commitscope: &Path,
    pid: u32,
    args: &[&str],
    stdout: Stdio,
) -> anyhow::Result<Child> {
    let mut child = Command::new(commitscope)
        .args(["trace", "--pid", &pid.to_string()])
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start commitscope trace")?;
    let err = child.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(err).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) => {
                eprintln!("{l}");
                if l.contains("commitscope: tracing pid") {
                    break;
                }
            }
            _ => bail!("commitscope trace did not attach"),
        }
    }
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            eprintln!("{l}");
        }
    });
    Ok(child)
}
