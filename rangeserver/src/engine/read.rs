//! The read path: a scan checks that held ranges cover its rows, then walks them range after
//! range (`TableCursor`) under the spec's filter (`TableScanner`).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::TimeOrder;
use common::iterators::{IterScope, IteratorSpec, ScanIterator, ValuePredicates};
use common::key::{self, KeyRef};

use super::{Engine, Inner, RangeEnd, ScanCell, TableInfo};
use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::iterators::rows::{PredicateTests, ValuePredicateRows};
use crate::iterators::stack::{scan_stack, table_stack};
use crate::iterators::{Budget, Families, IterEnv, KvIter, Registry, SeekRange};
use crate::merge::MergeIter;
use crate::range::{GroupState, Range, source_of};
use crate::scan::candidates::CandidateRows;
use crate::scan::spec::{QualifierMatch, RowInterval, ScanSpec};
use crate::scan::visible::{FamilyRule, Mode, VisibleCells, VisibleOptions};
use crate::scan::{ScanSource, SpecFilter};

impl Engine {
    /// Starts a scan of one table. The scanner reads a snapshot of the table's ranges and their
    /// cell stores and the live cell caches; it holds no locks between calls.
    pub fn scan(&self, table_id: u32, spec: &ScanSpec) -> Result<TableScanner> {
        self.scan_at(table_id, spec, None)
    }

    /// The revision a scan started now reads at ([`Engine::scan_at`]).
    pub fn pin_snapshot(&self) -> i64 {
        self.inner.snapshot_revision()
    }

    /// [`Engine::scan`] reading at `snapshot` (from [`Engine::pin_snapshot`]; `None`: pinned
    /// now), so that the pieces of one scan ([`Engine::scan_pieces`]) read one snapshot.
    pub fn scan_at(
        &self,
        table_id: u32,
        spec: &ScanSpec,
        snapshot: Option<i64>,
    ) -> Result<TableScanner> {
        self.check_open()?;
        let inner = &self.inner;
        let table = inner.table(table_id)?;
        table.check_kinds()?;
        let registry = inner.opts().registry.clone();
        registry.check_scan(&spec.iterators, &table.schema)?;
        // Pinned before anything is read: a batch is seen whole or not at all.
        let snapshot_rev = snapshot.unwrap_or_else(|| inner.snapshot_revision());
        let now = inner.opts().clock.now_ns();
        let rules = if spec.columns.is_empty() && spec.max_versions == 0 {
            table.default_rules.clone()
        } else {
            Arc::new(family_rules(&table, spec))
        };
        let groups: Vec<usize> = (0..table.schema.access_groups.len())
            .filter(|&gi| {
                table.schema.families.iter().any(|f| {
                    rules[f.id as usize].selected && table.group_of[f.id as usize] == Some(gi as u8)
                })
            })
            .collect();
        let vopts = VisibleOptions {
            families: rules,
            time_start: spec.time_start,
            time_end: spec.time_end,
            now_ns: now,
            return_deletes: spec.return_deletes,
            mode: Mode::Scan,
            snapshot_rev,
        };
        // A scan of one row skips cell stores whose bloom filter rules the row out.
        let only_row = match (
            spec.row_intervals.as_slice(),
            spec.cell_intervals.is_empty(),
        ) {
            (
                [
                    RowInterval {
                        start: Bound::Included(a),
                        end: Bound::Included(b),
                    },
                ],
                true,
            ) if a == b => Some(a.clone()),
            _ => None,
        };
        // One snapshot of the range map both for the coverage check and the scan, so a split
        // in between cannot make them disagree.
        let ranges: Vec<Arc<Range>> = {
            let map = inner.catalog().ranges();
            // A scan must not silently return part of its rows: every row it may touch must lie
            // in a range held here, or the caller learns which row is elsewhere.
            super::coverage::check_all_covered(&map, table_id, spec).map_err(|e| match e {
                Error::NotHere { table_id, row } => inner
                    .damage_at(table_id, &row)
                    .unwrap_or(Error::NotHere { table_id, row }),
                e => e,
            })?;
            match &only_row {
                Some(row) => Inner::find_range(&map, table_id, row).into_iter().collect(),
                None => map
                    .range((table_id, RangeEnd::Row(Vec::new()))..=(table_id, RangeEnd::Max))
                    .map(|(_, r)| r.clone())
                    .collect(),
            }
        };
        let work_per_block = inner.opts().scan_work_per_block.max(1);
        let budget = Budget::new(work_per_block);
        let plan = StackPlan {
            env: IterEnv {
                scope: IterScope::Scan,
                now_ns: now,
                schema: table.shared_schema.clone(),
                budget: budget.clone(),
                combined: table.combined_families(),
            },
            table: table.clone(),
            iterators: spec.iterators.clone(),
            value_tests: spec.value_predicates.as_ref().map(PredicateTests::new),
            value_predicates: spec.value_predicates.clone(),
            registry,
        };
        let candidates = plan.candidate_group(&groups, &vopts);
        if spec.row_intervals.len() > 1 {
            super::prefetch::key_set(
                &ranges,
                &groups,
                &spec.row_intervals,
                inner.opts().key_set_prefetch_bytes,
            );
        }
        let range_ends = ranges
            .iter()
            .map(|r| r.end_row.as_deref().map(key::row_start))
            .collect();
        let cursor = TableCursor {
            ranges,
            range_ends,
            only_row,
            groups,
            vopts,
            fill_cache: !spec.no_cache,
            plan,
            candidates,
            current: None,
            current_idx: 0,
            end: None,
            clip: SeekRange::all(),
            stepped: 0,
        };
        let mut sc = TableScanner {
            filter: SpecFilter::new(cursor, spec)?,
            keys_only: spec.keys_only,
            budget,
            work_per_block,
            pause_on_yield: false,
        };
        sc.settle()?;
        Ok(sc)
    }

