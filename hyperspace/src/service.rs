//! Hyperspace over `rpc`: the replica's service (client calls, keep-alives, Raft messages between
//! replicas, status, membership, fault injection), the Raft transport, and [`Replica`], which
//! wires a [`Node`] to both.
//!
//! Methods (payloads are the prost messages below; `docs/formats/hyperspace.md`):
//! - `hs.call`: `Command` -> `CallReply` (writes are proposed, reads go through a read index);
//! - `hs.keepalive`: `KeepAliveRequest` -> `KeepAliveReply`, held up to `hold_ms` for events;
//! - `hs.raft`: `RaftBatch` -> empty (replica to replica);
//! - `hs.status`: empty -> `StatusReply`;
//! - `hs.member`: `MemberRequest` -> empty (add or remove a replica);
//! - `hs.fault`: `FaultRequest` -> empty (drop Raft traffic to and from the named replicas: the
//!   fault-injecting transport that partition tests use).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use parking_lot::{Mutex, RwLock};
use prost::Message as _;
use protobuf::Message as _;
use raft::prelude::{Message, MessageType};
use rpc::{ClusterCredentials, PeerInfo, RpcError, Server, ServerOptions, StreamSink};
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::command::{Command, ErrorCode, Event, Op, Response};
use crate::node::{DeliveryReports, Node, NodeConfig, NodeError, NodeStatus, Transport};

/// The certificate name every replica presents (`ht init` issues it).
pub const SERVER_NAME: &str = "hyperspace";

#[derive(Clone, PartialEq, prost::Message)]
pub struct RaftBatch {
    /// Raft messages, each encoded by raft-rs's own protobuf codec.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub messages: Vec<Vec<u8>>,
    /// The sending replica's id and the address it serves on.
    #[prost(uint64, tag = "2")]
    pub sender_id: u64,
    #[prost(string, tag = "3")]
    pub sender_addr: String,
}

/// The answer to `hs.call`. A `NotLeader` error names the leader when known.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CallReply {
    #[prost(message, optional, tag = "1")]
    pub response: Option<Response>,
    #[prost(uint64, tag = "2")]
    pub leader_id: u64,
    #[prost(string, tag = "3")]
    pub leader_addr: String,
}

