//! The managed throwaway server: a private temp dir (mode 0700) with the
//! datadir, socket and logs; initialised with the server's own method,
//! started with `--no-defaults --skip-networking`, and torn down on drop —
//! so success, an error and Ctrl-C all leave nothing behind.
use std::{
    fs,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use readers::{family::datadir::ThrowawayValue, server::options::ServerOption};

use super::{
    locate::{InitMethod, ServerBinary},
    sizing::Sizing,
    template::{Key, Owner, Templates},
};
use crate::error::{Error, Result};

/// How long a server may take to initialise or to accept connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(300);
/// How long a clean shutdown may take before the server is killed.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(60);
/// ... and when it cannot write: the clean shutdown is a courtesy.
const DOOMED_SHUTDOWN_LIMIT: Duration = Duration::from_secs(3);
/// How long the processes of a killed group may take to be gone.
const REAP_LIMIT: Duration = Duration::from_secs(10);
const TMPFS_MAGIC: i64 = 0x0102_1994;

#[derive(Clone, Debug)]
pub struct ManagedConfig {
    pub binary: ServerBinary,
    pub options: Vec<ServerOption>,
    /// Parent of the private temp dir.
    pub workdir: PathBuf,
    /// Keep the temp dir (datadir, error log) after the run.
    pub keep: bool,
    /// Connections, file limits and buffer pool, sized to the run.
    pub sizing: Sizing,
}

/// The private temp dir; removed on drop unless kept.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

/// A line on stderr from a teardown path, never a panic: `eprintln!`
/// panics when stderr is gone (a closed pipe), and a panic while
/// unwinding aborts, leaving the servers not yet stopped running (a
/// group member kept running for an hour once, its parent gone).
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep {
            say(format_args!("commitscope: kept {}", self.path.display()));
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// A child in its own process group, killed with its whole group on drop:
/// `mariadb-install-db` is a script whose bootstrap server is a grandchild.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = self.0.id();
        // The script may be gone while its grandchild still runs: kill the
        // group whatever the child's state, then wait for all of it.
        // SAFETY: signalling the process group we created.
        unsafe { libc::killpg(pgid as i32, libc::SIGKILL) };
        let _ = self.0.wait();
        reap_group(pgid);
    }
}

/// Waits until group `pgid` is gone; says so when it would not go.
fn reap_group(pgid: u32) {
    let left = super::process::wait_group_gone(pgid, REAP_LIMIT);
    if !left.is_empty() {
        say(format_args!(
            "commitscope: warning: processes {left:?} of the server's group were still exiting after {} s",
            REAP_LIMIT.as_secs()
        ));
    }
}

/// The account a root-started server drops to, as the distributions'
/// init scripts do: a server running as root can write anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemUser {
    pub name: String,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl SystemUser {
    /// The `mysql` account, when it exists.
    fn mysql() -> Option<SystemUser> {
        let name = std::ffi::CString::new("mysql").ok()?;
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: valid pointers and buffer length; getpwnam_r is re-entrant.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pw,
                buf.as_mut_ptr(),
                buf.len(),
                &mut out,
            )
        };
        (rc == 0 && !out.is_null()).then(|| SystemUser {
            name: "mysql".into(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        })
    }

    /// Whether this user may enter `dir`: search permission on it and on
    /// every directory above it (else the server could not reach its
    /// datadir, e.g. under a 0700 home directory).
    fn can_reach(&self, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        dir.ancestors().all(|d| {
            let Ok(m) = fs::metadata(d) else {
                return false;
            };
            let bit = if m.uid() == self.uid {
                0o100
            } else if m.gid() == self.gid {
                0o010
            } else {
                0o001
            };
            m.mode() & bit != 0
        })
    }

    /// Hands `path` (not recursively) to this user.
    fn own(&self, path: &Path) -> std::io::Result<()> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
    }
}

/// Who the managed server runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunAs {
    /// Not root: the server runs as the caller.
    Caller,
    /// Root, and the `mysql` account exists and can reach the workdir.
    System(SystemUser),
    /// Root without a usable `mysql` account: `--user=root`, and why.
    Root(&'static str),
}