    /// Scans in a blocking task and streams blocks of at most `block_cells` cells through a
    /// channel of `queue_blocks` blocks (the bound on memory a slow reader can cause).
    pub fn scan_stream(
        &self,
        table_id: u32,
        spec: ScanSpec,
        block_cells: usize,
        queue_blocks: usize,
    ) -> tokio::sync::mpsc::Receiver<Result<Vec<ScanCell>>> {
        let block_cells = block_cells.max(1);
        self.scan_stream_with(table_id, spec, queue_blocks, move |sc| {
            let mut block = Vec::with_capacity(block_cells);
            while block.len() < block_cells {
                match sc.next_cell()? {
                    Some(c) => block.push(c),
                    None => break,
                }
            }
            Ok((!block.is_empty()).then_some(block))
        })
    }

    /// Scans in a blocking task; `fill` makes each block from the scanner (`Ok(None)`: the
    /// scan is over), and the blocks go through a channel of `queue_blocks` blocks (the bound on
    /// memory a slow reader can cause). A dropped receiver stops the scan at its next block.
    pub fn scan_stream_with<B: Send + 'static>(
        &self,
        table_id: u32,
        spec: ScanSpec,
        queue_blocks: usize,
        fill: impl FnMut(&mut TableScanner) -> Result<Option<B>> + Send + 'static,
    ) -> tokio::sync::mpsc::Receiver<Result<B>> {
        self.scan_stream_at(table_id, spec, None, queue_blocks, fill)
    }

    /// [`Engine::scan_stream_with`] reading at `snapshot` ([`Engine::scan_at`]).
    pub fn scan_stream_at<B: Send + 'static>(
        &self,
        table_id: u32,
        spec: ScanSpec,
        snapshot: Option<i64>,
        queue_blocks: usize,
        fill: impl FnMut(&mut TableScanner) -> Result<Option<B>> + Send + 'static,
    ) -> tokio::sync::mpsc::Receiver<Result<B>> {
        let (tx, rx) = tokio::sync::mpsc::channel(queue_blocks.max(1));
        let e = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut sc = match e.scan_at(table_id, &spec, snapshot) {
                Ok(s) => s,
                Err(err) => {
                    let _ = tx.blocking_send(Err(err));
                    return;
                }
            };
            sc.pause_on_yield(true);
            drive_scan(sc, fill, tx);
        });
        rx
    }
}

