//! Operations on ranges: recovering a dead range server's ranges into live ones, moving a
//! range between servers, and the balancer that chooses moves.

use std::collections::BTreeMap;

use common::{ErrorKind, TableSchema};
use dfs_broker::BlockingFs;
use proto::ClientError;
use proto::layout::*;
use rangeserver::meta::{MetaState, RangeRecord};

use crate::balance::{Reason, ServerView, decide};
use crate::ops::Operation;
use crate::{Master, Result, rs_err, unavailable};

impl Master {
    /// Logs and runs the recovery of `location`, unless one is logged already.
    pub(crate) async fn start_recovery(&mut self, location: &str) -> Result<()> {
        for (_, op) in self.pending_ops().await? {
            if matches!(&op, Operation::Recover { location: l, .. } if l == location) {
                return Ok(());
            }
        }
        self.start_op(Operation::Recover {
            location: location.to_string(),
            plan: Vec::new(),
        })
        .await
    }

    /// The meta-log state a (dead) range server left on the shared file system.
    async fn dead_state(&self, location: &str) -> Result<MetaState> {
        let fs = BlockingFs::new(self.fs.clone(), tokio::runtime::Handle::current());
        let root = server_root(location);
        let dir = format!("{root}/meta");
        let exists = {
            let (fs, root) = (fs.clone(), root.clone());
            tokio::task::spawn_blocking(move || fs.exists(&root))
                .await
                .map_err(|e| unavailable(format!("recovery task failed: {e}")))?
        };
        if !exists.map_err(|e| storage(format!("{root}: {e}")))? {
            // It died before it wrote anything.
            return Ok(MetaState::default());
        }
        tokio::task::spawn_blocking(move || rangeserver::meta::read_state(&fs, &dir))
            .await
            .map_err(|e| unavailable(format!("recovery task failed: {e}")))?
            .map_err(|e| storage(format!("cannot read the meta log of {location}: {e}")))
    }

    /// Runs a `Recover` or `Move` operation; may update it (and save it) as steps finish.
    pub(crate) async fn run_range_op(&mut self, seq: u64, op: &mut Operation) -> Result<()> {
        match op {
            Operation::Recover { location, plan } => {
                let location = location.clone();
                let mut p = std::mem::take(plan);
                let r = self.recover(seq, &location, &mut p).await;
                *plan = p;
                r
            }
            Operation::Move { .. } => self.move_range(seq, op).await,
            _ => Ok(()),
        }
    }

