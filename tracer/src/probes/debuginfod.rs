//! The debuginfod client, as elfutils' does it: the server URLs
//! (`DEBUGINFOD_URLS`, else the distributions' `/etc/debuginfod/*.urls`,
//! which `sudo` would otherwise hide), the shared cache
//! (`<cache>/<build-id>/debuginfo`, reused by and from gdb, perf,
//! systemtap), the fetch (HTTP(S), first-byte and stall timeouts, a
//! progress bar, Ctrl-C) and files kept in the cache only once accepted.
use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

/// Where the server list came from, for `-v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlSource {
    Env,
    UrlsFiles(PathBuf),
    None,
}

/// The environment that matters, read once (tests pass their own).
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub urls: Option<String>,
    pub cache_path: Option<String>,
    pub xdg_cache_home: Option<String>,
    pub home: Option<String>,
    pub timeout: Option<String>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Env {
            // Set and empty is kept: it means no server, as in elfutils
            // (unset is what `sudo` leaves, and reads the `*.urls` files).
            urls: std::env::var("DEBUGINFOD_URLS").ok(),
            cache_path: var("DEBUGINFOD_CACHE_PATH"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
            timeout: var("DEBUGINFOD_TIMEOUT"),
        }
    }
}

/// An `http://` or `https://` URL without its trailing slashes.
pub fn check_url(u: &str) -> Result<String, String> {
    let t = u.trim().trim_end_matches('/');
    let rest = t
        .strip_prefix("https://")
        .or_else(|| t.strip_prefix("http://"))
        .ok_or_else(|| format!("{u:?} is not an http:// or https:// URL"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
        return Err(format!("{u:?} has no host"));
    }
    Ok(t.to_string())
}

/// The servers to ask: `DEBUGINFOD_URLS` (space-separated; set and empty:
/// none, as elfutils reads it), else every URL in `urls_dir/*.urls` (name
/// order; `#` comments), else none.
/// Entries that are not URLs are skipped (the environment is not ours to
/// refuse); `--debuginfod` values are checked by the caller.
pub fn urls(env: &Env, urls_dir: &Path) -> (Vec<String>, UrlSource) {
    if let Some(v) = &env.urls {
        let list: Vec<String> = v
            .split_whitespace()
            .filter_map(|u| check_url(u).ok())
            .collect();
        return (list, UrlSource::Env);
    }
    let Ok(entries) = std::fs::read_dir(urls_dir) else {
        return (Vec::new(), UrlSource::None);
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "urls") && p.is_file())
        .collect();
    files.sort();
    let mut list = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            if line.starts_with('#') {
                continue;
            }
            list.extend(line.split_whitespace().filter_map(|u| check_url(u).ok()));
        }
    }
    if list.is_empty() {
        (list, UrlSource::None)
    } else {
        (list, UrlSource::UrlsFiles(urls_dir.to_owned()))
    }
}

/// elfutils' cache: `$DEBUGINFOD_CACHE_PATH`, else
/// `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`.
pub fn cache_dir(env: &Env) -> Option<PathBuf> {
    if let Some(p) = &env.cache_path {
        return Some(PathBuf::from(p));
    }
    if let Some(x) = &env.xdg_cache_home {
        return Some(Path::new(x).join("debuginfod_client"));
    }
    env.home
        .as_ref()
        .map(|h| Path::new(h).join(".cache/debuginfod_client"))
}

/// `<cache>/<build-id hex>/debuginfo`.
pub fn cached_file(cache: &Path, build_id_hex: &str) -> PathBuf {
    cache.join(build_id_hex).join("debuginfo")
}

/// The first-byte timeout: `DEBUGINFOD_TIMEOUT` seconds, default 90.
pub fn timeout(env: &Env) -> Duration {
    env.timeout
        .as_deref()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(Duration::from_secs(90), Duration::from_secs)
}