/// Runs a scan's blocks into `tx` until the scan ends, the receiver goes away or the scan's
/// iterators spend a block's work budget without a cell: then the thread goes back to the pool
/// and the rest of the scan continues in a new blocking task, behind others waiting for one.
fn drive_scan<B: Send + 'static>(
    mut sc: TableScanner,
    mut fill: impl FnMut(&mut TableScanner) -> Result<Option<B>> + Send + 'static,
    tx: tokio::sync::mpsc::Sender<Result<B>>,
) {
    loop {
        sc.refill();
        match fill(&mut sc) {
            Ok(Some(block)) => {
                if tx.blocking_send(Ok(block)).is_err() {
                    return;
                }
            }
            Ok(None) if !sc.yielded() => return,
            Ok(None) => {}
            Err(err) => {
                let _ = tx.blocking_send(Err(err));
                return;
            }
        }
        if sc.yielded() {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                h.spawn_blocking(move || match sc.resume() {
                    Ok(()) => drive_scan(sc, fill, tx),
                    Err(err) => {
                        let _ = tx.blocking_send(Err(err));
                    }
                });
                return;
            }
            if let Err(err) = sc.resume() {
                let _ = tx.blocking_send(Err(err));
                return;
            }
        }
    }
}

/// The per-family rules of a scan from the schema and the requested columns.
pub(crate) fn family_rules(table: &TableInfo, spec: &ScanSpec) -> Vec<FamilyRule> {
    let schema = &table.schema;
    let mut rules = vec![FamilyRule::unselected(); 256];
    for f in schema.families.iter().filter(|f| !f.deleted) {
        let selectors: Vec<&QualifierMatch> = spec
            .columns
            .iter()
            .filter(|c| c.family == f.id)
            .map(|c| &c.qualifier)
            .collect();
        if !spec.columns.is_empty() && selectors.is_empty() {
            continue;
        }
        let qualifiers = if selectors.iter().any(|q| matches!(q, QualifierMatch::All)) {
            Vec::new()
        } else {
            selectors.into_iter().cloned().collect()
        };
        let max_versions = match (f.max_versions, spec.max_versions) {
            (0, s) => s,
            (m, 0) => m,
            (m, s) => m.min(s),
        };
        rules[f.id as usize] = FamilyRule {
            selected: true,
            qualifiers,
            max_versions,
            ttl_ns: (f.ttl_secs as i64).saturating_mul(1_000_000_000),
            combiner: table.combiners[f.id as usize].clone(),
            time_desc: f.time_order == TimeOrder::Desc,
        };
    }
    rules
}

/// One range's data as a scan found it: the groups' states (cell caches and stores) taken
/// when the range was opened, so deep copies read exactly what the first cursor reads.
struct RangeSnapshot {
    /// The range, for its counters.
    range: Arc<Range>,
    groups: Vec<GroupSnap>,
    bounds: (Option<Vec<u8>>, Option<Vec<u8>>),
    vopts: VisibleOptions,
    fill_cache: bool,
    /// The group (an index into `groups`) whose raw cells are judged by the scan's value
    /// predicates before its visibility rules (see `scan::candidates`).
    candidates: Option<(usize, PredicateTests)>,
}

struct GroupSnap {
    state: GroupState,
    /// The families stored in this group.
    families: Families,
}

