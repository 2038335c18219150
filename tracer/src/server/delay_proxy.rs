//! `--replica-delay-ms D`: a TCP proxy on loopback between a replica and
//! its source that adds D ms of round trip, D/2 each way, bytes in order.
//! It stands for the network distance to the replica: this kernel has no
//! netem qdisc, and a proxy in process needs nothing from the host. The
//! delay can change while it runs (a sweep's cells): each chunk takes the
//! delay in force when it was read.
//!
//! OS threads, not tokio tasks: tokio's timer wheel counts whole
//! milliseconds, so every chunk would wait up to 1 ms more than asked
//! (measured: a 0 ms proxy took a semi-sync source from 6,500 to 620
//! tps), where a sleeping thread wakes within about 0.1 ms. It carries
//! the replica's one or two connections: four threads each.
use std::{
    io::{Read, Write},
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc, Mutex,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// A running proxy: connect to `listen` to reach the upstream with the
/// delay added. Dropping it closes every connection and stops its
/// threads.
pub struct DelayProxy {
    pub listen: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// What the proxy's threads share.
struct Shared {
    /// The one-way delay in ns, read at every chunk.
    one_way_ns: AtomicU64,
    stop: AtomicBool,
    /// Every socket it holds, to shut down when it stops (their threads
    /// then end on the error).
    sockets: Mutex<Vec<TcpStream>>,
}

/// How often the accepting thread looks whether it should stop.
const ACCEPT_POLL: Duration = Duration::from_millis(20);

impl DelayProxy {
    /// Listens on a free loopback port and forwards each connection to
    /// `upstream`, every chunk held `round_trip / 2` in each direction.
    pub fn start(upstream: SocketAddr, round_trip: Duration) -> std::io::Result<DelayProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let listen = listener.local_addr()?;
        let shared = Arc::new(Shared {
            one_way_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("delay-proxy".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((down, _)) => forward(down, upstream, &s),
                        Err(_) => std::thread::sleep(ACCEPT_POLL),
                    }
                }
            })?;
        let p = DelayProxy {
            listen,
            shared,
            accept: Some(accept),
        };
        p.set_round_trip(round_trip);
        Ok(p)
    }

    /// The round trip it adds from now on (chunks already read keep
    /// theirs: bytes never overtake each other).
    pub fn set_round_trip(&self, round_trip: Duration) {
        let ns = u64::try_from((round_trip / 2).as_nanos()).unwrap_or(u64::MAX);
        self.shared.one_way_ns.store(ns, Ordering::Relaxed);
    }

    pub fn round_trip(&self) -> Duration {
        Duration::from_nanos(
            self.shared
                .one_way_ns
                .load(Ordering::Relaxed)
                .saturating_mul(2),
        )
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Ok(socks) = self.shared.sockets.lock() {
            for s in socks.iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One connection: upstream opened, both directions pumped by their own
/// threads until each side closes.
fn forward(down: TcpStream, upstream: SocketAddr, shared: &Arc<Shared>) {
    let Ok(up) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = down.set_nonblocking(false);
    // The delay is ours to add: no Nagle's wait on top of it.
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let clone = |s: &TcpStream| s.try_clone().ok();
    let (Some(down_w), Some(up_w), Some(d), Some(u)) =
        (clone(&down), clone(&up), clone(&down), clone(&up))
    else {
        return;
    };
    if let Ok(mut socks) = shared.sockets.lock() {
        socks.push(d);
        socks.push(u);
    }
    pipe(down, up_w, shared.clone());
    pipe(up, down_w, shared.clone());
}

/// Copies `from` to `to`, each chunk written the one-way delay after it
/// was read, in the order read: the reader never waits for the writer,
/// so the delay adds to the latency, not to the bandwidth.
fn pipe(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reader = move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            let due =
                Instant::now() + Duration::from_nanos(shared.one_way_ns.load(Ordering::Relaxed));
            if n == 0 || tx.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
        // `tx` goes here: the writer ends after the last chunk.
    };
    let writer = move || {
        while let Ok((due, chunk)) = rx.recv() {
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    };
    let _ = std::thread::Builder::new()
        .name("delay-proxy-r".into())
        .spawn(reader);
    let _ = std::thread::Builder::new()
        .name("delay-proxy-w".into())
        .spawn(writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback: what it reads it writes back.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let at = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    let mut r = s;
                    let _ = std::io::copy(&mut r, &mut w);
                });
            }
        });
        at
    }

    fn round_trip(s: &mut TcpStream, byte: u8) -> Duration {
        let t = Instant::now();
        s.write_all(&[byte]).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(b[0], byte);
        t.elapsed()
    }

    #[test]
    fn every_round_trip_takes_the_delay_and_bytes_keep_their_order() {
        let p = DelayProxy::start(echo(), Duration::from_millis(40)).unwrap();
        let mut s = TcpStream::connect(p.listen).unwrap();
        s.set_nodelay(true).unwrap();
        // Round trips one at a time: none shorter than the delay (a
        // lower bound only: a busy host may add time, never take it).
        for i in 0u8..5 {
            let took = round_trip(&mut s, i);
            assert!(took >= Duration::from_millis(40), "{took:?}");
        }
        // A new delay holds from the next chunk on.
        p.set_round_trip(Duration::from_millis(300));
        assert_eq!(p.round_trip(), Duration::from_millis(300));
        let took = round_trip(&mut s, 9);
        assert!(took >= Duration::from_millis(300), "{took:?}");
        p.set_round_trip(Duration::ZERO);
        // Many writes in flight at once: back whole and in order.
        let sent: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = s.try_clone().unwrap();
        let out = sent.clone();
        let writer = std::thread::spawn(move || {
            for c in out.chunks(1000) {
                w.write_all(c).unwrap();
            }
        });
        let mut got = vec![0u8; sent.len()];
        s.read_exact(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == sent, "bytes reordered or changed");
    }

    #[test]
    fn dropped_it_closes_its_connections_and_accepts_no_more() {
        let p = DelayProxy::start(echo(), Duration::from_millis(2)).unwrap();
        let at = p.listen;
        let mut s = TcpStream::connect(at).unwrap();
        round_trip(&mut s, 1);
        assert!(listens_here(at.port()), "{at}: the listener is not seen");
        drop(p);
        // The connection it carried is closed: a read ends.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
        // Its listener is gone from this process. (Connecting would not
        // say: tests run side by side, and another one's server may bind
        // the freed port at once.)
        assert!(!listens_here(at.port()), "{at} still has our listener");
    }

    /// Whether this process holds a listening TCP socket on `port`: the
    /// inodes of its socket fds against the LISTEN rows of /proc/net/tcp.
    fn listens_here(port: u16) -> bool {
        let ours = crate::server::commits::socket_inodes("/proc/self/fd").unwrap();
        let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
        table.lines().skip(1).any(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            f.len() > 9
                && f[3] == "0A"
                && f[1].rsplit(':').next() == Some(&format!("{port:04X}"))
                && ours.iter().any(|i| i == f[9])
        })
    }
}