/// Writes `data` as the cached debug file of `build_id_hex`: a temp file
/// in the same directory, synced, then renamed — a reader never sees half
/// a file, and an interrupted download leaves only a temp file that the
/// drop of its handle removes.
pub fn store(cache: &Path, build_id_hex: &str, data: &[u8]) -> std::io::Result<PathBuf> {
    let dir = cache.join(build_id_hex);
    std::fs::create_dir_all(&dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".debuginfo.")
        .tempfile_in(&dir)?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    let dest = dir.join("debuginfo");
    tmp.persist(&dest).map_err(|e| e.error)?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_come_from_the_environment_else_the_urls_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("b.urls"),
            "# Debian\nhttps://debuginfod.debian.net\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("a.urls"),
            "http://127.0.0.1:8002/ not-a-url\n",
        )
        .unwrap();
        std::fs::write(d.path().join("c.txt"), "https://ignored.example\n").unwrap();
        let (l, src) = urls(&Env::default(), d.path());
        assert_eq!(
            l,
            ["http://127.0.0.1:8002", "https://debuginfod.debian.net"]
        );
        assert_eq!(src, UrlSource::UrlsFiles(d.path().to_owned()));
        let env = Env {
            urls: Some("https://a.example/  https://b.example".into()),
            ..Default::default()
        };
        let (l, src) = urls(&env, d.path());
        assert_eq!(l, ["https://a.example", "https://b.example"]);
        assert_eq!(src, UrlSource::Env);
        let (l, src) = urls(&Env::default(), &d.path().join("missing"));
        assert!(l.is_empty());
        assert_eq!(src, UrlSource::None);
        // Set and empty: no server, and the files are not read.
        let env = Env {
            urls: Some(" ".into()),
            ..Default::default()
        };
        let (l, src) = urls(&env, d.path());
        assert!(l.is_empty(), "{l:?}");
        assert_eq!(src, UrlSource::Env);
    }

    #[test]
    fn urls_are_checked() {
        assert!(check_url("ftp://x").is_err());
        assert!(check_url("https://").is_err());
        assert!(check_url("debuginfod.debian.net").is_err());
        assert_eq!(check_url("https://h:1/x/").unwrap(), "https://h:1/x");
    }

    #[test]
    fn the_cache_is_elfutils_one() {
        let mut env = Env {
            home: Some("/home/u".into()),
            ..Default::default()
        };
        assert_eq!(
            cache_dir(&env).unwrap(),
            Path::new("/home/u/.cache/debuginfod_client")
        );
        env.xdg_cache_home = Some("/x".into());
        assert_eq!(cache_dir(&env).unwrap(), Path::new("/x/debuginfod_client"));
        env.cache_path = Some("/c".into());
        assert_eq!(cache_dir(&env).unwrap(), Path::new("/c"));
        assert_eq!(
            cached_file(Path::new("/c"), "ab12"),
            Path::new("/c/ab12/debuginfo")
        );
        assert_eq!(timeout(&Env::default()), Duration::from_secs(90));
        env.timeout = Some("5".into());
        assert_eq!(timeout(&env), Duration::from_secs(5));
    }

    #[test]
    fn stores_are_atomic_and_leave_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = store(d.path(), "ab12", b"ELF...").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"ELF...");
        let names: Vec<_> = std::fs::read_dir(d.path().join("ab12"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["debuginfo"]);
    }
}