impl CallReply {
    /// A request refused as invalid, before it reached the log.
    fn invalid(message: impl Into<String>) -> Self {
        CallReply {
            response: Some(Response::err(ErrorCode::InvalidArgument, message)),
            leader_id: 0,
            leader_addr: String::new(),
        }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveRequest {
    #[prost(uint64, tag = "1")]
    pub session: u64,
    /// The highest event seq the client has received.
    #[prost(uint64, tag = "2")]
    pub seen: u64,
    /// Hold the call up to this long while there are no events.
    #[prost(uint64, tag = "3")]
    pub hold_ms: u64,
    #[prost(uint32, tag = "4")]
    pub max_events: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveReply {
    /// `SessionExpired`, `NotLeader` (with the leader), or none.
    #[prost(message, optional, tag = "1")]
    pub error: Option<crate::command::HsError>,
    #[prost(message, repeated, tag = "2")]
    pub events: Vec<Event>,
    #[prost(bool, tag = "3")]
    pub lost: bool,
    #[prost(uint64, tag = "4")]
    pub lease_ms: u64,
    #[prost(uint64, tag = "5")]
    pub leader_id: u64,
    #[prost(string, tag = "6")]
    pub leader_addr: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusReply {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "2")]
    pub role: String,
    #[prost(uint64, tag = "3")]
    pub leader_id: u64,
    #[prost(string, tag = "4")]
    pub leader_addr: String,
    #[prost(uint64, tag = "5")]
    pub term: u64,
    #[prost(uint64, tag = "6")]
    pub commit: u64,
    #[prost(uint64, tag = "7")]
    pub applied: u64,
    #[prost(uint64, tag = "8")]
    pub last_index: u64,
    #[prost(uint64, tag = "9")]
    pub snapshot_index: u64,
    #[prost(btree_map = "uint64, string", tag = "10")]
    pub members: BTreeMap<u64, String>,
    #[prost(uint64, tag = "11")]
    pub sessions: u64,
    #[prost(uint64, tag = "12")]
    pub snapshots_installed: u64,
}

impl From<NodeStatus> for StatusReply {
    fn from(s: NodeStatus) -> Self {
        StatusReply {
            id: s.id,
            role: s.role,
            leader_id: s.leader,
            leader_addr: s.members.get(&s.leader).cloned().unwrap_or_default(),
            term: s.term,
            commit: s.commit,
            applied: s.applied,
            last_index: s.last_index,
            snapshot_index: s.snapshot_index,
            members: s.members,
            sessions: s.sessions,
            snapshots_installed: s.snapshots_installed,
        }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberRequest {
    #[prost(bool, tag = "1")]
    pub add: bool,
    #[prost(uint64, tag = "2")]
    pub id: u64,
    #[prost(string, tag = "3")]
    pub addr: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FaultRequest {
    /// Replicas this one exchanges no Raft messages with (both directions); empty heals.
    #[prost(uint64, repeated, tag = "1")]
    pub isolated_from: Vec<u64>,
}

/// Largest hold of a keep-alive; a hold is also at most half the session's lease, so that the
/// lease is renewed in time whatever the client asks.
const MAX_HOLD: Duration = Duration::from_secs(10);
/// Bounds of a session lease a client may ask for.
pub const MIN_LEASE_MS: u64 = 100;
pub const MAX_LEASE_MS: u64 = 600_000;

fn decode<M: prost::Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("{method}: undecodable request: {e}"),
        )
    })
}

fn unavailable(e: NodeError) -> RpcError {
    RpcError::service(ErrorKind::Unavailable, e.to_string())
}

/// The replica's RPC service.
pub struct HyperspaceService {
    node: Node,
    isolated: Arc<RwLock<BTreeSet<u64>>>,
}

impl HyperspaceService {
    async fn call_command(&self, cmd: Command) -> Result<CallReply, RpcError> {
        // Only the leader itself expires sessions and acknowledges events.
        if let Some(op @ (Op::ExpireSession(_) | Op::AckEvents(_))) = &cmd.op {
            return Ok(CallReply::invalid(format!(
                "{} is not a client operation",
                op.name()
            )));
        }
        if let Some(Op::CreateSession(cs)) = &cmd.op
            && !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&cs.lease_ms)
        {
            return Ok(CallReply::invalid(format!(
                "a session lease of {} ms is outside {MIN_LEASE_MS}..={MAX_LEASE_MS} ms",
                cs.lease_ms
            )));
        }
        let is_write = cmd.op.as_ref().is_some_and(|op| op.is_write());
        let result = if is_write {
            self.node.propose(cmd).await
        } else {
            self.node.read(cmd).await
        };
        match result {
            Ok(response) => Ok(CallReply {
                response: Some(response),
                leader_id: self.node.id(),
                leader_addr: String::new(),
            }),
            Err(NodeError::NotLeader { leader }) => {
                let (leader_id, leader_addr) = leader.unwrap_or((0, String::new()));
                Ok(CallReply {
                    response: Some(Response::err(
                        ErrorCode::NotLeader,
                        format!("replica {} is not the leader", self.node.id()),
                    )),
                    leader_id,
                    leader_addr,
                })
            }
            Err(NodeError::Invalid(message)) => Ok(CallReply::invalid(message)),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn keep_alive(&self, req: KeepAliveRequest) -> Result<KeepAliveReply, RpcError> {
        let hold = Duration::from_millis(req.hold_ms).min(MAX_HOLD);
        let start = Instant::now();
        let deadline = start + hold;
        let max_events = (req.max_events as usize).clamp(1, 4096);
        loop {
            let ka = match self
                .node
                .keep_alive(req.session, req.seen, max_events)
                .await
            {
                Ok(ka) => ka,
                Err(NodeError::NotLeader { leader }) => {
                    let (leader_id, leader_addr) = leader.unwrap_or((0, String::new()));
                    return Ok(KeepAliveReply {
                        error: Response::err(ErrorCode::NotLeader, "not the leader").error,
                        leader_id,
                        leader_addr,
                        ..Default::default()
                    });
                }
                Err(e) => return Err(unavailable(e)),
            };
            if ka.lease_ms == 0 {
                return Ok(KeepAliveReply {
                    error: Response::err(
                        ErrorCode::SessionExpired,
                        format!("session {} does not exist (closed or expired)", req.session),
                    )
                    .error,
                    ..Default::default()
                });
            }
            let deadline = deadline.min(start + Duration::from_millis(ka.lease_ms / 2));
            let now = Instant::now();
            if !ka.events.is_empty() || ka.lost || now >= deadline {
                return Ok(KeepAliveReply {
                    error: None,
                    events: ka.events,
                    lost: ka.lost,
                    lease_ms: ka.lease_ms,
                    leader_id: self.node.id(),
                    leader_addr: String::new(),
                });
            }
            // Nothing yet: wait for the log to move and look (cheaply, without a read index)
            // for new events; leadership is confirmed again before anything is answered.
            let mut applied = self.node.applied();
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                let seen_applied = self.node.wait_applied(applied, deadline - now).await;
                if seen_applied == applied {
                    continue;
                }
                applied = seen_applied;
                match self.node.peek_events(req.session).await {
                    Ok(last) if last > req.seen => break,
                    Ok(_) => {}
                    Err(e) => return Err(unavailable(e)),
                }
            }
        }
    }
}

#[async_trait]
impl rpc::Service for HyperspaceService {
    async fn call(&self, peer: &PeerInfo, method: &str, payload: Bytes) -> Result<Bytes, RpcError> {
        // Raft traffic, membership and fault injection only from fellow replicas (or an
        // operator holding their certificate), never from clients.
        if matches!(method, "hs.raft" | "hs.member" | "hs.fault") && !peer.is_node(SERVER_NAME) {
            return Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!(
                    "{method} from {}: only hyperspace replicas may call it",
                    peer.addr
                ),
            ));
        }
        match method {
            "hs.call" => {
                let cmd: Command = decode(method, payload)?;
                Ok(self.call_command(cmd).await?.encode_to_vec().into())
            }
            "hs.keepalive" => {
                let req: KeepAliveRequest = decode(method, payload)?;
                Ok(self.keep_alive(req).await?.encode_to_vec().into())
            }
            "hs.raft" => {
                let batch: RaftBatch = decode(method, payload)?;
                let isolated = self.isolated.read().clone();
                let mut msgs = Vec::with_capacity(batch.messages.len());
                for bytes in batch.messages {
                    let mut m = Message::default();
                    m.merge_from_bytes(&bytes).map_err(|e| {
                        RpcError::service(
                            ErrorKind::InvalidInput,
                            format!("hs.raft: undecodable Raft message: {e}"),
                        )
                    })?;
                    if !isolated.contains(&m.from) {
                        msgs.push(m);
                    }
                }
                if !msgs.is_empty() {
                    let sender = Some((batch.sender_id, batch.sender_addr));
                    self.node.step(msgs, sender).await.map_err(unavailable)?;
                }
                Ok(Bytes::new())
            }
            "hs.status" => {
                let status = self.node.status().await.map_err(unavailable)?;
                Ok(StatusReply::from(status).encode_to_vec().into())
            }
            "hs.member" => {
                let req: MemberRequest = decode(method, payload)?;
                match self.node.change_member(req.add, req.id, req.addr).await {
                    Ok(()) => Ok(Bytes::new()),
                    Err(NodeError::NotLeader { leader }) => Err(RpcError::service(
                        ErrorKind::Unavailable,
                        format!(
                            "not the leader; leader: {}",
                            leader.map(|(_, a)| a).unwrap_or_else(|| "unknown".into())
                        ),
                    )),
                    Err(e) => Err(unavailable(e)),
                }
            }
            "hs.fault" => {
                let req: FaultRequest = decode(method, payload)?;
                info!(replica = self.node.id(), isolated_from = ?req.isolated_from, "fault injection");
                *self.isolated.write() = req.isolated_from.into_iter().collect();
                Ok(Bytes::new())
            }
            other => Err(RpcError::service(
                ErrorKind::NotFound,
                format!("hyperspace has no method {other:?}"),
            )),
        }
    }

    async fn call_stream(
        &self,
        _peer: &PeerInfo,
        method: &str,
        _payload: Bytes,
        _sink: &mut StreamSink,
    ) -> Result<(), RpcError> {
        Err(RpcError::service(
            ErrorKind::NotFound,
            format!("hyperspace has no streaming method {method:?}"),
        ))
    }
}