impl RangeSnapshot {
    fn take(
        r: &Arc<Range>,
        groups: &[usize],
        table: &TableInfo,
        vopts: &VisibleOptions,
        fill_cache: bool,
        only_row: Option<&[u8]>,
        candidates: Option<(usize, PredicateTests)>,
    ) -> Self {
        // The bloom filters hold escaped rows: escaped once, probed per store.
        let row_start = only_row.map(key::row_start);
        let groups = groups
            .iter()
            .map(|&gi| {
                let mut state = (*r.groups[gi].state()).clone();
                if let Some(row) = &row_start {
                    state.stores.retain(|s| s.may_contain_row_prefix(row));
                }
                let families = table.group_families[gi];
                GroupSnap { state, families }
            })
            .collect();
        Self {
            range: r.clone(),
            groups,
            bounds: r.key_bounds(),
            vopts: vopts.clone(),
            fill_cache,
            candidates,
        }
    }
}

/// The visible cells of one range (all its selected access groups merged): the bottom of every
/// scan stack.
struct RangeSource {
    snap: Arc<RangeSnapshot>,
    merge: MergeIter<VisibleCells<Box<dyn CellIter>>>,
    end: Option<Vec<u8>>,
    /// The merge stands on a cell before `end` (kept up to date by every move).
    valid: bool,
    /// Seeks not yet added to the range's counters ([`SEEK_COUNT_BATCH`]).
    seeks: u64,
}

/// Seeks a source counts before adding them to its range's shared counters (and when it is
/// dropped): two atomic adds per seek, on counters every scan thread shares, were half of
/// `RangeSource::seek`'s own time with two scan threads (a warm 1% key set of the skipscan
/// bench took 39-42 ms with them, 32-34 ms without).
const SEEK_COUNT_BATCH: u64 = 1024;

/// Adds one seek to `pending`, handing the batch to `range` when it is full.
#[inline]
fn count_seek(range: &Range, pending: &mut u64) {
    *pending += 1;
    if *pending >= SEEK_COUNT_BATCH {
        range.count_seeks(std::mem::take(pending));
    }
}

impl Drop for RangeSource {
    fn drop(&mut self) {
        self.snap.range.count_seeks(self.seeks);
    }
}

impl RangeSource {
    fn update(&mut self) {
        self.valid = self.merge.valid()
            && self
                .end
                .as_deref()
                .is_none_or(|e| key::bytes_cmp(self.merge.key(), e).is_lt());
    }
}

impl RangeSource {
    fn open(snap: Arc<RangeSnapshot>) -> Self {
        let children = snap
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let mut src = source_of(&g.state, snap.bounds.clone(), snap.fill_cache);
                if let Some((_, tests)) = snap.candidates.as_ref().filter(|(c, _)| *c == i) {
                    src = Box::new(CandidateRows::new(src, tests.clone()));
                }
                VisibleCells::new(src, snap.vopts.clone())
            })
            .collect();
        Self {
            snap,
            merge: MergeIter::new(children),
            end: None,
            valid: false,
            seeks: 0,
        }
    }
}

impl KvIter for RangeSource {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.end.clone_from(&range.end);
        let snap = &self.snap;
        count_seek(&snap.range, &mut self.seeks);
        self.merge.seek_with(|i, c| {
            // Row deletes live in every group, so a group is read only for the families asked.
            if families.is_all() || snap.groups[i].families.intersects(families) {
                c.set_mask(*families);
                c.seek_until(&range.start, range.end.as_deref())
            } else {
                c.park();
                Ok(())
            }
        })?;
        self.update();
        Ok(())
    }
    fn valid(&self) -> bool {
        self.valid
    }
    fn key(&self) -> &[u8] {
        self.merge.key()
    }
    fn value(&self) -> &[u8] {
        self.merge.value()
    }
    fn next(&mut self) -> Result<()> {
        self.merge.next()?;
        self.update();
        Ok(())
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(RangeSource::open(self.snap.clone())))
    }
    fn raw_copy(&self, families: &Families) -> Result<Option<Box<dyn KvIter>>> {
        Ok(RawCells::open(&self.snap, families).map(|r| Box::new(r) as Box<dyn KvIter>))
    }
}

