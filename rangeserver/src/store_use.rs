//! What the master's garbage collection of shared cell stores asks of an engine
//! (docs/formats/cluster.md, "Garbage collection of shared stores").
//!
//! In a cluster a cell store can outlive every range that references it where no engine may
//! delete it: a store this engine exported with an unloaded range (the meta log's
//! `ExportStores`), once the range was compacted elsewhere, and every store under the root of a
//! dead server whose ranges were recovered. The master, which runs moves and recoveries one at
//! a time, asks every live engine which stores it uses ([`Engine::store_use`]); a store no
//! engine uses is garbage. It removes those under dead servers' roots itself and asks the
//! exporter to remove its own ([`Engine::release_exported`]), so that an engine still deletes
//! nothing outside its root.

use std::collections::BTreeSet;

use crate::engine::Engine;
use crate::error::Result;
use crate::meta::MetaOp;

/// The cell stores an engine uses and the ones it exported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreUse {
    /// The engine's root on the shared file system.
    pub root: String,
    /// Stores it must keep: referenced by a range it holds or is unloading, by a damaged range
    /// it keeps, or still open (a scan or compaction reads a replaced store).
    pub in_use: BTreeSet<String>,
    /// Stores under its root it handed to other engines and never deletes on its own.
    pub exported: BTreeSet<String>,
}

/// What [`Engine::release_exported`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Exported stores removed (or found already gone) and forgotten.
    pub removed: u64,
    /// Paths passed over: not exported here (any more), or in use here.
    pub skipped: u64,
}

impl Engine {
    /// The stores this engine uses and the ones it exported, for the master's garbage
    /// collection. Taken in this order: the stores held open, then the ranges' references; a
    /// compaction that swaps a store out meanwhile still holds it open until it is retired, so
    /// a store in use is in one list or the other.
    pub fn store_use(&self) -> Result<StoreUse> {
        self.check_open()?;
        let inner = &self.inner;
        let mut in_use: BTreeSet<String> = inner.files().held_stores().into_iter().collect();
        in_use.extend(inner.referenced_stores());
        for d in inner.catalog().damaged() {
            for g in &d.rec.groups {
                in_use.extend(g.stores.iter().cloned());
            }
        }
        let exported = inner
            .files()
            .meta_state(|s| s.exported.keys().cloned().collect());
        Ok(StoreUse {
            root: inner.files().root().to_string(),
            in_use,
            exported,
        })
    }

    /// Removes exported stores the master found unused on every server, then forgets them in
    /// one meta-log record. A path that is not exported here, or that this engine uses (a
    /// range moved back in since), is passed over. A store already gone counts as removed: a
    /// crash between the removal and the record leaves only names to forget again.
    pub fn release_exported(&self, paths: &[String]) -> Result<Released> {
        self.check_open()?;
        let inner = &self.inner;
        let used = self.store_use()?;
        let mut done = Vec::new();
        let mut skipped = 0;
        for p in paths {
            if !used.exported.contains(p) || used.in_use.contains(p) || !inner.is_own(p) {
                skipped += 1;
                continue;
            }
            match inner.fs().remove(p) {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    // What was removed so far is still forgotten below.
                    if !done.is_empty() {
                        inner
                            .files()
                            .write_meta(vec![MetaOp::ReleaseExports(done)])?;
                    }
                    return Err(e.into());
                }
            }
            tracing::debug!(file = p, "removed an exported cell store no server uses");
            done.push(p.clone());
        }
        let removed = done.len() as u64;
        if !done.is_empty() {
            inner
                .files()
                .write_meta(vec![MetaOp::ReleaseExports(done)])?;
        }
        Ok(Released { removed, skipped })
    }
}
