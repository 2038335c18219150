//! The summary's group block: a replication group's part of the commits
//! (any traced member whose group hook fired), and the managed group's
//! members at the end, with the primary's own counters of conflicts,
//! rollbacks and flow control's throttling (main command, study).
use std::io::Write;

use super::fmt::opt_f;
use crate::{group::GroupWaits, server::group_end::GroupEnd};

/// The commits through the group and where their time there went.
pub fn write_waits(out: &mut impl Write, g: Option<&GroupWaits>) {
    let Some(g) = g.filter(|g| g.commits > 0) else {
        return;
    };
    let _ = writeln!(
        out,
        "{:<14} {:>12}  commits through the {}: mean {} us  p50 {}  p99 {}",
        format!("{} wait", g.word),
        g.commits,
        g.word,
        opt_f(g.mean_us, 0),
        opt_f(g.p50_us, 0),
        opt_f(g.p99_us, 0),
    );
    let steps = g
        .steps()
        .into_iter()
        .map(|(name, us)| format!("{name} {} us", opt_f(us, 0)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(out, "{:<14} {:>12}  per commit: {steps}", "", "");
    if g.consensus_failed > 0 {
        let _ = writeln!(
            out,
            "{:<14} {:>12}  of {} consensus steps failed (a conflict, an abort)",
            "", g.consensus_failed, g.consensus_calls
        );
    }
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
        "{:<14} {} of {} {}s {} at the end ({}): {members}",
        g.word, g.online, g.size, g.member_word, g.online_word, g.name
    );
    if !g.lost.is_empty() {
        let _ = writeln!(
            out,
            "{:<14} left {} during the run: {}",
            "",
            g.online_word,
            g.lost.join(", ")
        );
    }
    let n = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let mut flow = match (g.throttled, g.throttle_us) {
        (Some(c), Some(us)) => format!("{c} {}, {} ms", g.throttled_word, us / 1000),
        _ => "no throttle counters (its stats component is not loaded)".into(),
    };
    if let Some(share) = g.paused_share {
        flow.push_str(&format!(" ({:.1} % of the window paused", share * 100.0));
        if let Some(stage) = g.pause_inside {
            flow.push_str(&format!(", inside '{stage}'"));
        }
        flow.push(')');
    }
    if let Some(sent) = g.pauses_sent {
        flow.push_str(&format!(", {sent} pauses sent"));
    }
    let queue = g
        .send_queue
        .map_or(String::new(), |q| format!("  send queue {q:.2} (mean)"));
    let _ = writeln!(
        out,
        "{:<14} {} {}  {} {}  flow control: {flow}{queue}",
        "",
        g.conflicts_word,
        n(g.conflicts),
        g.rollbacks_word,
        n(g.rollbacks),
    );
    // `--write-nodes`: each other written member's own count.
    for w in &g.other_writers {
        let _ = writeln!(
            out,
            "{:<14} {} {}, written on too: {} {}  {} {}",
            "",
            g.member_word,
            w.address,
            g.conflicts_word,
            n(w.conflicts),
            g.rollbacks_word,
            n(w.rollbacks),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::group_end::{MemberState, WriterCounts};

    #[test]
    fn a_lost_member_and_the_counters_are_said() {
        let g = GroupEnd {
            name: "Group Replication",
            word: "group",
            member_word: "member",
            online_word: "ONLINE",
            throttled_word: "commits throttled",
            conflicts_word: "conflicts",
            rollbacks_word: "rollbacks",
            paused_share: None,
            pause_inside: None,
            pauses_sent: None,
            send_queue: None,
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
            other_writers: Vec::new(),
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

    #[test]
    fn a_clusters_flow_control_is_said_with_its_share_of_the_window() {
        let g = GroupEnd {
            name: "Galera",
            word: "cluster",
            member_word: "node",
            online_word: "Synced",
            throttled_word: "pauses received",
            conflicts_word: "certification failures",
            rollbacks_word: "brute-force aborts",
            paused_share: Some(0.25),
            pause_inside: Some("galera: replicate and certify"),
            pauses_sent: Some(0),
            send_queue: Some(1.5),
            size: 3,
            online: 3,
            members: Vec::new(),
            lost: Vec::new(),
            throttled: Some(40),
            throttle_us: Some(1_500_000),
            conflicts: Some(1),
            rollbacks: Some(0),
            other_writers: vec![
                WriterCounts {
                    address: "127.0.0.1:3307".into(),
                    conflicts: Some(12),
                    rollbacks: Some(3),
                },
                WriterCounts {
                    address: "127.0.0.1:3308".into(),
                    conflicts: None,
                    rollbacks: None,
                },
            ],
        };
        let mut out = Vec::new();
        write_group(&mut out, Some(&g));
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("cluster        3 of 3 nodes Synced"),
            "{text}"
        );
        assert!(
            text.contains("flow control: 40 pauses received, 1500 ms (25.0 % of the window paused, inside 'galera: replicate and certify'), 0 pauses sent"),
            "{text}"
        );
        assert!(
            text.contains("certification failures 1  brute-force aborts 0"),
            "{text}"
        );
        assert!(text.contains("send queue 1.50 (mean)"), "{text}");
        assert!(
            text.contains("node 127.0.0.1:3307, written on too: certification failures 12  brute-force aborts 3"),
            "{text}"
        );
        assert!(
            text.contains("node 127.0.0.1:3308, written on too: certification failures -  brute-force aborts -"),
            "{text}"
        );
    }
}
