//! Rebuild the eBPF object when bpf-linker changes (the aya template's rule).
fn main() {
    if let Ok(path) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
