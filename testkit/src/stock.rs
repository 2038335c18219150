//! Debian's stock servers of the releases around this one — MariaDB 10.5
//! (Debian 11, bullseye), MariaDB 11.8 (Debian 13, trixie) and MySQL, the
//! study's own server, from the unstable suite (sid) — fetched from the
//! machine's own Debian archive and unpacked with their own C/C++
//! libraries, so that they run here as they do on their release, stock
//! and stripped. Nothing names a version: the suite moves, and the cache
//! records the version it unpacked.
//!
//! Why this shape: each release's `mariadbd` needs its own glibc and
//! libstdc++ (trixie's is newer than this machine's), and installing it
//! with dpkg would replace the machine's 10.11. So apt is given a private
//! sources list and state directory (the machine's apt configuration is
//! not touched), downloads the server package and its dependency closure
//! as resolved against an empty system, and each package is unpacked into
//! one root. `patchelf` then points the binaries' ELF interpreter at that
//! root's loader and their DT_RPATH (not RUNPATH: RPATH also serves the
//! libraries' own dependencies) at its library directories.
//!
//! The cache (`$XDG_CACHE_HOME/commitscope/servers/<suite>`, else
//! `~/.cache/...`) is filled once, under a lock, and marked ready last:
//! a cut-off fill is redone, never used half-made.
use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// Which server a release carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    MariaDb,
    MySql,
}

/// One release's stock server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// Debian's suite name.
    pub suite: &'static str,
    /// Debian's release number, for messages (0: unstable, no number).
    pub debian: u32,
    pub family: Family,
    /// The package that holds the server binary; its version is the
    /// release's.
    pub package: &'static str,
    /// Other packages unpacked beside it (the command-line client).
    pub also: &'static [&'static str],
    /// The server binary inside the unpacked root.
    pub binary: &'static str,
    /// The series it carries ("10.5", "11.8"), or the family's name where
    /// the suite moves between series ("mysql").
    pub series: &'static str,
}

/// The releases whose servers the suite meets for real.
pub const RELEASES: &[Release] = &[
    Release {
        suite: "bullseye",
        debian: 11,
        family: Family::MariaDb,
        package: "mariadb-server-core-10.5",
        also: &[],
        binary: "usr/sbin/mariadbd",
        series: "10.5",
    },
    Release {
        suite: "trixie",
        debian: 13,
        family: Family::MariaDb,
        package: "mariadb-server-core",
        also: &[],
        binary: "usr/sbin/mariadbd",
        series: "11.8",
    },
    MYSQL,
];

/// Debian unstable's MySQL (9.7 when this was written): the server and
/// the `mysql` client, whose version the server's initialised datadir
/// and authentication match.
pub const MYSQL: Release = Release {
    suite: "sid",
    debian: 0,
    family: Family::MySql,
    package: "mysql-server-core",
    also: &["mysql-client-core"],
    binary: "usr/sbin/mysqld",
    series: "mysql",
};

impl Release {
    /// "MariaDB 10.5 (Debian 11 bullseye)", "MySQL (Debian sid)".
    pub fn describe(&self) -> String {
        let name = match self.family {
            Family::MariaDb => format!("MariaDB {}", self.series),
            Family::MySql => "MySQL".to_string(),
        };
        if self.debian == 0 {
            format!("{name} (Debian {})", self.suite)
        } else {
            format!("{name} (Debian {} {})", self.debian, self.suite)
        }
    }

    /// The release carrying MariaDB `series` ("10.5", "11.8").
    pub fn of_series(series: &str) -> Option<Release> {
        RELEASES.iter().copied().find(|r| r.series == series)
    }
}

/// A stock server ready to run: its binary and the root it lives in.
#[derive(Clone, Debug)]
pub struct StockServer {
    pub release: Release,
    /// `<root>/usr/sbin/mariadbd` or `mysqld`, patched to run with
    /// `<root>`'s libraries.
    pub server: PathBuf,
    pub root: PathBuf,
    /// The package version (`1:10.5.23-0+deb11u1`).
    pub version: String,
}

/// Where the stock servers are cached.
pub fn cache_root() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))
        .map(|c| c.join("commitscope/servers"))
}

impl StockServer {
    /// The command-line client unpacked beside the server, if any.
    pub fn client(&self) -> Option<PathBuf> {
        Some(self.root.join("usr/bin/mysql")).filter(|p| p.is_file())
    }

    /// The directory holding the server's `english/errmsg.sys`.
    pub fn share(&self) -> Option<PathBuf> {
        ["usr/share/mysql", "usr/share/mariadb"]
            .iter()
            .map(|d| self.root.join(d))
            .find(|d| d.join("english/errmsg.sys").is_file())
    }
}

