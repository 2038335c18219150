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
//! held by one shared test. An alone test takes every slot at once, only
//! when all are free: while shared tests keep coming, the alone ones wait,
//! and run one after the other once the shared ones are done (a queue
//! file orders them). `cargo xtask test`'s background work (builds, the
//! kernel matrix) runs at idle priority beside both: it takes only the CPU
//! the tests leave, and is preempted the moment a test's thread wakes. A
//! lock goes
//! with its file descriptor: a test that panics or a process that dies
//! releases its lane.
use std::{
    cell::Cell,
    fs::File,
    io::Write,
    os::fd::AsRawFd,
    path::PathBuf,
    time::{Duration, Instant},
};

/// Shared tests that may run at once: one per core, and two more, since
/// a server test spends much of its time waiting for fsyncs, for its
/// servers to start and stop, for its probes to come off (a stock
/// MySQL's 24 uprobes take the kernel 2.4 s, one grace period each), and
/// for a fixed measured time that no spare CPU shortens. With one more
/// (three on 2 cores) the shared tests held their lanes for 1,822 s in
/// all and took 607 s of the suite's wall.
pub fn shared_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2)) + 2
}

thread_local! {
    /// Whether this thread holds a lane: a second one would wait for
    /// itself.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// A lane taken: released when dropped.
pub struct Lane {
    _files: Vec<File>,
    kind: &'static str,
    /// When the test asked for it, and when it got it.
    asked: Instant,
    got: Instant,
}

/// How a lane's end is said, on a line of its own in the test binary's
/// output: `cargo xtask test` reads these for its table of the slowest
/// tests.
pub const REPORT: &str = "testkit-lane:";

impl Drop for Lane {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
        // To the process's stderr itself: the harness captures what a
        // passing test prints, and this is for the run's bookkeeping.
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let _ = writeln!(
            std::io::stderr().lock(),
            "{REPORT} {} {name} waited {:.1} s, held {:.1} s",
            self.kind,
            (self.got - self.asked).as_secs_f64(),
            self.got.elapsed().as_secs_f64()
        );
    }
}

impl Lane {
    fn new(kind: &'static str, asked: Instant, files: Vec<File>) -> Lane {
        Lane {
            _files: files,
            kind,
            asked,
            got: Instant::now(),
        }
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

/// Waits for a shared lane: a free slot.
pub fn shared() -> Lane {
    mark_held();
    Lanes::machine().shared()
}

/// Waits until no other lane is taken on the machine, and keeps it so.
pub fn alone() -> Lane {
    mark_held();
    Lanes::machine().alone()
}

/// How long a waiting test sleeps between tries.
const POLL: Duration = Duration::from_millis(25);

impl Lanes {
    fn slots(&self) -> Vec<File> {
        (0..shared_slots())
            .map(|i| self.open(&format!("slot{i}")))
            .collect()
    }

    fn shared(&self) -> Lane {
        let asked = Instant::now();
        let mut slots = self.slots();
        loop {
            if let Some(i) = slots
                .iter()
                .position(|s| flock(s, libc::LOCK_EX | libc::LOCK_NB))
            {
                return Lane::new("shared", asked, vec![slots.swap_remove(i)]);
            }
            std::thread::sleep(POLL);
        }
    }

    fn alone(&self) -> Lane {
        let asked = Instant::now();
        // One alone test at a time waits for the slots.
        let queue = self.open("queue");
        assert!(flock(&queue, libc::LOCK_EX), "flock the alone queue");
        let slots = self.slots();
        loop {
            // All at once or none: a slot held while waiting for the
            // others would only keep a shared test waiting too.
            let taken: Vec<&File> = slots
                .iter()
                .take_while(|s| flock(s, libc::LOCK_EX | libc::LOCK_NB))
                .collect();
            if taken.len() == slots.len() {
                break;
            }
            for s in taken {
                flock(s, libc::LOCK_UN);
            }
            std::thread::sleep(POLL);
        }
        let mut files = vec![queue];
        files.extend(slots);
        Lane::new("alone", asked, files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alone_lane_waits_for_the_shared_ones_and_keeps_them_out() {
        use std::sync::{mpsc::channel, Arc};
        // Lanes of their own: the machine's are the suite's.
        let d = tempfile::tempdir().unwrap();
        let lanes = Arc::new(Lanes(d.path().to_path_buf()));
        let s = lanes.shared();
        // An alone test asks while the shared lane is taken ...
        let (got_tx, got) = channel();
        let (release, release_rx) = channel::<()>();
        let l = lanes.clone();
        let alone = std::thread::spawn(move || {
            let a = l.alone();
            got_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(a);
        });
        // ... and waits (whatever the machine's load: it cannot have it).
        assert!(got.recv_timeout(Duration::from_millis(300)).is_err());
        drop(s);
        // Free: it takes the machine.
        got.recv_timeout(Duration::from_secs(30))
            .expect("the alone lane");
        // A shared test now waits until the alone one ends.
        let (shared_tx, shared) = channel();
        let l = lanes.clone();
        let waiter = std::thread::spawn(move || {
            let s = l.shared();
            shared_tx.send(()).unwrap();
            drop(s);
        });
        assert!(shared.recv_timeout(Duration::from_millis(300)).is_err());
        release.send(()).unwrap();
        alone.join().unwrap();
        shared
            .recv_timeout(Duration::from_secs(30))
            .expect("the shared lane");
        waiter.join().unwrap();
    }
}
