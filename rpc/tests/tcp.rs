//! Calls over TCP + TLS (`rpc::tcp`) on 127.0.0.1: answers and errors, pooled connections,
//! limits, deadlines, refusals, and connections the server closed while they sat idle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::ErrorKind;
use rpc::{
    ClusterCredentials, PeerInfo, RpcError, Server, ServerOptions, Service, TcpClient,
    TcpClientOptions,
};

const DEADLINE: Duration = Duration::from_secs(10);

/// Calls running now, and the most seen at once.
#[derive(Default)]
struct Counts {
    running: AtomicUsize,
    most: AtomicUsize,
}

#[derive(Clone, Default)]
struct TestService(Arc<Counts>);

impl std::ops::Deref for TestService {
    type Target = Counts;
    fn deref(&self) -> &Counts {
        &self.0
    }
}

#[async_trait::async_trait]
impl Service for TestService {
    async fn call(&self, peer: &PeerInfo, method: &str, payload: Bytes) -> Result<Bytes, RpcError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let answer = match method {
            "echo" => Ok(payload),
            "whoami" => Ok(Bytes::from(peer.is_node("client").to_string())),
            "slow" => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(payload)
            }
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(payload)
            }
            "fail" => Err(RpcError::service(
                ErrorKind::NotFound,
                "table t1 does not exist",
            )),
            other => Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!("unknown method {other}"),
            )),
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        answer
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    server: ClusterCredentials,
    client: ClusterCredentials,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(dir.path()).expect("create CA");
    ClusterCredentials::issue(dir.path(), "server").expect("issue server");
    ClusterCredentials::issue(dir.path(), "client").expect("issue client");
    Cluster {
        server: ClusterCredentials::load(dir.path(), "server").expect("load server"),
        client: ClusterCredentials::load(dir.path(), "client").expect("load client"),
        dir,
    }
}

fn serve_at(c: &Cluster, addr: SocketAddr, service: TestService, options: ServerOptions) -> Server {
    Server::bind_with(
        addr,
        &c.server,
        service,
        ServerOptions {
            tcp: true,
            ..options
        },
    )
    .expect("bind")
}

fn serve(c: &Cluster) -> (Server, TestService) {
    let service = TestService::default();
    let server = serve_at(
        c,
        "127.0.0.1:0".parse().expect("addr"),
        service.clone(),
        ServerOptions::default(),
    );
    (server, service)
}

async fn connect(c: &Cluster, server: &Server, options: TcpClientOptions) -> TcpClient {
    TcpClient::connect(server.local_addr(), "server", &c.client, options)
        .await
        .expect("connect")
}