/// The release's server if its cache is ready (nothing is fetched).
pub fn cached(release: Release) -> Option<StockServer> {
    let dir = cache_root()?.join(release.suite);
    let version = fs::read_to_string(dir.join("ready")).ok()?;
    let root = dir.join("root");
    let server = root.join(release.binary);
    server.is_file().then(|| StockServer {
        release,
        server,
        root,
        version: version.trim().to_string(),
    })
}

/// The release's server, fetched and unpacked first when the cache is
/// not ready. `say` gets one line per step and per package.
pub fn ensure(release: Release, say: &mut dyn FnMut(&str)) -> Result<StockServer, String> {
    if let Some(s) = cached(release) {
        return Ok(s);
    }
    let base = cache_root().ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
    let dir = base.join(release.suite);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _lock = Lock::take(&dir.join(".lock"))?;
    // Another thread or process may have filled it while we waited.
    if let Some(s) = cached(release) {
        return Ok(s);
    }
    fill(release, &dir, say)?;
    cached(release).ok_or_else(|| format!("{}: not ready after the fill", dir.display()))
}

/// An exclusive `flock` on a file, held while the file is open (released
/// when the handle drops).
struct Lock {
    _file: fs::File,
}

impl Lock {
    fn take(path: &Path) -> Result<Lock, String> {
        use std::os::fd::AsRawFd;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: a valid descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "{}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Lock { _file: f })
    }
}

/// The machine's Debian archive (the URI its own sources use for the
/// main suite), so the other releases come from the same mirror.
fn archive_uri() -> Result<String, String> {
    let mut texts = Vec::new();
    if let Ok(s) = fs::read_to_string("/etc/apt/sources.list") {
        texts.push(s);
    }
    if let Ok(rd) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let ext = f.extension().and_then(|x| x.to_str()).unwrap_or("");
            if ext == "list" || ext == "sources" {
                texts.extend(fs::read_to_string(&f).ok());
            }
        }
    }
    texts
        .iter()
        .flat_map(|t| t.lines())
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| {
            // deb822 `URIs: a b` or one-line `deb [opts] URI suite ...`.
            let words: Vec<&str> = if let Some(r) = l.strip_prefix("URIs:") {
                r.split_whitespace().collect()
            } else if let Some(r) = l.strip_prefix("deb ") {
                r.split_whitespace()
                    .filter(|w| !w.starts_with('[') && !w.ends_with(']'))
                    .take(1)
                    .collect()
            } else {
                Vec::new()
            };
            words.into_iter().map(str::to_string).collect::<Vec<_>>()
        })
        .map(|u| u.trim_end_matches('/').to_string())
        .find(|u| u.ends_with("/debian"))
        .ok_or_else(|| {
            "no Debian archive (a URI ending in /debian) in /etc/apt/sources.list{,.d}".to_string()
        })
}

/// apt for one other suite of the machine's Debian archive, with a
/// private sources list and state under `<cache>/<suite>/apt` (the
/// machine's own apt configuration and package state are not touched).
#[derive(Clone, Debug)]
pub struct SuiteApt {
    pub suite: String,
    /// `<cache>/<suite>`: `apt/` (the state) and `debs/` (downloads).
    pub dir: PathBuf,
}

