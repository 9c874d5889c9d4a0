//! End-to-end tests of the rpc crate over QUIC on 127.0.0.1: calls, streams, limits, and TLS.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::ErrorKind;
use rpc::tls::{ALPN, quic_client_config};
use rpc::{
    Client, ClientOptions, ClusterCredentials, PeerInfo, RpcError, Server, ServerOptions, Service,
    StreamSink,
};

const DEADLINE: Duration = Duration::from_secs(10);

struct TestService;

#[async_trait::async_trait]
impl Service for TestService {
    async fn call(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        match method {
            "echo" => Ok(payload),
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(payload)
            }
            "fail" => Err(RpcError::service(
                ErrorKind::NotFound,
                "table t1 does not exist",
            )),
            "big" => Ok(Bytes::from(vec![7u8; 2 * 1024 * 1024])),
            other => Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!("unknown method {other}"),
            )),
        }
    }

    async fn call_stream(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
        sink: &mut StreamSink,
    ) -> Result<(), RpcError> {
        let n = payload.first().copied().unwrap_or(0);
        for i in 0..n {
            sink.send(Bytes::from(vec![i])).await?;
        }
        if method == "count_then_fail" {
            return Err(RpcError::service(
                ErrorKind::Unavailable,
                "server going away",
            ));
        }
        Ok(())
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    server_creds: ClusterCredentials,
    client_creds: ClusterCredentials,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(dir.path()).expect("create CA");
    ClusterCredentials::issue(dir.path(), "server").expect("issue server");
    ClusterCredentials::issue(dir.path(), "client").expect("issue client");
    Cluster {
        server_creds: ClusterCredentials::load(dir.path(), "server").expect("load server"),
        client_creds: ClusterCredentials::load(dir.path(), "client").expect("load client"),
        _dir: dir,
    }
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().expect("addr")
}

fn serve(c: &Cluster, options: ServerOptions) -> Server {
    Server::bind_with(localhost(), &c.server_creds, TestService, options).expect("bind")
}

async fn connect(c: &Cluster, server: &Server) -> Client {
    Client::connect(server.local_addr(), "server", &c.client_creds)
        .await
        .expect("connect")
}

#[tokio::test]
async fn echo_round_trip() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let client = connect(&c, &server).await;
    let reply = client
        .call("echo", Bytes::from_static(b"hello"), DEADLINE)
        .await
        .expect("echo");
    assert_eq!(&reply[..], b"hello");
    let empty = client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("echo");
    assert!(empty.is_empty());
    client.close().await;
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn many_concurrent_calls_beyond_the_stream_limit() {
    let c = cluster();
    let server = serve(
        &c,
        ServerOptions {
            max_concurrent_streams_per_connection: 8,
            ..ServerOptions::default()
        },
    );
    let client = Arc::new(connect(&c, &server).await);
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let payload = Bytes::from(i.to_le_bytes().to_vec());
            let reply = client.call("echo", payload.clone(), DEADLINE).await?;
            assert_eq!(reply, payload);
            Ok::<_, RpcError>(())
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("call");
    }
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn deadline_exceeded_names_peer_and_method() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let client = connect(&c, &server).await;
    let err = client
        .call("sleep", Bytes::new(), Duration::from_millis(100))
        .await
        .expect_err("must time out");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let text = err.to_string();
    assert!(text.contains("sleep"), "{text}");
    assert!(text.contains(&server.local_addr().to_string()), "{text}");
    // The connection is still usable afterwards.
    client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("echo after timeout");
}

#[tokio::test]
async fn server_error_reaches_client_with_kind_and_message() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let client = connect(&c, &server).await;
    let err = client
        .call("fail", Bytes::new(), DEADLINE)
        .await
        .expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(
        matches!(&err, RpcError::Remote { method, message, .. }
            if method == "fail" && message == "table t1 does not exist"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&server.local_addr().to_string()), "{text}");
}

#[tokio::test]
async fn server_push_stream_of_n_messages() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let client = connect(&c, &server).await;
    let messages = client
        .call_stream("count", Bytes::from_static(&[100]), DEADLINE)
        .await
        .expect("open stream")
        .collect()
        .await
        .expect("stream");
    assert_eq!(messages.len(), 100);
    for (i, m) in messages.iter().enumerate() {
        assert_eq!(&m[..], &[i as u8]);
    }

    // A stream that ends in an error delivers its messages, then the error.
    let mut stream = client
        .call_stream("count_then_fail", Bytes::from_static(&[3]), DEADLINE)
        .await
        .expect("open stream");
    for i in 0..3u8 {
        assert_eq!(
            stream.next().await.expect("item").as_deref(),
            Some(&[i][..])
        );
    }
    let err = stream.next().await.expect_err("error at end");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("server going away"), "{err}");
    assert!(matches!(stream.next().await, Ok(None)));
}

