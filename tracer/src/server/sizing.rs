//! The managed server's limits, sized to the run instead of the server's
//! defaults: `max_connections` (MariaDB's default 151 made `--threads 256`
//! fail with `1040 Too many connections`), the file limits that follow
//! from it, and a buffer pool that holds the TPC-C data.
use readers::server::options::ServerOption;

/// Connections beyond the run's own: the tool's control connection, a
/// schema connection, and a few for the user to look in with the client.
pub const MARGIN: u32 = 20;
/// The server's default `table_open_cache`, set explicitly so the server
/// never lowers it to fit a tight `open_files_limit`.
pub const TABLE_OPEN_CACHE: u64 = 2000;
/// Buffer pool per TPC-C warehouse: ~85 MB of data and indexes after the
/// load, growing with the run's new orders and history rows.
pub const POOL_PER_WAREHOUSE: u64 = 100 << 20;

/// What a run needs of the managed server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Connections open at once: the largest `--threads` of the run or
    /// sweep (or the TPC-C loaders, when more).
    pub clients: u32,
    /// The largest TPC-C warehouse count, if the run is TPC-C.
    pub warehouses: Option<u32>,
}

/// The limits the managed server starts with.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Sizing {
    pub max_connections: u64,
    /// One descriptor per connection, two per open table, and room for
    /// the InnoDB files and logs.
    pub open_files_limit: u64,
    pub buffer_pool_bytes: u64,
    /// Set when the TPC-C data will not fit in the buffer pool.
    #[serde(skip)]
    pub warning: Option<String>,
}

fn ram_bytes() -> u64 {
    // SAFETY: sysinfo fills the zeroed struct we pass.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut si) } == 0 {
        si.totalram as u64 * u64::from(si.mem_unit)
    } else {
        0
    }
}

/// A size in bytes as the server's option takes it (`1G`, `512M`, bytes).
fn bytes_of(o: &ServerOption) -> Option<u64> {
    o.sql_value().parse().ok()
}

impl Sizing {
    /// The limits for `shape` on a machine with `ram` bytes; `user` are the
    /// `--server-option`s, which win (they come later on the command line)
    /// and are taken into account for the warning.
    pub fn new(shape: Shape, ram: u64, user: &[ServerOption]) -> Sizing {
        let max_connections = u64::from(shape.clients + MARGIN).max(151);
        let open_files_limit = max_connections + 2 * TABLE_OPEN_CACHE + 1000;
        // RAM/4 up to 1 GiB: room for the update workload's rows and the
        // redo log's traffic, and plenty left for the clients.
        let base = (ram / 4).clamp(128 << 20, 1 << 30);
        let (buffer_pool_bytes, want) = match shape.warehouses {
            Some(w) => {
                let want = u64::from(w) * POOL_PER_WAREHOUSE;
                (base.max(want.min(ram / 2)), want)
            }
            None => (base, 0),
        };
        let effective = user
            .iter()
            .rev()
            .find(|o| o.variable() == "innodb_buffer_pool_size")
            .and_then(bytes_of)
            .unwrap_or(buffer_pool_bytes);
        let warning = (want > effective).then(|| {
            format!(
                "{} warehouses need about {} MiB of buffer pool, the managed server has {} MiB{}: the run will read from disk, and its figures with it",
                shape.warehouses.unwrap_or(0),
                want >> 20,
                effective >> 20,
                if effective == buffer_pool_bytes { " (half the memory at most)" } else { "" }
            )
        });
        Sizing {
            max_connections,
            open_files_limit,
            buffer_pool_bytes,
            warning,
        }
    }

    /// For this machine.
    pub fn for_machine(shape: Shape, user: &[ServerOption]) -> Sizing {
        Sizing::new(shape, ram_bytes(), user)
    }

    /// The server's command-line options, before the user's.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--max-connections={}", self.max_connections),
            format!("--open-files-limit={}", self.open_files_limit),
            format!("--table-open-cache={TABLE_OPEN_CACHE}"),
            format!("--innodb-buffer-pool-size={}", self.buffer_pool_bytes),
        ]
    }

    /// `-v`'s line.
    pub fn describe(&self) -> String {
        format!(
            "max_connections={} open_files_limit={} table_open_cache={TABLE_OPEN_CACHE} innodb_buffer_pool_size={}M",
            self.max_connections,
            self.open_files_limit,
            self.buffer_pool_bytes >> 20
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn connections_follow_the_clients() {
        let s = Sizing::new(
            Shape {
                clients: 4000,
                warehouses: None,
            },
            24 * GIB,
            &[],
        );
        assert_eq!(s.max_connections, 4020);
        assert_eq!(s.open_files_limit, 4020 + 4000 + 1000);
        assert_eq!(s.buffer_pool_bytes, GIB);
        assert!(s.warning.is_none());
        let small = Sizing::new(
            Shape {
                clients: 8,
                warehouses: None,
            },
            24 * GIB,
            &[],
        );
        assert_eq!(small.max_connections, 151);
    }

    #[test]
    fn the_pool_holds_the_warehouses_up_to_half_the_memory() {
        let s = |w, user: &[ServerOption]| {
            Sizing::new(
                Shape {
                    clients: 8,
                    warehouses: Some(w),
                },
                24 * GIB,
                user,
            )
        };
        assert_eq!(s(2, &[]).buffer_pool_bytes, GIB);
        assert_eq!(s(100, &[]).buffer_pool_bytes, 100 * POOL_PER_WAREHOUSE);
        assert!(s(100, &[]).warning.is_none());
        let big = s(1000, &[]);
        assert_eq!(big.buffer_pool_bytes, 12 * GIB);
        assert!(big
            .warning
            .unwrap()
            .contains("1000 warehouses need about 100000 MiB"));
        let user: ServerOption = "innodb_buffer_pool_size=256M".parse().unwrap();
        assert!(s(8, &[user]).warning.unwrap().contains("has 256 MiB"));
    }
}