/// Limits of the Raft transport.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// Batches of messages queued per peer; past it, messages are dropped (Raft resends).
    pub queue_batches: usize,
    /// Deadline of one `hs.raft` call.
    pub call_deadline: Duration,
    /// A connection to a silent peer is dropped after this (a restarted peer is a new QUIC
    /// endpoint; the old connection would otherwise linger).
    pub idle_timeout: Duration,
}

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            queue_batches: 1024,
            call_deadline: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(3),
        }
    }
}

type PeerQueue = (String, mpsc::Sender<Vec<Message>>);

/// Sends Raft messages to peers over `rpc`, one queue and one task per peer.
pub struct RpcTransport {
    /// This replica's id and the address peers reach it at (sent with every batch).
    me: (u64, String),
    credentials: ClusterCredentials,
    options: TransportOptions,
    runtime: tokio::runtime::Handle,
    /// Per peer: its address and the queue its sender task drains.
    peers: Mutex<HashMap<u64, PeerQueue>>,
    isolated: Arc<RwLock<BTreeSet<u64>>>,
    /// Set once the node exists (the node needs the transport first).
    reports: Arc<Mutex<Option<DeliveryReports>>>,
}

impl RpcTransport {
    fn new(
        me: (u64, String),
        credentials: ClusterCredentials,
        options: TransportOptions,
        isolated: Arc<RwLock<BTreeSet<u64>>>,
    ) -> Self {
        Self {
            me,
            credentials,
            options,
            runtime: tokio::runtime::Handle::current(),
            peers: Mutex::new(HashMap::new()),
            isolated,
            reports: Arc::new(Mutex::new(None)),
        }
    }

