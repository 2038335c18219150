//! A replication group as a family spells it: the plugin whose hook a
//! commit passes through on its way to the group, the steps inside that
//! hook that are the commit path's group stages, the options that make a
//! member, and the tables its members and counters are read from.
//! Spelling only: `server::group` does the steps, `probes::group` finds
//! the hook. MySQL's is Group Replication, MariaDB's is Galera (its
//! cluster: a group whose members all write).
use tracer_ebpf::CommitStage;

/// Where one member listens and what group it joins.
pub struct MemberWire<'a> {
    /// 1 for the first member (the primary), then 2, 3, ...
    pub server_id: u32,
    pub sql_port: u16,
    pub group_port: u16,
    /// Every member's group-communication address, `127.0.0.1:port,...`.
    pub seeds: &'a str,
    pub group_name: &'a str,
    /// Where the member's own copy of the plugin is (Galera: the dir of
    /// the provider library).
    pub plugin_dir: &'a str,
    /// Ports of the member's state transfers ([`GroupRow::transfer_ports`]
    /// of them).
    pub transfer_ports: &'a [u16],
}

/// What the consensus step's return codes mean (0: no such code).
pub struct StepCodes {
    /// Certification failed: a conflict.
    pub conflict: u32,
    /// Aborted (brute-force) once sent: the server counts it with the
    /// conflicts.
    pub abort: u32,
    /// Interrupted before it was sent: never counted as sent.
    pub unsent: u32,
}

/// How a member joins its group.
pub enum Join {
    /// It starts, then a statement joins it with the recovery account;
    /// the first founds the group between `bootstrap_on` and
    /// `bootstrap_off` (Group Replication).
    Statement {
        start: fn(user: &str, password: &str) -> String,
        bootstrap_on: &'static str,
        bootstrap_off: &'static str,
    },
    /// It joins as it starts, by a state transfer from a member; the
    /// first's options found the group (Galera).
    AtStart,
}

/// Where a managed group finds its library.
pub enum Home {
    /// The install's plugin dir; each member gets its own copy.
    PluginDir,
    /// One of these dirs, under the server's install or else under
    /// `/usr` (a provider packaged apart from the server).
    Dirs(&'static [&'static str]),
}

/// Which file the hook and its steps are in.
pub enum ProbesIn {
    /// The group's library.
    Library,
    /// The server binary (it calls the library through an interface of
    /// its own: Galera's wsrep-lib provider calls).
    Server,
}

/// The group's counters over a window, by their status names, and what
/// the summary calls them.
pub struct GroupCounters {
    /// Flow control: how often it held commits, and for how long (in
    /// `time_unit_ns` ns units).
    pub throttled: &'static str,
    pub throttled_word: &'static str,
    pub throttle_time: &'static str,
    pub time_unit_ns: u64,
    /// Pauses this member asked of the others (None: not counted).
    pub pauses_sent: Option<&'static str>,
    /// Conflicts (failed certifications) and the member's own
    /// transactions rolled back.
    pub conflicts: &'static str,
    pub conflicts_word: &'static str,
    pub rollbacks: &'static str,
    pub rollbacks_word: &'static str,
    /// The send queue's mean length, in thousandths (None: not kept).
    pub send_queue_milli: Option<&'static str>,
}

