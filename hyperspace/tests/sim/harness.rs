//! The simulation harness: Hyperspace replicas (the real driver, state machine and disk storage
//! on a temporary directory, through `hyperspace::sim::SimReplica`) over an in-memory network
//! that can cut a link, isolate a replica and drop messages, on a `ManualClock`, in one thread.
//!
//! Every choice (which message is delivered next, which is dropped, which client moves, which
//! replica is isolated or restarted and for how long, how far the clock moves) is drawn from one
//! `StdRng` seeded by `SimOptions::seed`, and nothing else varies between runs (the driver's
//! election timeouts come from seeds derived from it, its expiries are proposed in a fixed
//! order, raft-rs iterates its fxhash maps deterministically), so a run replays from its seed:
//! the trace hash of two runs of a seed is the same.
//!
//! Clients follow the real client's protocol (session, sequence numbers retried after a lost
//! answer, leader hints, keep-alives) as explicit state machines: open a session, take the one
//! exclusive lock, write their attribute, increment the counter, read it, release; through
//! leader isolations, cut links and restarts. What they see is checked with the lock-history
//! checker of `ht/tests/hyperspace.rs` (`testsupport/lock_history.rs`) after every answer.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::time::{Clock, ManualClock};
use hyperspace::command::{self, Command, ErrorCode, LockMode, LockStatus, Op, Reply, Response};
use hyperspace::command::{event_mask, flags};
use hyperspace::node::{KeepAlive, NodeConfig, NodeError, Transport};
use hyperspace::sim::{Answer, SimReplica};
use parking_lot::Mutex;
use raft::prelude::{Message, MessageType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::oneshot::error::TryRecvError;

use crate::lock_history::{self, CounterRead, FinalState, Hold, Summary, WorkerLog};

/// One run's settings.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    pub replicas: u64,
    pub clients: usize,
    /// Virtual time with faults; then the network heals and clients finish.
    pub run_for: Duration,
    pub lease: Duration,
    /// Messages dropped at random, per thousand (besides those on cut links).
    pub drop_per_mille: u32,
    /// The injected bug: every replica answers reads from local state, without a read index.
    pub bug_local_reads: bool,
}

impl SimOptions {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            replicas: 3,
            clients: 3,
            run_for: Duration::from_secs(30),
            lease: Duration::from_secs(6),
            drop_per_mille: 20,
            bug_local_reads: false,
        }
    }
}

/// How a run went.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub steps: u64,
    pub trace_hash: u64,
    /// The first broken rule: the step it was found at and what broke.
    pub failure: Option<(u64, String)>,
    pub summary: Option<Summary>,
    pub isolations: u32,
    pub cuts: u32,
    pub restarts: u32,
    pub leader_changes: u32,
    /// The last trace lines (for a failure message).
    pub recent: Vec<String>,
}

/// A transport that puts what a replica sends into the shared outbox.
struct Wire {
    from: u64,
    outbox: Arc<Mutex<Vec<(u64, u64, Message)>>>,
}

impl Transport for Wire {
    fn send(&self, to: u64, _addr: &str, msgs: Vec<Message>) {
        let mut out = self.outbox.lock();
        for m in msgs {
            out.push((self.from, to, m));
        }
    }
}

/// The trace: a hash of every event (FNV-1a, stable across runs and platforms) and the last few.
struct Trace {
    hash: u64,
    recent: VecDeque<String>,
    /// `HT_SIM_TRACE=1` prints every event to stderr.
    print: bool,
}

impl Trace {
    fn new() -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            recent: VecDeque::new(),
            print: std::env::var_os("HT_SIM_TRACE").is_some(),
        }
    }

    fn record(&mut self, step: u64, elapsed: Duration, line: String) {
        let line = format!("{step} {}ms {line}", elapsed.as_millis());
        for b in line.bytes().chain([b'\n']) {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
        if self.print {
            eprintln!("{line}");
        }
        if self.recent.len() == 40 {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }
}

#[derive(Debug, Clone, Copy)]
#[expect(
    dead_code,
    reason = "the replicas named are read in the trace, through Debug"
)]
enum Impairment {
    Isolated(u64),
    Cut(u64, u64),
    Down(u64),
}

