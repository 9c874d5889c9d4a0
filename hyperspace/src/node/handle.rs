//! The handle on a running replica ([`Node`]): its thread, and the inputs it sends the driver.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use raft::prelude::Message;
use tokio::sync::{mpsc, oneshot, watch};

use crate::command::{Command, Response};
use crate::storage::StorageError;

use super::driver::Driver;
use super::{KeepAlive, NodeConfig, NodeError, NodeStatus, Reply, Transport};

pub(crate) enum Input {
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
