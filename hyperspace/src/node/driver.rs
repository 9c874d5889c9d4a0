//! The driver: one replica's Raft event loop (tick / step / ready), proposals, applying
//! committed entries, snapshots and log compaction.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use prost::Message as _;
use raft::prelude::{ConfState, Entry, EntryType, Message, Snapshot};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use crate::command::{Command, ErrorCode, Op, Response};
use crate::state::StateMachine;
use crate::storage::{DiskStorage, StorageError};

use super::dir_lock::lock_dir;
use super::handle::Input;
use super::membership::{MEMBERS_FILE, load_members, save_members};
use super::read_index::{ReadKind, fail_read};
use super::{NodeConfig, NodeError, NodeStatus, Reply, Transport};

/// The snapshot data: the state machine plus the member addresses (which a replica restored
/// from a snapshot could not learn from log entries the snapshot replaced).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NodeSnapshot {
    #[prost(bytes = "vec", tag = "1")]
    state: Vec<u8>,
    #[prost(btree_map = "uint64, string", tag = "2")]
    members: BTreeMap<u64, String>,
}

pub(super) struct Pending<T> {
    pub(super) reply: Reply<T>,
    pub(super) deadline: Instant,
    /// The term it was proposed in: an entry answers it only if it has this term (proposal
    /// numbers restart with the process, so an older incarnation's entry may carry the same).
    pub(super) term: u64,
}

pub(crate) struct Driver {
    pub(super) id: u64,
    pub(super) config: NodeConfig,
    pub(crate) raw: RawNode<DiskStorage>,
    pub(super) storage: DiskStorage,
    pub(super) state: StateMachine,
    pub(super) members: BTreeMap<u64, String>,
    pub(super) transport: Arc<dyn Transport>,
    pub(super) applied: u64,
    pub(super) applied_tx: watch::Sender<u64>,
    pub(super) leader: Arc<Mutex<Option<(u64, String)>>>,
    pub(super) role: StateRole,
    pub(super) next_ctx: u64,
    pub(super) proposals: HashMap<u64, Pending<Response>>,
    pub(super) member_changes: HashMap<u64, Pending<()>>,
    /// Reads waiting for their read index to be confirmed.
    pub(super) reads: HashMap<u64, (ReadKind, Instant)>,
    /// Reads whose index is known, waiting for `applied` to reach it.
    pub(super) ready_reads: VecDeque<(u64, ReadKind)>,
    /// Reads asked before this leader committed an entry of its term, which raft-rs drops
    /// without a word: asked again once it has.
    pub(super) deferred_reads: Vec<u64>,
    /// Leader only: when each session's lease ends.
    pub(super) leases: HashMap<u64, Instant>,
    /// Leader only: sessions with an `ExpireSession` in flight, and when it may be re-proposed.
    pub(super) expiring: HashMap<u64, Instant>,
    /// Leader only: the highest `AckEvents` proposed per session (one proposal per progress).
    pub(super) acks_proposed: HashMap<u64, u64>,
    /// Compact at the end of this round whatever the log's length (a replica was added).
    pub(super) compact_now: bool,
    pub(super) stopping: Option<oneshot::Sender<()>>,
    pub(super) snapshots_installed: u64,
    /// Held (flock) while the replica runs: one process per replica directory.
    pub(super) _dir_lock: std::fs::File,
    /// Draws Raft's randomized election timeouts, seeded from the config (see
    /// [`Driver::pin_election_timeout`]).
    pub(super) election_rng: StdRng,
    /// The range raft-rs draws election timeouts from, `[min, max)` ticks.
    pub(super) election_range: (usize, usize),
    /// A deliberate bug for the simulation to catch (`sim::SimReplica::inject_local_reads`):
    /// answer reads at once from local state, on any replica, without a read index.
    pub(crate) local_reads: bool,
}

pub(super) fn ctx_bytes(node: u64, n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&node.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    v
}

pub(super) fn parse_ctx(ctx: &[u8]) -> Option<(u64, u64)> {
    if ctx.len() != 16 {
        return None;
    }
    let node = u64::from_le_bytes(ctx[..8].try_into().ok()?);
    let n = u64::from_le_bytes(ctx[8..].try_into().ok()?);
    Some((node, n))
}

