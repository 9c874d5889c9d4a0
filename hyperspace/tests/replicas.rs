//! Three replicas in one process over real QUIC on loopback: election, proposals, reads,
//! leader change, membership change.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hyperspace::command::{Command, Noop, Op};
use hyperspace::node::NodeConfig;
use hyperspace::service::{Replica, ReplicaConfig, TransportOptions};
use rpc::ClusterCredentials;

fn free_addr() -> SocketAddr {
    rpc::free_loopback_addr().expect("free port")
}

fn credentials(dir: &Path) {
    ClusterCredentials::create(dir).unwrap();
    ClusterCredentials::issue(dir, "hyperspace").unwrap();
    ClusterCredentials::issue(dir, "client").unwrap();
}

fn config(dir: &Path, id: u64, members: &BTreeMap<u64, String>) -> ReplicaConfig {
    let mut node = NodeConfig::new(id, dir.join(format!("hs{id}")), members.clone());
    node.tick = Duration::from_millis(50);
    // Small, so that a replica that was down must catch up from a snapshot.
    node.snapshot_entries = 20;
    ReplicaConfig {
        node,
        listen: members[&id].parse().unwrap(),
        credentials_dir: dir.to_path_buf(),
        server: rpc::ServerOptions::default(),
        transport: TransportOptions::default(),
    }
}

async fn leader_of(replicas: &[Option<Replica>]) -> usize {
    let start = Instant::now();
    loop {
        for (i, r) in replicas.iter().enumerate() {
            if let Some(r) = r {
                let st = r.node().status().await.unwrap();
                if st.role == "Leader" {
                    return i;
                }
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no leader in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn noop() -> Command {
    Command {
        session: 0,
        seq: 0,
        first_incomplete: 0,
        op: Some(Op::Noop(Noop {})),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_elect_commit_and_fail_over() {
    let dir = tempfile::tempdir().unwrap();
    credentials(dir.path());
    let members: BTreeMap<u64, String> = (1..=3).map(|id| (id, free_addr().to_string())).collect();
    let mut replicas = Vec::new();
    for id in 1..=3 {
        replicas.push(Some(
            Replica::start(config(dir.path(), id, &members))
                .await
                .unwrap(),
        ));
    }
    let l = leader_of(&replicas).await;
    let leader = replicas[l].as_ref().unwrap().node().clone();
    for _ in 0..10 {
        leader.propose(noop()).await.unwrap();
    }
    let commit = leader.status().await.unwrap().commit;
    // Followers apply what the leader committed.
    for r in replicas.iter().flatten() {
        let start = Instant::now();
        while r.node().applied() < commit {
            assert!(start.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A follower refuses proposals with a hint naming the leader.
    let f = (l + 1) % 3;
    let err = replicas[f]
        .as_ref()
        .unwrap()
        .node()
        .propose(noop())
        .await
        .unwrap_err();
    assert!(
        matches!(err, hyperspace::node::NodeError::NotLeader { leader: Some((id, _)) } if id == l as u64 + 1),
        "{err}"
    );
    // Stop the leader: another is elected and commits.
    let old = replicas[l].take().unwrap();
    let stopped = Instant::now();
    old.shutdown().await;
    let l2 = leader_of(&replicas).await;
    assert_ne!(l2, l);
    let new_leader = replicas[l2].as_ref().unwrap().node().clone();
    new_leader.propose(noop()).await.unwrap();
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "failover took {:?}",
        stopped.elapsed()
    );
    // Enough entries while it is down that the log it lacks is compacted away.
    for _ in 0..60 {
        new_leader.propose(noop()).await.unwrap();
    }
    let st = new_leader.status().await.unwrap();
    assert!(
        st.snapshot_index > 0,
        "the leader compacted its log: {st:?}"
    );
    // The old leader comes back and catches up.
    replicas[l] = Some(
        Replica::start(config(dir.path(), l as u64 + 1, &members))
            .await
            .unwrap(),
    );
    let commit = replicas[l2]
        .as_ref()
        .unwrap()
        .node()
        .status()
        .await
        .unwrap()
        .commit;
    let start = Instant::now();
    while replicas[l].as_ref().unwrap().node().applied() < commit {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "restarted replica did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let st = replicas[l].as_ref().unwrap().node().status().await.unwrap();
    assert_eq!(
        st.snapshots_installed, 1,
        "caught up from a snapshot: {st:?}"
    );
    for r in replicas.into_iter().flatten() {
        r.shutdown().await;
    }
}

/// Raft traffic, membership changes and fault injection are refused from a client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_methods_refuse_clients() {
    let dir = tempfile::tempdir().unwrap();
    credentials(dir.path());
    let members: BTreeMap<u64, String> = BTreeMap::from([(1, free_addr().to_string())]);
    let replica = Replica::start(config(dir.path(), 1, &members))
        .await
        .unwrap();
    let creds = ClusterCredentials::load(dir.path(), "client").unwrap();
    let c = rpc::Client::connect(replica.local_addr(), "hyperspace", &creds)
        .await
        .unwrap();
    for method in ["hs.raft", "hs.member", "hs.fault"] {
        let err = c
            .call(method, bytes::Bytes::new(), Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("only hyperspace replicas"),
            "{method}: {err}"
        );
    }
    // A client may ask for status.
    c.call("hs.status", bytes::Bytes::new(), Duration::from_secs(2))
        .await
        .unwrap();
    c.close().await;
    replica.shutdown().await;
}
