//! `--replica group`: a single-primary replication group of the managed
//! server and more members from the same binary, on loopback. The
//! managed server founds the group and stays its primary (the workload
//! runs there); the others join it with the recovery account. What the
//! family spells (options, statements, tables) is its row's
//! [`GroupRow`]; the steps are here.
use std::time::Duration;

use mysql_async::prelude::Queryable;
use readers::family::{
    group::{GroupRow, MemberWire},
    replication::quote,
};

use super::{
    managed::{Managed, ManagedConfig},
    sizing::{Shape, Sizing},
    status::{moved, Status},
};
use crate::error::{Error, Result};

/// Members a group gets by default: it keeps a majority when one dies.
pub const DEFAULT_MEMBERS: u32 = 3;
/// The most `--group-members` takes: each member is a server on this
/// machine.
pub const MAX_MEMBERS: u32 = 5;

/// How long every member may take to be ONLINE.
const ONLINE_LIMIT: Duration = Duration::from_secs(120);

/// The recovery account commitscope creates on every member.
const RECOVERY_USER: &str = "commitscope_gr";

/// What a run asks of its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    pub members: u32,
}

/// Where every member listens, chosen before the first one starts (each
/// needs the others' addresses as its seeds).
#[derive(Clone, Debug)]
pub struct Layout {
    pub sql_ports: Vec<u16>,
    pub group_ports: Vec<u16>,
    pub group_name: String,
}

impl Layout {
    pub fn new(members: u32) -> Result<Layout> {
        let mut sql_ports = Vec::new();
        let mut group_ports = Vec::new();
        // Held until all are picked: no two members get the same port.
        let mut held = Vec::new();
        for _ in 0..members * 2 {
            let l = std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))?;
            held.push(l);
        }
        for (i, l) in held.iter().enumerate() {
            let p = l
                .local_addr()
                .map_err(|e| Error::Runtime(format!("no free loopback port: {e}")))?
                .port();
            if i % 2 == 0 {
                sql_ports.push(p);
            } else {
                group_ports.push(p);
            }
        }
        drop(held);
        Ok(Layout {
            sql_ports,
            group_ports,
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

/// The plugin files a member needs in its own plugin dir.
pub fn plugin_files(row: &GroupRow) -> Vec<&'static str> {
    let mut f = vec![row.library];
    f.extend(row.flow_component.map(|(_, file)| file));
    f
}

/// One member as the primary sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemberState {
    /// `127.0.0.1:3307`.
    pub address: String,
    pub state: String,
    pub role: String,
}

/// A row of the members' table: host, port, state, role.
type MemberRow = (Option<String>, Option<u64>, Option<String>, Option<String>);

/// A member besides the primary.
pub struct Member {
    pub server: Managed,
    pub port: u16,
}

/// The running group's other members. Dropping it stops them.
pub struct Group {
    pub members: Vec<Member>,
    pub row: &'static GroupRow,
    pub layout: Layout,
    /// The members ONLINE at the last look, and every member that
    /// left ONLINE during the run (by address), said once each.
    pub last: Vec<MemberState>,
    pub lost: Vec<String>,
    /// The flow-control component is installed (its counters are read
    /// with the status).
    pub flow_counters: bool,
}

/// A member's first error-log complaint, for a failure's one line.
fn member_error(m: &Managed) -> String {
    super::managed::log_errors(&std::fs::read_to_string(&m.log).unwrap_or_default())
}

fn sql_err(what: String) -> impl Fn(mysql_async::Error) -> Error {
    move |e| Error::Group {
        detail: format!("{what}: {e}"),
    }
}

