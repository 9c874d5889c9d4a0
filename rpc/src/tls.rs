//! Cluster TLS: a cluster CA, per-node certificates signed by it, and mutual-TLS quinn configs.
//!
//! Layout under a data directory: `tls/ca.pem` and `tls/ca.key` (the CA), and for every node
//! `tls/<name>.pem` (its certificate) and `tls/<name>.key` (its private key). Servers require a
//! client certificate signed by the CA; clients verify the server against the CA and present their
//! own certificate. A peer holding credentials of another cluster (or none) is refused.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The ALPN protocol id every ht endpoint speaks.
pub const ALPN: &[u8] = b"ht/1";

/// File name of the cluster CA certificate inside `<dir>/tls/`.
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the cluster CA private key inside `<dir>/tls/`.
pub const CA_KEY_FILE: &str = "ca.key";

/// Common name of the cluster CA; issuing rebuilds the issuer from it, so it must stay fixed.
const CA_COMMON_NAME: &str = "ht cluster CA";

/// Why credentials could not be created, loaded or turned into a TLS config.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls: {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tls: {} exists already; refusing to overwrite cluster credentials", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("tls: bad PEM in {}: {detail}", path.display())]
    Pem { path: PathBuf, detail: String },
    #[error("tls: invalid node name {name:?}: use 1-63 of [a-z0-9-], dot-separated")]
    InvalidName { name: String },
    #[error("tls: certificate generation for {what}: {source}")]
    Generate { what: String, source: rcgen::Error },
    #[error("tls: building {what}: {detail}")]
    Config { what: &'static str, detail: String },
}

/// The TLS directory of a data directory.
pub fn tls_dir(dir: &Path) -> PathBuf {
    dir.join("tls")
}

/// One node's view of the cluster's credentials: the CA it trusts and its own certificate and key.
pub struct ClusterCredentials {
    name: String,
    ca_cert: CertificateDer<'static>,
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ClusterCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ClusterCredentials")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Clone for ClusterCredentials {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            ca_cert: self.ca_cert.clone(),
            cert_chain: self.cert_chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl ClusterCredentials {
    /// Creates the cluster CA (self-signed) under `dir/tls/`. Refuses to overwrite an existing CA.
    pub fn create(dir: &Path) -> Result<(), TlsError> {
        let tls = tls_dir(dir);
        let cert_path = tls.join(CA_CERT_FILE);
        let key_path = tls.join(CA_KEY_FILE);
        for path in [&cert_path, &key_path] {
            if path.exists() {
                return Err(TlsError::AlreadyExists { path: path.clone() });
            }
        }
        fs::create_dir_all(&tls).map_err(|source| TlsError::Io {
            op: "create directory",
            path: tls.clone(),
            source,
        })?;
        let key = KeyPair::generate().map_err(|source| TlsError::Generate {
            what: "CA key".into(),
            source,
        })?;
        let cert = ca_params()
            .self_signed(&key)
            .map_err(|source| TlsError::Generate {
                what: "CA certificate".into(),
                source,
            })?;
        write_secret(&key_path, key.serialize_pem().as_bytes())?;
        write_file(&cert_path, cert.pem().as_bytes())?;
        Ok(())
    }

    /// Issues a certificate for node `name` (usable as server and as client), signed by the CA
    /// in `dir/tls/`, and writes `<name>.pem` and `<name>.key` there.
    pub fn issue(dir: &Path, name: &str) -> Result<(), TlsError> {
        check_name(name)?;
        let tls = tls_dir(dir);
        let ca_key_path = tls.join(CA_KEY_FILE);
        let ca_key_pem = read_to_string(&ca_key_path)?;
        let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|e| TlsError::Pem {
            path: ca_key_path,
            detail: e.to_string(),
        })?;
        // The issuer needs only the CA's name and key, both of which are fixed or on disk.
        let issuer = Issuer::new(ca_params(), ca_key);

        let key = KeyPair::generate().map_err(|source| TlsError::Generate {
            what: format!("key for {name}"),
            source,
        })?;
        let mut params = CertificateParams::new(vec![name.to_string()]).map_err(|source| {
            TlsError::Generate {
                what: format!("certificate for {name}"),
                source,
            }
        })?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|source| TlsError::Generate {
                what: format!("certificate for {name}"),
                source,
            })?;
        write_secret(
            &tls.join(format!("{name}.key")),
            key.serialize_pem().as_bytes(),
        )?;
        write_file(&tls.join(format!("{name}.pem")), cert.pem().as_bytes())?;
        Ok(())
    }

    /// Loads node `name`'s certificate and key and the CA certificate from `dir/tls/`.
    pub fn load(dir: &Path, name: &str) -> Result<Self, TlsError> {
        check_name(name)?;
        let tls = tls_dir(dir);
        let ca_path = tls.join(CA_CERT_FILE);
        let ca_cert = read_certs(&ca_path)?
            .into_iter()
            .next()
            .ok_or_else(|| TlsError::Pem {
                path: ca_path.clone(),
                detail: "no certificate".into(),
            })?;
        let cert_path = tls.join(format!("{name}.pem"));
        let cert_chain = read_certs(&cert_path)?;
        if cert_chain.is_empty() {
            return Err(TlsError::Pem {
                path: cert_path,
                detail: "no certificate".into(),
            });
        }
        let key_path = tls.join(format!("{name}.key"));
        let key_pem = fs::read(&key_path).map_err(|source| TlsError::Io {
            op: "read",
            path: key_path.clone(),
            source,
        })?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Pem {
            path: key_path,
            detail: e.to_string(),
        })?;
        Ok(Self {
            name: name.to_string(),
            ca_cert,
            cert_chain,
            key,
        })
    }

    /// The node name these credentials were issued to.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This node's own certificate (DER), the first of its chain.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.cert_chain[0]
    }

    /// The cluster CA certificate (DER) these credentials trust.
    pub fn ca_cert(&self) -> &CertificateDer<'static> {
        &self.ca_cert
    }

    /// A rustls server config that presents this node's certificate and requires a client
    /// certificate signed by the cluster CA.
    pub fn rustls_server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let provider = provider();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.roots()?),
            provider.clone(),
        )
        .build()
        .map_err(|e| config_err("client certificate verifier", e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| config_err("server TLS config", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|e| config_err("server TLS config", e))?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(config)
    }

    /// A rustls client config that verifies servers against the cluster CA and presents this
    /// node's certificate.
    pub fn rustls_client_config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| config_err("client TLS config", e))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|e| config_err("client TLS config", e))?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(config)
    }

    /// A quinn server config: mutual TLS plus the given bound on concurrent streams per connection.
    pub fn server_config(
        &self,
        max_concurrent_streams: u32,
        idle_timeout: Duration,
    ) -> Result<quinn::ServerConfig, TlsError> {
        let crypto =
            quinn::crypto::rustls::QuicServerConfig::try_from(self.rustls_server_config()?)
                .map_err(|e| config_err("QUIC server config", e))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(transport(max_concurrent_streams, idle_timeout)?));
        Ok(config)
    }

    /// A quinn client config: verifies the server against the CA and presents this node's cert.
    pub fn client_config(&self, idle_timeout: Duration) -> Result<quinn::ClientConfig, TlsError> {
        quic_client_config(self.rustls_client_config()?, idle_timeout)
    }

    fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.ca_cert.clone())
            .map_err(|e| config_err("root store", e))?;
        Ok(roots)
    }
}