#[tokio::test]
async fn calls_answer_and_reuse_one_connection() {
    let c = cluster();
    let (server, _) = serve(&c);
    let client = connect(&c, &server, TcpClientOptions::default()).await;
    assert_eq!(client.idle_connections(), 1, "connect opens the first one");
    for i in 0..50u32 {
        let payload = Bytes::from(vec![i as u8; 1000 + 7919 * i as usize]);
        let reply = client
            .call("echo", payload.clone(), DEADLINE)
            .await
            .expect("echo");
        assert_eq!(reply, payload);
    }
    let empty = client
        .call("echo", Bytes::new(), DEADLINE)
        .await
        .expect("empty echo");
    assert!(empty.is_empty());
    assert_eq!(
        client.idle_connections(),
        1,
        "one call at a time: one connection"
    );
    // The server knows who called (the client's certificate).
    let me = client
        .call("whoami", Bytes::new(), DEADLINE)
        .await
        .expect("whoami");
    assert_eq!(&me[..], b"true");
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn server_errors_keep_their_kind_and_message_and_the_connection() {
    let c = cluster();
    let (server, _) = serve(&c);
    let client = connect(&c, &server, TcpClientOptions::default()).await;
    let e = client
        .call("fail", Bytes::new(), DEADLINE)
        .await
        .expect_err("fail");
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let text = e.to_string();
    assert!(
        text.contains("table t1 does not exist") && text.contains("fail"),
        "{text}"
    );
    assert_eq!(client.idle_connections(), 1);
    let reply = client
        .call("echo", Bytes::from_static(b"after"), DEADLINE)
        .await
        .expect("echo after an error");
    assert_eq!(&reply[..], b"after");
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_bounded_by_max_connections() {
    let c = cluster();
    let (server, service) = serve(&c);
    let options = TcpClientOptions {
        max_connections: 4,
        ..Default::default()
    };
    let client = Arc::new(connect(&c, &server, options).await);
    let mut tasks = Vec::new();
    for i in 0..40u32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let payload = Bytes::from(i.to_le_bytes().to_vec());
            let reply = client.call("slow", payload.clone(), DEADLINE).await?;
            assert_eq!(reply, payload);
            Ok::<_, RpcError>(())
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("call");
    }
    let most = service.most.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&most),
        "{most} calls ran at once with 4 connections"
    );
    assert!(client.idle_connections() <= 4);
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn oversize_messages_are_refused_and_the_next_call_works() {
    let c = cluster();
    let service = TestService::default();
    let server = serve_at(
        &c,
        "127.0.0.1:0".parse().expect("addr"),
        service,
        ServerOptions {
            max_message_bytes: 64 * 1024,
            ..Default::default()
        },
    );
    // The client's own limit refuses before sending.
    let small = TcpClientOptions {
        max_message_bytes: 1024,
        ..Default::default()
    };
    let client = connect(&c, &server, small).await;
    let e = client
        .call("echo", Bytes::from(vec![0u8; 4096]), DEADLINE)
        .await
        .expect_err("over the client's limit");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // The server's limit: an error answer, and the connection is closed.
    let client = connect(&c, &server, TcpClientOptions::default()).await;
    let e = client
        .call("echo", Bytes::from(vec![0u8; 100 * 1024]), DEADLINE)
        .await
        .expect_err("over the server's limit");
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
    let reply = client
        .call("echo", Bytes::from_static(b"ok"), DEADLINE)
        .await
        .expect("a new connection");
    assert_eq!(&reply[..], b"ok");
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_call_past_its_deadline_fails_and_the_next_one_works() {
    let c = cluster();
    let (server, _) = serve(&c);
    let client = connect(&c, &server, TcpClientOptions::default()).await;
    let e = client
        .call("sleep", Bytes::new(), Duration::from_millis(100))
        .await
        .expect_err("deadline");
    assert!(e.is_timeout(), "{e}");
    assert!(e.to_string().contains("sleep"), "{e}");
    // The timed-out connection was dropped, not put back half read.
    let reply = client
        .call("echo", Bytes::from_static(b"next"), DEADLINE)
        .await
        .expect("echo");
    assert_eq!(&reply[..], b"next");
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_used() {
    let c = cluster();
    let service = TestService::default();
    let server = serve_at(
        &c,
        "127.0.0.1:0".parse().expect("addr"),
        service.clone(),
        ServerOptions {
            idle_timeout: Duration::from_millis(100),
            ..Default::default()
        },
    );
    let client = connect(&c, &server, TcpClientOptions::default()).await;
    client
        .call("echo", Bytes::from_static(b"1"), DEADLINE)
        .await
        .expect("first");
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The server closed the pooled connection; the call notices and opens another.
    let reply = client
        .call("echo", Bytes::from_static(b"2"), DEADLINE)
        .await
        .expect("after the server's idle timeout");
    assert_eq!(&reply[..], b"2");

    // A restarted server on the same port: the old connections are dead, new ones work.
    let addr = server.local_addr();
    server.shutdown(Duration::from_secs(1)).await;
    // quinn's driver task releases the old UDP socket shortly after shutdown returns.
    let mut attempts = 0;
    let server = loop {
        let options = ServerOptions {
            tcp: true,
            ..Default::default()
        };
        match Server::bind_with(addr, &c.server, service.clone(), options) {
            Ok(server) => break server,
            Err(e) if attempts < 50 => {
                attempts += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("rebind the same port: {e}"),
        }
    };
    let reply = client
        .call("echo", Bytes::from_static(b"3"), DEADLINE)
        .await
        .expect("after a restart");
    assert_eq!(&reply[..], b"3");
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_client_of_another_cluster_is_refused() {
    let c = cluster();
    let (server, _) = serve(&c);
    let other = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(other.path()).expect("other CA");
    ClusterCredentials::issue(other.path(), "client").expect("issue");
    let foreign = ClusterCredentials::load(other.path(), "client").expect("load");
    // In TLS 1.3 the client learns of the refusal of its certificate on its first read.
    let refused = match TcpClient::connect(
        server.local_addr(),
        "server",
        &foreign,
        TcpClientOptions::default(),
    )
    .await
    {
        Err(e) => e,
        Ok(client) => client
            .call("echo", Bytes::from_static(b"x"), DEADLINE)
            .await
            .expect_err("a foreign client"),
    };
    assert!(refused.is_refused(), "{refused}");
    // And a client of this cluster that asks for the wrong server name.
    let e = TcpClient::connect(
        server.local_addr(),
        "not-the-server",
        &c.client,
        TcpClientOptions::default(),
    )
    .await
    .map(|_| ())
    .expect_err("wrong name");
    assert!(e.is_refused(), "{e}");
    assert!(c.dir.path().exists());
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_server_without_tcp_is_a_connect_error() {
    let c = cluster();
    let service = TestService::default();
    let server = Server::bind_with(
        "127.0.0.1:0".parse().expect("addr"),
        &c.server,
        service,
        ServerOptions::default(),
    )
    .expect("bind");
    let e = TcpClient::connect(
        server.local_addr(),
        "server",
        &c.client,
        TcpClientOptions::default(),
    )
    .await
    .map(|_| ())
    .expect_err("no TCP listener");
    assert!(matches!(e, RpcError::Connect { .. }), "{e}");
    assert!(e.is_retryable());
    server.shutdown(Duration::from_secs(1)).await;
}