impl Group {
    /// Founds the group on `primary` (already started with the member
    /// options of [`Layout::member_args`] 0), then makes, starts and
    /// joins the others, and waits until every member is ONLINE.
    /// Cancel-safe: what it started is dropped with the future.
    pub async fn start(
        cfg: ManagedConfig,
        row: &'static GroupRow,
        layout: Layout,
        primary: &mut mysql_async::Conn,
        primary_server: &Managed,
        plugin_dir: &std::path::Path,
    ) -> Result<Group> {
        let password = super::replica::password("gr");
        let mut flow_counters = false;
        setup_member(primary, &password, "the primary").await?;
        if let Some((urn, _)) = row.flow_component {
            // Its counters are the server's own count of throttling;
            // without it, the probes' time stands alone.
            flow_counters = primary
                .query_drop(format!("INSTALL COMPONENT {}", quote(urn)))
                .await
                .is_ok();
        }
        primary
            .query_drop(row.bootstrap_on)
            .await
            .map_err(sql_err("founding the group".into()))?;
        let started = primary
            .query_drop((row.start)(RECOVERY_USER, &password))
            .await;
        let _ = primary.query_drop(row.bootstrap_off).await;
        started.map_err(|e| Error::Group {
            detail: format!(
                "the primary did not start the group: {e}: {}",
                member_error(primary_server)
            ),
        })?;
        let mut group = Group {
            members: Vec::new(),
            row,
            layout: layout.clone(),
            last: Vec::new(),
            lost: Vec::new(),
            flow_counters,
        };
        // Their datadirs in parallel: each init is seconds of one CPU.
        let n = layout.sql_ports.len();
        let mut made = Vec::new();
        for i in 1..n {
            let mut c = cfg.clone();
            c.sizing = Sizing::for_machine(
                Shape {
                    clients: 8,
                    warehouses: None,
                },
                &[],
            );
            c.options.clear();
            let mut m = Managed::new(c)?;
            let own = m.private_plugins(plugin_dir, &plugin_files(row))?;
            m.extra_args = layout.member_args(row, i, &own.display().to_string());
            m.listen_port = Some(layout.sql_ports[i]);
            made.push(m);
        }
        // Each init in a task of its own, owning its member (dropped,
        // and so stopped and removed, when the set is).
        let mut inits = tokio::task::JoinSet::new();
        for (k, mut m) in made.into_iter().enumerate() {
            inits.spawn(async move {
                let r = m.init().await;
                (k, m, r)
            });
        }
        let mut ready = Vec::new();
        while let Some(done) = inits.join_next().await {
            let (k, m, r) = done.map_err(|e| Error::Runtime(format!("a member's init: {e}")))?;
            r?;
            ready.push((k, m));
        }
        ready.sort_by_key(|(k, _)| *k);
        for (k, mut m) in ready {
            let name = format!("member {} (127.0.0.1:{})", k + 2, layout.sql_ports[k + 1]);
            m.start().await.map_err(|e| Error::Group {
                detail: format!("{name} did not start: {e}"),
            })?;
            let ep = workload::conn::ConnArgs::resolve(&m.conn_args())?;
            let mut c = workload::conn::connect(&ep, None).await?;
            setup_member(&mut c, &password, &name).await?;
            let joined = c.query_drop((row.start)(RECOVERY_USER, &password)).await;
            let _ = c.disconnect().await;
            if let Err(e) = joined {
                return Err(Error::Group {
                    detail: format!("{name} did not join: {e}: {}", member_error(&m)),
                });
            }
            group.members.push(Member {
                server: m,
                port: layout.sql_ports[k + 1],
            });
        }
        group.wait_online(primary).await?;
        Ok(group)
    }