/// One family's replication group.
pub struct GroupRow {
    /// What users call it.
    pub name: &'static str,
    /// `--replica`'s value for it.
    pub mode: &'static str,
    /// What the summary and `--json` call it: `group`, `cluster`.
    pub word: &'static str,
    /// What its members are called: `member`, `node`.
    pub member_word: &'static str,
    /// The library, as the server maps it: loaded, the server is a
    /// member.
    pub library: &'static str,
    pub home: Home,
    /// Where the probes go.
    pub probes_in: ProbesIn,
    /// The component that keeps flow control's throttle counters, and its
    /// library (copied beside the plugin; None: there is none).
    pub flow_component: Option<(&'static str, &'static str)>,
    /// The hook every commit through the group runs on its own thread
    /// (its return ends the group's part of the commit).
    pub hook: &'static [&'static str],
    /// An earlier segment of the hook, where a commit has two phases
    /// (Galera's `before_prepare`, which certifies): called inside the
    /// hook where it has one.
    pub hook_first: &'static [&'static str],
    /// The steps inside it, each its own stage of the commit path.
    pub steps: &'static [(CommitStage, &'static [&'static str])],
    /// A member's start options.
    pub member_args: fn(&MemberWire) -> Vec<String>,
    /// Loopback ports a member's state transfers listen on.
    pub transfer_ports: usize,
    /// A slowed member's options (`--slow-member`): one applier thread,
    /// so that it falls behind and flow control holds the others back.
    pub slow_applier: &'static [&'static str],
    pub join: Join,
    /// Every member as the asking member sees it: host, port, state,
    /// role, in that order (None: each member is asked for its own
    /// state, `own_state`).
    pub members: Option<&'static str>,
    /// The asking member's own state (one string).
    pub own_state: &'static str,
    /// 1 while the asking member's part of the group may commit (Galera:
    /// it is in the Primary component); None: a majority of the members
    /// ONLINE decides.
    pub quorum: Option<&'static str>,
    /// What it is said to lose when it can commit no more: "its
    /// majority", "the Primary component".
    pub quorum_word: &'static str,
    /// The asking member's own transaction counters, and the names the
    /// checks give its columns, in order; read with the status counters
    /// where any of them starts with `status_prefix` (the plugin is
    /// loaded).
    pub local_stats: &'static str,
    pub local_columns: &'static [&'static str],
    pub status_prefix: &'static str,
    /// Its counters over a window.
    pub counters: GroupCounters,
    /// The hook also runs on the threads that apply the others'
    /// transactions (Galera's appliers): a commit through the group is a
    /// hook whose consensus step ran.
    pub appliers_pass_hook: bool,
    /// The consensus step's return codes (0: none; any other non-zero
    /// return is counted as another error).
    pub step_codes: StepCodes,
    /// Of `local_columns`, the member's own count of what the probes
    /// count as the consensus step's conflicts (Galera: certifications
    /// that failed); None: it keeps no such count.
    pub step_failures: Option<&'static str>,
    /// The commit-path stage a flow-control pause is inside, where the
    /// probes cannot time the pause apart (None: they can).
    pub pause_inside: Option<&'static str>,
    /// The state of a member that takes part.
    pub online: &'static str,
}

fn q(s: &str) -> String {
    super::replication::quote(s)
}

pub const GROUP_REPLICATION: GroupRow = GroupRow {
    name: "Group Replication",
    mode: "group",
    word: "group",
    member_word: "member",
    library: "group_replication.so",
    home: Home::PluginDir,
    probes_in: ProbesIn::Library,
    flow_component: Some((
        "file://component_group_replication_flow_control_stats",
        "component_group_replication_flow_control_stats.so",
    )),
    hook: &["_Z37group_replication_trans_before_commitP11Trans_param"],
    hook_first: &[],
    steps: &[
        (
            CommitStage::GroupFlowControl,
            &["_ZN19Flow_control_module7do_waitEv"],
        ),
        (
            CommitStage::GroupSend,
            &["_ZN14Gcs_operations24send_transaction_messageER29Transaction_message_interface"],
        ),
        (
            CommitStage::GroupConsensus,
            &["_ZN11Wait_ticketIjE10waitTicketERKjm"],
        ),
    ],
    member_args: |w| {
        vec![
            format!("--server-id={}", w.server_id),
            "--log-bin".into(),
            "--gtid-mode=ON".into(),
            "--enforce-gtid-consistency=ON".into(),
            format!("--plugin-dir={}", w.plugin_dir),
            "--plugin-load-add=group_replication.so".into(),
            format!("--group-replication-group-name={}", w.group_name),
            "--group-replication-start-on-boot=OFF".into(),
            format!("--group-replication-local-address=127.0.0.1:{}", w.group_port),
            format!("--group-replication-group-seeds={}", w.seeds),
            // Loopback only: nothing off this machine may join.
            "--group-replication-ip-allowlist=127.0.0.1".into(),
            // Recovery without TLS files: the donor's key over the wire.
            "--group-replication-recovery-get-public-key=ON".into(),
            // A member stops in seconds even when the group cannot agree
            // (lost majority): 2 s is the least the plugin takes.
            "--group-replication-components-stop-timeout=2".into(),
            // Joiners connect to the address a member advertises.
            "--report-host=127.0.0.1".into(),
            format!("--report-port={}", w.sql_port),
        ]
    },
    transfer_ports: 0,
    slow_applier: &["--replica-parallel-workers=1"],
    join: Join::Statement {
        start: |user, password| {
            format!(
                "START GROUP_REPLICATION USER={}, PASSWORD={}",
                q(user),
                q(password)
            )
        },
        bootstrap_on: "SET GLOBAL group_replication_bootstrap_group = ON",
        bootstrap_off: "SET GLOBAL group_replication_bootstrap_group = OFF",
    },
    members: Some("SELECT MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE FROM performance_schema.replication_group_members"),
    own_state: "SELECT MEMBER_STATE FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid",
    quorum: None,
    quorum_word: "its majority",
    local_stats: "SELECT COUNT_TRANSACTIONS_LOCAL_PROPOSED, COUNT_TRANSACTIONS_LOCAL_ROLLBACK, COUNT_CONFLICTS_DETECTED FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid",
    local_columns: &[
        "COUNT_TRANSACTIONS_LOCAL_PROPOSED",
        "COUNT_TRANSACTIONS_LOCAL_ROLLBACK",
        "COUNT_CONFLICTS_DETECTED",
    ],
    status_prefix: "Gr_",
    counters: GroupCounters {
        throttled: "Gr_flow_control_throttle_count",
        throttled_word: "commits throttled",
        throttle_time: "Gr_flow_control_throttle_time_sum",
        time_unit_ns: 1000,
        pauses_sent: None,
        conflicts: "COUNT_CONFLICTS_DETECTED",
        conflicts_word: "conflicts",
        rollbacks: "COUNT_TRANSACTIONS_LOCAL_ROLLBACK",
        rollbacks_word: "rollbacks",
        send_queue_milli: None,
    },
    pause_inside: None,
    step_failures: None,
    appliers_pass_hook: false,
    step_codes: StepCodes {
        conflict: 0,
        abort: 0,
        unsent: 0,
    },
    online: "ONLINE",
};