    async fn recover(
        &mut self,
        seq: u64,
        location: &str,
        plan: &mut Vec<(u32, Option<Vec<u8>>, String)>,
    ) -> Result<()> {
        let started = self.clock.now();
        if self.servers.get(location).is_some_and(|s| s.live) {
            // Its ranges may still be served and written there: they are taken only once its
            // Hyperspace lock is gone (`refresh_servers` notices that and marks it dead).
            return Err(unavailable(format!(
                "range server {location} still holds its lock; its recovery waits until it loses it"
            )));
        }
        let state = self.dead_state(location).await?;
        let mut items: Vec<(TableSchema, RangeRecord)> = Vec::new();
        for rec in state.ranges.values() {
            // A table dropped since has nothing to recover.
            if let Some(schema) = self.schema(rec.table_id).await? {
                items.push((schema, rec.clone()));
            }
        }
        // METADATA first: the other ranges' rows are written to it.
        items.sort_by_key(|(s, _)| s.id != METADATA_ID);
        let mut changed = false;
        if plan.is_empty() && !items.is_empty() {
            let mut load: BTreeMap<String, usize> = self
                .servers
                .iter()
                .filter(|(l, s)| s.live && *l != location)
                .map(|(l, s)| (l.clone(), s.ranges.len()))
                .collect();
            if load.is_empty() {
                return Err(unavailable(format!(
                    "no live range server to take the ranges of {location}"
                )));
            }
            // METADATA's ranges (one, unless a database from before it was kept whole split
            // it) all go to one server: `/ht/root` names one holder.
            let mut metadata_target: Option<String> = None;
            for (_, rec) in &items {
                if rec.table_id == METADATA_ID
                    && let Some(t) = &metadata_target
                {
                    plan.push((rec.table_id, rec.end_row.clone(), t.clone()));
                    continue;
                }
                let (target, n) = load
                    .iter_mut()
                    .min_by_key(|(l, n)| (**n, (*l).clone()))
                    .expect("not empty");
                *n += 1;
                if rec.table_id == METADATA_ID {
                    metadata_target = Some(target.clone());
                }
                plan.push((rec.table_id, rec.end_row.clone(), target.clone()));
            }
            changed = true;
        }
        // A target that died since the plan was made: what it recovered is recovered with it;
        // what it did not goes elsewhere.
        for entry in plan.iter_mut() {
            let target = entry.2.clone();
            if target.is_empty()
                || (target != location && self.servers.get(&target).is_some_and(|s| s.live))
            {
                continue;
            }
            // (A plan naming the recovered server itself, as an earlier master could make while
            // it still counted as live, is made again: its meta log holds the range anyway.)
            let theirs = if target == location {
                MetaState::default()
            } else {
                self.dead_state(&target).await?
            };
            if theirs
                .ranges
                .values()
                .any(|r| r.table_id == entry.0 && r.end_row == entry.1)
            {
                entry.2 = String::new();
            } else {
                entry.2 = self
                    .least_loaded(Some(location))
                    .ok_or_else(|| unavailable("no live range server".into()))?;
            }
            changed = true;
        }
        if changed {
            self.save_op(
                seq,
                &Operation::Recover {
                    location: location.to_string(),
                    plan: plan.clone(),
                },
            )
            .await?;
        }
        let dead_root = server_root(location);
        // Group the work by target, METADATA's own batch first.
        let mut batches: Vec<(String, Vec<(TableSchema, RangeRecord)>)> = Vec::new();
        for (schema, rec) in items {
            let Some((_, _, target)) = plan
                .iter()
                .find(|(t, e, _)| *t == rec.table_id && *e == rec.end_row)
            else {
                continue;
            };
            if target.is_empty() {
                continue;
            }
            let meta = schema.id == METADATA_ID;
            match batches
                .iter_mut()
                .find(|(l, b)| l == target && !meta && b.iter().all(|(s, _)| s.id != METADATA_ID))
            {
                Some((_, b)) => b.push((schema, rec)),
                None => batches.push((target.clone(), vec![(schema, rec)])),
            }
        }
        let mut ranges = 0;
        for (target, batch) in batches {
            let root = dead_root.clone();
            let items: Vec<_> = batch.iter().map(|(s, r)| (s.clone(), r.into())).collect();
            self.on_server(
                &target,
                |c| async move { c.recover_ranges(&root, &items).await },
            )
            .await?
            .map_err(|e| rs_err(&target, e))?;
            for (schema, rec) in &batch {
                self.metadata_put(
                    schema.id,
                    rec.start_row.as_deref(),
                    rec.end_row.as_deref(),
                    &target,
                )
                .await?;
                if let Some(s) = self.servers.get_mut(&target) {
                    s.ranges
                        .push((schema.id, rec.start_row.clone(), rec.end_row.clone()));
                }
                ranges += 1;
            }
        }
        // Done: the dead server is retired (its root is never opened again; its files stay
        // while recovered ranges use its cell stores: garbage collection removes them, `gc`),
        // and its lock file goes.
        self.touch(&retired_node(location)).await?;
        if let Some(s) = self.servers.remove(location) {
            let _ = self.hs.release(s.handle).await;
            let _ = self.hs.close(s.handle).await;
        }
        self.delete_if_exists(&server_node(location)).await?;
        self.count(crate::RECOVERIES).await;
        tracing::info!(
            server = location,
            ranges,
            seconds = self
                .clock
                .now()
                .saturating_duration_since(started)
                .as_secs_f64(),
            "recovery finished"
        );
        Ok(())
    }

