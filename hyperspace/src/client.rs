//! The Hyperspace client: a session with a lease kept alive in the background, the operations on
//! the namespace, attributes and locks, and the events pushed to its handles.
//!
//! Every request carries the session, a sequence number and the lowest unanswered sequence
//! number, so a request retried after a lost answer, a timeout or a leader change is applied at
//! most once (the state machine answers a retry with the first answer). Requests find the leader
//! by following `NotLeader` hints, trying every replica in turn when there is none.
//!
//! Session states, as in Chubby: `Safe` while keep-alives succeed; `Jeopardy` once the lease as
//! the client counts it (from when the last successful keep-alive was sent) has run out: locks
//! held may already be lost; `Expired` when the service says the session is gone, or after the
//! grace period passes without contact. Each change is sent as a [`ClientEvent`].

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use prost::Message as _;
use rpc::{ClusterCredentials, RpcError};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::debug;

use crate::command::{self, Command, ErrorCode, Event, LockMode, LockStatus, Op, Reply, Response};
use crate::node::{Node, NodeError};
use crate::service::{CallReply, KeepAliveReply, KeepAliveRequest, SERVER_NAME, StatusReply};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The session lease the client asks for.
    pub lease: Duration,
    /// After the lease runs out without contact, how long to keep trying before the session is
    /// given up as expired.
    pub grace: Duration,
    /// How long one request may take in all, retries included.
    pub request_timeout: Duration,
    /// Deadline of one attempt.
    pub attempt_timeout: Duration,
    /// Events queued for the application; past it, events are dropped and `EventsLost` sent.
    pub event_queue: usize,
    /// Bound on setting up a connection to one replica.
    pub connect_timeout: Duration,
    /// A connection whose peer is silent this long is dropped (QUIC pings it meanwhile), so a
    /// dead replica is noticed in about this time.
    pub idle_timeout: Duration,
    /// A replica that failed at the transport level is skipped this long.
    pub suspect_for: Duration,
    /// A blocked `lock` also asks whether it was granted this often (events can be lost).
    pub lock_poll: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(12),
            grace: Duration::from_secs(12),
            request_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(5),
            event_queue: 1024,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(3),
            suspect_for: Duration::from_secs(1),
            lock_poll: Duration::from_secs(1),
        }
    }
}

/// What went wrong with a Hyperspace request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service answered with an error.
    #[error("hyperspace {op}: {code:?}: {message}")]
    Hyperspace {
        op: &'static str,
        code: ErrorCode,
        message: String,
    },
    /// No replica answered within the request timeout.
    #[error("hyperspace {op}: unavailable: {detail}")]
    Unavailable { op: &'static str, detail: String },
    /// Every replica refused the TLS handshake for good (credentials of another cluster, a
    /// wrong name): fix the credentials or the addresses; retrying cannot help.
    #[error("hyperspace {op}: refused: {detail}")]
    Refused { op: &'static str, detail: String },
    /// The session is gone; make a new client.
    #[error("hyperspace session {0} expired")]
    SessionExpired(u64),
    #[error("hyperspace: unexpected reply to {0}")]
    Protocol(&'static str),
}

impl ClientError {
    /// The service's error code, if the service answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Hyperspace { code, .. } => Some(*code),
            ClientError::SessionExpired(_) => Some(ErrorCode::SessionExpired),
            _ => None,
        }
    }
}

/// Why one attempt failed.
#[derive(Debug)]
pub enum AttemptError {
    /// Try again (elsewhere, later): not the leader, unreachable, timed out, busy.
    Retry {
        leader: Option<String>,
        detail: String,
    },
    /// Do not retry.
    Fatal(String),
    /// The replica refused the TLS handshake for good ([`RpcError::Refused`]); another replica
    /// may still be tried.
    Refused(String),
}

/// How a client reaches the replicas: over `rpc`, or to a replica in the same process.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError>;
    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError>;
    async fn status(&self, deadline: Duration) -> Result<StatusReply, AttemptError>;
}

/// A replica in the same process (the embedded database's single replica).
pub struct LocalChannel {
    node: Node,
}

impl LocalChannel {
    pub fn new(node: Node) -> Self {
        Self { node }
    }
}

fn node_attempt_error(e: NodeError) -> AttemptError {
    match e {
        NodeError::NotLeader { leader } => AttemptError::Retry {
            leader: leader.map(|(_, a)| a),
            detail: "not the leader".into(),
        },
        NodeError::Invalid(m) => AttemptError::Fatal(m),
        other => AttemptError::Retry {
            leader: None,
            detail: other.to_string(),
        },
    }
}

