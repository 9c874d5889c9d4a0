//! The metadata server on a `ManualClock`: writer leases and chunk-server liveness expire
//! exactly at their limits, and placement follows `MetaOptions::seed`.

use std::sync::Arc;
use std::time::Duration;

use common::time::ManualClock;
use rpc::ClusterCredentials;

use super::lease::expired_leases;
use super::repair::tick;
use super::*;
use crate::launch::ensure_credentials;

/// A metadata server on loopback whose tick loop never runs (an hour's tick, in real time).
async fn server(
    dir: &tempfile::TempDir,
    clock: &Arc<ManualClock>,
    seed: u64,
) -> (MetaServer, Arc<Shared>) {
    ensure_credentials(dir.path()).expect("test credentials");
    let credentials =
        ClusterCredentials::load(dir.path(), crate::META_SERVER_NAME).expect("credentials");
    let mut options = MetaOptions::new(
        dir.path().join("meta"),
        Flavour::HdfsLike,
        Layout::Replicated { replicas: 3 },
    );
    options.tick_ms = 3_600_000;
    options.dead_after_ms = 5_000;
    options.lease_timeout_ms = 60_000;
    options.sync_namespace = false;
    options.clock = clock.clone();
    options.seed = seed;
    let server = MetaServer::start(
        "127.0.0.1:0".parse().expect("an address"),
        &credentials,
        options,
    )
    .await
    .expect("metadata server starts");
    let shared = server.shared.clone();
    (server, shared)
}

fn heartbeat(shared: &Shared, server: &str) {
    shared.heartbeat(HeartbeatRequest {
        server: server.to_string(),
        chunks: 0,
        used_bytes: 0,
    });
}

fn live(shared: &Shared, server: &str) -> bool {
    shared
        .status()
        .servers
        .iter()
        .any(|s| s.server == server && s.live)
}

fn create(shared: &Shared, path: &str) -> u64 {
    let reply = shared.create(CreateRequest {
        path: path.to_string(),
        overwrite: false,
    });
    assert!(reply.error.is_none(), "{:?}", reply.error);
    reply.file_id
}

#[tokio::test]
async fn a_writer_lease_expires_exactly_past_its_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new());
    let (server, shared) = server(&dir, &clock, 1).await;
    let id = create(&shared, "/f");
    let timeout = Duration::from_millis(shared.options.lease_timeout_ms);

    clock.advance(timeout);
    assert!(expired_leases(&shared).is_empty(), "expired at the limit");
    // A renewal starts the lease again from now.
    shared
        .renew(RenewRequest {
            path: "/f".into(),
            file_id: id,
        })
        .expect("renew an open file");
    clock.advance(timeout);
    assert!(expired_leases(&shared).is_empty(), "renewal ignored");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(expired_leases(&shared), vec![id]);
    // Marked as recovering: not handed out twice.
    assert!(expired_leases(&shared).is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_chunk_server_dies_exactly_at_dead_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new());
    let (server, shared) = server(&dir, &clock, 1).await;
    let dead_after = Duration::from_millis(shared.options.dead_after_ms);
    heartbeat(&shared, "127.0.0.1:1");
    heartbeat(&shared, "127.0.0.1:2");
    clock.advance(dead_after - Duration::from_nanos(1));
    heartbeat(&shared, "127.0.0.1:2");
    assert!(live(&shared, "127.0.0.1:1"), "dead before its limit");
    let _ = tick(&shared);
    assert_eq!(
        shared.status().servers.len(),
        2,
        "a live server was dropped"
    );

    clock.advance(Duration::from_nanos(1));
    assert!(!live(&shared, "127.0.0.1:1"), "live at its limit");
    assert!(live(&shared, "127.0.0.1:2"));
    let _ = tick(&shared);
    let servers = shared.status().servers;
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(servers[0].server, "127.0.0.1:2");
    server.shutdown().await;
}

/// The servers of 8 blocks placed over 6 live chunk servers (and one dead one).
async fn placements(seed: u64) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new());
    let (server, shared) = server(&dir, &clock, seed).await;
    heartbeat(&shared, "127.0.0.1:100");
    clock.advance(Duration::from_millis(shared.options.dead_after_ms));
    for i in 1..=6 {
        heartbeat(&shared, &format!("127.0.0.1:{i}"));
    }
    let id = create(&shared, "/f");
    let mut out = Vec::new();
    for _ in 0..8 {
        let b = shared
            .add_block(AddBlockRequest {
                path: "/f".into(),
                file_id: id,
                exclude: Vec::new(),
            })
            .expect("a block");
        out.push(b.chunks[0].servers.clone());
    }
    server.shutdown().await;
    out
}

#[tokio::test]
async fn placement_follows_the_configured_seed() {
    let a = placements(42).await;
    assert_eq!(a, placements(42).await);
    assert_ne!(a, placements(43).await);
    for servers in &a {
        let mut distinct = servers.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "{servers:?}");
        assert!(
            !servers.contains(&"127.0.0.1:100".to_string()),
            "dead server used"
        );
    }
}
