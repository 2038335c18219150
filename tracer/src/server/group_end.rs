//! What a look at a managed group finds and what the summary says of it
//! at the end: each member's state, the count that takes part in the
//! family's words, the group's counters over the window.
use readers::family::group::GroupRow;

/// One member as the primary sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemberState {
    /// `127.0.0.1:3307`.
    pub address: String,
    pub state: String,
    pub role: String,
}

/// Members ONLINE out of the group's size, at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Online {
    pub online: u32,
    pub size: u32,
    /// The family's words: its group, a member, the state that counts.
    #[serde(skip)]
    pub words: Words,
}

/// What a family calls its group, a member and the state of one that
/// takes part: `group`, `member`, `ONLINE`; `cluster`, `node`, `Synced`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    pub group: &'static str,
    pub member: &'static str,
    pub online: &'static str,
}

impl Words {
    pub fn of(row: &GroupRow) -> Words {
        Words {
            group: row.word,
            member: row.member_word,
            online: row.online,
        }
    }

    /// "3 members ONLINE", "3 nodes Synced".
    pub fn count(&self, online: usize) -> String {
        format!("{online} {}s {}", self.member, self.online)
    }

    /// "2 of 3 members ONLINE", "3 of 3 nodes Synced".
    pub fn tally(&self, online: usize, size: usize) -> String {
        format!("{online} of {}", self.count(size))
    }
}

/// What a look at the members found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Look {
    pub said: Vec<String>,
    pub online: usize,
    pub size: usize,
    pub majority: bool,
}

/// The group at the end of a run, for the summary (`group` in `--json`,
/// or the family's word: `cluster`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GroupEnd {
    pub name: &'static str,
    #[serde(skip)]
    pub word: &'static str,
    pub size: usize,
    pub members: Vec<MemberState>,
    /// Members ONLINE (Galera: Synced) at the end, and that state's name.
    pub online: usize,
    #[serde(skip)]
    pub online_word: &'static str,
    #[serde(skip)]
    pub member_word: &'static str,
    /// Members that left ONLINE during the run.
    pub lost: Vec<String>,
    /// Flow control over the window: how often it held the member's
    /// commits (Group Replication: throttled commits, with its
    /// component; Galera: pause messages received), their time, µs, and
    /// its share of the window; the pauses this member asked for.
    pub throttled: Option<u64>,
    #[serde(skip)]
    pub throttled_word: &'static str,
    pub throttle_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_share: Option<f64>,
    /// The commit-path stage the pause is inside (Galera's replicate and
    /// certify), where the probes cannot time it apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_inside: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pauses_sent: Option<u64>,
    /// Conflicts (certification failures) and the member's rolled-back
    /// transactions (Galera: brute-force aborts) over the window.
    pub conflicts: Option<u64>,
    #[serde(skip)]
    pub conflicts_word: &'static str,
    pub rollbacks: Option<u64>,
    #[serde(skip)]
    pub rollbacks_word: &'static str,
    /// The send queue's mean length (Galera).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_queue: Option<f64>,
    /// The other members the clients wrote on (`--write-nodes`), with
    /// their own conflicts: a member counts the conflicts of the
    /// transactions it ran, so the primary's miss theirs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_writers: Vec<WriterCounts>,
}

/// Another member the clients wrote on, and its own count of their
/// conflicts and rolled-back transactions over the window (none where it
/// did not answer at either edge).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WriterCounts {
    /// `127.0.0.1:3307`.
    pub address: String,
    pub conflicts: Option<u64>,
    pub rollbacks: Option<u64>,
}

/// The other written members' own counters at one edge of the window, by
/// address (none for a member that did not answer).
pub type WritersAt = Vec<(String, Option<super::status::Status>)>;

impl crate::group::Worded for GroupEnd {
    fn word(&self) -> &'static str {
        self.word
    }
}