/// Wraps a rustls client config (e.g. one without a client certificate, in tests) for quinn.
pub fn quic_client_config(
    config: rustls::ClientConfig,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, TlsError> {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(config)
        .map_err(|e| config_err("QUIC client config", e))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = transport(0, idle_timeout)?;
    // Keep idle connections open; a pooled connection must not die between calls.
    transport.keep_alive_interval(Some(idle_timeout / 3));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The crypto provider all ht endpoints use.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn transport(
    max_concurrent_streams: u32,
    idle_timeout: Duration,
) -> Result<quinn::TransportConfig, TlsError> {
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(max_concurrent_streams.into());
    transport.max_concurrent_uni_streams(0u32.into());
    let idle =
        quinn::IdleTimeout::try_from(idle_timeout).map_err(|e| config_err("idle timeout", e))?;
    transport.max_idle_timeout(Some(idle));
    Ok(transport)
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Node names become file names and TLS server names, so keep them to DNS labels.
fn check_name(name: &str) -> Result<(), TlsError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name != "ca"
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(TlsError::InvalidName { name: name.into() })
    }
}

fn config_err(what: &'static str, e: impl std::fmt::Display) -> TlsError {
    TlsError::Config {
        what,
        detail: e.to_string(),
    }
}

fn read_to_string(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    })
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = fs::read(path).map_err(|source| TlsError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    })?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), TlsError> {
    fs::write(path, data).map_err(|source| TlsError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a private key readable by its owner only.
fn write_secret(path: &Path, data: &[u8]) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io)?;
    file.write_all(data).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        assert!(check_name("rs1").is_ok());
        assert!(check_name("master.local").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("ca").is_err());
        assert!(check_name("../x").is_err());
        assert!(check_name("Upper").is_err());
    }

    #[test]
    fn create_issue_load() -> Result<(), TlsError> {
        let dir = tempfile::tempdir().map_err(|source| TlsError::Io {
            op: "tempdir",
            path: PathBuf::new(),
            source,
        })?;
        ClusterCredentials::create(dir.path())?;
        assert!(matches!(
            ClusterCredentials::create(dir.path()),
            Err(TlsError::AlreadyExists { .. })
        ));
        ClusterCredentials::issue(dir.path(), "rs1")?;
        let creds = ClusterCredentials::load(dir.path(), "rs1")?;
        assert_eq!(creds.name(), "rs1");
        creds.server_config(16, Duration::from_secs(10))?;
        creds.client_config(Duration::from_secs(10))?;
        assert!(matches!(
            ClusterCredentials::load(dir.path(), "nobody"),
            Err(TlsError::Io { .. })
        ));
        Ok(())
    }
}