#[async_trait]
impl Channel for LocalChannel {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError> {
        let is_write = cmd.op.as_ref().is_some_and(|op| op.is_write());
        let fut = async {
            if is_write {
                self.node.propose(cmd.clone()).await
            } else {
                self.node.read(cmd.clone()).await
            }
        };
        match tokio::time::timeout(deadline, fut).await {
            Ok(r) => r.map_err(node_attempt_error),
            Err(_) => Err(AttemptError::Retry {
                leader: None,
                detail: "timeout".into(),
            }),
        }
    }

    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError> {
        let fut = self
            .node
            .keep_alive(req.session, req.seen, req.max_events.max(1) as usize);
        let ka = match tokio::time::timeout(deadline, fut).await {
            Ok(r) => r.map_err(node_attempt_error)?,
            Err(_) => {
                return Err(AttemptError::Retry {
                    leader: None,
                    detail: "timeout".into(),
                });
            }
        };
        if ka.lease_ms == 0 {
            return Ok(KeepAliveReply {
                error: Response::err(ErrorCode::SessionExpired, "session expired").error,
                ..Default::default()
            });
        }
        if ka.events.is_empty() && !ka.lost {
            // Hold as the server does, so that the keep-alive loop does not spin.
            let applied = self.node.applied();
            self.node
                .wait_applied(applied, Duration::from_millis(req.hold_ms).min(deadline))
                .await;
        }
        Ok(KeepAliveReply {
            events: ka.events,
            lost: ka.lost,
            lease_ms: ka.lease_ms,
            ..Default::default()
        })
    }

    async fn status(&self, _deadline: Duration) -> Result<StatusReply, AttemptError> {
        self.node
            .status()
            .await
            .map(StatusReply::from)
            .map_err(node_attempt_error)
    }
}

/// Replicas over `rpc`, following the leader. A replica that fails at the transport level
/// loses its cached connection (a restarted replica is a new QUIC peer) and is skipped for a
/// while; a leader hint naming such a replica is not followed.
pub struct RemoteChannel {
    replicas: Vec<SocketAddr>,
    credentials: ClusterCredentials,
    options: ClientOptions,
    clients: tokio::sync::Mutex<HashMap<SocketAddr, Arc<rpc::Client>>>,
    leader: Mutex<Option<SocketAddr>>,
    suspects: Mutex<HashMap<SocketAddr, Instant>>,
    /// Replicas that refused the TLS handshake, and until when that is believed.
    refusals: Mutex<HashMap<SocketAddr, Instant>>,
    next: AtomicU64,
}