/// Everything but the clients: replicas, network, clock, random source, trace.
struct World {
    opts: SimOptions,
    rng: StdRng,
    clock: Arc<ManualClock>,
    root: PathBuf,
    replicas: Vec<Option<SimReplica>>,
    incarnations: Vec<u64>,
    next_tick: Vec<Instant>,
    outbox: Arc<Mutex<Vec<(u64, u64, Message)>>>,
    in_flight: Vec<(u64, u64, Message)>,
    cut: BTreeSet<(u64, u64)>,
    impairment: Option<(Impairment, Instant)>,
    next_fault: Instant,
    faults_on: bool,
    step: u64,
    trace: Trace,
    leaders: Vec<u64>,
    report: Report,
}

const TICK: Duration = Duration::from_millis(100);

impl World {
    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn trace(&mut self, line: String) {
        let elapsed = self.clock.elapsed();
        self.trace.record(self.step, elapsed, line);
    }

    fn config(&self, id: u64) -> NodeConfig {
        let members = (1..=self.opts.replicas)
            .map(|i| (i, format!("sim-{i}")))
            .collect();
        let mut c = NodeConfig::new(id, self.root.join(format!("r{id}")), members);
        c.storage.sync = false;
        c.snapshot_entries = 200;
        c.clock = self.clock.clone();
        let incarnation = self.incarnations[(id - 1) as usize];
        c.seed = self.opts.seed ^ (id << 48) ^ (incarnation << 32) ^ 0x5eed;
        c
    }

    fn open(&mut self, id: u64) {
        let wire = Arc::new(Wire {
            from: id,
            outbox: self.outbox.clone(),
        });
        let mut r = SimReplica::open(self.config(id), wire).expect("open a simulated replica");
        r.inject_local_reads(self.opts.bug_local_reads);
        let phase = Duration::from_millis(self.rng.random_range(0..100));
        self.next_tick[(id - 1) as usize] = self.now() + phase;
        self.replicas[(id - 1) as usize] = Some(r);
    }

    fn replica(&mut self, id: u64) -> Option<&mut SimReplica> {
        self.replicas
            .get_mut((id.checked_sub(1)?) as usize)
            .and_then(|r| r.as_mut())
    }

    fn random_replica(&mut self) -> u64 {
        self.rng.random_range(1..=self.opts.replicas)
    }

    /// The replica that calls itself leader with the highest term, if any.
    fn leader(&self) -> Option<u64> {
        self.replicas
            .iter()
            .flatten()
            .filter(|r| r.is_leader())
            .max_by_key(|r| r.term())
            .map(|r| r.status().id)
    }

    fn ready_all(&mut self) {
        for i in 0..self.replicas.len() {
            if let Some(r) = self.replicas[i].as_mut() {
                r.ready().expect("a simulated replica's ready round");
            }
        }
        let sent = std::mem::take(&mut *self.outbox.lock());
        self.in_flight.extend(sent);
        let leaders: Vec<u64> = self
            .replicas
            .iter()
            .flatten()
            .filter(|r| r.is_leader())
            .map(|r| r.status().id)
            .collect();
        if leaders != self.leaders {
            self.report.leader_changes += 1;
            self.trace(format!("leaders {leaders:?}"));
            self.leaders = leaders;
        }
    }

    fn tick_due(&mut self) {
        let now = self.now();
        for i in 0..self.replicas.len() {
            if self.replicas[i].is_some() && now >= self.next_tick[i] {
                self.next_tick[i] += TICK;
                if let Some(r) = self.replicas[i].as_mut() {
                    r.tick();
                }
            }
        }
    }

    fn linked(&self, a: u64, b: u64) -> bool {
        !self.cut.contains(&(a.min(b), a.max(b)))
    }

