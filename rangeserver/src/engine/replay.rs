//! Replay at open: the commit log into the cell caches, then orphaned files removed.

use std::collections::HashMap;
use std::sync::Arc;

use common::key::{CellFlag, KeyRef};
use dfs_broker::{BlockingFs, join};

use super::catalog::range_key;
use super::damage::damage;
use super::{Damaged, Engine, Inner, RangeMap, TableInfo};
use crate::cellstore::CellStore;
use crate::commitlog::entry::{EntryLayout, decode_log_entry};
use crate::error::{Error, Result};
use crate::meta::MetaState;

impl Engine {
    /// Replays this engine's commit log into the caches of the ranges held.
    pub(super) fn replay(&self) -> Result<()> {
        let inner = &self.inner;
        let ranges = inner.catalog().ranges();
        let tables = inner.catalog().tables();
        let mut replayed = 0u64;
        let mut max_rev = i64::MIN;
        let dir = join(inner.files().root(), "log");
        let stats = inner.files().log().replay_existing(|entry, layout| {
            let (cells, grew) = replay_entry(
                entry,
                layout,
                &dir,
                |t| tables.get(&t).map(|t| &**t),
                &ranges,
                &mut max_rev,
            )?;
            inner.add_cache_bytes(grew);
            replayed += cells;
            Ok(())
        })?;
        if max_rev > i64::MIN {
            inner.observe_revision(max_rev);
        }
        inner.counters().set_replayed(replayed);

        tracing::info!(
            cells = replayed,
            entries = stats.entries,
            "commit log replayed"
        );
        Ok(())
    }

    /// Deletes cell-store files that no range references (left by a crash mid-compaction) and
    /// the directories of dropped tables.
    pub(super) fn remove_orphans(
        &self,
        referenced: &HashMap<String, Arc<CellStore>>,
    ) -> Result<()> {
        let fs = self.inner.fs();
        let tdir = self.inner.files().tables_dir();
        if !fs.exists(&tdir)? {
            return Ok(());
        }
        let tables = self.inner.catalog().tables();
        // Files handed to other engines with unloaded ranges stay until the table is dropped.
        let exported = self.inner.files().meta_state(|s| s.exported.clone());
        let damaged: Vec<Damaged> = self.inner.catalog().damaged();
        for t in fs.readdir(&tdir)? {
            let tpath = join(&tdir, &t.name);
            let known = t
                .name
                .parse::<u32>()
                .ok()
                .is_some_and(|id| tables.contains_key(&id));
            if !known {
                fs.rmdir(&tpath, true)?;
                continue;
            }
            for g in fs.readdir(&tpath)?.into_iter().filter(|e| e.is_dir) {
                let gpath = join(&tpath, &g.name);
                for r in fs.readdir(&gpath)?.into_iter().filter(|e| e.is_dir) {
                    let rpath = join(&gpath, &r.name);
                    let mut left = 0;
                    for f in fs.readdir(&rpath)? {
                        let p = join(&rpath, &f.name);
                        if f.is_dir
                            || referenced.contains_key(&p)
                            || exported.contains_key(&p)
                            || damaged.iter().any(|d| d.holds(&p))
                        {
                            left += 1;
                        } else {
                            tracing::info!(file = p, "removing orphaned cell store");
                            fs.remove(&p)?;
                        }
                    }
                    if left == 0 {
                        fs.rmdir(&rpath, false)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// True if `root` holds cell-store directories or commit-log files.
pub(super) fn root_holds_data(fs: &BlockingFs, root: &str) -> Result<bool> {
    for dir in ["tables", "log"] {
        match fs.readdir(&join(root, dir)) {
            Ok(entries) if !entries.is_empty() => return Ok(true),
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// Puts the cells of one replayed commit-log entry into the active caches of the ranges in
/// `ranges` that hold them: a cell goes to its family's group if its revision is above that
/// group's flushed revision, a row delete to every group; cells of unknown tables (`table_of`
/// gives `None`) and of rows no range holds are passed over. `max_rev` rises to the highest
/// revision seen. Returns the cells inserted and the bytes the caches grew by. Shared by replay
/// at open and by the recovery of a dead server's ranges (`log_dir` names the log in errors).
pub(crate) fn replay_entry<'t>(
    entry: &[u8],
    layout: EntryLayout,
    log_dir: &str,
    table_of: impl Fn(u32) -> Option<&'t TableInfo>,
    ranges: &RangeMap,
    max_rev: &mut i64,
) -> Result<(u64, u64)> {
    let decoded = decode_log_entry(entry, layout).ok_or_else(|| Error::Corrupt {
        file: log_dir.to_string(),
        offset: 0,
        msg: "commit log entry does not parse".into(),
    })?;
    let table = decoded.table;
    let Some(t) = table_of(table) else {
        return Ok((0, 0));
    };
    let mut inserted = 0u64;
    let mut grew = 0u64;
    for (k, v) in decoded.cells() {
        let kr = KeyRef::new(k)?;
        let rev = kr.revision();
        *max_rev = (*max_rev).max(rev);
        let row = kr.row();
        let Some(range) = Inner::find_range(ranges, table, &row) else {
            continue;
        };
        let targets: Vec<usize> = if kr.flag() == CellFlag::DeleteRow {
            (0..range.groups.len()).collect()
        } else {
            t.group_of[kr.family() as usize]
                .map(|g| g as usize)
                .into_iter()
                .collect()
        };
        for gi in targets {
            let st = range.groups[gi].state();
            if rev <= st.flushed_revision {
                continue;
            }
            grew += st.active.insert_batch([(k, v, rev)]);
            inserted += 1;
        }
    }
    Ok((inserted, grew))
}

/// Fills the catalog from the meta log's state at open: every table, and every range whose
/// cell stores open (a range with a damaged or missing store is listed as damaged instead).
/// Returns the stores opened, by path.
pub(super) fn load_catalog(
    inner: &Inner,
    state: &MetaState,
) -> Result<HashMap<String, Arc<CellStore>>> {
    let mut open_stores = HashMap::new();
    let mut tables = inner.catalog().tables_mut();
    for s in state.tables.values() {
        tables.insert(
            s.id,
            Arc::new(TableInfo::new(s.clone(), &inner.opts().registry)),
        );
    }
    for rec in state.ranges.values() {
        let Some(t) = tables.get(&rec.table_id) else {
            continue;
        };
        let key = range_key(rec.table_id, rec.end_row.as_deref());
        let r = match inner.build_range(rec, t, &mut open_stores) {
            Ok(r) => r,
            Err(e) => {
                let Some((file, offset, why)) = damage(&e) else {
                    return Err(e);
                };
                tracing::error!(table = rec.table_id, range = rec.id, error = %e, "range not served: a cell store is damaged or missing");
                for g in &rec.groups {
                    inner.observe_revision(g.flushed_revision);
                }
                let d = Damaged {
                    rec: rec.clone(),
                    file,
                    offset,
                    why,
                };
                inner.catalog().insert_damaged(key, d);
                continue;
            }
        };
        // Revisions must stay above every revision a group counts as flushed, or replay
        // would skip new cells: the clock alone may have stepped back, and a major
        // compaction may have dropped every cell that carried the highest revision.
        for g in &r.groups {
            let st = g.state();
            inner.observe_revision(st.flushed_revision);
            for s in &st.stores {
                inner.observe_revision(s.trailer().max_revision);
            }
        }
        tables.insert_ranges([(key, Arc::new(r))]);
    }
    Ok(open_stores)
}