impl RemoteChannel {
    pub fn new(
        replicas: Vec<SocketAddr>,
        credentials: ClusterCredentials,
        options: ClientOptions,
    ) -> Self {
        Self {
            replicas,
            credentials,
            options,
            clients: tokio::sync::Mutex::new(HashMap::new()),
            leader: Mutex::new(None),
            suspects: Mutex::new(HashMap::new()),
            refusals: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }

    fn is_suspect(&self, addr: &SocketAddr) -> bool {
        let now = Instant::now();
        self.suspects
            .lock()
            .get(addr)
            .is_some_and(|until| *until > now)
            || self
                .refusals
                .lock()
                .get(addr)
                .is_some_and(|until| *until > now)
    }

    /// Records that `tried` refused the TLS handshake (believed for a request timeout); the
    /// refusal is the request's answer once every replica has refused, else another is tried.
    fn refused(&self, tried: SocketAddr, detail: String) -> AttemptError {
        let now = Instant::now();
        let mut refusals = self.refusals.lock();
        refusals.insert(tried, now + self.options.request_timeout);
        let everywhere = self
            .replicas
            .iter()
            .all(|a| refusals.get(a).is_some_and(|until| *until > now));
        if everywhere {
            AttemptError::Refused(detail)
        } else {
            AttemptError::Retry {
                leader: None,
                detail,
            }
        }
    }

    /// Settles one attempt on `addr`: remembers the leader or what failed.
    async fn settle<T>(
        &self,
        addr: SocketAddr,
        result: Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        let result = match result {
            Err(AttemptError::Refused(detail)) => Err(self.refused(addr, detail)),
            other => other,
        };
        match &result {
            Ok(_) => *self.leader.lock() = Some(addr),
            Err(e) => self.note(addr, e).await,
        }
        result
    }

    /// The replica to try: the known leader, else the next in turn that is not suspect.
    fn target(&self) -> SocketAddr {
        if let Some(l) = *self.leader.lock()
            && !self.is_suspect(&l)
        {
            return l;
        }
        let n = self.replicas.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
            let a = self.replicas[i % n];
            if !self.is_suspect(&a) {
                return a;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        self.replicas[i % n]
    }

    async fn note(&self, tried: SocketAddr, err: &AttemptError) {
        let next_leader = match err {
            AttemptError::Retry {
                leader: Some(hint), ..
            } => match hint.parse::<SocketAddr>() {
                Ok(a) if a != tried && !self.is_suspect(&a) => Some(a),
                _ => None,
            },
            AttemptError::Retry { leader: None, .. } | AttemptError::Refused(_) => {
                // Unreachable, timed out or busy: start afresh with this replica later.
                self.suspects
                    .lock()
                    .insert(tried, Instant::now() + self.options.suspect_for);
                if let Some(c) = self.clients.lock().await.remove(&tried) {
                    c.close().await;
                }
                None
            }
            AttemptError::Fatal(_) => None,
        };
        *self.leader.lock() = next_leader;
    }

    async fn client(
        &self,
        addr: SocketAddr,
        deadline: Duration,
    ) -> Result<Arc<rpc::Client>, AttemptError> {
        if let Some(c) = self.clients.lock().await.get(&addr) {
            return Ok(c.clone());
        }
        let options = rpc::ClientOptions {
            idle_timeout: self.options.idle_timeout,
            connect_timeout: self.options.connect_timeout,
            ..Default::default()
        };
        let config = self
            .credentials
            .client_config(options.idle_timeout)
            .map_err(|e| AttemptError::Fatal(e.to_string()))?;
        let c = tokio::time::timeout(
            self.options.connect_timeout.min(deadline),
            rpc::Client::connect_with(addr, SERVER_NAME, config, options),
        )
        .await
        .map_err(|_| AttemptError::Retry {
            leader: None,
            detail: format!("connect to {addr} timed out"),
        })?
        .map_err(|e| rpc_attempt_error(&e))?;
        let c = Arc::new(c);
        self.clients.lock().await.insert(addr, c.clone());
        Ok(c)
    }

    async fn rpc_call(
        &self,
        addr: SocketAddr,
        method: &str,
        payload: Vec<u8>,
        deadline: Duration,
    ) -> Result<bytes::Bytes, AttemptError> {
        let client = self.client(addr, deadline).await?;
        client
            .call(method, payload.into(), deadline)
            .await
            .map_err(|e| rpc_attempt_error(&e))
    }
}

fn rpc_attempt_error(e: &RpcError) -> AttemptError {
    if e.is_refused() {
        AttemptError::Refused(e.to_string())
    } else if e.is_retryable() || e.is_timeout() {
        AttemptError::Retry {
            leader: None,
            detail: e.to_string(),
        }
    } else {
        AttemptError::Fatal(e.to_string())
    }
}

fn decode_reply<M: prost::Message + Default>(bytes: bytes::Bytes) -> Result<M, AttemptError> {
    M::decode(bytes).map_err(|e| AttemptError::Fatal(format!("undecodable reply: {e}")))
}

#[async_trait]
impl Channel for RemoteChannel {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError> {
        let addr = self.target();
        let result = async {
            let bytes = self
                .rpc_call(addr, "hs.call", cmd.encode_to_vec(), deadline)
                .await?;
            let reply: CallReply = decode_reply(bytes)?;
            let response = reply
                .response
                .ok_or_else(|| AttemptError::Fatal("reply without a response".into()))?;
            if response.error_code() == Some(ErrorCode::NotLeader) {
                return Err(AttemptError::Retry {
                    leader: (!reply.leader_addr.is_empty()).then_some(reply.leader_addr),
                    detail: format!("{addr} is not the leader"),
                });
            }
            Ok(response)
        }
        .await;
        self.settle(addr, result).await
    }

    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError> {
        let addr = self.target();
        let result = async {
            let bytes = self
                .rpc_call(addr, "hs.keepalive", req.encode_to_vec(), deadline)
                .await?;
            let reply: KeepAliveReply = decode_reply(bytes)?;
            if let Some(e) = &reply.error
                && e.code == ErrorCode::NotLeader as i32
            {
                return Err(AttemptError::Retry {
                    leader: (!reply.leader_addr.is_empty()).then_some(reply.leader_addr),
                    detail: format!("{addr} is not the leader"),
                });
            }
            Ok(reply)
        }
        .await;
        self.settle(addr, result).await
    }

    async fn status(&self, deadline: Duration) -> Result<StatusReply, AttemptError> {
        let addr = self.target();
        let bytes = self
            .rpc_call(addr, "hs.status", Vec::new(), deadline)
            .await?;
        decode_reply(bytes)
    }
}

/// The session's standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Safe,
    Jeopardy,
    Expired,
}

/// What the client tells the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// An event on one of the session's handles.
    Node(Event),
    /// Events were dropped (the service's or this client's queue was full): re-read what you
    /// watch.
    EventsLost,
    /// The lease ran out without contact: locks may be lost.
    Jeopardy,
    /// Contact is back after jeopardy; the session and its locks survived.
    Safe,
    /// The session is gone, with its locks and ephemeral files.
    Expired,
}