    fn spawn_peer(&self, to: u64, addr: String) -> mpsc::Sender<Vec<Message>> {
        let (tx, mut rx) = mpsc::channel::<Vec<Message>>(self.options.queue_batches.max(1));
        let credentials = self.credentials.clone();
        let me = self.me.clone();
        let deadline = self.options.call_deadline;
        let idle = self.options.idle_timeout;
        let reports = self.reports.clone();
        self.runtime.spawn(async move {
            let mut client: Option<rpc::Client> = None;
            let mut backoff_until: Option<tokio::time::Instant> = None;
            while let Some(mut msgs) = rx.recv().await {
                while msgs.len() < 4096 {
                    match rx.try_recv() {
                        Ok(more) => msgs.extend(more),
                        Err(_) => break,
                    }
                }
                let snapshots: Vec<u64> = msgs
                    .iter()
                    .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                    .map(|m| m.to)
                    .collect();
                let ok = if backoff_until.is_some_and(|t| tokio::time::Instant::now() < t) {
                    false
                } else {
                    match send_batch(&mut client, &credentials, &me, &addr, &msgs, deadline, idle)
                        .await
                    {
                        Ok(()) => {
                            backoff_until = None;
                            true
                        }
                        Err(e) => {
                            debug!(to, addr = %addr, error = %e, "raft messages not delivered");
                            client = None;
                            backoff_until =
                                Some(tokio::time::Instant::now() + Duration::from_millis(200));
                            false
                        }
                    }
                };
                if let Some(reports) = reports.lock().as_ref() {
                    if !ok {
                        reports.unreachable(to);
                    }
                    for to in snapshots {
                        reports.snapshot_sent(to, ok);
                    }
                }
            }
        });
        tx
    }
}