/// Why one server gave nothing.
#[derive(Debug)]
pub enum FetchError {
    /// 404: the server does not know this build.
    NotFound,
    Status(u16),
    /// Connect, timeout, TLS, a cut body.
    Transport(String),
    /// Larger than the limit the caller set.
    TooLarge(u64),
    /// Ctrl-C (or SIGTERM, SIGHUP) during the download.
    Interrupted,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::NotFound => f.write_str("404, no such build"),
            FetchError::Status(s) => write!(f, "HTTP status {s}"),
            FetchError::Transport(e) => f.write_str(e),
            FetchError::TooLarge(n) => write!(f, "larger than {n} bytes"),
            FetchError::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// `GET <url>/buildid/<hex>/debuginfo`, the first byte within `timeout`:
/// the response, once its status says it is the file.
fn request(
    url: &str,
    build_id_hex: &str,
    timeout: Duration,
) -> Result<ureq::http::Response<ureq::Body>, FetchError> {
    use ureq::tls::{RootCerts, TlsConfig};
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(timeout))
        .timeout_recv_response(Some(timeout))
        .http_status_as_error(false)
        // The system's CA store (and SSL_CERT_FILE / SSL_CERT_DIR), as
        // elfutils' libcurl client trusts: a fleet's own debuginfod is
        // often signed by a private CA, which a bundled copy of Mozilla's
        // roots would refuse.
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .build()
        .into();
    let full = format!("{url}/buildid/{build_id_hex}/debuginfo");
    let resp = agent
        .get(&full)
        .call()
        .map_err(|e| FetchError::Transport(transport_error(&e)))?;
    match resp.status().as_u16() {
        200 => Ok(resp),
        404 => Err(FetchError::NotFound),
        s => Err(FetchError::Status(s)),
    }
}

/// A transport error in words; a certificate this machine does not trust
/// also says how to trust it.
fn transport_error(e: &ureq::Error) -> String {
    let text = e.to_string();
    if text.contains("invalid peer certificate") {
        format!("{text}: the server's certificate is not trusted here (a private CA: add it to the system's CA store or point SSL_CERT_FILE at it)")
    } else {
        text
    }
}

/// [`fetch_to`] into memory, at most `limit` bytes (small files, tests).
pub fn fetch(
    url: &str,
    build_id_hex: &str,
    timeout: Duration,
    limit: u64,
) -> Result<Vec<u8>, FetchError> {
    let dir = tempfile::tempdir().map_err(|e| FetchError::Transport(e.to_string()))?;
    let f = fetch_to(url, build_id_hex, timeout, limit, dir.path())?;
    std::fs::read(f.path()).map_err(|e| FetchError::Transport(e.to_string()))
}

