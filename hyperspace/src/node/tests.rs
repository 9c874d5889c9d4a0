//! Driver tests: two drivers pumped by hand, and the single replica.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prost::Message as _;
use raft::StateRole;
use raft::prelude::{ConfState, Entry, Message};
use tokio::sync::{mpsc, oneshot, watch};

use super::driver::{Driver, ctx_bytes};
use super::handle::Input;
use super::{NoPeers, Node, NodeConfig, NodeError, Transport};
use crate::command::{Command, Op};
use crate::command::{CreateSession, Exists, Mkdir, Reply as CmdReply};
use crate::storage::DiskStorage;
use raft::prelude::HardState;

/// A transport that keeps what is sent, for the test to deliver (or not).
#[derive(Default)]
struct Capture(Mutex<Vec<Message>>);

impl Transport for Capture {
    fn send(&self, _to: u64, _addr: &str, msgs: Vec<Message>) {
        self.0.lock().extend(msgs);
    }
}

fn config(id: u64, dir: &std::path::Path, members: &BTreeMap<u64, String>) -> NodeConfig {
    let mut c = NodeConfig::new(id, dir.to_path_buf(), members.clone());
    c.storage.sync = false;
    c
}

fn driver(config: NodeConfig) -> (Driver, Arc<Capture>) {
    std::fs::create_dir_all(&config.dir).unwrap();
    let capture = Arc::new(Capture::default());
    let (tx, _rx) = mpsc::channel(16);
    let (applied_tx, _) = watch::channel(0);
    let d = Driver::open(
        config,
        capture.clone(),
        tx,
        applied_tx,
        Arc::new(Mutex::new(None)),
    )
    .expect("open driver");
    (d, capture)
}

fn two_members() -> BTreeMap<u64, String> {
    BTreeMap::from([(1, "a".to_string()), (2, "b".to_string())])
}

/// One round: each driver handles its ready; what 1 sent goes to 2 (if `to_2`) and back.
fn pump(d1: &mut Driver, c1: &Capture, d2: &mut Driver, c2: &Capture, to_2: bool) {
    d1.on_ready().unwrap();
    d2.on_ready().unwrap();
    let from_1: Vec<Message> = std::mem::take(&mut *c1.0.lock());
    let from_2: Vec<Message> = std::mem::take(&mut *c2.0.lock());
    if to_2 && !from_1.is_empty() {
        d2.handle(Input::Raft(from_1, None));
    }
    if !from_2.is_empty() {
        d1.handle(Input::Raft(from_2, None));
    }
}

fn cmd(op: Op) -> Command {
    Command {
        session: 0,
        seq: 0,
        first_incomplete: 0,
        op: Some(op),
    }
}

/// Replica 1 of {1, 2} with `old` in its log: an entry it proposed in term 1 as
/// (replica 1, proposal 1) that never committed before it restarted. Elected again with
/// replica 2's vote, but with nothing delivered to 2 after that (so nothing committed yet).
fn restarted_leader_with_uncommitted_entry(
    tmp: &std::path::Path,
) -> (Driver, Arc<Capture>, Driver, Arc<Capture>) {
    let members = two_members();
    let dir1 = tmp.join("1");
    std::fs::create_dir_all(&dir1).unwrap();
    {
        let storage =
            DiskStorage::open(&dir1.join("raft"), config(1, &dir1, &members).storage).unwrap();
        storage
            .initialize(ConfState {
                voters: vec![1, 2],
                ..Default::default()
            })
            .unwrap();
        let old = Entry {
            index: 1,
            term: 1,
            context: ctx_bytes(1, 1).into(),
            data: cmd(Op::Mkdir(Mkdir {
                path: "/old".into(),
                parents: false,
            }))
            .encode_to_vec()
            .into(),
            ..Default::default()
        };
        let hs = HardState {
            term: 1,
            vote: 1,
            commit: 0,
            ..Default::default()
        };
        storage.persist(&[old], Some(&hs)).unwrap();
    }
    let (mut d1, c1) = driver(config(1, &dir1, &members));
    let (mut d2, c2) = driver(config(2, &tmp.join("2"), &members));
    d1.raw.campaign().unwrap();
    for _ in 0..10 {
        if d1.role == StateRole::Leader {
            break;
        }
        pump(&mut d1, &c1, &mut d2, &c2, true);
    }
    assert_eq!(d1.role, StateRole::Leader);
    // Keep the new leader's first append from reaching 2 yet.
    c1.0.lock().clear();
    (d1, c1, d2, c2)
}

