//! The `Master` and its control loop: DDL requests, the periodic look at the cluster, jeopardy
//! and expiry of its session, and the logged operations it runs one at a time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::ErrorKind;
use common::time::Clock;
use dfs_broker::Fs;
use hyperspace::client::{Hyperspace, SessionState};
use proto::layout::*;
use proto::rs::client::RangeServerClient;
use rpc::ClusterCredentials;
use tokio::sync::{mpsc, watch};

use crate::balance;
use crate::ddl::{DDL_RETRY, MAX_WAITING_DDL, WaitingDdl};
use crate::ops::{Operation, op_node};
use crate::servers::ServerEntry;
use crate::{Answer, Request, Responder, Result, hs_err, unavailable};

/// What the request that started `op` is answered once `op` finishes.
fn answer_of(op: &Operation) -> Answer {
    match op {
        Operation::CreateTable { schema, .. } | Operation::AlterTable { schema } => {
            Answer::Schema(schema.clone())
        }
        _ => Answer::Done,
    }
}

pub(crate) struct Master {
    pub(crate) hs: Hyperspace,
    pub(crate) credentials: ClusterCredentials,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) servers: BTreeMap<String, ServerEntry>,
    pub(crate) clients: HashMap<String, Arc<RangeServerClient>>,
    pub(crate) auto_balance: bool,
    pub(crate) load_policy: balance::LoadPolicy,
    /// Rates of the ranges, from the counters the servers report.
    pub(crate) load: balance::LoadMeter,
    /// When a load move may start again.
    pub(crate) load_cooldown: balance::LoadCooldown,
    /// The clock every "now" of the control loop is read from (`MasterConfig::clock`).
    pub(crate) clock: Arc<dyn Clock>,
    /// The kinds schemas are checked with (`MasterConfig::registry`).
    pub(crate) registry: Arc<rangeserver::iterators::Registry>,
    /// Set by `start_op` when the operation it logged stopped at a retryable error: its
    /// sequence number and the answer its request gets once it finishes.
    pub(crate) deferred: Option<(u64, Answer)>,
    pub(crate) waiting: Vec<WaitingDdl>,
    /// How often the garbage collection of shared stores runs (`MasterConfig::gc_interval`).
    pub(crate) gc_interval: Option<Duration>,
    /// When its last round started.
    pub(crate) gc_last: Option<std::time::Instant>,
}