/// Streams the debug file into a temp file in `dir` (the cache's
/// directory for this build, so that keeping it is a rename): never the
/// whole file in memory — a MariaDB debug file is hundreds of MB. At most
/// `limit` bytes; the temp file is removed if anything fails (its drop).
///
/// The body is read on a helper thread while this one watches: it draws
/// the progress bar, gives up when no byte came for `timeout` (a server
/// stalled mid-body would otherwise hang us forever) and stops at once on
/// Ctrl-C ([`crate::interrupt`]). A reader left blocked on a dead socket
/// writes, at worst, into the unlinked temp file until the process ends.
pub fn fetch_to(
    url: &str,
    build_id_hex: &str,
    timeout: Duration,
    limit: u64,
    dir: &Path,
) -> Result<tempfile::NamedTempFile, FetchError> {
    use std::{
        io::{Read, Write},
        sync::{
            atomic::{AtomicU64, Ordering},
            mpsc, Arc,
        },
    };
    crate::interrupt::install();
    let resp = request(url, build_id_hex, timeout)?;
    let io = |e: std::io::Error| FetchError::Transport(e.to_string());
    let total = resp.body().content_length();
    if total.is_some_and(|t| t > limit) {
        return Err(FetchError::TooLarge(limit));
    }
    let tmp = tempfile::Builder::new()
        .prefix(".debuginfo.")
        .tempfile_in(dir)
        .map_err(io)?;
    let mut out = tmp.as_file().try_clone().map_err(io)?;
    let mut reader = resp
        .into_body()
        .into_with_config()
        .limit(u64::MAX)
        .reader()
        .take(limit + 1);
    let got = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let counter = got.clone();
    std::thread::Builder::new()
        .name("debuginfod-fetch".into())
        .spawn(move || {
            let mut buf = vec![0u8; 256 << 10];
            let r = loop {
                match reader.read(&mut buf) {
                    Ok(0) => break Ok(()),
                    Ok(n) => {
                        if let Err(e) = out.write_all(&buf[..n]) {
                            break Err(e);
                        }
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            let _ = tx.send(r);
        })
        .map_err(io)?;
    let bar = Progress::new(total);
    let (mut last, mut last_at) = (0, std::time::Instant::now());
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => break r.map_err(io),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(FetchError::Transport("the reader stopped".into()))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let n = got.load(Ordering::Relaxed);
        bar.set(n);
        if crate::interrupt::fired() {
            break Err(FetchError::Interrupted);
        }
        if n != last {
            (last, last_at) = (n, std::time::Instant::now());
        } else if last_at.elapsed() >= timeout {
            break Err(FetchError::Transport(format!(
                "no data for {} s after {n} bytes (DEBUGINFOD_TIMEOUT)",
                timeout.as_secs()
            )));
        }
    };
    bar.finish();
    result?;
    let n = got.load(Ordering::Relaxed);
    if n > limit {
        return Err(FetchError::TooLarge(limit));
    }
    if total.is_some_and(|t| t != n) {
        return Err(FetchError::Transport(format!(
            "the body ended after {n} of {} bytes",
            total.unwrap_or_default()
        )));
    }
    tmp.as_file().sync_all().map_err(io)?;
    Ok(tmp)
}

/// The download's progress bar: bytes, bytes/s and ETA on a terminal;
/// nothing elsewhere (the start and end lines say it there).
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(total: Option<u64>) -> Self {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let (bar, template) = match total {
            Some(t) => (
                indicatif::ProgressBar::new(t),
                "debuginfod {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            ),
            None => (
                indicatif::ProgressBar::new_spinner(),
                "debuginfod {spinner} {bytes} {binary_bytes_per_sec}",
            ),
        };
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        Progress(Some(bar))
    }

    fn set(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.set_position(n);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

/// Which servers to ask, as the command line chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// `DEBUGINFOD_URLS`, else the distributions' `*.urls` files in
    /// this directory (`/etc/debuginfod`).
    Auto(PathBuf),
    /// `--debuginfod URL...`: these, instead of the environment's.
    Urls(Vec<String>),
    /// `--no-debuginfod`: neither the cache nor any server.
    Off,
}

/// What a lookup asked and what it used, for `-v`.
#[derive(Clone, Debug, Default)]
pub struct Looked {
    /// "https://a https://b from /etc/debuginfod/*.urls", or why none.
    pub servers: String,
    /// "debuginfod https://a" or "debuginfod cache PATH", when one served.
    pub used: Option<String>,
    /// A signal stopped the download: the run must end (exit 130).
    pub interrupted: bool,
}

/// Where the distributions keep their server lists.
pub const URLS_DIR: &str = "/etc/debuginfod";

/// The largest debug file fetched (a MariaDB one is a few hundred MB).
pub const FETCH_LIMIT: u64 = 4 << 30;

/// Finds the debug file of `build_id` and hands it to `accept` (which
/// checks it is of this build and has symbols): the cache first, then
/// each server; a fetched file is cached only once accepted. Each miss
/// is said in one line. Returns what was used, for the start line.
pub fn lookup(
    choice: &Choice,
    env: &Env,
    build_id: &[u8],
    mut accept: impl FnMut(&Path, &[u8]) -> bool,
) -> Looked {
    let mut looked = Looked::default();
    if *choice == Choice::Off {
        looked.servers = "none (--no-debuginfod)".into();
        return looked;
    }
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let cache = cache_dir(env);
    if let Some(c) = &cache {
        let p = cached_file(c, &hex);
        if let Some(data) = map_file(&p) {
            if accept(&p, &data) {
                looked.servers = "not asked (in the cache)".into();
                looked.used = Some(format!("debuginfod cache {}", p.display()));
                return looked;
            }
            eprintln!(
                "commitscope: debuginfod: {} is not a debug file of this build: removed",
                p.display()
            );
            let _ = std::fs::remove_file(&p);
        }
    }
    let (list, from) = match choice {
        Choice::Urls(u) => (u.clone(), "--debuginfod".to_string()),
        Choice::Auto(dir) => match urls(env, dir) {
            (l, UrlSource::Env) if l.is_empty() => (l, "none (DEBUGINFOD_URLS is empty)".into()),
            (l, UrlSource::Env) => (l, "DEBUGINFOD_URLS".into()),
            (l, UrlSource::UrlsFiles(d)) => (l, format!("{}/*.urls", d.display())),
            (l, UrlSource::None) => (
                l,
                format!(
                    "nowhere (DEBUGINFOD_URLS unset, no {}/*.urls)",
                    dir.display()
                ),
            ),
        },
        Choice::Off => (Vec::new(), String::new()),
    };
    looked.servers = if list.is_empty() {
        from
    } else {
        format!("{} from {from}", list.join(" "))
    };
    match lookup_in(env, &list, &hex, cache.as_deref(), &mut accept) {
        Ok(used) => looked.used = used,
        Err(FetchError::Interrupted) => looked.interrupted = true,
        Err(_) => {}
    }
    looked
}

/// [`lookup`]'s second half: each of `urls` in turn. The file goes to a
/// temp file in the cache (else a temp dir), is read mapped, and is kept
/// (renamed into place) only once `accept`ed.
fn lookup_in(
    env: &Env,
    urls: &[String],
    hex: &str,
    cache: Option<&Path>,
    accept: &mut impl FnMut(&Path, &[u8]) -> bool,
) -> Result<Option<String>, FetchError> {
    // No server to ask: nothing to cache, no directory to make.
    if urls.is_empty() {
        return Ok(None);
    }
    let Ok(scratch) = tempfile::tempdir() else {
        return Ok(None);
    };
    let dir = match cache.map(|c| c.join(hex)) {
        Some(d) if std::fs::create_dir_all(&d).is_ok() => d,
        Some(_) => {
            eprintln!(
                "commitscope: debuginfod: cannot cache in {}: used without caching",
                cache.unwrap_or(Path::new("?")).display()
            );
            scratch.path().to_owned()
        }
        None => scratch.path().to_owned(),
    };
    for u in urls {
        eprintln!("commitscope: debuginfod: fetching {hex} from {u}");
        let t0 = std::time::Instant::now();
        let tmp = match fetch_to(u, hex, timeout(env), FETCH_LIMIT, &dir) {
            Ok(t) => t,
            Err(FetchError::Interrupted) => {
                // The temp file went with the error; no empty directory.
                if dir != scratch.path() {
                    let _ = std::fs::remove_dir(&dir);
                }
                eprintln!("commitscope: debuginfod: download from {u} interrupted: nothing kept");
                return Err(FetchError::Interrupted);
            }
            Err(e) => {
                eprintln!("commitscope: debuginfod: {u}: {e}");
                continue;
            }
        };
        let Some(map) = map_file(tmp.path()) else {
            continue;
        };
        eprintln!(
            "commitscope: debuginfod: fetched {:.1} MB in {:.1} s",
            map.len() as f64 / 1e6,
            t0.elapsed().as_secs_f64()
        );
        let dest = dir.join("debuginfo");
        if !accept(&dest, &map) {
            eprintln!("commitscope: debuginfod: {u} sent a file of another build (or without symbols): refused, not cached");
            continue;
        }
        drop(map);
        if dir != scratch.path() {
            if let Err(e) = tmp.persist(&dest) {
                eprintln!(
                    "commitscope: debuginfod: cannot cache {} ({}): used without caching",
                    dest.display(),
                    e.error
                );
            }
        }
        return Ok(Some(format!("debuginfod {u}")));
    }
    // Nothing kept: no empty directory for this build either.
    if dir != scratch.path() {
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(None)
}

/// A file's bytes, mapped read-only (not read into memory); None when
/// empty or unreadable.
pub fn map_file(path: &Path) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(path).ok()?;
    if f.metadata().ok()?.len() == 0 {
        return None;
    }
    // SAFETY: a file of our own (a temp file) or the cache's, which
    // elfutils and we only ever replace by rename, never truncate.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}