/// Names a node: by path or by open handle.
#[derive(Debug, Clone)]
pub enum At {
    Path(String),
    Handle(u64),
}

impl From<&str> for At {
    fn from(p: &str) -> Self {
        At::Path(p.to_string())
    }
}

impl From<String> for At {
    fn from(p: String) -> Self {
        At::Path(p)
    }
}

impl From<u64> for At {
    fn from(h: u64) -> Self {
        At::Handle(h)
    }
}

impl At {
    fn target(self) -> Option<command::Target> {
        Some(match self {
            At::Path(path) => command::Target { handle: 0, path },
            At::Handle(handle) => command::Target {
                handle,
                path: String::new(),
            },
        })
    }
}

struct Inner {
    channel: Arc<dyn Channel>,
    options: ClientOptions,
    session: u64,
    next_seq: AtomicU64,
    inflight: Mutex<BTreeSet<u64>>,
    /// Blocked lock requests waiting for their LOCK_GRANTED event, by handle.
    lock_waiters: Mutex<HashMap<u64, oneshot::Sender<Event>>>,
    events: mpsc::Sender<ClientEvent>,
    state: watch::Sender<SessionState>,
}

/// A Hyperspace session. Cloning shares the session.
#[derive(Clone)]
pub struct Hyperspace {
    inner: Arc<Inner>,
    stop: Arc<watch::Sender<bool>>,
}

impl Hyperspace {
    /// Connects to the replicas at `replicas` and opens a session.
    pub async fn connect(
        replicas: Vec<SocketAddr>,
        credentials: ClusterCredentials,
        options: ClientOptions,
    ) -> Result<(Hyperspace, mpsc::Receiver<ClientEvent>), ClientError> {
        if replicas.is_empty() {
            return Err(ClientError::Unavailable {
                op: "connect",
                detail: "no replica addresses".into(),
            });
        }
        let channel = RemoteChannel::new(replicas, credentials, options.clone());
        Self::open_session(Arc::new(channel), options).await
    }

    /// Opens a session over `channel`.
    pub async fn open_session(
        channel: Arc<dyn Channel>,
        options: ClientOptions,
    ) -> Result<(Hyperspace, mpsc::Receiver<ClientEvent>), ClientError> {
        let nonce = rand::random::<u64>() | 1;
        let cmd = Command {
            session: 0,
            seq: 0,
            first_incomplete: 0,
            op: Some(Op::CreateSession(command::CreateSession {
                nonce,
                lease_ms: options.lease.as_millis() as u64,
            })),
        };
        let response =
            run_attempts(channel.as_ref(), &options, "create_session", || cmd.clone()).await?;
        let session = match check(response, "create_session")? {
            Reply::Session(id) => id,
            _ => return Err(ClientError::Protocol("create_session")),
        };
        let (events_tx, events_rx) = mpsc::channel(options.event_queue.max(1));
        let (state_tx, _) = watch::channel(SessionState::Safe);
        let inner = Arc::new(Inner {
            channel,
            options,
            session,
            next_seq: AtomicU64::new(1),
            inflight: Mutex::new(BTreeSet::new()),
            lock_waiters: Mutex::new(HashMap::new()),
            events: events_tx,
            state: state_tx,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(keep_alive_loop(inner.clone(), stop_rx));
        Ok((
            Hyperspace {
                inner,
                stop: Arc::new(stop_tx),
            },
            events_rx,
        ))
    }

    pub fn session(&self) -> u64 {
        self.inner.session
    }

    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// Watches the session state.
    pub fn state_watch(&self) -> watch::Receiver<SessionState> {
        self.inner.state.subscribe()
    }

    async fn request(&self, op: Op) -> Result<Reply, ClientError> {
        let name = op.name();
        if self.state() == SessionState::Expired {
            return Err(ClientError::SessionExpired(self.inner.session));
        }
        let seq = self.inner.next_seq.fetch_add(1, Ordering::Relaxed);
        self.inner.inflight.lock().insert(seq);
        let inner = &self.inner;
        let result = run_attempts(inner.channel.as_ref(), &inner.options, name, || Command {
            session: inner.session,
            seq,
            first_incomplete: inner.inflight.lock().first().copied().unwrap_or(seq),
            op: Some(op.clone()),
        })
        .await;
        self.inner.inflight.lock().remove(&seq);
        let reply = check(result?, name);
        if let Err(ClientError::Hyperspace {
            code: ErrorCode::SessionExpired,
            ..
        }) = &reply
        {
            expire(&self.inner);
            return Err(ClientError::SessionExpired(self.inner.session));
        }
        reply
    }

    async fn done(&self, op: Op) -> Result<(), ClientError> {
        self.request(op).await.map(|_| ())
    }

    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Mkdir(command::Mkdir {
            path: path.into(),
            parents: false,
        }))
        .await
    }

