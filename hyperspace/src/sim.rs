//! Test harness only: one replica's real driver without its thread or runtime, stepped by hand,
//! so a deterministic simulation (`tests/sim.rs`) can run several in one thread.
//!
//! The driver is the one [`crate::node::Node`] runs: the same `DiskStorage`, `StateMachine`,
//! read index and leases. The simulation supplies the transport, the clock (`NodeConfig::clock`,
//! a `ManualClock`) and the seed, calls [`SimReplica::tick`] when a tick is due, delivers
//! messages with [`SimReplica::step`] and runs [`SimReplica::ready`] after each input, as the
//! thread's event loop does. Nothing here is used outside tests.

use std::sync::Arc;

use parking_lot::Mutex;
use raft::StateRole;
use raft::prelude::Message;
use tokio::sync::{mpsc, oneshot, watch};

use crate::command::{Command, Response};
use crate::node::{Driver, Input, KeepAlive, NodeConfig, NodeError, NodeStatus, Transport};
use crate::storage::StorageError;

/// What a request to a simulated replica answers, once it does (poll with `try_recv`).
pub type Answer<T> = oneshot::Receiver<Result<T, NodeError>>;

/// One replica's driver, stepped by the caller.
pub struct SimReplica {
    driver: Driver,
    /// Inputs sent to a driver's own queue are ignored here (the simulation does not read it).
    _queue: mpsc::Receiver<Input>,
}

impl SimReplica {
    /// Opens the replica in `config.dir` (creating it), as `Node::start` does, without a thread.
    pub fn open(config: NodeConfig, transport: Arc<dyn Transport>) -> Result<Self, NodeError> {
        std::fs::create_dir_all(&config.dir).map_err(|source| StorageError::Io {
            path: config.dir.clone(),
            source,
        })?;
        let (tx, rx) = mpsc::channel(1);
        let (applied_tx, _) = watch::channel(0);
        let driver = Driver::open(
            config,
            transport,
            tx,
            applied_tx,
            Arc::new(Mutex::new(None)),
        )?;
        Ok(Self { driver, _queue: rx })
    }

    /// One tick of the replica's timer.
    pub fn tick(&mut self) {
        self.driver.tick();
    }

    /// Raft messages from a peer.
    pub fn step(&mut self, msgs: Vec<Message>) {
        self.driver.handle(Input::Raft(msgs, None));
    }

    /// Proposes a write command.
    pub fn propose(&mut self, cmd: Command) -> Answer<Response> {
        let (reply, rx) = oneshot::channel();
        self.driver.handle(Input::Propose(cmd, reply));
        rx
    }

    /// A linearizable read.
    pub fn read(&mut self, cmd: Command) -> Answer<Response> {
        let (reply, rx) = oneshot::channel();
        self.driver.handle(Input::Read(cmd, reply));
        rx
    }

    /// A keep-alive of `session`, acknowledging its events up to `seen`.
    pub fn keep_alive(&mut self, session: u64, seen: u64, max_events: usize) -> Answer<KeepAlive> {
        let (reply, rx) = oneshot::channel();
        self.driver.handle(Input::KeepAlive {
            session,
            seen,
            max_events,
            reply,
        });
        rx
    }

    /// Tells the replica what became of a snapshot it sent to `to` (as a transport does).
    pub fn report_snapshot(&mut self, to: u64, ok: bool) {
        self.driver.handle(Input::SnapshotSent(to, ok));
    }

    /// Tells the replica that a message to `to` could not be delivered.
    pub fn report_unreachable(&mut self, to: u64) {
        self.driver.handle(Input::Unreachable(to));
    }

    /// The driver's ready round (persist, send, apply, answer): after every input.
    pub fn ready(&mut self) -> Result<(), NodeError> {
        self.driver.on_ready()
    }

    pub fn is_leader(&self) -> bool {
        self.driver.raw.raft.state == StateRole::Leader
    }

    /// The leader this replica knows of (0: none).
    pub fn leader_id(&self) -> u64 {
        self.driver.raw.raft.leader_id
    }

    pub fn term(&self) -> u64 {
        self.driver.raw.raft.term
    }

    pub fn status(&self) -> NodeStatus {
        self.driver.status()
    }

    /// The election timeout Raft is waiting out now, in ticks (drawn from the seed).
    pub fn election_timeout_ticks(&self) -> usize {
        self.driver.raw.raft.randomized_election_timeout()
    }

    /// Injects a bug for the simulation to catch: every replica answers reads from its local
    /// state at once, without being the leader or confirming a read index.
    pub fn inject_local_reads(&mut self, on: bool) {
        self.driver.local_reads = on;
    }
}
