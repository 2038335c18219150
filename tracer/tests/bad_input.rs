//! Bad input gets one line naming the problem and what to do, a non-zero
//! exit, and never a panic.
mod common;

use std::process::{Command, Stdio};

use common::*;

/// Runs commitscope and returns (exit code, stderr), asserting the
/// one-line, no-panic contract.
fn fails(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run commitscope");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "expected failure, got success: {err}"
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("commitscope: error: "), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    err
}

#[test]
fn no_such_pid() {
    if needs_root() {
        return;
    }
    let err = fails(commitscope().args(["trace", "--pid", "999999999"]));
    assert!(err.contains("no process with pid 999999999"), "{err}");
}

#[test]
fn mysqld_not_elf() {
    if needs_root() {
        return;
    }
    let err = fails(commitscope().args(["trace", "--mysqld", "/etc/passwd"]));
    assert!(
        err.contains("/etc/passwd is not an ELF executable"),
        "{err}"
    );
    assert!(err.contains("pass the server binary"), "{err}");
}

#[test]
fn mysqld_not_running() {
    if needs_root() {
        return;
    }
    // An ELF that is certainly not running as its own process.
    let err = fails(commitscope().args(["trace", "--mysqld", "/usr/bin/objdump"]));
    assert!(
        err.contains("no running process of /usr/bin/objdump"),
        "{err}"
    );
}

#[test]
fn binary_without_probe_points() {
    if needs_root() {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let err = fails(commitscope().args(["trace", "--pid", &sleeper.id().to_string()]));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        err.contains("has neither log_write_up_to nor a server-layer commit function"),
        "{err}"
    );
    assert!(err.contains("ha_commit_one_phase"), "{err}");
}

#[test]
fn bad_interval_and_version() {
    if needs_root() {
        return;
    }
    let me = std::process::id().to_string();
    let err = fails(commitscope().args(["trace", "--pid", &me, "--interval", "0"]));
    assert!(err.contains("invalid --interval 0"), "{err}");
    let err = fails(commitscope().args(["trace", "--pid", &me, "--server-version", "banana"]));
    assert!(err.contains("invalid --server-version \"banana\""), "{err}");
}

#[test]
fn not_root() {
    if !testkit::is_root() {
        // Already unprivileged: the plain run shows the error.
        let err = fails(commitscope().args(["trace", "--pid", "1"]));
        assert!(err.contains("needs root"), "{err}");
        return;
    }
    if !has_tool("setpriv") {
        testkit::skip("setpriv (util-linux) missing: cannot drop root to test");
        return;
    }
    // The test binary lives under target/, readable by anyone.
    let err = fails(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_commitscope"))
            .args(["trace", "--pid", "1"])
            .stdin(Stdio::null()),
    );
    assert!(
        err.contains("needs root to load eBPF programs: run it with sudo"),
        "{err}"
    );
}

#[test]
fn workload_bad_input_is_one_line() {
    let base = [
        "workload",
        "--defaults-file",
        "/dev/null",
        "--duration",
        "1",
    ];
    let err = fails(
        commitscope()
            .args(base)
            .args(["--socket", "/nonexistent/sock"]),
    );
    assert!(
        err.contains("cannot connect to the server at socket /nonexistent/sock"),
        "{err}"
    );
    let err = fails(commitscope().args(base).args(["--threads", "0"]));
    assert!(err.contains("invalid --threads"), "{err}");
    let err = fails(commitscope().args(base).args(["--database", "x;drop"]));
    assert!(err.contains("invalid --database"), "{err}");
    let err = fails(commitscope().args(base).args(["--dsn", "postgres://h/"]));
    assert!(err.contains("invalid --dsn"), "{err}");
    let err = fails(
        commitscope()
            .args(["workload", "--defaults-file", "/nonexistent/my.cnf"])
            .args(["--duration", "1"]),
    );
    assert!(err.contains("cannot read /nonexistent/my.cnf"), "{err}");
}