    /// Creates the directory and any missing parents; succeeds if it exists.
    pub async fn mkdirs(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Mkdir(command::Mkdir {
            path: path.into(),
            parents: true,
        }))
        .await
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Delete(command::Delete { path: path.into() }))
            .await
    }

    pub async fn exists(&self, path: &str) -> Result<bool, ClientError> {
        match self
            .request(Op::Exists(command::Exists { path: path.into() }))
            .await?
        {
            Reply::Bool(b) => Ok(b),
            _ => Err(ClientError::Protocol("exists")),
        }
    }

    pub async fn readdir(&self, path: &str) -> Result<Vec<command::DirEntry>, ClientError> {
        match self
            .request(Op::Readdir(command::Readdir { path: path.into() }))
            .await?
        {
            Reply::Dir(d) => Ok(d.entries),
            _ => Err(ClientError::Protocol("readdir")),
        }
    }

    /// Opens a handle; returns it and whether this open created the file.
    pub async fn open_with(
        &self,
        path: &str,
        flags: u32,
        event_mask: u32,
        initial_attrs: Vec<command::Attr>,
    ) -> Result<(u64, bool), ClientError> {
        match self
            .request(Op::Open(command::Open {
                path: path.into(),
                flags,
                event_mask,
                initial_attrs,
            }))
            .await?
        {
            Reply::Handle(h) => Ok((h.handle, h.created)),
            _ => Err(ClientError::Protocol("open")),
        }
    }

    pub async fn open(&self, path: &str, flags: u32, event_mask: u32) -> Result<u64, ClientError> {
        Ok(self.open_with(path, flags, event_mask, Vec::new()).await?.0)
    }

    pub async fn close(&self, handle: u64) -> Result<(), ClientError> {
        self.done(Op::Close(command::Close { handle })).await
    }

    pub async fn attr_set(
        &self,
        at: impl Into<At>,
        name: &str,
        value: impl Into<Vec<u8>>,
    ) -> Result<(), ClientError> {
        self.done(Op::AttrSet(command::AttrSet {
            target: at.into().target(),
            name: name.into(),
            value: value.into(),
        }))
        .await
    }

    pub async fn attr_get(
        &self,
        at: impl Into<At>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        match self
            .request(Op::AttrGet(command::AttrGet {
                target: at.into().target(),
                name: name.into(),
            }))
            .await?
        {
            Reply::Value(v) => Ok(v.value),
            _ => Err(ClientError::Protocol("attr_get")),
        }
    }

    pub async fn attr_del(&self, at: impl Into<At>, name: &str) -> Result<(), ClientError> {
        self.done(Op::AttrDel(command::AttrDel {
            target: at.into().target(),
            name: name.into(),
        }))
        .await
    }

    pub async fn attr_list(&self, at: impl Into<At>) -> Result<Vec<String>, ClientError> {
        match self
            .request(Op::AttrList(command::AttrList {
                target: at.into().target(),
            }))
            .await?
        {
            Reply::Names(n) => Ok(n.names),
            _ => Err(ClientError::Protocol("attr_list")),
        }
    }

    /// Adds `delta` to a decimal attribute atomically and returns the new value.
    pub async fn attr_incr(
        &self,
        at: impl Into<At>,
        name: &str,
        delta: i64,
    ) -> Result<i64, ClientError> {
        match self
            .request(Op::AttrIncr(command::AttrIncr {
                target: at.into().target(),
                name: name.into(),
                delta,
            }))
            .await?
        {
            Reply::Int(v) => Ok(v),
            _ => Err(ClientError::Protocol("attr_incr")),
        }
    }

    /// Takes a lock, waiting as long as it takes (or until the session ends); returns the lock
    /// generation.
    pub async fn lock(&self, handle: u64, mode: LockMode) -> Result<u64, ClientError> {
        let (tx, mut rx) = oneshot::channel();
        {
            let mut waiters = self.inner.lock_waiters.lock();
            if waiters.contains_key(&handle) {
                return Err(ClientError::Hyperspace {
                    op: "lock",
                    code: ErrorCode::LockState,
                    message: format!("handle {handle} already waits for a lock"),
                });
            }
            waiters.insert(handle, tx);
        }
        let reply = self
            .request(Op::Lock(command::Lock {
                handle,
                mode: mode as i32,
                try_lock: false,
            }))
            .await;
        let reply = match reply {
            Ok(Reply::Lock(l)) => l,
            Ok(_) => {
                self.inner.lock_waiters.lock().remove(&handle);
                return Err(ClientError::Protocol("lock"));
            }
            Err(e) => {
                self.inner.lock_waiters.lock().remove(&handle);
                // The request may have been applied (queued or granted) without our hearing:
                // withdraw it, so the session does not hold a lock it does not know of. If this
                // fails too, the next lock on the handle answers LockState.
                if matches!(e, ClientError::Unavailable { .. }) {
                    let _ = self.release(handle).await;
                }
                return Err(e);
            }
        };
        match LockStatus::try_from(reply.status) {
            Ok(LockStatus::Granted) => {
                self.inner.lock_waiters.lock().remove(&handle);
                Ok(reply.generation)
            }
            Ok(LockStatus::Pending) => loop {
                // The grant comes as an event; poll too, because an event can be lost (queue
                // overflow) and a request can vanish without one (its node deleted). Either
                // way the answer is confirmed by a linearizable read of the handle's lock: a
                // LOCK_GRANTED event can be a late one from an earlier request on this handle.
                let woke = tokio::time::timeout(self.inner.options.lock_poll, &mut rx).await;
                if let Ok(Err(_)) = woke {
                    return Err(ClientError::SessionExpired(self.inner.session));
                }
                match self.sequencer(handle).await {
                    Ok(seq) => {
                        self.inner.lock_waiters.lock().remove(&handle);
                        return Ok(seq.generation);
                    }
                    Err(e) if e.code() == Some(ErrorCode::LockState) => {
                        if woke.is_ok() {
                            // A stale grant consumed the waiter: wait for the real one.
                            let (tx, new_rx) = oneshot::channel();
                            self.inner.lock_waiters.lock().insert(handle, tx);
                            rx = new_rx;
                        }
                    }
                    Err(e) => {
                        self.inner.lock_waiters.lock().remove(&handle);
                        return Err(e);
                    }
                }
            },
            _ => {
                self.inner.lock_waiters.lock().remove(&handle);
                Err(ClientError::Protocol("lock"))
            }
        }
    }

    /// Takes a lock if it is free now: `Some(generation)`, or `None` when it is busy.
    pub async fn try_lock(&self, handle: u64, mode: LockMode) -> Result<Option<u64>, ClientError> {
        match self
            .request(Op::Lock(command::Lock {
                handle,
                mode: mode as i32,
                try_lock: true,
            }))
            .await?
        {
            Reply::Lock(l) if l.status == LockStatus::Granted as i32 => Ok(Some(l.generation)),
            Reply::Lock(l) if l.status == LockStatus::Busy as i32 => Ok(None),
            _ => Err(ClientError::Protocol("try_lock")),
        }
    }

    pub async fn release(&self, handle: u64) -> Result<(), ClientError> {
        self.done(Op::Release(command::Release { handle })).await
    }

    pub async fn sequencer(&self, handle: u64) -> Result<command::Sequencer, ClientError> {
        match self
            .request(Op::GetSequencer(command::GetSequencer { handle }))
            .await?
        {
            Reply::Sequencer(s) => Ok(s),
            _ => Err(ClientError::Protocol("get_sequencer")),
        }
    }

    pub async fn check_sequencer(
        &self,
        sequencer: command::Sequencer,
    ) -> Result<bool, ClientError> {
        match self
            .request(Op::CheckSequencer(command::CheckSequencer {
                sequencer: Some(sequencer),
            }))
            .await?
        {
            Reply::Bool(b) => Ok(b),
            _ => Err(ClientError::Protocol("check_sequencer")),
        }
    }

    pub async fn list_sessions(&self) -> Result<Vec<command::SessionInfo>, ClientError> {
        match self
            .request(Op::ListSessions(command::ListSessions {}))
            .await?
        {
            Reply::Sessions(s) => Ok(s.sessions),
            _ => Err(ClientError::Protocol("list_sessions")),
        }
    }

    /// A no-op through the log (benchmarks, tests).
    pub async fn noop(&self) -> Result<(), ClientError> {
        self.done(Op::Noop(command::Noop {})).await
    }

    /// The status of the replica the client talks to (the leader when known).
    pub async fn status(&self) -> Result<StatusReply, ClientError> {
        self.inner
            .channel
            .status(self.inner.options.attempt_timeout)
            .await
            .map_err(|e| match e {
                AttemptError::Refused(detail) => ClientError::Refused {
                    op: "status",
                    detail,
                },
                e => ClientError::Unavailable {
                    op: "status",
                    detail: format!("{e:?}"),
                },
            })
    }

    /// Stops keeping the session alive without closing it, as a crashed client would: the
    /// service expires it when its lease runs out.
    pub fn abandon(&self) {
        let _ = self.stop.send(true);
    }

    /// Ends the session: its locks are released and its ephemeral files deleted.
    pub async fn close_session(&self) -> Result<(), ClientError> {
        let r = self.done(Op::CloseSession(command::CloseSession {})).await;
        let _ = self.stop.send(true);
        r
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        debug!(session = self.session, "hyperspace client dropped");
    }
}

