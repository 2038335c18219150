//! A finished cell's record made from what its run measured: the commit
//! path and the `--io` figures as the record keeps them.
use readers::records::cells::{CellCommitPath, CellIo, StageShare};

use crate::{commit_path::CommitPath, sample::IoFigures};

impl From<&CommitPath> for CellCommitPath {
    fn from(c: &CommitPath) -> CellCommitPath {
        CellCommitPath {
            commits: c.commits,
            mean_us: c.mean_us,
            p99_us: c.p99_us,
            shares: c
                .stages
                .iter()
                .map(|s| StageShare {
                    stage: s.stage.to_string(),
                    share: s.share.unwrap_or(0.0),
                })
                .collect(),
            sched: c.sched,
        }
    }
}

impl From<&IoFigures> for CellIo {
    fn from(io: &IoFigures) -> CellIo {
        let part = |s: Option<f64>| s.zip(io.redo_sync_mean_us).map(|(s, m)| s * m);
        CellIo {
            requests_per_sync: io.requests_per_sync,
            kib_per_sync: io.bytes_per_sync.map(|b| b / 1024.0),
            cache_flushes_per_sync: io.cache_flushes_per_sync,
            device_us: part(io.device_share),
            journal_us: part(io.journal_share),
            other_us: part(io.other_share),
        }
    }
}