impl RunAs {
    fn choose(workdir: &Path) -> RunAs {
        if !Managed::as_root() {
            return RunAs::Caller;
        }
        match SystemUser::mysql() {
            None => RunAs::Root("no mysql system user"),
            Some(u) if !u.can_reach(workdir) => {
                RunAs::Root("the mysql user cannot enter the --workdir")
            }
            Some(u) => RunAs::System(u),
        }
    }

    /// The server's `--user=` value, if any.
    fn user_arg(&self) -> Option<String> {
        match self {
            RunAs::Caller => None,
            RunAs::System(u) => Some(format!("--user={}", u.name)),
            RunAs::Root(_) => Some("--user=root".into()),
        }
    }

    /// "user mysql", "user root (no mysql system user)", for `-v`.
    pub fn describe(&self) -> String {
        match self {
            RunAs::Caller => "the caller's user".into(),
            RunAs::System(u) => format!("user {}", u.name),
            RunAs::Root(why) => format!("user root ({why})"),
        }
    }
}

pub struct Managed {
    pub cfg: ManagedConfig,
    /// How long [`Managed::stop`] waits for a clean shutdown.
    shutdown_limit: Duration,
    /// Who the server runs as.
    pub run_as: RunAs,
    pub socket: PathBuf,
    pub log: PathBuf,
    data: PathBuf,
    tmp: PathBuf,
    child: Option<Child>,
    /// When [`Managed::ask_stop`] sent its SIGTERM (None: not asked).
    stop_asked: Option<Instant>,
    /// Start options the run itself needs beyond the common ones (a
    /// replicated pair's server ids, binlog, GTIDs, semi-sync), kept
    /// across restarts; the user's `--server-option`s come after them.
    pub extra_args: Vec<String>,
    /// Listen on this loopback port too (a replica connects over TCP);
    /// None: the socket alone (`--skip-networking`).
    pub listen_port: Option<u16>,
    /// Started with this defaults file instead of `--no-defaults`: a
    /// cluster node's state-transfer scripts read their server's options
    /// from it, never from `/etc/mysql` (see [`Managed::own_defaults_file`]).
    defaults_file: Option<PathBuf>,
    /// Where the error log stood when the server last started: its
    /// startup lines begin there.
    started_at: u64,
    // Declared last: dropped after the server is stopped.
    dir: WorkDir,
}

/// True when `dir` is on tmpfs, where fsync costs nothing.
fn on_tmpfs(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string and a zeroed out-struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == TMPFS_MAGIC }
}

/// The lines of a server log worth showing: its first [ERROR] (the cause:
/// the ones after it are consequences, "Plugin 'InnoDB' registration as
/// a STORAGE ENGINE failed", "Aborting") and its last when there are
/// more; with no [ERROR], the tail.
pub fn log_errors(text: &str) -> String {
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[ERROR]"))
        .map(|l| l.split_once("[ERROR]").map_or(l, |(_, r)| r).trim())
        .collect();
    let pick: Vec<&str> = match errors.as_slice() {
        [] => {
            let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            all[all.len().saturating_sub(3)..].to_vec()
        }
        [one] => vec![*one],
        [first, .., last] => vec![*first, *last],
    };
    if pick.is_empty() {
        "no error log output".into()
    } else {
        pick.join(" | ")
    }
}

/// The last error-log line saying the disk is full (ENOSPC, errno 28),
/// without its timestamp prefix.
pub fn disk_full_in(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find(|l| workload::fatal::says_no_space(l))
        .map(|l| {
            l.split_once("[ERROR]")
                .or_else(|| l.split_once("[Warning]"))
                .map_or(l, |(_, r)| r)
                .trim()
                .to_string()
        })
}

fn read_log(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_default()
}