/// A Galera status variable's value, as one column.
macro_rules! wsrep_status {
    ($name:literal) => {
        concat!(
            "(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '",
            $name,
            "')"
        )
    };
}

/// MariaDB's Galera cluster (wsrep compiled into the server, the
/// provider `libgalera_smm.so` from the `galera-4` package). The server
/// calls the provider through wsrep-lib's virtual calls, exported by
/// Debian's stripped `mariadbd`: the hook and its steps are probed
/// there, never inlined.
pub const GALERA: GroupRow = GroupRow {
    name: "Galera",
    mode: "galera",
    word: "cluster",
    member_word: "node",
    library: "libgalera_smm.so",
    home: Home::Dirs(&["lib/galera", "lib/galera-4", "lib64/galera-4", "lib64/galera"]),
    probes_in: ProbesIn::Server,
    flow_component: None,
    hook: &["_ZN5wsrep11transaction13before_commitEPKNS_8provider6seq_cbE"],
    hook_first: &[
        "_ZN5wsrep11transaction14before_prepareERSt11unique_lockINS_5mutexEEPKNS_8provider6seq_cbE",
    ],
    steps: &[
        // Replication in total order and certification, with any
        // flow-control pause inside it.
        (
            CommitStage::GroupConsensus,
            &["_ZN5wsrep18wsrep_provider_v267certifyENS_9client_idERNS_9ws_handleEiRNS_7ws_metaEPKNS_8provider6seq_cbE"],
        ),
        // The wait for the commit's turn in the cluster's order.
        (
            CommitStage::GroupSend,
            &["_ZN5wsrep18wsrep_provider_v2618commit_order_enterERKNS_9ws_handleERKNS_7ws_metaE"],
        ),
    ],
    member_args: |w| {
        let (sst, ist) = match w.transfer_ports {
            [s, i, ..] => (*s, *i),
            _ => (0, 0),
        };
        let mut a = vec![
            format!("--server-id={}", w.server_id),
            "--wsrep-on=ON".into(),
            format!("--wsrep-provider={}/libgalera_smm.so", w.plugin_dir),
            format!("--wsrep-cluster-address=gcomm://{}", w.seeds),
            // Galera's group name is short (a UUID is refused by its
            // peers, each message failing): the run's name cut down.
            format!(
                "--wsrep-cluster-name=cs-{}",
                w.group_name.chars().filter(|c| *c != '-').take(16).collect::<String>()
            ),
            format!("--wsrep-node-name=node{}", w.server_id),
            format!("--wsrep-node-address=127.0.0.1:{}", w.group_port),
            format!("--wsrep-node-incoming-address=127.0.0.1:{}", w.sql_port),
            // Loopback only, every port its own; a small write-set cache
            // (each node keeps one in its datadir).
            format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};ist.recv_addr=127.0.0.1:{ist};gcache.size=32M",
                w.group_port
            ),
            "--wsrep-sst-method=rsync".into(),
            format!("--wsrep-sst-receive-address=127.0.0.1:{sst}"),
            // What Galera requires of a node.
            "--binlog-format=ROW".into(),
            "--innodb-autoinc-lock-mode=2".into(),
        ];
        if w.server_id == 1 {
            a.push("--wsrep-new-cluster".into());
        }
        a
    },
    transfer_ports: 2,
    slow_applier: &["--wsrep-slave-threads=1"],
    join: Join::AtStart,
    members: None,
    own_state: wsrep_status!("WSREP_LOCAL_STATE_COMMENT"),
    quorum_word: "the Primary component",
    quorum: Some(concat!(
        "SELECT ",
        wsrep_status!("WSREP_CLUSTER_STATUS"),
        " = 'Primary'"
    )),
    local_stats: concat!(
        "SELECT ",
        wsrep_status!("WSREP_REPLICATED"),
        ", ",
        wsrep_status!("WSREP_LOCAL_CERT_FAILURES"),
        ", CAST(ROUND(1000 * ",
        wsrep_status!("WSREP_LOCAL_SEND_QUEUE_AVG"),
        ") AS UNSIGNED)"
    ),
    local_columns: &[
        "wsrep_replicated",
        "wsrep_local_cert_failures",
        "wsrep_local_send_queue_avg_milli",
    ],
    status_prefix: "wsrep_",
    counters: GroupCounters {
        throttled: "wsrep_flow_control_recv",
        throttled_word: "pauses received",
        throttle_time: "wsrep_flow_control_paused_ns",
        time_unit_ns: 1,
        pauses_sent: Some("wsrep_flow_control_sent"),
        conflicts: "wsrep_local_cert_failures",
        conflicts_word: "certification failures",
        rollbacks: "wsrep_local_bf_aborts",
        rollbacks_word: "brute-force aborts",
        send_queue_milli: Some("wsrep_local_send_queue_avg_milli"),
    },
    pause_inside: Some(super::commit::GALERA_CERTIFY),
    step_failures: Some("wsrep_local_cert_failures"),
    appliers_pass_hook: true,
    // wsrep::provider::status, read against the node's own counters
    // under conflicts (docs/replication.md): error_certification_failed
    // and error_bf_abort are both its `wsrep_local_cert_failures`, and
    // error_connection_failed is a write set never replicated (not in
    // `wsrep_replicated`).
    step_codes: StepCodes {
        conflict: 3,
        abort: 4,
        unsent: 6,
    },
    online: "Synced",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_listens_on_loopback_only_and_joins_by_its_seeds() {
        let a = (GROUP_REPLICATION.member_args)(&MemberWire {
            server_id: 2,
            sql_port: 3307,
            group_port: 33071,
            seeds: "127.0.0.1:33061,127.0.0.1:33071",
            group_name: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
            plugin_dir: "/tmp/p",
            transfer_ports: &[],
        });
        for want in [
            "--server-id=2",
            "--group-replication-local-address=127.0.0.1:33071",
            "--group-replication-group-seeds=127.0.0.1:33061,127.0.0.1:33071",
            "--group-replication-ip-allowlist=127.0.0.1",
            "--report-port=3307",
            "--plugin-dir=/tmp/p",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        let Join::Statement { start, .. } = GROUP_REPLICATION.join else {
            panic!("Group Replication joins by a statement");
        };
        assert_eq!(
            start("u", "p'w"),
            "START GROUP_REPLICATION USER='u', PASSWORD='p''w'"
        );
    }

    #[test]
    fn a_galera_node_listens_on_loopback_and_only_the_first_founds() {
        let wire = |server_id| MemberWire {
            server_id,
            sql_port: 3307,
            group_port: 4567,
            seeds: "127.0.0.1:4567,127.0.0.1:4577",
            group_name: "c",
            plugin_dir: "/usr/lib/galera",
            transfer_ports: &[4568, 4569],
        };
        let first = (GALERA.member_args)(&wire(1));
        for want in [
            "--wsrep-provider=/usr/lib/galera/libgalera_smm.so",
            "--wsrep-cluster-address=gcomm://127.0.0.1:4567,127.0.0.1:4577",
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:4567;ist.recv_addr=127.0.0.1:4569;gcache.size=32M",
            "--wsrep-sst-receive-address=127.0.0.1:4568",
            "--wsrep-new-cluster",
        ] {
            assert!(first.iter().any(|x| x == want), "{want} missing from {first:?}");
        }
        let second = (GALERA.member_args)(&wire(2));
        assert!(
            !second.iter().any(|x| x == "--wsrep-new-cluster"),
            "{second:?}"
        );
        assert!(GALERA.quorum.is_some_and(|q| q.contains("'Primary'")));
    }
}