/// The stored cells of some families of one range, every version, without the visibility
/// rules ([`KvIter::raw_copy`]): only cells at or below the scan's revision and inside its
/// time window. Offered only where that shows what [`RangeSource`] shows for them (see
/// [`RawCells::open`]).
struct RawCells {
    snap: Arc<RangeSnapshot>,
    /// The group read (an index into the snapshot's groups).
    group: usize,
    src: Box<dyn CellIter>,
    /// The families it may return, and those the current seek asked for (a subset).
    families: Families,
    mask: Families,
    end: Option<Vec<u8>>,
    valid: bool,
    /// The encoded row prefix (terminator included) of the last key read: a key that starts
    /// with it has its family byte right after it, without parsing the key.
    row: Vec<u8>,
    /// Seeks not yet added to the range's counters ([`SEEK_COUNT_BATCH`]).
    seeks: u64,
}

impl Drop for RawCells {
    fn drop(&mut self) {
        self.snap.range.count_seeks(self.seeks);
    }
}

impl RawCells {
    /// `None` unless every family asked for is selected with no TTL, combiner or qualifier
    /// selection, all of them live in one group read by the scan, the scan returns no deletes
    /// and is no compaction, no value predicate judges the group's raw cells, and none of the
    /// group's sources holds a delete of any kind. Then a cell exists for the scan as soon as
    /// one of its versions lies in the time window at or below the scan's revision, which is
    /// what this cursor returns.
    ///
    /// A delete written while the scan runs is not seen; it would carry a revision above the
    /// scan's, which the visible cells do not see either.
    fn open(snap: &Arc<RangeSnapshot>, families: &Families) -> Option<Self> {
        let o = &snap.vopts;
        if o.return_deletes || o.mode != Mode::Scan || snap.candidates.is_some() {
            return None;
        }
        let ids: Vec<u8> = (1..=255u8).filter(|&f| families.contains(f)).collect();
        if ids.is_empty() || families.is_all() {
            return None;
        }
        let simple = |f: u8| {
            let r = &o.families[f as usize];
            r.selected && r.ttl_ns == 0 && r.combiner.is_none() && r.qualifiers.is_empty()
        };
        if !ids.iter().all(|&f| simple(f)) {
            return None;
        }
        let group = snap
            .groups
            .iter()
            .position(|g| g.families.contains(ids[0]))?;
        if !ids.iter().all(|&f| snap.groups[group].families.contains(f)) {
            return None;
        }
        let raw = Self::over(snap, group, *families);
        (!raw.src.may_hold_deletes()).then_some(raw)
    }

    fn over(snap: &Arc<RangeSnapshot>, group: usize, families: Families) -> Self {
        Self {
            snap: snap.clone(),
            group,
            src: source_of(
                &snap.groups[group].state,
                snap.bounds.clone(),
                snap.fill_cache,
            ),
            families,
            mask: families,
            end: None,
            valid: false,
            row: Vec::new(),
            seeks: 0,
        }
    }

    /// Steps to the first cell at or after the current one that the scan may see.
    fn settle(&mut self) -> Result<()> {
        let o = &self.snap.vopts;
        loop {
            if !self.src.valid() {
                self.valid = false;
                return Ok(());
            }
            let k = self.src.key();
            if self
                .end
                .as_deref()
                .is_some_and(|e| key::bytes_cmp(k, e).is_ge())
            {
                self.valid = false;
                return Ok(());
            }
            let n = self.row.len();
            let family = if n > 0
                && k.len() > n + key::KEY_SUFFIX_LEN
                && key::bytes_eq(&k[..n], &self.row)
            {
                k[n]
            } else {
                let parsed = KeyRef::from_trusted(k)?;
                self.row.clear();
                self.row.extend_from_slice(parsed.row_prefix());
                parsed.family()
            };
            let ts = key::timestamp_of(k);
            if self.mask.contains(family)
                && key::revision_of(k) <= o.snapshot_rev
                && ts >= o.time_start
                && ts < o.time_end
            {
                self.valid = true;
                return Ok(());
            }
            self.src.next()?;
        }
    }
}

