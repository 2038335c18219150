//! `--web-config FILE`: the Prometheus exporter-toolkit web configuration
//! (TLS certificate and key, basic-auth users with bcrypt hashes), so the
//! exporter drops into a Prometheus setup that already uses one. Keys of
//! the toolkit that commitscope does not implement are refused by name
//! rather than ignored: a setting that silently does nothing is a hole.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    /// Only "TLS12" and "TLS13" (rustls speaks nothing older).
    min_version: Option<String>,
}

/// A parsed web configuration.
#[derive(Clone)]
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    users: BTreeMap<String, String>,
    /// (user, password) pairs already verified: bcrypt is slow on purpose
    /// and Prometheus sends the same credentials every scrape.
    verified: Arc<Mutex<Vec<(String, String)>>>,
}

/// Names only: hashes and verified passwords never reach a log line.
impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A web configuration that cannot be used, in one line.
#[derive(Debug, thiserror::Error)]
#[error("--web-config {}: {detail}", path.display())]
pub struct BadWebConfig {
    path: PathBuf,
    detail: String,
}

impl WebConfig {
    /// No TLS, no users: plain HTTP, open (the default).
    pub fn open() -> Self {
        WebConfig {
            tls: None,
            users: BTreeMap::new(),
            verified: Arc::default(),
        }
    }

    pub fn load(path: &Path) -> Result<Self, BadWebConfig> {
        let bad = |detail: String| BadWebConfig {
            path: path.to_owned(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let file: File = serde_norway::from_str(&text)
            .map_err(|e| bad(format!("{e} (supported: tls_server_config.cert_file, key_file, min_version; basic_auth_users)")))?;
        for (user, hash) in &file.basic_auth_users {
            if !hash.starts_with("$2") {
                return Err(bad(format!(
                    "the password of {user:?} is not a bcrypt hash: make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                )));
            }
        }
        // Relative paths are relative to the file, as in the toolkit.
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file
            .tls_server_config
            .map(|t| {
                tls_config(
                    &dir.join(&t.cert_file),
                    &dir.join(&t.key_file),
                    t.min_version.as_deref(),
                )
            })
            .transpose()
            .map_err(bad)?;
        Ok(WebConfig {
            tls: tls.map(Arc::new),
            users: file.basic_auth_users,
            verified: Arc::default(),
        })
    }

    /// Whether a request with this `Authorization` header may see the
    /// metrics (always, when no user is configured).
    pub fn authorized(&self, header: Option<&str>) -> bool {
        if self.users.is_empty() {
            return true;
        }
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return false;
        };
        let Some(hash) = self.users.get(&user) else {
            return false;
        };
        let pair = (user, password);
        if let Ok(v) = self.verified.lock() {
            if v.contains(&pair) {
                return true;
            }
        }
        let ok = bcrypt::verify(&pair.1, hash).unwrap_or(false);
        if ok {
            if let Ok(mut v) = self.verified.lock() {
                v.push(pair);
            }
        }
        ok
    }
}

/// `Basic base64(user:password)` decoded.
fn basic_credentials(header: &str) -> Option<(String, String)> {
    use base64::Engine;
    let b64 = header.strip_prefix("Basic ")?.trim();
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

fn tls_config(cert: &Path, key: &Path, min: Option<&str>) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "cert_file {}: no certificate in it",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("key_file {}: {e}", key.display()))?;
    let versions: &[&rustls::SupportedProtocolVersion] = match min {
        None | Some("TLS12") => &[&rustls::version::TLS13, &rustls::version::TLS12],
        Some("TLS13") => &[&rustls::version::TLS13],
        Some(v) => return Err(format!("min_version {v}: use TLS12 or TLS13")),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("cert_file/key_file: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("web.yml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn basic_auth_checks_the_bcrypt_hash() {
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let c = WebConfig::load(&write(
            dir.path(),
            &format!("basic_auth_users:\n  alice: '{hash}'\n"),
        ))
        .unwrap();
        use base64::Engine;
        let h = |u: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(u)
            )
        };
        assert!(c.authorized(Some(&h("alice:s3cret"))));
        // Cached now, and still right.
        assert!(c.authorized(Some(&h("alice:s3cret"))));
        assert!(!c.authorized(Some(&h("alice:wrong"))));
        assert!(!c.authorized(Some(&h("bob:s3cret"))));
        assert!(!c.authorized(None));
        assert!(WebConfig::open().authorized(None));
    }

    #[test]
    fn unknown_keys_and_plain_passwords_are_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let e = WebConfig::load(&write(dir.path(), "http_server_config:\n  http2: true\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("http_server_config") && !e.contains('\n'), "{e}");
        let e = WebConfig::load(&write(dir.path(), "basic_auth_users:\n  alice: plain\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a bcrypt hash"), "{e}");
        let e = WebConfig::load(&write(
            dir.path(),
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("nope.crt"), "{e}");
        let e = WebConfig::load(&write(dir.path(), "["))
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
    }
}
