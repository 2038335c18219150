//! Hides a password given on the command line from other users: like the
//! mysql client, once the options are parsed, the password's bytes in the
//! process's own argv are overwritten with `x`, so `ps` and
//! `/proc/<pid>/cmdline` show `-pxxxxxx` for the rest of a run (sweeps run
//! for hours). Until then — a few milliseconds — it is visible: hence the
//! warning that commitscope prints, as the mysql client does.

/// The address range of the process's argument strings (what
/// `/proc/<pid>/cmdline` reads): fields 48 and 49 of `/proc/self/stat`
/// (Linux 3.5+). Read from the kernel rather than from the C library,
/// whose way to argv differs: musl, unlike glibc, does not pass
/// (argc, argv, envp) to `.init_array` functions.
fn arg_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which may itself hold spaces and ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let start = fields.get(48 - 3)?.parse().ok()?;
    let end = fields.get(49 - 3)?.parse().ok()?;
    (start != 0 && end > start).then_some((start, end))
}

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
    let Some((start, end)) = arg_area() else {
        return;
    };
    // SAFETY: the kernel says these bytes are this process's argument
    // strings, mapped for its whole life; only this call writes them,
    // after clap copied the options out.
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut prev: Option<Vec<u8>> = None;
    // argv[0] first, then each argument, NUL-terminated.
    for (i, arg) in area.split_mut(|b| *b == 0).enumerate() {
        let owned = arg.to_vec();
        if i > 0 {
            if let Some(r) = secret_range(prev.as_deref(), &owned) {
                arg[r].fill(b'x');
            }
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