impl Managed {
    /// Creates the private temp dir; nothing runs yet.
    pub fn new(cfg: ManagedConfig) -> Result<Managed> {
        let wd_err = |source| Error::Workdir {
            path: cfg.workdir.clone(),
            source,
        };
        // tempfile creates it with mode 0700.
        let dir = tempfile::Builder::new()
            .prefix("commitscope-")
            .tempdir_in(&cfg.workdir)
            .map_err(wd_err)?
            .keep();
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        let wd = WorkDir {
            path: dir.clone(),
            keep: cfg.keep,
        };
        let tmp = dir.join("tmp");
        fs::create_dir_all(&tmp).map_err(wd_err)?;
        // The temp dir stays 0700, owned by the account the server runs
        // as: it creates the datadir, socket and logs in it.
        let run_as = RunAs::choose(&cfg.workdir);
        if let RunAs::System(u) = &run_as {
            for p in [&dir, &tmp] {
                u.own(p).map_err(wd_err)?;
            }
        }
        if on_tmpfs(&dir) {
            eprintln!(
                "commitscope: warning: {} is on tmpfs, where fsync costs nothing and commits need no grouping; pass --workdir on a disk",
                cfg.workdir.display()
            );
        }
        Ok(Managed {
            shutdown_limit: SHUTDOWN_LIMIT,
            run_as,
            socket: dir.join("mysqld.sock"),
            log: dir.join("error.log"),
            data: dir.join("data"),
            tmp,
            child: None,
            stop_asked: None,
            extra_args: Vec::new(),
            listen_port: None,
            defaults_file: None,
            started_at: 0,
            dir: wd,
            cfg,
        })
    }

    /// Copies the plugin `files` of the install's `from` dir into its own
    /// temp dir and returns that dir, for `--plugin-dir`: a server that
    /// drops to the `mysql` account loads its plugins after it did, and
    /// an install under a private directory (a cache in root's home) is
    /// out of its reach there. The libraries they need are the server's
    /// own, loaded before.
    pub fn private_plugins(&self, from: &Path, files: &[&str]) -> Result<PathBuf> {
        let dir = self.dir.path.join("plugin");
        let err = |path: &Path, source| Error::Workdir {
            path: path.to_path_buf(),
            source,
        };
        fs::create_dir_all(&dir).map_err(|e| err(&dir, e))?;
        if let RunAs::System(u) = &self.run_as {
            u.own(&dir).map_err(|e| err(&dir, e))?;
        }
        for f in files {
            let to = dir.join(f);
            fs::copy(from.join(f), &to).map_err(|source| Error::Read {
                path: from.join(f),
                source,
            })?;
            if let RunAs::System(u) = &self.run_as {
                u.own(&to).map_err(|e| err(&to, e))?;
            }
        }
        Ok(dir)
    }

    /// The error log's last line about a full disk, if any.
    pub fn disk_full_line(&self) -> Option<String> {
        disk_full_in(&read_log(&self.log))
    }

    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn as_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// Options every invocation of the server binary gets.
    fn common_args(&self) -> Vec<String> {
        let b = &self.cfg.binary;
        let mut a = vec![
            "--no-defaults".to_string(),
            format!("--datadir={}", self.data.display()),
            format!("--basedir={}", b.basedir.display()),
        ];
        if let Some(m) = &b.messages {
            a.push(format!("--lc-messages-dir={}", m.display()));
        }
        if let Some(c) = &b.charsets {
            a.push(format!("--character-sets-dir={}", c.display()));
        }
        a.extend(self.run_as.user_arg());
        a
    }

    /// `mariadbd --bootstrap` reading `sql` on stdin, as the install
    /// scripts run it (their options, no test database, root without a
    /// password on the socket), into a datadir it owns.
    fn bootstrap_cmd(&self) -> Result<Command> {
        let b = &self.cfg.binary;
        fs::create_dir_all(&self.data).map_err(|source| Error::Workdir {
            path: self.data.clone(),
            source,
        })?;
        if let RunAs::System(u) = &self.run_as {
            u.own(&self.data).map_err(|source| Error::Workdir {
                path: self.data.clone(),
                source,
            })?;
        }
        let mut c = Command::new(&b.path);
        c.args(self.common_args()).args([
            "--bootstrap",
            "--log-warnings=0",
            "--enforce-storage-engine=",
            "--max-allowed-packet=8M",
            "--net-buffer-length=16K",
        ]);
        Ok(c)
    }