/// The parser's own errors stay one line but keep what it said: the
/// missing argument named, the allowed values listed.
#[test]
fn parser_errors_name_the_argument_and_the_allowed_values() {
    let err = fails(commitscope().arg("trace"));
    assert!(err.contains("--pid") && err.contains("--mysqld"), "{err}");
    let err = fails(commitscope().args(["--workload", "foo"]));
    assert!(
        err.contains("'foo'") && err.contains("possible values") && err.contains("tpcc"),
        "{err}"
    );
}

/// `--csv` and `--out` never write through a symlink they did not create:
/// one line, exit 2, the link's target untouched, nothing started.
#[test]
fn outputs_refuse_symlinks() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("precious");
    std::fs::write(&target, "keep me").unwrap();
    let link = d.path().join("ticks.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dir_link = d.path().join("results");
    std::os::unix::fs::symlink(d.path(), &dir_link).unwrap();
    for args in [
        vec![
            "--no-trace",
            "--duration",
            "1",
            "--csv",
            link.to_str().unwrap(),
        ],
        vec![
            "sweep",
            "--no-trace",
            "--threads",
            "1",
            "--out",
            dir_link.to_str().unwrap(),
        ],
    ] {
        let out = common::commitscope().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let line = common::one_error_line(&err);
        assert!(line.contains("is a symbolic link"), "{line}");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(!d.path().join("cells.jsonl").exists());
}

/// `--commit-path` times every commit: refused with the light tier, and
/// by the exporter with the exact tier (it times commits inside its
/// light tier's exact windows), in one line, before anything starts.
#[test]
fn commit_path_needs_the_exact_tier_and_the_exporters_windows() {
    let wd = workdir();
    let err = fails(
        commitscope()
            .args(["--probes", "light", "--commit-path", "--threads", "2"])
            .args(["--duration", "1", "--workdir", wd.path().to_str().unwrap()]),
    );
    assert!(err.contains("--probes exact"), "{err}");
    assert_clean(wd.path());
    let err = fails(commitscope().args(["exporter", "--commit-path", "--probes", "exact"]));
    assert!(
        err.contains("inside its exact windows") && err.contains("drop --probes exact"),
        "{err}"
    );
}

/// Each command's `--help` offers only what it takes, and its exit codes
/// are its own: bad input exits 2 and its table has a 2; `load` and
/// `check` take none of a run's flags; the exporter refuses `--io`, which
/// its help no longer lists; trace's help has no `--anatomy` (always on
/// there) and no `--replica` exit code.
#[test]
fn each_commands_help_offers_what_it_takes_and_its_own_exit_codes() {
    use clap::CommandFactory;
    let root = commitscope::cli::Cli::command();
    for sub in root
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
    {
        let name = sub.get_name();
        let codes = commitscope::help_text::exit_codes(name);
        assert!(
            codes.iter().any(|(c, _)| *c == "2"),
            "{name}: no exit code 2"
        );
        let out = commitscope()
            .args([name, "--no-such-flag"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name} --no-such-flag");
        let help = commitscope().args([name, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout).to_string();
        for (code, _) in codes {
            assert!(
                help.contains(&format!("  {code}\n")),
                "{name} --help lacks exit code {code}: {help}"
            );
        }
    }
    let help = |cmd: &str| {
        let out = commitscope().args([cmd, "--help"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    for cmd in ["load", "check"] {
        let h = help(cmd);
        for flag in ["--threads", "--duration", "--think", "--workload"] {
            assert!(!h.contains(flag), "{cmd} --help offers {flag}");
        }
        let err = fails(commitscope().args([cmd, "--threads", "8"]));
        assert!(err.contains("--threads"), "{err}");
    }
    // The exporter counts the block I/O under the fsync (--io), and the
    // followers' wake-ups in its windows' commit path (--wakeups, which
    // needs --commit-path there as everywhere).
    let h = help("exporter");
    assert!(h.contains("--io") && h.contains("--wakeups"), "{h}");
    let err = fails(commitscope().args(["exporter", "--wakeups"]));
    assert!(err.contains("--commit-path"), "{err}");
    let h = help("trace");
    assert!(!h.contains("--anatomy") && !h.contains("fell back"), "{h}");
}