    /// Waits until every member is ONLINE, as the primary sees it.
    async fn wait_online(&mut self, primary: &mut mysql_async::Conn) -> Result<()> {
        let want = self.layout.sql_ports.len();
        let deadline = tokio::time::Instant::now() + ONLINE_LIMIT;
        loop {
            let states = self.states(primary).await?;
            let online = states.iter().filter(|m| m.state == self.row.online).count();
            if online == want {
                self.last = states;
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let stuck: Vec<String> = self
                    .members
                    .iter()
                    .filter(|m| {
                        !states.iter().any(|s| {
                            s.address.ends_with(&format!(":{}", m.port))
                                && s.state == self.row.online
                        })
                    })
                    .map(|m| format!("127.0.0.1:{} ({})", m.port, member_error(&m.server)))
                    .collect();
                return Err(Error::Group {
                    detail: format!(
                        "{online} of {want} members ONLINE after {} s; not: {}",
                        ONLINE_LIMIT.as_secs(),
                        stuck.join("; ")
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every member as the primary sees it.
    pub async fn states(&self, primary: &mut mysql_async::Conn) -> Result<Vec<MemberState>> {
        let rows: Vec<MemberRow> = primary
            .query(self.row.members)
            .await
            .map_err(sql_err("reading the group's members".into()))?;
        Ok(rows
            .into_iter()
            .map(|(h, p, s, r)| MemberState {
                address: format!("{}:{}", h.unwrap_or_default(), p.unwrap_or_default()),
                state: s.unwrap_or_default(),
                role: r.unwrap_or_default(),
            })
            .collect())
    }

    /// Looks at the members again: what changed since the last look, as
    /// lines to say (a member no longer ONLINE, or gone from the view),
    /// and whether the group still has a majority of its members ONLINE.
    pub async fn look(&mut self, primary: &mut mysql_async::Conn) -> Result<Look> {
        let now = self.states(primary).await?;
        let mut said = Vec::new();
        for was in self.last.iter().filter(|m| m.state == self.row.online) {
            let state = now
                .iter()
                .find(|m| m.address == was.address)
                .map_or("gone from the group", |m| m.state.as_str());
            if state != self.row.online && !self.lost.contains(&was.address) {
                self.lost.push(was.address.clone());
                said.push(format!("group member {} is {state}", was.address));
            }
        }
        let size = self.layout.sql_ports.len();
        let online = now.iter().filter(|m| m.state == self.row.online).count();
        // A member that left cleanly shrinks the group; one that is
        // UNREACHABLE still counts against its majority.
        let counted = now.len().max(1);
        self.last = now;
        Ok(Look {
            said,
            online,
            size,
            majority: online * 2 > counted,
        })
    }

    /// For the header: "group of 3 (single-primary, Group Replication)".
    pub fn describe(&self) -> String {
        format!(
            "group of {} (single-primary {})",
            self.layout.sql_ports.len(),
            self.row.name
        )
    }

    /// The members at the end, for the summary, with the primary's
    /// counters over the window `before..after`.
    pub fn end(&self, before: &Status, after: &Status) -> GroupEnd {
        let d = |name: &str| Some(moved(*after.0.get(name)?, *before.0.get(name)?));
        let (count, time) = self.row.throttle_counters;
        GroupEnd {
            name: self.row.name,
            size: self.layout.sql_ports.len(),
            online: self
                .last
                .iter()
                .filter(|m| m.state == self.row.online)
                .count(),
            members: self.last.clone(),
            lost: self.lost.clone(),
            throttled: d(count),
            throttle_us: d(time),
            conflicts: d(self.row.conflicts),
            rollbacks: d(self.row.rollbacks),
        }
    }

    /// Makes every member's stop quick: a member that cannot reach its
    /// group waits for it at shutdown.
    pub fn doomed(&mut self) {
        for m in &mut self.members {
            m.server.cannot_write();
        }
    }
}

/// Members ONLINE out of the group's size, at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Online {
    pub online: u32,
    pub size: u32,
}

/// What a look at the members found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Look {
    pub said: Vec<String>,
    pub online: usize,
    pub size: usize,
    pub majority: bool,
}

/// The group at the end of a run, for the summary (`group` in `--json`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GroupEnd {
    pub name: &'static str,
    pub size: usize,
    pub members: Vec<MemberState>,
    /// Members ONLINE at the end.
    pub online: usize,
    /// Members that left ONLINE during the run.
    pub lost: Vec<String>,
    /// Flow control's throttled commits and their time over the window,
    /// µs (its component's counters; None without it).
    pub throttled: Option<u64>,
    pub throttle_us: Option<u64>,
    /// Certification conflicts and the member's rolled-back transactions
    /// over the window (its member stats).
    pub conflicts: Option<u64>,
    pub rollbacks: Option<u64>,
}

/// The member's account for recovery (not binlogged: each member has its
/// own), and its grant.
async fn setup_member(c: &mut mysql_async::Conn, password: &str, name: &str) -> Result<()> {
    let err = sql_err(format!("setting up {name}"));
    super::replica::replication_account(c, RECOVERY_USER, password, |_, e| err(e)).await
}

impl Drop for Group {
    fn drop(&mut self) {
        // Every member told to stop first, then each waited for: their
        // shutdowns overlap.
        for m in &self.members {
            if let Some(pid) = m.server.pid() {
                // SAFETY: signalling our own child by pid.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
        }
        for m in &mut self.members {
            m.server.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use readers::family::group::GROUP_REPLICATION;

    #[test]
    fn each_member_gets_its_own_ports_and_every_seed() {
        let l = Layout::new(3).unwrap();
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
