//! Garbage collection of cell stores shared across range servers (docs/formats/cluster.md,
//! "Garbage collection of shared stores").
//!
//! No engine deletes a file outside its own root, nor a store it exported with an unloaded
//! range; a dead server's root is never opened again. So in a cluster two kinds of stores
//! outlive every range that referenced them: exported stores, once the range that took them
//! compacted them away, and the stores under a retired server's root (`/ht/retired/<location>`,
//! written when its recovery finished), once the recovered ranges compacted theirs away.
//!
//! A round runs in the control loop, so no move, recovery or DDL runs meanwhile, and only
//! when the cluster is quiet: no logged operation pending, and every server registered in
//! Hyperspace known and live (a dead server's meta log may still name stores its recovery will
//! take). It asks every live server which stores it uses (`rs.store_use`: referenced by its
//! ranges, by damaged ranges, or still open); a store none uses is garbage. Exported ones go
//! back to their exporter (`rs.release_stores`, which removes and forgets them); under a retired
//! root the master removes them itself, with the root's commit log (recovery replayed it), and
//! the whole root once nothing under it is used. Any failure ends the round with nothing more
//! removed; the next round starts over.

use std::collections::{BTreeMap, BTreeSet};

use proto::layout::*;

use crate::control::Master;
use crate::{GC_REMOVED_ROOTS, GC_REMOVED_STORES, GC_ROUNDS, Result, hs_err, rs_err, unavailable};

/// What one round did, or why it did nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GcRound {
    /// Why the round did not run (the cluster was not quiet), if it did not.
    pub(crate) skipped: Option<String>,
    pub(crate) removed_stores: u64,
    pub(crate) removed_roots: u64,
}

impl GcRound {
    fn skip(why: String) -> Self {
        GcRound {
            skipped: Some(why),
            ..Default::default()
        }
    }
}

fn fs_err(what: String) -> impl FnOnce(dfs_broker::FsError) -> proto::ClientError {
    move |e| proto::ClientError::storage(e.kind(), format!("garbage collection: {what}: {e}"))
}

impl Master {
    /// Runs a round if `MasterConfig::gc_interval` passed since the last one.
    pub(crate) async fn gc_step(&mut self) -> Result<()> {
        let Some(every) = self.gc_interval else {
            return Ok(());
        };
        let now = self.clock.now();
        if self
            .gc_last
            .is_some_and(|t| now.saturating_duration_since(t) < every)
        {
            return Ok(());
        }
        self.gc_last = Some(now);
        let round = self.collect_shared_garbage().await?;
        if let Some(why) = &round.skipped {
            tracing::debug!(why, "garbage collection of shared stores waits");
        }
        Ok(())
    }

    /// One round of the garbage collection of shared cell stores.
    pub(crate) async fn collect_shared_garbage(&mut self) -> Result<GcRound> {
        let pending = self.pending_ops().await?;
        if let Some((_, op)) = pending.first() {
            return Ok(GcRound::skip(format!(
                "an operation is pending ({})",
                op.describe()
            )));
        }
        // Every registered server must be one we know live: one we have not met yet may hold
        // nothing (servers get ranges only from the master), but a dead one awaits recovery.
        for e in self.hs.readdir(SERVERS).await.map_err(hs_err)? {
            if !self.servers.get(&e.name).is_some_and(|s| s.live) {
                return Ok(GcRound::skip(format!(
                    "range server {} is registered but not known live",
                    e.name
                )));
            }
        }
        if let Some((l, _)) = self.servers.iter().find(|(_, s)| !s.live) {
            return Ok(GcRound::skip(format!("range server {l} awaits recovery")));
        }
        let mut in_use: BTreeSet<String> = BTreeSet::new();
        let mut exported: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for location in self.live() {
            let reply = self
                .on_server(&location, |c| async move { c.store_use().await })
                .await?
                .map_err(|e| rs_err(&location, e))?;
            if reply.root != server_root(&location) {
                return Err(unavailable(format!(
                    "garbage collection: range server {location} says its root is {}, not {}",
                    reply.root,
                    server_root(&location)
                )));
            }
            in_use.extend(reply.in_use);
            exported.insert(location, reply.exported);
        }
        let mut round = GcRound::default();
        for (location, paths) in exported {
            let garbage: Vec<String> = paths.into_iter().filter(|p| !in_use.contains(p)).collect();
            if garbage.is_empty() {
                continue;
            }
            let n = garbage.len();
            let (removed, skipped) = self
                .on_server(
                    &location,
                    |c| async move { c.release_stores(garbage).await },
                )
                .await?
                .map_err(|e| rs_err(&location, e))?;
            tracing::info!(
                server = location,
                removed,
                skipped,
                of = n,
                "exported cell stores no server uses removed"
            );
            round.removed_stores += removed;
            self.count_by(GC_REMOVED_STORES, removed).await;
        }
        for e in self.hs.readdir(RETIRED).await.map_err(hs_err)? {
            if self.servers.contains_key(&e.name) {
                // Recovery removes a server's entry before it retires it; a live entry of the
                // same name would be a bug, and its files are not touched.
                tracing::error!(server = e.name, "retired and still known: its root is left");
                continue;
            }
            let (removed, left) = self.collect_retired_root(&e.name, &in_use).await?;
            round.removed_stores += removed;
            self.count_by(GC_REMOVED_STORES, removed).await;
            if !left {
                round.removed_roots += 1;
                self.count_by(GC_REMOVED_ROOTS, 1).await;
            }
        }
        self.count_by(GC_ROUNDS, 1).await;
        if round.removed_stores > 0 || round.removed_roots > 0 {
            tracing::info!(
                stores = round.removed_stores,
                roots = round.removed_roots,
                "garbage collection of shared stores"
            );
        }
        Ok(round)
    }