    async fn move_range(&mut self, seq: u64, op: &mut Operation) -> Result<()> {
        let Operation::Move {
            table_id,
            start_row,
            end_row,
            from,
            record_json,
            ..
        } = op
        else {
            return Ok(());
        };
        let (table_id, start_row, end_row) = (*table_id, start_row.clone(), end_row.clone());
        let Some(schema) = self.schema(table_id).await? else {
            return Ok(()); // dropped meanwhile
        };
        if record_json.is_none() {
            if !self.servers.get(from.as_str()).is_some_and(|s| s.live) {
                // Its recovery takes the range wherever it goes.
                return Ok(());
            }
            let (f, end) = (from.clone(), end_row.clone());
            match self
                .on_server(&f, |c| async move {
                    c.unload_range(table_id, end.as_deref()).await
                })
                .await?
            {
                Ok(rec) => {
                    let rec = rangeserver::meta::RangeRecord::from(rec);
                    *record_json = Some(
                        serde_json::to_string(&rec)
                            .map_err(|e| storage(format!("cannot encode a range record: {e}")))?,
                    );
                    self.save_op(seq, op).await?;
                }
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidInput) => {
                    tracing::warn!(table = table_id, server = f, error = %e, "range to move is not there; move dropped");
                    return Ok(());
                }
                Err(e) => return Err(rs_err(&f, e)),
            }
        }
        let Operation::Move {
            from,
            to,
            record_json: Some(json),
            ..
        } = op
        else {
            return Ok(());
        };
        let from = from.clone();
        let rec: RangeRecord = serde_json::from_str(json)
            .map_err(|e| storage(format!("bad range record in a move operation: {e}")))?;
        if !self.servers.get(to.as_str()).is_some_and(|s| s.live) {
            *to = self
                .least_loaded(None)
                .ok_or_else(|| unavailable("no live range server".into()))?;
            let op2 = op.clone();
            self.save_op(seq, &op2).await?;
        }
        let Operation::Move { to, .. } = op else {
            return Ok(());
        };
        let to = to.clone();
        let (s, r) = (schema.clone(), (&rec).into());
        let adopted = self
            .on_server(&to, |c| async move { c.adopt_range(&s, &r).await })
            .await?;
        if let Err(e) = adopted {
            // Adopted before a crash of the master: the range is there already, with both its
            // bounds (a range that only ends where this one does is another range).
            let end = end_row.clone();
            let held = self
                .on_server(&to, |c| async move { c.ranges(table_id).await })
                .await?
                .map_err(|e| rs_err(&to, e))?;
            if !held
                .iter()
                .any(|r| r.end_row == end && r.start_row == start_row)
            {
                return Err(rs_err(&to, e));
            }
        }
        self.metadata_put(table_id, start_row.as_deref(), end_row.as_deref(), &to)
            .await?;
        if let Some(s) = self.servers.get_mut(&from) {
            s.ranges.retain(|r| !(r.0 == table_id && r.2 == end_row));
        }
        if let Some(s) = self.servers.get_mut(&to) {
            s.ranges.push((table_id, start_row, end_row));
        }
        self.count(crate::MOVES).await;
        Ok(())
    }

    /// Starts the move the balancer wants (`balance::decide`: even counts, then even load),
    /// if any. Returns whether it started one.
    pub(crate) async fn balance_step(&mut self) -> Result<bool> {
        let views: Vec<ServerView> = self
            .servers
            .iter()
            .filter(|(_, s)| s.live)
            .map(|(l, s)| ServerView {
                location: l.clone(),
                ranges: s
                    .ranges
                    .iter()
                    .filter(|r| r.0 != METADATA_ID)
                    .map(|r| (r.clone(), self.load.rate(r)))
                    .collect(),
            })
            .collect();
        let load_allowed = self.load_cooldown.allows(self.load_policy.cooldown);
        let Some(d) = decide(&views, &self.load_policy, load_allowed) else {
            return Ok(false);
        };
        let (table_id, start_row, end_row) = d.range;
        tracing::info!(
            table = table_id,
            from = d.from,
            to = d.to,
            reason = ?d.reason,
            "balancing: moving a range"
        );
        if d.reason == Reason::Load {
            self.load_cooldown.moved();
        }
        self.start_op(Operation::Move {
            table_id,
            start_row,
            end_row,
            from: d.from,
            to: d.to,
            record_json: None,
        })
        .await?;
        Ok(true)
    }
}

fn storage(message: String) -> ClientError {
    ClientError::storage(ErrorKind::Internal, message)
}