    /// Delivers (or drops) one message in flight, chosen at random.
    fn deliver(&mut self) {
        let i = self.rng.random_range(0..self.in_flight.len());
        let (from, to, msg) = self.in_flight.swap_remove(i);
        let kind = msg.get_msg_type();
        let dropped = !self.linked(from, to)
            || self.rng.random_ratio(self.opts.drop_per_mille, 1000)
            || self.replica(to).is_none();
        self.trace(format!(
            "{} {from}->{to} {kind:?} t{} i{}",
            if dropped { "drop" } else { "deliver" },
            msg.term,
            msg.index
        ));
        if !dropped && let Some(r) = self.replica(to) {
            r.step(vec![msg]);
        }
        if kind == MessageType::MsgSnapshot
            && let Some(r) = self.replica(from)
        {
            r.report_snapshot(to, !dropped);
        } else if dropped && let Some(r) = self.replica(from) {
            r.report_unreachable(to);
        }
    }

    /// Starts or ends an impairment when one is due: one at a time, so a quorum remains.
    fn faults(&mut self) {
        let now = self.now();
        if let Some((what, until)) = self.impairment {
            if now >= until || !self.faults_on {
                self.heal(what);
                self.impairment = None;
                let gap = self.rng.random_range(500..3000);
                self.next_fault = now + Duration::from_millis(gap);
            }
            return;
        }
        if !self.faults_on || now < self.next_fault {
            return;
        }
        let roll = self.rng.random_range(0..4);
        let what = match roll {
            0 | 1 => {
                let id = match self.leader() {
                    Some(l) => l,
                    None => self.random_replica(),
                };
                for other in 1..=self.opts.replicas {
                    if other != id {
                        self.cut.insert((id.min(other), id.max(other)));
                    }
                }
                self.report.isolations += 1;
                Impairment::Isolated(id)
            }
            2 => {
                let a = self.random_replica();
                let b = a % self.opts.replicas + 1;
                self.cut.insert((a.min(b), a.max(b)));
                self.report.cuts += 1;
                Impairment::Cut(a, b)
            }
            _ => {
                let id = if self.rng.random_bool(0.5) {
                    self.leader().unwrap_or(1)
                } else {
                    self.random_replica()
                };
                // Dropped as a crash would leave it: pending answers are lost, the files stay.
                self.replicas[(id - 1) as usize] = None;
                self.report.restarts += 1;
                Impairment::Down(id)
            }
        };
        // Isolations outlast an election timeout (1 to 2 s), so that the others elect a leader.
        let ms = match what {
            Impairment::Isolated(_) => self.rng.random_range(2000..5000),
            Impairment::Cut(..) => self.rng.random_range(500..4000),
            Impairment::Down(_) => self.rng.random_range(300..3000),
        };
        self.trace(format!("impair {what:?} for {ms}ms"));
        self.impairment = Some((what, now + Duration::from_millis(ms)));
    }

    fn heal(&mut self, what: Impairment) {
        self.trace(format!("heal {what:?}"));
        match what {
            Impairment::Isolated(_) | Impairment::Cut(..) => self.cut.clear(),
            Impairment::Down(id) => {
                self.incarnations[(id - 1) as usize] += 1;
                self.open(id);
            }
        }
    }