/// Sends attempts of one request until one gets an answer or the request timeout passes.
async fn run_attempts(
    channel: &dyn Channel,
    options: &ClientOptions,
    op: &'static str,
    make: impl Fn() -> Command,
) -> Result<Response, ClientError> {
    let deadline = Instant::now() + options.request_timeout;
    let mut attempt = 0u32;
    loop {
        let cmd = make();
        let left = deadline.saturating_duration_since(Instant::now());
        match channel
            .call(
                &cmd,
                options
                    .attempt_timeout
                    .min(left.max(Duration::from_millis(1))),
            )
            .await
        {
            Ok(response) => return Ok(response),
            Err(AttemptError::Fatal(detail)) => {
                return Err(ClientError::Unavailable { op, detail });
            }
            Err(AttemptError::Refused(detail)) => {
                return Err(ClientError::Refused { op, detail });
            }
            Err(AttemptError::Retry { leader, detail }) => {
                if Instant::now() >= deadline {
                    return Err(ClientError::Unavailable { op, detail });
                }
                // Straight to a named leader; otherwise back off (with jitter) before the next.
                if leader.is_none() || attempt > 3 {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                attempt += 1;
            }
        }
    }
}

/// Exponential backoff from 20 ms to 1 s, with up to 50% random jitter.
fn backoff(attempt: u32) -> Duration {
    let base = 20u64.saturating_mul(1 << attempt.min(6)).min(1000);
    let jitter = rand::random::<u64>() % (base / 2 + 1);
    Duration::from_millis(base + jitter)
}

fn check(response: Response, op: &'static str) -> Result<Reply, ClientError> {
    if let Some(code) = response.error_code() {
        let message = response.error.map(|e| e.message).unwrap_or_default();
        return Err(ClientError::Hyperspace { op, code, message });
    }
    response.reply.ok_or(ClientError::Protocol(op))
}

fn expire(inner: &Inner) {
    if *inner.state.borrow() != SessionState::Expired {
        inner.state.send_replace(SessionState::Expired);
        let _ = inner.events.try_send(ClientEvent::Expired);
        // Blocked lock requests end with SessionExpired.
        inner.lock_waiters.lock().clear();
    }
}

/// The lease ran out without contact: locks may be lost.
fn jeopardy(inner: &Inner) {
    if *inner.state.borrow() == SessionState::Safe {
        inner.state.send_replace(SessionState::Jeopardy);
        let _ = inner.events.try_send(ClientEvent::Jeopardy);
    }
}

async fn keep_alive_loop(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let lease = inner.options.lease;
    let hold = lease / 3;
    let mut seen = 0u64;
    let mut lease_end = Instant::now() + lease;
    let mut failures = 0u32;
    let mut lost_pending = false;
    loop {
        if *stop.borrow() {
            return;
        }
        let sent = Instant::now();
        let req = KeepAliveRequest {
            session: inner.session,
            seen,
            hold_ms: hold.as_millis() as u64,
            max_events: 1024,
        };
        let attempt = inner
            .channel
            .keep_alive(&req, hold + inner.options.attempt_timeout);
        tokio::pin!(attempt);
        let result = loop {
            let safe = *inner.state.borrow() == SessionState::Safe;
            tokio::select! {
                r = &mut attempt => break r,
                _ = stop.changed() => return,
                // The lease ends while the attempt is in flight: the service may give the locks
                // away from now on, whenever the attempt ends.
                _ = tokio::time::sleep_until(lease_end.into()), if safe => jeopardy(&inner),
            }
        };
        match result {
            Ok(reply) => {
                if let Some(e) = &reply.error
                    && e.code == ErrorCode::SessionExpired as i32
                {
                    expire(&inner);
                    return;
                }
                failures = 0;
                // The service's word on the lease wins if it is shorter than what was asked.
                let granted = Duration::from_millis(reply.lease_ms);
                lease_end = sent
                    + if granted.is_zero() {
                        lease
                    } else {
                        lease.min(granted)
                    };
                if *inner.state.borrow() == SessionState::Jeopardy {
                    inner.state.send_replace(SessionState::Safe);
                    let _ = inner.events.try_send(ClientEvent::Safe);
                }
                if reply.lost || lost_pending {
                    lost_pending = inner.events.try_send(ClientEvent::EventsLost).is_err();
                }
                for event in reply.events {
                    if event.seq <= seen {
                        continue;
                    }
                    seen = event.seq;
                    if event.kind == command::event_mask::LOCK_GRANTED {
                        if let Some(w) = inner.lock_waiters.lock().remove(&event.handle) {
                            let _ = w.send(event);
                        }
                        continue;
                    }
                    if inner.events.try_send(ClientEvent::Node(event)).is_err() {
                        lost_pending = true;
                    }
                }
            }
            Err(e) => {
                debug!(session = inner.session, error = ?e, "keep-alive failed");
                let now = Instant::now();
                if now >= lease_end {
                    jeopardy(&inner);
                }
                if now >= lease_end + inner.options.grace {
                    expire(&inner);
                    return;
                }
                let wait = backoff(failures.min(4));
                failures += 1;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Answers CreateSession, the first keep-alive, then no keep-alive ever again (each attempt
    /// runs out its deadline): a client whose keep-alives stopped reaching the leader.
    #[derive(Default)]
    struct SilentAfterFirst {
        keep_alives: AtomicUsize,
    }

    #[async_trait]
    impl Channel for SilentAfterFirst {
        async fn call(&self, cmd: &Command, _deadline: Duration) -> Result<Response, AttemptError> {
            match cmd.op {
                Some(Op::CreateSession(_)) => Ok(Response::ok(Reply::Session(1))),
                _ => Err(AttemptError::Fatal("not in this test".into())),
            }
        }

        async fn keep_alive(
            &self,
            _req: &KeepAliveRequest,
            deadline: Duration,
        ) -> Result<KeepAliveReply, AttemptError> {
            if self.keep_alives.fetch_add(1, Ordering::SeqCst) == 0 {
                return Ok(KeepAliveReply {
                    lease_ms: 600,
                    ..Default::default()
                });
            }
            tokio::time::sleep(deadline).await;
            Err(AttemptError::Retry {
                leader: None,
                detail: "timeout".into(),
            })
        }

        async fn status(&self, _deadline: Duration) -> Result<StatusReply, AttemptError> {
            Err(AttemptError::Fatal("not in this test".into()))
        }
    }

    #[tokio::test]
    async fn jeopardy_begins_when_the_lease_ends_even_with_a_keep_alive_in_flight() {
        let options = ClientOptions {
            lease: Duration::from_millis(600),
            grace: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let (hs, _events) =
            Hyperspace::open_session(Arc::new(SilentAfterFirst::default()), options)
                .await
                .unwrap();
        // The lease (counted from the first keep-alive, sent at about now) has run out; the
        // second keep-alive is still waiting for its 5 s deadline. The service may expire the
        // session any moment now, so the client must no longer call itself safe.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(hs.state(), SessionState::Jeopardy);
        hs.abandon();
    }
}
