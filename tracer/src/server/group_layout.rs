//! Where a managed group's members listen and what each needs before it
//! starts: its ports (chosen together: each member's options name the
//! others'), its copy or home of the group's library, and a binary that
//! can be a member at all. The family's row says what; `server::group`
//! starts them.
use std::path::{Path, PathBuf};

use readers::family::group::{GroupRow, Home, MemberWire};

use super::{locate::ServerBinary, managed::Managed, replica::Mode};
use crate::error::{Error, Result};

/// Where every member listens, chosen before the first one starts (each
/// needs the others' addresses as its seeds).
#[derive(Clone, Debug)]
pub struct Layout {
    pub sql_ports: Vec<u16>,
    pub group_ports: Vec<u16>,
    /// Each member's state-transfer ports (the row's count of them).
    pub transfer_ports: Vec<Vec<u16>>,
    pub group_name: String,
}

impl Layout {
    /// Ports for `members` members, each with `transfer` state-transfer
    /// ports besides its SQL and group ports.
    pub fn new(members: u32, transfer: usize) -> Result<Layout> {
        let mut sql_ports = Vec::new();
        let mut group_ports = Vec::new();
        let mut transfer_ports = Vec::new();
        let per = 2 + transfer;
        // Held until all are picked: no two members get the same port.
        let mut held = Vec::new();
        for _ in 0..members as usize * per {
            let l = std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))?;
            held.push(l);
        }
        for (i, l) in held.iter().enumerate() {
            let p = l
                .local_addr()
                .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))?
                .port();
            match i % per {
                0 => sql_ports.push(p),
                1 => {
                    group_ports.push(p);
                    transfer_ports.push(Vec::new());
                }
                _ => {
                    if let Some(t) = transfer_ports.last_mut() {
                        t.push(p);
                    }
                }
            }
        }
        drop(held);
        Ok(Layout {
            sql_ports,
            group_ports,
            transfer_ports,
            group_name: group_name(),
        })
    }

    fn seeds(&self) -> String {
        self.group_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i`'s (0: the primary) start options, its plugin in
    /// `plugin_dir`.
    pub fn member_args(&self, row: &GroupRow, i: usize, plugin_dir: &str) -> Vec<String> {
        (row.member_args)(&MemberWire {
            server_id: i as u32 + 1,
            sql_port: self.sql_ports[i],
            group_port: self.group_ports[i],
            seeds: &self.seeds(),
            group_name: &self.group_name,
            plugin_dir,
            transfer_ports: &self.transfer_ports[i],
        })
    }
}

/// A group name (a UUID) new to this run.
fn group_name() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let h = format!("{:032x}", t ^ (u128::from(std::process::id()) << 96));
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// The plugin files a member needs in its own plugin dir (none where
/// the library lives outside the install: all members load it there).
pub fn plugin_files(row: &GroupRow) -> Vec<&'static str> {
    if !matches!(row.home, Home::PluginDir) {
        return Vec::new();
    }
    let mut f = vec![row.library];
    f.extend(row.flow_component.map(|(_, file)| file));
    f
}

/// Where the group's library is for `binary`: its plugin dir, or the
/// first of the row's dirs that has it.
pub fn library_home(row: &GroupRow, binary: &ServerBinary) -> Option<PathBuf> {
    match row.home {
        Home::PluginDir => binary.plugin_dir(row.library),
        Home::Dirs(dirs) => [binary.basedir.as_path(), Path::new("/usr")]
            .iter()
            .flat_map(|base| dirs.iter().map(move |d| base.join(d)))
            .find(|d| d.join(row.library).is_file()),
    }
}

/// The family's group that `--replica mode` asks for; a usage error
/// naming the family that has one where this family has none.
pub fn row_for(family: &'static readers::family::Family, mode: Mode) -> Result<&'static GroupRow> {
    if let Some(row) = family.group.as_ref().filter(|r| r.mode == mode.value()) {
        return Ok(row);
    }
    let other = readers::family::FAMILIES.iter().find_map(|f| {
        let r = f.group.as_ref().filter(|r| r.mode == mode.value())?;
        Some(format!("{}'s {}", f.name, r.name))
    });
    Err(Error::Usage(format!(
        "--replica {}: {} has no such group commitscope can start{}",
        mode.value(),
        family.name,
        other.map_or(String::new(), |o| format!(
            " (it is {o}): use a server of that family"
        ))
    )))
}

/// Refuses, in one line, a binary that cannot be a member: where the
/// family calls its group through the server binary (Galera's wsrep),
/// a build without that support (MariaDB built `-DWITH_WSREP=OFF`, as
/// the symbols fixture is) has no hook.
pub fn check_binary(row: &GroupRow, binary: &ServerBinary) -> Result<()> {
    if !matches!(row.probes_in, readers::family::group::ProbesIn::Server) {
        return Ok(());
    }
    let has = readers::probes::symbols::Resolver::open(&binary.path, Path::new("/usr/lib/debug"))
        .ok()
        .and_then(|r| r.resolve(row.hook))
        .is_some();
    if has {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "--replica {}: {} has no {} support (no {}): use a build with it (Debian's mariadbd has it)",
        row.mode,
        binary.path.display(),
        row.name,
        readers::probes::profiles::short_name(row.hook[0])
    )))
}

/// Why the group's library was not found, for its one line.
pub fn no_library(row: &GroupRow, binary: &ServerBinary) -> String {
    match row.home {
        Home::PluginDir => format!(
            "the plugin {} is not in {}'s plugin dir (lib/mysql/plugin, lib/plugin)",
            row.library,
            binary.basedir.display()
        ),
        Home::Dirs(dirs) => {
            let under = if binary.basedir == Path::new("/usr") {
                "/usr".to_string()
            } else {
                format!("{} or /usr", binary.basedir.display())
            };
            format!(
                "the provider {} is in none of {} under {under}: install it (Debian: apt install galera-4; `cargo xtask setup` does)",
                row.library,
                dirs.join(", "),
            )
        }
    }
}

/// Where a member's options say its library is: its own copy of the
/// plugin dir, or the shared home.
pub fn member_library_dir(row: &GroupRow, m: &Managed, home: &Path) -> Result<String> {
    Ok(match row.home {
        Home::PluginDir => m
            .private_plugins(home, &plugin_files(row))?
            .display()
            .to_string(),
        Home::Dirs(_) => home.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use readers::family::group::GROUP_REPLICATION;

    #[test]
    fn each_member_gets_its_own_ports_and_every_seed() {
        let l = Layout::new(3, 0).unwrap();
        let mut all: Vec<u16> = l.sql_ports.iter().chain(&l.group_ports).copied().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6, "{l:?}");
        let a = l.member_args(&GROUP_REPLICATION, 2, "/p");
        assert!(a.contains(&"--server-id=3".to_string()), "{a:?}");
        let seeds = a
            .iter()
            .find(|x| x.starts_with("--group-replication-group-seeds="))
            .unwrap();
        assert_eq!(seeds.matches("127.0.0.1:").count(), 3, "{seeds}");
        let name = &l.group_name;
        assert_eq!(name.len(), 36, "{name}");
        assert_eq!(name.matches('-').count(), 4, "{name}");
        assert!(
            name.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
            "{name}"
        );
    }
}