impl KvIter for RawCells {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        count_seek(&self.snap.range, &mut self.seeks);
        self.end.clone_from(&range.end);
        // Family 0 (row deletes) is never returned as a cell.
        self.mask = families.intersection(&self.families);
        self.mask.remove(0);
        self.src.seek_until(&range.start, range.end.as_deref())?;
        self.settle()
    }
    fn valid(&self) -> bool {
        self.valid
    }
    fn key(&self) -> &[u8] {
        self.src.key()
    }
    fn value(&self) -> &[u8] {
        self.src.value()
    }
    fn next(&mut self) -> Result<()> {
        self.src.next()?;
        self.settle()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(RawCells::over(
            &self.snap,
            self.group,
            self.families,
        )))
    }
}

/// What every range's stack is built from.
struct StackPlan {
    table: Arc<TableInfo>,
    iterators: Vec<ScanIterator>,
    value_predicates: Option<ValuePredicates>,
    /// `value_predicates`' tests, resolved once for every range of the scan.
    value_tests: Option<PredicateTests>,
    registry: Arc<Registry>,
    env: IterEnv,
}

impl StackPlan {
    /// The group (an index into `groups`, the groups read) under whose visibility rules the
    /// value predicates can judge raw cells (`scan::candidates`): the one group holding every
    /// tested family, when none of them has a combiner (its raw values are not what the scan
    /// shows) and no table or scan iterator stands between the visible cells and the predicate
    /// filter (it could change them).
    fn candidate_group(
        &self,
        groups: &[usize],
        vopts: &VisibleOptions,
    ) -> Option<(usize, PredicateTests)> {
        let (preds, tests) = (self.value_predicates.as_ref()?, self.value_tests.as_ref()?);
        let in_scans = |i: &IteratorSpec| i.scopes.contains(&IterScope::Scan);
        if preds.tests.is_empty()
            || !self.iterators.is_empty()
            || self.table.schema.iterators.iter().any(in_scans)
        {
            return None;
        }
        let mut group = None;
        for f in tests.families() {
            if vopts.families[f as usize].combiner.is_some() {
                return None;
            }
            let g = self.table.group_of[f as usize]?;
            if group.is_some_and(|h| h != g) {
                return None;
            }
            group = Some(g);
        }
        let at = groups.iter().position(|&g| Some(g as u8) == group)?;
        Some((at, tests.clone()))
    }

    /// The scan stack over one range: its visible cells, the table's scan iterators by
    /// priority, the scan's own iterators, then the value predicates.
    fn build(&self, base: Box<dyn KvIter>) -> Result<Box<dyn KvIter>> {
        let mut it = table_stack(
            base,
            &self.table.schema.iterators,
            &self.registry,
            &self.env,
        )?;
        it = scan_stack(it, &self.iterators, &self.registry, &self.env)?;
        if let (Some(p), Some(t)) = (&self.value_predicates, &self.value_tests) {
            it = ValuePredicateRows::build(it, p.clone(), t.clone(), self.env.budget.clone());
        }
        Ok(it)
    }
}

