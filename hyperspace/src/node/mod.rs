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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::time::{Clock, entropy_seed, system_clock};
use raft::prelude::Message;
use tokio::sync::oneshot;

use crate::command::Event;
use crate::state::Limits;
use crate::storage::{StorageError, StorageOptions};

mod dir_lock;
mod driver;
mod handle;
mod leases;
mod membership;
mod read_index;
#[cfg(test)]
mod tests;

pub(crate) use driver::Driver;
pub(crate) use handle::Input;
pub use handle::{DeliveryReports, Node};

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
    /// What the driver reads the time from (request and read deadlines, leases); a simulation
    /// passes a `ManualClock`. The Raft tick itself is driven by whoever runs the driver.
    pub clock: Arc<dyn Clock>,
    /// Seeds the driver's random source (Raft's election timeouts): a fixed seed replays a run.
    pub seed: u64,
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
            clock: system_clock(),
            seed: entropy_seed(),
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

pub(crate) type Reply<T> = oneshot::Sender<Result<T, NodeError>>;