async fn send_batch(
    client: &mut Option<rpc::Client>,
    credentials: &ClusterCredentials,
    me: &(u64, String),
    addr: &str,
    msgs: &[Message],
    deadline: Duration,
    idle: Duration,
) -> Result<(), String> {
    if client.is_none() {
        let sock: SocketAddr = addr
            .parse()
            .map_err(|e| format!("bad peer address {addr:?}: {e}"))?;
        let options = rpc::ClientOptions {
            idle_timeout: idle,
            connect_timeout: deadline,
            ..Default::default()
        };
        let config = credentials.client_config(idle).map_err(|e| e.to_string())?;
        let c = tokio::time::timeout(
            deadline,
            rpc::Client::connect_with(sock, SERVER_NAME, config, options),
        )
        .await
        .map_err(|_| format!("connect to {addr} timed out"))?
        .map_err(|e| e.to_string())?;
        *client = Some(c);
    }
    let Some(c) = client.as_ref() else {
        return Err("no connection".into());
    };
    let mut batch = RaftBatch {
        sender_id: me.0,
        sender_addr: me.1.clone(),
        ..Default::default()
    };
    for m in msgs {
        batch
            .messages
            .push(m.write_to_bytes().map_err(|e| e.to_string())?);
    }
    c.call("hs.raft", batch.encode_to_vec().into(), deadline)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl Transport for RpcTransport {
    fn send(&self, to: u64, addr: &str, msgs: Vec<Message>) {
        if self.isolated.read().contains(&to) {
            return;
        }
        let tx = {
            let mut peers = self.peers.lock();
            match peers.get(&to) {
                Some((a, tx)) if a == addr => tx.clone(),
                _ => {
                    let tx = self.spawn_peer(to, addr.to_string());
                    peers.insert(to, (addr.to_string(), tx.clone()));
                    tx
                }
            }
        };
        if tx.try_send(msgs).is_err()
            && let Some(reports) = self.reports.lock().as_ref()
        {
            reports.unreachable(to);
        }
    }
}

/// How to run a replica as a server.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    pub node: NodeConfig,
    /// Address to serve on (clients and peers).
    pub listen: SocketAddr,
    /// The cluster data directory holding `tls/` (see `ht init`).
    pub credentials_dir: PathBuf,
    pub server: ServerOptions,
    pub transport: TransportOptions,
}

/// A running replica: the Raft node, its RPC server and transport.
pub struct Replica {
    node: Node,
    server: Server,
}

impl Replica {
    /// Starts a replica serving on `config.listen`.
    pub async fn start(config: ReplicaConfig) -> Result<Replica, ReplicaError> {
        let credentials = ClusterCredentials::load(&config.credentials_dir, SERVER_NAME)
            .map_err(|e| ReplicaError::Setup(format!("credentials: {e}")))?;
        let isolated = Arc::new(RwLock::new(BTreeSet::new()));
        let my_addr = config
            .node
            .members
            .get(&config.node.id)
            .cloned()
            .unwrap_or_else(|| config.listen.to_string());
        let transport = Arc::new(RpcTransport::new(
            (config.node.id, my_addr),
            credentials.clone(),
            config.transport.clone(),
            isolated.clone(),
        ));
        let node = Node::start(config.node.clone(), transport.clone())?;
        *transport.reports.lock() = Some(node.delivery_reports());
        let service = HyperspaceService {
            node: node.clone(),
            isolated,
        };
        let server = Server::bind_with(config.listen, &credentials, service, config.server.clone())
            .map_err(|e| ReplicaError::Setup(format!("listen on {}: {e}", config.listen)))?;
        info!(replica = node.id(), addr = %server.local_addr(), "hyperspace replica serving");
        Ok(Replica { node, server })
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops serving and stops the node.
    pub async fn shutdown(self) {
        self.server.shutdown(Duration::from_secs(1)).await;
        self.node.stop().await;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("hyperspace replica setup: {0}")]
    Setup(String),
    #[error(transparent)]
    Node(#[from] NodeError),
}
