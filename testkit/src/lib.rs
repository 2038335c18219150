//! A real, throwaway MariaDB/MySQL server for tests: temp datadir, unix
//! socket, no networking, stopped and removed on drop. Also the fixture
//! paths and the "skip with a reason" rule shared by every test crate.
pub mod bpf_links;
pub mod docs;
pub mod lane;
pub mod stock;

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// Prints why a test is skipped, in one line, and returns true. Written
/// to the process's stderr itself, not by `eprintln!`: the test harness
/// captures that for a passing test, and a skip must never look like a
/// pass in the log (a checkout without `../shared/fixtures` skips every
/// fixture test).
pub fn skip(reason: &str) -> bool {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIP: {reason}");
    true
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Variables of the caller's environment that would change what a
/// spawned program does: which debuginfod servers it asks and where it
/// caches (a test's server leaking into another's, or the machine's own),
/// a client password or server address, proxies, private CAs. Tests run as
/// threads of one process and never change its environment; every program
/// they spawn starts from [`command`], which drops these, and a test that
/// needs one sets it on that one command.
pub const LEAKY_ENV: &[&str] = &[
    "DEBUGINFOD_URLS",
    "DEBUGINFOD_CACHE_PATH",
    "DEBUGINFOD_TIMEOUT",
    "DEBUGINFOD_PROGRESS",
    "DEBUGINFOD_VERBOSE",
    "MYSQL_PWD",
    "MYSQL_HOST",
    "MYSQL_TCP_PORT",
    "MYSQL_UNIX_PORT",
    "MYSQL_HOME",
    "MARIADB_HOME",
    "MYSQL_TEST_LOGIN_FILE",
    "DATA_SOURCE_NAME",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// `Command::new(program)` without the caller's [`LEAKY_ENV`].
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    for k in LEAKY_ENV {
        c.env_remove(k);
    }
    c
}

/// A loopback TCP port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The resident set of `pid` in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The workspace root (tests run with the crate dir as cwd).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// `../shared/fixtures/mariadb-10.11.18-symbols`, when present.
pub fn symbols_fixture() -> Option<PathBuf> {
    shared_fixture("mariadb-10.11.18-symbols")
}

/// `../shared/fixtures/mariadb-10.5.23-symbols` (Debian 11's version,
/// with its own share/ and system-table SQL), when present.
pub fn symbols_fixture_10_5() -> Option<PathBuf> {
    shared_fixture("mariadb-10.5.23-symbols")
}

fn shared_fixture(name: &str) -> Option<PathBuf> {
    let p = workspace_root().join("../shared/fixtures").join(name);
    p.join("bin/mariadbd")
        .exists()
        .then(|| p.canonicalize().unwrap_or(p))
}

/// `mariadb-install-db` for a throwaway datadir owned by root, with a
/// password-less root (socket clients) and no test database; `tmp` keeps
/// concurrent bootstraps from colliding on temp table names.
pub fn install_db(data: &Path, tmp: &Path) -> Command {
    let mut c = command("mariadb-install-db");
    c.env("TMPDIR", tmp)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .args([
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]);
    c
}

/// Debian's packaged server binary.
pub fn system_mariadbd() -> Option<PathBuf> {
    ["/usr/sbin/mariadbd", "/usr/sbin/mysqld"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The system-table SQL in `share` (MariaDB 11 names it `mariadb_*`),
/// with the preamble the install scripts give it; None when absent.
pub fn system_tables_sql(share: &Path) -> Option<Vec<u8>> {
    let pick = |stem: &str| {
        ["mysql", "mariadb"]
            .iter()
            .map(|p| share.join(format!("{p}_{stem}.sql")))
            .find(|f| f.is_file())
    };
    let files = [
        Some(pick("system_tables")?),
        pick("performance_tables"),
        Some(pick("system_tables_data")?),
        Some(share.join("maria_add_gis_sp_bootstrap.sql")).filter(|f| f.is_file()),
    ];
    let mut sql = b"CREATE DATABASE IF NOT EXISTS mysql;\nUSE mysql;\n".to_vec();
    for f in files.into_iter().flatten() {
        sql.extend(std::fs::read(f).ok()?);
        sql.push(b'\n');
    }
    Some(sql)
}

/// `--lc-messages-dir` (and `--character-sets-dir` when `share`, or the
/// `mysql` share beside it, has the server's own) for a server outside
/// the system paths.
fn share_args(share: &Path) -> Vec<String> {
    let mut a = vec![format!("--lc-messages-dir={}", share.display())];
    let sibling = share.parent().map(|p| p.join("mysql/charsets"));
    if let Some(c) = [Some(share.join("charsets")), sibling]
        .into_iter()
        .flatten()
        .find(|c| c.join("Index.xml").is_file())
    {
        a.push(format!("--character-sets-dir={}", c.display()));
    }
    a
}

/// `binary --bootstrap` of a fresh `data` with `sql`, as the install
/// scripts run it (root without a password on the socket, no test db).
fn bootstrap(
    binary: &Path,
    share: &Path,
    data: &Path,
    tmp: &Path,
    sql: &[u8],
) -> Result<(), StartError> {
    std::fs::create_dir_all(data).map_err(|e| StartError(format!("datadir: {e}")))?;
    let mut c = command(binary);
    c.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .args(share_args(share))
        .args([
            "--bootstrap",
            "--log-warnings=0",
            "--enforce-storage-engine=",
            "--max-allowed-packet=8M",
            "--net-buffer-length=16K",
        ]);
    if is_root() {
        c.arg("--user=root");
    }
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StartError(format!("bootstrap {}: {e}", binary.display())))?;
    let mut stdin = child.stdin.take().expect("piped");
    let sql = sql.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&sql));
    let out = child
        .wait_with_output()
        .map_err(|e| StartError(format!("bootstrap: {e}")))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(StartError(format!(
            "bootstrap of {} failed ({}): {}",
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

pub struct Server {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub binary: PathBuf,
    /// The server's command line after the binary, for [`Server::restart`].
    args: Vec<String>,
    child: Option<Child>,
}

/// What went wrong starting a server, with the error log's tail.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Server {
    /// Initialises a datadir and starts `binary` on a unix socket.
    /// `share` is the `--lc-messages-dir` for a server outside the system
    /// paths (the symbolized fixture); `extra` are more `--key=value` options.
    pub fn start(
        binary: &Path,
        share: Option<&Path>,
        extra: &[&str],
    ) -> Result<Server, StartError> {
        let dir = tempfile::Builder::new()
            .prefix("commitscope-test-")
            .tempdir()
            .map_err(|e| StartError(format!("tempdir: {e}")))?;
        let data = dir.path().join("data");
        // A private tmpdir: concurrent bootstraps in a shared /tmp collide
        // on their temporary table names.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| StartError(format!("tmpdir: {e}")))?;
        // A server of another version than the system's (its share
        // holds its own system tables) bootstraps itself: the system's
        // 10.11 script makes a datadir 10.5 cannot open.
        match share.and_then(system_tables_sql) {
            Some(sql) => bootstrap(binary, share.unwrap_or(Path::new("/")), &data, &tmp, &sql)?,
            None => {
                let install = install_db(&data, &tmp)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output()
                    .map_err(|e| StartError(format!("mariadb-install-db: {e}")))?;
                if !install.status.success() {
                    return Err(StartError(format!(
                        "mariadb-install-db failed: {}",
                        String::from_utf8_lossy(&install.stderr)
                    )));
                }
            }
        }
        let mut args = share.map(share_args).unwrap_or_default();
        args.extend(extra.iter().map(|a| a.to_string()));
        Server::launch(dir, binary, &data, &tmp, args)
    }

    /// Starts `binary` on the datadir `data` with the options every test
    /// server gets (a unix socket in `dir`, no networking, a small buffer
    /// pool) and `more`.
    fn launch(
        dir: tempfile::TempDir,
        binary: &Path,
        data: &Path,
        tmp: &Path,
        more: Vec<String>,
    ) -> Result<Server, StartError> {
        let socket = dir.path().join("sock");
        let mut args = vec![
            "--no-defaults".to_string(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", dir.path().join("pid").display()),
            format!("--log-error={}", dir.path().join("err.log").display()),
            format!("--tmpdir={}", tmp.display()),
            "--skip-networking".into(),
            "--innodb-buffer-pool-size=256M".into(),
        ];
        if is_root() {
            args.push("--user=root".into());
        }
        args.extend(more);
        let mut s = Server {
            dir,
            socket,
            binary: binary.to_owned(),
            args,
            child: None,
        };
        s.spawn()?;
        Ok(s)
    }

    /// Initialises a datadir the MySQL way (`--initialize-insecure`: root
    /// without a password) and starts `binary` on a unix socket, with
    /// what a stock build needs in a throwaway place: `secure_file_priv`
    /// inside the temp dir (its compiled-in default is under /var/lib),
    /// the X plugin off.
    pub fn start_mysql(binary: &Path, extra: &[&str]) -> Result<Server, StartError> {
        let dir = tempfile::Builder::new()
            .prefix("commitscope-test-")
            .tempdir()
            .map_err(|e| StartError(format!("tempdir: {e}")))?;
        let (data, tmp, files) = (
            dir.path().join("data"),
            dir.path().join("tmp"),
            dir.path().join("files"),
        );
        for d in [&tmp, &files] {
            std::fs::create_dir_all(d).map_err(|e| StartError(format!("{}: {e}", d.display())))?;
        }
        let user = is_root().then(|| "--user=root".to_string());
        let log = dir.path().join("init.log");
        let init = command(binary)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg("--initialize-insecure")
            .arg(format!("--log-error={}", log.display()))
            .args(&user)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| StartError(format!("{} --initialize-insecure: {e}", binary.display())))?;
        if !init.success() {
            return Err(StartError(format!(
                "--initialize-insecure failed ({init}): {}",
                tail(&log, 15)
            )));
        }
        let mut args = vec![
            format!("--secure-file-priv={}", files.display()),
            "--mysqlx=OFF".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        Server::launch(dir, binary, &data, &tmp, args)
    }

    /// Starts the server process and waits until it answers a query.
    fn spawn(&mut self) -> Result<(), StartError> {
        let child = command(&self.binary)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StartError(format!("spawn {}: {e}", self.binary.display())))?;
        self.child = Some(child);
        let log = self.dir.path().join("err.log");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.socket.exists() && self.query("SELECT 1").is_ok() {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(StartError(format!(
                        "server exited ({st}): {}",
                        tail(&log, 15)
                    )));
                }
            }
            if Instant::now() > deadline {
                return Err(StartError(format!(
                    "server did not accept connections in 60 s: {}",
                    tail(&log, 15)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server cleanly and starts it again on the same datadir
    /// (a new pid); returns once it answers queries.
    pub fn restart(&mut self) -> Result<(), StartError> {
        self.stop();
        self.spawn()
    }

    /// commitscope's flags to reach this server as root, ignoring any
    /// ~/.my.cnf of whoever runs the tests.
    pub fn client_flags(&self) -> Vec<String> {
        [
            "--socket",
            &self.socket.display().to_string(),
            "--user",
            "root",
            "--defaults-file",
            "/dev/null",
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Runs SQL with the mariadb client; returns tab-separated rows.
    pub fn query(&self, sql: &str) -> Result<String, String> {
        let out = command("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-uroot", "-N", "-B", "-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// A `SHOW GLOBAL STATUS` counter.
    pub fn status(&self, name: &str) -> u64 {
        let out = self
            .query(&format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .unwrap_or_default();
        out.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Runs `per_client` autocommit updates from each of `clients` parallel
    /// client processes (client k updates row k of `db.tb`). Returns the
    /// number of statements sent.
    pub fn drive_updates(&self, db: &str, clients: u32, per_client: u32) -> u64 {
        let mut kids = Vec::new();
        for k in 1..=clients {
            let mut child = command("mariadb")
                .arg("--no-defaults")
                .arg(format!("--socket={}", self.socket.display()))
                .args(["-uroot", db])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn mariadb client");
            let mut sql = String::new();
            for _ in 0..per_client {
                sql.push_str(&format!("UPDATE tb SET c=c+1 WHERE id={k};\n"));
            }
            let mut stdin = child.stdin.take().expect("client stdin");
            std::thread::spawn(move || {
                let _ = stdin.write_all(sql.as_bytes());
            });
            kids.push(child);
        }
        for mut k in kids {
            let st = k.wait().expect("wait client");
            assert!(st.success(), "client failed");
        }
        u64::from(clients) * u64::from(per_client)
    }

    /// Stops the server cleanly (SIGTERM, then SIGKILL after 30 s).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
