//! Outgoing endpoints of a process that serves bind the IP it listens on (`rpc::set_local_ip`),
//! so its peers see its connections come from that address. Alone in its test binary: the
//! setting is process-wide.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rpc::{Client, ClusterCredentials, PeerInfo, RpcError, Server};

/// Answers every call with the caller's address.
struct PeerRecorder {
    seen: Arc<Mutex<Vec<SocketAddr>>>,
}

#[async_trait::async_trait]
impl rpc::Service for PeerRecorder {
    async fn call(
        &self,
        peer: &PeerInfo,
        _method: &str,
        _payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        self.seen.lock().expect("lock").push(peer.addr);
        Ok(Bytes::from(peer.addr.to_string()))
    }
}

#[tokio::test]
async fn outgoing_endpoints_bind_the_listen_ip() {
    let dir = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(dir.path()).expect("CA");
    ClusterCredentials::issue(dir.path(), "server").expect("issue");
    ClusterCredentials::issue(dir.path(), "client").expect("issue");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = Server::bind(
        "127.0.0.1:0".parse().expect("addr"),
        &ClusterCredentials::load(dir.path(), "server").expect("load"),
        PeerRecorder { seen: seen.clone() },
    )
    .expect("bind");
    let creds = ClusterCredentials::load(dir.path(), "client").expect("load");

    // As a process listening on 127.0.0.2 (another loopback IP: the kernel would pick
    // 127.0.0.1 as the source for an unbound socket).
    rpc::set_local_ip("127.0.0.2".parse().expect("ip"));
    let client = Client::connect(server.local_addr(), "server", &creds)
        .await
        .expect("connect");
    let reply = client
        .call("whoami", Bytes::new(), Duration::from_secs(10))
        .await
        .expect("call");
    let peer: SocketAddr = String::from_utf8_lossy(&reply).parse().expect("peer");
    assert_eq!(peer.ip().to_string(), "127.0.0.2");
    client.close().await;

    // Unset (an unspecified listen IP): the loopback IP for a loopback server.
    rpc::set_local_ip("0.0.0.0".parse().expect("ip"));
    let client = Client::connect(server.local_addr(), "server", &creds)
        .await
        .expect("connect");
    client
        .call("whoami", Bytes::new(), Duration::from_secs(10))
        .await
        .expect("call");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].ip().to_string(), "127.0.0.1", "{seen:?}");
}