#[tokio::test]
async fn oversize_messages_are_refused() {
    let c = cluster();
    let limit = 1024 * 1024;
    let server = serve(
        &c,
        ServerOptions {
            max_message_bytes: limit,
            ..ServerOptions::default()
        },
    );
    // Refused by the client before sending.
    let small = ClientOptions {
        max_message_bytes: limit,
        ..ClientOptions::default()
    };
    let config = c
        .client_creds
        .client_config(small.idle_timeout)
        .expect("config");
    let client = Client::connect_with(server.local_addr(), "server", config, small)
        .await
        .expect("connect");
    let err = client
        .call("echo", Bytes::from(vec![0u8; limit + 1]), DEADLINE)
        .await
        .expect_err("too large");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("exceeds the limit"), "{err}");
    assert!(err.to_string().contains("echo"), "{err}");

    // Refused by the server: the client allows more than the server does.
    let client = connect(&c, &server).await;
    let err = client
        .call("echo", Bytes::from(vec![0u8; 2 * limit]), DEADLINE)
        .await
        .expect_err("too large for the server");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("exceeds the limit"), "{err}");

    // A response over the server's limit becomes an error, not a broken stream.
    let err = client
        .call("big", Bytes::new(), DEADLINE)
        .await
        .expect_err("response too large");
    assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    assert!(err.to_string().contains("response of"), "{err}");

    // The connection survives all of that.
    client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("echo");
}

/// The handshake or, at the latest, the first call must fail, as a refusal (not retryable).
async fn assert_refused(addr: SocketAddr, config: quinn::ClientConfig) {
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    match Client::connect_with(addr, "server", config, options).await {
        Err(e) => assert!(e.is_refused(), "{e}"),
        Ok(client) => {
            let result = client
                .call("echo", Bytes::from_static(b"x"), Duration::from_secs(5))
                .await;
            match result {
                Ok(_) => panic!("a client without cluster credentials got an answer"),
                Err(e) => assert!(e.is_refused(), "{e:?}"),
            }
        }
    }
}

fn foreign_cluster(dir: &Path) -> ClusterCredentials {
    ClusterCredentials::create(dir).expect("create other CA");
    ClusterCredentials::issue(dir, "client").expect("issue");
    ClusterCredentials::load(dir, "client").expect("load")
}

#[tokio::test]
async fn client_with_certificate_from_another_ca_is_refused() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let other = tempfile::tempdir().expect("tempdir");
    let foreign = foreign_cluster(other.path());
    let config = foreign
        .client_config(Duration::from_secs(10))
        .expect("config");
    assert_refused(server.local_addr(), config).await;

    // A client of another cluster that trusts our CA but presents its own certificate: still refused.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(c.client_creds.ca_cert().clone()).expect("root");
    let foreign_key_pem = std::fs::read(other.path().join("tls/client.key")).expect("key");
    let foreign_cert_pem = std::fs::read(other.path().join("tls/client.pem")).expect("cert");
    use rustls::pki_types::pem::PemObject;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&foreign_key_pem).expect("key");
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&foreign_cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .expect("certs");
    let mut tls = rustls::ClientConfig::builder_with_provider(rpc::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .expect("client cert");
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let config = quic_client_config(tls, Duration::from_secs(10)).expect("config");
    assert_refused(server.local_addr(), config).await;

    // And the real client still works.
    let client = connect(&c, &server).await;
    client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("echo");
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(c.client_creds.ca_cert().clone()).expect("root");
    let mut tls = rustls::ClientConfig::builder_with_provider(rpc::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let config = quic_client_config(tls, Duration::from_secs(10)).expect("config");
    assert_refused(server.local_addr(), config).await;
}

#[tokio::test]
async fn client_refuses_a_server_of_another_cluster() {
    let c = cluster();
    let other = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(other.path()).expect("create");
    ClusterCredentials::issue(other.path(), "server").expect("issue");
    let foreign_server_creds = ClusterCredentials::load(other.path(), "server").expect("load");
    let server = Server::bind(localhost(), &foreign_server_creds, TestService).expect("bind");
    let err = Client::connect(server.local_addr(), "server", &c.client_creds)
        .await
        .err()
        .expect("must refuse the server");
    assert!(matches!(err, RpcError::Refused { .. }), "{err:?}");
}

#[tokio::test]
async fn graceful_shutdown_lets_calls_in_flight_finish() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let client = Arc::new(connect(&c, &server).await);
    let in_flight = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .call("sleep", Bytes::from_static(b"z"), DEADLINE)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.shutdown(Duration::from_secs(8)).await;
    let reply = in_flight
        .await
        .expect("join")
        .expect("call finished during shutdown");
    assert_eq!(&reply[..], b"z");
    assert!(
        client
            .call("echo", Bytes::new(), Duration::from_secs(3))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn idempotent_call_reconnects_after_server_restart() {
    let c = cluster();
    let server = serve(&c, ServerOptions::default());
    let addr = server.local_addr();
    let client = connect(&c, &server).await;
    client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("echo");
    server.shutdown(Duration::from_secs(1)).await;

    // quinn's driver task releases the old socket shortly after shutdown returns.
    let mut attempts = 0;
    let restarted = loop {
        match Server::bind(addr, &c.server_creds, TestService) {
            Ok(server) => break server,
            Err(e) if attempts < 50 => {
                attempts += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("rebind the same port: {e}"),
        }
    };
    let policy = rpc::RetryPolicy {
        max_attempts: 5,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
    };
    let reply = client
        .call_idempotent("echo", Bytes::from_static(b"again"), DEADLINE, &policy)
        .await
        .expect("retried call reaches the restarted server");
    assert_eq!(&reply[..], b"again");
    restarted.shutdown(Duration::from_secs(1)).await;
}