impl SuiteApt {
    /// Prepares the private state for `suite` (nothing is fetched yet).
    pub fn new(suite: &str) -> Result<SuiteApt, String> {
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let dir = cache_root()
            .ok_or("neither XDG_CACHE_HOME nor HOME is set")?
            .join(suite);
        let a = dir.join("apt");
        for d in [
            a.join("state/lists/partial"),
            a.join("cache"),
            dir.join("debs/partial"),
        ] {
            fs::create_dir_all(&d).map_err(|e| io(&d, e))?;
        }
        // An empty system: apt resolves every dependency from the suite.
        fs::write(a.join("status"), "").map_err(|e| io(&a, e))?;
        let uri = archive_uri()?;
        fs::write(
            a.join("sources.list"),
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {uri} {suite} main\n"
            ),
        )
        .map_err(|e| io(&a, e))?;
        Ok(SuiteApt {
            suite: suite.to_string(),
            dir,
        })
    }

    /// `tool` (apt-get, apt-cache) pointed at the private state.
    pub fn command(&self, tool: &str) -> Command {
        let a = self.dir.join("apt");
        let mut c = Command::new(tool);
        c.arg("-q")
            .arg(format!(
                "-oDir::Etc::SourceList={}",
                a.join("sources.list").display()
            ))
            .arg("-oDir::Etc::SourceParts=/nonexistent")
            .arg(format!("-oDir::State={}", a.join("state").display()))
            .arg(format!(
                "-oDir::State::status={}",
                a.join("status").display()
            ))
            .arg(format!("-oDir::Cache={}", a.join("cache").display()))
            .arg(format!("-oDir::Cache::archives={}", self.debs().display()))
            .arg("-oAPT::Install-Recommends=false")
            .arg("-oDebug::NoLocking=1")
            // Root downloads into a directory the _apt user cannot write.
            .arg("-oAPT::Sandbox::User=root")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        c
    }

    /// Where downloaded packages go.
    pub fn debs(&self) -> PathBuf {
        self.dir.join("debs")
    }

    /// Reads the suite's package index.
    pub fn update(&self) -> Result<(), String> {
        run(
            self.command("apt-get").arg("update"),
            &format!("apt-get update ({})", self.suite),
        )
        .map(|_| ())
    }

    /// Whether an index was read before (by any earlier run).
    pub fn has_index(&self) -> bool {
        fs::read_dir(self.dir.join("apt/state/lists")).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with("_Packages"))
        })
    }

    /// The `.deb` of `pkg` in [`SuiteApt::debs`], downloading it first
    /// when absent.
    pub fn download(&self, pkg: &str) -> Result<PathBuf, String> {
        let prefix = format!("{pkg}_");
        let find = || {
            fs::read_dir(self.debs()).ok().and_then(|rd| {
                rd.flatten().map(|e| e.path()).find(|p| {
                    p.extension().is_some_and(|x| x == "deb")
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(&prefix))
                })
            })
        };
        if let Some(d) = find() {
            return Ok(d);
        }
        run(
            self.command("apt-get")
                .current_dir(self.debs())
                .args(["download", &format!("{pkg}/{}", self.suite)]),
            &format!("apt-get download {pkg}/{}", self.suite),
        )?;
        find().ok_or_else(|| format!("no .deb of {pkg} after apt-get download"))
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("{what} failed ({}): {last}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fill(release: Release, dir: &Path, say: &mut dyn FnMut(&str)) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let apt = SuiteApt::new(release.suite)?;
    say(&format!(
        "{}: reading the package index",
        release.describe()
    ));
    apt.update()?;
    // The closure as apt resolves it against an empty system.
    let wanted: Vec<String> = std::iter::once(release.package)
        .chain(release.also.iter().copied())
        .map(|p| format!("{p}/{}", release.suite))
        .collect();
    let plan = run(
        apt.command("apt-get").args(["-s", "install"]).args(&wanted),
        &format!("apt-get -s install {}", wanted.join(" ")),
    )?;
    let pkgs: Vec<String> = plan
        .lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    if pkgs.is_empty() {
        return Err(format!("apt planned no package for {}", wanted.join(" ")));
    }
    // A fresh root each fill: nothing of a cut-off one is kept.
    let root = dir.join("root");
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
    let mut version = String::new();
    for (i, p) in pkgs.iter().enumerate() {
        say(&format!("{}: {}/{} {p}", release.suite, i + 1, pkgs.len()));
        let deb = apt.download(p)?;
        run(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
            &format!("dpkg-deb -x {}", deb.display()),
        )?;
        if *p == release.package {
            version = run(
                Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"),
                "dpkg-deb -f",
            )?
            .trim()
            .to_string();
        }
    }
    say(&format!(
        "{}: pointing the binaries at their own libraries (patchelf)",
        release.suite
    ));
    patch_binaries(&root)?;
    let ready = dir.join("ready");
    let mut f = fs::File::create(&ready).map_err(|e| io(&ready, e))?;
    writeln!(f, "{version}").map_err(|e| io(&ready, e))?;
    say(&format!(
        "{}: {version} ready in {}",
        release.describe(),
        root.display()
    ));
    Ok(())
}

/// The root's ELF loader (usrmerged or not). Not `lib64/`: there it is
/// an absolute symlink, which would resolve to this machine's.
fn loader(root: &Path) -> Result<PathBuf, String> {
    [
        "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    ]
    .iter()
    .map(|p| root.join(p))
    .find(|p| p.exists())
    .ok_or_else(|| format!("no ld-linux-x86-64.so.2 under {}", root.display()))
}

/// Every dynamic ELF executable in `usr/sbin` and `usr/bin` gets the
/// root's loader and libraries.
fn patch_binaries(root: &Path) -> Result<(), String> {
    let interp = loader(root)?;
    let rpath = [
        "lib/x86_64-linux-gnu",
        "usr/lib/x86_64-linux-gnu",
        "lib",
        "usr/lib",
    ]
    .map(|d| root.join(d).display().to_string())
    .join(":");
    for d in ["usr/sbin", "usr/bin"] {
        let Ok(rd) = fs::read_dir(root.join(d)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_symlink() || !p.is_file() || !has_interpreter(&p) {
                continue;
            }
            run(
                Command::new("patchelf")
                    .arg("--set-interpreter")
                    .arg(&interp)
                    .arg("--force-rpath")
                    .arg("--set-rpath")
                    .arg(&rpath)
                    .arg(&p),
                &format!("patchelf {}", p.display()),
            )?;
        }
    }
    Ok(())
}

/// An ELF file with a PT_INTERP (a dynamically linked executable).
fn has_interpreter(p: &Path) -> bool {
    Command::new("patchelf")
        .arg("--print-interpreter")
        .arg(p)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
