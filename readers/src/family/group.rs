//! A replication group as a family spells it: the plugin whose hook a
//! commit passes through on its way to the group, the steps inside that
//! hook that are the commit path's group stages, the options that make a
//! member, and the tables its members and counters are read from.
//! Spelling only: `server::group` does the steps, `probes::group` finds
//! the hook. MySQL's is Group Replication; a family without one has none.
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
    /// Where the member's own copy of the plugin is.
    pub plugin_dir: &'a str,
}

/// One family's replication group.
pub struct GroupRow {
    /// What users call it.
    pub name: &'static str,
    /// The plugin's library, as the server maps it: the probes go in it.
    pub library: &'static str,
    /// The component that keeps flow control's throttle counters, and its
    /// library (copied beside the plugin; None: there is none).
    pub flow_component: Option<(&'static str, &'static str)>,
    /// The hook every commit through the group runs on its own thread
    /// (its return ends the group's part of the commit).
    pub hook: &'static [&'static str],
    /// The steps inside it, each its own stage of the commit path.
    pub steps: &'static [(CommitStage, &'static [&'static str])],
    /// A member's start options.
    pub member_args: fn(&MemberWire) -> Vec<String>,
    /// Starts the member's part of the group, with the recovery account.
    pub start: fn(user: &str, password: &str) -> String,
    /// Before and after the first member starts: it founds the group.
    pub bootstrap_on: &'static str,
    pub bootstrap_off: &'static str,
    /// Every member as the asking member sees it: host, port, state,
    /// role, in that order.
    pub members: &'static str,
    /// The asking member's own transaction counters, and the names the
    /// checks give its columns, in order; read with the status counters
    /// where any of them starts with `status_prefix` (the plugin is
    /// loaded).
    pub local_stats: &'static str,
    pub local_columns: &'static [&'static str],
    pub status_prefix: &'static str,
    /// Of those, the member's rolled-back transactions and its
    /// certification conflicts.
    pub rollbacks: &'static str,
    pub conflicts: &'static str,
    /// The flow-control component's status counters: throttled commits,
    /// and their time, µs.
    pub throttle_counters: (&'static str, &'static str),
    /// The state of a member that takes part.
    pub online: &'static str,
}

fn q(s: &str) -> String {
    super::replication::quote(s)
}

pub const GROUP_REPLICATION: GroupRow = GroupRow {
    name: "Group Replication",
    library: "group_replication.so",
    flow_component: Some((
        "file://component_group_replication_flow_control_stats",
        "component_group_replication_flow_control_stats.so",
    )),
    hook: &["_Z37group_replication_trans_before_commitP11Trans_param"],
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
    start: |user, password| {
        format!(
            "START GROUP_REPLICATION USER={}, PASSWORD={}",
            q(user),
            q(password)
        )
    },
    bootstrap_on: "SET GLOBAL group_replication_bootstrap_group = ON",
    bootstrap_off: "SET GLOBAL group_replication_bootstrap_group = OFF",
    members: "SELECT MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE FROM performance_schema.replication_group_members",
    local_stats: "SELECT COUNT_TRANSACTIONS_LOCAL_PROPOSED, COUNT_TRANSACTIONS_LOCAL_ROLLBACK, COUNT_CONFLICTS_DETECTED FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid",
    local_columns: &[
        "COUNT_TRANSACTIONS_LOCAL_PROPOSED",
        "COUNT_TRANSACTIONS_LOCAL_ROLLBACK",
        "COUNT_CONFLICTS_DETECTED",
    ],
    status_prefix: "Gr_",
    rollbacks: "COUNT_TRANSACTIONS_LOCAL_ROLLBACK",
    conflicts: "COUNT_CONFLICTS_DETECTED",
    throttle_counters: (
        "Gr_flow_control_throttle_count",
        "Gr_flow_control_throttle_time_sum",
    ),
    online: "ONLINE",
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
        assert_eq!(
            (GROUP_REPLICATION.start)("u", "p'w"),
            "START GROUP_REPLICATION USER='u', PASSWORD='p''w'"
        );
    }
}
