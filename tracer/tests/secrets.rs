//! A password given on the command line (`-p`, `--password`, `--dsn`)
//! never appears in anything commitscope prints or writes: stdout,
//! stderr with `-v`, the JSON start object, error messages, `--csv`,
//! a sweep's results directory. And `-p` says what the mysql client says.
mod common;

use std::{path::Path, process::Output};

use common::*;

/// The password under test: distinctive, so a hit cannot be a coincidence.
const SECRET: &str = "Canary-7f3a-pw";
/// A wrong password, which the error message must not repeat either.
const WRONG: &str = "Wrong-9c1e-pw";

const WARNING: &str =
    "commitscope: [Warning] Using a password on the command line interface can be insecure.";

fn everything(out: &Output, files: &Path) -> String {
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    for e in walk(files) {
        all.push_str(&String::from_utf8_lossy(&std::fs::read(e).unwrap()));
    }
    all
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn a_password_never_appears_in_any_output() {
    let Some(_lane) = root_shared() else {
        return;
    };
    let Some(server) = system_server(&[]) else {
        return;
    };
    server
        .query(&format!(
            "CREATE USER cs@localhost IDENTIFIED BY '{SECRET}'; GRANT ALL ON *.* TO cs@localhost"
        ))
        .expect("create the user");
    let sock = server.socket.to_str().unwrap().to_string();
    let files = tempfile::tempdir().unwrap();
    let f = files.path().to_str().unwrap().to_string();
    let pw_short = format!("-p{SECRET}");
    let pw_long = format!("--password={SECRET}");
    let dsn = format!("mysql://cs:{SECRET}@localhost/?socket={sock}");
    let base = ["-S", &sock, "-u", "cs", "--defaults-file", "/dev/null"];
    let csv = format!("{f}/ticks.csv");
    let out = format!("{f}/sweep");
    let wrong = format!("-p{WRONG}");
    let bad_dsn = format!("mysql//cs:{SECRET}@localhost:notaport/");
    let wrong_dsn = format!("mysql://cs:{WRONG}@localhost/?socket={sock}");
    // The command line: `pre` (a subcommand), the user's flags when
    // `as_cs`, then `rest`.
    let line = |pre: &[&str], as_cs: bool, rest: &[&str]| -> Vec<String> {
        let user: &[&str] = if as_cs { &base } else { &[] };
        [pre, user, rest]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    // (what, args, expected to succeed)
    let runs: Vec<(&str, Vec<String>, bool)> = vec![
        (
            "main command, -p, --json -v --csv",
            line(
                &[],
                true,
                &[
                    &pw_short,
                    "--threads",
                    "2",
                    "--duration",
                    "2",
                    "--json",
                    "-v",
                    "--csv",
                    &csv,
                ],
            ),
            true,
        ),
        (
            "main command, --dsn, table",
            line(
                &[],
                false,
                &["--dsn", &dsn, "--threads", "2", "--duration", "2", "-v"],
            ),
            true,
        ),
        (
            "sweep, --password",
            line(
                &["sweep"],
                true,
                &[
                    &pw_long,
                    "--threads",
                    "1,2",
                    "--duration",
                    "1",
                    "--warmup",
                    "0",
                    "--out",
                    &out,
                ],
            ),
            true,
        ),
        (
            "workload, -p",
            line(
                &["workload"],
                true,
                &[&pw_short, "--threads", "2", "--duration", "1", "--json"],
            ),
            true,
        ),
        (
            "wrong password",
            line(&[], true, &[&wrong, "--duration", "1", "-v"]),
            false,
        ),
        (
            "unparsable --dsn holding a password",
            line(&[], false, &["--dsn", &bad_dsn, "-v"]),
            false,
        ),
        (
            "wrong password in --dsn",
            line(&[], false, &["--dsn", &wrong_dsn, "-v"]),
            false,
        ),
    ];
    for (what, args, ok) in runs {
        let out = commitscope().args(&args).output().unwrap();
        let all = everything(&out, files.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), ok, "{what}: {err}");
        if !ok {
            one_error_line(&err);
        }
        assert!(
            !all.contains(SECRET),
            "{what}: the password is in the output:\n{all}"
        );
        assert!(
            !all.contains(WRONG),
            "{what}: the wrong password is in the output:\n{all}"
        );
        // As the mysql client: once, on stderr, when a password is on
        // the command line.
        assert_eq!(err.matches(WARNING).count(), 1, "{what}: {err}");
    }
    // While a run goes on, `ps` shows the password masked, as the mysql
    // client masks it.
    for spelling in [pw_short.as_str(), pw_long.as_str()] {
        let mut child = commitscope()
            .args(base)
            .args([spelling, "--no-trace", "--duration", "3", "--threads", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(child.wait().unwrap().success(), "{cmdline}");
        assert!(!cmdline.contains(SECRET), "{cmdline}");
        assert!(cmdline.contains(&"x".repeat(SECRET.len())), "{cmdline}");
    }
    // The runs above did write what is grepped.
    assert!(files.path().join("ticks.csv").exists());
    assert!(files.path().join("sweep/cells.jsonl").exists());
    // No password, no warning.
    let out = commitscope()
        .args(base)
        .args(["--no-trace", "--duration", "1", "--threads", "1"])
        .env("MYSQL_PWD", SECRET)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "MYSQL_PWD: {err}");
    assert!(!err.contains("[Warning]"), "{err}");
}
