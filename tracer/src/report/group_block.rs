//! The summary's group block: a replication group's part of the commits
//! (any traced member whose group hook fired), and the managed group's
//! members at the end, with the primary's own counters of conflicts,
//! rollbacks and flow control's throttling (main command, study).
use std::io::Write;

use super::fmt::opt_f;
use crate::{group::GroupWaits, server::group::GroupEnd};

/// The commits through the group and where their time there went.
pub fn write_waits(out: &mut impl Write, g: Option<&GroupWaits>) {
    let Some(g) = g.filter(|g| g.commits > 0) else {
        return;
    };
    let _ = writeln!(
        out,
        "group wait     {:>12}  commits through the group: mean {} us  p50 {}  p99 {}",
        g.commits,
        opt_f(g.mean_us, 0),
        opt_f(g.p50_us, 0),
        opt_f(g.p99_us, 0),
    );
    let _ = writeln!(
        out,
        "{:<14} {:>12}  per commit: flow control {} us, send {} us, consensus+certification {} us, rest {} us",
        "",
        "",
        opt_f(g.flow_control_us, 0),
        opt_f(g.send_us, 0),
        opt_f(g.consensus_us, 0),
        opt_f(g.rest_us, 0),
    );
}

/// The managed group's members at the end of the run.
pub fn write_group(out: &mut impl Write, g: Option<&GroupEnd>) {
    let Some(g) = g else {
        return;
    };
    let members = g
        .members
        .iter()
        .map(|m| format!("{} {} {}", m.address, m.role, m.state))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "group          {} of {} members ONLINE at the end ({}): {members}",
        g.online, g.size, g.name
    );
    if !g.lost.is_empty() {
        let _ = writeln!(
            out,
            "{:<14} left ONLINE during the run: {}",
            "",
            g.lost.join(", ")
        );
    }
    let n = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let _ = writeln!(
        out,
        "{:<14} conflicts {}  rollbacks {}  flow control: {}",
        "",
        n(g.conflicts),
        n(g.rollbacks),
        match (g.throttled, g.throttle_us) {
            (Some(c), Some(us)) => format!("{c} commits throttled, {} ms", us / 1000),
            _ => "no throttle counters (its stats component is not loaded)".into(),
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::group::MemberState;

    #[test]
    fn a_lost_member_and_the_counters_are_said() {
        let g = GroupEnd {
            name: "Group Replication",
            size: 3,
            online: 2,
            members: vec![
                MemberState {
                    address: "127.0.0.1:3306".into(),
                    state: "ONLINE".into(),
                    role: "PRIMARY".into(),
                },
                MemberState {
                    address: "127.0.0.1:3307".into(),
                    state: "UNREACHABLE".into(),
                    role: "SECONDARY".into(),
                },
            ],
            lost: vec!["127.0.0.1:3307".into()],
            throttled: None,
            throttle_us: None,
            conflicts: Some(0),
            rollbacks: Some(2),
        };
        let mut out = Vec::new();
        write_group(&mut out, Some(&g));
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("2 of 3 members ONLINE"), "{text}");
        assert!(
            text.contains("127.0.0.1:3307 SECONDARY UNREACHABLE"),
            "{text}"
        );
        assert!(
            text.contains("left ONLINE during the run: 127.0.0.1:3307"),
            "{text}"
        );
        assert!(text.contains("rollbacks 2"), "{text}");
        assert!(text.contains("no throttle counters"), "{text}");
        let mut none = Vec::new();
        write_group(&mut none, None);
        assert!(none.is_empty());
    }
}
