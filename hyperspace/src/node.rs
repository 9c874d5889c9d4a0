//! One Hyperspace replica: drives a `raft::RawNode` over [`DiskStorage`] and applies committed
//! commands to the [`StateMachine`].
//!
//! The driver is one event loop on its own thread (it does the log's fsyncs, which must not block
//! the RPC runtime) over a closed set of inputs: client proposals and reads, keep-alives, Raft
//! messages from peers, membership changes, status requests, and a tick. Each turn follows
//! raft-rs's documented order: step/tick, then `ready`: send the leader's messages, install a
//! snapshot, apply committed entries, persist entries and hard state (one fsync), send the
//! messages that needed them persisted, `advance`, apply what became committed, `advance_apply`.
//!
//! Leases are leader-local, as in Chubby: keep-alives are not logged. A new leader gives every
//! session a fresh lease, and the leader alone proposes `ExpireSession` when one runs out.
//! Reads and keep-alives are answered only after a read index confirmed leadership with a quorum
//! (`ReadOnlyOption::Safe`), so a deposed leader cut off from the others answers nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message as _;
use protobuf::Message as _;
use raft::prelude::{ConfChange, ConfChangeType, ConfState, Entry, EntryType, Message, Snapshot};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use crate::command::{AckEvents, Command, ErrorCode, Event, ExpireSession, Op, Response};
use crate::state::{Limits, StateMachine};
use crate::storage::{DiskStorage, StorageError, StorageOptions};

/// How a replica runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This replica's Raft id (non-zero).
    pub id: u64,
    /// Where its log, snapshots and member list live.
    pub dir: PathBuf,
    /// The founding members (id -> address), this one included. Used only on first boot; a
    /// replica that joins an existing group starts with none (`join`).
    pub members: BTreeMap<u64, String>,
    /// Start with no configuration and wait to be added by the leader (membership change).
    pub join: bool,
    /// One Raft tick.
    pub tick: Duration,
    /// Ticks without a leader before an election (randomised up to twice this).
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    /// Take a snapshot and compact the log once this many entries were applied since the last.
    pub snapshot_entries: u64,
    /// A proposal or read not answered within this is failed with `Timeout` (the client retries).
    pub request_timeout: Duration,
    /// Inputs queued for the event loop; senders wait past it.
    pub input_queue: usize,
    /// Proposals and reads waiting for their answer; more are refused as `Busy`.
    pub max_pending: usize,
    pub storage: StorageOptions,
    pub limits: Limits,
}

impl NodeConfig {
    pub fn new(id: u64, dir: PathBuf, members: BTreeMap<u64, String>) -> Self {
        Self {
            id,
            dir,
            members,
            join: false,
            tick: Duration::from_millis(100),
            election_ticks: 10,
            heartbeat_ticks: 2,
            snapshot_entries: 10_000,
            request_timeout: Duration::from_secs(3),
            input_queue: 4096,
            max_pending: 16_384,
            storage: StorageOptions::default(),
            limits: Limits::default(),
        }
    }
}

impl NodeConfig {
    /// A group of one replica in `dir` (the embedded database's mode): it elects itself at once
    /// and commits on its own fsync.
    pub fn single(dir: PathBuf) -> Self {
        let mut c = Self::new(1, dir, BTreeMap::from([(1, String::new())]));
        c.tick = Duration::from_millis(20);
        c
    }
}

/// The transport of a single replica: there is nobody to send to.
pub struct NoPeers;

impl Transport for NoPeers {
    fn send(&self, _to: u64, _addr: &str, _msgs: Vec<Message>) {}
}

/// Why a request was not answered by the state machine.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("not the leader (leader: {})", leader.as_ref().map(|(id, a)| format!("{id} at {a}")).unwrap_or_else(|| "unknown".into()))]
    NotLeader { leader: Option<(u64, String)> },
    #[error("no answer within {0:?} (no quorum, or leadership changing)")]
    Timeout(Duration),
    #[error("too many requests pending")]
    Busy,
    #[error("the replica is stopped")]
    Stopped,
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("snapshot: {0}")]
    Snapshot(String),
}

/// Where the driver sends Raft messages. Sending never blocks the driver: an implementation
/// queues (bounded) and drops what does not fit; Raft retransmits.
pub trait Transport: Send + Sync + 'static {
    /// Sends `msgs`, all addressed to `to` at `addr`.
    fn send(&self, to: u64, addr: &str, msgs: Vec<Message>);
}

/// A keep-alive's answer.
#[derive(Debug, Clone)]
pub struct KeepAlive {
    pub events: Vec<Event>,
    pub lost: bool,
    pub lease_ms: u64,
}

/// What a replica knows of the group.
#[derive(Debug, Clone, Default)]
pub struct NodeStatus {
    pub id: u64,
    pub role: String,
    pub leader: u64,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub last_index: u64,
    pub snapshot_index: u64,
    pub members: BTreeMap<u64, String>,
    pub sessions: u64,
    /// Snapshots received from a leader and installed since this replica started.
    pub snapshots_installed: u64,
}

type Reply<T> = oneshot::Sender<Result<T, NodeError>>;

