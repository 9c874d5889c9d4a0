//! A permanent TLS refusal (credentials of another cluster, a wrong name) is reported at once,
//! naming the certificate, instead of being retried like an unreachable server.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rpc::tls::{ALPN, quic_client_config};
use rpc::{Client, ClientOptions, ClusterCredentials, PeerInfo, RetryPolicy, RpcError, Server};

struct Echo;

#[async_trait::async_trait]
impl rpc::Service for Echo {
    async fn call(
        &self,
        _peer: &PeerInfo,
        _method: &str,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        Ok(payload)
    }
}

/// A cluster's credentials in `dir`: its CA and certificates for `names`.
fn init(dir: &Path, names: &[&str]) {
    ClusterCredentials::create(dir).expect("create CA");
    for n in names {
        ClusterCredentials::issue(dir, n).expect("issue");
    }
}

fn load(dir: &Path, name: &str) -> ClusterCredentials {
    ClusterCredentials::load(dir, name).expect("load")
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().expect("addr")
}

/// A policy that, applied to an unreachable server, would retry for about 20 s.
fn patient() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 40,
        initial_backoff: Duration::from_millis(500),
        max_backoff: Duration::from_millis(500),
    }
}

/// Connects (with `config`) and makes an idempotent call under [`patient`]: returns its error
/// and how long it took.
async fn refused_call(
    addr: SocketAddr,
    name: &str,
    config: quinn::ClientConfig,
) -> (RpcError, Duration) {
    let started = Instant::now();
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let err = match Client::connect_with(addr, name, config, options).await {
        Err(e) => e,
        Ok(client) => client
            .call_idempotent(
                "echo",
                Bytes::from_static(b"x"),
                Duration::from_secs(5),
                &patient(),
            )
            .await
            .expect_err("a refused client got an answer"),
    };
    (err, started.elapsed())
}

#[tokio::test]
async fn a_server_of_another_cluster_is_refused_at_once_naming_the_ca() {
    let ours = tempfile::tempdir().expect("tempdir");
    let theirs = tempfile::tempdir().expect("tempdir");
    init(ours.path(), &["client"]);
    init(theirs.path(), &["server"]);
    let server = Server::bind(localhost(), &load(theirs.path(), "server"), Echo).expect("bind");
    let config = load(ours.path(), "client")
        .client_config(Duration::from_secs(10))
        .expect("config");
    let (err, took) = refused_call(server.local_addr(), "server", config).await;
    assert!(err.is_refused(), "{err:?}");
    assert!(!err.is_retryable(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("cluster CA") && text.contains("certificate"),
        "{text}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}: {text}");

    // The retry helper gives up on it at once too.
    let client_creds = load(ours.path(), "client");
    let started = Instant::now();
    let err = rpc::retry(&patient(), || async {
        Client::connect(server.local_addr(), "server", &client_creds).await
    })
    .await
    .err()
    .expect("refused");
    assert!(err.is_refused(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_client_certificate_of_another_cluster_is_refused_at_once() {
    // The client trusts the server's CA but presents a certificate of another cluster: the
    // server refuses it after the client's side of the handshake is done.
    let ours = tempfile::tempdir().expect("tempdir");
    let theirs = tempfile::tempdir().expect("tempdir");
    init(ours.path(), &["server"]);
    init(theirs.path(), &["client"]);
    let server_creds = load(ours.path(), "server");
    let server = Server::bind(localhost(), &server_creds, Echo).expect("bind");
    let foreign = load(theirs.path(), "client");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_creds.ca_cert().clone()).expect("root");
    let key_pem = std::fs::read(theirs.path().join("tls/client.key")).expect("key");
    use rustls::pki_types::pem::PemObject;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key_pem).expect("key");
    let mut tls = rustls::ClientConfig::builder_with_provider(rpc::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![foreign.certificate().clone()], key)
        .expect("client cert");
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let config = quic_client_config(tls, Duration::from_secs(10)).expect("config");
    let (err, took) = refused_call(server.local_addr(), "server", config).await;
    assert!(err.is_refused(), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("refused this node's certificate"), "{text}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {text}");
}

#[tokio::test]
async fn a_wrong_server_name_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    init(dir.path(), &["server", "client"]);
    let server = Server::bind(localhost(), &load(dir.path(), "server"), Echo).expect("bind");
    let config = load(dir.path(), "client")
        .client_config(Duration::from_secs(10))
        .expect("config");
    let (err, took) = refused_call(server.local_addr(), "master", config).await;
    assert!(err.is_refused(), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
}

#[tokio::test]
async fn no_common_application_protocol_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    init(dir.path(), &["server", "client"]);
    let server = Server::bind(localhost(), &load(dir.path(), "server"), Echo).expect("bind");
    let mut tls = load(dir.path(), "client")
        .rustls_client_config()
        .expect("tls");
    tls.alpn_protocols = vec![b"ht/0".to_vec()];
    let config = quic_client_config(tls, Duration::from_secs(10)).expect("config");
    let (err, took) = refused_call(server.local_addr(), "server", config).await;
    assert!(err.is_refused(), "{err:?}");
    assert!(err.to_string().contains("no application protocol"), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
}