/// A cursor over the visible cells of a table, range after range, each range through its own
/// iterator stack.
struct TableCursor {
    ranges: Vec<Arc<Range>>,
    /// Per range, the first key past its rows (`None`: the table's last range).
    range_ends: Vec<Option<Vec<u8>>>,
    only_row: Option<Vec<u8>>,
    groups: Vec<usize>,
    vopts: VisibleOptions,
    fill_cache: bool,
    plan: StackPlan,
    /// See [`RangeSnapshot::candidates`].
    candidates: Option<(usize, PredicateTests)>,
    current: Option<Box<dyn KvIter>>,
    current_idx: usize,
    /// The end of the current seek (over all ranges).
    end: Option<Vec<u8>>,
    /// The current seek clipped to the current range ([`TableCursor::clip`]).
    clip: SeekRange,
    /// Cells stepped over in the current range, not yet added to its `cells_read`.
    stepped: u64,
}

impl TableCursor {
    /// Adds the cells stepped over to the current range's read counter.
    fn count_reads(&mut self) {
        if self.stepped > 0 {
            if let Some(r) = self.ranges.get(self.current_idx) {
                r.cells_read.fetch_add(self.stepped, Ordering::Relaxed);
            }
            self.stepped = 0;
        }
    }

    fn open_range(&mut self, idx: usize) -> Result<()> {
        self.count_reads();
        let r = &self.ranges[idx];
        let snap = RangeSnapshot::take(
            r,
            &self.groups,
            &self.plan.table,
            &self.vopts,
            self.fill_cache,
            self.only_row.as_deref(),
            self.candidates.clone(),
        );
        let base = Box::new(RangeSource::open(Arc::new(snap)));
        self.current = Some(self.plan.build(base)?);
        self.current_idx = idx;
        Ok(())
    }

    /// Sets `self.clip` to the seek from `start` to `self.end`, clipped to range `idx`'s
    /// rows (in buffers kept from seek to seek: a key set seeks once per key).
    fn clip(&mut self, idx: usize, start: &[u8]) {
        self.clip.start.clear();
        self.clip.start.extend_from_slice(start);
        let end = match (self.end.as_deref(), self.range_ends[idx].as_deref()) {
            (Some(e), Some(r)) => Some(e.min(r)),
            (e, r) => e.or(r),
        };
        match (&mut self.clip.end, end) {
            (Some(buf), Some(e)) => {
                buf.clear();
                buf.extend_from_slice(e);
            }
            (buf, e) => *buf = e.map(<[u8]>::to_vec),
        }
    }

    /// Moves on to following ranges until one has a cell (or the stack yielded).
    fn settle(&mut self) -> Result<()> {
        while let Some(cur) = &self.current {
            if cur.valid() || cur.yielded().is_some() || self.current_idx + 1 >= self.ranges.len() {
                return Ok(());
            }
            let next = self.current_idx + 1;
            let start = self.ranges[next]
                .start_row
                .as_deref()
                .map(key::row_start)
                .unwrap_or_default();
            if self.end.as_deref().is_some_and(|e| start.as_slice() >= e) {
                return Ok(());
            }
            self.open_range(next)?;
            self.clip(next, &start);
            self.current
                .as_mut()
                .expect("just opened")
                .seek(&self.clip, &Families::all())?;
        }
        Ok(())
    }
}

impl ScanSource for TableCursor {
    fn seek(&mut self, range: &SeekRange) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        let target = &range.start;
        // The range holding the target's row: the first whose end is past it.
        let idx = if self.ranges.len() == 1 {
            0
        } else {
            self.ranges
                .iter()
                .position(|r| match &r.end_row {
                    Some(e) => target.as_slice() < key::row_start(e).as_slice(),
                    None => true,
                })
                .unwrap_or(self.ranges.len() - 1)
        };
        if self.current.is_none() || self.current_idx != idx {
            self.open_range(idx)?;
        }
        self.end.clone_from(&range.end);
        self.clip(idx, &range.start);
        self.current
            .as_mut()
            .expect("opened")
            .seek(&self.clip, &Families::all())?;
        self.settle()
    }

    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
            self.stepped += 1;
        }
        self.settle()
    }

    fn yielded(&self) -> Option<&[u8]> {
        self.current.as_ref().and_then(|c| c.yielded())
    }
}