enum Input {
    Propose(Command, Reply<Response>),
    Read(Command, Reply<Response>),
    KeepAlive {
        session: u64,
        seen: u64,
        max_events: usize,
        reply: Reply<KeepAlive>,
    },
    /// Raft messages, and the sender's id and address (learnt if unknown).
    Raft(Vec<Message>, Option<(u64, String)>),
    Member {
        add: bool,
        id: u64,
        addr: String,
        reply: Reply<()>,
    },
    Status(oneshot::Sender<NodeStatus>),
    /// The highest event seq of a session, from local state, without confirming leadership.
    PeekEvents(u64, oneshot::Sender<u64>),
    Unreachable(u64),
    SnapshotSent(u64, bool),
    Stop(oneshot::Sender<()>),
}

/// A handle on a running replica; clone freely.
#[derive(Clone)]
pub struct Node {
    id: u64,
    tx: mpsc::Sender<Input>,
    applied: watch::Receiver<u64>,
    leader: Arc<Mutex<Option<(u64, String)>>>,
}

impl Node {
    /// Opens the replica's storage, restores its state and starts its event loop thread.
    pub fn start(config: NodeConfig, transport: Arc<dyn Transport>) -> Result<Node, NodeError> {
        if config.id == 0 {
            return Err(NodeError::Invalid("replica id must be non-zero".into()));
        }
        std::fs::create_dir_all(&config.dir).map_err(|source| StorageError::Io {
            path: config.dir.clone(),
            source,
        })?;
        let (tx, rx) = mpsc::channel(config.input_queue.max(1));
        let (applied_tx, applied_rx) = watch::channel(0);
        let leader = Arc::new(Mutex::new(None));
        let mut driver = Driver::open(config, transport, tx.clone(), applied_tx, leader.clone())?;
        let id = driver.id;
        std::thread::Builder::new()
            .name(format!("hyperspace-{id}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("a current-thread runtime for the Raft loop");
                rt.block_on(driver.run(rx));
            })
            .map_err(|e| NodeError::Invalid(format!("cannot start the Raft thread: {e}")))?;
        Ok(Node {
            id,
            tx,
            applied: applied_rx,
            leader,
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The leader as last seen by this replica.
    pub fn leader(&self) -> Option<(u64, String)> {
        self.leader.lock().clone()
    }

    /// Proposes a write command and waits until it is committed and applied.
    pub async fn propose(&self, cmd: Command) -> Result<Response, NodeError> {
        self.request(|reply| Input::Propose(cmd, reply)).await
    }

    /// Answers a read-only command linearizably (after a read index).
    pub async fn read(&self, cmd: Command) -> Result<Response, NodeError> {
        self.request(|reply| Input::Read(cmd, reply)).await
    }

    /// Renews `session`'s lease (leader only, after confirming leadership) and returns its
    /// events after `seen`; events up to `seen` are acknowledged.
    pub async fn keep_alive(
        &self,
        session: u64,
        seen: u64,
        max_events: usize,
    ) -> Result<KeepAlive, NodeError> {
        self.request(|reply| Input::KeepAlive {
            session,
            seen,
            max_events,
            reply,
        })
        .await
    }

    /// Raft messages from a peer, with its id and address when it said them.
    pub async fn step(
        &self,
        msgs: Vec<Message>,
        sender: Option<(u64, String)>,
    ) -> Result<(), NodeError> {
        self.send(Input::Raft(msgs, sender)).await
    }

    /// Adds a replica (`add`) or removes one, through a Raft configuration change; returns when
    /// the change is applied.
    pub async fn change_member(&self, add: bool, id: u64, addr: String) -> Result<(), NodeError> {
        self.request(|reply| Input::Member {
            add,
            id,
            addr,
            reply,
        })
        .await
    }

    pub async fn status(&self) -> Result<NodeStatus, NodeError> {
        self.ask(Input::Status).await
    }

    /// The highest event seq queued for `session` in this replica's state, without a read
    /// index: only a hint for whether a keep-alive has something to deliver.
    pub async fn peek_events(&self, session: u64) -> Result<u64, NodeError> {
        self.ask(|reply| Input::PeekEvents(session, reply)).await
    }

    /// Waits until the applied index changes from `seen` (or `timeout` passes); returns the
    /// applied index.
    pub async fn wait_applied(&self, seen: u64, timeout: Duration) -> u64 {
        let mut rx = self.applied.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let closed = matches!(
            tokio::time::timeout_at(deadline, rx.wait_for(|&a| a != seen)).await,
            Ok(Err(_))
        );
        if closed {
            // The replica stopped: nothing will change. Waiting out the timeout keeps callers
            // that loop until a deadline from spinning.
            tokio::time::sleep_until(deadline).await;
        }
        *rx.borrow()
    }

    pub fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Stops the event loop (pending requests fail with `Stopped`).
    pub async fn stop(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Input::Stop(reply)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Sends an input carrying a reply channel and waits for the answer.
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Input) -> Result<T, NodeError> {
        let (reply, rx) = oneshot::channel();
        self.send(make(reply)).await?;
        rx.await.map_err(|_| NodeError::Stopped)
    }

    /// As [`Node::ask`], for inputs answered with a `Result`.
    async fn request<T>(&self, make: impl FnOnce(Reply<T>) -> Input) -> Result<T, NodeError> {
        self.ask(make).await?
    }

    async fn send(&self, input: Input) -> Result<(), NodeError> {
        self.tx.send(input).await.map_err(|_| NodeError::Stopped)
    }
}

/// Feedback from a transport to the driver about delivery.
#[derive(Clone)]
pub struct DeliveryReports {
    tx: mpsc::Sender<Input>,
}

impl DeliveryReports {
    pub fn unreachable(&self, to: u64) {
        let _ = self.tx.try_send(Input::Unreachable(to));
    }
    pub fn snapshot_sent(&self, to: u64, ok: bool) {
        let _ = self.tx.try_send(Input::SnapshotSent(to, ok));
    }
}

impl Node {
    /// Where a transport reports unreachable peers and snapshot delivery.
    pub fn delivery_reports(&self) -> DeliveryReports {
        DeliveryReports {
            tx: self.tx.clone(),
        }
    }
}

/// The snapshot data: the state machine plus the member addresses (which a replica restored
/// from a snapshot could not learn from log entries the snapshot replaced).
#[derive(Clone, PartialEq, prost::Message)]
struct NodeSnapshot {
    #[prost(bytes = "vec", tag = "1")]
    state: Vec<u8>,
    #[prost(btree_map = "uint64, string", tag = "2")]
    members: BTreeMap<u64, String>,
}

struct Pending<T> {
    reply: Reply<T>,
    deadline: Instant,
    /// The term it was proposed in: an entry answers it only if it has this term (proposal
    /// numbers restart with the process, so an older incarnation's entry may carry the same).
    term: u64,
}

enum ReadKind {
    Query(Command, Reply<Response>),
    KeepAlive {
        session: u64,
        seen: u64,
        max_events: usize,
        reply: Reply<KeepAlive>,
    },
}

struct Driver {
    id: u64,
    config: NodeConfig,
    raw: RawNode<DiskStorage>,
    storage: DiskStorage,
    state: StateMachine,
    members: BTreeMap<u64, String>,
    transport: Arc<dyn Transport>,
    applied: u64,
    applied_tx: watch::Sender<u64>,
    leader: Arc<Mutex<Option<(u64, String)>>>,
    role: StateRole,
    next_ctx: u64,
    proposals: HashMap<u64, Pending<Response>>,
    member_changes: HashMap<u64, Pending<()>>,
    /// Reads waiting for their read index to be confirmed.
    reads: HashMap<u64, (ReadKind, Instant)>,
    /// Reads whose index is known, waiting for `applied` to reach it.
    ready_reads: VecDeque<(u64, ReadKind)>,
    /// Reads asked before this leader committed an entry of its term, which raft-rs drops
    /// without a word: asked again once it has.
    deferred_reads: Vec<u64>,
    /// Leader only: when each session's lease ends.
    leases: HashMap<u64, Instant>,
    /// Leader only: sessions with an `ExpireSession` in flight, and when it may be re-proposed.
    expiring: HashMap<u64, Instant>,
    /// Leader only: the highest `AckEvents` proposed per session (one proposal per progress).
    acks_proposed: HashMap<u64, u64>,
    /// Compact at the end of this round whatever the log's length (a replica was added).
    compact_now: bool,
    stopping: Option<oneshot::Sender<()>>,
    snapshots_installed: u64,
    /// Held (flock) while the replica runs: one process per replica directory.
    _dir_lock: std::fs::File,
}

fn ctx_bytes(node: u64, n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&node.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    v
}

fn parse_ctx(ctx: &[u8]) -> Option<(u64, u64)> {
    if ctx.len() != 16 {
        return None;
    }
    let node = u64::from_le_bytes(ctx[..8].try_into().ok()?);
    let n = u64::from_le_bytes(ctx[8..].try_into().ok()?);
    Some((node, n))
}

/// Routes raft-rs's slog records to `tracing` (raft is chatty at info: that goes to debug).
struct TracingDrain {
    id: u64,
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;
    fn log(&self, record: &slog::Record, _: &slog::OwnedKVList) -> Result<(), slog::Never> {
        let id = self.id;
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", replica = id, "{}", record.msg())
            }
            slog::Level::Warning => {
                tracing::warn!(target: "raft", replica = id, "{}", record.msg())
            }
            slog::Level::Info => tracing::debug!(target: "raft", replica = id, "{}", record.msg()),
            _ => tracing::trace!(target: "raft", replica = id, "{}", record.msg()),
        }
        Ok(())
    }
}

const MEMBERS_FILE: &str = "members";
const LOCK_FILE: &str = "LOCK";

/// Takes an exclusive advisory lock on `<dir>/LOCK`, so that two processes never drive one
/// replica's log.
fn lock_dir(dir: &std::path::Path) -> Result<std::fs::File, NodeError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StorageError::Io {
            path: path.clone(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(NodeError::Invalid(format!(
            "{} is in use by another process (hyperspace replica already running)",
            dir.display()
        )));
    }
    Ok(file)
}

/// Reads the member list file (`id addr` per line), written when membership changes.
fn load_members(dir: &std::path::Path) -> Option<BTreeMap<u64, String>> {
    let text = std::fs::read_to_string(dir.join(MEMBERS_FILE)).ok()?;
    let mut members = BTreeMap::new();
    for line in text.lines() {
        let (id, addr) = line.split_once(' ')?;
        members.insert(id.parse().ok()?, addr.to_string());
    }
    Some(members)
}

fn save_members(dir: &std::path::Path, members: &BTreeMap<u64, String>) -> std::io::Result<()> {
    let text: String = members
        .iter()
        .map(|(id, addr)| format!("{id} {addr}\n"))
        .collect();
    let tmp = dir.join(format!("{MEMBERS_FILE}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(MEMBERS_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

impl Driver {
    fn open(
        config: NodeConfig,
        transport: Arc<dyn Transport>,
        tx: mpsc::Sender<Input>,
        applied_tx: watch::Sender<u64>,
        leader: Arc<Mutex<Option<(u64, String)>>>,
    ) -> Result<Driver, NodeError> {
        let _ = tx;
        let dir_lock = lock_dir(&config.dir)?;
        let storage = DiskStorage::open(&config.dir.join("raft"), config.storage.clone())?;
        // The address book: the saved member list, else the addresses given at start (a
        // joining replica needs them to answer the leader before it learns the configuration).
        let mut members = load_members(&config.dir).unwrap_or_else(|| config.members.clone());
        if storage.is_empty() && !config.join {
            if !config.members.contains_key(&config.id) {
                return Err(NodeError::Invalid(format!(
                    "replica {} is not among the founding members {:?}",
                    config.id,
                    config.members.keys().collect::<Vec<_>>()
                )));
            }
            let cs = ConfState {
                voters: config.members.keys().copied().collect(),
                ..Default::default()
            };
            storage.initialize(cs)?;
            members = config.members.clone();
            save_members(&config.dir, &members).map_err(|source| StorageError::Io {
                path: config.dir.join(MEMBERS_FILE),
                source,
            })?;
        }
        let snapshot = storage.snapshot_now();
        let (state, applied) = if snapshot.get_metadata().index > 0 {
            let snap = NodeSnapshot::decode(&snapshot.data[..])
                .map_err(|e| NodeError::Snapshot(format!("undecodable snapshot data: {e}")))?;
            let state = StateMachine::restore(&snap.state, config.limits.clone())
                .map_err(|e| NodeError::Snapshot(e.to_string()))?;
            for (id, addr) in snap.members {
                members.entry(id).or_insert(addr);
            }
            (state, snapshot.get_metadata().index)
        } else {
            (StateMachine::new(config.limits.clone()), 0)
        };
        let raft_config = raft::Config {
            id: config.id,
            election_tick: config.election_ticks,
            heartbeat_tick: config.heartbeat_ticks,
            applied,
            max_size_per_msg: 1024 * 1024,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            read_only_option: ReadOnlyOption::Safe,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(TracingDrain { id: config.id }, slog::o!());
        let mut raw = RawNode::new(&raft_config, storage.clone(), &logger)?;
        // A group of one need not wait out an election timeout (the embedded database opens
        // with no delay).
        let voters = raw.raft.prs().conf().voters().ids();
        if voters.len() == 1 && voters.contains(config.id) {
            raw.campaign()?;
        }
        let _ = applied_tx.send(applied);
        info!(replica = config.id, applied, members = ?members, "hyperspace replica opened");
        Ok(Driver {
            id: config.id,
            raw,
            storage,
            state,
            members,
            transport,
            applied,
            applied_tx,
            leader,
            role: StateRole::Follower,
            next_ctx: 1,
            proposals: HashMap::new(),
            member_changes: HashMap::new(),
            reads: HashMap::new(),
            ready_reads: VecDeque::new(),
            deferred_reads: Vec::new(),
            leases: HashMap::new(),
            expiring: HashMap::new(),
            acks_proposed: HashMap::new(),
            compact_now: false,
            stopping: None,
            snapshots_installed: 0,
            _dir_lock: dir_lock,
            config,
        })
    }

    async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                input = rx.recv() => {
                    let Some(input) = input else { break };
                    self.handle(input);
                    // Take whatever else is queued before the (expensive) ready round, so that
                    // one fsync covers many proposals.
                    let mut n = 0;
                    while n < 1024 {
                        match rx.try_recv() {
                            Ok(input) => self.handle(input),
                            Err(_) => break,
                        }
                        n += 1;
                    }
                }
                _ = tick.tick() => {
                    self.raw.tick();
                    self.on_tick();
                }
            }
            if let Err(e) = self.on_ready() {
                // A storage failure leaves the replica unable to keep its promises: stop.
                tracing::error!(replica = self.id, error = %e, "hyperspace replica stops");
                break;
            }
            if let Some(done) = self.stopping.take() {
                let _ = done.send(());
                break;
            }
        }
        self.fail_all(|| NodeError::Stopped);
    }

    fn handle(&mut self, input: Input) {
        match input {
            Input::Propose(cmd, reply) => self.propose(cmd, reply),
            Input::Read(cmd, reply) => self.start_read(ReadKind::Query(cmd, reply)),
            Input::KeepAlive {
                session,
                seen,
                max_events,
                reply,
            } => self.start_read(ReadKind::KeepAlive {
                session,
                seen,
                max_events,
                reply,
            }),
            Input::Raft(msgs, sender) => {
                if let Some((id, addr)) = sender
                    && id != 0
                    && !addr.is_empty()
                {
                    self.members.entry(id).or_insert(addr);
                }
                for m in msgs {
                    if let Err(e) = self.raw.step(m) {
                        debug!(replica = self.id, error = %e, "raft step");
                    }
                }
            }
            Input::Member {
                add,
                id,
                addr,
                reply,
            } => self.change_member(add, id, addr, reply),
            Input::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Input::PeekEvents(session, reply) => {
                let _ = reply.send(self.state.last_event_seq(session));
            }
            Input::Unreachable(to) => self.raw.report_unreachable(to),
            Input::SnapshotSent(to, ok) => self.raw.report_snapshot(
                to,
                if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                },
            ),
            Input::Stop(done) => self.stopping = Some(done),
        }
    }

    fn not_leader(&self) -> NodeError {
        NodeError::NotLeader {
            leader: self.leader.lock().clone(),
        }
    }

    fn propose(&mut self, cmd: Command, reply: Reply<Response>) {
        if self.role != StateRole::Leader {
            let _ = reply.send(Err(self.not_leader()));
            return;
        }
        match &cmd.op {
            Some(op) if op.is_write() => {}
            Some(op) => {
                let _ = reply.send(Err(NodeError::Invalid(format!(
                    "{} is a read; it is not proposed",
                    op.name()
                ))));
                return;
            }
            None => {
                let _ = reply.send(Err(NodeError::Invalid(
                    "command without an operation".into(),
                )));
                return;
            }
        }
        if self.proposals.len() >= self.config.max_pending {
            let _ = reply.send(Err(NodeError::Busy));
            return;
        }
        let n = self.next_ctx;
        self.next_ctx += 1;
        let term = self.raw.raft.term;
        match self.raw.propose(ctx_bytes(self.id, n), cmd.encode_to_vec()) {
            Ok(()) => {
                self.proposals.insert(
                    n,
                    Pending {
                        reply,
                        deadline: Instant::now() + self.config.request_timeout,
                        term,
                    },
                );
            }
            Err(raft::Error::ProposalDropped) => {
                let _ = reply.send(Err(self.not_leader()));
            }
            Err(e) => {
                let _ = reply.send(Err(NodeError::Raft(e)));
            }
        }
    }

    /// Proposes a command of the leader's own (expiry, event acknowledgement); nobody waits.
    fn propose_internal(&mut self, op: Op) {
        let cmd = Command {
            session: 0,
            seq: 0,
            first_incomplete: 0,
            op: Some(op),
        };
        if let Err(e) = self.raw.propose(Vec::new(), cmd.encode_to_vec()) {
            debug!(replica = self.id, error = %e, "internal proposal dropped");
        }
    }

    fn start_read(&mut self, kind: ReadKind) {
        if self.role != StateRole::Leader {
            let err = self.not_leader();
            fail_read(kind, err);
            return;
        }
        if let ReadKind::Query(cmd, _) = &kind
            && cmd.op.as_ref().is_none_or(|op| op.is_write())
        {
            fail_read(
                kind,
                NodeError::Invalid("only read-only operations are served as reads".into()),
            );
            return;
        }
        if self.reads.len() + self.ready_reads.len() >= self.config.max_pending {
            fail_read(kind, NodeError::Busy);
            return;
        }
        let n = self.next_ctx;
        self.next_ctx += 1;
        if !self.raw.raft.commit_to_current_term() {
            self.deferred_reads.push(n);
        }
        self.raw.read_index(ctx_bytes(self.id, n));
        self.reads
            .insert(n, (kind, Instant::now() + self.config.request_timeout));
    }

    fn change_member(&mut self, add: bool, id: u64, addr: String, reply: Reply<()>) {
        if self.role != StateRole::Leader {
            let _ = reply.send(Err(self.not_leader()));
            return;
        }
        if id == 0 {
            let _ = reply.send(Err(NodeError::Invalid(
                "replica id must be non-zero".into(),
            )));
            return;
        }
        let mut cc = ConfChange {
            node_id: id,
            ..Default::default()
        };
        cc.set_change_type(if add {
            ConfChangeType::AddNode
        } else {
            ConfChangeType::RemoveNode
        });
        cc.context = Bytes::from(addr.into_bytes());
        let n = self.next_ctx;
        self.next_ctx += 1;
        let term = self.raw.raft.term;
        match self.raw.propose_conf_change(ctx_bytes(self.id, n), cc) {
            Ok(()) => {
                self.member_changes.insert(
                    n,
                    Pending {
                        reply,
                        deadline: Instant::now() + self.config.request_timeout * 4,
                        term,
                    },
                );
            }
            Err(e) => {
                let _ = reply.send(Err(NodeError::Raft(e)));
            }
        }
    }

    fn status(&self) -> NodeStatus {
        let st = self.raw.status();
        NodeStatus {
            id: self.id,
            role: format!("{:?}", st.ss.raft_state),
            leader: st.ss.leader_id,
            term: st.hs.term,
            commit: st.hs.commit,
            applied: self.applied,
            last_index: self.raw.raft.raft_log.last_index(),
            snapshot_index: self.storage.snapshot_index(),
            // The configuration's voters (the address book may know more).
            members: {
                let voters = self.raw.raft.prs().conf().voters().ids();
                self.members
                    .iter()
                    .filter(|(id, _)| voters.contains(**id))
                    .map(|(id, a)| (*id, a.clone()))
                    .collect()
            },
            sessions: self.state.session_count() as u64,
            snapshots_installed: self.snapshots_installed,
        }
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        // Requests that will not be answered in time (lost leadership, no quorum).
        let timeout = self.config.request_timeout;
        for (_, p) in self.proposals.extract_if(|_, p| p.deadline <= now) {
            let _ = p.reply.send(Err(NodeError::Timeout(timeout)));
        }
        for (_, p) in self.member_changes.extract_if(|_, p| p.deadline <= now) {
            let _ = p.reply.send(Err(NodeError::Timeout(timeout * 4)));
        }
        for (_, (kind, _)) in self.reads.extract_if(|_, (_, d)| *d <= now) {
            fail_read(kind, NodeError::Timeout(timeout));
        }
        let reads = &self.reads;
        self.deferred_reads.retain(|n| reads.contains_key(n));
        // Lease expiry, leader only.
        if self.role == StateRole::Leader {
            let due: Vec<u64> = self
                .leases
                .iter()
                .filter(|(s, d)| {
                    **d <= now && self.expiring.get(*s).is_none_or(|retry| *retry <= now)
                })
                .map(|(s, _)| *s)
                .collect();
            for session in due {
                info!(replica = self.id, session, "session lease expired");
                self.expiring.insert(session, now + timeout);
                self.propose_internal(Op::ExpireSession(ExpireSession { session }));
            }
        }
    }

    fn update_role(&mut self) {
        let ss = self.raw.raft.state;
        let leader_id = self.raw.raft.leader_id;
        let leader = (leader_id != 0).then(|| {
            (
                leader_id,
                self.members.get(&leader_id).cloned().unwrap_or_default(),
            )
        });
        *self.leader.lock() = leader;
        if ss == self.role {
            return;
        }
        info!(replica = self.id, role = ?ss, term = self.raw.raft.term, "role change");
        let was_leader = self.role == StateRole::Leader;
        self.role = ss;
        if ss == StateRole::Leader {
            // Chubby's grace: every session gets a full lease from the new leader.
            let now = Instant::now();
            self.leases = self
                .state
                .sessions()
                .into_iter()
                .map(|(id, lease_ms)| (id, now + Duration::from_millis(lease_ms)))
                .collect();
            self.expiring.clear();
            self.acks_proposed.clear();
        } else if was_leader {
            self.leases.clear();
            self.expiring.clear();
            self.acks_proposed.clear();
            self.deferred_reads.clear();
            // What was proposed may still commit under the next leader; the client retries with
            // the same seq and gets the first answer.
            let err = self.not_leader();
            for (_, p) in self.proposals.drain() {
                let _ = p.reply.send(Err(clone_err(&err)));
            }
            for (_, (kind, _)) in self.reads.drain() {
                fail_read(kind, clone_err(&err));
            }
            for (_, kind) in self.ready_reads.drain(..) {
                fail_read(kind, clone_err(&err));
            }
            for (_, p) in self.member_changes.drain() {
                let _ = p.reply.send(Err(clone_err(&err)));
            }
        }
    }

    fn send_messages(&self, msgs: Vec<Message>) {
        let mut by_peer: BTreeMap<u64, Vec<Message>> = BTreeMap::new();
        for m in msgs {
            by_peer.entry(m.to).or_default().push(m);
        }
        for (to, msgs) in by_peer {
            match self.members.get(&to) {
                Some(addr) => self.transport.send(to, addr, msgs),
                None => debug!(
                    replica = self.id,
                    to, "no address for peer; message dropped"
                ),
            }
        }
    }

    fn on_ready(&mut self) -> Result<(), NodeError> {
        self.update_role();
        self.reissue_deferred_reads();
        if !self.raw.has_ready() {
            self.serve_reads();
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if !ready.messages().is_empty() {
            self.send_messages(ready.take_messages());
        }
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            self.install_snapshot(snapshot)?;
        }
        for rs in ready.take_read_states() {
            self.on_read_state(rs.index, &rs.request_ctx);
        }
        let committed = ready.take_committed_entries();
        self.apply_entries(committed)?;
        if !ready.entries().is_empty() || ready.hs().is_some() {
            self.storage.persist(ready.entries(), ready.hs())?;
        }
        if !ready.persisted_messages().is_empty() {
            self.send_messages(ready.take_persisted_messages());
        }
        let mut light = self.raw.advance(ready);
        if !light.messages().is_empty() {
            self.send_messages(light.take_messages());
        }
        let committed = light.take_committed_entries();
        self.apply_entries(committed)?;
        self.raw.advance_apply();
        self.update_role();
        self.serve_reads();
        self.maybe_compact()?;
        Ok(())
    }

    /// Asks again for the read indexes raft-rs dropped because they came before this leader
    /// had committed in its term.
    fn reissue_deferred_reads(&mut self) {
        if self.deferred_reads.is_empty()
            || self.role != StateRole::Leader
            || !self.raw.raft.commit_to_current_term()
        {
            return;
        }
        for n in std::mem::take(&mut self.deferred_reads) {
            if self.reads.contains_key(&n) {
                self.raw.read_index(ctx_bytes(self.id, n));
            }
        }
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), NodeError> {
        let index = snapshot.get_metadata().index;
        let snap = NodeSnapshot::decode(&snapshot.data[..])
            .map_err(|e| NodeError::Snapshot(format!("undecodable snapshot data: {e}")))?;
        let state = StateMachine::restore(&snap.state, self.config.limits.clone())
            .map_err(|e| NodeError::Snapshot(e.to_string()))?;
        self.storage.apply_snapshot(snapshot)?;
        self.state = state;
        self.members = snap.members;
        save_members(&self.config.dir, &self.members).map_err(|source| StorageError::Io {
            path: self.config.dir.join(MEMBERS_FILE),
            source,
        })?;
        self.set_applied(index);
        self.snapshots_installed += 1;
        info!(
            replica = self.id,
            index, "installed a snapshot from the leader"
        );
        Ok(())
    }

    fn set_applied(&mut self, index: u64) {
        self.applied = index;
        let _ = self.applied_tx.send(index);
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), NodeError> {
        let Some(last) = entries.last().map(|e| e.index) else {
            return Ok(());
        };
        for entry in entries {
            if entry.index <= self.applied {
                continue;
            }
            match entry.get_entry_type() {
                EntryType::EntryNormal => self.apply_normal(&entry),
                EntryType::EntryConfChange => self.apply_conf_change(&entry)?,
                EntryType::EntryConfChangeV2 => {
                    warn!(
                        replica = self.id,
                        index = entry.index,
                        "ConfChangeV2 is not used; ignored"
                    )
                }
            }
        }
        self.set_applied(last.max(self.applied));
        Ok(())
    }

    fn apply_normal(&mut self, entry: &Entry) {
        // An empty entry is what a new leader appends; nothing to apply.
        if entry.data.is_empty() {
            return;
        }
        let response = match Command::decode(&entry.data[..]) {
            Ok(cmd) => {
                let response = self.state.apply(&cmd);
                if self.role == StateRole::Leader {
                    self.track_leases(&cmd, &response);
                }
                response
            }
            Err(e) => Response::err(
                ErrorCode::InvalidArgument,
                format!("undecodable command at log index {}: {e}", entry.index),
            ),
        };
        if let Some((node, n)) = parse_ctx(&entry.context)
            && node == self.id
            && self.proposals.get(&n).is_some_and(|p| p.term == entry.term)
            && let Some(p) = self.proposals.remove(&n)
        {
            let _ = p.reply.send(Ok(response));
        }
    }

    /// Keeps the leader's lease table in step with sessions created and ended by the log.
    fn track_leases(&mut self, cmd: &Command, response: &Response) {
        match &cmd.op {
            Some(Op::CreateSession(cs)) => {
                if let Some(crate::command::Reply::Session(id)) = &response.reply {
                    self.leases
                        .entry(*id)
                        .or_insert_with(|| Instant::now() + Duration::from_millis(cs.lease_ms));
                }
            }
            Some(Op::CloseSession(_)) => {
                self.leases.remove(&cmd.session);
                self.expiring.remove(&cmd.session);
                self.acks_proposed.remove(&cmd.session);
            }
            Some(Op::ExpireSession(e)) => {
                self.leases.remove(&e.session);
                self.expiring.remove(&e.session);
                self.acks_proposed.remove(&e.session);
            }
            _ => {}
        }
    }

    fn apply_conf_change(&mut self, entry: &Entry) -> Result<(), NodeError> {
        let mut cc = ConfChange::default();
        cc.merge_from_bytes(&entry.data)
            .map_err(|e| NodeError::Snapshot(format!("undecodable conf change: {e}")))?;
        let cs = match self.raw.apply_conf_change(&cc) {
            Ok(cs) => cs,
            Err(e) => {
                // Committed but refused by raft-rs (e.g. removing the last voter): every replica
                // refuses it alike, so it changes nothing; stopping would stop them all, and
                // again at every restart.
                warn!(replica = self.id, index = entry.index, error = %e, "conf change refused");
                if let Some((node, n)) = parse_ctx(&entry.context)
                    && node == self.id
                    && self
                        .member_changes
                        .get(&n)
                        .is_some_and(|p| p.term == entry.term)
                    && let Some(p) = self.member_changes.remove(&n)
                {
                    let _ = p.reply.send(Err(NodeError::Raft(e)));
                }
                return Ok(());
            }
        };
        match cc.get_change_type() {
            ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => {
                let addr = String::from_utf8_lossy(&cc.context).into_owned();
                self.members.insert(cc.node_id, addr);
                // The founders' configuration is not in the log (it was set at first boot), so a
                // new replica must start from a snapshot: compact now, and the leader can only
                // send it one.
                self.compact_now = true;
            }
            ConfChangeType::RemoveNode => {
                self.members.remove(&cc.node_id);
            }
        }
        self.storage.set_conf_state(cs)?;
        save_members(&self.config.dir, &self.members).map_err(|source| StorageError::Io {
            path: self.config.dir.join(MEMBERS_FILE),
            source,
        })?;
        info!(replica = self.id, change = ?cc.get_change_type(), node = cc.node_id, "membership changed");
        if let Some((node, n)) = parse_ctx(&entry.context)
            && node == self.id
            && self
                .member_changes
                .get(&n)
                .is_some_and(|p| p.term == entry.term)
            && let Some(p) = self.member_changes.remove(&n)
        {
            let _ = p.reply.send(Ok(()));
        }
        if cc.node_id == self.id && cc.get_change_type() == ConfChangeType::RemoveNode {
            info!(replica = self.id, "this replica was removed from the group");
        }
        Ok(())
    }

    fn on_read_state(&mut self, index: u64, ctx: &[u8]) {
        let Some((node, n)) = parse_ctx(ctx) else {
            return;
        };
        if node != self.id {
            return;
        }
        if let Some((kind, _)) = self.reads.remove(&n) {
            self.ready_reads.push_back((index, kind));
        }
    }

    /// Answers the reads whose read index has been applied.
    fn serve_reads(&mut self) {
        let mut waiting = VecDeque::new();
        while let Some((index, kind)) = self.ready_reads.pop_front() {
            if index > self.applied {
                waiting.push_back((index, kind));
                continue;
            }
            match kind {
                ReadKind::Query(cmd, reply) => {
                    let _ = reply.send(Ok(self.state.query(&cmd)));
                }
                ReadKind::KeepAlive {
                    session,
                    seen,
                    max_events,
                    reply,
                } => {
                    let outcome = self.keep_alive(session, seen, max_events);
                    let _ = reply.send(outcome);
                }
            }
        }
        self.ready_reads = waiting;
    }

    fn keep_alive(
        &mut self,
        session: u64,
        seen: u64,
        max_events: usize,
    ) -> Result<KeepAlive, NodeError> {
        let Some(lease_ms) = self.state.session_lease_ms(session) else {
            return Ok(KeepAlive {
                events: Vec::new(),
                lost: false,
                lease_ms: 0,
            });
        };
        if self.role != StateRole::Leader {
            return Err(self.not_leader());
        }
        // Its expiry is proposed: the session is over as far as this leader is concerned, and
        // a lease granted now would outlive the locks the expiry gives away.
        if self.expiring.contains_key(&session) {
            return Ok(KeepAlive {
                events: Vec::new(),
                lost: false,
                lease_ms: 0,
            });
        }
        self.leases
            .insert(session, Instant::now() + Duration::from_millis(lease_ms));
        // Acknowledge what the client has seen, once it is more than what is queued before it.
        let first_queued = self
            .state
            .events_after(session, 0, 1)
            .events
            .first()
            .map(|e| e.seq);
        let proposed = self.acks_proposed.get(&session).copied().unwrap_or(0);
        if first_queued.is_some_and(|first| first <= seen) && seen > proposed {
            self.acks_proposed.insert(session, seen);
            self.propose_internal(Op::AckEvents(AckEvents {
                session,
                upto: seen,
            }));
        }
        let batch = self.state.events_after(session, seen, max_events);
        Ok(KeepAlive {
            events: batch.events,
            lost: batch.lost,
            lease_ms,
        })
    }

    fn maybe_compact(&mut self) -> Result<(), NodeError> {
        let snap_index = self.storage.snapshot_index();
        let forced = std::mem::take(&mut self.compact_now) && self.applied > snap_index;
        if !forced && self.applied < snap_index + self.config.snapshot_entries {
            return Ok(());
        }
        let data = NodeSnapshot {
            state: self.state.snapshot(),
            members: self.members.clone(),
        }
        .encode_to_vec();
        let cs = self.raw.raft.prs().conf().to_conf_state();
        // The hard state's commit must cover the snapshot before the log behind it goes away,
        // or a restart would find applied > commit.
        let mut hs = self.raw.raft.hard_state();
        hs.commit = hs.commit.max(self.applied);
        self.storage.persist(&[], Some(&hs))?;
        self.storage.compact(self.applied, cs, data)?;
        debug!(replica = self.id, index = self.applied, "log compacted");
        Ok(())
    }

    fn fail_all(&mut self, err: impl Fn() -> NodeError) {
        for (_, p) in self.proposals.drain() {
            let _ = p.reply.send(Err(err()));
        }
        for (_, p) in self.member_changes.drain() {
            let _ = p.reply.send(Err(err()));
        }
        for (_, (kind, _)) in self.reads.drain() {
            fail_read(kind, err());
        }
        for (_, kind) in self.ready_reads.drain(..) {
            fail_read(kind, err());
        }
    }
}

fn clone_err(e: &NodeError) -> NodeError {
    match e {
        NodeError::NotLeader { leader } => NodeError::NotLeader {
            leader: leader.clone(),
        },
        NodeError::Timeout(d) => NodeError::Timeout(*d),
        NodeError::Busy => NodeError::Busy,
        NodeError::Stopped => NodeError::Stopped,
        other => NodeError::Invalid(other.to_string()),
    }
}

fn fail_read(kind: ReadKind, err: NodeError) {
    match kind {
        ReadKind::Query(_, reply) => {
            let _ = reply.send(Err(err));
        }
        ReadKind::KeepAlive { reply, .. } => {
            let _ = reply.send(Err(err));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{CreateSession, Exists, Mkdir, Reply as CmdReply};
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
}