#[test]
fn proposal_is_not_answered_by_an_older_incarnations_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut d1, c1, mut d2, c2) = restarted_leader_with_uncommitted_entry(tmp.path());
    let (reply, mut rx) = oneshot::channel();
    d1.handle(Input::Propose(
        cmd(Op::CreateSession(CreateSession {
            nonce: 7,
            lease_ms: 10_000,
        })),
        reply,
    ));
    for _ in 0..20 {
        pump(&mut d1, &c1, &mut d2, &c2, true);
    }
    let response = rx.try_recv().expect("answered").expect("applied");
    assert!(
        matches!(response.reply, Some(CmdReply::Session(_))),
        "CreateSession answered with another command's response: {response:?}"
    );
}

#[test]
fn read_before_the_leader_commits_in_its_term_is_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut d1, c1, mut d2, c2) = restarted_leader_with_uncommitted_entry(tmp.path());
    assert!(!d1.raw.raft.commit_to_current_term());
    let (reply, mut rx) = oneshot::channel();
    d1.handle(Input::Read(
        cmd(Op::Exists(Exists { path: "/".into() })),
        reply,
    ));
    for _ in 0..20 {
        pump(&mut d1, &c1, &mut d2, &c2, true);
    }
    let response = rx
        .try_recv()
        .expect("the read is answered once the leader has committed in its term")
        .expect("read");
    assert_eq!(response.reply, Some(CmdReply::Bool(true)));
}

/// The embedded database's single replica, elected and with its first entry committed.
fn single(dir: &std::path::Path) -> Driver {
    let mut c = NodeConfig::single(dir.to_path_buf());
    c.storage.sync = false;
    let (mut d, _) = driver(c);
    for _ in 0..3 {
        d.on_ready().unwrap();
    }
    assert_eq!(d.role, StateRole::Leader);
    d
}

fn create_session(d: &mut Driver, lease_ms: u64) -> u64 {
    let (reply, mut rx) = oneshot::channel();
    d.handle(Input::Propose(
        cmd(Op::CreateSession(CreateSession { nonce: 9, lease_ms })),
        reply,
    ));
    for _ in 0..3 {
        d.on_ready().unwrap();
    }
    match rx.try_recv().expect("answered").expect("applied").reply {
        Some(CmdReply::Session(id)) => id,
        other => panic!("CreateSession answered {other:?}"),
    }
}

#[test]
fn keep_alive_does_not_renew_a_session_whose_expiry_is_proposed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = single(tmp.path());
    let session = create_session(&mut d, 10_000);
    // The lease runs out: the tick proposes ExpireSession (not yet committed).
    d.leases.insert(session, Instant::now());
    d.on_tick();
    assert!(d.expiring.contains_key(&session));
    // A keep-alive served before the expiry applies must not tell the client it has a
    // lease: the expiry will commit and its locks go to others.
    let ka = d.keep_alive(session, 0, 10).unwrap();
    assert_eq!(ka.lease_ms, 0, "a doomed session was granted a lease");
}

#[tokio::test]
async fn wait_applied_on_a_stopped_replica_waits_out_its_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = NodeConfig::single(tmp.path().to_path_buf());
    c.storage.sync = false;
    let node = Node::start(c, Arc::new(NoPeers)).unwrap();
    node.stop().await;
    // The keep-alive hold loops call this until their deadline: returning at once would
    // make them spin for the whole hold.
    let start = Instant::now();
    node.wait_applied(node.applied(), Duration::from_millis(300))
        .await;
    assert!(start.elapsed() >= Duration::from_millis(250));
}

#[test]
fn a_conf_change_raft_refuses_does_not_stop_the_replica() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = single(tmp.path());
    // Removing the last voter is accepted by propose and refused when applied.
    let (reply, mut rx) = oneshot::channel();
    d.handle(Input::Member {
        add: false,
        id: 1,
        addr: String::new(),
        reply,
    });
    for _ in 0..3 {
        d.on_ready().expect("the replica keeps running");
    }
    assert!(rx.try_recv().expect("answered").is_err());
    // And it still commits.
    create_session(&mut d, 1000);
    // Replica id 0 is no replica.
    let (reply, mut rx) = oneshot::channel();
    d.handle(Input::Member {
        add: true,
        id: 0,
        addr: "127.0.0.1:1".into(),
        reply,
    });
    assert!(matches!(
        rx.try_recv().expect("answered"),
        Err(NodeError::Invalid(_))
    ));
}