    /// A linearizable read at the leader with the network healed, for the final state.
    fn final_read(&mut self, op: Op) -> Response {
        let cmd = Command {
            session: 0,
            seq: 0,
            first_incomplete: 0,
            op: Some(op),
        };
        for _ in 0..200 {
            let target = match self.leader() {
                Some(l) => l,
                None => self.random_replica(),
            };
            let Some(r) = self.replica(target) else {
                continue;
            };
            let mut answer = r.read(cmd.clone());
            for _ in 0..2000 {
                self.step += 1;
                self.clock.advance(Duration::from_millis(2));
                self.tick_due();
                if !self.in_flight.is_empty() {
                    self.deliver();
                }
                self.ready_all();
                match answer.try_recv() {
                    Ok(Ok(resp)) => return resp,
                    Ok(Err(_)) | Err(TryRecvError::Closed) => break,
                    Err(TryRecvError::Empty) => {}
                }
            }
        }
        panic!("seed {}: no final read answered", self.opts.seed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Session,
    Mkdir,
    OpenData,
    OpenLock,
    Lock,
    PollLock,
    Set,
    Incr,
    ReadCounter,
    Release,
    Done,
}

/// A request being made: retried with the same seq until answered.
struct Request {
    cmd: Command,
    write: bool,
    first_sent: Instant,
    answer: Option<Answer<Response>>,
}

/// One client, following the real client's protocol step by step.
struct SimClient {
    idx: usize,
    nonce: u64,
    session: u64,
    next_seq: u64,
    target: u64,
    phase: Phase,
    request: Option<Request>,
    retry_at: Instant,
    failures: u32,
    keep_alive: Option<(Answer<KeepAlive>, Instant)>,
    next_keep_alive: Instant,
    seen: u64,
    lock_handle: u64,
    holding: Option<(u64, Instant)>,
    value: u64,
    stop: bool,
    log: WorkerLog,
}

impl SimClient {
    fn new(idx: usize, w: &mut World) -> Self {
        let now = w.now();
        Self {
            idx,
            nonce: w.rng.random::<u64>() | 1,
            session: 0,
            next_seq: 1,
            target: w.random_replica(),
            phase: Phase::Session,
            request: None,
            retry_at: now,
            failures: 0,
            keep_alive: None,
            next_keep_alive: now,
            seen: 0,
            lock_handle: 0,
            holding: None,
            value: 0,
            stop: false,
            log: WorkerLog::default(),
        }
    }

    fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// One move: look at the answers that came, or send what is next. Returns true when an
    /// answer changed the history (the caller checks it).
    fn step(&mut self, w: &mut World) -> bool {
        if self.done() {
            return false;
        }
        let mut changed = self.keep_alive(w);
        if self.done() {
            return true;
        }
        let now = w.now();
        if let Some(req) = self.request.as_mut() {
            match req.answer.as_mut().map(|a| a.try_recv()) {
                Some(Err(TryRecvError::Empty)) => return changed,
                Some(Ok(Ok(resp))) => {
                    let req = self.request.take().expect("a request is in flight");
                    self.failures = 0;
                    self.on_answer(w, req, resp);
                    return true;
                }
                Some(Ok(Err(NodeError::NotLeader { leader }))) => {
                    req.answer = None;
                    self.target = match leader {
                        Some((id, _)) if id != self.target => id,
                        _ => self.target % w.opts.replicas + 1,
                    };
                    self.retry_at = now;
                    if self.failures > 3 {
                        self.retry_at = now + backoff(w, self.failures);
                    }
                    self.failures += 1;
                    return changed;
                }
                Some(Ok(Err(_))) | Some(Err(TryRecvError::Closed)) => {
                    // Timeout, busy, or the replica went down: elsewhere, later.
                    req.answer = None;
                    self.target = w.random_replica();
                    self.retry_at = now + backoff(w, self.failures);
                    self.failures += 1;
                    return changed;
                }
                None if now < self.retry_at => return changed,
                None => {}
            }
        } else if now < self.retry_at {
            return changed;
        } else {
            self.request = self.next_request(w);
            changed = true;
        }
        self.send(w);
        changed
    }

    fn send(&mut self, w: &mut World) {
        let Some(req) = self.request.as_mut() else {
            return;
        };
        // Reads go to any replica half the time (a replica that is not the leader must
        // redirect them); writes to the replica believed to lead.
        let target = if !req.write && w.rng.random_bool(0.5) {
            w.random_replica()
        } else {
            self.target
        };
        let line = format!(
            "client {} sends {} seq {} to {target}",
            self.idx,
            req.cmd.op.as_ref().map(|o| o.name()).unwrap_or("?"),
            req.cmd.seq
        );
        let answer = w.replica(target).map(|r| {
            if req.write {
                r.propose(req.cmd.clone())
            } else {
                r.read(req.cmd.clone())
            }
        });
        if answer.is_none() {
            self.target = w.random_replica();
            self.retry_at = w.now() + backoff(w, self.failures);
            self.failures += 1;
        }
        req.answer = answer;
        w.trace(line);
    }

    fn next_request(&mut self, w: &mut World) -> Option<Request> {
        let now = w.now();
        let op = match self.phase {
            Phase::Session => Op::CreateSession(command::CreateSession {
                nonce: self.nonce,
                lease_ms: w.opts.lease.as_millis() as u64,
            }),
            Phase::Mkdir => Op::Mkdir(command::Mkdir {
                path: "/test".into(),
                parents: true,
            }),
            Phase::OpenData => Op::Open(command::Open {
                path: "/test/data".into(),
                flags: flags::CREATE | flags::WRITE | flags::READ,
                event_mask: 0,
                initial_attrs: Vec::new(),
            }),
            Phase::OpenLock => Op::Open(command::Open {
                path: "/test/lock".into(),
                flags: flags::CREATE | flags::LOCK | flags::READ,
                event_mask: 0,
                initial_attrs: Vec::new(),
            }),
            Phase::Lock => Op::Lock(command::Lock {
                handle: self.lock_handle,
                mode: LockMode::Exclusive as i32,
                try_lock: false,
            }),
            Phase::PollLock => Op::GetSequencer(command::GetSequencer {
                handle: self.lock_handle,
            }),
            Phase::Set => {
                self.value += 1;
                self.log.attempted_value = Some(self.value);
                Op::AttrSet(command::AttrSet {
                    target: Some(data_target()),
                    name: format!("w{}", self.idx),
                    value: self.value.to_string().into_bytes(),
                })
            }
            Phase::Incr => Op::AttrIncr(command::AttrIncr {
                target: Some(data_target()),
                name: "total".into(),
                delta: 1,
            }),
            Phase::ReadCounter => Op::AttrGet(command::AttrGet {
                target: Some(data_target()),
                name: "total".into(),
            }),
            Phase::Release => {
                if let Some((generation, granted)) = self.holding.take() {
                    self.log.holds.push(Hold {
                        worker: self.idx,
                        generation,
                        granted,
                        released: now,
                    });
                }
                Op::Release(command::Release {
                    handle: self.lock_handle,
                })
            }
            Phase::Done => return None,
        };
        let write = op.is_write();
        let (session, seq) = if self.phase == Phase::Session {
            (0, 0)
        } else {
            let seq = self.next_seq;
            self.next_seq += 1;
            (self.session, seq)
        };
        Some(Request {
            cmd: Command {
                session,
                seq,
                first_incomplete: seq,
                op: Some(op),
            },
            write,
            first_sent: now,
            answer: None,
        })
    }

    fn on_answer(&mut self, w: &mut World, req: Request, resp: Response) {
        let now = w.now();
        let code = resp.error_code();
        w.trace(format!(
            "client {} {:?} answered {:?} {:?}",
            self.idx, self.phase, code, resp.reply
        ));
        if code == Some(ErrorCode::SessionExpired) {
            self.expired(w);
            return;
        }
        let reply = resp.reply;
        self.phase = match (self.phase, reply) {
            (Phase::Session, Some(Reply::Session(id))) => {
                self.session = id;
                self.next_keep_alive = now;
                Phase::Mkdir
            }
            (Phase::Mkdir, _) => Phase::OpenData,
            (Phase::OpenData, Some(Reply::Handle(_))) => Phase::OpenLock,
            (Phase::OpenLock, Some(Reply::Handle(h))) => {
                self.lock_handle = h.handle;
                Phase::Lock
            }
            (Phase::Lock, Some(Reply::Lock(l))) => match LockStatus::try_from(l.status) {
                Ok(LockStatus::Granted) => self.granted(now, l.generation),
                Ok(LockStatus::Pending) => {
                    self.retry_at = now + Duration::from_millis(50);
                    Phase::PollLock
                }
                _ => Phase::Lock,
            },
            (Phase::PollLock, Some(Reply::Sequencer(s))) => self.granted(now, s.generation),
            (Phase::PollLock, _) => {
                self.retry_at = now + Duration::from_millis(50);
                Phase::PollLock
            }
            (Phase::Set, _) => {
                if code.is_none() {
                    self.log.acked_value = Some(self.value);
                }
                Phase::Incr
            }
            (Phase::Incr, Some(Reply::Int(_))) => {
                self.log.increments_acked += 1;
                self.log.increment_acks.push(now);
                Phase::ReadCounter
            }
            (Phase::Incr, _) => Phase::ReadCounter,
            (Phase::ReadCounter, Some(Reply::Value(v))) => {
                let value = v
                    .value
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                self.log.counter_reads.push(CounterRead {
                    worker: self.idx,
                    sent: req.first_sent,
                    value,
                });
                Phase::Release
            }
            (Phase::ReadCounter, _) => Phase::Release,
            (Phase::Release, _) if self.stop => Phase::Done,
            (Phase::Release, _) => Phase::Lock,
            // An answer of the wrong shape: ask again.
            (phase, _) => phase,
        };
    }

    fn granted(&mut self, now: Instant, generation: u64) -> Phase {
        self.holding = Some((generation, now));
        Phase::Set
    }

    fn expired(&mut self, w: &mut World) {
        w.trace(format!("client {} expired", self.idx));
        self.log.expired = true;
        if matches!(self.phase, Phase::Incr) {
            self.log.increments_unknown += 1;
        }
        self.phase = Phase::Done;
        self.request = None;
    }

    /// Keeps the session alive: a keep-alive every third of the lease, to the believed leader.
    fn keep_alive(&mut self, w: &mut World) -> bool {
        if self.session == 0 {
            return false;
        }
        let now = w.now();
        if let Some((answer, sent)) = self.keep_alive.as_mut() {
            let sent = *sent;
            match answer.try_recv() {
                Err(TryRecvError::Empty) => return false,
                Ok(Ok(ka)) => {
                    self.keep_alive = None;
                    if ka.lease_ms == 0 {
                        self.expired(w);
                        return true;
                    }
                    for e in &ka.events {
                        self.seen = self.seen.max(e.seq);
                        if e.kind == event_mask::LOCK_GRANTED && self.phase == Phase::PollLock {
                            self.retry_at = now;
                        }
                    }
                    self.next_keep_alive = sent + w.opts.lease / 3;
                }
                Ok(Err(NodeError::NotLeader { leader })) => {
                    self.keep_alive = None;
                    self.target = match leader {
                        Some((id, _)) => id,
                        None => w.random_replica(),
                    };
                    self.next_keep_alive = now + Duration::from_millis(20);
                }
                Ok(Err(_)) | Err(TryRecvError::Closed) => {
                    self.keep_alive = None;
                    self.target = w.random_replica();
                    self.next_keep_alive = now + Duration::from_millis(100);
                }
            }
        }
        if self.keep_alive.is_none() && now >= self.next_keep_alive {
            let (session, seen, target) = (self.session, self.seen, self.target);
            match w.replica(target) {
                Some(r) => self.keep_alive = Some((r.keep_alive(session, seen, 64), now)),
                None => {
                    self.target = w.random_replica();
                    self.next_keep_alive = now + Duration::from_millis(100);
                }
            }
        }
        false
    }
}

fn data_target() -> command::Target {
    command::Target {
        handle: 0,
        path: "/test/data".into(),
    }
}

/// The client's backoff: 20 ms doubling to 1 s, jittered from the run's random source.
fn backoff(w: &mut World, attempt: u32) -> Duration {
    let base = (20u64 << attempt.min(6)).min(1000);
    Duration::from_millis(base + w.rng.random_range(0..=base / 2))
}

/// Runs one simulation to its end (or its first broken rule).
pub fn run(opts: SimOptions) -> Report {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let n = opts.replicas as usize;
    let clock = Arc::new(ManualClock::new());
    let start = clock.now();
    let mut w = World {
        rng: StdRng::seed_from_u64(opts.seed),
        clock,
        root: tmp.path().to_path_buf(),
        replicas: (0..n).map(|_| None).collect(),
        incarnations: vec![0; n],
        next_tick: vec![start; n],
        outbox: Arc::new(Mutex::new(Vec::new())),
        in_flight: Vec::new(),
        cut: BTreeSet::new(),
        impairment: None,
        next_fault: start + Duration::from_secs(3),
        faults_on: true,
        step: 0,
        trace: Trace::new(),
        leaders: Vec::new(),
        report: Report {
            seed: opts.seed,
            steps: 0,
            trace_hash: 0,
            failure: None,
            summary: None,
            isolations: 0,
            cuts: 0,
            restarts: 0,
            leader_changes: 0,
            recent: Vec::new(),
        },
        opts,
    };
    for id in 1..=w.opts.replicas {
        w.open(id);
    }
    let mut clients: Vec<SimClient> = (0..w.opts.clients)
        .map(|i| SimClient::new(i, &mut w))
        .collect();
    let run_for = w.opts.run_for;
    let finish_by = run_for + Duration::from_secs(60);
    let mut failure = None;
    while failure.is_none() {
        w.step += 1;
        let dt = Duration::from_millis(w.rng.random_range(1..=4));
        w.clock.advance(dt);
        let elapsed = w.clock.elapsed();
        if elapsed >= run_for && w.faults_on {
            w.faults_on = false;
            for c in &mut clients {
                c.stop = true;
            }
            w.trace("stop: heal, clients finish".into());
        }
        if elapsed >= finish_by || clients.iter().all(SimClient::done) {
            break;
        }
        w.tick_due();
        w.faults();
        if !w.in_flight.is_empty() && w.rng.random_ratio(3, 5) {
            w.deliver();
        } else {
            let c = w.rng.random_range(0..clients.len());
            if clients[c].step(&mut w) {
                let logs: Vec<WorkerLog> = clients.iter().map(|c| c.log.clone()).collect();
                if let Err(e) = lock_history::check_safety(&logs) {
                    failure = Some((w.step, e));
                }
            }
        }
        w.ready_all();
    }
    if failure.is_none() {
        let logs: Vec<WorkerLog> = clients.iter().map(|c| c.log.clone()).collect();
        let mut values = Vec::new();
        for i in 0..clients.len() {
            let resp = w.final_read(Op::AttrGet(command::AttrGet {
                target: Some(data_target()),
                name: format!("w{i}"),
            }));
            values.push(parse_value(resp));
        }
        let total = w
            .final_read(Op::AttrGet(command::AttrGet {
                target: Some(data_target()),
                name: "total".into(),
            }))
            .reply;
        let total = parse_value(Response {
            reply: total,
            ..Default::default()
        })
        .unwrap_or(0);
        let end = FinalState { values, total };
        match lock_history::check(&logs, &end, 10) {
            Ok(summary) => w.report.summary = Some(summary),
            Err(e) => failure = Some((w.step, e)),
        }
    }
    if let Some((step, e)) = &failure {
        w.trace(format!("FAILED at step {step}: {e}"));
    }
    w.report.failure = failure;
    w.report.steps = w.step;
    w.report.trace_hash = w.trace.hash;
    w.report.recent = w.trace.recent.iter().cloned().collect();
    // Replicas close before their directory goes.
    w.replicas.clear();
    drop(tmp);
    w.report
}

fn parse_value(resp: Response) -> Option<u64> {
    match resp.reply {
        Some(Reply::Value(v)) => v
            .value
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.parse().ok()),
        _ => None,
    }
}