/// Routes raft-rs's slog records to `tracing` (raft is chatty at info: that goes to debug).
pub(super) struct TracingDrain {
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

impl Driver {
    pub(crate) fn open(
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
        let election_range = (
            raft_config.min_election_tick(),
            raft_config.max_election_tick(),
        );
        let mut raw = RawNode::new(&raft_config, storage.clone(), &logger)?;
        // A group of one need not wait out an election timeout (the embedded database opens
        // with no delay).
        let voters = raw.raft.prs().conf().voters().ids();
        if voters.len() == 1 && voters.contains(config.id) {
            raw.campaign()?;
        }
        let _ = applied_tx.send(applied);
        info!(replica = config.id, applied, members = ?members, "hyperspace replica opened");
        let mut driver = Driver {
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
            election_rng: StdRng::seed_from_u64(config.seed),
            election_range,
            local_reads: false,
            _dir_lock: dir_lock,
            config,
        };
        driver.pin_election_timeout();
        Ok(driver)
    }

    pub(super) async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
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
                    self.tick();
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

    pub(crate) fn handle(&mut self, input: Input) {
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
        self.pin_election_timeout();
    }

    pub(super) fn not_leader(&self) -> NodeError {
        NodeError::NotLeader {
            leader: self.leader.lock().clone(),
        }
    }

    pub(super) fn propose(&mut self, cmd: Command, reply: Reply<Response>) {
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
                        deadline: self.now() + self.config.request_timeout,
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
    pub(super) fn propose_internal(&mut self, op: Op) {
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

    pub(crate) fn status(&self) -> NodeStatus {
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

    /// The time, from the configured clock.
    pub(super) fn now(&self) -> Instant {
        self.config.clock.now()
    }

    /// One Raft tick, then the driver's own timers (deadlines, leases).
    pub(crate) fn tick(&mut self) {
        self.raw.tick();
        self.pin_election_timeout();
        self.on_tick();
    }

    /// Makes Raft's randomized election timeout come from the seeded source.
    ///
    /// raft-rs draws it from its thread RNG whenever it resets its election timer (becoming
    /// follower, pre-candidate, candidate or leader), which no seed reaches. Every such reset
    /// leaves `election_elapsed` at 0, and nothing raises it again before the next tick, so
    /// after each call into Raft (step, tick, campaign, apply) a timer at 0 gets a fresh timeout
    /// drawn here, from the same range. A timer that is at 0 because a leader's message just
    /// arrived is redrawn too: each wait is still uniform in the range, as before, and the
    /// thread RNG's draw is never read. (The alternative, a window of one tick per replica,
    /// would let two replicas with the same timeout split every vote forever.)
    pub(super) fn pin_election_timeout(&mut self) {
        if self.raw.raft.election_elapsed == 0 {
            let (min, max) = self.election_range;
            let t = self.election_rng.random_range(min..max);
            self.raw.raft.set_randomized_election_timeout(t);
        }
    }

    pub(super) fn on_tick(&mut self) {
        let now = self.now();
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
        if self.role == StateRole::Leader {
            self.expire_leases(now);
        }
    }

    pub(super) fn update_role(&mut self) {
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
            self.grant_fresh_leases();
        } else if was_leader {
            self.drop_leases();
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

    pub(super) fn send_messages(&self, msgs: Vec<Message>) {
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

    pub(crate) fn on_ready(&mut self) -> Result<(), NodeError> {
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
        self.pin_election_timeout();
        self.update_role();
        self.serve_reads();
        self.maybe_compact()?;
        Ok(())
    }

    pub(super) fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), NodeError> {
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

    pub(super) fn set_applied(&mut self, index: u64) {
        self.applied = index;
        let _ = self.applied_tx.send(index);
    }

    pub(super) fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), NodeError> {
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

    pub(super) fn apply_normal(&mut self, entry: &Entry) {
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

    pub(super) fn maybe_compact(&mut self) -> Result<(), NodeError> {
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

    pub(super) fn fail_all(&mut self, err: impl Fn() -> NodeError) {
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

pub(super) fn clone_err(e: &NodeError) -> NodeError {
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