impl Master {
    pub(crate) async fn control_loop(
        &mut self,
        mut rx: mpsc::Receiver<(Request, Responder)>,
        poll: Duration,
        stop: &mut watch::Receiver<bool>,
        state: &mut watch::Receiver<SessionState>,
    ) -> Result<()> {
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry = tokio::time::interval(DDL_RETRY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                changed = state.changed() => {
                    if changed.is_err() {
                        return Err(unavailable("hyperspace session gone: this master stops".into()));
                    }
                    // In jeopardy another master may get the lock any moment: do nothing until
                    // the session is safe again; expired: stop.
                    loop {
                        let s = *state.borrow_and_update();
                        match s {
                            SessionState::Safe => break,
                            SessionState::Expired => {
                                return Err(unavailable(
                                    "hyperspace session expired: this master stops".into(),
                                ));
                            }
                            SessionState::Jeopardy => {
                                tracing::warn!("hyperspace session in jeopardy: master paused");
                                if state.changed().await.is_err() {
                                    return Err(unavailable(
                                        "hyperspace session gone: this master stops".into(),
                                    ));
                                }
                            }
                        }
                    }
                }
                req = rx.recv() => {
                    let Some((req, respond)) = req else { return Ok(()) };
                    let ddl = matches!(
                        req,
                        Request::CreateTable(..)
                            | Request::AlterTable(..)
                            | Request::RenameTable(..)
                            | Request::DropTable(..)
                    );
                    self.deferred = None;
                    let answer = self.handle(req).await;
                    match (answer, self.deferred.take()) {
                        (Err(e), Some((seq, answer)))
                            if ddl
                                && e.kind() == ErrorKind::Unavailable
                                && self.waiting.len() < MAX_WAITING_DDL =>
                        {
                            tracing::info!(seq, error = %e, "operation logged, not finished yet: its request waits");
                            self.waiting.push(WaitingDdl {
                                seq,
                                answer,
                                respond,
                                since: self.clock.now(),
                                last_error: e,
                            });
                        }
                        (answer, _) => {
                            let _ = respond.send(answer);
                        }
                    }
                }
                _ = retry.tick(), if !self.waiting.is_empty() => {
                    self.retry_waiting().await;
                }
                _ = tick.tick() => {
                    if let Err(e) = self.look().await {
                        tracing::warn!(error = %e, "master: periodic work failed; will retry");
                    }
                }
            }
        }
    }

    /// The periodic work: servers, recoveries, pending operations, METADATA, balance, garbage
    /// collection of shared stores.
    async fn look(&mut self) -> Result<()> {
        self.refresh_servers().await?;
        self.run_pending_ops().await?;
        if !self.root_assigned().await? {
            let pending = self
                .pending_ops()
                .await?
                .iter()
                .any(|(_, op)| matches!(op, Operation::Bootstrap { .. }));
            if !pending && let Some(loc) = self.least_loaded(None) {
                self.start_op(Operation::Bootstrap { location: loc })
                    .await?;
            }
            return Ok(());
        }
        self.poll_ranges().await?;
        if self.auto_balance {
            self.balance_step().await?;
        }
        self.gc_step().await
    }

    async fn handle(&mut self, req: Request) -> Result<Answer> {
        match req {
            Request::CreateNamespace(p) => self.create_namespace(&p).await.map(|_| Answer::Done),
            Request::DropNamespace(p) => self.drop_namespace(&p).await.map(|_| Answer::Done),
            Request::CreateTable(p, s, splits) => {
                self.create_table(&p, s, splits).await.map(Answer::Schema)
            }
            Request::AlterTable(p, s) => self.alter_table(&p, s).await.map(Answer::Schema),
            Request::RenameTable(f, t) => self.rename_table(&f, &t).await.map(|_| Answer::Done),
            Request::DropTable(p) => self.drop_table(&p).await.map(|_| Answer::Done),
            Request::Balance => {
                self.refresh_servers().await?;
                self.poll_ranges().await?;
                while self.balance_step().await? {}
                Ok(Answer::Done)
            }
            Request::Status => Ok(Answer::Status(self.status().await?)),
            Request::Look => self.look().await.map(|_| Answer::Done),
        }
    }

    /// Logs an operation and runs it; if a step fails for want of a server, it stays logged
    /// and the next look runs it again.
    pub(crate) async fn start_op(&mut self, op: Operation) -> Result<()> {
        let seq = self.hs.attr_incr(OPS, "next_op", 1).await.map_err(hs_err)? as u64;
        let node = op_node(seq);
        self.touch(&node).await?;
        self.hs
            .attr_set(node.as_str(), OP_ATTR, op.to_json())
            .await
            .map_err(hs_err)?;
        tracing::info!(op = op.describe(), seq, "operation logged");
        let answer = answer_of(&op);
        let result = self.run_op(seq, op).await;
        if result.is_err() {
            // Logged: it finishes later; its request may wait for that (`control_loop`).
            self.deferred = Some((seq, answer));
        }
        result
    }

    pub(crate) async fn save_op(&self, seq: u64, op: &Operation) -> Result<()> {
        self.hs
            .attr_set(op_node(seq).as_str(), OP_ATTR, op.to_json())
            .await
            .map_err(hs_err)
    }

    pub(crate) async fn pending_ops(&self) -> Result<Vec<(u64, Operation)>> {
        let mut out = Vec::new();
        for e in self.hs.readdir(OPS).await.map_err(hs_err)? {
            let Ok(seq) = e.name.parse::<u64>() else {
                continue;
            };
            let Some(json) = self.attr(&op_node(seq), OP_ATTR).await? else {
                continue;
            };
            match Operation::from_json(&json) {
                Ok(op) => out.push((seq, op)),
                Err(err) => tracing::error!(seq, error = %err, "unreadable operation left alone"),
            }
        }
        Ok(out)
    }

    /// Runs the logged operations in order, stopping at the first that cannot finish yet, but
    /// for recoveries: they run even behind a blocked operation, which may be waiting for
    /// exactly them (a move whose METADATA range was on the server that died with it).
    async fn run_pending_ops(&mut self) -> Result<()> {
        let mut blocked = false;
        for (seq, op) in self.pending_ops().await? {
            if blocked && !matches!(op, Operation::Recover { .. }) {
                continue;
            }
            if let Err(e) = self.run_op(seq, op.clone()).await {
                tracing::info!(op = op.describe(), error = %e, "operation not finished yet");
                blocked = true;
            }
        }
        Ok(())
    }

    pub(crate) async fn run_op(&mut self, seq: u64, mut op: Operation) -> Result<()> {
        match &mut op {
            Operation::Bootstrap { location } => {
                let location = location.clone();
                self.bootstrap(&location).await?;
            }
            Operation::CreateTable {
                path,
                schema,
                location,
                splits,
                locations,
            } => {
                let (path, schema, splits) = (path.clone(), schema.clone(), splits.clone());
                let n = splits.len() + 1;
                let chosen: Vec<String> = if splits.is_empty() {
                    location.iter().cloned().collect()
                } else {
                    locations.clone()
                };
                let live = |l: &String| self.servers.get(l).is_none_or(|s| s.live);
                let locs = if chosen.len() == n && chosen.iter().all(live) {
                    chosen
                } else {
                    // Chosen once and logged, so a retry puts each range where the first
                    // attempt may already have created it; only the ranges of servers that
                    // died since are placed again.
                    let fresh = self.spread(n);
                    if fresh.is_empty() {
                        return Err(unavailable("no live range server".into()));
                    }
                    let l: Vec<String> = if chosen.len() == n {
                        chosen
                            .into_iter()
                            .zip(fresh)
                            .map(|(c, f)| if live(&c) { c } else { f })
                            .collect()
                    } else {
                        fresh
                    };
                    *location = Some(l[0].clone());
                    if !splits.is_empty() {
                        *locations = l.clone();
                    }
                    self.save_op(seq, &op).await?;
                    l
                };
                self.create_table_steps(&path, &schema, &splits, &locs)
                    .await?;
            }
            Operation::AlterTable { schema } => {
                let schema = schema.clone();
                self.push_schema(&schema).await?;
            }
            Operation::RenameTable { from, to, id } => {
                let (from, to, id) = (from.clone(), to.clone(), *id);
                self.rename_steps(&from, &to, id).await?;
            }
            Operation::DropTable { path, id } => {
                let (path, id) = (path.clone(), *id);
                self.drop_steps(&path, id).await?;
            }
            Operation::Recover { .. } | Operation::Move { .. } => {
                self.run_range_op(seq, &mut op).await?;
            }
        }
        self.delete_if_exists(&op_node(seq)).await?;
        tracing::info!(op = op.describe(), seq, "operation done");
        Ok(())
    }
}
