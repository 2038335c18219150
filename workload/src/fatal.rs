//! Server errors after which a run must stop instead of counting on: the
//! server cannot write (its disk is full). Hammering such a server only
//! piles up errors on it, and its figures mean nothing any more.
use std::sync::Mutex;

/// `ER_ERROR_ON_WRITE`: "Error writing file '%s' (errno: %d)".
const ERROR_ON_WRITE: u16 = 3;
/// `ER_DISK_FULL`: "Disk full (%s); waiting for someone to free some space".
const DISK_FULL: u16 = 1021;
/// `ER_GET_ERRNO`: "Got error %d from storage engine".
const GET_ERRNO: u16 = 1030;
/// `ER_RECORD_FILE_FULL`: "The table '%s' is full" (a tablespace could
/// not grow; also a MEMORY table at its cap, which the workloads never use).
const RECORD_FILE_FULL: u16 = 1114;

/// Whether a server error means the server's disk is full. `ENOSPC` (28)
/// reaches the client only inside the text of the generic codes.
pub fn disk_full(code: u16, msg: &str) -> bool {
    match code {
        DISK_FULL | RECORD_FILE_FULL => true,
        ERROR_ON_WRITE | GET_ERRNO => says_no_space(msg),
        _ => false,
    }
}

/// Whether a server's text (a client error, an error-log line) says a
/// write failed for want of space: ENOSPC's words, or its number 28 after
/// "errno: ", "Errcode: " or "error " (and not 280).
pub fn says_no_space(text: &str) -> bool {
    if text.contains("No space left") || text.contains("Disk is full") {
        return true;
    }
    ["errno: 28", "Errcode: 28", "error 28"].iter().any(|p| {
        text.match_indices(p)
            .any(|(i, _)| !text[i + p.len()..].starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// The first fatal error of a run, shared by its workers.
#[derive(Debug, Default)]
pub struct Fatal(Mutex<Option<String>>);

impl Fatal {
    /// Keeps `msg` when `code` is fatal and nothing was kept before;
    /// true when the error is fatal.
    pub fn note(&self, code: u16, msg: &str) -> bool {
        if !disk_full(code, msg) {
            return false;
        }
        if let Ok(mut f) = self.0.lock() {
            f.get_or_insert_with(|| format!("the server's disk is full: {msg}"));
        }
        true
    }

    /// What stopped the run, once something did.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|f| f.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_full_errors_are_told_from_others() {
        assert!(disk_full(1114, "The table 'test_load' is full"));
        assert!(disk_full(1021, "Disk full (/tmp/#sql_1.MAI); waiting for someone to free some space... (errno: 28 \"No space left on device\")"));
        assert!(disk_full(
            3,
            "Error writing file './mysql-bin.000001' (errno: 28 \"No space left on device\")"
        ));
        assert!(disk_full(
            1030,
            "Got error 28 \"No space left on device\" from storage engine InnoDB"
        ));
        assert!(!disk_full(1030, "Got error 168 from storage engine InnoDB"));
        assert!(!disk_full(1030, "Got error 280 from storage engine InnoDB"));
        assert!(says_no_space(
            "InnoDB: preallocating 3145728 bytes for file ./t.ibd failed with error 28"
        ));
        assert!(says_no_space(
            "Disk is full writing './b.000001' (Errcode: 28 \"No space left on device\")"
        ));
        assert!(!says_no_space("InnoDB: Aborting"));
        assert!(!disk_full(1213, "Deadlock found when trying to get lock"));
        let f = Fatal::default();
        assert!(!f.note(1062, "Duplicate entry"));
        assert_eq!(f.get(), None);
        assert!(f.note(1114, "The table 't' is full"));
        assert!(f.note(1021, "Disk full"));
        assert_eq!(
            f.get().as_deref(),
            Some("the server's disk is full: The table 't' is full")
        );
    }
}