    /// The options the init is given (those that shape the datadir);
    /// semi-sync's come with its plugin, loaded at start only (MySQL): at
    /// init they would be unknown, and they shape nothing there.
    fn init_options(&self) -> impl Iterator<Item = String> + '_ {
        self.cfg
            .options
            .iter()
            .filter(|o| !o.variable().starts_with("rpl_semi_sync"))
            .map(ServerOption::arg)
    }

    /// What makes this init the same as another (`server::template`).
    fn template_key(&self, method: &InitMethod, sql: Option<&[u8]>) -> Key {
        let method = format!("{method:?}");
        let user = self.run_as.user_arg().unwrap_or_default();
        let options: Vec<String> = self.init_options().collect();
        let mut parts: Vec<&[u8]> = vec![method.as_bytes(), user.as_bytes()];
        parts.extend(options.iter().map(|o| o.as_bytes()));
        parts.extend(sql);
        Key::of(&self.cfg.binary.path, &parts)
    }

    /// The account the server's files belong to, when not the caller.
    fn owner(&self) -> Owner {
        match &self.run_as {
            RunAs::System(u) => Some((u.uid, u.gid)),
            _ => None,
        }
    }

    /// Initialises the datadir: a copy of a kept one when the cache holds
    /// one for this binary and these options (`server::template`), else
    /// the server's own init (then kept). Cancel-safe: dropping the
    /// future kills the whole init process group.
    pub async fn init(&mut self) -> Result<()> {
        let b = &self.cfg.binary;
        let method = b.init_method()?;
        let sql = match &method {
            InitMethod::Bootstrap(sql) => {
                let mut text = b"CREATE DATABASE IF NOT EXISTS mysql;\nUSE mysql;\n".to_vec();
                for f in &sql.0 {
                    let body = fs::read(f).map_err(|source| Error::Read {
                        path: f.clone(),
                        source,
                    })?;
                    text.extend_from_slice(&body);
                    text.push(b'\n');
                }
                Some(text)
            }
            _ => None,
        };
        let templates = Templates::from_env();
        let key = templates
            .as_ref()
            .map(|_| self.template_key(&method, sql.as_deref()));
        if let (Some(t), Some(k)) = (&templates, &key) {
            if t.restore(k, &self.data, self.owner()) {
                return Ok(());
            }
        }
        self.init_afresh(method, sql).await?;
        if let (Some(t), Some(k)) = (&templates, &key) {
            t.keep(
                k,
                &self.data,
                self.cfg.binary.id.family().datadir.identity_files,
            );
        }
        Ok(())
    }

    /// The server's own init of the datadir, by `method` (`sql`: what a
    /// bootstrap reads).
    async fn init_afresh(&mut self, method: InitMethod, sql: Option<Vec<u8>>) -> Result<()> {
        let b = &self.cfg.binary;
        let init_log = self.dir.path.join("init.log");
        let log_file = fs::File::create(&init_log).map_err(|source| Error::Workdir {
            path: init_log.clone(),
            source,
        })?;
        // MySQL's --initialize opens it again, as the server's user.
        if let RunAs::System(u) = &self.run_as {
            u.own(&init_log).map_err(|source| Error::Workdir {
                path: init_log.clone(),
                source,
            })?;
        }
        let mut bootstrap_sql = sql;
        let mut cmd = match method {
            InitMethod::InitializeInsecure => {
                let mut c = Command::new(&b.path);
                c.args(self.common_args())
                    .arg("--initialize-insecure")
                    .arg(format!("--log-error={}", init_log.display()));
                c
            }
            InitMethod::InstallScript { script, own } => {
                let mut c = Command::new(script);
                c.arg("--no-defaults")
                    .arg(format!("--datadir={}", self.data.display()))
                    .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
                if own {
                    c.arg(format!("--basedir={}", b.basedir.display()));
                }
                c.args(self.run_as.user_arg());
                c
            }
            InitMethod::Bootstrap(_) => self.bootstrap_cmd()?,
        };
        // Options that shape the datadir (page size, log files) must be
        // there at creation too.
        cmd.args(self.init_options())
            .env("TMPDIR", &self.tmp)
            .stdin(if bootstrap_sql.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(log_file.try_clone().map_err(|source| Error::Workdir {
                path: init_log.clone(),
                source,
            })?)
            .stderr(log_file)
            .process_group(0);
        let what = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd.spawn().map_err(|e| Error::ServerInit {
            detail: format!("cannot run {what}: {e}"),
        })?;
        let mut group = Group(child);
        // The SQL goes in from a thread: the server reads as it runs, and
        // a pipe holds only 64 KiB. Its end (EOF) ends the bootstrap.
        if let (Some(sql), Some(mut stdin)) = (bootstrap_sql.take(), group.0.stdin.take()) {
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(&sql);
            });
        }
        let deadline = Instant::now() + STARTUP_LIMIT;
        loop {
            if let Some(st) = group.0.try_wait().map_err(|e| Error::ServerInit {
                detail: e.to_string(),
            })? {
                if st.success() {
                    return Ok(());
                }
                let log = read_log(&init_log);
                if let Some(line) = disk_full_in(&log) {
                    return Err(Error::WorkdirFull {
                        phase: "initialising the datadir failed",
                        workdir: self.cfg.workdir.clone(),
                        line,
                    });
                }
                return Err(Error::ServerInit {
                    detail: format!("{what} exited with {st}: {}", log_errors(&log)),
                });
            }
            if Instant::now() > deadline {
                return Err(Error::ServerInit {
                    detail: format!("{what} did not finish in {} s", STARTUP_LIMIT.as_secs()),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What a throwaway server of this family needs beyond the common
    /// options (its row's `datadir.throwaway`), each left to the user
    /// when `--server-option` sets it; a private directory is made here.
    fn family_args(&self) -> Result<Vec<String>> {
        let set = |k: &str| self.cfg.options.iter().any(|o| o.variable() == k);
        let mut a = Vec::new();
        for t in self.cfg.binary.id.family().datadir.throwaway {
            if set(t.variable) {
                continue;
            }
            let value = match t.value {
                ThrowawayValue::Fixed(v) => v.to_string(),
                ThrowawayValue::PrivateDir(name) => {
                    let dir = self.dir.path.join(name);
                    let err = |source| Error::Workdir {
                        path: dir.clone(),
                        source,
                    };
                    fs::create_dir_all(&dir).map_err(err)?;
                    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(err)?;
                    if let RunAs::System(u) = &self.run_as {
                        u.own(&dir).map_err(err)?;
                    }
                    dir.display().to_string()
                }
            };
            a.push(format!("--{}={value}", t.variable.replace('_', "-")));
        }
        Ok(a)
    }

    /// Gives the server a defaults file of its own in its dir, with its
    /// datadir and socket, and starts it with that file from then on: a
    /// Galera node's state-transfer scripts read their server's options
    /// from its defaults file (and from the system's, were there none).
    pub fn own_defaults_file(&mut self) -> Result<()> {
        let path = self.dir.path.join("my.cnf");
        let text = format!(
            "[mysqld]\ndatadir={}\nsocket={}\n",
            self.data.display(),
            self.socket.display()
        );
        fs::write(&path, text).map_err(|source| Error::Workdir {
            path: path.clone(),
            source,
        })?;
        self.defaults_file = Some(path);
        Ok(())
    }

    /// Starts the server and waits until it accepts connections on the
    /// socket. Cancel-safe: the child is owned by `self`, stopped on drop.
    pub async fn start(&mut self) -> Result<()> {
        let family = self.family_args()?;
        let b = &self.cfg.binary;
        let mut cmd = Command::new(&b.path);
        let mut common = self.common_args();
        if let Some(f) = &self.defaults_file {
            common[0] = format!("--defaults-file={}", f.display());
        }
        cmd.args(common)
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!(
                "--pid-file={}",
                self.dir.path.join("mysqld.pid").display()
            ))
            .arg(format!("--log-error={}", self.log.display()))
            .arg(format!("--tmpdir={}", self.tmp.display()))
            .args(match self.listen_port {
                Some(p) => vec![format!("--port={p}"), "--bind-address=127.0.0.1".into()],
                None => vec!["--skip-networking".to_string()],
            })
            .args(family)
            .args(self.cfg.sizing.args())
            .args(&self.extra_args)
            .args(self.cfg.options.iter().map(ServerOption::arg))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: a terminal's Ctrl-C reaches commitscope only,
            // which then detaches the probes before stopping the server.
            .process_group(0);
        self.started_at = self.log_len();
        let child = cmd.spawn().map_err(|e| Error::ServerStart {
            detail: format!("cannot run {}: {e}", b.path.display()),
        })?;
        self.child = Some(child);
        self.stop_asked = None;
        let deadline = Instant::now() + STARTUP_LIMIT;
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.child = None;
                    if let Some(line) = disk_full_in(&read_log(&self.log)) {
                        return Err(Error::WorkdirFull {
                            phase: "the server did not start",
                            workdir: self.cfg.workdir.clone(),
                            line,
                        });
                    }
                    return Err(Error::ServerStart {
                        detail: format!(
                            "the server exited ({st}): {}",
                            log_errors(&read_log(&self.log))
                        ),
                    });
                }
            }
            if self.socket.exists() && self.ping().await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::ServerStart {
                    detail: format!(
                        "no connection in {} s: {}",
                        STARTUP_LIMIT.as_secs(),
                        log_errors(&read_log(&self.log))
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn ping(&self) -> bool {
        let opts = mysql_async::OptsBuilder::default()
            .socket(Some(self.socket.display().to_string()))
            .user(Some("root"))
            .prefer_socket(false);
        match mysql_async::Conn::new(opts).await {
            Ok(c) => {
                let _ = c.disconnect().await;
                true
            }
            Err(_) => false,
        }
    }

    /// The connection options of the managed server.
    pub fn conn_args(&self) -> workload::conn::ConnArgs {
        workload::conn::ConnArgs {
            socket: Some(self.socket.clone()),
            user: Some("root".into()),
            defaults_file: Some("/dev/null".into()),
            ..Default::default()
        }
    }

    /// Bytes in the error log so far: where the next start's lines begin.
    pub fn log_len(&self) -> u64 {
        fs::metadata(&self.log).map_or(0, |m| m.len())
    }

    /// The server's complaints about its options at its last start since
    /// `from` (a [`Managed::log_len`]): an out-of-range value is not fatal
    /// at startup, it is "adjusted" with a warning. Only the start's own
    /// lines, up to "ready for connections": what happened around it (a
    /// replica's dump thread killed before a restart, MySQL's "error
    /// reading communication packets") is not about its options.
    pub fn option_warnings_since(&self, from: u64) -> Vec<String> {
        let text = read_log(&self.log);
        let new = text.get(from.max(self.started_at) as usize..).unwrap_or("");
        new.lines()
            // The server's own line, not MySQL's earlier "X Plugin ready
            // for connections".
            .take_while(|l| !l.contains(": ready for connections"))
            .filter(|l| l.contains("[Warning] option '") || l.contains("[ERROR]"))
            .map(|l| l.split_once("] ").map_or(l, |(_, r)| r).trim().to_string())
            .collect()
    }

    /// How the server ended, if it has: "signal 9", "exit code 1".
    pub fn exited(&mut self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        let st = self.child.as_mut()?.try_wait().ok()??;
        Some(match (st.signal(), st.code()) {
            (Some(sig), _) => format!("signal {sig}"),
            (_, Some(code)) => format!("exit code {code}"),
            _ => st.to_string(),
        })
    }

    /// The server cannot write (its disk is full): a clean shutdown may
    /// wait for space forever, and the datadir is a throwaway's, so the
    /// stop kills it after a short wait.
    pub fn cannot_write(&mut self) {
        self.shutdown_limit = DOOMED_SHUTDOWN_LIMIT;
    }

    /// Asks the server to shut down (SIGTERM, once) without waiting:
    /// [`Managed::stop`] then waits for it. A caller stopping two servers
    /// asks both first, and their shutdowns (1.2-1.6 s each for a stock
    /// MySQL) overlap.
    pub fn ask_stop(&mut self) {
        if let (Some(c), None) = (&self.child, self.stop_asked) {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            self.stop_asked = Some(Instant::now());
        }
    }

    /// Clean shutdown (SIGTERM, unless [`Managed::ask_stop`] sent it),
    /// killed after a timeout from the ask. Idempotent.
    pub fn stop(&mut self) -> Option<Duration> {
        self.ask_stop();
        let mut c = self.child.take()?;
        let t0 = self.stop_asked.take().unwrap_or_else(Instant::now);
        let deadline = t0 + self.shutdown_limit;
        let pgid = c.id();
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                reap_group(pgid);
                return Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        say(format_args!(
            "commitscope: the server did not shut down in {} s: killed",
            self.shutdown_limit.as_secs()
        ));
        // SAFETY: signalling the process group we created.
        unsafe { libc::killpg(pgid as i32, libc::SIGKILL) };
        let _ = c.wait();
        reap_group(pgid);
        Some(t0.elapsed())
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_full_lines_are_found() {
        let log = "2026-12-01  3:40:25 0 [ERROR] InnoDB: preallocating 100663296 bytes for file ./ib_logfile101 failed with error 28\n2026-12-01 0 [ERROR] Aborting\n";
        assert_eq!(
            disk_full_in(log).as_deref(),
            Some("InnoDB: preallocating 100663296 bytes for file ./ib_logfile101 failed with error 28")
        );
        let binlog = "2026-12-01 12 [Warning] mariadbd: Disk is full writing './mysqld-bin.000001' (Errcode: 28 \"No space left on device\"). Waiting for someone to free space...";
        assert!(disk_full_in(binlog)
            .unwrap()
            .starts_with("mariadbd: Disk is full writing"));
        assert_eq!(disk_full_in("0 [ERROR] Aborting\n"), None);
    }

    #[test]
    fn error_lines_are_picked() {
        let log = "2026-11-30 0 [Note] starting\n2026-11-30 0 [ERROR] mariadbd: unknown variable 'foo=1'\n2026-11-30 0 [ERROR] Aborting\n";
        assert_eq!(
            log_errors(log),
            "mariadbd: unknown variable 'foo=1' | Aborting"
        );
        assert_eq!(log_errors("a\nb\nc\nd\n"), "b | c | d");
        // The cause first: a 10.5 server on a datadir of 10.11.
        let cascade = "0 [ERROR] InnoDB: Unsupported redo log format. The redo log was created with MariaDB 10.11.19.\n0 [ERROR] Plugin 'InnoDB' init function returned error.\n0 [ERROR] Plugin 'InnoDB' registration as a STORAGE ENGINE failed.\n0 [ERROR] Unknown/unsupported storage engine: InnoDB\n0 [ERROR] Aborting\n";
        assert_eq!(
            log_errors(cascade),
            "InnoDB: Unsupported redo log format. The redo log was created with MariaDB 10.11.19. | Aborting"
        );
        assert_eq!(log_errors(""), "no error log output");
    }

    #[test]
    fn option_warnings_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let b = ServerBinary {
            path: "/usr/sbin/mariadbd".into(),
            basedir: "/usr".into(),
            messages: None,
            charsets: None,
            system_tables: None,
            id: "mariadb-10.11".parse().unwrap(),
        };
        let mut m = Managed::new(ManagedConfig {
            binary: b,
            options: vec![],
            workdir: dir.path().into(),
            keep: false,
            sizing: Sizing::for_machine(Default::default(), &[]),
        })
        .unwrap();
        fs::write(&m.log, "0 [Note] old\n").unwrap();
        let from = m.log_len();
        fs::write(&m.log, "0 [Note] old\n2026-11-30  8:22:15 0 [Warning] option 'innodb-log-file-size': unsigned value 1 adjusted to 4194304\n2026-11-30 0 [System] [MY-011323] [Server] X Plugin ready for connections. Bind-address: '::' port: 33060\n2026-11-30 0 [ERROR] InnoDB: after the X Plugin\n2026-11-30 0 [Note] mariadbd: ready for connections.\n2026-11-30 9 [ERROR] Got an error reading communication packets\n").unwrap();
        assert_eq!(
            m.option_warnings_since(from),
            [
                "option 'innodb-log-file-size': unsigned value 1 adjusted to 4194304",
                "InnoDB: after the X Plugin"
            ]
        );
        // A later start's lines begin where the log stood at its start:
        // what came before it (a killed connection's error) is not its.
        m.started_at = m.log_len();
        let mut log = fs::read_to_string(&m.log).unwrap();
        log.push_str("2026-11-30 0 [Note] InnoDB: started\n2026-11-30 0 [ERROR] mariadbd: unknown variable 'x=1'\n");
        fs::write(&m.log, log).unwrap();
        assert_eq!(
            m.option_warnings_since(from),
            ["mariadbd: unknown variable 'x=1'"]
        );
        assert!(m.option_warnings_since(m.log_len()).is_empty());
    }
}
