//! `--replica group` and `--replica galera`: a replication group of the
//! managed server and more members from the same binary, on loopback.
//! The managed server founds the group and the workload runs there; the
//! others join it (Group Replication: with the recovery account, once
//! started; Galera: as they start, by a state transfer). What the family
//! spells (options, statements, tables) is its row's [`GroupRow`]; the
//! steps are here, where the members listen in `group_layout`, what a
//! look finds in `group_end`.
use std::{path::Path, time::Duration};

use mysql_async::prelude::Queryable;
use readers::family::{
    group::{GroupRow, Join},
    replication::quote,
};

use super::{
    group_end::{GroupEnd, Look, MemberState, Words, WriterCounts, WritersAt},
    group_layout::{member_library_dir, Layout},
    managed::{Managed, ManagedConfig},
    sizing::{Shape, Sizing},
    status::Status,
};
use crate::error::{Error, Result};

/// Members a group gets by default: it keeps a majority when one dies.
pub const DEFAULT_MEMBERS: u32 = 3;
/// The most `--group-members` takes: each member is a server on this
/// machine.
pub const MAX_MEMBERS: u32 = 5;

/// How long every member may take to be ONLINE (Galera: Synced, its
/// state transfer included).
const ONLINE_LIMIT: Duration = Duration::from_secs(120);

/// The recovery account commitscope creates on every member.
const RECOVERY_USER: &str = "commitscope_gr";

/// What a run asks of its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    /// `--replica group` or `galera`: the family row's `mode` it asks for.
    pub mode: super::replica::Mode,
    pub members: u32,
    /// The members the clients write on, the first included.
    pub write_nodes: u32,
    /// `--slow-member`: the last member's share of each 100 ms, %.
    pub slow_member: Option<u32>,
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
    /// The members at the last look, and every member that left ONLINE
    /// (Galera: Synced) during the run (by address), said once each.
    pub last: Vec<MemberState>,
    pub lost: Vec<String>,
    /// The flow-control component is installed (its counters are read
    /// with the status).
    pub flow_counters: bool,
    /// `--slow-member`: the last member's throttle, and which member.
    pub slow: Option<(super::throttle::Throttle, String)>,
}

/// A member's first error-log complaint, for a failure's one line.
fn member_error(m: &Managed) -> String {
    super::managed::log_errors(&std::fs::read_to_string(&m.log).unwrap_or_default())
}

