//! Hides a password given on the command line from other users: like the
//! mysql client, once the options are parsed, the password's bytes in the
//! process's own argv are overwritten with `x`, so `ps` and
//! `/proc/<pid>/cmdline` show `-pxxxxxx` for the rest of a run (sweeps run
//! for hours). Until then — a few milliseconds — it is visible: hence the
//! warning that commitscope prints, as the mysql client does.
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

static ARGC: AtomicI32 = AtomicI32::new(0);
static ARGV: AtomicPtr<*mut libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// glibc calls `.init_array` functions with (argc, argv, envp): the one
/// portable way to the original argv memory that `/proc` reads.
extern "C" fn capture(
    argc: libc::c_int,
    argv: *mut *mut libc::c_char,
    _envp: *mut *mut libc::c_char,
) {
    ARGC.store(argc, Ordering::Relaxed);
    ARGV.store(argv, Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static CAPTURE: extern "C" fn(libc::c_int, *mut *mut libc::c_char, *mut *mut libc::c_char) =
    capture;

/// Which bytes of one argument are a password, given the argument before
/// it: `-pSECRET`, `--password=SECRET`, `-p SECRET`/`--password SECRET`
/// (the value as its own argument), and the password in a `--dsn` URL.
fn secret_range(prev: Option<&[u8]>, arg: &[u8]) -> Option<std::ops::Range<usize>> {
    let whole = 0..arg.len();
    match prev {
        Some(b"-p" | b"--password") => return Some(whole),
        Some(b"--dsn") => return dsn_password(arg, 0),
        _ => {}
    }
    if let Some(v) = arg.strip_prefix(b"--password=") {
        return Some(arg.len() - v.len()..arg.len());
    }
    if let Some(v) = arg.strip_prefix(b"--dsn=") {
        return dsn_password(arg, arg.len() - v.len());
    }
    if arg.starts_with(b"-p") && !arg.starts_with(b"--") && arg.len() > 2 {
        return Some(2..arg.len());
    }
    None
}

/// The password of the `--dsn` URL starting at `from` in `arg`, found
/// as the connection code finds it (also in a malformed URL).
fn dsn_password(arg: &[u8], from: usize) -> Option<std::ops::Range<usize>> {
    let url = std::str::from_utf8(&arg[from..]).ok()?;
    let r = workload::conn::dsn_password_span(url)?;
    Some(from + r.start..from + r.end)
}

/// Overwrites every password in the process's argv with `x`. Call after
/// the options are parsed (they were copied out of argv by then).
pub fn hide_passwords() {
    let argc = ARGC.load(Ordering::Relaxed);
    let argv = ARGV.load(Ordering::Relaxed);
    if argv.is_null() {
        return;
    }
    let mut prev: Option<Vec<u8>> = None;
    for i in 1..argc.max(0) as usize {
        // SAFETY: glibc's argv has argc valid, NUL-terminated entries that
        // live for the whole process; this thread alone writes them.
        let p = unsafe { *argv.add(i) };
        if p.is_null() {
            break;
        }
        let len = unsafe { libc::strlen(p) };
        let bytes = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
        let owned = bytes.to_vec();
        if let Some(r) = secret_range(prev.as_deref(), &owned) {
            bytes[r].fill(b'x');
        }
        prev = Some(owned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(prev: Option<&str>, arg: &str) -> String {
        let mut b = arg.as_bytes().to_vec();
        if let Some(r) = secret_range(prev.map(str::as_bytes), arg.as_bytes()) {
            b[r].fill(b'x');
        }
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn every_spelling_of_a_password_is_found() {
        assert_eq!(masked(None, "-ps3cret"), "-pxxxxxx");
        assert_eq!(masked(None, "--password=s3cret"), "--password=xxxxxx");
        assert_eq!(masked(Some("-p"), "s3cret"), "xxxxxx");
        assert_eq!(masked(Some("--password"), "s3cret"), "xxxxxx");
        assert_eq!(
            masked(None, "--dsn=mysql://bob:pw@h:3306/db"),
            "--dsn=mysql://bob:xx@h:3306/db"
        );
        assert_eq!(
            masked(Some("--dsn"), "mysql://bob:pw@h/?socket=/a@b"),
            "mysql://bob:xx@h/?socket=/a@b"
        );
        assert_eq!(masked(Some("--dsn"), "mysql://bob@h/"), "mysql://bob@h/");
        assert_eq!(
            masked(Some("--dsn"), "mysql//bob:pw@h:x/"),
            "mysql//bob:xx@h:x/"
        );
        assert_eq!(masked(None, "--port=3306"), "--port=3306");
        assert_eq!(masked(None, "-p"), "-p");
        assert_eq!(masked(None, "--pid=3"), "--pid=3");
    }
}
