//! How a test shares the machine with the tests that run beside it, in
//! its own binary and in the others `cargo xtask test` runs at the same
//! time.
//!
//! A test that starts servers or drives load takes a lane for its whole
//! run; one that only parses, refuses bad input or reads files takes
//! none. Two kinds:
//!
//! - [`shared`]: counts, exact or against the server's own counters, that
//!   hold however busy the machine is. A few such tests run at once
//!   ([`shared_slots`]), never beside an alone one.
//! - [`alone`]: the figure compared is a time or a throughput (the
//!   study's ordering, a delay landing in a stage, an exit within a
//!   bound): the test runs with no other lane taken anywhere on the
//!   machine.
//!
//! The lanes are `flock`s on files in one directory of the machine's temp
//! dir, so they hold across processes: [`shared_slots`] slot files, each
//! held by one shared test, and a gate that an alone test takes before
//! every slot, which keeps new shared tests out while it waits for the
//! running ones to end. A lock goes with its file descriptor: a test that
//! panics or a process that dies releases its lane.
use std::{cell::Cell, fs::File, os::fd::AsRawFd, path::PathBuf, time::Duration};

/// Shared tests that may run at once: one per core, and one more, since
/// a server test spends much of its time waiting for fsyncs and for its
/// servers to start and stop.
pub fn shared_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2)) + 1
}

thread_local! {
    /// Whether this thread holds a lane: a second one would wait for
    /// itself.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// A lane taken: released when dropped.
pub struct Lane {
    _files: Vec<File>,
}

impl Drop for Lane {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
    }
}

/// The machine's lanes: where their lock files are.
struct Lanes(PathBuf);

impl Lanes {
    fn machine() -> Lanes {
        Lanes(std::env::temp_dir().join("commitscope-test-lanes"))
    }

    fn open(&self, name: &str) -> File {
        open(&self.0, name)
    }
}

fn open(d: &std::path::Path, name: &str) -> File {
    let _ = std::fs::create_dir_all(d);
    let path = d.join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("test lane {}: {e}", path.display()))
}

/// `flock(file, op)`: true when taken.
fn flock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: a valid descriptor owned by `f`.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

fn mark_held() {
    HELD.with(|h| {
        assert!(
            !h.get(),
            "this test already holds a lane: take one per test, at its start"
        );
        h.set(true);
    });
}

/// Waits for a shared lane: a free slot while no alone test holds or
/// waits for the gate.
pub fn shared() -> Lane {
    mark_held();
    Lanes::machine().shared()
}

/// Waits until no other lane is taken on the machine, and keeps it so.
pub fn alone() -> Lane {
    mark_held();
    Lanes::machine().alone()
}

/// Whether a test holds the machine alone, or waits for it: what
/// `cargo xtask test` stops its background builds for.
pub fn alone_wanted() -> bool {
    let gate = Lanes::machine().open("gate");
    let free = flock(&gate, libc::LOCK_SH | libc::LOCK_NB);
    if free {
        flock(&gate, libc::LOCK_UN);
    }
    !free
}

impl Lanes {
    fn shared(&self) -> Lane {
        let gate = self.open("gate");
        let slots: Vec<File> = (0..shared_slots())
            .map(|i| self.open(&format!("slot{i}")))
            .collect();
        loop {
            if flock(&gate, libc::LOCK_SH | libc::LOCK_NB) {
                let got = slots
                    .iter()
                    .position(|s| flock(s, libc::LOCK_EX | libc::LOCK_NB));
                flock(&gate, libc::LOCK_UN);
                if let Some(i) = got {
                    let mut slots = slots;
                    return Lane {
                        _files: vec![slots.swap_remove(i)],
                    };
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn alone(&self) -> Lane {
        let gate = self.open("gate");
        assert!(flock(&gate, libc::LOCK_EX), "flock the test gate");
        let mut files = vec![gate];
        for i in 0..shared_slots() {
            let s = self.open(&format!("slot{i}"));
            assert!(flock(&s, libc::LOCK_EX), "flock test slot {i}");
            files.push(s);
        }
        Lane { _files: files }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alone_lane_waits_for_the_shared_ones_and_keeps_them_out() {
        // Lanes of their own: the machine's are the suite's.
        let d = tempfile::tempdir().unwrap();
        let lanes = std::sync::Arc::new(Lanes(d.path().to_path_buf()));
        let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let s = lanes.shared();
        let (h, l) = (held.clone(), lanes.clone());
        let t = std::thread::spawn(move || {
            let _a = l.alone();
            h.store(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            h.store(2, std::sync::atomic::Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(200));
        // Still waiting: the shared lane above is taken.
        assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), 0);
        drop(s);
        while held.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Taken by the alone test: a shared one waits until it ends.
        let _s = lanes.shared();
        assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), 2);
        t.join().unwrap();
    }
}