    /// Removes what is garbage under the root of the retired server `location`: its commit log,
    /// every cell store no live server uses, and the whole root (and its `/ht/retired` file)
    /// once nothing under it is used. Returns the stores removed and whether the root is left.
    async fn collect_retired_root(
        &self,
        location: &str,
        in_use: &BTreeSet<String>,
    ) -> Result<(u64, bool)> {
        let root = server_root(location);
        let fs = self.fs.clone();
        if !fs
            .exists(&root)
            .await
            .map_err(fs_err(format!("looking at {root}")))?
        {
            self.delete_if_exists(&retired_node(location)).await?;
            return Ok((0, false));
        }
        // Recovery replayed the log into the live servers' own stores.
        let log = format!("{root}/log");
        if fs
            .exists(&log)
            .await
            .map_err(fs_err(format!("looking at {log}")))?
        {
            fs.rmdir(&log, true)
                .await
                .map_err(fs_err(format!("removing {log}")))?;
        }
        let tables = format!("{root}/tables");
        let (removed, used) = if fs
            .exists(&tables)
            .await
            .map_err(fs_err(format!("looking at {tables}")))?
        {
            self.collect_dir(&tables, in_use).await?
        } else {
            (0, 0)
        };
        if removed > 0 {
            tracing::info!(
                server = location,
                removed,
                still_used = used,
                "cell stores of a retired server no live server uses removed"
            );
        }
        if used > 0 {
            return Ok((removed, true));
        }
        fs.rmdir(&root, true)
            .await
            .map_err(fs_err(format!("removing {root}")))?;
        self.delete_if_exists(&retired_node(location)).await?;
        tracing::info!(server = location, root, "root of a retired server removed");
        Ok((removed, false))
    }

    /// Removes the files under `dir` (recursively) that are not in `in_use`, and directories
    /// left empty below `dir`. Returns (files removed, files kept).
    async fn collect_dir(&self, dir: &str, in_use: &BTreeSet<String>) -> Result<(u64, u64)> {
        let fs = self.fs.clone();
        let (mut removed, mut kept) = (0, 0);
        // Depth first, without recursion: (directory, whether its entries were pushed).
        let mut stack: Vec<(String, bool)> = vec![(dir.to_string(), false)];
        let mut kept_under: BTreeMap<String, u64> = BTreeMap::new();
        while let Some((d, expanded)) = stack.pop() {
            if expanded {
                let n = kept_under.remove(&d).unwrap_or(0);
                if n == 0 && d != dir {
                    fs.rmdir(&d, false)
                        .await
                        .map_err(fs_err(format!("removing {d}")))?;
                } else if let Some(parent) = d.rsplit_once('/').map(|(p, _)| p.to_string()) {
                    *kept_under.entry(parent).or_default() += n;
                }
                continue;
            }
            stack.push((d.clone(), true));
            for e in fs
                .readdir(&d)
                .await
                .map_err(fs_err(format!("listing {d}")))?
            {
                let p = dfs_broker::join(&d, &e.name);
                if e.is_dir {
                    stack.push((p, false));
                } else if in_use.contains(&p) {
                    kept += 1;
                    *kept_under.entry(d.clone()).or_default() += 1;
                } else {
                    match fs.remove(&p).await {
                        Ok(()) => removed += 1,
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(fs_err(format!("removing {p}"))(e)),
                    }
                }
            }
        }
        Ok((removed, kept))
    }
}