fn sql_err(row: &GroupRow, what: String) -> impl Fn(mysql_async::Error) -> Error {
    let mode = row.mode;
    move |e| Error::Group {
        mode,
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
        home: &Path,
        slow_member: Option<u32>,
    ) -> Result<Group> {
        let password = super::replica::password("gr");
        let mut flow_counters = false;
        if let Join::Statement {
            start,
            bootstrap_on,
            bootstrap_off,
        } = &row.join
        {
            setup_member(row, primary, &password, "the primary").await?;
            if let Some((urn, _)) = row.flow_component {
                // Its counters are the server's own count of throttling;
                // without it, the probes' time stands alone.
                flow_counters = primary
                    .query_drop(format!("INSTALL COMPONENT {}", quote(urn)))
                    .await
                    .is_ok();
            }
            primary
                .query_drop(*bootstrap_on)
                .await
                .map_err(sql_err(row, "founding the group".into()))?;
            let started = primary.query_drop(start(RECOVERY_USER, &password)).await;
            let _ = primary.query_drop(*bootstrap_off).await;
            started.map_err(|e| Error::Group {
                mode: row.mode,
                detail: format!(
                    "the primary did not start the group: {e}: {}",
                    member_error(primary_server)
                ),
            })?;
        }
        let mut group = Group {
            members: Vec::new(),
            row,
            layout: layout.clone(),
            last: Vec::new(),
            lost: Vec::new(),
            flow_counters,
            slow: None,
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
            let own = member_library_dir(row, &m, home)?;
            m.extra_args = layout.member_args(row, i, &own);
            if slow_member.is_some() && i == n - 1 {
                m.extra_args
                    .extend(row.slow_applier.iter().map(|a| a.to_string()));
            }
            m.listen_port = Some(layout.sql_ports[i]);
            m.own_defaults_file()?;
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
            let name = format!(
                "{} {} (127.0.0.1:{})",
                row.member_word,
                k + 2,
                layout.sql_ports[k + 1]
            );
            // A node that joins as it starts is up once its state
            // transfer is done.
            m.start().await.map_err(|e| Error::Group {
                mode: row.mode,
                // The member's own error, without the hints about the
                // user's options (a member is started without them).
                detail: match e {
                    Error::ServerStart { detail } => format!("{name} did not start: {detail}"),
                    e => format!("{name} did not start: {e}"),
                },
            })?;
            if let Join::Statement { start, .. } = &row.join {
                let ep = workload::conn::ConnArgs::resolve(&m.conn_args())?;
                let mut c = workload::conn::connect(&ep, None).await?;
                setup_member(row, &mut c, &password, &name).await?;
                let joined = c.query_drop(start(RECOVERY_USER, &password)).await;
                let _ = c.disconnect().await;
                if let Err(e) = joined {
                    return Err(Error::Group {
                        mode: row.mode,
                        detail: format!("{name} did not join: {e}: {}", member_error(&m)),
                    });
                }
            }
            group.members.push(Member {
                server: m,
                port: layout.sql_ports[k + 1],
            });
        }
        group.wait_online(primary).await?;
        if let (Some(p), Some(m)) = (slow_member, group.members.last()) {
            if let Some(pid) = m.server.pid() {
                let t = super::throttle::Throttle::start(pid, p)?;
                group.slow = Some((t, format!("127.0.0.1:{} runs {p} % of each 100 ms", m.port)));
            }
        }
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
                    mode: self.row.mode,
                    detail: format!(
                        "{} after {} s; not: {}",
                        Words::of(self.row).tally(online, want),
                        ONLINE_LIMIT.as_secs(),
                        stuck.join("; ")
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every member as the primary sees it; where the family has no
    /// view of its members, each member's own word (one that does not
    /// answer is "unreachable").
    pub async fn states(&self, primary: &mut mysql_async::Conn) -> Result<Vec<MemberState>> {
        let Some(members) = self.row.members else {
            let own: Option<String> =
                primary
                    .query_first(self.row.own_state)
                    .await
                    .map_err(sql_err(
                        self.row,
                        format!("reading the {}'s state", self.row.word),
                    ))?;
            let mut all = vec![MemberState {
                address: format!("127.0.0.1:{}", self.layout.sql_ports[0]),
                state: own.unwrap_or_default(),
                role: self.row.member_word.into(),
            }];
            for m in &self.members {
                all.push(MemberState {
                    address: format!("127.0.0.1:{}", m.port),
                    state: own_state(self.row, &m.server).await,
                    role: self.row.member_word.into(),
                });
            }
            return Ok(all);
        };
        let rows: Vec<MemberRow> = primary
            .query(members)
            .await
            .map_err(sql_err(self.row, "reading the group's members".into()))?;
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
                said.push(format!(
                    "{} {} {} is {state}",
                    self.row.word, self.row.member_word, was.address
                ));
            }
        }
        let size = self.layout.sql_ports.len();
        let online = now.iter().filter(|m| m.state == self.row.online).count();
        // A member that left cleanly shrinks the group; one that is
        // UNREACHABLE still counts against its majority. Where the family
        // says it, the primary's own word decides (Galera's Primary
        // component).
        let counted = now.len().max(1);
        let majority = match self.row.quorum {
            Some(q) => {
                primary.query_first::<u64, _>(q).await.map_err(sql_err(
                    self.row,
                    format!("reading the {}'s quorum", self.row.word),
                ))? == Some(1)
            }
            None => online * 2 > counted,
        };
        self.last = now;
        Ok(Look {
            said,
            online,
            size,
            majority,
        })
    }

    /// For the header: "group of 3 (single-primary Group Replication)",
    /// "cluster of 3 (Galera)".
    pub fn describe(&self) -> String {
        let how = match self.row.join {
            Join::Statement { .. } => "single-primary ",
            Join::AtStart => "",
        };
        format!(
            "{} of {} ({how}{})",
            self.row.word,
            self.layout.sql_ports.len(),
            self.row.name
        )
    }

    /// Where the clients besides the first member's write: the next
    /// `writers - 1` members.
    pub fn writers(&self, writers: u32) -> Result<Vec<workload::conn::Endpoint>> {
        self.members
            .iter()
            .take(writers.saturating_sub(1) as usize)
            .map(|m| Ok(workload::conn::ConnArgs::resolve(&m.server.conn_args())?))
            .collect()
    }

    /// The own counters of the members the clients write on besides the
    /// first (`--write-nodes`: the same `writers - 1` as [`Self::writers`]),
    /// at one edge of the window.
    pub async fn writers_at(&self, writers: u32) -> WritersAt {
        let mut at = Vec::new();
        for m in self.members.iter().take(writers.saturating_sub(1) as usize) {
            at.push((format!("127.0.0.1:{}", m.port), own_status(&m.server).await));
        }
        at
    }

    /// What the family calls its group, members and their state.
    pub fn words(&self) -> Words {
        Words::of(self.row)
    }

    /// The members at the end, for the summary, with the primary's
    /// counters over the window `before..after`, `window_s` long, and the
    /// other written members' conflicts over `writers.0..writers.1`.
    pub fn end(
        &self,
        before: &Status,
        after: &Status,
        writers: (&WritersAt, &WritersAt),
        window_s: f64,
    ) -> GroupEnd {
        let d = |name: &str| after.since(before, name);
        let c = &self.row.counters;
        let other_writers = writers
            .1
            .iter()
            .map(|(address, after)| {
                let before = writers.0.iter().find(|(a, _)| a == address);
                let both = before.and_then(|(_, b)| b.as_ref()).zip(after.as_ref());
                let d = |name: &str| both.and_then(|(b, a)| a.since(b, name));
                WriterCounts {
                    address: address.clone(),
                    conflicts: d(c.conflicts),
                    rollbacks: d(c.rollbacks),
                }
            })
            .collect();
        let throttle_ns = d(c.throttle_time).map(|t| t.saturating_mul(c.time_unit_ns));
        GroupEnd {
            name: self.row.name,
            word: self.row.word,
            size: self.layout.sql_ports.len(),
            online: self
                .last
                .iter()
                .filter(|m| m.state == self.row.online)
                .count(),
            online_word: self.row.online,
            member_word: self.row.member_word,
            members: self.last.clone(),
            lost: self.lost.clone(),
            throttled: d(c.throttled),
            throttled_word: c.throttled_word,
            throttle_us: throttle_ns.map(|ns| ns / 1000),
            paused_share: throttle_ns
                .filter(|_| window_s > 0.0)
                .map(|ns| ns as f64 / 1e9 / window_s),
            pauses_sent: c.pauses_sent.and_then(d),
            pause_inside: self.row.pause_inside,
            conflicts: d(c.conflicts),
            conflicts_word: c.conflicts_word,
            rollbacks: d(c.rollbacks),
            rollbacks_word: c.rollbacks_word,
            send_queue: c
                .send_queue_milli
                .and_then(|n| after.0.get(n))
                .map(|m| *m as f64 / 1000.0),
            other_writers,
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

/// A member's own word on its state, on its socket, within a second
/// (one that does not answer is "unreachable").
async fn own_state(row: &GroupRow, m: &Managed) -> String {
    let ask = async {
        let mut c = member_conn(m).await?;
        let s: Option<String> = c.query_first(row.own_state).await.ok()?;
        let _ = c.disconnect().await;
        s
    };
    tokio::time::timeout(Duration::from_secs(1), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "unreachable".into())
}

/// A member's own counters, on its socket, within a second (none from
/// one that does not answer).
async fn own_status(m: &Managed) -> Option<Status> {
    let ask = async {
        let mut c = member_conn(m).await?;
        let s = super::status::read(&mut c).await.ok();
        let _ = c.disconnect().await;
        s
    };
    tokio::time::timeout(Duration::from_secs(1), ask)
        .await
        .ok()
        .flatten()
}

/// A connection to a member on its socket.
async fn member_conn(m: &Managed) -> Option<mysql_async::Conn> {
    let ep = workload::conn::ConnArgs::resolve(&m.conn_args()).ok()?;
    workload::conn::connect(&ep, None).await.ok()
}

/// The member's account for recovery (not binlogged: each member has its
/// own), and its grant.
async fn setup_member(
    row: &GroupRow,
    c: &mut mysql_async::Conn,
    password: &str,
    name: &str,
) -> Result<()> {
    let err = sql_err(row, format!("setting up {name}"));
    super::replica::replication_account(c, RECOVERY_USER, password, |_, e| err(e)).await
}

impl Drop for Group {
    fn drop(&mut self) {
        // A stopped member hears no SIGTERM: let it run first.
        self.slow = None;
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
