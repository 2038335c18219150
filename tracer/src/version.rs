//! `commitscope --version`: what exactly ran, for a bug report — the
//! release, the commit and date it was built from, the target triple (the
//! static musl build and the glibc build behave differently in places),
//! and a hash of the embedded eBPF object (the kernel side can differ
//! between two builds of one commit: another nightly, another bpf-linker).
use sha2::{Digest, Sha256};

/// The build's identity; `--version --json` prints it as one object.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BuildInfo {
    pub version: &'static str,
    pub commit: &'static str,
    pub build_date: &'static str,
    pub target: &'static str,
    pub ebpf_sha256: String,
    pub ebpf_bytes: usize,
}

impl BuildInfo {
    pub fn get() -> BuildInfo {
        let object = crate::probes::ebpf_object();
        BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("COMMITSCOPE_COMMIT"),
            build_date: env!("COMMITSCOPE_BUILD_DATE"),
            target: env!("COMMITSCOPE_TARGET"),
            ebpf_sha256: format!("{:x}", Sha256::digest(object)),
            ebpf_bytes: object.len(),
        }
    }

    /// The human form: the first line is what `--version` tools print.
    pub fn text(&self) -> String {
        format!(
            "commitscope {}\ncommit {} built {} for {}\neBPF object sha256 {} ({} bytes)\n",
            self.version,
            self.commit,
            self.build_date,
            self.target,
            self.ebpf_sha256,
            self.ebpf_bytes
        )
    }
}