impl Drop for TableCursor {
    fn drop(&mut self) {
        self.count_reads();
    }
}

/// The cells of a scan, in key order.
pub struct TableScanner {
    filter: SpecFilter<TableCursor>,
    keys_only: bool,
    budget: Budget,
    work_per_block: u64,
    /// Stop (rather than go on at once) when the iterators spent their work budget, so the
    /// caller can give the thread back ([`TableScanner::yielded`]).
    pause_on_yield: bool,
}

impl TableScanner {
    /// Goes on past yields unless the caller wants to see them.
    fn settle(&mut self) -> Result<()> {
        while self.filter.yielded() && !self.pause_on_yield {
            self.budget.refill(self.work_per_block);
            self.filter.resume()?;
        }
        Ok(())
    }

    /// True when the scan stopped to give its thread back (its iterators skipped a block's
    /// worth of cells without returning one); [`TableScanner::resume`] goes on. Only seen by
    /// callers that asked with [`TableScanner::pause_on_yield`]; others never see a yield.
    pub fn yielded(&self) -> bool {
        self.filter.yielded()
    }

    /// Makes the scanner stop at yields (see [`TableScanner::yielded`]).
    pub fn pause_on_yield(&mut self, on: bool) {
        self.pause_on_yield = on;
    }

    /// Refills the work budget and goes on after a yield.
    pub fn resume(&mut self) -> Result<()> {
        self.budget.refill(self.work_per_block);
        self.filter.resume()?;
        self.settle()
    }

    /// Refills the work budget for the next block.
    pub fn refill(&mut self) {
        self.budget.refill(self.work_per_block);
    }

    /// The next cell, decoded.
    pub fn next_cell(&mut self) -> Result<Option<ScanCell>> {
        if !self.filter.valid() {
            return Ok(None);
        }
        let k = KeyRef::from_trusted(self.filter.key())?.to_key();
        let v = if self.keys_only {
            Vec::new()
        } else {
            self.filter.value().to_vec()
        };
        self.filter.advance_cell()?;
        self.settle()?;
        Ok(Some(ScanCell { key: k, value: v }))
    }

    /// The encoded size (key and value bytes) of the cell [`TableScanner::next_ref`] would
    /// give next; `None` at the end of the scan.
    pub fn peek_size(&self) -> Option<usize> {
        if !self.filter.valid() {
            return None;
        }
        let v = if self.keys_only {
            0
        } else {
            self.filter.value().len()
        };
        Some(self.filter.key().len() + v)
    }

    /// Calls `f` with the next cell's key and value, without copying; `Ok(false)` (and no
    /// call) at the end of the scan.
    pub fn next_ref(&mut self, f: impl FnOnce(KeyRef<'_>, &[u8])) -> Result<bool> {
        if !self.filter.valid() {
            return Ok(false);
        }
        let k = KeyRef::from_trusted(self.filter.key())?;
        let v = if self.keys_only {
            &[][..]
        } else {
            self.filter.value()
        };
        f(k, v);
        self.filter.advance_cell()?;
        self.settle()?;
        Ok(true)
    }

    /// Calls `f` with each remaining cell's encoded key and value, without copying.
    pub fn for_each_raw(&mut self, mut f: impl FnMut(&[u8], &[u8])) -> Result<u64> {
        let mut n = 0;
        while self.filter.valid() {
            let v = if self.keys_only {
                &[][..]
            } else {
                self.filter.value()
            };
            f(self.filter.key(), v);
            n += 1;
            self.filter.advance_cell()?;
            self.settle()?;
        }
        Ok(n)
    }

    /// All remaining cells.
    pub fn collect_all(&mut self) -> Result<Vec<ScanCell>> {
        let mut out = Vec::new();
        while let Some(c) = self.next_cell()? {
            out.push(c);
        }
        Ok(out)
    }
}
